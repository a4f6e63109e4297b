//! MinAtar games (Young and Tian, 2019), reproducing the `minatar` Python package
//! step for step, its numpy `RandomState` stream included.

mod asterix;
mod breakout;
mod freeway;
mod seaquest;
mod space_invaders;

pub use asterix::Asterix;
pub use breakout::Breakout;
pub use freeway::Freeway;
pub use seaquest::Seaquest;
pub use space_invaders::SpaceInvaders;

/// Size of the square MinAtar playfield.
pub const GRID: usize = 10;

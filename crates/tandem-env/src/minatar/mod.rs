//! MinAtar games (Young and Tian, 2019): Asterix, Breakout, Freeway, Seaquest and Space
//! Invaders, reproducing the `minatar` Python package (1.0.15) step for step, its numpy
//! `RandomState` stream included; checked against traces in `tests/fixtures`.

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

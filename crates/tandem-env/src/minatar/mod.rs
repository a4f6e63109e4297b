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

use tandem_spec::game::Game;

use crate::env::Env;

/// The probability with which a MinAtar game repeats the previous action instead of the
/// agent's: the `minatar` package's default, always on for the catalogue's MinAtar games
/// (with their minimal action sets).
pub const MINATAR_STICKY_ACTION_PROB: f64 = 0.1;

/// Builds a MinAtar game seeded with `seed`, with [`MINATAR_STICKY_ACTION_PROB`] and its
/// minimal action set; `None` for a game of another family.
pub(crate) fn make(game: &Game, seed: u64) -> Option<Box<dyn Env>> {
    let sticky = MINATAR_STICKY_ACTION_PROB;
    Some(match game {
        Game::MinatarBreakout => Box::new(Breakout::new(seed, sticky, false)),
        Game::MinatarAsterix => Box::new(Asterix::new(seed, sticky, false)),
        Game::MinatarFreeway => Box::new(Freeway::new(seed, sticky, false)),
        Game::MinatarSpaceInvaders => Box::new(SpaceInvaders::new(seed, sticky, false)),
        Game::MinatarSeaquest => Box::new(Seaquest::new(seed, sticky)),
        _ => return None,
    })
}

/// Size of the square MinAtar playfield.
pub const GRID: usize = 10;

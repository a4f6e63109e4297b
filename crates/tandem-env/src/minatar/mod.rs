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

/// The `Env` every MinAtar game with a minimal action set shares, written once: a `GRID` x
/// `GRID` image of the module's `CHANNELS`; its `MINIMAL_ACTIONS`, or all six with
/// `full_action_set`; a seeded reset that replays minatar's construction (a fresh stream and its
/// first game), an unseeded one that starts the next game (`$reset`); a step that maps the
/// action into the full set for `act_full`. The game supplies `new(seed, sticky, full)`,
/// `act_full` and `write_obs`, its snapshot's params and state, and any further `Env` methods.
macro_rules! minatar_env {
    (
        $game:ident, $tag:literal, reset: $reset:ident,
        params: [$($param:ident),* $(,)?], state: [$($field:ident),* $(,)?]
        $(; $($more:tt)*)?
    ) => {
        impl Env for $game {
            crate::snapshot::game_snapshot_methods!($tag, params: [$($param),*], state: [$($field),*]);

            fn observation_space(&self) -> ObsSpace {
                ObsSpace::image(GRID, GRID, CHANNELS, Layout::Chw, Dtype::F32)
            }

            fn action_space(&self) -> ActionSpace {
                ActionSpace::discrete(if self.full_action_set { 6 } else { MINIMAL_ACTIONS.len() })
            }

            fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
                match seed {
                    Some(seed) => {
                        *self = $game::new(seed, self.sticky_action_prob, self.full_action_set)
                    }
                    None => self.$reset(),
                }
                self.write_obs(obs);
            }

            fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
                let (reward, terminal) = self.act_full(self.full_action(action));
                self.write_obs(obs);
                Step::game(reward, terminal, false)
            }

            $($($more)*)?
        }

        impl $game {
            /// The full-set action the agent's `action` stands for.
            fn full_action(&self, action: Action<'_>) -> usize {
                let action = action.index();
                if self.full_action_set { action } else { MINIMAL_ACTIONS[action] }
            }
        }
    };
}
pub(crate) use minatar_env;

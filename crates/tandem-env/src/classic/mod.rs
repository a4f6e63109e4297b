//! Gymnasium's classic-control games other than CartPole, step-for-step equal to
//! gymnasium 1.x: Acrobot-v1, MountainCar-v0, MountainCarContinuous-v0 and
//! Pendulum-v1 (time limits included, as truncation). Each keeps its state in the
//! precision numpy does (float64, or float32 where gymnasium stores a float32 array),
//! draws its resets from numpy's PCG64 seeded the way `env.reset(seed=s)` seeds it
//! ([`crate::gym_seeding`]) and writes the float32 observation gymnasium returns.
//! `tests/classic_parity.rs` replays traces recorded from gymnasium.
//!
//! Exactness rests on doing each floating-point operation in the order and precision
//! numpy does; the helpers here name the places where numpy's scalar arithmetic is not
//! the obvious one.

pub mod acrobot;
pub(crate) mod canvas;
pub mod mountain_car;
pub mod pendulum;

pub use acrobot::Acrobot;
pub use mountain_car::{MountainCar, MountainCarContinuous};
pub use pendulum::Pendulum;

use std::hint::black_box;

use tandem_spec::game::Game;

use crate::cartpole::CartPole;
use crate::env::Env;

/// Builds a classic-control game seeded with `seed`; `None` for a game of another family.
pub(crate) fn make(game: &Game, seed: u64) -> Option<Box<dyn Env>> {
    Some(match game {
        Game::Cartpole => Box::new(CartPole::new(seed)),
        Game::Acrobot => Box::new(Acrobot::new(seed)),
        Game::MountainCar => Box::new(MountainCar::new(seed)),
        Game::MountainCarContinuous => Box::new(MountainCarContinuous::new(seed)),
        Game::Pendulum => Box::new(Pendulum::new(seed)),
        _ => return None,
    })
}

/// numpy's `x ** 2` on a float64 scalar: the C library's `pow(x, 2.0)`, which is not
/// always the correctly rounded `x * x` (glibc's differed in the last bit for 8 in
/// 10,000 values drawn from [-20, 20]). The exponent is hidden from the optimiser, which would otherwise turn the call
/// into a multiplication.
pub(crate) fn numpy_square(x: f64) -> f64 {
    x.powf(black_box(2.0))
}

/// numpy's `x ** 2` on a float32 scalar: the C library's `powf(x, 2.0f)`.
pub(crate) fn numpy_square_f32(x: f32) -> f32 {
    x.powf(black_box(2.0))
}

/// The time limit gymnasium registers for a game, as [`crate::Step`]'s truncation.
/// gymnasium's `TimeLimit` also sets `truncated` on a step that terminates at the
/// limit; here termination wins (the episode is not bootstrappable), as in CartPole.
pub(crate) fn truncated(terminated: bool, steps: u32, max_steps: u32) -> bool {
    !terminated && steps >= max_steps
}

#[cfg(test)]
mod tests {
    use crate::env::Env;
    use crate::space::{Action, ObsBuf};

    #[test]
    fn every_game_draws_a_picture_that_follows_its_state() {
        let games: [(Box<dyn Env>, Action<'_>); 4] = [
            (Box::new(super::Acrobot::new(1)), Action::Discrete(2)),
            (Box::new(super::MountainCar::new(1)), Action::Discrete(2)),
            (
                Box::new(super::MountainCarContinuous::new(1)),
                Action::Box(&[1.0]),
            ),
            (Box::new(super::Pendulum::new(1)), Action::Box(&[2.0])),
        ];
        for (mut env, action) in games {
            env.reset(Some(1), ObsBuf::Skip);
            let first = env.render_rgb().expect("a picture");
            assert_eq!(first.pixels.len(), first.height * first.width * 3);
            assert!(first.pixels.iter().any(|&p| p != 255), "something is drawn");
            for _ in 0..20 {
                env.step(action, ObsBuf::Skip);
            }
            assert_ne!(env.render_rgb().unwrap(), first, "the picture moves");
        }
    }
}

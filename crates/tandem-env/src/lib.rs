//! Environments for tandem: the single-environment [`Env`] trait, observation spaces,
//! native games (CartPole-v1; gymnasium's other classic-control games Acrobot-v1,
//! MountainCar-v0, MountainCarContinuous-v0 and Pendulum-v1, step-for-step equal to
//! gymnasium; the five MinAtar games, step-for-step equal to the `minatar` package),
//! composable wrappers (tandem-spec's [`Wrapper`]), the batched [`VecEnv`] the trainer
//! steps, and per-environment seeding. Atari games come from the `tandem-ale` crate
//! (GPL-2.0) behind the cargo feature `atari`; any gymnasium environment id runs in
//! Python worker processes through the [`gym`] bridge ([`Game::Gymnasium`]). The games and
//! wrappers an [`EnvSpec`] names are tandem-spec's, the config's resolved values as they are.
//!
//! A rank builds its environments from an [`EnvSpec`] and steps them as one batch:
//!
//! ```
//! use tandem_env::{EnvSpec, Game, VecEnv, Wrapper, env_seeds};
//!
//! let spec = EnvSpec::new(Game::MinatarBreakout).with(Wrapper::ClipReward);
//! // 8 environments of rank 1 in an experiment seeded 42, stepped on 2 threads.
//! let mut envs = VecEnv::new(&spec, &env_seeds(42, 1, 0, 8), 2)?;
//! assert_eq!(envs.obs_shape(), vec![4, 10, 10]); // 4 channels of 10x10 cells
//! let first = envs.reset().to_vec(); // 8 rows of 400 f32 values
//! assert_eq!(first.len(), 8 * 400);
//! for _ in 0..100 {
//!     let actions = vec![0i64; envs.num_envs()]; // the policy's choices
//!     envs.step(&actions)?;
//!     let (_obs, _rewards) = (envs.obs(), envs.rewards());
//!     let (_terminated, _truncated) = (envs.terminated(), envs.truncated());
//!     for game in envs.drain_episodes() {
//!         assert!(game.length > 0); // return, length and raw score of a finished game
//!     }
//! }
//! # Ok::<(), tandem_env::EnvError>(())
//! ```
//!
//! For exact resume, [`VecEnv::snapshot`] captures the whole batch (every game's state
//! and random streams, every wrapper's buffers and counters, normaliser statistics,
//! episodes in progress) as versioned, checksummed bytes, and [`VecEnv::restore`] puts
//! them back into a batch built from the same spec, refusing with an
//! [`EnvError::Snapshot`] that names the difference when it was built otherwise. Games
//! and wrappers take part through [`Env::save_state`] / [`Env::load_state`]; the
//! encoding helpers are in [`snapshot`].
//!
//! Observation layout seen by networks: vectors are `[N]`; images are channels-first
//! `[C, H, W]` f32 with pixel values kept in 0..=255 (the network scales). Internally a
//! wrapper chain may carry `u8` frames in height-width-channel order (what ALE produces);
//! [`VecEnv`] converts the outermost observation to f32 channels-first in its batch buffer.

pub mod cartpole;
pub mod classic;
pub mod env;
pub mod gym;
pub mod gym_seeding;
pub mod minatar;
pub mod mpe;
pub mod mt19937;
pub mod multi_agent;
pub mod norm;
pub mod rng;
pub mod snapshot;
pub mod space;
pub mod spec;
pub mod vec_env;
pub mod wrappers;

// Written on the ALE branch; it provides
// `pub fn make_atari(rom: &str, seed: u64) -> Result<Box<dyn Env>, EnvError>`.
#[cfg(feature = "atari")]
#[rustfmt::skip]
pub mod atari;

pub use env::{Env, RgbFrame, Step};
pub use gym::{ActionMask, BridgeOptions, GymInfo, Gymnasium, PettingZoo, Scalar, ZooApi};
pub use norm::NormStats;
pub use space::{Action, ActionSpace, Actions, Dtype, Layout, ObsBuf, ObsShape, ObsSpace};
pub use spec::{
    EnvSpec, Game, MINATAR_STICKY_ACTION_PROB, Wrapper, make_env, make_game, observation_space,
};
pub use vec_env::{
    DEFAULT_MIN_PARALLEL_WORK, EnvGroup, EpisodeStats, SNAPSHOT_FORMAT_VERSION, VecEnv,
};

/// Errors raised while building or driving environments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// A wrapper was given an observation it cannot process.
    #[error("wrapper #{index} `{wrapper}` does not fit its input observation {input}: {reason}")]
    WrapperMismatch {
        /// Position of the wrapper in the `wrappers` list (0 = applied first, to the game).
        index: usize,
        wrapper: &'static str,
        /// The observation space the wrapper receives, in words.
        input: String,
        reason: String,
    },
    /// A wrapper parameter is out of range.
    #[error("wrapper #{index} `{wrapper}`: {reason}")]
    InvalidWrapperParameter {
        index: usize,
        wrapper: &'static str,
        reason: String,
    },
    /// A game parameter is out of range.
    #[error("game `{game}`: {reason}")]
    InvalidGameParameter { game: String, reason: String },
    /// The game exists but this build left it out.
    #[error("game `{game}` needs tandem-env built with the cargo feature `{feature}`")]
    FeatureDisabled { game: String, feature: &'static str },
    /// The actions slice does not have one action per environment.
    #[error("expected {expected} actions (one per environment), got {got}")]
    ActionCount { expected: usize, got: usize },
    /// An action is outside `0..num_actions`.
    #[error("environment {env}: action {action} is outside 0..{num_actions}")]
    InvalidAction {
        env: usize,
        action: i64,
        num_actions: usize,
    },
    /// Bad VecEnv construction arguments or normaliser statistics.
    #[error("{0}")]
    InvalidArgument(String),
    /// The game backend failed (e.g. ALE could not load a ROM).
    #[error("game backend error: {0}")]
    Backend(String),
    /// A snapshot cannot be taken or restored: it is truncated or corrupt, of another
    /// format version, or of differently built environments (the message names what
    /// differs and where).
    #[error("snapshot: {0}")]
    Snapshot(String),
}

/// The seed of environment `index` on rank `rank` of an experiment seeded with
/// `experiment_seed`.
///
/// Each input passes through a bijective 64-bit finaliser (SplitMix64's), with distinct
/// odd constants folded in between, so for a fixed experiment seed and rank distinct
/// indices give distinct seeds, and changing any input changes every output bit with
/// probability about one half. Two runs with the same inputs get the same seeds.
pub fn env_seed(experiment_seed: u64, rank: usize, index: usize) -> u64 {
    let a = rng::splitmix64_finalize(experiment_seed ^ 0x6a09_e667_f3bc_c909);
    let b = rng::splitmix64_finalize(a ^ (rank as u64).wrapping_mul(0xbb67_ae85_84ca_a73b));
    rng::splitmix64_finalize(b ^ (index as u64).wrapping_mul(0x3c6e_f372_fe94_f82b))
}

/// Seeds for environments `first_index..first_index + count` of one rank (see [`env_seed`]).
pub fn env_seeds(experiment_seed: u64, rank: usize, first_index: usize, count: usize) -> Vec<u64> {
    (first_index..first_index + count)
        .map(|index| env_seed(experiment_seed, rank, index))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn env_seeds_are_distinct_across_ranks_and_indices() {
        let mut seen = HashSet::new();
        for rank in 0..8 {
            for index in 0..512 {
                assert!(
                    seen.insert(env_seed(7, rank, index)),
                    "collision at rank {rank} index {index}"
                );
            }
        }
        assert_ne!(env_seed(7, 0, 0), env_seed(8, 0, 0));
        assert_ne!(env_seed(0, 1, 0), env_seed(0, 0, 1));
        assert_eq!(env_seed(42, 3, 9), env_seed(42, 3, 9));
        assert_eq!(
            env_seeds(42, 3, 8, 2),
            vec![env_seed(42, 3, 8), env_seed(42, 3, 9)]
        );
    }
}

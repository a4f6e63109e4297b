//! Builds a rank's environments from the resolved config: maps the config's game and wrappers
//! onto tandem-env's specs and derives every environment's seed from the experiment seed and
//! the environment's global index (which includes the rank), so no two ranks see the same
//! stream and a run is reproducible.

use anyhow::{Context, Result};
use tandem_config::{Experiment, Game, Wrapper};
use tandem_env::{EnvSpec, GameSpec, VecEnv, WrapperSpec};

/// The env crate's spec for the experiment's environment.
pub fn env_spec(experiment: &Experiment) -> EnvSpec {
    let game = match experiment.env.game {
        Game::Cartpole => GameSpec::CartPole,
        // minatar's own default: sticky actions with probability 0.1, minimal action set.
        Game::MinatarBreakout => GameSpec::MinAtarBreakout {
            sticky_action_prob: 0.1,
            full_action_set: false,
        },
        // ALE-level stickiness is off (set explicitly, ALE's default would be 0.25); a config
        // that wants sticky actions declares the `sticky-actions` wrapper.
        Game::AtariBreakout => GameSpec::Atari {
            rom: "breakout".into(),
            repeat_action_probability: 0.0,
            full_action_space: false,
        },
    };
    let wrappers = experiment.env.wrappers.iter().map(wrapper_spec).collect();
    EnvSpec { game, wrappers }
}

fn wrapper_spec(w: &Wrapper) -> WrapperSpec {
    match *w {
        Wrapper::NoopReset { max } => WrapperSpec::NoopReset { max_noops: max },
        Wrapper::FireReset => WrapperSpec::FireReset,
        Wrapper::FrameSkip { n, max_pool } => WrapperSpec::FrameSkip { skip: n, max_pool },
        Wrapper::EpisodicLife => WrapperSpec::EpisodicLife,
        Wrapper::Resize { height, width } => WrapperSpec::Resize {
            height: height as usize,
            width: width as usize,
        },
        Wrapper::Grayscale => WrapperSpec::Grayscale,
        Wrapper::ClipReward => WrapperSpec::ClipReward,
        Wrapper::FrameStack { n } => WrapperSpec::FrameStack { frames: n },
        Wrapper::TimeLimit { max_steps } => WrapperSpec::TimeLimit { max_steps },
        Wrapper::StickyActions { probability } => WrapperSpec::StickyActions { prob: probability },
        Wrapper::NormalizeObs { clip } => WrapperSpec::NormalizeObs {
            clip: clip as f32,
            epsilon: 1e-8,
        },
        Wrapper::NormalizeReward { gamma, clip } => WrapperSpec::NormalizeReward {
            gamma,
            clip: clip as f32,
            epsilon: 1e-8,
        },
    }
}

/// This rank's share of the environments: global indices `rank * n .. (rank + 1) * n`.
///
/// Seeds depend on the global index only (the rank argument of `env_seeds` stays 0), so the
/// same experiment plays the same environment streams on any number of ranks, and no two
/// environments of a run, on any rank, share a stream.
pub fn make_vec_env(experiment: &Experiment, rank: usize, threads: usize) -> Result<VecEnv> {
    let per_rank = experiment.per_rank_envs();
    let seeds = tandem_env::env_seeds(experiment.seed, 0, rank * per_rank, per_rank);
    VecEnv::new(&env_spec(experiment), &seeds, threads).with_context(|| {
        format!(
            "cannot build the {} environments of rank {rank}",
            experiment.env.game.name()
        )
    })
}

//! A rank's environments: built from the resolved config (the config's game mapped onto
//! tandem-env's spec, its wrappers taken as they are, every environment's seed derived from the experiment seed and the
//! environment's global index, so no two ranks see the same stream and a run is reproducible),
//! their normalisers kept equal across ranks, and both carried through checkpoints.

use anyhow::{Context, Result};
use std::time::Duration;

use tandem_config::{Experiment, Game, Gymnasium, Scalar};
use tandem_env::{EnvSpec, GameSpec, GymSpec, GymValue, VecEnv};
use tch::Tensor;

use super::checkpoint::{self, Checkpoint};
use crate::algo::Collective;

/// The env crate's spec for the experiment's environment; an error only for a gymnasium step
/// timeout too large to be a duration.
pub fn env_spec(experiment: &Experiment) -> Result<EnvSpec> {
    // minatar's own default: sticky actions with probability 0.1, minimal action set.
    let (sticky_action_prob, full_action_set) = (0.1, false);
    let game = match &experiment.env.game {
        Game::Cartpole => GameSpec::CartPole,
        Game::MinatarBreakout => GameSpec::MinAtarBreakout {
            sticky_action_prob,
            full_action_set,
        },
        Game::MinatarAsterix => GameSpec::MinAtarAsterix {
            sticky_action_prob,
            full_action_set,
        },
        Game::MinatarFreeway => GameSpec::MinAtarFreeway {
            sticky_action_prob,
            full_action_set,
        },
        Game::MinatarSpaceInvaders => GameSpec::MinAtarSpaceInvaders {
            sticky_action_prob,
            full_action_set,
        },
        Game::MinatarSeaquest => GameSpec::MinAtarSeaquest { sticky_action_prob },
        // ALE-level stickiness is off (set explicitly, ALE's default would be 0.25); a config
        // that wants sticky actions declares the `sticky-actions` wrapper.
        Game::Atari { rom } => GameSpec::Atari {
            rom: (*rom).to_string(),
            repeat_action_probability: 0.0,
            full_action_space: false,
        },
        Game::Acrobot => GameSpec::Acrobot,
        Game::MountainCar => GameSpec::MountainCar,
        Game::MountainCarContinuous => GameSpec::MountainCarContinuous,
        Game::Pendulum => GameSpec::Pendulum,
        Game::Gymnasium(gym) => GameSpec::Gymnasium(gym_spec(gym)?),
    };
    let wrappers = experiment.env.wrappers.clone();
    Ok(EnvSpec { game, wrappers })
}

fn gym_spec(gym: &Gymnasium) -> Result<GymSpec> {
    let make_args = gym
        .make_args
        .iter()
        .map(|(name, value)| {
            let value = match value {
                Scalar::Int(i) => GymValue::Int(*i),
                Scalar::Float(f) => GymValue::Float(*f),
                Scalar::Bool(b) => GymValue::Bool(*b),
                Scalar::Str(s) => GymValue::Str(s.clone()),
                Scalar::Null => GymValue::None,
            };
            (name.clone(), value)
        })
        .collect();
    let step_timeout = Duration::try_from_secs_f64(gym.step_timeout_s)
        .with_context(|| format!("step-timeout {} s is not a duration", gym.step_timeout_s))?;
    Ok(GymSpec {
        python: gym.python.clone().into(),
        imports: gym.imports.clone(),
        make_args,
        workers: gym.workers,
        step_timeout,
        ..GymSpec::new(gym.id.clone())
    })
}

/// This rank's share of the environments: global indices `rank * n .. (rank + 1) * n`.
///
/// Seeds depend on the global index only (the rank argument of `env_seeds` stays 0), so the
/// same experiment plays the same environment streams on any number of ranks, and no two
/// environments of a run, on any rank, share a stream.
pub fn make_vec_env(experiment: &Experiment, rank: usize, threads: usize) -> Result<VecEnv> {
    let per_rank = experiment.per_rank_envs();
    let seeds = tandem_env::env_seeds(experiment.seed, 0, rank * per_rank, per_rank);
    let mut spec = env_spec(experiment)?;
    if let GameSpec::Gymnasium(gym) = &mut spec.game {
        // Worker output reaches the console among other ranks' lines.
        gym.log_prefix = format!("rank {rank} ");
    }
    let envs = VecEnv::new(&spec, &seeds, threads).with_context(|| {
        format!(
            "cannot build the {} environments of rank {rank}",
            experiment.env.game.name()
        )
    })?;
    if let (Some(info), Game::Gymnasium(gym)) = (envs.gym_info(), &experiment.env.game) {
        // Two runs of one config on different interpreters must be told apart.
        tracing::info!(
            "rank {rank} environments: {info}, step timeout {} s",
            gym.step_timeout_s
        );
    }
    Ok(envs)
}

/// All-reduces the normalisers' new statistics so every rank normalises identically.
pub fn sync_normalizers(envs: &mut VecEnv, collective: &mut dyn Collective) -> Result<()> {
    let deltas = envs.normalizer_deltas();
    if deltas.is_empty() {
        return Ok(());
    }
    let mut merged = Vec::with_capacity(deltas.len());
    for d in deltas {
        let mut sums = d.to_sums();
        collective.all_reduce_sum(&mut sums)?;
        merged.push(
            tandem_env::NormStats::from_sums(&sums)
                .context("normaliser statistics do not merge")?,
        );
    }
    envs.apply_normalizer_sync(&merged)?;
    Ok(())
}

pub fn normalizer_tensors(envs: &VecEnv) -> Vec<(String, Tensor)> {
    envs.normalizer_stats()
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("normalizer.{i}"), Tensor::from_slice(&s.to_sums())))
        .collect()
}

pub fn restore_normalizers(envs: &mut VecEnv, ckpt: &Checkpoint) -> Result<()> {
    let count = envs.normalizer_stats().len();
    if count == 0 {
        return Ok(());
    }
    let mut stats = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("normalizer.{i}");
        let (_, t) = ckpt
            .tensors
            .iter()
            .find(|(n, _)| *n == name)
            .with_context(|| format!("the checkpoint has no {name}"))?;
        let sums = Vec::<f64>::try_from(t)?;
        stats.push(
            tandem_env::NormStats::from_sums(&sums)
                .with_context(|| format!("{name} in the checkpoint is malformed"))?,
        );
    }
    envs.set_normalizer_stats(&stats)?;
    Ok(())
}

/// Restores this rank's environments from the snapshot saved with `ckpt`, when there is one
/// for the same world size. Returns whether it did; a resume on another number of ranks (or a
/// missing snapshot) starts fresh episodes instead.
pub fn restore_envs(
    envs: &mut VecEnv,
    run_dir: &std::path::Path,
    ckpt: &Checkpoint,
    rank: usize,
    world: usize,
) -> Result<bool> {
    if !envs.can_snapshot() {
        tracing::info!(
            "{} cannot be snapshotted (its state lives in Python processes): environments start fresh episodes",
            envs.gym_info()
                .map_or("this environment", |g| g.id.as_str())
        );
        return Ok(false);
    }
    if ckpt.world_size != world as u64 {
        tracing::info!(
            "the checkpoint was saved on {} rank(s), this run has {world}: environments start fresh episodes",
            ckpt.world_size
        );
        return Ok(false);
    }
    let path = checkpoint::env_snapshot_path(run_dir, ckpt.update, rank);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(
                "no environment snapshot {} ({e}): environments start fresh episodes",
                path.display()
            );
            return Ok(false);
        }
    };
    match envs.restore(&bytes) {
        Ok(()) => Ok(true),
        Err(e) => {
            tracing::warn!(
                "cannot restore {}: {e}; environments start fresh episodes",
                path.display()
            );
            Ok(false)
        }
    }
}

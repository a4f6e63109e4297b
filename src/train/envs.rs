//! A rank's environments: built from the resolved config (its game and wrappers taken as they
//! are, every environment's seed derived from the experiment seed and the
//! environment's global index, so no two ranks see the same stream and a run is reproducible),
//! their normalisers kept equal across ranks, and both carried through checkpoints.

use anyhow::{Context, Result};

use tandem_config::{Experiment, Game};
use tandem_env::{BridgeOptions, EnvSpec, VecEnv};
use tch::Tensor;

use super::checkpoint::{self, Checkpoint};
use crate::algo::Collective;

/// The env crate's spec for the experiment's environment: the resolved game and wrappers as
/// they are (both tandem-spec's types).
pub fn env_spec(experiment: &Experiment) -> EnvSpec {
    EnvSpec {
        game: experiment.env.game.clone(),
        wrappers: experiment.env.wrappers.clone(),
    }
}

/// [`env_spec`] for environments whose episodes only score a policy (evaluation, `play`): a
/// gymnasium environment's `info-keys` are left out, as nothing logs their values there and
/// evaluation's own time limit may end an episode at a step whose info lacks them.
pub fn scoring_env_spec(experiment: &Experiment) -> EnvSpec {
    let mut spec = env_spec(experiment);
    if let Game::Gymnasium(gym) = &mut spec.game {
        gym.info_keys.clear();
    }
    spec
}

/// This rank's share of the environments: global indices `rank * n .. (rank + 1) * n`.
///
/// Seeds depend on the global index only (the rank argument of `env_seeds` stays 0), so the
/// same experiment plays the same environment streams on any number of ranks, and no two
/// environments of a run, on any rank, share a stream.
pub fn make_vec_env(experiment: &Experiment, rank: usize, threads: usize) -> Result<VecEnv> {
    let per_rank = experiment.per_rank_envs();
    let seeds = tandem_env::env_seeds(experiment.seed, 0, rank * per_rank, per_rank);
    // Worker output reaches the console among other ranks' lines.
    let bridge = BridgeOptions {
        log_prefix: format!("rank {rank} "),
        render: false,
    };
    let envs = VecEnv::with_bridge(&env_spec(experiment), &seeds, threads, &bridge).with_context(
        || {
            format!(
                "cannot build the {} environments of rank {rank}",
                experiment.env.game.name()
            )
        },
    )?;
    let step_timeout = match &experiment.env.game {
        Game::Gymnasium(gym) => Some(gym.step_timeout_s),
        Game::PettingZoo(zoo) => Some(zoo.step_timeout_s),
        _ => None,
    };
    if let (Some(info), Some(step_timeout)) = (envs.gym_info(), step_timeout) {
        // Two runs of one config on different interpreters must be told apart.
        tracing::info!("rank {rank} environments: {info}, step timeout {step_timeout} s");
        if let Some(encoding) = &info.observation_encoding {
            tracing::info!(
                "rank {rank} observation: {} {encoding}",
                info.observation_space
            );
        }
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

/// Sets the environments' normalisers to `tensors`, as [`normalizer_tensors`] wrote them (a
/// population member copying another's).
pub fn set_normalizers(envs: &mut VecEnv, tensors: &[Tensor]) -> Result<()> {
    let stats = (tensors.iter())
        .map(|t| {
            let sums = Vec::<f64>::try_from(t)?;
            tandem_env::NormStats::from_sums(&sums).context("malformed normaliser statistics")
        })
        .collect::<Result<Vec<_>>>()?;
    envs.set_normalizer_stats(&stats)?;
    Ok(())
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

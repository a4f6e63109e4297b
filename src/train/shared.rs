//! Pieces both trainers (on-policy and off-policy) use: the mapping of the config's sync
//! policy, batches of observation rows as tensors, the NaN check, and keeping normalisers and
//! environments in step across ranks and across checkpoints.

use anyhow::{Context, Result};
use tch::{Device, Tensor};

use tandem_config::Experiment;

use super::checkpoint::{self, Checkpoint};
use crate::algo::Collective;
use crate::dist::{Ddp, SyncPolicy};

pub(super) fn sync_policy(experiment: &Experiment) -> SyncPolicy {
    match experiment.sync.policy {
        tandem_config::SyncPolicy::Allreduce {
            bucket_mb,
            compression,
        } => SyncPolicy::AllReduce {
            bucket_bytes: (bucket_mb * 1024.0 * 1024.0) as usize,
            bf16: compression == tandem_config::Compression::Bf16,
        },
        tandem_config::SyncPolicy::Broadcast => SyncPolicy::Broadcast,
        tandem_config::SyncPolicy::Periodic { every } => SyncPolicy::Periodic { every },
        tandem_config::SyncPolicy::None => SyncPolicy::None,
    }
}

pub(super) fn params_finite(params: &[Tensor]) -> bool {
    params
        .iter()
        .all(|p| p.isfinite().all().int64_value(&[]) != 0)
}

/// All-reduces the normalisers' new statistics so every rank normalises identically.
pub(super) fn sync_normalizers(envs: &mut tandem_env::VecEnv, ddp: &mut Ddp) -> Result<()> {
    let deltas = envs.normalizer_deltas();
    if deltas.is_empty() {
        return Ok(());
    }
    let mut merged = Vec::with_capacity(deltas.len());
    for d in deltas {
        let mut sums = d.to_sums();
        ddp.all_reduce_sum(&mut sums)?;
        merged.push(
            tandem_env::NormStats::from_sums(&sums)
                .context("normaliser statistics do not merge")?,
        );
    }
    envs.apply_normalizer_sync(&merged)?;
    Ok(())
}

pub(super) fn normalizer_tensors(envs: &tandem_env::VecEnv) -> Vec<(String, Tensor)> {
    envs.normalizer_stats()
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("normalizer.{i}"), Tensor::from_slice(&s.to_sums())))
        .collect()
}

pub(super) fn restore_normalizers(envs: &mut tandem_env::VecEnv, ckpt: &Checkpoint) -> Result<()> {
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
pub(super) fn restore_envs(
    envs: &mut tandem_env::VecEnv,
    run_dir: &std::path::Path,
    ckpt: &Checkpoint,
    rank: usize,
    world: usize,
) -> Result<bool> {
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

/// The VecEnv's contiguous observation rows as one `[N, ...obs_shape]` tensor on `device`.
pub(super) fn batch_tensor(rows: &[f32], n: usize, obs_shape: &[i64], device: Device) -> Tensor {
    let mut shape = vec![n as i64];
    shape.extend_from_slice(obs_shape);
    Tensor::from_slice(rows)
        .view(shape.as_slice())
        .to_device(device)
}

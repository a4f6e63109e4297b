//! Pieces both trainers (on-policy and off-policy) use: the mapping of the config's sync
//! policy, batches of observation rows as tensors, the NaN check, and keeping normalisers and
//! environments in step across ranks and across checkpoints.

use anyhow::{Context, Result, ensure};
use tch::{Device, Kind, Tensor};

use tandem_config::Experiment;
use tandem_summary::SummaryWriter;

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
/// Copies `rows` (the environments' observations, row after row) into `dst`, a contiguous f32
/// tensor of as many values: straight into its memory on the CPU, through one host tensor for a
/// device.
pub(super) fn fill_rows(dst: &Tensor, rows: &[f32]) -> Result<()> {
    ensure!(
        dst.kind() == Kind::Float && dst.numel() == rows.len() && dst.is_contiguous(),
        "observation rows: {} values for a {:?} tensor of shape {:?}",
        rows.len(),
        dst.kind(),
        dst.size()
    );
    if dst.device() == Device::Cpu {
        // SAFETY: `dst` is a contiguous f32 CPU tensor of exactly `rows.len()` elements, and
        // nothing else reads or writes it during the copy.
        unsafe { std::slice::from_raw_parts_mut(dst.data_ptr() as *mut f32, rows.len()) }
            .copy_from_slice(rows);
    } else {
        tch::no_grad(|| {
            dst.shallow_clone()
                .copy_(&Tensor::from_slice(rows).view(dst.size().as_slice()))
        });
    }
    Ok(())
}

pub(super) fn batch_tensor(rows: &[f32], n: usize, obs_shape: &[i64], device: Device) -> Tensor {
    let mut shape = vec![n as i64];
    shape.extend_from_slice(obs_shape);
    Tensor::from_slice(rows)
        .view(shape.as_slice())
        .to_device(device)
}

/// Rank 0's TensorBoard writer (None elsewhere, or when the config turns TensorBoard off), with
/// the resolved config as text at the run's first step.
pub(super) fn open_summaries(
    exp: &Experiment,
    rank: usize,
    run_dir: &std::path::Path,
    hash: &str,
    step: u64,
) -> Result<Option<SummaryWriter>> {
    if rank != 0 || !exp.log.tensorboard {
        return Ok(None);
    }
    let mut w = SummaryWriter::create(&run_dir.join("tensorboard"))
        .context("cannot create the TensorBoard event file")?;
    w.text(
        "config/resolved",
        step as i64,
        &format!(
            "```\n{}\n```\nsha256 {hash}",
            tandem_config::canonical_kdl(exp)
        ),
    )?;
    Ok(Some(w))
}

/// User plus system CPU time this process has used so far, over all its threads (libtorch's,
/// the environment pool's, Gloo's): what a benchmark on a shared machine compares, since it does
/// not depend on what else the machine runs.
pub(super) fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The final numbers of a run, for scripts and CI, written by rank 0 to `summary.json`.
pub(super) struct RunSummary<'a> {
    /// Updates (on-policy) or iterations (off-policy) done.
    pub update: u64,
    pub global_step: u64,
    pub recent: &'a super::metrics::RecentEpisodes,
    /// Steps of this process's training loop and their wall time (a resumed run counts its own).
    pub loop_steps: u64,
    pub loop_seconds: f64,
    /// CPU time of this process, all threads, over the same loop ([`process_cpu_seconds`]).
    pub loop_cpu_seconds: f64,
    pub hash: &'a str,
    pub world: usize,
    pub interrupted: bool,
    /// Learner-specific fields, already JSON values.
    pub extra: Vec<(&'static str, String)>,
}

pub(super) fn write_summary(run_dir: &std::path::Path, s: &RunSummary) -> Result<()> {
    let json = |v: Option<f64>| v.map(|r| format!("{r}")).unwrap_or_else(|| "null".into());
    let mut fields = vec![
        ("update", s.update.to_string()),
        ("global_step", s.global_step.to_string()),
        ("episodes", s.recent.total().to_string()),
        ("recent_return_mean", json(s.recent.mean_return())),
        ("last_20_return_mean", json(s.recent.mean_return_last(20))),
        ("recent_score_mean", json(s.recent.mean_score())),
        ("wall_seconds", format!("{}", s.loop_seconds)),
        (
            "steps_per_second",
            format!("{}", s.loop_steps as f64 / s.loop_seconds.max(1e-9)),
        ),
        ("cpu_seconds", format!("{}", s.loop_cpu_seconds)),
        ("config_hash", format!("\"{}\"", s.hash)),
        ("world_size", s.world.to_string()),
        ("interrupted", s.interrupted.to_string()),
    ];
    fields.extend(s.extra.iter().cloned());
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    crate::launch::write_atomic(
        &run_dir.join("summary.json"),
        format!("{{{}}}\n", body.join(", ")).as_bytes(),
    )?;
    Ok(())
}

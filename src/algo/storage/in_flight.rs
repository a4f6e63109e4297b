//! The batch in flight of pipelined sampling in a checkpoint (`inflight-rank{r}.bin`): the batch
//! collected for the next update, its bootstrap values V(s_T) and the update whose parameters
//! collected it, so that a resumed run continues exactly.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use tch::Tensor;

use super::rollout::RolloutBuffer;
use crate::algo::learner::Resumed;

/// A collected batch's bootstrap values V(s_T) and the update whose starting parameters
/// collected it (the learner at update u learns with policy lag u - `collected_by`).
pub struct Ready {
    pub last_values: Tensor,
    pub collected_by: u64,
}

/// Where rank `rank` keeps the batch in flight of pipelined sampling in a checkpoint directory.
fn in_flight_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("inflight-rank{rank}.bin"))
}

/// Writes the batch collected for the next update (in `buffer`), with its bootstrap values, the
/// update that collected it and the global step of the checkpoint; removes an older file when
/// no batch is in flight (the run's last update consumed it).
pub fn save(
    ready: Option<&Ready>,
    buffer: &RolloutBuffer,
    dir: &Path,
    rank: usize,
    global_step: u64,
) -> Result<()> {
    let file = in_flight_file(dir, rank);
    let Some(ready) = ready else {
        return match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", file.display()))
            }
            _ => Ok(()),
        };
    };
    let mut named = buffer.contents();
    named.push(("last_values".into(), ready.last_values.shallow_clone()));
    for (name, value) in [
        ("collected_by", ready.collected_by),
        ("global_step", global_step),
    ] {
        named.push((name.into(), Tensor::from_slice(&[value as i64])));
    }
    let named: Vec<(String, Tensor)> = named
        .into_iter()
        .map(|(name, t)| (name, t.to_device(tch::Device::Cpu)))
        .collect();
    // Made in memory and written by Rust, as checkpoints are: libtorch's file writer throws from
    // a destructor when a write fails, which aborts the process on a full disk.
    let bytes =
        crate::torch_ops::save_named(&named).context("cannot serialise the batch in flight")?;
    crate::atomic::write_atomic(&file, &bytes)
        .with_context(|| format!("cannot write {}", file.display()))
}

/// Reads back what [`save`] wrote into `buffer`, when the environments continue the saved
/// episodes; `None` when there is none to continue.
pub fn restore(
    buffer: &mut RolloutBuffer,
    resumed: &Resumed,
    rank: usize,
) -> Result<Option<Ready>> {
    let file = in_flight_file(resumed.dir, rank);
    if !file.exists() {
        return Ok(None);
    }
    if !resumed.envs_restored {
        tracing::info!(
            "rank {rank}: environments start fresh episodes, so the batch in flight at the \
             checkpoint is dropped and the first update learns from one collected afresh"
        );
        return Ok(None);
    }
    let mut read = || -> Result<Ready> {
        let named = Tensor::load_multi(&file)?;
        let number = |name: &str| -> Result<u64> {
            let (_, t) = named
                .iter()
                .find(|(n, _)| n == name)
                .with_context(|| format!("it holds no `{name}`"))?;
            Ok(i64::try_from(t)? as u64)
        };
        let saved_step = number("global_step")?;
        ensure!(
            saved_step == resumed.global_step,
            "it was saved at global step {saved_step}, the checkpoint is at step {}",
            resumed.global_step
        );
        buffer.restore(&named)?;
        let (_, last_values) = named
            .iter()
            .find(|(n, _)| n == "last_values")
            .context("it holds no `last_values`")?;
        ensure!(
            last_values.size() == [buffer.num_envs()],
            "its `last_values` has shape {:?}, this run has {} environments",
            last_values.size(),
            buffer.num_envs()
        );
        Ok(Ready {
            last_values: last_values.to_device(buffer.device()),
            collected_by: number("collected_by")?,
        })
    };
    let ready = read()
        .with_context(|| format!("cannot resume the batch in flight from {}", file.display()))?;
    Ok(Some(ready))
}

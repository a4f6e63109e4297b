//! A recurrent policy's memory of one rank's environments ([`Memory`]): kept by the on-policy
//! learner between rounds, and in this rank's checkpoint files (`memory-rank{r}.bin`) between
//! runs, restored exactly when the environments are ([`save`], [`restore`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use tch::Tensor;

use crate::algo::learner::Resumed;
use crate::nn::ActorCritic;

/// What a recurrent policy carries between steps for one rank's N environments: its state after
/// the latest step `[N, width]`, and which environments start an episode at their current
/// observation `[N]` (1 or 0; the state is zeroed there before the next step). Data of this
/// rank only: never synchronised, saved in its checkpoint files.
#[derive(Debug)]
pub struct Memory {
    pub state: Tensor,
    pub starts: Tensor,
}

impl Memory {
    /// Before any step: zero states, every environment at an episode's start.
    pub fn new(model: &ActorCritic, num_envs: i64, device: tch::Device) -> Memory {
        Memory {
            state: model.initial_state(num_envs, device),
            starts: Tensor::ones([num_envs], (tch::Kind::Float, device)),
        }
    }
}

/// Writes `memory` into this rank's file of the checkpoint in `dir`.
pub fn save(memory: &Memory, dir: &Path, rank: usize, global_step: u64) -> Result<()> {
    let file = memory_file(dir, rank);
    crate::atomic::write_atomic(&file, &memory_bytes(memory, global_step)?)
        .with_context(|| format!("cannot write {}", file.display()))
}

/// The saved memory continues the saved episodes, so it comes back exactly when the
/// environments do; otherwise the fresh episodes start from zero states.
pub fn restore(memory: &mut Memory, resumed: &Resumed, rank: usize) -> Result<()> {
    if !resumed.envs_restored {
        tracing::info!(
            "rank {rank}: environments start fresh episodes, so the recurrent state starts at zero"
        );
        return Ok(());
    }
    let file = memory_file(resumed.dir, rank);
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    *memory = memory_from_bytes(&bytes, memory, resumed.global_step)
        .with_context(|| format!("cannot resume the recurrent state from {}", file.display()))?;
    Ok(())
}

/// Where rank `rank` keeps its recurrent memory in a checkpoint directory.
fn memory_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("memory-rank{rank}.bin"))
}

const MEMORY_MAGIC: &[u8; 8] = b"TNDMMEM1";

/// The memory as bytes: magic, the global step it was saved at, environments and state width
/// (u64 little-endian each), then the states and the starts as f32 little-endian.
fn memory_bytes(memory: &Memory, global_step: u64) -> Result<Vec<u8>> {
    let shape = memory.state.size();
    let host = |t: &Tensor| -> Result<Vec<f32>> {
        let flat = t.to_device(tch::Device::Cpu).reshape([-1]);
        Vec::<f32>::try_from(&flat).context("copying the recurrent state to the host")
    };
    let mut bytes = MEMORY_MAGIC.to_vec();
    for word in [global_step, shape[0] as u64, shape[1] as u64] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    for value in host(&memory.state)?
        .into_iter()
        .chain(host(&memory.starts)?)
    {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    Ok(bytes)
}

/// The memory `memory_bytes` wrote, checked against the step and the shape of `like`.
fn memory_from_bytes(bytes: &[u8], like: &Memory, global_step: u64) -> Result<Memory> {
    let shape = like.state.size();
    let (envs, width) = (shape[0] as usize, shape[1] as usize);
    let header = MEMORY_MAGIC.len() + 24;
    ensure!(
        bytes.len() >= header && &bytes[..8] == MEMORY_MAGIC,
        "not a recurrent-state file"
    );
    let word = |i: usize| {
        let at = 8 + 8 * i;
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    ensure!(
        word(0) == global_step,
        "it was saved at global step {}, the checkpoint is at step {global_step}",
        word(0)
    );
    ensure!(
        (word(1), word(2)) == (envs as u64, width as u64),
        "it holds states of {} environments of width {}, this run has {envs} of width {width}",
        word(1),
        word(2)
    );
    ensure!(
        bytes.len() == header + 4 * (envs * width + envs),
        "it is {} bytes long, {} expected",
        bytes.len(),
        header + 4 * (envs * width + envs)
    );
    let floats: Vec<f32> = bytes[header..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let device = like.state.device();
    let (state, starts) = floats.split_at(envs * width);
    Ok(Memory {
        state: Tensor::from_slice(state)
            .view([envs as i64, width as i64])
            .to_device(device),
        starts: Tensor::from_slice(starts).to_device(device),
    })
}

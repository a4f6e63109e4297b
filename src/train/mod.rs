//! The trainer of one rank: builds environments, model and learner from the resolved config,
//! then loops rollout -> learn -> sync -> log, with rank 0 writing summaries and checkpoints.
//! One rank is world size 1 of the same code path.

pub mod checkpoint;
pub mod console;
pub mod envs;
pub mod metrics;
pub mod off_policy;
mod on_policy;
mod shared;

pub use on_policy::actor_critic_spec;

use std::path::PathBuf;

use anyhow::Result;

use crate::dist::ProcessGroup;

/// Everything a rank knows: its resolved config, its device and its place in the group.
pub struct RankContext {
    pub experiment: tandem_config::Experiment,
    pub hash: String,
    pub device: tch::Device,
    pub pg: ProcessGroup,
    pub run_dir: PathBuf,
    pub resume: bool,
    /// libtorch intra-op threads and environment threads of this rank.
    pub threads: usize,
    /// Whether this process was asked to stop (SIGINT/SIGTERM). Only rank 0's answer counts:
    /// it is broadcast so every rank stops after the same update.
    pub stop_requested: Box<dyn Fn() -> bool + Send>,
}

/// How a training run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    /// Stopped on request after the current update, with a checkpoint written.
    Interrupted,
}

pub fn run(ctx: RankContext) -> Result<Outcome> {
    match &ctx.experiment.algorithm {
        tandem_config::Algorithm::Ppo(_) | tandem_config::Algorithm::A2c(_) => on_policy::run(ctx),
        tandem_config::Algorithm::Dqn(_) => off_policy::run(ctx),
    }
}

/// A seed for one purpose, rank and update, so that runs (and resumed runs) draw the same random
/// numbers: SplitMix64 over the inputs.
pub fn derived_seed(seed: u64, purpose: u64, rank: u64, update: u64) -> u64 {
    let mut z = seed;
    for x in [purpose, rank, update] {
        z = z.wrapping_add(x.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
    }
    z
}

//! The trainer of one rank: the run skeleton ([`run`]) that drives a learner (`crate::algo`)
//! from the resolved config to the end, with what it needs around it: the rank's environments
//! ([`envs`]), checkpoints with per-rank environment snapshots ([`checkpoint`]), cross-rank
//! episode metrics ([`metrics`]), summaries and `summary.json` ([`report`]), the console
//! ([`console`]). One rank is world size 1 of the same code path. Beside it, the timing of one
//! PPO update on a device ([`update_bench`]).

pub mod checkpoint;
pub mod console;
pub mod envs;
pub mod eval;
pub mod metrics;
pub mod population;
pub mod report;
mod run;
pub mod update_bench;

pub use report::SCALAR_LINES;

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
    /// What rank 0's console shows (logging chose it from the config and the terminal).
    pub console: tandem_config::Console,
    /// Whether this process was asked to stop, and why. Any rank's request counts: the ranks
    /// vote after every round, so all stop after the same update.
    pub stop_requested: Box<dyn Fn() -> Option<Stop> + Send>,
}

/// Why a rank was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// A scheduler's notice (SIGTERM, SIGUSR1): the job is to be run again later.
    Preempt,
}

/// How a training run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    /// Stopped on request (Ctrl-C) after the current update, with a checkpoint written.
    Interrupted,
    /// Stopped by a scheduler's notice after the current update, with a checkpoint written.
    Preempted,
}

/// Trains one rank (see [`run`]).
pub fn run(ctx: RankContext) -> Result<Outcome> {
    run::run(ctx)
}

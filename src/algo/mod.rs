//! Learning algorithms in rooms by role (docs/architecture.md): the learner interface the run
//! skeleton drives ([`learner`], and [`policies`], the learners of a run keyed by policy, each
//! playing its [`seats`] of a multi-agent batch), the one
//! place that picks the configured one ([`build`]), and what every learner shares ([`optim`],
//! [`actions`]). Each algorithm has a room of its own and reads top to bottom against its paper:
//! PPO ([`ppo`]), A2C ([`a2c`]), DQN ([`dqn`]), SAC ([`sac`]), TD3 ([`td3`]). The on-policy
//! skeleton ([`on_policy`]) pairs an actor-critic and an update rule with a sampling mode
//! ([`sampling`]); the off-policy skeleton ([`off_policy`]) pairs a per-rank replay buffer with
//! a rule (DQN's, SAC's or TD3's) that acts and takes gradient steps; what both keep between
//! acting and learning is in [`storage`]. They see other ranks only through [`Collective`], so
//! one rank is simply world size 1 of the same code.
//!
//! Every rank must pass a batch of the same size (the global batch divided by the world size);
//! the updates check this before their first gradient sync.

pub mod a2c;
pub mod actions;
pub mod build;
mod common;
pub mod dqn;
pub mod league;
pub mod learner;
pub mod off_policy;
pub mod on_policy;
pub mod optim;
pub mod policies;
pub mod ppo;
pub mod sac;
pub mod sampling;
pub mod seats;
pub mod storage;
pub mod td3;

pub use a2c::{A2c, A2cStats};
pub use learner::{Learner, Scalars};
pub use optim::{Optimizer, OptimizerSpec, clip_grad_norm};
pub use ppo::host::PpoTerms;
pub use ppo::{Ppo, PpoLoss, PpoStats, ppo_loss, ratio_diagnostics};
pub use storage::rollout::{
    Batch, InactiveRows, LearnerView, MinibatchSampler, RolloutArrays, RolloutBuffer, Sequences,
    StepRecord, VtraceClips, generalized_advantages, n_step_returns, vtrace,
};

use std::time::Duration;

use tch::Tensor;

/// What an update needs from the distributed runtime. [`Local`] is the world-size-1 case.
pub trait Collective {
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;
    /// The next backward pass is the last before [`Collective::sync_gradients`] (not one micro-
    /// batch of several): DDP may start all-reducing gradients while it runs.
    fn before_backward(&mut self) {}
    /// The following calls synchronise policy `part`'s parameters (a run of several policies
    /// sets up one part each, in the order of their parameters; one policy is part 0).
    /// Required, so that a wrapper cannot forget to pass it on.
    fn select_part(&mut self, part: usize) -> anyhow::Result<()>;
    /// Makes every rank hold the same gradients for `params` (DDP: the average over ranks).
    /// Called exactly once per optimizer step, after backward and before clipping/stepping.
    fn sync_gradients(&mut self, params: &[Tensor]) -> anyhow::Result<()>;
    /// Sums `values` element-wise over all ranks, in place (global statistics: advantage
    /// mean/variance over the global batch, loss averages for logging).
    fn all_reduce_sum(&mut self, values: &mut [f64]) -> anyhow::Result<()>;
    /// Rank 0's value of a control decision, given to every rank, so that decisions that change
    /// how many collectives run (early stop on KL) are never taken differently by two ranks.
    fn decide(&mut self, mine: bool) -> anyhow::Result<bool>;
    /// Whether this rank applies optimizer steps (under the broadcast policy only rank 0 does).
    fn steps_locally(&self) -> bool {
        true
    }
    /// Called once after every optimizer step (or where it would have been): the policy's
    /// parameter broadcast or periodic averaging.
    fn after_step(&mut self, _params: &[Tensor]) -> anyhow::Result<()> {
        Ok(())
    }
    /// Wall time spent waiting in collectives since the last call (for the `sync` phase).
    fn take_sync_time(&mut self) -> Duration {
        Duration::ZERO
    }
}

/// One rank alone: every collective is the identity.
pub struct Local;

impl Collective for Local {
    fn rank(&self) -> usize {
        0
    }
    fn select_part(&mut self, _part: usize) -> anyhow::Result<()> {
        Ok(())
    }
    fn world_size(&self) -> usize {
        1
    }
    fn sync_gradients(&mut self, _params: &[Tensor]) -> anyhow::Result<()> {
        Ok(())
    }
    fn all_reduce_sum(&mut self, _values: &mut [f64]) -> anyhow::Result<()> {
        Ok(())
    }
    fn decide(&mut self, mine: bool) -> anyhow::Result<bool> {
        Ok(mine)
    }
}

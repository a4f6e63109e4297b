//! Learning algorithms (PPO, A2C; DQN later): each turns a batch of experience into parameter
//! updates, reading top to bottom against its paper. They see other ranks only through
//! [`Collective`], so one rank is simply world size 1 of the same code.
//!
//! How a trainer drives an on-policy learner, on every rank alike:
//!
//! ```text
//! vs = VarStore::new(device); model = ActorCritic::new(&vs.root(), &spec, obs_shape, space)?
//! (broadcast rank 0's parameters_in_order(&vs) to all ranks)
//! ppo = Ppo::new(&vs, config, seed)?            // A2c::new(&vs, config)? likewise
//! buffer = RolloutBuffer::new(config.num_steps, num_envs, obs_shape, device)?
//! loop {
//!     buffer.reset()
//!     for t in 0..num_steps {
//!         taken = model.act(&obs)?                // actions, log_probs, values
//!         step the envs with taken.actions -> rewards, terminated, truncated, next obs
//!         where truncated: V(final observation) via model.value(..)? -> truncation_values
//!         buffer.push(&StepRecord { obs: &obs, .. })?
//!         obs = next obs (already reset where an episode ended)
//!     }
//!     batch = buffer.gae_batch(&model.value(&obs)?, config.gamma, config.gae_lambda)?
//!     stats = ppo.update(&model, &batch, progress, &mut collective)?   // progress in [0, 1]
//! }
//! ```
//!
//! Every rank must pass a batch of the same size (the global batch divided by the world size);
//! the update checks this before its first gradient sync. Checkpoints need, besides
//! `parameters_in_order(&vs)`: `optimizer().state_tensors()` and `optimizer().step_count()`,
//! and for PPO `sampler().state()` (restore with `set_sampler(MinibatchSampler::new(state))`).

pub mod a2c;
mod common;
pub mod dqn;
pub mod optim;
pub mod ppo;
pub mod replay;
pub mod rollout;

pub use a2c::{A2c, A2cConfig, A2cStats};
pub use optim::{Optimizer, OptimizerSpec, clip_grad_norm};
pub use ppo::{Ppo, PpoConfig, PpoLoss, PpoStats, ppo_loss, ratio_diagnostics};
pub use rollout::{
    Batch, MinibatchSampler, RolloutArrays, RolloutBuffer, StepRecord, generalized_advantages,
    n_step_returns,
};

use tch::Tensor;

/// What an update needs from the distributed runtime. [`Local`] is the world-size-1 case.
pub trait Collective {
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;
    /// The next backward pass is the last before [`Collective::sync_gradients`] (not one micro-
    /// batch of several): DDP may start all-reducing gradients while it runs.
    fn before_backward(&mut self) {}
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
}

/// One rank alone: every collective is the identity.
pub struct Local;

impl Collective for Local {
    fn rank(&self) -> usize {
        0
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

//! Advantage Actor-Critic, the synchronous variant of A3C (Mnih et al. 2016, "Asynchronous
//! Methods for Deep Reinforcement Learning"; synchronous form as in OpenAI Baselines / SB3).
//!
//! One update per rollout of `num_steps` x N environments:
//!   R_t = n-step return (Algorithm S3), A_t = R_t - V(s_t)
//!   policy gradient: grad log pi(a_t|s_t) A_t         -> loss_pi = -E[log pi(a_t|s_t) A_t]
//!   value regression on R_t                           -> loss_V  = E[(R_t - V(s_t))^2]
//!   entropy regularisation beta H(pi(.|s_t))          -> loss    = loss_pi + c_V loss_V - beta H
//! one optimizer step on the DDP-averaged gradient, clipped to a global norm.
//! Defaults follow Stable-Baselines3's A2C (CleanRL has no A2C).

use anyhow::Result;
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use crate::algo::Collective;
use crate::algo::common::{
    LossWeights, check_batch, global_batch_stats, scheduled_lr, synchronised_step, weighted_mean,
};
use crate::algo::learner::Scalars;
use crate::algo::on_policy::update::{PolicyUpdate, UpdateAt, evaluate_rows};
use crate::algo::optim::{Optimizer, OptimizerSpec};
use crate::algo::storage::rollout::{Batch, RolloutBuffer};
use crate::nn::{ActorCritic, EntropyUse};

/// The learner's settings: the config's `algorithm "a2c"` section, as the user wrote it (its
/// defaults follow Stable-Baselines3's).
pub use tandem_config::A2c as Settings;

/// RMSprop (alpha and eps as SB3's by default) or Adam, as the settings choose.
fn optimizer_spec(a: &Settings) -> OptimizerSpec {
    match a.optimizer {
        tandem_config::Optimizer::Rmsprop => OptimizerSpec::RmsProp {
            alpha: a.rmsprop_alpha,
            eps: a.optimizer_eps,
        },
        tandem_config::Optimizer::Adam => OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: a.optimizer_eps,
        },
    }
}

/// What one update did, averaged over ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct A2cStats {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    /// Over the global batch; NaN when the returns have zero variance.
    pub explained_variance: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub learning_rate: f64,
}

#[derive(Debug)]
pub struct A2c {
    config: Settings,
    optimizer: Optimizer,
}

impl A2c {
    pub fn new(vs: &VarStore, config: Settings) -> Result<A2c> {
        let optimizer = Optimizer::new(vs, optimizer_spec(&config))?;
        Ok(A2c { config, optimizer })
    }

    /// The learner of `algorithm "a2c"` for this rank's share of the experiment.
    pub fn from_config(vs: &VarStore, a: &Settings) -> Result<A2c> {
        A2c::new(vs, a.clone())
    }

    pub fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }
    pub fn optimizer_mut(&mut self) -> &mut Optimizer {
        &mut self.optimizer
    }

    /// One A2C step on this rank's share of the batch (every rank's share the same size).
    pub fn update(
        &mut self,
        model: &ActorCritic,
        batch: &Batch,
        progress: f64,
        collective: &mut dyn Collective,
    ) -> Result<A2cStats> {
        let config = &self.config;
        check_batch(model, batch)?;
        let lr = scheduled_lr(config.lr, config.anneal_lr, progress)?;
        let global = global_batch_stats(batch, 1, batch.len(), collective)?;
        let advantages = if config.normalize_advantages {
            (&batch.advantages - global.advantage_mean) / (global.advantage_std + 1e-8)
        } else {
            batch.advantages.shallow_clone()
        };

        // E[.] over the rows, or over the rows that acted where some rank's batch has rows
        // that did not (the batch is one minibatch).
        let weights = match global.masked {
            true => {
                let all_rows = [Tensor::arange(batch.len(), (Kind::Int64, batch.device()))];
                Some(LossWeights::of(batch, &all_rows, collective)?.of_all(0, batch))
            }
            false => None,
        };
        let mean = |x: &Tensor| weighted_mean(x, weights.as_ref());

        let evaluation = evaluate_rows(
            model,
            batch,
            EntropyUse::for_coefficient(config.entropy_coef),
        )?;
        // -E[log pi(a|s) A]: the advantage is a constant weight (no gradient through it).
        let policy_loss = -mean(&(&evaluation.log_probs * advantages.detach()));
        let value_loss = mean(&(&batch.returns - &evaluation.values).square());
        let entropy = mean(&evaluation.entropy);
        let total = &policy_loss + &value_loss * config.value_coef - &entropy * config.entropy_coef;

        let position = || "the A2C step".to_string();
        let grad_norm = synchronised_step(
            &mut self.optimizer,
            &total,
            config.max_grad_norm.unwrap_or(f64::INFINITY),
            lr,
            collective,
            &position,
        )?;

        let mut sums = vec![
            policy_loss.double_value(&[]),
            value_loss.double_value(&[]),
            entropy.double_value(&[]),
            grad_norm,
        ];
        collective.all_reduce_sum(&mut sums)?;
        let world = collective.world_size() as f64;
        Ok(A2cStats {
            policy_loss: sums[0] / world,
            value_loss: sums[1] / world,
            entropy: sums[2] / world,
            explained_variance: global.explained_variance,
            grad_norm: sums[3] / world,
            learning_rate: lr,
        })
    }
}

impl A2cStats {
    /// The update's scalars by TensorBoard tag.
    pub fn scalars(&self) -> Scalars {
        vec![
            ("loss/policy", self.policy_loss),
            ("loss/value", self.value_loss),
            ("loss/entropy", self.entropy),
            ("a2c/explained_variance", self.explained_variance),
            ("optim/grad_norm", self.grad_norm),
            ("optim/learning_rate", self.learning_rate),
        ]
    }
}

impl PolicyUpdate for A2c {
    fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }
    fn retune(&mut self, algorithm: &tandem_config::Algorithm) -> Result<()> {
        match algorithm {
            tandem_config::Algorithm::A2c(settings) => {
                self.config = settings.clone();
                Ok(())
            }
            other => anyhow::bail!("a2c cannot take {}'s settings", other.name()),
        }
    }
    fn optimizer_mut(&mut self) -> &mut Optimizer {
        &mut self.optimizer
    }

    fn learn(
        &mut self,
        model: &ActorCritic,
        rollout: &RolloutBuffer,
        last_values: &Tensor,
        at: UpdateAt,
        collective: &mut dyn Collective,
    ) -> Result<Scalars> {
        let gamma = self.config.gamma;
        let batch = match self.config.gae_lambda {
            Some(lambda) => rollout.gae_batch(last_values, gamma, lambda)?,
            None => rollout.n_step_batch(last_values, gamma)?,
        };
        Ok(self
            .update(model, &batch, at.progress, collective)?
            .scalars())
    }
}

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

use anyhow::{Result, ensure};
use tch::Kind;
use tch::nn::VarStore;

use super::Collective;
use super::common::{check_batch, global_batch_stats, scheduled_lr, synchronised_step};
use super::optim::{Optimizer, OptimizerSpec};
use super::rollout::Batch;
use crate::nn::{ActorCritic, EntropyUse};

/// A2C hyperparameters; defaults are Stable-Baselines3's.
#[derive(Debug, Clone, PartialEq)]
pub struct A2cConfig {
    /// Rollout length per environment between updates (n in n-step returns).
    pub num_steps: i64,
    pub learning_rate: f64,
    /// Decay the learning rate linearly to 0 over training (SB3 default: constant).
    pub anneal_lr: bool,
    pub gamma: f64,
    /// 1.0 gives the classic n-step returns; lower values give GAE(lambda) advantages (SB3's
    /// `gae_lambda`). The trainer picks `n_step_batch` or `gae_batch` accordingly.
    pub gae_lambda: f64,
    /// Entropy coefficient beta.
    pub ent_coef: f64,
    /// Value loss coefficient (SB3 applies it to the un-halved squared error).
    pub vf_coef: f64,
    pub max_grad_norm: f64,
    /// Normalise advantages over the global batch (SB3 default: off).
    pub normalize_advantages: bool,
    /// RMSprop (alpha 0.99, eps 1e-5, as SB3) or Adam.
    pub optimizer: OptimizerSpec,
}

impl Default for A2cConfig {
    fn default() -> Self {
        A2cConfig {
            num_steps: 5,
            learning_rate: 7e-4,
            anneal_lr: false,
            gamma: 0.99,
            gae_lambda: 1.0,
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            normalize_advantages: false,
            optimizer: OptimizerSpec::RmsProp {
                alpha: 0.99,
                eps: 1e-5,
            },
        }
    }
}

impl A2cConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.num_steps > 0,
            "a2c: num_steps must be positive, got {}",
            self.num_steps
        );
        ensure!(
            self.learning_rate.is_finite() && self.learning_rate > 0.0,
            "a2c: learning_rate must be positive, got {}",
            self.learning_rate
        );
        ensure!(
            (0.0..=1.0).contains(&self.gamma),
            "a2c: gamma must be in [0, 1], got {}",
            self.gamma
        );
        ensure!(
            (0.0..=1.0).contains(&self.gae_lambda),
            "a2c: gae_lambda must be in [0, 1], got {}",
            self.gae_lambda
        );
        for (name, v) in [("ent_coef", self.ent_coef), ("vf_coef", self.vf_coef)] {
            ensure!(
                v.is_finite() && v >= 0.0,
                "a2c: {name} must be >= 0, got {v}"
            );
        }
        ensure!(
            self.max_grad_norm.is_finite() && self.max_grad_norm > 0.0,
            "a2c: max_grad_norm must be positive, got {}",
            self.max_grad_norm
        );
        Ok(())
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
    config: A2cConfig,
    optimizer: Optimizer,
}

impl A2c {
    pub fn new(vs: &VarStore, config: A2cConfig) -> Result<A2c> {
        config.validate()?;
        let optimizer = Optimizer::new(vs, config.optimizer)?;
        Ok(A2c { config, optimizer })
    }

    pub fn config(&self) -> &A2cConfig {
        &self.config
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
        let lr = scheduled_lr(config.learning_rate, config.anneal_lr, progress)?;
        let global = global_batch_stats(batch, 1, batch.len(), collective)?;
        let advantages = if config.normalize_advantages {
            (&batch.advantages - global.advantage_mean) / (global.advantage_std + 1e-8)
        } else {
            batch.advantages.shallow_clone()
        };

        let evaluation = model.evaluate(
            &batch.obs,
            &batch.actions,
            EntropyUse::for_coefficient(config.ent_coef),
        )?;
        // -E[log pi(a|s) A]: the advantage is a constant weight (no gradient through it).
        let policy_loss = -(&evaluation.log_probs * advantages.detach()).mean(Kind::Float);
        let value_loss = (&batch.returns - &evaluation.values)
            .square()
            .mean(Kind::Float);
        let entropy = evaluation.entropy.mean(Kind::Float);
        let total = &policy_loss + &value_loss * config.vf_coef - &entropy * config.ent_coef;

        let position = || "the A2C step".to_string();
        let grad_norm = synchronised_step(
            &mut self.optimizer,
            &total,
            config.max_grad_norm,
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

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
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use super::Collective;
use super::common::{check_batch, global_batch_stats, scheduled_lr, synchronised_step};
use super::learner::Scalars;
use super::on_policy::{PolicyUpdate, UpdateAt, evaluate_rows};
use super::optim::{Optimizer, OptimizerSpec};
use super::rollout::{Batch, RolloutBuffer};
use crate::nn::{ActorCritic, EntropyUse};

/// A2C hyperparameters of one rank, built from the config by [`A2cConfig::from_config`] (the
/// schema holds their defaults, which follow Stable-Baselines3's).
#[derive(Debug, Clone, PartialEq)]
pub struct A2cConfig {
    /// Rollout length per environment between updates (n in n-step returns).
    pub num_steps: i64,
    pub learning_rate: f64,
    /// Decay the learning rate linearly to 0 over training (SB3 default: constant).
    pub anneal_lr: bool,
    pub gamma: f64,
    /// `None`: the classic n-step returns (Algorithm S3); `Some(lambda)`: GAE(lambda)
    /// advantages (SB3's `gae_lambda`).
    pub gae_lambda: Option<f64>,
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

impl A2cConfig {
    /// The learner's settings from the config's `algorithm "a2c"` node (the one source of their
    /// values and defaults), for `rollout` steps per environment.
    pub fn from_config(a: &tandem_config::A2c, rollout: usize) -> A2cConfig {
        A2cConfig {
            num_steps: rollout as i64,
            learning_rate: a.lr,
            anneal_lr: a.anneal_lr,
            gamma: a.gamma,
            gae_lambda: a.gae_lambda,
            ent_coef: a.entropy_coef,
            vf_coef: a.value_coef,
            max_grad_norm: a.max_grad_norm.unwrap_or(f64::INFINITY),
            normalize_advantages: a.normalize_advantages,
            optimizer: match a.optimizer {
                tandem_config::Optimizer::Rmsprop => OptimizerSpec::RmsProp {
                    alpha: a.rmsprop_alpha,
                    eps: a.optimizer_eps,
                },
                tandem_config::Optimizer::Adam => OptimizerSpec::Adam {
                    beta1: 0.9,
                    beta2: 0.999,
                    eps: a.optimizer_eps,
                },
            },
        }
    }

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
        if let Some(lambda) = self.gae_lambda {
            ensure!(
                (0.0..=1.0).contains(&lambda),
                "a2c: gae_lambda must be in [0, 1], got {lambda}"
            );
        }
        for (name, v) in [("ent_coef", self.ent_coef), ("vf_coef", self.vf_coef)] {
            ensure!(
                v.is_finite() && v >= 0.0,
                "a2c: {name} must be >= 0, got {v}"
            );
        }
        // Infinity is `max-grad-norm #null`: no clipping.
        ensure!(
            self.max_grad_norm > 0.0,
            "a2c: max_grad_norm must be positive (infinity: no clipping), got {}",
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

    /// The learner of `algorithm "a2c"` for this rank's share of the experiment.
    pub fn from_config(
        vs: &VarStore,
        a: &tandem_config::A2c,
        experiment: &tandem_config::Experiment,
    ) -> Result<A2c> {
        A2c::new(vs, A2cConfig::from_config(a, experiment.train.rollout))
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

        let evaluation = evaluate_rows(model, batch, EntropyUse::for_coefficient(config.ent_coef))?;
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

//! Deep Q-learning: the TD loss against a target network (Mnih et al. 2015), double-DQN targets
//! (van Hasselt et al. 2016), the dueling head (Wang et al. 2016, in `nn::QNetwork`), n-step
//! returns and importance-weighted losses for prioritized replay (Schaul et al. 2016), the
//! target-network update (hard copy or Polyak averaging) and the epsilon schedule.
//!
//! Under DDP each rank computes the loss on its own per-rank batch; gradients are averaged over
//! ranks before the step, so every rank takes the same step. The target network is not trained:
//! it is updated from the (identical) online parameters at identical gradient-step counts, so it
//! stays identical on every rank without any collective.

pub mod q_network;

use anyhow::{Result, ensure};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::algo::Collective;
use crate::algo::actions::ActionBatch;
use crate::algo::common::synchronised_step;
use crate::algo::learner::{Scalars, Setting};
use crate::algo::off_policy::{ActAt, OffPolicy, OffPolicyRule, ReturnSpec, Schedule};
use crate::algo::optim::{Optimizer, OptimizerSpec, TargetNetwork};
use crate::algo::storage::host_rows::actions_to_host;
use crate::nn::{ActorCriticSpec, named_parameters, trainable_parameters_in_order};
use q_network::{QHead, QNetwork};

/// The learner's settings: the config's `algorithm "dqn"` section, as the user wrote it.
pub use tandem_config::Dqn as Settings;
// The TD loss applied to each error δ: Huber (quadratic within |δ| <= 1, linear outside: the
// error clipping of Mnih et al. 2015) or the squared error.
use tandem_config::Loss;

/// Adam's epsilon for DQN: torch's default, as in CleanRL's and SB3's DQN.
const ADAM_EPS: f64 = 1e-8;

pub use crate::algo::off_policy::TransitionBatch;

#[derive(Debug, Clone, PartialEq)]
pub struct DqnStats {
    pub loss: f64,
    pub q_mean: f64,
    pub td_abs_mean: f64,
    pub grad_norm: f64,
    pub target_updated: bool,
    /// |δ| per sample, for the replay priorities.
    pub td_errors: Vec<f32>,
}

impl DqnStats {
    /// Whether the step's loss or gradient left the finite numbers: the run stops.
    pub fn diverged(&self) -> bool {
        !self.loss.is_finite() || !self.grad_norm.is_finite()
    }
}

/// ε at `step` of `total` steps: linear from `start` to `end` over the first `fraction` of
/// training, then constant (Mnih et al. 2015, Methods: "annealed linearly").
pub fn epsilon_at(start: f64, end: f64, fraction: f64, step: u64, total: u64) -> f64 {
    let horizon = (fraction * total as f64).max(1.0);
    let t = (step as f64 / horizon).min(1.0);
    start + (end - start) * t
}

/// A value annealed linearly from `start` to `end` over training progress in [0, 1]
/// (the importance-sampling exponent β, Schaul et al. 2016, section 3.4).
pub fn annealed(start: f64, end: f64, progress: f64) -> f64 {
    start + (end - start) * progress.clamp(0.0, 1.0)
}

/// Prioritised replay's importance-sampling exponent β at `step` of `total` steps: annealed
/// from its start to its end over the whole run (Schaul et al. 2016, section 3.4).
pub fn beta_at(cfg: &Settings, step: u64, total: u64) -> f64 {
    annealed(
        cfg.priority_beta_start,
        cfg.priority_beta_end,
        step as f64 / total as f64,
    )
}

pub struct Dqn {
    config: Settings,
    online: QNetwork,
    target: QNetwork,
    online_vs: VarStore,
    target_vs: VarStore,
    /// `target_vs`'s variables in one buffer mirroring the optimizer's: θ⁻.
    target_params: TargetNetwork,
    optimizer: Optimizer,
    gradient_steps: u64,
}

impl Dqn {
    /// Builds the online network (initialised from the current torch seed) and a target network
    /// equal to it.
    pub fn new(
        device: Device,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        num_actions: i64,
        config: Settings,
    ) -> Result<Dqn> {
        let head = if config.dueling {
            QHead::Dueling
        } else {
            QHead::Plain
        };
        // The online network and its target: the same architecture in two VarStores.
        let build = |vs: &VarStore| {
            QNetwork::new(
                &vs.root(),
                &spec.network,
                &spec.init,
                spec.scale_pixels,
                obs_shape,
                num_actions,
                head,
            )
        };
        let online_vs = VarStore::new(device);
        let online = build(&online_vs)?;
        let mut target_vs = VarStore::new(device);
        let target = build(&target_vs)?;
        target_vs.freeze();
        let optimizer = Optimizer::new(
            &online_vs,
            OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: ADAM_EPS,
            },
        )?;
        let target_params = TargetNetwork::of_group(&optimizer, 0, &target_vs)?;
        let mut dqn = Dqn {
            config,
            online,
            target,
            online_vs,
            target_vs,
            target_params,
            optimizer,
            gradient_steps: 0,
        };
        dqn.copy_to_target(1.0);
        Ok(dqn)
    }

    pub fn online_vs(&self) -> &VarStore {
        &self.online_vs
    }

    pub fn target_vs(&self) -> &VarStore {
        &self.target_vs
    }

    pub fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }

    pub fn optimizer_mut(&mut self) -> &mut Optimizer {
        &mut self.optimizer
    }

    /// The settings it was built with: the config's `algorithm "dqn"` section.
    pub fn config(&self) -> &Settings {
        &self.config
    }

    pub fn gradient_steps(&self) -> u64 {
        self.gradient_steps
    }

    pub fn set_gradient_steps(&mut self, steps: u64) {
        self.gradient_steps = steps;
    }

    /// Q(s, ·) of the online network, without gradients.
    pub fn q_values(&self, obs: &Tensor) -> Result<Tensor> {
        tch::no_grad(|| self.online.forward(obs))
    }

    /// ε-greedy actions: argmax_a Q(s, a), replaced by a uniform action with probability ε.
    /// Randomness comes from torch's generator (seeded by the trainer per iteration).
    pub fn act(&self, obs: &Tensor, epsilon: f64) -> Result<Tensor> {
        let q = self.q_values(obs)?;
        let greedy = q.argmax(-1, false);
        if epsilon <= 0.0 {
            return Ok(greedy);
        }
        let n = q.size()[0];
        let num_actions = q.size()[1];
        let random = Tensor::randint(num_actions, [n], (Kind::Int64, q.device()));
        let explore = Tensor::rand([n], (Kind::Float, q.device())).lt(epsilon);
        Ok(random.where_self(&explore, &greedy))
    }

    /// Every online then every target variable, by name (`model.*`, `target.*`), for
    /// checkpoints and the cross-rank fingerprint.
    pub fn named_state(&self) -> Vec<(String, Tensor)> {
        let mut named: Vec<(String, Tensor)> = named_parameters(&self.online_vs, "model");
        named.extend(named_parameters(&self.target_vs, "target"));
        named
    }

    /// `θ⁻ ← τ θ + (1 - τ) θ⁻` (τ = 1: the hard copy of Mnih et al. 2015).
    fn copy_to_target(&mut self, tau: f64) {
        self.target_params.polyak(tau);
    }

    /// The per-sample TD errors δ = y - Q(s, a) with
    /// y = G + γ^m Q⁻(s', argmax_a Q(s', a)) (double DQN, van Hasselt et al. 2016, eq. 4) or
    /// y = G + γ^m max_a Q⁻(s', a) (Mnih et al. 2015, Methods: the loss L_i(θ_i)), where G is the n-step return and
    /// γ^m (0 at a terminal state) comes with the batch; and the importance-weighted loss.
    pub fn td_loss(&self, batch: &TransitionBatch) -> Result<(Tensor, Tensor, Tensor)> {
        let q = self.online.forward(&batch.obs)?;
        let q_taken = q
            .gather(1, &batch.actions.unsqueeze(1), false)
            .squeeze_dim(1);
        let target = tch::no_grad(|| -> Result<Tensor> {
            let next_target = self.target.forward(&batch.next_obs)?;
            let next_value = if self.config.double {
                let best = self.online.forward(&batch.next_obs)?.argmax(-1, true);
                next_target.gather(1, &best, false).squeeze_dim(1)
            } else {
                next_target.amax(-1, false)
            };
            Ok(&batch.returns + &batch.discounts * next_value)
        })?;
        let delta = &target - &q_taken;
        let per_sample = match self.config.loss {
            Loss::Huber => q_taken.huber_loss(&target, tch::Reduction::None, 1.0),
            Loss::Mse => delta.square(),
        };
        // Prioritized replay scales each sample's loss by its importance weight (Schaul et al.
        // 2016, Algorithm 1, line 11); uniform replay passes weights of 1.
        let loss = (&batch.weights * per_sample).mean(Kind::Float);
        Ok((loss, delta.detach(), q_taken.detach()))
    }

    /// One gradient step on this rank's batch (gradients averaged over ranks), then the target
    /// update when the gradient-step count reaches a multiple of `target_every`.
    pub fn update(
        &mut self,
        batch: &TransitionBatch,
        collective: &mut dyn Collective,
    ) -> Result<DqnStats> {
        let (loss, delta, q_taken) = self.td_loss(batch)?;
        let steps = self.gradient_steps;
        let grad_norm = synchronised_step(
            &mut self.optimizer,
            &loss,
            self.config.max_grad_norm.unwrap_or(f64::INFINITY),
            self.config.lr,
            collective,
            &|| format!("dqn gradient step {steps}"),
        )?;
        self.gradient_steps += 1;
        let target_updated = self.gradient_steps.is_multiple_of(self.config.target_every);
        if target_updated {
            self.copy_to_target(self.config.tau);
        }
        let td_errors = Vec::<f32>::try_from(delta.abs().to_device(Device::Cpu))?;
        Ok(DqnStats {
            loss: loss.double_value(&[]),
            q_mean: q_taken.mean(Kind::Float).double_value(&[]),
            td_abs_mean: td_errors.iter().map(|&d| d as f64).sum::<f64>()
                / td_errors.len().max(1) as f64,
            grad_norm,
            target_updated,
            td_errors,
        })
    }
}

/// DQN as the off-policy skeleton's rule: ε-greedy acting on the ε schedule, one TD update per
/// gradient step, priorities back to the replay, β annealed for prioritised replay.
pub struct DqnRule {
    dqn: Dqn,
    latest: Option<DqnStats>,
    epsilon: f64,
    beta: f64,
}

impl DqnRule {
    /// The off-policy learner of `algorithm "dqn"`.
    pub fn learner(setting: &Setting, cfg: &tandem_config::Dqn) -> Result<OffPolicy<DqnRule>> {
        let (spec, obs_shape) =
            crate::algo::learner::network_for(setting.experiment, setting.envs)?;
        let dqn = Dqn::new(
            setting.device,
            &spec,
            &obs_shape,
            setting.envs.num_actions() as i64,
            cfg.clone(),
        )?;
        let rule = DqnRule {
            dqn,
            latest: None,
            epsilon: cfg.epsilon_start,
            beta: cfg.priority_beta_start,
        };
        let schedule = Schedule {
            learning_starts: cfg.learning_starts,
            train_frequency: cfg.train_frequency,
            gradient_steps: cfg.gradient_steps,
            checkpoint_replay: cfg.checkpoint_replay,
        };
        let returns = ReturnSpec {
            n_step: cfg.n_step,
            gamma: cfg.gamma,
            priority_alpha: cfg.prioritized.then_some(cfg.priority_alpha),
        };
        OffPolicy::new(setting, rule, schedule, returns)
    }
}

impl OffPolicyRule for DqnRule {
    fn act(&mut self, obs: &Tensor, at: ActAt) -> Result<ActionBatch> {
        let cfg = self.dqn.config();
        self.epsilon = epsilon_at(
            cfg.epsilon_start,
            cfg.epsilon_end,
            cfg.epsilon_fraction,
            at.global_step,
            at.total_steps,
        );
        Ok(ActionBatch::Discrete(actions_to_host(
            &self.dqn.act(obs, self.epsilon)?,
        )?))
    }

    fn sampling_beta(&mut self, global_step: u64, total_steps: u64) -> f64 {
        self.beta = beta_at(self.dqn.config(), global_step, total_steps);
        self.beta
    }

    fn learn(
        &mut self,
        batch: &TransitionBatch,
        collective: &mut dyn Collective,
    ) -> Result<Option<Vec<f32>>> {
        ensure!(
            batch.actions.kind() == Kind::Int64,
            "dqn needs discrete actions, got a batch of {:?}",
            batch.actions.kind()
        );
        let mut stats = self.dqn.update(batch, collective)?;
        let td_errors = std::mem::take(&mut stats.td_errors);
        self.latest = Some(stats);
        Ok(Some(td_errors))
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        trainable_parameters_in_order(self.dqn.online_vs())
    }

    fn networks(&self) -> Vec<(String, Tensor)> {
        self.dqn.named_state()
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.dqn.optimizer().state_tensors()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("optimizer_steps", self.dqn.optimizer().step_count()),
            ("gradient_steps", self.dqn.gradient_steps()),
        ]
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        match name {
            "optimizer_steps" => self.dqn.optimizer_mut().set_step_count(value),
            "gradient_steps" => self.dqn.set_gradient_steps(value),
            other => anyhow::bail!("the DQN learner has no counter {other}"),
        }
        Ok(())
    }

    fn scalars(&self, sampleable: usize) -> Scalars {
        let mut s: Scalars = vec![
            ("dqn/epsilon", self.epsilon),
            ("dqn/gradient_steps", self.dqn.gradient_steps() as f64),
            ("replay/sampleable", sampleable as f64),
        ];
        if self.dqn.config().prioritized {
            s.push(("replay/beta", self.beta));
        }
        if let Some(st) = &self.latest {
            s.push(("loss/td", st.loss));
            s.push(("dqn/q_mean", st.q_mean));
            s.push(("dqn/td_abs_mean", st.td_abs_mean));
            s.push(("optim/grad_norm", st.grad_norm));
        }
        s
    }

    fn diverged(&self) -> bool {
        self.latest.as_ref().is_some_and(DqnStats::diverged)
    }

    fn gradient_steps(&self) -> u64 {
        self.dqn.gradient_steps()
    }
}

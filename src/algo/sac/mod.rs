//! Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep
//! RL with a Stochastic Actor"), with twin Q-networks and Polyak-averaged targets, and the
//! temperature tuned towards a target entropy ("Soft Actor-Critic Algorithms and Applications",
//! Haarnoja et al. 2018b, section 5). Actions live in the unit box; the learner scales them.
//!
//! One gradient step is ONE backward of `J_Q + J_π + J(α)` and ONE gradient sync over every
//! trainable parameter, then three Adam steps (actor, critics, temperature, each with its own
//! learning rate). The three losses touch disjoint parameters: the critic target is computed
//! without gradients, `J_π` reads Q through detached critic weights, and `α` enters `J_Q` and
//! `J_π` detached. So the summed backward gives each network the gradient of its own loss, and
//! DDP all-reduces once per step instead of three times (docs/design.md). For MLP networks on one
//! CPU thread the same gradients are worked out by hand instead ([`crate::algo::sac::host`]).
//!
//! The noise of an update (ε for the next-state actions and for the current-state actions) is an
//! input drawn per sample, so a rank's half of a global batch brings its half of the noise.

pub mod host;
pub mod networks;

use anyhow::{Result, bail};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::algo::Collective;
use crate::algo::actions::ActionBatch;
use crate::algo::common::accumulate_gradients;
use crate::algo::learner::{Scalars, Setting};
use crate::algo::off_policy::box_rule::{
    BoxActing, BoxLearner, box_learner_methods, one_step_schedule,
};
use crate::algo::off_policy::{ActAt, OffPolicy, OffPolicyRule, TransitionBatch};
use crate::algo::optim::{Optimizer, OptimizerSpec, TargetNetwork};
pub use crate::algo::sac::host::{HostSacStep, SacBatch, SacLossValues};
use crate::nn::host_mlp::host_passes_pay;
use crate::nn::{InitSpec, NetworkSpec, named_parameters};
use networks::{QInput, QMlp, SquashedGaussianActor};

/// Adam's epsilon: torch's default, as CleanRL's and SB3's SAC use.
const ADAM_EPS: f64 = 1e-8;

/// How the temperature α is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Temperature {
    Fixed(f64),
    /// Learned from `initial`, towards `target_entropy` (in the unit box).
    Tuned {
        initial: f64,
        target_entropy: f64,
    },
}

/// The learner's settings: the config's `algorithm "sac"` section, as the user wrote it.
pub use tandem_config::Sac as Settings;

impl Temperature {
    /// α as the settings give it, for `action_dim` action dimensions (the "auto" target
    /// entropy is `-action_dim`, as in Haarnoja et al. 2018b).
    pub fn of(config: &Settings, action_dim: i64) -> Temperature {
        use tandem_config::AutoOr;
        let target_entropy = match config.target_entropy {
            AutoOr::Auto => -(action_dim as f64),
            AutoOr::Value(v) => v,
        };
        match config.alpha {
            AutoOr::Auto => Temperature::Tuned {
                initial: config.initial_alpha,
                target_entropy,
            },
            AutoOr::Value(alpha) => Temperature::Fixed(alpha),
        }
    }
}

/// The three losses of one step (scalars with their graphs) and what is logged of them.
pub struct SacLosses {
    pub critic: Tensor,
    pub actor: Tensor,
    /// Zero (without a graph) when α is fixed.
    pub alpha: Tensor,
    pub q_mean: Tensor,
    /// `-mean log π(ã|s)` over the batch, in the unit box.
    pub entropy: Tensor,
}

impl SacLosses {
    /// The values, read out.
    pub fn values(&self) -> SacLossValues {
        SacLossValues {
            critic: self.critic.double_value(&[]),
            actor: self.actor.double_value(&[]),
            alpha: self.alpha.double_value(&[]),
            q_mean: self.q_mean.double_value(&[]),
            entropy: self.entropy.double_value(&[]),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SacStats {
    pub critic_loss: f64,
    pub actor_loss: f64,
    pub alpha_loss: f64,
    pub alpha: f64,
    pub q_mean: f64,
    pub entropy: f64,
    pub actor_grad_norm: f64,
    pub critic_grad_norm: f64,
}

impl SacStats {
    /// Whether the step's losses or temperature left the finite numbers: the run stops.
    pub fn diverged(&self) -> bool {
        !(self.critic_loss.is_finite() && self.actor_loss.is_finite() && self.alpha.is_finite())
    }
}

pub struct Sac {
    config: Settings,
    /// α, fixed or tuned towards its target entropy (from the settings and the action space).
    temperature: Temperature,
    actor: SquashedGaussianActor,
    critics: [QMlp; 2],
    targets: [QMlp; 2],
    actor_vs: VarStore,
    critic_vs: VarStore,
    target_vs: VarStore,
    /// `target_vs`'s variables in one buffer mirroring the critics' optimizer group: θ̄.
    target_params: TargetNetwork,
    alpha_vs: VarStore,
    log_alpha: Tensor,
    /// One Adam over the groups `actor`, `critic` and (when α is tuned) `alpha`, each with its
    /// own learning rate and step count, in one flat gradient buffer that DDP all-reduces.
    optimizer: Optimizer,
    /// The groups' indices and learning rates, in the optimizer's order.
    groups: Vec<(usize, f64)>,
    gradient_steps: u64,
    /// The host step ([`HostSacStep`]), built at the first update where it applies (MLP
    /// networks on the CPU, one compute thread); `Some(None)` where it does not.
    host: Option<Option<HostSacStep>>,
}

/// The optimizer groups, in order; `alpha` only when α is tuned.
pub const GROUPS: [&str; 3] = ["actor", "critic", "alpha"];

impl Sac {
    /// Builds the actor, the twin critics (initialised from the current torch seed, in that
    /// order), targets equal to the critics, and `log α`.
    pub fn new(
        device: Device,
        network: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
        action_dim: i64,
        config: Settings,
    ) -> Result<Sac> {
        let temperature = Temperature::of(&config, action_dim);
        let obs_len: i64 = obs_shape.iter().product();
        let actor_vs = VarStore::new(device);
        let actor =
            SquashedGaussianActor::new(&actor_vs.root(), network, init, obs_shape, action_dim)?;
        let critic_pair = |vs: &VarStore| -> Result<[QMlp; 2]> {
            Ok([
                QMlp::new(&(vs.root() / "q1"), network, init, obs_len, action_dim)?,
                QMlp::new(&(vs.root() / "q2"), network, init, obs_len, action_dim)?,
            ])
        };
        let critic_vs = VarStore::new(device);
        let critics = critic_pair(&critic_vs)?;
        let mut target_vs = VarStore::new(device);
        let targets = critic_pair(&target_vs)?;
        target_vs.freeze();
        let mut alpha_vs = VarStore::new(device);
        let (initial, tuned) = match temperature {
            Temperature::Fixed(alpha) => (alpha, false),
            Temperature::Tuned { initial, .. } => (initial, true),
        };
        let log_alpha = alpha_vs
            .root()
            .var("log_alpha", &[1], tch::nn::Init::Const(initial.ln()));
        if !tuned {
            alpha_vs.freeze();
        }
        let mut stores = vec![("actor", &actor_vs), ("critic", &critic_vs)];
        let mut lrs = vec![config.actor_lr, config.critic_lr];
        if tuned {
            stores.push(("alpha", &alpha_vs));
            lrs.push(config.alpha_lr);
        }
        let optimizer = Optimizer::grouped(
            &stores,
            OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: ADAM_EPS,
            },
        )?;
        let groups = lrs.into_iter().enumerate().collect();
        let critic_group = optimizer.group(GROUPS[1])?;
        let target_params = TargetNetwork::of_group(&optimizer, critic_group, &target_vs)?;
        let mut sac = Sac {
            config,
            temperature,
            actor,
            critics,
            targets,
            actor_vs,
            critic_vs,
            target_vs,
            target_params,
            alpha_vs,
            log_alpha,
            optimizer,
            groups,
            gradient_steps: 0,
            host: None,
        };
        sac.update_targets(1.0);
        Ok(sac)
    }

    pub fn actor(&self) -> &SquashedGaussianActor {
        &self.actor
    }

    /// The twin critics' smaller Q(s, a) `[B]` for unit-box actions `a` (what an exported
    /// policy reports as its value at its own action).
    pub fn min_q(&self, obs: &Tensor, action: &Tensor) -> Tensor {
        let input = QInput::new(obs, action);
        let [q1, q2] = &self.critics;
        q1.forward(&input).minimum(&q2.forward(&input))
    }

    /// The host form of this learner's gradient step ([`HostSacStep`]), reading its networks in
    /// place; `None` where the actor is not a plain MLP.
    pub fn host_step(&self) -> Result<Option<HostSacStep>> {
        HostSacStep::new(&self.actor, &self.critics, &self.targets, &self.log_alpha)
    }

    /// The entropy α is tuned towards; `None` where α is fixed.
    pub fn target_entropy(&self) -> Option<f64> {
        match self.temperature {
            Temperature::Tuned { target_entropy, .. } => Some(target_entropy),
            Temperature::Fixed(_) => None,
        }
    }

    /// The current temperature α = exp(log α).
    pub fn alpha(&self) -> f64 {
        self.log_alpha.exp().double_value(&[0])
    }

    /// Each optimizer group's gradients, flattened, in the optimizer's order (actor, critics,
    /// then `log α` where it is tuned): what a test compares between two ways of one step.
    pub fn group_gradients(&self) -> Result<Vec<Vec<f32>>> {
        let flat = |params: &[Tensor]| -> Result<Vec<f32>> {
            let mut values = Vec::new();
            for p in params {
                values.extend(Vec::<f32>::try_from(p.grad().flatten(0, -1))?);
            }
            Ok(values)
        };
        GROUPS
            .iter()
            .filter_map(|g| self.group_parameters(g).ok())
            .map(flat)
            .collect()
    }

    /// `θ̄ ← τ θ + (1 - τ) θ̄` for both critics (Haarnoja et al. 2018, Algorithm 1).
    fn update_targets(&mut self, tau: f64) {
        self.target_params.polyak(tau);
    }

    /// The three losses on this rank's batch, each a mean over its samples.
    pub fn losses(&self, batch: &SacBatch) -> Result<SacLosses> {
        let alpha = self.log_alpha.exp().detach();
        let [q1, q2] = &self.critics;
        // The soft Bellman target (2018a eq. 3 and 5 with the twin-Q minimum of section 4.2):
        // y = r + γ (min_i Q̄_i(s', a') - α log π(a'|s')), a' ~ π(·|s').
        let target = tch::no_grad(|| -> Result<Tensor> {
            let next = self.actor.sample(&batch.next_obs, &batch.eps_next)?;
            let [t1, t2] = &self.targets;
            let next_input = QInput::new(&batch.next_obs, &next.action);
            let q_next = t1.forward(&next_input).minimum(&t2.forward(&next_input));
            let soft_value = q_next - &alpha * &next.log_prob;
            Ok(&batch.rewards + &batch.discounts * soft_value)
        })?;
        // J_Q (eq. 5): squared soft Bellman residual of each critic.
        let taken = QInput::new(&batch.obs, &batch.actions);
        let q1_taken = q1.forward(&taken);
        let q2_taken = q2.forward(&taken);
        let critic = (&q1_taken - &target).square().mean(Kind::Float)
            + (&q2_taken - &target).square().mean(Kind::Float);
        // J_π (eq. 12): E[α log π(ã|s) - min_i Q_i(s, ã)], ã = tanh(f(ε; s)), Q read through
        // detached weights so that this loss moves the actor only.
        let now = self.actor.sample(&batch.obs, &batch.eps_now)?;
        let now_input = QInput::new(&batch.obs, &now.action);
        let q_pi = q1
            .forward_detached(&now_input)
            .minimum(&q2.forward_detached(&now_input));
        let actor = (&alpha * &now.log_prob - q_pi).mean(Kind::Float);
        // J(α) (2018b eq. 18): E[-α log π(ã|s) - α H̄], with log π detached.
        let alpha_loss = match self.temperature {
            Temperature::Tuned { target_entropy, .. } => {
                (-self.log_alpha.exp() * (now.log_prob.detach() + target_entropy)).mean(Kind::Float)
            }
            Temperature::Fixed(_) => Tensor::zeros([], (Kind::Float, self.log_alpha.device())),
        };
        Ok(SacLosses {
            critic,
            actor,
            alpha: alpha_loss,
            q_mean: ((q1_taken.detach() + q2_taken.detach()) * 0.5).mean(Kind::Float),
            entropy: -now.log_prob.detach().mean(Kind::Float),
        })
    }

    /// One gradient step: one backward of the summed losses (or the host step's same
    /// gradients), one sync of every gradient, a clip per network, then each optimizer steps
    /// with its own learning rate, then the targets move.
    pub fn update(
        &mut self,
        batch: &SacBatch,
        collective: &mut dyn Collective,
    ) -> Result<SacStats> {
        if self.host.is_none() {
            let applies = host_passes_pay() && self.log_alpha.device() == Device::Cpu;
            self.host = Some(if applies { self.host_step()? } else { None });
        }
        self.optimizer.zero_grad();
        let target_entropy = self.target_entropy();
        let losses = match self.host.as_mut().and_then(Option::as_mut) {
            Some(host) => {
                collective.before_backward();
                host.accumulate(batch, target_entropy)?
            }
            None => {
                let losses = self.losses(batch)?;
                let total = &losses.critic + &losses.actor + &losses.alpha;
                accumulate_gradients(&total, true, collective);
                losses.values()
            }
        };
        let params = self.trainable_parameters();
        collective.sync_gradients(&params)?;
        let clip = self.config.max_grad_norm.unwrap_or(f64::INFINITY);
        let actor_grad_norm = self.optimizer.clip_group_grad_norm(0, clip)?;
        let critic_grad_norm = self.optimizer.clip_group_grad_norm(1, clip)?;
        if !actor_grad_norm.is_finite() || !critic_grad_norm.is_finite() {
            bail!(
                "update: the gradient norm is {actor_grad_norm} (actor), {critic_grad_norm} \
                 (critics) at sac gradient step {}; the loss diverged",
                self.gradient_steps
            );
        }
        if collective.steps_locally() {
            self.optimizer.step_groups(&self.groups)?;
        }
        collective.after_step(&params)?;
        self.gradient_steps += 1;
        self.update_targets(self.config.tau);
        Ok(SacStats {
            critic_loss: losses.critic,
            actor_loss: losses.actor,
            alpha_loss: losses.alpha,
            alpha: self.alpha(),
            q_mean: losses.q_mean,
            entropy: losses.entropy,
            actor_grad_norm,
            critic_grad_norm,
        })
    }
}

impl BoxLearner for Sac {
    fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }

    fn gradient_steps(&self) -> u64 {
        self.gradient_steps
    }

    fn counters_mut(&mut self) -> (&mut u64, &mut Optimizer) {
        (&mut self.gradient_steps, &mut self.optimizer)
    }

    fn named_state(&self) -> Vec<(String, Tensor)> {
        let mut named = named_parameters(&self.actor_vs, "model.actor");
        named.extend(named_parameters(&self.critic_vs, "model.critic"));
        named.extend(named_parameters(&self.alpha_vs, "model.alpha"));
        named.extend(named_parameters(&self.target_vs, "target.critic"));
        named
    }
}

/// SAC as the off-policy skeleton's rule: uniform actions in the bounds while warming up, then
/// the stochastic actor; one SAC update per gradient step, its noise from torch's generator
/// seeded per (seed, rank, gradient step).
pub struct SacRule {
    sac: Sac,
    acting: BoxActing,
    latest: Option<SacStats>,
}

impl SacRule {
    /// The off-policy learner of `algorithm "sac"`; an error for a discrete or unbounded box.
    pub fn learner(setting: &Setting, cfg: &tandem_config::Sac) -> Result<OffPolicy<SacRule>> {
        let acting = BoxActing::new("sac", setting)?;
        let (spec, obs_shape) =
            crate::algo::learner::network_for(setting.experiment, setting.envs)?;
        let sac = Sac::new(
            setting.device,
            &spec.network,
            &spec.init,
            &obs_shape,
            acting.action_dim,
            cfg.clone(),
        )?;
        let rule = SacRule {
            sac,
            acting,
            latest: None,
        };
        let (schedule, returns) = one_step_schedule(
            cfg.learning_starts,
            cfg.train_frequency,
            cfg.gradient_steps,
            cfg.checkpoint_replay,
            cfg.gamma,
        );
        OffPolicy::new(setting, rule, schedule, returns)
    }

    pub fn sac(&self) -> &Sac {
        &self.sac
    }
}

impl OffPolicyRule for SacRule {
    fn act(&mut self, obs: &Tensor, at: ActAt) -> Result<ActionBatch> {
        let actor = self.sac.actor();
        let dim = self.acting.action_dim;
        self.acting.act(obs, at, || {
            let eps = Tensor::randn([obs.size()[0], dim], (Kind::Float, obs.device()));
            tch::no_grad(|| actor.sample_action(obs, &eps))
        })
    }

    fn learn(
        &mut self,
        batch: &TransitionBatch,
        collective: &mut dyn Collective,
    ) -> Result<Option<Vec<f32>>> {
        let step = self.sac.gradient_steps();
        let actions = self.acting.prepare_update("sac", batch, step)?;
        let shape = actions.size();
        let options = (Kind::Float, actions.device());
        let sac_batch = SacBatch {
            obs: batch.obs.shallow_clone(),
            actions,
            rewards: batch.returns.shallow_clone(),
            discounts: batch.discounts.shallow_clone(),
            next_obs: batch.next_obs.shallow_clone(),
            eps_next: Tensor::randn(shape.as_slice(), options),
            eps_now: Tensor::randn(shape.as_slice(), options),
        };
        self.latest = Some(self.sac.update(&sac_batch, collective)?);
        Ok(None)
    }

    fn scalars(&self, sampleable: usize) -> Scalars {
        let mut s: Scalars = vec![
            ("sac/gradient_steps", self.sac.gradient_steps() as f64),
            ("sac/alpha", self.sac.alpha()),
            ("replay/sampleable", sampleable as f64),
        ];
        if let Some(st) = &self.latest {
            s.push(("loss/critic", st.critic_loss));
            s.push(("loss/actor", st.actor_loss));
            s.push(("loss/alpha", st.alpha_loss));
            s.push(("sac/q_mean", st.q_mean));
            s.push(("sac/entropy", st.entropy));
            s.push(("optim/actor_grad_norm", st.actor_grad_norm));
            s.push(("optim/critic_grad_norm", st.critic_grad_norm));
        }
        s
    }

    fn diverged(&self) -> bool {
        self.latest.as_ref().is_some_and(SacStats::diverged)
    }

    box_learner_methods!(sac, "sac");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, Init};
    use tandem_config::AutoOr;

    fn sac(alpha: tandem_config::AutoOr, initial_alpha: f64) -> Sac {
        tch::manual_seed(3);
        Sac::new(
            Device::Cpu,
            &NetworkSpec::Mlp {
                hidden: vec![8],
                activation: Activation::Tanh,
            },
            &InitSpec {
                scheme: Init::Default,
                torso_gain: 1.0,
                policy_gain: 1.0,
                value_gain: 1.0,
            },
            &[3],
            2,
            Settings {
                actor_lr: 1e-3,
                critic_lr: 1e-3,
                alpha_lr: 1e-3,
                tau: 0.005,
                alpha,
                initial_alpha,
                target_entropy: tandem_config::AutoOr::Value(-2.0),
                max_grad_norm: None,
                ..Settings::default()
            },
        )
        .unwrap()
    }

    /// Two SACs alike: the second's variables copied from the first's, since two seeded builds
    /// differ where another test draws from libtorch's one generator on another thread
    /// meanwhile (the suite runs tests in parallel).
    fn twins(alpha: tandem_config::AutoOr, initial_alpha: f64) -> (Sac, Sac) {
        let first = sac(alpha, initial_alpha);
        let mut second = sac(alpha, initial_alpha);
        tch::no_grad(|| {
            let pairs = second
                .optimizer
                .parameters()
                .iter()
                .zip(first.optimizer.parameters());
            for (to, from) in pairs {
                to.shallow_clone().copy_(from);
            }
            second.log_alpha.shallow_clone().copy_(&first.log_alpha);
        });
        // Targets start as their critics, as `Sac::new` makes them.
        second.target_params.polyak(1.0);
        (first, second)
    }

    fn batch() -> SacBatch {
        let f = (Kind::Float, Device::Cpu);
        let grid = |k: i64, scale: f64| Tensor::arange(6 * k, f).reshape([6, k]) * scale;
        SacBatch {
            obs: grid(3, 0.4).sin(),
            actions: grid(2, 0.8).cos() * 0.7,
            rewards: Tensor::arange(6, f).cos(),
            discounts: Tensor::full([6], 0.99, f),
            next_obs: grid(3, 0.5).cos(),
            eps_next: grid(2, 1.7).sin(),
            eps_now: grid(2, 0.3).cos(),
        }
    }

    /// Each group's gradient after a backward of `loss`.
    fn gradients(sac: &mut Sac, loss: &Tensor) -> Vec<Vec<f32>> {
        sac.optimizer.zero_grad();
        loss.backward();
        sac.group_gradients().unwrap()
    }

    #[test]
    fn each_network_gets_exactly_the_gradient_of_its_own_loss_from_the_summed_backward() {
        let mut sac = sac(tandem_config::AutoOr::Auto, 0.3);
        let b = batch();
        let l = sac.losses(&b).unwrap();
        let summed = gradients(&mut sac, &(&l.critic + &l.actor + &l.alpha));
        let critic = sac.losses(&b).unwrap();
        let critic_alone = gradients(&mut sac, &critic.critic);
        assert_eq!(summed[1], critic_alone[1], "the critics' gradient");
        assert!(
            critic_alone[0].iter().all(|&g| g == 0.0),
            "critic loss reaches the actor"
        );
        let l = sac.losses(&b).unwrap();
        let actor_alone = gradients(&mut sac, &l.actor);
        assert_eq!(summed[0], actor_alone[0], "the actor's gradient");
        assert!(
            actor_alone[1].iter().all(|&g| g == 0.0),
            "actor loss reaches the critics"
        );
        let l = sac.losses(&b).unwrap();
        let alpha_alone = gradients(&mut sac, &l.alpha);
        assert_eq!(summed[2], alpha_alone[2], "log alpha's gradient");
        assert!(summed[2][0] != 0.0 && summed[1].iter().any(|&g| g != 0.0));
    }

    /// The update's one backward (autograd's here, the host step forced off) leaves every
    /// network the gradient of the summed losses, unclipped without a limit, and counts its
    /// steps; its statistics are the losses it stepped on.
    #[test]
    fn an_update_steps_on_the_gradient_of_the_summed_losses_and_counts_its_steps() {
        let (mut updated, mut by_hand) = twins(AutoOr::Auto, 0.3);
        updated.host = Some(None);
        let b = batch();
        let l = by_hand.losses(&b).unwrap();
        let expected = gradients(&mut by_hand, &(&l.critic + &l.actor + &l.alpha));
        let stats = updated.update(&b, &mut crate::algo::Local).unwrap();
        assert_eq!(updated.group_gradients().unwrap(), expected);
        assert_eq!(stats.critic_loss, l.critic.double_value(&[]));
        assert_eq!(stats.actor_loss, l.actor.double_value(&[]));
        updated.update(&b, &mut crate::algo::Local).unwrap();
        assert_eq!(updated.gradient_steps(), 2);
    }

    /// A critic that diverges alone (a reward that is not a number reaches its target, not the
    /// actor's loss) stops the step, as an actor that diverges would.
    #[test]
    fn a_critic_that_diverges_alone_stops_the_step() {
        let mut sac = sac(AutoOr::Auto, 0.3);
        sac.host = Some(None);
        let mut b = batch();
        b.rewards = b.rewards.fill_(f64::NAN);
        let err = sac.update(&b, &mut crate::algo::Local).unwrap_err();
        assert!(
            err.to_string().contains("critics) at sac gradient step 0"),
            "{err}"
        );
        assert_eq!(sac.gradient_steps(), 0);
    }

    #[test]
    fn a_step_diverged_where_a_loss_or_the_temperature_is_not_finite() {
        let finite = SacStats {
            critic_loss: 1.0,
            actor_loss: -2.0,
            alpha_loss: 0.1,
            alpha: 0.2,
            q_mean: 3.0,
            entropy: 1.0,
            actor_grad_norm: 0.5,
            critic_grad_norm: 0.5,
        };
        assert!(!finite.diverged());
        for bad in [
            SacStats {
                critic_loss: f64::NAN,
                ..finite.clone()
            },
            SacStats {
                actor_loss: f64::INFINITY,
                ..finite.clone()
            },
            SacStats {
                alpha: f64::NAN,
                ..finite.clone()
            },
        ] {
            assert!(bad.diverged(), "{bad:?}");
        }
    }

    /// "auto" tunes α towards an entropy of minus the action dimensions (2018b).
    #[test]
    fn the_automatic_target_entropy_is_minus_the_action_dimensions() {
        let settings = Settings {
            alpha: AutoOr::Auto,
            target_entropy: AutoOr::Auto,
            initial_alpha: 0.5,
            ..Settings::default()
        };
        assert_eq!(
            Temperature::of(&settings, 3),
            Temperature::Tuned {
                initial: 0.5,
                target_entropy: -3.0
            }
        );
    }

    /// The value an exported policy reports at an action: the smaller of the twin critics'.
    #[test]
    fn min_q_is_the_smaller_critic_row_by_row() {
        let sac = sac(AutoOr::Auto, 0.3);
        let b = batch();
        let q = sac.min_q(&b.obs, &b.actions);
        let input = QInput::new(&b.obs, &b.actions);
        let [q1, q2] = [&sac.critics[0], &sac.critics[1]].map(|c| c.forward(&input));
        assert_eq!(q.size(), [6]);
        let [q, q1, q2] = [q, q1, q2].map(|t| Vec::<f32>::try_from(&t).unwrap());
        assert!(q1.iter().zip(&q2).any(|(a, b)| a < b) && q1.iter().zip(&q2).any(|(a, b)| a > b));
        for i in 0..6 {
            assert_eq!(q[i], q1[i].min(q2[i]), "row {i}");
        }
    }

    #[test]
    fn a_fixed_temperature_has_no_optimizer_group_and_does_not_move() {
        let mut sac = sac(tandem_config::AutoOr::Value(0.2), 1.0);
        assert!(sac.group_parameters("alpha").is_err());
        sac.update(&batch(), &mut crate::algo::Local).unwrap();
        assert!((sac.alpha() - 0.2).abs() < 1e-7);
        assert!(
            sac.named_state()
                .iter()
                .any(|(n, _)| n == "model.alpha.log_alpha")
        );
    }
}

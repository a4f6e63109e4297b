//! TD3, twin delayed deep deterministic policy gradient (Fujimoto et al. 2018, "Addressing
//! Function Approximation Error in Actor-Critic Methods"): a deterministic actor, twin critics
//! whose minimum is the target (clipped double Q-learning, section 4.2), target policy
//! smoothing (section 5.2), and the actor and all targets updated every `policy-delay`-th
//! gradient step (section 5.1). Actions live in the unit box; the learner scales them.
//!
//! One gradient step follows Algorithm 1's order: the critics step on their loss, then, on a
//! delayed step, the actor steps on `-Q_θ1(s, μ_φ(s))` read through the critics just updated
//! (as the paper, CleanRL and Stable-Baselines3 do). Each of the two is one backward and one
//! gradient sync over every trainable parameter (docs/design.md): the critic target is computed
//! without gradients and the actor loss reads Q through detached critic weights, so each loss
//! gives its own network's gradient and zeros elsewhere, and only that network's Adam group
//! steps.
//!
//! The smoothing noise of an update is an input drawn per sample, so a rank's half of a global
//! batch brings its half of the noise.

pub mod actor;

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
use crate::algo::sac::networks::{QInput, QMlp};
use crate::nn::{InitSpec, NetworkSpec, named_parameters};
use actor::DeterministicActor;

/// Adam's epsilon: torch's default, as CleanRL's TD3 uses.
const ADAM_EPS: f64 = 1e-8;

/// The optimizer groups, in order.
pub const GROUPS: [&str; 2] = ["actor", "critic"];
const ACTOR: usize = 0;
const CRITIC: usize = 1;

/// The learner's settings: the config's `algorithm "td3"` section, as the user wrote it.
pub use tandem_config::Td3 as Settings;

/// A batch of transitions with the update's noise. Actions are in the unit box.
pub struct Td3Batch {
    pub obs: Tensor,
    pub actions: Tensor,
    /// Rewards (one-step returns).
    pub rewards: Tensor,
    /// γ, or 0 where the episode terminated.
    pub discounts: Tensor,
    pub next_obs: Tensor,
    /// Standard normal `[B, d]`: the target policy smoothing's ε before scaling by σ̃.
    pub noise_next: Tensor,
}

/// The critics' loss of one step (a scalar with its graph) and the mean Q logged beside it.
pub struct CriticLoss {
    pub loss: Tensor,
    pub q_mean: Tensor,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Td3Stats {
    pub critic_loss: f64,
    pub q_mean: f64,
    pub critic_grad_norm: f64,
    /// The actor's loss and gradient norm, on a delayed step.
    pub actor: Option<(f64, f64)>,
}

pub struct Td3 {
    config: Settings,
    actor: DeterministicActor,
    critics: [QMlp; 2],
    target_actor: DeterministicActor,
    target_critics: [QMlp; 2],
    actor_vs: VarStore,
    critic_vs: VarStore,
    target_actor_vs: VarStore,
    target_critic_vs: VarStore,
    /// The target actor's and the target critics' variables, each in one buffer mirroring its
    /// optimizer group.
    target_params: [TargetNetwork; 2],
    /// One Adam over the groups `actor` and `critic`, each with its own learning rate and step
    /// count, in one flat gradient buffer that DDP all-reduces.
    optimizer: Optimizer,
    gradient_steps: u64,
}

impl Td3 {
    /// Builds the actor and the twin critics (initialised from the current torch seed, in that
    /// order), then targets equal to them.
    pub fn new(
        device: Device,
        network: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
        action_dim: i64,
        config: Settings,
    ) -> Result<Td3> {
        let obs_len: i64 = obs_shape.iter().product();
        let actor_of = |vs: &VarStore| {
            DeterministicActor::new(&vs.root(), network, init, obs_shape, action_dim)
        };
        let critics_of = |vs: &VarStore| -> Result<[QMlp; 2]> {
            Ok([
                QMlp::new(&(vs.root() / "q1"), network, init, obs_len, action_dim)?,
                QMlp::new(&(vs.root() / "q2"), network, init, obs_len, action_dim)?,
            ])
        };
        let actor_vs = VarStore::new(device);
        let actor = actor_of(&actor_vs)?;
        let critic_vs = VarStore::new(device);
        let critics = critics_of(&critic_vs)?;
        let mut target_actor_vs = VarStore::new(device);
        let target_actor = actor_of(&target_actor_vs)?;
        target_actor_vs.freeze();
        let mut target_critic_vs = VarStore::new(device);
        let target_critics = critics_of(&target_critic_vs)?;
        target_critic_vs.freeze();
        let optimizer = Optimizer::grouped(
            &[(GROUPS[ACTOR], &actor_vs), (GROUPS[CRITIC], &critic_vs)],
            OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: ADAM_EPS,
            },
        )?;
        let target_params = [
            TargetNetwork::of_group(&optimizer, ACTOR, &target_actor_vs)?,
            TargetNetwork::of_group(&optimizer, CRITIC, &target_critic_vs)?,
        ];
        let mut td3 = Td3 {
            config,
            actor,
            critics,
            target_actor,
            target_critics,
            actor_vs,
            critic_vs,
            target_actor_vs,
            target_critic_vs,
            target_params,
            optimizer,
            gradient_steps: 0,
        };
        td3.update_targets(1.0);
        Ok(td3)
    }

    pub fn actor(&self) -> &DeterministicActor {
        &self.actor
    }

    /// The twin critics' smaller Q(s, a) `[B]` for unit-box actions `a` (what an exported
    /// policy reports as its value at its own action).
    pub fn min_q(&self, obs: &Tensor, action: &Tensor) -> Tensor {
        let input = QInput::new(obs, action);
        let [q1, q2] = &self.critics;
        q1.forward(&input).minimum(&q2.forward(&input))
    }

    /// Whether the next gradient step is a delayed one, "if t mod d" of Algorithm 1 with t
    /// counting gradient steps from 1: the actor and the targets move on it.
    pub fn next_step_updates_the_actor(&self) -> bool {
        (self.gradient_steps + 1).is_multiple_of(self.config.policy_delay)
    }

    /// `θ'_i ← τ θ_i + (1 - τ) θ'_i` and `φ' ← τ φ + (1 - τ) φ'` (Algorithm 1, last lines).
    fn update_targets(&mut self, tau: f64) {
        for target in &mut self.target_params {
            target.polyak(tau);
        }
    }

    /// The critics' loss on this rank's batch, a mean over its samples.
    pub fn critic_loss(&self, batch: &Td3Batch) -> Result<CriticLoss> {
        let [q1, q2] = &self.critics;
        let (sigma, clip) = (
            self.config.target_policy_noise,
            self.config.target_noise_clip,
        );
        let target = tch::no_grad(|| -> Result<Tensor> {
            // Target policy smoothing (eq. 14): ã = clip(μ_φ'(s') + clip(ε, -c, c), -1, 1),
            // ε ~ N(0, σ̃), the outer clip keeping ã in the unit box.
            let eps = (&batch.noise_next * sigma).clamp(-clip, clip);
            let next = (self.target_actor.forward(&batch.next_obs)? + eps).clamp(-1.0, 1.0);
            // Clipped double Q-learning (eq. 10): y = r + γ min_i Q_θ'_i(s', ã).
            let [t1, t2] = &self.target_critics;
            let next_input = QInput::new(&batch.next_obs, &next);
            let q_next = t1.forward(&next_input).minimum(&t2.forward(&next_input));
            Ok(&batch.rewards + &batch.discounts * q_next)
        })?;
        // Critic loss (Algorithm 1): Σ_i N⁻¹ Σ (y - Q_θi(s, a))².
        let taken = QInput::new(&batch.obs, &batch.actions);
        let q1_taken = q1.forward(&taken);
        let q2_taken = q2.forward(&taken);
        let loss = (&q1_taken - &target).square().mean(Kind::Float)
            + (&q2_taken - &target).square().mean(Kind::Float);
        Ok(CriticLoss {
            loss,
            q_mean: ((q1_taken.detach() + q2_taken.detach()) * 0.5).mean(Kind::Float),
        })
    }

    /// The deterministic policy gradient's loss (eq. 1, after Silver et al. 2014) through Q_θ1
    /// alone: `J(φ) = -N⁻¹ Σ Q_θ1(s, μ_φ(s))`, Q read through detached weights so that this
    /// loss moves the actor only.
    pub fn actor_loss(&self, obs: &Tensor) -> Result<Tensor> {
        let action = self.actor.forward(obs)?;
        let q = self.critics[0].forward_detached(&QInput::new(obs, &action));
        Ok(-q.mean(Kind::Float))
    }

    /// One gradient step in Algorithm 1's order: the critics' step on `J_Q`, then on a delayed
    /// step the actor's step on `J(φ)` read through the critics just updated, and the Polyak
    /// update of every target.
    pub fn update(
        &mut self,
        batch: &Td3Batch,
        collective: &mut dyn Collective,
    ) -> Result<Td3Stats> {
        let delayed = self.next_step_updates_the_actor();
        let critic = self.critic_loss(batch)?;
        let critic_grad_norm =
            self.step_group(&critic.loss, CRITIC, self.config.critic_lr, collective)?;
        let actor = if delayed {
            let loss = self.actor_loss(&batch.obs)?;
            let norm = self.step_group(&loss, ACTOR, self.config.actor_lr, collective)?;
            Some((loss.double_value(&[]), norm))
        } else {
            None
        };
        self.gradient_steps += 1;
        if delayed {
            self.update_targets(self.config.tau);
        }
        Ok(Td3Stats {
            critic_loss: critic.loss.double_value(&[]),
            q_mean: critic.q_mean.double_value(&[]),
            critic_grad_norm,
            actor,
        })
    }

    /// One optimizer step of group `group` on `loss`, which touches only that group's
    /// parameters: backward, the sync of every gradient (the other group's are zero), the
    /// group's clip and Adam step. Returns the gradient norm before clipping.
    fn step_group(
        &mut self,
        loss: &Tensor,
        group: usize,
        lr: f64,
        collective: &mut dyn Collective,
    ) -> Result<f64> {
        self.optimizer.zero_grad();
        accumulate_gradients(loss, true, collective);
        let params = self.trainable_parameters();
        collective.sync_gradients(&params)?;
        let clip = self.config.max_grad_norm.unwrap_or(f64::INFINITY);
        let norm = self.optimizer.clip_group_grad_norm(group, clip)?;
        if !norm.is_finite() {
            bail!(
                "update: the {} gradient norm is {norm} at td3 gradient step {}; the loss diverged",
                GROUPS[group],
                self.gradient_steps
            );
        }
        if collective.steps_locally() {
            self.optimizer.step_groups(&[(group, lr)])?;
        }
        collective.after_step(&params).map(|()| norm)
    }
}

impl BoxLearner for Td3 {
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
        named.extend(named_parameters(&self.target_actor_vs, "target.actor"));
        named.extend(named_parameters(&self.target_critic_vs, "target.critic"));
        named
    }
}

/// TD3 as the off-policy skeleton's rule: uniform actions in the bounds while warming up, then
/// the actor plus Gaussian exploration noise (torch's generator, which the skeleton seeds per
/// iteration); one TD3 update per gradient step, its smoothing noise from torch's generator
/// seeded per (seed, rank, gradient step).
pub struct Td3Rule {
    td3: Td3,
    acting: BoxActing,
    exploration_noise: f64,
    latest: Option<Td3Stats>,
    /// The actor's loss and gradient norm of the latest delayed step.
    latest_actor: Option<(f64, f64)>,
}

impl Td3Rule {
    /// The off-policy learner of `algorithm "td3"`; an error for a discrete or unbounded box.
    pub fn learner(setting: &Setting, cfg: &tandem_config::Td3) -> Result<OffPolicy<Td3Rule>> {
        let acting = BoxActing::new("td3", setting)?;
        let (spec, obs_shape) =
            crate::algo::learner::network_for(setting.experiment, setting.envs)?;
        let td3 = Td3::new(
            setting.device,
            &spec.network,
            &spec.init,
            &obs_shape,
            acting.action_dim,
            cfg.clone(),
        )?;
        let rule = Td3Rule {
            td3,
            acting,
            exploration_noise: cfg.exploration_noise,
            latest: None,
            latest_actor: None,
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

    pub fn td3(&self) -> &Td3 {
        &self.td3
    }
}

/// The behaviour policy's unit-box action: `clip(μ(s) + σ ε, -1, 1)`, ε ~ N(0, I) from torch's
/// generator (Algorithm 1, "select action with exploration noise").
pub fn explore(actor: &DeterministicActor, obs: &Tensor, sigma: f64) -> Result<Tensor> {
    let action = tch::no_grad(|| actor.forward(obs))?;
    let eps = Tensor::randn(action.size().as_slice(), (Kind::Float, action.device()));
    Ok((action + eps * sigma).clamp(-1.0, 1.0))
}

impl OffPolicyRule for Td3Rule {
    fn act(&mut self, obs: &Tensor, at: ActAt) -> Result<ActionBatch> {
        let (actor, sigma) = (self.td3.actor(), self.exploration_noise);
        self.acting.act(obs, at, || explore(actor, obs, sigma))
    }

    fn learn(
        &mut self,
        batch: &TransitionBatch,
        collective: &mut dyn Collective,
    ) -> Result<Option<Vec<f32>>> {
        let step = self.td3.gradient_steps();
        let actions = self.acting.prepare_update("td3", batch, step)?;
        let noise_next = Tensor::randn(actions.size().as_slice(), (Kind::Float, actions.device()));
        let td3_batch = Td3Batch {
            obs: batch.obs.shallow_clone(),
            actions,
            rewards: batch.returns.shallow_clone(),
            discounts: batch.discounts.shallow_clone(),
            next_obs: batch.next_obs.shallow_clone(),
            noise_next,
        };
        let stats = self.td3.update(&td3_batch, collective)?;
        if stats.actor.is_some() {
            self.latest_actor = stats.actor;
        }
        self.latest = Some(stats);
        Ok(None)
    }

    fn scalars(&self, sampleable: usize) -> Scalars {
        let mut s: Scalars = vec![
            ("td3/gradient_steps", self.td3.gradient_steps() as f64),
            ("replay/sampleable", sampleable as f64),
        ];
        if let Some(st) = &self.latest {
            s.push(("loss/critic", st.critic_loss));
            s.push(("td3/q_mean", st.q_mean));
            s.push(("optim/critic_grad_norm", st.critic_grad_norm));
        }
        if let Some((loss, norm)) = self.latest_actor {
            s.push(("loss/actor", loss));
            s.push(("optim/actor_grad_norm", norm));
        }
        s
    }

    fn diverged(&self) -> bool {
        let critic = self
            .latest
            .as_ref()
            .is_some_and(|s| !s.critic_loss.is_finite());
        critic || self.latest_actor.is_some_and(|(loss, _)| !loss.is_finite())
    }

    box_learner_methods!(td3, "td3");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, Init};

    fn td3(policy_delay: u64) -> Td3 {
        tch::manual_seed(3);
        Td3::new(
            Device::Cpu,
            &NetworkSpec::Mlp {
                hidden: vec![8],
                activation: Activation::Relu,
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
                actor_lr: 1e-2,
                critic_lr: 1e-2,
                tau: 0.5,
                policy_delay,
                target_policy_noise: 0.2,
                target_noise_clip: 0.5,
                max_grad_norm: None,
                ..Settings::default()
            },
        )
        .unwrap()
    }

    fn batch() -> Td3Batch {
        let f = (Kind::Float, Device::Cpu);
        let grid = |k: i64, scale: f64| Tensor::arange(6 * k, f).reshape([6, k]) * scale;
        Td3Batch {
            obs: grid(3, 0.4).sin(),
            actions: grid(2, 0.8).cos() * 0.7,
            rewards: Tensor::arange(6, f).cos(),
            discounts: Tensor::full([6], 0.99, f),
            next_obs: grid(3, 0.5).cos(),
            noise_next: grid(2, 1.7).sin() * 3.0,
        }
    }

    fn flat(tensors: &[(String, Tensor)], prefix: &str) -> Vec<f32> {
        tensors
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .flat_map(|(_, t)| Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap())
            .collect()
    }

    fn group_gradient(td3: &Td3, group: &str) -> Vec<f32> {
        td3.group_parameters(group)
            .unwrap()
            .iter()
            .flat_map(|p| Vec::<f32>::try_from(p.grad().flatten(0, -1)).unwrap())
            .collect()
    }

    fn host(t: &Tensor) -> Vec<f64> {
        Vec::<f64>::try_from(t.detach().to_kind(Kind::Double).flatten(0, -1)).unwrap()
    }

    /// The losses of Algorithm 1 worked sample by sample on the host, the networks read one
    /// batch at a time: target smoothing (eq. 14), clipped double Q (eq. 10), both critics'
    /// squared errors, and the actor's -Q_θ1(s, μ(s)); also what `q_mean` and `min_q` report.
    #[test]
    fn the_losses_are_algorithm_1_worked_sample_by_sample() {
        let td3 = td3(1);
        let b = batch();
        let (sigma, clip, n) = (0.2, 0.5, 6usize);
        let mu_next = host(&td3.target_actor.forward(&b.next_obs).unwrap());
        let noise = host(&b.noise_next);
        let smoothed: Vec<f32> = mu_next
            .iter()
            .zip(&noise)
            .map(|(m, e)| (m + (e * sigma).clamp(-clip, clip)).clamp(-1.0, 1.0) as f32)
            .collect();
        let next = Tensor::from_slice(&smoothed).reshape([6, 2]);
        let next_input = QInput::new(&b.next_obs, &next);
        let [t1, t2] = &td3.target_critics;
        let (t1, t2) = (
            host(&t1.forward(&next_input)),
            host(&t2.forward(&next_input)),
        );
        let (rewards, discounts) = (host(&b.rewards), host(&b.discounts));
        let y: Vec<f64> = (0..n)
            .map(|i| rewards[i] + discounts[i] * t1[i].min(t2[i]))
            .collect();
        let taken = QInput::new(&b.obs, &b.actions);
        let q1 = host(&td3.critics[0].forward(&taken));
        let q2 = host(&td3.critics[1].forward(&taken));
        let squared = |q: &[f64]| (0..n).map(|i| (q[i] - y[i]).powi(2)).sum::<f64>() / n as f64;
        let want = squared(&q1) + squared(&q2);
        let got = td3.critic_loss(&b).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-5 * b.abs().max(1.0);
        let loss = got.loss.double_value(&[]);
        assert!(close(loss, want), "{loss} vs {want}");
        let q_mean = (0..n).map(|i| (q1[i] + q2[i]) / 2.0).sum::<f64>() / n as f64;
        assert!(close(got.q_mean.double_value(&[]), q_mean));
        let min_q = host(&td3.min_q(&b.obs, &b.actions));
        for i in 0..n {
            assert!(close(min_q[i], q1[i].min(q2[i])), "{min_q:?}");
        }
        let own = td3.actor.forward(&b.obs).unwrap();
        let q = host(&td3.critics[0].forward(&QInput::new(&b.obs, &own)));
        let actor = -q.iter().sum::<f64>() / n as f64;
        let got = td3.actor_loss(&b.obs).unwrap().double_value(&[]);
        assert!(close(got, actor), "{got} vs {actor}");
        assert!(actor.abs() > 1e-3 && want > 1e-3, "{actor} {want}");
    }

    #[test]
    fn each_loss_moves_only_its_own_network() {
        let mut td3 = td3(2);
        let b = batch();
        td3.optimizer.zero_grad();
        td3.critic_loss(&b).unwrap().loss.backward();
        assert!(group_gradient(&td3, "actor").iter().all(|&g| g == 0.0));
        assert!(group_gradient(&td3, "critic").iter().any(|&g| g != 0.0));
        td3.optimizer.zero_grad();
        td3.actor_loss(&b.obs).unwrap().backward();
        assert!(group_gradient(&td3, "critic").iter().all(|&g| g == 0.0));
        assert!(group_gradient(&td3, "actor").iter().any(|&g| g != 0.0));
    }

    #[test]
    fn the_actor_steps_against_the_critics_after_their_step() {
        let mut learner = td3(1);
        let b = batch();
        let critic_before = flat(&learner.named_state(), "model.critic");
        let loss_before = learner.actor_loss(&b.obs).unwrap().double_value(&[]);
        // What the actor's step must have read: the stepped critics at the actor of before. The
        // copy takes the learner's values, not the seed's: tests running beside this one draw
        // from the same global generator between the two constructions.
        let mut critics_first = td3(1);
        crate::nn::copy_named(
            &learner.named_state(),
            "learner tensor",
            &critics_first.named_state(),
            |name| format!("the learner has no {name}"),
        )
        .unwrap();
        let critic_loss = critics_first.critic_loss(&b).unwrap().loss;
        critics_first
            .step_group(
                &critic_loss,
                CRITIC,
                critics_first.config.critic_lr,
                &mut crate::algo::Local,
            )
            .unwrap();
        let expected = critics_first.actor_loss(&b.obs).unwrap().double_value(&[]);
        let stats = learner.update(&b, &mut crate::algo::Local).unwrap();
        assert_ne!(critic_before, flat(&learner.named_state(), "model.critic"));
        let (loss, _) = stats.actor.unwrap();
        assert_eq!(loss, expected);
        assert_ne!(loss, loss_before, "the critics' step changed Q");
    }

    #[test]
    fn the_actor_and_the_targets_move_only_on_every_policy_delay_th_step() {
        let mut td3 = td3(3);
        let b = batch();
        let start = td3.named_state();
        let copy = |named: &[(String, Tensor)]| -> Vec<(String, Tensor)> {
            named.iter().map(|(n, t)| (n.clone(), t.copy())).collect()
        };
        let before = copy(&start);
        assert_eq!(flat(&before, "model.actor"), flat(&before, "target.actor"));
        assert_eq!(
            flat(&before, "model.critic"),
            flat(&before, "target.critic")
        );
        for step in 1..=6u64 {
            let last = copy(&td3.named_state());
            let stats = td3.update(&b, &mut crate::algo::Local).unwrap();
            let now = td3.named_state();
            let delayed = step % 3 == 0;
            assert_eq!(stats.actor.is_some(), delayed, "step {step}");
            assert_ne!(flat(&last, "model.critic"), flat(&now, "model.critic"));
            for part in ["model.actor", "target.actor", "target.critic"] {
                let moved = flat(&last, part) != flat(&now, part);
                assert_eq!(moved, delayed, "{part} at step {step}");
            }
        }
        let opt = td3.optimizer();
        assert_eq!(opt.group_step_count(ACTOR), 2);
        assert_eq!(opt.group_step_count(CRITIC), 6);
    }

    #[test]
    fn smoothing_noise_is_clipped_and_the_target_action_stays_in_the_box() {
        let td3 = td3(1);
        let b = batch();
        // With σ̃ ε far beyond c, the target equals the one from noise exactly ±c.
        let clipped = Td3Batch {
            noise_next: b.noise_next.sign() * 100.0,
            ..batch()
        };
        let at_clip = Td3Batch {
            noise_next: b.noise_next.sign() * (0.5 / 0.2),
            ..batch()
        };
        let a = td3.critic_loss(&clipped).unwrap().loss;
        let c = td3.critic_loss(&at_clip).unwrap().loss;
        assert!(a.allclose(&c, 1e-6, 1e-6, false));
        let zero = Td3Batch {
            noise_next: b.noise_next.zeros_like(),
            ..batch()
        };
        let z = td3.critic_loss(&zero).unwrap().loss;
        assert!(
            !a.allclose(&z, 1e-6, 1e-6, false),
            "the noise changes the target"
        );
        let obs = b.obs.shallow_clone();
        tch::manual_seed(0);
        let explored = explore(td3.actor(), &obs, 50.0).unwrap();
        let (lo, hi) = explored.aminmax(None, false);
        assert!(lo.double_value(&[]) >= -1.0 && hi.double_value(&[]) <= 1.0);
        assert!(
            hi.double_value(&[]) == 1.0,
            "a wide noise reaches the bound"
        );
    }
}

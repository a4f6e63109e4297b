//! SAC's gradient step on the host for MLP actors and critics on one compute thread: the
//! gradients of `J_Q + J_π + J(α)` ([`crate::algo::sac::Sac::losses`]) worked out by hand, term by term,
//! where autograd's per-operation costs are a third of a step on MuJoCo's networks
//! (docs/performance.md, "Continuous control"). The networks' passes are
//! [`crate::nn::HostMlp`]'s and [`crate::nn::HostActor`]'s; the gradients are added into the
//! optimizer's buffers in place, so sync, clipping, Adam and the Polyak step stay as they are.
//! tests/algo_sac_host.rs holds every gradient and loss to autograd's.
//!
//! With B samples, critics Q₁, Q₂, targets Q̄₁, Q̄₂, α = exp(log α) (a constant in J_Q and J_π):
//!
//! - target (no gradient): y = r + γ_d (min_i Q̄_i(s', a') - α log π(a'|s')), a' ~ π(·|s');
//! - J_Q = mean (Q₁(s,a) - y)² + mean (Q₂(s,a) - y)², so ∂J_Q/∂Q_i = 2 (Q_i - y) / B;
//! - J_π = mean (α log π(ã|s) - min_i Q_i(s, ã)), ã ~ π(·|s) reparameterised, the critics read
//!   with their weights held: ∂J_π/∂log π = α / B, ∂J_π/∂Q_i = -1/B for the smaller Q (half
//!   each on a tie, as autograd's `minimum`), passed through the critics to ã only;
//! - J(α) = mean (-α (log π(ã|s) + H̄)) with log π held, so ∂J(α)/∂log α = J(α).

use anyhow::{Result, ensure};
use tch::{Kind, Tensor};

use super::networks::{HostActor, QMlp, SquashedGaussianActor};
use crate::nn::HostMlp;
use crate::nn::host_mlp::{float_view, float_view_mut};

/// A batch of transitions with the update's noise. Actions are in the unit box.
pub struct SacBatch {
    pub obs: Tensor,
    pub actions: Tensor,
    /// Rewards (one-step returns).
    pub rewards: Tensor,
    /// γ, or 0 where the episode terminated.
    pub discounts: Tensor,
    pub next_obs: Tensor,
    /// Standard normal `[B, d]` for the actions at `next_obs` (the target) and at `obs` (the
    /// actor and temperature losses).
    pub eps_next: Tensor,
    pub eps_now: Tensor,
}

/// The values of a step's losses (what `Sac::losses` holds, read out).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SacLossValues {
    pub critic: f64,
    pub actor: f64,
    pub alpha: f64,
    pub q_mean: f64,
    /// `-mean log π(ã|s)`.
    pub entropy: f64,
}

/// The actor, the critics (with gradients), the targets and `log α`, read in place, and the
/// step's workspace.
#[derive(Debug)]
pub struct HostSacStep {
    actor: HostActor,
    critics: [HostMlp; 2],
    targets: [HostMlp; 2],
    log_alpha: Tensor,
    /// `[B, obs + action]` rows of a critic's input.
    input: Vec<f32>,
    /// y, then per critic its values and the gradient at them.
    target: Vec<f32>,
    q: [Vec<f32>; 2],
    grad_q: Vec<f32>,
    /// The gradients at the critics' inputs (for J_π) and at the actor's actions.
    grad_input: [Vec<f32>; 2],
    grad_actions: Vec<f32>,
}

/// A batch's tensors as contiguous f32 (the same tensors where they already are), kept alive
/// while the step reads them as host floats.
struct HostBatch {
    obs: Tensor,
    actions: Tensor,
    rewards: Tensor,
    discounts: Tensor,
    next_obs: Tensor,
    eps_next: Tensor,
    eps_now: Tensor,
}

impl HostBatch {
    fn of(batch: &SacBatch) -> HostBatch {
        let host = |t: &Tensor| t.flatten(0, -1).to_kind(Kind::Float).contiguous();
        HostBatch {
            obs: host(&batch.obs),
            actions: host(&batch.actions),
            rewards: host(&batch.rewards),
            discounts: host(&batch.discounts),
            next_obs: host(&batch.next_obs),
            eps_next: host(&batch.eps_next),
            eps_now: host(&batch.eps_now),
        }
    }
}

/// `[rows, obs]` and `[rows, action]` side by side into `input` `[rows, obs + action]`.
fn join(input: &mut Vec<f32>, obs: &[f32], actions: &[f32], rows: usize) {
    let (o, a) = (obs.len() / rows, actions.len() / rows);
    input.clear();
    for (obs_row, action_row) in obs.chunks_exact(o).zip(actions.chunks_exact(a)) {
        input.extend_from_slice(obs_row);
        input.extend_from_slice(action_row);
    }
}

impl HostSacStep {
    /// The host step for these networks, or `None` where the actor's torso is not a plain MLP.
    /// The parameters' gradients must exist (the optimizer lays them out).
    pub fn new(
        actor: &SquashedGaussianActor,
        critics: &[QMlp; 2],
        targets: &[QMlp; 2],
        log_alpha: &Tensor,
    ) -> Result<Option<HostSacStep>> {
        let Some(host_actor) = actor.host(true)? else {
            return Ok(None);
        };
        Ok(Some(HostSacStep {
            actor: host_actor,
            critics: [critics[0].host(true)?, critics[1].host(true)?],
            targets: [targets[0].host(false)?, targets[1].host(false)?],
            log_alpha: log_alpha.shallow_clone(),
            input: Vec::new(),
            target: Vec::new(),
            q: [Vec::new(), Vec::new()],
            grad_q: Vec::new(),
            grad_input: [Vec::new(), Vec::new()],
            grad_actions: Vec::new(),
        }))
    }

    /// Adds the gradients of `J_Q + J_π + J(α)` on `batch` to the parameters' gradients and
    /// returns the losses' values; `target_entropy` is H̄ where α is tuned, `None` where α is
    /// fixed (no J(α)).
    pub fn accumulate(
        &mut self,
        batch: &SacBatch,
        target_entropy: Option<f64>,
    ) -> Result<SacLossValues> {
        let batch = HostBatch::of(batch);
        ensure!(batch.rewards.numel() > 0, "sac (host): an empty batch");
        let alpha = (self.log_alpha.double_value(&[0]) as f32).exp();
        self.soft_bellman_target(&batch, alpha)?;
        let (critic, q_mean) = self.critic_step(&batch)?;
        let (actor, mean_log_prob) = self.actor_step(&batch, alpha)?;
        let alpha_loss = match target_entropy {
            Some(target_entropy) => {
                let loss = -(alpha as f64) * (mean_log_prob + target_entropy);
                let mut grad = self.log_alpha.grad();
                float_view_mut(&mut grad, "log α's gradient")?[0] += loss as f32;
                loss
            }
            None => 0.0,
        };
        Ok(SacLossValues {
            critic,
            actor,
            alpha: alpha_loss,
            q_mean,
            entropy: -mean_log_prob,
        })
    }

    /// y = r + γ_d (min_i Q̄_i(s', a') - α log π(a'|s')), into `self.target`.
    fn soft_bellman_target(&mut self, batch: &HostBatch, alpha: f32) -> Result<()> {
        let next_obs = float_view(&batch.next_obs, "the next observations")?;
        let eps_next = float_view(&batch.eps_next, "the target's noise")?;
        let rewards = float_view(&batch.rewards, "the rewards")?;
        let discounts = float_view(&batch.discounts, "the discounts")?;
        let b = rewards.len();
        let (actions, log_probs) = self.actor.sample(next_obs, eps_next)?;
        join(&mut self.input, next_obs, actions, b);
        self.target.clear();
        self.target.extend_from_slice(log_probs);
        let q1 = self.targets[0].forward(&self.input)?.to_vec();
        let q2 = self.targets[1].forward(&self.input)?;
        for i in 0..b {
            let soft_value = q1[i].min(q2[i]) - alpha * self.target[i];
            self.target[i] = rewards[i] + discounts[i] * soft_value;
        }
        Ok(())
    }

    /// J_Q's gradients into both critics; returns J_Q and the mean of Q over both critics.
    fn critic_step(&mut self, batch: &HostBatch) -> Result<(f64, f64)> {
        let obs = float_view(&batch.obs, "the observations")?;
        let taken = float_view(&batch.actions, "the actions")?;
        let b = self.target.len();
        join(&mut self.input, obs, taken, b);
        let (mut loss, mut q_sum) = (0.0f64, 0.0f64);
        for (critic, q) in self.critics.iter_mut().zip(&mut self.q) {
            q.clear();
            q.extend_from_slice(critic.forward(&self.input)?);
            self.grad_q.clear();
            for (value, y) in q.iter().zip(&self.target) {
                let residual = value - y;
                loss += (residual * residual) as f64 / b as f64;
                q_sum += *value as f64;
                self.grad_q.push(2.0 * residual / b as f32);
            }
            critic.backward(&self.input, &self.grad_q, true, None)?;
        }
        Ok((loss, q_sum / (2 * b) as f64))
    }

    /// J_π's gradients into the actor, through the critics' held weights; returns J_π and the
    /// mean log π(ã|s).
    fn actor_step(&mut self, batch: &HostBatch, alpha: f32) -> Result<(f64, f64)> {
        let obs = float_view(&batch.obs, "the observations")?;
        let eps_now = float_view(&batch.eps_now, "the actor's noise")?;
        let b = self.target.len();
        let d = self.actor.action_dim();
        let (actions, log_probs) = self.actor.sample(obs, eps_now)?;
        let log_probs = log_probs.to_vec();
        join(&mut self.input, obs, actions, b);
        for (critic, q) in self.critics.iter_mut().zip(&mut self.q) {
            q.clear();
            q.extend_from_slice(critic.forward(&self.input)?);
        }
        let [q1, q2] = &self.q;
        let (mut loss, mut log_prob_sum) = (0.0f64, 0.0f64);
        for i in 0..b {
            loss += (alpha * log_probs[i] - q1[i].min(q2[i])) as f64 / b as f64;
            log_prob_sum += log_probs[i] as f64;
        }
        // ∂J_π/∂Q_i: -1/B for the smaller, half each on a tie (autograd's `minimum`).
        let share = |mine: f32, other: f32| match mine.partial_cmp(&other) {
            Some(std::cmp::Ordering::Less) => 1.0,
            Some(std::cmp::Ordering::Equal) => 0.5,
            _ => 0.0,
        };
        for c in 0..2 {
            let (mine, other) = if c == 0 { (q1, q2) } else { (q2, q1) };
            self.grad_q.clear();
            self.grad_q
                .extend((0..b).map(|i| -share(mine[i], other[i]) / b as f32));
            self.critics[c].backward(
                &self.input,
                &self.grad_q,
                false,
                Some(&mut self.grad_input[c]),
            )?;
        }
        // The critics' input gradients at the action columns, summed over both.
        let width = self.input.len() / b;
        self.grad_actions.clear();
        for i in 0..b {
            let at = i * width + width - d..(i + 1) * width;
            let (g1, g2) = (&self.grad_input[0][at.clone()], &self.grad_input[1][at]);
            self.grad_actions
                .extend(g1.iter().zip(g2).map(|(x, y)| x + y));
        }
        let grad_log_probs = vec![alpha / b as f32; b];
        self.actor
            .backward(obs, &self.grad_actions, &grad_log_probs)?;
        Ok((loss, log_prob_sum / b as f64))
    }
}

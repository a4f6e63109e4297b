//! PPO's minibatch loss and its gradient worked out by hand, for an actor-critic of separate MLP
//! torsos on the CPU ([`crate::nn::HostTwinMlp`]): the step [`crate::algo::ppo`]'s update takes
//! instead of autograd's where the network allows. On classic-control networks libtorch's
//! per-operation dispatch and autograd bookkeeping are most of a step; here the forward pass,
//! the loss and the backward pass are a handful of matrix products and loops over the rows.
//!
//! [`crate::algo::ppo_loss`] stays the definition: this module is its derivative, term by term, in the
//! same order (paper eq. 6-9), and tests/algo_ppo_host.rs holds its gradients and loss terms to
//! autograd's on random batches, for both policies, with and without value clipping and entropy.

use anyhow::{Result, anyhow, ensure};
use tch::{Kind, Tensor};

use crate::algo::storage::rollout::Batch;
use crate::nn::distribution::{gaussian_log_prob_row, log_softmax_into};
use crate::nn::host_mlp::{float_view, float_view_mut};
use crate::nn::{ActorCritic, HostPolicy, HostTwinMlp};

/// The learner's settings (`algorithm "ppo"`).
type Settings = tandem_config::Ppo;

/// The detached terms of the PPO objective on one minibatch, for logging: what the host step
/// returns, and [`crate::algo::PpoLoss`] without its differentiable total.
#[derive(Debug)]
pub struct PpoTerms {
    pub policy_loss: Tensor,
    pub value_loss: Tensor,
    pub entropy: Tensor,
    pub log_ratio: Tensor,
}

const HALF_LN_TWO_PI: f32 = crate::nn::distribution::HALF_LN_TWO_PI as f32;

/// The host PPO step of one actor-critic: its network's host view and the step's scratch.
#[derive(Debug)]
pub struct HostPpoStep {
    net: HostTwinMlp,
    policy: HostPolicy,
    /// dL/d(heads' outputs), `[2, rows, head width]`.
    grad_heads: Vec<f32>,
}

/// How the gradient of max(a, b) splits between a and b, as libtorch's `maximum` splits it: all
/// to the larger, half each on a tie.
fn max_split(a: f32, b: f32) -> (f32, f32) {
    if a > b {
        (1.0, 0.0)
    } else if a < b {
        (0.0, 1.0)
    } else {
        (0.5, 0.5)
    }
}

/// A float tensor's values on the host: in place when it already is a contiguous f32 CPU
/// tensor, else a converted copy (kept in `keep` while the slice is used).
fn host_floats<'a>(t: &'a Tensor, keep: &'a mut Option<Tensor>, what: &str) -> Result<&'a [f32]> {
    if t.kind() == Kind::Float && t.is_contiguous() && t.device() == tch::Device::Cpu {
        return float_view(t, what);
    }
    let copy = keep.insert(
        t.to_device(tch::Device::Cpu)
            .to_kind(Kind::Float)
            .contiguous(),
    );
    float_view(copy, what)
}

/// One row's policy terms: L^CLIP's per-sample loss, log r, and dL/d(log pi(a|s)).
struct Surrogate {
    loss: f32,
    log_ratio: f32,
    grad_log_prob: f32,
}

/// -min(r A, clip(r, 1 - eps, 1 + eps) A) written as max(-r A, -clip(r) A) (paper eq. 7) for
/// one row, and its derivative by log pi(a|s) (through r = exp(log pi - log pi_old), eq. 6).
fn surrogate(log_prob: f32, old_log_prob: f32, advantage: f32, eps: f32) -> Surrogate {
    let log_ratio = log_prob - old_log_prob;
    let ratio = log_ratio.exp();
    let clipped_ratio = ratio.clamp(1.0 - eps, 1.0 + eps);
    let (unclipped, clipped) = (-advantage * ratio, -advantage * clipped_ratio);
    let (to_unclipped, to_clipped) = max_split(unclipped, clipped);
    // clamp passes the gradient inside its range, ends included (as libtorch's does).
    let inside = if (1.0 - eps..=1.0 + eps).contains(&ratio) {
        1.0
    } else {
        0.0
    };
    let grad_ratio = -advantage * (to_unclipped + to_clipped * inside);
    Surrogate {
        loss: unclipped.max(clipped),
        log_ratio,
        grad_log_prob: grad_ratio * ratio,
    }
}

/// L^VF's per-sample squared error, plain or clipped around the old value (Huang et al. 2022,
/// detail 9), and its derivative by the new value.
fn value_error(value: f32, old_value: f32, target: f32, value_clip: Option<f32>) -> (f32, f32) {
    let unclipped = (value - target) * (value - target);
    let Some(e) = value_clip else {
        return (unclipped, 2.0 * (value - target));
    };
    let moved = value - old_value;
    let clipped_value = old_value + moved.clamp(-e, e);
    let clipped = (clipped_value - target) * (clipped_value - target);
    let (to_unclipped, to_clipped) = max_split(unclipped, clipped);
    let inside = if (-e..=e).contains(&moved) { 1.0 } else { 0.0 };
    let grad = to_unclipped * 2.0 * (value - target)
        + to_clipped * 2.0 * (clipped_value - target) * inside;
    (unclipped.max(clipped), grad)
}

/// What the policy terms of a minibatch are computed from: the policy head's outputs
/// `[rows, n]`, the old log-probabilities, the normalised advantages, the rows' loss weights
/// (where weighted), the clip range, the entropy coefficient, and the factor of every row's
/// gradient (1/rows times the micro-batch's share).
struct PolicyRows<'a> {
    head: &'a [f32],
    n: usize,
    old_log_probs: &'a [f32],
    advantages: &'a [f32],
    weights: Option<&'a [f32]>,
    eps: f32,
    entropy_coef: f32,
    scale: f32,
}

/// Row `i`'s weight in the loss's means: its loss weight, or 1 where the rows are not weighted.
fn weight(weights: Option<&[f32]>, i: usize) -> f32 {
    weights.map_or(1.0, |w| w[i])
}

/// L^CLIP's per-row losses and the entropies, summed over the rows, and each row's log r.
#[derive(Default)]
struct PolicySums {
    loss: f64,
    entropy: f64,
    log_ratios: Vec<f32>,
}

impl PolicySums {
    fn add(&mut self, s: &Surrogate, entropy: f32, weight: f32) {
        self.loss += (weight * s.loss) as f64;
        self.entropy += (weight * entropy) as f64;
        self.log_ratios.push(s.log_ratio);
    }
}

impl PolicyRows<'_> {
    /// A categorical over the head's `n` logits: each row's terms, and their gradient at the
    /// logits into `grad` `[rows, n]`.
    fn categorical(&self, actions: &[i64], grad: &mut [f32]) -> Result<PolicySums> {
        let (n, b) = (self.n, self.old_log_probs.len());
        ensure!(
            actions.len() == b,
            "ppo (host): {} actions for {b} samples",
            actions.len()
        );
        let mut sums = PolicySums::default();
        let mut log_probs = vec![0f32; n];
        for i in 0..b {
            let a = usize::try_from(actions[i])
                .ok()
                .filter(|&a| a < n)
                .ok_or_else(|| anyhow!("ppo (host): action {} is not in 0..{n}", actions[i]))?;
            // log softmax, its entropy H = -sum p log p.
            log_softmax_into(&self.head[i * n..(i + 1) * n], &mut log_probs);
            let entropy = -log_probs.iter().map(|lp| lp.exp() * lp).sum::<f32>();
            let s = surrogate(
                log_probs[a],
                self.old_log_probs[i],
                self.advantages[i],
                self.eps,
            );
            // d log p_a / d z_j = [j = a] - p_j; dH/dz_j = -p_j (log p_j + H).
            let w = weight(self.weights, i);
            let grad_row = &mut grad[i * n..(i + 1) * n];
            for (j, (g, lp)) in grad_row.iter_mut().zip(&log_probs).enumerate() {
                let p = lp.exp();
                let pick = if j == a { 1.0 } else { 0.0 };
                let mut d = s.grad_log_prob * (pick - p);
                if self.entropy_coef != 0.0 {
                    d += self.entropy_coef * p * (lp + entropy);
                }
                *g = d * self.scale * w;
            }
            sums.add(&s, entropy, w);
        }
        Ok(sums)
    }

    /// A diagonal Gaussian with means the head's `n` outputs and the state-independent
    /// `log_std`: each row's terms, their gradient at the means into `grad` `[rows, n]`, and
    /// the log-std's added into `grad_log_std` `[n]`.
    fn gaussian(
        &self,
        actions: &[f32],
        log_std: &[f32],
        grad: &mut [f32],
        grad_log_std: &mut [f32],
    ) -> Result<PolicySums> {
        let (n, b) = (self.n, self.old_log_probs.len());
        ensure!(
            actions.len() == b * n && log_std.len() == n,
            "ppo (host): {} action values for {b} samples of {n}",
            actions.len()
        );
        // H = sum_k (log sigma_k + 1/2 + ln(2 pi)/2), the same for every row.
        let entropy = log_std
            .iter()
            .map(|s| s + 0.5 + HALF_LN_TWO_PI)
            .sum::<f32>();
        let mut sums = PolicySums::default();
        let mut from_rows = vec![0f32; n];
        for i in 0..b {
            let (mean, action) = (&self.head[i * n..(i + 1) * n], &actions[i * n..(i + 1) * n]);
            let log_prob = gaussian_log_prob_row(action, mean, log_std);
            let z = |k: usize| (action[k] - mean[k]) * (-log_std[k]).exp();
            let s = surrogate(
                log_prob,
                self.old_log_probs[i],
                self.advantages[i],
                self.eps,
            );
            // d log pi / d mu_k = z_k / sigma_k; d log pi / d log sigma_k = z_k^2 - 1.
            let w = weight(self.weights, i);
            for k in 0..n {
                let z = z(k);
                grad[i * n + k] = s.grad_log_prob * z * (-log_std[k]).exp() * self.scale * w;
                from_rows[k] += w * s.grad_log_prob * (z * z - 1.0);
            }
            sums.add(&s, entropy, w);
        }
        // dH/d log sigma_k = 1 in every row: -c2 of it, averaged over the weighted rows.
        let rows = self.weights.map_or(b as f32, |w| w.iter().sum());
        for (g, from_rows) in grad_log_std.iter_mut().zip(&from_rows) {
            *g += (from_rows - self.entropy_coef * rows) * self.scale;
        }
        Ok(sums)
    }
}

impl HostPpoStep {
    /// The host step for `model`, when its network has the host form
    /// ([`ActorCritic::host_twin_mlp`]).
    pub fn for_model(model: &ActorCritic) -> Result<Option<HostPpoStep>> {
        Ok(model.host_twin_mlp(true)?.map(|(net, policy)| HostPpoStep {
            net,
            policy,
            grad_heads: Vec::new(),
        }))
    }

    /// Adds to the parameters' gradients `share` times the gradient of [`crate::algo::ppo_loss`] on
    /// `rows` (with their normalised `advantages` and, where weighted, their loss `weights`),
    /// and returns its detached terms: what `ppo_loss` and a backward of its total would give.
    pub fn accumulate(
        &mut self,
        rows: &Batch,
        advantages: &Tensor,
        weights: Option<&Tensor>,
        share: f64,
        config: &Settings,
    ) -> Result<PpoTerms> {
        let mut keep: [Option<Tensor>; 7] = Default::default();
        let [
            k_obs,
            k_old,
            k_values,
            k_adv,
            k_returns,
            k_actions,
            k_weights,
        ] = &mut keep;
        let obs = host_floats(&rows.obs, k_obs, "the observations")?;
        let old_log_probs = host_floats(&rows.log_probs, k_old, "the old log-probabilities")?;
        let old_values = host_floats(&rows.values, k_values, "the old values")?;
        let advantages = host_floats(advantages, k_adv, "the advantages")?;
        let returns = host_floats(&rows.returns, k_returns, "the returns")?;
        let weights = match weights {
            Some(w) => Some(host_floats(w, k_weights, "the loss weights")?),
            None => None,
        };
        let b = old_log_probs.len();
        ensure!(
            [old_values.len(), advantages.len(), returns.len()] == [b; 3]
                && weights.is_none_or(|w| w.len() == b)
                && b > 0,
            "ppo (host): a minibatch's fields have different lengths"
        );
        let n = self.net.head_width();
        let heads = self.net.forward(obs)?;
        ensure!(
            heads.len() == 2 * b * n,
            "ppo (host): {} observation rows for {b} samples",
            heads.len() / (2 * n)
        );
        self.grad_heads.clear();
        self.grad_heads.resize(2 * b * n, 0.0);
        let (policy_out, value_out) = heads.split_at(b * n);
        let (grad_policy, grad_value) = self.grad_heads.split_at_mut(b * n);
        // d(mean over rows)/d(row) times the micro-batch's share.
        let scale = (share / b as f64) as f32;

        // L^CLIP and S, per row, and their gradients at the policy head (eq. 6, 7 and 9).
        let policy_rows = PolicyRows {
            head: policy_out,
            n,
            old_log_probs,
            advantages,
            weights,
            eps: config.clip as f32,
            entropy_coef: config.entropy_coef as f32,
            scale,
        };
        let policy = match &mut self.policy {
            HostPolicy::Categorical => {
                let actions = rows.actions.to_kind(Kind::Int64).contiguous();
                policy_rows.categorical(&Vec::<i64>::try_from(&actions)?, grad_policy)?
            }
            HostPolicy::Gaussian { log_std } => {
                let actions = host_floats(&rows.actions, k_actions, "the actions")?;
                let log_std_values = float_view(log_std, "the log standard deviation")?.to_vec();
                let mut log_std_grad = log_std.grad();
                let log_std_grad =
                    float_view_mut(&mut log_std_grad, "the log standard deviation's gradient")?;
                policy_rows.gaussian(actions, &log_std_values, grad_policy, log_std_grad)?
            }
        };

        // c1 L^VF, halved as in CleanRL, on the value head's column 0 (eq. 9).
        let value_clip = config.value_clip.map(|e| e as f32);
        let value_weight = (0.5 * config.value_coef) as f32;
        let mut squared_sum = 0f64;
        for i in 0..b {
            let (squared, grad) =
                value_error(value_out[i * n], old_values[i], returns[i], value_clip);
            let w = weight(weights, i);
            squared_sum += (w * squared) as f64;
            grad_value[i * n] = value_weight * grad * scale * w;
        }

        self.net.backward(obs, &self.grad_heads)?;
        let mean = |sum: f64| Tensor::from((sum / b as f64) as f32);
        Ok(PpoTerms {
            policy_loss: mean(policy.loss),
            value_loss: mean(0.5 * squared_sum),
            entropy: mean(policy.entropy),
            log_ratio: Tensor::from_slice(&policy.log_ratios),
        })
    }
}

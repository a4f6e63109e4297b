//! Action distributions a policy head parameterises: [`Categorical`] over discrete actions,
//! [`MultiCategorical`], independent categoricals over the components of a multi-discrete
//! action, and [`Gaussian`], a diagonal normal over box actions in unit space (see
//! [`super::ActionBounds`]).
//! The learners use only `sample`, `log_prob`, `entropy` and `mode`, whichever the kind.

use anyhow::{Result, anyhow, ensure};
use tch::{Kind, Tensor};

/// `t` as int64, without dispatching a conversion when it already is (the rollout calls this
/// every step).
fn as_int64(t: &Tensor) -> Tensor {
    if t.kind() == Kind::Int64 {
        t.shallow_clone()
    } else {
        t.to_kind(Kind::Int64)
    }
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

/// A batch of action distributions, one per row.
#[derive(Debug)]
pub enum ActionDistribution {
    Categorical(Categorical),
    MultiCategorical(MultiCategorical),
    Gaussian(Gaussian),
}

impl ActionDistribution {
    /// One action per row, drawn with libtorch's default generator (seed it with
    /// `tch::manual_seed`, differently per rank, for reproducible but decorrelated ranks).
    pub fn sample(&self) -> Result<Tensor> {
        match self {
            ActionDistribution::Categorical(c) => c.sample(),
            ActionDistribution::MultiCategorical(m) => m.sample(),
            ActionDistribution::Gaussian(g) => g.sample(),
        }
    }
    /// log pi(a|s) for the given actions (`[B]` indices, or `[B, d]` box actions whose
    /// per-dimension log-densities are summed), shape `[B]`; an error for actions outside the space
    /// (on CPU; on CUDA an out-of-range index is a device-side assertion, so callers check
    /// ranges beforehand, as the learners do once per batch).
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        match self {
            ActionDistribution::Categorical(c) => c.log_prob(actions),
            ActionDistribution::MultiCategorical(m) => m.log_prob(actions),
            ActionDistribution::Gaussian(g) => g.log_prob(actions),
        }
    }
    /// Entropy per row, shape `[B]` (a Gaussian's summed over its dimensions).
    pub fn entropy(&self) -> Tensor {
        match self {
            ActionDistribution::Categorical(c) => c.entropy(),
            ActionDistribution::MultiCategorical(m) => m.entropy(),
            ActionDistribution::Gaussian(g) => g.entropy(),
        }
    }
    /// The most likely action per row (greedy evaluation): the mean of a Gaussian.
    pub fn mode(&self) -> Tensor {
        match self {
            ActionDistribution::Categorical(c) => c.mode(),
            ActionDistribution::MultiCategorical(m) => m.mode(),
            ActionDistribution::Gaussian(g) => g.mode(),
        }
    }
}

/// log softmax of one row of logits, into `out`, on the host (the host passes' categorical).
pub(crate) fn log_softmax_into(logits: &[f32], out: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_sum = logits.iter().map(|z| (z - max).exp()).sum::<f32>().ln();
    for (lp, z) in out.iter_mut().zip(logits) {
        *lp = z - max - log_sum;
    }
}

/// log pi(action) of one row of a diagonal Gaussian on the host: sum_k -z_k^2 / 2 - log sigma_k -
/// ln(2 pi)/2 with z = (a - mu) / sigma, as [`Gaussian::log_prob`] computes it.
pub(crate) fn gaussian_log_prob_row(action: &[f32], mean: &[f32], log_std: &[f32]) -> f32 {
    (0..log_std.len())
        .map(|k| {
            let z = (action[k] - mean[k]) * (-log_std[k]).exp();
            z * z * -0.5 - log_std[k] - HALF_LN_TWO_PI as f32
        })
        .sum()
}

/// Categorical distributions over `n` actions, held as normalised log-probabilities `[B, n]`.
#[derive(Debug)]
pub struct Categorical {
    log_probs: Tensor,
}

impl Categorical {
    /// From unnormalised logits `[B, n]`.
    pub fn from_logits(logits: &Tensor) -> Self {
        Categorical {
            log_probs: logits.log_softmax(-1, Kind::Float),
        }
    }

    /// Normalised log-probabilities `[B, n]`.
    pub fn log_probs(&self) -> &Tensor {
        &self.log_probs
    }

    /// An error (not a panic) when the probabilities are not finite, i.e. the policy diverged.
    pub fn sample(&self) -> Result<Tensor> {
        tch::no_grad(|| {
            let drawn = self.log_probs.exp().f_multinomial(1, true).map_err(|e| {
                anyhow!(
                    "categorical: cannot sample from these action probabilities (has the policy diverged?): {}",
                    first_line(&e.to_string())
                )
            })?;
            Ok(drawn.squeeze_dim(-1))
        })
    }

    /// `actions` are integer indices `[B]`.
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        let rows = self.log_probs.size()[0];
        ensure!(
            actions.size() == [rows],
            "categorical: expected {rows} actions, got shape {:?}",
            actions.size()
        );
        let picked = self
            .log_probs
            .f_gather(-1, &as_int64(actions).unsqueeze(-1), false)
            .map_err(|e| {
                let n = self.log_probs.size()[1];
                anyhow!(
                    "categorical: actions must lie in 0..{n}: {}",
                    first_line(&e.to_string())
                )
            })?;
        Ok(picked.squeeze_dim(-1))
    }

    /// H = -sum_a p(a) log p(a).
    pub fn entropy(&self) -> Tensor {
        -(self.log_probs.exp() * &self.log_probs).sum_dim_intlist(-1, false, Kind::Float)
    }

    pub fn mode(&self) -> Tensor {
        self.log_probs.argmax(-1, false)
    }
}

/// Independent categoricals, one per component of a multi-discrete action: component `i` over
/// `nvec[i]` actions, its logits the next `nvec[i]` columns of the head's output. The joint
/// log-probability and entropy are the components' sums (independence); a MultiBinary of
/// `n` is `n` components of two actions each.
#[derive(Debug)]
pub struct MultiCategorical {
    components: Vec<Categorical>,
}

impl MultiCategorical {
    /// From unnormalised logits `[B, sum(nvec)]`.
    pub fn from_logits(logits: &Tensor, nvec: &[i64]) -> Result<Self> {
        let width: i64 = nvec.iter().sum();
        ensure!(
            !nvec.is_empty(),
            "multi-categorical: needs at least one component"
        );
        ensure!(
            logits.size().last() == Some(&width),
            "multi-categorical: components of {nvec:?} actions need {width} logits a row, got shape {:?}",
            logits.size()
        );
        let components = logits
            .split_with_sizes(nvec, -1)
            .iter()
            .map(Categorical::from_logits)
            .collect();
        Ok(MultiCategorical { components })
    }

    /// One index per component, `[B, k]`.
    pub fn sample(&self) -> Result<Tensor> {
        let drawn: Result<Vec<Tensor>> = self.components.iter().map(Categorical::sample).collect();
        Ok(Tensor::stack(&drawn?, -1))
    }

    /// log pi(a|s) = sum_i log pi_i(a_i|s) for actions `[B, k]`, shape `[B]`.
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        let k = self.components.len() as i64;
        ensure!(
            actions.dim() == 2 && actions.size()[1] == k,
            "multi-categorical: expected actions of shape [B, {k}], got {:?}",
            actions.size()
        );
        let picked: Result<Vec<Tensor>> = (self.components.iter().enumerate())
            .map(|(i, component)| component.log_prob(&actions.select(1, i as i64)))
            .collect();
        Ok(picked?
            .into_iter()
            .reduce(|sum, p| sum + p)
            .expect("from_logits made at least one component"))
    }

    /// H = sum_i H_i.
    pub fn entropy(&self) -> Tensor {
        let entropies: Vec<Tensor> = self.components.iter().map(Categorical::entropy).collect();
        Tensor::stack(&entropies, -1).sum_dim_intlist(-1, false, Kind::Float)
    }

    /// The most likely index of each component, `[B, k]`.
    pub fn mode(&self) -> Tensor {
        let modes: Vec<Tensor> = self.components.iter().map(Categorical::mode).collect();
        Tensor::stack(&modes, -1)
    }
}

/// ln(2 pi) / 2, the constant of a unit normal's log-density.
pub(crate) const HALF_LN_TWO_PI: f64 = 0.918_938_533_204_672_7;

/// Diagonal normal distributions over `d`-dimensional box actions, one per row: means `[B, d]`
/// and log standard deviations broadcastable to them (a state-independent `[1, d]`).
#[derive(Debug)]
pub struct Gaussian {
    mean: Tensor,
    log_std: Tensor,
}

impl Gaussian {
    /// An error when `log_std` cannot broadcast to `mean`'s rows (it must be `[d]`, `[1, d]` or
    /// `[B, d]`).
    pub fn new(mean: &Tensor, log_std: &Tensor) -> Result<Self> {
        let (m, s) = (mean.size(), log_std.size());
        let fits = match (m.as_slice(), s.as_slice()) {
            ([_, d], [e]) | ([_, d], [1, e]) => d == e,
            ([b, d], [c, e]) => b == c && d == e,
            _ => false,
        };
        ensure!(
            fits,
            "gaussian: means of shape {m:?} need log standard deviations of shape [d], [1, d] \
             or [B, d] for d = the action dimension, got {s:?}"
        );
        Ok(Gaussian {
            mean: mean.shallow_clone(),
            log_std: log_std.shallow_clone(),
        })
    }

    pub fn mean(&self) -> &Tensor {
        &self.mean
    }

    /// mean + std * eps with eps ~ N(0, I) from libtorch's default generator. A diverged policy
    /// draws non-finite values, which the environments refuse with an error naming them.
    pub fn sample(&self) -> Result<Tensor> {
        Ok(tch::no_grad(|| {
            &self.mean + self.log_std.exp() * self.mean.randn_like()
        }))
    }

    /// sum_i [ -(a_i - mu_i)^2 / (2 sigma_i^2) - ln sigma_i - ln(2 pi) / 2 ] for actions
    /// `[B, d]`.
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        ensure!(
            actions.size() == self.mean.size(),
            "gaussian: expected actions of shape {:?}, got {:?}",
            self.mean.size(),
            actions.size()
        );
        let z = (actions - &self.mean) * (-&self.log_std).exp();
        let per_dim = z.square() * -0.5 - &self.log_std - HALF_LN_TWO_PI;
        Ok(per_dim.sum_dim_intlist(-1, false, Kind::Float))
    }

    /// sum_i [ 1/2 + ln(2 pi) / 2 + ln sigma_i ], the same for every row of a shared `log_std`.
    pub fn entropy(&self) -> Tensor {
        let per_dim = (&self.log_std + (0.5 + HALF_LN_TWO_PI)).expand_as(&self.mean);
        per_dim.sum_dim_intlist(-1, false, Kind::Float)
    }

    pub fn mode(&self) -> Tensor {
        self.mean.shallow_clone()
    }
}

//! Action distributions a policy head parameterises.
//!
//! Only the categorical distribution (discrete actions) is implemented. Continuous actions are a
//! planned extension with a fixed place to go: add an `ActionSpace::Continuous { dims }`
//! variant, a `Gaussian { mean, log_std }` variant here (state-independent `log_std` as in
//! CleanRL's `ppo_continuous_action.py`, log-probabilities and entropies summed over action
//! dimensions), and an `ActionHead` arm in the actor-critic producing it. The algorithms use
//! only `sample`, `log_prob` and `entropy`, so they need no change; the rollout buffer would
//! store actions as float `[T, N, dims]` instead of integer `[T, N]`.

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
}

impl ActionDistribution {
    /// One action per row, drawn with libtorch's default generator (seed it with
    /// `tch::manual_seed`, differently per rank, for reproducible but decorrelated ranks).
    pub fn sample(&self) -> Result<Tensor> {
        match self {
            ActionDistribution::Categorical(c) => c.sample(),
        }
    }
    /// log pi(a|s) for the given actions, shape `[B]`; an error for actions outside the space
    /// (on CPU; on CUDA an out-of-range index is a device-side assertion, so callers check
    /// ranges beforehand, as the learners do once per batch).
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        match self {
            ActionDistribution::Categorical(c) => c.log_prob(actions),
        }
    }
    /// Entropy per row, shape `[B]`.
    pub fn entropy(&self) -> Tensor {
        match self {
            ActionDistribution::Categorical(c) => c.entropy(),
        }
    }
    /// The most likely action per row (greedy evaluation).
    pub fn mode(&self) -> Tensor {
        match self {
            ActionDistribution::Categorical(c) => c.mode(),
        }
    }
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

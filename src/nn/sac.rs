//! SAC's networks (Haarnoja et al. 2018): the squashed Gaussian actor and the Q-network over
//! (observation, action), which TD3 shares. Both work in the unit action box [-1, 1]^d; `ActionBounds` maps it to
//! the environment's bounds outside.
//!
//! The Q-network can run on detached weights ([`QMlp::forward_detached`]): the actor's loss reads
//! Q(s, ã) that way, so one backward of the summed SAC losses gives the critics exactly the
//! gradient of their own loss (the learner syncs all gradients once per step).

use anyhow::{Result, bail, ensure};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::init::{InitSpec, linear};
use super::torso::{Activation, NetworkSpec, Torso};

/// The range `log σ` is squashed into (CleanRL's and the softlearning reference's bounds).
pub const LOG_STD_MIN: f64 = -5.0;
pub const LOG_STD_MAX: f64 = 2.0;

/// The MLP widths and activation of `network`, or an error for an image torso.
pub(super) fn mlp_of(network: &NetworkSpec) -> Result<(&[i64], Activation)> {
    match network {
        NetworkSpec::Mlp { hidden, activation } => Ok((hidden, *activation)),
        other => bail!("the actor and critics are MLPs; got network {other:?}"),
    }
}

/// Refuses observations that are not `[batch, obs_shape...]`, naming the network `what`.
pub(super) fn check_obs_shape(what: &str, obs_shape: &[i64], obs: &Tensor) -> Result<()> {
    let shape = obs.size();
    if shape.len() != obs_shape.len() + 1 || shape[1..] != obs_shape[..] {
        bail!("{what}: expected observations of shape [batch, {obs_shape:?}], got {shape:?}");
    }
    Ok(())
}

/// `log(1 - tanh(u)²)` summed over the last dimension, in the overflow-free form
/// `2 (log 2 - u - softplus(-2u))`: the change of density of the tanh squashing
/// (Haarnoja et al. 2018, appendix C, eq. 21).
pub fn tanh_log_det(u: &Tensor) -> Tensor {
    let per_dim = (-u - (u * -2.0).softplus() + 2f64.ln()) * 2.0;
    per_dim.sum_dim_intlist(-1, false, Kind::Float)
}

/// π(·|s): an MLP torso, then a mean and a `log σ` head; actions are `tanh(u)`,
/// `u ~ N(mean, σ²)`.
#[derive(Debug)]
pub struct SquashedGaussianActor {
    obs_shape: Vec<i64>,
    torso: Torso,
    mean: nn::Linear,
    log_std: nn::Linear,
}

/// A reparameterised draw from the actor.
pub struct ActorSample {
    /// `tanh(u)` in the unit box, `[B, d]`.
    pub action: Tensor,
    /// `log π(a|s)` of the unit-box action, `[B]`.
    pub log_prob: Tensor,
}

impl SquashedGaussianActor {
    /// Variables `torso.*`, `mean.*`, `log_std.*` under `root`; both heads initialised as the
    /// policy head.
    pub fn new(
        root: &nn::Path,
        network: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
        action_dim: i64,
    ) -> Result<Self> {
        mlp_of(network)?;
        ensure!(action_dim >= 1, "sac: the action box has no dimensions");
        let torso = Torso::new(&(root / "torso"), network, init, obs_shape)?;
        let features = torso.output_dim();
        Ok(SquashedGaussianActor {
            obs_shape: obs_shape.to_vec(),
            mean: linear(root / "mean", features, action_dim, init.policy()),
            log_std: linear(root / "log_std", features, action_dim, init.policy()),
            torso,
        })
    }

    /// The Gaussian's mean and `log σ` (tanh-rescaled into [`LOG_STD_MIN`], [`LOG_STD_MAX`]).
    pub fn mean_and_log_std(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        check_obs_shape("sac actor", &self.obs_shape, obs)?;
        let features = self.torso.forward(&obs.to_kind(Kind::Float));
        let squashed = self.log_std.forward(&features).tanh();
        let log_std = (squashed + 1.0) * (0.5 * (LOG_STD_MAX - LOG_STD_MIN)) + LOG_STD_MIN;
        Ok((self.mean.forward(&features), log_std))
    }

    /// `a = tanh(mean + σ ε)` for the given standard normal `eps` `[B, d]` (the
    /// reparameterisation of Haarnoja et al. 2018, eq. 11), and its log-density
    /// `log N(u; mean, σ²) - Σ log(1 - tanh(u)²)` (eq. 21).
    pub fn sample(&self, obs: &Tensor, eps: &Tensor) -> Result<ActorSample> {
        let (u, log_std) = self.pre_squash(obs, eps)?;
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let gaussian =
            (eps.square() * -0.5 - &log_std - half_log_2pi).sum_dim_intlist(-1, false, Kind::Float);
        Ok(ActorSample {
            action: u.tanh(),
            log_prob: gaussian - tanh_log_det(&u),
        })
    }

    /// The action of [`SquashedGaussianActor::sample`] alone, without its log-density (the
    /// behaviour policy draws one every environment step and never reads the density).
    pub fn sample_action(&self, obs: &Tensor, eps: &Tensor) -> Result<Tensor> {
        Ok(self.pre_squash(obs, eps)?.0.tanh())
    }

    /// `u = mean + σ ε` and `log σ`.
    fn pre_squash(&self, obs: &Tensor, eps: &Tensor) -> Result<(Tensor, Tensor)> {
        let (mean, log_std) = self.mean_and_log_std(obs)?;
        ensure!(
            eps.size() == mean.size(),
            "sac actor: noise of shape {:?} for actions of shape {:?}",
            eps.size(),
            mean.size()
        );
        Ok((&mean + log_std.exp() * eps, log_std))
    }

    /// The deterministic action `tanh(mean)` in the unit box (evaluation, `tandem play`).
    pub fn deterministic(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(self.mean_and_log_std(obs)?.0.tanh())
    }
}

/// What a [`QMlp`] reads: the flat observation beside the unit-box action, `[B, obs + d]`.
/// Twin critics of one (observation, action) pair read one input, built once.
pub struct QInput(Tensor);

impl QInput {
    pub fn new(obs: &Tensor, action: &Tensor) -> QInput {
        QInput(Tensor::cat(
            &[
                obs.flatten(1, -1).to_kind(Kind::Float),
                action.shallow_clone(),
            ],
            1,
        ))
    }
}

/// Q(s, a): an MLP over the flat observation concatenated with the unit-box action, to one
/// value. Hidden layers initialised as torso layers, the output as a value head.
#[derive(Debug)]
pub struct QMlp {
    layers: Vec<nn::Linear>,
    activation: Activation,
}

impl QMlp {
    /// Variables `fc{i}.*` and `q.*` under `root`.
    pub fn new(
        root: &nn::Path,
        network: &NetworkSpec,
        init: &InitSpec,
        obs_len: i64,
        action_dim: i64,
    ) -> Result<Self> {
        let (hidden, activation) = mlp_of(network)?;
        ensure!(
            hidden.iter().all(|&h| h > 0),
            "the critics' hidden layer sizes must be positive, got {hidden:?}"
        );
        let mut inputs = obs_len + action_dim;
        let mut layers = Vec::with_capacity(hidden.len() + 1);
        for (i, &width) in hidden.iter().enumerate() {
            layers.push(linear(root / format!("fc{i}"), inputs, width, init.torso()));
            inputs = width;
        }
        layers.push(linear(root / "q", inputs, 1, init.value()));
        Ok(QMlp { layers, activation })
    }

    /// Q(s, a) as `[B]`.
    pub fn forward(&self, input: &QInput) -> Tensor {
        self.run(input, false)
    }

    /// Q(s, a) with the weights detached: gradients reach the input's action (and through it
    /// the actor) but never this network's parameters.
    pub fn forward_detached(&self, input: &QInput) -> Tensor {
        self.run(input, true)
    }

    fn run(&self, input: &QInput, detached: bool) -> Tensor {
        let mut x = input.0.shallow_clone();
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            let bias = layer.bs.as_ref().map(|b| {
                if detached {
                    b.detach()
                } else {
                    b.shallow_clone()
                }
            });
            let weight = if detached {
                layer.ws.detach()
            } else {
                layer.ws.shallow_clone()
            };
            x = x.linear(&weight, bias.as_ref());
            if i < last {
                x = super::torso::activate_in_place(self.activation, x);
            }
        }
        x.squeeze_dim(-1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stable_tanh_correction_equals_the_naive_one_and_stays_finite_far_out() {
        let u = Tensor::from_slice(&[-3.0f32, -0.5, 0.0, 0.7, 2.5, 4.0]).view([3, 2]);
        let naive = (-u.tanh().square() + 1.0)
            .log()
            .sum_dim_intlist(-1, false, Kind::Float);
        assert!(tanh_log_det(&u).allclose(&naive, 1e-5, 1e-5, false));
        // Where 1 - tanh(u)² rounds to 0 the naive form is -inf; the stable one is ~ -2|u|.
        let far = Tensor::from_slice(&[40.0f32, -40.0]).view([1, 2]);
        let value = tanh_log_det(&far).double_value(&[0]);
        let expected = 2.0 * 2.0 * (2f64.ln() - 40.0);
        assert!((value - expected).abs() < 1e-3, "{value} vs {expected}");
    }
}

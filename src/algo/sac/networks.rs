//! SAC's networks (Haarnoja et al. 2018): the squashed Gaussian actor and the Q-network over
//! (observation, action), which TD3 shares. Both work in the unit action box [-1, 1]^d;
//! `ActionBounds` maps it to the environment's bounds outside.
//!
//! The Q-network can run on detached weights ([`QMlp::forward_detached`]): the actor's loss reads
//! Q(s, ã) that way, so one backward of the summed SAC losses gives the critics exactly the
//! gradient of their own loss (the learner syncs all gradients once per step).

use anyhow::{Result, bail, ensure};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::nn::host_mlp::HostMlp;
use crate::nn::init::{InitSpec, linear};
use crate::nn::torso::{Activation, NetworkSpec, Torso, linear_parameters};

/// The range `log σ` is squashed into (CleanRL's and the softlearning reference's bounds).
pub const LOG_STD_MIN: f64 = -5.0;
pub const LOG_STD_MAX: f64 = 2.0;
/// Half that range: tanh's (-1, 1) times it, shifted, is log σ.
const LOG_STD_HALF_RANGE: f64 = 0.5 * (LOG_STD_MAX - LOG_STD_MIN);

/// The MLP widths and activation of `network`, or an error for an image torso.
pub(crate) fn mlp_of(network: &NetworkSpec) -> Result<(&[i64], Activation)> {
    match network {
        NetworkSpec::Mlp { hidden, activation } => Ok((hidden, *activation)),
        other => bail!("the actor and critics are MLPs; got network {other:?}"),
    }
}

/// Refuses observations that are not `[batch, obs_shape...]`, naming the network `what`.
pub(crate) fn check_obs_shape(what: &str, obs_shape: &[i64], obs: &Tensor) -> Result<()> {
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
        let log_std = (squashed + 1.0) * LOG_STD_HALF_RANGE + LOG_STD_MIN;
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

/// A squashed Gaussian actor on the host ([`SquashedGaussianActor::host`]): its networks,
/// reading the parameters in place, and what a [`HostActor::sample`] keeps for the backward
/// pass. The same arithmetic as [`SquashedGaussianActor::sample`], element by element.
#[derive(Debug)]
pub struct HostActor {
    /// The MLP torso, every layer activated.
    torso: HostMlp,
    /// The mean head and the raw log-std head (before its tanh squash), one layer each.
    mean: HostMlp,
    log_std: HostMlp,
    /// Per element of the last sample: tanh of the raw log-std, σ ε, the action tanh(u).
    squashed: Vec<f32>,
    sigma_eps: Vec<f32>,
    actions: Vec<f32>,
    /// Per row of the last sample: log π(ã|s).
    log_probs: Vec<f32>,
    /// Backward's scratch: the gradients at the two heads' outputs and at the features.
    grad_mean: Vec<f32>,
    grad_raw: Vec<f32>,
    grad_features: Vec<f32>,
    grad_features_raw: Vec<f32>,
}

/// log √(2π), the Gaussian log-density's constant.
const HALF_LN_TWO_PI: f32 = crate::nn::distribution::HALF_LN_TWO_PI as f32;

/// softplus(x) = ln(1 + eˣ), as libtorch's (x itself above 20).
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

impl HostActor {
    /// Action dimensions.
    pub fn action_dim(&self) -> usize {
        self.mean.width()
    }

    /// ã = tanh(μ + σ ε) and log π(ã|s) for each row of `obs` (flattened) with noise `eps`
    /// `[rows, action_dim]`; returns `(actions, log_probs)`.
    pub fn sample(&mut self, obs: &[f32], eps: &[f32]) -> Result<(&[f32], &[f32])> {
        let d = self.mean.width();
        let features = self.torso.forward(obs)?;
        let means = self.mean.forward(features)?;
        let raw = self.log_std.forward(features)?;
        ensure!(
            eps.len() == means.len(),
            "sac actor (host): {} noise values for {} actions",
            eps.len(),
            means.len()
        );
        let half_range = LOG_STD_HALF_RANGE as f32;
        let n = means.len();
        self.squashed.resize(n, 0.0);
        self.sigma_eps.resize(n, 0.0);
        self.actions.resize(n, 0.0);
        self.log_probs.clear();
        let rows = means
            .chunks_exact(d)
            .zip(raw.chunks_exact(d))
            .zip(eps.chunks_exact(d));
        for (i, ((mean, raw), eps)) in rows.enumerate() {
            let mut gaussian = 0.0f32;
            let mut log_det = 0.0f32;
            for j in 0..d {
                let e = i * d + j;
                let squashed = raw[j].tanh();
                let log_std = (squashed + 1.0) * half_range + LOG_STD_MIN as f32;
                let sigma_eps = log_std.exp() * eps[j];
                let u = mean[j] + sigma_eps;
                (self.squashed[e], self.sigma_eps[e], self.actions[e]) =
                    (squashed, sigma_eps, u.tanh());
                gaussian += eps[j] * eps[j] * -0.5 - log_std - HALF_LN_TWO_PI;
                // log(1 - tanh²u) = 2 (ln 2 - u - softplus(-2u)), stable far out.
                log_det += (-u - softplus(-2.0 * u) + std::f32::consts::LN_2) * 2.0;
            }
            self.log_probs.push(gaussian - log_det);
        }
        Ok((&self.actions, &self.log_probs))
    }

    /// Adds the actor's parameter gradients for a loss whose gradients at the last
    /// [`HostActor::sample`]'s actions and log-probabilities (over `obs`, the same rows) are
    /// `grad_actions` `[rows, action_dim]` and `grad_log_probs` `[rows]`.
    pub fn backward(
        &mut self,
        obs: &[f32],
        grad_actions: &[f32],
        grad_log_probs: &[f32],
    ) -> Result<()> {
        let d = self.mean.width();
        let n = self.actions.len();
        ensure!(
            grad_actions.len() == n && grad_log_probs.len() * d == n,
            "sac actor (host): backward needs a gradient for each action and log-probability \
             of the last sample"
        );
        let half_range = LOG_STD_HALF_RANGE as f32;
        self.grad_mean.resize(n, 0.0);
        self.grad_raw.resize(n, 0.0);
        for e in 0..n {
            let (a, g_log_prob) = (self.actions[e], grad_log_probs[e / d]);
            // u = μ + σε: through ã = tanh(u) (1 - ã²) and through log π, whose tanh
            // correction gives ∂log π/∂u = 2 tanh(u).
            let du = grad_actions[e] * (1.0 - a * a) + g_log_prob * 2.0 * a;
            // ∂u/∂log σ = σε; the Gaussian's -log σ term gives -1.
            let d_log_std = du * self.sigma_eps[e] - g_log_prob;
            let squashed = self.squashed[e];
            self.grad_mean[e] = du;
            self.grad_raw[e] = d_log_std * half_range * (1.0 - squashed * squashed);
        }
        let features = self.torso.output();
        self.mean.backward(
            features,
            &self.grad_mean,
            true,
            Some(&mut self.grad_features),
        )?;
        self.log_std.backward(
            features,
            &self.grad_raw,
            true,
            Some(&mut self.grad_features_raw),
        )?;
        self.grad_features
            .iter_mut()
            .zip(&self.grad_features_raw)
            .for_each(|(g, r)| *g += r);
        self.torso.backward(obs, &self.grad_features, true, None)
    }
}

impl SquashedGaussianActor {
    /// Its networks on the host, reading the parameters in place (and adding into their
    /// gradients where `with_grads`); `None` where the torso is not a plain MLP with layers.
    pub(crate) fn host(&self, with_grads: bool) -> Result<Option<HostActor>> {
        let Some((layers, activation)) = self.torso.mlp_parameters()? else {
            return Ok(None);
        };
        if layers.is_empty() {
            return Ok(None);
        }
        let head = |layer: &nn::Linear| {
            HostMlp::new(
                &linear_parameters(std::slice::from_ref(layer))?,
                activation,
                false,
                with_grads,
            )
        };
        Ok(Some(HostActor {
            torso: HostMlp::new(&layers, activation, true, with_grads)?,
            mean: head(&self.mean)?,
            log_std: head(&self.log_std)?,
            squashed: Vec::new(),
            sigma_eps: Vec::new(),
            actions: Vec::new(),
            log_probs: Vec::new(),
            grad_mean: Vec::new(),
            grad_raw: Vec::new(),
            grad_features: Vec::new(),
            grad_features_raw: Vec::new(),
        }))
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

    /// The network on the host, reading its parameters in place (and adding into their
    /// gradients where `with_grads`).
    pub(crate) fn host(&self, with_grads: bool) -> Result<HostMlp> {
        HostMlp::new(
            &linear_parameters(&self.layers)?,
            self.activation,
            false,
            with_grads,
        )
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
                x = crate::nn::torso::activate_in_place(self.activation, x);
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

//! TD3's actor (Fujimoto et al. 2018): a deterministic policy `μ(s) = tanh(f(s))` in the unit
//! action box [-1, 1]^d, an MLP torso and one linear head. Its critics are SAC's [`crate::nn::QMlp`].

use anyhow::{Result, ensure};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::algo::sac::networks::{check_obs_shape, mlp_of};
use crate::nn::init::{InitSpec, linear};
use crate::nn::torso::{NetworkSpec, Torso};

/// μ(s): an MLP torso, then a linear head squashed by tanh.
#[derive(Debug)]
pub struct DeterministicActor {
    obs_shape: Vec<i64>,
    torso: Torso,
    mu: nn::Linear,
}

impl DeterministicActor {
    /// Variables `torso.*` and `mu.*` under `root`; the head initialised as the policy head.
    pub fn new(
        root: &nn::Path,
        network: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
        action_dim: i64,
    ) -> Result<Self> {
        mlp_of(network)?;
        ensure!(action_dim >= 1, "td3: the action box has no dimensions");
        let torso = Torso::new(&(root / "torso"), network, init, obs_shape)?;
        let features = torso.output_dim();
        Ok(DeterministicActor {
            obs_shape: obs_shape.to_vec(),
            mu: linear(root / "mu", features, action_dim, init.policy()),
            torso,
        })
    }

    /// The action `μ(s)` in the unit box, `[B, d]`.
    pub fn forward(&self, obs: &Tensor) -> Result<Tensor> {
        check_obs_shape("td3 actor", &self.obs_shape, obs)?;
        let features = self.torso.forward(&obs.to_kind(Kind::Float));
        Ok(self.mu.forward(&features).tanh())
    }
}

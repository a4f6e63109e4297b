//! Action-value networks for value-based learners (DQN): a torso and a plain or dueling head.

use anyhow::{Result, bail, ensure};
use tch::Tensor;
use tch::nn::{self, Module};

use crate::nn::init::{InitSpec, linear};
use crate::nn::torso::{NetworkSpec, Torso, prepare_observations};

/// Which head turns features into Q(s, a).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QHead {
    /// One linear layer to `n` action values (Mnih et al. 2015).
    Plain,
    /// Separate value and advantage streams, Q = V + A - mean_a A (Wang et al. 2016, eq. 9).
    Dueling,
}

#[derive(Debug)]
enum Head {
    Plain(nn::Linear),
    Dueling {
        value: nn::Linear,
        advantage: nn::Linear,
    },
}

#[derive(Debug)]
pub struct QNetwork {
    obs_shape: Vec<i64>,
    scale_pixels: bool,
    torso: Torso,
    head: Head,
}

impl QNetwork {
    /// Variables: `torso.*`, then `q_head.*` (plain) or `value_head.*` and `advantage_head.*`.
    /// The torso is initialised as `init` says for torso layers; every head (plain, or both
    /// dueling streams) as for the value head, with `init.value_gain` (the policy gain is not
    /// used: a Q-network has no policy head).
    pub fn new(
        root: &nn::Path,
        network: &NetworkSpec,
        init: &InitSpec,
        scale_pixels: bool,
        obs_shape: &[i64],
        num_actions: i64,
        head: QHead,
    ) -> Result<Self> {
        ensure!(
            num_actions >= 1,
            "q-network: needs at least one action, got {num_actions}"
        );
        let torso = Torso::new(&(root / "torso"), network, init, obs_shape)?;
        let features = torso.output_dim();
        let head = match head {
            QHead::Plain => {
                Head::Plain(linear(root / "q_head", features, num_actions, init.value()))
            }
            QHead::Dueling => Head::Dueling {
                value: linear(root / "value_head", features, 1, init.value()),
                advantage: linear(root / "advantage_head", features, num_actions, init.value()),
            },
        };
        Ok(QNetwork {
            obs_shape: obs_shape.to_vec(),
            scale_pixels,
            torso,
            head,
        })
    }

    /// Q(s, ·) as `[B, num_actions]`.
    pub fn forward(&self, obs: &Tensor) -> Result<Tensor> {
        let shape = obs.size();
        if shape.len() != self.obs_shape.len() + 1 || shape[1..] != self.obs_shape[..] {
            bail!(
                "q-network: expected observations of shape [batch, {:?}], got {shape:?}",
                self.obs_shape
            );
        }
        let features = self
            .torso
            .forward(&prepare_observations(obs, self.scale_pixels));
        Ok(match &self.head {
            Head::Plain(q) => q.forward(&features),
            Head::Dueling { value, advantage } => {
                let a = advantage.forward(&features);
                let centred = &a - a.mean_dim(-1, true, a.kind());
                value.forward(&features) + centred
            }
        })
    }
}

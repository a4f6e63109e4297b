//! Neural networks for the learners: the torsos declared by [`NetworkSpec`] (MLP, Nature CNN,
//! MinAtar conv net, IMPALA ResNet), the [`ActorCritic`] and [`QNetwork`] built on them, the
//! action distributions, and the deterministic parameter order that DDP and checkpoints rely on.
//!
//! Every parameter lives in a `tch::nn::VarStore`, initialised orthogonally with the usual gains
//! (sqrt(2) in the torso, 0.01 on the policy head, 1.0 on the value head) and zero biases.

mod actor_critic;
mod distribution;
mod q_network;
mod torso;

pub use actor_critic::{
    ActTaken, ActionSpace, ActorCritic, ActorCriticSpec, EntropyUse, Evaluation,
};
pub use distribution::{ActionDistribution, Categorical};
pub use q_network::{QHead, QNetwork};
pub use torso::{Activation, NetworkSpec};

use tch::Tensor;
use tch::nn::VarStore;

/// Gain for hidden layers followed by ReLU/tanh (CleanRL's `layer_init` default).
pub const TORSO_GAIN: f64 = std::f64::consts::SQRT_2;
/// Gain for the policy logits: near-uniform initial policy.
pub const POLICY_HEAD_GAIN: f64 = 0.01;
/// Gain for the value head and Q heads.
pub const VALUE_HEAD_GAIN: f64 = 1.0;

/// Every variable of `vs` (trainable or not) with its full name, sorted by name.
///
/// The VarStore keeps variables in a hash map, so its own iteration order differs between
/// processes; DDP averages gradients bucket by bucket and checkpoints/fingerprints compare tensors
/// by position, which needs the same order on every rank. Sorting by name gives that order.
/// The returned tensors are shallow clones: they share storage (and gradients) with the store.
pub fn parameters_in_order(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

/// [`parameters_in_order`] with every name prefixed `{prefix}.`: how checkpoints, resumes and the
/// cross-rank fingerprint name a network's tensors (`model.*`, `target.*`).
pub fn named_parameters(vs: &VarStore, prefix: &str) -> Vec<(String, Tensor)> {
    parameters_in_order(vs)
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// The trainable tensors of `vs` in [`parameters_in_order`]'s order.
pub fn trainable_parameters_in_order(vs: &VarStore) -> Vec<Tensor> {
    parameters_in_order(vs)
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .map(|(_, t)| t)
        .collect()
}

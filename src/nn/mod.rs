//! Neural networks for the learners: the torsos declared by [`NetworkSpec`] (MLP, Nature CNN,
//! MinAtar conv net, IMPALA ResNet, or the experiment's own list of layers), the [`ActorCritic`] built on them (the networks only one
//! learner owns live in its room: DQN's Q-network in `algo::dqn`, SAC's actor and critics in
//! `algo::sac`, TD3's actor in `algo::td3`), the action distributions (categorical for
//! discrete actions, Gaussian for boxes, whose bounds [`ActionBounds`] maps), and the
//! deterministic parameter order that DDP and checkpoints rely on.
//!
//! An actor-critic may carry a recurrent core (LSTM or GRU, [`CoreSpec`]) between its torso and
//! its heads. One of separate MLP torsos also runs on the host ([`HostTwinMlp`]), as does a
//! plain stack of linear layers ([`HostMlp`], SAC's): forward and backward passes without
//! libtorch's per-operation costs, for small networks on one thread.
//!
//! Every parameter lives in a `tch::nn::VarStore`, initialised as an [`InitSpec`] says
//! (orthogonal with a gain per role and zero biases, or tch's default);
//! [`ActorCriticSpec::from_experiment`] maps an experiment's `network` section onto these specs.

mod actor_critic;
mod bounds;
mod declared;
pub(crate) mod distribution;
pub mod host_gemm;
pub(crate) mod host_mlp;
pub(crate) mod init;
mod recurrent;
mod spec;
pub(crate) mod torso;

pub use actor_critic::{
    ActTaken, ActorCritic, ActorCriticSpec, EntropyUse, Evaluation, HostPolicy, INVALID_LOGIT,
};
pub use bounds::ActionBounds;
pub use distribution::{ActionDistribution, Categorical, Gaussian, MultiCategorical};
pub use host_mlp::{HostMlp, HostTwinMlp};
pub use init::{Init, InitSpec};
pub use recurrent::{Core, CoreSpec};
pub(crate) use torso::Torso;
pub use torso::{Activation, NetworkSpec};

use tch::Tensor;
use tch::nn::VarStore;

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

/// Copies into each of `targets` the tensor of the same name among `sources` (a checkpoint's,
/// or a learner's networks), onto the target's device and kind. `what` names the sources in the
/// error of a shape that differs; `missing(name)` says why a name is not among them.
pub fn copy_named(
    sources: &[(String, Tensor)],
    what: &str,
    targets: &[(String, Tensor)],
    missing: impl Fn(&str) -> String,
) -> anyhow::Result<()> {
    tch::no_grad(|| {
        for (name, target) in targets {
            let Some((_, source)) = sources.iter().find(|(n, _)| n == name) else {
                anyhow::bail!("{}", missing(name));
            };
            if source.size() != target.size() {
                anyhow::bail!(
                    "{what} `{name}` has shape {:?}, the model expects {:?}",
                    source.size(),
                    target.size()
                );
            }
            let mut target = target.shallow_clone();
            target.copy_(&source.to_device(target.device()).to_kind(target.kind()));
        }
        Ok(())
    })
}

/// The trainable tensors of `vs` in [`parameters_in_order`]'s order.
pub fn trainable_parameters_in_order(vs: &VarStore) -> Vec<Tensor> {
    parameters_in_order(vs)
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .map(|(_, t)| t)
        .collect()
}

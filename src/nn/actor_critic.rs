//! The actor-critic used by PPO and A2C: a torso (shared by both heads, or one per head), a
//! policy head giving an [`ActionDistribution`] and a value head giving V(s).
//!
//! The policy head follows the environment's [`ActionSpace`]: `n` logits of a categorical for
//! `n` discrete actions; for a box of `d`, the `d` means of a diagonal Gaussian in unit space
//! with a state-independent log standard deviation (CleanRL's `ppo_continuous_action.py`).
//! Its samples are what the rollout stores and scores; [`ActorCritic::env_actions`] maps them
//! to what the environments receive (scaled to the bounds and clipped).
//!
//! With a recurrent core the network steps with a state: `act_recurrent` and the other
//! `_recurrent` methods take each environment's state and episode starts, and
//! `evaluate_recurrent` re-runs whole sequences for the update.

use anyhow::{Result, bail, ensure};
use tandem_env::ActionSpace;
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::bounds::ActionBounds;
use super::distribution::{ActionDistribution, Categorical, Gaussian, MultiCategorical};
use super::distribution::{gaussian_log_prob_row, log_softmax_into};
use super::host_mlp::{HostTwinMlp, float_view, host_passes_pay};
use super::init::{InitSpec, init_stacked_slice, linear};
use super::recurrent::{CoreSpec, RecurrentCore};
use super::torso::{NetworkSpec, Torso, TwinMlp, prepare_observations};

/// How the actor-critic is built.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorCriticSpec {
    pub network: NetworkSpec,
    /// One torso feeding both heads (the usual choice for image networks), or an actor torso and
    /// a critic torso of the same architecture (CleanRL's choice for classic control).
    pub share_torso: bool,
    /// Multiply observations by 1/255 inside the network (raw 0..255 pixels in the buffer).
    pub scale_pixels: bool,
    /// How every layer is initialised (torso, policy head and value head gains).
    pub init: InitSpec,
    /// A recurrent core between the (shared) torso and the heads; `None`: feed-forward.
    pub core: Option<CoreSpec>,
    /// The observation's last entries are an action mask, one per logit (1: valid): invalid
    /// actions' logits are set to [`INVALID_LOGIT`] wherever the policy is evaluated.
    pub action_mask: bool,
    /// The actor reads only this many leading entries of each observation, the critic all of
    /// them: a centralised critic, whose observation carries the game's state after the
    /// agent's own (separate MLP torsos). `None`: both read it all.
    pub actor_input: Option<i64>,
}

/// The logit of an action the mask rules out: its probability underflows to 0, and its
/// `p log p` in the entropy to 0 (minus infinity would make it 0 * inf = NaN). MaskablePPO
/// uses the same value.
pub const INVALID_LOGIT: f64 = -1e8;

impl ActorCriticSpec {
    /// The customary setup for a network: shared torso for image networks, separate for MLPs;
    /// pixel scaling for the networks that read raw frames (Nature CNN, IMPALA), not for the
    /// MinAtar net (its observations are already 0/1) nor MLPs.
    pub fn for_network(network: NetworkSpec, init: InitSpec) -> Self {
        let share_torso = network.is_image();
        let scale_pixels = network.reads_raw_pixels();
        ActorCriticSpec {
            network,
            share_torso,
            scale_pixels,
            init,
            core: None,
            action_mask: false,
            actor_input: None,
        }
    }
}

/// What the policy head's output parameterises.
#[derive(Debug)]
enum PolicyKind {
    /// The head's `n` outputs are a categorical's logits.
    Categorical,
    /// The head's outputs are the logits of one categorical per component, `nvec[i]` each.
    MultiCategorical { nvec: Vec<i64> },
    /// The head's `d` outputs are a Gaussian's means in unit space; `log_std` `[1, d]` (the
    /// variable `policy_log_std`, initialised 0) is shared by every state, and `bounds` map
    /// unit space to the environment's.
    Gaussian {
        log_std: Tensor,
        bounds: ActionBounds,
    },
}

/// The policy of a network the host passes can run ([`ActorCritic::host_twin_mlp`]).
#[derive(Debug)]
pub enum HostPolicy {
    /// The policy head's outputs are a categorical's logits.
    Categorical,
    /// The policy head's outputs are a Gaussian's means; `log_std` `[1, d]` is the variable
    /// `policy_log_std`.
    Gaussian { log_std: Tensor },
}

/// The policy head's width for `space` (`n` logits or `d` means), or why it has none.
fn head_width(space: &ActionSpace) -> Result<i64> {
    let width = match space {
        ActionSpace::Discrete { n } => {
            ensure!(
                *n >= 1,
                "action space: a discrete action space needs at least one action, got {n}"
            );
            *n
        }
        ActionSpace::Box { low, high } => {
            ensure!(
                !low.is_empty() && low.len() == high.len(),
                "action space: a box action space needs at least one dimension and as many \
                 upper as lower bounds, got {} and {}",
                low.len(),
                high.len()
            );
            low.len()
        }
        ActionSpace::MultiDiscrete { nvec } => {
            ensure!(
                !nvec.is_empty() && !nvec.contains(&0),
                "action space: a multi-discrete action space needs at least one component, \
                 each with at least one action, got {nvec:?}"
            );
            nvec.iter().sum()
        }
    };
    i64::try_from(width).map_err(|_| anyhow::anyhow!("action space: {space} is too large"))
}

/// With `spec.action_mask`, the number of mask entries that end each observation: one per
/// logit, after at least one entry of the observation itself.
fn mask_len(
    spec: &ActorCriticSpec,
    obs_shape: &[i64],
    space: &ActionSpace,
    logits: i64,
) -> Result<Option<i64>> {
    if !spec.action_mask {
        return Ok(None);
    }
    ensure!(
        !matches!(space, ActionSpace::Box { .. }),
        "actor-critic: an action mask needs discrete or multi-discrete actions, not {space}"
    );
    ensure!(
        matches!(obs_shape, [len] if *len > logits),
        "actor-critic: an action mask of {logits} entries follows a vector observation, \
         which needs more than {logits} entries; observations have shape {obs_shape:?}"
    );
    Ok(Some(logits))
}

/// What `act` returns for a batch of observations, detached: actions `[B]` (discrete) or
/// `[B, d]` (box, in unit space, unclipped), log-probabilities and values `[B]`.
#[derive(Debug)]
pub struct ActTaken {
    pub actions: Tensor,
    pub log_probs: Tensor,
    pub values: Tensor,
}

/// Whether a loss differentiates the policy's entropy or only reports it (an entropy bonus of
/// zero): a reported entropy is computed outside autograd, which saves recording its four
/// operations and walking them in backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntropyUse {
    Differentiable,
    ReportOnly,
}

impl EntropyUse {
    /// `Differentiable` exactly when the entropy's coefficient in the loss is non-zero.
    pub fn for_coefficient(coefficient: f64) -> Self {
        if coefficient != 0.0 {
            EntropyUse::Differentiable
        } else {
            EntropyUse::ReportOnly
        }
    }
}

/// What `evaluate` returns for a batch of (observation, action) pairs; all `[B]`, differentiable
/// (the entropy only when asked for).
#[derive(Debug)]
pub struct Evaluation {
    pub log_probs: Tensor,
    pub entropy: Tensor,
    pub values: Tensor,
}

/// The linear policy and value heads on top of one or two torsos.
#[derive(Debug)]
struct LinearHeads {
    policy: nn::Linear,
    value: nn::Linear,
}

impl LinearHeads {
    /// `n` policy outputs: logits or Gaussian means.
    fn new(root: &nn::Path, features: i64, n: i64, init: &InitSpec) -> LinearHeads {
        LinearHeads {
            policy: linear(root / "policy_head", features, n, init.policy()),
            value: linear(root / "value_head", features, 1, init.value()),
        }
    }

    fn forward(&self, actor_features: &Tensor, critic_features: &Tensor) -> (Tensor, Tensor) {
        let head_output = self.policy.forward(actor_features);
        let values = self.value.forward(critic_features).squeeze_dim(-1);
        (head_output, values)
    }
}

/// The two heads of a [`TwinMlp`] actor-critic, stacked like its layers: one weight
/// `heads.weight` `[2, features, n]` and one bias `heads.bias` `[2, 1, n]`, so both heads are
/// one batched matrix multiply instead of two linear layers, two transposes, two torso slices
/// and a squeeze (about 10% of a CartPole PPO step; docs/performance.md). Slice 0 is the policy
/// head (`n` logits or Gaussian means); slice 1 is the value head in its column 0. The value slice's other `n - 1`
/// columns are padding that keeps the stack rectangular: zero, never read, so their gradient is
/// zero and no optimizer moves them.
#[derive(Debug)]
struct StackedHeads {
    weight: Tensor,
    bias: Tensor,
}

impl StackedHeads {
    fn new(path: &nn::Path, features: i64, n: i64, init: &InitSpec) -> StackedHeads {
        let weight = path.zeros("weight", &[2, features, n]);
        let bias = path.zeros("bias", &[2, 1, n]);
        // The draws of `LinearHeads`, in its order: a run seeded alike starts alike.
        init_stacked_slice(&weight, &bias, 0, n, init.policy());
        init_stacked_slice(&weight, &bias, 1, 1, init.value());
        StackedHeads { weight, bias }
    }

    /// Stacked features `[2, B, features]` to policy outputs `[B, n]` and values `[B]`.
    fn forward(&self, features: &Tensor) -> (Tensor, Tensor) {
        let out = self.bias.baddbmm(features, &self.weight, 1.0, 1.0);
        (out.select(0, 0), out.select(0, 1).select(1, 0))
    }
}

/// Torsos and heads.
#[derive(Debug)]
enum Body {
    /// One torso feeding both heads.
    Shared { torso: Torso, heads: LinearHeads },
    /// An actor torso and a critic torso of the same architecture.
    Separate {
        actor: Torso,
        critic: Torso,
        heads: LinearHeads,
    },
    /// Separate MLP torsos and their heads, each computed as one stack (see [`TwinMlp`]).
    TwinMlp {
        torsos: TwinMlp,
        heads: StackedHeads,
    },
}

#[derive(Debug)]
pub struct ActorCritic {
    obs_shape: Vec<i64>,
    action_space: ActionSpace,
    policy: PolicyKind,
    /// How many of the observation's last entries are the action mask (the policy head's
    /// width), when there is one.
    mask_len: Option<i64>,
    scale_pixels: bool,
    /// What the actor reads of each observation: its leading entries (a centralised critic's
    /// network), or all of it.
    actor_input: Option<i64>,
    body: Body,
    /// Between the shared torso and the heads, when the network is recurrent.
    core: Option<RecurrentCore>,
}

/// What a recurrent network's forward pass over a sequence returns: policy head outputs
/// `[T * n, ...]`, values `[T * n]` and the state after the last step `[n, width]`.
pub(crate) struct SequenceOutput {
    pub(crate) head_output: Tensor,
    pub(crate) values: Tensor,
    pub(crate) state: Tensor,
}

impl ActorCritic {
    /// Creates the variables under `root` (normally `vs.root()`). Variable names: `torso.*`
    /// (shared) or `actor_torso.*` and `critic_torso.*` (separate image torsos), then
    /// `policy_head.*` and `value_head.*`; separate MLP torsos and their heads are stacked as
    /// `torsos.*` and `heads.*` (see [`TwinMlp`] and `StackedHeads`); a box space adds
    /// `policy_log_std`. A recurrent core (shared torsos only) is `core.input.*` and
    /// `core.hidden.*`, between the torso and the heads.
    pub fn new(
        root: &nn::Path,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        action_space: ActionSpace,
    ) -> Result<Self> {
        let n = head_width(&action_space)?;
        let mask_len = mask_len(spec, obs_shape, &action_space, n)?;
        let init = &spec.init;
        // Torsos are created before heads, so a seed gives the same initial weights whatever
        // the layout.
        ensure!(
            spec.core.is_none() || spec.share_torso,
            "actor-critic: a recurrent core sits on one shared torso; separate actor and critic \
             torsos have none"
        );
        let mut core = None;
        let body = match &spec.network {
            NetworkSpec::Mlp { .. } if spec.actor_input.is_some() => {
                let len = spec.actor_input.unwrap_or_default();
                ensure!(
                    !spec.share_torso
                        && spec.core.is_none()
                        && matches!(obs_shape, [all] if *all > len),
                    "actor-critic: an actor reading the first {len} entries of observations of \
                     shape {obs_shape:?} needs separate torsos and no core"
                );
                let actor = Torso::new(&(root / "actor_torso"), &spec.network, init, &[len])?;
                let critic = Torso::new(&(root / "critic_torso"), &spec.network, init, obs_shape)?;
                let heads = LinearHeads::new(root, actor.output_dim(), n, init);
                Body::Separate {
                    actor,
                    critic,
                    heads,
                }
            }
            _ if spec.share_torso => {
                let torso = Torso::new(&(root / "torso"), &spec.network, init, obs_shape)?;
                // Torso, core, heads: the order the data flows, and the draws' order.
                let mut features = torso.output_dim();
                if let Some(core_spec) = spec.core {
                    ensure!(
                        core_spec.size > 0,
                        "actor-critic: a recurrent core needs at least one unit, got {}",
                        core_spec.size
                    );
                    let built =
                        RecurrentCore::new(&(root / "core"), core_spec, features, init.core());
                    features = built.output_dim();
                    core = Some(built);
                }
                let heads = LinearHeads::new(root, features, n, init);
                Body::Shared { torso, heads }
            }
            NetworkSpec::Mlp { hidden, activation } => {
                let torsos =
                    TwinMlp::new(&(root / "torsos"), hidden, *activation, init, obs_shape)?;
                let heads = StackedHeads::new(&(root / "heads"), torsos.output_dim(), n, init);
                Body::TwinMlp { torsos, heads }
            }
            network => {
                let actor = Torso::new(&(root / "actor_torso"), network, init, obs_shape)?;
                let critic = Torso::new(&(root / "critic_torso"), network, init, obs_shape)?;
                // Both torsos have the same architecture, so one width serves both heads.
                let heads = LinearHeads::new(root, actor.output_dim(), n, init);
                Body::Separate {
                    actor,
                    critic,
                    heads,
                }
            }
        };
        // After the heads, and drawing nothing: a discrete network's variables and draws are
        // those it had before box spaces existed.
        let policy = match &action_space {
            ActionSpace::Discrete { .. } => PolicyKind::Categorical,
            ActionSpace::MultiDiscrete { nvec } => PolicyKind::MultiCategorical {
                nvec: nvec.iter().map(|&n| n as i64).collect(),
            },
            ActionSpace::Box { .. } => PolicyKind::Gaussian {
                log_std: root.zeros("policy_log_std", &[1, n]),
                bounds: ActionBounds::new(&action_space, root.device())?,
            },
        };
        Ok(ActorCritic {
            obs_shape: obs_shape.to_vec(),
            action_space,
            policy,
            mask_len,
            scale_pixels: spec.scale_pixels,
            actor_input: spec.actor_input,
            body,
            core,
        })
    }

    /// The network as the host passes see it ([`HostTwinMlp`]) and its policy's kind, when it
    /// has that form: separate MLP torsos on the CPU, no recurrent core, no action mask, no pixel
    /// scaling, a categorical or Gaussian policy. `None` otherwise; an error when it has the
    /// form, `with_grads` is asked and its parameters have no gradients laid out yet (an
    /// optimizer lays them out).
    pub fn host_twin_mlp(&self, with_grads: bool) -> Result<Option<(HostTwinMlp, HostPolicy)>> {
        let Body::TwinMlp { torsos, heads } = &self.body else {
            return Ok(None);
        };
        if self.core.is_some()
            || self.mask_len.is_some()
            || self.scale_pixels
            || heads.weight.device() != tch::Device::Cpu
        {
            return Ok(None);
        }
        let policy = match &self.policy {
            PolicyKind::Categorical => HostPolicy::Categorical,
            PolicyKind::Gaussian { log_std, .. } => HostPolicy::Gaussian {
                log_std: log_std.shallow_clone(),
            },
            PolicyKind::MultiCategorical { .. } => return Ok(None),
        };
        let (layers, activation) = torsos.layers();
        let net = HostTwinMlp::new(layers, (&heads.weight, &heads.bias), activation, with_grads)?;
        Ok(Some((net, policy)))
    }

    /// Whether the network carries a state from step to step.
    pub fn is_recurrent(&self) -> bool {
        self.core.is_some()
    }

    /// Width of one environment's recurrent state (0 for a feed-forward network).
    pub fn state_width(&self) -> i64 {
        self.core.as_ref().map_or(0, RecurrentCore::state_width)
    }

    /// The state of `n` environments before their first step: zeros `[n, width]`.
    pub fn initial_state(&self, n: i64, device: tch::Device) -> Tensor {
        Tensor::zeros([n, self.state_width()], (Kind::Float, device))
    }

    pub fn obs_shape(&self) -> &[i64] {
        &self.obs_shape
    }

    pub fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    /// What the environments receive for actions this policy chose: discrete indices as they
    /// are; a box policy's unit-space samples scaled to the bounds and clipped into them. The
    /// rollout keeps the unclipped samples, whose log-probabilities the update compares.
    pub fn env_actions(&self, actions: &Tensor) -> Tensor {
        match &self.policy {
            PolicyKind::Categorical | PolicyKind::MultiCategorical { .. } => {
                actions.shallow_clone()
            }
            PolicyKind::Gaussian { bounds, .. } => {
                tch::no_grad(|| bounds.clip(&bounds.scale(actions)))
            }
        }
    }

    fn checked_input(&self, obs: &Tensor) -> Result<Tensor> {
        let shape = obs.size();
        if shape.len() != self.obs_shape.len() + 1 || shape[1..] != self.obs_shape[..] {
            bail!(
                "actor-critic: expected observations of shape [batch, {}], got {shape:?}",
                self.obs_shape
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(prepare_observations(obs, self.scale_pixels))
    }

    /// Policy head output (logits `[B, n]` or Gaussian means `[B, d]`) and values `[B]`.
    /// A recurrent network needs its state: [`ActorCritic::act_recurrent`] and the other
    /// `_recurrent` methods.
    pub fn forward(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        ensure!(
            self.core.is_none(),
            "actor-critic: this network is recurrent; step it with its state"
        );
        let x = self.checked_input(obs)?;
        let (head_output, values) = match &self.body {
            Body::Shared { torso, heads } => {
                let features = torso.forward(&x);
                heads.forward(&features, &features)
            }
            Body::Separate {
                actor,
                critic,
                heads,
            } => heads.forward(&actor.forward(&self.actor_view(&x)), &critic.forward(&x)),
            Body::TwinMlp { torsos, heads } => heads.forward(&torsos.forward(&x)),
        };
        Ok((self.masked(head_output, obs), values))
    }

    /// What the actor reads of observations `x`: their leading entries where the critic is a
    /// centralised one, else all of them.
    fn actor_view(&self, x: &Tensor) -> Tensor {
        match self.actor_input {
            Some(len) => x.narrow(1, 0, len),
            None => x.shallow_clone(),
        }
    }

    /// The head's logits with those of actions the observations' masks rule out set to
    /// [`INVALID_LOGIT`] (unchanged without a mask). The torsos read the whole observation,
    /// mask included: which actions are valid is part of what the agent observes.
    fn masked(&self, head_output: Tensor, obs: &Tensor) -> Tensor {
        let Some(len) = self.mask_len else {
            return head_output;
        };
        let width = obs.size()[1];
        let invalid = obs.narrow(1, width - len, len).eq(0.0);
        head_output.masked_fill(&invalid, INVALID_LOGIT)
    }

    /// The action distribution that a policy head output describes.
    pub fn distribution(&self, head_output: &Tensor) -> Result<ActionDistribution> {
        Ok(match &self.policy {
            PolicyKind::Categorical => {
                ActionDistribution::Categorical(Categorical::from_logits(head_output))
            }
            PolicyKind::MultiCategorical { nvec } => ActionDistribution::MultiCategorical(
                MultiCategorical::from_logits(head_output, nvec)?,
            ),
            PolicyKind::Gaussian { log_std, .. } => {
                ActionDistribution::Gaussian(Gaussian::new(head_output, log_std)?)
            }
        })
    }

    /// What a policy head output parameterises, by name: a categorical's (masked) `logits`
    /// `[B, n]` (several categoricals' side by side), or a Gaussian's `mean` and `log_std`
    /// `[B, d]`, in unit space.
    pub fn distribution_parameters(&self, head_output: &Tensor) -> Vec<(&'static str, Tensor)> {
        match &self.policy {
            PolicyKind::Categorical | PolicyKind::MultiCategorical { .. } => {
                vec![("logits", head_output.shallow_clone())]
            }
            PolicyKind::Gaussian { log_std, .. } => vec![
                ("mean", head_output.shallow_clone()),
                ("log_std", log_std.expand_as(head_output)),
            ],
        }
    }

    /// Samples actions for a batch of observations (no gradients recorded).
    pub fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        if host_passes_pay()
            && let Some((net, policy)) = self.host_twin_mlp(false)?
        {
            return self.act_on_host(net, policy, obs);
        }
        tch::no_grad(|| {
            let (logits, values) = self.forward(obs)?;
            let dist = self.distribution(&logits)?;
            let actions = dist.sample()?;
            let log_probs = dist.log_prob(&actions)?;
            Ok(ActTaken {
                actions,
                log_probs,
                values,
            })
        })
    }

    /// The most likely action per observation (evaluation, `tandem play`): a box policy's
    /// mean, in unit space like [`ActorCritic::act`]'s samples.
    pub fn act_greedy(&self, obs: &Tensor) -> Result<Tensor> {
        tch::no_grad(|| {
            let (logits, _) = self.forward(obs)?;
            Ok(self.distribution(&logits)?.mode())
        })
    }

    /// [`ActorCritic::act`] by a host forward pass ([`HostTwinMlp`]): the same distribution,
    /// its draws from libtorch's generator (one uniform per row for a categorical, by its
    /// inverse CDF; one normal per dimension for a Gaussian), without a dispatch per layer.
    fn act_on_host(
        &self,
        mut net: HostTwinMlp,
        policy: HostPolicy,
        obs: &Tensor,
    ) -> Result<ActTaken> {
        let n = net.head_width();
        let (policy_out, values) = self.host_heads(&mut net, obs)?;
        let rows = values.len() as i64;
        let device = obs.device();
        let (actions, log_probs) = match policy {
            HostPolicy::Categorical => {
                let uniform = Vec::<f32>::try_from(Tensor::rand([rows], (Kind::Float, device)))?;
                sample_categorical_rows(policy_out, n, &uniform)?
            }
            HostPolicy::Gaussian { log_std } => {
                let noise =
                    Vec::<f32>::try_from(Tensor::randn([rows * n as i64], (Kind::Float, device)))?;
                let log_std = Vec::<f32>::try_from(log_std.reshape([-1]))?;
                sample_gaussian_rows(policy_out, &log_std, &noise)
            }
        };
        Ok(ActTaken {
            actions,
            log_probs: Tensor::from_slice(&log_probs),
            values: Tensor::from_slice(&values),
        })
    }

    /// The host forward pass over `obs`: the policy head's outputs `[rows, head width]` and the
    /// values `[rows]`.
    fn host_heads<'n>(
        &self,
        net: &'n mut HostTwinMlp,
        obs: &Tensor,
    ) -> Result<(&'n [f32], Vec<f32>)> {
        let x = self.checked_input(obs)?.contiguous();
        let n = net.head_width();
        let heads = net.forward(float_view(&x, "the observations")?)?;
        let (policy_out, value_out) = heads.split_at(heads.len() / 2);
        Ok((policy_out, value_out.iter().step_by(n).copied().collect()))
    }

    /// V(s) `[B]` without gradients: bootstrap values for the last observation and for
    /// observations at which an episode was truncated.
    pub fn value(&self, obs: &Tensor) -> Result<Tensor> {
        if host_passes_pay()
            && let Some((mut net, _)) = self.host_twin_mlp(false)?
        {
            let (_, values) = self.host_heads(&mut net, obs)?;
            return Ok(Tensor::from_slice(&values));
        }
        tch::no_grad(|| Ok(self.forward(obs)?.1))
    }

    /// log pi(a|s), entropy and V(s) for stored observations and actions, with gradients.
    pub fn evaluate(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        entropy: EntropyUse,
    ) -> Result<Evaluation> {
        self.check_actions(obs, actions)?;
        let (logits, values) = self.forward(obs)?;
        self.evaluation(&logits, values, actions, entropy)
    }

    /// The evaluation of `actions` under the policy a head output describes.
    fn evaluation(
        &self,
        head_output: &Tensor,
        values: Tensor,
        actions: &Tensor,
        entropy: EntropyUse,
    ) -> Result<Evaluation> {
        let dist = self.distribution(head_output)?;
        Ok(Evaluation {
            log_probs: dist.log_prob(actions)?,
            entropy: match entropy {
                EntropyUse::Differentiable => dist.entropy(),
                EntropyUse::ReportOnly => tch::no_grad(|| dist.entropy()),
            },
            values,
        })
    }

    /// The recurrent forward pass over `obs` `[T * n, ...]` (step-major), from `state`
    /// `[n, width]`, zeroing the state where `starts` `[T * n]` is 1.
    pub(crate) fn forward_sequence(
        &self,
        obs: &Tensor,
        starts: &Tensor,
        state: &Tensor,
    ) -> Result<SequenceOutput> {
        let (Some(core), Body::Shared { torso, heads }) = (&self.core, &self.body) else {
            bail!("actor-critic: this network is not recurrent; it takes no state");
        };
        let x = self.checked_input(obs)?;
        let rows = x.size()[0];
        let envs = state.size().first().copied().unwrap_or(0);
        ensure!(
            state.size() == [envs, core.state_width()]
                && envs > 0
                && rows % envs == 0
                && starts.size() == [rows],
            "actor-critic: {rows} observations, starts of shape {:?} and a state of shape {:?} \
             do not make whole steps of [envs, {}] states",
            starts.size(),
            state.size(),
            core.state_width()
        );
        let (features, state) = core.forward(&torso.forward(&x), starts, state);
        let (head_output, values) = heads.forward(&features, &features);
        Ok(SequenceOutput {
            head_output: self.masked(head_output, obs),
            values,
            state,
        })
    }

    /// [`ActorCritic::act`] for one step of a recurrent network: `state` `[n, width]` before
    /// the step, `starts` `[n]` 1 where the observation begins an episode. Returns what was
    /// taken and the state after the step.
    pub fn act_recurrent(
        &self,
        obs: &Tensor,
        starts: &Tensor,
        state: &Tensor,
    ) -> Result<(ActTaken, Tensor)> {
        tch::no_grad(|| {
            let out = self.forward_sequence(obs, starts, state)?;
            let dist = self.distribution(&out.head_output)?;
            let actions = dist.sample()?;
            let log_probs = dist.log_prob(&actions)?;
            let taken = ActTaken {
                actions,
                log_probs,
                values: out.values,
            };
            Ok((taken, out.state))
        })
    }

    /// [`ActorCritic::act_greedy`] for one step of a recurrent network, with the state after it.
    pub fn act_greedy_recurrent(
        &self,
        obs: &Tensor,
        starts: &Tensor,
        state: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        tch::no_grad(|| {
            let out = self.forward_sequence(obs, starts, state)?;
            Ok((self.distribution(&out.head_output)?.mode(), out.state))
        })
    }

    /// [`ActorCritic::value`] for one step of a recurrent network (the state is not advanced).
    pub fn value_recurrent(&self, obs: &Tensor, starts: &Tensor, state: &Tensor) -> Result<Tensor> {
        tch::no_grad(|| Ok(self.forward_sequence(obs, starts, state)?.values))
    }

    /// [`ActorCritic::evaluate`] over whole sequences: `obs` `[T * n, ...]` and `actions`
    /// step-major, the states recomputed from `state` `[n, width]` with resets at `starts`.
    pub fn evaluate_recurrent(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        starts: &Tensor,
        state: &Tensor,
        entropy: EntropyUse,
    ) -> Result<Evaluation> {
        Ok(self
            .evaluate_recurrent_to_end(obs, actions, starts, state, entropy)?
            .0)
    }

    /// [`ActorCritic::evaluate_recurrent`] that also returns each environment's state after
    /// the sequence's last step `[n, width]`.
    pub fn evaluate_recurrent_to_end(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        starts: &Tensor,
        state: &Tensor,
        entropy: EntropyUse,
    ) -> Result<(Evaluation, Tensor)> {
        self.check_actions(obs, actions)?;
        let out = self.forward_sequence(obs, starts, state)?;
        let evaluation = self.evaluation(&out.head_output, out.values, actions, entropy)?;
        Ok((evaluation, out.state))
    }

    /// Stored actions of this space for a batch of observations: `[B]` integers (discrete),
    /// `[B, k]` integers (multi-discrete) or `[B, d]` floats (box).
    fn check_actions(&self, obs: &Tensor, actions: &Tensor) -> Result<()> {
        let batch = obs.size().first().copied().unwrap_or(0);
        let (expected, integers) = match &self.action_space {
            ActionSpace::Discrete { .. } => (vec![batch], true),
            ActionSpace::MultiDiscrete { nvec } => (vec![batch, nvec.len() as i64], true),
            ActionSpace::Box { low, .. } => (vec![batch, low.len() as i64], false),
        };
        ensure!(
            actions.size() == expected,
            "actor-critic: expected actions of shape {expected:?} for {batch} observations, got {:?}",
            actions.size()
        );
        if integers {
            ensure!(
                matches!(
                    actions.kind(),
                    Kind::Int64 | Kind::Int | Kind::Int16 | Kind::Int8 | Kind::Uint8
                ),
                "actor-critic: discrete actions must be integers, got {:?}",
                actions.kind()
            );
        } else {
            ensure!(
                actions.is_floating_point(),
                "actor-critic: box actions must be floats, got {:?}",
                actions.kind()
            );
        }
        Ok(())
    }
}

/// One action per row of categorical logits `[rows, n]`, by the inverse CDF at `uniform[i]`,
/// and its log-probability: actions `[rows]` (int64) and log-probabilities.
fn sample_categorical_rows(
    logits: &[f32],
    n: usize,
    uniform: &[f32],
) -> Result<(Tensor, Vec<f32>)> {
    let mut log_probs = vec![0f32; n];
    let mut actions = Vec::with_capacity(uniform.len());
    let mut picked = Vec::with_capacity(uniform.len());
    for (row, &u) in logits.chunks_exact(n).zip(uniform) {
        log_softmax_into(row, &mut log_probs);
        ensure!(
            log_probs.iter().all(|lp| !lp.is_nan()),
            "categorical: cannot sample from these action probabilities (has the policy diverged?): \
             logits {row:?}"
        );
        // The first action whose cumulative probability passes u; the last one with any
        // probability where rounding leaves the sum below u.
        let mut cumulative = 0f32;
        let mut action = log_probs.iter().rposition(|lp| lp.exp() > 0.0).unwrap_or(0);
        for (a, lp) in log_probs.iter().enumerate() {
            let p = lp.exp();
            cumulative += p;
            if u < cumulative && p > 0.0 {
                action = a;
                break;
            }
        }
        actions.push(action as i64);
        picked.push(log_probs[action]);
    }
    Ok((Tensor::from_slice(&actions), picked))
}

/// mean + sigma * noise per row of Gaussian means `[rows, d]`, and the draw's log-density:
/// actions `[rows, d]` and log-probabilities, as `Gaussian::sample` and `log_prob` compute them.
fn sample_gaussian_rows(means: &[f32], log_std: &[f32], noise: &[f32]) -> (Tensor, Vec<f32>) {
    let d = log_std.len();
    let actions: Vec<f32> = means
        .iter()
        .zip(noise)
        .enumerate()
        .map(|(i, (mu, eps))| mu + log_std[i % d].exp() * eps)
        .collect();
    let log_probs = actions
        .chunks_exact(d)
        .zip(means.chunks_exact(d))
        .map(|(a, mu)| gaussian_log_prob_row(a, mu, log_std))
        .collect();
    let rows = (actions.len() / d.max(1)) as i64;
    (
        Tensor::from_slice(&actions).view([rows, d as i64]),
        log_probs,
    )
}

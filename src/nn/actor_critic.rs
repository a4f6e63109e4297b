//! The actor-critic used by PPO and A2C: a torso (shared by both heads, or one per head), a
//! policy head giving an [`ActionDistribution`] and a value head giving V(s).

use anyhow::{Result, bail, ensure};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::distribution::{ActionDistribution, Categorical};
use super::init::{InitSpec, init_stacked_slice, linear};
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
}

impl ActorCriticSpec {
    /// The customary setup for a network: shared torso for image networks, separate for MLPs;
    /// pixel scaling for the networks that read raw frames (Nature CNN, IMPALA), not for the
    /// MinAtar net (its observations are already 0/1) nor MLPs.
    pub fn for_network(network: NetworkSpec, init: InitSpec) -> Self {
        let share_torso = network.is_image();
        let scale_pixels = matches!(
            network,
            NetworkSpec::NatureCnn { .. } | NetworkSpec::ImpalaResNet { .. }
        );
        ActorCriticSpec {
            network,
            share_torso,
            scale_pixels,
            init,
        }
    }
}

/// The environment's action space as the network sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionSpace {
    /// `n` discrete actions `0..n`.
    Discrete { n: i64 },
}

#[derive(Debug)]
enum ActionHead {
    /// Linear layer to `n` logits.
    Categorical(nn::Linear),
}

/// What `act` returns for a batch of observations; all `[B]`, detached.
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
    action: ActionHead,
    value: nn::Linear,
}

impl LinearHeads {
    fn new(root: &nn::Path, features: i64, n: i64, init: &InitSpec) -> LinearHeads {
        LinearHeads {
            action: ActionHead::Categorical(linear(
                root / "policy_head",
                features,
                n,
                init.policy(),
            )),
            value: linear(root / "value_head", features, 1, init.value()),
        }
    }

    fn forward(&self, actor_features: &Tensor, critic_features: &Tensor) -> (Tensor, Tensor) {
        let ActionHead::Categorical(head) = &self.action;
        let logits = head.forward(actor_features);
        let values = self.value.forward(critic_features).squeeze_dim(-1);
        (logits, values)
    }
}

/// The two heads of a [`TwinMlp`] actor-critic, stacked like its layers: one weight
/// `heads.weight` `[2, features, n]` and one bias `heads.bias` `[2, 1, n]`, so both heads are
/// one batched matrix multiply instead of two linear layers, two transposes, two torso slices
/// and a squeeze (about 10% of a CartPole PPO step; docs/performance.md). Slice 0 is the policy
/// head (`n` logits); slice 1 is the value head in its column 0. The value slice's other `n - 1`
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

    /// Stacked features `[2, B, features]` to logits `[B, n]` and values `[B]`.
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
    scale_pixels: bool,
    body: Body,
}

impl ActorCritic {
    /// Creates the variables under `root` (normally `vs.root()`). Variable names: `torso.*`
    /// (shared) or `actor_torso.*` and `critic_torso.*` (separate image torsos), then
    /// `policy_head.*` and `value_head.*`; separate MLP torsos and their heads are stacked as
    /// `torsos.*` and `heads.*` (see [`TwinMlp`] and `StackedHeads`).
    pub fn new(
        root: &nn::Path,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        action_space: ActionSpace,
    ) -> Result<Self> {
        let ActionSpace::Discrete { n } = action_space;
        ensure!(
            n >= 1,
            "action space: a discrete action space needs at least one action, got {n}"
        );
        let init = &spec.init;
        // Torsos are created before heads, so a seed gives the same initial weights whatever
        // the layout.
        let body = match &spec.network {
            _ if spec.share_torso => {
                let torso = Torso::new(&(root / "torso"), &spec.network, init, obs_shape)?;
                let heads = LinearHeads::new(root, torso.output_dim(), n, init);
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
        Ok(ActorCritic {
            obs_shape: obs_shape.to_vec(),
            action_space,
            scale_pixels: spec.scale_pixels,
            body,
        })
    }

    pub fn obs_shape(&self) -> &[i64] {
        &self.obs_shape
    }

    pub fn action_space(&self) -> ActionSpace {
        self.action_space
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

    /// Policy head output (logits `[B, n]`) and values `[B]`.
    pub fn forward(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        let x = self.checked_input(obs)?;
        Ok(match &self.body {
            Body::Shared { torso, heads } => {
                let features = torso.forward(&x);
                heads.forward(&features, &features)
            }
            Body::Separate {
                actor,
                critic,
                heads,
            } => heads.forward(&actor.forward(&x), &critic.forward(&x)),
            Body::TwinMlp { torsos, heads } => heads.forward(&torsos.forward(&x)),
        })
    }

    /// The action distribution that a policy head output describes.
    pub fn distribution(&self, head_output: &Tensor) -> ActionDistribution {
        match self.action_space {
            ActionSpace::Discrete { .. } => {
                ActionDistribution::Categorical(Categorical::from_logits(head_output))
            }
        }
    }

    /// Samples actions for a batch of observations (no gradients recorded).
    pub fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        tch::no_grad(|| {
            let (logits, values) = self.forward(obs)?;
            let dist = self.distribution(&logits);
            let actions = dist.sample()?;
            let log_probs = dist.log_prob(&actions)?;
            Ok(ActTaken {
                actions,
                log_probs,
                values,
            })
        })
    }

    /// The most likely action per observation (evaluation, `tandem play`).
    pub fn act_greedy(&self, obs: &Tensor) -> Result<Tensor> {
        tch::no_grad(|| {
            let (logits, _) = self.forward(obs)?;
            Ok(self.distribution(&logits).mode())
        })
    }

    /// V(s) `[B]` without gradients: bootstrap values for the last observation and for
    /// observations at which an episode was truncated.
    pub fn value(&self, obs: &Tensor) -> Result<Tensor> {
        tch::no_grad(|| Ok(self.forward(obs)?.1))
    }

    /// log pi(a|s), entropy and V(s) for stored observations and actions, with gradients.
    pub fn evaluate(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        entropy: EntropyUse,
    ) -> Result<Evaluation> {
        let batch = obs.size().first().copied().unwrap_or(0);
        ensure!(
            actions.size() == [batch],
            "actor-critic: expected actions of shape [{batch}] for {batch} observations, got {:?}",
            actions.size()
        );
        ensure!(
            matches!(
                actions.kind(),
                Kind::Int64 | Kind::Int | Kind::Int16 | Kind::Int8 | Kind::Uint8
            ),
            "actor-critic: discrete actions must be integers, got {:?}",
            actions.kind()
        );
        let (logits, values) = self.forward(obs)?;
        let dist = self.distribution(&logits);
        Ok(Evaluation {
            log_probs: dist.log_prob(actions)?,
            entropy: match entropy {
                EntropyUse::Differentiable => dist.entropy(),
                EntropyUse::ReportOnly => tch::no_grad(|| dist.entropy()),
            },
            values,
        })
    }
}

//! The trained policy of any learner, acting in a batch of environments on the CPU: what
//! `tandem play` acts with (its weights from a checkpoint) and what evaluation during training
//! acts with (its weights copied from the learner's networks). A recurrent policy carries its
//! state from step to step, zeroed where an episode starts, as in training.

use anyhow::Result;
use tch::nn::VarStore;
use tch::{Device, Tensor};

use crate::algo::dqn::Dqn;
use crate::algo::off_policy::box_rule::BoxLearner;
use crate::algo::storage::memory::Memory;
use crate::nn::{ActorCritic, ActorCriticSpec, named_parameters};
use tandem_config::{Algorithm, Experiment};
use tandem_env::{ActionSpace, VecEnv};

/// Exploration kept when a Q-learner does not act greedily (the usual Atari evaluation value).
pub const EVAL_EPSILON: f64 = 0.05;

/// How a trained policy acts where it is judged rather than trained: evaluation during training
/// and `tandem play` follow [`Acting::rule`], so a score from either means the same thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acting {
    /// The most likely action: a box policy's mean, a Q-learner's greedy action, TD3's actor
    /// without noise.
    Greedy,
    /// Drawn from the policy (a Q-learner epsilon-greedy, TD3's actor with its noise).
    Sampled,
}

impl Acting {
    /// The experiment's `eval.deterministic` (default `#true`, as SB3's EvalCallback), unless
    /// the caller asks otherwise (`tandem play --greedy` or `--sample`).
    pub fn rule(deterministic: bool, asked: Option<Acting>) -> Acting {
        asked.unwrap_or(match deterministic {
            true => Acting::Greedy,
            false => Acting::Sampled,
        })
    }

    pub fn is_greedy(self) -> bool {
        self == Acting::Greedy
    }
}

/// `greedy` or `sampled`, as the console lines say it.
impl std::fmt::Display for Acting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Acting::Greedy => "greedy",
            Acting::Sampled => "sampled",
        })
    }
}

/// One deterministic pass of a policy over a batch, everything an exported module returns
/// (`tandem export` traces it).
pub struct Outputs {
    /// What [`Policy::act`] sends the environments when greedy.
    pub actions: Tensor,
    /// The action distribution's parameters by name: [`ActorCritic::distribution_parameters`];
    /// a Q-learner's `q_values` `[B, n]`; SAC's `mean` and `log_std` before the tanh; none for
    /// TD3's deterministic actor.
    pub parameters: Vec<(&'static str, Tensor)>,
    /// V(s) `[B]` for an actor-critic, max_a Q(s, a) for a Q-learner, the twin critics' smaller
    /// Q(s, a) at the policy's own action for SAC and TD3.
    pub value: Tensor,
    /// A recurrent network's state after the step.
    pub state: Option<Tensor>,
}

/// The trained policy of either kind of learner.
pub enum Policy {
    /// With its recurrent memory, when the network has a core.
    ActorCritic(Box<ActorCriticPolicy>),
    /// Acts epsilon-greedily (`EVAL_EPSILON`) unless greedy.
    Dqn(Box<Dqn>),
    /// Box actions: tanh(mean) scaled to the bounds unless sampling.
    Sac(Box<SacPolicy>),
    /// Box actions: the deterministic actor's, scaled to the bounds; sampling adds the
    /// exploration noise of training.
    Td3(Box<Td3Policy>),
}

/// An actor-critic, the store of its variables, and its recurrent memory when it has a core.
pub struct ActorCriticPolicy {
    model: ActorCritic,
    store: VarStore,
    memory: Option<Memory>,
    envs: i64,
}

impl ActorCriticPolicy {
    fn outputs(&self, obs: &Tensor, state: Option<&Tensor>) -> Result<Outputs> {
        let m = &self.model;
        let (head_output, value, state) = match state {
            Some(state) => {
                // One step whose observation continues the state's episode: the caller zeroes
                // the state where one starts. Zeros shaped by the observations (a traced pass
                // takes any batch).
                let starts = obs.flatten(1, -1).select(1, 0).zeros_like();
                let out = m.forward_sequence(obs, &starts, state)?;
                (out.head_output, out.values, Some(out.state))
            }
            None => {
                let (head_output, value) = m.forward(obs)?;
                (head_output, value, None)
            }
        };
        Ok(Outputs {
            actions: m.env_actions(&m.distribution(&head_output)?.mode()),
            parameters: m.distribution_parameters(&head_output),
            value,
            state,
        })
    }
}

/// A TD3 learner's actor, the bounds its unit-box actions scale to, and the standard
/// deviation of its exploration noise.
pub struct Td3Policy {
    td3: crate::algo::td3::Td3,
    bounds: crate::nn::ActionBounds,
    exploration_noise: f64,
}

impl Td3Policy {
    fn build(
        cfg: &tandem_config::Td3,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        space: &ActionSpace,
    ) -> Result<Td3Policy> {
        use crate::algo::td3::Td3;
        let bounds =
            crate::algo::off_policy::box_rule::squashable_bounds("td3", space, Device::Cpu)?;
        let td3 = Td3::new(
            Device::Cpu,
            &spec.network,
            &spec.init,
            obs_shape,
            space.dim() as i64,
            cfg.clone(),
        )?;
        Ok(Td3Policy {
            td3,
            bounds,
            exploration_noise: cfg.exploration_noise,
        })
    }

    /// `[B, d]` actions in the environment's units.
    fn act(&self, obs: &Tensor, sample: bool) -> Result<Tensor> {
        let actor = self.td3.actor();
        let unit = if sample {
            crate::algo::td3::explore(actor, obs, self.exploration_noise)?
        } else {
            actor.forward(obs)?
        };
        Ok(self.bounds.scale(&unit))
    }
}

/// A SAC learner's actor and the bounds its unit-box actions scale to.
pub struct SacPolicy {
    sac: crate::algo::sac::Sac,
    bounds: crate::nn::ActionBounds,
    action_dim: i64,
}

impl SacPolicy {
    fn build(
        cfg: &tandem_config::Sac,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        space: &ActionSpace,
    ) -> Result<SacPolicy> {
        use crate::algo::off_policy::box_rule::squashable_bounds;
        use crate::algo::sac::Sac;
        let bounds = squashable_bounds("sac", space, Device::Cpu)?;
        let dim = space.dim();
        let sac = Sac::new(
            Device::Cpu,
            &spec.network,
            &spec.init,
            obs_shape,
            dim as i64,
            cfg.clone(),
        )?;
        Ok(SacPolicy {
            sac,
            bounds,
            action_dim: dim as i64,
        })
    }

    /// `[B, d]` actions in the environment's units.
    fn act(&self, obs: &Tensor, sample: bool) -> Result<Tensor> {
        let actor = self.sac.actor();
        let unit = if sample {
            let eps = Tensor::randn(
                [obs.size()[0], self.action_dim],
                (tch::Kind::Float, obs.device()),
            );
            actor.sample(obs, &eps)?.action
        } else {
            actor.deterministic(obs)?
        };
        Ok(self.bounds.scale(&unit))
    }
}

impl Policy {
    /// The networks `experiment`'s learner acts with, freshly initialised on the CPU, for a
    /// batch of `envs` environments at their episodes' start; [`Policy::targets`] names what to
    /// fill them from.
    pub fn build(
        experiment: &Experiment,
        spec: &ActorCriticSpec,
        obs_shape: &[i64],
        space: &ActionSpace,
        envs: usize,
    ) -> Result<Policy> {
        let mut policy = match &experiment.algorithm {
            Algorithm::Sac(cfg) => {
                Policy::Sac(Box::new(SacPolicy::build(cfg, spec, obs_shape, space)?))
            }
            Algorithm::Td3(cfg) => {
                Policy::Td3(Box::new(Td3Policy::build(cfg, spec, obs_shape, space)?))
            }
            Algorithm::Dqn(cfg) => Policy::Dqn(Box::new(Dqn::new(
                Device::Cpu,
                spec,
                obs_shape,
                space.num_discrete().unwrap_or(0) as i64,
                cfg.clone(),
            )?)),
            Algorithm::Ppo(_) | Algorithm::A2c(_) => {
                let store = VarStore::new(Device::Cpu);
                let model = ActorCritic::new(&store.root(), spec, obs_shape, space.clone())?;
                Policy::ActorCritic(Box::new(ActorCriticPolicy {
                    memory: None,
                    envs: envs as i64,
                    model,
                    store,
                }))
            }
        };
        policy.start_episodes();
        Ok(policy)
    }

    /// The policy's variables by the names the learner's networks (and a checkpoint) give
    /// them, to be filled from there.
    pub fn targets(&self) -> Vec<(String, Tensor)> {
        match self {
            Policy::ActorCritic(ac) => named_parameters(&ac.store, "model"),
            Policy::Dqn(d) => d.named_state(),
            Policy::Sac(s) => s.sac.named_state(),
            Policy::Td3(t) => t.td3.named_state(),
        }
    }

    /// Copies the learner's `networks` into the policy (each of its variables must be among
    /// them, of the same shape) and starts every environment's episode afresh.
    pub fn copy_from(&mut self, networks: &[(String, Tensor)]) -> Result<()> {
        crate::nn::copy_named(networks, "network tensor", &self.targets(), |name| {
            format!("the learner has no network tensor `{name}`")
        })?;
        self.start_episodes();
        Ok(())
    }

    /// Every environment's next observation starts an episode: a recurrent policy's state is
    /// zeroed.
    fn start_episodes(&mut self) {
        if let Policy::ActorCritic(ac) = self {
            ac.memory = ac
                .model
                .is_recurrent()
                .then(|| Memory::new(&ac.model, ac.envs, Device::Cpu));
        }
    }

    /// The actions to send to the environments (a box policy's scaled and clipped).
    pub fn act(&mut self, obs: &Tensor, greedy: bool) -> Result<Tensor> {
        match self {
            Policy::Sac(s) => s.act(obs, !greedy),
            Policy::Td3(t) => t.act(obs, !greedy),
            Policy::ActorCritic(ac) => {
                let m = &ac.model;
                match &mut ac.memory {
                    Some(memory) => {
                        let (actions, state) = if greedy {
                            m.act_greedy_recurrent(obs, &memory.starts, &memory.state)?
                        } else {
                            let (taken, state) =
                                m.act_recurrent(obs, &memory.starts, &memory.state)?;
                            (taken.actions, state)
                        };
                        memory.state = state;
                        Ok(m.env_actions(&actions))
                    }
                    None if greedy => Ok(m.env_actions(&m.act_greedy(obs)?)),
                    None => Ok(m.env_actions(&m.act(obs)?.actions)),
                }
            }
            Policy::Dqn(d) => d.act(obs, if greedy { 0.0 } else { EVAL_EPSILON }),
        }
    }

    /// Width of a recurrent network's state `[B, width]` (`None` without one).
    pub fn state_width(&self) -> Option<i64> {
        match self {
            Policy::ActorCritic(ac) if ac.model.is_recurrent() => Some(ac.model.state_width()),
            _ => None,
        }
    }

    /// The greedy pass over `obs` and, for a recurrent network, from `state` (zeros where an
    /// episode starts), by the same operations as [`Policy::act`]'s greedy actions.
    pub fn outputs(&self, obs: &Tensor, state: Option<&Tensor>) -> Result<Outputs> {
        tch::no_grad(|| match self {
            Policy::ActorCritic(ac) => ac.outputs(obs, state),
            Policy::Dqn(d) => {
                let q = d.q_values(obs)?;
                Ok(Outputs {
                    actions: q.argmax(-1, false),
                    value: q.amax([-1], false),
                    parameters: vec![("q_values", q)],
                    state: None,
                })
            }
            Policy::Sac(s) => {
                let (mean, log_std) = s.sac.actor().mean_and_log_std(obs)?;
                let unit = mean.tanh();
                Ok(Outputs {
                    actions: s.bounds.scale(&unit),
                    value: s.sac.min_q(obs, &unit),
                    parameters: vec![("mean", mean), ("log_std", log_std)],
                    state: None,
                })
            }
            Policy::Td3(t) => {
                let unit = t.td3.actor().forward(obs)?;
                Ok(Outputs {
                    actions: t.bounds.scale(&unit),
                    value: t.td3.min_q(obs, &unit),
                    parameters: Vec::new(),
                    state: None,
                })
            }
        })
    }

    /// After a step: a recurrent policy's next observation starts an episode where this one
    /// ended (for learning: a lost life counts, as in training).
    pub fn stepped(&mut self, env: &VecEnv) {
        if let Policy::ActorCritic(ac) = self
            && let Some(memory) = &mut ac.memory
        {
            let ended: Vec<f32> = (env.terminated().iter().zip(env.truncated()))
                .map(|(&t, &u)| f32::from(u8::from(t || u)))
                .collect();
            memory.starts = Tensor::from_slice(&ended);
        }
    }
}

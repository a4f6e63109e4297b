//! The learner interface: what the run skeleton (`crate::train`) asks of every algorithm, and
//! the one place that maps the config's `algorithm` onto a learner ([`build`]).
//!
//! A learner owns its networks, optimizer and experience storage. The skeleton owns everything
//! else (environments, counters, the stop decision, episodes, summaries, checkpoints,
//! fingerprints), and drives the learner one *round* at a time: a round is one or more updates,
//! after which ranks exchange episodes and decisions. A learner sees other ranks only through
//! [`Collective`].
//!
//! Adding a learner is a file under `src/algo/` implementing [`Learner`], its arm in [`build`],
//! and its schema entry in tandem-config.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use tch::{Device, Tensor};

use tandem_config::{Algorithm, Experiment};
use tandem_env::{ActionSpace, VecEnv};

use super::Collective;
use crate::nn::ActorCriticSpec;

/// The scalars one round produced, by TensorBoard tag.
pub type Scalars = Vec<(&'static str, f64)>;

/// Where a run stands. A global step is one environment step on one rank's environment, so one
/// update of N environments on each of W ranks adds N x W x (steps per environment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Updates (on-policy) or iterations (off-policy) done; checkpoints are named by it.
    pub update: u64,
    pub global_step: u64,
}

/// When the run ends: after `total_updates` updates or at `stop_step` global steps, whichever
/// comes first.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total_updates: u64,
    pub stop_step: u64,
    /// `train.total-steps`: the horizon of schedules (learning-rate annealing, epsilon, beta).
    pub total_steps: u64,
}

impl Limits {
    pub fn reached(&self, at: Counters) -> bool {
        at.update >= self.total_updates || at.global_step >= self.stop_step
    }
}

/// Wall time by phase of the current logging interval (logged as `time/<phase>_s`).
#[derive(Debug, Default)]
pub struct Phases {
    spent: Vec<(&'static str, Duration)>,
}

impl Phases {
    pub fn add(&mut self, phase: &'static str, time: Duration) {
        match self.spent.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, total)) => *total += time,
            None => self.spent.push((phase, time)),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Duration)> + '_ {
        self.spent.iter().copied()
    }
}

/// What a learner is given for one round.
pub struct Round<'a> {
    pub counters: &'a mut Counters,
    pub limits: Limits,
    pub collective: &'a mut dyn Collective,
    pub phases: &'a mut Phases,
}

/// What the skeleton knows of a checkpoint when a learner restores its per-rank files.
pub struct Resumed<'a> {
    /// The checkpoint's directory, where [`Learner::save_rank_files`] wrote.
    pub dir: &'a Path,
    pub checkpoint: &'a Path,
    pub global_step: u64,
    /// The world size the checkpoint was written on, and this run's.
    pub saved_world: usize,
    pub world: usize,
    /// Whether this rank's environments continue the saved episodes.
    pub envs_restored: bool,
}

/// What a learner is built from: the resolved config, this rank's environments (for their
/// spaces) and its place.
pub struct Setting<'a> {
    pub experiment: &'a Experiment,
    pub envs: &'a VecEnv,
    pub rank: usize,
    pub world: usize,
    pub device: Device,
}

pub trait Learner {
    /// Global steps one update adds (all ranks together).
    fn steps_per_update(&self) -> u64;
    /// Updates per round: the skeleton exchanges episodes and decisions after each round.
    fn updates_per_round(&self) -> u64 {
        1
    }
    /// The tensors DDP synchronises gradients of, in a rank-independent order.
    fn trainable_parameters(&self) -> Vec<Tensor>;
    /// The networks' variables by name (`model.*`, and `target.*` for a target network).
    fn networks(&self) -> Vec<(String, Tensor)>;
    /// The optimizer's state tensors by name.
    fn optimizer_state(&self) -> Vec<(String, Tensor)>;
    /// Every tensor a checkpoint holds and a resume restores: also what rank 0 broadcasts at
    /// the start and what fingerprints compare.
    fn state(&self) -> Vec<(String, Tensor)> {
        let mut named = self.networks();
        named.extend(self.optimizer_state());
        named
    }
    /// Counters saved beside [`Learner::state`] as `learner.<name>`.
    fn counters(&self) -> Vec<(&'static str, u64)>;
    fn set_counter(&mut self, name: &str, value: u64) -> Result<()>;
    /// Collects experience and learns, advancing `round.counters`, until the round ends or the
    /// limits are reached.
    fn round(&mut self, envs: &mut VecEnv, round: Round) -> Result<()>;
    /// The learner's own scalars of its latest update (losses, statistics, schedules).
    fn scalars(&self) -> Scalars;
    /// Whether the latest update produced a non-finite loss or gradient.
    fn diverged(&self) -> bool;
    /// Learner-specific fields of `summary.json`, already JSON values.
    fn summary_fields(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Writes what this rank keeps for itself at a checkpoint (a replay buffer) into `dir`.
    fn save_rank_files(&mut self, _dir: &Path, _global_step: u64) -> Result<()> {
        Ok(())
    }
    /// Reads back what [`Learner::save_rank_files`] wrote, when it can continue.
    fn restore_rank_files(&mut self, _resumed: &Resumed) -> Result<()> {
        Ok(())
    }
}

/// This rank's learner for the experiment's algorithm, its networks initialised from the
/// current torch seed (the skeleton seeds it, then broadcasts rank 0's state).
pub fn build(
    experiment: &Experiment,
    envs: &VecEnv,
    rank: usize,
    world: usize,
    device: Device,
) -> Result<Box<dyn Learner>> {
    let setting = Setting {
        experiment,
        envs,
        rank,
        world,
        device,
    };
    takes_the_action_space(&experiment.algorithm, envs.action_space())?;
    Ok(match &experiment.algorithm {
        Algorithm::Ppo(config) => Box::new(super::on_policy::OnPolicy::new(&setting, |vs| {
            super::ppo::Ppo::from_config(vs, config, experiment)
        })?),
        Algorithm::A2c(config) => Box::new(super::on_policy::OnPolicy::new(&setting, |vs| {
            super::a2c::A2c::from_config(vs, config, experiment)
        })?),
        Algorithm::Dqn(config) => Box::new(super::dqn::DqnRule::learner(&setting, config)?),
        Algorithm::Sac(config) => Box::new(super::sac::SacRule::learner(&setting, config)?),
        Algorithm::Td3(config) => Box::new(super::td3::Td3Rule::learner(&setting, config)?),
    })
}

/// The network `experiment` declares for `envs` (pixel scaling decided by their built
/// observation where the config cannot tell) and the observation shape it reads.
pub fn network_for(experiment: &Experiment, envs: &VecEnv) -> Result<(ActorCriticSpec, Vec<i64>)> {
    let spec = ActorCriticSpec::from_experiment(
        experiment,
        envs.env_observation_space().is_pixel_image(),
    )?;
    let obs_shape = envs.obs_shape().iter().map(|&d| d as i64).collect();
    Ok((spec, obs_shape))
}

/// Refuses an environment whose actions the algorithm cannot choose: ppo and a2c take either
/// kind, dqn only discrete actions, sac and td3 only boxes. The resolver refuses this for games
/// it knows; a gymnasium environment's space is known only once it is built.
pub fn takes_the_action_space(algorithm: &Algorithm, space: &ActionSpace) -> Result<()> {
    if algorithm.squashes_box_actions() {
        if space.is_discrete() {
            bail!(
                "{} chooses box actions, but the environment takes {space}; pick an \
                 environment with a box action space, or dqn, ppo or a2c for discrete actions",
                algorithm.name()
            );
        }
        return Ok(());
    }
    if matches!(algorithm, Algorithm::Dqn(_)) && !space.is_discrete() {
        bail!(
            "{} chooses discrete actions, but the environment takes a {space}; \
             pick an environment with a discrete action space, or ppo or a2c for boxes",
            algorithm.name()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn algorithm(name: &str) -> Algorithm {
        let text =
            format!("experiment \"x\" {{\n    algorithm \"{name}\"\n    env \"cartpole\"\n}}\n");
        tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
            .expect("resolves")
            .experiment
            .algorithm
    }

    #[test]
    fn dqn_refuses_a_box_space_and_the_actor_critics_take_both() {
        let discrete = ActionSpace::discrete(2);
        let boxed = ActionSpace::uniform_box(1, -2.0, 2.0);
        for name in ["ppo", "a2c"] {
            let algorithm = algorithm(name);
            assert!(takes_the_action_space(&algorithm, &discrete).is_ok());
            assert!(takes_the_action_space(&algorithm, &boxed).is_ok(), "{name}");
        }
        let dqn = algorithm("dqn");
        assert!(takes_the_action_space(&dqn, &discrete).is_ok());
        let err = takes_the_action_space(&dqn, &boxed)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("dqn chooses discrete actions")
                && err.contains("box of 1 f32 in [-2, 2]"),
            "{err}"
        );
    }

    #[test]
    fn sac_and_td3_refuse_a_discrete_space_and_take_a_box() {
        for name in ["sac", "td3"] {
            let text = format!(
                "experiment \"x\" {{\n    algorithm \"{name}\"\n    env \"pendulum\"\n}}\n"
            );
            let experiment = tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
                .expect("resolves")
                .experiment;
            let algorithm = &experiment.algorithm;
            let boxed = ActionSpace::uniform_box(1, -2.0, 2.0);
            assert!(takes_the_action_space(algorithm, &boxed).is_ok());
            let err = takes_the_action_space(algorithm, &ActionSpace::discrete(2))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("{name} chooses box actions")),
                "{err}"
            );
        }
    }
}

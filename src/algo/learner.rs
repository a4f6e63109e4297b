//! The learner interface: what the run skeleton (`crate::train`) asks of every algorithm, and
//! what a learner is built from ([`Setting`], [`network_for`]); `crate::algo::build` maps the
//! config's `algorithm` onto one.
//!
//! A learner owns its networks, optimizer and experience storage. The skeleton owns everything
//! else (environments, counters, the stop decision, episodes, summaries, checkpoints,
//! fingerprints), and drives the learner one *round* at a time: a round is one or more updates,
//! after which ranks exchange episodes and decisions. A learner sees other ranks only through
//! [`Collective`].
//!
//! This file names no algorithm, so every learner can depend on it and none of them is depended
//! on by it.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use tch::{Device, Tensor};

use tandem_config::Experiment;
use tandem_env::VecEnv;

use crate::algo::Collective;
use crate::algo::seats::Seats;
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

    /// Adds every phase of `other` (timed on another thread) to these.
    pub fn absorb(&mut self, other: &Phases) {
        for (phase, time) in other.iter() {
            self.add(phase, time);
        }
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
    /// The rows the learner's policy plays where several policies share a multi-agent batch;
    /// `None`: every row.
    pub seats: Option<&'a Seats>,
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
    /// Takes the settings of `experiment`'s algorithm section that its updates read afresh (a
    /// population member's explored hyperparameters, `AlgorithmFacts::explorable`) for the
    /// updates to come; the resolver lets no population explore a learner that cannot.
    fn retune(&mut self, experiment: &Experiment) -> Result<()> {
        anyhow::bail!(
            "{} cannot change its settings during a run",
            experiment.algorithm.name()
        )
    }
    /// The learner's side of a joint round, where it plays its seats of a batch beside other
    /// policies; `None` where it cannot (only synchronous feed-forward on-policy learners can).
    fn seated(&mut self) -> Option<&mut dyn SeatedLearner> {
        None
    }
}

/// One policy's side of a joint rollout (`crate::algo::sampling::joint`): its network, the
/// buffer it fills, the rows it plays.
pub struct Seated<'a> {
    pub model: &'a crate::nn::ActorCritic,
    pub buffer: &'a mut crate::algo::storage::rollout::RolloutBuffer,
    pub seats: &'a Seats,
}

/// A learner that plays some seats of a multi-agent batch whose other seats other policies
/// play (`crate::algo::policies`): the round collects all policies' rollouts at once
/// (`crate::algo::sampling::joint`), then each learns from its own.
pub trait SeatedLearner {
    /// The network that acts, the buffer the rollout fills, and the rows it plays.
    fn player(&mut self) -> Seated<'_>;
    /// One update on the rollout just collected, whose V(s_T) are `last_values`; advances
    /// `round.counters` as a round of its own would.
    fn learn_collected(&mut self, last_values: &Tensor, round: Round) -> Result<()>;
}

/// The network `experiment` declares for `envs` (pixel scaling decided by their built
/// observation where the config cannot tell) and the observation shape it reads.
pub fn network_for(experiment: &Experiment, envs: &VecEnv) -> Result<(ActorCriticSpec, Vec<i64>)> {
    let spec = ActorCriticSpec::from_experiment(experiment, envs.env_observation_space())?;
    let obs_shape = envs.obs_shape().iter().map(|&d| d as i64).collect();
    Ok((spec, obs_shape))
}

/// [`network_for`] a policy playing `seats` of `envs` (`None`: all of them), which reads only
/// its agents' observation, and the rows it plays on this rank.
pub fn network_for_seats(
    experiment: &Experiment,
    envs: &VecEnv,
    seats: Option<&Seats>,
) -> Result<(ActorCriticSpec, Vec<i64>, usize)> {
    let Some(seats) = seats else {
        let (spec, obs_shape) = network_for(experiment, envs)?;
        return Ok((spec, obs_shape, experiment.per_rank_rows()));
    };
    let batch = envs.env_observation_space();
    let observation = tandem_env::ObsSpace::vector(seats.actor_len(), batch.dtype);
    let mut spec = ActorCriticSpec::from_experiment(experiment, observation)?;
    // A centralised critic's input is longer than the actor's, which reads its leading part.
    if seats.input_len() > seats.actor_len() {
        spec.actor_input = Some(seats.actor_len() as i64);
    }
    Ok((spec, vec![seats.input_len() as i64], seats.len()))
}

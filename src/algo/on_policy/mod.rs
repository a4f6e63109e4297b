//! The on-policy learner (PPO, A2C): an actor-critic, its rollout buffer and an update rule
//! ([`update`]), fed by one of the sampling modes of `super::sampling`, chosen once. Each
//! round collects T steps of this rank's N environments and updates on them (gradients
//! averaged over ranks by the collective); how the two overlap is the sampling mode's.
//!
//! A recurrent policy's [`Memory`] (each environment's state and episode starts) lives here
//! between rounds, and in this rank's checkpoint files (`storage::memory`) between runs.

pub mod update;

use std::path::Path;

use anyhow::{Result, bail};
use tch::Tensor;

use super::actions::ActionKind;
use super::learner::{Learner, Resumed, Round, Scalars, Seated, SeatedLearner, Setting};
use super::sampling::Sampler;
use super::seats::Seats;
use super::storage::memory::{self, Memory};
use super::storage::rollout::InactiveRows;
use crate::nn::{named_parameters, trainable_parameters_in_order};
use update::{Blueprint, Learning, PolicyUpdate};

pub struct OnPolicy<U: PolicyUpdate> {
    learning: Learning<U>,
    /// The recurrent state carried between rounds; `None` for a feed-forward policy.
    memory: Option<Memory>,
    sampler: Sampler,
    /// The rows it plays where several policies share the batch.
    seats: Option<Seats>,
    latest: Scalars,
}

impl<U: PolicyUpdate> OnPolicy<U> {
    /// The actor-critic (from the current torch seed), then the update rule `make_rule` builds
    /// over its variables, then the sampling mode `train.sampling` names.
    pub fn new(
        setting: &Setting,
        make_rule: impl FnOnce(&tch::nn::VarStore) -> Result<U>,
    ) -> Result<Self> {
        let Setting {
            experiment,
            envs,
            rank,
            world,
            device,
            seats,
        } = *setting;
        let (spec, obs_shape, n_envs) = super::learner::network_for_seats(experiment, envs, seats)?;
        let rollout = experiment.train.rollout;
        let blueprint = Blueprint {
            spec,
            obs_shape,
            action_space: envs.action_space().clone(),
            rollout: rollout as i64,
            n_envs: n_envs as i64,
            action_kind: ActionKind::of(envs.action_space()),
            device,
            inactive: inactive_rows(experiment, seats, envs),
        };
        let (vs, model) = blueprint.network()?;
        let rule = make_rule(&vs)?;
        let buffer = blueprint.buffer()?;
        let memory = model
            .is_recurrent()
            .then(|| Memory::new(&model, n_envs as i64, device));
        let sampler = Sampler::new(&experiment.train, &blueprint)?;
        Ok(OnPolicy {
            learning: Learning {
                vs,
                model,
                rule,
                buffer,
                seed: experiment.seed,
                rank,
                steps_per_update: (n_envs * rollout * world) as u64,
            },
            memory,
            sampler,
            seats: seats.cloned(),
            latest: Vec::new(),
        })
    }
}

/// The rows that did not act (turns waited through, agents gone from their games) are left out
/// of a batch where as many acted on every rank: in a turn-based game one policy plays whole,
/// one row a game on each step. Elsewhere their number varies (a policy playing one side of a
/// turn-based game, agents that leave), and they are kept with zero weight, so every rank's
/// batch has the same size.
fn inactive_rows(
    experiment: &tandem_config::Experiment,
    seats: Option<&Seats>,
    envs: &tandem_env::VecEnv,
) -> InactiveRows {
    let whole_game = seats.is_none_or(|s| s.len() == envs.num_envs());
    match experiment.env.game.takes_turns() && whole_game {
        true => InactiveRows::Dropped,
        false => InactiveRows::Masked,
    }
}

impl<U: PolicyUpdate> Learner for OnPolicy<U> {
    fn steps_per_update(&self) -> u64 {
        self.learning.steps_per_update
    }

    fn retune(&mut self, experiment: &tandem_config::Experiment) -> Result<()> {
        self.learning.rule.retune(&experiment.algorithm)
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        trainable_parameters_in_order(&self.learning.vs)
    }

    fn networks(&self) -> Vec<(String, Tensor)> {
        named_parameters(&self.learning.vs, "model")
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.learning.rule.optimizer().state_tensors()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "optimizer_steps",
            self.learning.rule.optimizer().step_count(),
        )]
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        match name {
            "optimizer_steps" => self.learning.rule.optimizer_mut().set_step_count(value),
            other => bail!("the on-policy learner has no counter {other}"),
        }
        Ok(())
    }

    fn updates_per_round(&self) -> u64 {
        self.sampler.updates_per_round()
    }

    fn round(&mut self, envs: &mut tandem_env::VecEnv, round: Round) -> Result<()> {
        let memory = self.memory.as_mut();
        self.latest = self
            .sampler
            .round(&mut self.learning, memory, envs, round)?;
        Ok(())
    }

    fn scalars(&self) -> Scalars {
        self.latest.clone()
    }

    fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        self.sampler.save(&self.learning, dir, global_step)?;
        match &self.memory {
            Some(memory) => memory::save(memory, dir, self.learning.rank, global_step),
            None => Ok(()),
        }
    }

    /// The saved memory and batch in flight continue the saved episodes, so they come back
    /// exactly when the environments do; otherwise the fresh episodes start from zero states
    /// and the first update learns from a batch collected afresh.
    fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        self.sampler.restore(&mut self.learning, resumed)?;
        match &mut self.memory {
            Some(memory) => memory::restore(memory, resumed, self.learning.rank),
            None => Ok(()),
        }
    }

    fn seated(&mut self) -> Option<&mut dyn SeatedLearner> {
        let synchronous = matches!(self.sampler, Sampler::Synchronous(_));
        (synchronous && self.memory.is_none() && self.seats.is_some())
            .then_some(self as &mut dyn SeatedLearner)
    }

    /// Explained variance is legitimately NaN when returns are constant; nothing else is.
    fn diverged(&self) -> bool {
        self.latest
            .iter()
            .any(|(tag, v)| !v.is_finite() && !tag.ends_with("explained_variance"))
    }
}

impl<U: PolicyUpdate> SeatedLearner for OnPolicy<U> {
    fn player(&mut self) -> Seated<'_> {
        Seated {
            model: &self.learning.model,
            buffer: &mut self.learning.buffer,
            seats: self
                .seats
                .as_ref()
                .expect("only a learner with seats is seated"),
        }
    }

    fn learn_collected(&mut self, last_values: &Tensor, mut round: Round) -> Result<()> {
        let learning = &mut self.learning;
        let at = learning.update_at(round.counters.update, round.limits);
        self.latest = update::learn(
            &mut learning.rule,
            &learning.model,
            &learning.buffer,
            last_values,
            at,
            learning.steps_per_update,
            &mut round,
        )?;
        Ok(())
    }
}

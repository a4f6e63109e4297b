//! The on-policy learner (PPO, A2C): an actor-critic, its rollout buffer and collector, and an
//! update rule. Each round collects T steps of this rank's N environments with the current
//! policy, then updates on them once (gradients averaged over ranks by the collective).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use tch::Tensor;
use tch::nn::VarStore;

use super::Collective;
use super::actions::ActionKind;
use super::collect::RolloutCollector;
use super::learner::{Counters, Learner, Round, Scalars, Setting};
use super::optim::Optimizer;
use super::rollout::RolloutBuffer;
use crate::nn::{ActorCritic, named_parameters, trainable_parameters_in_order};

/// An on-policy update rule: what PPO and A2C each do with a full rollout buffer.
pub trait PolicyUpdate {
    fn optimizer(&self) -> &Optimizer;
    fn optimizer_mut(&mut self) -> &mut Optimizer;
    /// One update on this rank's rollout; `last_values` are V(s_T) after it, `progress` the
    /// fraction of training done before this update. Returns the update's scalars.
    fn learn(
        &mut self,
        model: &ActorCritic,
        rollout: &RolloutBuffer,
        last_values: &Tensor,
        at: UpdateAt,
        collective: &mut dyn Collective,
    ) -> Result<Scalars>;
}

/// Which update this is, for schedules and per-update random streams.
#[derive(Debug, Clone, Copy)]
pub struct UpdateAt {
    pub seed: u64,
    pub rank: usize,
    pub update: u64,
    pub progress: f64,
}

pub struct OnPolicy<U: PolicyUpdate> {
    vs: VarStore,
    model: ActorCritic,
    rule: U,
    buffer: RolloutBuffer,
    collector: RolloutCollector,
    seed: u64,
    rank: usize,
    steps_per_update: u64,
    latest: Scalars,
}

impl<U: PolicyUpdate> OnPolicy<U> {
    /// The actor-critic (from the current torch seed), then the update rule `make_rule` builds
    /// over its variables.
    pub fn new(setting: &Setting, make_rule: impl FnOnce(&VarStore) -> Result<U>) -> Result<Self> {
        let Setting {
            experiment,
            envs,
            rank,
            world,
            device,
        } = *setting;
        let (spec, obs_shape) = super::learner::network_for(experiment, envs)?;
        let vs = VarStore::new(device);
        let model = ActorCritic::new(&vs.root(), &spec, &obs_shape, envs.action_space().clone())?;
        let rule = make_rule(&vs)?;
        let n_envs = experiment.per_rank_envs();
        let rollout = experiment.train.rollout;
        let action_kind = ActionKind::of(envs.action_space());
        let buffer = RolloutBuffer::new(
            rollout as i64,
            n_envs as i64,
            &obs_shape,
            action_kind,
            device,
        )?;
        let collector =
            RolloutCollector::new(n_envs, experiment.train.env_groups, &obs_shape, action_kind)?;
        Ok(OnPolicy {
            vs,
            model,
            rule,
            buffer,
            collector,
            seed: experiment.seed,
            rank,
            steps_per_update: (n_envs * rollout * world) as u64,
            latest: Vec::new(),
        })
    }
}

impl<U: PolicyUpdate> Learner for OnPolicy<U> {
    fn steps_per_update(&self) -> u64 {
        self.steps_per_update
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        trainable_parameters_in_order(&self.vs)
    }

    fn networks(&self) -> Vec<(String, Tensor)> {
        named_parameters(&self.vs, "model")
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.rule.optimizer().state_tensors()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("optimizer_steps", self.rule.optimizer().step_count())]
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        match name {
            "optimizer_steps" => self.rule.optimizer_mut().set_step_count(value),
            other => bail!("the on-policy learner has no counter {other}"),
        }
        Ok(())
    }

    fn round(&mut self, envs: &mut tandem_env::VecEnv, round: Round) -> Result<()> {
        let Counters { update, .. } = *round.counters;
        tch::manual_seed(crate::seeds::derived_seed(
            self.seed,
            crate::seeds::Purpose::Sampling,
            self.rank as u64,
            update,
        ) as i64);
        let last_values =
            self.collector
                .collect(&self.model, envs, &mut self.buffer, round.phases)?;

        let learning = Instant::now();
        let at = UpdateAt {
            seed: self.seed,
            rank: self.rank,
            update,
            progress: update as f64 / round.limits.total_updates as f64,
        };
        self.latest = self
            .rule
            .learn(
                &self.model,
                &self.buffer,
                &last_values,
                at,
                round.collective,
            )
            .with_context(|| format!("update {update}"))?;
        let sync = round.collective.take_sync_time();
        round
            .phases
            .add("learn", learning.elapsed().saturating_sub(sync));
        round.phases.add("sync", sync);

        round.counters.update += 1;
        round.counters.global_step += self.steps_per_update;
        Ok(())
    }

    fn scalars(&self) -> Scalars {
        self.latest.clone()
    }

    /// Explained variance is legitimately NaN when returns are constant; nothing else is.
    fn diverged(&self) -> bool {
        self.latest
            .iter()
            .any(|(tag, v)| !v.is_finite() && !tag.ends_with("explained_variance"))
    }
}

//! What an on-policy update is, whichever sampling mode feeds it: the update rule's interface
//! ([`PolicyUpdate`], PPO's and A2C's), which update this is ([`UpdateAt`]), the learner's side
//! of a round that every sampling mode drives ([`Learning`]: the actor-critic, the rule, the
//! buffer the next update learns from; [`Learning::learn`] is one update, timed), what the
//! learner's networks and buffers are made of ([`Blueprint`]: sampling makes more of each),
//! and how both rules read the policy ([`evaluate_rows`], [`learner_view`]).

use std::time::Instant;

use anyhow::{Context, Result};
use tandem_env::ActionSpace;
use tch::nn::VarStore;
use tch::{Device, Tensor};

use crate::algo::Collective;
use crate::algo::actions::ActionKind;
use crate::algo::learner::{Limits, Round, Scalars};
use crate::algo::optim::Optimizer;
use crate::algo::storage::rollout::{Batch, InactiveRows, LearnerView, RolloutBuffer};
use crate::nn::{ActorCritic, ActorCriticSpec, EntropyUse, Evaluation};

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
    /// Takes `algorithm`'s settings for the updates to come (a population member's explored
    /// hyperparameters: `AlgorithmFacts::explorable`, which an update reads afresh); refuses
    /// another algorithm's section.
    fn retune(&mut self, algorithm: &tandem_config::Algorithm) -> Result<()>;
}

/// Which update this is, for schedules and per-update random streams.
#[derive(Debug, Clone, Copy)]
pub struct UpdateAt {
    pub seed: u64,
    pub rank: usize,
    pub update: u64,
    pub progress: f64,
}

impl UpdateAt {
    /// Update `update` of a run of `limits.total_updates`.
    pub fn of(seed: u64, rank: usize, update: u64, limits: Limits) -> UpdateAt {
        UpdateAt {
            seed,
            rank,
            update,
            progress: update as f64 / limits.total_updates as f64,
        }
    }
}

/// The learner's side of an on-policy round: the actor-critic's variables and network, the
/// update rule over them, the buffer the next update learns from, and what names an update
/// (the run's seed, this rank, the global steps one update covers).
pub struct Learning<U: PolicyUpdate> {
    pub vs: VarStore,
    pub model: ActorCritic,
    pub rule: U,
    pub buffer: RolloutBuffer,
    pub seed: u64,
    pub rank: usize,
    pub steps_per_update: u64,
}

impl<U: PolicyUpdate> Learning<U> {
    /// Which update `update` is, for the rule's schedules and random streams.
    pub fn update_at(&self, update: u64, limits: Limits) -> UpdateAt {
        UpdateAt::of(self.seed, self.rank, update, limits)
    }
}

/// One update of `rule` on `buffer`, its time split into `learn` and `sync`; advances the
/// round's counters.
pub fn learn<U: PolicyUpdate>(
    rule: &mut U,
    model: &ActorCritic,
    buffer: &RolloutBuffer,
    last_values: &Tensor,
    at: UpdateAt,
    steps_per_update: u64,
    round: &mut Round,
) -> Result<Scalars> {
    let learning = Instant::now();
    let scalars = rule
        .learn(model, buffer, last_values, at, round.collective)
        .with_context(|| format!("update {}", at.update))?;
    let sync = round.collective.take_sync_time();
    round
        .phases
        .add("learn", learning.elapsed().saturating_sub(sync));
    round.phases.add("sync", sync);
    round.counters.update += 1;
    round.counters.global_step += steps_per_update;
    Ok(scalars)
}

/// What the learner's network and rollout buffer are made of: sampling makes more of each.
pub struct Blueprint {
    pub spec: ActorCriticSpec,
    pub obs_shape: Vec<i64>,
    pub action_space: ActionSpace,
    pub rollout: i64,
    pub n_envs: i64,
    pub action_kind: ActionKind,
    pub device: Device,
    /// What its batches do with the rows that did not act.
    pub inactive: InactiveRows,
}

impl Blueprint {
    /// An actor-critic of the learner's layout over a variable store of its own (initialised
    /// from the current torch seed).
    pub fn network(&self) -> Result<(VarStore, ActorCritic)> {
        let vs = VarStore::new(self.device);
        let model = ActorCritic::new(
            &vs.root(),
            &self.spec,
            &self.obs_shape,
            self.action_space.clone(),
        )?;
        Ok((vs, model))
    }

    pub fn buffer(&self) -> Result<RolloutBuffer> {
        let mut buffer = RolloutBuffer::new(
            self.rollout,
            self.n_envs,
            &self.obs_shape,
            self.action_kind,
            self.device,
        )?;
        buffer.set_inactive_rows(self.inactive);
        Ok(buffer)
    }
}

/// The policy's evaluation of a (micro-)batch's rows, as PPO's and A2C's losses read it: step
/// by step from the initial states for environment sequences, else row by row.
pub(crate) fn evaluate_rows(
    model: &ActorCritic,
    batch: &Batch,
    entropy: EntropyUse,
) -> Result<Evaluation> {
    match &batch.sequences {
        Some(sequences) => model.evaluate_recurrent(
            &batch.obs,
            &batch.actions,
            &sequences.starts,
            &sequences.initial_state,
            entropy,
        ),
        None => model.evaluate(&batch.obs, &batch.actions, entropy),
    }
}

/// The learner's own log pi(a_t|s_t) and V(s_t) of a rollout's steps and its V(s_T), without
/// gradients: V-trace's view of a batch the behaviour policy collected. A recurrent policy
/// re-runs the stored sequences from their initial states and goes on to s_T.
pub fn learner_view(model: &ActorCritic, rollout: &RolloutBuffer) -> Result<LearnerView> {
    tch::no_grad(|| {
        let steps = rollout.steps()?;
        let (last_obs, last_starts) = rollout.bootstrap();
        let (evaluation, last_values) = match &steps.sequences {
            Some(sequences) => {
                let (evaluation, state) = model.evaluate_recurrent_to_end(
                    &steps.obs,
                    &steps.actions,
                    &sequences.starts,
                    &sequences.initial_state,
                    EntropyUse::ReportOnly,
                )?;
                let last_values = model.value_recurrent(last_obs, last_starts, &state)?;
                (evaluation, last_values)
            }
            None => (
                model.evaluate(&steps.obs, &steps.actions, EntropyUse::ReportOnly)?,
                model.value(last_obs)?,
            ),
        };
        Ok(LearnerView {
            log_probs: evaluation.log_probs,
            values: evaluation.values,
            last_values,
        })
    })
}

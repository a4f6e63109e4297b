//! The batches ready order fills (`train.sampling "free"` with env-groups): groups advance
//! through a batch at their own pace, each group's recorded steps kept until every group has
//! taken that step ([`push_complete_steps`]), and a batch queued for the learner when its last
//! group finishes it ([`queue_complete_batches`]). [`ReadyState`] carries the open batches and
//! each group's place in them from one round to the next.

use std::collections::VecDeque;

use anyhow::{Context, Result};
use tch::Tensor;

use super::exchange::{Collecting, QueuedBatch};
use crate::algo::storage::rollout::{RolloutBuffer, StepRecord};
use crate::nn::ActTaken;

/// One group's part of one step, kept until every group has taken that step.
pub(super) struct GroupStep {
    pub(super) taken: ActTaken,
    pub(super) rewards: Tensor,
    pub(super) terminated: Tensor,
    pub(super) truncated: Tensor,
    /// V(final observation) where the step cut an episode by its time limit, else `None`.
    pub(super) truncation_values: Option<Tensor>,
}

/// A batch being filled: its buffer, each group's recorded steps not yet in it, the version
/// that chose each group's step (one a group and step, as free sampling's lag counts them),
/// and each group's V(s_T) once it has taken the batch's last step.
pub(super) struct OpenBatch {
    pub(super) buffer: RolloutBuffer,
    pub(super) recorded: Vec<VecDeque<GroupStep>>,
    pub(super) versions: Vec<u64>,
    pub(super) last_values: Vec<Option<Tensor>>,
}

/// Where a group stands: the open batch its next step goes into (a position in
/// `ReadyState::open`; one past the last while the group waits for a buffer), and the step.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) batch: usize,
    pub(super) step: i64,
}

/// What ready order carries from one round of free sampling to the next: the open batches,
/// oldest first, and each group's place in them. Empty before the first round.
#[derive(Default)]
pub struct ReadyState {
    pub(super) open: VecDeque<OpenBatch>,
    pub(super) places: Vec<Place>,
}

impl ReadyState {
    /// Whether group `g` has an open batch to step in (else it waits for a buffer).
    pub(super) fn has_batch(&self, g: usize) -> bool {
        self.places[g].batch < self.open.len()
    }

    /// The groups waiting for a buffer: each has finished every open batch.
    pub(super) fn waiting(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.places.len()).filter(|&g| !self.has_batch(g))
    }
}

/// Queues every batch at the front that all groups have finished, oldest first; returns how
/// many.
pub(super) fn queue_complete_batches(
    state: &mut ReadyState,
    collecting: &mut Collecting<'_>,
) -> Result<usize> {
    let mut queued = 0;
    while state.open.front().is_some_and(|b| b.buffer.is_full()) {
        let batch = state.open.pop_front().expect("checked non-empty");
        let last_values = batch
            .last_values
            .into_iter()
            .collect::<Option<Vec<Tensor>>>()
            .context("a batch is full before every group has finished it")?;
        collecting.queue(QueuedBatch {
            buffer: batch.buffer,
            last_values: Tensor::cat(&last_values, 0),
            versions: batch.versions,
        });
        for place in &mut state.places {
            place.batch -= 1;
        }
        queued += 1;
    }
    Ok(queued)
}

/// Pushes every step all groups have taken into the batch's buffer, in order: each field is
/// the groups' parts concatenated in group order, as the environments are.
pub(super) fn push_complete_steps(batch: &mut OpenBatch) -> Result<()> {
    while batch.recorded.iter().all(|steps| !steps.is_empty()) {
        let parts: Vec<GroupStep> = batch
            .recorded
            .iter_mut()
            .map(|steps| steps.pop_front().expect("checked non-empty"))
            .collect();
        let cat = |field: fn(&GroupStep) -> &Tensor| {
            Tensor::cat(&parts.iter().map(field).collect::<Vec<_>>(), 0)
        };
        let truncation_values = parts
            .iter()
            .any(|p| p.truncation_values.is_some())
            .then(|| {
                let each: Vec<Tensor> = parts
                    .iter()
                    .map(|p| match &p.truncation_values {
                        Some(v) => v.shallow_clone(),
                        None => p.rewards.zeros_like(),
                    })
                    .collect();
                Tensor::cat(&each, 0)
            });
        let buffer = &mut batch.buffer;
        let obs = buffer.obs_row(buffer.len())?;
        buffer.push(&StepRecord {
            obs: &obs,
            actions: &cat(|p| &p.taken.actions),
            log_probs: &cat(|p| &p.taken.log_probs),
            values: &cat(|p| &p.taken.values),
            rewards: &cat(|p| &p.rewards),
            terminated: &cat(|p| &p.terminated),
            truncated: &cat(|p| &p.truncated),
            truncation_values: truncation_values.as_ref(),
            // Free sampling is not for games that take turns (the config refuses it).
            acting: None,
        })?;
    }
    Ok(())
}

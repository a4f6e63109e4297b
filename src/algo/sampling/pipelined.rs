//! Pipelined sampling (`train.sampling "pipelined"`): a round updates on the batch the round
//! before collected while a second thread collects the next one with a copy of the policy
//! taken before the update, so every batch but the first lags the learner by exactly one
//! update. The collection thread owns the environments, the collector and the recurrent memory
//! for the round; no tensor is shared between the threads, and the action draws are seeded per
//! batch, so the results do not depend on timing. The batch in flight at a checkpoint is saved
//! with it (`storage::in_flight`).

use anyhow::{Context, Result};
use tandem_env::VecEnv;
use tch::nn::VarStore;

use super::collect::{Draws, NoHook, RolloutCollector, collect_batch};
use super::overlap::overlapped;
use crate::algo::learner::{Phases, Resumed, Round, Scalars};
use crate::algo::on_policy::update::{Blueprint, Learning, PolicyUpdate, learn};
use crate::algo::storage::in_flight::{self, Ready};
use crate::algo::storage::memory::Memory;
use crate::algo::storage::rollout::RolloutBuffer;
use crate::nn::ActorCritic;

/// The behaviour policy that collects the next batch while the learner updates, and the batch
/// collected for the next update.
pub struct Pipeline {
    collector: RolloutCollector,
    /// A copy of the learner's variables, taken before each update; the behaviour policy's
    /// network reads them.
    behaviour_vs: VarStore,
    behaviour: ActorCritic,
    /// Where the next batch is collected while the learner reads `Learning::buffer`; the two
    /// are swapped after each round.
    next: RolloutBuffer,
    /// The batch in `Learning::buffer` waiting for the next update; `None` before the first
    /// collection.
    ready: Option<Ready>,
}

impl Pipeline {
    pub fn new(collector: RolloutCollector, blueprint: &Blueprint) -> Result<Pipeline> {
        let (behaviour_vs, behaviour) = blueprint.network()?;
        tracing::info!(
            "pipelined sampling: each batch is collected on a second thread by the policy of one \
             update before, while the learner updates on the batch before it"
        );
        Ok(Pipeline {
            collector,
            behaviour_vs,
            behaviour,
            next: blueprint.buffer()?,
            ready: None,
        })
    }

    /// A pipelined round: update on the batch collected before (collecting it now if there is
    /// none, as at the start) while a second thread collects the next batch with the
    /// parameters the update starts from. The last round of the run collects nothing.
    pub fn round<U: PolicyUpdate>(
        &mut self,
        learning: &mut Learning<U>,
        mut memory: Option<&mut Memory>,
        envs: &mut VecEnv,
        mut round: Round,
    ) -> Result<Scalars> {
        let update = round.counters.update;
        let draws = |update| Draws {
            seed: learning.seed,
            rank: learning.rank,
            update,
        };
        let ready = match self.ready.take() {
            Some(ready) => ready,
            None => Ready {
                last_values: collect_batch(
                    &self.collector,
                    &learning.model,
                    memory.as_deref_mut(),
                    envs,
                    &mut learning.buffer,
                    draws(update),
                    round.phases,
                    &mut NoHook,
                )?,
                collected_by: update,
            },
        };
        let after = update + 1;
        // A run stopped by `train.max-steps` (or a signal) collects the next batch as one that
        // goes on would, and its checkpoint keeps it: a resumed run continues exactly.
        let collect_next = after < round.limits.total_updates;
        let at = learning.update_at(update, round.limits);
        let next_draws = draws(after);
        if collect_next {
            self.behaviour_vs
                .copy(&learning.vs)
                .context("copying the learner's parameters into the behaviour policy")?;
        }
        let mut collected_phases = Phases::default();
        let phases = &mut collected_phases;
        let Pipeline {
            collector,
            behaviour,
            next,
            ..
        } = &mut *self;
        let collect = collect_next.then_some(move || {
            collect_batch(
                collector,
                behaviour,
                memory,
                envs,
                next,
                next_draws,
                phases,
                &mut NoHook,
            )
        });
        let Learning {
            model,
            rule,
            buffer,
            steps_per_update,
            ..
        } = &mut *learning;
        let learn = || {
            learn(
                rule,
                model,
                buffer,
                &ready.last_values,
                at,
                *steps_per_update,
                &mut round,
            )
        };
        let (learned, collected) = overlapped(collect, learn)?;
        let mut scalars = learned?;
        scalars.push(("train/policy_lag", (update - ready.collected_by) as f64));
        if let Some((collected, waited)) = collected {
            let last_values =
                collected.with_context(|| format!("collecting for update {}", update + 1))?;
            std::mem::swap(&mut learning.buffer, &mut self.next);
            self.ready = Some(Ready {
                last_values,
                collected_by: update,
            });
            round.phases.add("pipeline_wait", waited);
        }
        round.phases.absorb(&collected_phases);
        Ok(scalars)
    }

    /// Saves the batch collected for the next update (in `buffer`) beside a checkpoint.
    pub fn save(
        &self,
        buffer: &RolloutBuffer,
        dir: &std::path::Path,
        rank: usize,
        global_step: u64,
    ) -> Result<()> {
        in_flight::save(self.ready.as_ref(), buffer, dir, rank, global_step)
    }

    /// Takes back the batch in flight of a checkpoint into `buffer`, when the environments
    /// continue the saved episodes.
    pub fn restore(
        &mut self,
        buffer: &mut RolloutBuffer,
        resumed: &Resumed,
        rank: usize,
    ) -> Result<()> {
        self.ready = in_flight::restore(buffer, resumed, rank)?;
        Ok(())
    }
}

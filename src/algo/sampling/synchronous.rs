//! Synchronous sampling (`train.sampling "synchronous"`, the default): each round collects T
//! steps of the rank's environments with the current policy, then updates on them once.

use anyhow::Result;
use tandem_env::VecEnv;

use super::collect::{Draws, NoHook, RolloutCollector, collect_batch};
use crate::algo::learner::{Round, Scalars};
use crate::algo::on_policy::update::{Learning, PolicyUpdate, learn};
use crate::algo::storage::memory::Memory;

/// A synchronous round: collect with the current policy, then update on it.
pub fn round<U: PolicyUpdate>(
    collector: &RolloutCollector,
    learning: &mut Learning<U>,
    memory: Option<&mut Memory>,
    envs: &mut VecEnv,
    mut round: Round,
) -> Result<Scalars> {
    let update = round.counters.update;
    let draws = Draws {
        seed: learning.seed,
        rank: learning.rank,
        update,
    };
    let last_values = collect_batch(
        collector,
        &learning.model,
        memory,
        envs,
        &mut learning.buffer,
        draws,
        round.phases,
        &mut NoHook,
    )?;
    let at = learning.update_at(update, round.limits);
    learn(
        &mut learning.rule,
        &learning.model,
        &learning.buffer,
        &last_values,
        at,
        learning.steps_per_update,
        &mut round,
    )
}

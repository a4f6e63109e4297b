//! The learner's loop of a free round (sample-factory's learner on one rank): it takes the
//! batches the collector queued as they complete, oldest first, drops those lagging more than
//! `train.max-policy-lag`, learns from each and publishes its parameters for the collector.

use std::time::{Duration, Instant};

use anyhow::Result;
use tch::nn::VarStore;

use super::exchange::{Exchange, Lag, LagTally};
use crate::algo::learner::{Round, Scalars};
use crate::algo::on_policy::update::{PolicyUpdate, UpdateAt, learn};
use crate::nn::ActorCritic;

/// The updates of a free round: each takes the oldest queued batch that does not lag more than
/// `max_lag`, learns from it and publishes the parameters. Returns the last update's scalars,
/// the round's lag and how long the learner waited for batches.
#[allow(clippy::too_many_arguments)]
pub fn learn_free<U: PolicyUpdate>(
    rule: &mut U,
    model: &ActorCritic,
    vs: &VarStore,
    exchange: &Exchange,
    max_lag: Option<u64>,
    at: impl Fn(u64) -> UpdateAt,
    steps_per_update: u64,
    updates: u64,
    round: &mut Round,
) -> Result<(Scalars, LagTally, Duration)> {
    let mut tally = LagTally::default();
    let mut waited = Duration::ZERO;
    let mut scalars = Vec::new();
    for _ in 0..updates {
        let update = round.counters.update;
        let batch = loop {
            let waiting = Instant::now();
            let batch = exchange.take_full()?;
            waited += waiting.elapsed();
            let lag = Lag::of(&batch.versions, update);
            if max_lag.is_some_and(|max| lag.max > max) {
                tally.dropped += 1;
                exchange.give_back(batch.buffer);
                continue;
            }
            tally.add(lag);
            break batch;
        };
        let learned = learn(
            rule,
            model,
            &batch.buffer,
            &batch.last_values,
            at(update),
            steps_per_update,
            round,
        );
        // Published before the buffer goes back, so that the batch collected into it starts
        // with these parameters.
        let published = learned.and_then(|learned| {
            exchange.publish(vs, round.counters.update)?;
            Ok(learned)
        });
        exchange.give_back(batch.buffer);
        scalars = published?;
    }
    Ok((scalars, tally, waited))
}

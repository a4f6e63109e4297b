//! Free-running sampling (`train.sampling "free"`): sample-factory's asynchronous sampling on
//! one rank, its roles each in a file of its own. A collector thread fills buffers without
//! waiting for the learner through rounds of `train.round-updates` updates, taking up the
//! learner's newest parameters before every step; the learner takes the batches as they
//! complete and publishes its parameters after each update. The lag varies with timing and is
//! logged; batches in flight at a checkpoint are not saved (a resumed run collects afresh).
//!
//! - [`exchange`]: what the two threads share (the buffer pool, the published parameters, the
//!   round's stop) and the collector's loop over it;
//! - [`learner_loop`]: the learner's side of a round;
//! - with `train.env-groups` k > 1, the collector is in ready order: [`policy_worker`] serves
//!   the groups that have stepped in one forward pass, each group stepping on a
//!   [`rollout_worker`] thread of its own, into the batches of [`open_batches`];
//! - this file: the state a rank keeps from round to round ([`FreeSampling`]) and the round.

pub mod exchange;
pub mod learner_loop;
pub mod open_batches;
pub mod policy_worker;
pub mod rollout_worker;

use std::collections::VecDeque;

use anyhow::{Context, Result};
use tandem_env::VecEnv;
use tch::nn::VarStore;

use crate::algo::learner::{Counters, Limits, Phases, Round, Scalars};
use crate::algo::on_policy::update::{Blueprint, Learning, PolicyUpdate, UpdateAt};
use crate::algo::sampling::collect::{Draws, RolloutCollector, collect_batch};
use crate::algo::sampling::overlap::overlapped;
use crate::algo::storage::memory::Memory;
use crate::algo::storage::rollout::RolloutBuffer;
use crate::nn::ActorCritic;
use exchange::{Exchange, QueuedBatch};
use open_batches::ReadyState;
use policy_worker::PolicyWorker;

/// How the collector thread steps the rank's environments under free sampling.
pub enum FreeCollection {
    /// All groups in turn, a batch at a time (one group, or a recurrent policy).
    InTurn(RolloutCollector),
    /// Each group on a rollout worker of its own, served as it becomes ready; the open batches
    /// and each group's place in them carry from one round to the next.
    ReadyOrder(PolicyWorker, ReadyState),
}

/// Free-running sampling: how the collector steps the environments, its behaviour network, the
/// store the learner publishes its parameters into, the buffers, and the batches carried from
/// one round to the next.
pub struct FreeSampling {
    collection: FreeCollection,
    behaviour_vs: VarStore,
    behaviour: ActorCritic,
    /// Lent to each round's [`Exchange`].
    published: Option<VarStore>,
    spare: Vec<RolloutBuffer>,
    carried: VecDeque<QueuedBatch>,
    /// Batches this rank has collected: the next one's index seeds its action draws.
    next_batch: u64,
    round_updates: u64,
    max_policy_lag: Option<u64>,
}

impl FreeSampling {
    pub fn new(
        collection: FreeCollection,
        blueprint: &Blueprint,
        round_updates: u64,
        max_policy_lag: Option<u64>,
    ) -> Result<Self> {
        let (behaviour_vs, behaviour) = blueprint.network()?;
        let spare = (0..exchange::BUFFERS)
            .map(|_| blueprint.buffer())
            .collect::<Result<Vec<_>>>()?;
        let dropping = match max_policy_lag {
            Some(max) => format!("batches lagging more than {max} updates are dropped"),
            None => "no batch is dropped for its lag".into(),
        };
        tracing::info!(
            "free sampling: a second thread collects batches without waiting for the learner, \
             taking up its parameters after every update; rounds of {round_updates} updates; \
             {dropping}"
        );
        Ok(FreeSampling {
            collection,
            behaviour_vs,
            behaviour,
            published: Some(blueprint.network()?.0),
            spare,
            carried: VecDeque::new(),
            next_batch: 0,
            round_updates,
            max_policy_lag,
        })
    }

    /// Updates per round: `train.round-updates`.
    pub fn round_updates(&self) -> u64 {
        self.round_updates
    }

    /// The updates of the round starting at `at`: `round_updates`, fewer where the run ends
    /// sooner.
    fn updates_from(&self, at: Counters, limits: Limits, steps_per_update: u64) -> u64 {
        let by_updates = limits.total_updates.saturating_sub(at.update);
        let by_steps = limits
            .stop_step
            .saturating_sub(at.global_step)
            .div_ceil(steps_per_update.max(1));
        self.round_updates.min(by_updates).min(by_steps).max(1)
    }

    /// A free round: a collector thread fills buffers one after another, taking up the newest
    /// published parameters before every step, while this thread learns from the batches as
    /// they complete (oldest first; those lagging more than `max-policy-lag` dropped) and
    /// publishes its parameters after each update. At the round's end the collector finishes
    /// its batch and stops; what was collected and not learned from carries over.
    pub fn round<U: PolicyUpdate>(
        &mut self,
        learning: &mut Learning<U>,
        mut memory: Option<&mut Memory>,
        envs: &mut VecEnv,
        mut round: Round,
    ) -> Result<Scalars> {
        let at = *round.counters;
        let Learning {
            vs,
            model,
            rule,
            seed,
            rank,
            steps_per_update,
            ..
        } = learning;
        let (seed, rank, steps_per_update) = (*seed, *rank, *steps_per_update);
        let updates = self.updates_from(at, round.limits, steps_per_update);
        let shared = self.start_round(vs, at.update)?;
        let exchange = &shared;
        let (limits, max_lag) = (round.limits, self.max_policy_lag);
        let mut collector_phases = Phases::default();
        let phases = &mut collector_phases;
        let first_batch = self.next_batch;
        let FreeSampling {
            collection,
            behaviour_vs,
            behaviour,
            ..
        } = self;
        // Moves: the collector thread holds its references exclusively (tensors are not Sync).
        let collect = move || {
            let mut version = at.update;
            let draws = move |update| Draws { seed, rank, update };
            match collection {
                FreeCollection::ReadyOrder(worker, ready) => {
                    anyhow::ensure!(
                        memory.is_none(),
                        "ready order collects for feed-forward policies only (the config \
                         refuses env-groups with a recurrent core)"
                    );
                    draws(first_batch).seed_sampling();
                    exchange::collect_round(exchange, behaviour_vs, &mut version, |c| {
                        worker.collect_ready_round(behaviour, envs, ready, c, phases)
                    })
                }
                FreeCollection::InTurn(collector) => exchange::collect_until_stopped(
                    exchange,
                    behaviour_vs,
                    &mut version,
                    first_batch,
                    phases,
                    move |buffer, hook, index, phases| {
                        let memory = memory.as_deref_mut();
                        collect_batch(
                            collector,
                            behaviour,
                            memory,
                            envs,
                            buffer,
                            draws(index),
                            phases,
                            hook,
                        )
                    },
                ),
            }
        };
        let learn = || {
            let at = |update| UpdateAt::of(seed, rank, update, limits);
            let learned = learner_loop::learn_free(
                rule,
                model,
                vs,
                exchange,
                max_lag,
                at,
                steps_per_update,
                updates,
                &mut round,
            );
            // Also after a failed update: the collector must stop for the round to end.
            exchange.stop();
            learned
        };
        let (learned, collected) = overlapped(Some(collect), learn)?;
        let (collected, round_end_wait) = collected.context("a free round always collects")?;
        let report = collected.context("free sampling's collector")?;
        let (mut scalars, tally, learner_wait) = learned?;
        scalars.extend(tally.scalars());
        self.end_round(shared, report.batches);
        round.phases.absorb(&collector_phases);
        round.phases.add("learner_wait", learner_wait);
        round.phases.add("collector_wait", report.waited);
        round.phases.add("round_end_wait", round_end_wait);
        Ok(scalars)
    }

    /// A round's exchange, with the behaviour network and the published parameters set to the
    /// learner's (version `update`: they may have changed between rounds, as when rank 0's
    /// parameters are broadcast at the start or restored at a resume).
    fn start_round(&mut self, learner: &VarStore, update: u64) -> Result<Exchange> {
        self.behaviour_vs
            .copy(learner)
            .context("copying the learner's parameters into the behaviour policy")?;
        let mut published = self
            .published
            .take()
            .context("the published parameters are not back from the round before (a bug)")?;
        published
            .copy(learner)
            .context("publishing the learner's parameters")?;
        self.next_batch = self.next_batch.max(update);
        Ok(Exchange::new(
            std::mem::take(&mut self.carried),
            std::mem::take(&mut self.spare),
            published,
            update,
        ))
    }

    /// Takes back what a round's exchange held once its collector has stopped.
    fn end_round(&mut self, exchange: Exchange, batches: u64) {
        let (carried, spare, published) = exchange.into_parts();
        self.carried = carried;
        self.spare = spare;
        self.published = Some(published);
        self.next_batch += batches;
    }
}

//! The on-policy learner (PPO, A2C): an actor-critic, its rollout buffer and collector, and an
//! update rule. Each round collects T steps of this rank's N environments with the current
//! policy, then updates on them once (gradients averaged over ranks by the collective).
//!
//! With `train.sampling "pipelined"` ([`Pipeline`]) a round instead updates on the batch the
//! round before collected while a second thread collects the next one with a copy of the
//! policy taken before the update: every batch but the first lags the learner by exactly one
//! update, and the batch in flight at a checkpoint is saved with it (`inflight-rank{r}.bin`).
//!
//! With `train.sampling "free"` ([`FreeSampling`], `super::free`) a collector thread fills
//! buffers without waiting for the learner through rounds of `train.round-updates` updates;
//! the learner takes the batches as they complete and publishes its parameters after each
//! update. The lag varies with timing and is logged; batches in flight at a checkpoint are not
//! saved (a resumed run collects afresh).
//!
//! A recurrent policy's [`Memory`] (each environment's state and episode starts) lives here
//! between rounds, and in this rank's checkpoint files (`memory-rank{r}.bin`) between runs.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tandem_config::Sampling;
use tandem_env::ActionSpace;
use tch::nn::VarStore;
use tch::{Device, Tensor};

use super::Collective;
use super::actions::ActionKind;
use super::collect::{Memory, NoHook, RolloutCollector, StepHook};
use super::free::{Exchange, Lag, LagTally, QueuedBatch};
use super::learner::{Counters, Learner, Limits, Phases, Resumed, Round, Scalars, Setting};
use super::optim::Optimizer;
use super::ready_order::ReadyState;
use super::rollout::{Batch, LearnerView, RolloutBuffer};
use crate::nn::{
    ActorCritic, ActorCriticSpec, EntropyUse, Evaluation, named_parameters,
    trainable_parameters_in_order,
};

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

impl UpdateAt {
    /// Update `update` of a run of `limits.total_updates`.
    fn of(seed: u64, rank: usize, update: u64, limits: Limits) -> UpdateAt {
        UpdateAt {
            seed,
            rank,
            update,
            progress: update as f64 / limits.total_updates as f64,
        }
    }
}

pub struct OnPolicy<U: PolicyUpdate> {
    vs: VarStore,
    model: ActorCritic,
    rule: U,
    buffer: RolloutBuffer,
    collector: RolloutCollector,
    /// The recurrent state carried between rounds; `None` for a feed-forward policy.
    memory: Option<Memory>,
    seed: u64,
    rank: usize,
    steps_per_update: u64,
    latest: Scalars,
    /// `Some` with `train.sampling "pipelined"`.
    pipeline: Option<Pipeline>,
    /// `Some` with `train.sampling "free"`.
    free: Option<FreeSampling>,
}

/// Free-running sampling: the collector's behaviour network, the store the learner publishes
/// its parameters into, the buffers, and the batches carried from one round to the next.
struct FreeSampling {
    behaviour_vs: VarStore,
    behaviour: ActorCritic,
    /// Lent to each round's [`Exchange`].
    published: Option<VarStore>,
    spare: Vec<RolloutBuffer>,
    carried: VecDeque<QueuedBatch>,
    /// The batches a collector in ready order has open between rounds.
    ready: ReadyState,
    /// Batches this rank has collected: the next one's index seeds its action draws.
    next_batch: u64,
    round_updates: u64,
    max_policy_lag: Option<u64>,
}

/// Pipelined sampling: the behaviour policy that collects the next batch while the learner
/// updates, and the batch collected for the next update.
struct Pipeline {
    /// A copy of the learner's variables, taken before each update; the behaviour policy's
    /// network reads them.
    behaviour_vs: VarStore,
    behaviour: ActorCritic,
    /// Where the next batch is collected while the learner reads `OnPolicy::buffer`; the two
    /// are swapped after each round.
    next: RolloutBuffer,
    /// The batch in `OnPolicy::buffer` waiting for the next update; `None` before the first
    /// collection.
    ready: Option<Ready>,
}

/// A collected batch's bootstrap values V(s_T) and the update whose starting parameters
/// collected it (the learner at update u learns with policy lag u - `collected_by`).
struct Ready {
    last_values: Tensor,
    collected_by: u64,
}

/// What the learner's network and rollout buffer are made of: sampling makes more of each.
struct Blueprint {
    spec: ActorCriticSpec,
    obs_shape: Vec<i64>,
    action_space: ActionSpace,
    rollout: i64,
    n_envs: i64,
    action_kind: ActionKind,
    device: Device,
}

impl Blueprint {
    /// An actor-critic of the learner's layout over a variable store of its own (initialised
    /// from the current torch seed).
    fn network(&self) -> Result<(VarStore, ActorCritic)> {
        let vs = VarStore::new(self.device);
        let model = ActorCritic::new(
            &vs.root(),
            &self.spec,
            &self.obs_shape,
            self.action_space.clone(),
        )?;
        Ok((vs, model))
    }

    fn buffer(&self) -> Result<RolloutBuffer> {
        RolloutBuffer::new(
            self.rollout,
            self.n_envs,
            &self.obs_shape,
            self.action_kind,
            self.device,
        )
    }
}

impl Pipeline {
    fn new(blueprint: &Blueprint) -> Result<Pipeline> {
        let (behaviour_vs, behaviour) = blueprint.network()?;
        tracing::info!(
            "pipelined sampling: each batch is collected on a second thread by the policy of one \
             update before, while the learner updates on the batch before it"
        );
        Ok(Pipeline {
            behaviour_vs,
            behaviour,
            next: blueprint.buffer()?,
            ready: None,
        })
    }
}

impl FreeSampling {
    fn new(blueprint: &Blueprint, round_updates: u64, max_policy_lag: Option<u64>) -> Result<Self> {
        let (behaviour_vs, behaviour) = blueprint.network()?;
        let spare = (0..super::free::BUFFERS)
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
            behaviour_vs,
            behaviour,
            published: Some(blueprint.network()?.0),
            spare,
            carried: VecDeque::new(),
            ready: ReadyState::default(),
            next_batch: 0,
            round_updates,
            max_policy_lag,
        })
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
        let n_envs = experiment.per_rank_envs();
        let rollout = experiment.train.rollout;
        let action_kind = ActionKind::of(envs.action_space());
        let blueprint = Blueprint {
            spec,
            obs_shape,
            action_space: envs.action_space().clone(),
            rollout: rollout as i64,
            n_envs: n_envs as i64,
            action_kind,
            device,
        };
        let (vs, model) = blueprint.network()?;
        let rule = make_rule(&vs)?;
        let buffer = blueprint.buffer()?;
        let train = &experiment.train;
        let groups = train.env_groups;
        let collector = if train.sampling == Sampling::Free && groups > 1 {
            RolloutCollector::in_ready_order(n_envs, groups, &blueprint.obs_shape, action_kind)?
        } else {
            RolloutCollector::new(n_envs, groups, &blueprint.obs_shape, action_kind)?
        };
        let memory = model
            .is_recurrent()
            .then(|| Memory::new(&model, n_envs as i64, device));
        let pipeline = match train.sampling {
            Sampling::Pipelined => Some(Pipeline::new(&blueprint)?),
            Sampling::Synchronous | Sampling::Free => None,
        };
        let free = match train.sampling {
            Sampling::Free => Some(FreeSampling::new(
                &blueprint,
                train.round_updates,
                train.max_policy_lag,
            )?),
            Sampling::Synchronous | Sampling::Pipelined => None,
        };
        Ok(OnPolicy {
            vs,
            model,
            rule,
            buffer,
            collector,
            memory,
            seed: experiment.seed,
            rank,
            steps_per_update: (n_envs * rollout * world) as u64,
            latest: Vec::new(),
            pipeline,
            free,
        })
    }

    /// Collects the batch update `update` learns from into `OnPolicy::buffer`, with the
    /// learner's current policy.
    fn collect_now(
        &mut self,
        envs: &mut tandem_env::VecEnv,
        update: u64,
        phases: &mut Phases,
    ) -> Result<Tensor> {
        let draws = Draws {
            seed: self.seed,
            rank: self.rank,
            update,
        };
        collect_batch(
            &self.collector,
            &self.model,
            self.memory.as_mut(),
            envs,
            &mut self.buffer,
            draws,
            phases,
            &mut NoHook,
        )
    }

    /// Which update this is, for the rule's schedules and random streams.
    fn update_at(&self, update: u64, limits: Limits) -> UpdateAt {
        UpdateAt::of(self.seed, self.rank, update, limits)
    }

    /// A synchronous round: collect with the current policy, then update on it.
    fn synchronous_round(&mut self, envs: &mut tandem_env::VecEnv, mut round: Round) -> Result<()> {
        let update = round.counters.update;
        let last_values = self.collect_now(envs, update, round.phases)?;
        let at = self.update_at(update, round.limits);
        let steps = self.steps_per_update;
        self.latest = learn(
            &mut self.rule,
            &self.model,
            &self.buffer,
            &last_values,
            at,
            steps,
            &mut round,
        )?;
        Ok(())
    }

    /// A pipelined round: update on the batch collected before (collecting it now if there is
    /// none, as at the start) while a second thread collects the next batch with the
    /// parameters the update starts from. The last round of the run collects nothing.
    fn pipelined_round(&mut self, envs: &mut tandem_env::VecEnv, mut round: Round) -> Result<()> {
        let update = round.counters.update;
        let ready = match self.pipeline.as_mut().and_then(|p| p.ready.take()) {
            Some(ready) => ready,
            None => Ready {
                last_values: self.collect_now(envs, update, round.phases)?,
                collected_by: update,
            },
        };
        let after = update + 1;
        // A run stopped by `train.max-steps` (or a signal) collects the next batch as one that
        // goes on would, and its checkpoint keeps it: a resumed run continues exactly.
        let collect_next = after < round.limits.total_updates;
        let at = self.update_at(update, round.limits);
        let draws = Draws {
            seed: self.seed,
            rank: self.rank,
            update: after,
        };
        let OnPolicy {
            vs,
            model,
            rule,
            buffer,
            collector,
            memory,
            pipeline,
            latest,
            steps_per_update,
            ..
        } = self;
        let pipeline = pipeline
            .as_mut()
            .expect("a pipelined learner has a pipeline");
        if collect_next {
            pipeline
                .behaviour_vs
                .copy(vs)
                .context("copying the learner's parameters into the behaviour policy")?;
        }
        let mut collected_phases = Phases::default();
        let phases = &mut collected_phases;
        let Pipeline {
            behaviour, next, ..
        } = &mut *pipeline;
        let collect = collect_next.then_some(move || {
            collect_batch(
                collector,
                behaviour,
                memory.as_mut(),
                envs,
                next,
                draws,
                phases,
                &mut NoHook,
            )
        });
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
        *latest = scalars;
        if let Some((collected, waited)) = collected {
            let last_values =
                collected.with_context(|| format!("collecting for update {}", update + 1))?;
            std::mem::swap(buffer, &mut pipeline.next);
            pipeline.ready = Some(Ready {
                last_values,
                collected_by: update,
            });
            round.phases.add("pipeline_wait", waited);
        }
        round.phases.absorb(&collected_phases);
        Ok(())
    }
}

impl<U: PolicyUpdate> OnPolicy<U> {
    /// A free round: a collector thread fills buffers one after another, taking up the newest
    /// published parameters before every step, while this thread learns from the batches as
    /// they complete (oldest first; those lagging more than `max-policy-lag` dropped) and
    /// publishes its parameters after each update. At the round's end the collector finishes
    /// its batch and stops; what was collected and not learned from carries over.
    fn free_round(&mut self, envs: &mut tandem_env::VecEnv, mut round: Round) -> Result<()> {
        let OnPolicy {
            vs,
            model,
            rule,
            collector,
            memory,
            free,
            latest,
            steps_per_update,
            seed,
            rank,
            ..
        } = self;
        let free = free
            .as_mut()
            .expect("a free learner has its sampling state");
        let at = *round.counters;
        let updates = free.updates_from(at, round.limits, *steps_per_update);
        let shared = free.start_round(vs, at.update)?;
        let exchange = &shared;
        let (seed, rank, limits, max_lag) = (*seed, *rank, round.limits, free.max_policy_lag);
        let mut collector_phases = Phases::default();
        let phases = &mut collector_phases;
        let first_batch = free.next_batch;
        let FreeSampling {
            behaviour_vs,
            behaviour,
            ready: ready_state,
            ..
        } = free;
        // Moves: the collector thread holds its references exclusively (tensors are not Sync).
        let collect = move || {
            let mut version = at.update;
            let draws = move |update| Draws { seed, rank, update };
            if collector.is_ready_order() {
                ensure!(
                    memory.is_none(),
                    "ready order collects for feed-forward policies only (the config refuses \
                     env-groups with a recurrent core)"
                );
                draws(first_batch).seed_sampling();
                return super::free::collect_round(exchange, behaviour_vs, &mut version, |c| {
                    collector.collect_ready_round(behaviour, envs, ready_state, c, phases)
                });
            }
            super::free::collect_until_stopped(
                exchange,
                behaviour_vs,
                &mut version,
                first_batch,
                phases,
                move |buffer, hook, index, phases| {
                    let memory = memory.as_mut();
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
            )
        };
        let learn = || {
            let at = |update| UpdateAt::of(seed, rank, update, limits);
            let steps = *steps_per_update;
            let learned = learn_free(
                rule, model, vs, exchange, max_lag, at, steps, updates, &mut round,
            );
            // Also after a failed update: the collector must stop for the round to end.
            exchange.stop();
            learned
        };
        let (learned, collected) = overlapped(Some(collect), learn)?;
        let (collected, round_end_wait) = collected.expect("a free round always collects");
        let report = collected.context("free sampling's collector")?;
        let (mut scalars, tally, learner_wait) = learned?;
        scalars.extend(tally.scalars());
        *latest = scalars;
        free.end_round(shared, report.batches);
        round.phases.absorb(&collector_phases);
        round.phases.add("learner_wait", learner_wait);
        round.phases.add("collector_wait", report.waited);
        round.phases.add("round_end_wait", round_end_wait);
        Ok(())
    }
}

/// The updates of a free round: each takes the oldest queued batch that does not lag more than
/// `max_lag`, learns from it and publishes the parameters. Returns the last update's scalars,
/// the round's lag and how long the learner waited for batches.
#[allow(clippy::too_many_arguments)]
fn learn_free<U: PolicyUpdate>(
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

impl FreeSampling {
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
            .expect("the published parameters are back from the round before");
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

/// What a collection thread gave, and how long the learner waited for it after its update.
type Collected<C> = (Result<C>, Duration);

/// Runs `learn` on this thread while `collect`, when there is one, runs on a `tandem-collect`
/// thread; returns what each gave and how long the learner then waited for the collection.
fn overlapped<C: Send, L>(
    collect: Option<impl FnOnce() -> Result<C> + Send>,
    learn: impl FnOnce() -> L,
) -> Result<(L, Option<Collected<C>>)> {
    let threads = tch::get_num_threads();
    std::thread::scope(|scope| {
        let collecting = collect
            .map(|collect| {
                std::thread::Builder::new()
                    .name("tandem-collect".into())
                    .spawn_scoped(scope, move || {
                        // libtorch's thread count is per thread: this one computes as the
                        // rank's main thread does.
                        tch::set_num_threads(threads);
                        collect()
                    })
            })
            .transpose()
            .context("cannot start the collection thread of pipelined sampling")?;
        let learned = learn();
        let waiting = Instant::now();
        let collected = collecting.map(|handle| {
            let result = handle.join().unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "the collection thread of pipelined sampling panicked"
                ))
            });
            (result, waiting.elapsed())
        });
        Ok((learned, collected))
    })
}

/// Whose action draws a collection makes: the sampling stream of (seed, rank, update), the
/// update that learns from the batch, whichever thread collects it.
#[derive(Debug, Clone, Copy)]
struct Draws {
    seed: u64,
    rank: usize,
    update: u64,
}

impl Draws {
    /// Seeds this thread's torch generator with the stream's start.
    fn seed_sampling(self) {
        let Draws { seed, rank, update } = self;
        tch::manual_seed(crate::seeds::derived_seed(
            seed,
            crate::seeds::Purpose::Sampling,
            rank as u64,
            update,
        ) as i64);
    }
}

/// One rollout of `envs` under `policy` into `buffer` (from and into `memory` for a
/// recurrent policy), returning V(s_T).
#[allow(clippy::too_many_arguments)]
fn collect_batch(
    collector: &RolloutCollector,
    policy: &ActorCritic,
    memory: Option<&mut Memory>,
    envs: &mut tandem_env::VecEnv,
    buffer: &mut RolloutBuffer,
    draws: Draws,
    phases: &mut Phases,
    hook: &mut dyn StepHook,
) -> Result<Tensor> {
    draws.seed_sampling();
    match memory {
        Some(memory) => {
            collector.collect_recurrent_with(policy, envs, memory, buffer, phases, hook)
        }
        None => collector.collect_with(policy, envs, buffer, phases, hook),
    }
}

/// One update of `rule` on `buffer`, its time split into `learn` and `sync`; advances the
/// round's counters.
fn learn<U: PolicyUpdate>(
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

    fn updates_per_round(&self) -> u64 {
        self.free.as_ref().map_or(1, |free| free.round_updates)
    }

    fn round(&mut self, envs: &mut tandem_env::VecEnv, round: Round) -> Result<()> {
        if self.pipeline.is_some() {
            self.pipelined_round(envs, round)
        } else if self.free.is_some() {
            self.free_round(envs, round)
        } else {
            self.synchronous_round(envs, round)
        }
    }

    fn scalars(&self) -> Scalars {
        self.latest.clone()
    }

    fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        if let Some(pipeline) = &self.pipeline {
            save_in_flight(pipeline, &self.buffer, dir, self.rank, global_step)?;
        }
        let Some(memory) = &self.memory else {
            return Ok(());
        };
        let file = memory_file(dir, self.rank);
        crate::atomic::write_atomic(&file, &memory_bytes(memory, global_step)?)
            .with_context(|| format!("cannot write {}", file.display()))
    }

    /// The saved memory and batch in flight continue the saved episodes, so they come back
    /// exactly when the environments do; otherwise the fresh episodes start from zero states
    /// and the first update learns from a batch collected afresh.
    fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        if let Some(pipeline) = &mut self.pipeline {
            restore_in_flight(pipeline, &mut self.buffer, resumed, self.rank)?;
        }
        if self.free.is_some() {
            tracing::info!(
                "rank {}: free sampling keeps no batches in flight in a checkpoint; the first \
                 round learns from batches collected afresh",
                self.rank
            );
        }
        let Some(memory) = &mut self.memory else {
            return Ok(());
        };
        if !resumed.envs_restored {
            tracing::info!(
                "rank {}: environments start fresh episodes, so the recurrent state starts at zero",
                self.rank
            );
            return Ok(());
        }
        let file = memory_file(resumed.dir, self.rank);
        let bytes =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        *memory = memory_from_bytes(&bytes, memory, resumed.global_step).with_context(|| {
            format!("cannot resume the recurrent state from {}", file.display())
        })?;
        Ok(())
    }

    /// Explained variance is legitimately NaN when returns are constant; nothing else is.
    fn diverged(&self) -> bool {
        self.latest
            .iter()
            .any(|(tag, v)| !v.is_finite() && !tag.ends_with("explained_variance"))
    }
}

/// Where rank `rank` keeps the batch in flight of pipelined sampling in a checkpoint directory.
fn in_flight_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("inflight-rank{rank}.bin"))
}

/// Writes the batch collected for the next update (in `buffer`), with its bootstrap values, the
/// update that collected it and the global step of the checkpoint; removes an older file when
/// no batch is in flight (the run's last update consumed it).
fn save_in_flight(
    pipeline: &Pipeline,
    buffer: &RolloutBuffer,
    dir: &Path,
    rank: usize,
    global_step: u64,
) -> Result<()> {
    let file = in_flight_file(dir, rank);
    let Some(ready) = &pipeline.ready else {
        return match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", file.display()))
            }
            _ => Ok(()),
        };
    };
    let mut named = buffer.contents();
    named.push(("last_values".into(), ready.last_values.shallow_clone()));
    for (name, value) in [
        ("collected_by", ready.collected_by),
        ("global_step", global_step),
    ] {
        named.push((name.into(), Tensor::from_slice(&[value as i64])));
    }
    let named: Vec<(String, Tensor)> = named
        .into_iter()
        .map(|(name, t)| (name, t.to_device(tch::Device::Cpu)))
        .collect();
    // Made in memory and written by Rust, as checkpoints are: libtorch's file writer throws from
    // a destructor when a write fails, which aborts the process on a full disk.
    let bytes =
        crate::torch_ops::save_named(&named).context("cannot serialise the batch in flight")?;
    crate::atomic::write_atomic(&file, &bytes)
        .with_context(|| format!("cannot write {}", file.display()))
}

/// Reads back what [`save_in_flight`] wrote, when the environments continue the saved episodes.
fn restore_in_flight(
    pipeline: &mut Pipeline,
    buffer: &mut RolloutBuffer,
    resumed: &Resumed,
    rank: usize,
) -> Result<()> {
    let file = in_flight_file(resumed.dir, rank);
    if !file.exists() {
        return Ok(());
    }
    if !resumed.envs_restored {
        tracing::info!(
            "rank {rank}: environments start fresh episodes, so the batch in flight at the \
             checkpoint is dropped and the first update learns from one collected afresh"
        );
        return Ok(());
    }
    let mut restore = || -> Result<Ready> {
        let named = Tensor::load_multi(&file)?;
        let number = |name: &str| -> Result<u64> {
            let (_, t) = named
                .iter()
                .find(|(n, _)| n == name)
                .with_context(|| format!("it holds no `{name}`"))?;
            Ok(i64::try_from(t)? as u64)
        };
        let saved_step = number("global_step")?;
        ensure!(
            saved_step == resumed.global_step,
            "it was saved at global step {saved_step}, the checkpoint is at step {}",
            resumed.global_step
        );
        buffer.restore(&named)?;
        let (_, last_values) = named
            .iter()
            .find(|(n, _)| n == "last_values")
            .context("it holds no `last_values`")?;
        ensure!(
            last_values.size() == [buffer.num_envs()],
            "its `last_values` has shape {:?}, this run has {} environments",
            last_values.size(),
            buffer.num_envs()
        );
        Ok(Ready {
            last_values: last_values.to_device(buffer.device()),
            collected_by: number("collected_by")?,
        })
    };
    let ready = restore()
        .with_context(|| format!("cannot resume the batch in flight from {}", file.display()))?;
    pipeline.ready = Some(ready);
    Ok(())
}

/// Where rank `rank` keeps its recurrent memory in a checkpoint directory.
fn memory_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("memory-rank{rank}.bin"))
}

const MEMORY_MAGIC: &[u8; 8] = b"TNDMMEM1";

/// The memory as bytes: magic, the global step it was saved at, environments and state width
/// (u64 little-endian each), then the states and the starts as f32 little-endian.
fn memory_bytes(memory: &Memory, global_step: u64) -> Result<Vec<u8>> {
    let shape = memory.state.size();
    let host = |t: &Tensor| -> Result<Vec<f32>> {
        let flat = t.to_device(tch::Device::Cpu).reshape([-1]);
        Vec::<f32>::try_from(&flat).context("copying the recurrent state to the host")
    };
    let mut bytes = MEMORY_MAGIC.to_vec();
    for word in [global_step, shape[0] as u64, shape[1] as u64] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    for value in host(&memory.state)?
        .into_iter()
        .chain(host(&memory.starts)?)
    {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    Ok(bytes)
}

/// The memory `memory_bytes` wrote, checked against the step and the shape of `like`.
fn memory_from_bytes(bytes: &[u8], like: &Memory, global_step: u64) -> Result<Memory> {
    let shape = like.state.size();
    let (envs, width) = (shape[0] as usize, shape[1] as usize);
    let header = MEMORY_MAGIC.len() + 24;
    ensure!(
        bytes.len() >= header && &bytes[..8] == MEMORY_MAGIC,
        "not a recurrent-state file"
    );
    let word = |i: usize| {
        let at = 8 + 8 * i;
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    ensure!(
        word(0) == global_step,
        "it was saved at global step {}, the checkpoint is at step {global_step}",
        word(0)
    );
    ensure!(
        (word(1), word(2)) == (envs as u64, width as u64),
        "it holds states of {} environments of width {}, this run has {envs} of width {width}",
        word(1),
        word(2)
    );
    ensure!(
        bytes.len() == header + 4 * (envs * width + envs),
        "it is {} bytes long, {} expected",
        bytes.len(),
        header + 4 * (envs * width + envs)
    );
    let floats: Vec<f32> = bytes[header..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let device = like.state.device();
    let (state, starts) = floats.split_at(envs * width);
    Ok(Memory {
        state: Tensor::from_slice(state)
            .view([envs as i64, width as i64])
            .to_device(device),
        starts: Tensor::from_slice(starts).to_device(device),
    })
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

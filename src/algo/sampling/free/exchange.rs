//! The exchange of free sampling: what connects its collector thread, which fills rollout buffers
//! one after another without waiting for the learner, and the learner, which takes the batches as
//! they complete and after each update publishes its parameters for the collector to take up before
//! its next step. This module owns [`Exchange`]: a pool of preallocated buffers (spare ones, and
//! full ones queued oldest first), the published parameters with their version, and the stop signal
//! of a round's end; and the collector's side of it ([`Collecting`], in a [`collect_round`]; a
//! batch at a time in [`collect_until_stopped`]). The learner's side is `learner_loop`.
//!
//! A version counts the updates parameters have had. The policy lag of a step is the update that
//! learns from it minus the version that chose its action ([`Lag`]); a batch keeps each step's
//! version.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tch::Tensor;
use tch::nn::VarStore;

use crate::algo::learner::Phases;
use crate::algo::sampling::collect::StepHook;
use crate::algo::storage::rollout::RolloutBuffer;

/// Rollout buffers per rank: one the learner reads, one queued, one being filled. A third lets
/// the collector run a batch ahead of the learner instead of waiting for it; in ready order,
/// where the learner keeps up, it is the batch the faster groups have begun while the slowest
/// finishes the one before (`policy_worker`).
pub const BUFFERS: usize = 3;

/// A batch the collector completed: the buffer, V(s_T) after its last step, and the version of
/// the parameters that chose each group's actions at each step.
pub struct QueuedBatch {
    pub buffer: RolloutBuffer,
    pub last_values: Tensor,
    pub versions: Vec<u64>,
}

/// How far a batch's steps lag the update that learns from them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lag {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

impl Lag {
    /// The lag of steps chosen by `versions` behind update `update`.
    pub fn of(versions: &[u64], update: u64) -> Lag {
        let lags = versions.iter().map(|&v| update.saturating_sub(v));
        Lag {
            min: lags.clone().min().unwrap_or(0),
            mean: lags.clone().sum::<u64>() as f64 / versions.len().max(1) as f64,
            max: lags.max().unwrap_or(0),
        }
    }
}

/// The lag over the batches of a round, and the batches dropped for lagging too far.
#[derive(Debug, Default)]
pub struct LagTally {
    min: Option<u64>,
    max: u64,
    sum: f64,
    batches: u64,
    pub dropped: u64,
}

impl LagTally {
    pub fn add(&mut self, lag: Lag) {
        self.min = Some(self.min.map_or(lag.min, |m| m.min(lag.min)));
        self.max = self.max.max(lag.max);
        self.sum += lag.mean;
        self.batches += 1;
    }

    /// `train/policy_lag` (the mean over the round's steps; its batches are of equal size),
    /// `_min`, `_max` and `train/dropped_batches`.
    pub fn scalars(&self) -> [(&'static str, f64); 4] {
        [
            ("train/policy_lag", self.sum / self.batches.max(1) as f64),
            ("train/policy_lag_min", self.min.unwrap_or(0) as f64),
            ("train/policy_lag_max", self.max as f64),
            ("train/dropped_batches", self.dropped as f64),
        ]
    }
}

/// What the collector and the learner of one rank share during a round.
pub struct Exchange {
    queues: Mutex<Queues>,
    changed: Condvar,
    published: Published,
}

struct Queues {
    spare: Vec<RolloutBuffer>,
    full: VecDeque<QueuedBatch>,
    /// The round is over: the collector stops after the batch it is filling.
    stopping: bool,
    /// The collector has returned (done, failed or panicked): nothing more will be queued.
    collector_gone: bool,
}

/// The learner's newest parameters, copied out after each update, and their version; the
/// version is also kept outside the lock so that the collector's check before every step
/// costs one atomic load.
struct Published {
    latest: AtomicU64,
    params: Mutex<(u64, VarStore)>,
}

impl Exchange {
    /// A round's exchange: batches carried over from the round before (oldest first), spare
    /// buffers, and `params` (a variable store of the learner's layout) holding the learner's
    /// parameters of version `version`.
    pub fn new(
        carried: VecDeque<QueuedBatch>,
        spare: Vec<RolloutBuffer>,
        params: VarStore,
        version: u64,
    ) -> Exchange {
        Exchange {
            queues: Mutex::new(Queues {
                spare,
                full: carried,
                stopping: false,
                collector_gone: false,
            }),
            changed: Condvar::new(),
            published: Published {
                latest: AtomicU64::new(version),
                params: Mutex::new((version, params)),
            },
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while the lock was held leaves the queues as they were between operations.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The learner's side: the oldest full batch, waiting for one; an error when the collector
    /// has gone with nothing queued (its own error comes from joining it).
    pub fn take_full(&self) -> Result<QueuedBatch> {
        let mut queues = self.lock();
        loop {
            if let Some(batch) = queues.full.pop_front() {
                return Ok(batch);
            }
            if queues.collector_gone {
                return Err(anyhow!("the collector of free sampling stopped"));
            }
            queues = self.changed.wait(queues).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The learner's side: a buffer it has learned from (or dropped) goes back to the pool.
    pub fn give_back(&self, buffer: RolloutBuffer) {
        self.lock().spare.push(buffer);
        self.changed.notify_all();
    }

    /// The learner's side: parameters after `version` updates, for the collector's next step.
    pub fn publish(&self, learner: &VarStore, version: u64) -> Result<()> {
        let mut params = self
            .published
            .params
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        params
            .1
            .copy(learner)
            .context("publishing the learner's parameters to the collector")?;
        params.0 = version;
        self.published.latest.store(version, Ordering::Release);
        Ok(())
    }

    /// The learner's side, at the round's end: the collector finishes its batch and stops.
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.changed.notify_all();
    }

    /// After the collector has been joined: the batches not learned from (oldest first), the
    /// spare buffers and the store of published parameters, for the next round.
    pub fn into_parts(self) -> (VecDeque<QueuedBatch>, Vec<RolloutBuffer>, VarStore) {
        let queues = self.queues.into_inner().unwrap_or_else(|e| e.into_inner());
        let (_, params) = self
            .published
            .params
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        (queues.full, queues.spare, params)
    }

    /// The collector's side: a spare buffer to fill, waiting for one; `None` once the round
    /// is over.
    fn take_spare(&self) -> Option<RolloutBuffer> {
        let mut queues = self.lock();
        loop {
            if queues.stopping {
                return None;
            }
            if let Some(buffer) = queues.spare.pop() {
                return Some(buffer);
            }
            queues = self.changed.wait(queues).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn queue(&self, batch: QueuedBatch) {
        self.lock().full.push_back(batch);
        self.changed.notify_all();
    }

    fn collector_gone(&self) {
        self.lock().collector_gone = true;
        self.changed.notify_all();
    }
}

/// The collector's side of a round's exchange: buffers to fill, batches to queue, the stop, and
/// the behaviour network that takes up the learner's newest parameters. Dropping it tells the
/// learner that nothing more will be queued (also when the collector fails or panics).
pub struct Collecting<'a> {
    exchange: &'a Exchange,
    behaviour: &'a mut VarStore,
    /// The version `behaviour` holds.
    version: &'a mut u64,
    report: CollectorReport,
}

impl Collecting<'_> {
    /// The version of the parameters the behaviour network holds.
    pub fn version(&self) -> u64 {
        *self.version
    }

    /// Takes up the learner's newest parameters where they are newer than the behaviour
    /// network's; returns the version it then holds. The policy is not in use meanwhile.
    pub fn take_up_newest(&mut self) -> Result<u64> {
        let published = &self.exchange.published;
        if published.latest.load(Ordering::Acquire) > *self.version {
            let params = published.params.lock().unwrap_or_else(|e| e.into_inner());
            self.behaviour
                .copy(&params.1)
                .context("taking up the learner's parameters")?;
            *self.version = params.0;
        }
        Ok(*self.version)
    }

    /// Whether the round is over (the collector finishes the batch it is filling and stops).
    pub fn stopping(&self) -> bool {
        self.exchange.lock().stopping
    }

    /// A spare buffer to fill, waiting for one (the time counts as waiting for the learner);
    /// `None` once the round is over.
    pub fn spare(&mut self) -> Option<RolloutBuffer> {
        let waiting = Instant::now();
        let buffer = self.exchange.take_spare();
        self.report.waited += waiting.elapsed();
        buffer
    }

    /// A spare buffer if there is one now and the round goes on.
    pub fn spare_now(&mut self) -> Option<RolloutBuffer> {
        let mut queues = self.exchange.lock();
        if queues.stopping {
            return None;
        }
        queues.spare.pop()
    }

    /// A completed batch, for the learner.
    pub fn queue(&mut self, batch: QueuedBatch) {
        self.report.batches += 1;
        self.exchange.queue(batch);
    }

    /// Batches queued so far this round.
    pub fn batches(&self) -> u64 {
        self.report.batches
    }

    /// How long this round's collector has waited for spare buffers so far.
    pub fn waited(&self) -> Duration {
        self.report.waited
    }
}

impl Drop for Collecting<'_> {
    fn drop(&mut self) {
        self.exchange.collector_gone();
    }
}

/// The collector's behaviour network between steps of a batch: takes up newer published
/// parameters and records which version chose each group's step (a version for each group, so
/// that the lag's mean weighs every step of every environment alike, however many groups a
/// pass serves).
struct TakeUpNewest<'c, 'a> {
    collecting: &'c mut Collecting<'a>,
    versions: Vec<u64>,
}

impl StepHook for TakeUpNewest<'_, '_> {
    fn before_step(&mut self, first_group_chosen: bool, groups: usize) -> Result<()> {
        let chosen_by = self.collecting.version();
        let version = self.collecting.take_up_newest()?;
        // A group whose actions were chosen before the copy acted with the older version.
        let older = usize::from(first_group_chosen).min(groups);
        self.versions.extend(std::iter::repeat_n(chosen_by, older));
        self.versions
            .extend(std::iter::repeat_n(version, groups - older));
        Ok(())
    }
}

/// What the collector did in a round: batches it completed, and how long it waited for a
/// spare buffer (the learner was the slower role).
#[derive(Debug, Clone, Copy)]
pub struct CollectorReport {
    pub batches: u64,
    pub waited: Duration,
}

/// The collector thread's side of a round: runs `collect` with the exchange's collector side
/// until it returns (it fills and queues buffers until the round stops). `behaviour` holds
/// version `version`.
pub fn collect_round(
    exchange: &Exchange,
    behaviour: &mut VarStore,
    version: &mut u64,
    collect: impl FnOnce(&mut Collecting<'_>) -> Result<()>,
) -> Result<CollectorReport> {
    let mut collecting = Collecting {
        exchange,
        behaviour,
        version,
        report: CollectorReport {
            batches: 0,
            waited: Duration::ZERO,
        },
    };
    collect(&mut collecting)?;
    Ok(collecting.report)
}

/// [`collect_round`] a batch at a time: fills spare buffers with `collect` (the buffer, the
/// hook to run before every step, the index of the batch among all this rank's batches, and
/// the phases to time) and queues them, until the round stops.
pub fn collect_until_stopped(
    exchange: &Exchange,
    behaviour: &mut VarStore,
    version: &mut u64,
    first_batch: u64,
    phases: &mut Phases,
    mut collect: impl FnMut(&mut RolloutBuffer, &mut dyn StepHook, u64, &mut Phases) -> Result<Tensor>,
) -> Result<CollectorReport> {
    collect_round(exchange, behaviour, version, |collecting| {
        while let Some(mut buffer) = collecting.spare() {
            let index = first_batch + collecting.batches();
            let mut hook = TakeUpNewest {
                collecting: &mut *collecting,
                versions: Vec::new(),
            };
            let last_values = collect(&mut buffer, &mut hook, index, phases)
                .with_context(|| format!("collecting batch {index} of free sampling"))?;
            let versions = hook.versions;
            collecting.queue(QueuedBatch {
                buffer,
                last_values,
                versions,
            });
        }
        Ok(())
    })
}

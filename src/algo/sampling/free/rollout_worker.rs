//! A rollout worker of ready order (sample-factory's rollout worker on one rank): a thread per
//! group of environments (`tandem-rollout-<g>`) that steps its group whenever the policy worker
//! sends it actions and reports back ([`Stepped`]); [`reports`] is the policy worker's wait for
//! them.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use tandem_env::EnvGroup;

use crate::algo::actions::ActionBatch;
use crate::algo::learner::Phases;

/// A rollout worker's report: its group stepped (or failed to), and how long that took.
pub(super) struct Stepped {
    pub(super) group: usize,
    pub(super) took: Duration,
    pub(super) result: Result<()>,
}

/// Waits for a rollout worker's report and takes every other report already queued with it,
/// so that the groups that stepped while the policy last ran are served by one forward pass.
pub(super) fn reports(ready: &Receiver<Stepped>, phases: &mut Phases) -> Result<Vec<Stepped>> {
    let waiting = Instant::now();
    let first = ready
        .recv()
        .map_err(|_| anyhow!("the rollout workers stopped without reporting"))?;
    phases.add("inference_wait", waiting.elapsed());
    Ok(std::iter::once(first).chain(ready.try_iter()).collect())
}

/// A rollout worker: steps its group with each batch of actions it is sent and reports, until
/// the inference worker stops sending. A panic in a game is reported as a failure, so that
/// the inference worker never waits for a report that cannot come.
pub(super) fn rollout_worker(
    g: usize,
    group: &Mutex<EnvGroup<'_>>,
    actions: Receiver<ActionBatch>,
    ready: Sender<Stepped>,
) {
    for batch in actions {
        let stepping = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock(group).step(&batch).map_err(anyhow::Error::from)
        }))
        .unwrap_or_else(|_| {
            Err(anyhow!(
                "an environment of group {g} panicked while stepping"
            ))
        });
        let failed = result.is_err();
        let report = Stepped {
            group: g,
            took: stepping.elapsed(),
            result,
        };
        if ready.send(report).is_err() || failed {
            return;
        }
    }
}

pub(super) fn lock<'m, 'a>(group: &'m Mutex<EnvGroup<'a>>) -> MutexGuard<'m, EnvGroup<'a>> {
    // A worker that panicked while stepping has already reported it; the rows are still there.
    group.lock().unwrap_or_else(|e| e.into_inner())
}

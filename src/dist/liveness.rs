//! Who stopped answering. A timed-out collective cannot say whom it waited for, and a rank on
//! another host cannot be seen by this host's launcher. So every rank bumps its own heartbeat
//! counter in the store while its group lives (on a store connection of its own, from a thread
//! of its own, so a blocked collective does not stop it); after a failed collective a rank reads
//! the counters twice and names the ranks whose counter stood still, or, when the store itself no
//! longer answers, rank 0, which hosts it. Ranks are named by what they announced at rendezvous
//! (node, address, pid).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::DistError;
use super::store::{Store, with_deadline};

const BEAT: Duration = Duration::from_millis(200);
/// How long a counter must stand still for its rank to count as silent: several beats, so a
/// loaded machine's late beat is not mistaken for silence.
const WATCH: Duration = Duration::from_millis(1500);
/// The longest the heartbeat reading may take before the store counts as silent itself.
const PROBE: Duration = Duration::from_millis(1500 + 2000);

fn beat_key(rank: usize) -> String {
    format!("tandem/heartbeat/{rank}")
}

/// This rank's heartbeat; stops on drop.
pub(super) struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Stops beating and waits until the last beat's request has returned, so that no beat is
    /// in flight when the store's host leaves (c10d then logs `recvValue failed ... Did the
    /// remote server shutdown or crash?` with 14 C++ frames, after a run that succeeded).
    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// How often the beating thread looks at its stop flag between beats.
const NAP: Duration = Duration::from_millis(10);

/// Starts beating for `rank` on `store` (a connection used for nothing else). A beat that fails
/// ends the thread: the store is gone, and the next collective will say so.
pub(super) fn start(store: Store, rank: usize) -> Result<Heartbeat, DistError> {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("tandem-heartbeat".into())
        .spawn(move || {
            let key = beat_key(rank);
            while !stopped.load(Ordering::SeqCst) && store.add(&key, 1).is_ok() {
                let next = std::time::Instant::now() + BEAT;
                while !stopped.load(Ordering::SeqCst) && std::time::Instant::now() < next {
                    std::thread::sleep(NAP);
                }
            }
        })
        .map_err(|e| DistError::Invalid(format!("could not start the heartbeat thread: {e}")))?;
    Ok(Heartbeat {
        stop,
        thread: Some(thread),
    })
}

/// What one rank needs to name the others after a failure.
#[derive(Clone)]
pub struct Peers {
    pub(super) rank: usize,
    pub(super) store: Arc<Store>,
    /// Per rank, how to name it ("rank 1 (node 1, 10.231.0.2, pid 4242)").
    pub(super) names: Vec<String>,
}

impl Peers {
    /// The ranks that stopped answering, as one sentence; `None` when every rank still beats
    /// (the failure is then the failed call's own story).
    pub fn lost(&self) -> Option<String> {
        let store = Arc::clone(&self.store);
        let world = self.names.len();
        let read = move || -> Result<Vec<usize>, DistError> {
            let counts = |s: &Store| -> Result<Vec<i64>, DistError> {
                (0..world).map(|r| s.add(&beat_key(r), 0)).collect()
            };
            let before = counts(&store)?;
            std::thread::sleep(WATCH);
            let after = counts(&store)?;
            Ok((0..world).filter(|&r| before[r] == after[r]).collect())
        };
        let silent = with_deadline("reading the other ranks' heartbeats", PROBE, read);
        match silent {
            Ok(ranks) => {
                let others: Vec<&str> = ranks
                    .iter()
                    .filter(|&&r| r != self.rank)
                    .map(|&r| self.names[r].as_str())
                    .collect();
                (!others.is_empty()).then(|| {
                    format!(
                        "{} stopped answering (no heartbeat for {:.1} s)",
                        others.join(", "),
                        WATCH.as_secs_f64()
                    )
                })
            }
            Err(_) if self.rank == 0 => None,
            Err(e) => Some(format!(
                "{}, which hosts the rendezvous store at {}, stopped answering ({})",
                self.names[0],
                self.store.address(),
                match e {
                    DistError::Timeout { .. } =>
                        format!("the store did not answer for {:.1} s", PROBE.as_secs_f64()),
                    other => format!("its store is gone: {other}"),
                }
            )),
        }
    }
}

/// How a rank is named in reports, from its rendezvous identity.
pub(super) fn name_of(rank: usize, identity: &[(String, String)]) -> String {
    let field = |k: &str| {
        identity
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let mut parts = Vec::new();
    if let Some(node) = field("node") {
        parts.push(format!("node {node}"));
    }
    match (field("addr"), field("host")) {
        (Some(addr), Some(host)) if addr != host => parts.push(format!("{host} at {addr}")),
        (Some(addr), _) => parts.push(addr.to_string()),
        (None, Some(host)) => parts.push(host.to_string()),
        (None, None) => {}
    }
    if let Some(pid) = field("pid") {
        parts.push(format!("pid {pid}"));
    }
    if parts.is_empty() {
        format!("rank {rank}")
    } else {
        format!("rank {rank} ({})", parts.join(", "))
    }
}

//! Supervision of the launcher's local ranks (docs/design.md, "No failure goes unseen" and
//! "Nothing waits forever"): the stop signals the launcher counts, and the loop that watches
//! the ranks it started until the job ends. The first failure is printed with the rank's own
//! message and the others are stopped; Ctrl-C, SIGTERM and SIGUSR1 are forwarded once as a
//! request to finish the update and checkpoint, and a second signal kills; a rank stopped
//! (SIGSTOP) past the collective timeout is given up on; after a collective timed out, the
//! ranks that did not answer are named. What it all comes to is the launcher's exit code.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{INTERRUPTED, PREEMPTED};

/// Signals received by the launcher (SIGINT, SIGTERM, SIGUSR1): how many, and the first; and a
/// socket that these and SIGCHLD (a rank ended) make readable, so that the supervisor wakes when
/// there is news rather than at its next poll (a finished run ends at once, not up to a poll
/// interval later).
pub(crate) struct Signals {
    count: Arc<AtomicUsize>,
    first: Arc<AtomicI32>,
    wake: UnixStream,
}

impl Signals {
    /// How many stop signals came so far.
    pub(crate) fn received(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The first stop signal that came (0: none yet).
    pub(crate) fn first(&self) -> libc::c_int {
        self.first.load(Ordering::SeqCst)
    }

    /// Returns after `timeout`, or sooner when a signal came since the last call.
    pub(crate) fn wait(&self, timeout: Duration) {
        let mut fds = libc::pollfd {
            fd: self.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is one valid pollfd that outlives the call; poll(2) writes only its
        // `revents`. An error (EINTR) is a wake-up like any other.
        unsafe { libc::poll(&mut fds, 1, millis) };
        // Drain what the signals wrote (the socket is non-blocking), so the next wait sleeps.
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// Counts SIGINT, SIGTERM and SIGUSR1 from now on, and wakes [`Signals::wait`] on them and
/// on SIGCHLD.
pub(crate) fn install_signal_counter() -> Result<Signals> {
    let (wake, wake_writer) =
        UnixStream::pair().context("cannot make the launcher's wake-up socket")?;
    wake.set_nonblocking(true)
        .context("cannot make the launcher's wake-up socket")?;
    let signals = Signals {
        count: Arc::new(AtomicUsize::new(0)),
        first: Arc::new(AtomicI32::new(0)),
        wake,
    };
    use signal_hook::consts::{SIGCHLD, SIGINT, SIGTERM, SIGUSR1};
    for sig in [SIGINT, SIGTERM, SIGUSR1] {
        let (count, first) = (Arc::clone(&signals.count), Arc::clone(&signals.first));
        // SAFETY: the handler only does atomic operations on Arc'd atomics it owns: no locks,
        // no allocation, nothing that is not async-signal-safe, as `register` requires.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                let _ = first.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                count.fetch_add(1, Ordering::SeqCst);
            })
        }
        .context("cannot install the signal handler")?;
    }
    for sig in [SIGCHLD, SIGINT, SIGTERM, SIGUSR1] {
        let writer = wake_writer
            .try_clone()
            .context("cannot make the launcher's wake-up socket")?;
        signal_hook::low_level::pipe::register(sig, writer)
            .context("cannot install the signal handler")?;
    }
    Ok(signals)
}

/// A local rank's worker process, and its exit code once it has ended.
pub(super) struct Rank {
    rank: usize,
    child: Child,
    done: Option<i32>,
}

impl Rank {
    pub(super) fn new(rank: usize, child: Child) -> Rank {
        Rank {
            rank,
            child,
            done: None,
        }
    }
}

/// Sends `sig` to process `pid`, a child of this process that it has not reaped (callers skip
/// the finished ones); also `tandem sweep`'s way to pass a stop signal to its variants.
pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours. `pid` is a child we
    // have not reaped yet (callers skip the finished ones), so it cannot name a recycled pid.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Watches `children` until they have all ended (or, after a failure, until the others were
/// given time to stop) and returns the launcher's exit code. `stopped_limit`: how long a rank
/// may stay stopped (SIGSTOP) before the launcher gives up on it. Its peers time out after that
/// long too, but a peer on another host does not stop this launcher, which would otherwise wait
/// for the stopped rank forever.
pub(super) fn supervise(
    children: &mut [Rank],
    signals: &Signals,
    run_dir: &Path,
    stopped_limit: Duration,
) -> Result<ExitCode> {
    let mut watch = Watch {
        stopped_since: vec![None; children.len()],
        children,
        run_dir,
        stopped_limit,
        forwarded: 0,
        failure: None,
        stop_deadline: None,
        silent_check: None,
    };
    loop {
        if watch.second_signal(signals) {
            eprintln!("tandem: stopping now");
            kill_all(watch.children);
            return Ok(ExitCode::from(INTERRUPTED));
        }
        if let Some((rank, code)) = watch.reap()? {
            watch.first_failure(rank, code);
        }
        if watch.failure.is_none() {
            watch.give_up_on_a_long_stopped_rank();
        }
        watch.name_the_silent_ranks();
        if watch.children.iter().all(|c| c.done.is_some()) {
            break;
        }
        if watch.stop_deadline.is_some_and(|d| Instant::now() > d) {
            kill_all(watch.children);
            break;
        }
        signals.wait(Duration::from_millis(50));
    }
    Ok(watch.exit_code())
}

/// What the supervisor has seen of its ranks so far.
struct Watch<'a> {
    children: &'a mut [Rank],
    run_dir: &'a Path,
    stopped_limit: Duration,
    /// Per rank, since when it has been seen stopped (SIGSTOP).
    stopped_since: Vec<Option<Instant>>,
    /// The stop signals received by the time the first was forwarded.
    forwarded: usize,
    /// The first rank that failed, and its exit code.
    failure: Option<(usize, i32)>,
    /// When the ranks asked to stop after the failure are killed.
    stop_deadline: Option<Instant>,
    /// After a rank's collective timed out: that rank, and when to name the ranks that did not
    /// answer it.
    silent_check: Option<(usize, Instant)>,
}

impl Watch<'_> {
    /// Forwards the first stop signal to the ranks; true once another signal has come after it.
    fn second_signal(&mut self, signals: &Signals) -> bool {
        let received = signals.received();
        if received <= self.forwarded {
            return false;
        }
        if self.forwarded > 0 {
            return true;
        }
        forward_stop_request(self.children, signals.first());
        self.forwarded = received;
        false
    }

    /// Records the exit codes of the ranks that ended since the last look; returns the first that
    /// failed (not a stop that was asked for), unless a rank had failed before.
    fn reap(&mut self) -> Result<Option<(usize, i32)>> {
        let mut newly_failed = None;
        for c in self.children.iter_mut().filter(|c| c.done.is_none()) {
            if let Some(status) = c.child.try_wait()? {
                let code = status
                    .code()
                    .unwrap_or_else(|| 128 + status_signal(&status));
                c.done = Some(code);
                let failed = code != 0 && code != INTERRUPTED as i32 && code != PREEMPTED as i32;
                if failed && self.failure.is_none() && newly_failed.is_none() {
                    newly_failed = Some((c.rank, code));
                }
            }
        }
        Ok(newly_failed)
    }

    /// The run's first failure: prints the rank's own message and stops the others.
    fn first_failure(&mut self, rank: usize, code: i32) {
        self.failure = Some((rank, code));
        // A stopped rank fails nobody itself: the rank that timed out waiting for it does.
        // Name it first; it can take no signal but SIGKILL.
        for c in self.children.iter().filter(|c| c.done.is_none()) {
            if is_stopped(c.child.id()) {
                eprintln!(
                    "tandem: rank {} stopped answering: its process {} is stopped (SIGSTOP, or a debugger holds it)",
                    c.rank,
                    c.child.id()
                );
                signal(c.child.id(), libc::SIGKILL);
            }
        }
        let message = report_failure(rank, code, self.run_dir);
        self.stop_deadline = Some(stop_the_others(self.children));
        if message.is_some_and(|m| m.to_lowercase().contains("timed out")) {
            self.silent_check = Some((rank, Instant::now() + SILENT_GRACE));
        }
    }

    /// A rank stopped for longer than the collective timeout fails the run: it is killed and the
    /// others are stopped.
    fn give_up_on_a_long_stopped_rank(&mut self) {
        let limit = self.stopped_limit;
        let Some(c) = long_stopped(self.children, &mut self.stopped_since, limit) else {
            return;
        };
        eprintln!(
            "tandem: rank {} stopped answering: its process {} has been stopped (SIGSTOP, or a debugger holds it) for {} s, longer than the collective timeout",
            c.rank,
            c.child.id(),
            limit.as_secs_f64()
        );
        signal(c.child.id(), libc::SIGKILL);
        self.failure = Some((c.rank, 128 + libc::SIGSTOP));
        eprintln!("tandem: stopping the other ranks");
        self.stop_deadline = Some(stop_the_others(self.children));
    }

    /// A collective timed out: the ranks that neither failed nor ended since are the ones that
    /// stopped answering (a rank waiting on them would have timed out too by now). The
    /// timeout's own message cannot say whom it waited for.
    fn name_the_silent_ranks(&mut self) {
        let Some((failed, at)) = self.silent_check else {
            return;
        };
        if Instant::now() < at {
            return;
        }
        self.silent_check = None;
        let silent: Vec<String> = self
            .children
            .iter()
            .filter(|c| c.done.is_none())
            .map(|c| c.rank.to_string())
            .collect();
        if !silent.is_empty() {
            eprintln!(
                "tandem: rank {failed} timed out waiting; rank(s) {} did not answer (still running, no error of their own)",
                silent.join(", ")
            );
        }
    }

    /// Failure, success, preemption or interruption, from what the ranks ended with.
    fn exit_code(&self) -> ExitCode {
        let ended_with = |code: u8| self.children.iter().any(|c| c.done == Some(code as i32));
        if self.failure.is_some() {
            return ExitCode::FAILURE;
        }
        // A signal that came after the ranks' last stop vote did not stop them: the run finished.
        if self.children.iter().all(|c| c.done == Some(0)) {
            return ExitCode::SUCCESS;
        }
        if ended_with(PREEMPTED) {
            return ExitCode::from(PREEMPTED);
        }
        if self.forwarded > 0 || ended_with(INTERRUPTED) {
            return ExitCode::from(INTERRUPTED);
        }
        ExitCode::SUCCESS
    }
}

/// Passes the launcher's first stop signal `sig` on to the running ranks (it says why they stop:
/// Ctrl-C, or a scheduler's notice) and tells the user what happens next.
fn forward_stop_request(children: &[Rank], sig: libc::c_int) {
    if sig == libc::SIGINT {
        eprintln!(
            "tandem: interrupted; ranks finish this update and write a checkpoint (Ctrl-C again to stop at once)"
        );
    } else {
        eprintln!(
            "tandem: {} received; ranks finish this update, write a checkpoint and exit with {PREEMPTED} (a second signal stops them at once)",
            if sig == libc::SIGUSR1 {
                "SIGUSR1"
            } else {
                "SIGTERM"
            }
        );
    }
    for c in children.iter().filter(|c| c.done.is_none()) {
        signal(c.child.id(), sig);
    }
}

/// Asks the ranks still running to stop (SIGTERM) after one has failed; returns when the
/// launcher kills what is left.
fn stop_the_others(children: &[Rank]) -> Instant {
    for c in children.iter().filter(|c| c.done.is_none()) {
        signal(c.child.id(), libc::SIGTERM);
    }
    Instant::now() + Duration::from_secs(5)
}

/// The first running rank that has been stopped for longer than `limit` (`since` keeps, per
/// rank, when it was first seen stopped).
fn long_stopped<'a>(
    children: &'a [Rank],
    since: &mut [Option<Instant>],
    limit: Duration,
) -> Option<&'a Rank> {
    let now = Instant::now();
    let mut found = None;
    for (c, since) in children.iter().zip(since.iter_mut()) {
        if c.done.is_none() && is_stopped(c.child.id()) {
            let first = *since.get_or_insert(now);
            if found.is_none() && now.duration_since(first) > limit {
                found = Some(c);
            }
        } else {
            *since = None;
        }
    }
    found
}

/// Whether process `pid` is stopped (state `T`, or `t` under a tracer), from /proc.
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses and may hold anything.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
    })
}

fn status_signal(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().unwrap_or(0)
}

fn kill_all(children: &mut [Rank]) {
    for c in children.iter_mut().filter(|c| c.done.is_none()) {
        // The worker's whole process group, in case it started helpers of its own.
        // SAFETY: killpg(2) takes plain integers; the group is the unreaped child's own (it made
        // itself a group leader before exec), so its id cannot have been recycled.
        unsafe {
            libc::killpg(c.child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = c.child.kill();
        if let Ok(status) = c.child.wait() {
            c.done = Some(status.code().unwrap_or(137));
        }
    }
}

/// How much longer than the collective timeout a rank may stay stopped before its launcher gives
/// up on it: a local peer waiting for it has failed by then (timeout, then 1.5 s of heartbeat
/// reading), and its report says more.
pub(super) const STOPPED_GRACE: Duration = Duration::from_secs(4);

/// How long after one rank's collective timeout the launcher waits before naming the ranks that
/// still run without an error of their own: ranks blocked in the same collective time out within
/// this of each other.
const SILENT_GRACE: Duration = Duration::from_secs(1);

/// Prints the failed rank's own message (written by the worker to logs/rank-N.error) and
/// returns it.
fn report_failure(rank: usize, code: i32, run_dir: &Path) -> Option<String> {
    let error_file = run_dir.join("logs").join(format!("rank-{rank}.error"));
    // The worker writes its error just before exiting; give the file system a moment.
    let mut message = None;
    for _ in 0..10 {
        if let Ok(text) = std::fs::read_to_string(&error_file) {
            message = Some(text.trim().to_string());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let how = if code > 128 {
        format!("was killed by signal {}", code - 128)
    } else {
        format!("exited with code {code}")
    };
    let log = run_dir.join("logs").join(format!("rank-{rank}.log"));
    match (&message, free_bytes(run_dir)) {
        (Some(m), _) => eprintln!("tandem: rank {rank} failed ({how}): {m}"),
        // A full disk is the likely reason its error file is missing; its stderr said why.
        (None, Some(free)) if free < 64 * 1024 => eprintln!(
            "tandem: rank {rank} failed ({how}); the file system of {} has {free} bytes free, \
             too few for the rank to write its error (its last words, if any, are above)",
            run_dir.display()
        ),
        (None, _) => eprintln!(
            "tandem: rank {rank} failed ({how}) without a message; see {}",
            log.display()
        ),
    }
    eprintln!("tandem: stopping the other ranks");
    message
}

/// Bytes an unprivileged writer may still use on the file system holding `path`.
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call; statvfs writes only
    // into `stat`, which is read only when it returned 0 (filled).
    let stat = unsafe {
        (libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) == 0).then(|| stat.assume_init())?
    };
    Some(stat.f_bavail as u64 * stat.f_frsize as u64)
}

//! The worker processes of one rank's gymnasium environments: starting them (the
//! embedded `worker.py` run with `<python> -c`), the handshake, one request line and one
//! reply line per worker per batch step or render request (all workers at once, each reply awaited with a
//! deadline by `poll`), forwarding their stderr with a prefix, and killing and reaping
//! them on failure or drop.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::EnvError;

use super::Launch;

const WORKER_SOURCE: &str = include_str!("worker.py");
/// Stderr lines kept per worker for error messages.
const TAIL_LINES: usize = 40;
/// How long a worker may take to start: imports (MuJoCo, a user's torch) and `make` can be
/// slow, so at least this long whatever the step timeout.
pub(crate) const MIN_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long drop waits for workers to close their environments before killing them.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The last lines a worker wrote to stderr, and whether it closed stderr.
#[derive(Default)]
struct Tail {
    lines: Mutex<(VecDeque<String>, bool)>,
    closed: Condvar,
}

impl Tail {
    fn push(&self, line: String) {
        let mut guard = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if guard.0.len() == TAIL_LINES {
            guard.0.pop_front();
        }
        guard.0.push_back(line);
    }

    fn close(&self) {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.closed.notify_all();
    }

    /// The kept lines, after waiting up to `wait` for the worker's stderr to close (so a
    /// dead worker's last words are in).
    fn text(&self, wait: Duration) -> String {
        let guard = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .closed
            .wait_timeout_while(guard, wait, |(_, closed)| !*closed)
            .unwrap_or_else(|e| e.into_inner());
        guard.0.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// One worker process and its pipes.
pub(crate) struct Worker {
    pub index: usize,
    pub envs: Range<usize>,
    pub pid: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    pending: Vec<u8>,
    tail: Arc<Tail>,
    dead: bool,
}

impl Worker {
    /// Starts the interpreter on the embedded worker and sends it its configuration.
    pub fn spawn(
        spec: &Launch,
        index: usize,
        envs: Range<usize>,
        config: &serde_json::Value,
    ) -> Result<Self, EnvError> {
        let mut child = Command::new(&spec.python)
            .arg("-c")
            .arg(WORKER_SOURCE)
            // The worker asks to die with this process (see worker.py).
            .env("TANDEM_GYM_PARENT", std::process::id().to_string())
            // Its own process group, so that what its environments start ends with it
            // ([`Worker::kill`]); the terminal's Ctrl-C reaches the rank, which closes it.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                EnvError::Backend(format!(
                    "{}: cannot start the Python interpreter `{}`: {e} (set the environment's `python` to an interpreter that has gymnasium installed)",
                    spec.label,
                    spec.python.display()
                ))
            })?;
        let pid = child.id();
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let tail = Arc::new(Tail::default());
        forward_stderr(
            stderr,
            format!("{}gym worker {index}: ", spec.log_prefix),
            &tail,
        );
        set_nonblocking(&stdout);
        let mut worker = Worker {
            index,
            envs,
            pid,
            child,
            stdin: Some(stdin),
            stdout,
            pending: Vec::new(),
            tail,
            dead: false,
        };
        worker.send(&format!("{config}\n"));
        Ok(worker)
    }

    /// Writes a request; a broken pipe shows as the worker's death when the reply is read.
    pub fn send(&mut self, line: &str) {
        if let Some(stdin) = &mut self.stdin {
            let _ = stdin.write_all(line.as_bytes());
        }
    }

    /// Takes one complete reply line, if one has arrived, without the newline.
    fn take_line(&mut self) -> Option<String> {
        let end = self.pending.iter().position(|&b| b == b'\n')?;
        let line: Vec<u8> = self.pending.drain(..=end).collect();
        Some(String::from_utf8_lossy(&line[..end]).into_owned())
    }

    /// Reads what is available; false at end of file (the worker died or closed stdout).
    fn fill(&mut self) -> bool {
        // Large enough that a rendered frame (a megabyte or two of hex) takes few reads.
        let mut chunk = [0u8; 65536];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Its recent stderr, indented, for an error message (empty when it wrote none).
    pub fn stderr_tail(&self, wait: Duration) -> String {
        let text = self.tail.text(wait);
        if text.trim().is_empty() {
            String::new()
        } else {
            let indented: Vec<String> = text.lines().map(|l| format!("    {l}")).collect();
            format!("\n  its last stderr lines:\n{}", indented.join("\n"))
        }
    }

    /// Kills the worker's process group (the worker and whatever its environments started
    /// that stayed in it: a simulator's helper, a `sleep`) and reaps the worker.
    pub fn kill(&mut self) {
        self.kill_group();
        if !self.dead {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.dead = true;
        }
        self.stdin = None;
    }

    fn kill_group(&self) {
        // SAFETY: kill(2) with plain integers. The group is the one this worker leads
        // (`process_group(0)` at spawn); it lives while any member does, and Linux gives no
        // new process a pid in use as a group id, so the signal reaches only its members.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
        }
    }

    /// The exit status in words, waiting up to `wait` for the process to end.
    fn exit_status(&mut self, wait: Duration) -> String {
        let deadline = Instant::now() + wait;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.dead = true;
                    return status.to_string();
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => return "still running; killed".into(),
            }
        }
    }

    /// Closes stdin so the worker closes its environments and exits; kills it if it has
    /// not by `deadline`.
    pub fn close(&mut self, deadline: Instant) {
        self.stdin = None;
        while !self.dead && Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => self.dead = true,
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        self.kill();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn set_nonblocking(stdout: &ChildStdout) {
    let fd = stdout.as_raw_fd();
    // SAFETY: fcntl on a pipe descriptor this process owns, only adding O_NONBLOCK.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

fn forward_stderr(stderr: std::process::ChildStderr, prefix: String, tail: &Arc<Tail>) {
    let tail = Arc::clone(tail);
    std::thread::Builder::new()
        .name("tandem-gym-stderr".into())
        .spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                if let Some(text) = relayed(&line) {
                    eprintln!("{prefix}{text}");
                    tail.push(text);
                }
                line.clear();
            }
            tail.close();
        })
        .expect("spawn a thread for a worker's stderr");
}

/// A line of a worker's stderr as it is relayed: without its line end and trailing spaces;
/// none for a blank line (MuJoCo's deprecation warnings end with one, which would otherwise
/// show as a bare "gym worker 0:").
fn relayed(line: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    (!text.trim_start().is_empty()).then_some(text)
}

/// Why a reply did not come.
pub(crate) enum Failure {
    /// The worker replied with an error object.
    Reply(serde_json::Value),
    Died(String),
    Timeout,
}

/// Waits for one reply line from each of `workers` until `deadline`. Returns the replies
/// in order, or the first worker (by position) that failed and how.
pub(crate) fn await_replies(
    workers: &mut [&mut Worker],
    deadline: Instant,
) -> Result<Vec<String>, (usize, Failure)> {
    let mut replies: Vec<Option<String>> = vec![None; workers.len()];
    loop {
        let mut fds = Vec::new();
        for (k, worker) in workers.iter_mut().enumerate() {
            if replies[k].is_some() {
                continue;
            }
            if let Some(line) = worker.take_line() {
                replies[k] = Some(line);
                continue;
            }
            fds.push((
                k,
                libc::pollfd {
                    fd: worker.stdout.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ));
        }
        if fds.is_empty() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err((fds[0].0, Failure::Timeout));
        }
        let mut raw: Vec<libc::pollfd> = fds.iter().map(|f| f.1).collect();
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `raw` is a live array of `raw.len()` pollfd structs for descriptors we own.
        let ready = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, ms) };
        if ready < 0 {
            continue; // EINTR: poll again with the time left
        }
        for ((k, _), fd) in fds.iter().zip(&raw) {
            if fd.revents != 0 && !workers[*k].fill() && !workers[*k].pending.contains(&b'\n') {
                let worker = &mut *workers[*k];
                let status = worker.exit_status(Duration::from_millis(500));
                return Err((*k, Failure::Died(status)));
            }
        }
    }
    let replies: Vec<String> = replies
        .into_iter()
        .map(|r| r.expect("all replied"))
        .collect();
    for (k, line) in replies.iter().enumerate() {
        if line != "k"
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(line)
            && value.get("error").is_some()
        {
            return Err((k, Failure::Reply(value)));
        }
    }
    Ok(replies)
}

/// How long a worker may take while `doing` (the phase's words, as messages say them): starting
/// and mapping the shared memory the step timeout or [`MIN_START_TIMEOUT`], whichever is
/// longer; anything else the step timeout.
pub(crate) fn timeout_for(doing: &str, step_timeout: Duration) -> Duration {
    match doing {
        STARTING | MAPPING => step_timeout.max(MIN_START_TIMEOUT),
        _ => step_timeout,
    }
}

/// The phases whose replies wait [`MIN_START_TIMEOUT`] at least.
pub(crate) const STARTING: &str = "starting";
pub(crate) const MAPPING: &str = "mapping shared memory";

pub(crate) fn start_deadline(spec: &Launch) -> Instant {
    Instant::now() + timeout_for(STARTING, spec.step_timeout)
}

pub(crate) fn close_deadline() -> Instant {
    Instant::now() + CLOSE_GRACE
}

#[cfg(test)]
mod tests {
    use super::relayed;

    #[test]
    fn blank_stderr_lines_are_not_relayed_and_others_lose_only_their_line_end() {
        assert_eq!(relayed(b"\n"), None);
        assert_eq!(relayed(b"   \t\r\n"), None);
        assert_eq!(
            relayed(b"  Warning: deprecated \r\n").as_deref(),
            Some("  Warning: deprecated")
        );
        assert_eq!(relayed(b"no line end").as_deref(), Some("no line end"));
    }
}

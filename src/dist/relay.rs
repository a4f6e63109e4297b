//! The door to the rendezvous store. c10d's TCPStore has no authentication and would listen on
//! every interface, so rank 0's store listens on loopback only, and this module owns what stands
//! in front of it:
//! - on rank 0, a [`Door`] listening on the job's address (`MASTER_ADDR:MASTER_PORT`, that
//!   address only) admits a connection only after it proves it holds the job's secret
//!   (HMAC-SHA256 of the secret over a fresh random nonce), logs and closes any other, and pipes
//!   the admitted one's bytes to the store;
//! - on the other ranks, [`connect`] makes that proof and hands c10d's client a loopback
//!   connection that carries on to rank 0 (see [`local_end`]).
//!
//! Only the store goes through here: Gloo's and NCCL's data connections are made directly between
//! ranks, at addresses exchanged through the (authenticated) store.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::DistError;

/// What the door says first: it tells a tandem rank it reached a tandem store (and which
/// handshake), and a foreign program that this is not its protocol.
const GREETING: &[u8; 15] = b"tandem-store-1\n";
const ADMITTED: u8 = b'+';
const REFUSED: u8 = b'-';
/// How long a connection may take to prove itself before the door closes it: a rank answers
/// at once; a stranger holding the door open is cut off soon.
const PROOF_TIME: Duration = Duration::from_secs(3);
/// Connections the door lets wait to prove themselves at once; a new one beyond them closes
/// the one that has waited longest, so a flood of idle connections (each a thread and a
/// descriptor of rank 0's) can neither exhaust rank 0's descriptors nor keep a rank out.
const MAX_WAITING: usize = 64;

/// The job's shared secret: every rank of one job holds the same, nobody else should. A
/// credential, not configuration: it changes nothing a run computes.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret([u8; 32]);

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(..)")
    }
}

impl JobSecret {
    /// 32 bytes from the kernel's random source.
    pub fn random() -> std::io::Result<JobSecret> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(JobSecret(bytes))
    }

    /// The secret named by `parts` (a user's passphrase, or facts every rank of a job shares),
    /// hashed so that any text gives a full-length key.
    pub fn derive(parts: &[&str]) -> JobSecret {
        let mut h = Sha256::new();
        h.update(b"tandem job secret\0");
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        JobSecret(h.finalize().into())
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(text: &str) -> Option<JobSecret> {
        let text = text.trim();
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(JobSecret(bytes))
    }

    fn proof(&self, nonce: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(GREETING);
        mac.update(nonce);
        mac
    }
}

/// Rank 0's listener on the job's address, with its accepting thread; closed on drop.
pub(super) struct Door {
    stop: Arc<AtomicBool>,
    address: SocketAddr,
    refusals: Arc<Refusals>,
}

/// Refusals the door logs one line each; past these it counts them (see [`Refusals`]).
const REFUSALS_IN_FULL: usize = 5;
/// How often a flood's count is logged.
const REFUSAL_SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// The door's refusals, logged so that a flood of strangers cannot fill the rank's log: the
/// first [`REFUSALS_IN_FULL`] one line each, the rest counted, one line at most every
/// [`REFUSAL_SUMMARY_EVERY`] and one when the door closes.
struct Refusals {
    state: std::sync::Mutex<RefusalCount>,
}

struct RefusalCount {
    logged: usize,
    unsaid: usize,
    latest: Option<SocketAddr>,
    last_said: Instant,
}

impl Refusals {
    fn new(now: Instant) -> Refusals {
        Refusals {
            state: std::sync::Mutex::new(RefusalCount {
                logged: 0,
                unsaid: 0,
                latest: None,
                last_said: now,
            }),
        }
    }

    /// The line to log for a refusal of `peer` (`why` it was refused) at `now`, if any.
    fn note(&self, peer: SocketAddr, why: &str, now: Instant) -> Option<String> {
        let mut count = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if count.logged < REFUSALS_IN_FULL {
            count.logged += 1;
            count.last_said = now;
            let more = if count.logged == REFUSALS_IN_FULL {
                format!(
                    " (further refusals are counted, one line every {} s)",
                    REFUSAL_SUMMARY_EVERY.as_secs()
                )
            } else {
                String::new()
            };
            return Some(format!(
                "refused a connection to the rendezvous store from {peer}: {why}{more}"
            ));
        }
        count.unsaid += 1;
        count.latest = Some(peer);
        (now.duration_since(count.last_said) >= REFUSAL_SUMMARY_EVERY).then(|| count.say(now))
    }

    /// The count not yet logged, if any (when the door closes).
    fn rest(&self, now: Instant) -> Option<String> {
        let mut count = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (count.unsaid > 0).then(|| count.say(now))
    }
}

impl RefusalCount {
    fn say(&mut self, now: Instant) -> String {
        let line = format!(
            "refused {} more connection(s) to the rendezvous store in {:.0} s, the latest from {}",
            self.unsaid,
            now.duration_since(self.last_said).as_secs_f64(),
            self.latest.map(|p| p.to_string()).unwrap_or_default()
        );
        self.unsaid = 0;
        self.last_said = now;
        line
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        if let Some(line) = self.refusals.rest(Instant::now()) {
            tracing::warn!("{line}");
        }
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocked accept, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(200));
    }
}

/// Binds the job's address (that address only; port 0 lets the OS choose) for [`Door::open`].
///
/// One exception: a host name that resolves to loopback here only (Debian's /etc/hosts maps the
/// machine's own name to 127.0.1.1) would be unreachable from the other hosts, which resolve it
/// to the machine's real address. Then the door listens on every interface, and says so; it
/// still admits only holders of the job's secret.
pub(super) fn bind(addr: &str, port: u16) -> std::io::Result<TcpListener> {
    let resolved: Vec<SocketAddr> = (addr, port).to_socket_addrs()?.collect();
    if loopback_here_only(addr, &resolved) {
        tracing::warn!(
            "{addr} names a loopback address on this host ({}), which other hosts cannot reach; \
             the rendezvous store listens on every interface instead",
            resolved[0].ip()
        );
        return TcpListener::bind(("0.0.0.0", port));
    }
    let mut last = None;
    for sa in resolved {
        match TcpListener::bind(sa) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other(format!("{addr} names no address"))))
}

/// Whether `addr` is a name (not a loopback address or "localhost") that resolves, here, to
/// loopback addresses only.
fn loopback_here_only(addr: &str, resolved: &[SocketAddr]) -> bool {
    let said_loopback = addr == "localhost"
        || addr
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !said_loopback && !resolved.is_empty() && resolved.iter().all(|a| a.ip().is_loopback())
}

impl Door {
    /// Starts admitting proven connections on `public` and piping them to the store on
    /// 127.0.0.1:`store_port`.
    pub(super) fn open(
        public: TcpListener,
        store_port: u16,
        secret: JobSecret,
    ) -> std::io::Result<Door> {
        let address = public.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let refusals = Arc::new(Refusals::new(Instant::now()));
        let counted = Arc::clone(&refusals);
        let waiting = Arc::new(WaitingRoom::default());
        std::thread::Builder::new()
            .name("tandem-store-door".into())
            .spawn(move || {
                for stream in public.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let Ok(peer) = stream.peer_addr() else {
                        continue;
                    };
                    let Some(ticket) = waiting.enter(&stream, peer, &counted) else {
                        continue;
                    };
                    let secret = secret.clone();
                    let counted = Arc::clone(&counted);
                    let waiting = Arc::clone(&waiting);
                    let _ = std::thread::Builder::new()
                        .name("tandem-store-admit".into())
                        .spawn(move || {
                            admit(stream, peer, store_port, &secret, &counted, || {
                                waiting.leave(ticket)
                            })
                        });
                }
            })?;
        Ok(Door {
            stop,
            address,
            refusals,
        })
    }
}

/// The connections waiting to prove themselves, oldest first, each with its ticket: at most
/// [`MAX_WAITING`], the oldest closed to make room.
#[derive(Default)]
struct WaitingRoom {
    state: std::sync::Mutex<(u64, std::collections::VecDeque<(u64, TcpStream)>)>,
}

impl WaitingRoom {
    /// Lets `stream` wait, closing the connection that waited longest where the room is full;
    /// its ticket, or `None` where the stream cannot be kept track of (then it is closed).
    fn enter(&self, stream: &TcpStream, peer: SocketAddr, refusals: &Refusals) -> Option<u64> {
        let Ok(copy) = stream.try_clone() else {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return None;
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (next, queue) = &mut *state;
        if queue.len() >= MAX_WAITING
            && let Some((_, oldest)) = queue.pop_front()
        {
            let _ = oldest.shutdown(std::net::Shutdown::Both);
            let why = format!("{MAX_WAITING} connections were waiting to prove themselves");
            let from = oldest.peer_addr().unwrap_or(peer);
            if let Some(line) = refusals.note(from, &why, Instant::now()) {
                tracing::warn!("{line}");
            }
        }
        *next += 1;
        queue.push_back((*next, copy));
        Some(*next)
    }

    /// The connection of `ticket` is done waiting (proven, refused or closed).
    fn leave(&self, ticket: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1.retain(|(t, _)| *t != ticket);
    }
}

/// One connection at the door: the proof, then the pipe to the store, or a logged refusal;
/// `done_waiting` once the proof is decided.
fn admit(
    mut stream: TcpStream,
    peer: SocketAddr,
    store_port: u16,
    secret: &JobSecret,
    refusals: &Refusals,
    done_waiting: impl FnOnce(),
) {
    let refuse = |why: String| {
        if let Some(line) = refusals.note(peer, &why, Instant::now()) {
            tracing::warn!("{line}");
        }
    };
    let checked = (|| -> std::io::Result<bool> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(PROOF_TIME))?;
        let nonce = JobSecret::random()?.0;
        stream.write_all(GREETING)?;
        stream.write_all(&nonce)?;
        let mut proof = [0u8; 32];
        stream.read_exact(&mut proof)?;
        Ok(secret.proof(&nonce).verify_slice(&proof).is_ok())
    })();
    done_waiting();
    match checked {
        Ok(true) => {
            if stream.write_all(&[ADMITTED]).is_err() {
                return;
            }
            let _ = stream.set_read_timeout(None);
            match TcpStream::connect(("127.0.0.1", store_port)) {
                Ok(store) => pipe(stream, store),
                Err(e) => tracing::warn!("the rendezvous store did not take a connection: {e}"),
            }
        }
        Ok(false) => {
            let _ = stream.write_all(&[REFUSED]);
            refuse("it does not hold this job's secret".into());
        }
        Err(e) => refuse(format!("it did not prove it belongs to this job ({e})")),
    }
}

/// Connects to rank 0's door at `addr:port`, retrying until `deadline` while nobody listens or
/// while the door closes the connection before this rank has proved itself (a door crowded by
/// strangers closes its longest waiting connections), and proves this rank holds `secret`. The
/// stream is then a plain connection to the store.
pub(super) fn connect(
    addr: &str,
    port: u16,
    secret: &JobSecret,
    deadline: Instant,
) -> Result<TcpStream, DistError> {
    let what = format!("connecting to the rendezvous store at {addr}:{port}");
    let start = Instant::now();
    let timeout = |why: String| DistError::Timeout {
        what: format!("{what} ({why})"),
        after: start.elapsed(),
        missing: Vec::new(),
    };
    let mut retried = false;
    let proven = loop {
        let mut stream = dial(addr, port, deadline).map_err(|e| timeout(e.to_string()))?;
        match prove(&mut stream, secret, deadline) {
            Err(e) if cut_off(&e) && Instant::now() < deadline => {
                if !std::mem::replace(&mut retried, true) {
                    tracing::warn!(
                        "{what}: the door closed the connection before this rank proved itself \
                         ({e}); retrying until the rendezvous deadline"
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break other.map(|ok| (ok, stream)),
        }
    };
    match proven {
        Ok((true, stream)) => Ok(stream),
        Ok((false, _)) => Err(DistError::Invalid(format!(
            "{what}: the program on that port is not a tandem rendezvous store (it did not greet like one)"
        ))),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(timeout(
                "the program there never greeted like a tandem store".into(),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(DistError::Invalid(format!(
                "{what}: rank 0 refused this rank: it holds another job secret (every rank of a \
             job needs the same; set the same TANDEM_JOB_SECRET for all of them)"
            )))
        }
        Err(e) => Err(DistError::C10d {
            context: what,
            message: e.to_string(),
        }),
    }
}

/// Whether `e` is the door closing a connection before it was proven: worth another try.
fn cut_off(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// A TCP connection to `addr:port`, retried until `deadline` while nobody listens there.
fn dial(addr: &str, port: u16, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let attempt = (addr, port).to_socket_addrs().and_then(|mut addrs| {
            let sa = addrs
                .next()
                .ok_or_else(|| std::io::Error::other(format!("{addr} names no address")))?;
            TcpStream::connect_timeout(
                &sa,
                remaining.clamp(Duration::from_millis(1), Duration::from_secs(2)),
            )
        });
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if remaining.is_zero() => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50).min(remaining)),
        }
    }
}

/// The client's half of the handshake: `Ok(false)` when the other end is not a tandem store,
/// a `PermissionDenied` error when it refused our proof.
fn prove(stream: &mut TcpStream, secret: &JobSecret, deadline: Instant) -> std::io::Result<bool> {
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(remaining))?;
    let mut greeting = [0u8; 15];
    stream.read_exact(&mut greeting)?;
    if &greeting != GREETING {
        return Ok(false);
    }
    let mut nonce = [0u8; 32];
    stream.read_exact(&mut nonce)?;
    stream.write_all(&secret.proof(&nonce).finalize().into_bytes())?;
    let mut verdict = [0u8; 1];
    // A door that closes without a verdict refused us too.
    if stream.read_exact(&mut verdict).is_err() || verdict[0] != ADMITTED {
        return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
    }
    stream.set_read_timeout(None)?;
    Ok(true)
}

/// A loopback port that c10d's client connects to, carried on through `upstream`. It takes one
/// connection, from this process only (another local program that raced for it is closed), and
/// stops listening.
pub(super) fn local_end(upstream: TcpStream, timeout: Duration) -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("tandem-store-relay".into())
        .spawn(move || {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                match listener.accept() {
                    Ok((local, peer)) if is_own_socket(peer, port) => {
                        let _ = local.set_nonblocking(false);
                        let _ = local.set_nodelay(true);
                        return pipe(local, upstream);
                    }
                    Ok((stranger, peer)) => {
                        tracing::warn!(
                            "closed a connection to this rank's store relay from {peer}: not this process"
                        );
                        drop(stranger);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        })?;
    Ok(port)
}

/// Whether the loopback connection from `peer` to our `port` is a socket this process holds
/// (its inode is among our open files). c10d's client may be an IPv6 socket (to
/// ::ffff:127.0.0.1), so both tables are searched, by the two ports.
fn is_own_socket(peer: SocketAddr, port: u16) -> bool {
    let local = format!(":{:04X}", peer.port());
    let remote = format!(":{port:04X}");
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let table = std::fs::read_to_string(table).ok()?;
            table.lines().skip(1).find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                (f.len() > 9 && f[1].ends_with(&local) && f[2].ends_with(&remote))
                    .then(|| f[9].to_string())
            })
        });
    let Some(inode) = inode else { return false };
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd").is_ok_and(|fds| {
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == wanted))
    })
}

/// Copies bytes both ways until either side closes, then closes the other.
fn pipe(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let forward = std::thread::Builder::new()
        .name("tandem-store-pipe".into())
        .spawn(move || copy_then_close(a2, b2));
    copy_then_close(b, a);
    if let Ok(t) = forward {
        let _ = t.join();
    }
}

fn copy_then_close(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_that_resolves_to_loopback_only_here_listens_everywhere() {
        let at = |ip: [u8; 4]| vec![SocketAddr::from((ip, 29500))];
        assert!(loopback_here_only("node0", &at([127, 0, 1, 1])));
        assert!(!loopback_here_only("node0", &at([10, 0, 0, 1])));
        assert!(!loopback_here_only("127.0.0.1", &at([127, 0, 0, 1])));
        assert!(!loopback_here_only("localhost", &at([127, 0, 0, 1])));
        assert!(!loopback_here_only("10.0.0.1", &at([10, 0, 0, 1])));
    }

    /// A flood of 10,000 strangers over 25 s logs 5 lines, a line every 10 s, and the rest
    /// when the door closes: 406 lines for a flood of 406 before.
    #[test]
    fn a_flood_of_refusals_is_counted_not_logged_line_by_line() {
        let start = Instant::now();
        let refusals = Refusals::new(start);
        let peer = SocketAddr::from(([10, 0, 0, 9], 40000));
        let mut lines = Vec::new();
        for i in 0..10_000u64 {
            let now = start + Duration::from_micros(i * 2_500);
            lines.extend(refusals.note(peer, "it does not hold this job's secret", now));
        }
        lines.extend(refusals.rest(start + Duration::from_secs(25)));
        assert_eq!(lines.len(), 5 + 2 + 1, "{lines:#?}");
        assert!(lines[4].ends_with("(further refusals are counted, one line every 10 s)"));
        assert!(
            lines[5].starts_with("refused 4000 more connection(s) to the rendezvous store in 10 s"),
            "{}",
            lines[5]
        );
        let counted: usize = lines[5..]
            .iter()
            .map(|l| l.split(' ').nth(1).unwrap().parse::<usize>().unwrap())
            .sum();
        assert_eq!(counted + 5, 10_000);
        assert!(
            lines[7].ends_with("the latest from 10.0.0.9:40000"),
            "{}",
            lines[7]
        );
    }

    #[test]
    fn secrets_round_trip_through_hex_and_hide_in_debug() {
        let s = JobSecret::derive(&["a"]);
        assert_eq!(JobSecret::from_hex(&s.to_hex()), Some(s.clone()));
        assert_eq!(JobSecret::from_hex("zz"), None);
        assert_eq!(format!("{s:?}"), "JobSecret(..)");
        assert_ne!(
            JobSecret::derive(&["ab", "c"]),
            JobSecret::derive(&["a", "bc"])
        );
    }
}

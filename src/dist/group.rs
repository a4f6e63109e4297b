//! The safe face of c10d: [`Store`] (the TCPStore that rank 0 hosts) and [`ProcessGroup`]
//! (Gloo for CPU tensors, NCCL for CUDA tensors). Everything else in tandem talks to other ranks
//! through these two types only.
//!
//! Two hazards of c10d are handled here rather than left to callers:
//! - c10d's own timeouts are not always honoured (a client connecting to a foreign program on the
//!   store port waits forever), so store and group creation run under a deadline of our own
//!   ([`with_deadline`]);
//! - Gloo aborts the whole process from its I/O thread when ranks pass tensors of different sizes,
//!   so every collective first checks that all ranks agree on the tensors' layout (or uses a
//!   [`Layout`] verified once, for hot paths with a fixed layout such as gradient buckets).

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

use super::DistError;
use super::ffi;
use super::liveness::{Heartbeat, Peers};
use super::relay::JobSecret;

type Result<T> = std::result::Result<T, DistError>;

/// Which c10d backend a group uses; chosen from the rank's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Gloo,
    Nccl,
}

impl Backend {
    pub fn for_device(device: Device) -> Backend {
        match device {
            Device::Cuda(_) => Backend::Nccl,
            _ => Backend::Gloo,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        }
    }
}

/// The collective backends this binary was built with.
pub fn compiled_backends() -> Vec<&'static str> {
    let mut out = vec!["gloo"];
    // SAFETY: takes no arguments and only returns a constant of the shim's build.
    if unsafe { ffi::tdc_nccl_compiled() } != 0 {
        out.push("nccl");
    }
    out
}

/// The libtorch version the c10d shim was compiled against.
pub fn libtorch_version() -> String {
    // SAFETY: the shim returns a pointer to a NUL-terminated string literal, valid for the whole
    // program and never written.
    unsafe { CStr::from_ptr(ffi::tdc_torch_version()) }
        .to_string_lossy()
        .into_owned()
}

/// This process's current CUDA device (needs the `cuda` feature).
fn current_cuda_device() -> Result<usize> {
    let mut index: c_int = 0;
    let mut err = std::ptr::null_mut();
    // SAFETY: `index` and `err` are valid out-pointers for the call.
    let rc = unsafe { ffi::tdc_current_cuda_device(&mut index, &mut err) };
    check(rc, err, "reading the current CUDA device")?;
    Ok(index as usize)
}

/// Copies of `tensors` on `staging` for a collective, where a tensor is elsewhere (a host
/// tensor for NCCL); `None` when all are there already (gradients on the GPU: no copy).
fn staged(staging: Option<Device>, tensors: &[Tensor]) -> Option<Vec<Tensor>> {
    let device = staging?;
    if tensors.iter().all(|t| t.device() == device) {
        return None;
    }
    Some(tensors.iter().map(|t| t.to_device(device)).collect())
}

/// Writes the collective's results on the staging device back into the caller's tensors.
fn unstage(tensors: &mut [Tensor], staged: &[Tensor]) {
    for (t, s) in tensors.iter_mut().zip(staged) {
        t.copy_(s);
    }
}

/// Turns a device string (`cpu`, `cuda:N`) into a tch device and, for CUDA, makes it this
/// process's current device; an error says why a CUDA device cannot be used here.
pub fn bind_device(device: &str) -> Result<Device> {
    let refuse = |why: String| Err(DistError::Invalid(why));
    match tandem_config::Device::parse(device) {
        Some(tandem_config::Device::Cpu) => Ok(Device::Cpu),
        Some(tandem_config::Device::Cuda(index)) => {
            if !compiled_backends().contains(&"nccl") {
                return refuse(format!(
                    "device {device} needs a tandem built with `--features cuda`"
                ));
            }
            if !tch::Cuda::is_available() {
                return refuse(format!(
                    "device {device} was requested but CUDA is not usable on this machine"
                ));
            }
            let count = tch::Cuda::device_count();
            if index as i64 >= count {
                return refuse(format!(
                    "device {device} does not exist: this machine has {count} CUDA device(s)"
                ));
            }
            set_cuda_device(index as usize)?;
            Ok(Device::Cuda(index as usize))
        }
        None => refuse(format!(
            "unknown device {device:?} (expected cpu or cuda:N)"
        )),
    }
}

/// A TCP port free on loopback now, for a rendezvous that only this machine joins.
pub fn free_loopback_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Makes CUDA device `index` this process's current device (needs the `cuda` feature).
pub fn set_cuda_device(index: usize) -> Result<()> {
    let mut err = std::ptr::null_mut();
    // SAFETY: `err` is a valid out-pointer for the message, which `check` takes and frees.
    let rc = unsafe { ffi::tdc_set_cuda_device(index as c_int, &mut err) };
    check(rc, err, &format!("binding cuda:{index}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// Sum divided by the world size (Gloo has no native average).
    Avg,
    Min,
    Max,
}

impl ReduceOp {
    fn code(self) -> c_int {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => 0,
            ReduceOp::Min => 1,
            ReduceOp::Max => 2,
        }
    }
}

/// Takes the message a shim call left in `err` (if any) and frees it.
fn take_error(err: *mut c_char, context: &str) -> DistError {
    let message = if err.is_null() {
        "no message from c10d".to_string()
    } else {
        // SAFETY: a non-null `err` after a failed shim call is the shim's malloc'ed,
        // NUL-terminated message, owned by us from then on and not yet freed.
        let text = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: `err` came from the shim's malloc and is freed exactly once, here, after the
        // last read of it (the text was copied out above).
        unsafe { ffi::tdc_free(err.cast()) };
        text
    };
    DistError::C10d {
        context: context.to_string(),
        message,
    }
}

fn check(rc: c_int, err: *mut c_char, context: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(take_error(err, context))
    }
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| DistError::Invalid(format!("{what} contains a NUL byte: {s:?}")))
}

/// Raw pointers that are moved into a deadline thread. c10d's store and groups are thread-safe
/// for the calls we make on them.
struct SendPtr<T>(*mut T);
// SAFETY: a SendPtr only carries a TdcStore or TdcGroup pointer between threads. The C++ objects
// behind them are not tied to the thread that made them (TCPStore locks its socket, a process
// group's creation and use need no particular thread), and whoever receives the pointer is
// the only one to use it in that call: the store's owner keeps it alive meanwhile (see
// `create_group`), and a freshly created object is handed back to the thread that will own it.
unsafe impl<T> Send for SendPtr<T> {}

/// Runs `f` on its own thread and gives up after `timeout`. On timeout the thread is left
/// behind (a blocked C++ call cannot be cancelled); the caller is expected to fail the rank,
/// which ends the process and with it the thread.
pub fn with_deadline<T: Send + 'static>(
    what: &str,
    timeout: Duration,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("tandem-deadline: {what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| DistError::Invalid(format!("could not start a thread for {what}: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(DistError::Timeout {
            what: what.to_string(),
            after: timeout,
            missing: Vec::new(),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(DistError::Invalid(format!(
            "the thread doing {what} ended without an answer"
        ))),
    }
}

/// A c10d TCPStore: a small key-value service hosted by rank 0, used for the rendezvous, by the
/// process groups to exchange addresses, and for small control values. Rank 0's store listens on
/// loopback only; ranks reach it through the authenticating door of [`super::relay`].
pub struct Store {
    raw: *mut ffi::TdcStore,
    host: String,
    port: u16,
    secret: JobSecret,
    /// Rank 0: the store's own loopback port (and the door in front of it, closed on drop).
    hosted: Option<(u16, super::relay::Door)>,
}

// SAFETY: `raw` is owned by this Store alone (freed once, in Drop) and the C++ TCPStore behind it
// may be used and destroyed from any thread.
unsafe impl Send for Store {}
// SAFETY: every method takes `&self` and calls TCPStore's set/get/check/add, which serialise on
// the client's own mutex, so concurrent calls from several threads are sound.
unsafe impl Sync for Store {}

impl Store {
    /// Hosts the store (rank 0) behind a door on `addr:port`, that address only; `port` 0 lets
    /// the OS pick one ([`Store::port`] tells which). Only connections that prove they hold
    /// `secret` reach the store.
    pub fn host(addr: &str, port: u16, secret: &JobSecret, timeout: Duration) -> Result<Store> {
        let what = format!("hosting the rendezvous store on {addr}:{port}");
        let fail = |e: std::io::Error| DistError::C10d {
            context: what.clone(),
            message: e.to_string(),
        };
        let public = super::relay::bind(addr, port).map_err(fail)?;
        let bound = public.local_addr().map_err(fail)?.port();
        let inner = std::net::TcpListener::bind("127.0.0.1:0").map_err(fail)?;
        let inner_port = inner.local_addr().map_err(fail)?.port();
        // c10d takes the listening socket over (and closes it).
        let fd = std::os::fd::IntoRawFd::into_raw_fd(inner);
        let raw = Self::create_raw("127.0.0.1", inner_port, Some(fd), &what, timeout)?;
        let door = super::relay::Door::open(public, inner_port, secret.clone()).map_err(fail)?;
        Ok(Store {
            raw,
            host: addr.to_string(),
            port: bound,
            secret: secret.clone(),
            hosted: Some((inner_port, door)),
        })
    }

    /// Connects to the store that rank 0 hosts, retrying until `timeout`, and proves this rank
    /// holds `secret`.
    pub fn connect(addr: &str, port: u16, secret: &JobSecret, timeout: Duration) -> Result<Store> {
        let deadline = Instant::now() + timeout;
        let upstream = super::relay::connect(addr, port, secret, deadline)?;
        let what = format!("connecting to the rendezvous store at {addr}:{port}");
        let local = super::relay::local_end(upstream, timeout).map_err(|e| DistError::C10d {
            context: what.clone(),
            message: e.to_string(),
        })?;
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let raw = Self::create_raw("127.0.0.1", local, None, &what, remaining)?;
        Ok(Store {
            raw,
            host: addr.to_string(),
            port,
            secret: secret.clone(),
            hosted: None,
        })
    }

    /// A second, independent client of the same store (its own connection).
    pub(super) fn another_client(&self, timeout: Duration) -> Result<Store> {
        match &self.hosted {
            Some((inner_port, _)) => {
                let what = format!("connecting to the rendezvous store at {}", self.address());
                let raw = Self::create_raw("127.0.0.1", *inner_port, None, &what, timeout)?;
                Ok(Store {
                    raw,
                    host: self.host.clone(),
                    port: self.port,
                    secret: self.secret.clone(),
                    hosted: None,
                })
            }
            None => Store::connect(&self.host, self.port, &self.secret, timeout),
        }
    }

    fn create_raw(
        addr: &str,
        port: u16,
        listen_fd: Option<c_int>,
        what: &str,
        timeout: Duration,
    ) -> Result<*mut ffi::TdcStore> {
        let host = cstring(addr, "the store address")?;
        let server = listen_fd.is_some();
        let fd = listen_fd.unwrap_or(-1);
        let timeout_ms = timeout.as_millis() as i64;
        let context = what.to_string();
        // A little beyond c10d's own timeout, so its clearer message wins when it does fire.
        let raw = with_deadline(what, timeout + Duration::from_secs(1), move || {
            let mut out = std::ptr::null_mut();
            let mut bound = 0u16;
            let mut err = std::ptr::null_mut();
            // SAFETY: `host` is a NUL-terminated string owned by this closure for the whole
            // call; `out`, `bound` and `err` are valid out-pointers on this stack frame; `fd`
            // is -1 or a listening socket nobody else owns (c10d takes it over). The store
            // pointer written to `out` on success is owned by the Store built from it.
            let rc = unsafe {
                ffi::tdc_store_create(
                    host.as_ptr(),
                    port,
                    server as c_int,
                    timeout_ms,
                    fd,
                    &mut out,
                    &mut bound,
                    &mut err,
                )
            };
            check(rc, err, &context)?;
            Ok(SendPtr(out))
        })?;
        Ok(raw.0)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Sets `key`; when this returns, every rank's next read sees the value.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let k = cstring(key, "a store key")?;
        let mut err = std::ptr::null_mut();
        // SAFETY: `self.raw` is the live store this Store owns; `k` is NUL-terminated and
        // `value` a slice of `value.len()` bytes, both borrowed for the call, which copies them.
        let rc = unsafe {
            ffi::tdc_store_set(self.raw, k.as_ptr(), value.as_ptr(), value.len(), &mut err)
        };
        check(rc, err, &format!("setting store key {key:?}"))?;
        // TCPStore's SET gets no reply, so another rank's read could overtake it. A request that
        // does get a reply, on the same connection, returns only after the server applied it.
        let mut present: c_int = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call, valid out-pointers.
        let rc = unsafe { ffi::tdc_store_check(self.raw, k.as_ptr(), &mut present, &mut err) };
        check(rc, err, &format!("confirming store key {key:?}"))
    }
    /// The value of `key` if some rank has set it, without waiting.
    pub fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let k = cstring(key, "a store key")?;
        let mut data = std::ptr::null_mut();
        let mut len = 0usize;
        let mut found: c_int = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call; `data`, `len`,
        // `found` and `err` are valid out-pointers on this frame.
        let rc = unsafe {
            ffi::tdc_store_try_get(
                self.raw,
                k.as_ptr(),
                &mut data,
                &mut len,
                &mut found,
                &mut err,
            )
        };
        check(rc, err, &format!("reading store key {key:?}"))?;
        if found == 0 {
            return Ok(None);
        }
        // SAFETY: with `found` set, the shim malloc'ed `data` with at least `len` initialised
        // bytes (never null: it allocates one byte for an empty value); it is copied out here.
        let value = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        // SAFETY: `data` is the shim's malloc'ed buffer, freed once, after the copy above.
        unsafe { ffi::tdc_free(data.cast()) };
        Ok(Some(value))
    }

    /// Waits until every key is set, polling, and fails at `timeout` naming the missing ones.
    pub fn wait_all(&self, keys: &[String], timeout: Duration, what: &str) -> Result<Vec<Vec<u8>>> {
        let start = Instant::now();
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut pause = Duration::from_millis(2);
        loop {
            for (key, slot) in keys.iter().zip(values.iter_mut()) {
                if slot.is_none() {
                    *slot = self.try_get(key)?;
                }
            }
            if values.iter().all(Option::is_some) {
                return Ok(values.into_iter().map(Option::unwrap).collect());
            }
            if start.elapsed() >= timeout {
                let missing = keys
                    .iter()
                    .zip(&values)
                    .filter(|(_, v)| v.is_none())
                    .map(|(k, _)| k.clone())
                    .collect();
                return Err(DistError::Timeout {
                    what: what.to_string(),
                    after: timeout,
                    missing,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Atomically adds `delta` to the integer at `key` and returns the new value.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let k = cstring(key, "a store key")?;
        let mut out = 0i64;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call, valid out-pointers.
        let rc = unsafe { ffi::tdc_store_add(self.raw, k.as_ptr(), delta, &mut out, &mut err) };
        check(rc, err, &format!("adding to store key {key:?}"))?;
        Ok(out)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful tdc_store_create and is freed exactly once; no
        // other owner exists (groups keep the store through an Arc of this Store, so it is not
        // dropped while one still uses it).
        unsafe { ffi::tdc_store_free(self.raw) };
    }
}

/// A tensor layout that every rank has confirmed it shares: per tensor its kind, device type
/// and shape. Collectives on a verified layout skip the cross-rank check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    entries: Vec<(Kind, bool, Vec<i64>)>,
}

impl Layout {
    /// A layout taken locally. Only this crate may treat one as verified without asking the
    /// other ranks (for fixed-size control tensors every rank builds alike).
    pub(crate) fn of(tensors: &[&Tensor]) -> Layout {
        Layout {
            entries: tensors
                .iter()
                .map(|t| (t.kind(), t.device().is_cuda(), t.size()))
                .collect(),
        }
    }

    /// A 64-bit digest (FNV-1a), the same on every machine for the same layout.
    fn digest(&self) -> i64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |x: u64| {
            for b in x.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(self.entries.len() as u64);
        for (kind, cuda, shape) in &self.entries {
            eat(kind_code(*kind));
            eat(*cuda as u64);
            eat(shape.len() as u64);
            for d in shape {
                eat(*d as u64);
            }
        }
        h as i64
    }

    fn describe(&self) -> String {
        let total: i64 = self
            .entries
            .iter()
            .map(|(_, _, s)| s.iter().product::<i64>())
            .sum();
        format!("{} tensor(s), {} element(s)", self.entries.len(), total)
    }
}

fn kind_code(kind: Kind) -> u64 {
    match kind {
        Kind::Uint8 => 1,
        Kind::Int8 => 2,
        Kind::Int16 => 3,
        Kind::Int => 4,
        Kind::Int64 => 5,
        Kind::Half => 6,
        Kind::Float => 7,
        Kind::Double => 8,
        Kind::Bool => 9,
        Kind::BFloat16 => 10,
        _ => 99,
    }
}

/// Facts a group is created from. The rank's identity (config hash, tandem version) is
/// compared across ranks at rendezvous.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    pub rank: usize,
    pub world_size: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// Deadline for the rendezvous (all ranks present and the group formed).
    pub rendezvous_timeout: Duration,
    /// Deadline for each collective.
    pub collective_timeout: Duration,
    pub backend: Backend,
    /// What each rank must agree on; compared field by field at rendezvous. Fields named in
    /// the rendezvous' INFORMATIVE list (`node`, `ranks-per-node`, ...) only name ranks.
    pub identity: Vec<(String, String)>,
    /// Network interfaces Gloo binds to (`GLOO_SOCKET_IFNAME`), one device each; empty: the
    /// address [`interface_host`] picks.
    pub gloo_interfaces: Vec<String>,
    /// What every rank of this job holds and nobody else does; the store admits only holders.
    pub secret: JobSecret,
}

/// A process group over all ranks of a run. Destroyed (its connections closed) on drop.
pub struct ProcessGroup {
    raw: *mut ffi::TdcGroup,
    store: Arc<Store>,
    rank: usize,
    world_size: usize,
    backend: Backend,
    /// Where host tensors go for a collective: NCCL runs CUDA tensors only, and the control
    /// values (votes, fingerprints, layouts, episode returns) live on the host. `None` for Gloo,
    /// which takes both.
    staging: Option<Device>,
    collective_timeout: Duration,
    communication_slice: std::result::Result<Option<Duration>, String>,
    peers: Peers,
    _heartbeat: Heartbeat,
}

// SAFETY: `raw` is owned by this ProcessGroup alone and a c10d backend may be used from, and
// destroyed on, any thread. It is not Sync: collectives must be issued in the same order on
// every rank, which one thread at a time guarantees.
unsafe impl Send for ProcessGroup {}

impl ProcessGroup {
    /// Rendezvous and group creation: rank 0 hosts the store, every rank announces its identity,
    /// waits for all the others (naming the missing ones at the deadline), checks that all
    /// identities agree, and forms the c10d group.
    pub fn connect(opts: &GroupOptions) -> Result<ProcessGroup> {
        if opts.world_size == 0 || opts.rank >= opts.world_size {
            return Err(DistError::Invalid(format!(
                "rank {} is outside a world of {} rank(s)",
                opts.rank, opts.world_size
            )));
        }
        let deadline = Instant::now() + opts.rendezvous_timeout;
        let (addr, port, secret) = (&opts.master_addr, opts.master_port, &opts.secret);
        let store = if opts.rank == 0 {
            Store::host(addr, port, secret, opts.rendezvous_timeout)?
        } else {
            Store::connect(addr, port, secret, opts.rendezvous_timeout)?
        };
        let store = Arc::new(store);
        let interface = interface_host(addr, port);
        let identities = super::rendezvous::announce_and_check(&store, opts, &interface, deadline)?;
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let (raw, communication_slice) = create_group(&store, opts, &interface, remaining)?;
        let staging = match opts.backend {
            Backend::Nccl => Some(Device::Cuda(current_cuda_device()?)),
            Backend::Gloo => None,
        };
        let heartbeat = super::liveness::start(store.another_client(remaining)?, opts.rank)?;
        let peers = Peers {
            rank: opts.rank,
            store: Arc::clone(&store),
            names: identities
                .iter()
                .enumerate()
                .map(|(r, id)| super::liveness::name_of(r, id))
                .collect(),
        };
        Ok(ProcessGroup {
            peers,
            _heartbeat: heartbeat,
            raw,
            store,
            rank: opts.rank,
            world_size: opts.world_size,
            backend: opts.backend,
            staging,
            collective_timeout: opts.collective_timeout,
            communication_slice,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world_size(&self) -> usize {
        self.world_size
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn collective_timeout(&self) -> Duration {
        self.collective_timeout
    }

    /// What this rank needs to name the ranks that stopped answering, after a failure (it
    /// outlives the group, for the failure's report).
    pub fn peers(&self) -> Peers {
        self.peers.clone()
    }

    /// Confirms with every rank that they hold tensors of this same layout; the result lets
    /// later collectives on these tensors skip the check.
    pub fn verify_layout(&self, tensors: &[&Tensor]) -> Result<Layout> {
        let layout = Layout::of(tensors);
        let mine = Tensor::from_slice(&[layout.digest(), self.rank as i64]);
        let all = self.all_gather_unchecked(&mine)?;
        let digests: Vec<(usize, i64)> = all
            .iter()
            .map(|t| (t.int64_value(&[1]) as usize, t.int64_value(&[0])))
            .collect();
        let disagreeing: Vec<usize> = digests
            .iter()
            .filter(|(_, d)| *d != digests[0].1)
            .map(|(r, _)| *r)
            .collect();
        if !disagreeing.is_empty() {
            return Err(DistError::Mismatch(format!(
                "rank(s) {disagreeing:?} hold tensors of another layout than rank 0 \
                 (this rank {}: {}); a collective on them would abort inside Gloo",
                self.rank,
                layout.describe()
            )));
        }
        Ok(layout)
    }

    fn ensure_layout(&self, layout: &Layout, tensors: &[&Tensor]) -> Result<()> {
        if Layout::of(tensors) != *layout {
            return Err(DistError::Invalid(format!(
                "tensors passed to a collective do not match their verified layout ({})",
                layout.describe()
            )));
        }
        Ok(())
    }

    /// All-reduces every tensor in place, after checking that all ranks pass the same layout.
    pub fn all_reduce(&self, tensors: &mut [Tensor], op: ReduceOp) -> Result<()> {
        let layout = self.verify_layout(&tensors.iter().collect::<Vec<_>>())?;
        self.all_reduce_verified(&layout, tensors, op)
    }

    /// All-reduces tensors whose layout was verified before (the hot path for gradients).
    pub fn all_reduce_verified(
        &self,
        layout: &Layout,
        tensors: &mut [Tensor],
        op: ReduceOp,
    ) -> Result<()> {
        self.ensure_layout(layout, &tensors.iter().collect::<Vec<_>>())?;
        if op == ReduceOp::Avg && !tensors.iter().all(|t| t.is_floating_point()) {
            return Err(DistError::Invalid(
                "an average all-reduce needs floating-point tensors".into(),
            ));
        }
        self.on_staging_device(tensors, |t| self.all_reduce_raw(t, op))?;
        if op == ReduceOp::Avg {
            let n = self.world_size as f64;
            for t in tensors.iter_mut() {
                let _ = t.g_div_scalar_(n);
            }
        }
        Ok(())
    }

    /// Runs the in-place collective `run` on `tensors`, or on copies of them on the staging
    /// device ([`staged`]) whose results are then written back into `tensors`.
    fn on_staging_device(
        &self,
        tensors: &mut [Tensor],
        run: impl FnOnce(&mut [Tensor]) -> Result<()>,
    ) -> Result<()> {
        match staged(self.staging, tensors) {
            Some(mut on_device) => {
                run(&mut on_device)?;
                unstage(tensors, &on_device);
                Ok(())
            }
            None => run(tensors),
        }
    }

    fn all_reduce_raw(&self, tensors: &mut [Tensor], op: ReduceOp) -> Result<()> {
        let mut ptrs: Vec<*mut torch_sys::C_tensor> =
            tensors.iter_mut().map(|t| t.as_mut_ptr()).collect();
        let mut err = std::ptr::null_mut();
        // SAFETY: `self.raw` is the live group this ProcessGroup owns; `ptrs` holds
        // `ptrs.len()` tensor pointers of `tensors`, which are borrowed mutably for the call
        // (the collective waits before returning, so nothing keeps them afterwards).
        let rc = unsafe {
            ffi::tdc_allreduce(self.raw, ptrs.as_mut_ptr(), ptrs.len(), op.code(), &mut err)
        };
        check(rc, err, "all-reduce")
    }

    /// The time slice the threads of this group's backend run with: `Ok(Some(_))` as the kernel
    /// reports it (0.1 ms on Linux 6.12 and later, see [`super::sched`]), `Ok(None)` on kernels
    /// that report none, `Err` when the request was refused.
    pub fn communication_slice(&self) -> &std::result::Result<Option<Duration>, String> {
        &self.communication_slice
    }

    /// Copies `root`'s tensor into every rank's `tensor`.
    pub fn broadcast(&self, tensor: &mut Tensor, root: usize) -> Result<()> {
        let layout = self.verify_layout(&[&*tensor])?;
        self.broadcast_verified(&layout, tensor, root)
    }

    pub fn broadcast_verified(
        &self,
        layout: &Layout,
        tensor: &mut Tensor,
        root: usize,
    ) -> Result<()> {
        self.ensure_layout(layout, &[&*tensor])?;
        self.check_root(root)?;
        self.on_staging_device(std::slice::from_mut(tensor), |t| {
            self.broadcast_raw(&mut t[0], root)
        })
    }

    fn broadcast_raw(&self, tensor: &mut Tensor, root: usize) -> Result<()> {
        let mut err = std::ptr::null_mut();
        let rc =
            // SAFETY: live owned group; `tensor` is borrowed mutably for the whole (waited-for)
            // collective; `root` was checked to be inside the world; `err` is a valid out-pointer.
            unsafe { ffi::tdc_broadcast(self.raw, tensor.as_mut_ptr(), root as c_int, &mut err) };
        check(rc, err, &format!("broadcast from rank {root}"))
    }

    /// Reduces into `root`'s tensor; other ranks' tensors are left unspecified.
    pub fn reduce(&self, tensor: &mut Tensor, root: usize, op: ReduceOp) -> Result<()> {
        let layout = self.verify_layout(&[&*tensor])?;
        self.reduce_verified(&layout, tensor, root, op)
    }

    pub fn reduce_verified(
        &self,
        layout: &Layout,
        tensor: &mut Tensor,
        root: usize,
        op: ReduceOp,
    ) -> Result<()> {
        self.ensure_layout(layout, &[&*tensor])?;
        self.check_root(root)?;
        self.on_staging_device(std::slice::from_mut(tensor), |t| {
            self.reduce_raw(&mut t[0], root, op)
        })?;
        if op == ReduceOp::Avg && self.rank == root {
            let _ = tensor.g_div_scalar_(self.world_size as f64);
        }
        Ok(())
    }

    fn reduce_raw(&self, tensor: &mut Tensor, root: usize, op: ReduceOp) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: as for broadcast: live owned group, `tensor` borrowed mutably for the
        // waited-for collective, `root` checked, valid out-pointer.
        let rc = unsafe {
            ffi::tdc_reduce(
                self.raw,
                tensor.as_mut_ptr(),
                root as c_int,
                op.code(),
                &mut err,
            )
        };
        check(rc, err, &format!("reduce to rank {root}"))
    }

    /// Every rank's `tensor`, in rank order.
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Vec<Tensor>> {
        self.verify_layout(&[tensor])?;
        self.all_gather_unchecked(tensor)
    }

    /// [`ProcessGroup::all_gather`] without the layout check, for tensors whose shape every rank
    /// derives from values all ranks already agreed on (a fixed-size count, or a length
    /// gathered just before).
    pub(crate) fn all_gather_agreed(&self, tensor: &Tensor) -> Result<Vec<Tensor>> {
        self.all_gather_unchecked(tensor)
    }

    /// The gathered tensors are on `tensor`'s device, whatever the backend ran them on.
    fn all_gather_unchecked(&self, tensor: &Tensor) -> Result<Vec<Tensor>> {
        let mut input = match staged(self.staging, std::slice::from_ref(tensor)) {
            Some(mut on_device) => on_device.remove(0),
            None => tensor.shallow_clone(),
        };
        let mut outputs: Vec<Tensor> = (0..self.world_size).map(|_| input.empty_like()).collect();
        let mut ptrs: Vec<*mut torch_sys::C_tensor> =
            outputs.iter_mut().map(|t| t.as_mut_ptr()).collect();
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned group; `ptrs` holds exactly `world_size` pointers to `outputs`,
        // each shaped like `input` (empty_like), all owned by this frame for the waited-for call.
        let rc = unsafe {
            ffi::tdc_allgather(
                self.raw,
                ptrs.as_mut_ptr(),
                ptrs.len(),
                input.as_mut_ptr(),
                &mut err,
            )
        };
        check(rc, err, "all-gather")?;
        let home = tensor.device();
        Ok(outputs.into_iter().map(|t| t.to_device(home)).collect())
    }

    /// Leaves the group so that no rank's exit can break another rank's last collective.
    ///
    /// Closing Gloo's sockets while a peer still reads its final message resets the connection
    /// (the peer sees "connection closed" in a barrier that had in fact completed). So ranks
    /// first count themselves done through the store (request/response, no such race), wait
    /// until all are, and rank 0, which hosts the store, leaves last.
    pub fn shutdown(self, timeout: Duration) -> Result<()> {
        let world = self.world_size as i64;
        if world == 1 {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        let wait_for = |key: &str, target: i64, what: &str| -> Result<()> {
            let mut pause = Duration::from_millis(1);
            loop {
                if self.store.add(key, 0)? >= target {
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    return Err(DistError::Timeout {
                        what: what.to_string(),
                        after: timeout,
                        missing: Vec::new(),
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
        };
        self.store.add("tandem/shutdown/finished", 1)?;
        wait_for(
            "tandem/shutdown/finished",
            world,
            "every rank to finish its last collective",
        )?;
        if self.rank == 0 {
            wait_for(
                "tandem/shutdown/left",
                world - 1,
                "the other ranks to leave before the store closes",
            )?;
        } else {
            self.store.add("tandem/shutdown/left", 1)?;
        }
        Ok(())
    }

    pub fn barrier(&self) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned group, valid out-pointer.
        let rc = unsafe { ffi::tdc_barrier(self.raw, &mut err) };
        check(rc, err, "barrier")
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.world_size {
            return Err(DistError::Invalid(format!(
                "root rank {root} is outside a world of {} rank(s)",
                self.world_size
            )));
        }
        Ok(())
    }
}

/// The group, and the time slice its threads got (see [`ProcessGroup::communication_slice`]).
type CreatedGroup = (
    *mut ffi::TdcGroup,
    std::result::Result<Option<Duration>, String>,
);

fn create_group(
    store: &Arc<Store>,
    opts: &GroupOptions,
    interface: &str,
    timeout: Duration,
) -> Result<CreatedGroup> {
    let store_ptr = SendPtr(store.raw);
    // Keep the store alive inside the thread even if we give up waiting on it.
    let keep = Arc::clone(store);
    let rank = opts.rank as c_int;
    let size = opts.world_size as c_int;
    let collective_ms = opts.collective_timeout.as_millis() as i64;
    let backend = opts.backend;
    let host = cstring(interface, "the interface address")?;
    let interfaces = cstring(&opts.gloo_interfaces.join(","), "the interface names")?;
    let what = format!("forming the {} process group", backend.name());
    let context = what.clone();
    let group = with_deadline(&what, timeout, move || {
        let _keep = keep;
        // The threads Gloo starts here inherit this thread's slice (see `sched`). Failing to get
        // it (a seccomp filter, say) leaves the kernel's default: slower under load, not wrong.
        let slice = super::sched::shorten_this_threads_slice()
            .map(|()| super::sched::time_slice(0))
            .map_err(|e| e.to_string());
        let store_ptr = store_ptr;
        let mut out = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        // SAFETY: `store_ptr` is the live store that `_keep` holds alive for this whole closure;
        // `host` and `interfaces` are NUL-terminated and owned by the closure; `out` and `err` are valid
        // out-pointers. On success the new group is owned by the ProcessGroup built from it.
        let rc = unsafe {
            match backend {
                Backend::Gloo => ffi::tdc_group_create_gloo(
                    store_ptr.0,
                    rank,
                    size,
                    collective_ms,
                    host.as_ptr(),
                    interfaces.as_ptr(),
                    0,
                    &mut out,
                    &mut err,
                ),
                Backend::Nccl => ffi::tdc_group_create_nccl(
                    store_ptr.0,
                    rank,
                    size,
                    collective_ms,
                    &mut out,
                    &mut err,
                ),
            }
        };
        check(rc, err, &context)?;
        Ok((SendPtr(out), slice))
    })?;
    Ok((group.0.0, group.1))
}

/// The address Gloo binds its pairs to: loopback when the master is local, `TANDEM_GLOO_HOST`
/// when set, otherwise the address this machine reaches the master from (the kernel's route
/// choice, read from a UDP socket "connected" to it, which sends nothing): the interface the job
/// already uses, whatever this host's name resolves to.
fn interface_host(master_addr: &str, port: u16) -> String {
    if master_addr == "localhost" || master_addr.starts_with("127.") || master_addr == "::1" {
        return "127.0.0.1".to_string();
    }
    if let Ok(host) = std::env::var("TANDEM_GLOO_HOST") {
        return host;
    }
    let routed = (|| {
        let target = std::net::ToSocketAddrs::to_socket_addrs(&(master_addr, port))
            .ok()?
            .next()?;
        let any: std::net::SocketAddr = if target.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = std::net::UdpSocket::bind(any).ok()?;
        socket.connect(target).ok()?;
        Some(socket.local_addr().ok()?.ip().to_string())
    })();
    routed
        .or_else(super::hostname)
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// Refuses interface names (from `GLOO_SOCKET_IFNAME`) this machine does not have, naming the
/// ones it has: Gloo's own error for them is a C++ assertion.
pub fn check_interfaces(names: &[String]) -> Result<()> {
    for name in names {
        let c_name = cstring(name, "the interface name")?;
        // SAFETY: if_nametoindex reads the NUL-terminated string, which outlives the call.
        if unsafe { libc::if_nametoindex(c_name.as_ptr()) } == 0 {
            let mut have: Vec<String> = std::fs::read_dir("/sys/class/net")
                .map(|dir| {
                    dir.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            have.sort();
            return Err(DistError::Invalid(format!(
                "GLOO_SOCKET_IFNAME names the network interface {name:?}, which this machine \
                 does not have (it has: {})",
                have.join(", ")
            )));
        }
    }
    Ok(())
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful group creation and is freed exactly once. A
        // reducer built on it keeps its own reference to the backend, so it may outlive this.
        unsafe { ffi::tdc_group_free(self.raw) };
    }
}

/// DDP's gradient all-reduce overlapped with the backward pass (the shim's reducer): gradient
/// buckets are all-reduced, in bucket order, as soon as backward has produced all of a bucket's
/// gradients, while backward goes on with the earlier layers.
pub struct GradientReducer {
    raw: *mut ffi::TdcReducer,
    world_size: usize,
}

// SAFETY: `raw` is owned by this GradientReducer alone; the C++ state behind it is guarded by its
// own mutex, which is what autograd's threads take when they run its hooks, so arming,
// finishing and dropping it from another thread than the creator's is sound.
unsafe impl Send for GradientReducer {}

/// One bucket of a [`GradientReducer`]: its parameters, each one's range of the bucket's memory,
/// and that memory (f32; where the gradients live).
pub struct ReducerBucket<'a> {
    pub params: Vec<&'a Tensor>,
    pub slots: Vec<Tensor>,
    pub flat: Tensor,
}

impl ProcessGroup {
    /// A reducer over `buckets`, in launch order (put the last layers first: backward produces
    /// their gradients first). Every rank must build the same buckets (same parameter layout).
    pub fn gradient_reducer(
        &self,
        buckets: &[ReducerBucket<'_>],
        bf16: bool,
    ) -> Result<GradientReducer> {
        if buckets.iter().any(|b| b.params.len() != b.slots.len()) {
            return Err(DistError::Invalid(
                "a reducer bucket needs one slot per parameter".into(),
            ));
        }
        // Shallow clones own the handles passed down; the shim keeps its own references.
        let mut param_handles: Vec<Tensor> = buckets
            .iter()
            .flat_map(|b| b.params.iter().map(|p| p.shallow_clone()))
            .collect();
        let mut slot_handles: Vec<Tensor> = buckets
            .iter()
            .flat_map(|b| b.slots.iter().map(Tensor::shallow_clone))
            .collect();
        let mut flat_handles: Vec<Tensor> =
            buckets.iter().map(|b| b.flat.shallow_clone()).collect();
        let sizes: Vec<usize> = buckets.iter().map(|b| b.params.len()).collect();
        let pointers =
            |ts: &mut [Tensor]| ts.iter_mut().map(|t| t.as_mut_ptr()).collect::<Vec<_>>();
        let mut params = pointers(&mut param_handles);
        let mut slots = pointers(&mut slot_handles);
        let mut flats = pointers(&mut flat_handles);
        let mut raw = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned group; `params` and `slots` hold `params.len()` tensor pointers and
        // `flats` `flats.len()`, into handles owned by this frame until the call returns (the
        // shim takes its own references); `sizes` has one entry per flat, and they add up to
        // `params.len()` (the shim checks); `raw` and `err` are valid out-pointers.
        let rc = unsafe {
            ffi::tdc_reducer_create(
                self.raw,
                params.as_mut_ptr(),
                slots.as_mut_ptr(),
                params.len(),
                sizes.as_ptr(),
                flats.as_mut_ptr(),
                flats.len(),
                bf16 as c_int,
                &mut raw,
                &mut err,
            )
        };
        check(rc, err, "creating the gradient reducer")?;
        Ok(GradientReducer {
            raw,
            world_size: self.world_size,
        })
    }
}

impl GradientReducer {
    /// The next backward pass ends a gradient step: start all-reducing buckets as it completes
    /// them. Without this (a micro-batch's backward under gradient accumulation), gradients only
    /// accumulate and [`GradientReducer::finish`] reduces them all.
    pub fn arm(&mut self) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: `self.raw` is the live reducer this value owns; valid out-pointer.
        let rc = unsafe { ffi::tdc_reducer_arm(self.raw, &mut err) };
        check(rc, err, "arming the gradient reducer")
    }

    /// Starts the buckets backward did not, waits for all of them and divides by the world size:
    /// afterwards every rank holds the averaged gradient.
    /// `params` must be the reducer's parameters, in the order they were given in its buckets'
    /// creation order (checked).
    pub fn finish(&mut self, params: &[Tensor]) -> Result<()> {
        let mut handles: Vec<Tensor> = params.iter().map(Tensor::shallow_clone).collect();
        let mut pointers: Vec<*mut torch_sys::C_tensor> =
            handles.iter_mut().map(|t| t.as_mut_ptr()).collect();
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned reducer; `pointers` holds `pointers.len()` pointers into `handles`,
        // owned by this frame for the call, which waits for every collective it started.
        let rc = unsafe {
            ffi::tdc_reducer_finish(
                self.raw,
                pointers.as_mut_ptr(),
                pointers.len(),
                self.world_size as c_int,
                &mut err,
            )
        };
        check(rc, err, "gradient sync")
    }
}

impl Drop for GradientReducer {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful tdc_reducer_create and is freed exactly once; the
        // hooks it registered hold it weakly and do nothing once it is gone.
        unsafe { ffi::tdc_reducer_free(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::{staged, unstage};
    use tch::{Device, Kind, Tensor};

    #[test]
    fn tensors_already_on_the_staging_device_or_without_one_are_not_copied() {
        let host = [Tensor::from_slice(&[1.0f32, 2.0])];
        assert!(staged(None, &host).is_none());
        assert!(staged(Some(Device::Cpu), &host).is_none());
    }

    #[test]
    fn unstaging_writes_the_results_into_the_callers_tensors_on_their_own_device() {
        let mut mine = [
            Tensor::zeros([2], (Kind::Float, Device::Cpu)),
            Tensor::zeros([1], (Kind::Int64, Device::Cpu)),
        ];
        let results = [
            Tensor::from_slice(&[3.0f32, 4.0]),
            Tensor::from_slice(&[7i64]),
        ];
        let before = mine[0].data_ptr();
        unstage(&mut mine, &results);
        assert_eq!(Vec::<f32>::try_from(&mine[0]).unwrap(), vec![3.0, 4.0]);
        assert_eq!(Vec::<i64>::try_from(&mine[1]).unwrap(), vec![7]);
        // In place: the caller's tensor, not a new one.
        assert_eq!(mine[0].data_ptr(), before);
        assert_eq!(mine[0].device(), Device::Cpu);
    }
}

//! The safe face of c10d's process groups: [`ProcessGroup`] (Gloo for CPU tensors, NCCL for
//! CUDA tensors), created over a [`Store`] (`super::store`) under a deadline of our own.
//! Everything else in tandem talks to other ranks through these two types only.
//!
//! Gloo aborts the whole process from its I/O thread when ranks pass tensors of different sizes,
//! so every collective first checks that all ranks agree on the tensors' layout (or uses a
//! [`Layout`] verified once, for hot paths with a fixed layout such as gradient buckets).

use std::ffi::{CStr, c_int};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

use super::DistError;
use super::ffi;
use super::liveness::{Heartbeat, Peers};
use super::options::{Backend, GroupOptions};
use super::store::{SendPtr, Store, check, cstring, with_deadline};

type Result<T> = std::result::Result<T, DistError>;

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
///
/// Chosen below the kernel's ephemeral range (`ip_local_port_range`), where the OS never puts
/// the local end of an outgoing connection: a port the OS hands out for `:0` is an ephemeral
/// one, which another process's connection (a Gloo pair, a store client) could take before rank
/// 0 binds it, and a test walking 160 settings two runs at a time met exactly that (`Address
/// already in use`). Falls back to the OS's choice when no such port is free.
pub fn free_loopback_port() -> std::io::Result<u16> {
    let low = ephemeral_low().unwrap_or(32768).clamp(1025, 65535);
    let (from, span) = (low.saturating_sub(12288).max(1024), 12288.min(low - 1024));
    // A start that differs between processes (their pids), then a walk over the range.
    let start = std::process::id() as u16
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()) as u16);
    for i in 0..64u16 {
        let port = from + (start.wrapping_add(i.wrapping_mul(7919))) % span.max(1);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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
    /// This process's heartbeat: the job's group beats, a subgroup leaves it to the job's.
    heartbeat: Option<Heartbeat>,
    /// What a subgroup is made with: the address Gloo binds to and the interfaces it uses.
    interface: String,
    gloo_interfaces: Vec<String>,
    /// Where this group's own keys live in the store: `tandem` for the job's group,
    /// `tandem/<name>` for a subgroup (its shutdown counts).
    keys: String,
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
        let shape = GroupShape {
            prefix: format!("{}/", opts.backend.name()),
            rank: opts.rank,
            size: opts.world_size,
            backend: opts.backend,
            collective_timeout: opts.collective_timeout,
            interface: &interface,
            gloo_interfaces: &opts.gloo_interfaces,
        };
        let (raw, communication_slice) = create_group(&store, &shape, remaining)?;
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
            heartbeat: Some(heartbeat),
            raw,
            store,
            rank: opts.rank,
            world_size: opts.world_size,
            backend: opts.backend,
            staging,
            collective_timeout: opts.collective_timeout,
            communication_slice,
            interface,
            gloo_interfaces: opts.gloo_interfaces.clone(),
            keys: "tandem".into(),
        })
    }

    /// A group of `ranks` of this one (this rank among them), named `name` (unique in the job:
    /// it keys the group in the store), whose collectives involve those ranks only; every rank
    /// of `ranks` must form it, and no other. It shares this group's store and heartbeat, and
    /// names a silent rank as this group would. Used for a population member's ranks.
    pub fn subgroup(
        &self,
        name: &str,
        ranks: std::ops::Range<usize>,
        timeout: Duration,
    ) -> Result<ProcessGroup> {
        if !ranks.contains(&self.rank) || ranks.end > self.world_size {
            return Err(DistError::Invalid(format!(
                "rank {} cannot form group {name} of ranks {ranks:?} in a world of {}",
                self.rank, self.world_size
            )));
        }
        let shape = GroupShape {
            prefix: format!("{name}/{}/", self.backend.name()),
            rank: self.rank - ranks.start,
            size: ranks.len(),
            backend: self.backend,
            collective_timeout: self.collective_timeout,
            interface: &self.interface,
            gloo_interfaces: &self.gloo_interfaces,
        };
        let (raw, communication_slice) = create_group(&self.store, &shape, timeout)?;
        Ok(ProcessGroup {
            raw,
            store: Arc::clone(&self.store),
            rank: shape.rank,
            world_size: shape.size,
            backend: self.backend,
            staging: self.staging,
            collective_timeout: self.collective_timeout,
            communication_slice,
            peers: self.peers.clone(),
            heartbeat: None,
            interface: self.interface.clone(),
            gloo_interfaces: self.gloo_interfaces.clone(),
            keys: format!("tandem/{name}"),
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
    pub fn shutdown(mut self, timeout: Duration) -> Result<()> {
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
        let (finished, left) = (
            format!("{}/shutdown/finished", self.keys),
            format!("{}/shutdown/left", self.keys),
        );
        self.store.add(&finished, 1)?;
        wait_for(&finished, world, "every rank to finish its last collective")?;
        // Every rank is done with its collectives: no beat is needed to name a lost one, and
        // none may be in flight when rank 0's store closes.
        if let Some(heartbeat) = &mut self.heartbeat {
            heartbeat.stop();
        }
        if self.rank == 0 {
            wait_for(
                &left,
                world - 1,
                "the other ranks to leave before the store closes",
            )?;
        } else {
            self.store.add(&left, 1)?;
        }
        Ok(())
    }

    /// Starts summing `values` over every rank and returns at once; [`PendingSum::wait`] gives
    /// the sums. For control values every rank sends alike (the same number of them, the same
    /// order of calls), so no layout check precedes it. Collectives complete in the order they
    /// are started on a group, so a sum started now is done by the time a later blocking
    /// collective of the group returns.
    pub fn start_sum(&self, values: &[f64]) -> Result<PendingSum> {
        let host = Tensor::from_slice(values);
        let mut tensor = match self.staging {
            Some(device) => host.to_device(device),
            None => host,
        };
        let mut raw = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        // SAFETY: `self.raw` is the live group this ProcessGroup owns; `tensor` is a valid tensor
        // the work keeps alive (the shim holds a reference) until it is freed; `raw` and `err`
        // are valid out-pointers.
        let rc = unsafe {
            ffi::tdc_allreduce_start(
                self.raw,
                tensor.as_mut_ptr(),
                ReduceOp::Sum.code(),
                &mut raw,
                &mut err,
            )
        };
        check(rc, err, "starting a sum over the ranks")?;
        Ok(PendingSum {
            raw,
            tensor,
            waited: false,
        })
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

/// A sum over the ranks started by [`ProcessGroup::start_sum`] and not yet waited for. Dropped
/// unwaited, it waits (ignoring a failure: the failure that dropped it is the one to report).
pub struct PendingSum {
    raw: *mut ffi::TdcWork,
    tensor: Tensor,
    waited: bool,
}

// SAFETY: the work handle is owned by this PendingSum alone, and a c10d work may be waited for
// and freed on any thread.
unsafe impl Send for PendingSum {}

impl PendingSum {
    /// Waits for the sum and returns it.
    pub fn wait(mut self) -> Result<Vec<f64>> {
        self.wait_raw()?;
        Vec::<f64>::try_from(&self.tensor.to_device(Device::Cpu))
            .map_err(|e| DistError::Invalid(e.to_string()))
    }

    fn wait_raw(&mut self) -> Result<()> {
        self.waited = true;
        let mut err = std::ptr::null_mut();
        // SAFETY: `raw` came from a successful start and is not yet freed; `err` is a valid
        // out-pointer.
        let rc = unsafe { ffi::tdc_work_wait(self.raw, &mut err) };
        check(rc, err, "a sum over the ranks")
    }
}

impl Drop for PendingSum {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.wait_raw();
        }
        // SAFETY: `raw` came from a successful start and is freed exactly once, here.
        unsafe { ffi::tdc_work_free(self.raw) };
    }
}

/// The group, and the time slice its threads got (see [`ProcessGroup::communication_slice`]).
type CreatedGroup = (
    *mut ffi::TdcGroup,
    std::result::Result<Option<Duration>, String>,
);

/// What a c10d group is formed with: where its keys live in the store, this rank's place in it,
/// its backend and timeout, and (Gloo) the address and interfaces it binds to.
struct GroupShape<'a> {
    prefix: String,
    rank: usize,
    size: usize,
    backend: Backend,
    collective_timeout: Duration,
    interface: &'a str,
    gloo_interfaces: &'a [String],
}

fn create_group(store: &Arc<Store>, shape: &GroupShape, timeout: Duration) -> Result<CreatedGroup> {
    let store_ptr = SendPtr(store.raw);
    // Keep the store alive inside the thread even if we give up waiting on it.
    let keep = Arc::clone(store);
    let rank = shape.rank as c_int;
    let size = shape.size as c_int;
    let collective_ms = shape.collective_timeout.as_millis() as i64;
    let backend = shape.backend;
    let prefix = cstring(&shape.prefix, "the group's key prefix")?;
    let host = cstring(shape.interface, "the interface address")?;
    let interfaces = cstring(&shape.gloo_interfaces.join(","), "the interface names")?;
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
        // `prefix`, `host` and `interfaces` are NUL-terminated and owned by the closure; `out`
        // and `err` are valid out-pointers. On success the new group is owned by the
        // ProcessGroup built from it.
        let rc = unsafe {
            match backend {
                Backend::Gloo => ffi::tdc_group_create_gloo(
                    store_ptr.0,
                    prefix.as_ptr(),
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
                    prefix.as_ptr(),
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
    use super::{ephemeral_low, free_loopback_port, staged, unstage};
    use tch::{Device, Kind, Tensor};

    /// The launcher's port is one no outgoing connection can hold: below the ephemeral range.
    #[test]
    fn a_free_loopback_port_lies_below_the_ephemeral_range() {
        let low = ephemeral_low().expect("Linux says its ephemeral range");
        for _ in 0..20 {
            let port = free_loopback_port().unwrap();
            assert!(port < low, "{port} is in the ephemeral range from {low}");
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("still free");
        }
    }

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

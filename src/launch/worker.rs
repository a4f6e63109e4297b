//! One rank's process: reads the job's secret and the resolved config from stdin (its only input
//! besides its rank and device; the secret is a credential, see [`super::credential`]), binds its device before any tensor exists, sizes its thread pools, joins the process
//! group and runs the trainer. Any failure is written to `logs/rank-N.error` for the launcher
//! to print, then the process exits non-zero.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};

use super::credential::Credential;
use crate::dist::{Backend, GroupOptions, ProcessGroup};
use crate::train::{Outcome, RankContext, Stop};

/// What a worker is told on its command line (`tandem __worker ...`): parsed there by clap, and
/// written by the launcher with [`WorkerArgs::to_args`], so the two cannot drift apart.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub rank: usize,
    #[arg(long)]
    pub world_size: usize,
    #[arg(long)]
    pub local_rank: usize,
    #[arg(long)]
    pub local_world_size: usize,
    #[arg(long)]
    pub device: String,
    #[arg(long)]
    pub master_addr: String,
    #[arg(long)]
    pub master_port: u16,
    #[arg(long)]
    pub run_dir: PathBuf,
    #[arg(long)]
    pub resume: bool,
    #[arg(long)]
    pub quiet: bool,
    /// Where this rank's place in the job came from (flags, scheduler variables), for its first
    /// log line (what `JobEnv::origin` says).
    #[arg(long = "job-from", value_name = "JOB_FROM", default_value = "")]
    pub origin: String,
    /// Network interfaces for Gloo (`GLOO_SOCKET_IFNAME`, as the launcher read it).
    #[arg(
        long = "gloo-ifname",
        value_name = "GLOO_IFNAME",
        value_delimiter = ','
    )]
    pub gloo_interfaces: Vec<String>,
}

impl WorkerArgs {
    /// The command-line arguments after `__worker` that clap parses back into `self`. Each value
    /// is joined to its flag (`--run-dir=DIR`), so one that starts with `-` is still a value.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let pair = |flag: &str, value: &std::ffi::OsStr| {
            let mut arg = std::ffi::OsString::from(format!("{flag}="));
            arg.push(value);
            arg
        };
        let mut out = vec![
            pair("--rank", self.rank.to_string().as_ref()),
            pair("--world-size", self.world_size.to_string().as_ref()),
            pair("--local-rank", self.local_rank.to_string().as_ref()),
            pair(
                "--local-world-size",
                self.local_world_size.to_string().as_ref(),
            ),
            pair("--device", self.device.as_ref()),
            pair("--master-addr", self.master_addr.as_ref()),
            pair("--master-port", self.master_port.to_string().as_ref()),
            pair("--run-dir", self.run_dir.as_os_str()),
            pair("--job-from", self.origin.as_ref()),
        ];
        if !self.gloo_interfaces.is_empty() {
            out.push(pair(
                "--gloo-ifname",
                self.gloo_interfaces.join(",").as_ref(),
            ));
        }
        if self.resume {
            out.push("--resume".into());
        }
        if self.quiet {
            out.push("--quiet".into());
        }
        out
    }
}

/// Runs a worker whose job secret and resolved config arrive on stdin.
pub fn main(args: WorkerArgs) -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return fail(
            &args,
            anyhow!("cannot read the resolved config from stdin: {e}"),
        );
    }
    match Credential::read_header(&text) {
        Ok((credential, canonical)) => run_with_config(args, canonical, credential),
        Err(e) => fail(&args, e),
    }
}

/// Runs a worker on the canonical config text (also used when an external launcher such as
/// torchrun started this process with RANK/WORLD_SIZE set).
pub fn run_with_config(args: WorkerArgs, canonical: &str, credential: Credential) -> ExitCode {
    match run(&args, canonical, credential) {
        Ok(Outcome::Finished) => ExitCode::SUCCESS,
        Ok(Outcome::Interrupted) => ExitCode::from(super::INTERRUPTED),
        Ok(Outcome::Preempted) => ExitCode::from(super::PREEMPTED),
        Err(e) => fail(&args, e),
    }
}

fn fail(args: &WorkerArgs, error: anyhow::Error) -> ExitCode {
    let message = format!("{error:#}");
    tracing::error!("{message}");
    let path = args
        .run_dir
        .join("logs")
        .join(format!("rank-{}.error", args.rank));
    let _ = std::fs::create_dir_all(args.run_dir.join("logs"));
    let _ = crate::atomic::write_atomic(&path, message.as_bytes());
    if !crate::logging::is_initialised() {
        eprintln!("[rank {}] error: {message}", args.rank);
    }
    ExitCode::FAILURE
}

/// The experiment a canonical config text describes, and its hash: how every rank, and the
/// launcher before it starts them, reads the resolved config.
pub fn parse_config(canonical: &str) -> Result<(tandem_config::Experiment, String)> {
    let experiment = tandem_config::parse_canonical(canonical).map_err(|d| {
        anyhow!(
            "the resolved config (its canonical text) does not parse:\n{}",
            d.render(false)
        )
    })?;
    let hash = tandem_config::config_hash(&experiment);
    Ok((experiment, hash))
}

fn run(args: &WorkerArgs, canonical: &str, credential: Credential) -> Result<Outcome> {
    // First thing: a scheduler's signal that arrives while the rank starts up is kept for the
    // first stop vote instead of killing the process.
    let stop_requested = stop_signals()?;
    let (experiment, hash) = parse_config(canonical)?;
    check_placement(args, &experiment)?;
    // Before any thread exists (libtorch's, the environments', Gloo's, the logger's), so that
    // all of them inherit the rank's float mode and cores.
    let flushing = crate::torch_ops::flush_denormals();
    let pinned = if experiment.pin_cores {
        Some(pin_to_core_slice(args.local_rank, args.local_world_size)?)
    } else {
        None
    };
    // docs/design.md, "The device is bound before any tensor exists".
    let device = crate::dist::bind_device(&args.device)?;

    let console =
        crate::logging::init_worker(&args.run_dir, args.rank, &experiment.log, args.quiet)?;
    log_rank_setting(args, flushing, pinned.as_deref());
    let threads = size_thread_pools(&experiment, args, pinned.as_deref());
    tracing::info!(
        "rank {}/{} on {} ({} thread(s)), config {}",
        args.rank,
        args.world_size,
        args.device,
        threads,
        &hash[..12]
    );
    if args.rank == 0 && device == tch::Device::Cpu {
        let cpuinfo = || std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        if let Some(hint) = bfloat16_hint(&experiment.network, cpuinfo) {
            tracing::info!("{hint}");
        }
    }
    tracing::info!(
        target: crate::logging::LOG_ONLY,
        "job secret {}",
        credential.source
    );
    let pg = join_group(args, &experiment, &hash, device, credential)?;
    let peers = pg.peers();
    let outcome = crate::train::run(RankContext {
        experiment,
        hash,
        device,
        pg,
        run_dir: args.run_dir.clone(),
        resume: args.resume,
        threads,
        console,
        stop_requested,
    });
    outcome.map_err(|e| name_the_lost(e, &peers))
}

/// A suggestion for a float32 image torso on a CPU with AMX (`amx_bf16` among the flags of
/// the text `cpuinfo` gives, read only for such a torso), which a run declares and does not get
/// by itself: a machine's instructions must not change what a resolved config does.
fn bfloat16_hint(
    network: &tandem_config::Network,
    cpuinfo: impl FnOnce() -> String,
) -> Option<&'static str> {
    // Declared layers compute in float32 (the resolver refuses bfloat16 for them).
    let image_torso = !matches!(
        network.torso,
        tandem_config::Torso::Mlp { .. } | tandem_config::Torso::Layers { .. }
    );
    let float32 = network.precision == tandem_config::Precision::Float32;
    let amx = || {
        cpuinfo()
            .lines()
            .find(|line| line.starts_with("flags"))
            .is_some_and(|flags| flags.split_whitespace().any(|flag| flag == "amx_bf16"))
    };
    (image_torso && float32 && amx()).then_some(
        "hint: this CPU has AMX, and `network.precision \"bfloat16\"` runs image torsos on it \
         (Atari PPO trained 1.8x as fast on one thread; docs/performance.md); results then \
         differ from float32's",
    )
}

/// Refuses a rank started for another world size or device than the config gives it.
fn check_placement(args: &WorkerArgs, experiment: &tandem_config::Experiment) -> Result<()> {
    if args.world_size != experiment.job_ranks() {
        bail!(
            "this rank was started for a world of {} ranks, but the config lists {} device(s)",
            args.world_size,
            experiment.job_ranks()
        );
    }
    let configured = experiment.devices[args.rank].to_string();
    if configured != args.device {
        bail!(
            "rank {} was given device {} but the config assigns it {configured}",
            args.rank,
            args.device
        );
    }
    Ok(())
}

/// The rank's first log lines: its place in the job and what of its process setting came from
/// outside the config (NCCL's and OpenMP's variables, the float mode, the pinned cores).
fn log_rank_setting(args: &WorkerArgs, flushing: bool, pinned: Option<&[usize]>) {
    tracing::info!(
        target: crate::logging::LOG_ONLY,
        "{}",
        super::job_env::describe_rank(
            args.rank,
            args.world_size,
            (args.local_rank, args.local_world_size),
            (&args.master_addr, args.master_port),
            &args.origin
        )
    );
    // NCCL reads its own variables from the environment the worker inherited.
    if let Some(ifname) = std::env::var_os("NCCL_SOCKET_IFNAME") {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "NCCL_SOCKET_IFNAME={} (read by NCCL)",
            ifname.to_string_lossy()
        );
    }
    if !flushing {
        tracing::warn!("this CPU cannot flush denormal floats; updates may run slower");
    }
    if let Some(cores) = pinned {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "rank {} pinned to cores {cores:?} (pin-cores)",
            args.rank
        );
    }
    if let Some(level) = std::env::var_os("TORCH_CPP_LOG_LEVEL") {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "TORCH_CPP_LOG_LEVEL={} (libtorch's own log threshold; the launcher sets ERROR for its workers unless it is set, which keeps c10d's retries of a lost peer off the console)",
            level.to_string_lossy()
        );
    }
    if let Some(spin) = std::env::var_os("GOMP_SPINCOUNT") {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "GOMP_SPINCOUNT={} (idle OpenMP threads spin that long, then sleep and leave the core to other processes; the launcher sets it for its workers unless GOMP_SPINCOUNT or OMP_WAIT_POLICY is set)",
            spin.to_string_lossy()
        );
    }
}

/// Sets libtorch's compute threads (the config's `threads`, or what `"auto"` makes of this
/// rank's share of the cores) and one inter-op thread; returns the compute threads.
fn size_thread_pools(
    experiment: &tandem_config::Experiment,
    args: &WorkerArgs,
    pinned: Option<&[usize]>,
) -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // A pinned rank's share is its cores (the machine's count would now read as only
    // those, and dividing it again would halve it).
    let share = match pinned {
        Some(mine) => mine.len().max(1),
        None => (cores / args.local_world_size.max(1)).max(1),
    };
    let mut threads = experiment.threads_for_rank(share);
    if experiment.threads == tandem_config::Threads::Auto {
        if threads < share {
            tracing::info!(
                target: crate::logging::LOG_ONLY,
                "threads \"auto\": {threads}, the network's layers being too small for more to pay (of {share} core(s) for this rank)"
            );
        } else if pinned.is_none() {
            threads = threads_on_idle_cores(threads, args.local_world_size.max(1));
        }
    }
    tch::set_num_threads(threads as i32);
    tch::set_num_interop_threads(1);
    threads
}

/// `"auto"`'s compute threads for large layers, capped by the cores other processes leave
/// this rank: on two cores with one held by a busy loop, two threads took 8.8-15.6x the wall
/// time of one (each parallel region waits for the thread the scheduler parked behind the
/// other process; docs/performance.md, "7. Threads"). Processes that give way to this one
/// (niced 10 or more above it) leave their cores (`super::idle`). Measured once, at start, over
/// 200 ms.
fn threads_on_idle_cores(wanted: usize, local_ranks: usize) -> usize {
    // One thread is the least there is: nothing to measure (200 ms of every start saved).
    if wanted <= 1 {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "threads \"auto\": {wanted}, this rank's share of the cores"
        );
        return wanted;
    }
    let Some(idle) = super::idle::available_cores(std::time::Duration::from_millis(200)) else {
        return wanted;
    };
    // A core counts as this rank's where at least 60% of it is idle: a busy loop holds all of
    // its core, while the launcher and the rank's own start take a little of another.
    let mine = ((idle / local_ranks as f64) + 0.4).floor().max(1.0) as usize;
    let threads = wanted.min(mine);
    if threads < wanted {
        tracing::info!(
            "threads \"auto\": {threads} rather than {wanted}: {idle:.1} core(s) of the machine were idle at start (or used by processes niced to give way), the rest held by other processes"
        );
    } else {
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "threads \"auto\": {threads}, this rank's share of the cores"
        );
    }
    threads
}

/// Joins the other ranks: the rendezvous checks that every rank runs this config hash, this
/// version and the same kind of start (fresh or resumed).
fn join_group(
    args: &WorkerArgs,
    experiment: &tandem_config::Experiment,
    hash: &str,
    device: tch::Device,
    credential: Credential,
) -> Result<ProcessGroup> {
    let backend = backend_for(experiment.sync.backend, device);
    tracing::info!(
        target: crate::logging::LOG_ONLY,
        "collectives over {} (sync.backend {})",
        backend.name(),
        experiment.sync.backend.name()
    );
    tracing::info!(
        target: crate::logging::LOG_ONLY,
        "joining {} rank(s) within {} s; every collective then has {} s",
        args.world_size,
        experiment.sync.rendezvous_timeout,
        experiment.sync.collective_timeout
    );
    let pg = ProcessGroup::connect(&GroupOptions {
        rank: args.rank,
        world_size: args.world_size,
        master_addr: args.master_addr.clone(),
        master_port: args.master_port,
        rendezvous_timeout: Duration::from_secs_f64(experiment.sync.rendezvous_timeout),
        collective_timeout: Duration::from_secs_f64(experiment.sync.collective_timeout),
        backend,
        identity: [
            ("config-hash".into(), hash.to_string()),
            ("tandem-version".into(), env!("CARGO_PKG_VERSION").into()),
            // Under an external launcher each rank decides by itself whether it resumes; a
            // rank that would start fresh beside resuming ones is refused at the rendezvous.
            (
                "start".into(),
                if args.resume { "resume" } else { "fresh" }.into(),
            ),
        ]
        .into_iter()
        .chain(node_fields(args))
        .collect(),
        gloo_interfaces: args.gloo_interfaces.clone(),
        secret: credential.secret,
    })
    .context("joining the other ranks")?;
    log_time_slice(&pg);
    Ok(pg)
}

fn log_time_slice(pg: &ProcessGroup) {
    match pg.communication_slice() {
        Ok(Some(slice)) => tracing::info!(
            target: crate::logging::LOG_ONLY,
            "communication threads run with a {:.1} ms time slice",
            slice.as_secs_f64() * 1e3
        ),
        Ok(None) => tracing::info!(
            target: crate::logging::LOG_ONLY,
            "communication threads run with the kernel's default time slice (per-thread slices need Linux 6.12)"
        ),
        Err(why) => tracing::warn!(
            "communication threads run with the kernel's default time slice: the shorter one was refused ({why})"
        ),
    }
}

/// Identity fields that only name this rank's node in reports, when the node's rank count is
/// known (always under `tandem train`; under an external launcher when it set
/// LOCAL_WORLD_SIZE).
fn node_fields(args: &WorkerArgs) -> Vec<(String, String)> {
    if args.local_world_size == 0 {
        return Vec::new();
    }
    vec![
        (
            "node".into(),
            (args.rank / args.local_world_size).to_string(),
        ),
        ("ranks-per-node".into(), args.local_world_size.to_string()),
    ]
}

/// A failure between ranks leads with the rank that stopped answering, when one did: the failed
/// call's own message (a timeout, a closed connection) cannot say whom it lost.
fn name_the_lost(error: anyhow::Error, peers: &crate::dist::Peers) -> anyhow::Error {
    let between_ranks = error
        .chain()
        .any(|c| c.downcast_ref::<crate::dist::DistError>().is_some());
    match between_ranks.then(|| peers.lost()).flatten() {
        Some(lost) => error.context(lost),
        None => error,
    }
}

/// SIGINT (Ctrl-C) asks to stop, SIGTERM and SIGUSR1 (a scheduler's notice, Slurm's
/// `--signal`) to stop for preemption; each is only a flag, read at the next stop vote.
fn stop_signals() -> Result<Box<dyn Fn() -> Option<Stop> + Send>> {
    let interrupt = Arc::new(AtomicBool::new(false));
    let preempt = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    for (sig, flag) in [
        (SIGINT, &interrupt),
        (SIGTERM, &preempt),
        (SIGUSR1, &preempt),
    ] {
        signal_hook::flag::register(sig, Arc::clone(flag))
            .context("cannot install the signal handler")?;
    }
    Ok(Box::new(move || {
        if preempt.load(Ordering::SeqCst) {
            Some(Stop::Preempt)
        } else if interrupt.load(Ordering::SeqCst) {
            Some(Stop::Interrupt)
        } else {
            None
        }
    }))
}

/// Local rank `rank`'s share of `cores` cores among `ranks` ranks on the machine: the rank-th of
/// `ranks` equal slices, or one core shared round-robin when there are more ranks than cores.
pub fn core_slice(cores: usize, rank: usize, ranks: usize) -> std::ops::Range<usize> {
    let ranks = ranks.max(1);
    if cores == 0 {
        0..0
    } else if ranks >= cores {
        let core = rank % cores;
        core..core + 1
    } else {
        rank * cores / ranks..(rank + 1) * cores / ranks
    }
}

/// Restricts this process to its slice ([`core_slice`]) of the cores it may use now (so a
/// container's or `taskset`'s limits are respected), and returns the cores it kept, read back
/// from the kernel.
pub fn pin_to_core_slice(local_rank: usize, local_ranks: usize) -> Result<Vec<usize>> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    let allowed_cores = |set: &libc::cpu_set_t| -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: CPU_ISSET reads a bit of a valid set; the index is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
            .collect()
    };
    // SAFETY: cpu_set_t is a plain bit array, for which all zeros is a valid (empty) set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size` bytes into `allowed`, which is that large; pid 0
    // is this thread, whose mask later threads inherit.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        bail!(
            "pin-cores: cannot read this process's CPU affinity: {}",
            std::io::Error::last_os_error()
        );
    }
    let cores = allowed_cores(&allowed);
    let mine = &cores[core_slice(cores.len(), local_rank, local_ranks)];
    ensure!(
        !mine.is_empty(),
        "pin-cores: this process may use no cores ({cores:?})"
    );
    // SAFETY: all zeros is the empty cpu_set_t, as above.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in mine {
        // SAFETY: sets a bit of a valid set; `core` came from CPU_ISSET's range, below
        // CPU_SETSIZE, so the write stays inside it.
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    // SAFETY: the kernel reads `size` bytes of `set`, which is that large; pid 0 is this thread.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        bail!(
            "pin-cores: cannot pin local rank {local_rank} to cores {mine:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: all zeros is the empty cpu_set_t, as above.
    let mut now: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as the first read: at most `size` bytes into `now`, which is that large.
    if unsafe { libc::sched_getaffinity(0, size, &mut now) } != 0 {
        bail!(
            "pin-cores: cannot read back the CPU affinity: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(allowed_cores(&now))
}

/// The c10d backend of `sync.backend` for a rank on `device`. The resolver has refused NCCL for a
/// CPU rank, and `auto` with one GPU listed twice.
fn backend_for(setting: tandem_config::SyncBackend, device: tch::Device) -> Backend {
    match setting {
        tandem_config::SyncBackend::Auto => Backend::for_device(device),
        tandem_config::SyncBackend::Gloo => Backend::Gloo,
        tandem_config::SyncBackend::Nccl => Backend::Nccl,
    }
}

#[cfg(test)]
mod tests {
    use super::{WorkerArgs, backend_for, bfloat16_hint, core_slice};
    use crate::dist::Backend;
    use tandem_config::SyncBackend;

    #[derive(clap::Parser)]
    struct Worker {
        #[command(flatten)]
        args: WorkerArgs,
    }

    fn round_trip(args: &WorkerArgs) -> WorkerArgs {
        use clap::Parser;
        let mut argv: Vec<std::ffi::OsString> = vec!["__worker".into()];
        argv.extend(args.to_args());
        Worker::try_parse_from(argv).expect("parses").args
    }

    #[test]
    fn what_the_launcher_writes_the_worker_reads_back() {
        let mut args = WorkerArgs {
            rank: 3,
            world_size: 4,
            local_rank: 1,
            local_world_size: 2,
            device: "cpu".into(),
            master_addr: "10.0.0.1".into(),
            master_port: 29500,
            run_dir: "-runs/a b/c".into(),
            resume: true,
            quiet: false,
            origin: "--from a flag, SLURM_PROCID".into(),
            gloo_interfaces: vec!["eth0".into(), "eth1".into()],
        };
        assert_eq!(round_trip(&args), args);
        args.resume = false;
        args.quiet = true;
        args.origin = String::new();
        args.gloo_interfaces.clear();
        assert_eq!(round_trip(&args), args);
    }

    #[test]
    fn sync_backend_auto_follows_the_device_and_gloo_or_nccl_override_it() {
        let cuda = tch::Device::Cuda(0);
        assert_eq!(
            backend_for(SyncBackend::Auto, tch::Device::Cpu),
            Backend::Gloo
        );
        assert_eq!(backend_for(SyncBackend::Auto, cuda), Backend::Nccl);
        assert_eq!(backend_for(SyncBackend::Gloo, cuda), Backend::Gloo);
        assert_eq!(backend_for(SyncBackend::Nccl, cuda), Backend::Nccl);
    }

    #[test]
    fn core_slices_split_the_cores_evenly_and_share_them_round_robin_when_short() {
        assert_eq!(core_slice(2, 0, 2), 0..1);
        assert_eq!(core_slice(2, 1, 2), 1..2);
        assert_eq!(core_slice(16, 0, 3), 0..5);
        assert_eq!(core_slice(16, 1, 3), 5..10);
        assert_eq!(core_slice(16, 2, 3), 10..16);
        assert_eq!(core_slice(8, 0, 1), 0..8);
        // More ranks than cores: one core each, shared.
        assert_eq!(core_slice(2, 2, 3), 0..1);
        assert_eq!(core_slice(2, 1, 3), 1..2);
        assert_eq!(core_slice(0, 0, 1), 0..0);
        for (cores, ranks) in [(16, 3), (7, 2), (64, 8), (3, 5)] {
            let slices: Vec<_> = (0..ranks).map(|r| core_slice(cores, r, ranks)).collect();
            assert!(
                slices.iter().all(|s| !s.is_empty() && s.end <= cores),
                "{slices:?}"
            );
            if ranks <= cores {
                // Back to back: every core used once.
                assert_eq!(slices[0].start, 0);
                assert_eq!(slices[ranks - 1].end, cores);
                assert!(
                    slices.windows(2).all(|w| w[0].end == w[1].start),
                    "{slices:?}"
                );
            }
        }
    }

    fn network(env: &str, torso: &str, precision: &str) -> tandem_config::Network {
        let text = format!(
            "experiment \"x\" {{\n    env \"{env}\"\n    network \"{torso}\" {{\n        \
             precision \"{precision}\"\n    }}\n}}\n"
        );
        tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
            .expect("resolves")
            .experiment
            .network
    }

    #[test]
    fn the_bfloat16_hint_is_for_float32_image_torsos_on_amx_cpus() {
        let amx = "processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile\n";
        let no_amx = "processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 amx_tile\n";
        let text = |cpuinfo: &'static str| move || cpuinfo.to_string();
        let atari = network("atari-breakout", "nature-cnn", "float32");
        assert!(bfloat16_hint(&atari, text(amx)).is_some());
        assert!(bfloat16_hint(&atari, text(no_amx)).is_none());
        assert!(bfloat16_hint(&atari, text("")).is_none());
        let declared = network("atari-breakout", "nature-cnn", "bfloat16");
        assert!(bfloat16_hint(&declared, text(amx)).is_none());
        let mlp = network("cartpole", "mlp", "float32");
        assert!(bfloat16_hint(&mlp, text(amx)).is_none());
        let unread = || -> String { panic!("/proc/cpuinfo read for an MLP") };
        assert!(bfloat16_hint(&mlp, unread).is_none());
    }
}

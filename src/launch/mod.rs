//! The launcher: resolves an experiment once, makes the run directory, starts one worker process
//! per local device, and supervises them. Workers receive the job's secret (a credential, see
//! [`credential`]) and the resolved config on stdin, their rank and their device on the command
//! line, and nothing else (bar `GOMP_SPINCOUNT`, a libgomp tuning, and `TORCH_CPP_LOG_LEVEL`,
//! libtorch's log threshold, which carry nothing of the experiment).
//!
//! Supervision ([`supervise`]): the first failure printed with its cause and the others stopped,
//! Ctrl-C forwarded once as a request to finish the update and checkpoint (exit 130), SIGTERM and
//! SIGUSR1 (a scheduler's notice) likewise but exit [`PREEMPTED`], a second signal kills.

pub mod credential;
pub mod host;
mod idle;
pub mod job_env;
pub mod run_dir;
mod supervise;
pub mod worker;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use supervise::{Rank, STOPPED_GRACE, supervise};
pub(crate) use supervise::{install_signal_counter, signal};

/// The libgomp spin count the launcher gives workers when the environment sets none (see
/// where the workers are started).
pub const WORKER_GOMP_SPINCOUNT: &str = "20000";

/// libtorch's log threshold for workers when the environment sets none: its warnings are
/// c10d's retries of a lost peer, with C++ frames, which tandem reports in its own words.
pub const WORKER_TORCH_CPP_LOG_LEVEL: &str = "ERROR";

/// Where and how this launcher's ranks join a job.
#[derive(Debug, Clone)]
pub struct JobLayout {
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: String,
    /// `None`: node 0 picks a free port (single-node runs).
    pub master_port: Option<u16>,
}

/// What `tandem train` was asked to do, after the config was resolved.
pub struct LaunchRequest {
    pub experiment: tandem_config::Experiment,
    pub canonical: String,
    pub hash: String,
    pub run_dir: PathBuf,
    pub resume: bool,
    /// `--resume-if-exists` found no checkpoint: an attempt of the same config that never wrote
    /// one may be started over.
    pub start_over: bool,
    pub layout: JobLayout,
    pub quiet: bool,
    /// Where the layout came from ([`job_env::JobEnv::origin`]), for each rank's first log line.
    pub origin: String,
    /// `GLOO_SOCKET_IFNAME`'s interfaces, handed to every worker.
    pub gloo_interfaces: Vec<String>,
    /// The scheduler's job ids ([`job_env::JobEnv::job_ids`]), for the derived job secret.
    pub job_ids: Vec<String>,
}

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it), after the update
/// and its checkpoint; also of a run stopped at once by a second signal.
pub const INTERRUPTED: u8 = 130;

/// Exit code of a run stopped by SIGTERM or SIGUSR1 (a scheduler preempting or ending the job)
/// after the update and its checkpoint: sysexits' EX_TEMPFAIL, "try again later". A job script
/// requeues on it and runs the same command with `--resume-if-exists`.
pub const PREEMPTED: u8 = 75;

/// The default run directory: `runs/<experiment>/<UTC timestamp>`, made unique if taken.
pub fn default_run_dir(experiment: &str) -> PathBuf {
    let base = PathBuf::from("runs").join(experiment);
    let stamp = utc_stamp();
    let mut dir = base.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = base.join(format!("{stamp}-{n}"));
    }
    dir
}

fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// A port nobody listens on right now (the OS's choice). Another program could take it before
/// rank 0 binds it; rank 0 then fails at once with a clear "address in use" error.
fn pick_free_port() -> Result<u16> {
    crate::dist::free_loopback_port().context("no free TCP port on loopback")
}

/// The ranks this node runs: devices are split evenly over the nodes, in order.
pub fn local_ranks(world: usize, layout: &JobLayout) -> Result<std::ops::Range<usize>> {
    if layout.nnodes == 0 || layout.node_rank >= layout.nnodes {
        bail!(
            "--node-rank {} is outside --nnodes {}",
            layout.node_rank,
            layout.nnodes
        );
    }
    if !world.is_multiple_of(layout.nnodes) {
        bail!(
            "the experiment has {world} device(s), which do not divide over {} nodes; \
             list a multiple of {} devices",
            layout.nnodes,
            layout.nnodes
        );
    }
    let per = world / layout.nnodes;
    Ok(layout.node_rank * per..(layout.node_rank + 1) * per)
}

/// Prepares the run directory and, for a new run, writes the resolved config. A new run is
/// refused in a directory that holds one; a resumed run's `resolved.kdl` is left as it is until
/// its ranks have loaded their checkpoints (rank 0 rewrites it then, `crate::train`). On node 0
/// the directory is held ([`run_dir::hold`]) from before its first look until the hold returned
/// is dropped, which the caller does when the run ends.
pub fn prepare_run_dir(req: &LaunchRequest) -> Result<Option<run_dir::Hold>> {
    let resolved = req.run_dir.join("resolved.kdl");
    if req.resume && !resolved.exists() {
        bail!(
            "{} has no resolved.kdl: is it a tandem run directory?",
            req.run_dir.display()
        );
    }
    // Only node 0 writes the run's files; other nodes may share the directory over a network
    // file system (and see node 0's files appear).
    let node_0 = req.layout.node_rank == 0;
    // An earlier run that nobody holds is refused before the hold is taken, so a directory is
    // held only by a run that goes ahead: the other ranks of a torchrun-style job read "held"
    // as "this job's rank 0 runs" ([`refuse_earlier_run_before_rendezvous`]). A held one is
    // refused by the hold, naming its holder; and all is checked again under the hold, against
    // a launcher that wrote in between.
    if !req.resume
        && node_0
        && !run_dir::is_held(&req.run_dir)
        && let Existing::Run(refusal) = existing_run(req)?
    {
        return Err(refusal.into());
    }
    let hold = node_0.then(|| run_dir::hold(&req.run_dir)).transpose()?;
    if !req.resume && node_0 {
        refuse_existing_run(req)?;
    }
    if req.resume && node_0 {
        // Held: no rank of another run is writing a snapshot here.
        for orphan in crate::train::checkpoint::remove_orphan_snapshots(&req.run_dir)? {
            eprintln!(
                "tandem: removed {}, an environment snapshot whose checkpoint was never written",
                orphan.display()
            );
        }
    }
    let logs = req.run_dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    if !req.resume && req.layout.node_rank == 0 {
        crate::train::report::write_resolved(&req.run_dir, &req.canonical, &req.hash)?;
    }
    for entry in std::fs::read_dir(&logs)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "error") {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(hold)
}

/// What a new run finds in its directory.
enum Existing {
    /// Nothing of a run: it starts.
    Nothing,
    /// Under `--resume-if-exists`, an attempt of the same config that wrote no checkpoint (a
    /// job killed early): it starts over once these event files are gone.
    StartOver(Vec<PathBuf>),
    /// A run: refused, with the message.
    Run(UsageError),
}

/// A new run in a directory that holds a run would overwrite its checkpoints, prune them by
/// name and mix its event files: refused, naming the ways forward. An empty directory is fine,
/// and so, under `--resume-if-exists`, is an attempt of the same config that wrote no
/// checkpoint (a job killed early), which starts over.
fn refuse_existing_run(req: &LaunchRequest) -> Result<()> {
    match existing_run(req)? {
        Existing::Nothing => Ok(()),
        Existing::Run(refusal) => Err(refusal.into()),
        Existing::StartOver(events) => {
            // The attempt is run again from its start, exactly (same config); its event files
            // would only repeat the new attempt's steps beside it.
            for file in &events {
                std::fs::remove_file(file)
                    .with_context(|| format!("cannot remove {}", file.display()))?;
            }
            eprintln!(
                "tandem: {} holds an attempt of this run that wrote no checkpoint; starting it \
                 over (its {} event file(s) removed)",
                req.run_dir.display(),
                events.len()
            );
            Ok(())
        }
    }
}

/// What `req.run_dir` holds, looked at without changing anything.
fn existing_run(req: &LaunchRequest) -> Result<Existing> {
    let dir = &req.run_dir;
    let mut found = Vec::new();
    if dir.join("resolved.kdl").exists() {
        found.push("resolved.kdl".to_string());
    }
    // A population's checkpoints and summaries are its members'.
    let runs = crate::train::checkpoint::checkpointing_dirs(dir);
    let mut checkpoints = 0;
    let mut events =
        tandem_summary::reader::event_files(&dir.join("tensorboard")).unwrap_or_default();
    for run in runs.iter().filter(|run| *run != dir) {
        events.extend(
            tandem_summary::reader::event_files(&run.join("tensorboard")).unwrap_or_default(),
        );
    }
    for run in &runs {
        checkpoints += crate::train::checkpoint::newest_first(run)?.len();
    }
    if checkpoints > 0 {
        found.push(format!("{checkpoints} checkpoint(s)"));
    }
    if !events.is_empty() {
        found.push(format!("{} TensorBoard event file(s)", events.len()));
    }
    let lines = crate::train::SCALAR_LINES;
    if dir.join(lines).exists() {
        found.push(lines.to_string());
    }
    if found.is_empty() {
        return Ok(Existing::Nothing);
    }
    let same_config =
        std::fs::read_to_string(dir.join("resolved.sha256")).is_ok_and(|h| h.trim() == req.hash);
    if req.start_over && checkpoints == 0 && same_config {
        return Ok(Existing::StartOver(events));
    }
    Ok(Existing::Run(UsageError(format!(
        "{} already holds a run ({}); a new run there would overwrite its checkpoints and mix \
         their summaries\nhelp: continue it with `tandem train --resume {}`, run the same \
         command with --resume-if-exists to continue it whenever it has a checkpoint, or give \
         a new --run-dir",
        dir.display(),
        found.join(", "),
        dir.display()
    ))))
}

/// A rank other than 0 of an external launcher's job, before it waits for the rendezvous: the
/// run directory every rank names alike holds an earlier run that nobody holds (rank 0 of this
/// job holds it from before its first write), so rank 0 refuses it and this rank would wait for
/// a rendezvous that never comes. It refuses at once, with rank 0's words.
fn refuse_earlier_run_before_rendezvous(req: &LaunchRequest) -> Result<()> {
    if req.resume {
        return Ok(());
    }
    // Files first, the hold second: this job's rank 0 holds the directory from before its first
    // write until the run ends, so files seen and then no holder are an earlier run's.
    match existing_run(req)? {
        Existing::Run(refusal) if !run_dir::is_held(&req.run_dir) => Err(refusal.into()),
        _ => Ok(()),
    }
}

/// Starts the local workers and supervises them until the job ends; returns the exit code.
pub fn launch(req: &LaunchRequest) -> Result<ExitCode> {
    let world = req.experiment.job_ranks();
    let ranks = local_ranks(world, &req.layout)?;
    let _hold = prepare_run_dir(req)?;
    warn_if_oversubscribed(&req.experiment, &ranks);
    let master_port = match req.layout.master_port {
        Some(p) => p,
        None if req.layout.nnodes == 1 => pick_free_port()?,
        None => bail!("--master-port is required with --nnodes > 1"),
    };
    let credential = credential::Credential::for_launcher(
        req.layout.nnodes,
        &req.layout.master_addr,
        master_port,
        &req.job_ids,
    )?;
    let signals = install_signal_counter()?;
    let exe =
        std::env::current_exe().context("cannot find the tandem executable to start workers")?;

    let mut children = Vec::new();
    for rank in ranks.clone() {
        let device = req.experiment.devices[rank].to_string();
        let args = worker::WorkerArgs {
            rank,
            world_size: world,
            local_rank: rank - ranks.start,
            local_world_size: ranks.len(),
            device,
            master_addr: req.layout.master_addr.clone(),
            master_port,
            run_dir: req.run_dir.clone(),
            resume: req.resume,
            quiet: req.quiet,
            origin: req.origin.clone(),
            gloo_interfaces: req.gloo_interfaces.clone(),
        };
        let child = start_worker(&exe, &args, &credential, &req.canonical)?;
        children.push(Rank::new(rank, child));
    }

    // Past the collective timeout, with time for a local peer's own failure to come first.
    let stopped_limit =
        Duration::from_secs_f64(req.experiment.sync.collective_timeout) + STOPPED_GRACE;
    supervise(&mut children, &signals, &req.run_dir, stopped_limit)
}

/// Starts one rank's worker process in a process group of its own and hands it the job's secret
/// and the resolved config `canonical` on stdin.
fn start_worker(
    exe: &Path,
    args: &worker::WorkerArgs,
    credential: &credential::Credential,
    canonical: &str,
) -> Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.arg("__worker")
        .args(args.to_args())
        .env_remove(credential::ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    // libgomp's idle threads spin for a long while after each parallel region before they
    // sleep; with several intra-op threads on a small machine they hold the cores the
    // environment threads need. A short spin made Atari with 2 threads 12% faster and left
    // CartPole and MinAtar as they were (docs/performance.md). A user's own setting wins.
    if std::env::var_os("GOMP_SPINCOUNT").is_none() && std::env::var_os("OMP_WAIT_POLICY").is_none()
    {
        cmd.env("GOMP_SPINCOUNT", WORKER_GOMP_SPINCOUNT);
    }
    // c10d warns, with a page of C++ frames per rank, of every store request a lost peer
    // left unanswered; tandem names the lost rank itself (docs/distributed.md). Its errors
    // still print. A user's own setting wins.
    if std::env::var_os("TORCH_CPP_LOG_LEVEL").is_none() {
        cmd.env("TORCH_CPP_LOG_LEVEL", WORKER_TORCH_CPP_LOG_LEVEL);
    }
    // Own process group: a terminal's Ctrl-C reaches the launcher only, which decides what the
    // ranks get. And no orphans: a worker dies with its launcher.
    own_group_ending_with_parent(&mut cmd, libc::SIGKILL);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start the worker for rank {}", args.rank))?;
    // The secret and the resolved config are the worker's only input; it reads them to the
    // end first thing.
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(credential.header().as_bytes())
        .and_then(|()| stdin.write_all(canonical.as_bytes()))
        .with_context(|| format!("cannot hand the config to rank {}", args.rank))?;
    drop(stdin);
    Ok(child)
}

/// Makes the process `cmd` starts the leader of a process group of its own (a terminal's
/// Ctrl-C reaches only this process, which decides what its child gets) and sends it `signal`
/// when this process ends, however it ends (kill -9 included): no child outlives its parent.
/// Also used by `tandem sweep` for its members, with SIGTERM, so they checkpoint first.
pub(crate) fn own_group_ending_with_parent(cmd: &mut Command, signal: libc::c_int) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it makes raw syscalls (setpgid, prctl, getppid, kill) with plain
    // integers and touches no memory, locks or allocator.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, signal);
            // The parent died between fork and prctl: the signal it would have sent, now.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), signal);
            }
            Ok(())
        });
    }
}

/// More CPU ranks on this machine than cores this process may use: said before they start,
/// since every collective then waits for ranks the scheduler has parked.
fn warn_if_oversubscribed(experiment: &tandem_config::Experiment, ranks: &std::ops::Range<usize>) {
    let cpu_ranks = ranks
        .clone()
        .filter(|&r| experiment.devices[r] == tandem_config::Device::Cpu)
        .count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpu_ranks > cores {
        eprintln!(
            "tandem: warning: {cpu_ranks} CPU ranks on {cores} core(s) here: the ranks take \
             turns on the cores and every collective waits for the ones parked, so expect the \
             run to be slower than with {cores} rank(s)"
        );
    }
}

pub use crate::usage::UsageError;

/// `tandem train` as the command line states it (clap reads it; its field docs are the help).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TrainRequest {
    /// The experiment file (`-` reads standard input).
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
    /// Override a value: PATH=VALUE, e.g. `train.max-steps=4096`.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Where the run's files go (default: runs/<experiment>/<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its newest checkpoint, under the config it was written
    /// with: --set may change `devices` (another number of ranks) and --max-steps where it
    /// stops; anything else needs --allow-config-change.
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// With FILE and --run-dir DIR: continue DIR when it holds a checkpoint (the config must be
    /// the run's), start it otherwise; a requeued job runs the same command again.
    #[arg(long)]
    pub resume_if_exists: bool,
    /// Let a resume run a config that differs from its checkpoint's in more than `devices` and
    /// `train.max-steps`; the change is recorded in RUN_DIR/config-changes.log.
    #[arg(long)]
    pub allow_config_change: bool,
    /// Stop after this many global environment steps (schedules still use train.total-steps).
    #[arg(long, value_name = "STEPS")]
    pub max_steps: Option<u64>,
    /// Only warnings and errors on the console.
    #[arg(long, short)]
    pub quiet: bool,
    /// Number of machines in the job (one launcher per machine; default 1, or what the
    /// scheduler's variables say: docs/distributed.md, "Schedulers").
    #[arg(long)]
    pub nnodes: Option<usize>,
    /// This machine's index in the job.
    #[arg(long)]
    pub node_rank: Option<usize>,
    /// Address of node 0, where rank 0 hosts the rendezvous store.
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Port of the rendezvous store on node 0.
    #[arg(long)]
    pub master_port: Option<u16>,
}

/// Resolves the experiment (or the resumed run's own config) once, into its canonical text
/// ([`resolve_canonical`]; the launcher does not read that text back: every rank does, in
/// [`worker::parse_config`], and refuses one that does not resolve to itself), derives this
/// process's place in the job from the layout flags and the scheduler's variables
/// ([`job_env`]), and either launches this node's workers or becomes the one rank the scheduler
/// started.
pub fn train(req: TrainRequest) -> Result<ExitCode> {
    let resume = resume_dir(&req)?;
    let (canonical, resolved) = resolve_canonical(&req)?;
    refuse_what_this_machine_lacks(&resolved)?;
    let experiment = resolved.experiment.clone();
    let hash = tandem_config::config_hash(&experiment);
    if let Some(dir) = &resume {
        check_resume_config(dir, &experiment, &hash, &canonical, req.allow_config_change)?;
    }
    let flags = job_env::Flags {
        nnodes: req.nnodes,
        node_rank: req.node_rank,
        master_addr: req.master_addr.clone(),
        master_port: req.master_port,
    };
    let job = job_env::derive(&job_env::from_process()?, &flags, experiment.job_ranks())?;
    if req.nnodes.is_none() {
        check_memory_for_ranks_here(&resolved, &job.plan, experiment.job_ranks())?;
    }
    crate::dist::check_interfaces(&job.gloo_interfaces).map_err(|e| UsageError(e.to_string()))?;
    let run_dir = run_dir_for(&req, resume.as_ref(), &experiment.name, &hash, &job);
    let (layout, one_rank) = match job.plan.clone() {
        job_env::JobPlan::Spawn(layout) => (layout, None),
        job_env::JobPlan::Rank(me) => (
            JobLayout {
                nnodes: 1,
                node_rank: 0,
                master_addr: me.master_addr.clone(),
                master_port: Some(me.master_port),
            },
            Some(me),
        ),
    };
    let request = LaunchRequest {
        experiment,
        canonical,
        hash,
        run_dir,
        resume: resume.is_some(),
        start_over: req.resume_if_exists,
        layout,
        quiet: req.quiet,
        origin: job.origin(),
        gloo_interfaces: job.gloo_interfaces,
        job_ids: job.job_ids,
    };
    match one_rank {
        Some(me) => external_rank(request, &me),
        None => launch(&request),
    }
}

/// What `tandem validate` finds wrong with this machine for the run without building anything
/// (an interpreter that is not there, CUDA not compiled in) is a usage error before any rank
/// starts (exit 2), as a config mistake is.
fn refuse_what_this_machine_lacks(resolved: &tandem_config::Resolved) -> Result<()> {
    let lacks: tandem_config::Diagnostics = host::findings(resolved, false)
        .into_iter()
        .filter(|d| d.severity() == tandem_config::Severity::Error)
        .collect();
    if lacks.is_empty() {
        return Ok(());
    }
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    Err(UsageError(lacks.render(color).trim_end().to_string()).into())
}

/// The resumed directory ([`resume_dir`]) or `--run-dir`; else the one [`job_env::RunDirName`] says: in a job
/// of several processes, one they all name alike without talking to each other.
fn run_dir_for(
    req: &TrainRequest,
    resume: Option<&PathBuf>,
    name: &str,
    hash: &str,
    job: &job_env::JobEnv,
) -> PathBuf {
    if let Some(dir) = resume.or(req.run_dir.as_ref()) {
        return dir.clone();
    }
    let base = PathBuf::from("runs").join(name);
    match &job.run_dir {
        job_env::RunDirName::Fresh => default_run_dir(name),
        job_env::RunDirName::Job(id) => base.join(id),
        job_env::RunDirName::ConfigHash => base.join(format!("job-{}", &hash[..12])),
    }
}

/// The run directory a resume continues, or None for a new run: `--resume DIR`, or under
/// `--resume-if-exists` the `--run-dir`, when it holds a checkpoint.
fn resume_dir(req: &TrainRequest) -> Result<Option<PathBuf>> {
    if !req.resume_if_exists {
        if let Some(dir) = &req.resume {
            crate::train::checkpoint::must_exist(dir)?;
        }
        return Ok(req.resume.clone());
    }
    if req.resume.is_some() {
        return Err(UsageError(
            "--resume-if-exists goes with FILE and --run-dir DIR, not with --resume".into(),
        )
        .into());
    }
    let Some(dir) = &req.run_dir else {
        return Err(UsageError(
            "--resume-if-exists needs --run-dir DIR: the directory a requeued job continues".into(),
        )
        .into());
    };
    // A population continues when its members checkpointed (member 0 stands for all).
    let home = crate::train::checkpoint::checkpointing_dirs(dir);
    let has_checkpoint = match home.first() {
        Some(run) => !crate::train::checkpoint::newest_first(run)?.is_empty(),
        None => false,
    };
    Ok(has_checkpoint.then(|| dir.clone()))
}

/// A resume runs the config of the run it continues, its newest readable checkpoint's (a
/// population's: its run directory's `resolved.kdl`, once member 0 holds a checkpoint), give or
/// take the world size (`devices`) and where it stops (`train.max-steps`, which no schedule
/// reads). Anything else (an edited `resolved.kdl`, a `--set`, another FILE under
/// `--resume-if-exists`) is refused, saying what differs, unless `allow` (rank 0 records the
/// change once the resume has succeeded; not for a population, whose members' configs derive
/// from its own).
fn check_resume_config(
    dir: &Path,
    now: &tandem_config::Experiment,
    now_hash: &str,
    canonical: &str,
    allow: bool,
) -> Result<()> {
    let population = now.population.members.is_some();
    let (mut run, against) = match population {
        true => population_config(dir)?,
        false => checkpoint_config(dir)?,
    };
    run.devices = now.devices.clone();
    run.train.max_steps = now.train.max_steps;
    if (allow && !population) || tandem_config::config_hash(&run) == now_hash {
        return Ok(());
    }
    let changes =
        crate::train::checkpoint::config_difference(&tandem_config::canonical_kdl(&run), canonical);
    let allowing = match population {
        true => String::new(),
        false => format!(
            ", or pass --allow-config-change to continue under this config (recorded in {})",
            dir.join("config-changes.log").display()
        ),
    };
    Err(UsageError(format!(
        "cannot resume {}: the config differs from {against}:\n{}\n\
         help: resume it as it was (only devices and train.max-steps may change), start a new run \
         in another --run-dir{allowing}",
        dir.display(),
        changes
            .iter()
            .map(|c| format!("    {c}"))
            .collect::<Vec<_>>()
            .join("\n"),
    ))
    .into())
}

/// The config a run's newest readable checkpoint was written with, and how to name it.
fn checkpoint_config(dir: &Path) -> Result<(tandem_config::Experiment, String)> {
    use crate::train::checkpoint;
    // A damaged one is skipped here in silence: the ranks warn when they skip it too.
    let mut damaged = Vec::new();
    for path in checkpoint::newest_first(dir)? {
        match checkpoint::load(&path) {
            Ok(ckpt) => {
                let place = path.display().to_string();
                let run = tandem_config::parse_stored(&ckpt.resolved_config, &place)
                    .map_err(anyhow::Error::msg)?;
                return Ok((
                    run,
                    format!("the one its checkpoint {place} was written with"),
                ));
            }
            Err(e) => damaged.push(format!("{e:#}")),
        }
    }
    bail!(
        "{} holds no readable checkpoint:\n{}",
        dir.display(),
        damaged.join("\n")
    )
}

/// A population's config (its run directory's `resolved.kdl`: its members' checkpoints hold
/// their own), once every member holds a readable checkpoint to continue from.
fn population_config(dir: &Path) -> Result<(tandem_config::Experiment, String)> {
    use crate::train::checkpoint;
    let stored = dir.join("resolved.kdl");
    let text = std::fs::read_to_string(&stored)
        .with_context(|| format!("reading {}", stored.display()))?;
    let place = stored.display().to_string();
    let run = tandem_config::parse_stored(&text, &place).map_err(anyhow::Error::msg)?;
    for k in 0..run.population.members.unwrap_or(1) {
        let member = dir.join("members").join(k.to_string());
        let newest = checkpoint::newest_first(&member)?;
        if !newest.iter().any(|p| checkpoint::load(p).is_ok()) {
            bail!(
                "{} holds no readable checkpoint of member {k}",
                member.display()
            );
        }
    }
    Ok((run, format!("the population's ({place})")))
}

/// The experiment the command line names (a file, stdin, or a resumed run's `resolved.kdl`, with
/// `--set` and `--max-steps` applied), resolved once, and its canonical text: the one form any
/// rank is handed.
pub fn resolve_canonical(req: &TrainRequest) -> Result<(String, tandem_config::Resolved)> {
    let mut sets = req.sets.clone();
    if let Some(n) = req.max_steps {
        sets.push(format!("train.max-steps={n}"));
    }
    let source = match (&req.resume, &req.file) {
        (Some(run_dir), None) => tandem_config::Source::Path(run_dir.join("resolved.kdl")),
        (Some(_), Some(_)) => {
            return Err(UsageError(
                "--resume continues a run with its own config; give no FILE with it".into(),
            )
            .into());
        }
        (None, Some(f)) if f == "-" => tandem_config::Source::Stdin(
            tandem_config::read_capped(std::io::stdin())
                .context("cannot read the experiment from standard input")?,
        ),
        (None, Some(f)) => tandem_config::Source::Path(PathBuf::from(f)),
        (None, None) => {
            return Err(UsageError("give an experiment FILE or --resume RUN_DIR".into()).into());
        }
    };
    if let Some(dir) = &req.resume
        && !dir.join("resolved.kdl").is_file()
    {
        return Err(UsageError(format!(
            "{} is not a tandem run directory (it has no resolved.kdl)",
            dir.display()
        ))
        .into());
    }
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A config mistake is a usage error (exit code 2, `train --help`): nothing has run.
    let resolved = resolve_here(&source, &sets, req.nnodes)
        .map_err(|d| UsageError(d.render(color).trim_end().to_string()))?;
    // What runs but not as written (e.g. more steps than asked) is said before it runs.
    eprint!("{}", resolved.warnings.render(color));
    Ok((tandem_config::canonical_kdl(&resolved.experiment), resolved))
}

/// The memory check again, for the ranks this node actually runs: the resolve knew the node
/// count only from `--nnodes`, and counted one rank a machine without it. The resolved
/// experiment is checked as it is; nothing is resolved again.
fn check_memory_for_ranks_here(
    resolved: &tandem_config::Resolved,
    plan: &job_env::JobPlan,
    world: usize,
) -> Result<()> {
    let here = match plan {
        job_env::JobPlan::Spawn(layout) => world / layout.nnodes.max(1),
        job_env::JobPlan::Rank(me) => me.local_world,
    };
    if here <= 1 {
        return Ok(());
    }
    let Some(machine) = tandem_config::Machine::detect(Some(world.div_ceil(here))) else {
        return Ok(());
    };
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    resolved
        .fits(&machine)
        .map_err(|d| UsageError(d.render(color).trim_end().to_string()).into())
}

/// Resolves for this machine: an experiment whose ranks here (its world over `nnodes` machines;
/// one rank when that is not known yet) cannot fit in the available memory is refused before
/// anything is allocated.
fn resolve_here(
    source: &tandem_config::Source,
    sets: &[String],
    nnodes: impl Into<Option<usize>>,
) -> Result<tandem_config::Resolved, tandem_config::Diagnostics> {
    match tandem_config::Machine::detect(nnodes.into()) {
        Some(machine) => tandem_config::resolve_on(source, sets, &machine),
        None => tandem_config::resolve(source, sets),
    }
}

/// This process is rank `me.rank` of a job an external launcher (torchrun, Slurm's srun) started:
/// every rank is its own process with the same command line, so each resolves the source
/// itself, and the rendezvous refuses ranks whose canonical texts (their hashes) differ. From
/// the text on, it is a spawned worker: [`worker::run_with_config`], which parses the text
/// again, checks this rank's device against it and runs.
fn external_rank(req: LaunchRequest, me: &job_env::OneRank) -> Result<ExitCode> {
    let device = req
        .experiment
        .devices
        .get(me.rank)
        .map(|d| d.to_string())
        .with_context(|| {
            format!(
                "rank {} but the experiment lists {} device(s)",
                me.rank,
                req.experiment.job_ranks()
            )
        })?;
    let credential =
        credential::Credential::for_external_rank(&me.master_addr, me.master_port, &req.job_ids);
    let _hold = if me.rank == 0 {
        prepare_run_dir(&req)?
    } else {
        refuse_earlier_run_before_rendezvous(&req)?;
        None
    };
    let args = worker::WorkerArgs {
        rank: me.rank,
        world_size: me.world,
        local_rank: me.local_rank,
        local_world_size: me.local_world,
        device,
        master_addr: me.master_addr.clone(),
        master_port: me.master_port,
        run_dir: req.run_dir,
        resume: req.resume,
        quiet: req.quiet,
        origin: req.origin,
        gloo_interfaces: req.gloo_interfaces,
    };
    Ok(worker::run_with_config(args, &req.canonical, credential))
}

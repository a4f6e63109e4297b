//! One rank's process: reads the resolved config from stdin (its only input besides its rank and
//! device), binds its device before any tensor exists, sizes its thread pools, joins the process
//! group and runs the trainer. Any failure is written to `logs/rank-N.error` for the launcher
//! to print, then the process exits non-zero.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::dist::{Backend, GroupOptions, ProcessGroup};
use crate::train::{Outcome, RankContext};

/// What a worker is told on its command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub local_world_size: usize,
    pub device: String,
    pub master_addr: String,
    pub master_port: u16,
    pub run_dir: PathBuf,
    pub resume: bool,
    pub quiet: bool,
}

/// Runs a worker whose resolved config arrives on stdin.
pub fn main(args: WorkerArgs) -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return fail(
            &args,
            anyhow!("cannot read the resolved config from stdin: {e}"),
        );
    }
    run_with_config(args, &text)
}

/// Runs a worker on the canonical config text (also used when an external launcher such as
/// torchrun started this process with RANK/WORLD_SIZE set).
pub fn run_with_config(args: WorkerArgs, canonical: &str) -> ExitCode {
    match run(&args, canonical) {
        Ok(Outcome::Finished) => ExitCode::SUCCESS,
        Ok(Outcome::Interrupted) => ExitCode::from(super::INTERRUPTED),
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
    let _ = super::write_atomic(&path, message.as_bytes());
    if !crate::logging::is_initialised() {
        eprintln!("[rank {}] error: {message}", args.rank);
    }
    ExitCode::FAILURE
}

fn run(args: &WorkerArgs, canonical: &str) -> Result<Outcome> {
    let experiment = tandem_config::parse_canonical(canonical).map_err(|d| {
        anyhow!(
            "the resolved config handed to this rank does not parse:\n{}",
            d.render(false)
        )
    })?;
    let hash = tandem_config::config_hash(&experiment);
    if args.world_size != experiment.world_size() {
        bail!(
            "this rank was started for a world of {} ranks, but the config lists {} device(s)",
            args.world_size,
            experiment.world_size()
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
    // Lesson 2 of DESIGN.md: the device is bound before any tensor exists.
    let device = bind_device(&args.device)?;

    crate::logging::init_worker(&args.run_dir, args.rank, &experiment.log, args.quiet)?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = match experiment.threads {
        tandem_config::Threads::PerRank(n) => n,
        tandem_config::Threads::Auto => (cores / args.local_world_size.max(1)).max(1),
    };
    tch::set_num_threads(threads as i32);
    tch::set_num_interop_threads(1);
    tracing::info!(
        "rank {}/{} on {} ({} thread(s)), config {}",
        args.rank,
        args.world_size,
        args.device,
        threads,
        &hash[..12]
    );

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }

    let pg = ProcessGroup::connect(&GroupOptions {
        rank: args.rank,
        world_size: args.world_size,
        master_addr: args.master_addr.clone(),
        master_port: args.master_port,
        rendezvous_timeout: Duration::from_secs_f64(experiment.sync.rendezvous_timeout_s),
        collective_timeout: Duration::from_secs_f64(experiment.sync.collective_timeout_s),
        backend: Backend::for_device(device),
        identity: vec![
            ("config-hash".into(), hash.clone()),
            ("tandem-version".into(), env!("CARGO_PKG_VERSION").into()),
        ],
    })
    .context("joining the other ranks")?;

    let outcome = crate::train::run(RankContext {
        experiment,
        hash,
        device,
        pg,
        run_dir: args.run_dir.clone(),
        resume: args.resume,
        threads,
        stop_requested: Box::new(move || stop.load(Ordering::SeqCst)),
    })?;
    Ok(outcome)
}

/// Turns the device string into a tch device and makes it this process's current device.
fn bind_device(device: &str) -> Result<tch::Device> {
    match tandem_config::Device::parse(device) {
        Some(tandem_config::Device::Cpu) => Ok(tch::Device::Cpu),
        Some(tandem_config::Device::Cuda(index)) => {
            if !crate::dist::compiled_backends().contains(&"nccl") {
                bail!("device {device} needs a tandem built with `--features cuda`");
            }
            if !tch::Cuda::is_available() {
                bail!("device {device} was requested but CUDA is not usable on this machine");
            }
            let count = tch::Cuda::device_count();
            if index as i64 >= count {
                bail!("device {device} does not exist: this machine has {count} CUDA device(s)");
            }
            crate::dist::set_cuda_device(index as usize)?;
            Ok(tch::Device::Cuda(index as usize))
        }
        None => bail!("unknown device {device:?} (expected cpu or cuda:N)"),
    }
}

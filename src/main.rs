//! The `tandem` command line: parses arguments and hands each subcommand to the library.
//! `tandem FILE` is `tandem train FILE`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// mimalloc, built with `override`, also defines the C `malloc` family in this executable, so
// libtorch's tensor and autograd allocations (one or more per operator) bind to it instead of
// glibc's malloc: about 14% of a CartPole PPO run's CPU time (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "tandem",
    about = "Data-parallel reinforcement learning experiments declared in KDL",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Print the version, the libtorch version, the collective backends and CUDA availability.
    #[arg(short = 'V', long = "version")]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
    /// `tandem FILE [options]` trains FILE, like `tandem train FILE`.
    #[command(flatten)]
    train: Option<tandem::launch::TrainRequest>,
}

#[derive(Subcommand)]
enum Command {
    /// Train an experiment: resolve it once, start one worker per device, supervise them.
    #[command(after_help = TRAIN_EXIT_CODES)]
    Train(tandem::launch::TrainRequest),
    /// Check experiment files and report every problem, with the line it is on.
    #[command(after_help = CHECK_EXIT_CODES)]
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// Override a value in every FILE: PATH=VALUE, as `train --set` does.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Also build one environment of each gymnasium experiment (starting its interpreter,
        /// a few seconds) and check its action space against the algorithm.
        #[arg(long)]
        deep: bool,
        /// Output format of the diagnostics.
        #[arg(long, value_parser = ["text", "json"], default_value = "text")]
        format: String,
    },
    /// Print the fully resolved (canonical) config, or its hash.
    #[command(after_help = CHECK_EXIT_CODES)]
    Resolve {
        #[arg(value_name = "FILE")]
        file: String,
        /// Override a value: PATH=VALUE, e.g. `algorithm.lr=0.001` (checked like file values).
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[arg(long, value_parser = ["kdl", "json"], default_value = "kdl")]
        format: String,
        /// Print only the sha256 of the canonical config.
        #[arg(long)]
        hash: bool,
    },
    /// Train the variants of an experiment (files, or a grid of --set values and --seeds),
    /// each in its own run directory, several at a time; print one table of their final scores
    /// and write a CSV of their score curves and a PNG plot of them.
    #[command(after_help = SWEEP_EXIT_CODES)]
    Sweep(tandem::sweep::SweepRequest),
    /// Plot the score curves of runs (run directories, or folders of them such as a sweep's):
    /// mean over seeds with a 95% interval per group of runs that differ only in seed.
    #[command(after_help = TOOL_EXIT_CODES)]
    Plot(tandem::sweep::PlotArgs),
    /// Evaluate a checkpoint with its own resolved config, optionally writing a GIF.
    #[command(after_help = TOOL_EXIT_CODES)]
    Play(tandem::play::PlayArgs),
    /// Write a checkpoint's policy as a TorchScript module (observation normaliser included)
    /// that `torch.jit.load` runs without tandem.
    #[command(after_help = TOOL_EXIT_CODES)]
    Export(tandem::export::ExportArgs),
    /// Internal: times the DDP benchmark's PPO update (Nature CNN) on one rank of DEVICE, one
    /// JSON line per batch size (for machines without cargo: scripts/device-check).
    #[command(name = "__bench-update", hide = true)]
    BenchUpdate {
        /// cpu or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Rows per update; one measurement per value.
        #[arg(long = "rows", value_delimiter = ',', default_value = "256")]
        rows: Vec<i64>,
        /// The experiment whose PPO settings the update uses.
        #[arg(long, default_value = "scripts/bench/atari-breakout-ppo.kdl")]
        config: PathBuf,
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        #[arg(long, default_value_t = 12)]
        updates: usize,
    },
    /// Internal: one rank, started by the launcher (the resolved config arrives on stdin).
    #[command(name = "__worker", hide = true)]
    Worker(tandem::launch::worker::WorkerArgs),
}

/// `tandem train --help`'s closing words: what its exit status means (docs/distributed.md,
/// "Preemption").
const TRAIN_EXIT_CODES: &str = "\
Exit status:
  0    finished
  1    failed (a rank's error is printed)
  2    a mistake on the command line or in the config; nothing ran
  75   stopped by SIGTERM or SIGUSR1 (a scheduler's notice, e.g. Slurm's --signal) after the
       update and its checkpoint: requeue and run the same command with --resume-if-exists
  130  stopped by Ctrl-C after the update and its checkpoint, or at once by a second signal";

/// `tandem sweep --help`'s closing words.
const SWEEP_EXIT_CODES: &str = "\
Exit status:
  0    every variant finished
  1    a variant failed, or the sweep itself did (the table says which)
  2    a mistake on the command line, in a variant's config or in the --dir's sweep.json;
       nothing ran
  75   stopped by SIGTERM or SIGUSR1 after the running variants' update and checkpoint, or a
       variant stopped on its own: continue with --resume DIR (or the same command again)
  130  stopped by Ctrl-C after the running variants' update and checkpoint, or at once by a
       second signal

The variants run in process groups of their own: a stop signal reaches them through the
sweep, and they stop (with a checkpoint) when the sweep's process ends, kill -9 included.";

/// `tandem validate` and `resolve --help`'s closing words.
const CHECK_EXIT_CODES: &str = "\
Exit status:
  0    valid
  1    a file is invalid (every problem is printed)
  2    a mistake on the command line";

/// `tandem play`, `export` and `plot --help`'s closing words.
const TOOL_EXIT_CODES: &str = "\
Exit status:
  0    done
  1    failed (the error is printed)
  2    a mistake on the command line";

fn code(c: i32) -> ExitCode {
    ExitCode::from(c.clamp(0, 255) as u8)
}

fn main() {
    tandem::alloc::keep_freed_memory();
    tandem::dist::raise_descriptor_limit();
    let code = run(Cli::parse());
    exit_without_teardown(code)
}

/// Ends the process with `code` once the command has returned, so everything of ours is dropped
/// (files written and closed, ranks and interpreters ended): flushes the standard streams and
/// leaves through `_exit`, skipping the static destructors of libtorch, which take about 50 ms per
/// process to free its operator registry, memory the kernel reclaims anyway (the launcher and a
/// worker each paid it at the end of every run; docs/performance.md, "Training" 1).
fn exit_without_teardown(code: ExitCode) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let number = (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .unwrap_or(1);
    // SAFETY: fflush(NULL) flushes every C stream (libtorch's messages go through them) and
    // touches nothing of ours; _exit(2) ends the process without returning.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(i32::from(number))
    }
}

fn run(cli: Cli) -> ExitCode {
    if cli.version {
        print!("{}", tandem::version::report());
        return ExitCode::SUCCESS;
    }
    let color = std::io::stderr().is_terminal();
    match (cli.command, cli.train) {
        (
            Some(Command::Validate {
                files,
                sets,
                deep,
                format,
            }),
            _,
        ) => {
            let host =
                |resolved: &tandem_config::Resolved| tandem::launch::host::check(resolved, deep);
            let (text, c) =
                tandem_config::cli::validate_with(&files, &sets, format == "json", color, &host);
            if format == "json" || c == 0 {
                print!("{text}");
            } else {
                eprint!("{text}");
            }
            code(c)
        }
        (
            Some(Command::Resolve {
                file,
                sets,
                format,
                hash,
            }),
            _,
        ) => {
            let (out, err, c) =
                tandem_config::cli::resolve(&file, &sets, format == "json", hash, color);
            print!("{out}");
            eprint!("{err}");
            code(c)
        }
        (Some(Command::Train(args)), _) | (None, Some(args)) => train(args),
        (Some(Command::Play(args)), _) => report(tandem::play::run(&args)),
        (Some(Command::Export(args)), _) => report(tandem::export::run(&args)),
        (Some(Command::Sweep(request)), _) => report(tandem::sweep::run(&request)),
        (Some(Command::Plot(args)), _) => report(tandem::sweep::plot_runs(&args)),
        (
            Some(Command::BenchUpdate {
                device,
                rows,
                config,
                warmup,
                updates,
            }),
            _,
        ) => report(
            tandem::train::update_bench::run_cli(&device, &rows, &config, warmup, updates)
                .map(|()| ExitCode::SUCCESS),
        ),
        (Some(Command::Worker(args)), _) => tandem::launch::worker::main(args),
        (None, None) => {
            eprintln!(
                "tandem: nothing to do; try `tandem experiments/cartpole.kdl` or `tandem --help`"
            );
            ExitCode::from(2)
        }
    }
}

/// A subcommand's outcome: its code, or its error printed with exit 2 for the user's mistake
/// ([`tandem::usage::UsageError`]) and 1 for anything else.
fn report(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tandem: error: {e:#}");
            ExitCode::from(match e.downcast_ref::<tandem::usage::UsageError>() {
                Some(_) => 2,
                None => 1,
            })
        }
    }
}

fn train(request: tandem::launch::TrainRequest) -> ExitCode {
    match tandem::launch::train(request) {
        Ok(c) => c,
        Err(e) => {
            // Config errors arrive rendered (with their spans) and speak for themselves.
            eprintln!("{e:#}");
            ExitCode::from(match e.downcast_ref::<tandem::launch::UsageError>() {
                Some(_) => 2,
                None => 1,
            })
        }
    }
}

//! Logging for workers and the launcher: every rank writes `logs/rank-N.log` in the run
//! directory; only rank 0 talks on the console (a progress bar on a terminal, plain lines
//! otherwise), and other ranks reach the console only with warnings and errors, prefixed
//! `[rank N]`, so nothing is printed once per rank.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use tandem_config::Console;
use tracing::Level;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::time::UtcTime;
use tracing_subscriber::prelude::*;

static INITIALISED: OnceLock<Console> = OnceLock::new();

/// The target of events meant for the rank's log only: what explains a run afterwards (its
/// process setting, routine checks, the progress lines between two console lines) but asks
/// nothing of the user at the console. `tracing::info!(target: LOG_ONLY, ...)`.
pub const LOG_ONLY: &str = "tandem::log_only";

/// The console's filter: events at `level` or more severe, except [`LOG_ONLY`] information.
fn console_filter(
    level: Level,
) -> tracing_subscriber::filter::FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    tracing_subscriber::filter::filter_fn(move |meta| {
        *meta.level() <= level && (meta.target() != LOG_ONLY || *meta.level() <= Level::WARN)
    })
}

pub fn is_initialised() -> bool {
    INITIALISED.get().is_some()
}

/// Sets up this rank's logging and returns what its console shows, which the trainer is handed
/// (`crate::train::RankContext::console`).
pub fn init_worker(
    run_dir: &Path,
    rank: usize,
    log: &tandem_config::Log,
    quiet: bool,
) -> Result<Console> {
    let logs = run_dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("rank-{rank}.log")))
        .with_context(|| format!("cannot open the log file in {}", logs.display()))?;
    let file_layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_target(false)
        .with_timer(UtcTime::rfc_3339())
        .with_writer(std::sync::Mutex::new(file))
        .with_filter(LevelFilter::INFO);

    let terminal = std::io::stderr().is_terminal();
    // What this rank's console shows: the config's choice, except that only rank 0 talks and a
    // progress bar needs a terminal.
    let kind = if rank != 0 || quiet || log.console == Console::Quiet {
        Console::Quiet
    } else if log.console == Console::Progress && terminal {
        Console::Progress
    } else {
        Console::Plain
    };
    let console_level = if kind == Console::Quiet {
        Level::WARN
    } else {
        Level::INFO
    };
    let prefix = if rank == 0 {
        String::new()
    } else {
        format!("[rank {rank}] ")
    };

    let registry = tracing_subscriber::registry().with(file_layer);
    if kind == Console::Progress {
        let bars = tracing_indicatif::IndicatifLayer::new();
        let console = tracing_subscriber::fmt::layer()
            .with_ansi(terminal)
            .with_target(false)
            .without_time()
            .with_writer(bars.get_stderr_writer())
            .with_filter(console_filter(console_level));
        registry
            .with(console)
            .with(bars)
            .try_init()
            .context("logging was initialised twice")?;
    } else {
        let console = tracing_subscriber::fmt::layer()
            .with_ansi(terminal)
            .with_target(false)
            .without_time()
            .with_level(rank != 0 || kind == Console::Quiet)
            .fmt_fields(tracing_subscriber::fmt::format::DefaultFields::new())
            .map_event_format(|f| f)
            .with_writer(move || PrefixWriter {
                prefix: prefix.clone(),
                inner: std::io::stderr(),
            })
            .with_filter(console_filter(console_level));
        registry
            .with(console)
            .try_init()
            .context("logging was initialised twice")?;
    }
    let _ = INITIALISED.set(kind);
    Ok(kind)
}

/// Prefixes every console line of a rank other than 0 with `[rank N]`.
struct PrefixWriter {
    prefix: String,
    inner: std::io::Stderr,
}

impl std::io::Write for PrefixWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.prefix.is_empty() {
            return self.inner.write(buf);
        }
        let mut out = Vec::with_capacity(buf.len() + self.prefix.len());
        let mut at_line_start = true;
        for &b in buf {
            if at_line_start {
                out.extend_from_slice(self.prefix.as_bytes());
            }
            out.push(b);
            at_line_start = b == b'\n';
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

//! A sweep's members as processes: each variant's `tandem train`, started in a process group of
//! its own and told to stop (SIGTERM: finish the update, checkpoint, exit 75) when the sweep's
//! process ends, however it ends (kill -9 included), so no member outlives its sweep. The sweep's
//! own stop signals (Ctrl-C, SIGTERM, SIGUSR1) are passed on to the running members, each signal
//! once, as `tandem train`'s launcher passes them to its ranks: the first asks them to
//! checkpoint and stop, a second to stop at once; no member starts after the first. What each
//! member ended with is its [`Outcome`]; `sweep.txt` is rewritten whenever one ends, so the
//! table of what finished survives a sweep that is killed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Outcome, Sweep, Variant, called, read_summary};
use crate::launch::{INTERRUPTED, PREEMPTED};

/// How the sweep starts its members.
pub struct Starting {
    /// Members trained at once.
    pub parallel: usize,
    pub quiet: bool,
}

/// What the members ended with, and the stop signal that ended the sweep early, if one did.
pub struct Ended {
    pub outcomes: Vec<Outcome>,
    pub stopped_by: Option<libc::c_int>,
}

/// Trains every member whose outcome is [`Outcome::NotStarted`], `parallel` at a time, until all
/// have ended or a stop signal came and the running ones have stopped. `progress` is called with
/// the outcomes so far whenever a member ends.
pub fn train_all(
    sweep: &Sweep,
    starting: &Starting,
    mut outcomes: Vec<Outcome>,
    mut progress: impl FnMut(&[Outcome]) -> Result<()>,
) -> Result<Ended> {
    let exe = std::env::current_exe().context("finding the tandem executable")?;
    let signals = crate::launch::install_signal_counter()?;
    let mut queue: Vec<usize> = (0..outcomes.len())
        .filter(|&i| outcomes[i] == Outcome::NotStarted)
        .rev()
        .collect();
    let mut running: Vec<(usize, Child)> = Vec::new();
    let mut forwarded = 0;
    loop {
        if signals.received() > forwarded {
            if forwarded == 0 {
                say_stopping(sweep, signals.first(), running.len());
            }
            for (_, child) in &running {
                crate::launch::signal(child.id(), signals.first());
            }
            forwarded = signals.received();
        }
        while forwarded == 0 && running.len() < starting.parallel {
            let Some(i) = queue.pop() else { break };
            outcomes[i] = match start(&exe, sweep, i, starting) {
                Ok(child) => {
                    running.push((i, child));
                    Outcome::Running
                }
                Err(e) => Outcome::Failed(format!("{e:#}")),
            };
        }
        let before = running.len();
        running = reap(sweep, running, &mut outcomes);
        if running.len() < before {
            progress(&outcomes)?;
        }
        if running.is_empty() && (forwarded > 0 || queue.is_empty()) {
            break;
        }
        signals.wait(Duration::from_millis(200));
    }
    Ok(Ended {
        outcomes,
        stopped_by: (forwarded > 0).then(|| signals.first()),
    })
}

/// Starts member `i`'s `tandem train`.
fn start(exe: &Path, sweep: &Sweep, i: usize, starting: &Starting) -> Result<Child> {
    let variant = &sweep.variants[i];
    eprintln!(
        "{}: variant {}/{} ({}) {}",
        called(&sweep.name),
        i + 1,
        sweep.variants.len(),
        variant.name,
        if sweep.continues {
            "continues (or starts)"
        } else {
            "starts"
        }
    );
    let mut train = train_command(exe, sweep, variant, starting)?;
    crate::launch::own_group_ending_with_parent(&mut train, libc::SIGTERM);
    train.spawn().context("could not start tandem train")
}

fn train_command(
    exe: &Path,
    sweep: &Sweep,
    variant: &Variant,
    starting: &Starting,
) -> Result<Command> {
    let mut train = Command::new(exe);
    train
        .arg("train")
        .arg(&variant.file)
        .arg("--run-dir")
        .arg(sweep.dir.join(&variant.name))
        .stdin(Stdio::null());
    for set in &variant.sets {
        train.arg("--set").arg(set);
    }
    if let Some(n) = sweep.max_steps {
        train.arg("--max-steps").arg(n.to_string());
    }
    // A continued sweep continues each member from its checkpoint, or starts it where it wrote
    // none; the record guarantees the config is the one it started with.
    if sweep.continues {
        train.arg("--resume-if-exists");
    }
    if starting.quiet {
        train.arg("--quiet");
    }
    if starting.parallel > 1 {
        let path = sweep.dir.join(format!("{}.console.log", variant.name));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        train.stdout(file.try_clone()?).stderr(file);
    }
    Ok(train)
}

/// Records the outcome of every member that ended; returns those still running.
fn reap(
    sweep: &Sweep,
    running: Vec<(usize, Child)>,
    outcomes: &mut [Outcome],
) -> Vec<(usize, Child)> {
    let mut still = Vec::new();
    for (i, mut child) in running {
        let outcome = match child.try_wait() {
            Ok(None) => {
                still.push((i, child));
                continue;
            }
            Ok(Some(status)) => outcome_of(&sweep.dir.join(&sweep.variants[i].name), status),
            Err(e) => Outcome::Failed(format!("lost tandem train: {e}")),
        };
        eprintln!(
            "{}: variant {} ({}) {}",
            called(&sweep.name),
            i + 1,
            sweep.variants[i].name,
            match &outcome {
                Outcome::Finished(_) => "finished".to_string(),
                Outcome::Stopped(_) => "stopped; it continues from its checkpoint".to_string(),
                Outcome::Failed(why) => format!("failed: {why}"),
                Outcome::Running | Outcome::NotStarted => unreachable!("a member that ended"),
            }
        );
        outcomes[i] = outcome;
    }
    still
}

/// A member's outcome from its exit status and its `summary.json`.
fn outcome_of(run_dir: &Path, status: std::process::ExitStatus) -> Outcome {
    match status.code() {
        Some(0) => read_summary(run_dir),
        Some(code) if code == PREEMPTED as i32 || code == INTERRUPTED as i32 => {
            match read_summary(run_dir) {
                stopped @ Outcome::Stopped(_) => stopped,
                // Stopped at once (a second signal) before it wrote a summary of this attempt.
                _ => Outcome::Stopped(None),
            }
        }
        _ => Outcome::Failed(format!("tandem train {status}")),
    }
}

/// Says what the sweep does on its first stop signal.
fn say_stopping(sweep: &Sweep, sig: libc::c_int, running: usize) {
    let what = match sig {
        libc::SIGINT => "interrupted",
        libc::SIGUSR1 => "SIGUSR1 received",
        _ => "SIGTERM received",
    };
    eprintln!(
        "{}: {what}; the {running} running variant(s) finish their update and write a \
         checkpoint, and no other starts (a second signal stops them at once); continue with \
         `tandem sweep --resume {}`",
        called(&sweep.name),
        sweep.dir.display()
    );
}

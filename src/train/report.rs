//! What a run reports: rank 0's TensorBoard writer (opened with the resolved config as text),
//! the run's final numbers in `summary.json`, and the CPU time they are measured with.

use anyhow::{Context, Result};

use tandem_config::Experiment;
use tandem_summary::SummaryWriter;

/// Rank 0's TensorBoard writer (None elsewhere, or when the config turns TensorBoard off), with
/// the resolved config as text at the run's first step.
pub fn open_summaries(
    exp: &Experiment,
    rank: usize,
    run_dir: &std::path::Path,
    hash: &str,
    step: u64,
) -> Result<Option<SummaryWriter>> {
    if rank != 0 || !exp.log.tensorboard {
        return Ok(None);
    }
    let mut w = SummaryWriter::create(&run_dir.join("tensorboard"))
        .context("cannot create the TensorBoard event file")?;
    w.text(
        "config/resolved",
        step as i64,
        &format!(
            "```\n{}\n```\nsha256 {hash}",
            tandem_config::canonical_kdl(exp)
        ),
    )?;
    Ok(Some(w))
}

/// User plus system CPU time this process has used so far, over all its threads (libtorch's,
/// the environment pool's, Gloo's): what a benchmark on a shared machine compares, since it does
/// not depend on what else the machine runs.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero bytes are a valid
    // value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives until the call returns.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The final numbers of a run, for scripts and CI, written by rank 0 to `summary.json`.
pub struct RunSummary<'a> {
    /// Updates (on-policy) or iterations (off-policy) done.
    pub update: u64,
    pub global_step: u64,
    pub recent: &'a super::metrics::RecentEpisodes,
    /// Steps of this process's training loop and their wall time (a resumed run counts its own).
    pub loop_steps: u64,
    pub loop_seconds: f64,
    /// CPU time of this process, all threads, over the same loop ([`process_cpu_seconds`]).
    pub loop_cpu_seconds: f64,
    pub hash: &'a str,
    pub world: usize,
    pub interrupted: bool,
    /// How many times the run was resumed.
    pub restarts: u64,
    /// Learner-specific fields, already JSON values.
    pub extra: Vec<(&'static str, String)>,
}

pub fn write_summary(run_dir: &std::path::Path, s: &RunSummary) -> Result<()> {
    let json = |v: Option<f64>| v.map(|r| format!("{r}")).unwrap_or_else(|| "null".into());
    let mut fields = vec![
        // The game's score first: what CleanRL and Stable-Baselines3 report.
        ("last_20_score_mean", json(s.recent.mean_score_last(20))),
        ("recent_score_mean", json(s.recent.mean_score())),
        ("update", s.update.to_string()),
        ("global_step", s.global_step.to_string()),
        ("episodes", s.recent.total().to_string()),
        // The returns of the rewards the learner saw (after clip-reward, normalize-reward).
        ("last_20_return_mean", json(s.recent.mean_return_last(20))),
        ("recent_return_mean", json(s.recent.mean_return())),
        // The timing fields measure this attempt: `attempt_steps` steps since the last start
        // (the whole run's `global_step` unless it was resumed).
        ("attempt_steps", s.loop_steps.to_string()),
        ("wall_seconds", format!("{}", s.loop_seconds)),
        (
            "steps_per_second",
            format!("{}", s.loop_steps as f64 / s.loop_seconds.max(1e-9)),
        ),
        ("cpu_seconds", format!("{}", s.loop_cpu_seconds)),
        ("config_hash", format!("\"{}\"", s.hash)),
        ("world_size", s.world.to_string()),
        ("interrupted", s.interrupted.to_string()),
        ("restarts", s.restarts.to_string()),
    ];
    fields.extend(s.extra.iter().cloned());
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    crate::atomic::write_atomic(
        &run_dir.join("summary.json"),
        format!("{{{}}}\n", body.join(", ")).as_bytes(),
    )?;
    Ok(())
}

//! What a run reports: rank 0's summaries (the TensorBoard writer, opened with the resolved
//! config as text, and the same scalars as JSON lines in `scalars.jsonl`), the run's final
//! numbers in `summary.json`, and the CPU time they are measured with.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use tandem_config::Experiment;
use tandem_summary::SummaryWriter;

/// The file beside `tensorboard/` that holds every scalar rank 0 writes, one JSON object a line.
pub const SCALAR_LINES: &str = "scalars.jsonl";

/// Rank 0's records of the run: the TensorBoard event file (when `log.tensorboard`) and
/// [`SCALAR_LINES`] (always: for pandas, or a machine without TensorBoard). Other ranks write
/// neither.
pub struct Summaries {
    events: Option<SummaryWriter>,
    lines: Option<ScalarLines>,
}

impl Summaries {
    /// Rank 0's summaries from `step` on, the resolved config as text at that step. A resumed
    /// run keeps the scalar lines of steps up to `step` and drops the later ones, which the
    /// interrupted attempt wrote after its last checkpoint and this one computes again.
    pub fn open(
        exp: &Experiment,
        rank: usize,
        run_dir: &Path,
        hash: &str,
        (step, resumed): (u64, bool),
    ) -> Result<Summaries> {
        if rank != 0 {
            return Ok(Summaries {
                events: None,
                lines: None,
            });
        }
        let lines = ScalarLines::open(&run_dir.join(SCALAR_LINES), resumed.then_some(step))?;
        let events = if exp.log.tensorboard {
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
            Some(w)
        } else {
            None
        };
        Ok(Summaries {
            events,
            lines: Some(lines),
        })
    }

    /// Whether this rank writes summaries (rank 0 does).
    pub fn written_here(&self) -> bool {
        self.lines.is_some()
    }

    /// `values` at `step`, to the event file and as one line.
    pub fn scalars(&mut self, step: u64, values: &[(&str, f64)]) -> Result<()> {
        if let Some(w) = self.events.as_mut() {
            w.scalars(step as i64, values)?;
        }
        if let Some(lines) = self.lines.as_mut() {
            lines.write(step, values)?;
        }
        Ok(())
    }

    /// The TensorBoard writer, for what only TensorBoard shows (histograms).
    pub fn events(&mut self) -> Option<&mut SummaryWriter> {
        self.events.as_mut()
    }

    pub fn flush(&mut self) -> Result<()> {
        if let Some(w) = self.events.as_mut() {
            w.flush()?;
        }
        Ok(())
    }
}

/// [`SCALAR_LINES`]: `{"step": S, "wall_time": T, "tag": value, ...}` per write, each line one
/// `write` (a killed run leaves whole lines); a value that is not finite is `null`.
struct ScalarLines {
    file: File,
    path: PathBuf,
}

impl ScalarLines {
    /// A new file, or (`kept_to: Some(step)`, a resume) the existing one without its lines of
    /// later steps.
    fn open(path: &Path, kept_to: Option<u64>) -> Result<ScalarLines> {
        let kept = match kept_to {
            Some(step) => lines_up_to(path, step)?,
            None => String::new(),
        };
        crate::atomic::write_atomic(path, kept.as_bytes())?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(ScalarLines {
            file,
            path: path.to_path_buf(),
        })
    }

    fn write(&mut self, step: u64, values: &[(&str, f64)]) -> Result<()> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let wall_time = now.map_or(0.0, |d| d.as_secs_f64());
        let mut text = format!("{{\"step\": {step}, \"wall_time\": {wall_time}");
        for (tag, value) in values {
            // A number that is not finite becomes null, as JSON has no other way to say it.
            let value = serde_json::Value::from(*value);
            text.push_str(&format!(", {}: {value}", serde_json::Value::from(*tag)));
        }
        text.push_str("}\n");
        self.file
            .write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// The lines of `path` (none if it does not exist) whose step is at most `step`; a line that is
/// not a scalar record (a partial last line of a killed run) is dropped.
fn lines_up_to(path: &Path, step: u64) -> Result<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let kept = text.lines().filter(|line| {
        serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["step"].as_u64())
            .is_some_and(|s| s <= step)
    });
    Ok(kept.map(|line| format!("{line}\n")).collect())
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
    pub extra: Vec<(String, String)>,
}

/// A run directory's `resolved.kdl` (the canonical text of the config it runs) and
/// `resolved.sha256` (its hash), each replaced atomically: what the launcher writes for a new
/// run, a resumed run once its ranks have loaded their checkpoint, and a population's member.
pub fn write_resolved(run_dir: &std::path::Path, canonical: &str, hash: &str) -> Result<()> {
    for (name, body) in [
        ("resolved.kdl", canonical.to_string()),
        ("resolved.sha256", format!("{hash}\n")),
    ] {
        let path = run_dir.join(name);
        crate::atomic::write_atomic(&path, body.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

pub fn write_summary(run_dir: &std::path::Path, s: &RunSummary) -> Result<()> {
    let json = |v: Option<f64>| v.map(|r| format!("{r}")).unwrap_or_else(|| "null".into());
    let fields = vec![
        // The game's score first: what CleanRL and Stable-Baselines3 report. `final_score` is
        // the one the console, `tandem sweep` and `tandem plot` report, by the rule named here.
        ("final_score", json(super::metrics::final_score(s.recent))),
        (
            "final_score_episodes",
            super::metrics::final_score_window(s.recent).to_string(),
        ),
        (
            "final_score_rule",
            format!("\"{}\"", super::metrics::FINAL_SCORE_RULE),
        ),
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
    let extra = s.extra.iter().map(|(k, v)| (k.as_str(), v.clone()));
    let body: Vec<String> = fields
        .into_iter()
        .chain(extra)
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    crate::atomic::write_atomic(
        &run_dir.join("summary.json"),
        format!("{{{}}}\n", body.join(", ")).as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(path: &Path) -> Vec<u64> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    /// Lines are JSON with the step first, a value that is not finite null, a tag that needs
    /// escaping escaped; a resume keeps the lines up to its step and drops the later ones and a
    /// partial line a killed run left.
    #[test]
    fn scalar_lines_are_json_and_a_resume_drops_the_lines_after_its_step() {
        let dir = std::env::temp_dir().join(format!("tandem-scalar-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(SCALAR_LINES);
        let mut lines = ScalarLines::open(&path, None).unwrap();
        for step in [0, 10, 20, 30] {
            lines
                .write(step, &[("loss/a", 0.5), ("odd \"tag\"", f64::NAN)])
                .unwrap();
        }
        drop(lines);
        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(text.starts_with("{\"step\": 0, \"wall_time\": "), "{text}");
        assert_eq!(
            (&first["loss/a"], &first["odd \"tag\""]),
            (&0.5.into(), &serde_json::Value::Null)
        );
        std::fs::write(&path, format!("{text}{{\"step\": 40, \"wall")).unwrap();
        let mut resumed = ScalarLines::open(&path, Some(20)).unwrap();
        assert_eq!(steps(&path), [0, 10, 20]);
        resumed.write(25, &[("loss/a", 1.0)]).unwrap();
        assert_eq!(steps(&path), [0, 10, 20, 25]);
        ScalarLines::open(&path, None).unwrap();
        assert_eq!(steps(&path), Vec::<u64>::new(), "a new run starts empty");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

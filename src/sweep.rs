//! `tandem sweep`: the variants of one experiment (seeds, learning rates, devices; each its own
//! experiment file, KDL or JSON) trained one after another, each in its own run directory under
//! one sweep directory, and one table of their final scores: per variant, and per group of
//! variants that differ only in `seed`, the mean with a 95% Student-t interval over the seeds.
//!
//! Every variant is resolved before the first one starts, so a typo in the fifth does not
//! surface hours into the sweep. Each variant runs as its own `tandem train` process (what a
//! user would type), so one failing does not take the others down; its row says so.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

/// `tandem sweep` as the command line states it.
#[derive(Debug, Clone, Default)]
pub struct SweepRequest {
    /// The variants' experiment files, in the order they run.
    pub files: Vec<String>,
    /// The sweep's name: its directory is `runs/<name>/<UTC time>` unless `dir` is given.
    pub name: String,
    pub dir: Option<PathBuf>,
    /// Passed to every variant's `tandem train`.
    pub max_steps: Option<u64>,
    pub quiet: bool,
}

/// One variant, resolved.
#[derive(Debug, Clone)]
pub struct Variant {
    pub file: String,
    pub name: String,
    pub seed: u64,
    /// The canonical text without the name and seed lines: variants with the same key differ
    /// only in their seed, and their scores are averaged together.
    pub group_key: String,
}

/// What one variant's run left in its `summary.json` (or that it left none).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Finished {
        global_step: u64,
        episodes: u64,
        /// `last_20_score_mean`: the mean game score of the run's last 20 episodes.
        final_score: Option<f64>,
    },
    Failed(String),
}

pub fn run(req: &SweepRequest) -> Result<ExitCode> {
    let variants = resolve_all(&req.files)?;
    let dir = req
        .dir
        .clone()
        .unwrap_or_else(|| crate::launch::default_run_dir(&req.name));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = std::env::current_exe().context("finding the tandem executable")?;
    let mut outcomes = Vec::new();
    for (i, variant) in variants.iter().enumerate() {
        let run_dir = dir.join(&variant.name);
        eprintln!(
            "sweep {}: variant {}/{} ({}) in {}",
            req.name,
            i + 1,
            variants.len(),
            variant.name,
            run_dir.display()
        );
        let mut train = Command::new(&exe);
        train
            .arg("train")
            .arg(&variant.file)
            .arg("--run-dir")
            .arg(&run_dir);
        if let Some(n) = req.max_steps {
            train.arg("--max-steps").arg(n.to_string());
        }
        if req.quiet {
            train.arg("--quiet");
        }
        let outcome = match train.status() {
            Ok(status) if status.success() => read_summary(&run_dir),
            Ok(status) => Outcome::Failed(format!("tandem train {status}")),
            Err(e) => Outcome::Failed(format!("could not start tandem train: {e}")),
        };
        outcomes.push(outcome);
    }
    let table = table(&req.name, &dir, &variants, &outcomes);
    crate::atomic::write_atomic(&dir.join("sweep.txt"), table.as_bytes())?;
    print!("{table}");
    let failed = outcomes.iter().any(|o| matches!(o, Outcome::Failed(_)));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Resolves every variant; every problem of every file at once, and names must differ (each
/// names its run directory).
pub fn resolve_all(files: &[String]) -> Result<Vec<Variant>> {
    if files.is_empty() {
        bail!("a sweep needs at least one experiment file");
    }
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut problems = String::new();
    let mut variants: Vec<Variant> = Vec::new();
    for file in files {
        match tandem_config::resolve(&tandem_config::Source::Path(file.into()), &[]) {
            Ok(resolved) => {
                let e = &resolved.experiment;
                let canonical = tandem_config::canonical_kdl(e);
                let group_key = canonical
                    .lines()
                    .skip(1)
                    .filter(|l| !l.trim_start().starts_with("seed "))
                    .collect::<Vec<_>>()
                    .join("\n");
                if let Some(other) = variants.iter().find(|v| v.name == e.name) {
                    problems.push_str(&format!(
                        "{file} and {} both name their experiment {:?}: each variant needs its own name (it names its run directory)\n",
                        other.file, e.name
                    ));
                }
                variants.push(Variant {
                    file: file.clone(),
                    name: e.name.clone(),
                    seed: e.seed,
                    group_key,
                });
            }
            Err(d) => problems.push_str(&d.render(color)),
        }
    }
    if !problems.is_empty() {
        bail!("{}\nthe sweep did not start", problems.trim_end());
    }
    Ok(variants)
}

pub fn read_summary(run_dir: &Path) -> Outcome {
    let path = run_dir.join("summary.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => return Outcome::Failed(format!("no {}: {e}", path.display())),
    };
    let json: serde_json::Value = match serde_json::from_str(&text) {
        Ok(json) => json,
        Err(e) => return Outcome::Failed(format!("{} is not JSON: {e}", path.display())),
    };
    Outcome::Finished {
        global_step: json["global_step"].as_u64().unwrap_or(0),
        episodes: json["episodes"].as_u64().unwrap_or(0),
        final_score: json["last_20_score_mean"].as_f64(),
    }
}

/// The 0.975 quantile of Student's t distribution with `df` degrees of freedom: the published
/// values for 1 to 30, and beyond linear in 1/df through those for 40, 60, 120 and infinity
/// (within 0.001 of the exact value).
pub fn t_975(df: usize) -> f64 {
    const TO_30: [f64; 30] = [
        12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
        2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739,
        2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
    ];
    const BEYOND: [(f64, f64); 4] = [
        (30.0, 2.0423),
        (40.0, 2.0211),
        (60.0, 2.0003),
        (120.0, 1.9799),
    ];
    if (1..=30).contains(&df) {
        return TO_30[df - 1];
    }
    let inv = 1.0 / df as f64;
    let mut points: Vec<(f64, f64)> = BEYOND.iter().map(|&(d, t)| (1.0 / d, t)).collect();
    points.push((0.0, 1.9600));
    for pair in points.windows(2) {
        let ((x0, t0), (x1, t1)) = (pair[0], pair[1]);
        if inv <= x0 && inv >= x1 {
            return t1 + (t0 - t1) * (inv - x1) / (x0 - x1);
        }
    }
    f64::NAN
}

/// Mean and the half-width of its 95% Student-t interval (`None` for fewer than two values).
pub fn mean_interval(values: &[f64]) -> Option<(f64, Option<f64>)> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return Some((mean, None));
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, Some(t_975(n - 1) * (variance / n as f64).sqrt())))
}

/// The settings (canonical lines) in which `key` differs from `first`, for a group's label.
fn differences(first: &str, key: &str) -> String {
    let lines: Vec<&str> = key
        .lines()
        .zip(first.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.trim())
        .collect();
    if lines.is_empty() {
        "as the first group".into()
    } else {
        lines.join("; ")
    }
}

/// The sweep's table: one row per variant, then one line per group of seeds.
pub fn table(name: &str, dir: &Path, variants: &[Variant], outcomes: &[Outcome]) -> String {
    let width = variants
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "sweep {name}: {} variant{} in {}\n\n",
        variants.len(),
        if variants.len() == 1 { "" } else { "s" },
        dir.display()
    );
    out.push_str(&format!(
        "{:<width$}  {:>6}  {:>10}  {:>8}  {:>12}\n",
        "variant", "seed", "steps", "episodes", "final score"
    ));
    for (v, o) in variants.iter().zip(outcomes) {
        let cells = match o {
            Outcome::Finished {
                global_step,
                episodes,
                final_score,
            } => format!(
                "{global_step:>10}  {episodes:>8}  {:>12}",
                final_score.map_or("-".to_string(), |r| format!("{r:.3}"))
            ),
            Outcome::Failed(why) => format!("failed: {why}"),
        };
        out.push_str(&format!("{:<width$}  {:>6}  {cells}\n", v.name, v.seed));
    }
    out.push_str(
        "\nfinal score: mean game score of the last 20 episodes (summary.json last_20_score_mean)\n",
    );
    let mut groups: Vec<&str> = Vec::new();
    for v in variants {
        if !groups.contains(&v.group_key.as_str()) {
            groups.push(&v.group_key);
        }
    }
    for (g, key) in groups.iter().enumerate() {
        let scores: Vec<f64> = variants
            .iter()
            .zip(outcomes)
            .filter(|(v, _)| v.group_key == *key)
            .filter_map(|(_, o)| match o {
                Outcome::Finished { final_score, .. } => *final_score,
                Outcome::Failed(_) => None,
            })
            .collect();
        let label = if groups.len() == 1 {
            "mean over seeds".to_string()
        } else {
            format!("group {} ({})", g + 1, differences(groups[0], key))
        };
        let figures = match mean_interval(&scores) {
            None => "no finished run".to_string(),
            Some((mean, None)) => format!("{mean:.3} (one seed: no interval)"),
            Some((mean, Some(half))) => format!(
                "{mean:.3} ± {half:.3} (95% Student-t interval [{:.3}, {:.3}])",
                mean - half,
                mean + half
            ),
        };
        out.push_str(&format!("{label}, n={}: {figures}\n", scores.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_t_quantiles() {
        assert_eq!(t_975(2), 4.3027);
        assert!((t_975(35) - 2.0301).abs() < 0.002, "{}", t_975(35));
        assert!((t_975(1000) - 1.9623).abs() < 0.001, "{}", t_975(1000));
        assert!(t_975(0).is_nan());
    }

    #[test]
    fn mean_and_interval_of_three() {
        let (mean, half) = mean_interval(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(mean, 2.0);
        // s = 1, n = 3: 4.3027 / sqrt(3).
        assert!((half.unwrap() - 4.3027 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(mean_interval(&[5.0]), Some((5.0, None)));
        assert_eq!(mean_interval(&[]), None);
    }

    #[test]
    fn groups_are_variants_that_differ_only_in_seed() {
        let v = |name: &str, seed, key: &str| Variant {
            file: format!("{name}.json"),
            name: name.into(),
            seed,
            group_key: key.into(),
        };
        let done = |r| Outcome::Finished {
            global_step: 100,
            episodes: 4,
            final_score: Some(r),
        };
        let variants = [
            v("a-1", 1, "lr 0.1\nx"),
            v("a-2", 2, "lr 0.1\nx"),
            v("b-1", 1, "lr 0.2\nx"),
            v("b-2", 2, "lr 0.2\nx"),
        ];
        let outcomes = [
            done(10.0),
            done(20.0),
            done(30.0),
            Outcome::Failed("boom".into()),
        ];
        let t = table("s", Path::new("d"), &variants, &outcomes);
        assert!(
            t.contains("group 1 (as the first group), n=2: 15.000 ±"),
            "{t}"
        );
        assert!(
            t.contains("group 2 (lr 0.2), n=1: 30.000 (one seed: no interval)"),
            "{t}"
        );
        assert!(t.contains("b-2"), "{t}");
        assert!(t.contains("failed: boom"), "{t}");
    }
}

//! Score curves of finished runs, read from their `scalars.jsonl` (the game score rank 0 logs
//! every update, [`SCORE_TAG`]), grouped by the runs' resolved configs (runs whose configs differ
//! only in name and seed are seeds of one group), and summarised on a common grid of steps as
//! the mean over seeds with its 95% Student-t interval: what `tandem sweep` and `tandem plot`
//! write as CSV and draw.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::mean_interval;

/// The scalar a score curve follows: the mean game score of the episodes that ended in an
/// update (the untouched rewards, what CleanRL and SB3 report).
pub const SCORE_TAG: &str = "episode/score_mean";

/// Points of a summarised curve.
pub const GRID_POINTS: usize = 100;

/// One run's curve.
#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub seed: u64,
    /// `(global step, score)` in step order.
    pub points: Vec<(u64, f64)>,
}

/// Runs that differ only in seed, and what tells them from the other groups.
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub runs: Vec<Run>,
}

/// A group's summary at one step: the mean over the runs that have a score by then, and the
/// 95% interval's bounds where two or more do.
#[derive(Debug, Clone, PartialEq)]
pub struct BandPoint {
    pub step: u64,
    pub mean: f64,
    pub interval: Option<(f64, f64)>,
    pub runs: usize,
}

/// `(step, score)` of every update of a run that logged one, from its `scalars.jsonl`.
pub fn read_points(run_dir: &Path) -> Result<Vec<(u64, f64)>> {
    let path = run_dir.join("scalars.jsonl");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // A run cut off mid-write leaves a partial last line; earlier ones must parse.
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            if i + 1 == text.lines().count() {
                break;
            }
            bail!("{} line {} is not JSON", path.display(), i + 1);
        };
        if let (Some(step), Some(score)) = (value["step"].as_u64(), value[SCORE_TAG].as_f64()) {
            points.push((step, score));
        }
    }
    Ok(points)
}

/// A run directory's experiment: the resolved config it ran (`resolved.kdl`).
pub fn experiment_of(run_dir: &Path) -> Result<tandem_config::Experiment> {
    let path = run_dir.join("resolved.kdl");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    tandem_config::parse_stored(&text, &path.display().to_string()).map_err(anyhow::Error::msg)
}

/// The canonical config without its name and seed lines: runs with the same key are seeds of
/// one group.
pub fn group_key(experiment: &tandem_config::Experiment) -> String {
    tandem_config::canonical_kdl(experiment)
        .lines()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with("seed "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each group's label: the canonical lines in which its key differs from the lines every
/// group shares (`lr 0.001`), or the experiment's name where all groups are alike.
pub fn labels(keys: &[&str], fallback: &str) -> Vec<String> {
    let shared = |line: &str| keys.iter().all(|k| k.lines().any(|l| l == line));
    keys.iter()
        .map(|key| {
            // A section's header names its kind (`algorithm "a2c"`) where the kinds differ.
            let own: Vec<&str> = key
                .lines()
                .filter(|l| !shared(l))
                .map(|l| l.trim().trim_end_matches('{').trim_end())
                .filter(|l| !l.is_empty() && *l != "}")
                .collect();
            if own.is_empty() {
                fallback.to_string()
            } else {
                own.join(", ")
            }
        })
        .collect()
}

/// The run directories among `paths`: each path that holds a run (its `resolved.kdl`), or else
/// the runs directly inside it (a sweep's directory), in name order.
pub fn run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for path in paths {
        if path.join("resolved.kdl").is_file() {
            dirs.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).with_context(|| {
            format!(
                "{} is neither a run directory nor a folder of runs",
                path.display()
            )
        })?;
        let mut inside: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("resolved.kdl").is_file())
            .collect();
        if inside.is_empty() {
            bail!(
                "{} holds no run (no resolved.kdl in it or in the folders inside it)",
                path.display()
            );
        }
        inside.sort();
        dirs.extend(inside);
    }
    Ok(dirs)
}

/// The runs in `dirs`, grouped by [`group_key`] in the order each group first appears.
pub fn groups_of(dirs: &[PathBuf]) -> Result<Vec<Group>> {
    let mut keys: Vec<String> = Vec::new();
    let mut members: Vec<Vec<Run>> = Vec::new();
    let mut name = String::new();
    for dir in dirs {
        let experiment = experiment_of(dir)?;
        let key = group_key(&experiment);
        let run = Run {
            name: dir
                .file_name()
                .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into()),
            seed: experiment.seed,
            points: read_points(dir)?,
        };
        name = experiment.name.clone();
        match keys.iter().position(|k| *k == key) {
            Some(i) => members[i].push(run),
            None => {
                keys.push(key);
                members.push(vec![run]);
            }
        }
    }
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    Ok(labels(&key_refs, &name)
        .into_iter()
        .zip(members)
        .map(|(label, runs)| Group { label, runs })
        .collect())
}

/// The group's mean and interval at [`GRID_POINTS`] steps evenly spaced up to `last_step`: each
/// run's score at a grid step is the mean of its scores logged since the previous grid step
/// (its latest before then where it logged none); a run that has logged no score yet is left out.
pub fn band(group: &Group, last_step: u64) -> Vec<BandPoint> {
    let grid: Vec<u64> = (1..=GRID_POINTS as u64)
        .map(|k| last_step * k / GRID_POINTS as u64)
        .collect();
    let per_run: Vec<Vec<Option<f64>>> = group
        .runs
        .iter()
        .map(|r| on_grid(&r.points, &grid))
        .collect();
    grid.iter()
        .enumerate()
        .filter_map(|(k, &step)| {
            let values: Vec<f64> = per_run.iter().filter_map(|run| run[k]).collect();
            let (mean, half) = mean_interval(&values)?;
            Some(BandPoint {
                step,
                mean,
                interval: half.map(|h| (mean - h, mean + h)),
                runs: values.len(),
            })
        })
        .collect()
}

fn on_grid(points: &[(u64, f64)], grid: &[u64]) -> Vec<Option<f64>> {
    let mut at = 0;
    let mut latest = None;
    grid.iter()
        .map(|&step| {
            let from = at;
            while at < points.len() && points[at].0 <= step {
                at += 1;
            }
            let window = &points[from..at];
            if !window.is_empty() {
                latest = Some(window.iter().map(|p| p.1).sum::<f64>() / window.len() as f64);
            }
            latest
        })
        .collect()
}

/// The last step any run of `groups` logged a score at.
pub fn last_step(groups: &[Group]) -> u64 {
    (groups.iter().flat_map(|g| &g.runs))
        .filter_map(|r| r.points.last().map(|p| p.0))
        .max()
        .unwrap_or(0)
}

/// Every run's curve as CSV: `group,run,seed,step,score`, one row per logged score.
pub fn csv(groups: &[Group]) -> String {
    let mut out = String::from("group,run,seed,step,score\n");
    for group in groups {
        for run in &group.runs {
            for (step, score) in &run.points {
                out.push_str(&format!(
                    "{},{},{},{step},{score}\n",
                    quoted(&group.label),
                    quoted(&run.name),
                    run.seed
                ));
            }
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn quoted(field: &str) -> String {
    if field.contains([',', '"', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, points: &[(u64, f64)]) -> Run {
        Run {
            name: format!("r{seed}"),
            seed,
            points: points.to_vec(),
        }
    }

    #[test]
    fn a_band_averages_each_runs_scores_per_grid_step_then_the_runs() {
        // Grid steps 1..=100 for a last step of 100.
        let group = Group {
            label: "g".into(),
            runs: vec![
                run(1, &[(1, 10.0), (2, 20.0), (100, 40.0)]),
                run(2, &[(2, 30.0), (100, 60.0)]),
            ],
        };
        let band = band(&group, 100);
        assert_eq!(band.len(), 100);
        // Step 1: only run 1 has a score.
        assert_eq!(
            band[0],
            BandPoint {
                step: 1,
                mean: 10.0,
                interval: None,
                runs: 1
            }
        );
        // Step 2: 20 and 30; step 50 carries them; step 100: 40 and 60.
        assert_eq!((band[1].mean, band[1].runs), (25.0, 2));
        assert_eq!(band[49].mean, 25.0);
        let last = &band[99];
        assert_eq!(last.mean, 50.0);
        // s = 14.142, n = 2: t(0.975, 1) = 12.7062 times s / sqrt(2) = 127.062.
        let (lo, hi) = last.interval.unwrap();
        assert!((hi - 50.0 - 127.062).abs() < 1e-3 && (50.0 - lo - 127.062).abs() < 1e-3);
    }

    #[test]
    fn labels_name_what_a_group_does_not_share() {
        let a = "algorithm \"ppo\" {\n    lr 0.001\n}\nenv \"cartpole\" {\n    envs 8\n}";
        let b = "algorithm \"ppo\" {\n    lr 0.0003\n}\nenv \"cartpole\" {\n    envs 8\n}";
        assert_eq!(labels(&[a, b], "x"), ["lr 0.001", "lr 0.0003"]);
        assert_eq!(labels(&[a], "x"), ["x"]);
    }

    #[test]
    fn the_csv_quotes_what_needs_it() {
        let group = Group {
            label: "lr 0.001, envs 8".into(),
            runs: vec![run(3, &[(512, 21.5)])],
        };
        assert_eq!(
            csv(&[group]),
            "group,run,seed,step,score\n\"lr 0.001, envs 8\",r3,3,512,21.5\n"
        );
    }
}

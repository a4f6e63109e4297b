//! Curves of finished runs, read from their `scalars.jsonl` (by default the game score rank 0
//! logs every update, [`SCORE_TAG`]; any logged scalar with `--metric`), against environment
//! steps or wall-clock time, grouped by the runs' resolved configs (runs whose configs differ
//! only in name and seed are seeds of one group), optionally smoothed, and summarised on a
//! common grid as the mean over seeds with its 95% Student-t interval, clamped to the values the
//! runs logged: what `tandem sweep` and `tandem plot` write as CSV and draw. A run's final value
//! is its `summary.json`'s `final_score` for the score (the rule it names), or else the last value
//! it logged.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::mean_interval;

/// The scalar a score curve follows: the mean game score of the episodes that ended in an
/// update (the untouched rewards, what CleanRL and SB3 report).
pub const SCORE_TAG: &str = "episode/score_mean";

/// Points of a summarised curve.
pub const GRID_POINTS: usize = 100;

/// What the horizontal axis counts.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    /// Global environment steps (`step` of `scalars.jsonl`).
    #[default]
    Steps,
    /// Seconds since the run's first logged line (`wall_time` of `scalars.jsonl`).
    WallClock,
}

impl XAxis {
    /// The CSV column and axis name.
    pub fn column(self) -> &'static str {
        match self {
            XAxis::Steps => "step",
            XAxis::WallClock => "seconds",
        }
    }
}

/// Which curves to read and how.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveOptions {
    /// The scalar followed ([`SCORE_TAG`] unless `--metric`).
    pub metric: String,
    pub x: XAxis,
    /// Each run's curve is the trailing mean of this many logged points (1: as logged).
    pub smooth: usize,
}

impl Default for CurveOptions {
    fn default() -> Self {
        CurveOptions {
            metric: SCORE_TAG.to_string(),
            x: XAxis::Steps,
            smooth: 1,
        }
    }
}

impl CurveOptions {
    /// The CSV column of the values: `score` for the game score, else the tag.
    pub fn value_column(&self) -> &str {
        if self.metric == SCORE_TAG {
            "score"
        } else {
            &self.metric
        }
    }
}

/// One run's curve.
#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub seed: u64,
    /// `(x, value)` as logged, in step order (x: the step, or seconds since the run began).
    pub points: Vec<(f64, f64)>,
    /// The run's final value: `summary.json`'s `final_score` for the score, else the last
    /// logged value.
    pub last: Option<f64>,
}

impl Run {
    /// The curve drawn: each point the trailing mean of the `n` logged points up to it.
    pub fn smoothed(&self, n: usize) -> Vec<(f64, f64)> {
        smooth(&self.points, n)
    }
}

/// Runs that differ only in seed, and what tells them from the other groups.
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub runs: Vec<Run>,
}

/// A group's summary at one x: the mean over the runs that have a value by then, and the
/// 95% interval's bounds where two or more do.
#[derive(Debug, Clone, PartialEq)]
pub struct BandPoint {
    pub x: f64,
    pub mean: f64,
    pub interval: Option<(f64, f64)>,
    pub runs: usize,
}

/// `(x, value)` pairs of a curve.
pub type Points = Vec<(f64, f64)>;

/// What one run's `scalars.jsonl` holds: the `(x, value)` points of `options.metric` and the
/// tags it logged.
pub fn read_points(run_dir: &Path, options: &CurveOptions) -> Result<(Points, BTreeSet<String>)> {
    let path = run_dir.join("scalars.jsonl");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut points = Vec::new();
    let mut tags = BTreeSet::new();
    let mut start = None;
    let lines = text.lines().count();
    for (i, line) in text.lines().enumerate() {
        // A run cut off mid-write leaves a partial last line; earlier ones must parse.
        let Ok(serde_json::Value::Object(value)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            if i + 1 == lines {
                break;
            }
            bail!("{} line {} is not JSON", path.display(), i + 1);
        };
        let wall = value.get("wall_time").and_then(|v| v.as_f64());
        if start.is_none() {
            start = wall;
        }
        tags.extend(
            value
                .keys()
                .filter(|k| *k != "step" && *k != "wall_time")
                .cloned(),
        );
        let x = match options.x {
            XAxis::Steps => value.get("step").and_then(|v| v.as_u64()).map(|s| s as f64),
            XAxis::WallClock => wall.zip(start).map(|(w, s)| w - s),
        };
        if let (Some(x), Some(v)) = (x, value.get(&options.metric).and_then(|v| v.as_f64())) {
            points.push((x, v));
        }
    }
    Ok((points, tags))
}

/// The trailing mean of each point's `n` newest logged values (itself included).
pub fn smooth(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    let n = n.max(1);
    (0..points.len())
        .map(|i| {
            let window = &points[(i + 1).saturating_sub(n)..=i];
            let mean = window.iter().map(|p| p.1).sum::<f64>() / window.len() as f64;
            (points[i].0, mean)
        })
        .collect()
}

/// A run's final score as its `summary.json` states it, and the rule it names.
pub fn final_score(run_dir: &Path) -> (Option<f64>, Option<String>) {
    let json: Option<serde_json::Value> = std::fs::read_to_string(run_dir.join("summary.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    match json {
        None => (None, None),
        Some(json) => (
            json["final_score"].as_f64(),
            json["final_score_rule"].as_str().map(String::from),
        ),
    }
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
/// the runs directly inside it (a sweep's directory), or a population's members, in name order.
pub fn run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for path in paths {
        // As train::checkpoint::must_exist says it (sweep does not reach train).
        if std::fs::symlink_metadata(path).is_err() {
            crate::usage::mistake!("{} does not exist", path.display());
        }
        // A population's runs are its members (docs/population.md).
        let population = path.join("population.jsonl").is_file();
        if path.join("resolved.kdl").is_file() && !population {
            dirs.push(path.clone());
            continue;
        }
        let folder = if population {
            path.join("members")
        } else {
            path.clone()
        };
        let entries = std::fs::read_dir(&folder).with_context(|| {
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
            crate::usage::mistake!(
                "{} holds no run (no resolved.kdl in it or in the folders inside it)",
                path.display()
            );
        }
        inside.sort();
        dirs.extend(inside);
    }
    Ok(dirs)
}

/// The runs in `dirs`, grouped by [`group_key`] in the order each group first appears; a
/// metric no run logged is an error that names the ones they did.
pub fn groups_of(dirs: &[PathBuf], options: &CurveOptions) -> Result<Vec<Group>> {
    let mut keys: Vec<String> = Vec::new();
    let mut members: Vec<Vec<Run>> = Vec::new();
    let mut name = String::new();
    let mut tags = BTreeSet::new();
    for dir in dirs {
        let experiment = experiment_of(dir)?;
        let key = group_key(&experiment);
        let (points, logged) = read_points(dir, options)?;
        tags.extend(logged);
        let last = if options.metric == SCORE_TAG {
            final_score(dir).0
        } else {
            points.last().map(|p| p.1)
        };
        let run = Run {
            name: dir
                .file_name()
                .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into()),
            seed: experiment.seed,
            points,
            last,
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
    if !tags.is_empty() && !tags.contains(&options.metric) {
        crate::usage::mistake!(
            "no run logged the metric `{}`; they logged: {}",
            options.metric,
            tags.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    Ok(labels(&key_refs, &name)
        .into_iter()
        .zip(members)
        .map(|(label, runs)| Group { label, runs })
        .collect())
}

/// The group's mean and interval at [`GRID_POINTS`] x values evenly spaced up to `last`: each
/// run's value at a grid x is the mean of its (smoothed, `smooth` points) values logged since
/// the previous grid x (its latest before then where it logged none); a run that has logged no
/// value yet is left out. The interval is clamped to `clamp` (what the values can be).
pub fn band(group: &Group, last: f64, smooth: usize, clamp: Option<(f64, f64)>) -> Vec<BandPoint> {
    let grid: Vec<f64> = (1..=GRID_POINTS)
        .map(|k| last * k as f64 / GRID_POINTS as f64)
        .collect();
    let per_run: Vec<Vec<Option<f64>>> = group
        .runs
        .iter()
        .map(|r| on_grid(&r.smoothed(smooth), &grid))
        .collect();
    grid.iter()
        .enumerate()
        .filter_map(|(k, &x)| {
            let values: Vec<f64> = per_run.iter().filter_map(|run| run[k]).collect();
            let (mean, half) = mean_interval(&values)?;
            let within = |v: f64| clamp.map_or(v, |(lo, hi)| v.clamp(lo, hi));
            Some(BandPoint {
                x,
                mean,
                interval: half.map(|h| (within(mean - h), within(mean + h))),
                runs: values.len(),
            })
        })
        .collect()
}

fn on_grid(points: &[(f64, f64)], grid: &[f64]) -> Vec<Option<f64>> {
    let mut at = 0;
    let mut latest = None;
    grid.iter()
        .map(|&x| {
            let from = at;
            while at < points.len() && points[at].0 <= x {
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

/// The largest x any run of `groups` logged a value at.
pub fn last_x(groups: &[Group]) -> f64 {
    (groups.iter().flat_map(|g| &g.runs))
        .filter_map(|r| r.points.last().map(|p| p.0))
        .fold(0.0, f64::max)
}

/// The least and greatest value any run logged: what an interval is clamped to (the catalogue
/// does not know every game's score range, a gymnasium one's included, but the runs' own
/// scores are a range the mean of scores can be in).
pub fn value_range(groups: &[Group]) -> Option<(f64, f64)> {
    let values = (groups.iter().flat_map(|g| &g.runs)).flat_map(|r| r.points.iter().map(|p| p.1));
    values
        .filter(|v| v.is_finite())
        .fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
        })
}

/// Every run's curve as CSV: `group,run,seed,step,score`, one row per logged value (the
/// columns named by `options`: `seconds` for wall-clock, the tag for another metric), and a
/// `smoothed` column when the curves are smoothed.
pub fn csv(groups: &[Group], options: &CurveOptions) -> String {
    let mut out = format!(
        "group,run,seed,{},{}{}\n",
        options.x.column(),
        quoted(options.value_column()),
        if options.smooth > 1 { ",smoothed" } else { "" }
    );
    for group in groups {
        for run in &group.runs {
            let smoothed = run.smoothed(options.smooth);
            for ((x, value), (_, mean)) in run.points.iter().zip(smoothed) {
                out.push_str(&format!(
                    "{},{},{},{x},{value}",
                    quoted(&group.label),
                    quoted(&run.name),
                    run.seed
                ));
                if options.smooth > 1 {
                    out.push_str(&format!(",{mean}"));
                }
                out.push('\n');
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
            points: points.iter().map(|&(x, v)| (x as f64, v)).collect(),
            last: points.last().map(|p| p.1),
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
        let band = band(&group, 100.0, 1, None);
        assert_eq!(band.len(), 100);
        // Step 1: only run 1 has a score.
        assert_eq!(
            band[0],
            BandPoint {
                x: 1.0,
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
        // Clamped to the values the runs logged, the interval stays within 10..60.
        let range = value_range(std::slice::from_ref(&group));
        assert_eq!(range, Some((10.0, 60.0)));
        let clamped = super::band(&group, 100.0, 1, range);
        assert_eq!(clamped[99].interval, Some((10.0, 60.0)));
        assert!(clamped.iter().all(|p| {
            p.interval
                .is_none_or(|(lo, hi)| (10.0..=60.0).contains(&lo) && (10.0..=60.0).contains(&hi))
        }));
    }

    #[test]
    fn smoothing_is_a_trailing_mean_of_the_logged_points() {
        let points = [(1.0, 0.0), (2.0, 3.0), (3.0, 6.0), (4.0, 3.0)];
        assert_eq!(smooth(&points, 1), points);
        assert_eq!(
            smooth(&points, 2),
            [(1.0, 0.0), (2.0, 1.5), (3.0, 4.5), (4.0, 4.5)]
        );
        assert_eq!(smooth(&points, 3)[3], (4.0, 4.0));
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
            csv(std::slice::from_ref(&group), &CurveOptions::default()),
            "group,run,seed,step,score\n\"lr 0.001, envs 8\",r3,3,512,21.5\n"
        );
        let options = CurveOptions {
            metric: "eval/score_mean".into(),
            x: XAxis::WallClock,
            smooth: 2,
        };
        assert_eq!(
            csv(&[group], &options),
            "group,run,seed,seconds,eval/score_mean,smoothed\n\"lr 0.001, envs 8\",r3,3,512,21.5,21.5\n"
        );
    }
}

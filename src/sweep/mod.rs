//! `tandem sweep` and `tandem plot`. A sweep trains the variants of an experiment, each in its
//! own run directory under one sweep directory: the files given, each crossed with every
//! combination of `--set PATH=V1,V2,...` lists and `--seeds` ([`grid`]); several at a time with
//! `--parallel`. It then writes one table of their final scores (each run's `summary.json`
//! `final_score`, by the rule it names: the mean game score of its last 100 episodes; per
//! group of variants that differ only in `seed`, the mean with a 95% Student-t interval),
//! a CSV of every variant's score curve and a PNG of each group's mean curve with its interval
//! ([`curves`], [`plot`]). `tandem plot` draws the same for any runs.
//!
//! Every variant is resolved before the first one starts, so a typo in the fifth does not
//! surface hours into the sweep. Each variant runs as its own `tandem train` process (what a
//! user would type), so one failing does not take the others down; its row says so.

pub mod curves;
pub mod grid;
mod members;
pub mod pdf;
pub mod plot;
pub mod record;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use grid::{Axis, Planned};

/// `tandem sweep` as the command line states it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SweepRequest {
    /// The experiment files (KDL or JSON): the variants themselves, or with --set lists or
    /// --seeds the bases of the grid, in the order they run.
    #[arg(required_unless_present = "resume", value_name = "FILE")]
    pub files: Vec<String>,
    /// A setting and the values to sweep it over: PATH=V1,V2,... (e.g.
    /// algorithm.lr=1e-3,3e-4); every combination of every --set runs with each file.
    #[arg(long = "set", value_name = "PATH=V1,V2,...")]
    pub sets: Vec<String>,
    /// Seeds each combination runs with: A..B (both included), A,B,C or one.
    #[arg(long, value_name = "A..B|A,B,C")]
    pub seeds: Option<String>,
    /// Variants trained at once [default: as many as the machine's cores hold, each taking
    /// its ranks times its compute threads; one at a time when a variant uses a GPU].
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    /// The sweep's name; its runs go to runs/<NAME>/<UTC time>/<variant> unless --dir.
    #[arg(long, default_value = "sweep")]
    pub name: String,
    /// Where the variants' run directories go.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Stop every variant after this many global environment steps.
    #[arg(long, value_name = "STEPS")]
    pub max_steps: Option<u64>,
    /// Only warnings and errors from the training runs.
    #[arg(long, short)]
    pub quiet: bool,
    /// Continue the stopped sweep in DIR (its sweep.json says what it trains): finished
    /// variants are kept, the others continue from their checkpoints or start. The same
    /// command again with --dir DIR does the same.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["files", "sets", "seeds", "name", "dir", "max_steps"])]
    pub resume: Option<PathBuf>,
}

/// `tandem plot` as the command line states it.
#[derive(clap::Args, Debug, Clone)]
pub struct PlotArgs {
    /// Run directories, or folders holding them (a sweep's directory).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub paths: Vec<PathBuf>,
    /// Where to write the figure: .png, .svg or .pdf, as its extension says.
    #[arg(short, long, value_name = "FILE", default_value = "plot.png")]
    pub output: PathBuf,
    /// Also write every run's curve here as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The plot's title [default: the experiment's name].
    #[arg(long)]
    pub title: Option<String>,
    /// The logged scalar to plot: a tag of scalars.jsonl, e.g. eval/score_mean (the default
    /// is the game score of the training episodes).
    #[arg(long, value_name = "TAG", default_value = curves::SCORE_TAG)]
    pub metric: String,
    /// Smooth each run's curve: the trailing mean of this many logged points.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub smooth: usize,
    /// The horizontal axis.
    #[arg(long, value_enum, default_value_t = curves::XAxis::Steps)]
    pub x: curves::XAxis,
}

/// `tandem plot`: the runs' groups drawn, and each run's and group's final value printed: for
/// the score, each run's `summary.json` `final_score` (the rule it names, the one the console
/// and `tandem sweep` report); for another metric, its last logged value.
pub fn plot_runs(args: &PlotArgs) -> Result<ExitCode> {
    plot::Format::of(&args.output)?;
    if args.smooth == 0 {
        crate::usage::mistake!("--smooth must be at least 1 (1: no smoothing)");
    }
    let options = curves::CurveOptions {
        metric: args.metric.clone(),
        x: args.x,
        smooth: args.smooth,
    };
    let dirs = curves::run_dirs(&args.paths)?;
    let groups = curves::groups_of(&dirs, &options)?;
    if groups
        .iter()
        .all(|g| g.runs.iter().all(|r| r.points.is_empty()))
    {
        bail!(
            "none of the {} run(s) logged {} in scalars.jsonl yet",
            dirs.len(),
            options.metric
        );
    }
    let title = match &args.title {
        Some(title) => title.clone(),
        None => curves::experiment_of(&dirs[0])?.name,
    };
    plot::write(&title, &groups, &options, &args.output)?;
    if let Some(csv) = &args.csv {
        crate::atomic::write_atomic(csv, curves::csv(&groups, &options).as_bytes())
            .with_context(|| format!("cannot write {}", csv.display()))?;
    }
    print!("{}", finals(&dirs, &groups, &options));
    println!("wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

/// What `tandem plot` prints: the rule, each run's final value, each group's mean and interval.
fn finals(dirs: &[PathBuf], groups: &[curves::Group], options: &curves::CurveOptions) -> String {
    let rule = if options.metric == curves::SCORE_TAG {
        let rule = dirs.iter().find_map(|d| curves::final_score(d).1);
        format!(
            "final score: {} (summary.json final_score)",
            rule.as_deref().unwrap_or("not in summary.json")
        )
    } else {
        format!("final {}: each run's last logged value", options.metric)
    };
    let mut out = format!("{rule}\n");
    for group in groups {
        for run in &group.runs {
            let value = run.last.map_or("-".to_string(), |v| format!("{v:.3}"));
            out.push_str(&format!("  {} (seed {}): {value}\n", run.name, run.seed));
        }
        let values: Vec<f64> = group.runs.iter().filter_map(|r| r.last).collect();
        let figures = match mean_interval(&values) {
            None => "no final value".to_string(),
            Some((mean, None)) => format!("{mean:.3} (one run)"),
            Some((mean, Some(half))) => format!(
                "{mean:.3} ± {half:.3} (95% Student-t interval [{:.3}, {:.3}]) over {} runs",
                mean - half,
                mean + half,
                values.len()
            ),
        };
        out.push_str(&format!("{}: {figures}\n", group.label));
    }
    out
}

/// One variant, resolved.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Its experiment file, as an absolute path (a continued sweep may run from elsewhere).
    pub file: String,
    /// The `--set`s its `tandem train` gets.
    pub sets: Vec<String>,
    /// Its run directory's name.
    pub name: String,
    pub seed: u64,
    /// Its config hash: a continued sweep holds its variants to what was recorded.
    pub hash: String,
    /// The canonical text without the name and seed lines: variants with the same key differ
    /// only in their seed, and their scores are averaged together.
    pub group_key: String,
    /// Cores its ranks compute on, and whether it uses a GPU.
    pub cores: usize,
    pub cuda: bool,
}

/// A run's figures as its `summary.json` states them.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub global_step: u64,
    pub episodes: u64,
    /// `final_score`: the mean game score of the run's last 100 episodes.
    pub final_score: Option<f64>,
    /// The rule `summary.json` names for it (`final_score_rule`).
    pub rule: Option<String>,
}

/// Where one variant stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran to its end.
    Finished(Figures),
    /// It was stopped (it checkpointed: a continued sweep continues it), with its figures so
    /// far where it wrote them.
    Stopped(Option<Figures>),
    Failed(String),
    Running,
    /// The sweep stopped before it started.
    NotStarted,
}

/// How the sweep names itself in what it says: `sweep` for the default name, else `sweep NAME`
/// (never `sweep sweep`).
pub fn called(name: &str) -> String {
    if name == "sweep" || name.is_empty() {
        "sweep".to_string()
    } else {
        format!("sweep {name}")
    }
}

/// What a sweep trains, and where.
pub struct Sweep {
    pub name: String,
    pub dir: PathBuf,
    pub max_steps: Option<u64>,
    pub variants: Vec<Variant>,
    /// It continues an earlier start of itself (its folder's `sweep.json`).
    pub continues: bool,
}

pub fn run(req: &SweepRequest) -> Result<ExitCode> {
    // Every mistake of the command line, of a variant's config or of a continued sweep's record
    // is found before anything runs: the user's (exit 2), as `train`'s are.
    let (sweep, parallel) = planned(req).map_err(|e| crate::usage::UsageError(format!("{e:#}")))?;
    std::fs::create_dir_all(&sweep.dir)
        .with_context(|| format!("creating {}", sweep.dir.display()))?;
    if !sweep.continues {
        let record = record::Record::of(&sweep).to_json();
        crate::atomic::write_atomic(&sweep.dir.join(record::RECORD), record.as_bytes())
            .with_context(|| format!("cannot write {}", sweep.dir.display()))?;
    }
    let outcomes = outcomes_before(&sweep);
    say_start(&sweep, &outcomes, parallel);
    let write_table = |outcomes: &[Outcome]| -> Result<String> {
        let table = table(&sweep.name, &sweep.dir, &sweep.variants, outcomes);
        crate::atomic::write_atomic(&sweep.dir.join("sweep.txt"), table.as_bytes())?;
        Ok(table)
    };
    let starting = members::Starting {
        parallel,
        quiet: req.quiet,
    };
    let ended = members::train_all(&sweep, &starting, outcomes, |o| write_table(o).map(drop))?;
    print!("{}", write_table(&ended.outcomes)?);
    write_curves(&sweep.name, &sweep.dir, &sweep.variants)?;
    Ok(exit_code(&ended))
}

/// Said once the sweep knows what it trains.
fn say_start(sweep: &Sweep, outcomes: &[Outcome], parallel: usize) {
    let n = sweep.variants.len();
    let finished = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Finished(_)))
        .count();
    let continuing = if sweep.continues {
        format!(
            " (continued: {finished} finished before, {} to run)",
            n - finished
        )
    } else {
        String::new()
    };
    eprintln!(
        "{}: {n} variant{} in {}{continuing}, {parallel} at a time",
        called(&sweep.name),
        if n == 1 { "" } else { "s" },
        sweep.dir.display()
    );
}

/// Each variant's outcome before the sweep starts any: a continued sweep keeps the variants
/// that finished (their `summary.json` says so); every other is still to run.
fn outcomes_before(sweep: &Sweep) -> Vec<Outcome> {
    if !sweep.continues {
        return vec![Outcome::NotStarted; sweep.variants.len()];
    }
    sweep
        .variants
        .iter()
        .map(|v| match read_summary(&sweep.dir.join(&v.name)) {
            finished @ Outcome::Finished(_) => finished,
            _ => Outcome::NotStarted,
        })
        .collect()
}

/// 130 or 75 for a sweep stopped by Ctrl-C or by SIGTERM/SIGUSR1, as `tandem train`; else 1 if
/// a variant failed, 75 if one stopped on its own (it continues with `--resume`), 0 if all
/// finished.
fn exit_code(ended: &members::Ended) -> ExitCode {
    use crate::launch::{INTERRUPTED, PREEMPTED};
    match ended.stopped_by {
        Some(libc::SIGINT) => return ExitCode::from(INTERRUPTED),
        Some(_) => return ExitCode::from(PREEMPTED),
        None => {}
    }
    let any = |f: fn(&Outcome) -> bool| ended.outcomes.iter().any(f);
    if any(|o| matches!(o, Outcome::Failed(_))) {
        ExitCode::FAILURE
    } else if any(|o| !matches!(o, Outcome::Finished(_))) {
        ExitCode::from(PREEMPTED)
    } else {
        ExitCode::SUCCESS
    }
}

/// The sweep's variants, resolved, and how many run at once: from the command line, or from
/// the record of the sweep `--resume` continues. The command line's sweep continues the one in
/// its `--dir` when that records the same plan, and is refused when it records another.
fn planned(req: &SweepRequest) -> Result<(Sweep, usize)> {
    let sweep = match &req.resume {
        Some(dir) => resumed(dir)?,
        None => from_command_line(req)?,
    };
    let parallel = match req.parallel {
        Some(0) => bail!("--parallel must be at least 1"),
        Some(n) => n,
        None => default_parallel(&sweep.variants, cores()),
    };
    Ok((sweep, parallel))
}

fn from_command_line(req: &SweepRequest) -> Result<Sweep> {
    let axes: Vec<Axis> = req
        .sets
        .iter()
        .map(|s| Axis::parse(s))
        .collect::<Result<_>>()?;
    let seeds = req.seeds.as_deref().map(grid::parse_seeds).transpose()?;
    let variants = resolve_all(&grid::plan(&req.files, &axes, seeds.as_deref()))?;
    let dir = req
        .dir
        .clone()
        .unwrap_or_else(|| crate::launch::default_run_dir(&req.name));
    let mut sweep = Sweep {
        name: req.name.clone(),
        dir,
        max_steps: req.max_steps,
        variants,
        continues: false,
    };
    let Some(earlier) = record::Record::read(&sweep.dir)? else {
        return Ok(sweep);
    };
    let differences = earlier.differences(&record::Record::of(&sweep));
    if !differences.is_empty() {
        bail!(
            "{} holds another sweep (its {}), which this command would mix with its own:\n  {}\n\
             help: give another --dir, or continue that sweep with `tandem sweep --resume {}`",
            sweep.dir.display(),
            record::RECORD,
            differences.join("\n  "),
            sweep.dir.display()
        );
    }
    sweep.continues = true;
    Ok(sweep)
}

/// The sweep recorded in `dir`, each variant resolved again from its file and `--set`s and held
/// to the config it recorded.
fn resumed(dir: &Path) -> Result<Sweep> {
    let Some(record) = record::Record::read(dir)? else {
        bail!(
            "{} holds no {} (a sweep writes it when it starts): there is no sweep there to \
             continue",
            dir.display(),
            record::RECORD
        );
    };
    let planned: Vec<Planned> = record
        .variants
        .iter()
        .map(|v| Planned {
            file: v.file.clone(),
            sets: v.sets.clone(),
            name_parts: Vec::new(),
        })
        .collect();
    let mut variants = resolve_all(&planned)?;
    for (variant, recorded) in variants.iter_mut().zip(&record.variants) {
        variant.name = recorded.name.clone();
    }
    let sweep = Sweep {
        name: record.name.clone(),
        dir: dir.to_path_buf(),
        max_steps: record.max_steps,
        variants,
        continues: true,
    };
    let differences = record.differences(&record::Record::of(&sweep));
    if !differences.is_empty() {
        bail!(
            "cannot continue the sweep in {}: {}\nhelp: restore the files as they were, or start \
             a new sweep in another --dir",
            dir.display(),
            differences.join("; ")
        );
    }
    Ok(sweep)
}

/// The machine's cores, as the launcher counts them.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Variants at once that `cores` hold: each takes its ranks times the compute threads a rank
/// of it would run alone (`threads`, or what "auto" makes of a rank's share); a sweep with a
/// GPU variant runs one at a time (the variants name the same devices).
pub fn default_parallel(variants: &[Variant], cores: usize) -> usize {
    if variants.iter().any(|v| v.cuda) {
        return 1;
    }
    let widest = variants.iter().map(|v| v.cores).max().unwrap_or(1).max(1);
    (cores / widest).clamp(1, variants.len().max(1))
}

/// The CSV of every finished variant's score curve and the plot of each group's
/// (`sweep.csv`, `sweep.png`); said and skipped when no variant logged a score.
fn write_curves(name: &str, dir: &Path, variants: &[Variant]) -> Result<()> {
    let finished: Vec<PathBuf> = variants
        .iter()
        .map(|v| dir.join(&v.name))
        .filter(|d| d.join("scalars.jsonl").is_file())
        .collect();
    if finished.is_empty() {
        eprintln!(
            "{}: no variant logged a score; no curves to write",
            called(name)
        );
        return Ok(());
    }
    let options = curves::CurveOptions::default();
    let groups = curves::groups_of(&finished, &options)?;
    crate::atomic::write_atomic(
        &dir.join("sweep.csv"),
        curves::csv(&groups, &options).as_bytes(),
    )?;
    plot::write(&called(name), &groups, &options, &dir.join("sweep.png"))?;
    println!(
        "score curves: {} (every logged score), {} (mean over seeds, 95% interval)",
        dir.join("sweep.csv").display(),
        dir.join("sweep.png").display()
    );
    Ok(())
}

/// Resolves every planned variant (every problem of every one at once) and names their run
/// directories: the experiment's name and what the variant sets; variants that would still
/// share a name get their seed, then their position, appended.
pub fn resolve_all(planned: &[Planned]) -> Result<Vec<Variant>> {
    if planned.is_empty() {
        bail!("a sweep needs at least one experiment file");
    }
    let color = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut problems = String::new();
    let mut variants: Vec<Variant> = Vec::new();
    for plan in planned {
        match tandem_config::resolve(
            &tandem_config::Source::Path(plan.file.clone().into()),
            &plan.sets,
        ) {
            Ok(resolved) => {
                let e = &resolved.experiment;
                let ranks = e.devices.len().max(1);
                let file = std::path::absolute(&plan.file).with_context(|| {
                    format!("cannot find the current directory for {}", plan.file)
                })?;
                variants.push(Variant {
                    file: file.display().to_string(),
                    sets: plan.sets.clone(),
                    name: grid::run_name(&e.name, &plan.name_parts),
                    seed: e.seed,
                    hash: tandem_config::config_hash(e),
                    group_key: curves::group_key(e),
                    cores: ranks * e.threads_for_rank((cores() / ranks).max(1)),
                    cuda: e.devices.iter().any(|d| d.is_cuda()),
                });
            }
            Err(d) => {
                // Every combination repeats a mistake in the file or in one --set: say it once.
                let said = d.render(color);
                if !problems.contains(&said) {
                    if !plan.sets.is_empty() {
                        problems.push_str(&format!("with --set {}:\n", plan.sets.join(" --set ")));
                    }
                    problems.push_str(&said);
                }
            }
        }
    }
    if !problems.is_empty() {
        bail!("{}\nthe sweep did not start", problems.trim_end());
    }
    distinct_names(&mut variants);
    Ok(variants)
}

fn distinct_names(variants: &mut [Variant]) {
    let clashes = |variants: &[Variant], i: usize| {
        variants
            .iter()
            .filter(|v| v.name == variants[i].name)
            .count()
            > 1
    };
    let by_seed: Vec<bool> = (0..variants.len()).map(|i| clashes(variants, i)).collect();
    for (v, clash) in variants.iter_mut().zip(by_seed) {
        if clash {
            v.name = format!("{}-seed{}", v.name, v.seed);
        }
    }
    let by_position: Vec<bool> = (0..variants.len()).map(|i| clashes(variants, i)).collect();
    for (i, (v, clash)) in variants.iter_mut().zip(by_position).enumerate() {
        if clash {
            v.name = format!("{}-{}", v.name, i + 1);
        }
    }
}

/// What a run's `summary.json` says: finished, or stopped (`interrupted`) with its figures so
/// far; failed where it has none or it does not read.
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
    let figures = Figures {
        global_step: json["global_step"].as_u64().unwrap_or(0),
        episodes: json["episodes"].as_u64().unwrap_or(0),
        final_score: json["final_score"].as_f64(),
        rule: json["final_score_rule"].as_str().map(String::from),
    };
    if json["interrupted"].as_bool() == Some(true) {
        Outcome::Stopped(Some(figures))
    } else {
        Outcome::Finished(figures)
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

/// The sweep's table: one row per variant, then one line per group of seeds.
pub fn table(name: &str, dir: &Path, variants: &[Variant], outcomes: &[Outcome]) -> String {
    let width = variants
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{}: {} variant{} in {}\n\n",
        called(name),
        variants.len(),
        if variants.len() == 1 { "" } else { "s" },
        dir.display()
    );
    out.push_str(&format!(
        "{:<width$}  {:>6}  {:>10}  {:>8}  {:>12}\n",
        "variant", "seed", "steps", "episodes", "final score"
    ));
    for (v, o) in variants.iter().zip(outcomes) {
        let figures = |f: &Figures| {
            format!(
                "{:>10}  {:>8}  {:>12}",
                f.global_step,
                f.episodes,
                f.final_score.map_or("-".to_string(), |r| format!("{r:.3}"))
            )
        };
        let cells = match o {
            Outcome::Finished(f) => figures(f),
            Outcome::Stopped(Some(f)) => format!("{}  stopped", figures(f)),
            Outcome::Stopped(None) => "stopped".to_string(),
            Outcome::Failed(why) => format!("failed: {why}"),
            Outcome::Running => "running".to_string(),
            Outcome::NotStarted => "not started".to_string(),
        };
        out.push_str(&format!("{:<width$}  {:>6}  {cells}\n", v.name, v.seed));
    }
    let rule = outcomes.iter().find_map(|o| match o {
        Outcome::Finished(f) | Outcome::Stopped(Some(f)) => f.rule.clone(),
        _ => None,
    });
    out.push_str(&format!(
        "\nfinal score: {} (summary.json final_score)\n",
        rule.as_deref().unwrap_or("not in summary.json")
    ));
    let unfinished = outcomes
        .iter()
        .filter(|o| !matches!(o, Outcome::Finished(_) | Outcome::Failed(_)))
        .count();
    if unfinished > 0 {
        out.push_str(&format!(
            "{unfinished} variant(s) not finished (a stopped one's score is its last 100 \
             episodes so far); the groups below count finished variants only; continue with \
             `tandem sweep --resume {}`\n",
            dir.display()
        ));
    }
    let mut groups: Vec<&str> = Vec::new();
    for v in variants {
        if !groups.contains(&v.group_key.as_str()) {
            groups.push(&v.group_key);
        }
    }
    let labels = curves::labels(&groups, "");
    for (g, key) in groups.iter().enumerate() {
        let scores: Vec<f64> = variants
            .iter()
            .zip(outcomes)
            .filter(|(v, _)| v.group_key == *key)
            .filter_map(|(_, o)| match o {
                Outcome::Finished(f) => f.final_score,
                _ => None,
            })
            .collect();
        let label = if groups.len() == 1 {
            "mean over seeds".to_string()
        } else {
            format!("group {} ({})", g + 1, labels[g])
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
            sets: Vec::new(),
            name: name.into(),
            seed,
            hash: String::new(),
            group_key: key.into(),
            cores: 1,
            cuda: false,
        };
        let figures = |r| Figures {
            global_step: 100,
            episodes: 4,
            final_score: Some(r),
            rule: Some("mean game score of the last 100 episodes".into()),
        };
        let done = |r| Outcome::Finished(figures(r));
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
        assert!(t.contains("group 1 (lr 0.1), n=2: 15.000 ±"), "{t}");
        assert!(
            t.contains("group 2 (lr 0.2), n=1: 30.000 (one seed: no interval)"),
            "{t}"
        );
        assert!(t.contains("b-2"), "{t}");
        assert!(t.contains("failed: boom"), "{t}");
        assert!(
            t.contains("final score: mean game score of the last 100 episodes (summary.json"),
            "{t}"
        );
        assert!(t.starts_with("sweep s: 4 variants"), "{t}");
        assert!(!t.contains("not finished"), "{t}");
        // A stopped variant's score is shown but kept out of its group's mean.
        let stopped = [
            done(10.0),
            Outcome::Stopped(Some(figures(90.0))),
            Outcome::NotStarted,
            Outcome::Running,
        ];
        let t = table("s", Path::new("d"), &variants, &stopped);
        assert!(t.contains("group 1 (lr 0.1), n=1: 10.000"), "{t}");
        assert!(t.contains("90.000  stopped"), "{t}");
        let line = |name: &str| t.lines().find(|l| l.starts_with(name)).unwrap().to_string();
        assert!(line("b-1").ends_with("1  not started"), "{t}");
        assert!(line("b-2").ends_with("2  running"), "{t}");
        assert!(
            t.contains("3 variant(s) not finished") && t.contains("tandem sweep --resume d"),
            "{t}"
        );
        assert!(
            table("sweep", Path::new("d"), &variants, &outcomes).starts_with("sweep: 4 variants"),
            "the default name is not said twice"
        );
    }
}

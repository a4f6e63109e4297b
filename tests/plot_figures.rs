//! `tandem plot`'s figure options through the built binary, on run directories written here
//! (a resolved config, `scalars.jsonl`, `summary.json`: what a run leaves), so no training is
//! needed: the legend names only what differs, the interval stays within the scores the runs
//! logged, ticks are short and few, `--smooth` is a trailing mean (its CSV column), `.svg` and
//! `.pdf` as well as `.png`, `--x wall-clock`, `--metric` any logged tag, and clear errors.

mod common;

use std::path::{Path, PathBuf};

use common::binary::{fresh_dir, tandem};

/// Two learning rates, two seeds each. Scores rise from 0 to 100 over 100k steps, seed 2 of
/// each 40 below seed 1 (so two seeds' Student-t interval, 12.7 times the spread, would reach
/// far outside 0..100); 2 s of wall time per 1000 steps; an evaluation every 10th line.
fn runs(name: &str) -> PathBuf {
    let dir = fresh_dir(name);
    let sweep = dir.join("sweep");
    for (lr, offset) in [("1e-3", 0.0), ("3e-4", 20.0)] {
        for seed in 1..=2u64 {
            let run = sweep.join(format!("ppo-cartpole-lr={lr}-seed{seed}"));
            std::fs::create_dir_all(&run).unwrap();
            let config = format!(
                "{}/tests/configs/ppo-cartpole.kdl",
                env!("CARGO_MANIFEST_DIR")
            );
            let out = tandem()
                .args(["resolve", &config, "--set"])
                .arg(format!("seed={seed}"))
                .arg("--set")
                .arg(format!("algorithm.lr={lr}"))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::write(run.join("resolved.kdl"), &out.stdout).unwrap();
            let mut lines = String::new();
            for k in 1..=100u64 {
                let score = (k as f64 - offset - if seed == 2 { 40.0 } else { 0.0 }).max(0.0);
                let eval = if k % 10 == 0 {
                    format!(", \"eval/score_mean\": {}", score + 1.0)
                } else {
                    String::new()
                };
                lines.push_str(&format!(
                    "{{\"step\": {}, \"wall_time\": {}, \"episode/score_mean\": {score}, \
                     \"loss/value\": 0.5{eval}}}\n",
                    k * 1000,
                    1.7e9 + 2.0 * k as f64
                ));
            }
            std::fs::write(run.join("scalars.jsonl"), lines).unwrap();
            let final_score = 90.0 - offset - 40.0 * (seed - 1) as f64 + 0.25;
            std::fs::write(
                run.join("summary.json"),
                format!(
                    "{{\"final_score\": {final_score}, \"final_score_episodes\": 100, \
                     \"final_score_rule\": \"mean game score of the last 100 episodes\", \
                     \"last_20_score_mean\": 1.0}}\n"
                ),
            )
            .unwrap();
        }
    }
    sweep
}

/// `tandem plot` with these arguments; its stdout, or a panic with what it said.
fn plot(args: &[&str]) -> String {
    let out = tandem().arg("plot").args(args).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "tandem plot {args:?}:\n{said}");
    said
}

/// `tandem plot`'s refusal with these arguments.
fn refused(args: &[&str]) -> String {
    let out = tandem().arg("plot").args(args).output().unwrap();
    assert!(!out.status.success(), "tandem plot {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The text of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn an_svg_names_only_what_differs_keeps_its_interval_within_the_scores_and_has_short_ticks() {
    let sweep = runs("plot-svg");
    let svg_path = sweep.parent().unwrap().join("fig.svg");
    let said = plot(&[s(&sweep), "-o", s(&svg_path), "--title", "lr"]);
    assert!(said.contains("wrote "), "{said}");
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
    let texts = svg_texts(&svg);
    // (d) The legend: the setting that differs, once, and nothing else of the config.
    for legend in ["lr 0.001 (2 seeds)", "lr 0.0003 (2 seeds)"] {
        assert_eq!(
            texts.iter().filter(|t| *t == legend).count(),
            1,
            "{texts:?}"
        );
    }
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("algorithm") || t.contains("seed ") || t.contains("lr=")),
        "{texts:?}"
    );
    // (c) Step ticks as 20k, 40k (at most 8 of them), score ticks plain and few.
    let x_ticks: Vec<&String> = texts.iter().filter(|t| t.ends_with('k')).collect();
    assert!((3..=8).contains(&x_ticks.len()), "{texts:?}");
    assert!(
        x_ticks.iter().any(|t| *t == "20k" || *t == "40k"),
        "{x_ticks:?}"
    );
    let y_ticks: Vec<f64> = texts.iter().filter_map(|t| t.parse().ok()).collect();
    assert!((3..=8).contains(&y_ticks.len()), "{texts:?}");
    // (a) The band is clamped to the scores logged (0..100): unclamped, two seeds 40 apart
    // give an interval of +-254 and the score axis would reach past -150 and 250.
    assert!(
        y_ticks.iter().all(|y| (-10.0..=110.0).contains(y)),
        "y ticks {y_ticks:?}"
    );
    assert!(svg.contains("<polygon"), "no band drawn");
    assert!(texts.iter().any(|t| t == "environment steps"), "{texts:?}");
}

#[test]
fn the_final_values_printed_are_the_summaries_and_name_their_rule() {
    let sweep = runs("plot-finals");
    let out = sweep.parent().unwrap().join("fig.png");
    let said = plot(&[s(&sweep), "-o", s(&out)]);
    assert!(
        said.contains(
            "final score: mean game score of the last 100 episodes (summary.json final_score)"
        ),
        "{said}"
    );
    assert!(
        said.contains("  ppo-cartpole-lr=1e-3-seed1 (seed 1): 90.250\n"),
        "{said}"
    );
    assert!(
        said.contains("  ppo-cartpole-lr=3e-4-seed2 (seed 2): 30.250\n"),
        "{said}"
    );
    assert!(said.contains("lr 0.001: 70.250 ± "), "{said}");
    let png = std::fs::read(&out).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn smoothing_is_a_trailing_mean_and_the_csv_holds_it() {
    let sweep = runs("plot-smooth");
    let dir = sweep.parent().unwrap();
    let svg = dir.join("fig.svg");
    let csv = dir.join("curves.csv");
    plot(&[s(&sweep), "-o", s(&svg), "--smooth", "4", "--csv", s(&csv)]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("group,run,seed,step,score,smoothed"));
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 400);
    // Run 1 (lr 0.001, seed 1) scores k at step 1000k: the mean of 1..=4 at step 4000, then
    // the mean of the last four.
    let run1: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[1] == "ppo-cartpole-lr=1e-3-seed1")
        .collect();
    assert_eq!(run1[0][3..], ["1000", "1", "1"]);
    assert_eq!(run1[1][3..], ["2000", "2", "1.5"]);
    assert_eq!(run1[3][3..], ["4000", "4", "2.5"]);
    assert_eq!(run1[9][3..], ["10000", "10", "8.5"]);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg_texts(&drawn)
            .iter()
            .any(|t| t == "score (mean over seeds, 95% interval, trailing mean of 4 points)"),
        "{drawn}"
    );
    assert!(refused(&[s(&sweep), "--smooth", "0"]).contains("--smooth must be at least 1"));
}

#[test]
fn a_pdf_is_a_pdf_with_its_legend_and_other_extensions_are_refused() {
    let sweep = runs("plot-pdf");
    let dir = sweep.parent().unwrap();
    let pdf = dir.join("fig.pdf");
    plot(&[s(&sweep), "-o", s(&pdf)]);
    let bytes = std::fs::read(&pdf).unwrap();
    // The header, the cross-reference table at startxref, each object at its offset.
    let content = tandem::sweep::pdf::parse(&bytes).unwrap();
    assert!(content.contains("(lr 0.001 \\(2 seeds\\)) Tj"), "{content}");
    assert!(content.contains("(environment steps) Tj"), "{content}");
    assert!(content.contains("(20k) Tj"), "{content}");
    assert!(content.contains(" h f"), "no filled band:\n{content}");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("/BaseFont /Helvetica"), "{text}");
    assert!(text.contains("/MediaBox [0 0 1000 640]"), "{text}");

    let err = refused(&[s(&sweep), "-o", s(&dir.join("fig.jpg"))]);
    assert!(
        err.contains("cannot write a figure as .jpg") && err.contains(".png, .svg or .pdf"),
        "{err}"
    );
    assert!(!dir.join("fig.jpg").exists());
}

#[test]
fn a_wall_clock_axis_counts_seconds_from_each_runs_start() {
    let sweep = runs("plot-wall");
    let dir = sweep.parent().unwrap();
    let svg = dir.join("fig.svg");
    let csv = dir.join("curves.csv");
    plot(&[
        s(&sweep),
        "-o",
        s(&svg),
        "--x",
        "wall-clock",
        "--csv",
        s(&csv),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("group,run,seed,seconds,score\n"), "{text}");
    // The first line is the run's start: 2 s per 1000 steps after it.
    assert!(
        text.contains("\nlr 0.001,ppo-cartpole-lr=1e-3-seed1,1,0,1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlr 0.001,ppo-cartpole-lr=1e-3-seed1,1,198,100\n"),
        "{text}"
    );
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(texts.iter().any(|t| t == "wall-clock time"), "{texts:?}");
    // 198 s: ticks in seconds, then minutes (50s, 1.67min would not be round: plotters picks
    // round seconds).
    let ticks: Vec<&String> = texts
        .iter()
        .filter(|t| {
            t.ends_with('s') && t[..t.len() - 1].parse::<f64>().is_ok() || t.ends_with("min")
        })
        .collect();
    assert!((3..=8).contains(&ticks.len()), "{texts:?}");
}

#[test]
fn a_chosen_metric_is_plotted_with_its_last_value_and_an_unknown_one_names_those_logged() {
    let sweep = runs("plot-metric");
    let dir = sweep.parent().unwrap();
    let svg = dir.join("fig.svg");
    let csv = dir.join("eval.csv");
    let said = plot(&[
        s(&sweep),
        "-o",
        s(&svg),
        "--metric",
        "eval/score_mean",
        "--csv",
        s(&csv),
    ]);
    assert!(
        said.contains("final eval/score_mean: each run's last logged value\n"),
        "{said}"
    );
    // Seed 1 of lr 0.001 evaluated 101 at step 100k; seed 2 61.
    assert!(
        said.contains("  ppo-cartpole-lr=1e-3-seed1 (seed 1): 101.000\n"),
        "{said}"
    );
    assert!(said.contains("lr 0.001: 81.000 ± "), "{said}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.starts_with("group,run,seed,step,eval/score_mean\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1 + 4 * 10);
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        texts
            .iter()
            .any(|t| t == "eval/score_mean (mean over seeds, 95% interval)"),
        "{texts:?}"
    );

    let err = refused(&[s(&sweep), "--metric", "eval/score"]);
    assert!(
        err.contains("no run logged the metric `eval/score`; they logged: episode/score_mean, eval/score_mean, loss/value"),
        "{err}"
    );
}

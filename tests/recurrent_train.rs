//! Recurrent policies end to end with the `tandem` binary: the shipped masked-CartPole
//! experiments show that memory matters (the LSTM core learns to balance a pole whose
//! velocities it never observes, also under `tandem play`; the same run without the core does
//! not); a two-rank recurrent
//! run ends with both ranks bitwise identical; and a resumed recurrent run (its environments and
//! each rank's carried states restored) ends bitwise equal to an uninterrupted one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::summary_number;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

fn experiment(name: &str) -> String {
    format!("{}/experiments/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-rnn-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `tandem` with `args` to completion within `limit`; fails the test on an error exit.
fn tandem(args: &[&str], limit: Duration) -> String {
    let child = Command::new(TANDEM)
        .args(args)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::finish(child, limit);
    assert!(done.success, "tandem {args:?} failed:\n{}", done.output);
    done.output
}

fn train(file: &str, dir: &Path, sets: &[&str], limit: Duration) -> String {
    let mut args = vec![
        "train".to_string(),
        file.to_string(),
        "--run-dir".into(),
        dir.display().to_string(),
        "--quiet".into(),
    ];
    for s in sets {
        args.extend(["--set".to_string(), s.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tandem(&args, limit)
}

/// CartPole's return: the sum of its raw rewards (the runs learn from normalised ones).
fn last20_return(dir: &Path) -> f64 {
    summary_number(dir, "last_20_score_mean").unwrap()
}

#[test]
fn an_lstm_core_learns_cartpole_without_velocities() {
    let dir = fresh_dir("masked-lstm");
    // Not quiet: the console's last line is checked too.
    let console = tandem(
        &[
            "train",
            &experiment("cartpole-masked-lstm.kdl"),
            "--run-dir",
            &dir.display().to_string(),
        ],
        Duration::from_secs(900),
    );
    let last20 = last20_return(&dir);
    assert!(
        last20 >= 475.0,
        "PPO-LSTM on masked CartPole: mean return of the last 20 episodes {last20} < 475"
    );
    assert!(summary_number(&dir, "global_step").unwrap() <= 500_000.0 + 1024.0);
    // The console leads with the game's score, not the return of the normalised rewards the
    // agent learns from (about 15 here).
    let last_line = console
        .lines()
        .find(|l| l.contains("training finished"))
        .unwrap_or_else(|| panic!("no final line:\n{console}"));
    let recent = summary_number(&dir, "recent_score_mean").unwrap();
    assert!(
        last_line.contains(&format!("recent score {recent:.2}, train return ")),
        "the final line does not lead with the score {recent:.2}: {last_line}"
    );
    // `tandem play` carries the state too: without it the policy would be as blind as the
    // feed-forward one below.
    let out = tandem(
        &["play", &dir.display().to_string(), "--episodes", "5"],
        Duration::from_secs(120),
    );
    let scores: Vec<f64> = out
        .lines()
        .filter(|l| l.starts_with("episode "))
        .map(|l| play_score(l).unwrap_or_else(|| panic!("no score first in {l:?}")))
        .collect();
    assert_eq!(scores.len(), 5, "{out}");
    let mean = scores.iter().sum::<f64>() / 5.0;
    assert!(
        mean >= 400.0,
        "tandem play of the LSTM policy: mean score {mean}\n{out}"
    );
    let summary = out.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with(&format!(
            "mean score over 5 episode(s): {mean:.2} (train return "
        )),
        "{out}"
    );
}

/// The score of one `tandem play` line, `episode N: score S, train return R`.
fn play_score(line: &str) -> Option<f64> {
    let (_, rest) = line.split_once(": score ")?;
    rest.split(',').next()?.trim().parse().ok()
}

#[test]
fn the_same_run_without_a_core_does_not_learn_it() {
    let dir = fresh_dir("masked-mlp");
    train(
        &experiment("cartpole-masked-mlp.kdl"),
        &dir,
        &[],
        Duration::from_secs(300),
    );
    let last20 = last20_return(&dir);
    assert!(
        last20 < 200.0,
        "PPO without memory on masked CartPole: mean return of the last 20 episodes {last20} >= 200"
    );
    assert!(summary_number(&dir, "global_step").unwrap() >= 500_000.0);
}

#[test]
fn a_two_rank_recurrent_run_ends_identical_on_both_ranks() {
    for (algorithm, sets) in [("ppo", vec![]), ("a2c", vec!["algorithm=a2c"])] {
        let dir = fresh_dir(&format!("two-ranks-{algorithm}"));
        let mut all = vec![
            "devices=cpu cpu",
            "train.max-steps=8192",
            "sync.check-every=1",
        ];
        all.extend(sets);
        train(
            &experiment("cartpole-masked-lstm.kdl"),
            &dir,
            &all,
            Duration::from_secs(300),
        );
        // The fingerprint check compares every tensor's bytes across ranks after every update
        // and at the end; a disagreement fails the run.
        let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
        let updates = summary_number(&dir, "update").unwrap();
        assert!(
            log.contains("ranks agree on ")
                && log.contains(&format!("tensors at update {updates}")),
            "{algorithm}: no agreement at the last update {updates}:\n{log}"
        );
        assert!(
            common::checkpoint_tensors(&dir)
                .keys()
                .any(|n| n.starts_with("model.core."))
        );
    }
}

#[test]
fn a_resumed_recurrent_run_ends_bitwise_equal_to_an_uninterrupted_one() {
    let file = experiment("cartpole-masked-lstm.kdl");
    let sets = ["devices=cpu cpu", "checkpoint.every=1000000"];
    let whole = fresh_dir("resume-whole");
    let mut all = sets.to_vec();
    all.push("train.max-steps=16384");
    train(&file, &whole, &all, Duration::from_secs(300));

    let parts = fresh_dir("resume-parts");
    let mut first = sets.to_vec();
    first.push("train.max-steps=8192");
    train(&file, &parts, &first, Duration::from_secs(300));
    // Each rank's carried states are saved beside the checkpoint.
    for rank in 0..2 {
        assert!(
            parts
                .join(format!("checkpoints/memory-rank{rank}.bin"))
                .exists()
        );
    }
    tandem(
        &[
            "train",
            "--resume",
            &parts.display().to_string(),
            "--set",
            "train.max-steps=16384",
            "--quiet",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(
        summary_number(&parts, "global_step"),
        summary_number(&whole, "global_step")
    );
    // Every learned tensor: model, optimizer, normalisers (not the run's bookkeeping).
    let (a, b) = (
        common::checkpoint_tensors(&whole),
        common::checkpoint_tensors(&parts),
    );
    assert!(a.keys().any(|n| n.starts_with("model.core.")));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let differing: Vec<&String> = a.keys().filter(|n| a[*n] != b[*n]).collect();
    assert!(
        differing.is_empty(),
        "the resumed recurrent run differs from the uninterrupted one in {differing:?}"
    );
}

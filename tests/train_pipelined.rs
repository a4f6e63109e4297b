//! Pipelined sampling (`train.sampling "pipelined"`) with the real binary and real Gloo: it
//! learns on two ranks (and with V-trace targets), two runs are bit-identical, every update
//! after the first learns with policy lag 1, and a killed rank, Ctrl-C and SIGTERM end it as
//! they end a synchronous run.
//! (Its resume to the uninterrupted result is in train_resume.rs, beside the synchronous one.)

mod common;

use std::time::Duration;

use common::binary::*;
use common::{send_signal, summary_number, wait_or_kill};

const PIPELINED: &str = "train.sampling=pipelined";

#[test]
fn pipelined_sampling_learns_on_two_ranks_and_is_reproducible() {
    let sets = ["devices=cpu cpu", PIPELINED];
    let (a, b) = (fresh_dir("pipelined-a"), fresh_dir("pipelined-b"));
    for dir in [&a, &b] {
        let out = train(
            &config("ppo-cartpole.kdl"),
            dir,
            &sets,
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let log = std::fs::read_to_string(a.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("pipelined sampling: each batch"), "{log}");
    let last20 = summary_number(&a, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "pipelined PPO on 2 ranks: mean score of the last 20 episodes {last20} < 475"
    );
    assert_eq!(
        deterministic_scalars(&a),
        deterministic_scalars(&b),
        "TensorBoard scalars differ between two identical pipelined runs"
    );
    assert_eq!(final_parameters(&a), final_parameters(&b));

    // The first update learns from a batch its own parameters collected; every later one from
    // a batch the parameters of the update before collected.
    let lags = scalar_values(&a, "train/policy_lag");
    assert!(lags.len() > 5, "{lags:?}");
    assert!(lags.iter().all(|&lag| lag == 1.0), "{lags:?}");
}

#[test]
fn vtrace_targets_learn_from_pipelined_batches() {
    // APPO with V-trace (advantages "vtrace"): the learner's own values and log-probabilities,
    // weighted by the truncated ratios against the behaviour policy one update behind.
    let dir = fresh_dir("pipelined-vtrace");
    let sets = [PIPELINED, "algorithm.advantages=vtrace"];
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &sets,
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let last20 = summary_number(&dir, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "pipelined PPO with V-trace: mean score of the last 20 episodes {last20} < 475"
    );
}

#[test]
fn pipelined_sampling_learns_otherwise_than_synchronous_sampling() {
    // The same seed and settings, one update's lag apart: the runs must differ (the setting is
    // not ignored), yet both learn.
    let short = ["train.max-steps=20480"];
    let (s, p) = (fresh_dir("sampling-sync"), fresh_dir("sampling-pipelined"));
    let out = train(
        &config("ppo-cartpole.kdl"),
        &s,
        &short,
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = train(
        &config("ppo-cartpole.kdl"),
        &p,
        &[short[0], PIPELINED],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(final_parameters(&s), final_parameters(&p));
    assert!(scalar_values(&s, "train/policy_lag").is_empty());
}

#[test]
fn a_rank_killed_during_pipelined_sampling_stops_the_job_with_its_name() {
    killing_a_rank_of_a_run_stops_the_job_with_its_name("pipelined-kill", 1, &[PIPELINED]);
}

#[test]
fn ctrl_c_during_pipelined_sampling_saves_the_batch_in_flight_and_the_run_resumes() {
    let dir = fresh_dir("pipelined-sigint");
    let mut launcher = long_two_rank_run(&dir, &["checkpoint.every=1000000", PIPELINED]);
    wait_for_training(&dir);
    send_signal(launcher.id(), libc::SIGINT);
    let status = wait_or_kill(&mut launcher, Duration::from_secs(60));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "{}",
        console_of(&dir)
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"interrupted\": true"), "{summary}");
    for rank in 0..2 {
        let file = dir.join(format!("checkpoints/inflight-rank{rank}.bin"));
        assert!(file.exists(), "{} is missing", file.display());
    }
    let stopped_at = summary_number(&dir, "global_step").unwrap();
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir).args([
        "--set",
        &format!("train.max-steps={}", stopped_at as u64 + 2048),
        "--quiet",
    ]);
    let out = run(&mut cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    assert!(summary_number(&dir, "global_step").unwrap() > stopped_at);
}

#[test]
fn sigterm_during_pipelined_sampling_finishes_the_update_with_exit_75() {
    let dir = fresh_dir("pipelined-sigterm");
    let mut launcher = long_two_rank_run(&dir, &["checkpoint.every=1000000", PIPELINED]);
    wait_for_training(&dir);
    send_signal(launcher.id(), libc::SIGTERM);
    let status = wait_or_kill(&mut launcher, Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(75),
        "{status:?}\n{}",
        console_of(&dir)
    );
    let newest = tandem::train::checkpoint::locate(&dir).unwrap();
    tandem::train::checkpoint::load(&newest)
        .unwrap_or_else(|e| panic!("{} does not load: {e:#}", newest.display()));
}

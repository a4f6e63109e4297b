//! Pipelined sampling (`train.sampling "pipelined"`) with the real binary and real Gloo: it
//! learns on two ranks (and with V-trace targets), two runs are bit-identical, every update
//! after the first learns with policy lag 1, and a killed rank, Ctrl-C and SIGTERM end it as
//! they end a synchronous run.
//! (Its resume to the uninterrupted result is in train_resume.rs, beside the synchronous one.)

mod common;

use std::time::Duration;

use common::binary::*;

const PIPELINED: &str = "train.sampling=pipelined";

#[test]
fn pipelined_sampling_learns_on_two_ranks_and_is_reproducible() {
    let sets = ["devices=cpu cpu", PIPELINED];
    let a = ppo_cartpole_learns("pipelined-a", &sets);
    let b = fresh_dir("pipelined-b");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &b,
        &sets,
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(a.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("pipelined sampling: each batch"), "{log}");
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
    ppo_cartpole_learns(
        "pipelined-vtrace",
        &[PIPELINED, "algorithm.advantages=vtrace"],
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
    let (dir, stopped_at) = ctrl_c_a_long_run("pipelined-sigint", &[PIPELINED]);
    for rank in 0..2 {
        let file = dir.join(format!("checkpoints/inflight-rank{rank}.bin"));
        assert!(file.exists(), "{} is missing", file.display());
    }
    resume_for_one_more_update(&dir, stopped_at);
}

#[test]
fn sigterm_during_pipelined_sampling_finishes_the_update_with_exit_75() {
    sigterm_stops_a_run_with_exit_75_and_a_checkpoint("pipelined-sigterm", &[PIPELINED]);
}

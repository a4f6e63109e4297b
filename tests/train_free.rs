//! Free sampling (`train.sampling "free"`) with the real binary and real Gloo: it learns on two
//! ranks (and with V-trace targets), logs its lag per round (min <= mean <= max, bounded by the
//! buffers in flight), `max-policy-lag` keeps every learned batch within it, and a killed rank,
//! Ctrl-C (with a resume) and SIGTERM end it as they end a synchronous run.
//! (The exchange between its collector and learner is tested in algo_free.rs.)

mod common;

use std::time::Duration;

use common::binary::*;
use common::{send_signal, summary_number, wait_or_kill};

const FREE: &str = "train.sampling=free";

#[test]
fn free_sampling_learns_on_two_ranks_and_logs_its_lag() {
    let dir = fresh_dir("free-two-ranks");
    let sets = ["devices=cpu cpu", FREE];
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &sets,
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("free sampling: a second thread"), "{log}");
    let last20 = summary_number(&dir, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "free PPO on 2 ranks: mean score of the last 20 episodes {last20} < 475"
    );
    let (min, mean, max) = lag_scalars(&dir);
    assert!(min.len() > 5, "{min:?}");
    for ((min, mean), max) in min.iter().zip(&mean).zip(&max) {
        assert!(
            min <= mean && mean <= max,
            "lag min {min}, mean {mean}, max {max}"
        );
        // Three buffers: one learned from, at most two queued, so no step lags more than
        // three updates.
        assert!(*max <= 3.0, "lag max {max}");
    }
    assert!(
        scalar_values(&dir, "train/dropped_batches")
            .iter()
            .all(|&d| d == 0.0)
    );
}

#[test]
fn vtrace_targets_learn_from_free_batches() {
    let dir = fresh_dir("free-vtrace");
    let sets = [FREE, "algorithm.advantages=vtrace"];
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
        "free PPO with V-trace: mean score of the last 20 episodes {last20} < 475"
    );
}

#[test]
fn max_policy_lag_keeps_every_learned_batch_within_it() {
    // CartPole's update takes several times its collection, so the collector fills the queue
    // and queued batches lag two updates: with max-policy-lag 1 they are dropped.
    let dir = fresh_dir("free-max-lag");
    let sets = [FREE, "train.max-policy-lag=1", "train.max-steps=40960"];
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &sets,
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    let (_, _, max) = lag_scalars(&dir);
    assert!(!max.is_empty());
    assert!(max.iter().all(|&lag| lag <= 1.0), "{max:?}");
}

#[test]
fn a_rank_killed_during_free_sampling_stops_the_job_with_its_name() {
    killing_a_rank_of_a_run_stops_the_job_with_its_name("free-kill", 1, &[FREE]);
}

#[test]
fn ctrl_c_during_free_sampling_stops_after_the_round_and_the_run_resumes() {
    let dir = fresh_dir("free-sigint");
    let mut launcher = long_two_rank_run(&dir, &["checkpoint.every=1000000", FREE]);
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
    // Nothing in flight is saved: the resumed run collects afresh.
    assert!(!dir.join("checkpoints/inflight-rank0.bin").exists());
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
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("free sampling keeps no batches in flight"),
        "{log}"
    );
}

#[test]
fn sigterm_during_free_sampling_finishes_the_round_with_exit_75() {
    let dir = fresh_dir("free-sigterm");
    let mut launcher = long_two_rank_run(&dir, &["checkpoint.every=1000000", FREE]);
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

/// The logged `train/policy_lag_min`, `train/policy_lag` and `train/policy_lag_max`.
fn lag_scalars(dir: &std::path::Path) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        scalar_values(dir, "train/policy_lag_min"),
        scalar_values(dir, "train/policy_lag"),
        scalar_values(dir, "train/policy_lag_max"),
    )
}

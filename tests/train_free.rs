//! Free sampling (`train.sampling "free"`) with the real binary and real Gloo: it learns on two
//! ranks whose fingerprints agree after every round (and with V-trace targets), logs its lag
//! per round (min <= mean <= max, bounded by the buffers in flight), `max-policy-lag` keeps
//! every learned batch within it, and a killed rank, Ctrl-C (with a resume) and SIGTERM end it
//! as they end a synchronous run; with env groups, served in ready order, it learns as well.
//! (The exchange between its collector and learner is tested in algo_free.rs.)

mod common;

use std::time::Duration;

use common::binary::*;

const FREE: &str = "train.sampling=free";

#[test]
fn free_sampling_learns_on_two_ranks_and_logs_its_lag() {
    // Fingerprints after every round: the ranks' learners hold the same parameters whatever
    // their collectors did.
    let dir = ppo_cartpole_learns(
        "free-two-ranks",
        &["devices=cpu cpu", FREE, "sync.check-every=1"],
    );
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("free sampling: a second thread"), "{log}");
    assert!(log.contains("ranks agree on"), "{log}");
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
fn env_groups_in_ready_order_learn_on_two_ranks_and_log_their_lag() {
    // Each rank's 4 environments in 2 groups, each on a rollout worker of its own.
    let dir = ppo_cartpole_learns(
        "free-ready-order",
        &[
            "devices=cpu cpu",
            FREE,
            "train.env-groups=2",
            "sync.check-every=1",
        ],
    );
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("rollout worker of its own"), "{log}");
    assert!(log.contains("ranks agree on"), "{log}");
    let (min, mean, max) = lag_scalars(&dir);
    assert!(min.len() > 5, "{min:?}");
    for ((min, mean), max) in min.iter().zip(&mean).zip(&max) {
        assert!(
            min <= mean && mean <= max && *max <= 3.0,
            "lag {min} {mean} {max}"
        );
    }
    let phases = scalar_values(&dir, "time/inference_wait_s");
    assert!(!phases.is_empty(), "the inference worker's wait is logged");
}

#[test]
fn vtrace_targets_learn_from_free_batches() {
    ppo_cartpole_learns("free-vtrace", &[FREE, "algorithm.advantages=vtrace"]);
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
    let (dir, stopped_at) = ctrl_c_a_long_run("free-sigint", &[FREE]);
    // Nothing in flight is saved: the resumed run collects afresh.
    assert!(!dir.join("checkpoints/inflight-rank0.bin").exists());
    resume_for_one_more_update(&dir, stopped_at);
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("free sampling keeps no batches in flight"),
        "{log}"
    );
}

#[test]
fn sigterm_during_free_sampling_finishes_the_round_with_exit_75() {
    sigterm_stops_a_run_with_exit_75_and_a_checkpoint("free-sigterm", &[FREE]);
}

/// The logged `train/policy_lag_min`, `train/policy_lag` and `train/policy_lag_max`.
fn lag_scalars(dir: &std::path::Path) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        scalar_values(dir, "train/policy_lag_min"),
        scalar_values(dir, "train/policy_lag"),
        scalar_values(dir, "train/policy_lag_max"),
    )
}

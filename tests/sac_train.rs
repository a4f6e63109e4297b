//! SAC learns, end to end through the launcher: the built binary trains
//! experiments/pendulum-sac.kdl on 1 rank and on 2 real ranks (the 2 ranks end bitwise
//! identical), a checkpointed run resumes with its replay buffer and ends where the
//! uninterrupted run ends, bad inputs are refused with located diagnostics, and `tandem play`
//! acts with the checkpoint.

mod common;

use common::example_runs::Example;

const SAC: Example = Example {
    file: "experiments/pendulum-sac.kdl",
    tag: "sac",
};

/// The example's comment: seed 1 on 1 rank, the mean return of the last 20 episodes is
/// -180.7 at 10k steps (half of the experiment's 20k; the first episodes, under uniformly random
/// actions, score about -1500).
#[test]
fn sac_swings_up_the_pendulum_on_one_rank() {
    // 2 environments, 2 gradient steps per iteration from step 1000 on.
    SAC.assert_learns(&["train.max-steps=10000"], 1, -250.0, 9002);
}

/// The same file on 2 real ranks (each steps 1 of the 2 environments, keeps half of the buffer
/// and samples half of each batch; the same gradient steps per environment step): -207.8 at
/// 10k steps, and both ranks end holding bitwise identical networks and optimizer state.
#[test]
fn sac_swings_up_the_pendulum_on_two_ranks() {
    SAC.assert_learns(&["train.max-steps=10000"], 2, -250.0, 9002);
}

#[test]
fn a_resumed_run_continues_with_its_replay_buffer_and_ends_where_the_uninterrupted_one_does() {
    SAC.assert_resume_ends_where_the_uninterrupted_run_does();
}

#[test]
fn bad_sac_settings_are_refused_with_located_diagnostics() {
    SAC.assert_refuses_what_a_box_learner_cannot_run("sac");
    let err = SAC.refused(&["algorithm.alpha=\"sometimes\""]);
    assert!(err.contains("\"auto\" or number"), "{err}");
    let err = SAC.refused(&["algorithm.alpha=0"]);
    assert!(err.contains("algorithm.alpha"), "{err}");
}

/// `tandem play` of a SAC checkpoint: the deterministic tanh(mean) by default (what
/// `--greedy` also asks for), a reproducible sample with `--sample`.
#[test]
fn play_acts_deterministically_by_default_and_samples_on_request() {
    SAC.assert_play_is_deterministic_and_samples_on_request();
}

//! TD3 learns, end to end through the launcher: the built binary trains
//! experiments/pendulum-td3.kdl on 1 rank and on 2 real ranks (the 2 ranks end bitwise
//! identical), a checkpointed run resumes with its replay buffer and ends where the
//! uninterrupted run ends, bad inputs are refused with located diagnostics, and `tandem play`
//! acts with the checkpoint.

mod common;

use common::example_runs::Example;

const TD3: Example = Example {
    file: "experiments/pendulum-td3.kdl",
    tag: "td3",
};

/// The example's comment: seed 1 on 1 rank, the mean return of the last 20 episodes is
/// -145.2 at the experiment's 20k steps (the first episodes, under uniformly random actions,
/// score about -1500).
#[test]
fn td3_swings_up_the_pendulum_on_one_rank() {
    // 2 environments, 2 gradient steps per iteration from step 1000 on, to 20k steps.
    TD3.assert_learns(&[], 1, -250.0, 19_002);
}

/// The same file on 2 real ranks (each steps 1 of the 2 environments, keeps half of the buffer
/// and samples half of each batch; the same gradient steps per environment step): -145.1 at
/// 20k steps, and both ranks end holding bitwise identical networks, targets and optimizer
/// state.
#[test]
fn td3_swings_up_the_pendulum_on_two_ranks() {
    TD3.assert_learns(&[], 2, -250.0, 19_002);
}

#[test]
fn a_resumed_run_continues_with_its_replay_buffer_and_ends_where_the_uninterrupted_one_does() {
    TD3.assert_resume_ends_where_the_uninterrupted_run_does();
}

#[test]
fn bad_td3_settings_are_refused_with_located_diagnostics() {
    TD3.assert_refuses_what_a_box_learner_cannot_run("td3");
    let err = TD3.refused(&["env=\"cartpole\""]);
    assert!(err.contains("deterministic tanh policy"), "{err}");
    let err = TD3.refused(&["algorithm.policy-delay=0"]);
    assert!(
        err.contains("`algorithm.policy-delay` is out of range") && err.contains("found 0"),
        "{err}"
    );
    let err = TD3.refused(&["algorithm.target-noise-clip=-1"]);
    assert!(err.contains("algorithm.target-noise-clip"), "{err}");
    let err = TD3.refused(&["algorithm.exploration-noise=\"loud\""]);
    assert!(
        err.contains("wrong type for `algorithm.exploration-noise`"),
        "{err}"
    );
}

/// `tandem play` of a TD3 checkpoint: the deterministic actor by default (what `--greedy`
/// also asks for), the actor plus its exploration noise, reproducibly, with `--sample`.
#[test]
fn play_acts_deterministically_by_default_and_samples_on_request() {
    TD3.assert_play_is_deterministic_and_samples_on_request();
}

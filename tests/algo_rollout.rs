//! Return estimators against hand-computed examples (terminated vs truncated), the rollout
//! buffer against the pure estimators, and the minibatch sampler.

use tandem::algo::actions::ActionKind;
use tandem::algo::{
    InactiveRows, LearnerView, MinibatchSampler, RolloutArrays, RolloutBuffer, StepRecord,
    VtraceClips, generalized_advantages, n_step_returns, vtrace,
};
use tch::{Device, Kind, Tensor};

// Two environments, three steps, step-major (index t * 2 + env).
// env 0: terminates at t = 1, then runs on; V(s_3) = 2.
// env 1: truncated at t = 0 with V(final obs) = 4, terminates at t = 2 (its V(s_3) = 7 must be
//        ignored).
const REWARDS: [f32; 6] = [1.0, 0.0, 2.0, 1.0, 3.0, 1.0];
const VALUES: [f32; 6] = [0.5, 1.0, 1.0, 1.0, 1.5, 1.0];
const TERMINATED: [f32; 6] = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
const TRUNCATED: [f32; 6] = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
const TRUNCATION_VALUES: [f32; 6] = [0.0, 4.0, 0.0, 0.0, 0.0, 0.0];
const LAST_VALUES: [f32; 2] = [2.0, 7.0];

fn arrays<'a>(terminated: &'a [f32], truncated: &'a [f32]) -> RolloutArrays<'a> {
    RolloutArrays {
        num_envs: 2,
        rewards: &REWARDS,
        values: &VALUES,
        terminated,
        truncated,
        truncation_values: &TRUNCATION_VALUES,
        last_values: &LAST_VALUES,
        acting: None,
        last_acting: None,
    }
}

fn assert_close(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() < 1e-5,
            "index {i}: got {a}, expected {e} (all: {actual:?})"
        );
    }
}

#[test]
fn vtrace_matches_hand_computation_with_importance_weights_and_episode_ends() {
    // gamma 0.9, lambda 0.5, rho-bar = c-bar = 1; pi/mu = 0.25 at env 0's t0, 0.5 at its t1,
    // 1 elsewhere. Worked by hand (rho, c = lambda min(1, ratio); v - V carried while the
    // episode continues; A = rho (r + gamma v_next - V)):
    // env 0: t2: rho 1, d = 3 + .9*2 - 1.5 = 3.3, v = 4.8, A = 3.3
    //        t1 (terminated): rho .5, d = .5*(2 - 1) = .5, v = 1.5, A = .5
    //        t0: rho .25, c .125, d = .25*(1 + .9*1 - .5) = .35, v - V = .35 + .9*.125*.5
    //            = .40625, v = .90625, A = .25*(1 + .9*(1 + .5) - .5) = .4625
    // env 1: t2 (terminated): d = 0, v = 1, A = 0 | t1: d = .9, v = 1.9, A = .9
    //        t0 (truncated, bootstrap 4): d = 2.6, v = 3.6, A = 2.6 (no carry from t1)
    let log_ratios = [0.25f32.ln(), 0.0, 0.5f32.ln(), 0.0, 0.0, 0.0];
    let clips = VtraceClips { rho: 1.0, c: 1.0 };
    let (advantages, targets) = vtrace(
        &arrays(&TERMINATED, &TRUNCATED),
        &log_ratios,
        0.9,
        0.5,
        clips,
    )
    .unwrap();
    assert_close(&targets, &[0.90625, 3.6, 1.5, 1.9, 4.8, 1.0]);
    assert_close(&advantages, &[0.4625, 2.6, 0.5, 0.9, 3.3, 0.0]);
}

/// Importance ratios above rho-bar and c-bar are truncated to them (Espeholt et al. 2018,
/// eq. 1): with both bars at 1, a behaviour policy half as likely as the target (ratio 2)
/// everywhere gives exactly the on-policy targets and advantages; with the bars at 1.5 and
/// 1.25 the result differs from both, as untruncated weights (2) would too.
#[test]
fn vtrace_truncates_ratios_above_its_bars() {
    let steps = arrays(&TERMINATED, &TRUNCATED);
    let doubled = [2f32.ln(); 6];
    let on_policy = [0.0f32; 6];
    let unit = VtraceClips { rho: 1.0, c: 1.0 };
    assert_eq!(
        vtrace(&steps, &doubled, 0.9, 0.5, unit).unwrap(),
        vtrace(&steps, &on_policy, 0.9, 0.5, unit).unwrap()
    );
    // rho = 1.5, c = lambda * 1.25 everywhere. Worked by hand as in the test above:
    // env 0: t2: d = 1.5 * 3.3 = 4.95, v = 6.45, A = 4.95
    //        t1 (terminated): d = 1.5 * (2 - 1) = 1.5, v = 2.5, A = 1.5
    //        t0: d = 1.5 * (1 + .9*1 - .5) = 2.1, v - V = 2.1 + .9 * .625 * 1.5 = 2.94375,
    //            v = 3.44375, A = 1.5 * (1 + .9 * 2.5 - .5) = 4.125
    // env 1: t2 (terminated): d = 0, v = 1, A = 0 | t1: d = 1.5 * .9 = 1.35, v = 2.35,
    //        A = 1.35 | t0 (truncated, bootstrap 4): d = 1.5 * 2.6 = 3.9, v = 4.9, A = 3.9
    let bars = VtraceClips { rho: 1.5, c: 1.25 };
    let (advantages, targets) = vtrace(&steps, &doubled, 0.9, 0.5, bars).unwrap();
    assert_close(&targets, &[3.44375, 4.9, 2.5, 2.35, 6.45, 1.0]);
    assert_close(&advantages, &[4.125, 3.9, 1.5, 1.35, 4.95, 0.0]);
}

#[test]
fn vtrace_on_policy_gives_the_gae_returns() {
    // pi = mu: every weight is 1, so the targets are GAE(lambda)'s lambda-returns, and with
    // lambda 1 the advantages are GAE's too.
    let on_policy = [0.0f32; 6];
    let clips = VtraceClips { rho: 1.0, c: 1.0 };
    let steps = arrays(&TERMINATED, &TRUNCATED);
    for lambda in [0.5, 0.95, 1.0] {
        let (_, targets) = vtrace(&steps, &on_policy, 0.9, lambda, clips).unwrap();
        let (_, returns) = generalized_advantages(&steps, 0.9, lambda).unwrap();
        assert_close(&targets, &returns);
    }
    let (advantages, _) = vtrace(&steps, &on_policy, 0.9, 1.0, clips).unwrap();
    let (gae, _) = generalized_advantages(&steps, 0.9, 1.0).unwrap();
    assert_close(&advantages, &gae);
}

#[test]
fn gae_matches_hand_computation_with_terminated_and_truncated_steps() {
    // gamma 0.9, lambda 0.5, worked by hand:
    // env 0: t2: d = 3 + .9*2 - 1.5 = 3.3, A = 3.3 | t1 (terminated): d = 2 - 1 = 1, A = 1
    //        t0: d = 1 + .9*1 - .5 = 1.4, A = 1.4 + .45*1 = 1.85
    // env 1: t2 (terminated): d = 1 - 1 = 0 | t1: d = 1 + .9*1 - 1 = .9, A = .9 + .45*0 = .9
    //        t0 (truncated, bootstrap 4): d = 0 + .9*4 - 1 = 2.6, A = 2.6 (no carry from t1)
    let (advantages, returns) =
        generalized_advantages(&arrays(&TERMINATED, &TRUNCATED), 0.9, 0.5).unwrap();
    assert_close(&advantages, &[1.85, 2.6, 1.0, 0.9, 3.3, 0.0]);
    assert_close(&returns, &[2.35, 3.6, 2.0, 1.9, 4.8, 1.0]);
}

#[test]
fn truncation_bootstraps_where_termination_does_not() {
    // The same step marked terminated instead: no bootstrap, d = 0 - 1 = -1.
    let mut terminated = TERMINATED;
    terminated[1] = 1.0;
    let (advantages, _) =
        generalized_advantages(&arrays(&terminated, &[0.0; 6]), 0.9, 0.5).unwrap();
    assert_close(&advantages[1..2], &[-1.0]);
    // Both flags: termination wins.
    let (both, _) = generalized_advantages(&arrays(&terminated, &TRUNCATED), 0.9, 0.5).unwrap();
    assert_close(&both[1..2], &[-1.0]);
}

#[test]
fn n_step_returns_match_hand_computation_and_gae_with_lambda_one() {
    // env 0: R2 = 3 + .9*2 = 4.8, R1 = 2 (terminated), R0 = 1 + .9*2 = 2.8
    // env 1: R2 = 1 (terminated), R1 = 1 + .9*1 = 1.9, R0 = 0 + .9*4 = 3.6 (truncated)
    let returns = n_step_returns(&arrays(&TERMINATED, &TRUNCATED), 0.9).unwrap();
    assert_close(&returns, &[2.8, 3.6, 2.0, 1.9, 4.8, 1.0]);
    let (_, lambda_one) =
        generalized_advantages(&arrays(&TERMINATED, &TRUNCATED), 0.9, 1.0).unwrap();
    assert_close(&lambda_one, &returns);
}

#[test]
fn estimators_reject_inconsistent_input() {
    let short = RolloutArrays {
        values: &VALUES[..4],
        ..arrays(&TERMINATED, &TRUNCATED)
    };
    let err = generalized_advantages(&short, 0.9, 0.5)
        .unwrap_err()
        .to_string();
    assert!(err.contains("values has 4 entries"), "{err}");
    let err = n_step_returns(&arrays(&TERMINATED, &TRUNCATED), 1.5)
        .unwrap_err()
        .to_string();
    assert!(err.contains("gamma"), "{err}");
}

fn column(values: &[f32], t: usize) -> Tensor {
    Tensor::from_slice(&values[t * 2..t * 2 + 2])
}

fn filled_buffer(with_truncation_values: bool) -> RolloutBuffer {
    let mut buffer = RolloutBuffer::new(3, 2, &[3], ActionKind::Discrete, Device::Cpu).unwrap();
    for t in 0..3 {
        let obs = Tensor::from_slice(&[t as f32; 6]).reshape([2, 3]);
        let actions = Tensor::from_slice(&[t as i64, 1]);
        let log_probs = Tensor::from_slice(&[-0.5f32, -0.7]);
        let trunc_values = column(&TRUNCATION_VALUES, t);
        buffer
            .push(&StepRecord {
                obs: &obs,
                actions: &actions,
                log_probs: &log_probs,
                values: &column(&VALUES, t),
                rewards: &column(&REWARDS, t),
                terminated: &column(&TERMINATED, t).to_kind(Kind::Bool),
                truncated: &column(&TRUNCATED, t).to_kind(Kind::Bool),
                truncation_values: (with_truncation_values && t == 0).then_some(&trunc_values),
                acting: None,
            })
            .unwrap();
    }
    buffer
}

#[test]
fn buffer_flattens_step_major_with_the_same_estimates() {
    let buffer = filled_buffer(true);
    assert!(buffer.is_full());
    let batch = buffer
        .gae_batch(&Tensor::from_slice(&LAST_VALUES), 0.9, 0.5)
        .unwrap();
    assert_eq!(batch.len(), 6);
    assert_eq!(batch.obs.size(), [6, 3]);
    assert_close(
        &Vec::<f32>::try_from(&batch.advantages).unwrap(),
        &[1.85, 2.6, 1.0, 0.9, 3.3, 0.0],
    );
    assert_close(&Vec::<f32>::try_from(&batch.values).unwrap(), &VALUES);
    assert_eq!(
        Vec::<i64>::try_from(&batch.actions).unwrap(),
        [0, 1, 1, 1, 2, 1]
    );
    // Row t*N + env holds step t's observation.
    assert_eq!(batch.obs.get(4).double_value(&[0]), 2.0);

    let n_step = buffer
        .n_step_batch(&Tensor::from_slice(&LAST_VALUES), 0.9)
        .unwrap();
    let returns = Vec::<f32>::try_from(&n_step.returns).unwrap();
    assert_close(&returns, &[2.8, 3.6, 2.0, 1.9, 4.8, 1.0]);
    let expected_adv: Vec<f32> = returns.iter().zip(VALUES).map(|(r, v)| r - v).collect();
    assert_close(
        &Vec::<f32>::try_from(&n_step.advantages).unwrap(),
        &expected_adv,
    );
}

/// V-trace over the buffer takes the learner's log pi and V against the behaviour's stored log
/// mu: the same as [`vtrace`] on those arrays with log rho = log pi - log mu.
#[test]
fn buffer_vtrace_uses_the_learners_ratios_and_values_against_the_stored_ones() {
    let buffer = filled_buffer(true);
    // The buffer's behaviour log mu is -0.5 and -0.7 at every step.
    let behaviour = [-0.5f32, -0.7, -0.5, -0.7, -0.5, -0.7];
    let shifts = [0.3f32, -0.2, 0.1, 0.0, -0.4, 0.5];
    let learner_log_probs: Vec<f32> = behaviour.iter().zip(shifts).map(|(m, d)| m + d).collect();
    let learner_values: Vec<f32> = VALUES.iter().map(|v| v + 0.25).collect();
    let learner_last = [1.5f32, 6.0];
    let view = LearnerView {
        log_probs: Tensor::from_slice(&learner_log_probs),
        values: Tensor::from_slice(&learner_values),
        last_values: Tensor::from_slice(&learner_last),
    };
    let clips = VtraceClips { rho: 1.0, c: 1.0 };
    let batch = buffer.vtrace_batch(&view, 0.9, 0.95, clips).unwrap();
    let arrays = RolloutArrays {
        num_envs: 2,
        rewards: &REWARDS,
        values: &learner_values,
        terminated: &TERMINATED,
        truncated: &TRUNCATED,
        truncation_values: &TRUNCATION_VALUES,
        last_values: &learner_last,
        acting: None,
        last_acting: None,
    };
    let (advantages, targets) = vtrace(&arrays, &shifts, 0.9, 0.95, clips).unwrap();
    assert_close(
        &Vec::<f32>::try_from(&batch.advantages).unwrap(),
        &advantages,
    );
    assert_close(&Vec::<f32>::try_from(&batch.returns).unwrap(), &targets);
    assert!(advantages.iter().any(|a| *a != 0.0), "{advantages:?}");
}

/// s_T as recorded, with its episode starts; in ready order a group fills its own rows of it in
/// place, starting no episode there.
#[test]
fn the_bootstrap_observations_are_the_recorded_ones_and_groups_fill_their_rows() {
    let mut buffer = filled_buffer(true);
    let obs = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.]).reshape([2, 3]);
    buffer
        .set_bootstrap(&obs, Some(&Tensor::from_slice(&[1i64, 1])), None)
        .unwrap();
    let floats = |t: &Tensor| Vec::<f32>::try_from(&t.reshape([-1])).unwrap();
    let (recorded, starts) = buffer.bootstrap();
    assert_eq!(floats(recorded), [1., 2., 3., 4., 5., 6.]);
    assert_eq!(floats(starts), [1., 1.]);
    let _ = buffer.bootstrap_rows(1, 1).fill_(9.0);
    let (recorded, starts) = buffer.bootstrap();
    assert_eq!(floats(recorded), [1., 2., 3., 9., 9., 9.]);
    assert_eq!(floats(starts), [1., 0.]);
    buffer.set_bootstrap(&obs, None, None).unwrap();
    assert_eq!(floats(buffer.bootstrap().1), [0., 0.]);
}

#[test]
fn buffer_rejects_truncation_without_final_values_and_bad_shapes() {
    let buffer = filled_buffer(false);
    let err = buffer
        .gae_batch(&Tensor::from_slice(&LAST_VALUES), 0.9, 0.5)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("step 0") && err.contains("environment 1") && err.contains("truncat"),
        "{err}"
    );

    let mut buffer = RolloutBuffer::new(2, 2, &[3], ActionKind::Discrete, Device::Cpu).unwrap();
    let wrong_obs = Tensor::zeros([2, 4], (Kind::Float, Device::Cpu));
    let flags = Tensor::zeros([2], (Kind::Float, Device::Cpu));
    let actions = Tensor::zeros([2], (Kind::Int64, Device::Cpu));
    let err = buffer
        .push(&StepRecord {
            obs: &wrong_obs,
            actions: &actions,
            log_probs: &flags,
            values: &flags,
            rewards: &flags,
            terminated: &flags,
            truncated: &flags,
            truncation_values: None,
            acting: None,
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("obs has shape [2, 4], expected [2, 3]"),
        "{err}"
    );
    let err = buffer
        .gae_batch(&Tensor::zeros([2], (Kind::Float, Device::Cpu)), 0.9, 0.9)
        .unwrap_err();
    assert!(err.to_string().contains("holds 0 of 2 steps"), "{err}");
}

// A game of two agents taking turns (rows 0 and 1, step-major t * 2 + row): row 0 moves at
// t0 and t2, row 1 at t1 and t3. Row 0 gets 0.25 while waiting at t1; its move at t2 wins the
// game (row 0 +1, row 1 -1, both terminated); a new game starts at t3.
const TURNS: [bool; 8] = [true, false, false, true, true, false, false, true];
const TURN_REWARDS: [f32; 8] = [0.0, 0.0, 0.25, 0.0, 1.0, -1.0, 0.0, 0.0];
const TURN_VALUES: [f32; 8] = [0.2, 0.1, 0.3, -0.2, 0.5, 0.0, 0.4, 0.3];
const TURN_TERMINATED: [f32; 8] = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0];
const TURN_LAST_VALUES: [f32; 2] = [0.6, 0.7];

fn turn_arrays() -> RolloutArrays<'static> {
    RolloutArrays {
        num_envs: 2,
        rewards: &TURN_REWARDS,
        values: &TURN_VALUES,
        terminated: &TURN_TERMINATED,
        truncated: &[0.0; 8],
        truncation_values: &[0.0; 8],
        last_values: &TURN_LAST_VALUES,
        acting: Some(&TURNS),
        last_acting: None,
    }
}

#[test]
fn turns_learn_from_each_rows_own_moves_with_what_came_until_its_next() {
    // gamma 0.9, lambda 0.5, worked by hand, each row's turns only:
    // row 0: t2 (won, terminated): d = 1 - .5 = .5, A = .5
    //        t0: r = 0 + .25 (waiting at t1), bootstraps from V at its next turn t2 (.5):
    //            d = .25 + .9*.5 - .2 = .5, A = .5 + .45*.5 = .725
    // row 1: t3: bootstraps from V(s_4) = .7: d = .9*.7 - .3 = .33, A = .33
    //        t1: the game ended while it waited (t2: -1, terminated): r = -1, no bootstrap:
    //            d = -1 + .2 = -.8, A = -.8
    // The steps a row waited through get zeros (and its values as returns).
    let (advantages, returns) = generalized_advantages(&turn_arrays(), 0.9, 0.5).unwrap();
    assert_close(&advantages, &[0.725, 0.0, 0.0, -0.8, 0.5, 0.0, 0.0, 0.33]);
    assert_close(&returns, &[0.925, 0.1, 0.3, -1.0, 1.0, 0.0, 0.4, 0.63]);
    // n-step: row 0: R2 = 1, R0 = .25 + .9*1 = 1.15; row 1: R3 = .9*.7 = .63, R1 = -1.
    let n_step = n_step_returns(&turn_arrays(), 0.9).unwrap();
    assert_close(&n_step, &[1.15, 0.0, 0.0, -1.0, 1.0, 0.0, 0.0, 0.63]);
    let (_, lambda_one) = generalized_advantages(&turn_arrays(), 0.9, 1.0).unwrap();
    for i in (0..8).filter(|&i| TURNS[i]) {
        assert!((lambda_one[i] - n_step[i]).abs() < 1e-6, "index {i}");
    }
}

#[test]
fn a_turns_reward_sums_every_step_the_row_waited_through() {
    // Three agents, one move each (row 0 at t0, row 1 at t1, row 2 at t2). Row 0 gets .5 and
    // .25 while it waits; its next turn is past the rollout, so it bootstraps from V(s_3) = 2.
    let acting = [true, false, false, false, true, false, false, false, true];
    let rewards = [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.25, 1.0, 0.0];
    let turns = RolloutArrays {
        num_envs: 3,
        rewards: &rewards,
        values: &[0.5; 9],
        terminated: &[0.0; 9],
        truncated: &[0.0; 9],
        truncation_values: &[0.0; 9],
        last_values: &[2.0, 3.0, 4.0],
        acting: Some(&acting),
        last_acting: None,
    };
    // Row 0: .75 + .9*2 - .5 = 2.05. Row 1 (t1): 1 (at t2) + .9*3 - .5 = 3.2. Row 2 (t2):
    // .9*4 - .5 = 3.1.
    let returns = n_step_returns(&turns, 0.9).unwrap();
    assert_close(&[returns[0], returns[4], returns[8]], &[2.55, 3.7, 3.6]);
    let (advantages, _) = generalized_advantages(&turns, 0.9, 0.5).unwrap();
    assert_close(
        &[advantages[0], advantages[4], advantages[8]],
        &[2.05, 3.2, 3.1],
    );
}

/// A row that waits at s_T has no next turn in the rollout: V(s_T) is the value of an
/// observation it does not act on. Its last turn is left unlearned and the turn before it
/// bootstraps from its value; a row whose turn comes at s_T bootstraps from V(s_T) as before.
#[test]
fn a_row_waiting_after_the_rollout_leaves_its_last_turn_unlearned() {
    // Two rows taking turns (row 0 at t0 and t2, row 1 at t1 and t3), no game ends; at s_4 it
    // is row 0's turn, so row 1's V(s_4) = 9 is of a waiting row.
    let acting = [true, false, false, true, true, false, false, true];
    let rewards = [0.0, 0.0, 0.0, 0.0, 0.5, -0.25, 0.0, 0.0];
    let values = [0.2, 0.0, 0.0, 0.3, 0.4, 0.0, 0.0, 0.6];
    let turns = RolloutArrays {
        num_envs: 2,
        rewards: &rewards,
        values: &values,
        terminated: &[0.0; 8],
        truncated: &[0.0; 8],
        truncation_values: &[0.0; 8],
        last_values: &[1.0, 9.0],
        acting: Some(&acting),
        last_acting: Some(&[true, false]),
    };
    assert_eq!(turns.unbootstrapped_turns().unwrap(), [None, Some(7)]);
    // gamma .9, lambda .5. Row 0: t2: .5 + .9*1 - .4 = 1; t0: .9*.4 - .2 + .45*1 = .61.
    // Row 1: t3 unlearned (advantage 0, target its value .6); t1: -.25 (waited at t2)
    // + .9*.6 - .3 = -.01, nothing carried from t3.
    let (advantages, returns) = generalized_advantages(&turns, 0.9, 0.5).unwrap();
    assert_close(&advantages, &[0.61, 0.0, 0.0, -0.01, 1.0, 0.0, 0.0, 0.0]);
    assert_close(&returns, &[0.81, 0.0, 0.0, 0.29, 1.4, 0.0, 0.0, 0.6]);
    let n_step = n_step_returns(&turns, 0.9).unwrap();
    assert_close(&n_step, &[1.26, 0.0, 0.0, 0.29, 1.4, 0.0, 0.0, 0.6]);
    // Every row acting at s_T: row 1's t3 bootstraps from 9 (.9*9 - .6 = 7.5), and t1 with it.
    let every = RolloutArrays {
        last_acting: Some(&[true, true]),
        ..turns
    };
    assert_eq!(every.unbootstrapped_turns().unwrap(), [None, None]);
    let (advantages, _) = generalized_advantages(&every, 0.9, 0.5).unwrap();
    assert_close(&[advantages[3], advantages[7]], &[3.365, 7.5]);
}

#[test]
fn every_row_acting_is_the_estimators_without_turns_to_the_bit() {
    let all = [true; 6];
    let plain = arrays(&TERMINATED, &TRUNCATED);
    let turns = RolloutArrays {
        acting: Some(&all),
        last_acting: None,
        ..plain
    };
    assert_eq!(
        generalized_advantages(&turns, 0.9, 0.5).unwrap(),
        generalized_advantages(&plain, 0.9, 0.5).unwrap()
    );
    assert_eq!(
        n_step_returns(&turns, 0.9).unwrap(),
        n_step_returns(&plain, 0.9).unwrap()
    );
    let err = vtrace(
        &turn_arrays(),
        &[0.0; 8],
        0.9,
        1.0,
        VtraceClips { rho: 1.0, c: 1.0 },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("takes turns"), "{err}");
}

/// A buffer of the turns game, filled step by step, keeping what its batch does with the rows
/// that waited as `inactive` says.
fn turns_buffer(inactive: InactiveRows) -> RolloutBuffer {
    let mut buffer = RolloutBuffer::new(4, 2, &[1], ActionKind::Discrete, Device::Cpu).unwrap();
    buffer.set_inactive_rows(inactive);
    for t in 0..4 {
        let at = |values: &[f32]| Tensor::from_slice(&values[t * 2..t * 2 + 2]);
        let obs = Tensor::from_slice(&[10.0 * t as f32, 10.0 * t as f32 + 1.0]).reshape([2, 1]);
        buffer
            .push(&StepRecord {
                obs: &obs,
                actions: &Tensor::from_slice(&[t as i64, 5]),
                log_probs: &Tensor::from_slice(&[-0.5f32, -0.7]),
                values: &at(&TURN_VALUES),
                rewards: &at(&TURN_REWARDS),
                terminated: &at(&TURN_TERMINATED).to_kind(Kind::Bool),
                truncated: &Tensor::zeros([2], (Kind::Bool, Device::Cpu)),
                truncation_values: None,
                acting: Some(&TURNS[t * 2..t * 2 + 2]),
            })
            .unwrap();
    }
    buffer
}

#[test]
fn a_buffer_of_turns_batches_only_the_moves_in_step_order() {
    let buffer = turns_buffer(InactiveRows::Dropped);
    let batch = buffer
        .gae_batch(&Tensor::from_slice(&TURN_LAST_VALUES), 0.9, 0.5)
        .unwrap();
    // The moves: row 0 at t0, row 1 at t1, row 0 at t2, row 1 at t3.
    assert_eq!(
        Vec::<f32>::try_from(&batch.obs.reshape([-1])).unwrap(),
        [0.0, 11.0, 20.0, 31.0]
    );
    assert_eq!(Vec::<i64>::try_from(&batch.actions).unwrap(), [0, 5, 2, 5]);
    assert!(batch.active.is_none());
    assert_close(
        &Vec::<f32>::try_from(&batch.advantages).unwrap(),
        &[0.725, -0.8, 0.5, 0.33],
    );
    let n_step = buffer
        .n_step_batch(&Tensor::from_slice(&TURN_LAST_VALUES), 0.9)
        .unwrap();
    assert_close(
        &Vec::<f32>::try_from(&n_step.returns).unwrap(),
        &[1.15, -1.0, 1.0, 0.63],
    );
}

/// Row 1 waits at s_4 (row 0 moves next): its move at t3 weighs zero in either batch, with
/// no advantage; its move at t1, whose game ended while it waited, keeps its estimate.
#[test]
fn a_buffer_of_turns_weighs_zero_the_move_after_which_the_row_waits_out_the_rollout() {
    let last_obs = Tensor::from_slice(&[40.0f32, 41.0]).reshape([2, 1]);
    for inactive in [InactiveRows::Dropped, InactiveRows::Masked] {
        let mut buffer = turns_buffer(inactive);
        buffer
            .set_bootstrap(&last_obs, None, Some(&[true, false]))
            .unwrap();
        let batch = buffer
            .gae_batch(&Tensor::from_slice(&TURN_LAST_VALUES), 0.9, 0.5)
            .unwrap();
        let active = Vec::<f32>::try_from(batch.active.as_ref().expect("weighted")).unwrap();
        let advantages = Vec::<f32>::try_from(&batch.advantages).unwrap();
        match inactive {
            InactiveRows::Dropped => {
                assert_eq!(active, [1.0, 1.0, 1.0, 0.0]);
                assert_close(&advantages, &[0.725, -0.8, 0.5, 0.0]);
            }
            InactiveRows::Masked => {
                assert_eq!(active, [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
                assert_close(&[advantages[3], advantages[7]], &[-0.8, 0.0]);
            }
        }
    }
}

/// Kept with the waiting rows (a policy playing one side), the batch is every row in step
/// order, the moves marked active with the same estimates as above, the waits inactive.
#[test]
fn a_masked_buffer_of_turns_keeps_every_row_and_marks_the_moves() {
    let buffer = turns_buffer(InactiveRows::Masked);
    let batch = buffer
        .gae_batch(&Tensor::from_slice(&TURN_LAST_VALUES), 0.9, 0.5)
        .unwrap();
    assert_eq!(batch.len(), 8);
    let active = Vec::<f32>::try_from(batch.active.as_ref().expect("marked")).unwrap();
    let moves: Vec<f32> = TURNS.iter().map(|&m| f32::from(u8::from(m))).collect();
    assert_eq!(active, moves);
    let advantages = Vec::<f32>::try_from(&batch.advantages).unwrap();
    let of_moves: Vec<f32> = (advantages.iter().zip(&TURNS))
        .filter(|(_, m)| **m)
        .map(|(a, _)| *a)
        .collect();
    assert_close(&of_moves, &[0.725, -0.8, 0.5, 0.33]);
}

#[test]
fn sampler_is_seeded_and_covers_every_index_once() {
    let mut a = MinibatchSampler::new(42);
    let mut b = MinibatchSampler::new(42);
    let first = a.permutation(100);
    assert_eq!(first, b.permutation(100));
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, (0..100).collect::<Vec<i64>>());
    assert_ne!(
        first,
        (0..100).collect::<Vec<i64>>(),
        "a shuffle of 100 left everything in place"
    );
    assert_ne!(
        first,
        a.permutation(100),
        "consecutive epochs drew the same order"
    );
    assert_ne!(first, MinibatchSampler::new(43).permutation(100));

    // Resuming from a saved state continues the same sequence.
    let mut resumed = MinibatchSampler::new(a.state());
    assert_eq!(resumed.permutation(10), a.permutation(10));

    let minibatches = MinibatchSampler::new(1)
        .minibatches(12, 3, Device::Cpu)
        .unwrap();
    assert_eq!(minibatches.len(), 3);
    let mut all: Vec<i64> = minibatches
        .iter()
        .flat_map(|m| Vec::<i64>::try_from(m).unwrap())
        .collect();
    all.sort();
    assert_eq!(all, (0..12).collect::<Vec<i64>>());
    let err = MinibatchSampler::new(1)
        .minibatches(10, 3, Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not split into 3"), "{err}");
}

#[test]
fn pixel_observations_can_be_stored_as_bytes() {
    let mut buffer = RolloutBuffer::with_obs_kind(
        1,
        2,
        &[1, 2, 2],
        Kind::Uint8,
        ActionKind::Discrete,
        Device::Cpu,
    )
    .unwrap();
    let obs =
        Tensor::from_slice(&[0f32, 17.0, 128.0, 255.0, 1.0, 2.0, 3.0, 254.0]).reshape([2, 1, 2, 2]);
    let zeros = Tensor::zeros([2], (Kind::Float, Device::Cpu));
    let actions = Tensor::zeros([2], (Kind::Int64, Device::Cpu));
    push_step(&mut buffer, &obs, &actions).unwrap();
    let batch = buffer.gae_batch(&zeros, 0.99, 0.95).unwrap();
    assert_eq!(batch.obs.kind(), Kind::Uint8);
    assert!(batch.obs.to_kind(Kind::Float).equal(&obs));
    let err =
        RolloutBuffer::with_obs_kind(1, 2, &[3], Kind::Int64, ActionKind::Discrete, Device::Cpu)
            .unwrap_err();
    assert!(err.to_string().contains("not Int64"), "{err}");
}

/// A step of `n` environments with the given actions, observations `[n, 3]` and zero
/// everything else.
fn push_actions(buffer: &mut RolloutBuffer, actions: &Tensor) -> anyhow::Result<()> {
    let obs = Tensor::zeros([buffer.num_envs(), 3], (Kind::Float, Device::Cpu));
    push_step(buffer, &obs, actions)
}

/// A step with the given observations and actions and zero everything else.
fn push_step(buffer: &mut RolloutBuffer, obs: &Tensor, actions: &Tensor) -> anyhow::Result<()> {
    let n = buffer.num_envs();
    let zeros = Tensor::zeros([n], (Kind::Float, Device::Cpu));
    buffer.push(&StepRecord {
        obs,
        actions,
        log_probs: &zeros,
        values: &zeros,
        rewards: &zeros,
        terminated: &zeros,
        truncated: &zeros,
        truncation_values: None,
        acting: None,
    })
}

/// Box action `(t, env)` of dimension 3: every value distinct, so a row copied short (the plain
/// copy sized for N values instead of N*d) or out of order shows.
fn box_action(t: i64, env: i64, i: i64) -> f32 {
    (100 * t + 10 * env + i) as f32 + 0.5
}

#[test]
fn box_actions_flatten_to_rows_of_their_dimension_through_batches_and_minibatches() {
    let (steps, n, d) = (3, 2, 3);
    let mut buffer =
        RolloutBuffer::new(steps, n, &[3], ActionKind::Box { dim: 3 }, Device::Cpu).unwrap();
    for t in 0..steps {
        let values: Vec<f32> = (0..n)
            .flat_map(|env| (0..d).map(move |i| box_action(t, env, i)))
            .collect();
        push_actions(&mut buffer, &Tensor::from_slice(&values).reshape([n, d])).unwrap();
    }
    let batch = buffer
        .gae_batch(&Tensor::zeros([n], (Kind::Float, Device::Cpu)), 0.9, 0.9)
        .unwrap();
    assert_eq!(batch.actions.size(), [steps * n, d]);
    assert_eq!(batch.actions.kind(), Kind::Float);
    let row = |b: &tandem::algo::Batch, r: i64| Vec::<f32>::try_from(&b.actions.get(r)).unwrap();
    // Row t * N + env, as for every other field.
    for t in 0..steps {
        for env in 0..n {
            let expected: Vec<f32> = (0..d).map(|i| box_action(t, env, i)).collect();
            assert_eq!(row(&batch, t * n + env), expected, "t={t} env={env}");
        }
    }
    let picked = Tensor::from_slice(&[5i64, 0, 3]);
    let selected = batch.select(&picked);
    assert_eq!(selected.actions.size(), [3, d]);
    assert_eq!(row(&selected, 0), row(&batch, 5));
    assert_eq!(row(&selected, 2), row(&batch, 3));
    let narrowed = batch.narrow(2, 2).unwrap();
    assert_eq!(row(&narrowed, 1), row(&batch, 3));
    let minibatches = MinibatchSampler::new(7)
        .minibatches(batch.len(), 2, Device::Cpu)
        .unwrap();
    for indices in &minibatches {
        let mb = batch.select(indices);
        assert_eq!(mb.actions.size(), [3, d]);
        for (k, &r) in Vec::<i64>::try_from(indices).unwrap().iter().enumerate() {
            assert_eq!(row(&mb, k as i64), row(&batch, r));
        }
    }
}

#[test]
fn actions_of_the_wrong_kind_or_shape_are_refused() {
    let boxes = ActionKind::Box { dim: 2 };
    let cases: [(ActionKind, &[i64], Kind, &str); 5] = [
        (
            boxes,
            &[2, 2],
            Kind::Int64,
            "box actions must be floats, got Int64",
        ),
        (
            boxes,
            &[2],
            Kind::Float,
            "actions have shape [2], expected [2, 2] for box actions of 2 f32",
        ),
        (boxes, &[2, 3], Kind::Float, "expected [2, 2]"),
        (
            ActionKind::Discrete,
            &[2, 2],
            Kind::Float,
            "actions have shape [2, 2], expected [2] for discrete actions",
        ),
        (
            ActionKind::Discrete,
            &[2],
            Kind::Float,
            "discrete actions must be integers",
        ),
    ];
    for (kind, shape, dtype, message) in cases {
        let mut buffer = RolloutBuffer::new(1, 2, &[3], kind, Device::Cpu).unwrap();
        let err = push_actions(&mut buffer, &Tensor::zeros(shape, (dtype, Device::Cpu)))
            .unwrap_err()
            .to_string();
        assert!(err.contains(message), "{kind} {shape:?} {dtype:?}: {err}");
        assert!(buffer.is_empty(), "a refused step must not be recorded");
    }
    let err = tandem::algo::Batch::new(
        Tensor::zeros([4, 3], (Kind::Float, Device::Cpu)),
        Tensor::zeros([3, 2], (Kind::Float, Device::Cpu)),
        Tensor::zeros([4], (Kind::Float, Device::Cpu)),
        Tensor::zeros([4], (Kind::Float, Device::Cpu)),
        Tensor::zeros([4], (Kind::Float, Device::Cpu)),
        Tensor::zeros([4], (Kind::Float, Device::Cpu)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("actions have shape [3, 2], expected [4] or [4, dim]"),
        "{err}"
    );
}

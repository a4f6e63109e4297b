//! The DDP equivalence test for TD3, with real processes and real Gloo: a fixed global batch
//! (with its fixed per-sample smoothing noise) trained on 1 rank and split over 2 ranks gives
//! the same actor, critics and targets (within 1e-5) after 10 gradient steps with policy-delay
//! 2 (5 critic-only steps and 5 that also move the actor and the targets), and both ranks end
//! bitwise equal. Every synchronised gradient (actor and critics together: TD3 syncs once
//! for the critics' step, the actor's part zero, and on a delayed step once more for the
//! actor's, the critics' part zero) is compared with 1 rank's too, so a DDP that summed where
//! it should average fails even though Adam hides the scale from the parameters.

mod common;

use common::equivalence::Harness;
use common::{RecordGradients, seeded};
use tandem::algo::Collective;
use tandem::algo::off_policy::box_rule::BoxLearner;
use tandem::algo::td3::{Settings, Td3, Td3Batch};
use tandem::nn::{Activation, NetworkSpec};
use tch::{Device, Kind, Tensor};

const GLOBAL_BATCH: i64 = 8;
const UPDATES: usize = 10;
const OBS: i64 = 3;
const ACT: i64 = 2;

fn learner(seed: i64) -> Td3 {
    let config = Settings {
        actor_lr: 0.01,
        critic_lr: 0.02,
        tau: 0.3,
        policy_delay: 2,
        target_policy_noise: 0.4,
        target_noise_clip: 0.5,
        max_grad_norm: Some(5.0),
        ..Settings::default()
    };
    seeded(seed, || {
        Td3::new(
            Device::Cpu,
            &NetworkSpec::Mlp {
                hidden: vec![16, 16],
                activation: Activation::Relu,
            },
            &common::orthogonal_init(),
            &[OBS],
            ACT,
            config,
        )
        .unwrap()
    })
}

/// Rows [start, start + len) of a fixed global batch: terminal and non-terminal transitions,
/// unit-box actions, and a standard-normal-like noise per sample (some beyond the clip).
fn batch(start: i64, len: i64) -> Td3Batch {
    let rows = |t: Tensor| t.narrow(0, start, len);
    let n = GLOBAL_BATCH;
    let f = (Kind::Float, Device::Cpu);
    let grid = |k: i64, scale: f64| Tensor::arange(n * k, f).reshape([n, k]) * scale;
    Td3Batch {
        obs: rows(grid(OBS, 0.7).sin()),
        actions: rows(grid(ACT, 1.3).cos() * 0.9),
        rewards: rows(Tensor::arange(n, f).cos() * 3.0),
        discounts: rows(Tensor::from_slice(&[
            0.99f32, 0.0, 0.99, 0.99, 0.0, 0.99, 0.99, 0.99,
        ])),
        next_obs: rows(grid(OBS, 0.9).cos()),
        noise_next: rows(grid(ACT, 2.1).sin() * 2.0),
    }
}

/// `UPDATES` gradient steps (a delayed one every second); every synchronised gradient.
fn train(td3: &mut Td3, collective: &mut dyn Collective, start: i64, len: i64) -> Vec<Vec<f32>> {
    let b = batch(start, len);
    let mut recorder = RecordGradients::new(collective);
    for step in 1..=UPDATES {
        let stats = td3.update(&b, &mut recorder).unwrap();
        assert_eq!(stats.actor.is_some(), step % 2 == 0, "step {step}");
        let syncs = step + step / 2;
        assert_eq!(recorder.synced.len(), syncs, "one sync per optimizer step");
    }
    recorder.synced
}

const HARNESS: Harness<Td3> = Harness {
    learner,
    train,
    trainable: Td3::trainable_parameters,
    named: Td3::named_state,
    optimizer: Td3::optimizer_state,
    global_batch: GLOBAL_BATCH,
};

#[test]
fn td3_on_two_ranks_equals_one_rank() {
    if common::role().is_some() {
        return HARNESS.run_rank();
    }
    HARNESS.assert_two_ranks_equal_one(
        "td3_on_two_ranks_equals_one_rank",
        &[
            "model.actor.",
            "model.critic.",
            "target.actor.",
            "target.critic.",
        ],
    );
}

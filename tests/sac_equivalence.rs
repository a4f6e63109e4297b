//! The DDP equivalence test for SAC, with real processes and real Gloo: a fixed global batch
//! (with its fixed per-sample noise) trained on 1 rank and split over 2 ranks gives the same
//! actor, critics, targets and temperature (within 1e-5) after 10 gradient steps, and both ranks
//! end bitwise equal. Every step's synchronised gradient (actor, critics and log α together:
//! SAC syncs once per step) is compared with 1 rank's too, so a DDP that summed where it should
//! average fails even though Adam hides the scale from the parameters.

mod common;

use common::equivalence::Harness;
use common::{RecordGradients, seeded};
use tandem::algo::Collective;
use tandem::algo::off_policy::box_rule::BoxLearner;
use tandem::algo::sac::{Sac, SacBatch, Settings};
use tandem::nn::{Activation, NetworkSpec};
use tch::{Device, Kind, Tensor};

const GLOBAL_BATCH: i64 = 8;
const UPDATES: usize = 10;
const OBS: i64 = 3;
const ACT: i64 = 2;

fn learner(seed: i64) -> Sac {
    let config = Settings {
        actor_lr: 0.01,
        critic_lr: 0.02,
        alpha_lr: 0.05,
        tau: 0.3,
        alpha: tandem_config::AutoOr::Auto,
        initial_alpha: 0.5,
        target_entropy: tandem_config::AutoOr::Value(-2.0),
        max_grad_norm: Some(5.0),
        ..Settings::default()
    };
    seeded(seed, || {
        Sac::new(
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
/// unit-box actions, and a standard-normal-like noise per sample.
fn batch(start: i64, len: i64) -> SacBatch {
    let rows = |t: Tensor| t.narrow(0, start, len);
    let n = GLOBAL_BATCH;
    let f = (Kind::Float, Device::Cpu);
    let grid = |k: i64, scale: f64| Tensor::arange(n * k, f).reshape([n, k]) * scale;
    SacBatch {
        obs: rows(grid(OBS, 0.7).sin()),
        actions: rows(grid(ACT, 1.3).cos() * 0.9),
        rewards: rows(Tensor::arange(n, f).cos() * 3.0),
        discounts: rows(Tensor::from_slice(&[
            0.99f32, 0.0, 0.99, 0.99, 0.0, 0.99, 0.99, 0.99,
        ])),
        next_obs: rows(grid(OBS, 0.9).cos()),
        eps_next: rows(grid(ACT, 2.1).sin() * 1.5),
        eps_now: rows(grid(ACT, 0.37).cos() * 1.2),
    }
}

/// `UPDATES` gradient steps; each step's synchronised gradient.
fn train(sac: &mut Sac, collective: &mut dyn Collective, start: i64, len: i64) -> Vec<Vec<f32>> {
    let b = batch(start, len);
    let mut recorder = RecordGradients::new(collective);
    for _ in 0..UPDATES {
        sac.update(&b, &mut recorder).unwrap();
    }
    recorder.synced
}

const HARNESS: Harness<Sac> = Harness {
    learner,
    train,
    trainable: Sac::trainable_parameters,
    named: Sac::named_state,
    optimizer: Sac::optimizer_state,
    global_batch: GLOBAL_BATCH,
};

#[test]
fn sac_on_two_ranks_equals_one_rank() {
    if common::role().is_some() {
        return HARNESS.run_rank();
    }
    HARNESS.assert_two_ranks_equal_one(
        "sac_on_two_ranks_equals_one_rank",
        &[
            "model.actor.",
            "model.critic.",
            "model.alpha.",
            "target.critic.",
        ],
    );
}

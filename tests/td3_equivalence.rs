//! The DDP equivalence test for TD3, with real processes and real Gloo: a fixed global batch
//! (with its fixed per-sample smoothing noise) trained on 1 rank and split over 2 ranks gives
//! the same actor, critics and targets (within 1e-5) after 10 gradient steps with policy-delay
//! 2 (5 critic-only steps and 5 that also move the actor and the targets), and both ranks end
//! bitwise equal. Every step's synchronised gradient (actor and critics together: TD3 syncs
//! once per step, the actor's part zero on the critic-only steps) is compared with 1 rank's
//! too, so a DDP that summed where it should average fails even though Adam hides the scale
//! from the parameters.

mod common;

use std::time::Duration;

use common::{
    RecordGradients, assert_same_gradients, child_options, parse_params, parse_values,
    print_params, print_values, role, run_two_ranks, seeded,
};
use tandem::algo::Collective;
use tandem::algo::Local;
use tandem::algo::td3::{Td3, Td3Batch, Td3Config};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tandem::nn::{Activation, NetworkSpec};
use tch::{Device, Kind, Tensor};

const GLOBAL_BATCH: i64 = 8;
const UPDATES: usize = 10;
const OBS: i64 = 3;
const ACT: i64 = 2;

fn learner(seed: i64) -> Td3 {
    let config = Td3Config {
        actor_lr: 0.01,
        critic_lr: 0.02,
        tau: 0.3,
        policy_delay: 2,
        target_policy_noise: 0.4,
        target_noise_clip: 0.5,
        max_grad_norm: 5.0,
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

fn flat(td3: &Td3) -> Vec<f32> {
    td3.named_state()
        .iter()
        .flat_map(|(_, t)| Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap())
        .collect()
}

/// `UPDATES` gradient steps; the final state and each step's synchronised gradient.
fn train(
    td3: &mut Td3,
    collective: &mut dyn Collective,
    start: i64,
    len: i64,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let b = batch(start, len);
    let mut recorder = RecordGradients::new(collective);
    for step in 1..=UPDATES {
        let stats = td3.update(&b, &mut recorder).unwrap();
        assert_eq!(stats.actor.is_some(), step % 2 == 0, "step {step}");
        assert_eq!(recorder.synced.len(), step, "one gradient sync per step");
    }
    (flat(td3), recorder.synced)
}

fn run_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    // Ranks initialise differently on purpose; the start-up broadcast must make them equal.
    let mut td3 = learner(100 + rank);
    let mut ddp = Ddp::new(
        pg,
        &td3.trainable_parameters(),
        SyncPolicy::AllReduce {
            bucket_bytes: 512,
            bf16: false,
        },
    )
    .unwrap();
    let mut state: Vec<Tensor> = td3.named_state().into_iter().map(|(_, t)| t).collect();
    state.extend(td3.optimizer_state().into_iter().map(|(_, t)| t));
    ddp.broadcast_from_rank0(&state).unwrap();
    let half = GLOBAL_BATCH / 2;
    let (values, grads) = train(&mut td3, &mut ddp, rank * half, half);
    ddp.check_fingerprints(&td3.named_state()).unwrap();
    print_params(&values);
    print_values("GRADS", &grads.concat());
}

#[test]
fn td3_on_two_ranks_equals_one_rank() {
    if role().is_some() {
        return run_rank();
    }
    let test = "td3_on_two_ranks_equals_one_rank";
    let outputs = run_two_ranks(test, 20_000, &[], Duration::from_secs(60));
    let [(p0, g0), (p1, g1)] = [0, 1].map(|r| {
        (
            parse_params(&outputs[r]),
            parse_values("GRADS", &outputs[r]),
        )
    });
    assert_eq!(
        p0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        p1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "ranks differ bitwise"
    );
    assert_eq!(g0, g1, "ranks synchronised different gradients");
    let initial = learner(100);
    let before = flat(&initial);
    let mut reference = learner(100);
    let (one, one_grads) = train(&mut reference, &mut Local, 0, GLOBAL_BATCH);
    assert_same_gradients(&g0, &one_grads, 1e-4);
    assert_eq!(p0.len(), one.len());
    for (i, (a, b)) in p0.iter().zip(&one).enumerate() {
        assert!((a - b).abs() <= 1e-5, "value {i}: 2 ranks {a}, 1 rank {b}");
    }
    // Every part moved: actor, critics and both targets (the comparison is not between initial
    // states).
    let names = initial.named_state();
    let mut at = 0;
    for (name, t) in &names {
        let n = t.numel();
        let moved = (at..at + n)
            .map(|i| (p0[i] - before[i]).abs())
            .fold(0f32, f32::max);
        assert!(moved > 1e-4, "{name} did not move");
        at += n;
    }
    for p in [
        "model.actor.",
        "model.critic.",
        "target.actor.",
        "target.critic.",
    ] {
        assert!(
            names.iter().any(|(n, _)| n.starts_with(p)),
            "no {p}* tensors"
        );
    }
}

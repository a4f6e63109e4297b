//! The DDP equivalence test for the DQN loss with target networks, with real processes and real
//! Gloo: a fixed global batch trained on 1 rank and split over 2 ranks gives the same online and
//! target parameters (within 1e-5) after 10 gradient steps that include three target copies, and
//! both ranks end bitwise equal. Every step's synchronised gradient is compared with 1 rank's
//! too: Adam and a gradient clip make the parameters nearly blind to the gradient's scale, so
//! they alone would not show a DDP that summed where it should average.

mod common;

use std::time::Duration;

use common::{
    RecordGradients, assert_same_gradients, child_options, parse_params, parse_values,
    print_params, print_values, role, run_two_ranks, seeded,
};
use tandem::algo::Collective;
use tandem::algo::Local;
use tandem::algo::dqn::{Dqn, TransitionBatch};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tandem::nn::{Activation, ActorCriticSpec, NetworkSpec, trainable_parameters_in_order};
use tch::{Device, Kind, Tensor};

const GLOBAL_BATCH: i64 = 8;
const UPDATES: usize = 10;

fn config(tau: f64) -> tandem_config::Dqn {
    tandem_config::Dqn {
        lr: 0.01,
        double: true,
        dueling: true,
        loss: tandem_config::Loss::Huber,
        max_grad_norm: Some(0.5),
        target_every: 3,
        tau,
        ..Default::default()
    }
}

fn learner(seed: i64, tau: f64) -> Dqn {
    seeded(seed, || {
        Dqn::new(
            Device::Cpu,
            &ActorCriticSpec::for_network(
                NetworkSpec::Mlp {
                    hidden: vec![16],
                    activation: Activation::Relu,
                },
                common::orthogonal_init(),
            ),
            &[4],
            3,
            config(tau),
        )
        .unwrap()
    })
}

/// Rows [start, start + len) of a fixed global batch: terminal and non-terminal transitions,
/// uneven importance weights.
fn batch(start: i64, len: i64) -> TransitionBatch {
    let rows = |t: Tensor| t.narrow(0, start, len);
    let n = GLOBAL_BATCH;
    let f = (Kind::Float, Device::Cpu);
    TransitionBatch {
        obs: rows(Tensor::arange(n * 4, f).reshape([n, 4]).sin()),
        actions: rows(Tensor::arange(n, (Kind::Int64, Device::Cpu)).remainder(3)),
        returns: rows(Tensor::arange(n, f).cos() * 3.0),
        discounts: rows(Tensor::from_slice(&[
            0.99f32, 0.0, 0.97, 0.99, 0.0, 0.95, 0.99, 0.98,
        ])),
        next_obs: rows(Tensor::arange(n * 4, f).reshape([n, 4]).cos()),
        weights: rows(Tensor::from_slice(&[
            1.0f32, 0.5, 0.25, 1.0, 0.8, 0.6, 1.0, 0.3,
        ])),
    }
}

fn flat(dqn: &Dqn) -> Vec<f32> {
    dqn.named_state()
        .iter()
        .flat_map(|(_, t)| Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap())
        .collect()
}

fn target_len(dqn: &Dqn) -> usize {
    dqn.named_state()
        .iter()
        .filter(|(n, _)| n.starts_with("target."))
        .map(|(_, t)| t.numel())
        .sum()
}

/// `UPDATES` gradient steps; the final online and target parameters, and each step's
/// synchronised gradient.
fn train(
    dqn: &mut Dqn,
    collective: &mut dyn Collective,
    start: i64,
    len: i64,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let b = batch(start, len);
    let mut copies = 0;
    let mut recorder = RecordGradients::new(collective);
    for _ in 0..UPDATES {
        let stats = dqn.update(&b, &mut recorder).unwrap();
        copies += stats.target_updated as usize;
        assert_eq!(stats.td_errors.len(), len as usize);
    }
    assert_eq!(copies, 3, "target updates at gradient steps 3, 6 and 9");
    (flat(dqn), recorder.synced)
}

fn tau_from_env() -> f64 {
    std::env::var("TEST_TAU").unwrap().parse().unwrap()
}

fn run_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    // Ranks initialise differently on purpose; the trainer's start-up broadcast (online, target
    // and optimizer state) must make them equal.
    let mut dqn = learner(100 + rank, tau_from_env());
    let params = trainable_parameters_in_order(dqn.online_vs());
    let mut ddp = Ddp::new(
        pg,
        &params,
        SyncPolicy::Allreduce {
            bucket_mb: 256.0 / (1024.0 * 1024.0),
            compression: tandem_config::Compression::None,
        },
    )
    .unwrap();
    let mut state: Vec<Tensor> = dqn.named_state().into_iter().map(|(_, t)| t).collect();
    state.extend(dqn.optimizer().state_tensors().into_iter().map(|(_, t)| t));
    ddp.broadcast_from_rank0(&state).unwrap();
    let half = GLOBAL_BATCH / 2;
    let (values, grads) = train(&mut dqn, &mut ddp, rank * half, half);
    ddp.check_fingerprints(&dqn.named_state()).unwrap();
    print_params(&values);
    print_values("GRADS", &grads.concat());
}

/// Each rank's final parameters and synchronised gradients.
fn run_two(test: &str, tau: &str) -> [(Vec<f32>, Vec<f32>); 2] {
    let outputs = run_two_ranks(test, 20_000, &[("TEST_TAU", tau)], Duration::from_secs(60));
    let parse = |out: &String| (parse_params(out), parse_values("GRADS", out));
    [parse(&outputs[0]), parse(&outputs[1])]
}

fn check(test: &str, tau: f64) {
    let [(p0, g0), (p1, g1)] = run_two(test, &tau.to_string());
    assert_eq!(
        p0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        p1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "ranks differ bitwise"
    );
    let initial = learner(100, tau);
    let before = flat(&initial);
    let targets = target_len(&initial);
    let mut reference = learner(100, tau);
    let (one, one_grads) = train(&mut reference, &mut Local, 0, GLOBAL_BATCH);
    assert_eq!(g0, g1, "ranks synchronised different gradients");
    assert_same_gradients(&g0, &one_grads, 1e-4);
    assert_eq!(p0.len(), one.len());
    for (i, (a, b)) in p0.iter().zip(&one).enumerate() {
        assert!((a - b).abs() <= 1e-5, "value {i}: 2 ranks {a}, 1 rank {b}");
    }
    // Online and target parameters both moved (the comparison is not between initial states).
    let split = p0.len() - targets;
    let moved = |range: std::ops::Range<usize>| {
        range
            .map(|i| (p0[i] - before[i]).abs())
            .fold(0.0f32, f32::max)
    };
    assert!(moved(0..split) > 1e-2, "online parameters did not move");
    assert!(
        moved(split..p0.len()) > 1e-2,
        "target parameters did not move"
    );
}

#[test]
fn dqn_with_hard_target_copies_on_two_ranks_equals_one_rank() {
    if role().is_some() {
        return run_rank();
    }
    check(
        "dqn_with_hard_target_copies_on_two_ranks_equals_one_rank",
        1.0,
    );
}

#[test]
fn dqn_with_polyak_targets_on_two_ranks_equals_one_rank() {
    if role().is_some() {
        return run_rank();
    }
    check("dqn_with_polyak_targets_on_two_ranks_equals_one_rank", 0.5);
}

//! DDP with real processes and real Gloo: splitting a global batch over 2 ranks must give the
//! parameters that 1 rank gets on the whole batch, ranks must end bitwise equal, and the
//! fingerprint check must catch a rank that drifted.

mod common;

use std::process::Child;
use std::time::Duration;

use common::{child_options, finish, free_port, role, spawn_rank};
use tandem::algo::{Collective, Local};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tandem::optim::{Optimizer, OptimizerKind};
use tch::{Device, Kind, Tensor};

const GLOBAL_BATCH: i64 = 8;
const UPDATES: usize = 10;

/// A fixed regression problem: inputs and targets for the whole global batch.
fn data() -> (Tensor, Tensor) {
    let x = Tensor::arange(GLOBAL_BATCH * 4, (Kind::Float, Device::Cpu))
        .reshape([GLOBAL_BATCH, 4])
        .sin();
    let y = Tensor::arange(GLOBAL_BATCH * 3, (Kind::Float, Device::Cpu))
        .reshape([GLOBAL_BATCH, 3])
        .cos();
    (x, y)
}

fn model(seed: i64) -> Vec<Tensor> {
    tch::manual_seed(seed);
    let w = Tensor::randn([3, 4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let b = Tensor::randn([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    vec![w, b]
}

/// `UPDATES` Adam steps on rows [start, start + len) of the global batch, synchronising through
/// `collective`; returns the final parameters.
fn train(params: &[Tensor], collective: &mut dyn Collective, start: i64, len: i64) -> Vec<f32> {
    let (x, y) = data();
    let (x, y) = (x.narrow(0, start, len), y.narrow(0, start, len));
    let mut opt = Optimizer::new(
        OptimizerKind::adam(),
        params.iter().map(|p| p.shallow_clone()).collect(),
        0.05,
    );
    for _ in 0..UPDATES {
        opt.zero_grad();
        let pred = x.matmul(&params[0].tr()) + &params[1];
        let loss = (pred - &y).square().mean(Kind::Float);
        loss.backward();
        collective.sync_gradients(params).unwrap();
        opt.step();
    }
    params
        .iter()
        .flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap())
        .collect()
}

fn policy_from_env() -> SyncPolicy {
    match std::env::var("TEST_POLICY").unwrap().as_str() {
        "allreduce" => SyncPolicy::AllReduce {
            bucket_bytes: 16,
            bf16: false,
        },
        "allreduce-bf16" => SyncPolicy::AllReduce {
            bucket_bytes: 1 << 20,
            bf16: true,
        },
        "broadcast" => SyncPolicy::Broadcast,
        other => panic!("unknown policy {other}"),
    }
}

fn run_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    // Ranks initialise differently on purpose: the start-up broadcast must make them equal.
    let params = model(100 + rank);
    let mut ddp = Ddp::new(pg, &params, policy_from_env()).unwrap();
    ddp.broadcast_from_rank0(&params).unwrap();
    let half = GLOBAL_BATCH / 2;
    let steps_locally = ddp.steps_locally();
    let (x, y) = data();
    let (x, y) = (
        x.narrow(0, rank * half, half),
        y.narrow(0, rank * half, half),
    );
    let mut opt = Optimizer::new(
        OptimizerKind::adam(),
        params.iter().map(|p| p.shallow_clone()).collect(),
        0.05,
    );
    for _ in 0..UPDATES {
        opt.zero_grad();
        let loss = (x.matmul(&params[0].tr()) + &params[1] - &y)
            .square()
            .mean(Kind::Float);
        loss.backward();
        ddp.sync_gradients(&params).unwrap();
        if steps_locally {
            opt.step();
        }
        ddp.after_step(&params).unwrap();
    }
    let named: Vec<(String, Tensor)> = vec![
        ("w".into(), params[0].shallow_clone()),
        ("b".into(), params[1].shallow_clone()),
    ];
    ddp.check_fingerprints(&named).unwrap();
    if std::env::var("TEST_PERTURB").is_ok() {
        if rank == 1 {
            tch::no_grad(|| {
                let _ = params[1].narrow(0, 1, 1).g_add_scalar_(1e-3);
            });
        }
        let err = ddp.check_fingerprints(&named).unwrap_err();
        println!("drift: {err}");
        return;
    }
    let values: Vec<String> = params
        .iter()
        .flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap())
        .map(|v| format!("{:08x}", v.to_bits()))
        .collect();
    println!("PARAMS {}", values.join(","));
}

fn parse_params(output: &str) -> Vec<f32> {
    // The test harness may print "test name ... " on the same line first.
    let (_, rest) = output
        .split_once("PARAMS ")
        .unwrap_or_else(|| panic!("no PARAMS in:\n{output}"));
    let line = rest.lines().next().unwrap();
    line.split(',')
        .map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap()))
        .collect()
}

fn run_two(test: &str, extra: &[(&str, &str)]) -> Vec<String> {
    let port = free_port();
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn_rank(test, r, 2, port, 20_000, extra))
        .collect();
    ranks
        .into_iter()
        .enumerate()
        .map(|(r, child)| {
            let done = finish(child, Duration::from_secs(60));
            assert!(done.success, "rank {r} failed:\n{}", done.output);
            done.output
        })
        .collect()
}

fn reference() -> Vec<f32> {
    let params = model(100);
    train(&params, &mut Local, 0, GLOBAL_BATCH)
}

fn assert_close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol,
            "element {i}: {x} vs {y} (tolerance {tol})"
        );
    }
}

#[test]
fn allreduce_on_two_ranks_equals_one_rank_on_the_global_batch() {
    if role().is_some() {
        return run_rank();
    }
    let outputs = run_two(
        "allreduce_on_two_ranks_equals_one_rank_on_the_global_batch",
        &[("TEST_POLICY", "allreduce")],
    );
    let (p0, p1) = (parse_params(&outputs[0]), parse_params(&outputs[1]));
    assert_eq!(
        p0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        p1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "ranks differ bitwise"
    );
    let one = reference();
    assert_close(&p0, &one, 1e-5);
    // And the run did move the parameters (the comparison is not between two initial states).
    let init: Vec<f32> = model(100)
        .iter()
        .flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap())
        .collect();
    assert!(p0.iter().zip(&init).any(|(a, b)| (a - b).abs() > 0.1));
}

#[test]
fn broadcast_policy_on_two_ranks_equals_one_rank() {
    if role().is_some() {
        return run_rank();
    }
    let outputs = run_two(
        "broadcast_policy_on_two_ranks_equals_one_rank",
        &[("TEST_POLICY", "broadcast")],
    );
    let (p0, p1) = (parse_params(&outputs[0]), parse_params(&outputs[1]));
    assert_eq!(p0, p1);
    assert_close(&p0, &reference(), 1e-5);
}

#[test]
fn bf16_compressed_allreduce_keeps_ranks_equal_and_close() {
    if role().is_some() {
        return run_rank();
    }
    let outputs = run_two(
        "bf16_compressed_allreduce_keeps_ranks_equal_and_close",
        &[("TEST_POLICY", "allreduce-bf16")],
    );
    let (p0, p1) = (parse_params(&outputs[0]), parse_params(&outputs[1]));
    assert_eq!(p0, p1);
    // bf16 keeps 8 bits of mantissa; Adam's normalised steps keep the drift small.
    assert_close(&p0, &reference(), 2e-2);
}

#[test]
fn the_fingerprint_check_catches_a_perturbed_parameter() {
    if role().is_some() {
        return run_rank();
    }
    let outputs = run_two(
        "the_fingerprint_check_catches_a_perturbed_parameter",
        &[("TEST_POLICY", "allreduce"), ("TEST_PERTURB", "1")],
    );
    for out in outputs {
        assert!(
            out.contains("drift: ranks have drifted apart: rank(s) [1] differ from rank 0 in `b`"),
            "{out}"
        );
    }
}

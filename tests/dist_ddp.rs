//! DDP with real processes and real Gloo: splitting a global batch over 2 ranks must give the
//! parameters that 1 rank gets on the whole batch, and at every step the gradient 1 rank computes
//! (Adam hardly sees a gradient's scale, so only the gradients show a sum where an average
//! belongs); ranks must end bitwise equal, and the fingerprint check must catch a rank that
//! drifted.

mod common;

use std::time::Duration;

use common::{
    RecordGradients, assert_same_gradients, child_options, parse_params, parse_values,
    print_params, print_values, role, run_two_ranks, seeded,
};
use tandem::algo::{Collective, Local};
use tandem::algo::{Optimizer, OptimizerSpec};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tandem::nn::trainable_parameters_in_order;
use tch::nn::VarStore;
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

/// A linear model in a VarStore, initialised from `seed`.
fn model(seed: i64) -> VarStore {
    seeded(seed, || {
        let vs = VarStore::new(Device::Cpu);
        let root = vs.root();
        let _ = root.var(
            "b",
            &[3],
            tch::nn::Init::Randn {
                mean: 0.0,
                stdev: 1.0,
            },
        );
        let _ = root.var(
            "w",
            &[3, 4],
            tch::nn::Init::Randn {
                mean: 0.0,
                stdev: 1.0,
            },
        );
        vs
    })
}

fn adam(vs: &VarStore) -> Optimizer {
    Optimizer::new(
        vs,
        OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-5,
        },
    )
    .unwrap()
}

/// Parameters in the fixed order: b, then w.
fn flat(params: &[Tensor]) -> Vec<f32> {
    params
        .iter()
        .flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap())
        .collect()
}

fn loss(params: &[Tensor], x: &Tensor, y: &Tensor) -> Tensor {
    let (b, w) = (&params[0], &params[1]);
    (x.matmul(&w.tr()) + b - y).square().mean(Kind::Float)
}

/// `UPDATES` Adam steps on rows [start, start + len) of the global batch, synchronising through
/// `collective`; returns the final parameters and each step's synchronised gradient.
fn train(
    vs: &VarStore,
    collective: &mut dyn Collective,
    start: i64,
    len: i64,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let params = trainable_parameters_in_order(vs);
    let (x, y) = data();
    let (x, y) = (x.narrow(0, start, len), y.narrow(0, start, len));
    let mut opt = adam(vs);
    let mut recorder = RecordGradients::new(collective);
    for _ in 0..UPDATES {
        opt.zero_grad();
        loss(&params, &x, &y).backward();
        recorder.sync_gradients(&params).unwrap();
        opt.step(0.05).unwrap();
    }
    (flat(&params), recorder.synced)
}

fn policy_from_env() -> SyncPolicy {
    match std::env::var("TEST_POLICY").unwrap().as_str() {
        "allreduce" => SyncPolicy::Allreduce {
            bucket_mb: 16.0 / (1024.0 * 1024.0),
            compression: tandem_config::Compression::None,
        },
        "allreduce-bf16" => SyncPolicy::Allreduce {
            bucket_mb: 1.0,
            compression: tandem_config::Compression::Bf16,
        },
        "broadcast" => SyncPolicy::Broadcast,
        other => panic!("unknown policy {other}"),
    }
}

fn run_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    // Ranks initialise differently on purpose: the start-up broadcast must make them equal.
    let vs = model(100 + rank);
    let params = trainable_parameters_in_order(&vs);
    let mut ddp = Ddp::new(pg, &params, policy_from_env()).unwrap();
    ddp.broadcast_from_rank0(&params).unwrap();
    let half = GLOBAL_BATCH / 2;
    let steps_locally = ddp.steps_locally();
    let (x, y) = data();
    let (x, y) = (
        x.narrow(0, rank * half, half),
        y.narrow(0, rank * half, half),
    );
    let mut opt = adam(&vs);
    if matches!(ddp.policy(), SyncPolicy::Allreduce { .. }) {
        // The reducer's hooks sit on the parameters Ddp was built from; another model's are
        // refused on every rank alike, before any collective starts.
        let other = trainable_parameters_in_order(&model(7));
        let err = ddp.sync_gradients(&other).unwrap_err().to_string();
        assert!(
            err.contains("not the parameters the DDP reducer was built for"),
            "{err}"
        );
    }
    let mut recorder = RecordGradients::new(&mut ddp);
    for _ in 0..UPDATES {
        opt.zero_grad();
        loss(&params, &x, &y).backward();
        recorder.sync_gradients(&params).unwrap();
        if steps_locally {
            opt.step(0.05).unwrap();
        }
        recorder.after_step(&params).unwrap();
    }
    let grads = recorder.all();
    let named: Vec<(String, Tensor)> = vec![
        ("b".into(), params[0].shallow_clone()),
        ("w".into(), params[1].shallow_clone()),
    ];
    ddp.check_fingerprints(&named).unwrap();
    if std::env::var("TEST_PERTURB").is_ok() {
        if rank == 1 {
            tch::no_grad(|| {
                let _ = params[0].narrow(0, 1, 1).g_add_scalar_(1e-3);
            });
        }
        let err = ddp.check_fingerprints(&named).unwrap_err();
        println!("drift: {err}");
        ddp.into_group().shutdown(Duration::from_secs(20)).unwrap();
        return;
    }
    ddp.into_group().shutdown(Duration::from_secs(20)).unwrap();
    print_params(&flat(&params));
    print_values("GRADS", &grads);
}

/// Two policies' models (the second initialised apart, fitting the negated targets), each in
/// its own part of one `Ddp`: every update steps policy 0, then policy 1, each after its own
/// gradient sync, as a joint round of several policies does.
fn run_two_policies_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    let stores = [model(100 + rank), model(300 + rank)];
    let params: Vec<Vec<Tensor>> = stores.iter().map(trainable_parameters_in_order).collect();
    let parts: Vec<&[Tensor]> = params.iter().map(Vec::as_slice).collect();
    let mut ddp = Ddp::with_parts(pg, &parts, policy_from_env()).unwrap();
    let every: Vec<Tensor> = params.iter().flatten().map(Tensor::shallow_clone).collect();
    ddp.broadcast_from_rank0(&every).unwrap();
    let half = GLOBAL_BATCH / 2;
    let (x, y) = data();
    let (x, y) = (
        x.narrow(0, rank * half, half),
        y.narrow(0, rank * half, half),
    );
    let targets = [y.shallow_clone(), -y];
    let mut opts: Vec<Optimizer> = stores.iter().map(adam).collect();
    // Through the learners' interface, as a joint round drives it.
    let collective: &mut dyn Collective = &mut ddp;
    assert_eq!(
        (collective.rank() as i64, collective.world_size()),
        (rank, 2)
    );
    for _ in 0..UPDATES {
        for (part, (opt, params)) in opts.iter_mut().zip(&params).enumerate() {
            collective.select_part(part).unwrap();
            opt.zero_grad();
            collective.before_backward();
            loss(params, &x, &targets[part]).backward();
            collective.sync_gradients(params).unwrap();
            opt.step(0.05).unwrap();
            collective.after_step(params).unwrap();
        }
    }
    // Rank 0's answer is every rank's, whatever each said.
    let decided = [rank == 0, rank == 1].map(|mine| collective.decide(mine).unwrap());
    ddp.into_group().shutdown(Duration::from_secs(20)).unwrap();
    print_values("POLICY0", &flat(&params[0]));
    print_values("POLICY1", &flat(&params[1]));
    print_values("DECIDED", &decided.map(|d| f32::from(u8::from(d))));
}

fn run_two(test: &str, extra: &[(&str, &str)]) -> Vec<String> {
    run_two_ranks(test, 20_000, extra, Duration::from_secs(60))
}

/// 1 rank on the whole batch: final parameters and each step's gradient.
fn reference() -> (Vec<f32>, Vec<Vec<f32>>) {
    train(&model(100), &mut Local, 0, GLOBAL_BATCH)
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
    let (one, one_grads) = reference();
    assert_close(&p0, &one, 1e-5);
    let (g0, g1) = (
        parse_values("GRADS", &outputs[0]),
        parse_values("GRADS", &outputs[1]),
    );
    assert_eq!(g0, g1, "ranks synchronised different gradients");
    assert_same_gradients(&g0, &one_grads, 1e-4);
    // And the run did move the parameters (the comparison is not between two initial states).
    let init = flat(&trainable_parameters_in_order(&model(100)));
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
    let (one, one_grads) = reference();
    assert_close(&p0, &one, 1e-5);
    // Only rank 0 steps, on the average it was sent (the other rank's buffer is cleared).
    assert_same_gradients(&parse_values("GRADS", &outputs[0]), &one_grads, 1e-4);
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
    let (one, one_grads) = reference();
    assert_close(&p0, &one, 2e-2);
    let (g0, g1) = (
        parse_values("GRADS", &outputs[0]),
        parse_values("GRADS", &outputs[1]),
    );
    assert_eq!(g0, g1, "ranks synchronised different gradients");
    // Rounded to bf16 (2^-9 relative) and stepped from parameters that drift as much.
    assert_same_gradients(&g0, &one_grads, 2e-2);
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

/// Several policies under DDP: each policy's gradients are averaged over the ranks in a part of
/// its own (the all-reduce hooks of one part fire only in its own backward pass), so each ends
/// where one rank training it alone on the whole batch ends.
#[test]
fn two_policies_on_two_ranks_each_equal_one_rank() {
    if role().is_some() {
        return run_two_policies_rank();
    }
    let outputs = run_two(
        "two_policies_on_two_ranks_each_equal_one_rank",
        &[("TEST_POLICY", "allreduce")],
    );
    let (x, y) = data();
    for (part, (seed, target)) in [(100, y.shallow_clone()), (300, -y)]
        .into_iter()
        .enumerate()
    {
        let tag = format!("POLICY{part}");
        let (mine, other) = (
            parse_values(&tag, &outputs[0]),
            parse_values(&tag, &outputs[1]),
        );
        assert_eq!(mine, other, "ranks differ in policy {part}");
        let vs = model(seed);
        let params = trainable_parameters_in_order(&vs);
        let mut opt = adam(&vs);
        for _ in 0..UPDATES {
            opt.zero_grad();
            loss(&params, &x, &target).backward();
            opt.step(0.05).unwrap();
        }
        assert_close(&mine, &flat(&params), 1e-5);
        let init = flat(&trainable_parameters_in_order(&model(seed)));
        assert!(mine.iter().zip(&init).any(|(a, b)| (a - b).abs() > 0.1));
    }
    // `decide(rank == 0)` then `decide(rank == 1)`: rank 0's true, then its false, on both.
    for out in &outputs {
        assert_eq!(parse_values("DECIDED", out), [1.0, 0.0]);
    }
}

/// Every averaging period of the periodic policy, in updates.
const PERIOD: u64 = 5;

/// A rank under `sync "periodic" { every 5 }`: steps on its own half alone, the parameters
/// averaged over the ranks after every fifth update; prints its parameters and, after each
/// update, whether the ranks should then agree (what the fingerprint check may demand).
fn run_periodic_rank() {
    let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
    let rank = pg.rank() as i64;
    let vs = model(100 + rank);
    let params = trainable_parameters_in_order(&vs);
    let mut ddp = Ddp::new(pg, &params, SyncPolicy::Periodic { every: PERIOD }).unwrap();
    assert_eq!((ddp.rank() as i64, ddp.world_size()), (rank, 2));
    ddp.broadcast_from_rank0(&params).unwrap();
    let half = GLOBAL_BATCH / 2;
    let (x, y) = data();
    let (x, y) = (
        x.narrow(0, rank * half, half),
        y.narrow(0, rank * half, half),
    );
    let mut opt = adam(&vs);
    let mut agree = Vec::new();
    for _ in 0..UPDATES {
        opt.zero_grad();
        loss(&params, &x, &y).backward();
        ddp.sync_gradients(&params).unwrap();
        opt.step(0.05).unwrap();
        ddp.after_step(&params).unwrap();
        agree.push(f32::from(u8::from(ddp.ranks_should_agree())));
    }
    ddp.into_group().shutdown(Duration::from_secs(20)).unwrap();
    print_params(&flat(&params));
    print_values("AGREE", &agree);
}

/// The periodic policy by hand: two models from rank 0's start, each stepping on its half of
/// the batch with its own Adam, their parameters replaced by the mean of both every `PERIOD`
/// updates.
fn periodic_reference() -> Vec<f32> {
    let models = [model(100), model(100)];
    let params: Vec<Vec<Tensor>> = models.iter().map(trainable_parameters_in_order).collect();
    let mut opts: Vec<Optimizer> = models.iter().map(adam).collect();
    let (x, y) = data();
    let half = GLOBAL_BATCH / 2;
    for update in 1..=UPDATES as u64 {
        for (r, (p, opt)) in params.iter().zip(&mut opts).enumerate() {
            let (x, y) = (
                x.narrow(0, r as i64 * half, half),
                y.narrow(0, r as i64 * half, half),
            );
            opt.zero_grad();
            loss(p, &x, &y).backward();
            opt.step(0.05).unwrap();
        }
        if update % PERIOD == 0 {
            tch::no_grad(|| {
                for (a, b) in params[0].iter().zip(&params[1]) {
                    let mean = (a + b) / 2.0;
                    a.shallow_clone().copy_(&mean);
                    b.shallow_clone().copy_(&mean);
                }
            });
        }
    }
    flat(&params[0])
}

/// `sync "periodic"`: ranks step alone between averages and hold rank-averaged parameters
/// after every fifth update, exactly where the same schedule run by hand ends; they should
/// agree after updates 5 and 10 only.
#[test]
fn periodic_policy_averages_the_ranks_parameters_every_period() {
    if role().is_some() {
        return run_periodic_rank();
    }
    let outputs = run_two(
        "periodic_policy_averages_the_ranks_parameters_every_period",
        &[],
    );
    let (p0, p1) = (parse_params(&outputs[0]), parse_params(&outputs[1]));
    assert_eq!(p0, p1, "the last update averaged the ranks");
    assert_close(&p0, &periodic_reference(), 1e-5);
    // Averaging halves differs from one rank on the whole batch: the test tells them apart.
    let (whole, _) = reference();
    assert!(p0.iter().zip(&whole).any(|(a, b)| (a - b).abs() > 1e-3));
    let agree: Vec<f32> = (1..=UPDATES as u64)
        .map(|u| f32::from(u8::from(u % PERIOD == 0)))
        .collect();
    for out in &outputs {
        assert_eq!(parse_values("AGREE", out), agree);
    }
}

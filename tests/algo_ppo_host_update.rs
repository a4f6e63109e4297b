//! PPO's update takes the host step when libtorch computes on one thread, as a rank of the
//! binary does for a small MLP, and autograd otherwise: the two updates, micro-batches
//! included, end at the same parameters. A file of its own because the thread count that
//! chooses the path is the process's.

mod common;

use tandem::algo::{Batch, Local, Ppo};
use tandem::nn::{
    Activation, ActorCritic, ActorCriticSpec, EntropyUse, NetworkSpec, parameters_in_order,
};
use tandem_env::ActionSpace;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const ROWS: i64 = 32;
const OBS: i64 = 5;

/// A separate-MLP actor-critic (the host step's form) drawn from `seed`.
fn model(seed: i64) -> (VarStore, ActorCritic) {
    tch::manual_seed(seed);
    let vs = VarStore::new(Device::Cpu);
    let mut spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![16, 12],
            activation: Activation::Tanh,
        },
        common::orthogonal_init(),
    );
    spec.share_torso = false;
    let model = ActorCritic::new(&vs.root(), &spec, &[OBS], ActionSpace::Discrete { n: 3 })
        .expect("a twin-MLP actor-critic");
    (vs, model)
}

fn batch(model: &ActorCritic) -> Batch {
    tch::manual_seed(99);
    let opts = (Kind::Float, Device::Cpu);
    let obs = Tensor::randn([ROWS, OBS], opts);
    let actions = Tensor::randint(3, [ROWS], (Kind::Int64, Device::Cpu));
    let log_probs = model
        .evaluate(&obs, &actions, EntropyUse::ReportOnly)
        .unwrap()
        .log_probs
        .detach();
    Batch::new(
        obs,
        actions,
        log_probs + Tensor::randn([ROWS], opts) * 0.2,
        Tensor::randn([ROWS], opts),
        Tensor::randn([ROWS], opts),
        Tensor::randn([ROWS], opts) * 2.0,
    )
    .unwrap()
}

fn parameters(vs: &VarStore) -> Vec<Vec<f32>> {
    parameters_in_order(vs)
        .iter()
        .map(|(_, p)| Vec::<f32>::try_from(p.flatten(0, -1)).unwrap())
        .collect()
}

#[test]
fn an_update_on_the_host_ends_where_the_update_by_autograd_ends() {
    let config = tandem_config::Ppo {
        lr: 0.01,
        epochs: 2,
        minibatches: 2,
        micro_batches: 2,
        entropy_coef: 0.01,
        ..common::cleanrl_ppo()
    };
    let run = |threads: i32| {
        tch::set_num_threads(threads);
        let (vs, model) = model(3);
        let data = batch(&model);
        let mut ppo = Ppo::new(&vs, config.clone(), 7).unwrap();
        let stats = ppo.update(&model, &data, 0.0, &mut Local).unwrap();
        (parameters(&vs), stats)
    };
    let (initial, _) = {
        let (vs, _) = model(3);
        (parameters(&vs), ())
    };
    let (host, host_stats) = run(1);
    let (autograd, autograd_stats) = run(2);
    let mut moved = 0f32;
    for ((h, a), i) in host.iter().zip(&autograd).zip(&initial) {
        for ((h, a), i) in h.iter().zip(a).zip(i) {
            assert!((h - a).abs() < 1e-5, "host {h} against autograd {a}");
            moved = moved.max((h - i).abs());
        }
    }
    assert!(
        moved > 1e-3,
        "the update hardly moved the parameters: {moved}"
    );
    // Adam moves alike for any scale of the gradient: the gradient norms tell the scales apart.
    for (host, autograd) in [
        (host_stats.policy_loss, autograd_stats.policy_loss),
        (host_stats.grad_norm, autograd_stats.grad_norm),
    ] {
        assert!(
            (host - autograd).abs() < 1e-5 * autograd.abs().max(1.0),
            "{host_stats:?}\n{autograd_stats:?}"
        );
    }
}

//! Where one PPO optimizer step on a CartPole-sized network spends its time: gathering the
//! minibatch, the forward pass, the loss, backward, the gradient clip, Adam and the statistics,
//! each averaged over 3,000 steps of 256 samples on one thread (docs/performance.md, Training 1).
//!
//!     cargo run --release --example ppo_step_timing
//!
//! It allocates through mimalloc like the `tandem` binary, and keeps freed memory mapped as the
//! binary does (`tandem::alloc`), so the figures match a training run.

use std::time::Instant;

use tandem::algo::{Optimizer, OptimizerSpec, ppo_loss, ratio_diagnostics};
use tandem::nn::{
    Activation, ActorCritic, ActorCriticSpec, EntropyUse, Init, InitSpec, NetworkSpec,
};
use tandem_env::ActionSpace;
use tch::{Device, Kind, Tensor, nn::VarStore};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SECTIONS: [&str; 7] = [
    "gather the minibatch",
    "forward (both networks, distribution)",
    "PPO loss",
    "zero_grad + backward",
    "gradient clip",
    "Adam step",
    "statistics (reduced once per 20 steps)",
];

fn main() {
    tandem::alloc::keep_freed_memory();
    tch::set_num_threads(1);
    tch::manual_seed(0);
    let vs = VarStore::new(Device::Cpu);
    let spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![64, 64],
            activation: Activation::Tanh,
        },
        InitSpec {
            scheme: Init::Orthogonal,
            torso_gain: std::f64::consts::SQRT_2,
            policy_gain: 0.01,
            value_gain: 1.0,
        },
    );
    let model = ActorCritic::new(&vs.root(), &spec, &[4], ActionSpace::Discrete { n: 2 })
        .expect("a CartPole actor-critic");
    let mut optimizer = Optimizer::new(
        &vs,
        OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-5,
        },
    )
    .expect("an optimizer");
    let (b, opts) = (256, (Kind::Float, Device::Cpu));
    let obs = Tensor::randn([b, 4], opts);
    let actions = Tensor::randint(2, [b], (Kind::Int64, Device::Cpu));
    let old_log_probs = Tensor::randn([b], opts) * 0.1 - 0.7;
    let values = Tensor::randn([b], opts);
    let advantages = Tensor::randn([b], opts);
    let returns = Tensor::randn([b], opts);
    let config = tandem_config::Ppo {
        value_clip: None,
        entropy_coef: 0.0,
        ..cartpole_ppo()
    };
    let order = Tensor::randperm(b, (Kind::Int64, Device::Cpu));

    let (warmup, steps) = (300, 3000);
    let mut seconds = [0f64; SECTIONS.len()];
    let mut totals = Vec::with_capacity(steps);
    let (mut kept, mut log_ratios) = (Vec::new(), Vec::new());
    for i in 0..warmup + steps {
        let mut marks = [Instant::now(); SECTIONS.len() + 1];
        let picked = [
            &obs,
            &actions,
            &old_log_probs,
            &values,
            &advantages,
            &returns,
        ]
        .map(|t| t.index_select(0, &order));
        marks[1] = Instant::now();
        let evaluation = model
            .evaluate(&picked[0], &picked[1], EntropyUse::ReportOnly)
            .expect("evaluate");
        marks[2] = Instant::now();
        let loss = ppo_loss(
            &evaluation,
            &picked[2],
            &picked[3],
            &picked[4],
            &picked[5],
            None,
            &config,
        );
        marks[3] = Instant::now();
        optimizer.zero_grad();
        loss.total.backward();
        marks[4] = Instant::now();
        let norm = optimizer.clip_grad_norm(0.5).expect("clip");
        marks[5] = Instant::now();
        optimizer.step(1e-4).expect("step");
        marks[6] = Instant::now();
        // The trainer keeps each step's detached terms and reduces them once per update (here:
        // every 20 steps, CartPole's epochs per update), so this section is that cost, amortised.
        kept.push(Tensor::stack(
            &[&loss.policy_loss, &loss.value_loss, &loss.entropy],
            0,
        ));
        log_ratios.push(loss.log_ratio);
        if kept.len() == 20 {
            let (kl, clip) = ratio_diagnostics(&Tensor::cat(&log_ratios, 0), 0.2, None);
            let terms = Tensor::stack(&kept, 0).mean_dim(0, false, Kind::Float);
            let all = Tensor::cat(&[terms, kl.reshape([1]), clip.reshape([1])], 0);
            let _ = Vec::<f64>::try_from(all.to_kind(Kind::Double)).expect("stats");
            kept.clear();
            log_ratios.clear();
        }
        assert!(norm.is_finite());
        marks[7] = Instant::now();
        if i >= warmup {
            for (k, s) in seconds.iter_mut().enumerate() {
                *s += (marks[k + 1] - marks[k]).as_secs_f64();
            }
            totals.push((marks[SECTIONS.len()] - marks[0]).as_secs_f64());
        }
    }
    let per_step = |s: f64| s / steps as f64 * 1e6;
    for (name, s) in SECTIONS.iter().zip(seconds) {
        println!("{name:>40}: {:7.1} us", per_step(s));
    }
    println!(
        "{:>40}: {:7.1} us",
        "one optimizer step",
        per_step(seconds.iter().sum())
    );
    // The median is what a step costs when nothing else on the machine interrupts it.
    totals.sort_by(f64::total_cmp);
    println!(
        "{:>40}: {:7.1} us",
        "median step",
        totals[totals.len() / 2] * 1e6
    );
}

/// The PPO settings of the shipped CartPole experiment (`experiments/cartpole.kdl`).
fn cartpole_ppo() -> tandem_config::Ppo {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/cartpole.kdl");
    let resolved = tandem_config::resolve(&tandem_config::Source::Path(path), &[])
        .unwrap_or_else(|d| panic!("{}", d.render(false)));
    match resolved.experiment.algorithm {
        tandem_config::Algorithm::Ppo(ppo) => ppo,
        other => panic!("experiments/cartpole.kdl trains {}, not ppo", other.name()),
    }
}

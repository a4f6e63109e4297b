//! What one SAC gradient step of `experiments/halfcheetah-sac.kdl` costs on one thread: the
//! shipped networks (256x256 ReLU actor and twin critics, PyTorch's initialisation) on
//! HalfCheetah's shapes (17 observations, 6 actions), batches of 256 random transitions. It
//! times the whole [`Sac::update`] (losses, one backward, clip, three Adam steps, Polyak
//! targets), the losses' forward alone, and the forward with its backward, each the best of 5
//! rounds of 500 steps (outside load only slows a round down).
//!
//!     cargo run --release --example sac_step_timing
//!
//! It allocates through mimalloc like the `tandem` binary, and keeps freed memory mapped as the
//! binary does (`tandem::alloc`), so the figures match a training run.

use std::time::Instant;

use tandem::algo::Local;
use tandem::algo::off_policy::box_rule::BoxLearner;
use tandem::algo::sac::{Sac, SacBatch, Settings};
use tandem::nn::{Activation, Init, InitSpec, NetworkSpec};
use tch::{Device, Kind, Tensor};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: i64 = 256;
const OBS: i64 = 17;
const ACTIONS: i64 = 6;
const ROUNDS: usize = 5;
const STEPS: usize = 500;

fn batch() -> SacBatch {
    let f = (Kind::Float, Device::Cpu);
    SacBatch {
        obs: Tensor::randn([BATCH, OBS], f),
        actions: Tensor::rand([BATCH, ACTIONS], f) * 2.0 - 1.0,
        rewards: Tensor::randn([BATCH], f),
        discounts: Tensor::full([BATCH], 0.99, f),
        next_obs: Tensor::randn([BATCH, OBS], f),
        eps_next: Tensor::randn([BATCH, ACTIONS], f),
        eps_now: Tensor::randn([BATCH, ACTIONS], f),
    }
}

/// The best round's milliseconds per call of `step`.
fn best_ms(mut step: impl FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..STEPS {
                step();
            }
            start.elapsed().as_secs_f64() * 1e3 / STEPS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    tandem::alloc::keep_freed_memory();
    tch::set_num_threads(1);
    tandem::torch_ops::flush_denormals();
    tch::manual_seed(0);
    let mut sac = Sac::new(
        Device::Cpu,
        &NetworkSpec::Mlp {
            hidden: vec![256, 256],
            activation: Activation::Relu,
        },
        &InitSpec {
            scheme: Init::Torch,
            torso_gain: 1.0,
            policy_gain: 1.0,
            value_gain: 1.0,
        },
        &[OBS],
        ACTIONS,
        Settings {
            actor_lr: 3e-4,
            critic_lr: 1e-3,
            alpha_lr: 1e-3,
            tau: 0.005,
            alpha: tandem_config::AutoOr::Auto,
            initial_alpha: 1.0,
            target_entropy: tandem_config::AutoOr::Auto,
            max_grad_norm: None,
            ..Settings::default()
        },
    )
    .expect("the HalfCheetah SAC networks");
    let batches: Vec<SacBatch> = (0..8).map(|_| batch()).collect();
    let mut i = 0;
    let update_ms = best_ms(|| {
        i += 1;
        sac.update(&batches[i % batches.len()], &mut Local)
            .expect("a SAC update");
    });
    let forward_ms = best_ms(|| {
        i += 1;
        let losses = sac.losses(&batches[i % batches.len()]).expect("losses");
        drop(losses);
    });
    let backward_ms = best_ms(|| {
        i += 1;
        let l = sac.losses(&batches[i % batches.len()]).expect("losses");
        sac.counters_mut().1.zero_grad();
        (&l.critic + &l.actor + &l.alpha).backward();
    });
    println!("sac gradient step (256x256, batch {BATCH}, 1 thread), best of {ROUNDS} x {STEPS}:");
    println!("  whole update      {update_ms:.3} ms");
    println!("  losses forward    {forward_ms:.3} ms");
    println!("  losses + backward {backward_ms:.3} ms");
    // The same seed and batches give the same alpha after the same updates: a changed figure
    // here means the arithmetic changed, not only its speed.
    println!("  alpha after       {:.9}", sac.alpha());
}

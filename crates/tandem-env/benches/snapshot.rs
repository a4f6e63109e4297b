//! Cost of VecEnv snapshots, as ratios to one batch step of the same batch measured in
//! the same run (a checkpoint-time snapshot should cost a handful of steps, not more),
//! plus the snapshot size and bytes per second.
//!
//! Run: `cargo bench -p tandem-env --bench snapshot` (set TANDEM_BENCH_SECONDS to change
//! the time per measurement, default 1).

#[path = "../tests/support/deepmind.rs"]
mod deepmind;
use std::hint::black_box;
use std::time::{Duration, Instant};

use tandem_env::{EnvSpec, Game, VecEnv, Wrapper, env_seeds};

fn seconds() -> f64 {
    std::env::var("TANDEM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

/// Mean seconds per call of `f`, over about `seconds()` after a short warm-up.
fn per_call(mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(100) {
        f();
    }
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed().as_secs_f64() < seconds() {
        f();
        calls += 1;
    }
    start.elapsed().as_secs_f64() / calls as f64
}

fn measure(label: &str, spec: &EnvSpec, num_envs: usize) {
    let mut envs = VecEnv::new(spec, &env_seeds(3, 0, 0, num_envs), 1).expect("builds");
    envs.reset();
    let n = envs.num_actions() as i64;
    let mut t = 0i64;
    let mut step = |envs: &mut VecEnv| {
        let actions: Vec<i64> = (0..num_envs as i64).map(|i| (i + t) % n).collect();
        t += 1;
        envs.step(&actions).expect("steps");
        // A trainer drains finished episodes every step; left in, they would pile up
        // in the snapshot.
        black_box(envs.drain_episodes());
    };
    for _ in 0..50 {
        step(&mut envs);
    }
    let step_s = per_call(|| step(&mut envs));
    let bytes = envs.snapshot().expect("snapshots");
    let snapshot_s = per_call(|| {
        black_box(envs.snapshot().expect("snapshots"));
    });
    let restore_s = per_call(|| envs.restore(black_box(&bytes)).expect("restores"));
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{label:<34} {num_envs:>3} envs  {mb:>7.3} MB  snapshot {:>6.2} steps ({:>6.0} MB/s)  restore {:>6.2} steps ({:>6.0} MB/s)",
        snapshot_s / step_s,
        mb / snapshot_s,
        restore_s / step_s,
        mb / restore_s,
    );
}

fn main() {
    println!("snapshot and restore time in units of one batch step of the same batch");
    measure("cartpole", &EnvSpec::new(Game::Cartpole), 64);
    let minatar = EnvSpec::new(Game::from_name("minatar-breakout").expect("known"))
        .with(Wrapper::FrameStack { n: 4 });
    measure("minatar-breakout + frame-stack", &minatar, 64);
    #[cfg(feature = "atari")]
    measure(
        "atari-breakout, DeepMind chain",
        &deepmind::deepmind_atari(Game::from_name("atari-breakout").expect("known")),
        8,
    );
}

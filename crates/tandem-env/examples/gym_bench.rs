//! Steps a gymnasium environment through the bridge with uniformly random actions and
//! prints the throughput as one JSON line (for scripts/bench/gym_bridge.sh).
//!
//! Usage: gym_bench PYTHON ID ENVS WORKERS STEPS

use std::time::Instant;

use tandem_env::rng::Xoshiro256;
use tandem_env::{ActionMask, ActionSpace, EnvSpec, Game, Gymnasium, VecEnv, env_seeds};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [python, id, envs, workers, steps] = args.as_slice() else {
        return Err("usage: gym_bench PYTHON ID ENVS WORKERS STEPS".into());
    };
    let (n, steps): (usize, usize) = (envs.parse()?, steps.parse()?);
    let gym = Gymnasium {
        id: id.clone(),
        python: python.clone(),
        imports: Vec::new(),
        make_args: Vec::new(),
        workers: workers.parse()?,
        step_timeout_s: 60.0,
        action_mask: ActionMask::None,
        info_keys: Vec::new(),
    };
    let mut batch = VecEnv::new(
        &EnvSpec::new(Game::Gymnasium(gym)),
        &env_seeds(0, 0, 0, n),
        1,
    )?;
    batch.reset();
    let space = batch.action_space().clone();
    let mut rng = Xoshiro256::new(1);
    let mut discrete = vec![0i64; n * if space.is_box() { 1 } else { space.dim() }];
    let mut boxed = vec![0f32; n * space.dim()];
    let mut step = |batch: &mut VecEnv| -> Result<(), tandem_env::EnvError> {
        match &space {
            ActionSpace::Discrete { n: k } => {
                discrete
                    .iter_mut()
                    .for_each(|a| *a = rng.below(*k as u64) as i64);
                batch.step(&discrete)
            }
            ActionSpace::Box { low, high } => {
                for (i, a) in boxed.iter_mut().enumerate() {
                    let d = i % low.len();
                    *a = rng.uniform(f64::from(low[d]), f64::from(high[d])) as f32;
                }
                batch.step(&boxed)
            }
            ActionSpace::MultiDiscrete { nvec } => {
                for (i, a) in discrete.iter_mut().enumerate() {
                    *a = rng.below(nvec[i % nvec.len()] as u64) as i64;
                }
                batch.step(&discrete)
            }
        }
    };
    for _ in 0..steps.min(200) {
        step(&mut batch)?;
    }
    let started = Instant::now();
    for _ in 0..steps {
        step(&mut batch)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"mode\": \"bridge\", \"id\": \"{id}\", \"envs\": {n}, \"processes\": {workers}, \"steps_per_s\": {:.1}}}",
        (steps * n) as f64 / seconds
    );
    Ok(())
}

//! MPE throughput against mpe2 and JaxMARL: game steps per second of the native simple_spread
//! and simple_tag (mpe2 1.1.1's defaults, every agent acting each step) through `VecEnv` on one
//! thread, and, in the same run, of mpe2 1.1.1's `parallel_env` stepped from Python on one core
//! (a loop over 8 environments, the actions drawn beforehand), from .deps/venv-mpe (made by
//! scripts/parity/mpe_venv.sh --venv-only), and of JaxMARL 0.2.0's jitted
//! `MPE_simple_spread_v3` (4,096 environments vmapped, 100 steps a `lax.scan`, random moves
//! drawn inside, on every core XLA takes), from .deps/venv-jaxmarl (scripts/bench/jaxmarl_venv.sh).
//! Rates are per wall-clock second and per CPU-second (of the measuring thread; of the whole
//! process for JaxMARL); the ratios are per CPU-second.
//!
//! Run: `cargo bench -p tandem-env --bench mpe_steps` (TANDEM_BENCH_SECONDS sets the time per
//! measurement, default 2).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tandem_env::mpe::simple_spread::SpreadParams;
use tandem_env::mpe::simple_tag::{SimpleTag, TagParams};
use tandem_env::multi_agent::{ParallelEnv, observation_len};
use tandem_env::{Action, EnvSpec, Game, Step, VecEnv};

fn seconds() -> f64 {
    std::env::var("TANDEM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

/// CPU seconds used by the calling thread (Linux).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(0.0, |ns| ns * 1e-9)
}

/// (game steps per wall second, per CPU-second) of `step`, which takes `per_call` game steps.
fn rate(per_call: usize, mut step: impl FnMut(u64)) -> (f64, f64) {
    for t in 0..100 {
        step(t);
    }
    let (start, cpu) = (Instant::now(), thread_cpu_seconds());
    let mut calls = 0u64;
    while start.elapsed().as_secs_f64() < seconds() {
        step(calls);
        calls += 1;
    }
    let steps = (calls * per_call as u64) as f64;
    (
        steps / start.elapsed().as_secs_f64(),
        steps / (thread_cpu_seconds() - cpu),
    )
}

/// A fixed move per row and step (an LCG), so every run does the same work.
fn moves(t: u64, rows: usize) -> Vec<i64> {
    (0..rows as u64)
        .map(|r| {
            let x = (t * 1_000_003 + r)
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((x >> 33) % 5) as i64
        })
        .collect()
}

fn native_spread() -> (f64, f64) {
    const GAMES: usize = 64;
    let spec = EnvSpec::new(Game::MpeSimpleSpread(SpreadParams::MPE2));
    let seeds: Vec<u64> = (0..GAMES as u64).collect();
    let mut venv = VecEnv::new(&spec, &seeds, 1).unwrap();
    venv.reset();
    let rows = venv.num_envs();
    rate(GAMES, |t| venv.step(&moves(t, rows)[..]).unwrap())
}

/// simple_tag is not in the catalogue yet (its teams differ in spaces), so it steps alone.
fn native_tag() -> (f64, f64) {
    const GAMES: usize = 64;
    let mut games: Vec<SimpleTag> = (0..GAMES as u64)
        .map(|s| SimpleTag::new(TagParams::MPE2, s).unwrap())
        .collect();
    let agents = games[0].agents().len();
    let mut obs = vec![0f32; observation_len(games[0].agents())];
    let mut steps = vec![Step::default(); agents];
    for game in &mut games {
        game.reset(Some(1), &mut obs);
    }
    rate(GAMES, |t| {
        let m = moves(t, GAMES * agents);
        for (g, game) in games.iter_mut().enumerate() {
            let actions: Vec<Action> = m[g * agents..(g + 1) * agents]
                .iter()
                .map(|&i| Action::Discrete(i as usize))
                .collect();
            game.step(&actions, &mut obs, &mut steps);
            if steps[0].done() {
                game.reset(None, &mut obs);
            }
        }
    })
}

const PYTHON: &str = r#"
import sys, time
import numpy as np
from mpe2 import simple_spread_v3, simple_tag_v3
module = {"simple_spread": simple_spread_v3, "simple_tag": simple_tag_v3}[sys.argv[1]]
seconds = float(sys.argv[2])
envs = [module.parallel_env() for _ in range(8)]
for i, env in enumerate(envs):
    env.reset(seed=i)
agents = list(envs[0].possible_agents)
rng = np.random.default_rng(0)
plan = [{a: int(m) for a, m in zip(agents, row)} for row in rng.integers(5, size=(4096, len(agents)))]
steps, start, cpu = 0, time.perf_counter(), time.process_time()
while time.perf_counter() - start < seconds:
    for env in envs:
        env.step(plan[steps % len(plan)])
        if not env.agents:
            env.reset()
        steps += 1
print(steps / (time.perf_counter() - start), steps / (time.process_time() - cpu))
"#;

fn python(game: &str) -> Result<(f64, f64), String> {
    let python = venv_python("venv-mpe", "scripts/parity/mpe_venv.sh --venv-only")?;
    python_rate(&python, PYTHON, &[game, &seconds().to_string()])
}

fn jaxmarl() -> Result<(f64, f64), String> {
    let python = venv_python("venv-jaxmarl", "scripts/bench/jaxmarl_venv.sh")?;
    python_rate(&python, JAXMARL, &[&seconds().to_string()])
}

const JAXMARL: &str = r#"
import sys, time
import jax
import jaxmarl
env = jaxmarl.make("MPE_simple_spread_v3")
n, steps, seconds = 4096, 100, float(sys.argv[1])
def body(state, key):
    keys = jax.random.split(key, n + 1)
    moves = {a: jax.random.randint(jax.random.fold_in(keys[n], i), (n,), 0, 5)
             for i, a in enumerate(env.agents)}
    return jax.vmap(env.step)(keys[:n], state, moves)[1], None
run = jax.jit(lambda state, key: jax.lax.scan(body, state, jax.random.split(key, steps))[0])
state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))[1]
state = jax.block_until_ready(run(state, jax.random.PRNGKey(1)))
done, start, cpu, k = 0, time.perf_counter(), time.process_time(), 2
while time.perf_counter() - start < seconds:
    state = jax.block_until_ready(run(state, jax.random.PRNGKey(k)))
    done, k = done + n * steps, k + 1
print(done / (time.perf_counter() - start), done / (time.process_time() - cpu))
"#;

/// The venv's interpreter, or why it is missing.
fn venv_python(venv: &str, made_by: &str) -> Result<std::path::PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".deps").join(venv).join("bin/python");
    if python.exists() {
        Ok(python)
    } else {
        Err(format!("{} is absent (run {made_by})", python.display()))
    }
}

/// (wall, per CPU-second) that `script` prints when run with `args` on `python`.
fn python_rate(python: &Path, script: &str, args: &[&str]) -> Result<(f64, f64), String> {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rates = text
        .split_whitespace()
        .filter_map(|s| s.parse::<f64>().ok());
    match (rates.next(), rates.next()) {
        (Some(wall), Some(cpu)) => Ok((wall, cpu)),
        _ => Err(format!(
            "unexpected output from python: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn show(label: &str, (wall, cpu): (f64, f64)) {
    println!(
        "{label:<58} {:>12.0} game steps/s wall {:>12.0} per CPU-s",
        wall, cpu
    );
}

fn main() {
    println!("MPE game steps per second (mpe2 1.1.1's defaults; one thread)");
    for (game, native) in [
        ("simple_spread", native_spread as fn() -> (f64, f64)),
        ("simple_tag", native_tag),
    ] {
        let ours = native();
        show(&format!("{game}: native, 64 games"), ours);
        match python(game) {
            Ok(theirs) => {
                show(
                    &format!("{game}: mpe2 parallel_env from python, 8 envs"),
                    theirs,
                );
                println!(
                    "{game}: native / mpe2 per CPU-second: {:.0}x",
                    ours.1 / theirs.1
                );
            }
            Err(why) => println!("{game}: mpe2 reference skipped: {why}"),
        }
        if game == "simple_spread" {
            match jaxmarl() {
                Ok(theirs) => {
                    show("simple_spread: JaxMARL jit, 4096 envs vmapped", theirs);
                    println!(
                        "simple_spread: native / JaxMARL per CPU-second: {:.1}x, per wall second: {:.1}x",
                        ours.1 / theirs.1,
                        ours.0 / theirs.0
                    );
                }
                Err(why) => println!("simple_spread: JaxMARL reference skipped: {why}"),
            }
        }
    }
}

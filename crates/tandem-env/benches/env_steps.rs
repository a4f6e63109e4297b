//! Environment throughput: steps per second of each native game through `VecEnv` at
//! 1 and 2 threads, the bare MinAtar Breakout game on one core, the DeepMind wrapper
//! chain on synthetic 210x160 RGB frames, and, in the same run, the `minatar` Python
//! package on one core (from .deps/venv-parity, made by scripts/parity/minatar_venv.sh).
//!
//! Run: `cargo bench -p tandem-env --bench env_steps` (set TANDEM_BENCH_SECONDS to change
//! the time per measurement, default 2).

#[path = "../tests/support/deepmind.rs"]
mod deepmind;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tandem_env::minatar::Breakout;
use tandem_env::space::{Dtype, Layout, ObsBuf, ObsSpace};
use tandem_env::{Env, EnvSpec, Game, Step, VecEnv, Wrapper, env_seeds, wrappers};

fn seconds() -> f64 {
    std::env::var("TANDEM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

/// Fixed pseudo-random actions (an LCG), so every run does the same work.
struct Actions(u64);

impl Actions {
    fn fill(&mut self, out: &mut [i64], n: usize) {
        for a in out {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            *a = ((self.0 >> 33) % n as u64) as i64;
        }
    }
}

/// CPU seconds used by the calling thread (Linux; `None` elsewhere).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(stat.split_whitespace().next()?.parse::<f64>().ok()? * 1e-9)
}

/// Throughput of one measurement.
#[derive(Clone, Copy)]
struct Rate {
    /// Steps per wall-clock second.
    wall: f64,
    /// Steps per CPU-second of the calling thread (meaningful for 1-thread runs: it
    /// discounts time the thread waited for a core on a busy machine).
    cpu: Option<f64>,
}

/// Calls `batch` (which performs `per_call` environment steps) for about `seconds()`
/// after a short warm-up.
fn rate(per_call: usize, mut batch: impl FnMut()) -> Rate {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(200) {
        batch();
    }
    let budget = Duration::from_secs_f64(seconds());
    let start = Instant::now();
    let cpu_start = thread_cpu_seconds();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        batch();
        calls += 1;
    }
    let steps = calls as f64 * per_call as f64;
    let cpu = match (cpu_start, thread_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => Some(steps / (b - a)),
        _ => None,
    };
    Rate {
        wall: steps / start.elapsed().as_secs_f64(),
        cpu,
    }
}

fn show(label: &str, r: Rate, unit: &str) {
    match r.cpu {
        Some(cpu) => println!(
            "{label:<62} {:>12.0} {unit}/s wall, {cpu:>12.0} per CPU-second",
            r.wall
        ),
        None => println!("{label:<62} {:>12.0} {unit}/s wall", r.wall),
    }
}

fn vec_env_rate(spec: &EnvSpec, num_envs: usize, threads: usize) -> Rate {
    let mut venv = VecEnv::new(spec, &env_seeds(0, 0, 0, num_envs), threads).unwrap();
    venv.reset();
    let mut actions = vec![0i64; num_envs];
    let mut source = Actions(7);
    let n = venv.num_actions();
    rate(num_envs, || {
        source.fill(&mut actions, n);
        venv.step(&actions).unwrap();
        black_box(venv.obs());
        black_box(venv.drain_episodes());
    })
}

/// A stand-in for an emulator: a fixed 210x160 RGB frame, so that only the wrappers'
/// cost is measured.
struct StaticFrames {
    pixels: Vec<u8>,
    frame: u64,
}

impl Env for StaticFrames {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8)
    }
    fn action_space(&self) -> tandem_env::ActionSpace {
        tandem_env::ActionSpace::discrete(4)
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.frame = 0;
        obs.write_u8(&self.pixels);
    }
    fn step(&mut self, _action: tandem_env::Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        self.frame += 1;
        obs.write_u8(&self.pixels);
        Step::game(1.0, self.frame.is_multiple_of(4000), false)
    }
}

fn deepmind_on_static_frames() -> Box<dyn Env> {
    let pixels = (0..210 * 160 * 3).map(|i| (i * 31 % 251) as u8).collect();
    let mut env: Box<dyn Env> = Box::new(StaticFrames { pixels, frame: 0 });
    let spec = deepmind::deepmind_atari(Game::from_name("atari-breakout").unwrap());
    for (i, w) in spec.wrappers.iter().enumerate() {
        env = wrappers::wrap(w, i, env, i as u64).unwrap();
    }
    env
}

/// The `minatar` package playing `game` (a minatar module name) on one core: `act` only,
/// then `act` + `state()`.
fn python_minatar_rate(game: &str) -> Result<(Rate, Rate), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".deps/venv-parity/bin/python");
    if !python.exists() {
        return Err(format!(
            "{} is absent (run scripts/parity/minatar_venv.sh --venv-only)",
            python.display()
        ));
    }
    let script = format!(
        r#"
import time, numpy as np
from minatar import Environment
def run(with_state):
    env = Environment("{game}", sticky_action_prob=0.1)
    env.seed(0); env.reset()
    actions = np.random.RandomState(1).randint(6, size=1 << 16).tolist()
    n = 0; start = time.perf_counter(); cpu = time.process_time()
    while time.perf_counter() - start < {secs}:
        for a in actions[:4096]:
            _, terminal = env.act(a)
            if with_state: env.state()
            if terminal: env.reset()
        n += 4096
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)
print(*run(False), *run(True))
"#,
        secs = seconds(),
        game = game
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .env("OMP_NUM_THREADS", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .output()
        .map_err(|e| format!("cannot run the parity venv's python: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let values: Vec<f64> = text
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    match values[..] {
        [a, b, c, d] => Ok((
            Rate {
                wall: a,
                cpu: Some(b),
            },
            Rate {
                wall: c,
                cpu: Some(d),
            },
        )),
        _ => Err(format!(
            "unexpected output from python: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn main() {
    print_header();
    let references = vec_env_rates();
    let bare = bare_game_rate();
    wrapper_chain_rate();
    compare_with_python(&references, bare);
}

fn print_header() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "tandem-env benchmark: {} s per measurement, {} cores, load average {}",
        seconds(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Every game's VecEnv rate at 64 and 4096 environments on 1 and 2 threads; the 64-environment,
/// one-thread rates of the MinAtar games, to hold against the Python package.
fn vec_env_rates() -> Vec<(&'static str, &'static str, Rate)> {
    let minatar = |name: &str| EnvSpec::new(Game::from_name(name).unwrap());
    // (label, spec, minatar module for the Python reference)
    let games = [
        ("cartpole", EnvSpec::new(Game::Cartpole), None),
        (
            "minatar-breakout",
            minatar("minatar-breakout"),
            Some("breakout"),
        ),
        (
            "minatar-asterix",
            minatar("minatar-asterix"),
            Some("asterix"),
        ),
        (
            "minatar-freeway",
            minatar("minatar-freeway"),
            Some("freeway"),
        ),
        (
            "minatar-seaquest",
            minatar("minatar-seaquest"),
            Some("seaquest"),
        ),
        (
            "minatar-space-invaders",
            minatar("minatar-space-invaders"),
            Some("space_invaders"),
        ),
        (
            "minatar-breakout + frame-stack 4",
            minatar("minatar-breakout").with(Wrapper::FrameStack { n: 4 }),
            None,
        ),
    ];
    let mut references = Vec::new();
    for (name, spec, python) in &games {
        for num_envs in [64, 4096] {
            for threads in [1, 2] {
                let r = vec_env_rate(spec, num_envs, threads);
                let r = if threads == 1 {
                    r
                } else {
                    Rate { cpu: None, ..r }
                };
                show(
                    &format!("{name}: VecEnv {num_envs} envs, {threads} thread(s)"),
                    r,
                    "steps",
                );
                if let (Some(module), 1, 64) = (python, threads, num_envs) {
                    references.push((*name, *module, r));
                }
            }
        }
    }
    references
}

/// The bare MinAtar Breakout game stepped with its observations, one thread.
fn bare_game_rate() -> Rate {
    let mut game = Breakout::new(0, 0.1, false);
    let mut obs = vec![0f32; 400];
    let mut source = Actions(3);
    let mut actions = vec![0i64; 1024];
    let bare = rate(1024, || {
        source.fill(&mut actions, 3);
        for &a in &actions {
            if game
                .step(
                    tandem_env::Action::Discrete(a as usize),
                    ObsBuf::F32(&mut obs),
                )
                .terminated
            {
                game.reset(None, ObsBuf::F32(&mut obs));
            }
        }
        black_box(&obs);
    });
    show(
        "minatar-breakout: bare game with observations, 1 thread",
        bare,
        "steps",
    );
    bare
}

/// The DeepMind wrappers alone, on static frames.
fn wrapper_chain_rate() {
    let mut env = deepmind_on_static_frames();
    let mut obs = vec![0u8; env.observation_space().len()];
    env.reset(Some(0), ObsBuf::U8(&mut obs));
    let chain = rate(64, || {
        for t in 0..64 {
            if env
                .step(tandem_env::Action::Discrete(t % 4), ObsBuf::U8(&mut obs))
                .done()
            {
                env.reset(None, ObsBuf::U8(&mut obs));
            }
        }
        black_box(&obs);
    });
    show(
        "deepmind wrappers alone (static 210x160 RGB frames), 1 thread",
        chain,
        "agent steps",
    );
}

/// The native rates against the `minatar` package's, per CPU-second.
fn compare_with_python(references: &[(&'static str, &'static str, Rate)], bare: Rate) {
    let per_cpu = |r: Rate| r.cpu.unwrap_or(r.wall);
    let mut summary = Vec::new();
    for (name, module, native) in references {
        match python_minatar_rate(module) {
            Ok((act, act_state)) => {
                show(
                    &format!("minatar package {module} (python), act only, 1 core"),
                    act,
                    "steps",
                );
                show(
                    &format!("minatar package {module} (python), act + state(), 1 core"),
                    act_state,
                    "steps",
                );
                summary.push(format!(
                    "{name}: native VecEnv (64 envs, 1 thread) / python per CPU-second: {:.0}x vs act + state(), {:.0}x vs act only",
                    per_cpu(*native) / per_cpu(act_state),
                    per_cpu(*native) / per_cpu(act)
                ));
                if *name == "minatar-breakout" {
                    summary.push(format!(
                        "minatar-breakout: native bare game / python per CPU-second:           {:.0}x vs act + state(), {:.0}x vs act only",
                        per_cpu(bare) / per_cpu(act_state),
                        per_cpu(bare) / per_cpu(act)
                    ));
                }
            }
            Err(why) => {
                println!("python minatar reference skipped: {why}");
                break;
            }
        }
    }
    for line in summary {
        println!("{line}");
    }
}

//! Preprocessed Atari Breakout throughput: tandem (ALE through tandem-ale plus
//! tandem-env's wrappers) against ale-py + gymnasium's `AtariPreprocessing` +
//! `FrameStackObservation`, measured in the same run on one core each.
//!
//! `cargo bench -p tandem-env --bench atari` (the Python side needs the venv
//! that `scripts/parity/atari_fixture.sh` creates in `.deps/venv-atari`, or a
//! Python given by `TANDEM_ATARI_PYTHON`; without it only tandem's figures print).
//! `TANDEM_BENCH_STEPS` changes the number of agent steps per measurement.
//!
//! Every rate is given per wall-clock second and per CPU-second of the process
//! (all its threads; Python: `time.process_time()`), because the machines this
//! runs on are shared: CPU time discounts the time spent waiting for a core.

#[path = "../tests/support/deepmind.rs"]
mod deepmind;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;
use tandem_env::atari::{AtariConfig, AtariGame, AtariObservation, GymNoopReset};
use tandem_env::{Env, EnvSpec, Game, ObsBuf, VecEnv, Wrapper, env_seeds, make_env, wrappers};

/// A fixed pseudo-random policy (same spirit as the Python side's uniform actions).
struct Policy(u64);

impl Policy {
    fn next(&mut self, actions: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % actions as u64) as usize
    }
}

/// Steps per wall-clock second and per CPU-second.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    wall: f64,
    cpu: f64,
}

impl Rate {
    fn best(self, other: Rate) -> Rate {
        Rate {
            wall: self.wall.max(other.wall),
            cpu: self.cpu.max(other.cpu),
        }
    }
}

/// CPU time of all threads of this process so far (Linux schedstat), in seconds.
fn process_cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let nanoseconds: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanoseconds as f64 * 1e-9
}

struct Stopwatch {
    wall: Instant,
    cpu: f64,
}

impl Stopwatch {
    fn start() -> Self {
        Stopwatch {
            wall: Instant::now(),
            cpu: process_cpu_seconds(),
        }
    }

    fn rate(&self, count: usize) -> Rate {
        Rate {
            wall: count as f64 / self.wall.elapsed().as_secs_f64(),
            cpu: count as f64 / (process_cpu_seconds() - self.cpu),
        }
    }
}

/// gymnasium's pipeline rebuilt from tandem's pieces: ALE grayscale, gymnasium
/// no-op reset, frame-skip 4 with max-pool, resize 84x84, frame-stack 4.
fn gymnasium_equivalent() -> Box<dyn Env> {
    let config = AtariConfig {
        observation: AtariObservation::Grayscale,
        ..AtariConfig::v5("breakout")
    };
    let game = AtariGame::new(config, 1).expect("Breakout loads (run scripts/setup-ale first)");
    let mut env: Box<dyn Env> = Box::new(GymNoopReset::new(game, 30).expect("noop_max > 0"));
    let chain = [
        Wrapper::FrameSkip {
            n: 4,
            max_pool: true,
        },
        Wrapper::Resize {
            height: 84,
            width: 84,
        },
        Wrapper::FrameStack { n: 4 },
    ];
    for (index, wrapper) in chain.iter().enumerate() {
        env = wrappers::wrap(wrapper, index + 1, env, 0).expect("wrapper fits");
    }
    env
}

/// Agent steps of one environment stepped on this thread.
fn single_env(mut env: Box<dyn Env>, steps: usize) -> Rate {
    let mut obs = vec![0u8; env.observation_space().len()];
    let mut policy = Policy(7);
    env.reset(Some(1), ObsBuf::U8(&mut obs));
    let stopwatch = Stopwatch::start();
    for _ in 0..steps {
        let action = policy.next(env.action_space().num_discrete().unwrap_or(1));
        if env
            .step(tandem_env::Action::Discrete(action), ObsBuf::U8(&mut obs))
            .done()
        {
            env.reset(None, ObsBuf::U8(&mut obs));
        }
    }
    stopwatch.rate(steps)
}

/// Agent steps of a VecEnv (f32 batch output, auto-reset), all its threads counted.
fn vec_env(spec: &EnvSpec, envs: usize, threads: usize, steps: usize) -> Rate {
    let mut venv = VecEnv::new(spec, &env_seeds(1, 0, 0, envs), threads).expect("VecEnv builds");
    let mut policy = Policy(11);
    venv.reset();
    let batches = steps.div_ceil(envs);
    let stopwatch = Stopwatch::start();
    for _ in 0..batches {
        let actions: Vec<i64> = (0..envs)
            .map(|_| policy.next(venv.num_actions()) as i64)
            .collect();
        venv.step(&actions).expect("valid actions");
    }
    stopwatch.rate(batches * envs)
}

/// Emulated frames of bare ALE (`act` only, no screens).
fn raw_frames(steps: usize) -> Rate {
    let settings = tandem_ale::AleSettings::new(1, 0.25);
    let mut ale = tandem_ale::Ale::new("breakout", &settings).expect("Breakout loads");
    ale.reset().expect("reset");
    let mut policy = Policy(7);
    let stopwatch = Stopwatch::start();
    for _ in 0..steps {
        let action = policy.next(ale.num_actions());
        for _ in 0..4 {
            ale.act(action).expect("valid action");
            if ale.game_over() {
                ale.reset().expect("reset");
            }
        }
    }
    stopwatch.rate(4 * steps)
}

const PYTHON_REFERENCE: &str = r#"
import sys, time
import cv2, numpy as np, gymnasium as gym, ale_py
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
cv2.setNumThreads(1)
gym.register_envs(ale_py)
steps = int(sys.argv[1])
rng = np.random.default_rng(7)
actions = rng.integers(0, 4, size=steps)

def report(count, wall, cpu):
    print(count / (time.perf_counter() - wall), count / (time.process_time() - cpu))

ale = ale_py.ALEInterface()
ale.setLoggerMode(ale_py.LoggerMode.Error)
ale.setInt("random_seed", 1)
ale.setFloat("repeat_action_probability", 0.25)
ale.loadROM(ale_py.roms.get_rom_path("breakout"))
ale.reset_game()
minimal = ale.getMinimalActionSet()
wall, cpu = time.perf_counter(), time.process_time()
for action in np.repeat(actions, 4):
    ale.act(minimal[action])
    if ale.game_over():
        ale.reset_game()
report(4 * steps, wall, cpu)

env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.25)
env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
env = FrameStackObservation(env, 4)
env.reset(seed=1)
wall, cpu = time.perf_counter(), time.process_time()
for action in actions:
    _, _, terminated, truncated, _ = env.step(int(action))
    if terminated or truncated:
        env.reset()
report(steps, wall, cpu)
"#;

fn python_interpreter() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TANDEM_ATARI_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv-atari/bin/python");
    venv.is_file().then_some(venv)
}

/// ale-py's raw frames and ale-py + gymnasium's agent steps, or why there are no figures.
fn python_reference(steps: usize) -> Result<(Rate, Rate), String> {
    let python = python_interpreter().ok_or(
        "no reference Python: run scripts/parity/atari_fixture.sh or set TANDEM_ATARI_PYTHON",
    )?;
    let output = Command::new(&python)
        .arg("-c")
        .arg(PYTHON_REFERENCE)
        .arg(steps.to_string())
        .env("OMP_NUM_THREADS", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .output()
        .map_err(|error| format!("cannot run {}: {error}", python.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed: {}",
            python.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rates: Vec<Rate> = stdout
        .lines()
        .filter_map(|line| {
            match line
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<Vec<f64>, _>>()
            {
                Ok(values) if values.len() == 2 => Some(Rate {
                    wall: values[0],
                    cpu: values[1],
                }),
                _ => None,
            }
        })
        .collect();
    match rates[..] {
        [frames, agent_steps] => Ok((frames, agent_steps)),
        _ => Err(format!(
            "unexpected output from the Python reference: {stdout}"
        )),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, briefly.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let steps: usize = std::env::var("TANDEM_BENCH_STEPS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(if quick { 200 } else { 5_000 });
    let rounds = if quick { 1 } else { 3 };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "Atari Breakout (1 agent step = 4 emulated frames), best of {rounds} interleaved rounds of {steps} agent steps; load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let deepmind = deepmind::deepmind_atari(Game::from_name("atari-breakout").expect("known game"));

    // Best of interleaved rounds: the machines this runs on are shared, other load
    // only ever slows a run down, and a burst of it then hits every contestant alike.
    let mut reference: Result<(Rate, Rate), String> = Ok((Rate::default(), Rate::default()));
    let (mut raw, mut gym_like, mut deepmind_single) =
        (Rate::default(), Rate::default(), Rate::default());
    let mut vec_envs = [Rate::default(); 2];
    for _ in 0..rounds {
        reference = match (reference, python_reference(steps)) {
            (Ok((frames, agent)), Ok((new_frames, new_agent))) => {
                Ok((frames.best(new_frames), agent.best(new_agent)))
            }
            (Err(reason), _) | (_, Err(reason)) => Err(reason),
        };
        raw = raw.best(raw_frames(steps));
        gym_like = gym_like.best(single_env(gymnasium_equivalent(), steps));
        deepmind_single =
            deepmind_single.best(single_env(make_env(&deepmind, 1).expect("builds"), steps));
        for (slot, threads) in vec_envs.iter_mut().zip([1, 2]) {
            *slot = slot.best(vec_env(&deepmind, 8, threads, steps));
        }
    }

    println!(
        "{:<78} {:>10} {:>12} {:>9}",
        "", "wall /s", "per CPU-s", "ratio"
    );
    let line = |what: &str, rate: Rate, baseline: Option<Rate>| {
        let ratio = baseline.map_or("".to_owned(), |baseline| {
            format!("{:.2}x", rate.cpu / baseline.cpu)
        });
        println!(
            "{what:<78} {:>10.0} {:>12.0} {ratio:>9}",
            rate.wall, rate.cpu
        );
    };
    let (python_frames, python_steps) = match &reference {
        Ok((frames, agent_steps)) => (Some(*frames), Some(*agent_steps)),
        Err(reason) => {
            println!("(ale-py + gymnasium reference skipped: {reason})");
            (None, None)
        }
    };
    if let Some(frames) = python_frames {
        line("raw frames, ale-py wheel (act only)", frames, None);
    }
    line("raw frames, tandem-ale (act only)", raw, python_frames);
    if let Some(agent_steps) = python_steps {
        line(
            "agent steps, ale-py + gymnasium AtariPreprocessing + FrameStack (baseline)",
            agent_steps,
            None,
        );
    }
    line(
        "agent steps, tandem, same pipeline (ALE gray, gym no-ops), 1 env",
        gym_like,
        python_steps,
    );
    line(
        "agent steps, tandem, DeepMind chain (RGB, fire, episodic life), 1 env",
        deepmind_single,
        python_steps,
    );
    for (rate, threads) in vec_envs.into_iter().zip([1usize, 2]) {
        line(
            &format!("agent steps, tandem VecEnv, DeepMind chain, 8 envs, {threads} thread(s)"),
            rate,
            python_steps,
        );
    }
    println!("(ratios: per CPU-second against the ale-py line above them)");
}

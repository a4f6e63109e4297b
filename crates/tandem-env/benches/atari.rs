//! Preprocessed Atari Breakout throughput: tandem (ALE through tandem-ale plus
//! tandem-env's wrappers) against ale-py + gymnasium's `AtariPreprocessing` +
//! `FrameStackObservation`, measured in the same run on one core each.
//!
//! `cargo bench -p tandem-env --bench atari` (the Python side needs the venv
//! that `scripts/parity/atari_fixture.sh` creates in `.deps/venv-atari`, or a
//! Python given by `TANDEM_ATARI_PYTHON`; without it only tandem's figures print).
//! `TANDEM_BENCH_STEPS` changes the number of agent steps per measurement.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;
use tandem_env::atari::{AtariConfig, AtariGame, AtariObservation, GymNoopReset};
use tandem_env::{
    Env, EnvSpec, GameSpec, ObsBuf, VecEnv, WrapperSpec, env_seeds, make_env, wrappers,
};

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
        WrapperSpec::FrameSkip {
            skip: 4,
            max_pool: true,
        },
        WrapperSpec::Resize {
            height: 84,
            width: 84,
        },
        WrapperSpec::FrameStack { frames: 4 },
    ];
    for (index, wrapper) in chain.iter().enumerate() {
        env = wrappers::wrap(wrapper, index + 1, env, 0).expect("wrapper fits");
    }
    env
}

/// Agent steps per second of one environment stepped on this thread.
fn single_env_steps_per_second(mut env: Box<dyn Env>, steps: usize) -> f64 {
    let mut obs = vec![0u8; env.observation_space().len()];
    let mut policy = Policy(7);
    env.reset(Some(1), ObsBuf::U8(&mut obs));
    let start = Instant::now();
    for _ in 0..steps {
        let action = policy.next(env.num_actions());
        if env.step(action, ObsBuf::U8(&mut obs)).done() {
            env.reset(None, ObsBuf::U8(&mut obs));
        }
    }
    steps as f64 / start.elapsed().as_secs_f64()
}

/// Agent steps per second of a VecEnv (f32 batch output, auto-reset).
fn vec_env_steps_per_second(spec: &EnvSpec, envs: usize, threads: usize, steps: usize) -> f64 {
    let mut venv = VecEnv::new(spec, &env_seeds(1, 0, 0, envs), threads).expect("VecEnv builds");
    let mut policy = Policy(11);
    venv.reset();
    let batches = steps.div_ceil(envs);
    let start = Instant::now();
    for _ in 0..batches {
        let actions: Vec<i64> = (0..envs)
            .map(|_| policy.next(venv.num_actions()) as i64)
            .collect();
        venv.step(&actions).expect("valid actions");
    }
    (batches * envs) as f64 / start.elapsed().as_secs_f64()
}

const PYTHON_REFERENCE: &str = r#"
import sys, time
import cv2, numpy as np, gymnasium as gym, ale_py
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
cv2.setNumThreads(1)
gym.register_envs(ale_py)
steps = int(sys.argv[1])
env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.25)
env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
env = FrameStackObservation(env, 4)
rng = np.random.default_rng(7)
actions = rng.integers(0, 4, size=steps)
ale = ale_py.ALEInterface()
ale.setLoggerMode(ale_py.LoggerMode.Error)
ale.setInt("random_seed", 1)
ale.setFloat("repeat_action_probability", 0.25)
ale.loadROM(ale_py.roms.get_rom_path("breakout"))
ale.reset_game()
minimal = ale.getMinimalActionSet()
frames = 4 * steps
start = time.perf_counter()
for action in np.repeat(actions, 4):
    ale.act(minimal[action])
    if ale.game_over():
        ale.reset_game()
print(frames / (time.perf_counter() - start))
env.reset(seed=1)
start = time.perf_counter()
for action in actions:
    _, _, terminated, truncated, _ = env.step(int(action))
    if terminated or truncated:
        env.reset()
print(steps / (time.perf_counter() - start))
"#;

fn python_interpreter() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TANDEM_ATARI_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv-atari/bin/python");
    venv.is_file().then_some(venv)
}

/// ale-py's raw frames per second and ale-py + gymnasium's agent steps per
/// second, or why there are no figures.
fn python_reference(steps: usize) -> Result<(f64, f64), String> {
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
    let figures: Vec<f64> = stdout
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect();
    match figures[..] {
        [frames, steps] => Ok((frames, steps)),
        _ => Err(format!(
            "unexpected output from the Python reference: {stdout}"
        )),
    }
}

/// Emulated frames per second of bare ALE (`act` only, no screens).
fn raw_frames_per_second(steps: usize) -> f64 {
    let settings = tandem_ale::AleSettings::new(1, 0.25);
    let mut ale = tandem_ale::Ale::new("breakout", &settings).expect("Breakout loads");
    ale.reset().expect("reset");
    let mut policy = Policy(7);
    let frames = 4 * steps;
    let start = Instant::now();
    for _ in 0..steps {
        let action = policy.next(ale.num_actions());
        for _ in 0..4 {
            ale.act(action).expect("valid action");
            if ale.game_over() {
                ale.reset().expect("reset");
            }
        }
    }
    frames as f64 / start.elapsed().as_secs_f64()
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
        "Atari Breakout, agent steps per second (1 agent step = 4 emulated frames), best of {rounds} x {steps} steps; load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let deepmind =
        EnvSpec::deepmind_atari(GameSpec::from_name("atari-breakout").expect("known game"));

    let mut reference: Result<(f64, f64), String> = Ok((0.0, 0.0));
    let (mut raw, mut gym_like, mut deepmind_single) = (0.0f64, 0.0f64, 0.0f64);
    let mut vec_env = [0.0f64; 2];
    // Best of interleaved rounds: the machines this runs on are shared, other load
    // only ever slows a run down, and a burst of it then hits every contestant alike.
    for _ in 0..rounds {
        reference = match (reference, python_reference(steps)) {
            (Ok((frames, agent)), Ok((new_frames, new_agent))) => {
                Ok((frames.max(new_frames), agent.max(new_agent)))
            }
            (Err(reason), _) | (_, Err(reason)) => Err(reason),
        };
        raw = raw.max(raw_frames_per_second(steps));
        gym_like = gym_like.max(single_env_steps_per_second(gymnasium_equivalent(), steps));
        deepmind_single = deepmind_single.max(single_env_steps_per_second(
            make_env(&deepmind, 1).expect("builds"),
            steps,
        ));
        for (slot, threads) in vec_env.iter_mut().zip([1, 2]) {
            *slot = slot.max(vec_env_steps_per_second(&deepmind, 8, threads, steps));
        }
    }
    let python = reference
        .as_ref()
        .map(|&(_, agent)| agent)
        .map_err(Clone::clone);

    match &reference {
        Ok((frames, _)) => println!(
            "  raw ALE frames per second: ale-py wheel {frames:.0}, tandem-ale {raw:.0} ({:.2}x)",
            raw / frames
        ),
        Err(_) => println!("  raw ALE frames per second: tandem-ale {raw:.0}"),
    }
    match &python {
        Ok(rate) => println!(
            "  ale-py + gymnasium AtariPreprocessing + FrameStack, 1 core: {rate:>8.0}  (baseline)"
        ),
        Err(reason) => println!("  ale-py + gymnasium reference: skipped ({reason})"),
    }
    let ratio = |rate: f64| match &python {
        Ok(baseline) => format!("{:.2}x", rate / baseline),
        Err(_) => "n/a".to_owned(),
    };
    println!(
        "  tandem, same pipeline (ALE gray, gym no-ops), 1 env, 1 core: {gym_like:>8.0}  {}",
        ratio(gym_like)
    );
    println!(
        "  tandem, deepmind preprocessing (RGB, fire-reset, episodic life), 1 env, 1 core: {deepmind_single:>8.0}  {}",
        ratio(deepmind_single)
    );
    for (rate, threads) in vec_env.into_iter().zip([1usize, 2]) {
        let per_core = rate / threads as f64;
        println!(
            "  tandem VecEnv, deepmind preprocessing, 8 envs, {threads} thread(s): {rate:>8.0} total, {per_core:>8.0} per core  {}",
            ratio(per_core)
        );
    }
}

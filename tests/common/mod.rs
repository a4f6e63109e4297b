//! Helpers for tests that run ranks as real child processes: the test binary re-runs itself on
//! one test with TANDEM_TEST_ROLE set, and the parent supervises the children.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tandem::dist::{Backend, GroupOptions};

pub const ROLE: &str = "TANDEM_TEST_ROLE";

/// Seeds libtorch's generator and runs `draw` while holding one process-wide lock: the generator
/// is global and a test binary's tests run on parallel threads, so a seeded construction (a
/// model's initialisation, a random batch) must not interleave with another test's.
pub fn seeded<T>(seed: i64, draw: impl FnOnce() -> T) -> T {
    let _guard = torch_rng();
    tch::manual_seed(seed);
    draw()
}

/// The lock [`seeded`] holds, for a test that seeds and draws in several steps, or draws
/// unseeded while other tests of its binary draw seeded.
pub fn torch_rng() -> std::sync::MutexGuard<'static, ()> {
    static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TORCH_RNG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The config's default initialisation (orthogonal; gains sqrt(2) torso, 0.01 policy, 1.0
/// value), for tests that build networks directly.
pub fn orthogonal_init() -> tandem::nn::InitSpec {
    tandem::nn::InitSpec {
        scheme: tandem::nn::InitScheme::Orthogonal,
        torso_gain: std::f64::consts::SQRT_2,
        policy_gain: 0.01,
        value_gain: 1.0,
    }
}

pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

pub fn env_usize(name: &str) -> usize {
    std::env::var(name).unwrap().parse().unwrap()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts rank `rank` of `world` as a child running the test `test` in child mode.
pub fn spawn_rank(
    test: &str,
    rank: usize,
    world: usize,
    port: u16,
    timeout_ms: u64,
    extra: &[(&str, &str)],
) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "rank")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_PORT", port.to_string())
        .env("TEST_TIMEOUT_MS", timeout_ms.to_string())
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

pub struct Finished {
    pub success: bool,
    pub status: std::process::ExitStatus,
    /// Standard output, then standard error.
    pub output: String,
}

/// Waits for a child at most `limit`; a child still running then is killed and the test fails.
/// Its output is drained while it runs, so a chatty child never blocks on a full pipe.
pub fn finish(mut child: Child, limit: Duration) -> Finished {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = out.join().unwrap() + &err.join().unwrap();
            return Finished {
                success: status.success(),
                status,
                output,
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let output = out.join().unwrap() + &err.join().unwrap();
            panic!("a process was still running after {limit:?}: it hung. Its output:\n{output}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn options(rank: usize, world: usize, port: u16, timeout: Duration) -> GroupOptions {
    GroupOptions {
        rank,
        world_size: world,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        rendezvous_timeout: timeout,
        collective_timeout: timeout,
        backend: Backend::Gloo,
        identity: vec![
            (
                "config-hash".into(),
                std::env::var("TEST_HASH").unwrap_or_else(|_| "abc".into()),
            ),
            ("version".into(), "test".into()),
        ],
    }
}

pub fn child_options() -> GroupOptions {
    let timeout = Duration::from_millis(env_usize("TEST_TIMEOUT_MS") as u64);
    options(
        env_usize("RANK"),
        env_usize("WORLD_SIZE"),
        env_usize("MASTER_PORT") as u16,
        timeout,
    )
}

/// Prints a rank's parameters as exact f32 bits on one `PARAMS` line, for the parent to compare.
pub fn print_params(values: &[f32]) {
    let hex: Vec<String> = values
        .iter()
        .map(|v| format!("{:08x}", v.to_bits()))
        .collect();
    println!("PARAMS {}", hex.join(","));
}

/// The parameters a rank printed with [`print_params`] (the test harness may have printed
/// "test name ... " on the same line first).
pub fn parse_params(output: &str) -> Vec<f32> {
    let (_, rest) = output
        .split_once("PARAMS ")
        .unwrap_or_else(|| panic!("no PARAMS in:\n{output}"));
    rest.lines()
        .next()
        .unwrap()
        .split(',')
        .map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap()))
        .collect()
}

/// The PPO settings of CleanRL's `ppo.py` (classic control), spelled out: the values the
/// hand-computed expectations of the learner tests were worked out with.
#[allow(dead_code)]
pub fn cleanrl_ppo() -> tandem::algo::PpoConfig {
    tandem::algo::PpoConfig {
        num_steps: 128,
        learning_rate: 2.5e-4,
        anneal_lr: true,
        adam_eps: 1e-5,
        gamma: 0.99,
        gae_lambda: 0.95,
        update_epochs: 4,
        num_minibatches: 4,
        micro_batches: 1,
        normalize_advantages: true,
        clip_coef: 0.2,
        value_clip_coef: Some(0.2),
        ent_coef: 0.01,
        vf_coef: 0.5,
        max_grad_norm: 0.5,
        target_kl: None,
    }
}

/// Stable-Baselines3's A2C settings, spelled out (see [`cleanrl_ppo`]).
#[allow(dead_code)]
pub fn sb3_a2c() -> tandem::algo::A2cConfig {
    tandem::algo::A2cConfig {
        num_steps: 5,
        learning_rate: 7e-4,
        anneal_lr: false,
        gamma: 0.99,
        gae_lambda: None,
        ent_coef: 0.0,
        vf_coef: 0.5,
        max_grad_norm: 0.5,
        normalize_advantages: false,
        optimizer: tandem::algo::OptimizerSpec::RmsProp {
            alpha: 0.99,
            eps: 1e-5,
        },
    }
}

//! Box actions through the `tandem` binary: PPO and A2C resolve and train on the native
//! Pendulum, the shipped experiments/pendulum-ppo.kdl learns what its header says within 300k
//! steps, and `tandem play` evaluates a box checkpoint with the policy's mean unless asked to
//! sample.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::summary_number;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

fn experiment(name: &str) -> String {
    format!("{}/experiments/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-box-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `args` (with `stdin` on standard input) to completion within `limit`; success and the
/// combined output.
fn tandem(args: &[&str], stdin: Option<&str>, limit: Duration) -> (bool, String) {
    let mut cmd = Command::new(TANDEM);
    cmd.args(args)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let done = common::finish(child, limit);
    (done.status.success(), done.output)
}

fn train(config: &str, dir: &Path, sets: &[&str], stdin: Option<&str>) -> String {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["train", config, "--run-dir", dir, "--quiet"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let (ok, output) = tandem(&args, stdin, Duration::from_secs(240));
    assert!(ok, "{output}");
    output
}

/// The per-episode returns `tandem play` printed.
fn played(dir: &Path, flags: &[&str]) -> Vec<String> {
    let mut args = vec!["play", dir.to_str().unwrap(), "--episodes", "2"];
    args.extend(flags);
    let (ok, output) = tandem(&args, None, Duration::from_secs(60));
    assert!(ok, "{output}");
    let returns: Vec<String> = output
        .lines()
        .filter(|l| l.starts_with("episode "))
        .map(str::to_string)
        .collect();
    assert_eq!(returns.len(), 2, "{output}");
    returns
}

const A2C_PENDULUM: &str = r#"experiment "a2c-pendulum" {
    seed 3
    devices "cpu"
    threads 1
    algorithm "a2c" { lr 7e-4; gamma 0.9; entropy-coef 0.0 }
    env "pendulum" {
        envs 4
        wrappers { normalize-obs; normalize-reward gamma=0.9 }
    }
    network "mlp" { hidden 32 32; actor-critic "separate" }
    train { total-steps 4000; rollout 5 }
}
"#;

#[test]
fn ppo_and_a2c_resolve_and_train_on_a_box_game_and_play_evaluates_the_mean_by_default() {
    let (ok, output) = tandem(
        &["validate", &experiment("pendulum-ppo.kdl")],
        None,
        Duration::from_secs(30),
    );
    assert!(ok, "{output}");

    let ppo = fresh_dir("ppo");
    train(
        &experiment("pendulum-ppo.kdl"),
        &ppo,
        &["train.max-steps=8000"],
        None,
    );
    assert_eq!(summary_number(&ppo, "global_step"), Some(8000.0));
    // 8000 steps of 200-step episodes: 40 finished, scored with the untouched rewards.
    assert_eq!(summary_number(&ppo, "episodes"), Some(40.0));
    let score = summary_number(&ppo, "last_20_score_mean").unwrap();
    assert!((-2000.0..0.0).contains(&score), "{score}");

    let a2c = fresh_dir("a2c");
    train("-", &a2c, &[], Some(A2C_PENDULUM));
    assert_eq!(summary_number(&a2c, "global_step"), Some(4000.0));
    assert!(summary_number(&a2c, "last_20_score_mean").unwrap() < 0.0);

    // A box policy plays its mean by default (the episodes of --greedy); --sample draws from
    // it instead.
    let mean = played(&ppo, &[]);
    assert_eq!(played(&ppo, &["--greedy"]), mean);
    let sampled = played(&ppo, &["--sample"]);
    assert_ne!(sampled, mean);
    assert_eq!(played(&ppo, &["--sample"]), sampled, "sampling is seeded");

    let (ok, output) = tandem(
        &["play", ppo.to_str().unwrap(), "--greedy", "--sample"],
        None,
        Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(
        output.contains("'--greedy' cannot be used with '--sample'"),
        "{output}"
    );
    let _ = std::fs::remove_dir_all(&ppo);
    let _ = std::fs::remove_dir_all(&a2c);
}

#[test]
fn pendulum_ppo_reaches_minus_400_within_300k_steps() {
    // What experiments/pendulum-ppo.kdl's header states, with the file as shipped.
    let dir = fresh_dir("pendulum");
    let start = Instant::now();
    train(&experiment("pendulum-ppo.kdl"), &dir, &[], None);
    let steps = summary_number(&dir, "global_step").unwrap();
    let score = summary_number(&dir, "last_20_score_mean").unwrap();
    eprintln!(
        "pendulum PPO: last-20 mean score {score:.1} after {steps} steps in {:?}",
        start.elapsed()
    );
    assert!(steps <= 300_000.0, "{steps} steps");
    assert!(score >= -400.0, "last-20 mean score {score}");
    // `tandem play` reads observations normalised with the checkpoint's statistics, as the
    // policy learnt them: it scores as training did (with fresh statistics, -1470).
    let (ok, output) = tandem(
        &["play", dir.to_str().unwrap(), "--episodes", "10"],
        None,
        Duration::from_secs(60),
    );
    assert!(ok, "{output}");
    let played: f64 = output
        .lines()
        .find_map(|l| l.strip_prefix("mean score over 10 episode(s): "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no mean score in:\n{output}"));
    assert!(played >= -400.0, "play's mean score {played}:\n{output}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! The `tandem` binary learning with fixed seeds (PPO and A2C on CartPole, one and two ranks,
//! MinAtar against a random policy, the CI's DDP run, the shipped classic-control presets and
//! MinAtar Breakout's and, by hand with `--ignored`, the Atari presets and MinAtar Breakout
//! DQN's), reproducibility, TensorBoard read-back, `play`, `validate` and `--version`, with real
//! processes and real Gloo.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::binary::*;
use common::summary_number;

#[test]
fn ppo_learns_cartpole_on_one_rank() {
    let dir = fresh_dir("ppo-1");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &[],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let last20 = summary_number(&dir, "last_20_return_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "PPO on 1 rank: mean return of the last 20 episodes {last20} < 475"
    );
    assert!(summary_number(&dir, "global_step").unwrap() <= 200_192.0);
    // The loop's CPU time is reported, and it is the loop's: positive, and no more than the
    // machine's cores could have spent in the loop's wall time.
    let cpu = summary_number(&dir, "cpu_seconds").unwrap();
    let wall = summary_number(&dir, "wall_seconds").unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        cpu > 0.0 && cpu <= wall * cores + 0.05,
        "cpu_seconds {cpu} for a loop of {wall} s on {cores} cores"
    );
}

#[test]
fn ppo_learns_cartpole_on_two_ranks() {
    let dir = fresh_dir("ppo-2");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["devices=cpu cpu"],
        Duration::from_secs(400),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    let last20 = summary_number(&dir, "last_20_return_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "PPO on 2 ranks: mean return of the last 20 episodes {last20} < 475"
    );
    // Both ranks wrote their logs; only rank 0 wrote summaries and checkpoints.
    assert!(dir.join("logs/rank-0.log").exists() && dir.join("logs/rank-1.log").exists());
    assert!(dir.join("checkpoints").read_dir().unwrap().count() >= 1);
}

#[test]
fn two_runs_of_the_same_config_are_identical() {
    let sets = ["devices=cpu cpu", "train.max-steps=12288", "log.interval=4"];
    let (a, b) = (fresh_dir("repro-a"), fresh_dir("repro-b"));
    for dir in [&a, &b] {
        let out = train(
            &config("ppo-cartpole.kdl"),
            dir,
            &sets,
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let (sa, sb) = (deterministic_scalars(&a), deterministic_scalars(&b));
    assert!(sa.iter().any(|(t, _, _)| t == "loss/policy"), "{sa:?}");
    assert!(
        sa.iter().any(|(t, _, _)| t == "episode/score_mean"),
        "{sa:?}"
    );
    assert_eq!(
        sa, sb,
        "TensorBoard scalars differ between two identical runs"
    );
    let (pa, pb) = (final_parameters(&a), final_parameters(&b));
    assert!(pa.iter().any(|(n, _)| n.starts_with("model.")));
    assert_eq!(pa, pb, "final parameters differ between two identical runs");
    assert_eq!(
        std::fs::read_to_string(a.join("resolved.kdl")).unwrap(),
        std::fs::read_to_string(b.join("resolved.kdl")).unwrap()
    );
}

#[test]
fn double_buffered_sampling_learns_and_is_reproducible() {
    // train.env-groups 2: each half of the environments steps on a second thread while the
    // policy acts for the other half. The thread timing must not leak into the results.
    let sets = ["train.env-groups=2"];
    let (a, b) = (fresh_dir("groups-a"), fresh_dir("groups-b"));
    for dir in [&a, &b] {
        let out = train(
            &config("ppo-cartpole.kdl"),
            dir,
            &sets,
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let log = std::fs::read_to_string(a.join("logs/rank-0.log")).unwrap();
    assert!(log.contains("in 2 groups of 4"), "{log}");
    let last20 = summary_number(&a, "last_20_return_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "PPO with 2 environment groups: mean return of the last 20 episodes {last20} < 475"
    );
    assert_eq!(
        deterministic_scalars(&a),
        deterministic_scalars(&b),
        "TensorBoard scalars differ between two identical runs with 2 environment groups"
    );
    assert_eq!(final_parameters(&a), final_parameters(&b));
}

#[test]
fn tensorboards_own_reader_reads_the_event_file() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/venv-tb/bin/python");
    if !python.exists() {
        common::tools::tool_missing(
            &python.display().to_string(),
            "the TensorBoard read-back",
            "scripts/setup --test makes it",
        );
        return;
    }
    let dir = fresh_dir("tb");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["train.max-steps=8192", "log.interval=2"],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    let script = r#"
import glob, json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
files = glob.glob(sys.argv[1] + "/tensorboard/events.out.tfevents.*")
ea = EventAccumulator(files[0], size_guidance={"scalars": 0, "tensors": 0})
ea.Reload()
out = {t: [[e.step, e.value] for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}
out["__text__"] = ea.Tags()["tensors"]
print(json.dumps(out))
"#;
    let py = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let json = String::from_utf8_lossy(&py.stdout).to_string();
    for tag in [
        "loss/policy",
        "loss/value",
        "ppo/approx_kl",
        "episode/score_mean",
        "train/return_mean",
        "perf/steps_per_second",
        "time/rollout_s",
    ] {
        assert!(
            json.contains(&format!("\"{tag}\"")),
            "TensorBoard does not see {tag}: {json}"
        );
    }
    assert!(
        json.contains("config/resolved"),
        "the resolved config text is missing: {json}"
    );
    // The values TensorBoard reads equal the ones our own reader decodes.
    let ours = deterministic_scalars(&dir);
    let (_, step, bits) = ours.iter().find(|(t, _, _)| t == "loss/value").unwrap();
    let value = f32::from_bits(*bits);
    assert!(
        json.contains(&format!("[{step}, ")),
        "step {step} missing: {json}"
    );
    let tb_values: Vec<f64> = json
        .split("\"loss/value\": [[")
        .nth(1)
        .unwrap()
        .split("]]")
        .next()
        .unwrap()
        .split("], [")
        .map(|pair| pair.split(", ").nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(
        tb_values.iter().any(|v| (*v as f32) == value),
        "{value} not in {tb_values:?}"
    );
}

#[test]
fn a2c_learns_cartpole() {
    let dir = fresh_dir("a2c");
    let out = train(
        &config("a2c-cartpole.kdl"),
        &dir,
        &[],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    // The threshold this seed holds with Stable-Baselines3's A2C settings within 200k steps.
    let last20 = summary_number(&dir, "last_20_return_mean").unwrap();
    assert!(
        last20 >= 400.0,
        "A2C: mean return of the last 20 episodes {last20} < 400"
    );
}

/// Trains the shipped experiment `file` as it is and returns its last-20 score and the global
/// steps it ran.
fn shipped_preset_run(name: &str, file: &str) -> (f64, f64) {
    shipped_preset_run_within(name, file, Duration::from_secs(600))
}

fn shipped_preset_run_within(name: &str, file: &str, limit: Duration) -> (f64, f64) {
    let dir = fresh_dir(name);
    let shipped = format!("{}/experiments/{file}", env!("CARGO_MANIFEST_DIR"));
    let out = train(&shipped, &dir, &[], limit);
    assert!(out.status.success(), "{}", text(&out));
    (
        summary_number(&dir, "last_20_score_mean").unwrap(),
        summary_number(&dir, "global_step").unwrap(),
    )
}

/// experiments/acrobot-ppo.kdl's claim, run as shipped: seed 1 scores -110 or better over its
/// last 20 episodes within 500k steps (-100.1 measured with the host PPO step, -80.65 before it:
/// one long episode among the last 20 moves the mean by 20; a random policy scores -500).
#[test]
fn the_shipped_acrobot_preset_swings_up() {
    let (score, steps) = shipped_preset_run("acrobot", "acrobot-ppo.kdl");
    assert!(
        score >= -110.0,
        "Acrobot-v1 PPO, seed 1: last-20 score {score} < -110"
    );
    assert!(steps <= 500_224.0);
}

/// experiments/mountaincar-ppo.kdl's claim, run as shipped: seed 1 scores -140 or better over
/// its last 20 episodes within 1M steps (-118.4 measured, 40 s); an agent that never reaches the
/// flag scores -200, which is what DQN without exploration help scored (docs/performance.md).
#[test]
fn the_shipped_mountain_car_preset_reaches_the_flag() {
    let (score, steps) = shipped_preset_run("mountain-car", "mountaincar-ppo.kdl");
    assert!(
        score >= -140.0,
        "MountainCar-v0 PPO, seed 1: last-20 score {score} < -140"
    );
    assert!(steps <= 1_000_192.0);
}

/// experiments/mountaincar-dqn.kdl's claim, run as shipped: seed 1 scores -150 or better over
/// its last 20 episodes within 120k steps (-135.8 measured). It needs `gradient-steps`: with one
/// gradient step per round instead of the Zoo's 8, every episode ran out at -200.
#[test]
fn the_shipped_mountain_car_dqn_preset_reaches_the_flag() {
    let (score, steps) = shipped_preset_run("mountain-car-dqn", "mountaincar-dqn.kdl");
    assert!(
        score >= -150.0,
        "MountainCar-v0 DQN, seed 1: last-20 score {score} < -150"
    );
    assert!(steps <= 120_000.0);
}

/// experiments/pong-ppo.kdl's claim, run as shipped: seed 1 scores -5 or more over its last 20
/// games within its 2M steps (3.65 measured in one run on two threads, 10.6 in a run that went
/// from one thread to two at a resume; -21 is every point lost, a random policy scores about
/// -20). Not on CI: Pong scores as a random policy does for its first 350k steps or so, and the
/// whole run takes about an hour of two cores. Run it with
/// `cargo test --release --test train_learning -- --ignored pong`.
#[test]
#[ignore = "an hour of Atari Pong; run with --ignored"]
fn the_shipped_pong_preset_learns_within_2m_steps() {
    let limit = Duration::from_secs(3 * 3600);
    let (score, steps) = shipped_preset_run_within("pong", "pong-ppo.kdl", limit);
    assert!(
        score >= -5.0,
        "Atari Pong PPO, seed 1: last-20 score {score} < -5"
    );
    assert!(steps <= 2_000_896.0);
}

/// Trains the shipped experiment `file` for its first `steps` global steps (`train.max-steps`:
/// the schedules keep the file's length, so the figure is that of the whole run at that point)
/// and returns its last-20 score and the global steps it ran.
fn shipped_preset_prefix_run(name: &str, file: &str, steps: u64, limit: Duration) -> (f64, f64) {
    let dir = fresh_dir(name);
    let shipped = format!("{}/experiments/{file}", env!("CARGO_MANIFEST_DIR"));
    let out = train(
        &shipped,
        &dir,
        &[&format!("train.max-steps={steps}")],
        limit,
    );
    assert!(out.status.success(), "{}", text(&out));
    (
        summary_number(&dir, "last_20_score_mean").unwrap(),
        summary_number(&dir, "global_step").unwrap(),
    )
}

/// experiments/minatar-breakout.kdl's claim, the first 500k steps of its 5M (40 s here beside
/// another run): seed 1 scores 3 or more over its last 20 episodes (4.4 measured; a random
/// policy scores under 1, as the test below measures).
#[test]
fn the_shipped_minatar_breakout_preset_learns_within_500k_steps() {
    let limit = Duration::from_secs(300);
    let (score, steps) =
        shipped_preset_prefix_run("minatar-ppo", "minatar-breakout.kdl", 500_000, limit);
    assert!(
        score >= 3.0,
        "MinAtar Breakout PPO, seed 1: last-20 score {score} < 3 after 500k steps"
    );
    // It stops within one rollout (16 environments x 128 steps) past the budget.
    assert!(steps < 500_000.0 + 16.0 * 128.0, "ran {steps} steps");
}

/// experiments/minatar-breakout-residual.kdl's claim (a network declared as layers, residual
/// convolutions): its first 500k steps score at least the preset's 3 on one rank and on two.
/// About 5 minutes, so not on CI; run it with --ignored.
#[test]
#[ignore = "two MinAtar Breakout runs of a declared residual network, about 5 minutes; run with --ignored"]
fn the_residual_minatar_network_learns_breakout_on_one_and_two_ranks() {
    let shipped = format!(
        "{}/experiments/minatar-breakout-residual.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut scores = Vec::new();
    for (name, devices) in [
        ("residual-minatar-1", "devices=\"cpu\""),
        ("residual-minatar-2", "devices=\"cpu\" \"cpu\""),
    ] {
        let dir = fresh_dir(name);
        let sets = ["train.max-steps=500000", devices];
        let out = train(&shipped, &dir, &sets, Duration::from_secs(900));
        assert!(out.status.success(), "{name}: {}", text(&out));
        scores.push(summary_number(&dir, "last_20_score_mean").unwrap());
    }
    assert!(
        scores.iter().all(|&s| s >= 3.0),
        "minatar-breakout-residual.kdl after 500k steps, one rank and two: {scores:?}"
    );
}

/// experiments/breakout.kdl's claim, the first 800k steps of its 10M on its two CPU ranks: seed
/// 1 scores 12 or more over its last 20 games (21.05 measured, in 30 minutes beside another
/// run; its games over the first 50k steps scored 0 to 10). Not on CI; run it with
/// `cargo test --release --test train_learning -- --ignored breakout_a2c`.
#[test]
#[ignore = "half an hour of Atari Breakout; run with --ignored"]
fn the_shipped_breakout_a2c_preset_learns_within_800k_steps() {
    let limit = Duration::from_secs(2 * 3600);
    let (score, steps) = shipped_preset_prefix_run("breakout-a2c", "breakout.kdl", 800_000, limit);
    assert!(
        score >= 12.0,
        "Atari Breakout A2C, seed 1: last-20 score {score} < 12 after 800k steps"
    );
    // It stops within one update (64 environments x 8 steps) past the budget.
    assert!(steps < 800_000.0 + 64.0 * 8.0, "ran {steps} steps");
}

/// experiments/breakout-ppo.kdl's claim, the first 500k steps of its 10M (its learning rate
/// anneals over the 10M): seed 1 scores 8 or more over its last 20 games (13.1 measured, in 50
/// minutes beside another run at a load average near 7). Not on CI; run it with
/// `cargo test --release --test train_learning -- --ignored breakout_ppo_preset`.
#[test]
#[ignore = "most of an hour of Atari Breakout; run with --ignored"]
fn the_shipped_breakout_ppo_preset_learns_within_500k_steps() {
    let limit = Duration::from_secs(3 * 3600);
    let (score, steps) =
        shipped_preset_prefix_run("breakout-ppo", "breakout-ppo.kdl", 500_000, limit);
    assert!(
        score >= 8.0,
        "Atari Breakout PPO, seed 1: last-20 score {score} < 8 after 500k steps"
    );
    // It stops within one rollout (8 environments x 128 steps) past the budget.
    assert!(steps < 500_000.0 + 8.0 * 128.0, "ran {steps} steps");
}

/// experiments/minatar-breakout-dqn.kdl's claim, the first 500k steps of its 5M on its two CPU
/// ranks (epsilon has decayed by 100k): seed 1 scores 7 or more over its last 20 episodes
/// (11.65 measured, in 14 minutes beside another run). Not on CI; run it with
/// `cargo test --release --test train_learning -- --ignored minatar_breakout_dqn`.
#[test]
#[ignore = "a quarter of an hour of MinAtar Breakout DQN; run with --ignored"]
fn the_shipped_minatar_breakout_dqn_preset_learns_within_500k_steps() {
    let limit = Duration::from_secs(3600);
    let (score, steps) =
        shipped_preset_prefix_run("minatar-dqn", "minatar-breakout-dqn.kdl", 500_000, limit);
    assert!(
        score >= 7.0,
        "MinAtar Breakout DQN, seed 1: last-20 score {score} < 7 after 500k steps"
    );
    // It stops within one vector step (4 environments) past the budget.
    assert!(steps < 500_000.0 + 4.0, "ran {steps} steps");
}

/// experiments/breakout-ppo-lstm.kdl's claim, the first 250k steps of its 10M (its learning
/// rate anneals over the 10M): seed 1 scores 8 or more over its last 20 games (14.2 measured, in
/// 22 minutes beside another run). Not on CI; run it with
/// `cargo test --release --test train_learning -- --ignored breakout_ppo_lstm`.
#[test]
#[ignore = "half an hour of Atari Breakout with an LSTM; run with --ignored"]
fn the_shipped_breakout_ppo_lstm_preset_learns_within_250k_steps() {
    let limit = Duration::from_secs(2 * 3600);
    let (score, steps) =
        shipped_preset_prefix_run("breakout-ppo-lstm", "breakout-ppo-lstm.kdl", 250_000, limit);
    assert!(
        score >= 8.0,
        "Atari Breakout PPO with an LSTM, seed 1: last-20 score {score} < 8 after 250k steps"
    );
    // It stops within one rollout (8 environments x 128 steps) past the budget.
    assert!(steps < 250_000.0 + 8.0 * 128.0, "ran {steps} steps");
}

#[test]
fn ppo_beats_a_random_policy_on_minatar_breakout_within_two_minutes() {
    let random = random_minatar_breakout(200);
    let dir = fresh_dir("minatar");
    let start = Instant::now();
    let out = train(
        &config("ppo-minatar-breakout.kdl"),
        &dir,
        &[],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let trained = summary_number(&dir, "recent_score_mean").unwrap();
    eprintln!(
        "MinAtar Breakout: random {random:.2}, PPO {trained:.2} after {:?}",
        start.elapsed()
    );
    assert!(random < 1.0, "random policy scored {random}");
    assert!(
        trained >= 4.0 * random.max(0.5),
        "PPO scored {trained}, random {random}"
    );
    // A GIF of the trained policy playing, from the checkpoint's own config.
    let gif = dir.join("play.gif");
    let play = run(
        tandem()
            .arg("play")
            .arg(&dir)
            .args(["--episodes", "2", "--gif"])
            .arg(&gif),
        Duration::from_secs(60),
    );
    assert!(play.status.success(), "{}", text(&play));
    let bytes = std::fs::read(&gif).unwrap();
    assert!(
        bytes.starts_with(b"GIF89a") && bytes.len() > 100,
        "{} bytes",
        bytes.len()
    );
}

/// The README's first run, `experiments/cartpole.kdl` as shipped, ends solved on seeds 1-5: its
/// comment says 500 over the last 20 episodes (measured here), and this holds at least 475 (the
/// threshold gymnasium calls solved), so another CPU's rounding may not fail it by one episode.
#[test]
fn the_first_run_solves_cartpole_on_seeds_1_to_5() {
    let example = format!("{}/experiments/cartpole.kdl", env!("CARGO_MANIFEST_DIR"));
    let mut scores = Vec::new();
    for seed in 1..=5 {
        let dir = fresh_dir(&format!("first-run-{seed}"));
        let seed_set = format!("seed={seed}");
        let mut cmd = tandem();
        cmd.args([
            "train",
            &example,
            "--quiet",
            "--set",
            &seed_set,
            "--run-dir",
        ])
        .arg(&dir);
        let out = run(&mut cmd, Duration::from_secs(300));
        assert!(out.status.success(), "seed {seed}: {}", text(&out));
        scores.push(summary_number(&dir, "last_20_score_mean").unwrap());
    }
    assert!(
        scores.iter().all(|&s| s >= 475.0),
        "cartpole.kdl's last-20 scores on seeds 1-5: {scores:?}"
    );
}

/// `experiments/cartpole-residual.kdl` trained as shipped (or with `sets`): its last-20 score.
fn residual_cartpole(name: &str, sets: &[&str]) -> f64 {
    let example = format!(
        "{}/experiments/cartpole-residual.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = fresh_dir(name);
    let mut cmd = tandem();
    cmd.args(["train", &example, "--quiet", "--run-dir"])
        .arg(&dir);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = run(&mut cmd, Duration::from_secs(600));
    assert!(out.status.success(), "{name}: {}", text(&out));
    summary_number(&dir, "last_20_score_mean").unwrap()
}

/// The network declared as layers (a residual MLP) solves CartPole as the mlp preset does:
/// the comment says 500 over the last 20 episodes on seed 1 (measured here), this holds 475.
#[test]
fn the_residual_mlp_declared_as_layers_solves_cartpole() {
    let score = residual_cartpole("residual-1", &[]);
    assert!(score >= 475.0, "cartpole-residual.kdl, seed 1: {score}");
}

/// Seeds 2 and 3, and seed 1 on two ranks: about 3 minutes, so not on CI.
#[test]
#[ignore = "three more CartPole runs of the residual MLP, about 3 minutes; run with --ignored"]
fn the_residual_mlp_solves_cartpole_on_seeds_2_and_3_and_on_two_ranks() {
    let scores = [
        residual_cartpole("residual-2", &["seed=2"]),
        residual_cartpole("residual-3", &["seed=3"]),
        residual_cartpole("residual-ranks", &["devices=\"cpu\" \"cpu\""]),
    ];
    assert!(
        scores.iter().all(|&s| s >= 475.0),
        "cartpole-residual.kdl: seeds 2, 3 and two ranks: {scores:?}"
    );
}

#[test]
fn the_ci_run_of_cartpole_ddp_records_its_hash_and_learns() {
    // What CI checks of a reproducible short run: the example experiment on 2 ranks, its config
    // hash recorded in the run directory, and a return that shows learning.
    let example = format!(
        "{}/experiments/cartpole-ddp.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = fresh_dir("ci-ddp");
    let mut cmd = tandem();
    cmd.args([
        "train",
        &example,
        "--max-steps",
        "61440",
        "--quiet",
        "--run-dir",
    ])
    .arg(&dir);
    let out = run(&mut cmd, Duration::from_secs(300));
    assert!(out.status.success(), "{}", text(&out));
    let hash = run(
        tandem().args([
            "resolve",
            &example,
            "--set",
            "train.max-steps=61440",
            "--hash",
        ]),
        Duration::from_secs(30),
    );
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_string();
    assert_eq!(hash.len(), 64, "{hash}");
    assert_eq!(
        std::fs::read_to_string(dir.join("resolved.sha256"))
            .unwrap()
            .trim(),
        hash
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(
        summary.contains(&format!("\"config_hash\": \"{hash}\"")),
        "{summary}"
    );
    let recent = summary_number(&dir, "recent_return_mean").unwrap();
    assert!(
        recent >= 100.0,
        "cartpole-ddp after 61k steps: recent return {recent}"
    );
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("all 2 ranks hold bitwise identical copies of"),
        "{log}"
    );
}

#[test]
fn validate_reports_exit_codes_and_points_at_the_line() {
    let examples: Vec<String> =
        std::fs::read_dir(format!("{}/experiments", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
            .map(|p| p.display().to_string())
            .collect();
    assert!(examples.len() >= 5, "{examples:?}");
    let ok = run(
        tandem().arg("validate").args(&examples),
        Duration::from_secs(30),
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    let bad = fresh_dir("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let file = bad.join("bad.kdl");
    std::fs::write(
        &file,
        "experiment \"x\" {\n    seed 1\n    algorithm \"ppo\" {\n        lr \"fast\"\n    }\n}\n",
    )
    .unwrap();
    let out = run(tandem().arg("validate").arg(&file), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("bad.kdl:4:"), "no file:line:column in:\n{all}");
    let usage = run(
        tandem().args(["resolve", "--set", "nonsense"]).arg(&file),
        Duration::from_secs(30),
    );
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));
}

#[test]
fn version_names_libtorch_backends_and_cuda() {
    let out = run(tandem().arg("--version"), Duration::from_secs(30));
    assert!(out.status.success());
    let v = text(&out);
    assert!(
        v.contains(&format!("tandem {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    assert!(v.contains("libtorch 2.13.0"), "{v}");
    assert!(v.contains("collective backends: gloo"), "{v}");
    assert!(v.contains("cuda usable: "), "{v}");
}

#[test]
fn play_evaluates_a_dqn_checkpoint_too() {
    let example = format!(
        "{}/experiments/cartpole-dqn.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = fresh_dir("dqn-play");
    let mut cmd = tandem();
    cmd.args([
        "train",
        &example,
        "--max-steps",
        "3000",
        "--quiet",
        "--run-dir",
    ])
    .arg(&dir);
    let out = run(&mut cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    let gif = dir.join("episode.gif");
    let play = run(
        tandem()
            .arg("play")
            .arg(&dir)
            .args(["--episodes", "2", "--greedy", "--gif"])
            .arg(&gif),
        Duration::from_secs(60),
    );
    assert!(play.status.success(), "{}", text(&play));
    assert!(text(&play).contains("episode 2: score"), "{}", text(&play));
    assert!(std::fs::read(&gif).unwrap().starts_with(b"GIF89a"));
}

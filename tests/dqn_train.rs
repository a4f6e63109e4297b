//! DQN learns, end to end through the launcher: the built binary trains the example experiments
//! on 1 rank and on 2 real ranks, and the run's summary.json reports the mean return of the
//! last 100 episodes (and the CartPole tests read its whole curve back from the TensorBoard
//! events). Runs are seeded and bit-for-bit reproducible on one kind of CPU (not across kinds: MKL takes
//! other kernels on AMD than on Intel), so the CartPole tests assert bounds that hold for every
//! CPU the example's comment gives figures for.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::summary_number;

fn run_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-dqn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Trains `file` with `sets` into `dir` and returns summary.json's recent_return_mean.
fn train(file: &str, dir: &Path, sets: &[&str]) -> (f64, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tandem"));
    cmd.arg("train")
        .arg(root.join(file))
        .arg("--run-dir")
        .arg(dir)
        .args([
            "--set",
            "log.console=quiet",
            "--set",
            "log.tensorboard=#false",
        ]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("the tandem binary runs");
    assert!(
        out.status.success(),
        "training failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    let value = summary
        .split("\"recent_return_mean\": ")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no recent_return_mean in {summary}"));
    (value, summary)
}

/// The `episode/recent_score_mean` points (the mean score of the last 100 episodes) of the
/// run in `dir`, read back from its TensorBoard event file, in step order.
fn recent_return_curve(dir: &Path) -> Vec<(i64, f32)> {
    use tandem_summary::reader;
    let files = reader::event_files(&dir.join("tensorboard")).expect("a tensorboard directory");
    assert_eq!(files.len(), 1, "{files:?}");
    let events = reader::read_event_file(&files[0]).unwrap().events;
    reader::scalars(&events)
        .into_iter()
        .filter(|p| p.tag == "episode/recent_score_mean")
        .map(|p| (p.step, p.value))
        .collect()
}

/// What the curve says about 475: the first step at or above it, and the lowest value from
/// that step on. Panics when the curve never reaches 475.
fn first_475_and_lowest_after(curve: &[(i64, f32)]) -> (i64, f32) {
    let first = curve
        .iter()
        .position(|(_, v)| *v >= 475.0)
        .unwrap_or_else(|| panic!("the mean return never reaches 475: {curve:?}"));
    let lowest = curve[first..]
        .iter()
        .map(|p| p.1)
        .fold(f32::INFINITY, f32::min);
    (curve[first].0, lowest)
}

/// The shipped file as it is (seed 1, 1 rank, its full 200k steps), checked against what its
/// comment says. A seed's run is bit-for-bit reproducible on one kind of CPU but not across
/// kinds (MKL takes other kernels on AMD than on Intel, and with AVX-512 than without), so the
/// test holds what every CPU the comment names shares: the mean return of the last 100
/// episodes first at 475 by step 170,000 (Intel Xeon: 161,088; AMD EPYC with AVX-512: 102,016;
/// AMD EPYC Zen 3, AVX2: 108,992), at least 400 after it (478.89; 475.44; 402.15: Zen 3's falls
/// after 150k steps), the last 20 episodes at 499 or more at the end (all three at 500 or
/// 499.19). Seeds 2 and 3 (docs/performance.md) reach 475 at 108,288 and 149,568 and end at
/// 500 (Intel).
#[test]
fn dqn_solves_cartpole_on_one_rank() {
    let dir = run_dir("cartpole-1");
    let (ret, summary) = train(
        "experiments/cartpole-dqn.kdl",
        &dir,
        &["log.tensorboard=#true"],
    );
    assert!(ret >= 400.0, "mean return {ret} < 400: {summary}");
    assert!(summary.contains("\"world_size\": 1"), "{summary}");
    let last_20 = summary_number(&dir, "last_20_return_mean").unwrap();
    assert!(
        last_20 >= 499.0,
        "the last 20 episodes at {last_20}: {summary}"
    );
    let curve = recent_return_curve(&dir);
    let (first, lowest) = first_475_and_lowest_after(&curve);
    assert!(first <= 170_000, "first at 475 only at step {first}");
    assert!(lowest >= 400.0, "falls to {lowest} after step {first}");
    let (last_step, _) = *curve.last().unwrap();
    assert_eq!(last_step, 200_000, "the last point's step");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The shipped file on 2 real ranks through the launcher (each rank steps 2 of the 4
/// environments, keeps half of the buffer and samples half of each batch), its full 200k steps,
/// checked against its comment: 475 by step 120,000 (Intel Xeon: 109,376; AMD EPYC: 112,640),
/// at least 475 after it, and 500 over at least the last 60,000 steps (from step 116,416 on
/// Intel, 120,640 on AMD). About 190 s on the loaded 2-core box (a Gloo all-reduce on every
/// gradient step).
#[test]
fn dqn_solves_cartpole_on_two_ranks() {
    let dir = run_dir("cartpole-2");
    let (ret, summary) = train(
        "experiments/cartpole-dqn.kdl",
        &dir,
        &["devices=\"cpu\" \"cpu\"", "log.tensorboard=#true"],
    );
    assert!(ret >= 475.0, "mean return {ret} < 475: {summary}");
    assert!(summary.contains("\"world_size\": 2"), "{summary}");
    let curve = recent_return_curve(&dir);
    let (first, lowest) = first_475_and_lowest_after(&curve);
    assert!(first <= 120_000, "first at 475 only at step {first}");
    assert!(lowest >= 475.0, "falls to {lowest} after step {first}");
    let below = curve.iter().rposition(|(_, v)| *v < 500.0).unwrap();
    let stretch = curve[below + 1].0;
    assert!(
        stretch <= 140_000,
        "the final stretch at 500 starts only at step {stretch}"
    );
    assert_eq!(curve.last().unwrap().0, 200_000, "the last point's step");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs the tandem binary with `args`, asserting success.
fn tandem(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .output()
        .expect("the tandem binary runs");
    assert!(
        out.status.success(),
        "tandem {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_resumed_run_continues_with_its_replay_buffer() {
    use tandem::algo::storage::replay::{ReplayBuffer, ReplaySpec};
    let dir = run_dir("resume");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/cartpole-dqn.kdl");
    let d = dir.to_str().unwrap();
    let common = [
        "--set",
        "log.console=quiet",
        "--set",
        "algorithm.checkpoint-replay=#true",
        "--set",
        "algorithm.prioritized=#true",
        "--set",
        "algorithm.learning-starts=1000",
        "--set",
        "algorithm.buffer-capacity=20000",
    ];
    let mut first = vec![
        "train",
        file.to_str().unwrap(),
        "--run-dir",
        d,
        "--max-steps",
        "2000",
    ];
    first.extend(common);
    tandem(&first);
    let spec = ReplaySpec {
        capacity: 20_000,
        num_envs: 4,
        obs_len: 4,
        stack: 1,
        pixels: false,
        n_step: 3,
        gamma: 0.99,
        priority_alpha: Some(0.6),
        actions: tandem::algo::actions::ActionKind::Discrete,
    };
    let replay = dir.join("checkpoints/replay-rank0.bin");
    let saved = ReplayBuffer::load(spec.clone(), &replay).unwrap();
    assert_eq!(saved.steps_pushed(), 2000 / 4);
    assert_eq!(saved.tag(), 2000, "saved with the checkpoint's global step");
    // The resumed run keeps its own config; only the step limit moves on.
    tandem(&["train", "--resume", d, "--max-steps", "4000", "--quiet"]);
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"global_step\": 4000"), "{summary}");
    let resumed = ReplayBuffer::load(spec, &replay).unwrap();
    // 1000 vector steps: the 500 from before the resume plus 500 new ones (an empty buffer
    // after the resume would hold 500).
    assert_eq!(resumed.steps_pushed(), 4000 / 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dqn_learns_minatar_breakout() {
    // A short run on 1 rank: 40k steps with epsilon decaying over the first 15k and one
    // gradient step per 8 environment steps. The first 4k steps (epsilon near 1, i.e. close to
    // the random policy) score 0.35..0.5 per episode. DQN this short is seed-fragile, and a
    // change of rounding (the fused Adam kernel) reshuffles which seeds learn. Mean return of
    // the last 100 episodes, seeds 1-4, before / after that change: 1.03 / 0.32, 1.84 / 1.98,
    // 0.02 / 0.05 (seed 3 collapses either way), 1.21 / 1.11. Seed 2 learns in both.
    let dir = run_dir("minatar");
    let (ret, summary) = train(
        "experiments/minatar-breakout-dqn.kdl",
        &dir,
        &[
            "devices=\"cpu\"",
            "seed=2",
            "train.total-steps=60000",
            "train.max-steps=40000",
            "algorithm.epsilon-fraction=0.25",
            "algorithm.learning-starts=2000",
            "algorithm.train-frequency=2",
        ],
    );
    assert!(ret >= 0.8, "mean return {ret} < 0.8: {summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The gradient steps a 2,000-step run of cartpole-dqn.kdl took with `sets` (summary.json's
/// `gradient_steps`).
fn gradient_steps_taken(name: &str, sets: &[&str]) -> f64 {
    let dir = run_dir(name);
    let mut all = vec![
        "train.total-steps=2000",
        "algorithm.learning-starts=1000",
        "algorithm.train-frequency=2",
    ];
    all.extend(sets);
    train("experiments/cartpole-dqn.kdl", &dir, &all);
    let steps = summary_number(&dir, "gradient_steps").unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    steps
}

/// `gradient-steps` N takes N gradient steps in every training round once learning has
/// started (RL Baselines3 Zoo's MountainCar DQN takes 8 per 16 environment steps): the same
/// rounds as with 1, three times the steps.
#[test]
fn dqn_takes_gradient_steps_per_round() {
    let one = gradient_steps_taken("grad-1", &[]);
    let three = gradient_steps_taken("grad-3", &["algorithm.gradient-steps=3"]);
    assert!(
        one > 100.0,
        "only {one} gradient steps after learning started"
    );
    assert_eq!(three, 3.0 * one);
}

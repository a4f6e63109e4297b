//! SAC learns, end to end through the launcher: the built binary trains
//! experiments/pendulum-sac.kdl on 1 rank and on 2 real ranks (the 2 ranks end bitwise
//! identical), a checkpointed run resumes with its replay buffer and ends where the
//! uninterrupted run ends, bad inputs are refused with located diagnostics, and `tandem play`
//! acts with the checkpoint.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-sac-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/pendulum-sac.kdl")
}

fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .output()
        .expect("the tandem binary runs")
}

/// Trains the example with `sets` into `dir`, asserting success; summary.json's text.
fn train(dir: &Path, sets: &[&str]) -> String {
    let file = example();
    let mut args = vec![
        "train",
        file.to_str().unwrap(),
        "--run-dir",
        dir.to_str().unwrap(),
    ];
    for s in ["log.console=quiet", "log.tensorboard=#false"]
        .iter()
        .chain(sets)
    {
        args.extend(["--set", s]);
    }
    let out = tandem(&args);
    assert!(
        out.status.success(),
        "training failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(dir.join("summary.json")).expect("summary.json")
}

fn number(summary: &str, key: &str) -> f64 {
    summary
        .split(&format!("\"{key}\": "))
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {summary}"))
}

/// The example's comment: seed 1 on 1 rank, the mean return of the last 20 episodes is
/// -180.7 at 10k steps (half of the experiment's 20k; the first episodes, under uniformly random
/// actions, score about -1500).
#[test]
fn sac_swings_up_the_pendulum_on_one_rank() {
    let dir = run_dir("pendulum-1");
    let summary = train(&dir, &["train.max-steps=10000"]);
    let last_20 = number(&summary, "last_20_return_mean");
    assert!(
        last_20 >= -250.0,
        "last-20 mean return {last_20} < -250: {summary}"
    );
    assert_eq!(number(&summary, "world_size"), 1.0);
    // 2 environments, 2 gradient steps per iteration from step 1000 on.
    assert_eq!(number(&summary, "gradient_steps"), 9002.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same file on 2 real ranks (each steps 1 of the 2 environments, keeps half of the buffer
/// and samples half of each batch; the same gradient steps per environment step): -207.8 at
/// 10k steps, and both ranks end holding bitwise identical networks and optimizer state.
#[test]
fn sac_swings_up_the_pendulum_on_two_ranks() {
    let dir = run_dir("pendulum-2");
    let summary = train(&dir, &["devices=\"cpu\" \"cpu\"", "train.max-steps=10000"]);
    let last_20 = number(&summary, "last_20_return_mean");
    assert!(
        last_20 >= -250.0,
        "last-20 mean return {last_20} < -250: {summary}"
    );
    assert_eq!(number(&summary, "world_size"), 2.0);
    assert_eq!(number(&summary, "gradient_steps"), 9002.0);
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("all 2 ranks hold bitwise identical copies of"),
        "no final agreement in the log:\n{log}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The tensors of a checkpoint file, by name.
fn checkpoint(dir: &Path) -> Vec<(String, tch::Tensor)> {
    let ckpts = dir.join("checkpoints");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&ckpts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pt"))
        .collect();
    files.sort();
    tch::Tensor::load_multi(files.last().unwrap()).unwrap()
}

#[test]
fn a_resumed_run_continues_with_its_replay_buffer_and_ends_where_the_uninterrupted_one_does() {
    use tandem::algo::actions::ActionKind;
    use tandem::algo::replay::{ReplayBuffer, ReplaySpec};
    let sets = [
        "algorithm.checkpoint-replay=#true",
        "algorithm.learning-starts=500",
        "algorithm.buffer-capacity=4000",
    ];
    let straight = run_dir("straight");
    let mut all = sets.to_vec();
    all.push("train.max-steps=2000");
    train(&straight, &all);
    let resumed = run_dir("resumed");
    all.pop();
    all.push("train.max-steps=1000");
    train(&resumed, &all);
    let spec = ReplaySpec {
        capacity: 4000,
        num_envs: 2,
        obs_len: 3,
        stack: 1,
        pixels: false,
        n_step: 1,
        gamma: 0.99,
        priority_alpha: None,
        actions: ActionKind::Box { dim: 1 },
    };
    let replay = resumed.join("checkpoints/replay-rank0.bin");
    let saved = ReplayBuffer::load(spec.clone(), &replay).unwrap();
    assert_eq!((saved.steps_pushed(), saved.tag()), (500, 1000));
    let d = resumed.to_str().unwrap();
    let out = tandem(&["train", "--resume", d, "--max-steps", "2000", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = ReplayBuffer::load(spec, &replay).unwrap();
    // 1000 vector steps: 500 from before the resume and 500 new (an empty buffer would hold 500).
    assert_eq!(after.steps_pushed(), 1000);
    let (a, b) = (checkpoint(&straight), checkpoint(&resumed));
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        if na.starts_with("meta.") {
            // The run's bookkeeping, not the learner's state: the config text (the resumed
            // run's says max-steps 1000) and the episodes this process saw (a resume counts
            // them afresh, as for DQN).
            continue;
        }
        assert!(
            ta.equal(tb),
            "{na} differs between the resumed and the uninterrupted run"
        );
    }
    assert!(
        a.iter().any(|(n, _)| n.contains("actor")),
        "{:?}",
        a.iter().map(|x| &x.0).collect::<Vec<_>>()
    );
    std::fs::remove_dir_all(&straight).unwrap();
    std::fs::remove_dir_all(&resumed).unwrap();
}

/// Resolves the example with `sets` and returns stderr, asserting it was refused.
fn refused(sets: &[&str]) -> String {
    let file = example();
    let mut args = vec!["resolve", file.to_str().unwrap()];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = tandem(&args);
    assert!(!out.status.success(), "{sets:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_sac_settings_are_refused_with_located_diagnostics() {
    let err = refused(&["env=\"cartpole\""]);
    assert!(
        err.contains("config::action-mismatch") && err.contains("sac cannot act in cartpole"),
        "{err}"
    );
    assert!(err.contains("takes box actions only"), "{err}");
    let err = refused(&["algorithm.alpha=\"sometimes\""]);
    assert!(err.contains("\"auto\" or number"), "{err}");
    let err = refused(&["algorithm.alpha=0"]);
    assert!(err.contains("algorithm.alpha"), "{err}");
    let err = refused(&["algorithm.learning-starts=10"]);
    assert!(err.contains("learning starts before one batch"), "{err}");
    let err = refused(&["devices=\"cpu\" \"cpu\"", "algorithm.batch-size=127"]);
    assert!(
        err.contains("batch-size 127 cannot be split evenly"),
        "{err}"
    );
    let err = refused(&["network=\"nature-cnn\""]);
    assert!(err.contains("sac takes an mlp network"), "{err}");
    let err = refused(&["env=\"minatar-breakout\""]);
    assert!(
        err.contains("sac cannot read the pixel observations of minatar-breakout"),
        "{err}"
    );
    let err = refused(&["network.actor-critic=\"separate\""]);
    assert!(
        err.contains("sac's actor and critics never share a torso"),
        "{err}"
    );
}

/// `tandem play` of a SAC checkpoint: the deterministic tanh(mean) by default (what
/// `--greedy` also asks for), a reproducible sample with `--sample`.
#[test]
fn play_acts_deterministically_by_default_and_samples_on_request() {
    let dir = run_dir("play");
    train(&dir, &["train.max-steps=2000"]);
    let played = |flag: Option<&str>| {
        let mut args = vec!["play", dir.to_str().unwrap(), "--episodes", "1"];
        args.extend(flag);
        let out = tandem(&args);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mean = played(None);
    assert_eq!(mean, played(Some("--greedy")));
    let sampled = played(Some("--sample"));
    assert_ne!(mean, sampled, "a sample is not the mean");
    assert_eq!(sampled, played(Some("--sample")), "a seeded sample repeats");
}

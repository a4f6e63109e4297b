//! Mistakes a new user makes on the command line, through the built binary: an experiment
//! that cannot fit in memory is refused by `validate` and `train` before anything runs, a step
//! limit below one update is said before the run takes the whole update, and `tandem play
//! --gif` onto a device writes through it (a full device is an error) instead of replacing it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("the tandem binary runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-mistakes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cartpole() -> String {
    format!("{}/experiments/cartpole.kdl", env!("CARGO_MANIFEST_DIR"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_billion_environments_are_refused_by_validate_and_train_before_anything_runs() {
    let dir = scratch("huge");
    let file = dir.join("huge.kdl");
    std::fs::write(
        &file,
        "experiment \"huge\" {\n    devices \"cpu\"\n    env \"cartpole\" {\n        envs 1_000_000_000\n    }\n}\n",
    )
    .unwrap();
    let validate = tandem(&["validate", path(&file)]);
    assert_eq!(validate.status.code(), Some(1), "{}", text(&validate));
    let run_dir = dir.join("run");
    let train = tandem(&["train", path(&file), "--run-dir", path(&run_dir)]);
    // `train --help`: 2 is a mistake in the config, nothing ran.
    assert_eq!(train.status.code(), Some(2), "{}", text(&train));
    for out in [&validate, &train] {
        let all = text(out);
        assert!(all.contains("config::out-of-memory"), "{all}");
        assert!(all.contains("huge.kdl:4:14"), "{all}");
        assert!(all.contains("of rollout storage a rank"), "{all}");
        assert!(all.contains(" is available"), "{all}");
    }
    assert!(!run_dir.exists(), "train created its run directory");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// MemAvailable of this machine, in bytes.
fn available_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn two_ranks_on_a_machine_that_holds_one_are_refused_once_the_launcher_counts_them() {
    // The resolve counts one rank a machine (it cannot know the layout yet); the launcher then
    // finds both ranks here and checks the same resolution again, before anything starts.
    let dir = scratch("two-ranks");
    // Two ranks of MinAtar DQN, each holding half of the global replay buffer.
    let file = format!(
        "{}/experiments/minatar-breakout-dqn.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let source = tandem_config::Source::Path(file.clone().into());
    let capacity_set = |capacity: u64| format!("algorithm.buffer-capacity={capacity}");
    let per_rank = |capacity: u64| {
        let r = tandem_config::resolve(&source, &[capacity_set(capacity)])
            .unwrap_or_else(|d| panic!("{d}"));
        tandem_config::memory_estimate(&r.experiment).per_rank()
    };
    // A million more global rows are half a million more a rank.
    let row = (per_rank(4_000_000) - per_rank(2_000_000)) / 1_000_000;
    // About 0.7 of the machine a rank.
    let capacity = 2 * (available_memory() * 7 / 10 / row);
    let run_dir = dir.join("run");
    let set = capacity_set(capacity);
    let train = tandem(&["train", &file, "--set", &set, "--run-dir", path(&run_dir)]);
    let all = text(&train);
    assert_eq!(train.status.code(), Some(2), "{all}");
    assert!(all.contains("config::out-of-memory"), "{all}");
    assert!(all.contains("2 rank(s) here"), "{all}");
    assert!(all.contains("of replay buffer a rank"), "{all}");
    assert!(!run_dir.exists(), "train created its run directory");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_step_limit_below_one_update_is_said_and_the_update_runs_whole_and_play_writes_through_devices()
{
    let dir = scratch("short");
    let run_dir = dir.join("run");
    let out = tandem(&[
        "train",
        &cartpole(),
        "--max-steps",
        "100",
        "--run-dir",
        path(&run_dir),
        "--quiet",
    ]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("config::less-than-one-update"), "{all}");
    assert!(
        all.contains("max-steps 100 is less than one update: the run takes 512 steps"),
        "{all}"
    );
    let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"global_step\": 512"), "{summary}");

    // `--gif` onto device nodes made here with /dev/null's and /dev/full's numbers (never the
    // real ones): the first takes the GIF, the second is full; both stay devices.
    let (null, full) = (dir.join("null"), dir.join("full"));
    for (node, minor) in [(&null, "3"), (&full, "7")] {
        let made = Command::new("mknod")
            .arg(node)
            .args(["c", "1", minor])
            .status()
            .unwrap();
        if !made.success() {
            eprintln!("skipped the device half: mknod needs root");
            return;
        }
    }
    let play = |gif: &Path| {
        tandem(&[
            "play",
            path(&run_dir),
            "--episodes",
            "1",
            "--gif",
            path(gif),
        ])
    };
    let to_null = play(&null);
    assert!(to_null.status.success(), "{}", text(&to_null));
    let to_full = play(&full);
    assert_eq!(to_full.status.code(), Some(1), "{}", text(&to_full));
    assert!(
        text(&to_full).contains("No space left on device"),
        "{}",
        text(&to_full)
    );
    use std::os::unix::fs::FileTypeExt;
    for node in [&null, &full] {
        let kind = std::fs::symlink_metadata(node).unwrap().file_type();
        assert!(kind.is_char_device(), "{} became {kind:?}", node.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_mistakes_exit_2_as_train_help_says_and_create_nothing() {
    let dir = scratch("exit-codes");
    let file = dir.join("neg_lr.kdl");
    std::fs::write(
        &file,
        "experiment \"x\" {\n    env \"cartpole\"\n    algorithm \"ppo\" {\n        lr -0.1\n    }\n}\n",
    )
    .unwrap();
    let help = text(&tandem(&["train", "--help"]));
    assert!(
        help.contains("2    a mistake on the command line or in the config; nothing ran"),
        "{help}"
    );
    let run_dir = dir.join("run");
    let cases = [
        vec![path(&file), "--run-dir", path(&run_dir)],
        vec![
            &cartpole(),
            "--set",
            "noequals",
            "--run-dir",
            path(&run_dir),
        ],
        vec!["--resume", path(&dir)],
    ]
    .map(|args| args.into_iter().map(str::to_string).collect::<Vec<_>>());
    for args in cases {
        let mut all: Vec<&str> = vec!["train"];
        all.extend(args.iter().map(String::as_str));
        let out = tandem(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {}", text(&out));
        assert!(!run_dir.exists(), "{all:?} created the run directory");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What `train` refuses at once, `validate` refuses too, at the line: a CUDA device in a build
/// without CUDA and a gymnasium interpreter that is not there; `validate --set` applies to the
/// file as `train --set` does.
#[test]
fn validate_refuses_what_this_build_and_machine_cannot_run_and_takes_set() {
    let dir = scratch("host");
    let file = dir.join("host.kdl");
    std::fs::write(
        &file,
        "experiment \"h\" {\n    devices \"cuda:0\"\n    env \"gymnasium\" {\n        id \"Pendulum-v1\"\n        python \"/nonexistent/python3\"\n    }\n}\n",
    )
    .unwrap();
    let out = tandem(&["validate", "--format", "json", path(&file)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(String, u64, String)> = report["files"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_string(),
                d["line"].as_u64().unwrap(),
                d["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let built_with_cuda = text(&tandem(&["--version"])).contains("built with CUDA support")
        || text(&tandem(&["--version"])).contains("cuda usable: yes");
    if !built_with_cuda {
        assert!(
            found.contains(&(
                "host::no-cuda".into(),
                2,
                "cuda:0 needs a build with `--features cuda`".into()
            )),
            "{found:?}"
        );
    }
    assert!(
        found.contains(&("host::no-interpreter".into(), 5, "no such file".into())),
        "{found:?}"
    );
    // `--set` fixes both; a `--set` without `=` is a usage error.
    let fixed = tandem(&[
        "validate",
        path(&file),
        "--set",
        "devices=cpu",
        "--set",
        "env.python=sh",
    ]);
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed));
    let usage = tandem(&["validate", path(&file), "--set", "noequals"]);
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Three CPU ranks on the one core this process may use: the launcher says so before they
/// start (the run itself still completes).
#[test]
fn more_cpu_ranks_than_cores_are_warned_about() {
    let dir = scratch("oversubscribed");
    let run_dir = dir.join("run");
    let out = Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_tandem"),
            "train",
            &cartpole(),
        ])
        .args([
            "--set",
            "devices=cpu cpu cpu",
            "--set",
            "env.envs=3",
            "--max-steps",
            "1536",
        ])
        .arg("--quiet")
        .arg("--run-dir")
        .arg(&run_dir)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("taskset runs");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("tandem: warning: 3 CPU ranks on 1 core(s) here"),
        "{all}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run directory or checkpoint that is not there is said so, with its path, by every command
/// that reads one, before anything else is made of it (not "no checkpoint", "not a run
/// directory" or an I/O error).
#[test]
fn a_path_that_does_not_exist_is_said_so() {
    let missing = std::env::temp_dir().join(format!("tandem-no-such-run-{}", std::process::id()));
    let path = missing.to_str().unwrap();
    let cartpole = concat!(env!("CARGO_MANIFEST_DIR"), "/experiments/cartpole.kdl");
    for args in [
        vec!["play", path],
        vec!["play", path, "--checkpoint", "best"],
        vec!["export", path, "--output", "/tmp/tandem-never-written.pt"],
        vec!["train", "--resume", path],
        vec!["train", cartpole, "--resume", path],
        vec!["plot", path],
    ] {
        let out = tandem(&args);
        assert!(!out.status.success(), "{args:?}");
        let said = text(&out);
        assert!(
            said.contains(&format!("{path} does not exist")),
            "{args:?}: {said}"
        );
    }
}

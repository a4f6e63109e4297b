//! What a one-rank run prints, through the built binary: the console keeps to what a user acts
//! on (the rank's device and config, progress at most every few seconds, the result), the
//! rank's log keeps everything, and the progress count ends at the steps the run really takes.

mod common;

use std::time::Duration;

use common::binary::*;

/// Lines of the process setting that belong in the rank's log, not on a one-rank console.
const LOG_ONLY: [&str; 7] = [
    "rank 0 of 1 (local 0 of 1)",
    "GOMP_SPINCOUNT=",
    "threads \"auto\"",
    "job secret",
    "collectives over gloo",
    "joining 1 rank(s)",
    "gradient sync",
];

/// `tandem train experiments/cartpole.kdl` into `dir`, with these `--set`s, not quiet.
fn cartpole(dir: &std::path::Path, sets: &[&str]) -> std::process::Command {
    let mut cmd = tandem();
    cmd.arg("train")
        .arg(format!(
            "{}/experiments/cartpole.kdl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg("--run-dir")
        .arg(dir);
    for set in sets {
        cmd.args(["--set", set]);
    }
    cmd
}

#[test]
fn a_one_rank_console_says_what_a_user_acts_on_and_the_log_keeps_the_rest() {
    // Every update logs (interval 1): 59 updates in about two seconds. Not --quiet.
    let dir = fresh_dir("console-loud");
    let loud = run(
        &mut cartpole(&dir, &["train.max-steps=30000", "log.interval=1"]),
        Duration::from_secs(120),
    );
    let console = text(&loud);
    assert!(loud.status.success(), "{console}");
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    for line in LOG_ONLY {
        assert!(
            !console.contains(line),
            "`{line}` on the console:\n{console}"
        );
        assert!(log.contains(line), "`{line}` not in the rank's log:\n{log}");
    }
    assert!(console.contains("rank 0/1 on cpu"), "{console}");
    // Progress at most every 5 s on the console (this run takes about two), every interval in
    // the log; both count to the 30,208 steps of 59 whole updates, not to 30,000.
    let progress = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("steps/s |"))
            .map(str::to_string)
            .collect()
    };
    let (shown, logged) = (progress(&console), progress(&log));
    assert!(shown.len() <= 2, "{shown:#?}");
    assert!(logged.len() >= 50, "{}", logged.len());
    for line in shown.iter().chain(&logged) {
        assert!(line.contains("/30208 |"), "{line}");
    }
    assert!(
        console.contains("training finished: 30208 steps"),
        "{console}"
    );
}

/// A run of 16 ranks that succeeds ends quietly: no rank's heartbeat is in flight when rank 0's
/// store closes (c10d printed `recvValue failed ... Did the remote server shutdown or crash?`
/// with 14 C++ frames per rank after such a run). libtorch's own warnings are left on here.
#[test]
fn a_successful_run_of_many_ranks_ends_without_c10d_noise() {
    let dir = fresh_dir("many-ranks-quiet");
    let devices = format!("devices={}", ["cpu"; 16].join(" "));
    let mut cmd = cartpole(&dir, &[&devices, "env.envs=16", "train.max-steps=4096"]);
    cmd.env_remove("TORCH_CPP_LOG_LEVEL");
    let out = run(&mut cmd, Duration::from_secs(300));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for noise in ["recvValue failed", "frame #", "Exception raised from"] {
        assert!(!all.contains(noise), "`{noise}` in:\n{all}");
    }
}

/// When rank 0 dies, the survivors' console says which rank was lost, in tandem's words, and
/// not c10d's retries with their C++ frames (libtorch's warnings stay off for workers unless
/// the user sets TORCH_CPP_LOG_LEVEL).
#[test]
fn a_lost_rank_is_reported_without_c10d_frames() {
    let dir = fresh_dir("lost-rank-quiet");
    let mut cmd = long_two_rank_command(&dir, &[]);
    cmd.env_remove("TORCH_CPP_LOG_LEVEL");
    let mut launcher = spawn_with_console(cmd, &dir);
    wait_for_training(&dir);
    let workers = common::children_of(launcher.id());
    common::send_signal(rank_pid(&workers, 0), libc::SIGKILL);
    let status = common::wait_or_kill(&mut launcher, Duration::from_secs(60));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
    let console = console_of(&dir);
    assert!(console.contains("rank 0 failed"), "{console}");
    for noise in ["recvValue failed", "frame #", "Exception raised from"] {
        assert!(!console.contains(noise), "`{noise}` in:\n{console}");
    }
}

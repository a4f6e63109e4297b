//! The launcher's failure handling with real processes and real Gloo: a rank killed, never
//! started, disagreeing, stopped or diverging is named and stops the job; Ctrl-C and SIGTERM
//! finish the update and leave a checkpoint; workers die with their launcher.

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::binary::*;
use common::{alive, children_of, send_signal, wait_for, wait_or_kill};

#[test]
fn a_rank_killed_mid_training_stops_the_job_with_its_name() {
    killing_a_rank_stops_the_job_with_its_name("kill", 1);
}

/// Rank 0 hosts the store every rank rendezvoused through: its death must end the job as
/// promptly, named, with no worker left behind.
#[test]
fn rank_0_killed_mid_training_stops_the_job_with_its_name() {
    killing_a_rank_stops_the_job_with_its_name("kill-0", 0);
}

#[test]
fn ctrl_c_finishes_the_update_and_leaves_a_checkpoint_that_loads() {
    let dir = fresh_dir("sigint");
    let launcher = long_two_rank_run(&dir, &["checkpoint.every=1000000"]);
    let pid = launcher.id();
    wait_for("training to start", Duration::from_secs(60), || {
        std::fs::read_to_string(dir.join("logs/rank-0.log")).is_ok_and(|l| l.contains("step "))
    });
    send_signal(pid, libc::SIGINT);
    let out = wait_with_limit(launcher, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130), "{}", console_of(&dir));
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"interrupted\": true"), "{summary}");
    let play = run(
        tandem().args(["play"]).arg(&dir).args(["--episodes", "1"]),
        Duration::from_secs(60),
    );
    assert!(play.status.success(), "{}", text(&play));
    assert!(text(&play).contains("episode 1: score"), "{}", text(&play));
}

#[test]
fn a_rank_that_never_starts_is_named_at_the_rendezvous_deadline() {
    let dir = fresh_dir("never");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = tandem();
    cmd.arg("train")
        .arg(config("ppo-cartpole.kdl"))
        .arg("--run-dir")
        .arg(&dir)
        .args([
            "--set",
            "devices=cpu cpu",
            "--set",
            "sync.rendezvous-timeout=3.0",
        ])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    let start = Instant::now();
    let out = run(&mut cmd, Duration::from_secs(30));
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    // Without LOCAL_WORLD_SIZE a torchrun-style rank counts one rank a node (docs/distributed.md).
    assert!(
        all.contains("missing: node 1 (ranks 1) never joined"),
        "{all}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3 + 10),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn ranks_started_with_different_configs_are_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = fresh_dir("hash");
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            let mut cmd = tandem();
            cmd.arg("train")
                .arg(config("ppo-cartpole.kdl"))
                .arg("--run-dir")
                .arg(&dir)
                .args([
                    "--set",
                    "devices=cpu cpu",
                    "--set",
                    "sync.rendezvous-timeout=20.0",
                ])
                .args(["--set", &format!("seed={}", 1 + rank)])
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for child in ranks {
        let out = wait_with_limit(child, Duration::from_secs(60));
        let all = text(&out);
        assert!(!out.status.success(), "{all}");
        assert!(all.contains("config-hash differs"), "{all}");
    }
}

/// The second Ctrl-C does not wait for anything: here the ranks' final checkpoint write is held
/// (60 s) by the atomic writer's test seam when it arrives, and the job still ends at once, with
/// exit code 130, no worker left and no checkpoint written.
#[test]
fn a_second_ctrl_c_stops_every_rank_at_once() {
    let dir = fresh_dir("sigint-twice");
    let mut launcher = long_two_rank_run_with_env(
        &dir,
        &["checkpoint.every=1000000"],
        &[(tandem::atomic::HOLD_BEFORE_RENAME_VAR, "ckpt-")],
    );
    let pid = launcher.id();
    wait_for_training(&dir);
    let workers = children_of(pid);
    send_signal(pid, libc::SIGINT);
    wait_for(
        "the final checkpoint write to be held",
        Duration::from_secs(30),
        || held_write(&dir).is_some(),
    );
    let second_at = Instant::now();
    send_signal(pid, libc::SIGINT);
    let status = wait_or_kill(&mut launcher, Duration::from_secs(10));
    let all = console_of(&dir);
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{all}");
    assert!(all.contains("tandem: stopping now"), "{all}");
    for w in workers {
        wait_for("no orphan worker", Duration::from_secs(5), || !alive(w));
    }
    assert!(second_at.elapsed() < Duration::from_secs(10));
    assert!(
        checkpoint_files(&dir, |n| n.starts_with("ckpt-") && n.ends_with(".pt")).is_empty(),
        "a checkpoint was written although the second Ctrl-C came before its rename"
    );
}

/// SIGTERM (what a scheduler or `kill` sends) stops a run as the first Ctrl-C does: the update
/// finishes, a checkpoint that loads is written; the exit code says preemption (75).
#[test]
fn sigterm_finishes_the_update_and_leaves_a_checkpoint_that_loads() {
    sigterm_stops_a_run_with_exit_75_and_a_checkpoint("sigterm", &[]);
}

/// A rank that stops answering (SIGSTOP: alive, its sockets open) is found by the collective
/// timeout of the rank waiting for it, and the launcher's report leads with the silent rank, not
/// with "rank 0 failed".
#[test]
fn a_rank_that_stops_answering_is_named_at_the_collective_timeout() {
    let dir = fresh_dir("sigstop");
    let mut launcher = long_two_rank_run(&dir, &["sync.collective-timeout=3.0"]);
    let pid = launcher.id();
    wait_for("two workers", Duration::from_secs(30), || {
        children_of(pid).len() == 2
    });
    let workers = children_of(pid);
    wait_for_training(&dir);
    let silent = rank_pid(&workers, 1);
    send_signal(silent, libc::SIGSTOP);
    let stopped_at = Instant::now();
    let status = wait_or_kill(&mut launcher, Duration::from_secs(3 + 15));
    let elapsed = stopped_at.elapsed();
    for &w in &workers {
        send_signal(w, libc::SIGKILL);
    }
    let all = console_of(&dir);
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{all}");
    // The launcher's report leads with the rank that stopped answering, not the one that failed
    // waiting for it.
    let first = all
        .lines()
        .find(|l| l.starts_with("tandem: rank"))
        .unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "tandem: rank 1 stopped answering: its process {silent} is stopped"
        )),
        "the report does not lead with the stopped rank 1:\n{all}"
    );
    let report = all
        .lines()
        .find(|l| l.contains("rank 0 failed"))
        .unwrap_or_default();
    assert!(
        report.contains("Timed out waiting 3000ms"),
        "rank 0 did not fail on the collective timeout: {report}\n{all}"
    );
    // Rank 0's own message names whom it lost, from the heartbeats (what a rank on another
    // host, which this launcher cannot see, is named by).
    assert!(
        report.contains("rank 0 failed (exited with code 1): rank 1 (node 0, ")
            && report.contains(&format!("127.0.0.1, pid {silent}) stopped answering")),
        "rank 0's message does not name rank 1: {report}\n{all}"
    );
    assert!(elapsed < Duration::from_secs(3 + 10), "took {elapsed:?}");
}

/// A run whose loss diverges stops on every rank at the same update, each with the divergence as
/// its own error, and writes no checkpoint from that update on. The run trains 4 sound updates
/// (checkpointed), then is resumed with an absurd learning rate, which diverges (NaN) at once.
#[test]
fn a_diverging_run_stops_every_rank_and_writes_no_checkpoint_after() {
    let dir = fresh_dir("diverge");
    let sound = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &[
            "devices=cpu cpu",
            "checkpoint.every=1",
            "checkpoint.keep=1000",
            "train.max-steps=1024",
        ],
        Duration::from_secs(60),
    );
    assert!(sound.status.success(), "{}", text(&sound));
    let mut resume = tandem();
    resume.arg("train").arg("--resume").arg(&dir).args([
        "--allow-config-change",
        "--set",
        "algorithm.lr=1e30",
        "--set",
        "train.max-steps=16384",
        "--quiet",
    ]);
    let out = run(&mut resume, Duration::from_secs(60));
    let all = text(&out);
    assert!(!out.status.success(), "the run did not fail:\n{all}");
    let report = all
        .lines()
        .find(|l| l.starts_with("tandem: rank ") && l.contains(" failed "))
        .unwrap_or_else(|| panic!("no failure report:\n{all}"));
    assert!(report.contains("diverged"), "{report}");
    // "update N: ..." (N counts the updates before, so checkpoint N is the last sound one).
    let update_of = |message: &str| -> u64 {
        let at = message
            .find("update ")
            .unwrap_or_else(|| panic!("no update in {message}"));
        message[at + 7..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let diverged_at = update_of(report);
    assert!(diverged_at >= 4, "{report}");
    for rank in 0..2 {
        let error = std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.error")))
            .unwrap_or_else(|e| panic!("rank {rank} wrote no error ({e}):\n{all}"));
        assert!(
            error.contains("diverged") && update_of(&error) == diverged_at,
            "rank {rank} did not stop by itself at update {diverged_at}: {error}"
        );
    }
    // The resumed run diverged in its first update, after checkpoint 4.
    for c in checkpoint_files(&dir, |n| n.starts_with("ckpt-") && n.ends_with(".pt")) {
        let ckpt = tandem::train::checkpoint::load(&c).unwrap();
        assert!(
            ckpt.update <= 4,
            "{} was written after the divergence at update {diverged_at}",
            c.display()
        );
    }
    let newest = tandem::train::checkpoint::locate(&dir).unwrap();
    let ckpt = tandem::train::checkpoint::load(&newest).unwrap();
    for (name, t) in &ckpt.tensors {
        if t.is_floating_point() {
            assert!(
                bool::try_from(t.isfinite().all()).unwrap(),
                "{}: {name} is not finite",
                newest.display()
            );
        }
    }
}

/// The launcher alone killed (SIGKILL: no handler runs): its workers die with it.
#[test]
fn workers_die_with_a_killed_launcher() {
    let dir = fresh_dir("launcher-killed");
    let mut launcher = long_two_rank_run(&dir, &[]);
    let pid = launcher.id();
    wait_for("two workers", Duration::from_secs(30), || {
        children_of(pid).len() == 2
    });
    let workers = children_of(pid);
    wait_for_training(&dir);
    let _ = launcher.kill();
    let _ = launcher.wait();
    let start = Instant::now();
    while workers.iter().any(|&w| alive(w)) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let orphans: Vec<u32> = workers.iter().copied().filter(|&w| alive(w)).collect();
    for &w in &orphans {
        send_signal(w, libc::SIGKILL);
    }
    assert!(
        orphans.is_empty(),
        "workers {orphans:?} outlived their killed launcher by 5 s"
    );
}

//! Checkpoints and resume through the built binary: another world size, kills during writes,
//! preemption by a scheduler and the same command continuing, config checks on resume, a run
//! directory holding a run, damaged checkpoints, and a resume equal to the uninterrupted run.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::binary::*;
use common::{kill_job, summary_number, wait_for, wait_or_kill};

#[test]
fn a_run_saved_on_two_ranks_resumes_on_one() {
    let dir = fresh_dir("resume");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["devices=cpu cpu", "train.max-steps=8192"],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    let first = summary_number(&dir, "global_step").unwrap();
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir).args([
        "--set",
        "devices=cpu",
        "--set",
        "train.max-steps=16384",
        "--quiet",
    ]);
    let out = run(&mut cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(summary_number(&dir, "world_size"), Some(1.0));
    let second = summary_number(&dir, "global_step").unwrap();
    assert!(second > first && second >= 16384.0, "{first} -> {second}");
    assert!(
        std::fs::read_to_string(dir.join("logs/rank-0.log"))
            .unwrap()
            .contains("resumed from")
    );
}

/// SIGKILL to the launcher and every worker (no handler runs, nothing is flushed).

#[test]
fn a_kill_during_checkpoint_writes_leaves_the_previous_checkpoint_loadable() {
    // Checkpoint after every update, and stop the write of the second checkpoint (update 2)
    // after its temporary file is complete and before the rename (the atomic writer's test
    // seam), then kill the whole job at exactly that moment.
    let dir = fresh_dir("crash");
    let mut cmd = tandem();
    cmd.arg("train")
        .arg(config("ppo-cartpole.kdl"))
        .arg("--run-dir")
        .arg(&dir)
        .args([
            "--set",
            "checkpoint.every=1",
            "--set",
            "checkpoint.keep=3",
            "--quiet",
        ])
        .env(tandem::atomic::HOLD_BEFORE_RENAME_VAR, "ckpt-000000002.pt")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut held = None;
    wait_for(
        "the write of checkpoint 2 to be held",
        Duration::from_secs(60),
        || {
            held = held_write(&dir);
            held.is_some()
        },
    );
    kill_job(&mut child);
    let held = held.unwrap();
    let temporary = PathBuf::from(held.to_string_lossy().trim_end_matches(".held"));
    assert!(
        !dir.join("checkpoints/ckpt-000000002.pt").exists(),
        "checkpoint 2 is visible under its final name although its write never finished"
    );
    assert!(
        temporary.is_file(),
        "the held temporary {} is gone",
        temporary.display()
    );
    let ckpts = checkpoint_files(&dir, |n| n.starts_with("ckpt-") && n.ends_with(".pt"));
    assert!(!ckpts.is_empty());
    for c in &ckpts {
        tandem::train::checkpoint::load(c)
            .unwrap_or_else(|e| panic!("{} does not load: {e:#}", c.display()));
    }
    let newest = tandem::train::checkpoint::locate(&dir).unwrap();
    assert!(tandem::train::checkpoint::load(&newest).is_ok());
    assert_eq!(
        newest.file_name().unwrap(),
        "ckpt-000000001.pt",
        "the newest checkpoint a resume would pick"
    );
    // Resuming picks checkpoint 1, never the temporary, and its next checkpoint clears the
    // killed writer's temporary away.
    let mut resume = tandem();
    resume.arg("train").arg("--resume").arg(&dir).args([
        "--set",
        "train.max-steps=1024",
        "--quiet",
    ]);
    let out = run(&mut resume, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("ckpt-000000001.pt at update 1"),
        "the resume did not start from checkpoint 1:\n{log}"
    );
    assert!(
        !temporary.exists(),
        "the killed writer's temporary {} outlived the resumed run's checkpoints",
        temporary.display()
    );
}

/// Preemption of a simulated Slurm job, one task per device (every rank its own process, with
/// only the `SLURM_*` variables srun gives it): SIGTERM reaches rank 1 only, mid-training; both ranks finish the same update,
/// leave a checkpoint and exit 75. The same command again continues the run, and it ends with
/// the parameters, step and episode count of an uninterrupted run, bit for bit, and one
/// restart counted.
#[test]
fn preempted_slurm_tasks_continue_with_the_same_command_to_the_uninterrupted_result() {
    let max_steps = 16_384;
    let dir = fresh_dir("preempt-external");
    let first = external_attempt(&dir, max_steps, hold_checkpoint_2, |pids| {
        signal_while_checkpoint_2_is_held(&dir, &pids[1..], libc::SIGTERM)
    });
    for (rank, out) in first.iter().enumerate() {
        assert_eq!(out.status.code(), Some(75), "rank {rank}:\n{}", text(out));
    }
    let stopped = summary_number(&dir, "global_step").unwrap();
    assert!(stopped < max_steps as f64, "stopped at {stopped}");
    assert!(
        std::fs::read_to_string(dir.join("summary.json"))
            .unwrap()
            .contains("\"interrupted\": true")
    );
    let newest = tandem::train::checkpoint::locate(&dir).unwrap();
    let saved = tandem::train::checkpoint::load(&newest).unwrap();
    assert_eq!((saved.global_step as f64, saved.restarts), (stopped, 0));

    let second = external_attempt(&dir, max_steps, |_| {}, |_| {});
    for (rank, out) in second.iter().enumerate() {
        assert!(out.status.success(), "rank {rank}:\n{}", text(out));
    }
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains(&format!("resumed (restart 1) from step {stopped}")),
        "{log}"
    );

    let whole = fresh_dir("preempt-whole");
    for (rank, out) in external_attempt(&whole, max_steps, |_| {}, |_| {})
        .iter()
        .enumerate()
    {
        assert!(out.status.success(), "rank {rank}:\n{}", text(out));
    }
    for key in ["global_step", "update", "episodes"] {
        assert_eq!(
            summary_number(&dir, key),
            summary_number(&whole, key),
            "{key} of the preempted run and the uninterrupted one"
        );
    }
    assert_eq!(summary_number(&dir, "restarts"), Some(1.0));
    assert_eq!(summary_number(&whole, "restarts"), Some(0.0));
    assert_eq!(scalar_values(&dir, "run/restarts"), vec![0.0, 1.0]);
    let (a, b) = (final_parameters(&whole), final_parameters(&dir));
    assert!(a.iter().any(|(n, _)| n.starts_with("model.")));
    assert!(
        a == b,
        "the preempted run's parameters differ from the uninterrupted run's"
    );
}

/// Under tandem's own launcher, SIGUSR1 (Slurm's `--signal`) is forwarded to the workers: the
/// job stops after the update with a checkpoint and exit 75, and the same command continues it.
#[test]
fn sigusr1_to_the_launcher_preempts_and_the_same_command_continues() {
    let dir = fresh_dir("preempt-usr1");
    let mut cmd = preemptible(&dir, 8192);
    hold_checkpoint_2(&mut cmd);
    std::fs::create_dir_all(&dir).unwrap();
    let console = std::fs::File::create(dir.join("console.txt")).unwrap();
    let mut launcher = cmd.stdout(Stdio::null()).stderr(console).spawn().unwrap();
    signal_while_checkpoint_2_is_held(&dir, &[launcher.id()], libc::SIGUSR1);
    let status = wait_or_kill(&mut launcher, Duration::from_secs(60));
    let all = console_of(&dir);
    assert_eq!(status.and_then(|s| s.code()), Some(75), "{all}");
    assert!(all.contains("SIGUSR1 received"), "{all}");
    let stopped = summary_number(&dir, "global_step").unwrap();
    assert!(stopped < 8192.0, "stopped at {stopped}");

    let out = run(&mut preemptible(&dir, 8192), Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(summary_number(&dir, "global_step"), Some(8192.0));
    assert_eq!(summary_number(&dir, "restarts"), Some(1.0));
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains(&format!("resumed (restart 1) from step {stopped}")),
        "{log}"
    );
}

/// A resume runs the checkpoint's config: a `--set` or an edited `resolved.kdl` is refused,
/// naming the setting; `--allow-config-change` lets it run and records it. Nothing in the run
/// directory changes until the ranks have loaded their checkpoint, so a refused or failed
/// resume leaves the run resumable.
#[test]
fn a_resume_runs_the_checkpoints_config_and_a_failed_one_leaves_the_run_as_it_was() {
    let dir = fresh_dir("resume-config");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let episodes = summary_number(&dir, "episodes").unwrap();
    let files = |dir: &Path| {
        ["resolved.kdl", "resolved.sha256"].map(|f| std::fs::read(dir.join(f)).unwrap())
    };
    let before = files(&dir);
    let resume = |args: &[&str]| {
        let mut cmd = tandem();
        cmd.arg("train")
            .arg("--resume")
            .arg(&dir)
            .arg("--quiet")
            .args(args);
        run(&mut cmd, Duration::from_secs(60))
    };

    let refused = resume(&["--set", "algorithm.lr=0.1"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let all = text(&refused);
    assert!(all.contains("algorithm.lr: 0.001 -> 0.1"), "{all}");
    assert!(all.contains("--allow-config-change"), "{all}");
    assert_eq!(files(&dir), before);

    let resolved = dir.join("resolved.kdl");
    let original = std::fs::read_to_string(&resolved).unwrap();
    std::fs::write(&resolved, original.replace("lr 0.001", "lr 0.5")).unwrap();
    let refused = resume(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("algorithm.lr: 0.001 -> 0.5"),
        "{}",
        text(&refused)
    );
    std::fs::write(&resolved, &original).unwrap();

    // Allowed, but the checkpoint cannot load into the other network: the run stays as it was.
    let failed = resume(&["--allow-config-change", "--set", "network.hidden=32 32"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    assert!(text(&failed).contains("shape"), "{}", text(&failed));
    assert_eq!(files(&dir), before);
    assert!(!dir.join("config-changes.log").exists());

    // Another world size and a later stop need no flag; both are recorded.
    let out = resume(&["--set", "devices=cpu cpu", "--max-steps", "2048"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        summary_number(&dir, "episodes").unwrap() > episodes,
        "the episode count restarted"
    );
    let changes = std::fs::read_to_string(dir.join("config-changes.log")).unwrap();
    assert!(
        changes.contains("restart 1 at update 4, step 1024"),
        "{changes}"
    );
    assert!(
        changes.contains("devices: \"cpu\" -> \"cpu\" \"cpu\""),
        "{changes}"
    );
    assert!(
        changes.contains("train.max-steps: 1024 -> 2048"),
        "{changes}"
    );
    assert!(
        std::fs::read_to_string(&resolved)
            .unwrap()
            .contains("devices \"cpu\" \"cpu\"")
    );

    let out = resume(&[
        "--allow-config-change",
        "--set",
        "algorithm.lr=0.0005",
        "--max-steps",
        "3072",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let changes = std::fs::read_to_string(dir.join("config-changes.log")).unwrap();
    assert!(
        changes.contains("algorithm.lr: 0.001 -> 0.0005"),
        "{changes}"
    );
    assert_eq!(summary_number(&dir, "restarts"), Some(2.0));
}

/// `--run-dir` on a directory that holds a run is refused before anything is written, naming
/// the ways forward; an empty directory is fine.
#[test]
fn a_new_run_in_a_directory_holding_a_run_is_refused() {
    let dir = fresh_dir("reuse");
    let sets = ["train.max-steps=512"];
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &sets,
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let listing = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        checkpoint_files(dir, |_| true)
            .into_iter()
            .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
            .collect()
    };
    let before = listing(&dir);
    let again = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["train.max-steps=1024", "seed=2"],
        Duration::from_secs(60),
    );
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    let all = text(&again);
    for way in [
        "already holds a run",
        "scalars.jsonl",
        "--resume ",
        "--resume-if-exists",
        "a new --run-dir",
    ] {
        assert!(all.contains(way), "no {way:?} in:\n{all}");
    }
    assert_eq!(listing(&dir), before);
    assert_eq!(
        tandem_summary::reader::event_files(&dir.join("tensorboard"))
            .unwrap()
            .len(),
        1
    );
    let empty = fresh_dir("reuse-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = train(
        &config("ppo-cartpole.kdl"),
        &empty,
        &sets,
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    // An attempt that wrote no checkpoint (a job killed early): --resume-if-exists starts it
    // over with the same config, and refuses another one.
    std::fs::remove_dir_all(empty.join("checkpoints")).unwrap();
    let again = |sets: &[&str]| {
        let mut cmd = tandem();
        cmd.arg("train")
            .arg(config("ppo-cartpole.kdl"))
            .arg("--run-dir")
            .arg(&empty)
            .args(["--resume-if-exists", "--quiet"]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        run(&mut cmd, Duration::from_secs(60))
    };
    let other = again(&["train.max-steps=512", "seed=2"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(
        text(&other).contains("already holds a run"),
        "{}",
        text(&other)
    );
    let over = again(&sets);
    assert!(over.status.success(), "{}", text(&over));
    assert!(text(&over).contains("starting it over"), "{}", text(&over));
    assert_eq!(summary_number(&empty, "restarts"), Some(0.0));
    assert_eq!(
        tandem_summary::reader::event_files(&empty.join("tensorboard"))
            .unwrap()
            .len(),
        1
    );
    // The attempt started over: its scalar lines begin again, once.
    let lines = std::fs::read_to_string(empty.join("scalars.jsonl")).unwrap();
    assert_eq!(lines.matches("\"run/restarts\"").count(), 1, "{lines}");
}

/// Ranks vote on the checkpoint they resume from: here rank 1 reads its own copy of the run, in
/// which only the newest checkpoint is damaged, and both ranks fall back to the one before.
#[test]
fn ranks_agree_on_the_newest_checkpoint_every_rank_can_read() {
    let dir = checkpoints_2_to_4("agree");
    let copy = fresh_dir("agree-copy");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    cut_short(&copy.join("checkpoints/ckpt-000000004.pt"));
    let port = common::free_port();
    let ranks: Vec<Child> = [&dir, &copy]
        .iter()
        .enumerate()
        .map(|(rank, run_dir)| {
            let mut cmd = tandem();
            cmd.arg("train").arg("--resume").arg(run_dir).arg("--quiet");
            as_external_rank(&mut cmd, rank, 2, port);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for (rank, child) in ranks.into_iter().enumerate() {
        let out = wait_with_limit(child, Duration::from_secs(60));
        assert!(out.status.success(), "rank {rank}:\n{}", text(&out));
    }
    let log = |dir: &Path, rank: usize| {
        std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.log"))).unwrap()
    };
    let (zero, one) = (log(&dir, 0), log(&copy, 1));
    assert!(
        zero.contains("ckpt-000000004.pt cannot be read on 1 other rank(s)"),
        "{zero}"
    );
    assert!(one.contains("ckpt-000000004.pt is damaged"), "{one}");
    for log in [&zero, &one] {
        assert!(log.contains("ckpt-000000003.pt at update 3"), "{log}");
    }
}

/// A damaged newest checkpoint is one line naming it (not libtorch's C++ frames), and every
/// rank falls back to the checkpoint before it.
#[test]
fn a_damaged_newest_checkpoint_is_named_in_one_line_and_the_resume_falls_back() {
    let dir = checkpoints_2_to_4("damaged");
    let newest = dir.join("checkpoints/ckpt-000000004.pt");
    cut_short(&newest);
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir).arg("--quiet");
    let out = run(&mut cmd, Duration::from_secs(60));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let named = format!("{} is damaged", newest.display());
    assert!(all.lines().any(|l| l.contains(&named)), "{all}");
    for rank in 0..2 {
        let log = std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.log"))).unwrap();
        assert!(
            !log.contains("frame #") && !all.contains("frame #"),
            "{log}"
        );
        assert!(
            log.contains(&named) && log.contains("falling back"),
            "rank {rank}:\n{log}"
        );
        assert!(
            log.contains("ckpt-000000003.pt at update 3"),
            "rank {rank}:\n{log}"
        );
    }
    assert_eq!(summary_number(&dir, "global_step"), Some(1024.0));
    // The timing fields measure the attempt: one update of 256 steps, from update 3.
    assert_eq!(summary_number(&dir, "attempt_steps"), Some(256.0));
    // Set aside, out of the rotation: the checkpoints kept are three that load.
    let aside = dir.join("checkpoints/ckpt-000000004.pt.damaged");
    assert!(aside.exists(), "{all}");
    assert!(
        all.contains(&format!("set {} aside as", newest.display())),
        "{all}"
    );
    let kept = tandem::train::checkpoint::newest_first(&dir).unwrap();
    assert_eq!(kept.len(), 3, "{kept:?}");
    for file in &kept {
        tandem::train::checkpoint::load(file).unwrap_or_else(|e| panic!("{e:#}"));
    }
}

#[test]
fn a_resumed_run_ends_with_the_parameters_of_an_uninterrupted_one() {
    // Same world size: the model, optimizer, normalisers and every rank's environments
    // (mid-episode) are restored, and all randomness is derived from counters. Also with the
    // double-buffered rollout (train.env-groups 2), whose draws follow the same counters, and
    // with pipelined sampling, whose checkpoint keeps the batch collected for the next update.
    for groups in [
        "train.env-groups=1",
        "train.env-groups=2",
        "train.sampling=pipelined",
    ] {
        let sets = ["devices=cpu cpu", "checkpoint.every=1000000", groups];
        let whole = fresh_dir("resume-whole");
        let mut all = sets.to_vec();
        all.push("train.max-steps=16384");
        let out = train(
            &config("ppo-cartpole.kdl"),
            &whole,
            &all,
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{}", text(&out));

        let parts = fresh_dir("resume-parts");
        let mut first = sets.to_vec();
        first.push("train.max-steps=8192");
        let out = train(
            &config("ppo-cartpole.kdl"),
            &parts,
            &first,
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            parts
                .join("checkpoints/ckpt-000000032.rank-1.envs")
                .exists()
        );
        assert_eq!(
            parts.join("checkpoints/inflight-rank1.bin").exists(),
            groups.contains("pipelined"),
            "with {groups}"
        );
        let mut cmd = tandem();
        cmd.arg("train").arg("--resume").arg(&parts).args([
            "--set",
            "train.max-steps=16384",
            "--quiet",
        ]);
        let out = run(&mut cmd, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));

        assert_eq!(
            summary_number(&parts, "global_step"),
            summary_number(&whole, "global_step")
        );
        let (a, b) = (final_parameters(&whole), final_parameters(&parts));
        assert!(a.iter().any(|(n, _)| n.starts_with("model.")));
        assert_eq!(
            a, b,
            "with {groups}, the resumed run's parameters differ from the uninterrupted run's"
        );
        // scalars.jsonl tells the same episodes, step by step, across the resume.
        let (a, b) = (episode_lines(&whole), episode_lines(&parts));
        assert!(a.len() > 20 && a.last().unwrap().0 > 8192, "{a:?}");
        assert_eq!(
            a, b,
            "with {groups}, the resumed run's scalar lines differ from the uninterrupted run's"
        );
    }
}

/// The episodes of `run_dir/scalars.jsonl`: each line's step and its `episode/score_*` and
/// `episode/length_mean` (an interval's line, with the recent mean, falls where the run's last
/// update does, so a run stopped early has one more).
fn episode_lines(run_dir: &Path) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(run_dir.join("scalars.jsonl")).unwrap();
    text.lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let episodes: Vec<String> = v
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| k.starts_with("episode/score_") || *k == "episode/length_mean")
                .map(|(k, x)| format!("{k}={x}"))
                .collect();
            (!episodes.is_empty()).then(|| (v["step"].as_u64().unwrap(), episodes.join(" ")))
        })
        .collect()
}

/// `play` and `export` of a run directory whose newest checkpoint is damaged use the one before
/// it, as `--resume` does, and say so; a checkpoint named (`--checkpoint 4`) is refused as it is.
#[test]
fn play_and_export_fall_back_from_a_damaged_newest_checkpoint() {
    let dir = checkpoints_2_to_4("damaged-play");
    let newest = dir.join("checkpoints/ckpt-000000004.pt");
    cut_short(&newest);
    let named = format!("{} is damaged", newest.display());
    let before = dir.join("checkpoints/ckpt-000000003.pt");
    let mut cmd = tandem();
    cmd.arg("play").arg(&dir).args(["--episodes", "1"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains(&format!("play: checkpoint {named}"))
            && all.contains(&format!("trying {} instead", before.display())),
        "{all}"
    );
    let module = dir.join("policy.pt");
    let mut cmd = tandem();
    cmd.arg("export").arg(&dir).arg("-o").arg(&module);
    let out = run(&mut cmd, Duration::from_secs(60));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains(&format!("from {}", before.display())), "{all}");
    let mut cmd = tandem();
    cmd.arg("play")
        .arg(&dir)
        .args(["--episodes", "1", "--checkpoint", "4"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains(&named) && !all.contains("instead"), "{all}");
}

/// Environment snapshots whose checkpoint was never written (the ranks write theirs before rank
/// 0 writes the checkpoint: a full disk or a kill between the two) are removed when the run is
/// resumed, which continues from the checkpoint before them.
#[test]
fn snapshots_without_their_checkpoint_are_removed_by_a_resume() {
    let dir = checkpoints_2_to_4("orphans");
    let checkpoints = dir.join("checkpoints");
    std::fs::remove_file(checkpoints.join("ckpt-000000004.pt")).unwrap();
    let orphans: Vec<_> = (0..2)
        .map(|rank| checkpoints.join(format!("ckpt-000000004.rank-{rank}.envs")))
        .collect();
    assert!(orphans.iter().all(|o| o.exists()));
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir).arg("--quiet");
    let out = run(&mut cmd, Duration::from_secs(60));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for orphan in &orphans {
        assert!(
            all.contains(&format!(
                "removed {}, an environment snapshot whose checkpoint was never written",
                orphan.display()
            )),
            "{all}"
        );
    }
    // Update 4 again, from update 3's checkpoint: its checkpoint and snapshots written whole.
    assert_eq!(summary_number(&dir, "global_step"), Some(1024.0));
    assert!(checkpoints.join("ckpt-000000004.pt").exists());
}

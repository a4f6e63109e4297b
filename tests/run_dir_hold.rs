//! A run directory holds one run at a time, with real launchers: a second launcher and a
//! `--resume` are refused while a run holds it, the hold ends with its holder however it ends
//! (SIGKILL included), links planted inside a run directory are refused rather than written
//! through, and a `--run-dir` that is a dangling link is named as one.

mod common;

use std::path::Path;
use std::time::Duration;

use common::binary::*;
use common::kill_job;

fn event_files(dir: &Path) -> usize {
    tandem_summary::reader::event_files(&dir.join("tensorboard"))
        .unwrap_or_default()
        .len()
}

#[test]
fn a_second_launcher_and_a_resume_are_refused_while_a_run_holds_its_directory() {
    let dir = fresh_dir("hold");
    let mut first = long_two_rank_run(&dir, &["checkpoint.every=1"]);
    wait_for_training(&dir);
    let cartpole = config("ppo-cartpole.kdl");
    let second = train(
        &cartpole,
        &dir,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    let resume = run(
        tandem().args(["train", "--quiet", "--resume"]).arg(&dir),
        Duration::from_secs(60),
    );
    for (what, out) in [("a second launcher", &second), ("a resume", &resume)] {
        let all = text(out);
        assert_eq!(out.status.code(), Some(2), "{what}: {all}");
        let holder = format!("is in use by another tandem (pid {}: ", first.id());
        assert!(all.contains(&holder), "{what}: {all}");
    }
    assert_eq!(event_files(&dir), 1, "the refused launchers wrote nothing");
    // The kernel ends the hold with its holder: after SIGKILL the lock file stays, holding
    // nothing, and the run resumes from its last checkpoint.
    kill_job(&mut first);
    assert!(dir.join(".tandem-lock").exists());
    let step = |log: &str| -> u64 {
        log.lines()
            .rev()
            .find_map(|l| {
                l.split("step ")
                    .nth(1)?
                    .split(['/', ' '])
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    let done = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    let more = format!("{}", step(&done) + 2048);
    let resumed = run(
        tandem()
            .args(["train", "--quiet", "--max-steps", &more, "--resume"])
            .arg(&dir),
        Duration::from_secs(120),
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A finished short run in `dir`.
fn finished_run(dir: &Path) {
    let out = train(
        &config("ppo-cartpole.kdl"),
        dir,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn links_planted_in_a_run_directory_are_refused_and_nothing_is_written_through_them() {
    let elsewhere = fresh_dir("planted-target");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for (name, planted) in [("summary", "summary.json"), ("logs", "logs")] {
        let dir = fresh_dir(&format!("planted-{name}"));
        finished_run(&dir);
        let path = dir.join(planted);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        let target = elsewhere.join(planted);
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let out = run(
            tandem()
                .args(["train", "--quiet", "--max-steps", "4096", "--resume"])
                .arg(&dir),
            Duration::from_secs(60),
        );
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{planted}: {all}");
        assert!(
            all.contains(&format!(
                "{} is a symbolic link (to {})",
                path.display(),
                target.display()
            )),
            "{planted}: {all}"
        );
        assert!(!target.exists(), "{planted}: written through the link");
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&elsewhere);
}

#[test]
fn a_run_dir_that_is_a_dangling_link_is_named_as_one() {
    let base = fresh_dir("dangling");
    std::fs::create_dir_all(&base).unwrap();
    let link = base.join("run");
    let target = base.join("gone");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = train(
        &config("ppo-cartpole.kdl"),
        &link,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!(
            "{} is a symbolic link to {}, which does not exist",
            link.display(),
            target.display()
        )),
        "{all}"
    );
    assert!(!target.exists());
    let _ = std::fs::remove_dir_all(&base);
}

/// A `--run-dir` that is a regular file, and a link planted where the lock file goes, are the
/// user's mistakes: each refused with exit 2 and the path named (they were exit 1 with a bare
/// "File exists" and "Too many levels of symbolic links").
#[test]
fn a_run_dir_that_is_a_file_and_a_link_at_the_lock_are_refused_with_exit_2() {
    let base = fresh_dir("not-a-dir");
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let cartpole = config("ppo-cartpole.kdl");
    let out = train(
        &cartpole,
        &file,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!("{} is a file, not a directory", file.display())),
        "{all}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let dir = base.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join(".tandem-lock");
    std::os::unix::fs::symlink(&file, &lock).unwrap();
    let out = train(
        &cartpole,
        &dir,
        &["train.max-steps=1024"],
        Duration::from_secs(60),
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!(
            "{} is a symbolic link (to {})",
            lock.display(),
            file.display()
        )),
        "{all}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let _ = std::fs::remove_dir_all(&base);
}

/// Two launchers started together into one directory: exactly one runs, every time.
#[test]
fn two_launchers_started_together_never_both_run() {
    for trial in 0..4 {
        let dir = fresh_dir(&format!("race-{trial}"));
        let start = || {
            tandem()
                .args(["train", "--quiet", "--max-steps", "1024", "--run-dir"])
                .arg(&dir)
                .arg(config("ppo-cartpole.kdl"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start(), start());
        let codes: Vec<Option<i32>> = [a, b]
            .into_iter()
            .map(|c| wait_with_limit(c, Duration::from_secs(60)).status.code())
            .collect();
        let mut sorted = codes.clone();
        sorted.sort();
        assert_eq!(sorted, vec![Some(0), Some(2)], "trial {trial}: {codes:?}");
        assert_eq!(event_files(&dir), 1, "trial {trial}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

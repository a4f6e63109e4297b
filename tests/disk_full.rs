//! A full disk during a run, on a real full file system (a 2 MiB tmpfs mounted for the test;
//! CI runs as root): the run names the file and "No space left on device", exits 1 without an
//! abort, and the checkpoints written before are kept and still resume.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::binary::*;

/// A tmpfs of 2 MiB mounted at a fresh directory, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    /// `None` (the tools rule: a failure where tools are required, else a note) where this
    /// process may not mount.
    fn mount(name: &str) -> Option<SmallDisk> {
        let at = fresh_dir(name);
        std::fs::create_dir_all(&at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2M", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            common::tools::tool_missing(
                "root (to mount a tmpfs)",
                "the disk-full tests",
                "run the tests as root, as CI does",
            );
            return None;
        }
        Some(SmallDisk { at })
    }

    /// Fills the disk until `free` KiB are left.
    fn leave_free(&self, free_kib: u64) {
        let _ = std::fs::remove_file(self.at.join("filler"));
        let total_kib = 2048;
        let used: u64 = Command::new("du")
            .args(["-sk"])
            .arg(&self.at)
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let fill = total_kib - used - free_kib;
        std::fs::write(self.at.join("filler"), vec![0u8; (fill * 1024) as usize]).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
        let _ = std::fs::remove_dir_all(&self.at);
    }
}

fn cartpole(run_dir: &Path, sets: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["checkpoint.every=1"];
    all.extend_from_slice(sets);
    let out = train(
        &format!("{}/experiments/cartpole.kdl", env!("CARGO_MANIFEST_DIR")),
        run_dir,
        &all,
        Duration::from_secs(120),
    );
    (out.status.code(), text(&out))
}

fn no_abort(all: &str) {
    for sign in [
        "terminate called",
        "signal 6",
        "c10::Error",
        "unexpected pos",
    ] {
        assert!(!all.contains(sign), "`{sign}` in:\n{all}");
    }
}

#[test]
fn a_checkpoint_that_does_not_fit_names_its_file_and_the_full_disk() {
    let Some(disk) = SmallDisk::mount("disk-full-checkpoint") else {
        return;
    };
    // Room for the config, the logs and the first events, not for a checkpoint (~110 KiB).
    disk.leave_free(56);
    let run_dir = disk.at.join("run");
    let (code, all) = cartpole(&run_dir, &["train.max-steps=20000"]);
    assert_eq!(code, Some(1), "{all}");
    let expected = format!(
        "cannot write {}: No space left on device",
        run_dir.join("checkpoints/ckpt-000000001.pt").display()
    );
    assert!(all.contains(&expected), "{all}");
    no_abort(&all);
    // The checkpoint and its environment snapshot are written as one: the snapshot written
    // before the checkpoint that did not fit is gone with it.
    let left: Vec<_> = std::fs::read_dir(run_dir.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|f| !f.ends_with(".envs")), "{left:?}");
}

/// Pipelined sampling writes its batch in flight after the checkpoint, through the same in-memory
/// archive: a disk with room for the checkpoint and not for the batch names that file, and does
/// not abort (libtorch's file writer, which wrote it before, throws from a destructor there).
#[test]
fn a_batch_in_flight_that_does_not_fit_names_its_file_without_an_abort() {
    let Some(disk) = SmallDisk::mount("disk-full-in-flight") else {
        return;
    };
    // Before the batch (~33 KiB), the run writes ~30 KiB of config, logs and events and the
    // checkpoint (~120 KiB); one of these margins leaves room for the checkpoint, not the batch.
    let mut batch_named = 0;
    for free_kib in (150..=200).step_by(10) {
        let run_dir = disk.at.join(format!("run-{free_kib}"));
        disk.leave_free(free_kib);
        let (code, all) = cartpole(
            &run_dir,
            &["train.max-steps=20000", "train.sampling=\"pipelined\""],
        );
        assert_eq!(code, Some(1), "{all}");
        no_abort(&all);
        let batch = run_dir.join("checkpoints/inflight-rank0.bin");
        if all.contains(&format!(
            "cannot write {}: No space left on device",
            batch.display()
        )) {
            batch_named += 1;
        }
        std::fs::remove_dir_all(&run_dir).unwrap();
    }
    assert!(
        batch_named > 0,
        "no margin made the batch in flight the file that did not fit"
    );
}

#[test]
fn a_disk_that_fills_keeps_the_checkpoints_written_before_and_they_resume() {
    let Some(disk) = SmallDisk::mount("disk-full-resume") else {
        return;
    };
    let run_dir = disk.at.join("run");
    let (code, all) = cartpole(&run_dir, &["train.max-steps=2048"]);
    assert_eq!(code, Some(0), "{all}");
    let before = tandem::train::checkpoint::newest_first(&run_dir).unwrap();
    assert!(!before.is_empty());
    // The next checkpoint does not fit: the resume fails naming it, and the old ones stay.
    disk.leave_free(40);
    let resume = |steps: &str| {
        run(
            tandem()
                .args(["train", "--quiet", "--max-steps", steps, "--resume"])
                .arg(&run_dir),
            Duration::from_secs(120),
        )
    };
    let full = resume("8192");
    let all = text(&full);
    assert_eq!(full.status.code(), Some(1), "{all}");
    assert!(all.contains("No space left on device"), "{all}");
    no_abort(&all);
    assert_eq!(
        tandem::train::checkpoint::newest_first(&run_dir).unwrap(),
        before
    );
    // With room again, the kept checkpoint resumes.
    std::fs::remove_file(disk.at.join("filler")).unwrap();
    let again = resume("4096");
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
}

#[test]
fn a_disk_full_from_the_start_is_said_even_without_room_for_the_error_file() {
    let Some(disk) = SmallDisk::mount("disk-full-start") else {
        return;
    };
    disk.leave_free(12);
    let run_dir = disk.at.join("run");
    let (code, all) = cartpole(&run_dir, &["train.max-steps=20000"]);
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("No space left on device"), "{all}");
    assert!(
        all.contains("too few for the rank to write its error") || all.contains("cannot write"),
        "{all}"
    );
    no_abort(&all);
}

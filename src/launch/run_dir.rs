//! The run directory's hold: one tandem at a time in a run directory, for the life of the run
//! (and of its resume), and nothing planted in it followed.
//!
//! The hold is an exclusive lock on `RUN_DIR/.tandem-lock` (an open-file-description lock,
//! `F_OFD_SETLK`: like `flock` it belongs to the open file and ends with it, and unlike `flock`
//! another process can ask whether it is held without taking it, [`is_held`]), taken before
//! anything in the directory is looked at or written, so the check for an existing run and the
//! run's first write are one step against any other launcher. The kernel drops the lock when
//! the holder exits however it exits (a crash, SIGKILL), so a stale lock file holds nothing.
//! The file names its holder for the message a second launcher prints.
//!
//! A run directory is tandem's own: a symbolic link inside it (`summary.json -> elsewhere`,
//! `logs -> elsewhere`) would make the run write or append through it, so one is refused. The
//! directory itself may be a link (a run directory on another disk); one whose target does not
//! exist is named as such.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use anyhow::{Context, Result};

use super::UsageError;

/// The lock file's name in a run directory.
pub const LOCK_FILE: &str = ".tandem-lock";

/// Folders of a run directory whose entries tandem writes (checked for links one level down).
const OWN_FOLDERS: [&str; 3] = ["logs", "tensorboard", "checkpoints"];

/// An exclusive hold on a run directory; released when dropped or when the process ends.
#[derive(Debug)]
pub struct Hold {
    _lock: std::fs::File,
}

/// Creates `dir` if needed and takes its hold, refused at once (never waited for) while another
/// process holds it; then refuses links planted inside it.
pub fn hold(dir: &Path) -> Result<Hold> {
    refuse_dangling_link(dir)?;
    if dir.exists() && !dir.is_dir() {
        return Err(UsageError(format!(
            "{} is a file, not a directory: a run directory holds the run's files\nhelp: give \
             --run-dir a directory (a new one is made)",
            dir.display()
        ))
        .into());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    // The lock file is opened without following a link (O_NOFOLLOW); one planted there is
    // refused as any other is, before the open fails on it.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(planted(&path).into());
    }
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut whole = whole_file(libc::F_WRLCK);
    // SAFETY: fcntl(2) on a descriptor `lock` owns and keeps open, with a `flock` record that
    // lives across the call; F_OFD_SETLK returns at once instead of waiting for a holder.
    let taken = unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_OFD_SETLK, &mut whole) } == 0;
    if !taken {
        let error = std::io::Error::last_os_error();
        if !matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
            return Err(error).with_context(|| format!("cannot lock {}", path.display()));
        }
        let mut holder = String::new();
        let _ = lock.read_to_string(&mut holder);
        return Err(in_use(dir, holder.trim()).into());
    }
    name_the_holder(&mut lock).with_context(|| format!("cannot write {}", path.display()))?;
    refuse_planted_links(dir)?;
    Ok(Hold { _lock: lock })
}

/// Whether a process holds `dir` now (asked without taking the hold, so asking never makes the
/// holder's own attempt fail).
pub fn is_held(dir: &Path) -> bool {
    let Ok(lock) = std::fs::File::open(dir.join(LOCK_FILE)) else {
        return false;
    };
    let mut probe = whole_file(libc::F_WRLCK);
    // SAFETY: fcntl(2) on a descriptor `lock` owns; F_OFD_GETLK only fills in `probe`.
    let asked = unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_OFD_GETLK, &mut probe) } == 0;
    asked && probe.l_type != libc::F_UNLCK as libc::c_short
}

/// A lock record covering the whole file, of `kind` (`F_WRLCK`, `F_UNLCK`); OFD locks need
/// `l_pid` 0.
fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers, for which all-zero bytes are valid.
    let mut record: libc::flock = unsafe { std::mem::zeroed() };
    record.l_type = kind as libc::c_short;
    record.l_whence = libc::SEEK_SET as libc::c_short;
    record
}

fn in_use(dir: &Path, holder: &str) -> UsageError {
    let by = if holder.is_empty() {
        "another tandem".to_string()
    } else {
        format!("another tandem ({holder})")
    };
    UsageError(format!(
        "{} is in use by {by}: two runs in one directory would mix their files\nhelp: wait \
         for that run to end (then `tandem train --resume {}` continues it), or give another \
         --run-dir",
        dir.display(),
        dir.display()
    ))
}

/// `pid 4242: tandem train experiments/cartpole.kdl`, for a second launcher's message.
fn name_the_holder(lock: &mut std::fs::File) -> std::io::Result<()> {
    let command: Vec<String> = std::env::args().collect();
    lock.set_len(0)?;
    lock.rewind()?;
    writeln!(lock, "pid {}: {}", std::process::id(), command.join(" "))
}

fn refuse_dangling_link(dir: &Path) -> Result<()> {
    let is_link = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && !dir.exists() {
        let target = std::fs::read_link(dir)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(UsageError(format!(
            "{} is a symbolic link to {target}, which does not exist\nhelp: create {target} \
             (the run directory goes there), or give another --run-dir",
            dir.display()
        ))
        .into());
    }
    Ok(())
}

/// A link among the run directory's entries, or one level down in its own folders.
fn refuse_planted_links(dir: &Path) -> Result<()> {
    let mut places = vec![dir.to_path_buf()];
    places.extend(OWN_FOLDERS.iter().map(|f| dir.join(f)));
    for place in places {
        let Ok(entries) = std::fs::read_dir(&place) else {
            continue;
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", place.display()))?;
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                return Err(planted(&entry.path()).into());
            }
        }
    }
    Ok(())
}

/// The refusal of a symbolic link planted at `path` in a run directory.
fn planted(path: &Path) -> UsageError {
    let target = std::fs::read_link(path)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|_| "?".into());
    UsageError(format!(
        "{} is a symbolic link (to {target}): tandem writes a run directory's files itself and \
         does not write through links planted in one\nhelp: remove the link, or give another \
         --run-dir",
        path.display()
    ))
}

//! Atomic file replacement, the one way tandem writes a file that a reader (a resume, `tandem
//! play`, a script, the launcher) may open at any moment: write a temporary file beside the
//! destination, fsync it, rename it over the destination, fsync the directory. A reader sees the
//! old file or the new one, whole, never a part; a process killed mid-write leaves the old file
//! and a stray temporary that no reader picks up (its name starts with `.` and ends in `.tmp`).
//!
//! Append-only files (TensorBoard events, rank logs) are not written here: each of their records
//! is one whole `write`.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A test seam, read only here: when set to a file-name prefix, a replacement of a file whose
/// name starts with it stops after the temporary file is complete and before the rename, creates
/// `<temporary>.held` to say so, and sleeps until the test removes that marker or [`HOLD_FOR`]
/// has passed, so a test can kill the process at exactly that moment, or act and let it go on.
/// Never set outside tests.
pub const HOLD_BEFORE_RENAME_VAR: &str = "TANDEM_TEST_HOLD_BEFORE_RENAME";
const HOLD_FOR: Duration = Duration::from_secs(60);

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with what `write` puts into the temporary file it is given (a path that does
/// not exist yet, in the same directory). The file appears at `path` complete or not at all.
pub fn replace_with(
    path: &Path,
    write: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let temporary = temporary_path(path)?;
    let result = write(&temporary)
        .and_then(|()| std::fs::File::open(&temporary)?.sync_all())
        .and_then(|()| {
            hold_if_asked(path, &temporary);
            std::fs::rename(&temporary, path)
        });
    if let Err(error) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(std::io::Error::new(
            error.kind(),
            format!("cannot write {}: {error}", path.display()),
        ));
    }
    // Makes the rename durable; failing that weakens only machine-crash safety.
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Replaces `path` with `bytes`, atomically ([`replace_with`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_with(path, |temporary| {
        let mut file = std::fs::File::create_new(temporary)?;
        file.write_all(bytes)
    })
}

/// `.<name>.<pid>.<sequence>.tmp` beside `path`: the process id and a per-process counter keep
/// concurrent writers of one path (other processes, other threads) off each other's file.
fn temporary_path(path: &Path) -> std::io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let mut temporary = OsString::from(".");
    temporary.push(name);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    temporary.push(format!(".{}.{sequence}.tmp", std::process::id()));
    Ok(path.with_file_name(temporary))
}

/// Whether `name` is one of [`replace_with`]'s temporary files (which readers must skip).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

fn hold_if_asked(path: &Path, temporary: &Path) {
    let Some(prefix) = std::env::var_os(HOLD_BEFORE_RENAME_VAR) else {
        return;
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if name.starts_with(&*prefix.to_string_lossy()) {
        let mut marker = temporary.as_os_str().to_owned();
        marker.push(".held");
        let _ = std::fs::write(&marker, b"");
        let start = std::time::Instant::now();
        while start.elapsed() < HOLD_FOR && Path::new(&marker).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_leaves_the_new_bytes_and_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("tandem-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["state.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_removes_its_temporary() {
        let dir = std::env::temp_dir().join(format!("tandem-atomic-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ckpt.pt");
        write_atomic(&path, b"old").unwrap();
        let error = replace_with(&path, |temporary| {
            std::fs::write(temporary, b"partial")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(error.to_string().contains("disk full"), "{error}");
        assert!(error.to_string().contains("ckpt.pt"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temporary_names_are_recognised_and_differ_per_call() {
        let a = temporary_path(Path::new("/x/ckpt-000000001.pt")).unwrap();
        let b = temporary_path(Path::new("/x/ckpt-000000001.pt")).unwrap();
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(is_temporary(name), "{name}");
        assert!(!is_temporary("ckpt-000000001.pt"));
    }
}

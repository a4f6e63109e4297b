//! Atomic file replacement, the one way tandem writes a file that a reader (a resume, `tandem
//! play`, a script, the launcher) may open at any moment: write a temporary file beside the
//! destination, fsync it, rename it over the destination, fsync the directory. A reader sees the
//! old file or the new one, whole, never a part; a process killed mid-write leaves the old file
//! and a stray temporary that no reader picks up (its name starts with `.` and ends in `.tmp`).
//!
//! Append-only files (TensorBoard events, rank logs) are not written here: each of their records
//! is one whole `write`.
//!
//! Only a regular file (or an absent path) is replaced. A symbolic link is followed and its final
//! target replaced, so the link stays a link. Anything else at the destination (a device such as
//! `/dev/null` or `/dev/full`, a FIFO, a socket) is written through by [`write_atomic`], as a
//! shell redirection would: renaming over it would turn a device node into a plain file, and a
//! reader of a FIFO wants the bytes, not a new inode. Writing through such a file cannot be atomic,
//! and its errors (ENOSPC from `/dev/full`) are reported as any other write error.
//! [`replace_with`], whose writer needs a fresh path of its own, refuses such a destination.

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
/// A destination that exists and is not a regular file (after following links) is refused.
pub fn replace_with(
    path: &Path,
    write: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match destination(path)? {
        Destination::Replace(target) => replace_regular(&target, write),
        Destination::WriteThrough(kind) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "cannot write {}: it is {kind}, not a regular file; name a file to write",
                path.display()
            ),
        )),
    }
}

/// Where a write of `path` goes: a regular (or absent) file to replace, the last link target of
/// `path` when it is a symbolic link; or a special file to write through, with its kind in words.
enum Destination {
    Replace(PathBuf),
    WriteThrough(&'static str),
}

/// Most links followed before a chain counts as a loop (Linux's own limit is 40).
const MAX_LINKS: usize = 40;

fn destination(path: &Path) -> std::io::Result<Destination> {
    // Following the links by name first also covers magic links such as /dev/stdout ->
    // /proc/self/fd/1 -> pipe:[123], whose target is no path one could replace.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
        && !meta.is_dir()
    {
        return Ok(Destination::WriteThrough(special_kind(meta.file_type())));
    }
    let mut target = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&target).map_err(|e| cannot_write(path, e))?;
                target = match target.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            // A regular file, a directory (which fails at the rename in the system's own
            // words), or nothing yet: a dangling link creates its target, as `>` would.
            Ok(_) => return Ok(Destination::Replace(target)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Destination::Replace(target));
            }
            Err(e) => return Err(cannot_write(path, e)),
        }
    }
    Err(cannot_write(
        path,
        std::io::Error::other(format!("more than {MAX_LINKS} symbolic links to follow")),
    ))
}

fn special_kind(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

fn cannot_write(path: &Path, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        error.kind(),
        format!("cannot write {}: {error}", path.display()),
    )
}

fn replace_regular(
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
        return Err(cannot_write(path, error));
    }
    // Makes the rename durable; failing that weakens only machine-crash safety.
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Replaces `path` with `bytes`, atomically ([`replace_with`]); writes them through a special
/// file (a device, a FIFO) instead, as the module's doc says.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let write = |temporary: &Path| {
        let mut file = std::fs::File::create_new(temporary)?;
        file.write_all(bytes)
    };
    match destination(path)? {
        Destination::Replace(target) => replace_regular(&target, write),
        Destination::WriteThrough(_) => std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut file| file.write_all(bytes).and_then(|()| file.flush()))
            .map_err(|error| cannot_write(path, error)),
    }
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

    /// A fresh directory of its own under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tandem-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn make_node(path: &Path, args: &[&str]) {
        let status = std::process::Command::new(args[0])
            .arg(path)
            .args(&args[1..])
            .status()
            .unwrap();
        assert!(status.success(), "{args:?} {}", path.display());
    }

    fn is_char_device(path: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::symlink_metadata(path)
            .unwrap()
            .file_type()
            .is_char_device()
    }

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_fifo_is_written_through_and_stays_a_fifo() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("fifo");
        let fifo = dir.join("frames.gif");
        make_node(&fifo, &["mkfifo"]);
        let (sender, received) = std::sync::mpsc::channel();
        {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let read = std::fs::File::open(&fifo).and_then(|mut f| f.read_to_end(&mut bytes));
                let _ = sender.send(read.map(|_| bytes));
            });
        }
        write_atomic(&fifo, b"GIF89a").unwrap();
        // A reader left waiting on a FIFO that nobody wrote fails the test instead of hanging it.
        let bytes = received
            .recv_timeout(Duration::from_secs(20))
            .expect("the FIFO's reader got nothing")
            .unwrap();
        assert_eq!(bytes, b"GIF89a");
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo(), "{kind:?}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_writer_that_needs_its_own_path_refuses_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("fifo-refused");
        let fifo = dir.join("ckpt.pt");
        make_node(&fifo, &["mkfifo"]);
        let error = replace_with(&fifo, |t| std::fs::write(t, b"x")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("it is a FIFO, not a regular file"),
            "{error}"
        );
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Device nodes with /dev/full's and /dev/null's numbers, made in a scratch directory so
    /// that no version of this code can ever replace the real ones.
    #[test]
    fn a_device_is_written_through_and_stays_a_device() {
        if !root() {
            eprintln!("skipped: mknod needs root");
            return;
        }
        let dir = scratch("dev");
        let full = dir.join("full");
        let null = dir.join("null");
        make_node(&full, &["mknod", "c", "1", "7"]);
        make_node(&null, &["mknod", "c", "1", "3"]);
        let error = write_atomic(&full, b"GIF89a").unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::StorageFull, "{error}");
        assert!(error.to_string().contains("cannot write"), "{error}");
        assert!(error.to_string().contains("full"), "{error}");
        write_atomic(&null, b"GIF89a").unwrap();
        assert!(is_char_device(&full) && is_char_device(&null));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symbolic_link_keeps_pointing_at_its_replaced_target() {
        let dir = scratch("link");
        std::fs::create_dir(dir.join("runs")).unwrap();
        let target = dir.join("runs/state.json");
        let link = dir.join("latest.json");
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink("runs/state.json", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link creates its target, as a shell redirection would.
        let dangling = dir.join("next.json");
        std::os::unix::fs::symlink("runs/next.json", &dangling).unwrap();
        write_atomic(&dangling, b"first").unwrap();
        assert!(
            std::fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(dir.join("runs/next.json")).unwrap(), b"first");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Relative file paths in settings are relative to the file that writes them, as includes
//! are, so an experiment runs the same from any directory. A path written in standard input
//! or in `--set` stays as written: relative to the directory tandem runs in, where the
//! interpreter is started. A bare name (`python3`) is a command looked up on `PATH` when it
//! starts, so it is left alone.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use super::Entry;
use crate::diag::SourceId;
use crate::values::Val;

/// The settings that hold a file path.
const FILE_PATHS: &[&str] = &["env.python"];

/// Makes every relative path in [`FILE_PATHS`] absolute, against the folder of the file that
/// wrote it (`folders`, from the loader).
pub(super) fn anchor(entries: &mut BTreeMap<String, Entry>, folders: &HashMap<SourceId, PathBuf>) {
    for setting in FILE_PATHS {
        let Some(entry) = entries.get_mut(*setting) else {
            continue;
        };
        let (Val::Str(written), Some(folder)) = (&entry.val, folders.get(&entry.source)) else {
            continue;
        };
        if is_relative_path(written) {
            entry.val = Val::Str(anchored(folder, written));
        }
    }
}

/// A path with a slash that does not start at the root; what `Command::new` would take as a
/// file relative to the working directory.
fn is_relative_path(written: &str) -> bool {
    written.contains('/') && !written.starts_with('/')
}

/// `written` joined to `folder` made absolute (symbolic links in the folder resolved, so the
/// leading `..` of `written` go up from the real folder). A `..` after a name of `written`
/// is kept: that name may be a link, whose parent only the file system knows.
fn anchored(folder: &Path, written: &str) -> String {
    let named = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let mut out = std::fs::canonicalize(named).unwrap_or_else(|_| named.to_path_buf());
    let mut inside = false;
    for part in Path::new(written).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if !inside => {
                out.pop();
            }
            other => {
                inside = true;
                out.push(other);
            }
        }
    }
    // A folder whose name is not UTF-8 cannot be written in a config: the path stays as
    // written, relative to the directory tandem runs in, as before.
    out.into_os_string()
        .into_string()
        .unwrap_or_else(|_| written.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_paths_with_a_slash_are_anchored() {
        assert!(is_relative_path("venv/bin/python"));
        assert!(is_relative_path("./python"));
        assert!(is_relative_path("../.deps/venv-gym/bin/python"));
        assert!(!is_relative_path("python3"));
        assert!(!is_relative_path("/usr/bin/python3"));
    }

    #[test]
    fn leading_parents_go_up_from_the_folder_and_later_ones_stay() {
        let root = std::fs::canonicalize("/").unwrap();
        let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
        let up = anchored(&tmp, "../a/./b/../python");
        let expected = tmp.parent().unwrap_or(&root).join("a/b/../python");
        assert_eq!(up, expected.to_str().unwrap());
    }
}

//! The worked example of docs/environments.md, run as a user would: the example package
//! (examples/gymnasium-package, installed editable into the gymnasium venv by
//! scripts/gym-venv-setup.sh) registers its own id, and `tandem train` learns it through the
//! gymnasium bridge, importing the package first.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

fn venv_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/venv-gym/bin/python");
    if python.exists() {
        return Some(python);
    }
    common::tools::tool_missing(
        &python.display().to_string(),
        "the gymnasium example package test",
        "run scripts/gym-venv-setup.sh (scripts/setup --test does)",
    );
    None
}

#[test]
fn the_example_package_trains_through_its_own_registered_id() {
    let Some(python) = venv_python() else { return };
    let dir = std::env::temp_dir().join(format!("tandem-corridor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(TANDEM)
        .arg("train")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gymnasium-package/corridor.kdl"))
        .args(["--quiet", "--run-dir"])
        .arg(&dir)
        .args(["--set", &format!("env.python=\"{}\"", python.display())])
        .output()
        .expect("tandem runs");
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{console}");
    // Going right from a start in the left half pays about 0.955 on average; a policy that
    // has not learnt to go right walks about and pays less than 0.5.
    let last20 = common::summary_number(&dir, "last_20_return_mean").unwrap();
    assert!(last20 >= 0.9, "last-20 mean return {last20}");
    let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("`tandem_corridor/Corridor-v0`, 2 worker(s) running ")
            && log.contains("venv-gym/bin/python"),
        "the rank log does not name the interpreter:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

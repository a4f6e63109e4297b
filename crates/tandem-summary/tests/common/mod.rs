//! Helpers shared by the integration tests: scratch directories and running
//! TensorBoard's own reader (scripts/tb-read.py) on a log directory.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../../tests/common/tools.rs"]
mod tools;

/// A fresh, empty directory under Cargo's per-target scratch space.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tandem-summary")
        .join(format!("{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn repo_root() -> PathBuf {
    // crates/tandem-summary -> the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate lies two levels below the workspace root")
        .to_path_buf()
}

/// TensorBoard's reading of `log_dir` as printed by scripts/tb-read.py, or
/// `None` when the venv from scripts/tb-read-setup.sh is missing. Fails
/// instead when `TANDEM_REQUIRE_PYTHON_TOOLS=1`, so CI cannot skip silently (the rule,
/// shared with the workspace's tests, is the root's `tests/common/tools.rs`).
pub fn tensorboard_reading(log_dir: &Path) -> Option<serde_json::Value> {
    let root = repo_root();
    let python = root.join(".deps/venv-tb/bin/python");
    if !python.exists() {
        tools::tool_missing(
            &python.display().to_string(),
            "TensorBoard's reading (checking in Rust only)",
            "run scripts/tb-read-setup.sh",
        );
        return None;
    }
    let output = Command::new(&python)
        .arg(root.join("scripts/tb-read.py"))
        .arg(log_dir)
        .output()
        .expect("running scripts/tb-read.py");
    assert!(
        output.status.success(),
        "tb-read.py failed on {}: {}",
        log_dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).expect("tb-read.py prints JSON"))
}

/// The only event file in `log_dir`.
pub fn only_event_file(log_dir: &Path) -> PathBuf {
    let files = tandem_summary::reader::event_files(log_dir).unwrap();
    assert_eq!(
        files.len(),
        1,
        "expected one event file in {}",
        log_dir.display()
    );
    files.into_iter().next().unwrap()
}

pub fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Decodes a PNG into (width, height, channels, pixels).
pub fn decode_png(bytes: &[u8]) -> (u32, u32, usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    pixels.truncate(info.buffer_size());
    (info.width, info.height, info.color_type.samples(), pixels)
}

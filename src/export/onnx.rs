//! The ONNX export: the checked TorchScript module converted into one ONNX graph and checked
//! again by `onnx.py` (beside this file) in the Python the user names.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{ExportArgs, Exported};

/// The converter, run with `python -c`.
const SCRIPT: &str = include_str!("onnx.py");

/// ONNX's operator set the graph is written in (onnxruntime 1.16 and newer run it).
const OPSET: u32 = 17;

/// Where a stage of the conversion (`what`) waits: beside the output, hidden.
pub(super) fn scratch_path(output: &Path, what: &str) -> PathBuf {
    let name = output
        .file_name()
        .map_or_else(|| "policy".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.{what}-{}", std::process::id()))
}

/// Converts `traced` into `args.output` and returns what wrote and checked it, in words.
/// The graph is written aside and moved under the name once checked: a failure leaves no
/// file there.
pub(super) fn convert(exported: &Exported, traced: &Path, args: &ExportArgs) -> Result<String> {
    let written = scratch_path(&args.output, "onnx");
    let spec = serde_json::json!({
        "torchscript": traced,
        "onnx": written,
        "obs_shape": exported.obs_shape,
        "state_width": exported.policy.state_width(),
        "methods": exported.onnx_outputs()?,
        "opset": OPSET,
    });
    let reply = run_python(&args.python, &spec).and_then(|reply| {
        crate::atomic::replace_with(&args.output, |partial| std::fs::rename(&written, partial))
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        Ok(reply)
    });
    let _ = std::fs::remove_file(&written);
    let reply = reply?;
    let version = |k: &str| reply[k].as_str().unwrap_or("?").to_string();
    Ok(format!(
        "ONNX opset {OPSET} by torch {}, checked by onnxruntime {}",
        version("torch"),
        version("onnxruntime")
    ))
}

fn run_python(python: &Path, spec: &serde_json::Value) -> Result<serde_json::Value> {
    let out = match Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(spec.to_string())
        .output()
    {
        Ok(out) => out,
        Err(e) => crate::usage::mistake!(
            "--python {}: cannot run it ({e}); the ONNX export needs a Python with torch \
             (2.13 or newer), onnx and onnxruntime",
            python.display()
        ),
    };
    // A Python failure's traceback ends with what went wrong.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.trim().lines().collect();
    let said = lines[lines.len().saturating_sub(6)..].join("\n");
    match out.status.code() {
        Some(0) => serde_json::from_slice(&out.stdout)
            .with_context(|| format!("the ONNX converter's reply: {said}")),
        Some(3) => crate::usage::mistake!("{said}"),
        _ => bail!("the ONNX conversion failed: {said}"),
    }
}

//! `scripts/device-check`, the one call a session with a lent GPU makes (issue 41), run here in
//! its dry-run form: the same sequence of steps with this test's `tandem`, `cpu` standing in for
//! `cuda:0` and fewer steps. The GPU machine is lent rarely and briefly, so a setting the script
//! names that no longer exists, or a check of a run's output that no longer holds, must fail
//! here and not on the device.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::binary::{TANDEM, fresh_dir, run, text, without_job_environment};

/// Every step of the dry run's table: the issue-20 checks and the learners of issue 41.
const STEPS: [&str; 10] = [
    "version",
    "collectives-1rank",
    "collectives-2ranks-gloo",
    "sac-cpu",
    "td3-cpu",
    "lstm-cpu",
    "free-cpu",
    "breakout-cpu-8",
    "breakout-cpu-64",
    "update-cpu",
];

#[test]
fn the_device_check_runs_every_step_on_the_cpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = fresh_dir("device-check");
    // TensorBoard's venv reads the phase times when it is there; without it the table is
    // written without them (the script's own fallback), which is all this test reads.
    let venv = root.join(".deps/venv-tb/bin/python");
    let python = if venv.exists() {
        venv.display().to_string()
    } else {
        "python3".into()
    };
    let mut script = Command::new("bash");
    without_job_environment(&mut script)
        .arg(root.join("scripts/device-check"))
        .arg("--dry-run")
        .env("TANDEM_BIN", TANDEM)
        .env("OUT", &out)
        .env("TB_PYTHON", python);
    let done = run(&mut script, Duration::from_secs(600));
    let log = std::fs::read_to_string(out.join("device-check.log")).unwrap_or_default();
    assert!(
        done.status.success(),
        "the dry run failed:\n{}\n--- device-check.log ---\n{log}",
        text(&done)
    );
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    for step in STEPS {
        assert!(
            table.contains(&format!("| {step} | ok |")),
            "step {step} is not ok in results.md:\n{table}"
        );
    }
    assert!(out.join("runs.tar.gz").is_file(), "no archive of the runs");

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    for run in ["sac-cpu", "td3-cpu"] {
        let summary = &results["runs"][run]["summary"];
        assert!(
            summary["eval_score_mean"].is_f64(),
            "{run} evaluated nothing: {summary}"
        );
    }
    let free = &results["runs"]["free-cpu"]["summary"];
    assert_eq!(free["global_step"], 1024, "free sampling's run: {free}");
    let _ = std::fs::remove_dir_all(&out);
}

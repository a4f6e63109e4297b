//! tandem's Python package (python/), installed by pip into a folder of its own and imported by
//! the torch venv's Python: `tandem.train` trains CartPole and returns the run (its summary and
//! scalars), `tandem.load(run).predict` gives exactly tandem's greedy actions (`tandem play
//! --greedy`'s) on 200 observations of the environment, one at a time and as a batch,
//! `tandem.validate` returns the diagnostics, a mistake raises `TandemError` with exit status 2;
//! and examples/optuna/cartpole_search.py runs its 10 trials.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::binary::*;
use common::greedy::{
    OBSERVATIONS, numbers, play_greedily, python_json, python_stdout, torch_python,
};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `pip install`s python/ once for this test binary into a folder of its own (no
/// dependencies: the venv has numpy, torch, pandas and optuna) and returns that folder, for
/// PYTHONPATH. Once: pip builds in python/ itself, and two builds at a time would share it.
fn installed(python: &Path) -> &'static Path {
    static SITE: OnceLock<PathBuf> = OnceLock::new();
    SITE.get_or_init(|| {
        let site = fresh_dir("python-package-site");
        let out = Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
            ])
            .arg("--target")
            .arg(&site)
            .arg(root().join("python"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pip: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(site.join("tandem/__init__.py").exists());
        site
    })
}

/// Runs `script` (its arguments after it) with the package importable and the binary named.
fn package_json(python: &Path, site: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    let envs = [
        ("PYTHONPATH", site.as_os_str()),
        ("TANDEM_BIN", OsStr::new(env!("CARGO_BIN_EXE_tandem"))),
        ("TORCH_CPP_LOG_LEVEL", OsStr::new("ERROR")),
    ];
    python_json(python, script, args, &envs)
}

const TRAIN: &str = r#"
import json, sys
import tandem
run = tandem.train(sys.argv[1], run_dir=sys.argv[2], seed=2, train__total_steps=20480)
scalars = run.scalars
valid = tandem.validate(sys.argv[1], network__hidden=[32, 32])
wrong = tandem.validate('experiment "x" {\n    env "cartpole"\n    algorithm "ppo" { lr "fast" }\n}\n')
try:
    tandem.train(sys.argv[1], algorithm__nope=1)
    status = 0
except tandem.TandemError as e:
    status = e.status
print(json.dumps({
    "final_score": run.final_score,
    "global_step": run.summary["global_step"],
    "scalar_steps": len(scalars),
    "has_loss": "loss/policy" in scalars.columns,
    "valid": valid.valid,
    "wrong": [d["message"] for d in wrong.diagnostics],
    "wrong_line": wrong.diagnostics[0]["line"],
    "status": status,
}))
"#;

const PREDICT: &str = r#"
import json, sys
import numpy as np
import tandem
policy = tandem.load(sys.argv[1])
obs = np.fromfile(sys.argv[2], dtype=np.float32).reshape(int(sys.argv[3]), *policy.obs_shape)
one_at_a_time = [int(policy.predict(o)[0]) for o in obs]
batch, state = policy.predict(obs)
print(json.dumps({"one": one_at_a_time, "batch": batch.tolist(), "state": state, "shape": policy.obs_shape}))
"#;

#[test]
fn the_package_trains_predicts_as_tandem_plays_and_validates() {
    let Some(python) = torch_python() else {
        return;
    };
    let dir = fresh_dir("python-package");
    std::fs::create_dir_all(&dir).unwrap();
    let site = installed(&python);
    let run_dir = dir.join("run");
    let cartpole = root().join("experiments/cartpole.kdl");
    let trained = package_json(
        &python,
        site,
        TRAIN,
        &[cartpole.to_str().unwrap(), run_dir.to_str().unwrap()],
    );
    assert_eq!(trained["global_step"], 20480, "{trained}");
    assert!(trained["final_score"].as_f64().unwrap() > 25.0, "{trained}");
    assert!(trained["scalar_steps"].as_u64().unwrap() >= 10, "{trained}");
    assert_eq!(trained["has_loss"], true, "{trained}");
    assert_eq!(trained["valid"], true, "{trained}");
    assert_eq!(
        trained["wrong"][0], "wrong type for `algorithm.lr`",
        "{trained}"
    );
    assert_eq!(trained["wrong_line"], 3, "{trained}");
    assert_eq!(trained["status"], 2, "{trained}");

    let played = play_greedily(&run_dir);
    let obs_file = dir.join("obs.f32");
    let bytes: Vec<u8> = played.obs.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&obs_file, bytes).unwrap();
    let count = OBSERVATIONS.to_string();
    let predicted = package_json(
        &python,
        site,
        PREDICT,
        &[
            run_dir.to_str().unwrap(),
            obs_file.to_str().unwrap(),
            &count,
        ],
    );
    assert_eq!(numbers(&predicted["one"]), played.actions, "one at a time");
    assert_eq!(numbers(&predicted["batch"]), played.actions, "a batch");
    assert!(predicted["state"].is_null(), "{predicted}");
    assert_eq!(predicted["shape"], serde_json::json!([4]));
    assert!(
        played.actions.contains(&0.0) && played.actions.contains(&1.0),
        "the policy should push both ways"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// examples/optuna/cartpole_search.py: 10 trials, each a short tandem run, and the best.
#[test]
fn the_optuna_example_runs_its_ten_trials() {
    let Some(python) = torch_python() else {
        return;
    };
    let dir = fresh_dir("python-optuna");
    std::fs::create_dir_all(&dir).unwrap();
    let site = installed(&python);
    let example = root().join("examples/optuna/cartpole_search.py");
    let runs = dir.join("runs");
    let args: Vec<&OsStr> = vec![
        example.as_os_str(),
        "--trials".as_ref(),
        "10".as_ref(),
        "--steps".as_ref(),
        "8192".as_ref(),
        "--runs".as_ref(),
        runs.as_os_str(),
    ];
    let envs = [
        ("PYTHONPATH", site.as_os_str()),
        ("TANDEM_BIN", OsStr::new(env!("CARGO_BIN_EXE_tandem"))),
    ];
    let said = python_stdout(&python, &args, &envs);
    let trials = said.lines().filter(|l| l.starts_with("trial ")).count();
    assert_eq!(trials, 10, "{said}");
    assert!(
        said.lines().last().unwrap().starts_with("best: trial "),
        "{said}"
    );
    assert_eq!(std::fs::read_dir(dir.join("runs")).unwrap().count(), 10);
    let _ = std::fs::remove_dir_all(&dir);
}

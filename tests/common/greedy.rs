//! tandem's own greedy actions on a run's environment, as `tandem play --greedy` takes them: what
//! an exported policy (tests/export.rs) or the Python package's `predict`
//! (tests/python_package.rs) must reproduce.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use tandem::algo::actions::ActionKind;
use tandem::algo::storage::host_rows::{host_actions, rows_to_batch};
use tandem::train::{checkpoint, envs};
use tandem_config::Wrapper;
use tandem_env::{BridgeOptions, VecEnv};

/// Steps played.
pub const OBSERVATIONS: usize = 200;

/// What tandem's policy did on [`OBSERVATIONS`] steps: the observations before normalisation,
/// whether each began an episode, and the greedy actions (flattened).
pub struct Played {
    pub obs: Vec<f32>,
    pub obs_shape: Vec<i64>,
    pub starts: Vec<bool>,
    pub actions: Vec<f64>,
    pub discrete: bool,
}

pub fn play_greedily(run_dir: &Path) -> Played {
    let path = checkpoint::locate(run_dir).unwrap();
    let (ckpt, experiment) = checkpoint::open(&path).unwrap();
    let spec = envs::env_spec(&experiment);
    let mut raw_spec = spec.clone();
    raw_spec
        .wrappers
        .retain(|w| !matches!(w, Wrapper::NormalizeObs { .. }));
    let bridge = BridgeOptions {
        log_prefix: String::new(),
        render: false,
    };
    let mut env = VecEnv::with_bridge(&spec, &[7], 1, &bridge).unwrap();
    let mut raw = VecEnv::with_bridge(&raw_spec, &[7], 1, &bridge).unwrap();
    let (mut policy, obs_shape) =
        tandem::play::restored_policy(&experiment, &ckpt, &mut env).unwrap();
    let kind = ActionKind::of(env.action_space());
    env.reset();
    raw.reset();
    let mut played = Played {
        obs: Vec::new(),
        obs_shape: obs_shape.clone(),
        starts: Vec::new(),
        actions: Vec::new(),
        discrete: !env.action_space().is_box(),
    };
    let mut start = true;
    for _ in 0..OBSERVATIONS {
        played.obs.extend_from_slice(raw.obs());
        played.starts.push(start);
        let obs = rows_to_batch(env.obs(), 1, &obs_shape, tch::Device::Cpu);
        let action = tch::no_grad(|| policy.act(&obs, true)).unwrap();
        played.actions.extend(
            Vec::<f64>::try_from(action.to_kind(tch::Kind::Double).flatten(0, -1)).unwrap(),
        );
        let batch = host_actions(&action, kind).unwrap();
        env.step(&batch).unwrap();
        raw.step(&batch).unwrap();
        policy.stepped(&env);
        start = env.terminated()[0] || env.truncated()[0];
    }
    played
}

/// The Python of the torch venv (`scripts/torch-venv-setup.sh`: torch, onnxruntime, pandas,
/// optuna), or `None` (after the tools rule) without it.
pub fn torch_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/venv-torch/bin/python");
    if python.exists() {
        return Some(python);
    }
    super::tools::tool_missing(
        &python.display().to_string(),
        "running exported policies and tandem's Python package",
        "scripts/setup --test (scripts/torch-venv-setup.sh) makes it",
    );
    None
}

/// Runs `python` with `args` (a script's path or `-c` and its text, then its arguments) and
/// the environment `envs` added, and returns what it printed; a failure fails the test with its
/// output.
pub fn python_stdout<A: AsRef<OsStr>>(
    python: &Path,
    args: &[A],
    envs: &[(&str, &OsStr)],
) -> String {
    let mut command = Command::new(python);
    command.args(args);
    for (name, value) in envs {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "python: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// Runs `script` (`python -c`, its arguments `args`, the environment `envs` added) and returns
/// the JSON object its last line printed: the Python side of these comparisons.
pub fn python_json<A: AsRef<OsStr>>(
    python: &Path,
    script: &str,
    args: &[A],
    envs: &[(&str, &OsStr)],
) -> serde_json::Value {
    let mut all: Vec<&OsStr> = vec![OsStr::new("-c"), OsStr::new(script)];
    all.extend(args.iter().map(AsRef::as_ref));
    let said = python_stdout(python, &all, envs);
    let last = said.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {said}"))
}

/// A JSON array of numbers, as f64s.
pub fn numbers(value: &serde_json::Value) -> Vec<f64> {
    (value.as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .collect()
}

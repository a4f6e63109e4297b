//! `tandem export` round trips: a short run of each kind of policy is exported, and the module,
//! loaded in Python by `torch.jit.load`, must give tandem's own greedy actions on 200
//! observations of the environment (exactly for discrete actions, within 1e-5 for boxes),
//! taking them as the environment gives them before the observation normaliser. tandem's
//! actions come from the checkpoint's policy acting as `tandem play --greedy` does; the
//! observations the module reads come from a twin environment without `normalize-obs`, stepped
//! with the same actions. Each is also exported as ONNX (`--format onnx`), whose graph, run by
//! onnxruntime in a Python that never imports torch, must give the same actions (exactly for
//! discrete actions, within 1e-5 for boxes). Also: the module's other methods, the refusals, and
//! the Python example of docs/export.md stepping gymnasium's CartPole.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::binary::*;
use common::greedy::{
    OBSERVATIONS, Played, numbers, play_greedily, python_json, python_stdout, torch_python,
};

/// A shipped experiment by its file name in experiments/, or by its path from the repository's
/// root.
fn experiment(name: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    if name.contains('/') {
        format!("{root}/{name}")
    } else {
        format!("{root}/experiments/{name}")
    }
}

/// A short run of `file` with `sets`, exported to `<run>/policy.pt`.
fn trained_and_exported(name: &str, file: &str, sets: &[&str]) -> PathBuf {
    let dir = fresh_dir(&format!("export-{name}"));
    let out = train(&experiment(file), &dir, sets, Duration::from_secs(600));
    assert!(out.status.success(), "training {file}: {}", text(&out));
    let out = run(
        tandem()
            .arg("export")
            .arg(&dir)
            .arg("-o")
            .arg(dir.join("policy.pt")),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "export of {file}: {}", text(&out));
    assert!(text(&out).contains("wrote "), "{}", text(&out));
    dir
}

/// Runs the exported module in Python on the played observations, one at a time with its state
/// for a recurrent policy (zeros where an episode began), all at once otherwise. Returns its
/// actions (flattened) and what its other methods returned, in words.
fn python_actions(python: &Path, run_dir: &Path, played: &Played) -> (Vec<f64>, String) {
    let obs_file = run_dir.join("obs.f32");
    let bytes: Vec<u8> = played.obs.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&obs_file, bytes).unwrap();
    let mut shape = vec![OBSERVATIONS as i64];
    shape.extend_from_slice(&played.obs_shape);
    let meta = serde_json::json!({"shape": shape, "starts": played.starts});
    let script = r#"
import json, sys, torch
module = torch.jit.load(sys.argv[1])
meta = json.loads(sys.argv[3])
obs = torch.frombuffer(bytearray(open(sys.argv[2], "rb").read()), dtype=torch.float32)
obs = obs.view(meta["shape"])
recurrent = hasattr(module, "initial_state")
named = [n for n in ["logits", "mean", "log_std", "q_values", "value"] if hasattr(module, n)]
if recurrent:
    actions = []
    for t, start in enumerate(meta["starts"]):
        o = obs[t : t + 1]
        if start:
            state = module.initial_state(o)
        outputs = {n: getattr(module, n)(o, state) for n in named}
        actions.append(module(o, state))
        state = module.next_state(o, state)
    actions = torch.cat(actions)
else:
    actions = module(obs)
    outputs = {n: getattr(module, n)(obs) for n in named}
print(json.dumps({
    "actions": actions.double().flatten().tolist(),
    "methods": f"recurrent={recurrent} " + " ".join(f"{n}={list(t.shape)}" for n, t in outputs.items()),
}))
"#;
    let args = [
        run_dir.join("policy.pt").into_os_string(),
        obs_file.into_os_string(),
        meta.to_string().into(),
    ];
    let reply = python_json(python, script, &args, &[]);
    (
        numbers(&reply["actions"]),
        reply["methods"].as_str().unwrap().to_string(),
    )
}

/// Exports `run_dir`'s policy as ONNX by `python`'s torch into `<run>/policy.onnx`, runs the
/// graph with onnxruntime alone (torch kept out of the process) on the played observations, as
/// [`python_actions`] runs the module, and returns its actions and its outputs' names.
fn onnx_actions(python: &Path, run_dir: &Path, played: &Played) -> (Vec<f64>, String) {
    let graph = run_dir.join("policy.onnx");
    let out = run(
        tandem()
            .arg("export")
            .arg(run_dir)
            .arg("-o")
            .arg(&graph)
            .arg("--python")
            .arg(python),
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "ONNX export: {}", text(&out));
    let mut shape = vec![OBSERVATIONS as i64];
    shape.extend_from_slice(&played.obs_shape);
    let meta = serde_json::json!({"shape": shape, "starts": played.starts});
    let script = r#"
import json, sys
sys.modules["torch"] = None  # the graph must run without torch
import numpy as np, onnxruntime
session = onnxruntime.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
meta = json.loads(sys.argv[3])
obs = np.fromfile(sys.argv[2], dtype=np.float32).reshape(meta["shape"])
names = [o.name for o in session.get_outputs()]
inputs = [i.name for i in session.get_inputs()]
if "state" in inputs:
    width = session.get_inputs()[1].shape[1]
    actions = []
    for t, start in enumerate(meta["starts"]):
        if start:
            state = np.zeros([1, width], dtype=np.float32)
        out = dict(zip(names, session.run(None, {"obs": obs[t : t + 1], "state": state})))
        actions.append(out["action"])
        state = out["next_state"]
    actions = np.concatenate(actions)
else:
    actions = session.run(["action"], {"obs": obs})[0]
print(json.dumps({"actions": actions.astype(np.float64).flatten().tolist(), "names": " ".join(names)}))
"#;
    let args = [
        graph.into_os_string(),
        run_dir.join("obs.f32").into_os_string(),
        meta.to_string().into(),
    ];
    let reply = python_json(python, script, &args, &[]);
    (
        numbers(&reply["actions"]),
        reply["names"].as_str().unwrap().to_string(),
    )
}

/// The largest difference between two runs' actions.
fn worst(got: &[f64], want: &[f64]) -> f64 {
    (got.iter().zip(want))
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max)
}

/// Exports a short run of `file` and holds the module's actions in Python to tandem's, then
/// the ONNX graph's in onnxruntime.
fn round_trip(name: &str, file: &str, sets: &[&str], methods: &str) {
    let dir = trained_and_exported(name, file, sets);
    let Some(python) = torch_python() else {
        return;
    };
    let played = play_greedily(&dir);
    let (got, described) = python_actions(&python, &dir, &played);
    assert_eq!(got.len(), played.actions.len(), "{name}");
    let worst_torch = worst(&got, &played.actions);
    eprintln!("{name}: largest difference {worst_torch}");
    if played.discrete {
        assert_eq!(got, played.actions, "{name}: discrete actions differ");
    } else {
        assert!(
            worst_torch <= 1e-5,
            "{name}: box actions differ by up to {worst_torch}"
        );
    }
    assert_eq!(described, methods, "{name}");

    let (got, names) = onnx_actions(&python, &dir, &played);
    assert_eq!(got.len(), played.actions.len(), "{name} (ONNX)");
    let worst_onnx = worst(&got, &played.actions);
    eprintln!("{name}: largest difference in onnxruntime {worst_onnx}");
    if played.discrete {
        assert_eq!(
            got, played.actions,
            "{name}: discrete actions differ in ONNX"
        );
    } else {
        assert!(
            worst_onnx <= 1e-5,
            "{name}: ONNX box actions differ by up to {worst_onnx}"
        );
    }
    // The graph's outputs: the action, then the module's methods by name.
    let recurrent = methods.starts_with("recurrent=True");
    let mut expected = vec!["action".to_string()];
    expected.extend(
        methods
            .split(' ')
            .skip(1)
            .filter_map(|m| m.split_once('=').map(|(name, _)| name.to_string())),
    );
    if recurrent {
        expected.push("next_state".into());
    }
    assert_eq!(names, expected.join(" "), "{name} (ONNX outputs)");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cartpole_mlp_policy_acts_in_python_as_in_tandem() {
    round_trip(
        "cartpole",
        "cartpole.kdl",
        &["train.total-steps=8192"],
        "recurrent=False logits=[200, 2] value=[200]",
    );
}

/// Networks declared as layers: the residual MLP (a layer norm inside), and MinAtar's residual
/// convolutions.
#[test]
fn policies_of_declared_layers_act_in_python_as_in_tandem() {
    round_trip(
        "residual-mlp",
        "cartpole-residual.kdl",
        &["train.total-steps=8192"],
        "recurrent=False logits=[200, 2] value=[200]",
    );
    round_trip(
        "residual-conv",
        "minatar-breakout-residual.kdl",
        &["train.total-steps=4096"],
        "recurrent=False logits=[200, 3] value=[200]",
    );
}

#[test]
fn a_breakout_cnn_policy_acts_in_python_as_in_tandem() {
    round_trip(
        "breakout",
        "breakout-ppo.kdl",
        &["train.total-steps=1024"],
        "recurrent=False logits=[200, 4] value=[200]",
    );
}

/// Gaussian, with observations normalised by the statistics the checkpoint holds.
#[test]
fn a_pendulum_gaussian_policy_normalises_and_acts_in_python_as_in_tandem() {
    round_trip(
        "pendulum",
        "pendulum-ppo.kdl",
        &["train.total-steps=8000"],
        "recurrent=False mean=[200, 1] log_std=[200, 1] value=[200]",
    );
}

/// An LSTM carrying its state from observation to observation, zeroed where episodes begin.
#[test]
fn a_masked_cartpole_lstm_policy_acts_in_python_as_in_tandem() {
    round_trip(
        "masked-lstm",
        "cartpole-masked-lstm.kdl",
        &["train.total-steps=4096"],
        "recurrent=True logits=[1, 2] value=[1]",
    );
}

/// A gymnasium environment through the bridge whose action mask comes from `info` and follows
/// the observation in the row: the module masks the logits from the row it is given, as tandem
/// does (three dials of several positions: multi-discrete actions).
#[test]
fn a_masked_multi_discrete_gymnasium_policy_acts_in_python_as_in_tandem() {
    round_trip(
        "dials-masked",
        "examples/gymnasium-package/dials-masked.kdl",
        &["train.total-steps=8192"],
        "recurrent=False logits=[200, 9] value=[200]",
    );
}

/// The off-policy learners: DQN's Q-values, SAC's squashed Gaussian, TD3's deterministic actor.
#[test]
fn dqn_sac_and_td3_policies_act_in_python_as_in_tandem() {
    round_trip(
        "dqn",
        "cartpole-dqn.kdl",
        &["train.total-steps=3000", "algorithm.learning-starts=1000"],
        "recurrent=False q_values=[200, 2] value=[200]",
    );
    for (name, file, methods) in [
        (
            "sac",
            "pendulum-sac.kdl",
            "mean=[200, 1] log_std=[200, 1] value=[200]",
        ),
        ("td3", "pendulum-td3.kdl", "value=[200]"),
    ] {
        round_trip(
            name,
            file,
            &["train.total-steps=1500", "algorithm.learning-starts=1000"],
            &format!("recurrent=False {methods}"),
        );
    }
}

/// What cannot be exported, or is asked for wrongly, says so.
#[test]
fn export_refuses_a_missing_checkpoint_with_what_there_is() {
    let dir = fresh_dir("export-refusals");
    let out = train(
        &experiment("cartpole.kdl"),
        &dir,
        &["train.total-steps=4096"],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let export = |args: &[&str]| {
        let out = run(
            tandem()
                .arg("export")
                .args(args)
                .arg("-o")
                .arg(dir.join("p.pt")),
            Duration::from_secs(60),
        );
        (out.status.success(), text(&out))
    };
    let run_dir = dir.to_str().unwrap();
    let (ok, said) = export(&[run_dir, "--checkpoint", "999"]);
    assert!(
        !ok && said.contains("holds no checkpoint of update 999; it keeps updates 8"),
        "{said}"
    );
    let (ok, said) = export(&[run_dir, "--checkpoint", "best"]);
    assert!(!ok && said.contains("holds no best checkpoint"), "{said}");
    let (ok, said) = export(&[run_dir, "--checkpoint", "last"]);
    assert!(
        !ok && said.contains("an update number or `best`, not `last`"),
        "{said}"
    );
    // An ONNX export whose Python cannot run leaves nothing: no file, no scratch beside it.
    let (ok, said) = export(&[
        run_dir,
        "--format",
        "onnx",
        "--python",
        "/nonexistent/python",
    ]);
    assert!(!ok && said.contains("cannot run it"), "{said}");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("p.pt"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let file = dir.join("checkpoints/ckpt-000000008.pt");
    let (ok, said) = export(&[file.to_str().unwrap(), "--checkpoint", "8"]);
    assert!(!ok && said.contains("is a checkpoint file"), "{said}");
    assert!(!dir.join("p.pt").exists());
    let (ok, said) = export(&[run_dir, "--checkpoint", "8"]);
    assert!(ok && dir.join("p.pt").exists(), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/export.md's example, as shipped in examples/export/cartpole.py, plays gymnasium's own
/// CartPole-v1 with an exported policy that learned on tandem's native CartPole.
#[test]
fn the_documented_python_example_balances_gymnasiums_cartpole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/export/cartpole.py")).unwrap();
    let docs = std::fs::read_to_string(root.join("docs/export.md")).unwrap();
    let body = &example[example.find("import sys").unwrap()..];
    assert!(
        docs.contains(body),
        "docs/export.md must show examples/export/cartpole.py from `import sys` on, as it is"
    );
    let dir = trained_and_exported("docs", "cartpole.kdl", &["train.total-steps=20480"]);
    let Some(python) = torch_python() else {
        return;
    };
    let args = [
        root.join("examples/export/cartpole.py"),
        dir.join("policy.pt"),
    ];
    let said = python_stdout(&python, &args, &[]);
    let mean: f64 = said
        .lines()
        .last()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no mean return in {said}"));
    // A random policy keeps the pole up for about 22 steps.
    assert!(mean >= 100.0, "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

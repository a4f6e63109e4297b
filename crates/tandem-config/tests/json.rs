//! The JSON form of an experiment read back: every example experiment's JSON resolves to the
//! KDL's hash, mistakes are all reported at their JSON lines, and includes and `--set` work
//! from JSON as from KDL.

use std::fs;
use std::path::{Path, PathBuf};

use tandem_config::cli;
use tandem_config::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn experiments() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("experiments"))
        .expect("experiments/ exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
        .collect();
    files.sort();
    files
}

/// A fresh folder for one test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("json-{test}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `tandem resolve FILE [--set]... --hash`, as the command prints it.
fn hash_of(file: &str, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let (out, err, code) = cli::resolve(file, &sets, false, true, false);
    assert_eq!(code, cli::EXIT_OK, "{file} does not resolve:\n{err}");
    out.trim().to_string()
}

fn json_of(file: &str) -> String {
    let (out, err, code) = cli::resolve(file, &[], true, false, false);
    assert_eq!(code, cli::EXIT_OK, "{err}");
    out
}

fn errors(file: &str) -> Vec<(String, usize, String)> {
    let diags = resolve(&Source::Path(file.into()), &[]).expect_err("should be invalid");
    diags
        .iter()
        .map(|d| {
            (
                d.code().to_string(),
                d.line_column().expect("positioned").0,
                d.label().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn every_experiment_kdl_to_json_to_resolve_gives_the_kdl_hash() {
    let dir = scratch("round-trip");
    let files = experiments();
    assert!(
        files.len() >= 6,
        "expected the example experiments, found {files:?}"
    );
    for kdl in files {
        let kdl = kdl.display().to_string();
        let json = json_of(&kdl);
        let name = Path::new(&kdl).file_stem().unwrap().to_str().unwrap();
        let json_file = write(&dir, &format!("{name}.json"), &json);
        assert_eq!(hash_of(&json_file, &[]), hash_of(&kdl, &[]), "{kdl}");
        // The JSON of the JSON is the same text, and `validate` accepts it.
        assert_eq!(json_of(&json_file), json, "{kdl}");
        let (report, code) = cli::validate(std::slice::from_ref(&json_file), false, false);
        assert_eq!(code, cli::EXIT_OK, "{report}");
        // Recognised by content too (a name without `.json`, or standard input's text).
        let unnamed = write(&dir, &format!("{name}.experiment"), &json);
        assert_eq!(hash_of(&unnamed, &[]), hash_of(&kdl, &[]), "{kdl}");
    }
}

#[test]
fn a_json_file_with_three_mistakes_reports_all_three_at_their_lines() {
    let dir = scratch("three-mistakes");
    let file = write(
        &dir,
        "bad.json",
        r#"{
  "name": "three-mistakes",
  "env": {
    "game": "cartpole",
    "envz": 4
  },
  "algorithm": {
    "kind": "ppo",
    "lr": "fast",
    "clip": -1
  }
}
"#,
    );
    let found = errors(&file);
    let codes: Vec<(&str, usize)> = found.iter().map(|(c, l, _)| (c.as_str(), *l)).collect();
    assert_eq!(
        codes,
        vec![
            ("config::unknown-setting", 5),
            ("config::type", 9),
            ("config::range", 10),
        ],
        "{found:?}"
    );
    let diags = resolve(&Source::Path(file.clone().into()), &[]).unwrap_err();
    let envz = diags.iter().next().unwrap();
    assert_eq!(envz.help(), Some("did you mean `envs`?"));
    assert_eq!(envz.line_column(), Some((5, 5)), "points at the key");
    let rendered = diags.render(false);
    assert!(rendered.contains("bad.json:9:11"), "{rendered}");
    // The JSON report of `validate` names the same lines.
    let (report, code) = cli::validate(&[file], true, false);
    assert_eq!(code, cli::EXIT_INVALID);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let lines: Vec<u64> = report["files"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![5, 9, 10]);
}

#[test]
fn json_syntax_errors_point_at_the_character() {
    let dir = scratch("syntax");
    let file = write(
        &dir,
        "broken.json",
        "{\n  \"name\": \"x\",\n  \"env\": {\"game\": \"cartpole\",}\n}\n",
    );
    let found = errors(&file);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0.as_str(), found[0].1), ("json::syntax", 3));
    let diags = resolve(&Source::Path(file.into()), &[]).unwrap_err();
    let d = diags.iter().next().unwrap();
    assert!(d.message().contains("trailing comma"), "{}", d.message());
    assert_eq!(d.line_column(), Some((3, 30)));
}

#[test]
fn json_shape_mistakes_are_reported_together() {
    let dir = scratch("shape");
    let file = write(
        &dir,
        "shape.json",
        r#"{
  "name": "shape",
  "seed": 1,
  "seed": 2,
  "env": {
    "game": "cartpole",
    "wrappers": [{"max-steps": 500}, {"kind": "time-limit", "max-steps": [1]}]
  },
  "algorithm": {"kind": "ppo", "lr": {"value": 0.1}}
}
"#,
    );
    let found = errors(&file);
    let codes: Vec<(&str, usize)> = found.iter().map(|(c, l, _)| (c.as_str(), *l)).collect();
    assert!(codes.contains(&("json::duplicate-key", 4)), "{found:?}");
    assert!(codes.contains(&("json::missing-kind", 7)), "{found:?}");
    assert!(codes.contains(&("json::not-a-value", 7)), "{found:?}");
    // An object for a plain setting is a block where none belongs (as in KDL).
    assert!(
        found
            .iter()
            .any(|(_, line, label)| *line == 9 && label.contains("unexpected")),
        "{found:?}"
    );
    let not_object = write(&dir, "array.json", "[1, 2]\n");
    assert_eq!(errors(&not_object)[0].0, "json::not-an-object");
}

#[test]
fn includes_work_from_json_and_into_json() {
    let dir = scratch("includes");
    let include = repo().join("experiments/include/ppo-cartpole.kdl");
    // A JSON experiment including the KDL piece cartpole.kdl includes, and a JSON piece.
    write(
        &dir,
        "logging.json",
        r#"{"log": {"console": "plain", "tensorboard": false}}"#,
    );
    // `include` is applied first wherever it is written (here after `seed`), so `env` below
    // overrides the included `envs 4`.
    let main = write(
        &dir,
        "main.json",
        &format!(
            r#"{{"name": "inc", "seed": 7, "include": [{include:?}, "logging.json"], "env": {{"envs": 2}}}}"#,
            include = include.display().to_string()
        ),
    );
    let resolved = resolve(&Source::Path(main.clone().into()), &[]).unwrap();
    let e = &resolved.experiment;
    assert_eq!(e.seed, 7);
    assert_eq!(e.env.envs, 2);
    assert_eq!(e.algorithm.name(), "ppo");
    let canonical = canonical_kdl(e);
    assert!(canonical.contains("console \"plain\""), "{canonical}");
    // Provenance names the JSON lines (all on line 1 here) and the included KDL file.
    let origin = resolved.provenance.get("algorithm.lr").unwrap().to_string();
    assert!(origin.contains("ppo-cartpole.kdl:"), "{origin}");

    // The same experiment in KDL, including the JSON piece, has the same hash.
    let kdl = write(
        &dir,
        "main.kdl",
        &format!(
            "experiment \"inc\" {{\n    include {include:?}\n    include \"logging.json\"\n    seed 7\n    env {{ envs 2; }}\n}}\n",
            include = include.display().to_string()
        ),
    );
    assert_eq!(hash_of(&kdl, &[]), hash_of(&main, &[]));

    // An included JSON file cannot name an experiment.
    write(&dir, "named.json", r#"{"name": "x", "seed": 3}"#);
    let bad = write(
        &dir,
        "bad.json",
        r#"{"name": "bad", "include": "named.json", "env": {"game": "cartpole"}}"#,
    );
    let found = errors(&bad);
    assert_eq!(found[0].0, "config::include-experiment", "{found:?}");
}

#[test]
fn set_overrides_apply_to_json_as_to_kdl() {
    let dir = scratch("sets");
    let kdl = repo()
        .join("experiments/cartpole.kdl")
        .display()
        .to_string();
    let json = write(&dir, "cartpole.json", &json_of(&kdl));
    let sets = ["seed=3", "algorithm.lr=0.001", "devices=\"cpu\" \"cpu\""];
    assert_eq!(hash_of(&json, &sets), hash_of(&kdl, &sets));
    assert_ne!(hash_of(&json, &sets), hash_of(&json, &[]));
    // A bad `--set` on a JSON file is reported like on a KDL one.
    let (_, err, code) = cli::resolve(&json, &["algorithm.lr=-1".into()], false, false, false);
    assert_eq!(code, cli::EXIT_INVALID);
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn a_shorthand_section_kind_and_a_minimal_experiment() {
    let dir = scratch("minimal");
    // What a Nix attribute set turns into: keys sorted, only what differs from the defaults.
    let json = write(
        &dir,
        "tiny.json",
        r#"{"algorithm":{"kind":"ppo","lr":0.001},"devices":["cpu"],"env":"cartpole","name":"tiny","seed":2}"#,
    );
    let kdl = write(
        &dir,
        "tiny.kdl",
        "experiment \"tiny\" {\n    seed 2\n    devices \"cpu\"\n    algorithm \"ppo\" { lr 0.001; }\n    env \"cartpole\"\n}\n",
    );
    assert_eq!(hash_of(&json, &[]), hash_of(&kdl, &[]));
}

#[test]
fn a_declared_networks_layers_are_checked_at_their_json_lines_inside_a_residual_too() {
    let dir = scratch("layers");
    let file = write(
        &dir,
        "layers.json",
        r#"{
  "name": "layers",
  "env": {"game": "cartpole"},
  "network": {
    "kind": "layers",
    "layers": [
      {"kind": "linear", "out": 16},
      {"kind": "residual", "layers": [
        {"kind": "layer-norm"},
        {"kind": "linear", "out": 8}
      ]},
      {"kind": "tanh"}
    ]
  }
}
"#,
    );
    let found = errors(&file);
    assert_eq!(found.len(), 1, "{found:?}");
    let (code, line, label) = &found[0];
    assert_eq!((code.as_str(), *line), ("config::layer-mismatch", 8));
    assert!(label.contains("reads [16] and gives [8]"), "{label}");
    // Within the residual: an unknown parameter at its own line.
    let file = write(
        &dir,
        "typo.json",
        &std::fs::read_to_string(&file)
            .unwrap()
            .replace(r#""out": 8"#, r#""width": 16"#),
    );
    let codes: Vec<(String, usize)> = errors(&file).into_iter().map(|(c, l, _)| (c, l)).collect();
    assert!(
        codes.contains(&("config::unknown-property".to_string(), 10)),
        "{codes:?}"
    );
}

//! Behaviour of the resolver: all errors at once, includes and overrides,
//! provenance, `--set`, the canonical round trip and the per-rank sizes.

use std::path::{Path, PathBuf};

use tandem_config::*;

fn fixture(name: &str) -> Source {
    Source::Path(PathBuf::from("tests/fixtures").join(name))
}

fn experiments() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("experiments/ exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
        .collect();
    files.sort();
    files
}

fn sets(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn one_file_with_several_mistakes_reports_all_of_them() {
    let diags = resolve(&fixture("many-mistakes.kdl"), &[]).unwrap_err();
    let found: Vec<(&str, usize)> = diags
        .iter()
        .map(|d| (d.code(), d.line_column().expect("positioned").0))
        .collect();
    assert_eq!(
        found,
        vec![
            ("config::type", 4),
            ("config::unknown-setting", 5),
            ("config::range", 6),
            ("config::unknown-kind", 15),
            ("config::unknown-value", 17),
            ("config::not-divisible", 9),
            ("config::wrapper-mismatch", 11),
        ]
    );
    let gama = diags
        .iter()
        .find(|d| d.code() == "config::unknown-setting")
        .unwrap();
    assert_eq!(gama.help(), Some("did you mean `gamma`?"));
}

#[test]
fn every_example_experiment_validates_and_round_trips() {
    let files = experiments();
    assert!(
        files.len() >= 6,
        "expected the example experiments, found {files:?}"
    );
    for path in files {
        let resolved = resolve(&Source::Path(path.clone()), &[])
            .unwrap_or_else(|d| panic!("{} is invalid:\n{}", path.display(), d.render(false)));
        let e = &resolved.experiment;
        let text = canonical_kdl(e);
        let back = parse_canonical(&text)
            .unwrap_or_else(|d| panic!("{}: {}", path.display(), d.render(false)));
        assert_eq!(
            &back,
            e,
            "{}: round trip changed the experiment",
            path.display()
        );
        assert_eq!(canonical_kdl(&back), text);
        assert_eq!(config_hash(&back), config_hash(e));
        // The canonical text is also a valid source, and resolves to the same hash.
        let again = resolve(&Source::Stdin(text.clone()), &[]).unwrap();
        assert_eq!(config_hash(&again.experiment), config_hash(e));
        let json: serde_json::Value = serde_json::from_str(&canonical_json(e)).unwrap();
        assert_eq!(json["name"], e.name.as_str());
        assert_eq!(json["devices"].as_array().unwrap().len(), e.job_ranks());
    }
}

#[test]
fn resolution_is_deterministic_and_hash_is_sha256_of_canonical_text() {
    let a = resolve(&fixture("layered.kdl"), &[]).unwrap();
    let b = resolve(&fixture("layered.kdl"), &[]).unwrap();
    assert_eq!(canonical_kdl(&a.experiment), canonical_kdl(&b.experiment));
    assert_eq!(canonical_json(&a.experiment), canonical_json(&b.experiment));
    let hash = config_hash(&a.experiment);
    assert_eq!(hash.len(), 64);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    // A fixed experiment has a fixed hash on every machine: this pins the format.
    let text = canonical_kdl(&a.experiment);
    // The hash is the SHA-256 of exactly the canonical text's bytes (what resolved.kdl holds),
    // recomputed here, in lowercase hex.
    let digest = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes());
    let expected: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hash, expected,
        "config_hash is not the sha256 of canonical_kdl"
    );
    assert!(
        text.starts_with("experiment \"layered\" {\n    seed 1\n    devices \"cpu\" \"cpu\"\n"),
        "{text}"
    );
    assert!(text.contains("        lr 0.0005\n"), "{text}");
}

#[test]
fn later_values_override_earlier_ones_node_by_node() {
    let r = resolve(&fixture("layered.kdl"), &[]).unwrap();
    let Algorithm::Ppo(ppo) = &r.experiment.algorithm else {
        panic!("not ppo")
    };
    assert_eq!(ppo.lr, 0.0005, "the main file overrides the include");
    assert_eq!(ppo.gamma, 0.98, "untouched values from the include stay");
    assert_eq!(ppo.clip, 0.1);
    assert_eq!(ppo.epochs, 4, "unset values get their default");
}

#[test]
fn changing_the_kind_drops_the_previous_kinds_settings() {
    let r = resolve(&fixture("switch-kind.kdl"), &[]).unwrap();
    let Algorithm::Dqn(dqn) = &r.experiment.algorithm else {
        panic!("not dqn")
    };
    assert_eq!(dqn.batch_size, 64);
    assert_eq!(
        dqn.lr, 1e-4,
        "ppo's lr from the include does not leak into dqn"
    );
    assert_eq!(r.provenance.get("algorithm.lr"), Some(&Origin::Default));
}

#[test]
fn provenance_names_include_main_file_set_and_default() {
    let r = resolve(&fixture("layered.kdl"), &sets(&["train.max-steps=4096"])).unwrap();
    let p = &r.provenance;
    assert_eq!(
        p.get("algorithm.gamma"),
        Some(&Origin::File {
            path: "tests/fixtures/base-ppo.kdl".into(),
            line: 4
        })
    );
    assert_eq!(
        p.get("algorithm.lr"),
        Some(&Origin::File {
            path: "tests/fixtures/layered.kdl".into(),
            line: 4
        })
    );
    assert_eq!(
        p.get("algorithm"),
        Some(&Origin::File {
            path: "tests/fixtures/base-ppo.kdl".into(),
            line: 2
        })
    );
    assert_eq!(
        p.get("train.max-steps"),
        Some(&Origin::Set {
            text: "train.max-steps=4096".into()
        })
    );
    assert_eq!(p.get("algorithm.epochs"), Some(&Origin::Default));
    assert_eq!(
        p.get("name"),
        Some(&Origin::File {
            path: "tests/fixtures/layered.kdl".into(),
            line: 1
        })
    );
    // Every value of the canonical form has an origin.
    let json: serde_json::Value = serde_json::from_str(&canonical_json(&r.experiment)).unwrap();
    for (key, value) in json.as_object().unwrap() {
        match value.as_object() {
            Some(section) => {
                assert!(
                    p.get(key).is_some() || !section.contains_key("kind") && key != "env",
                    "no origin for {key}"
                );
                for field in section
                    .keys()
                    .filter(|f| !["kind", "game", "policy"].contains(&f.as_str()))
                {
                    assert!(
                        p.get(&format!("{key}.{field}")).is_some(),
                        "no origin for {key}.{field}"
                    );
                }
            }
            None => assert!(p.get(key).is_some(), "no origin for {key}"),
        }
    }
}

#[test]
fn nested_includes_resolve_relative_to_the_including_file() {
    let r = resolve(&fixture("nested-include.kdl"), &[]).unwrap();
    assert_eq!(r.experiment.seed, 7);
    assert_eq!(r.experiment.env.game, Game::Cartpole);
    assert_eq!(
        r.provenance.get("env"),
        Some(&Origin::File {
            path: "tests/fixtures/nested/../base-ppo.kdl".into(),
            line: 7
        })
    );
}

#[test]
fn stdin_includes_resolve_relative_to_the_current_directory() {
    // cargo runs tests in the crate directory.
    let text = "experiment \"from-stdin\" {\n    include \"tests/fixtures/base-ppo.kdl\"\n}\n";
    let r = resolve(&Source::Stdin(text.into()), &[]).unwrap();
    assert_eq!(r.experiment.env.envs, 4);
    assert_eq!(
        r.provenance.get("name"),
        Some(&Origin::File {
            path: "<stdin>".into(),
            line: 1
        })
    );
}

#[test]
fn set_changes_exactly_the_named_value() {
    let base = resolve(&fixture("layered.kdl"), &[]).unwrap();
    for (set, line) in [
        ("algorithm.lr=0.002", "        lr 0.002"),
        ("train.max-steps=4096", "        max-steps 4096"),
        ("seed=42", "    seed 42"),
        ("log.console=quiet", "        console \"quiet\""),
        ("network.hidden=128 128", "        hidden 128 128"),
    ] {
        let changed = resolve(&fixture("layered.kdl"), &sets(&[set])).unwrap();
        let before = canonical_kdl(&base.experiment);
        let after = canonical_kdl(&changed.experiment);
        let removed: Vec<&str> = before
            .lines()
            .filter(|l| !after.lines().any(|m| m == *l))
            .collect();
        let added: Vec<&str> = after
            .lines()
            .filter(|l| !before.lines().any(|m| m == *l))
            .collect();
        assert_eq!(added, vec![line], "--set {set}");
        assert!(
            removed.len() <= 1,
            "--set {set} changed more than one value: {removed:?}"
        );
        assert!(
            changed
                .provenance
                .iter()
                .any(|(_, o)| *o == Origin::Set { text: set.into() })
        );
    }
    // A block replaces the (empty) block as a whole.
    let changed = resolve(
        &fixture("layered.kdl"),
        &sets(&["env.wrappers=time-limit 200; clip-reward"]),
    )
    .unwrap();
    assert_eq!(
        changed.experiment.env.wrappers,
        vec![Wrapper::TimeLimit { max_steps: 200 }, Wrapper::ClipReward]
    );
    let mut expected = base.experiment.clone();
    expected.env.wrappers = changed.experiment.env.wrappers.clone();
    assert_eq!(changed.experiment, expected);
}

#[test]
fn set_can_switch_the_kind_and_later_sets_win() {
    let r = resolve(
        &fixture("layered.kdl"),
        &sets(&[
            "algorithm=dqn",
            "algorithm.batch-size=32",
            "algorithm.batch-size=64",
        ]),
    )
    .unwrap();
    let Algorithm::Dqn(dqn) = &r.experiment.algorithm else {
        panic!("not dqn")
    };
    assert_eq!(dqn.batch_size, 64);
}

#[test]
fn set_values_are_checked_like_file_values() {
    let diags = resolve(
        &fixture("layered.kdl"),
        &sets(&["algorithm.gamma=2", "algorithm.clip=fast"]),
    )
    .unwrap_err();
    let codes: Vec<&str> = diags.iter().map(|d| d.code()).collect();
    assert_eq!(codes, vec!["config::range", "config::type"]);
    assert!(diags.iter().all(|d| d.file() == Some("--set")));
}

#[test]
fn per_rank_sizes_divide_the_global_ones() {
    let r = resolve(&fixture("layered.kdl"), &[]).unwrap();
    let e = &r.experiment;
    assert_eq!(e.world_size(), 2);
    assert_eq!(e.per_rank_envs(), 2);
    assert_eq!(e.batch_size(), 4 * 128);
    assert_eq!(e.per_rank_batch(), 2 * 128);
    assert_eq!(e.per_rank_minibatch_size(), Some(64));
    assert_eq!(e.per_rank_buffer_capacity(), None);
    // "auto": one thread for layered.kdl's MLP, however many cores the rank has.
    assert!(matches!(e.network.torso, Torso::Mlp { .. }));
    assert_eq!(e.threads_for_rank(8), 1);

    let dqn = resolve(
        &fixture("layered.kdl"),
        &sets(&[
            "algorithm=dqn",
            "algorithm.buffer-capacity=1000",
            "algorithm.batch-size=64",
        ]),
    )
    .unwrap();
    assert_eq!(dqn.experiment.per_rank_buffer_capacity(), Some(500));
    assert_eq!(dqn.experiment.per_rank_batch_size(), Some(32));
}

#[test]
fn devices_count_form_expands_to_a_list() {
    let r = resolve(
        &fixture("layered.kdl"),
        &sets(&["devices=count=2 kind=\"cuda\""]),
    )
    .unwrap();
    assert_eq!(r.experiment.devices, vec![Device::Cuda(0), Device::Cuda(1)]);
    assert!(canonical_kdl(&r.experiment).contains("    devices \"cuda:0\" \"cuda:1\"\n"));
}

#[test]
fn observations_follow_the_wrapper_chain() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let obs = |name: &str| {
        resolve(&Source::Path(dir.join(name)), &[])
            .unwrap()
            .experiment
            .observation()
            .expect("a catalogue game")
            .network_shape()
    };
    assert_eq!(obs("breakout.kdl"), vec![4, 84, 84]);
    assert_eq!(obs("minatar-breakout.kdl"), vec![4, 10, 10]);
    assert_eq!(obs("cartpole.kdl"), vec![4]);
}

#[test]
fn parse_canonical_accepts_only_canonical_self_contained_text() {
    let r = resolve(&fixture("layered.kdl"), &[]).unwrap();
    let text = canonical_kdl(&r.experiment);
    let with_comment = format!("// edited\n{text}");
    let d = parse_canonical(&with_comment).unwrap_err();
    assert_eq!(d.iter().next().unwrap().code(), "config::not-canonical");
    let reordered = text.replacen("    seed 1\n", "", 1).replacen(
        "    threads \"auto\"\n",
        "    threads \"auto\"\n    seed 1\n",
        1,
    );
    assert!(
        parse_canonical(&reordered).is_err(),
        "order matters in the canonical form"
    );
    let with_include = "experiment \"x\" {\n    include \"tests/fixtures/base-ppo.kdl\"\n}\n";
    let d = parse_canonical(with_include).unwrap_err();
    assert_eq!(d.iter().next().unwrap().code(), "config::canonical-include");
}

#[test]
fn cli_validate_exit_codes_and_summary() {
    let good = format!(
        "{}/../../experiments/cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let (out, code) = cli::validate(std::slice::from_ref(&good), false, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 valid, 0 invalid"), "{out}");
    let bad = "tests/fixtures/many-mistakes.kdl".to_string();
    let (out, code) = cli::validate(&[good.clone(), bad.clone()], false, false);
    assert_eq!(code, 1);
    assert!(out.contains("1 valid, 1 invalid, 7 errors"), "{out}");
    let (json, code) = cli::validate(&[good, bad], true, false);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["files"][1]["diagnostics"].as_array().unwrap().len(), 7);
    assert_eq!(v["files"][0]["hash"].as_str().unwrap().len(), 64);
    let (_, code) = cli::validate(&[], false, false);
    assert_eq!(code, 2);
    let (_, code) = cli::validate(&["-".into(), "-".into()], false, false);
    assert_eq!(code, 2);
}

#[test]
fn cli_resolve_outputs_and_exit_codes() {
    let file = "tests/fixtures/layered.kdl";
    let (out, err, code) = cli::resolve(file, &[], false, false, false);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.starts_with("experiment \"layered\""));
    let (hash, _, _) = cli::resolve(file, &[], false, true, false);
    assert_eq!(hash.trim(), config_hash(&parse_canonical(&out).unwrap()));
    let (json, _, code) = cli::resolve(file, &[], true, false, false);
    assert_eq!(code, 0);
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
    let (_, err, code) = cli::resolve(file, &sets(&["train.max-steps"]), false, false, false);
    assert_eq!(code, 2, "{err}");
    let (out, err, code) = cli::resolve(file, &sets(&["algorithm.lr=-1"]), true, false, false);
    assert_eq!((code, out.as_str()), (1, ""));
    let v: serde_json::Value = serde_json::from_str(&err).unwrap();
    assert_eq!(v[0]["code"], "config::range");
}

#[test]
fn no_hidden_inputs_in_the_resolver() {
    // No environment variable or home-directory file may change a resolved config.
    // Every source file of the crate is read (walked, so a new module is covered).
    let files = rust_files(Path::new("src"));
    for file in [
        "lib.rs",
        "resolve/mod.rs",
        "schema.rs",
        "values.rs",
        "canonical.rs",
        "model.rs",
        "diag.rs",
    ] {
        assert!(
            files.contains(&Path::new("src").join(file)),
            "src/{file} is not walked"
        );
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for forbidden in ["env::var", "home_dir", "current_dir"] {
            assert!(
                !text.contains(forbidden),
                "{} uses {forbidden}",
                file.display()
            );
        }
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

#[test]
fn sync_backend_decides_whether_one_gpu_may_run_two_ranks() {
    let cartpole = || Source::Stdin("experiment \"x\" {\n    env \"cartpole\"\n}\n".into());
    let two_on_one = |backend: &str| {
        let mut s = sets(&["devices=\"cuda:0\" \"cuda:0\""]);
        if !backend.is_empty() {
            s.push(format!("sync.backend={backend}"));
        }
        resolve(&cartpole(), &s)
    };
    // Gloo runs CUDA tensors through the host, so two ranks may share a GPU.
    let r = two_on_one("gloo").expect("gloo on one GPU twice resolves");
    assert_eq!(r.experiment.sync.backend, SyncBackend::Gloo);
    assert!(canonical_kdl(&r.experiment).contains("backend \"gloo\""));
    // NCCL (and auto, which takes NCCL for CUDA ranks) refuses a GPU listed twice.
    for backend in ["", "auto", "nccl"] {
        let diags = two_on_one(backend).unwrap_err();
        let codes: Vec<&str> = diags.iter().map(|d| d.code()).collect();
        assert_eq!(
            codes,
            vec!["config::duplicate-device"],
            "backend {backend:?}"
        );
    }
    // NCCL has no CPU tensors; auto and gloo take Gloo for CPU ranks.
    let diags = resolve(&cartpole(), &sets(&["sync.backend=nccl"])).unwrap_err();
    let codes: Vec<&str> = diags.iter().map(|d| d.code()).collect();
    assert_eq!(codes, vec!["config::backend-device"]);
    let r = resolve(&cartpole(), &[]).unwrap();
    assert_eq!(r.experiment.sync.backend, SyncBackend::Auto);
}

#[test]
fn whole_numbers_written_as_floats_count_where_an_integer_is_wanted() {
    let text = "experiment \"x\" {\n    threads 1.0\n    env \"minatar-breakout\" {\n        envs 4.0\n        wrappers {\n            frame-stack 4.0\n        }\n    }\n    network \"mlp\" {\n        hidden 64.0 32\n    }\n    train {\n        total-steps 1e5\n    }\n}\n";
    let r = resolve(
        &Source::Stdin(text.to_string()),
        &sets(&["train.rollout=1.6e1"]),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let e = &r.experiment;
    assert_eq!(e.env.envs, 4);
    assert_eq!(e.train.total_steps, 100_000);
    assert_eq!(e.train.rollout, 16);
    let canonical = canonical_kdl(e);
    for line in [
        "total-steps 100000",
        "envs 4",
        "threads 1",
        "hidden 64 32",
        "frame-stack n=4",
    ] {
        assert!(canonical.contains(line), "no `{line}` in:\n{canonical}");
    }
    // The same run as the integers written out: one hash.
    let written = text
        .replace("1.0", "1")
        .replace("4.0", "4")
        .replace("64.0", "64")
        .replace("1e5", "100_000");
    let same = resolve(&Source::Stdin(written), &sets(&["train.rollout=16"])).unwrap();
    assert_eq!(config_hash(&same.experiment), config_hash(e));
}

#[test]
fn a_fraction_or_a_float_past_2_to_the_53_is_refused_with_why() {
    let text = "experiment \"x\" {\n    env \"cartpole\" {\n        envs 4.5\n    }\n    train {\n        total-steps 1e20\n    }\n}\n";
    let diags = resolve(&Source::Stdin(text.to_string()), &[]).unwrap_err();
    let found: Vec<_> = diags
        .iter()
        .map(|d| {
            (
                d.code(),
                d.line_column().unwrap().0,
                d.help().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(found.len(), 2, "{diags}");
    assert_eq!((found[0].0, found[0].1), ("config::type", 3));
    assert_eq!(found[0].2, "a count is a whole number: 4.5 has a fraction");
    assert_eq!((found[1].0, found[1].1), ("config::type", 6));
    assert!(
        found[1].2.starts_with("1e20 is past 2^53"),
        "{}",
        found[1].2
    );
    assert!(found[1].2.contains("`100_000`"), "{}", found[1].2);
    assert!(
        diags
            .iter()
            .nth(1)
            .unwrap()
            .label()
            .unwrap()
            .ends_with("found the number 1e20")
    );
}

/// `normalize-advantages` takes `"minibatch"` beside its switch; `#true` and `#false` keep the
/// canonical text (and so the hashes) they had when it was only a switch.
#[test]
fn normalize_advantages_takes_minibatch_and_keeps_the_switch_canonical() {
    let ppo = |setting: &str| {
        format!(
            "experiment \"x\" {{\n    algorithm \"ppo\" {{\n        {setting}\n    }}\n    env \"cartpole\"\n}}\n"
        )
    };
    let resolved = |text: &str, given: &[&str]| resolve(&Source::Stdin(text.into()), &sets(given));
    for (setting, sets, mode, written) in [
        (
            "",
            &[][..],
            AdvantageNorm::Batch,
            "normalize-advantages #true\n",
        ),
        (
            "normalize-advantages #false",
            &[],
            AdvantageNorm::Off,
            "normalize-advantages #false\n",
        ),
        (
            "normalize-advantages \"minibatch\"",
            &[],
            AdvantageNorm::Minibatch,
            "normalize-advantages \"minibatch\"\n",
        ),
        (
            "",
            &["algorithm.normalize-advantages=minibatch"],
            AdvantageNorm::Minibatch,
            "normalize-advantages \"minibatch\"\n",
        ),
    ] {
        let e = resolved(&ppo(setting), sets).unwrap().experiment;
        let Algorithm::Ppo(p) = &e.algorithm else {
            panic!("not ppo")
        };
        assert_eq!(p.normalize_advantages, mode, "{setting} {sets:?}");
        let text = canonical_kdl(&e);
        assert!(text.contains(written), "{text}");
        assert_eq!(parse_canonical(&text).unwrap(), e);
    }
    let refused = resolved(&ppo("normalize-advantages \"batch\""), &[]).unwrap_err();
    let d = refused.iter().next().unwrap();
    assert_eq!(d.line_column().unwrap().0, 3);
    let label = d.label().unwrap();
    assert!(label.contains("\"minibatch\" or boolean"), "{label}");
}

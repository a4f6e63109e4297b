//! What a run costs, said before it runs: `total-steps` (or `max-steps`) below one update
//! is a warning that names the update's size, the steps a run really takes are whole
//! updates, and an experiment whose ranks cannot fit in a machine's memory is refused at
//! the setting that needs most. Machines here are given, never this one.

use tandem_config::{
    Machine, MemoryPart, Resolved, Source, cli, memory_estimate, resolve, resolve_on, steps_run,
};

fn experiment(name: &str) -> Source {
    Source::Path(format!("{}/../../experiments/{name}", env!("CARGO_MANIFEST_DIR")).into())
}

fn cartpole_path() -> String {
    format!(
        "{}/../../experiments/cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn ok(source: &Source, sets: &[&str]) -> Resolved {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    resolve(source, &sets).unwrap_or_else(|d| panic!("{d}"))
}

const GIB: u64 = 1 << 30;

fn machine(available_bytes: u64) -> Machine {
    Machine {
        available_bytes,
        nodes: 1,
    }
}

#[test]
fn a_step_limit_below_one_update_warns_at_the_setting_with_the_update_size() {
    let cartpole = experiment("cartpole.kdl");
    let r = ok(&cartpole, &["train.max-steps=100"]);
    assert_eq!(r.warnings.len(), 1, "{}", r.warnings);
    let w = r.warnings.iter().next().unwrap();
    assert_eq!(w.code(), "config::less-than-one-update");
    assert_eq!(w.severity(), tandem_config::Severity::Warning);
    assert_eq!(
        w.message(),
        "max-steps 100 is less than one update: the run takes 512 steps"
    );
    assert_eq!(w.file(), Some("--set"));
    assert_eq!(w.label(), Some("less than one update of 512 steps"));
    assert!(
        w.help()
            .unwrap()
            .contains("rollout 128 × envs 4 = 512 global steps"),
        "{w:?}"
    );
    assert!(r.warnings.render(false).contains("⚠"), "{}", r.warnings);
    assert_eq!(steps_run(&r.experiment), (1, 512));

    let total = ok(&cartpole, &["train.total-steps=100"]);
    let w = total.warnings.iter().next().expect("a warning");
    assert_eq!(w.file(), Some("--set"));
    assert!(w.message().starts_with("total-steps 100 is less"), "{w:?}");
    // One whole update, or more than one, is what was asked for.
    assert!(ok(&cartpole, &["train.max-steps=512"]).warnings.is_empty());
    assert!(ok(&cartpole, &[]).warnings.is_empty());
}

#[test]
fn off_policy_updates_are_train_frequency_vector_steps() {
    let dqn = experiment("cartpole-dqn.kdl");
    let r = ok(&dqn, &["train.max-steps=3"]);
    let w = r.warnings.iter().next().expect("a warning");
    assert_eq!(
        w.message(),
        "max-steps 3 is less than one update: the run takes 4 steps"
    );
    assert!(
        w.help().unwrap().contains("train-frequency 1 × envs 4 = 4"),
        "{w:?}"
    );
    assert!(w.help().unwrap().contains("`train-frequency` or `envs`"));
}

#[test]
fn a_run_takes_whole_updates_up_to_its_limit() {
    let cartpole = ok(&experiment("cartpole.kdl"), &[]);
    // 500,000 steps in updates of 512: 976 updates leave 288 steps, so a 977th runs.
    assert_eq!(steps_run(&cartpole.experiment), (977, 500_224));
    let capped = ok(&experiment("cartpole.kdl"), &["train.max-steps=1025"]);
    assert_eq!(steps_run(&capped.experiment), (3, 1536));
    let (text, code) = cli::validate(
        &[format!(
            "{}/../../experiments/cartpole.kdl",
            env!("CARGO_MANIFEST_DIR")
        )],
        false,
        false,
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("    runs 500224 steps (977 updates of 512); at least "),
        "{text}"
    );
    let (json, _) = cli::validate(std::slice::from_ref(&cartpole_path()), true, false);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["files"][0]["steps"], 500_224);
    assert_eq!(v["files"][0]["updates"], 977);
    assert!(
        v["files"][0]["memory_per_rank_bytes"].as_u64().unwrap() > 0,
        "{v}"
    );
    // `tandem resolve` prints the result and says the warning on standard error.
    let cartpole = format!(
        "{}/../../experiments/cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let (out, err, code) = cli::resolve(
        &cartpole,
        &["train.max-steps=10".into()],
        false,
        true,
        false,
    );
    assert_eq!((code, out.len()), (0, 65), "{out}{err}");
    assert!(
        err.contains("max-steps 10 is less than one update"),
        "{err}"
    );
}

#[test]
fn the_rollout_estimate_counts_steps_envs_and_observation() {
    let e = ok(&experiment("cartpole.kdl"), &[]).experiment;
    let estimate = memory_estimate(&e);
    let rollout = estimate
        .parts
        .iter()
        .find(|(p, _)| *p == MemoryPart::Rollout)
        .unwrap()
        .1;
    // 128 steps x 4 environments x (4 observation floats + 9 floats, 4 bytes each, + an i64 action).
    assert_eq!(rollout, 128 * 4 * ((4 + 9) * 4 + 8));
    let doubled = ok(&experiment("cartpole.kdl"), &["env.envs=8"]).experiment;
    let part = |e| {
        memory_estimate(e)
            .parts
            .into_iter()
            .find(|(p, _)| *p == MemoryPart::Rollout)
            .unwrap()
            .1
    };
    assert_eq!(part(&doubled), 2 * rollout);
}

#[test]
fn every_shipped_experiment_fits_in_half_a_gibibyte_a_rank() {
    let dir = format!("{}/../../experiments", env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "kdl") {
            continue;
        }
        let r = ok(&Source::Path(path.clone()), &[]);
        let per_rank = memory_estimate(&r.experiment).per_rank();
        assert!(
            (16 << 10..GIB / 2).contains(&per_rank),
            "{}: {per_rank} bytes a rank",
            path.display()
        );
        resolve_on(&Source::Path(path.clone()), &[], &machine(GIB))
            .unwrap_or_else(|d| panic!("{}: {d}", path.display()));
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn a_billion_environments_are_refused_at_envs_with_needed_and_available() {
    let text = "experiment \"huge\" {\n    devices \"cpu\"\n    env \"cartpole\" {\n        envs 1_000_000_000\n    }\n}\n";
    let source = Source::Stdin(text.into());
    // Without a machine (a worker reading its canonical text) nothing is measured.
    assert!(resolve(&source, &[]).is_ok());
    let diags = resolve_on(&source, &[], &machine(16 * GIB)).unwrap_err();
    let d = diags
        .iter()
        .find(|d| d.code() == "config::out-of-memory")
        .unwrap_or_else(|| panic!("{diags}"));
    assert_eq!(d.line_column(), Some((4, 14)));
    assert!(
        d.label().unwrap().ends_with("of rollout storage a rank"),
        "{d:?}"
    );
    assert!(
        d.message().starts_with("this experiment needs at least ")
            && d.message()
                .ends_with(" of memory on this machine, and 16.0 GiB is available"),
        "{}",
        d.message()
    );
    assert!(
        d.help().unwrap().contains("lower `envs` or `rollout`"),
        "{d:?}"
    );
}

#[test]
fn every_rank_on_the_machine_counts_and_replay_is_blamed_on_its_capacity() {
    let dqn = experiment("minatar-breakout-dqn.kdl");
    let per_rank = memory_estimate(&ok(&dqn, &[]).experiment).per_rank();
    // Two ranks: one machine must hold both, two machines one each.
    assert!(resolve_on(&dqn, &[], &machine(2 * per_rank)).is_ok());
    let diags = resolve_on(&dqn, &[], &machine(2 * per_rank - 1)).unwrap_err();
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::out-of-memory", "{diags}");
    assert!(
        d.label().unwrap().ends_with("of replay buffer a rank"),
        "{d:?}"
    );
    assert!(
        d.help().unwrap().contains("lower `buffer-capacity`"),
        "{d:?}"
    );
    assert!(d.help().unwrap().starts_with("2 rank(s) here"), "{d:?}");
    let two = Machine {
        available_bytes: per_rank,
        nodes: 2,
    };
    assert!(resolve_on(&dqn, &[], &two).is_ok());
}

#[test]
fn a_resolved_experiment_is_checked_against_a_machine_without_resolving_again() {
    // The launcher resolves before it knows how many ranks a scheduler puts on this machine,
    // then checks the same resolution once it does: the refusal is the resolver's own, at the
    // line the capacity was written on.
    let dqn = experiment("minatar-breakout-dqn.kdl");
    let resolved = ok(&dqn, &["algorithm.buffer-capacity=200_000"]);
    let per_rank = memory_estimate(&resolved.experiment).per_rank();
    assert!(resolved.fits(&machine(2 * per_rank)).is_ok());
    let after = resolved.fits(&machine(2 * per_rank - 1)).unwrap_err();
    let during = resolve_on(
        &dqn,
        &["algorithm.buffer-capacity=200_000".to_string()],
        &machine(2 * per_rank - 1),
    )
    .unwrap_err();
    assert_eq!(after.render(false), during.render(false));
    let d = after.iter().next().unwrap();
    assert_eq!(d.code(), "config::out-of-memory", "{after}");
    assert_eq!(d.file(), Some("--set"), "{d:?}");
    assert!(d.help().unwrap().starts_with("2 rank(s) here"), "{d:?}");
    let spread = Machine {
        available_bytes: per_rank,
        nodes: 2,
    };
    assert!(resolved.fits(&spread).is_ok());
}

//! The settings of recurrent policies and of the keep-obs wrapper: what they resolve to, the
//! canonical round trip, and a located error for every combination that cannot run.

mod common;

use tandem_config::*;

fn text(body: &str) -> Source {
    Source::Stdin(format!(
        "experiment \"x\" {{\n    algorithm \"ppo\"\n    env \"cartpole\" {{\n        envs 8\n    }}\n{body}}}\n"
    ))
}

/// The one error `body` gives: its code, line, label and help.
fn only_error(body: &str) -> (String, usize, String, String) {
    common::only_error(&text(body))
}

#[test]
fn a_core_and_keep_obs_resolve_and_round_trip() {
    let body = "    network \"mlp\" {\n        core \"gru\"\n        core-size 32\n    }\n    env \"cartpole\" {\n        wrappers {\n            keep-obs 2 0\n        }\n    }\n";
    let resolved = resolve(&text(body), &[]).expect("resolves").experiment;
    assert_eq!(resolved.network.core, Some(Core::Gru));
    assert_eq!(resolved.network.core_size, 32);
    assert!(resolved.network.shared());
    assert_eq!(
        resolved.env.wrappers,
        vec![Wrapper::KeepObs { mask: 0b101 }]
    );
    assert_eq!(
        resolved.observation(),
        Some(ObsSpace::vector(2, Dtype::F32))
    );
    let canonical = canonical_kdl(&resolved);
    assert!(canonical.contains("keep-obs 0 2\n"), "{canonical}");
    let again = resolve(&Source::Stdin(canonical), &[]).expect("canonical resolves");
    assert_eq!(again.experiment, resolved);
}

#[test]
fn no_core_is_the_default() {
    let resolved = resolve(&text(""), &[]).expect("resolves").experiment;
    assert_eq!(resolved.network.core, None);
}

#[test]
fn keep_obs_outside_the_observation_is_located() {
    let body =
        "    env \"cartpole\" {\n        wrappers {\n            keep-obs 0 4\n        }\n    }\n";
    let (code, line, label, help) = only_error(body);
    assert_eq!(code, "config::wrapper-mismatch");
    assert_eq!(line, 8);
    assert_eq!(label, "entry 4 is outside the observation");
    assert!(help.contains("keep entries 0 to 3"), "{help}");
}

#[test]
fn keep_obs_refuses_a_repeated_entry_and_needs_one() {
    let body =
        "    env \"cartpole\" {\n        wrappers {\n            keep-obs 1 1\n        }\n    }\n";
    let (code, line, label, _) = only_error(body);
    assert_eq!(
        (code.as_str(), line, label.as_str()),
        ("config::duplicate-value", 8, "second time")
    );
    let body =
        "    env \"cartpole\" {\n        wrappers {\n            keep-obs\n        }\n    }\n";
    let (code, line, _, _) = only_error(body);
    assert_eq!((code.as_str(), line), ("config::missing-value", 8));
}

#[test]
fn keep_obs_needs_vector_observations() {
    let text = Source::Stdin(
        "experiment \"x\" {\n    algorithm \"ppo\"\n    env \"minatar-breakout\" {\n        wrappers {\n            keep-obs 0\n        }\n    }\n    network \"minatar-cnn\"\n}\n".into(),
    );
    let diags = resolve(&text, &[]).unwrap_err();
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::wrapper-mismatch");
    assert_eq!(d.label(), Some("needs vector observations"));
}

#[test]
fn a_core_size_without_a_core_is_an_error() {
    let (code, line, _, help) = only_error("    network \"mlp\" {\n        core-size 32\n    }\n");
    assert_eq!((code.as_str(), line), ("config::inconsistent", 7));
    assert!(help.contains("core \"lstm\""), "{help}");
}

#[test]
fn a_core_needs_a_shared_torso() {
    let (code, line, label, _) = only_error(
        "    network \"mlp\" {\n        actor-critic \"separate\"\n        core \"lstm\"\n    }\n",
    );
    assert_eq!((code.as_str(), line), ("config::inconsistent", 8));
    assert_eq!(label, "one core between the torso and both heads");
}

#[test]
fn a_core_refuses_env_groups() {
    let (code, line, _, _) = only_error(
        "    network \"mlp\" {\n        core \"lstm\"\n    }\n    train {\n        env-groups 2\n    }\n",
    );
    assert_eq!((code.as_str(), line), ("config::inconsistent", 10));
}

#[test]
fn recurrent_minibatches_must_divide_the_environments() {
    // 8 environments x rollout 128 split into 16 minibatches of steps, but not of environments.
    let (code, line, label, help) = only_error(
        "    algorithm \"ppo\" {\n        minibatches 16\n    }\n    network \"mlp\" {\n        core \"lstm\"\n    }\n",
    );
    assert_eq!((code.as_str(), line), ("config::not-divisible", 7));
    assert_eq!(label, "does not divide 8");
    assert!(help.contains("whole environment sequences"), "{help}");
}

#[test]
fn dqn_has_no_recurrent_core() {
    let text = Source::Stdin(
        "experiment \"x\" {\n    algorithm \"dqn\"\n    env \"cartpole\"\n    network \"mlp\" {\n        core \"lstm\"\n    }\n}\n".into(),
    );
    let diags = resolve(&text, &[]).unwrap_err();
    let d = diags
        .iter()
        .find(|d| d.message().contains("no recurrent policy"));
    assert!(
        d.is_some_and(|d| d.line_column().unwrap().0 == 5),
        "{diags:?}"
    );
}

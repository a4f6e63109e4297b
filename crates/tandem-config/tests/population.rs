//! `population { ... }`: several members trained at once, each on its share of the devices.
//! What it resolves to (the ranks of one learner, the sizes divided over them), the canonical
//! and JSON round trips and the hash, a member's own experiment, and the mistakes it refuses at
//! their place.

mod common;

use common::{resolved, the_error as only_error};
use tandem_config::*;

fn text(devices: usize, extra: &str, population: &str) -> String {
    format!(
        "experiment \"x\" {{\n    devices count={devices} kind=\"cpu\"\n    algorithm \"ppo\"\n    env \"cartpole\" {{ envs 8; }}\n{extra}    population {{\n{population}    }}\n}}\n"
    )
}

const EXPLORE: &str = "        members 2\n        explore {\n            algorithm.lr factor=1.25 min=1e-4 max=1e-2\n            algorithm.entropy-coef 0.01 0 0.001 spread=#false\n        }\n";

#[test]
fn a_population_divides_sizes_over_a_members_ranks_and_round_trips() {
    let e = resolved(&text(4, "", EXPLORE));
    assert_eq!((e.job_ranks(), e.world_size()), (4, 2));
    // Global sizes are a member's: 8 environments over its 2 ranks.
    assert_eq!(e.per_rank_envs(), 4);
    let p = &e.population;
    assert_eq!((p.members, p.period, p.exploit), (Some(2), 50_000, 0.25));
    assert_eq!(p.objective, Objective::Score);
    // Sorted by path, a list ascending.
    let explored: Vec<&str> = p.explore.0.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(explored, ["algorithm.entropy-coef", "algorithm.lr"]);
    assert_eq!(
        p.explore.0[0].rule,
        ExploreRule::Values(vec![0.0, 0.001, 0.01])
    );
    assert!(!p.explore.0[0].spread && p.explore.0[1].spread);
    let canonical = canonical_kdl(&e);
    assert!(
        canonical.contains(
            "        explore {\n            algorithm.entropy-coef 0.0 0.001 0.01 spread=#false\n            algorithm.lr factor=1.25 min=0.0001 max=0.01 spread=#true\n        }\n"
        ),
        "{canonical}"
    );
    let again = resolved(&canonical);
    assert_eq!(again, e);
    let from_json = resolve(&Source::Stdin(canonical_json(&e)), &[])
        .unwrap()
        .experiment;
    assert_eq!(config_hash(&from_json), config_hash(&e));
    // The population enters the hash.
    let other = resolved(&text(4, "", &EXPLORE.replace("factor=1.25", "factor=1.5")));
    assert_ne!(config_hash(&other), config_hash(&e));
}

#[test]
fn a_member_is_its_share_of_the_devices_with_its_seed_and_values() {
    let e = resolved(&text(4, "", EXPLORE));
    let member = e
        .for_member(1, 77, &[("algorithm.lr".into(), 0.003)])
        .unwrap();
    assert_eq!(member.devices.len(), 2);
    assert_eq!(member.seed, 77);
    assert_eq!(member.population.members, None);
    assert!(member.population.explore.0.is_empty());
    let Algorithm::Ppo(ppo) = &member.algorithm else {
        panic!()
    };
    assert_eq!(ppo.lr, 0.003);
    assert_eq!(member.per_rank_envs(), e.per_rank_envs());
    assert_eq!(e.number_at("algorithm.entropy-coef"), Some(0.01));
    assert_eq!(e.number_at("algorithm.value-clip"), None);
    // A value out of the setting's range is refused as a `--set` would be.
    assert!(
        e.for_member(0, 1, &[("algorithm.lr".into(), -1.0)])
            .is_err()
    );
}

#[test]
fn members_must_share_the_devices_equally() {
    let d = only_error(&text(3, "", "        members 2\n"));
    assert_eq!(d.message(), "2 members cannot share 3 device(s) equally");
    assert_eq!(d.label(), Some("does not divide the devices"));
    assert_eq!(d.line_column().map(|(l, _)| l), Some(6));
}

#[test]
fn settings_a_population_cannot_have_are_refused_at_their_place() {
    let cases = [
        (
            text(
                2,
                "    train { sampling \"pipelined\"; }\n",
                "        members 2\n",
            ),
            "a population cannot have pipelined or free sampling yet",
        ),
        (
            text(2, "", "        members 2\n        objective \"eval\"\n"),
            "a population cannot have an objective of evaluations yet",
        ),
        (
            text(2, "", "        period 1000\n"),
            "`period` has no effect without a population",
        ),
        (
            text(
                1,
                "",
                "        explore { algorithm.lr factor=2 min=1e-4 max=1e-3; }\n",
            ),
            "`explore` has no effect without a population",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.adam-eps factor=2 min=1e-8 max=1e-4; }\n",
            ),
            "ppo cannot explore `algorithm.adam-eps`",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.value-clip factor=2 min=0.1 max=1 spread=#false; }\n",
            ),
            "`algorithm.value-clip` is #null: members cannot start from it",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.epochs 1 2; }\n",
            ),
            "`algorithm.epochs` cannot be explored",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr factor=1 min=1e-4 max=1e-3; }\n",
            ),
            "the factor of `algorithm.lr` is out of range",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr factor=2 min=1e-3 max=1e-4; }\n",
            ),
            "the range of `algorithm.lr` is empty or not positive",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr factor=2 min=1e-4; }\n",
            ),
            "`algorithm.lr` needs factor=, min= and max=",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr 1e-3 factor=2; }\n",
            ),
            "`algorithm.lr` needs one rule",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr 1e-3 1e-3; }\n",
            ),
            "`algorithm.lr` needs two or more different values",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore { algorithm.lr 1e-3 -1; }\n",
            ),
            "`algorithm.lr` is out of range",
        ),
        (
            text(
                2,
                "",
                "        members 2\n        explore {\n            algorithm.lr 1e-3 1e-2\n            algorithm.lr 1e-4 1e-2\n        }\n",
            ),
            "`algorithm.lr` is explored twice",
        ),
    ];
    for (text, message) in cases {
        let d = only_error(&text);
        assert_eq!(d.message(), message, "{text}");
        assert!(d.label().is_some() && d.help().is_some(), "{d:?}");
    }
}

#[test]
fn an_off_policy_learner_explores_nothing_yet() {
    let text = "experiment \"x\" {\n    devices count=2 kind=\"cpu\"\n    algorithm \"dqn\"\n    env \"cartpole\"\n    population {\n        members 2\n        explore { algorithm.lr factor=2 min=1e-5 max=1e-3; }\n    }\n}\n";
    let d = only_error(text);
    assert_eq!(d.message(), "dqn cannot explore `algorithm.lr`");
    assert!(d.help().unwrap().contains("ppo or a2c"), "{:?}", d.help());
    // Without exploring, a dqn population is two members side by side.
    let plain = text.replace(
        "        explore { algorithm.lr factor=2 min=1e-5 max=1e-3; }\n",
        "",
    );
    assert_eq!(resolved(&plain).world_size(), 1);
}

#[test]
fn validate_says_what_each_member_runs() {
    let resolved = resolve(&Source::Stdin(text(4, "", EXPLORE)), &[]).unwrap();
    let line = cli::cost_line(&resolved);
    assert!(
        line.starts_with("2 members of 2 rank(s), each runs 1000448 steps"),
        "{line}"
    );
}

/// Members ranked by a scalar need its tag; a tag without that objective, or without a
/// population, is refused where it is written.
#[test]
fn a_scalar_objective_names_its_scalar() {
    let ranked = |extra: &str| text(2, "", &format!("        members 2\n{extra}"));
    let e = resolved(&ranked(
        "        objective \"scalar\"\n        objective-scalar \"loss/entropy\"\n",
    ));
    assert_eq!(e.population.objective, Objective::Scalar);
    assert_eq!(
        e.population.objective_scalar.as_deref(),
        Some("loss/entropy")
    );
    assert_eq!(resolved(&canonical_kdl(&e)), e);
    let d = only_error(&ranked("        objective \"scalar\"\n"));
    assert_eq!(d.message(), "members ranked by a scalar need its tag");
    assert!(
        d.help().unwrap().contains("objective-scalar"),
        "{:?}",
        d.help()
    );
    let d = only_error(&ranked("        objective-scalar \"loss/entropy\"\n"));
    assert_eq!(
        d.message(),
        "`objective-scalar` has no effect unless members are ranked by a scalar"
    );
    let alone = "experiment \"x\" {\n    algorithm \"ppo\"\n    env \"cartpole\"\n    population {\n        objective-scalar \"loss/entropy\"\n    }\n}\n";
    let d = only_error(alone);
    assert_eq!(
        d.message(),
        "`objective-scalar` has no effect without a population"
    );
}

//! `env "gymnasium" { action-mask }`: what it resolves to, the canonical round trip, and a
//! located error where a mask cannot be used.

mod common;

use common::only_error;
use tandem_config::*;

/// An experiment with `algorithm` and a gymnasium environment whose block ends with `env`.
fn text(algorithm: &str, env: &str) -> Source {
    Source::Stdin(format!(
        "experiment \"x\" {{\n    algorithm \"{algorithm}\"\n    env \"gymnasium\" {{\n        id \"TandemTest/Masked-v0\"\n{env}    }}\n}}\n"
    ))
}

fn mask_of(resolved: &Resolved) -> ActionMask {
    match &resolved.experiment.env.game {
        Game::Gymnasium(gym) => gym.action_mask,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_mask_defaults_to_none_and_round_trips() {
    let none = resolve(&text("ppo", ""), &[]).unwrap();
    assert_eq!(mask_of(&none), ActionMask::None);
    let canonical = canonical_kdl(&none.experiment);
    assert!(canonical.contains("action-mask \"none\""), "{canonical}");
    for (name, mask) in [
        ("info", ActionMask::Info),
        ("observation", ActionMask::Observation),
    ] {
        let set = format!("        action-mask \"{name}\"\n");
        let resolved = resolve(&text("a2c", &set), &[]).unwrap();
        assert_eq!(mask_of(&resolved), mask);
        let again = resolve(&Source::Stdin(canonical_kdl(&resolved.experiment)), &[]).unwrap();
        assert_eq!(again.experiment, resolved.experiment);
    }
    let diags = resolve(&text("ppo", "        action-mask \"obs\"\n"), &[]).unwrap_err();
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::unknown-value", "{}", d.message());
}

#[test]
fn only_ppo_and_a2c_take_a_mask() {
    for algorithm in ["dqn", "sac", "td3"] {
        let (code, line, label, help) =
            only_error(&text(algorithm, "        action-mask \"info\"\n"));
        assert_eq!(
            (code.as_str(), line),
            ("config::inconsistent", 5),
            "{algorithm}"
        );
        assert_eq!(label, "an action mask");
        assert!(help.contains("ppo and a2c"), "{help}");
    }
}

#[test]
fn wrappers_that_would_change_the_mask_are_refused_with_it() {
    for wrapper in ["normalize-obs", "keep-obs 0"] {
        let env = format!(
            "        action-mask \"info\"\n        wrappers {{\n            {wrapper}\n        }}\n"
        );
        let (code, line, _, help) = only_error(&text("ppo", &env));
        assert_eq!(
            (code.as_str(), line),
            ("config::inconsistent", 5),
            "{wrapper}"
        );
        assert!(
            help.contains("the action mask is the observation's last entries"),
            "{help}"
        );
    }
}

//! `env "pettingzoo" { ... }`: what it resolves to, the canonical round trip (KDL and JSON)
//! and hash, every size counting its `agents` as rows, and the mistakes it refuses at their
//! place.

use tandem_config::*;

fn text(inner: &str, rest: &str) -> String {
    format!(
        "experiment \"x\" {{\n    env \"pettingzoo\" {{\n        module \"mpe2.simple_spread_v3\"\n{inner}    }}\n{rest}}}\n"
    )
}

const SPREAD: &str = "        agents 3\n        make-args { N 3; max_cycles 25; }\n";

fn zoo(e: &Experiment) -> PettingZoo {
    match &e.env.game {
        Game::PettingZoo(z) => z.clone(),
        other => panic!("not pettingzoo: {other:?}"),
    }
}

fn only_error(text: &str) -> Diagnostic {
    let diags = resolve(&Source::Stdin(text.into()), &[]).expect_err("refused");
    assert_eq!(diags.len(), 1, "{diags:?}");
    diags.iter().next().unwrap().clone()
}

#[test]
fn a_pettingzoo_environment_resolves_round_trips_and_enters_the_hash() {
    let e = resolve(&Source::Stdin(text(SPREAD, "")), &[])
        .unwrap()
        .experiment;
    let z = zoo(&e);
    assert_eq!(z.module, "mpe2.simple_spread_v3");
    assert_eq!(z.function, "parallel_env");
    assert_eq!(z.agents, 3);
    assert_eq!(
        z.make_args,
        [
            ("N".to_string(), Scalar::Int(3)),
            ("max_cycles".to_string(), Scalar::Int(25))
        ]
    );
    assert_eq!(z.action_mask, ActionMask::None);
    assert!(e.env.game.is_multi_agent());
    // Every agent is a row: the sizes the config derives count them.
    assert_eq!(e.agents_per_env(), 3);
    assert_eq!(e.per_rank_rows(), e.per_rank_envs() * 3);
    assert_eq!(e.batch_size(), e.env.envs * 3 * e.train.rollout);
    let canonical = canonical_kdl(&e);
    for line in [
        "    env \"pettingzoo\" {\n",
        "        module \"mpe2.simple_spread_v3\"\n",
        "        function \"parallel_env\"\n",
        "        agents 3\n",
    ] {
        assert!(canonical.contains(line), "{line:?} not in {canonical}");
    }
    assert_eq!(parse_canonical(&canonical).unwrap(), e);
    let back = resolve(&Source::Stdin(canonical_json(&e)), &[])
        .unwrap()
        .experiment;
    assert_eq!(back, e);
    // Another agent count, function or argument is another run.
    let four = text(
        "        agents 4\n        make-args { N 4; max_cycles 25; }\n",
        "",
    );
    let four = resolve(&Source::Stdin(four), &[]).unwrap().experiment;
    assert_ne!(config_hash(&four), config_hash(&e));
    let sets = vec!["env.function=\"env\"".to_string()];
    let other = resolve(&Source::Stdin(text(SPREAD, "")), &sets)
        .unwrap()
        .experiment;
    assert_eq!(zoo(&other).function, "env");
    assert_ne!(config_hash(&other), config_hash(&e));
}

#[test]
fn the_agent_count_is_required_and_a_bad_setting_is_refused_at_its_line() {
    let d = only_error(&text("", ""));
    assert!(d.message().contains("agents"), "{}", d.message());
    let d = only_error(&text("        agents 0\n", ""));
    assert_eq!(d.line_column().map(|l| l.0), Some(4));
    let d = only_error(&text("        agents 3\n        id \"CartPole-v1\"\n", ""));
    assert_eq!(d.line_column().map(|l| l.0), Some(5));
    let d = only_error(&text("        agents 3\n        make-args { 3N 1; }\n", ""));
    assert_eq!(d.line_column().map(|l| l.0), Some(5));
}

/// Several policies resolve over a pettingzoo environment, whose agent ids are known once it
/// is built (the run checks the patterns then), a turn-based one included; wrappers are
/// refused.
#[test]
fn several_policies_wait_for_the_agents_and_wrappers_are_refused() {
    let policies = "    train {\n        policies {\n            a \"agent_*\"\n        }\n    }\n";
    let e = resolve(&Source::Stdin(text(SPREAD, policies)), &[])
        .unwrap()
        .experiment;
    assert_eq!(e.train.policies.0.len(), 1);
    // Over the built game's agents, the run's check names what is wrong.
    let vector = |n| ObsSpace::vector(n, tandem_spec::Dtype::F32);
    let agents = [
        ("agent_0".to_string(), vector(18)),
        ("adversary_0".to_string(), vector(18)),
    ];
    let misfits: Vec<String> = e
        .policy_misfits(&agents)
        .iter()
        .map(|m| m.message(&e))
        .collect();
    assert_eq!(misfits, ["agent `adversary_0` is played by no policy"]);
    // A policy a side of a turn-based game (each learns from its own turns).
    let sides = "    train {\n        policies {\n            first \"player_0\"\n            second \"player_1\"\n        }\n    }\n";
    let e = resolve(&Source::Stdin(text(CONNECT_FOUR, sides)), &[])
        .unwrap()
        .experiment;
    assert_eq!(e.train.policies.0.len(), 2);
    let wrapped = text(
        &format!("{SPREAD}        wrappers {{\n            normalize-obs\n        }}\n"),
        "",
    );
    let d = only_error(&wrapped);
    assert!(d.message().contains("normalize-obs"), "{}", d.message());
}

/// A centralised critic reads every agent's observation in the game, whose lengths the
/// resolver knows only for its catalogue's games.
#[test]
fn a_centralised_critic_is_not_yet_for_pettingzoo() {
    let d = only_error(&text(
        SPREAD,
        "    network \"mlp\" {\n        critic-input \"state\"\n    }\n",
    ));
    assert!(
        d.message().contains("cannot read pettingzoo yet"),
        "{}",
        d.message()
    );
}

const CONNECT_FOUR: &str = "        function \"env\"\n        api \"aec\"\n        agents 2\n";

/// `api "aec"`: a turn-based game resolves, enters the hash, and is refused, at the `api` line
/// with the other setting named, where its learner could not keep each row's own turns.
#[test]
fn a_turn_based_game_resolves_and_its_learners_limits_are_refused_at_api() {
    let e = resolve(&Source::Stdin(text(CONNECT_FOUR, "")), &[])
        .unwrap()
        .experiment;
    assert_eq!(zoo(&e).api, ZooApi::Aec);
    assert!(e.env.game.takes_turns());
    assert!(canonical_kdl(&e).contains("        api \"aec\"\n"));
    let parallel = resolve(
        &Source::Stdin(text(CONNECT_FOUR, "")),
        &["env.api=\"parallel\"".to_string()],
    )
    .unwrap()
    .experiment;
    assert!(!parallel.env.game.takes_turns());
    assert_ne!(config_hash(&parallel), config_hash(&e));
    let refused = [
        ("    algorithm \"dqn\"\n", "cannot learn with dqn yet"),
        (
            "    train {\n        sampling \"pipelined\"\n    }\n",
            "cannot sample other than synchronously yet",
        ),
        (
            "    train {\n        env-groups 2\n    }\n",
            "cannot step the environments in groups yet",
        ),
        (
            "    network \"mlp\" {\n        core \"lstm\"\n        actor-critic \"shared\"\n    }\n",
            "cannot carry a recurrent core yet",
        ),
    ];
    for (rest, said) in refused {
        let d = only_error(&text(CONNECT_FOUR, rest));
        assert!(
            d.message() == format!("a turn-based game {said}"),
            "{rest}: {}",
            d.message()
        );
        assert_eq!(d.line_column().map(|l| l.0), Some(5), "{rest}");
    }
    // One turn a game on each step: 3 envs x rollout 4 = 12 turns a rank, not 8 minibatches
    // (the 24 rows would split).
    let d = only_error(&text(
        &format!("{CONNECT_FOUR}        envs 3\n"),
        "    algorithm \"ppo\" {\n        minibatches 8\n    }\n    train {\n        rollout 4\n    }\n",
    ));
    assert!(
        d.message()
            .contains("a rank's 12 turns cannot be split into 8 minibatches"),
        "{}",
        d.message()
    );
}

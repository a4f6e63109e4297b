//! `train { policies { ... } }`: several policies in one multi-agent game. What it resolves to
//! (each policy's agents and observation), the canonical and JSON round trips and the hash, and
//! the mistakes it refuses at their place: an agent no policy or two policies play, a pattern
//! that matches no agent, a game of one agent, and the settings several policies cannot share
//! a batch with yet.

use tandem_config::*;

fn text(env: &str, train: &str) -> String {
    format!(
        "experiment \"x\" {{\n    env \"{env}\"\n    train {{\n        rollout 16\n{train}    }}\n}}\n"
    )
}

fn tag(policies: &str) -> String {
    text(
        "mpe-simple-tag",
        &format!("        policies {{\n{policies}        }}\n"),
    )
}

const TWO: &str = "            predators \"adversary_*\"\n            prey \"agent_*\"\n";

fn only_error(text: &str, sets: &[&str]) -> Diagnostic {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let diags = resolve(&Source::Stdin(text.into()), &sets).expect_err("refused");
    assert_eq!(diags.len(), 1, "{diags:?}");
    diags.iter().next().unwrap().clone()
}

#[test]
fn patterns_match_agent_ids() {
    assert!(agent_matches("adversary_*", "adversary_0"));
    assert!(agent_matches("*_1", "adversary_1"));
    assert!(agent_matches("agent_0", "agent_0"));
    assert!(agent_matches("*", "agent_0"));
    assert!(agent_matches("a*_*0", "adversary_10"));
    assert!(!agent_matches("agent_*", "adversary_0"));
    assert!(!agent_matches("agent_0", "agent_01"));
    assert!(!agent_matches("*_2", "agent_0"));
}

#[test]
fn each_policy_plays_its_agents_and_the_map_round_trips() {
    let e = resolve(&Source::Stdin(tag(TWO)), &[]).unwrap().experiment;
    let plans = e.policy_plans();
    let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    // Sorted by name: the order of their tensors in every list.
    assert_eq!(names, ["predators", "prey"]);
    assert_eq!(plans[0].agents, [0, 1, 2]);
    assert_eq!(plans[1].agents, [3]);
    assert_eq!(plans[0].observation.len(), 16);
    assert_eq!(plans[1].observation.len(), 14);
    let canonical = canonical_kdl(&e);
    assert!(
        canonical.contains(
            "        policies {\n            predators \"adversary_*\"\n            prey \"agent_*\"\n        }\n"
        ),
        "{canonical}"
    );
    assert_eq!(parse_canonical(&canonical).unwrap(), e);
    let json = canonical_json(&e);
    let back = resolve(&Source::Stdin(json), &[]).unwrap().experiment;
    assert_eq!(back, e);
    // One shared policy (the default) is another run.
    let shared = resolve(&Source::Stdin(tag("")), &[]).unwrap().experiment;
    assert!(shared.policy_plans().is_empty());
    assert!(canonical_kdl(&shared).contains("        policies {}\n"));
    assert_ne!(config_hash(&shared), config_hash(&e));
}

#[test]
fn every_agent_is_played_by_exactly_one_policy() {
    let d = only_error(&tag("            predators \"adversary_*\"\n"), &[]);
    assert_eq!(d.code(), "config::policies");
    assert!(
        d.message()
            .contains("agent `agent_0` is played by no policy"),
        "{}",
        d.message()
    );
    assert!(
        d.help()
            .unwrap()
            .contains("adversary_0, adversary_1, adversary_2, agent_0")
    );
    let twice = "            first \"adversary_0\"\n            hunters \"adversary_*\"\n            prey \"agent_*\"\n";
    let d = only_error(&tag(twice), &[]);
    assert!(
        d.message()
            .contains("agent `adversary_0` is played by first and hunters"),
        "{}",
        d.message()
    );
    // At the second policy that plays it, the first named beside it.
    assert_eq!(d.line_column().map(|l| l.0), Some(7));
    let none = "            predators \"adversary_*\"\n            prey \"agent_*\"\n            ghosts \"ghost_*\"\n";
    let d = only_error(&tag(none), &[]);
    assert!(
        d.message()
            .contains("policy `ghosts`'s pattern `ghost_*` matches no agent"),
        "{}",
        d.message()
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(8));
    // A policy of agents that see observations of different lengths has no one network.
    let d = only_error(&tag("            everyone \"*\"\n"), &[]);
    assert_eq!(d.line_column().map(|l| l.0), Some(6));
    assert!(
        d.message()
            .contains("observe different lengths (16, 16, 16, 14)"),
        "{}",
        d.message()
    );
}

#[test]
fn policies_need_a_game_of_several_agents() {
    let d = only_error(
        &text(
            "cartpole",
            "        policies {\n            a \"agent_*\"\n        }\n",
        ),
        &[],
    );
    assert_eq!(d.code(), "config::inconsistent");
    assert!(
        d.message().contains("cartpole has one agent"),
        "{}",
        d.message()
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(5));
}

#[test]
fn names_and_patterns_are_checked_where_they_are_written() {
    let d = only_error(&tag("            \"2nd\" \"agent_*\"\n"), &[]);
    assert_eq!(d.code(), "config::policy-name");
    let d = only_error(&tag("            prey \"agent 0\"\n"), &[]);
    assert_eq!(d.code(), "config::agent-pattern");
    assert_eq!(d.line_column().map(|l| l.0), Some(6));
    let d = only_error(&tag("            prey\n"), &[]);
    assert_eq!(d.code(), "config::missing-value");
    let d = only_error(
        &tag("            prey \"agent_*\"\n            prey \"a*\"\n"),
        &[],
    );
    assert_eq!(d.code(), "config::duplicate-setting");
    assert_eq!(d.line_column().map(|l| l.0), Some(7));
}

#[test]
fn settings_that_cannot_share_a_batch_yet_are_refused_with_the_fix() {
    let cases = [
        ("algorithm=dqn", "learn with dqn"),
        (
            "train.sampling=\"pipelined\"",
            "sample other than synchronously",
        ),
        ("network.core=\"lstm\"", "carry a recurrent core"),
    ];
    for (set, what) in cases {
        let d = only_error(&tag(TWO), &[set]);
        assert!(d.message().contains(what), "{set}: {}", d.message());
    }
    // PPO splits each policy's own rows: 256 minibatches divide all 8 games x 4 agents x 16
    // steps, not the predators' 8 x 3 x 16.
    let d = only_error(&tag(TWO), &["algorithm.minibatches=256"]);
    assert!(
        d.message()
            .contains("policy `predators`'s 384 transitions a rank cannot be split into 256"),
        "{}",
        d.message()
    );
}

/// `network.critic-input "state"` (a centralised critic, MAPPO): for separate MLP torsos in a
/// game of several agents, with one policy or several; refused elsewhere with the fix.
#[test]
fn a_centralised_critic_needs_a_game_of_several_agents_and_a_critic_of_its_own() {
    let state = ["network.critic-input=\"state\""];
    let spread = text("mpe-simple-spread", "");
    let e = resolve(&Source::Stdin(spread.clone()), &state.map(String::from))
        .unwrap()
        .experiment;
    assert_eq!(e.network.critic_input, CriticInput::State);
    // One policy plays every agent from its seats: the game's state is read per seat.
    let seated = e.seated_policies();
    assert_eq!(seated.len(), 1);
    assert_eq!(seated[0].name, "default");
    assert_eq!(seated[0].agents, [0, 1, 2]);
    assert!(e.policy_plans().is_empty());
    let several = resolve(&Source::Stdin(tag(TWO)), &state.map(String::from)).unwrap();
    assert_eq!(several.experiment.seated_policies().len(), 2);
    let d = only_error(&text("cartpole", ""), &state);
    assert!(
        d.message().contains("cartpole has one agent"),
        "{}",
        d.message()
    );
    let d = only_error(&spread, &[state[0], "network.actor-critic=\"shared\""]);
    assert!(
        d.message()
            .contains("needs an actor and a critic of their own"),
        "{}",
        d.message()
    );
    let d = only_error(&spread, &[state[0], "train.sampling=\"pipelined\""]);
    assert!(
        d.message()
            .contains("a centralised critic cannot sample other than synchronously"),
        "{}",
        d.message()
    );
}

const OWN: &str = "            predators \"adversary_*\"\n            prey \"agent_*\" {\n                network.hidden 32\n                algorithm.lr 1e-3\n            }\n";

/// A policy's own settings: kept by path with canonical values, in the canonical KDL and JSON
/// forms (the same run, the same hash, from either), in the hash, and applied by
/// `for_policy` to the policy's experiment only.
#[test]
fn a_policys_own_settings_round_trip_and_make_its_experiment() {
    let e = resolve(&Source::Stdin(tag(OWN)), &[]).unwrap().experiment;
    let prey = &e.train.policies.0[1];
    assert_eq!(
        prey.settings,
        [
            ("algorithm.lr".to_string(), "0.001".to_string()),
            ("network.hidden".to_string(), "32".to_string())
        ]
    );
    let canonical = canonical_kdl(&e);
    assert!(
        canonical.contains("            prey \"agent_*\" {\n                algorithm.lr 0.001\n                network.hidden 32\n            }\n"),
        "{canonical}"
    );
    assert_eq!(parse_canonical(&canonical).unwrap(), e);
    let json = canonical_json(&e);
    assert!(json.contains("\"algorithm.lr\""), "{json}");
    let back = resolve(&Source::Stdin(json), &[]).unwrap().experiment;
    assert_eq!(back, e);
    assert_eq!(config_hash(&back), config_hash(&e));
    let plain = resolve(&Source::Stdin(tag(TWO)), &[]).unwrap().experiment;
    assert_ne!(config_hash(&plain), config_hash(&e));
    // The prey's experiment has its settings; the predators' is the run's.
    let own = e.for_policy("prey").unwrap();
    let Algorithm::Ppo(ppo) = &own.algorithm else {
        panic!("ppo")
    };
    assert_eq!(ppo.lr, 1e-3);
    assert!(matches!(&own.network.torso, Torso::Mlp { hidden, .. } if hidden == &[32]));
    assert!(own.train.policies.0.iter().all(|p| p.settings.is_empty()));
    let Algorithm::Ppo(ppo) = &e.for_policy("predators").unwrap().algorithm else {
        panic!("ppo")
    };
    assert_eq!(ppo.lr, 2.5e-4);
    assert_eq!(e.for_policy("predators").unwrap(), e);
}

#[test]
fn a_policys_own_settings_are_refused_at_their_place() {
    let with = |settings: &str| {
        tag(&format!(
            "            predators \"adversary_*\"\n            prey \"agent_*\" {{\n{settings}            }}\n"
        ))
    };
    // Line 8 is the prey's first setting, line 7 the prey.
    let d = only_error(&with("                train.rollout 8\n"), &[]);
    assert_eq!(
        d.message(),
        "policy `prey` cannot have a setting `train.rollout` of its own"
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(8));
    let d = only_error(&with("                algorithm.lr \"fast\"\n"), &[]);
    assert!(
        d.message().contains("wrong type for `algorithm.lr`"),
        "{}",
        d.message()
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(8));
    let d = only_error(
        &with("                algorithm.lr 1e-3\n                algorithm.lr 2e-3\n"),
        &[],
    );
    assert_eq!(d.message(), "policy `prey` sets `algorithm.lr` twice");
    assert_eq!(d.line_column().map(|l| l.0), Some(9));
    // A setting of another algorithm is checked against the policy's whole experiment.
    let d = only_error(&with("                algorithm.epsilon-start 0.5\n"), &[]);
    assert!(
        d.message().starts_with("policy `prey`'s own settings: ")
            && d.message().contains("epsilon-start"),
        "{}",
        d.message()
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(7));
    // A network's layers are a block, which a policy's own settings cannot hold.
    let d = only_error(&with("                network.layers \"linear 8\"\n"), &[]);
    assert_eq!(
        d.message(),
        "policy `prey` cannot have a setting `network.layers` of its own"
    );
    assert_eq!(
        d.label(),
        Some("not an algorithm or network setting written as values")
    );
    assert!(
        d.help()
            .is_some_and(|h| h.contains("not blocks such as `network.layers`"))
    );
}

/// `network.agent-index` makes the one policy a seated one (its input carries the index) and
/// is refused, at its line, where there is no index to tell or the agents are not known.
#[test]
fn the_agents_index_needs_a_game_of_known_agents() {
    let spread = "experiment \"x\" {\n    env \"mpe-simple-spread\"\n    network \"mlp\" {\n        agent-index #true\n    }\n}\n";
    let e = resolve(&Source::Stdin(spread.into()), &[])
        .unwrap()
        .experiment;
    let plans = e.seated_policies();
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].agents, [0, 1, 2]);
    let plain = resolve(
        &Source::Stdin(spread.into()),
        &["network.agent-index=#false".into()],
    )
    .unwrap()
    .experiment;
    assert!(plain.seated_policies().is_empty());
    assert_ne!(config_hash(&plain), config_hash(&e));
    let d = only_error(&spread.replace("mpe-simple-spread", "cartpole"), &[]);
    assert_eq!(
        d.message(),
        "cartpole has one agent: there is no index to tell"
    );
    assert_eq!(d.line_column().map(|l| l.0), Some(4));
    let d = only_error(spread, &["train.sampling=\"pipelined\""]);
    assert_eq!(
        d.message(),
        "the agent's index cannot sample other than synchronously yet"
    );
}

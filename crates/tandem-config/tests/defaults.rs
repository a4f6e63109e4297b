//! Defaults that depend on other settings: what they resolve to for each learner and network
//! (the actor-critic layout; sac's and td3's mlp; the environments and gymnasium workers of a
//! rank) (and what `threads "auto"` makes of a rank's cores),
//! that the resolved config states them, and that a written value always wins.

use tandem_config::*;

fn experiment(algorithm: &str, env: &str, network: &str) -> Source {
    Source::Stdin(format!(
        "experiment \"x\" {{\n    algorithm \"{algorithm}\"\n    env \"{env}\"\n    {network}\n}}\n"
    ))
}

fn shared(algorithm: &str, env: &str, network: &str) -> bool {
    let resolved = resolve(&experiment(algorithm, env, network), &[])
        .unwrap_or_else(|d| panic!("{algorithm} {network} resolves: {d:?}"));
    assert_eq!(
        resolved.provenance.get("network.actor-critic"),
        Some(&Origin::Default)
    );
    resolved.experiment.network.shared()
}

/// A shared MLP lets the critic's unnormalised value loss swamp the policy gradient: with
/// CleanRL's settings it failed CartPole, Acrobot and LunarLander where CleanRL's separate
/// MLPs learn (docs/defaults.md).
#[test]
fn actor_critic_mlps_without_a_core_are_separate() {
    assert!(!shared("ppo", "cartpole", "network \"mlp\""));
    assert!(!shared("a2c", "cartpole", ""));
}

#[test]
fn image_torsos_and_recurrent_cores_are_shared() {
    assert!(shared("ppo", "atari-breakout", "network \"nature-cnn\""));
    assert!(shared("a2c", "minatar-breakout", "network \"minatar-cnn\""));
    assert!(shared(
        "ppo",
        "cartpole",
        "network \"mlp\" { core \"lstm\"; }"
    ));
    assert!(shared(
        "a2c",
        "cartpole",
        "network \"mlp\" { core \"gru\"; }"
    ));
}

/// dqn refuses `actor-critic "separate"`, so its default must not be separate.
#[test]
fn learners_without_a_critic_torso_resolve_shared() {
    assert!(shared("dqn", "cartpole", ""));
}

#[test]
fn the_derived_default_is_written_in_the_canonical_form_and_round_trips() {
    let resolved = resolve(&experiment("ppo", "cartpole", ""), &[]).expect("resolves");
    let canonical = canonical_kdl(&resolved.experiment);
    assert!(
        canonical.contains("actor-critic \"separate\""),
        "{canonical}"
    );
    let again = resolve(&Source::Stdin(canonical), &[]).expect("canonical resolves");
    assert_eq!(again.experiment, resolved.experiment);
}

#[test]
fn a_written_layout_wins_over_the_default() {
    let written = "network \"mlp\" { actor-critic \"shared\"; }";
    let resolved = resolve(&experiment("ppo", "cartpole", written), &[]).expect("resolves");
    assert!(resolved.experiment.network.shared());
    let set = resolve(
        &experiment("ppo", "cartpole", ""),
        &["network.actor-critic=\"shared\"".into()],
    )
    .expect("resolves");
    assert!(set.experiment.network.shared());
}

/// A core set from the command line changes the default too: it is derived after every
/// override.
#[test]
fn an_override_that_adds_a_core_makes_the_default_shared() {
    let resolved = resolve(
        &experiment("ppo", "cartpole", ""),
        &["network.core=\"lstm\"".into()],
    )
    .expect("a core with the default layout resolves");
    assert!(resolved.experiment.network.shared());
}

/// The mlp's widths, activation and initialisation as resolved, each from its default.
fn mlp_defaults(algorithm: &str, env: &str) -> (Vec<usize>, Activation, Init) {
    let resolved = resolve(&experiment(algorithm, env, ""), &[])
        .unwrap_or_else(|d| panic!("{algorithm} resolves: {d:?}"));
    for path in ["network.hidden", "network.activation", "network.init"] {
        assert_eq!(
            resolved.provenance.get(path),
            Some(&Origin::Default),
            "{algorithm}: {path}"
        );
    }
    let network = &resolved.experiment.network;
    let Torso::Mlp { hidden, activation } = &network.torso else {
        panic!("{algorithm}: the default torso is an mlp");
    };
    (hidden.clone(), *activation, network.init)
}

/// sac's and td3's networks start as both peers' do (256 256, ReLU, PyTorch's initialisation),
/// the on-policy learners' and dqn's as CleanRL's classic-control agents (64 64, tanh,
/// orthogonal): docs/defaults.md.
#[test]
fn sac_and_td3_default_to_their_peers_networks() {
    for algorithm in ["sac", "td3"] {
        assert_eq!(
            mlp_defaults(algorithm, "pendulum"),
            (vec![256, 256], Activation::Relu, Init::Torch),
            "{algorithm}"
        );
    }
    for (algorithm, env) in [
        ("ppo", "pendulum"),
        ("a2c", "cartpole"),
        ("dqn", "cartpole"),
    ] {
        assert_eq!(
            mlp_defaults(algorithm, env),
            (vec![64, 64], Activation::Tanh, Init::Orthogonal),
            "{algorithm}"
        );
    }
}

#[test]
fn a_written_network_wins_over_the_learners_default_and_the_default_round_trips() {
    let written = "network \"mlp\" { hidden 64 64; activation \"tanh\"; init \"orthogonal\"; }";
    let resolved = resolve(&experiment("sac", "pendulum", written), &[]).expect("resolves");
    let Torso::Mlp { hidden, activation } = &resolved.experiment.network.torso else {
        panic!("an mlp");
    };
    assert_eq!(
        (
            hidden.clone(),
            *activation,
            resolved.experiment.network.init
        ),
        (vec![64, 64], Activation::Tanh, Init::Orthogonal)
    );
    let set = resolve(
        &experiment("td3", "pendulum", ""),
        &["network.init=\"default\"".into()],
    )
    .expect("resolves");
    assert_eq!(set.experiment.network.init, Init::Default);
    let defaulted = resolve(&experiment("sac", "pendulum", ""), &[]).expect("resolves");
    let canonical = canonical_kdl(&defaulted.experiment);
    assert!(canonical.contains("hidden 256 256"), "{canonical}");
    let again = resolve(&Source::Stdin(canonical), &[]).expect("canonical resolves");
    assert_eq!(again.experiment, defaulted.experiment);
}

/// The resolved `env.envs` (and its origin) of `algorithm` on `env` with `extra` inside the
/// experiment.
fn envs(algorithm: &str, env: &str, extra: &str) -> (usize, Option<Origin>) {
    let resolved = resolve(&experiment(algorithm, env, extra), &[])
        .unwrap_or_else(|d| panic!("{algorithm} {extra} resolves: {d:?}"));
    (
        resolved.experiment.env.envs,
        resolved.provenance.get("env.envs").cloned(),
    )
}

/// The off-policy learners train on one environment per rank, as both peers train on one
/// (each gradient step follows one new transition); the on-policy ones on 8.
#[test]
fn off_policy_learners_default_to_one_environment_per_rank() {
    let defaulted = Some(Origin::Default);
    for algorithm in ["dqn", "sac", "td3"] {
        let env = if algorithm == "dqn" {
            "cartpole"
        } else {
            "pendulum"
        };
        assert_eq!(
            envs(algorithm, env, ""),
            (1, defaulted.clone()),
            "{algorithm}"
        );
        assert_eq!(
            envs(algorithm, env, "devices \"cpu\" \"cpu\""),
            (2, defaulted.clone()),
            "{algorithm} on 2 ranks"
        );
    }
    for algorithm in ["ppo", "a2c"] {
        assert_eq!(envs(algorithm, "cartpole", ""), (8, defaulted.clone()));
    }
    let written =
        resolve(&experiment("sac", "pendulum", ""), &["env.envs=4".into()]).expect("resolves");
    assert_eq!(written.experiment.env.envs, 4);
}

/// A rank's gymnasium workers each step at least one environment: the default of 2 shrinks to
/// a rank's one environment, while 2 written for one environment is still refused.
#[test]
fn gymnasium_workers_default_to_at_most_the_ranks_environments() {
    let workers = |algorithm: &str, sets: &[&str]| {
        let source = Source::Stdin(format!(
            "experiment \"x\" {{\n    algorithm \"{algorithm}\"\n    env \"gymnasium\" {{ id \"Pendulum-v1\"; }}\n}}\n"
        ));
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        resolve(&source, &sets).map(|r| {
            let Game::Gymnasium(g) = &r.experiment.env.game else {
                panic!("a gymnasium game");
            };
            (g.workers, r.provenance.get("env.workers").cloned())
        })
    };
    assert_eq!(
        workers("sac", &[]).expect("resolves"),
        (1, Some(Origin::Default))
    );
    assert_eq!(
        workers("ppo", &[]).expect("resolves"),
        (2, Some(Origin::Default))
    );
    assert_eq!(
        workers("ppo", &["env.envs=1"]).expect("resolves"),
        (1, Some(Origin::Default))
    );
    assert!(workers("sac", &["env.workers=2"]).is_err());
}

/// `threads "auto"` is decided at launch from the rank's cores and the network: one thread
/// for MLP layers too small to split, every core of the rank's share for CNNs.
#[test]
fn auto_threads_follow_the_network() {
    let threads = |algorithm: &str, env: &str, network: &str, cores: usize| {
        let resolved = resolve(&experiment(algorithm, env, network), &[]).expect("resolves");
        assert_eq!(resolved.experiment.threads, Threads::Auto);
        resolved.experiment.threads_for_rank(cores)
    };
    // (learner, game, network, the rank's cores, threads)
    let cases = [
        ("ppo", "cartpole", "", 8, 1),
        // 64x64 over SAC's 256 rows is small; its default 256x256 (CleanRL's) is not.
        ("sac", "pendulum", "network \"mlp\" { hidden 64 64; }", 8, 1),
        ("sac", "pendulum", "", 8, 8),
        // PPO counts one minibatch: 8 envs x 128 steps / 4 minibatches = 256 rows; 256 rows
        // of 128x128 are SMALL_LAYER_MACS exactly, the first count that splits.
        (
            "ppo",
            "cartpole",
            "network \"mlp\" { hidden 127 128; }",
            8,
            1,
        ),
        (
            "ppo",
            "cartpole",
            "network \"mlp\" { hidden 128 128; }",
            8,
            8,
        ),
        ("dqn", "minatar-breakout", "network \"minatar-cnn\"", 8, 8),
        ("ppo", "atari-breakout", "network \"nature-cnn\"", 8, 8),
        ("ppo", "atari-breakout", "network \"impala-cnn\"", 3, 3),
        ("ppo", "atari-breakout", "network \"nature-cnn\"", 0, 1),
    ];
    for (algorithm, env, network, cores, expected) in cases {
        assert_eq!(
            threads(algorithm, env, network, cores),
            expected,
            "{algorithm} on {env} with `{network}` and {cores} cores"
        );
    }
    // A count written is the count.
    let written =
        resolve(&experiment("ppo", "cartpole", ""), &["threads=3".into()]).expect("resolves");
    assert_eq!(written.experiment.threads_for_rank(8), 3);
}

//! The games of the config language: the catalogue's names, the suggestions for misspelt ones,
//! learners refusing action spaces they cannot take, and the gymnasium kind (its settings,
//! canonical form, hash, and the checks made and skipped for it).

use tandem_config::*;

fn stdin(text: &str) -> Source {
    Source::Stdin(text.to_string())
}

fn with_env(env: &str) -> String {
    format!("experiment \"x\" {{\n    {env}\n}}\n")
}

fn errors(text: &str, sets: &[&str]) -> Vec<Diagnostic> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    resolve(&stdin(text), &sets)
        .expect_err("the config is refused")
        .iter()
        .cloned()
        .collect()
}

fn experiment(text: &str) -> Experiment {
    resolve(&stdin(text), &[]).unwrap().experiment
}

#[test]
fn every_minatar_game_and_atari_rom_is_named() {
    for (name, actions, obs) in [
        ("minatar-asterix", 5, vec![4, 10, 10]),
        ("minatar-freeway", 3, vec![7, 10, 10]),
        ("minatar-space-invaders", 4, vec![6, 10, 10]),
        ("minatar-seaquest", 6, vec![10, 10, 10]),
        ("atari-space-invaders", 6, vec![3, 210, 160]),
        ("atari-ms-pacman", 9, vec![3, 210, 160]),
        ("acrobot", 3, vec![6]),
        ("mountain-car", 3, vec![2]),
        ("mpe-simple-spread", 5, vec![18]),
        // The batch's row: a predator's 16 floats (a prey's 14 are padded to it).
        ("mpe-simple-tag", 5, vec![16]),
    ] {
        let e = experiment(&with_env(&format!("env \"{name}\"")));
        assert_eq!(e.env.game.name(), name);
        assert_eq!(e.actions(), Some(ActionSpace::Discrete { n: actions }));
        assert_eq!(e.observation().unwrap().network_shape(), obs);
    }
    let e = experiment(&with_env("env \"atari-ms-pacman\""));
    assert_eq!(e.env.game, Game::Atari { rom: "ms_pacman" });
    // The canonical form names the game as written, and reads back.
    let text = canonical_kdl(&e);
    assert!(text.contains("    env \"atari-ms-pacman\" {\n"), "{text}");
    assert_eq!(parse_canonical(&text).unwrap(), e);
}

#[test]
fn a_misspelt_game_gets_the_nearest_name() {
    for (typed, help) in [
        ("atari-mspacman", "did you mean `atari-ms-pacman`?"),
        (
            "minatar-space-invader",
            "did you mean `minatar-space-invaders`?",
        ),
        (
            "atari-spaceinvaders",
            "did you mean `atari-space-invaders`?",
        ),
        (
            "atari-space_invaders",
            "did you mean `atari-space-invaders`?",
        ),
        (
            "seaquest",
            "did you mean `minatar-seaquest` or `atari-seaquest`?",
        ),
    ] {
        let diags = errors(&with_env(&format!("env \"{typed}\"")), &[]);
        assert_eq!(diags.len(), 1, "{typed}");
        assert_eq!(diags[0].code(), "config::unknown-kind");
        assert_eq!(diags[0].label(), Some("not a known game"));
        assert_eq!(diags[0].help(), Some(help), "{typed}");
    }
    // `atari-pacman` is a ROM of its own, not a misspelling of Ms. Pac-Man.
    assert_eq!(
        experiment(&with_env("env \"atari-pacman\"")).env.game,
        Game::Atari { rom: "pacman" }
    );
}

#[test]
fn dqn_refuses_a_box_action_space_and_the_actor_critics_take_it() {
    for (game, algorithm) in [("pendulum", "dqn"), ("mountain-car-continuous", "dqn")] {
        let text =
            format!("experiment \"x\" {{\n    algorithm \"{algorithm}\"\n    env \"{game}\"\n}}\n");
        let diags = errors(&text, &[]);
        assert_eq!(diags.len(), 1, "{game} {algorithm}: {diags:?}");
        let d = &diags[0];
        assert_eq!(d.code(), "config::action-mismatch");
        assert_eq!(d.message(), format!("{algorithm} cannot act in {game}"));
        // Labelled on the game, line 3.
        assert_eq!(d.line_column().unwrap().0, 3);
        assert!(
            d.label().unwrap().contains("a box of 1 number in"),
            "{:?}",
            d.label()
        );
        let help = d.help().unwrap();
        assert!(
            help.contains("discrete actions") && help.contains("use ppo or a2c"),
            "{help}"
        );
    }
    for (game, algorithm) in [("pendulum", "ppo"), ("mountain-car-continuous", "a2c")] {
        let text =
            format!("experiment \"x\" {{\n    algorithm \"{algorithm}\"\n    env \"{game}\"\n}}\n");
        assert_eq!(experiment(&text).env.game.name(), game);
    }
    // dqn takes the discrete variant.
    experiment("experiment \"x\" {\n    algorithm \"dqn\"\n    env \"mountain-car\"\n}\n");
}

const GYM: &str = r#"experiment "x" {
    env "gymnasium" {
        envs 4
        id "LunarLander-v3"
        import "my_envs.registry" "ale_py"
        make-args { gravity -9.8; continuous #false; render_mode #null; mode "fast"; level 3 }
        workers 2
        wrappers { clip-reward; frame-stack 2 }
    }
}
"#;

#[test]
fn a_gymnasium_env_carries_its_settings_into_the_experiment() {
    let e = experiment(GYM);
    let Game::Gymnasium(g) = &e.env.game else {
        panic!("not gymnasium: {:?}", e.env.game)
    };
    assert_eq!(g.id, "LunarLander-v3");
    assert_eq!(g.python, "python3");
    assert_eq!(g.imports, vec!["my_envs.registry", "ale_py"]);
    assert_eq!(g.workers, 2);
    assert_eq!(g.step_timeout_s, 60.0);
    // Sorted by name, each value of its own type.
    assert_eq!(
        g.make_args,
        vec![
            ("continuous".to_string(), Scalar::Bool(false)),
            ("gravity".to_string(), Scalar::Float(-9.8)),
            ("level".to_string(), Scalar::Int(3)),
            ("mode".to_string(), Scalar::Str("fast".into())),
            ("render_mode".to_string(), Scalar::Null),
        ]
    );
    // The spaces are unknown until the environment is built.
    assert_eq!(e.observation(), None);
    assert_eq!(e.actions(), None);
}

#[test]
fn gymnasium_settings_round_trip_and_enter_the_hash() {
    let e = experiment(GYM);
    let text = canonical_kdl(&e);
    assert!(
        text.contains(
            "        make-args {\n            continuous #false\n            gravity -9.8\n            level 3\n            mode \"fast\"\n            render_mode #null\n        }\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("        import \"my_envs.registry\" \"ale_py\"\n"),
        "{text}"
    );
    assert_eq!(parse_canonical(&text).unwrap(), e);
    let json = canonical_json(&e);
    assert!(json.contains("\"gravity\": -9.8"), "{json}");
    // No imports, no arguments: both still written, and read back.
    let bare = experiment(&with_env("env \"gymnasium\" { id \"CartPole-v1\" }"));
    let bare_text = canonical_kdl(&bare);
    assert!(
        bare_text.contains("        import\n        make-args {}\n"),
        "{bare_text}"
    );
    assert_eq!(parse_canonical(&bare_text).unwrap(), bare);
    // Every make-args value is part of the hash, its type too.
    let hash = config_hash(&e);
    for change in ["gravity -9.7", "level 3.0", "mode \"slow\"", "extra 1"] {
        let other = GYM.replace("level 3 }", &format!("level 3; {change} }}"));
        let other = if change.starts_with("extra") {
            other
        } else {
            let name = change.split(' ').next().unwrap();
            let old = GYM
                .split(&['{', ';', '}'][..])
                .find(|p| p.trim().starts_with(name))
                .unwrap()
                .trim()
                .to_string();
            GYM.replace(&old, change)
        };
        assert_ne!(config_hash(&experiment(&other)), hash, "{change}");
    }
    // Order of writing is not part of it.
    let reordered = GYM.replace(
        "gravity -9.8; continuous #false",
        "continuous #false; gravity -9.8",
    );
    assert_eq!(config_hash(&experiment(&reordered)), hash);
}

#[test]
fn make_args_can_be_set_from_the_command_line() {
    let sets = vec!["env.make-args=gravity -3.5; continuous #true".to_string()];
    let e = resolve(
        &stdin(&with_env("env \"gymnasium\" { id \"Pendulum-v1\" }")),
        &sets,
    )
    .unwrap()
    .experiment;
    let Game::Gymnasium(g) = &e.env.game else {
        panic!()
    };
    assert_eq!(
        g.make_args,
        vec![
            ("continuous".to_string(), Scalar::Bool(true)),
            ("gravity".to_string(), Scalar::Float(-3.5)),
        ]
    );
}

#[test]
fn gymnasium_mistakes_are_located() {
    let cases: &[(&str, &str, usize)] = &[
        ("env \"gymnasium\"", "config::missing-value", 2),
        (
            "env \"gymnasium\" {\n        id \"A-v0\"\n        make-args { a 1; a 2 }\n    }",
            "config::duplicate-setting",
            4,
        ),
        (
            "env \"gymnasium\" {\n        id \"A-v0\"\n        make-args { a 1 2 }\n    }",
            "config::missing-value",
            4,
        ),
        (
            "env \"gymnasium\" {\n        id \"A-v0\"\n        make-args { a #inf }\n    }",
            "config::range",
            4,
        ),
        (
            "env \"gymnasium\" {\n        id \"A-v0\"\n        import \"not a module\"\n    }",
            "config::module-name",
            4,
        ),
        (
            "env \"gymnasium\" {\n        id \"\"\n    }",
            "config::text",
            3,
        ),
        (
            "env \"gymnasium\" {\n        id \"A-v0\"\n        envs 4\n        workers 5\n    }",
            "config::inconsistent",
            5,
        ),
    ];
    for (env, code, line) in cases {
        let diags = errors(&with_env(env), &[]);
        assert_eq!(diags.len(), 1, "{env}: {diags:?}");
        assert_eq!(diags[0].code(), *code, "{env}");
        assert_eq!(diags[0].line_column().map(|l| l.0), Some(*line), "{env}");
        assert!(diags[0].help().is_some(), "{env}");
    }
}

#[test]
fn gymnasium_refuses_wrappers_that_step_the_game_for_the_agent() {
    for wrapper in [
        "noop-reset",
        "fire-reset",
        "frame-skip",
        "episodic-life",
        "sticky-actions",
    ] {
        let text = format!(
            "experiment \"x\" {{\n    env \"gymnasium\" {{\n        id \"A-v0\"\n        wrappers {{\n            {wrapper}\n        }}\n    }}\n}}\n"
        );
        let diags = errors(&text, &[]);
        assert_eq!(diags.len(), 1, "{wrapper}: {diags:?}");
        let d = &diags[0];
        assert_eq!(d.code(), "config::wrapper-mismatch");
        assert_eq!(d.line_column().unwrap().0, 5, "{wrapper}");
        assert!(
            d.help()
                .unwrap()
                .starts_with(&format!("remove `{wrapper}`"))
        );
    }
    // Wrappers that need a space the resolver does not know are left to the run, as are the
    // network and the learner.
    experiment(
        "experiment \"x\" {\n    algorithm \"dqn\"\n    env \"gymnasium\" { id \"A-v0\"; wrappers { grayscale; resize; normalize-obs } }\n    network \"nature-cnn\"\n}\n",
    );
}

#[test]
fn existing_games_keep_their_canonical_form() {
    // Games without settings of their own write nothing new: the hashes of experiments
    // written before the catalogue grew stay the same.
    let e = experiment(&with_env("env \"cartpole\""));
    let text = canonical_kdl(&e);
    assert!(
        text.contains("    env \"cartpole\" {\n        envs 8\n        wrappers {}\n    }\n"),
        "{text}"
    );
}

/// The observation an environment's wrappers leave, as the network receives it.
#[test]
fn wrappers_change_observations() {
    let env = |game, wrappers| Env {
        game,
        envs: 1,
        wrappers,
    };
    let atari = env(
        Game::Atari { rom: "breakout" },
        vec![
            Wrapper::Grayscale,
            Wrapper::Resize {
                height: 84,
                width: 84,
            },
            Wrapper::FrameStack { n: 4 },
        ],
    );
    assert_eq!(
        atari.observation().unwrap().network_shape(),
        vec![4, 84, 84]
    );
    let vector = env(
        Game::Cartpole,
        vec![Wrapper::FrameStack { n: 3 }, Wrapper::ClipReward],
    );
    assert_eq!(vector.observation().unwrap().network_shape(), vec![12]);
    let misfit = env(Game::Cartpole, vec![Wrapper::Grayscale]);
    assert_eq!(misfit.observation(), None);
}

#[test]
fn free_sampling_refuses_gymnasium_workers_that_would_serve_two_environment_groups() {
    let text = with_env(
        "env \"gymnasium\" {\n        id \"A-v0\"\n        envs 8\n        workers 3\n    }",
    );
    let free = ["train.sampling=free", "train.env-groups=2"];
    let diags = errors(&text, &free);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].code(), "config::inconsistent");
    assert_eq!(diags[0].line_column().map(|l| l.0), Some(5));
    let help = diags[0].help().unwrap().to_string();
    assert!(help.contains("workers 4"), "{help}");
    // Workers that split into the groups, or groups stepped in turn, are fine.
    let fine = text.replace("workers 3", "workers 4");
    resolve(&stdin(&fine), &free.map(String::from)).unwrap();
    let in_turn = [
        "train.sampling=pipelined".to_string(),
        "train.env-groups=2".into(),
    ];
    resolve(&stdin(&text), &in_turn).unwrap();
}

/// `scale-reward` fits native and gymnasium environments alike, is written with its factor
/// named, and refuses a factor it cannot have or none at all, once, at the wrapper's line.
#[test]
fn scale_reward_takes_a_positive_factor_on_any_game() {
    for env in ["env \"cartpole\" {", "env \"gymnasium\" { id \"A-v0\";"] {
        let text = with_env(&format!("{env} wrappers {{ scale-reward 0.01; }} }}"));
        let e = experiment(&text);
        assert_eq!(e.env.wrappers, vec![Wrapper::ScaleReward { factor: 0.01 }]);
        let canonical = canonical_kdl(&e);
        assert!(
            canonical.contains("scale-reward factor=0.01\n"),
            "{canonical}"
        );
        assert_eq!(parse_canonical(&canonical).unwrap(), e);
    }
    for (wrapper, says) in [
        ("scale-reward 0", "must be number > 0, found 0"),
        ("scale-reward factor=-1.0", "must be number > 0, found -1"),
        ("scale-reward", "e.g. `scale-reward factor=0.1`"),
    ] {
        let text = format!(
            "experiment \"x\" {{\n    env \"cartpole\" {{\n        wrappers {{\n            {wrapper}\n        }}\n    }}\n}}\n"
        );
        let diags = errors(&text, &[]);
        assert_eq!(diags.len(), 1, "{wrapper}: {diags:?}");
        assert_eq!(diags[0].line_column().unwrap().0, 4, "{wrapper}");
        let d = &diags[0];
        let shown = format!("{} {:?} {:?}", d.message(), d.label(), d.help());
        assert!(shown.contains(says), "{wrapper}: {shown}");
    }
}

/// A multi-agent game takes mpe2's arguments as its settings, holds them in its canonical
/// form and hash, counts its agents as rows of every per-rank buffer, and refuses wrappers and
/// settings out of mpe2's ranges where they are written.
#[test]
fn mpe_simple_spread_takes_mpe2s_settings_and_counts_agents_as_rows() {
    let e = experiment(&with_env("env \"mpe-simple-spread\" { envs 4 }"));
    assert_eq!(e.env.game, Game::MpeSimpleSpread(SpreadParams::MPE2));
    assert_eq!(e.observation().unwrap().network_shape(), vec![18]);
    assert_eq!(e.actions(), Some(ActionSpace::Discrete { n: 5 }));
    assert_eq!((e.agents_per_env(), e.per_rank_rows()), (3, 12));
    assert_eq!(e.batch_size(), 12 * e.train.rollout);
    let text = with_env(
        "env \"mpe-simple-spread\" { envs 4; agents 4; local-ratio 0.25; max-cycles 40; continuous-actions #true }",
    );
    let resolved = resolve(&stdin(&text), &[]).unwrap();
    let want = SpreadParams {
        agents: 4,
        local_ratio: 0.25,
        max_cycles: 40,
        continuous_actions: true,
    };
    assert_eq!(resolved.experiment.env.game, Game::MpeSimpleSpread(want));
    assert_eq!(
        resolved.experiment.observation().unwrap().network_shape(),
        vec![24]
    );
    assert!(resolved.experiment.actions().unwrap().is_box());
    let canonical = canonical_kdl(&resolved.experiment);
    assert!(canonical.contains("local-ratio 0.25"), "{canonical}");
    assert_eq!(parse_canonical(&canonical).unwrap(), resolved.experiment);
    let default = resolve(
        &stdin(&with_env("env \"mpe-simple-spread\" { envs 4 }")),
        &[],
    )
    .unwrap();
    assert_ne!(
        config_hash(&resolved.experiment),
        config_hash(&default.experiment),
        "the settings enter the hash"
    );

    let diags = errors(
        &with_env("env \"mpe-simple-spread\" {\n  local-ratio 1.5\n  wrappers { clip-reward }\n}"),
        &[],
    );
    let codes: Vec<&str> = diags.iter().map(|d| d.code()).collect();
    assert_eq!(
        codes,
        ["config::range", "config::wrapper-mismatch"],
        "{diags:?}"
    );
    assert_eq!(diags[1].label(), Some("wraps one agent's environment"));
    assert!(diags[1].help().unwrap().contains("several agents"));
    // Its settings belong to it alone.
    let diags = errors(&with_env("env \"cartpole\" { agents 3 }"), &[]);
    assert_eq!(diags[0].code(), "config::unknown-setting", "{diags:?}");
}

/// simple_tag takes mpe2's arguments as its settings: they resolve, enter the canonical form
/// and hash and read back; its rows are as wide as a predator's observation (the widest), its
/// agents (predators, then prey) are rows; settings out of range are refused where written.
#[test]
fn mpe_simple_tag_takes_mpe2s_settings_and_its_rows_are_the_widest_agents() {
    let e = experiment(&with_env("env \"mpe-simple-tag\" { envs 4 }"));
    assert_eq!(e.env.game, Game::MpeSimpleTag(TagParams::MPE2));
    assert_eq!(e.observation().unwrap().network_shape(), vec![16]);
    assert_eq!(e.actions(), Some(ActionSpace::Discrete { n: 5 }));
    assert_eq!((e.agents_per_env(), e.per_rank_rows()), (4, 16));

    let text = with_env("env \"mpe-simple-tag\" { envs 4; num-adversaries 2 }");
    let resolved = resolve(&stdin(&text), &[]).unwrap();
    let want = TagParams {
        num_adversaries: 2,
        ..TagParams::MPE2
    };
    assert_eq!(
        resolved.experiment.env.game,
        Game::MpeSimpleTag(want.clone())
    );
    // 4 + 2 x 2 obstacles + 2 x 2 other agents + 2 x 1 prey.
    assert_eq!(
        resolved.experiment.observation().unwrap().network_shape(),
        vec![14]
    );
    assert_eq!(resolved.experiment.agents_per_env(), 3);
    let canonical = canonical_kdl(&resolved.experiment);
    for setting in [
        "num-good 1",
        "num-adversaries 2",
        "num-obstacles 2",
        "max-cycles 25",
        "continuous-actions #false",
    ] {
        assert!(canonical.contains(setting), "{setting}: {canonical}");
    }
    let back = parse_canonical(&canonical).unwrap();
    assert_eq!(back, resolved.experiment);
    assert_eq!(canonical_kdl(&back), canonical);
    assert_ne!(
        config_hash(&resolved.experiment),
        config_hash(&experiment(&with_env("env \"mpe-simple-tag\" { envs 4 }"))),
        "the settings enter the hash"
    );

    let all = with_env(
        "env \"mpe-simple-tag\" { num-good 2; num-adversaries 4; num-obstacles 0; max-cycles 40; continuous-actions #true }",
    );
    let e = experiment(&all);
    let want = TagParams {
        num_good: 2,
        num_adversaries: 4,
        num_obstacles: 0,
        max_cycles: 40,
        continuous_actions: true,
    };
    assert_eq!(e.env.game, Game::MpeSimpleTag(want));
    assert_eq!(e.observation().unwrap().network_shape(), vec![4 + 10 + 4]);
    assert!(e.actions().unwrap().is_box());
    assert_eq!(parse_canonical(&canonical_kdl(&e)).unwrap(), e);

    let diags = errors(&with_env("env \"mpe-simple-tag\" {\n  num-good 0\n}"), &[]);
    assert_eq!(diags[0].code(), "config::range", "{diags:?}");
    assert_eq!(diags[0].line_column().unwrap().0, 3, "{diags:?}");
    // Its settings belong to it alone, and simple_spread's to simple_spread.
    let diags = errors(&with_env("env \"mpe-simple-tag\" { agents 3 }"), &[]);
    assert_eq!(diags[0].code(), "config::unknown-setting", "{diags:?}");
    let diags = errors(&with_env("env \"mpe-simple-spread\" { num-good 3 }"), &[]);
    assert_eq!(diags[0].code(), "config::unknown-setting", "{diags:?}");
}

/// Evaluation's time limit is a wrapper on one agent's environment: set for a multi-agent game
/// it is refused where written (the game's own `max-cycles` ends its episodes); a recurrent
/// policy's minibatches divide the agents' sequences, and the help says the agents count.
#[test]
fn a_multi_agent_game_refuses_what_wraps_one_agent_and_counts_agent_sequences() {
    let text = with_env(
        "env \"mpe-simple-spread\" { envs 4 }\n    eval { every 10; max-episode-steps 100 }",
    );
    let diags = errors(&text, &[]);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].code(), "config::inconsistent");
    assert!(diags[0].help().unwrap().contains("max-cycles"), "{diags:?}");
    // The default stands: evaluation runs, ended by the game.
    experiment(&with_env(
        "env \"mpe-simple-spread\" { envs 4 }\n    eval { every 10 }",
    ));
    let recurrent = with_env(
        "env \"mpe-simple-spread\" { envs 5 }\n    network \"mlp\" { core \"gru\" }\n    algorithm \"ppo\" { minibatches 4 }",
    );
    let diags = errors(&recurrent, &[]);
    assert_eq!(diags[0].code(), "config::not-divisible", "{diags:?}");
    let help = diags[0].help().unwrap();
    assert!(
        help.contains(
            "each rank steps 15 (5 over 1 device, a sequence for each of their 3 agents)"
        ),
        "{help}"
    );
    // 4 minibatches divide 6 environments' 18 sequences? No; 3 do.
    experiment(&with_env(
        "env \"mpe-simple-spread\" { envs 6 }\n    network \"mlp\" { core \"gru\" }\n    algorithm \"ppo\" { minibatches 3 }",
    ));
}

/// `clamp-reward` bounds the learner's reward: its bounds default to [-1, 1], read back from
/// the canonical form, and a bound on the wrong side of 0 is refused where written.
#[test]
fn clamp_reward_takes_bounds_around_zero() {
    let default = experiment(&with_env("env \"cartpole\" { wrappers { clamp-reward } }"));
    let bounds = |e: &Experiment| e.env.wrappers.clone();
    assert_eq!(
        bounds(&default),
        [Wrapper::ClampReward {
            low: -1.0,
            high: 1.0
        }]
    );
    let e = experiment(&with_env(
        "env \"cartpole\" { wrappers { clamp-reward low=-0.5 high=3 } }",
    ));
    assert_eq!(
        bounds(&e),
        [Wrapper::ClampReward {
            low: -0.5,
            high: 3.0
        }]
    );
    assert_eq!(parse_canonical(&canonical_kdl(&e)).unwrap(), e);
    for bad in [
        "clamp-reward low=0.5",
        "clamp-reward high=-1",
        "clamp-reward low=0",
    ] {
        let diags = errors(
            &with_env(&format!("env \"cartpole\" {{ wrappers {{ {bad} }} }}")),
            &[],
        );
        assert_eq!(diags.len(), 1, "{bad}: {diags:?}");
        assert_eq!(diags[0].code(), "config::range", "{bad}: {diags:?}");
    }
}

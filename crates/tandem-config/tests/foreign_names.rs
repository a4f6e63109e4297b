//! Settings named as Stable-Baselines3 or CleanRL name them: the diagnostic names tandem's
//! setting (and its section, where it lives in another) at the exact span of the name,
//! in files and in `--set` paths; names tandem knows are not looked up.

use serde_json::Value;
use tandem_config::{Source, resolve};

/// An experiment whose `algorithm` block holds `body`, on a game the algorithm can act in.
fn with_algorithm(kind: &str, body: &str) -> Source {
    let game = if ["sac", "td3"].contains(&kind) {
        "pendulum"
    } else {
        "cartpole"
    };
    Source::Stdin(format!(
        "experiment \"x\" {{\n    algorithm \"{kind}\" {{\n{body}    }}\n    env \"{game}\"\n}}\n"
    ))
}

/// Every diagnostic of resolving `source` with `sets`, as `tandem validate --format json`
/// gives it.
fn diagnostics(source: &Source, sets: &[&str]) -> Vec<Value> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let diags = resolve(source, &sets).unwrap_err();
    serde_json::from_str::<Value>(&diags.to_json())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Message, (line, first column, column past the end) and help of one diagnostic.
fn parts(d: &Value) -> (&str, (u64, u64, u64), &str) {
    let at = (
        d["line"].as_u64().unwrap(),
        d["column"].as_u64().unwrap(),
        d["end_column"].as_u64().unwrap(),
    );
    (
        d["message"].as_str().unwrap(),
        at,
        d["help"].as_str().unwrap_or_default(),
    )
}

#[test]
fn ppo_names_of_sb3_and_cleanrl_get_tandems_name_at_their_span() {
    let source = with_algorithm(
        "ppo",
        "        learning-rate 0.001\n        ent_coef 0.01\n        lr 0.0003\n        \
         n_steps 128\n        batch_size 64\n        update_epochs 10\n",
    );
    let found: Vec<_> = diagnostics(&source, &[])
        .iter()
        .map(|d| {
            let (message, at, help) = parts(d);
            (message.to_string(), at, help.to_string())
        })
        .collect();
    let expected = [
        (
            "unknown setting `learning-rate` in `algorithm \"ppo\"`",
            (3, 9, 22),
            "tandem calls this `lr` (Stable-Baselines3's and CleanRL's `learning_rate`)",
        ),
        (
            "unknown setting `ent_coef` in `algorithm \"ppo\"`",
            (4, 9, 17),
            "tandem calls this `entropy-coef` (Stable-Baselines3's and CleanRL's `ent_coef`)",
        ),
        (
            "unknown setting `n_steps` in `algorithm \"ppo\"`",
            (6, 9, 16),
            "tandem calls this `rollout` (Stable-Baselines3's `n_steps`); it goes in the \
             `train` section: `train.rollout`",
        ),
        (
            "unknown setting `batch_size` in `algorithm \"ppo\"`",
            (7, 9, 19),
            "tandem's nearest setting is `minibatches` (Stable-Baselines3's `batch_size`); \
             tandem has no minibatch size but `minibatches`, a count: the count that gives \
             minibatches of batch_size transitions is envs * rollout / batch_size",
        ),
        (
            "unknown setting `update_epochs` in `algorithm \"ppo\"`",
            (8, 9, 22),
            "tandem calls this `epochs` (CleanRL's `update_epochs`)",
        ),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(m, at, h)| (m.to_string(), *at, h.to_string()))
        .collect();
    // `lr`, on line 5, is tandem's own name: no diagnostic for it.
    assert_eq!(found, expected);
}

#[test]
fn the_algorithm_in_effect_picks_the_row() {
    let help = |kind: &str, line: &str| {
        let d = diagnostics(&with_algorithm(kind, &format!("        {line}\n")), &[]);
        assert_eq!(d.len(), 1, "{d:?}");
        parts(&d[0]).2.to_string()
    };
    assert_eq!(
        help("sac", "learning_rate 0.001"),
        "tandem calls this `actor-lr` and `critic-lr` (Stable-Baselines3's and CleanRL's \
         `learning_rate`); tandem gives the actor and the critics a rate each"
    );
    assert!(help("sac", "ent_coef \"auto\"").starts_with(
        "tandem calls this `alpha` (Stable-Baselines3's `ent_coef`); `alpha \"auto\"`"
    ));
    assert_eq!(
        help("dqn", "batch_size 64"),
        "tandem calls this `batch-size` (Stable-Baselines3's and CleanRL's `batch_size`)"
    );
    assert!(
        help("dqn", "target_network_frequency 500")
            .starts_with("tandem's nearest setting is `target-every` (CleanRL's"),
    );
    assert_eq!(
        help("ppo", "buffer_size 1000"),
        "tandem calls this `buffer-capacity` for dqn, sac and td3 (Stable-Baselines3's and \
         CleanRL's `buffer_size`); `algorithm \"ppo\"` has no such setting"
    );
}

#[test]
fn a_name_of_another_section_says_where_it_goes_and_its_own_section_does_not() {
    let text = "experiment \"x\" {\n    total_timesteps 1000\n    env \"cartpole\" {\n        \
                num_envs 4\n    }\n}\n";
    let d = diagnostics(&Source::Stdin(text.into()), &[]);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0]["code"], "config::unknown-node");
    assert_eq!(
        parts(&d[0]).1,
        (2, 5, 20),
        "the label is on `total_timesteps`"
    );
    assert_eq!(
        parts(&d[0]).2,
        "tandem calls this `total-steps` (Stable-Baselines3's and CleanRL's \
         `total_timesteps`); it goes in the `train` section: `train.total-steps`"
    );
    assert_eq!(parts(&d[1]).1, (4, 9, 17));
    assert_eq!(
        parts(&d[1]).2,
        "tandem calls this `envs` (CleanRL's `num_envs`)"
    );
}

#[test]
fn set_paths_with_foreign_names_point_at_the_name() {
    let base = with_algorithm("ppo", "");
    let d = diagnostics(
        &base,
        &[
            "algorithm.ent_coef=0.01",
            "total_timesteps=5",
            "train.num_steps=64",
        ],
    );
    assert_eq!(d.len(), 3, "{d:?}");
    assert!(d.iter().all(|d| d["file"] == "--set"));
    // A path without a known section is refused while loading, before the others.
    assert_eq!(d[0]["code"], "config::unknown-path");
    assert_eq!(
        parts(&d[0]).2,
        "tandem calls this `total-steps` (Stable-Baselines3's and CleanRL's \
         `total_timesteps`); it goes in the `train` section: `train.total-steps`"
    );
    let (message, at, help) = parts(&d[1]);
    assert_eq!(message, "unknown setting `ent_coef` in `algorithm \"ppo\"`");
    assert_eq!(at, (1, 11, 19), "the label is on `ent_coef` alone");
    assert_eq!(
        help,
        "tandem calls this `entropy-coef` (Stable-Baselines3's and CleanRL's `ent_coef`)"
    );
    assert_eq!(parts(&d[2]).1, (1, 7, 16));
    assert_eq!(
        parts(&d[2]).2,
        "tandem calls this `rollout` (CleanRL's `num_steps`)"
    );
}

#[test]
fn names_tandem_knows_and_plain_typos_are_unaffected() {
    let ok = with_algorithm("ppo", "        lr 0.001\n        entropy-coef 0.0\n");
    let r = resolve(&ok, &["train.rollout=64".to_string()]).unwrap();
    assert!(r.warnings.is_empty());
    let d = diagnostics(&with_algorithm("ppo", "        lre 0.001\n"), &[]);
    assert_eq!(parts(&d[0]).2, "did you mean `lr`?");
}

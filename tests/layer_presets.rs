//! The built-in torsos are presets of the layer language: each written out as layers
//! (`network "layers"`) trains, through the binary, exactly the run its preset trains: the same
//! checkpoint tensors, names and bytes (so the same variables, draws and fast paths), and the
//! same TensorBoard scalars bit for bit. A list one layer away from a preset is not taken for
//! it (it builds as declared layers, under other names).

mod common;

use std::time::Duration;

use common::binary::{deterministic_scalars, fresh_dir, text, train_text};

/// An experiment of `body` (settings inside `experiment`) and `network` (its network node).
fn experiment(body: &str, network: &str) -> String {
    format!("experiment \"presets\" {{\n{body}\n    {network}\n}}\n")
}

const CARTPOLE_PPO: &str = r#"    seed 3
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "cartpole" { envs 4 }
    train { total-steps 2048; rollout 64 }
    checkpoint { every 8 }"#;

const CARTPOLE_DQN: &str = r#"    seed 3
    threads 1
    algorithm "dqn" { learning-starts 256; train-frequency 4; batch-size 32 }
    env "cartpole" { envs 1 }
    train { total-steps 1024 }
    checkpoint { every 64 }"#;

const MINATAR_PPO: &str = r#"    seed 3
    threads 1
    algorithm "ppo" { epochs 1; minibatches 2 }
    env "minatar-breakout" { envs 4 }
    train { total-steps 512; rollout 32 }
    checkpoint { every 4 }"#;

const ATARI_PPO: &str = r#"    seed 3
    threads 1
    algorithm "ppo" { epochs 1; minibatches 2 }
    env "atari-breakout" {
        envs 2
        wrappers {
            grayscale
            resize height=84 width=84
            frame-stack n=4
        }
    }
    train { total-steps 64; rollout 16 }
    checkpoint { every 2 }"#;

const NATURE: &str = "layers { scale-pixels; conv 32 kernel=8 stride=4; relu; conv 64 kernel=4 stride=2; \
                      relu; conv 64 kernel=3; relu; linear 512; relu }";

const IMPALA: &str = "layers { scale-pixels; \
    conv 16 kernel=3 padding=1; max-pool 3 stride=2 padding=1; \
    residual { relu; conv 16 kernel=3 padding=1; relu; conv 16 kernel=3 padding=1 }; \
    residual { relu; conv 16 kernel=3 padding=1; relu; conv 16 kernel=3 padding=1 }; \
    conv 32 kernel=3 padding=1; max-pool 3 stride=2 padding=1; \
    residual { relu; conv 32 kernel=3 padding=1; relu; conv 32 kernel=3 padding=1 }; \
    residual { relu; conv 32 kernel=3 padding=1; relu; conv 32 kernel=3 padding=1 }; \
    relu; linear 64; relu }";

/// What a run leaves that the network decides: its checkpoint's tensors and its scalars.
type Observed = (
    std::collections::BTreeMap<String, Vec<u8>>,
    Vec<(String, i64, u32)>,
);

fn observe(name: &str, text_of_run: &str) -> Observed {
    let dir = fresh_dir(name);
    let out = train_text(text_of_run, &dir, &[], Duration::from_secs(300));
    assert!(out.status.success(), "{name}: {}", text(&out));
    (
        common::checkpoint_tensors(&dir),
        deterministic_scalars(&dir),
    )
}

/// `body` trained with the preset `network` and with `layers` gives one run.
fn same_run(name: &str, body: &str, preset: &str, layers: &str) {
    let with_preset = observe(&format!("{name}-preset"), &experiment(body, preset));
    let with_layers = observe(
        &format!("{name}-layers"),
        &experiment(body, &format!("network \"layers\" {{ {layers} }}")),
    );
    let names = |o: &Observed| o.0.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&with_preset),
        names(&with_layers),
        "{name}: tensor names"
    );
    assert!(
        with_preset.0 == with_layers.0,
        "{name}: checkpoint tensors differ"
    );
    assert!(!with_preset.1.is_empty(), "{name}: no scalars");
    assert!(with_preset.1 == with_layers.1, "{name}: scalars differ");
}

#[test]
fn the_mlp_preset_is_its_layers_for_ppo_and_dqn() {
    same_run(
        "mlp-ppo",
        CARTPOLE_PPO,
        "network \"mlp\" { hidden 64 64 }",
        "layers { linear 64; tanh; linear 64; tanh }",
    );
    same_run(
        "mlp-dqn",
        CARTPOLE_DQN,
        "network \"mlp\" { hidden 32; activation \"relu\" }",
        "layers { linear 32; relu }",
    );
}

#[test]
fn the_minatar_preset_is_its_layers() {
    same_run(
        "minatar",
        MINATAR_PPO,
        "network \"minatar-cnn\"",
        "layers { conv 16 kernel=3; relu; linear 128; relu }",
    );
}

#[test]
fn the_nature_and_impala_presets_are_their_layers() {
    same_run("nature", ATARI_PPO, "network \"nature-cnn\"", NATURE);
    same_run(
        "impala",
        ATARI_PPO,
        "network \"impala-cnn\" { channels 16 32; features 64 }",
        IMPALA,
    );
}

/// One layer more than the preset (a second `relu` changes nothing a number shows) is a list
/// of its own: built as declared layers, under their names, through autograd.
#[test]
fn a_list_one_layer_from_a_preset_builds_as_declared_layers() {
    let (tensors, _) = observe(
        "near-mlp",
        &experiment(
            CARTPOLE_PPO,
            "network \"layers\" { layers { linear 64; tanh; linear 64; tanh; relu } }",
        ),
    );
    assert!(
        tensors.contains_key("model.actor_torso.0.weight"),
        "{:?}",
        tensors.keys().collect::<Vec<_>>()
    );
    assert!(!tensors.keys().any(|k| k.contains("torsos.fc0")));
}

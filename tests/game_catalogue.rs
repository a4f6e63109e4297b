//! Every game the config language names is the game it says. The settings walk
//! (tests/settings_walk.rs) cannot train a hundred game kinds, so it leaves them to this test:
//! every game of `tandem_config::games()` resolves (or, for a box action space, is refused with
//! the learner's action-space error), and its config maps onto the env crate's game (through
//! the same `env_spec` runs use) with the action count and observation of the catalogue's
//! table; a wrong mapping (a ROM name misspelt, a MinAtar game swapped for another) fails there.
//! Then the `tandem` binary trains every MinAtar game and five Atari games for a few thousand
//! steps, and each run's resolved config names the game and its final policy head has one
//! output per action of the table.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tandem_config::{GameInfo, Source};

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

/// The Atari games the binary trains (with every MinAtar game).
const TRAINED_ATARI: &[&str] = &[
    "atari-pong",
    "atari-space-invaders",
    "atari-seaquest",
    "atari-qbert",
    "atari-ms-pacman",
];

fn resolve(text: &str) -> Result<tandem_config::Experiment, String> {
    tandem_config::resolve(&Source::Stdin(text.into()), &[])
        .map(|r| r.experiment)
        .map_err(|d| d.render(false))
}

#[test]
fn every_game_resolves_and_builds_as_the_catalogue_says() {
    let mut checked = 0;
    for info in tandem_config::games() {
        let text = format!("experiment \"c\" {{\n    env \"{}\"\n}}\n", info.name);
        // The default learner (ppo) takes either kind of action space.
        let experiment =
            resolve(&text).unwrap_or_else(|why| panic!("{}: does not resolve: {why}", info.name));
        assert_eq!(experiment.env.game.name(), info.name);
        let spec = tandem::train::envs::env_spec(&experiment);
        let envs = tandem_env::VecEnv::new(&spec, &[1], 1)
            .unwrap_or_else(|e| panic!("{} does not build: {e}", info.name));
        // One space type (tandem-spec's): the built game's must equal the catalogue's.
        assert!(
            envs.action_space() == &info.actions,
            "{}: the built game acts with {}, the catalogue says {}",
            info.name,
            envs.action_space(),
            info.actions
        );
        assert_eq!(
            envs.env_observation_space(),
            info.observation,
            "{}: the built game's observation differs from the catalogue",
            info.name
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} games were built");
}

/// A tiny training config for `game`: Atari frames shrunk so an MLP reads them cheaply.
fn config(game: &GameInfo) -> String {
    let wrappers = if game.name.starts_with("atari-") {
        "frame-skip n=4 max-pool=#true; grayscale; resize height=42 width=42"
    } else {
        ""
    };
    format!(
        r#"experiment "catalogue" {{
    threads 1
    algorithm "ppo" {{ epochs 1; minibatches 1 }}
    env "{}" {{
        envs 2
        wrappers {{ {wrappers} }}
    }}
    network "mlp" {{ hidden 16 }}
    train {{ total-steps 2048; rollout 64 }}
    log {{ console "plain"; interval 16; tensorboard #false }}
    checkpoint {{ every #null }}
}}
"#,
        game.name
    )
}

/// Trains `game` in a fresh directory; returns the run directory.
fn train(game: &GameInfo, scratch: &Path) -> PathBuf {
    let dir = scratch.join(game.name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("e.kdl"), config(game)).unwrap();
    let child = Command::new(TANDEM)
        .current_dir(&dir)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR")
        .args(["train", "e.kdl", "--run-dir", "run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::finish(child, Duration::from_secs(120));
    assert!(
        done.status.success(),
        "{} did not train:\n{}",
        game.name,
        done.output
    );
    dir.join("run")
}

/// The final checkpoint's policy outputs: one per action. A shared torso's policy head bias has
/// one entry per action; separate MLPs (the default here) store actor and critic heads
/// stacked, `heads.bias` `[2, 1, actions]` (the value in column 0 of the critic's).
fn policy_outputs(run: &Path) -> i64 {
    let ckpt = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt"))
        .max()
        .expect("a final checkpoint");
    let tensors = tch::Tensor::load_multi(&ckpt).unwrap();
    let names: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
    if let Some((_, stacked)) = tensors.iter().find(|(name, _)| name == "model.heads.bias") {
        return *stacked
            .size()
            .last()
            .expect("a stacked head bias has dimensions");
    }
    let (_, bias) = tensors
        .iter()
        .find(|(name, _)| name.starts_with("model") && name.ends_with("policy_head.bias"))
        .unwrap_or_else(|| panic!("no policy head in {}: {names:?}", ckpt.display()));
    bias.numel() as i64
}

#[test]
fn the_binary_trains_every_minatar_game_and_five_atari_games() {
    let games: Vec<GameInfo> = tandem_config::games()
        .filter(|g| g.name.starts_with("minatar-") || TRAINED_ATARI.contains(&g.name))
        .collect();
    assert_eq!(games.len(), 5 + TRAINED_ATARI.len());
    let scratch = std::env::temp_dir().join(format!("tandem-catalogue-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let failures: Vec<String> = common::on_two_threads(&games, |game| {
        let run = train(game, &scratch);
        let resolved = std::fs::read_to_string(run.join("resolved.kdl")).unwrap();
        let outputs = policy_outputs(&run);
        let expected = game.actions.num_discrete().unwrap() as i64;
        let named = resolved.contains(&format!("    env \"{}\" {{", game.name));
        (!named || outputs != expected).then(|| {
            format!(
                "{}: {outputs} policy outputs (the catalogue says {expected}), the resolved config names the game: {named}",
                game.name
            )
        })
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&scratch);
}

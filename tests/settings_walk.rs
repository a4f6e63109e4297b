//! Every setting of the schema does something: for each setting, kind and wrapper (taken from
//! `tandem_config::schema_settings()`, so a setting added later without a row here fails the
//! test), the `tandem` binary trains a tiny base config and the same config with that one
//! thing changed, and the two runs must differ in something a user can see: the final
//! checkpoint's tensors, `summary.json`, the TensorBoard tags and steps (and deterministic
//! values), the files of the run directory, the rank logs, the console, or the run directory's
//! name. A changed value the resolver refuses counts as handled too. A few settings cannot show
//! in a short healthy run; their rows say why instead of naming a change.
//!
//! The gymnasium rows train a fixture environment of crates/tandem-env/tests/gym_fixtures on
//! the venv of scripts/gym-venv-setup.sh; without it they are skipped, unless
//! TANDEM_REQUIRE_PYTHON_TOOLS=1 (tests/common/tools.rs).
//!
//! The games of the catalogue (`env "<game>"` for over a hundred games) have no rows: a game
//! changes a run by being another game, which tests/game_catalogue.rs shows for every one of
//! them (each builds with the action count and observation the resolver checks against, and
//! the binary trains every MinAtar game and five Atari games).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tandem_config::{SettingInfo, SettingRole, Source, schema_settings};

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

/// Wall-clock limit of one tiny run (a hung run fails instead of blocking the suite).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The base configs. Each is small (a few hundred steps) and writes a checkpoint every two
/// updates, logs every update and lists the settings its rows change away from a default.
const CARTPOLE_PPO: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "cartpole" {
        envs 4
        wrappers {
            time-limit max-steps=30
            normalize-obs clip=10.0
            normalize-reward gamma=0.99 clip=10.0
        }
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

const CARTPOLE_CLIP: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "cartpole" {
        envs 4
        wrappers {
            normalize-reward
            clip-reward
            scale-reward 0.5
            keep-obs 0 1 2
        }
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// clamp-reward on its own: CartPole's rewards (1) show its `high`, Pendulum's (negative) its
/// `low`; after another reward wrapper it would hide that one's changes.
const CARTPOLE_CLAMP: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "cartpole" {
        envs 4
        wrappers {
            clamp-reward low=-0.5 high=0.5
        }
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

const PENDULUM_CLAMP: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "pendulum" {
        envs 4
        wrappers {
            clamp-reward low=-1 high=1
        }
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

const CARTPOLE_A2C: &str = r#"experiment "walk" {
    threads 1
    algorithm "a2c"
    env "cartpole" { envs 4 }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 8 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

const CARTPOLE_DQN: &str = r#"experiment "walk" {
    threads 1
    algorithm "dqn" {
        buffer-capacity 128
        batch-size 16
        learning-starts 32
        train-frequency 1
        target-every 4
        epsilon-fraction 0.5
    }
    env "cartpole" { envs 4 }
    network "mlp" { hidden 16 16 }
    train { total-steps 256 }
    log { console "plain"; interval 8 }
    checkpoint { every 16 }
}
"#;

const PENDULUM_SAC: &str = r#"experiment "walk" {
    threads 1
    algorithm "sac" {
        buffer-capacity 128
        batch-size 16
        learning-starts 32
    }
    env "pendulum" { envs 2 }
    network "mlp" { hidden 16 16 }
    train { total-steps 256 }
    log { console "plain"; interval 8 }
    checkpoint { every 16 }
}
"#;

const PENDULUM_TD3: &str = r#"experiment "walk" {
    threads 1
    algorithm "td3" {
        buffer-capacity 128
        batch-size 16
        learning-starts 32
    }
    env "pendulum" { envs 2 }
    network "mlp" { hidden 16 16 }
    train { total-steps 256 }
    log { console "plain"; interval 8 }
    checkpoint { every 16 }
}
"#;

const MINATAR_PPO: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "minatar-breakout" { envs 4 }
    network "minatar-cnn"
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

const ATARI_PPO: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 1; minibatches 2 }
    env "atari-breakout" {
        envs 2
        wrappers {
            sticky-actions probability=0.25
            noop-reset max=30
            fire-reset
            frame-skip n=4 max-pool=#true
            episodic-life
            grayscale
            resize height=84 width=84
            frame-stack n=4
        }
    }
    network "nature-cnn"
    train { total-steps 64; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 1 }
}
"#;

/// Counter-v0 of crates/tandem-env/tests/gym_fixtures/test_envs.py through the gymnasium
/// bridge (observations [t, a seeded number], reward = the action, 5-step episodes). Its
/// interpreter is set to the venv's by [`train`], which also puts the fixtures on PYTHONPATH.
const GYM_COUNTER: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "gymnasium" {
        id "TandemTest/Counter-v0"
        import "tests.gym_fixtures.test_envs"
        workers 2
        envs 4
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 256; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// The PettingZoo fixture of crates/tandem-env/tests/gym_fixtures/zoo_envs.py through the
/// bridge: 3 agents a row each (2 scouts observing 2 floats, a guard 4), 4-step games.
const ZOO: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "pettingzoo" {
        module "tests.gym_fixtures.zoo_envs"
        agents 3
        workers 2
        envs 4
    }
    network "mlp" { hidden 16 16 }
    train { total-steps 384; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// MPE simple_spread, its 3 agents a row each, played by one PPO policy.
const MPE_SPREAD: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "mpe-simple-spread" { envs 2 }
    network "mlp" { hidden 16 16 }
    train { total-steps 384; rollout 32 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// MPE simple_tag, its 3 predators and 1 prey a row each (the prey's padded to a predator's
/// width), played by one PPO policy.
const MPE_TAG: &str = r#"experiment "walk" {
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "mpe-simple-tag" { envs 2 }
    network "mlp" { hidden 16 16 }
    train { total-steps 512; rollout 32 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// In a row's `--set`, the folder of the gymnasium venv (see [`venv`]).
const VENV: &str = "@VENV@";

/// The gymnasium venv, where it is; `None` (after the tools rule, applied once) where it is
/// missing.
fn venv() -> Option<&'static Path> {
    static VENV_DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    VENV_DIR
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/venv-gym");
            if dir.join("bin/python").exists() {
                return Some(dir);
            }
            common::tools::tool_missing(
                &dir.join("bin/python").display().to_string(),
                "the gymnasium rows of the settings walk",
                "run scripts/gym-venv-setup.sh (scripts/setup --test does)",
            );
            None
        })
        .as_deref()
}

fn is_gymnasium(text: &str) -> bool {
    text.contains("env \"gymnasium\"") || text.contains("env \"pettingzoo\"")
}

const CARTPOLE_PPO_2: &str = r#"experiment "walk" {
    devices "cpu" "cpu"
    threads 1
    algorithm "ppo" { epochs 2; minibatches 2 }
    env "cartpole" { envs 4 }
    network "mlp" { hidden 16 16 }
    train { total-steps 512; rollout 16 }
    log { console "plain"; interval 1 }
    checkpoint { every 2 }
}
"#;

/// A base: one of the texts above, plus `--set`s (for bases that differ by a kind only).
#[derive(Clone, Copy)]
struct Base {
    name: &'static str,
    text: &'static str,
    sets: &'static [&'static str],
}

const BASES: &[Base] = &[
    Base {
        name: "cartpole-ppo",
        text: CARTPOLE_PPO,
        sets: &[],
    },
    // Learning fast enough that the policy ratio and the online network move visibly within
    // a few updates (clip, target-kl, double).
    Base {
        name: "cartpole-ppo-fast",
        text: CARTPOLE_PPO,
        sets: &["algorithm.lr=0.01"],
    },
    // Pipelined sampling with V-trace, learning fast enough that the learner's policy leaves
    // the behaviour policy's by more than V-trace's truncation levels (vtrace-*-clip).
    Base {
        name: "cartpole-ppo-vtrace",
        text: CARTPOLE_PPO,
        sets: &[
            "train.sampling=pipelined",
            "algorithm.advantages=vtrace",
            "algorithm.lr=0.01",
        ],
    },
    // Free sampling: its collector runs beside the learner, so the run is not reproducible;
    // its rows show in what is (the rounds' logged steps, the rank log).
    Base {
        name: "cartpole-ppo-free",
        text: CARTPOLE_PPO,
        sets: &["train.sampling=free"],
    },
    Base {
        name: "cartpole-dqn-fast",
        text: CARTPOLE_DQN,
        sets: &["algorithm.lr=0.05"],
    },
    Base {
        name: "cartpole-clip",
        text: CARTPOLE_CLIP,
        sets: &[],
    },
    Base {
        name: "cartpole-clamp",
        text: CARTPOLE_CLAMP,
        sets: &[],
    },
    Base {
        name: "pendulum-clamp",
        text: PENDULUM_CLAMP,
        sets: &[],
    },
    Base {
        name: "cartpole-lstm",
        text: CARTPOLE_PPO,
        sets: &["network.core=lstm"],
    },
    Base {
        name: "cartpole-a2c",
        text: CARTPOLE_A2C,
        sets: &[],
    },
    Base {
        name: "cartpole-dqn",
        text: CARTPOLE_DQN,
        sets: &[],
    },
    Base {
        name: "cartpole-dqn-per",
        text: CARTPOLE_DQN,
        sets: &["algorithm.prioritized=#true"],
    },
    Base {
        name: "pendulum-sac",
        text: PENDULUM_SAC,
        sets: &[],
    },
    Base {
        name: "pendulum-td3",
        text: PENDULUM_TD3,
        sets: &[],
    },
    Base {
        name: "minatar-ppo",
        text: MINATAR_PPO,
        sets: &[],
    },
    Base {
        name: "atari-ppo",
        text: ATARI_PPO,
        sets: &[],
    },
    Base {
        name: "cartpole-layers",
        text: CARTPOLE_PPO,
        sets: &["network=layers", "network.layers=linear 8; tanh"],
    },
    Base {
        name: "minatar-layers",
        text: MINATAR_PPO,
        sets: &[
            "network=layers",
            "network.layers=conv 4 kernel=3; relu; max-pool 2 stride=2; flatten; linear 16; relu",
        ],
    },
    Base {
        name: "atari-impala",
        text: ATARI_PPO,
        sets: &["network=impala-cnn"],
    },
    Base {
        name: "mpe-spread",
        text: MPE_SPREAD,
        sets: &[],
    },
    Base {
        name: "mpe-tag",
        text: MPE_TAG,
        sets: &[],
    },
    Base {
        name: "gym-counter",
        text: GYM_COUNTER,
        sets: &[],
    },
    // A gymnasium environment that gives an action mask in its info (tests/gym_fixtures).
    Base {
        name: "gym-masked",
        text: GYM_COUNTER,
        sets: &["env.id=\"TandemTest/Masked-v0\""],
    },
    // A gymnasium environment whose episodes end with `is_success` in their info.
    Base {
        name: "gym-scored",
        text: GYM_COUNTER,
        sets: &["env.id=\"TandemTest/Scored-v0\""],
    },
    Base {
        name: "zoo",
        text: ZOO,
        sets: &[],
    },
    // Every agent observes a Dict beside its `action_mask`.
    Base {
        name: "zoo-masked",
        text: ZOO,
        sets: &["env.make-args=masked #true"],
    },
    // Evaluation after every second update, two episodes.
    Base {
        name: "cartpole-eval",
        text: CARTPOLE_PPO,
        sets: &["eval.every=2", "eval.episodes=2"],
    },
    Base {
        name: "ppo-2",
        text: CARTPOLE_PPO_2,
        sets: &[],
    },
    Base {
        name: "ppo-2-periodic",
        text: CARTPOLE_PPO_2,
        sets: &["sync=periodic"],
    },
    // Two members of one rank, exploiting after every update, ranked by their evaluations or
    // their scores.
    Base {
        name: "population",
        text: CARTPOLE_PPO_2,
        sets: &[
            "population.members=2",
            "population.period=64",
            "population.explore=algorithm.lr factor=1.25 min=1e-4 max=1e-2",
            "eval.every=2",
        ],
    },
    // simple_tag against a league: four games, a snapshot every update (of 512 steps).
    Base {
        name: "mpe-tag-league",
        text: MPE_TAG,
        sets: &["env.envs=4", "train.total-steps=2048", "league.every=512"],
    },
    // The same league in each of two members of one rank, without exchange.
    Base {
        name: "mpe-tag-league-population",
        text: MPE_TAG,
        sets: &[
            "env.envs=4",
            "train.total-steps=2048",
            "league.every=512",
            "devices=cpu cpu",
            "population.members=2",
            "population.exploit=0",
        ],
    },
];

/// How a row proves its setting matters.
enum Proof {
    /// Train `base` and `base` with these `--set`s; the runs must differ.
    Change(&'static str, &'static [&'static str]),
    /// Train `base` and `base` with its wrapper `name` replaced by `with` (`""` drops it).
    Wrapper(&'static str, &'static str, &'static str),
}

use Proof::{Change, Wrapper};

/// One row per schema entry, keyed as [`key`] names it.
fn table() -> Vec<(&'static str, Proof)> {
    vec![
        // experiment
        ("name", Change("cartpole-ppo", &["name=other"])),
        ("seed", Change("cartpole-ppo", &["seed=2"])),
        (
            "devices",
            Change("cartpole-ppo", &["devices=\"cpu\" \"cpu\""]),
        ),
        ("threads", Change("cartpole-ppo", &["threads=2"])),
        ("pin-cores", Change("cartpole-ppo", &["pin-cores=#true"])),
        // algorithm kinds
        (
            "algorithm \"ppo\"",
            Change("cartpole-ppo", &["algorithm=a2c"]),
        ),
        (
            "algorithm \"a2c\"",
            Change("cartpole-a2c", &["algorithm=ppo"]),
        ),
        (
            "algorithm \"dqn\"",
            Change("cartpole-dqn", &["algorithm=ppo"]),
        ),
        // dqn does not act in a box, so the resolver refuses the change.
        (
            "algorithm \"sac\"",
            Change("pendulum-sac", &["algorithm=dqn"]),
        ),
        (
            "algorithm \"td3\"",
            Change("pendulum-td3", &["algorithm=sac"]),
        ),
        // ppo
        (
            "algorithm.lr (ppo)",
            Change("cartpole-ppo", &["algorithm.lr=0.01"]),
        ),
        (
            "algorithm.gamma (ppo)",
            Change("cartpole-ppo", &["algorithm.gamma=0.9"]),
        ),
        (
            "algorithm.gae-lambda (ppo)",
            Change("cartpole-ppo", &["algorithm.gae-lambda=0.5"]),
        ),
        (
            "algorithm.advantages (ppo)",
            Change("cartpole-ppo", &["algorithm.advantages=vtrace"]),
        ),
        (
            "algorithm.vtrace-rho-clip (ppo)",
            Change("cartpole-ppo-vtrace", &["algorithm.vtrace-rho-clip=2.0"]),
        ),
        (
            "algorithm.vtrace-c-clip (ppo)",
            Change("cartpole-ppo-vtrace", &["algorithm.vtrace-c-clip=0.5"]),
        ),
        (
            "algorithm.clip (ppo)",
            Change("cartpole-ppo-fast", &["algorithm.clip=0.000001"]),
        ),
        (
            "algorithm.value-clip (ppo)",
            Change("cartpole-ppo", &["algorithm.value-clip=0.01"]),
        ),
        (
            "algorithm.entropy-coef (ppo)",
            Change("cartpole-ppo", &["algorithm.entropy-coef=0.5"]),
        ),
        (
            "algorithm.value-coef (ppo)",
            Change("cartpole-ppo", &["algorithm.value-coef=2.0"]),
        ),
        (
            "algorithm.epochs (ppo)",
            Change("cartpole-ppo", &["algorithm.epochs=1"]),
        ),
        (
            "algorithm.minibatches (ppo)",
            Change("cartpole-ppo", &["algorithm.minibatches=4"]),
        ),
        (
            "algorithm.micro-batches (ppo)",
            Change("cartpole-ppo", &["algorithm.micro-batches=4"]),
        ),
        (
            "algorithm.max-grad-norm (ppo)",
            Change("cartpole-ppo", &["algorithm.max-grad-norm=#null"]),
        ),
        (
            "algorithm.anneal-lr (ppo)",
            Change("cartpole-ppo", &["algorithm.anneal-lr=#false"]),
        ),
        (
            "algorithm.target-kl (ppo)",
            Change("cartpole-ppo-fast", &["algorithm.target-kl=0.000000001"]),
        ),
        (
            "algorithm.normalize-advantages (ppo)",
            Change("cartpole-ppo", &["algorithm.normalize-advantages=#false"]),
        ),
        (
            "algorithm.adam-eps (ppo)",
            Change("cartpole-ppo", &["algorithm.adam-eps=0.1"]),
        ),
        // a2c
        (
            "algorithm.lr (a2c)",
            Change("cartpole-a2c", &["algorithm.lr=0.01"]),
        ),
        (
            "algorithm.gamma (a2c)",
            Change("cartpole-a2c", &["algorithm.gamma=0.9"]),
        ),
        (
            "algorithm.gae-lambda (a2c)",
            Change("cartpole-a2c", &["algorithm.gae-lambda=0.5"]),
        ),
        (
            "algorithm.entropy-coef (a2c)",
            Change("cartpole-a2c", &["algorithm.entropy-coef=0.5"]),
        ),
        (
            "algorithm.value-coef (a2c)",
            Change("cartpole-a2c", &["algorithm.value-coef=2.0"]),
        ),
        (
            "algorithm.max-grad-norm (a2c)",
            Change("cartpole-a2c", &["algorithm.max-grad-norm=#null"]),
        ),
        (
            "algorithm.optimizer (a2c)",
            Change("cartpole-a2c", &["algorithm.optimizer=adam"]),
        ),
        (
            "algorithm.optimizer-eps (a2c)",
            Change("cartpole-a2c", &["algorithm.optimizer-eps=0.1"]),
        ),
        (
            "algorithm.rmsprop-alpha (a2c)",
            Change("cartpole-a2c", &["algorithm.rmsprop-alpha=0.5"]),
        ),
        (
            "algorithm.anneal-lr (a2c)",
            Change("cartpole-a2c", &["algorithm.anneal-lr=#true"]),
        ),
        (
            "algorithm.normalize-advantages (a2c)",
            Change("cartpole-a2c", &["algorithm.normalize-advantages=#true"]),
        ),
        // dqn
        (
            "algorithm.lr (dqn)",
            Change("cartpole-dqn", &["algorithm.lr=0.01"]),
        ),
        (
            "algorithm.gamma (dqn)",
            Change("cartpole-dqn", &["algorithm.gamma=0.5"]),
        ),
        (
            "algorithm.buffer-capacity (dqn)",
            Change("cartpole-dqn", &["algorithm.buffer-capacity=64"]),
        ),
        (
            "algorithm.batch-size (dqn)",
            Change("cartpole-dqn", &["algorithm.batch-size=8"]),
        ),
        (
            "algorithm.learning-starts (dqn)",
            Change("cartpole-dqn", &["algorithm.learning-starts=64"]),
        ),
        (
            "algorithm.train-frequency (dqn)",
            Change("cartpole-dqn", &["algorithm.train-frequency=2"]),
        ),
        (
            "algorithm.gradient-steps (dqn)",
            Change("cartpole-dqn", &["algorithm.gradient-steps=2"]),
        ),
        (
            "algorithm.target-every (dqn)",
            Change("cartpole-dqn", &["algorithm.target-every=1"]),
        ),
        (
            "algorithm.tau (dqn)",
            Change("cartpole-dqn", &["algorithm.tau=0.5"]),
        ),
        (
            "algorithm.double (dqn)",
            Change("cartpole-dqn-fast", &["algorithm.double=#true"]),
        ),
        (
            "algorithm.dueling (dqn)",
            Change("cartpole-dqn", &["algorithm.dueling=#true"]),
        ),
        (
            "algorithm.n-step (dqn)",
            Change("cartpole-dqn", &["algorithm.n-step=3"]),
        ),
        (
            "algorithm.loss (dqn)",
            Change("cartpole-dqn", &["algorithm.loss=mse"]),
        ),
        (
            "algorithm.epsilon-start (dqn)",
            Change("cartpole-dqn", &["algorithm.epsilon-start=0.5"]),
        ),
        (
            "algorithm.epsilon-end (dqn)",
            Change("cartpole-dqn", &["algorithm.epsilon-end=0.5"]),
        ),
        (
            "algorithm.epsilon-fraction (dqn)",
            Change("cartpole-dqn", &["algorithm.epsilon-fraction=0.1"]),
        ),
        (
            "algorithm.prioritized (dqn)",
            Change("cartpole-dqn", &["algorithm.prioritized=#true"]),
        ),
        (
            "algorithm.priority-alpha (dqn)",
            Change("cartpole-dqn-per", &["algorithm.priority-alpha=0.1"]),
        ),
        (
            "algorithm.priority-beta-start (dqn)",
            Change("cartpole-dqn-per", &["algorithm.priority-beta-start=0.9"]),
        ),
        (
            "algorithm.priority-beta-end (dqn)",
            Change("cartpole-dqn-per", &["algorithm.priority-beta-end=0.5"]),
        ),
        (
            "algorithm.max-grad-norm (dqn)",
            Change("cartpole-dqn", &["algorithm.max-grad-norm=0.01"]),
        ),
        (
            "algorithm.checkpoint-replay (dqn)",
            Change("cartpole-dqn", &["algorithm.checkpoint-replay=#true"]),
        ),
        // sac
        (
            "algorithm.actor-lr (sac)",
            Change("pendulum-sac", &["algorithm.actor-lr=0.01"]),
        ),
        (
            "algorithm.critic-lr (sac)",
            Change("pendulum-sac", &["algorithm.critic-lr=0.01"]),
        ),
        (
            "algorithm.alpha-lr (sac)",
            Change("pendulum-sac", &["algorithm.alpha-lr=0.1"]),
        ),
        (
            "algorithm.gamma (sac)",
            Change("pendulum-sac", &["algorithm.gamma=0.5"]),
        ),
        (
            "algorithm.tau (sac)",
            Change("pendulum-sac", &["algorithm.tau=0.5"]),
        ),
        (
            "algorithm.buffer-capacity (sac)",
            Change("pendulum-sac", &["algorithm.buffer-capacity=64"]),
        ),
        (
            "algorithm.batch-size (sac)",
            Change("pendulum-sac", &["algorithm.batch-size=8"]),
        ),
        (
            "algorithm.learning-starts (sac)",
            Change("pendulum-sac", &["algorithm.learning-starts=64"]),
        ),
        (
            "algorithm.train-frequency (sac)",
            Change("pendulum-sac", &["algorithm.train-frequency=2"]),
        ),
        (
            "algorithm.gradient-steps (sac)",
            Change("pendulum-sac", &["algorithm.gradient-steps=2"]),
        ),
        (
            "algorithm.alpha (sac)",
            Change("pendulum-sac", &["algorithm.alpha=0.5"]),
        ),
        (
            "algorithm.initial-alpha (sac)",
            Change("pendulum-sac", &["algorithm.initial-alpha=0.5"]),
        ),
        (
            "algorithm.target-entropy (sac)",
            Change("pendulum-sac", &["algorithm.target-entropy=2.0"]),
        ),
        (
            "algorithm.max-grad-norm (sac)",
            Change("pendulum-sac", &["algorithm.max-grad-norm=0.01"]),
        ),
        (
            "algorithm.checkpoint-replay (sac)",
            Change("pendulum-sac", &["algorithm.checkpoint-replay=#true"]),
        ),
        // td3
        (
            "algorithm.actor-lr (td3)",
            Change("pendulum-td3", &["algorithm.actor-lr=0.01"]),
        ),
        (
            "algorithm.critic-lr (td3)",
            Change("pendulum-td3", &["algorithm.critic-lr=0.01"]),
        ),
        (
            "algorithm.gamma (td3)",
            Change("pendulum-td3", &["algorithm.gamma=0.5"]),
        ),
        (
            "algorithm.tau (td3)",
            Change("pendulum-td3", &["algorithm.tau=0.5"]),
        ),
        (
            "algorithm.buffer-capacity (td3)",
            Change("pendulum-td3", &["algorithm.buffer-capacity=64"]),
        ),
        (
            "algorithm.batch-size (td3)",
            Change("pendulum-td3", &["algorithm.batch-size=8"]),
        ),
        (
            "algorithm.learning-starts (td3)",
            Change("pendulum-td3", &["algorithm.learning-starts=64"]),
        ),
        (
            "algorithm.train-frequency (td3)",
            Change("pendulum-td3", &["algorithm.train-frequency=2"]),
        ),
        (
            "algorithm.gradient-steps (td3)",
            Change("pendulum-td3", &["algorithm.gradient-steps=2"]),
        ),
        (
            "algorithm.policy-delay (td3)",
            Change("pendulum-td3", &["algorithm.policy-delay=1"]),
        ),
        (
            "algorithm.exploration-noise (td3)",
            Change("pendulum-td3", &["algorithm.exploration-noise=0.5"]),
        ),
        (
            "algorithm.target-policy-noise (td3)",
            Change("pendulum-td3", &["algorithm.target-policy-noise=0.05"]),
        ),
        (
            "algorithm.target-noise-clip (td3)",
            Change("pendulum-td3", &["algorithm.target-noise-clip=0.01"]),
        ),
        (
            "algorithm.max-grad-norm (td3)",
            Change("pendulum-td3", &["algorithm.max-grad-norm=0.01"]),
        ),
        (
            "algorithm.checkpoint-replay (td3)",
            Change("pendulum-td3", &["algorithm.checkpoint-replay=#true"]),
        ),
        // env (the catalogue's games: see the module doc)
        // gymnasium: the interpreter and the worker count and step timeout show in the rank
        // logs; counter_short.py registers Counter-v0 again with 2-step episodes.
        (
            "env \"gymnasium\"",
            Change("gym-counter", &["env=cartpole"]),
        ),
        (
            "env.id (gymnasium)",
            Change("gym-counter", &["env.id=CartPole-v1"]),
        ),
        (
            "env.python (gymnasium)",
            Change("gym-counter", &["env.python=\"@VENV@/bin/python3\""]),
        ),
        (
            "env.import (gymnasium)",
            Change(
                "gym-counter",
                &["env.import=tests.gym_fixtures.counter_short"],
            ),
        ),
        (
            "env.make-args (gymnasium)",
            Change("gym-counter", &["env.make-args=length 3"]),
        ),
        (
            "env.workers (gymnasium)",
            Change("gym-counter", &["env.workers=1"]),
        ),
        (
            "env.step-timeout (gymnasium)",
            Change("gym-counter", &["env.step-timeout=7"]),
        ),
        (
            "env.action-mask (gymnasium)",
            Change("gym-masked", &["env.action-mask=info"]),
        ),
        // Its tags (episode/info/is_success) show in TensorBoard.
        (
            "env.info-keys (gymnasium)",
            Change("gym-scored", &["env.info-keys=\"is_success\""]),
        ),
        // pettingzoo: as gymnasium; zoo_short.py makes the fixture's games 2 steps long,
        // `long_game` 7, `two_scouts` has 2 agents, and `turns` takes turns.
        ("env \"pettingzoo\"", Change("zoo", &["env=cartpole"])),
        (
            "env.module (pettingzoo)",
            Change("zoo", &["env.module=mpe2.simple_spread_v3"]),
        ),
        (
            "env.function (pettingzoo)",
            Change("zoo", &["env.function=long_game"]),
        ),
        (
            "env.agents (pettingzoo)",
            Change("zoo", &["env.function=two_scouts", "env.agents=2"]),
        ),
        (
            "env.python (pettingzoo)",
            Change("zoo", &["env.python=\"@VENV@/bin/python3\""]),
        ),
        (
            "env.import (pettingzoo)",
            Change("zoo", &["env.import=tests.gym_fixtures.zoo_short"]),
        ),
        (
            "env.make-args (pettingzoo)",
            Change("zoo", &["env.make-args=length 3"]),
        ),
        (
            "env.workers (pettingzoo)",
            Change("zoo", &["env.workers=1"]),
        ),
        (
            "env.step-timeout (pettingzoo)",
            Change("zoo", &["env.step-timeout=7"]),
        ),
        // `turns` is the fixture game as an AEC environment (PettingZoo's own conversion).
        (
            "env.api (pettingzoo)",
            Change("zoo", &["env.function=turns", "env.api=aec"]),
        ),
        (
            "env.action-mask (pettingzoo)",
            Change("zoo-masked", &["env.action-mask=observation"]),
        ),
        // MPE simple_spread: mpe2's arguments.
        (
            "env.agents (mpe-simple-spread)",
            Change("mpe-spread", &["env.agents=2"]),
        ),
        (
            "env.local-ratio (mpe-simple-spread)",
            Change("mpe-spread", &["env.local-ratio=0.9"]),
        ),
        (
            "env.max-cycles (mpe-simple-spread)",
            Change("mpe-spread", &["env.max-cycles=10"]),
        ),
        (
            "env.continuous-actions (mpe-simple-spread)",
            Change("mpe-spread", &["env.continuous-actions=#true"]),
        ),
        // MPE simple_tag: mpe2's arguments.
        (
            "env.num-good (mpe-simple-tag)",
            Change("mpe-tag", &["env.num-good=2"]),
        ),
        (
            "env.num-adversaries (mpe-simple-tag)",
            Change("mpe-tag", &["env.num-adversaries=2"]),
        ),
        (
            "env.num-obstacles (mpe-simple-tag)",
            Change("mpe-tag", &["env.num-obstacles=0"]),
        ),
        (
            "env.max-cycles (mpe-simple-tag)",
            Change("mpe-tag", &["env.max-cycles=10"]),
        ),
        (
            "env.continuous-actions (mpe-simple-tag)",
            Change("mpe-tag", &["env.continuous-actions=#true"]),
        ),
        ("env.envs", Change("cartpole-ppo", &["env.envs=2"])),
        ("env.wrappers", Change("cartpole-ppo", &["env.wrappers="])),
        // wrappers and their parameters
        ("noop-reset", Wrapper("atari-ppo", "noop-reset", "")),
        (
            "noop-reset.max",
            Wrapper("atari-ppo", "noop-reset", "noop-reset max=2"),
        ),
        ("fire-reset", Wrapper("atari-ppo", "fire-reset", "")),
        ("frame-skip", Wrapper("atari-ppo", "frame-skip", "")),
        (
            "frame-skip.n",
            Wrapper("atari-ppo", "frame-skip", "frame-skip n=2 max-pool=#true"),
        ),
        (
            "frame-skip.max-pool",
            Wrapper("atari-ppo", "frame-skip", "frame-skip n=4 max-pool=#false"),
        ),
        ("episodic-life", Wrapper("atari-ppo", "episodic-life", "")),
        ("resize", Wrapper("atari-ppo", "resize", "")),
        (
            "resize.height",
            Wrapper("atari-ppo", "resize", "resize height=64 width=84"),
        ),
        (
            "resize.width",
            Wrapper("atari-ppo", "resize", "resize height=84 width=64"),
        ),
        ("grayscale", Wrapper("atari-ppo", "grayscale", "")),
        ("clip-reward", Wrapper("cartpole-clip", "clip-reward", "")),
        ("scale-reward", Wrapper("cartpole-clip", "scale-reward", "")),
        (
            "scale-reward.factor",
            Wrapper("cartpole-clip", "scale-reward", "scale-reward factor=0.25"),
        ),
        (
            "clamp-reward",
            Wrapper("cartpole-clamp", "clamp-reward", ""),
        ),
        (
            "clamp-reward.low",
            Wrapper(
                "pendulum-clamp",
                "clamp-reward",
                "clamp-reward low=-2 high=1",
            ),
        ),
        (
            "clamp-reward.high",
            Wrapper(
                "cartpole-clamp",
                "clamp-reward",
                "clamp-reward low=-0.5 high=0.6",
            ),
        ),
        ("keep-obs", Wrapper("cartpole-clip", "keep-obs", "")),
        (
            "keep-obs.indices",
            Wrapper("cartpole-clip", "keep-obs", "keep-obs 0 2"),
        ),
        ("frame-stack", Wrapper("atari-ppo", "frame-stack", "")),
        (
            "frame-stack.n",
            Wrapper("atari-ppo", "frame-stack", "frame-stack n=2"),
        ),
        ("time-limit", Wrapper("cartpole-ppo", "time-limit", "")),
        (
            "time-limit.max-steps",
            Wrapper("cartpole-ppo", "time-limit", "time-limit max-steps=10"),
        ),
        ("sticky-actions", Wrapper("atari-ppo", "sticky-actions", "")),
        (
            "sticky-actions.probability",
            Wrapper(
                "atari-ppo",
                "sticky-actions",
                "sticky-actions probability=0.9",
            ),
        ),
        (
            "normalize-obs",
            Wrapper("cartpole-ppo", "normalize-obs", ""),
        ),
        (
            "normalize-obs.clip",
            Wrapper("cartpole-ppo", "normalize-obs", "normalize-obs clip=0.1"),
        ),
        (
            "normalize-reward",
            Wrapper("cartpole-ppo", "normalize-reward", ""),
        ),
        (
            "normalize-reward.gamma",
            Wrapper(
                "cartpole-ppo",
                "normalize-reward",
                "normalize-reward gamma=0.5 clip=10.0",
            ),
        ),
        (
            "normalize-reward.clip",
            Wrapper(
                "cartpole-ppo",
                "normalize-reward",
                "normalize-reward gamma=0.99 clip=0.01",
            ),
        ),
        // network
        ("network \"mlp\"", Change("minatar-ppo", &["network=mlp"])),
        (
            "network \"nature-cnn\"",
            Change("atari-ppo", &["network=impala-cnn"]),
        ),
        (
            "network \"minatar-cnn\"",
            Change("minatar-ppo", &["network=impala-cnn"]),
        ),
        (
            "network \"impala-cnn\"",
            Change("atari-impala", &["network=nature-cnn"]),
        ),
        (
            "network.actor-critic",
            // The default for this MLP is separate (docs/defaults.md).
            Change("cartpole-ppo", &["network.actor-critic=shared"]),
        ),
        (
            "network.init",
            Change("cartpole-ppo", &["network.init=default"]),
        ),
        (
            "network.torso-gain",
            Change("cartpole-ppo", &["network.torso-gain=0.5"]),
        ),
        (
            "network.policy-gain",
            Change("cartpole-ppo", &["network.policy-gain=1.0"]),
        ),
        (
            "network.value-gain",
            Change("cartpole-ppo", &["network.value-gain=0.1"]),
        ),
        (
            "network.core",
            Change("cartpole-ppo", &["network.core=lstm"]),
        ),
        (
            "network.agent-index",
            Change("mpe-spread", &["network.agent-index=#true"]),
        ),
        (
            "network.critic-input",
            Change(
                "mpe-spread",
                &[
                    "network.critic-input=state",
                    "network.actor-critic=separate",
                ],
            ),
        ),
        (
            "network.core-size",
            Change("cartpole-lstm", &["network.core-size=8"]),
        ),
        (
            "network.hidden (mlp)",
            Change("cartpole-ppo", &["network.hidden=8"]),
        ),
        (
            "network.activation (mlp)",
            Change("cartpole-ppo", &["network.activation=relu"]),
        ),
        (
            "network.features (nature-cnn)",
            Change("atari-ppo", &["network.features=64"]),
        ),
        (
            "network.precision",
            Change("atari-ppo", &["network.precision=bfloat16"]),
        ),
        (
            "network.channels (minatar-cnn)",
            Change("minatar-ppo", &["network.channels=4"]),
        ),
        (
            "network.features (minatar-cnn)",
            Change("minatar-ppo", &["network.features=32"]),
        ),
        (
            "network.channels (impala-cnn)",
            Change("atari-impala", &["network.channels=4 8"]),
        ),
        (
            "network.features (impala-cnn)",
            Change("atari-impala", &["network.features=32"]),
        ),
        // sync
        ("sync \"allreduce\"", Change("ppo-2", &["sync=none"])),
        ("sync \"broadcast\"", Change("ppo-2", &["sync=broadcast"])),
        ("sync \"periodic\"", Change("ppo-2", &["sync=periodic"])),
        ("sync \"none\"", Change("ppo-2", &["sync=none"])),
        ("sync.check-every", Change("ppo-2", &["sync.check-every=1"])),
        (
            "sync.rendezvous-timeout",
            Change("cartpole-ppo", &["sync.rendezvous-timeout=77"]),
        ),
        (
            "sync.collective-timeout",
            Change("cartpole-ppo", &["sync.collective-timeout=77"]),
        ),
        // On CPU ranks `auto` is Gloo too: the resolved config (and its hash) is what differs.
        (
            "sync.backend",
            Change("cartpole-ppo", &["sync.backend=gloo"]),
        ),
        (
            "sync.bucket-mb (allreduce)",
            Change("ppo-2", &["sync.bucket-mb=1"]),
        ),
        (
            "sync.compression (allreduce)",
            Change("ppo-2", &["sync.compression=bf16"]),
        ),
        (
            "sync.every (periodic)",
            Change("ppo-2-periodic", &["sync.every=2"]),
        ),
        // train
        (
            "train.total-steps",
            Change("cartpole-ppo", &["train.total-steps=320"]),
        ),
        (
            "train.rollout",
            Change("cartpole-ppo", &["train.rollout=8"]),
        ),
        (
            "train.env-groups",
            Change("cartpole-ppo", &["train.env-groups=2"]),
        ),
        (
            "train.sampling",
            Change("cartpole-ppo", &["train.sampling=pipelined"]),
        ),
        (
            "train.round-updates",
            Change("cartpole-ppo-free", &["train.round-updates=1"]),
        ),
        (
            "train.max-policy-lag",
            Change("cartpole-ppo-free", &["train.max-policy-lag=1"]),
        ),
        (
            "train.max-steps",
            Change("cartpole-ppo", &["train.max-steps=128"]),
        ),
        (
            "train.policies",
            Change(
                "mpe-tag",
                &["train.policies=predators \"adversary_*\"; prey \"agent_*\""],
            ),
        ),
        // population
        (
            "population.members",
            Change("ppo-2", &["population.members=2"]),
        ),
        (
            "population.period",
            Change("population", &["population.period=128"]),
        ),
        (
            "population.objective",
            Change("population", &["population.objective=eval"]),
        ),
        (
            "population.objective-scalar",
            Change(
                "population",
                &[
                    "population.objective=scalar",
                    "population.objective-scalar=loss/entropy",
                ],
            ),
        ),
        (
            "population.exploit",
            Change("population", &["population.exploit=0"]),
        ),
        (
            "population.explore",
            Change(
                "population",
                &["population.explore=algorithm.entropy-coef 0 0.05 0.1"],
            ),
        ),
        // league
        (
            "league.every",
            Change("mpe-tag-league", &["league.every=1024"]),
        ),
        ("league.size", Change("mpe-tag-league", &["league.size=2"])),
        (
            "league.opponent",
            Change("mpe-tag-league", &["league.opponent=latest"]),
        ),
        (
            "league.pool",
            Change("mpe-tag-league-population", &["league.pool=population"]),
        ),
        // log
        (
            "log.tensorboard",
            Change("cartpole-ppo", &["log.tensorboard=#false"]),
        ),
        (
            "log.console",
            Change("cartpole-ppo", &["log.console=quiet"]),
        ),
        ("log.interval", Change("cartpole-ppo", &["log.interval=2"])),
        (
            "log.interval-unit",
            Change(
                "cartpole-ppo",
                &["log.interval-unit=seconds", "log.interval=3600"],
            ),
        ),
        (
            "log.histogram-every",
            Change("cartpole-ppo", &["log.histogram-every=1"]),
        ),
        // checkpoint
        (
            "checkpoint.every",
            Change("cartpole-ppo", &["checkpoint.every=#null"]),
        ),
        (
            "checkpoint.unit",
            Change("cartpole-ppo", &["checkpoint.unit=steps"]),
        ),
        (
            "checkpoint.keep",
            Change("cartpole-ppo", &["checkpoint.keep=1"]),
        ),
        // eval
        ("eval.every", Change("cartpole-ppo", &["eval.every=2"])),
        ("eval.unit", Change("cartpole-eval", &["eval.unit=steps"])),
        (
            "eval.episodes",
            Change("cartpole-eval", &["eval.episodes=3"]),
        ),
        (
            "eval.deterministic",
            Change("cartpole-eval", &["eval.deterministic=#false"]),
        ),
        (
            "eval.max-episode-steps",
            Change("cartpole-eval", &["eval.max-episode-steps=5"]),
        ),
        (
            "eval.video-every",
            Change("cartpole-eval", &["eval.video-every=1"]),
        ),
        // network "layers" and its layers: each layer added to (or changed in) a tiny list
        (
            "network \"layers\"",
            Change("cartpole-layers", &["network=mlp"]),
        ),
        (
            "network.layers (layers)",
            Change("cartpole-layers", &["network.layers=linear 8; relu"]),
        ),
        ("linear", Change("cartpole-layers", &[CARTPOLE_TWO_LINEAR])),
        (
            "linear.out",
            Change("cartpole-layers", &["network.layers=linear 9; tanh"]),
        ),
        ("conv", Change("minatar-layers", &[MINATAR_TWO_CONVS])),
        (
            "conv.out",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 5 kernel=3; relu; max-pool 2 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "conv.kernel",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=2; relu; max-pool 2 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "conv.stride",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=3 stride=2; relu; max-pool 2 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "conv.padding",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=3 padding=1; relu; max-pool 2 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        ("max-pool", Change("minatar-layers", &[MINATAR_NO_POOL])),
        (
            "max-pool.kernel",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=3; relu; max-pool 3 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "max-pool.stride",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=3; relu; max-pool 2 stride=1; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "max-pool.padding",
            Change(
                "minatar-layers",
                &[
                    "network.layers=conv 4 kernel=3; relu; max-pool 2 stride=2 padding=1; flatten; linear 16; relu",
                ],
            ),
        ),
        // `flatten` changes a picture's shape, not its values (a linear layer and the heads
        // flatten by themselves): a convolution after it is refused.
        (
            "flatten",
            Change(
                "minatar-layers",
                &["network.layers=conv 4 kernel=3; flatten; conv 4 kernel=3; linear 16"],
            ),
        ),
        (
            "layer-norm",
            Change(
                "cartpole-layers",
                &["network.layers=linear 8; layer-norm; tanh"],
            ),
        ),
        (
            "relu",
            Change("cartpole-layers", &["network.layers=linear 8; relu"]),
        ),
        (
            "tanh",
            Change("cartpole-layers", &["network.layers=linear 8"]),
        ),
        (
            "elu",
            Change("cartpole-layers", &["network.layers=linear 8; elu"]),
        ),
        (
            "gelu",
            Change("cartpole-layers", &["network.layers=linear 8; gelu"]),
        ),
        (
            "silu",
            Change("cartpole-layers", &["network.layers=linear 8; silu"]),
        ),
        (
            "sigmoid",
            Change("cartpole-layers", &["network.layers=linear 8; sigmoid"]),
        ),
        (
            "scale-pixels",
            Change(
                "minatar-layers",
                &[
                    "network.layers=scale-pixels; conv 4 kernel=3; relu; max-pool 2 stride=2; flatten; linear 16; relu",
                ],
            ),
        ),
        (
            "residual",
            Change(
                "cartpole-layers",
                &["network.layers=linear 8; residual { tanh; linear 8 }; tanh"],
            ),
        ),
    ]
}

const CARTPOLE_TWO_LINEAR: &str = "network.layers=linear 8; tanh; linear 8; tanh";
const MINATAR_TWO_CONVS: &str = "network.layers=conv 4 kernel=3; relu; conv 4 kernel=3; relu; max-pool 2 stride=2; flatten; linear 16; relu";
const MINATAR_NO_POOL: &str = "network.layers=conv 4 kernel=3; relu; flatten; linear 16; relu";

/// The row name of a schema entry: the path, with the kind it belongs to in parentheses,
/// a kind as `section "kind"`, a wrapper by its name and a parameter as `wrapper.param`.
fn key(s: &SettingInfo) -> String {
    match (s.role, s.kind) {
        (SettingRole::Kind, Some(kind)) => format!("{} \"{kind}\"", s.path),
        (SettingRole::Setting, Some(kind)) => format!("{} ({kind})", s.path),
        _ => s.path.clone(),
    }
}

/// A game of the catalogue, which tests/game_catalogue.rs covers instead of a row.
fn is_catalogue_game(s: &SettingInfo) -> bool {
    s.role == SettingRole::Kind
        && s.section == "env"
        && s.kind
            .is_some_and(|k| tandem_config::games().any(|g| g.name == k))
}

/// What a user can see of a run.
#[derive(Debug, PartialEq, Clone)]
struct Observed {
    /// The final checkpoint's tensors (model, optimizer, normalisers), bytes by name; the
    /// checkpoint's metadata (its config text and hash) is left out.
    tensors: BTreeMap<String, Vec<u8>>,
    /// `summary.json` without wall-clock figures and the config hash.
    summary: BTreeMap<String, String>,
    /// TensorBoard: every (tag, step), and the values of the deterministic scalars.
    tensorboard: Vec<(String, i64, Option<u32>)>,
    /// The run directory's files (event file names without their time and pid).
    files: BTreeSet<String>,
    /// The rank logs, without timestamps, hashes and timing figures.
    rank_logs: Vec<String>,
    /// The launcher's console output, likewise.
    console: Vec<String>,
    /// The run directory relative to the working directory, without its time.
    run_dir: String,
}

const OBSERVABLES: [&str; 7] = [
    "tensors",
    "summary",
    "tensorboard",
    "files",
    "rank logs",
    "console",
    "run directory",
];

impl Observed {
    fn equal_parts(&self, other: &Observed) -> [bool; 7] {
        [
            self.tensors == other.tensors,
            self.summary == other.summary,
            self.tensorboard == other.tensorboard,
            self.files == other.files,
            self.rank_logs == other.rank_logs,
            self.console == other.console,
            self.run_dir == other.run_dir,
        ]
    }
}

enum Outcome {
    Ran(Box<Observed>),
    /// The resolver refused the config (its message).
    Refused(String),
    /// The config resolved but the run failed (its output).
    Failed(String),
    /// Not run: the gymnasium venv is missing (and not required).
    Skipped,
}

/// A unique scratch directory for one run.
fn scratch(label: &str) -> PathBuf {
    let clean: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let dir = std::env::temp_dir().join(format!("tandem-walk-{}/{clean}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Resolves, then trains `text` with `sets` in a fresh directory (no `--run-dir`, so the
/// experiment's name places the run) and reads what it left.
fn train(label: &str, text: &str, sets: &[String]) -> Outcome {
    let gymnasium = is_gymnasium(text);
    let sets: Vec<String> = match (gymnasium, venv()) {
        (false, _) => sets.to_vec(),
        (true, None) => return Outcome::Skipped,
        // The venv's interpreter first, so that a row's own `env.python` wins.
        (true, Some(venv)) => std::iter::once(format!(
            "env.python=\"{}\"",
            venv.join("bin/python").display()
        ))
        .chain(
            sets.iter()
                .map(|s| s.replace(VENV, &venv.display().to_string())),
        )
        .collect(),
    };
    let sets = &sets[..];
    let dir = scratch(label);
    let file = dir.join("experiment.kdl");
    std::fs::write(&file, text).unwrap();
    if let Err(diags) = tandem_config::resolve(&Source::Path(file.clone()), sets) {
        return Outcome::Refused(diags.render(false));
    }
    let mut cmd = Command::new(TANDEM);
    cmd.current_dir(&dir)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR")
        .arg("train")
        .arg("experiment.kdl");
    if gymnasium {
        // The fixtures' modules (`tests.gym_fixtures.*`) live in crates/tandem-env.
        cmd.env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/tandem-env"),
        );
    }
    for s in sets {
        cmd.args(["--set", s]);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::finish(child, RUN_LIMIT);
    if !done.status.success() {
        return Outcome::Failed(done.output);
    }
    Outcome::Ran(Box::new(observe(&dir, &done.output)))
}

fn observe(dir: &Path, console: &str) -> Observed {
    let runs = dir.join("runs");
    let experiment = only_entry(&runs);
    let run = only_entry(&experiment);
    let run_dir = experiment.strip_prefix(dir).unwrap().display().to_string();
    // A population's members are runs of their own under `members/<k>/`; its summary.json is
    // the population's.
    let members: Vec<PathBuf> = match std::fs::read_dir(run.join("members")) {
        Ok(entries) => {
            let mut found: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
            found.sort();
            found
        }
        Err(_) => vec![run.clone()],
    };
    let member_tensors = members.iter().enumerate().flat_map(|(k, member)| {
        tensors(member)
            .into_iter()
            .map(move |(n, t)| (format!("{k}/{n}"), t))
    });
    Observed {
        tensors: member_tensors.collect(),
        summary: summary(&run),
        tensorboard: members.iter().flat_map(|m| tensorboard(m)).collect(),
        files: files(&run, &run),
        rank_logs: rank_logs(&run),
        console: console.lines().map(mask).collect(),
        run_dir,
    }
}

fn only_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

fn tensors(run: &Path) -> BTreeMap<String, Vec<u8>> {
    common::checkpoint_tensors(run)
}

fn summary(run: &Path) -> BTreeMap<String, String> {
    // A flat object of numbers, booleans, null and one string (the hash): split at the commas.
    let text = std::fs::read_to_string(run.join("summary.json")).unwrap();
    let body = text.trim().trim_start_matches('{').trim_end_matches('}');
    body.split(", ")
        .filter_map(|field| {
            let (k, v) = field.split_once(": ")?;
            let k = k.trim_matches('"');
            let timed = [
                "wall_seconds",
                "steps_per_second",
                "cpu_seconds",
                "config_hash",
            ];
            (!timed.contains(&k)).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn tensorboard(run: &Path) -> Vec<(String, i64, Option<u32>)> {
    use tandem_summary::proto::event::What;
    use tandem_summary::proto::summary::value::Kind;
    let Ok(files) = tandem_summary::reader::event_files(&run.join("tensorboard")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for file in files {
        for event in tandem_summary::reader::read_event_file(&file)
            .unwrap()
            .events
        {
            let Some(What::Summary(s)) = &event.what else {
                continue;
            };
            for v in &s.value {
                let timed = v.tag.starts_with("perf/") || v.tag.starts_with("time/");
                let value = match &v.kind {
                    Some(Kind::SimpleValue(x)) if !timed => Some(x.to_bits()),
                    _ => None,
                };
                out.push((v.tag.clone(), event.step, value));
            }
        }
    }
    out
}

fn files(root: &Path, dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(root, &path));
        }
        let name = path.strip_prefix(root).unwrap().display().to_string();
        out.insert(match name.find("events.out.tfevents") {
            Some(at) => name[..at + "events.out.tfevents".len()].to_string(),
            None => name,
        });
    }
    out
}

fn rank_logs(run: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(run.join("logs")) else {
        return out;
    };
    let mut logs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    logs.sort();
    for log in logs {
        out.push(format!("== {}", log.file_name().unwrap().to_string_lossy()));
        let text = std::fs::read_to_string(&log).unwrap();
        out.extend(text.lines().map(mask));
    }
    out
}

/// A log or console line without what varies from run to run of one config: the timestamp,
/// the config hash, the rendezvous port, the run directory's time and every figure of a line
/// that reports speed or time.
fn mask(line: &str) -> String {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    if words
        .first()
        .is_some_and(|w| w.len() > 20 && w.contains('T') && w.ends_with('Z'))
    {
        words.remove(0);
    }
    let line = words.join(" ");
    let timed = ["steps/s", "time slice", "run directory", " in ", "seconds"]
        .iter()
        .any(|t| line.contains(t));
    let mut out = String::new();
    for word in line.split(' ') {
        let hex = word.len() >= 12 && word.chars().all(|c| c.is_ascii_hexdigit());
        // The rendezvous port a single-node launcher picks is free at the time, not configured.
        let port = word
            .rsplit_once(':')
            .filter(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        if hex {
            out.push_str("<hash>");
        } else if let Some((host, _)) = port {
            out.push_str(host);
            out.push_str(":<port>");
        } else if timed {
            // Each run of digits becomes one `#`: figures of any width compare equal.
            let mut last_digit = false;
            for c in word.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !last_digit {
                    out.push('#');
                }
                last_digit = c.is_ascii_digit();
            }
        } else {
            out.push_str(word);
        }
        out.push(' ');
    }
    out
}

/// The `env.wrappers` block of `text` with the wrapper `name` replaced by `with`.
fn wrappers_set(text: &str, name: &str, with: &str) -> String {
    let open = text.find("wrappers {").expect("the base has wrappers");
    let close = open + text[open..].find('}').unwrap();
    let lines: Vec<&str> = text[open + "wrappers {".len()..close]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.split_whitespace().next() == Some(name)),
        "the base has no wrapper {name}"
    );
    let kept: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.split_whitespace().next() == Some(name) {
                with
            } else {
                l
            }
        })
        .filter(|l| !l.is_empty())
        .collect();
    format!("env.wrappers={}", kept.join("; "))
}

/// Runs `jobs` on two threads (the machine's cores), results by job index.
fn run_all(jobs: Vec<(String, &'static str, Vec<String>)>) -> Vec<Outcome> {
    common::on_two_threads(&jobs, |(label, text, sets)| train(label, text, sets))
}

#[test]
fn every_setting_changes_what_a_run_does() {
    let rows = table();
    let names: BTreeSet<&str> = rows.iter().map(|(k, _)| *k).collect();
    assert_eq!(names.len(), rows.len(), "a row appears twice");
    let schema: Vec<String> = schema_settings()
        .iter()
        .filter(|s| !is_catalogue_game(s))
        .map(key)
        .collect();
    let missing: Vec<&String> = schema
        .iter()
        .filter(|k| !names.contains(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "settings without a row in the walk's table: {missing:?}"
    );
    let stale: Vec<&&str> = names
        .iter()
        .filter(|k| !schema.iter().any(|s| s == **k))
        .collect();
    assert!(stale.is_empty(), "rows for no schema setting: {stale:?}");

    let base = |name: &str| {
        *BASES
            .iter()
            .find(|b| b.name == name)
            .unwrap_or_else(|| panic!("no base {name}"))
    };
    let own = |b: &Base| b.sets.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Every base once, then one run per row that can be observed.
    let mut jobs: Vec<(String, &'static str, Vec<String>)> = BASES
        .iter()
        .map(|b| (format!("base-{}", b.name), b.text, own(b)))
        .collect();
    let mut row_jobs: Vec<(&str, &'static str, usize, Vec<String>)> = Vec::new();
    let mut skipped = Vec::new();
    for (name, proof) in &rows {
        let (b, change) = match proof {
            Change(b, sets) => (
                base(b),
                sets.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            ),
            Wrapper(b, wrapper, with) => (base(b), vec![wrappers_set(base(b).text, wrapper, with)]),
        };
        let mut sets = own(&b);
        sets.extend(change.iter().cloned());
        let index = BASES.iter().position(|x| x.name == b.name).unwrap();
        row_jobs.push((name, b.name, index, change));
        jobs.push((name.to_string(), b.text, sets));
    }
    // The controls: the first base and the gymnasium base (Python processes, another source
    // of variation) again, which must leave every observable equal (else the comparisons
    // below would prove nothing).
    let controls = [
        0,
        BASES.iter().position(|b| b.name == "gym-counter").unwrap(),
    ];
    for &c in &controls {
        jobs.push((
            format!("control-{}", BASES[c].name),
            BASES[c].text,
            own(&BASES[c]),
        ));
    }
    let mut outcomes = run_all(jobs);
    let control_runs = outcomes.split_off(outcomes.len() - controls.len());
    let (bases, changed) = outcomes.split_at(BASES.len());
    for (&c, control) in controls.iter().zip(&control_runs) {
        if let (Outcome::Ran(a), Outcome::Ran(b)) = (&bases[c], control) {
            let varying: Vec<&str> = OBSERVABLES
                .iter()
                .zip(a.equal_parts(b))
                .filter(|(_, e)| !e)
                .map(|(o, _)| *o)
                .collect();
            assert!(
                varying.is_empty(),
                "two runs of base {} differ in {varying:?}: the walk cannot compare runs",
                BASES[c].name
            );
        }
    }

    let mut problems = Vec::new();
    for (b, outcome) in BASES.iter().zip(bases) {
        match outcome {
            Outcome::Ran(_) | Outcome::Skipped => {}
            Outcome::Refused(why) | Outcome::Failed(why) => {
                problems.push(format!("base {} did not run:\n{why}", b.name))
            }
        }
    }
    let mut proven = Vec::new();
    for ((name, base_name, index, change), outcome) in row_jobs.iter().zip(changed) {
        let sets = change
            .iter()
            .map(|s| format!("--set {s}"))
            .collect::<Vec<_>>()
            .join(" ");
        let before = match &bases[*index] {
            Outcome::Ran(before) => before,
            Outcome::Skipped => {
                skipped.push(format!("{name}: skipped, no gymnasium venv"));
                continue;
            }
            _ => continue,
        };
        match outcome {
            Outcome::Skipped => unreachable!("{name} ran its base but was skipped"),
            Outcome::Refused(_) => proven.push(format!("{name}: refused by the resolver")),
            Outcome::Failed(out) => problems.push(format!(
                "`{name}` (base {base_name}, {sets}): the changed run failed:\n{}",
                out.lines()
                    .rev()
                    .take(6)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
            Outcome::Ran(after) => {
                let equal = before.equal_parts(after);
                let differs: Vec<&str> = OBSERVABLES
                    .iter()
                    .zip(equal)
                    .filter(|(_, e)| !e)
                    .map(|(o, _)| *o)
                    .collect();
                if differs.is_empty() {
                    problems.push(format!(
                        "`{name}` is ignored: base {base_name} with {sets} left every observable equal ({})",
                        OBSERVABLES.join(", ")
                    ));
                } else {
                    proven.push(format!("{name}: {}", differs.join(", ")));
                }
            }
        }
    }
    println!("{}", proven.join("\n"));
    println!("{}", skipped.join("\n"));
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("tandem-walk-{}", std::process::id())),
        );
    }
    assert!(
        problems.is_empty(),
        "{} of {} settings are not shown to matter:\n{}",
        problems.len(),
        rows.len(),
        problems.join("\n")
    );
}

//! The gymnasium bridge with real Python worker processes: end to end through VecEnv and
//! wrappers, step-for-step parity with gymnasium driven directly (CartPole-v1,
//! Pendulum-v1, HalfCheetah-v5), the `info-keys` values of each episode's last step, and every
//! failure it must report without a panic, a hang or a process left behind. Needs the venv
//! of scripts/gym-venv-setup.sh; without it the tests skip, unless
//! TANDEM_REQUIRE_PYTHON_TOOLS=1 (tests/common/tools.rs).

#[path = "../../../tests/common/tools.rs"]
mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tandem_env::rng::Xoshiro256;
use tandem_env::{
    ActionMask, ActionSpace, BridgeOptions, EnvError, EnvSpec, Game, Gymnasium, Scalar, VecEnv,
    Wrapper, env_seeds, observation_space,
};

const FIXTURES: &str = "tests.gym_fixtures.test_envs";

/// The venv's interpreter, or `None` (after the tools rule) when it is missing.
fn venv_python() -> Option<PathBuf> {
    // The workspace root is two levels above this crate.
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv-gym/bin/python");
    if python.exists() {
        Some(python)
    } else {
        tools::tool_missing(
            &python.display().to_string(),
            "the gymnasium bridge test",
            "run scripts/gym-venv-setup.sh (scripts/setup --test does)",
        );
        None
    }
}

fn gym(python: &Path, id: &str, workers: usize) -> Gymnasium {
    Gymnasium {
        id: id.into(),
        python: python.display().to_string(),
        imports: vec![FIXTURES.into()],
        make_args: Vec::new(),
        workers,
        step_timeout_s: 30.0,
        action_mask: ActionMask::None,
        info_keys: Vec::new(),
    }
}

/// `id` on `python` in one worker, without fixtures: for the tests where nothing starts.
fn unstarted(python: &str, id: &str) -> Gymnasium {
    Gymnasium {
        id: id.into(),
        python: python.into(),
        imports: Vec::new(),
        make_args: Vec::new(),
        workers: 1,
        step_timeout_s: 60.0,
        action_mask: ActionMask::None,
        info_keys: Vec::new(),
    }
}

/// The batch of `spec`'s environments, made for drawing when `render`.
fn start(spec: &EnvSpec, seeds: &[u64], render: bool) -> VecEnv {
    let bridge = BridgeOptions {
        log_prefix: String::new(),
        render,
    };
    VecEnv::with_bridge(spec, seeds, 1, &bridge).unwrap()
}

/// Whether `pid` runs; a zombie (killed, not yet reaped by whoever adopted it) does not.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

fn start_error(spec: &EnvSpec, n: usize) -> String {
    match VecEnv::new(spec, &env_seeds(1, 0, 0, n), 1) {
        Ok(_) => panic!("{spec:?} started"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn cartpole_runs_through_wrappers_and_reports_its_interpreter() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "CartPole-v1", 2)))
        .with(Wrapper::TimeLimit { max_steps: 7 })
        .with(Wrapper::FrameStack { n: 2 })
        .with(Wrapper::ClipReward);
    let mut envs = VecEnv::new(&spec, &env_seeds(3, 0, 0, 5), 1).unwrap();
    let info = envs
        .gym_info()
        .expect("a gymnasium VecEnv has handshake info")
        .clone();
    assert!(info.python.ends_with("venv-gym/bin/python"), "{info}");
    assert_eq!(info.gymnasium_version, "1.4.0");
    assert!(info.python_version.starts_with("3."), "{info}");
    assert_eq!(info.worker_pids.len(), 2);
    assert!(info.to_string().contains("CartPole-v1"));
    assert_eq!(envs.action_space(), &ActionSpace::discrete(2));
    assert_eq!(envs.obs_shape(), vec![8]);
    envs.reset();
    let mut rng = Xoshiro256::new(5);
    let mut truncations = 0;
    for _ in 0..60 {
        let actions: Vec<i64> = (0..5).map(|_| rng.below(2) as i64).collect();
        envs.step(&actions).unwrap();
        truncations += envs.truncated().iter().filter(|&&t| t).count();
        assert!(envs.rewards().iter().all(|&r| r == 1.0));
    }
    let episodes = envs.drain_episodes();
    assert!(!episodes.is_empty());
    assert!(episodes.iter().all(|e| e.length <= 7), "{episodes:?}");
    // Time-limit resets (a round trip of their own) happened and the run went on.
    assert!(truncations > 0);
    drop(envs);
    for pid in info.worker_pids {
        assert!(!alive(pid), "worker {pid} outlived its VecEnv");
    }
}

#[test]
fn make_args_reach_gymnasium_make_and_user_prints_do_not_break_the_protocol() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "TandemTest/Counter-v0", 1);
    spec.make_args = vec![
        ("length".into(), Scalar::Int(3)),
        ("chatty".into(), Scalar::Bool(true)),
    ];
    let mut envs = VecEnv::new(&EnvSpec::new(Game::Gymnasium(spec)), &[7, 8], 1).unwrap();
    let first = envs.reset().to_vec();
    assert_eq!((first[0], first[2]), (0.0, 0.0));
    for step in 1..=3 {
        envs.step(&[2, 1]).unwrap();
        assert_eq!(envs.rewards(), &[2.0, 1.0]);
        assert_eq!(envs.terminated(), &[step == 3, step == 3]);
    }
    // The row holds the next episode's first observation, final_obs the last one.
    assert_eq!(envs.obs()[0], 0.0);
    assert_eq!(envs.final_obs_row(0)[0], 3.0);
}

#[test]
fn u8_images_go_through_the_image_wrappers() {
    let Some(python) = venv_python() else { return };
    let game = Game::Gymnasium(gym(&python, "TandemTest/Image-v0", 1));
    let mut raw = VecEnv::new(&EnvSpec::new(game.clone()), &[1], 1).unwrap();
    assert_eq!(raw.obs_shape(), vec![3, 12, 10]);
    raw.step(&[0]).unwrap();
    // Channels-first: the pixel (h, w, c) of step 1 is (h*30 + w*3 + c + 7) % 256.
    let (h, w, c) = (5usize, 4usize, 2usize);
    assert_eq!(
        raw.obs()[c * 120 + h * 10 + w],
        ((h * 30 + w * 3 + c + 7) % 256) as f32
    );
    let spec = EnvSpec::new(game)
        .with(Wrapper::Grayscale)
        .with(Wrapper::Resize {
            height: 6,
            width: 5,
        })
        .with(Wrapper::FrameStack { n: 2 });
    let mut small = VecEnv::new(&spec, &[1], 1).unwrap();
    assert_eq!(small.obs_shape(), vec![2, 6, 5]);
    small.reset();
    small.step(&[1]).unwrap();
    assert_ne!(small.obs()[..30], small.obs()[30..]);
}

/// Runs `id` through the bridge and through tests/gym_fixtures/direct.py with the same
/// seeds and random actions; everything must be bit-identical.
fn parity(id: &str, workers: usize, envs_n: usize, steps: usize) {
    let Some(python) = venv_python() else { return };
    let seeds = env_seeds(11, 0, 0, envs_n);
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, id, workers)));
    let mut envs = VecEnv::new(&spec, &seeds, 1).unwrap();
    let space = envs.action_space().clone();
    let mut rng = Xoshiro256::new(99);
    let mut action_bytes = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..steps {
        let step: Vec<f32> = match &space {
            ActionSpace::Discrete { n } => {
                (0..envs_n).map(|_| rng.below(*n as u64) as f32).collect()
            }
            ActionSpace::Box { low, high } => (0..envs_n)
                .flat_map(|_| {
                    low.iter()
                        .zip(high.iter())
                        .map(|(&l, &h)| rng.uniform(l as f64, h as f64) as f32)
                        .collect::<Vec<_>>()
                })
                .collect(),
            ActionSpace::MultiDiscrete { .. } => unreachable!("{id}: no parity id has these"),
        };
        for &a in &step {
            match space {
                ActionSpace::Box { .. } => action_bytes.extend(a.to_le_bytes()),
                _ => action_bytes.extend((a as i64).to_le_bytes()),
            }
        }
        actions.push(step);
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gym-parity-{id}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("actions"), &action_bytes).unwrap();
    let config = serde_json::json!({"id": id, "seeds": seeds, "steps": steps});
    let output = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gym_fixtures/direct.py"))
        .arg(config.to_string())
        .arg(dir.join("actions"))
        .arg(dir.join("direct"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "direct.py: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let direct = std::fs::read(dir.join("direct")).unwrap();
    let mut at = 0;
    let mut take = |bytes: usize| {
        at += bytes;
        &direct[at - bytes..at]
    };
    let f32s = |b: &[u8]| -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let len = envs.obs_len();
    assert_eq!(
        envs.reset(),
        f32s(take(envs_n * len * 4)).as_slice(),
        "{id}: first observations"
    );
    let mut ends = 0;
    for (t, step) in actions.iter().enumerate() {
        // Every other step is begun and finished in two calls, as the off-policy learners
        // step while they update.
        let discrete: Vec<i64> = step.iter().map(|&a| a as i64).collect();
        match (space.is_box(), t % 2 == 1) {
            (false, false) => envs.step(&discrete).unwrap(),
            (true, false) => envs.step(step).unwrap(),
            (false, true) => {
                envs.begin_step(&discrete).unwrap();
                envs.finish_step().unwrap();
            }
            (true, true) => {
                envs.begin_step(step).unwrap();
                envs.finish_step().unwrap();
            }
        }
        let obs = f32s(take(envs_n * len * 4));
        let fin = f32s(take(envs_n * len * 4));
        let rewards = f32s(take(envs_n * 4));
        let term: Vec<bool> = take(envs_n).iter().map(|&b| b == 1).collect();
        let trunc: Vec<bool> = take(envs_n).iter().map(|&b| b == 1).collect();
        // Bitwise, so that -0.0 and 0.0 or NaNs cannot hide a difference.
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(envs.obs()),
            bits(&obs),
            "{id}: observations at step {t}"
        );
        assert_eq!(
            bits(envs.rewards()),
            bits(&rewards),
            "{id}: rewards at step {t}"
        );
        assert_eq!(
            envs.terminated(),
            term.as_slice(),
            "{id}: terminated at step {t}"
        );
        assert_eq!(
            envs.truncated(),
            trunc.as_slice(),
            "{id}: truncated at step {t}"
        );
        for i in 0..envs_n {
            if term[i] || trunc[i] {
                ends += 1;
                assert_eq!(
                    bits(envs.final_obs_row(i)),
                    bits(&fin[i * len..(i + 1) * len]),
                    "{id}: final observation of env {i} at step {t}"
                );
            }
        }
    }
    assert_eq!(at, direct.len());
    assert!(
        ends >= envs_n,
        "{id}: only {ends} episode ends in {steps} steps"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cartpole_matches_gymnasium_step_for_step() {
    parity("CartPole-v1", 2, 3, 3400);
}

#[test]
fn pendulum_matches_gymnasium_step_for_step() {
    parity("Pendulum-v1", 2, 3, 3400);
}

#[test]
fn half_cheetah_matches_gymnasium_step_for_step() {
    parity("HalfCheetah-v5", 2, 3, 3400);
}

#[test]
fn a_missing_interpreter_is_named() {
    let spec = unstarted("/nonexistent/python3", "CartPole-v1");
    let message = start_error(&EnvSpec::new(Game::Gymnasium(spec)), 2);
    assert!(
        message.contains("cannot start the Python interpreter `/nonexistent/python3`"),
        "{message}"
    );
}

#[test]
fn an_interpreter_without_gymnasium_is_named() {
    let Some(python) = venv_python() else { return };
    // A venv made from the same interpreter without any packages.
    let bare =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bare-venv-{}", std::process::id()));
    let made = Command::new(&python)
        .args(["-m", "venv", "--without-pip", "--clear"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(made.success());
    let bare_python = bare.join("bin/python");
    let spec = unstarted(&bare_python.display().to_string(), "CartPole-v1");
    let message = start_error(&EnvSpec::new(Game::Gymnasium(spec)), 2);
    assert!(
        message.contains("gymnasium is not importable by"),
        "{message}"
    );
    assert!(message.contains("No module named 'gymnasium'"), "{message}");
    assert!(message.contains(&*bare.to_string_lossy()), "{message}");
    let _ = std::fs::remove_dir_all(bare);
}

#[test]
fn an_unknown_id_is_named() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "TandemTest/NoSuchEnv-v0", 2)));
    let message = start_error(&spec, 3);
    assert!(
        message.contains("gymnasium `TandemTest/NoSuchEnv-v0`: could not make environment"),
        "{message}"
    );
    assert!(message.contains("NoSuchEnv"), "{message}");
}

#[test]
fn a_failing_import_shows_its_traceback() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "CartPole-v1", 1);
    spec.imports = vec!["tandem_no_such_module".into()];
    let message = start_error(&EnvSpec::new(Game::Gymnasium(spec)), 1);
    assert!(
        message.contains("importing module `tandem_no_such_module` failed"),
        "{message}"
    );
    assert!(message.contains("ModuleNotFoundError"), "{message}");
}

#[test]
fn unsupported_spaces_are_refused_with_the_space_and_the_id() {
    let Some(python) = venv_python() else { return };
    for (id, words) in [
        (
            "TandemTest/TwoPictures-v0",
            "is not supported: it holds 2 images (`frame`, `glance`); tandem takes one image beside vectors",
        ),
        (
            "TandemTest/TextObs-v0",
            "is not supported: the observation is a Text space",
        ),
        (
            "TandemTest/GridMultiDiscreteAct-v0",
            "action space MultiDiscrete([[2 3]\n [2 2]]) is not supported",
        ),
    ] {
        let message = start_error(&EnvSpec::new(Game::Gymnasium(gym(&python, id, 1))), 1);
        assert!(
            message.contains(id) && message.contains(words),
            "{id}: {message}"
        );
    }
}

#[test]
fn multi_discrete_and_multi_binary_actions_reach_the_environment_as_its_space_holds_them() {
    let Some(python) = venv_python() else { return };
    // MultiDiscrete([2, 3], start=[1, -1]): tandem's indices count from 0, the space from
    // its start; MultiBinary(3) takes int8 bits.
    for (id, nvec, sent, received) in [
        (
            "TandemTest/MultiDiscreteAct-v0",
            vec![2, 3],
            vec![1i64, 2, 0, 0],
            vec![2.0f32, 1.0, 1.0, -1.0],
        ),
        (
            "TandemTest/MultiBinaryAct-v0",
            vec![2, 2, 2],
            vec![1, 0, 1, 0, 1, 1],
            vec![1.0, 0.0, 1.0, 0.0, 1.0, 1.0],
        ),
    ] {
        let spec = EnvSpec::new(Game::Gymnasium(gym(&python, id, 2)));
        let mut envs = VecEnv::new(&spec, &env_seeds(1, 0, 0, 2), 1).unwrap();
        assert_eq!(
            envs.action_space(),
            &ActionSpace::MultiDiscrete {
                nvec: nvec.clone().into()
            },
            "{id}"
        );
        envs.reset();
        envs.step(&sent).unwrap();
        assert_eq!(
            envs.obs(),
            received.as_slice(),
            "{id}: what the environments got"
        );
        assert_eq!(envs.rewards(), [1.0, 1.0], "{id}: members of the space");
        // An index past its component's count is refused before anything is sent.
        let mut outside = sent.clone();
        outside[nvec.len() - 1] = nvec[nvec.len() - 1] as i64;
        let message = envs.step(&outside).unwrap_err().to_string();
        assert!(
            message.contains(&format!("component {} of its action is", nvec.len() - 1)),
            "{id}: {message}"
        );
    }
}

/// `TandemTest/Masked-v0` with its mask read from `source`, its other make-args `args`.
fn masked(python: &Path, source: ActionMask, args: &[(&str, &str)]) -> EnvSpec {
    let mut spec = gym(python, "TandemTest/Masked-v0", 1);
    spec.action_mask = source;
    spec.make_args = args
        .iter()
        .map(|(k, v)| (k.to_string(), Scalar::Str(v.to_string())))
        .collect();
    EnvSpec::new(Game::Gymnasium(spec))
}

#[test]
fn an_action_mask_from_info_or_the_observation_follows_the_observation() {
    let Some(python) = venv_python() else { return };
    for (source, args, read) in [
        (ActionMask::Info, vec![], "info['action_mask']"),
        (
            ActionMask::Observation,
            vec![("source", "observation")],
            "observation['action_mask']",
        ),
    ] {
        let mut envs =
            VecEnv::new(&masked(&python, source, &args), &env_seeds(1, 0, 0, 2), 1).unwrap();
        assert_eq!(
            envs.obs_shape(),
            vec![5],
            "{source:?}: x, then 4 mask entries"
        );
        let encoding = encoding(&envs);
        assert!(
            encoding.ends_with(&format!("`action mask` {read} 0/1 values at 1..5")),
            "{encoding}"
        );
        envs.reset();
        for t in 0..7usize {
            let t_in_episode = (t % 5) as f32;
            let mask = if t % 5 % 2 == 0 {
                [1.0, 1.0, 0.0, 0.0]
            } else {
                [0.0, 0.0, 1.0, 1.0]
            };
            let row: Vec<f32> = std::iter::once(t_in_episode).chain(mask).collect();
            assert_eq!(&envs.obs()[..5], row.as_slice(), "{source:?}, step {t}");
            // The first environment acts validly, the second not.
            let valid = if t % 5 % 2 == 0 { 0 } else { 2 };
            envs.step(&[valid, 3 - valid]).unwrap();
            assert_eq!(envs.rewards(), [1.0, -1.0], "{source:?}, step {t}");
        }
    }
}

#[test]
fn a_broken_or_missing_action_mask_names_what_is_wrong() {
    let Some(python) = venv_python() else { return };
    for (fault, words) in [
        ("missing", "the environment gave no info['action_mask']"),
        (
            "long",
            "info['action_mask'] must hold 4 values, each 0 or 1",
        ),
        ("two", "info['action_mask'] must hold 4 values, each 0 or 1"),
        (
            "none-valid",
            "info['action_mask'] leaves the action no valid action",
        ),
    ] {
        let spec = masked(&python, ActionMask::Info, &[("fault", fault)]);
        let mut envs = VecEnv::new(&spec, &env_seeds(1, 0, 0, 1), 1).unwrap();
        envs.reset();
        envs.step(&[0i64]).unwrap();
        let message = envs.step(&[2i64]).unwrap_err().to_string();
        assert!(message.contains(words), "{fault}: {message}");
    }
    // A mask where the environment has none to give, or for actions it cannot cover.
    let without = masked(&python, ActionMask::Observation, &[]);
    let message = start_error(&without, 1);
    assert!(
        message.contains(
            "reads the `action_mask` entry of a Dict observation, and this observation has none"
        ),
        "{message}"
    );
    let mut boxes = gym(&python, "TandemTest/BoxActions-v0", 1);
    boxes.action_mask = ActionMask::Info;
    let message = start_error(&EnvSpec::new(Game::Gymnasium(boxes)), 1);
    assert!(
        message.contains("action-mask \"info\" needs Discrete or MultiDiscrete actions"),
        "{message}"
    );
}

/// How the bridge says it encodes `envs`' structured observation.
fn encoding(envs: &VecEnv) -> String {
    let info = envs.gym_info().expect("a gymnasium VecEnv");
    info.observation_encoding
        .clone()
        .expect("a structured observation")
}

/// The vector `TandemTest/Structured-v0` observes at step `t` (its entries in key order:
/// flags, grid, pair, pos, vel).
fn structured_at(t: usize) -> Vec<f32> {
    let one_hot = |n: usize, i: usize| (0..n).map(move |k| f32::from(k == i));
    let mut v = vec![(t % 2) as f32, 1.0]; // flags: MultiBinary as 0/1
    v.extend(one_hot(2, t % 2)); // grid: MultiDiscrete([2, 3]), one-hot per component
    v.extend(one_hot(3, t % 3));
    v.extend(one_hot(2, t % 2)); // pair[0]: Discrete(2)
    v.push(0.5); // pair[1]: Box(1)
    v.extend(one_hot(5, t % 5)); // pos: Discrete(5, start=1) holds 1 + t % 5
    v.extend([t as f32 / 10.0, -(t as f32) / 10.0]); // vel
    v
}

#[test]
fn structured_observations_arrive_as_one_hot_and_values_in_key_order() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "TandemTest/Structured-v0", 2)));
    let mut envs = VecEnv::new(&spec, &env_seeds(1, 0, 0, 3), 1).unwrap();
    assert_eq!(envs.obs_shape(), vec![17]);
    let info = encoding(&envs);
    assert!(
        info.contains("as 17 floats: `flags` MultiBinary(2) 0/1 values at 0..2, `grid` MultiDiscrete([2 3]) one-hot per component at 2..7"),
        "{info}"
    );
    assert!(
        info.contains("`pos` Discrete(5, start=1) one-hot at 10..15"),
        "{info}"
    );
    envs.reset();
    for t in 0..10 {
        let expected: Vec<f32> = (0..3).flat_map(|_| structured_at(t % 7)).collect();
        assert_eq!(envs.obs(), expected.as_slice(), "step {t}");
        envs.step(&[0i64, 1, 0]).unwrap();
        if t % 7 == 6 {
            // The episode's last observation, before the reset.
            assert_eq!(envs.final_obs_row(1), structured_at(7).as_slice());
        }
    }
}

/// The row `TandemTest/PictureBeside-v0` observes at step `t`: its frame channels first, then
/// `a` one-hot and `z`.
fn picture_beside_at(t: usize) -> Vec<f32> {
    let mut row = Vec::new();
    for c in 0..3 {
        for h in 0..4 {
            for w in 0..5 {
                row.push(((t + 40 * h + 7 * w + 100 * c) % 256) as f32);
            }
        }
    }
    row.extend((0..3).map(|k| f32::from(k == t % 3)));
    row.extend([t as f32, -1.0]);
    row
}

#[test]
fn an_image_beside_vectors_leads_the_row_channels_first() {
    let Some(python) = venv_python() else { return };
    let game = Game::Gymnasium(gym(&python, "TandemTest/PictureBeside-v0", 1));
    let mut envs = VecEnv::new(&EnvSpec::new(game.clone()), &env_seeds(1, 0, 0, 2), 1).unwrap();
    let space = envs.env_observation_space();
    assert_eq!(
        (
            space.image_entry().map(|e| (e.shape, e.vector)),
            envs.obs_shape()
        ),
        (Some(([3, 4, 5], 5)), vec![65])
    );
    let info = encoding(&envs);
    assert!(
        info.contains("as 65 floats: `frame` Box(0, 255, (4, 5, 3), uint8) pixels, channels first at 0..60, `a` Discrete(3) one-hot at 60..63, `z`"),
        "{info}"
    );
    envs.reset();
    for t in 0..8 {
        let expected: Vec<f32> = (0..2).flat_map(|_| picture_beside_at(t % 6)).collect();
        assert_eq!(envs.obs(), expected.as_slice(), "step {t}");
        envs.step(&[0i64, 1]).unwrap();
    }
    // Stacking would interleave images and vectors, which no torso reads.
    let stacked = EnvSpec::new(game).with(Wrapper::FrameStack { n: 2 });
    let message = start_error(&stacked, 1);
    assert!(
        message.contains("stacks images or vectors, not an image beside a vector")
            && message.contains("a 4x5 RGB image beside a vector of 5 floats"),
        "{message}"
    );
}

#[test]
fn a_discrete_observation_outside_its_space_names_the_entry() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "TandemTest/Structured-v0", 1);
    spec.make_args = vec![("bad_pos_at".into(), Scalar::Int(2))];
    let mut envs = VecEnv::new(
        &EnvSpec::new(Game::Gymnasium(spec)),
        &env_seeds(1, 0, 0, 1),
        1,
    )
    .unwrap();
    envs.reset();
    envs.step(&[0i64]).unwrap();
    let message = envs.step(&[0i64]).unwrap_err().to_string();
    assert!(
        message.contains("raised an exception in step")
            && message.contains("`pos` is 9, outside its space"),
        "{message}"
    );
}

/// A Dict observation without an entry its space declares names the entry, the space and what
/// the observation holds (it was a bare `KeyError: 'grid'` in a traceback).
#[test]
fn a_dict_observation_missing_an_entry_names_it_against_its_space() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "TandemTest/Structured-v0", 1);
    // At step 2: gymnasium's own checker looks at the first step only.
    spec.make_args = vec![("no_grid_at".into(), Scalar::Int(2))];
    let mut envs = VecEnv::new(
        &EnvSpec::new(Game::Gymnasium(spec)),
        &env_seeds(1, 0, 0, 1),
        1,
    )
    .unwrap();
    envs.reset();
    envs.step(&[0i64]).unwrap();
    let message = envs.step(&[0i64]).unwrap_err().to_string();
    assert!(
        message.contains(
            "environment 0: the observation has no entry `grid`, which its space declares (Dict("
        ) && message.contains("its entries: `vel`, `pos`, `pair`, `flags`")
            && !message.contains("Traceback"),
        "{message}"
    );
}

#[test]
fn wrappers_that_step_twice_or_change_actions_are_refused_before_any_process_starts() {
    for chosen in [
        Wrapper::FrameSkip {
            n: 4,
            max_pool: true,
        },
        Wrapper::NoopReset { max: 30 },
        Wrapper::FireReset,
        Wrapper::EpisodicLife,
        Wrapper::StickyActions { probability: 0.25 },
    ] {
        let wrapper = chosen.name();
        // Nothing is started: a missing interpreter would be the error otherwise.
        let spec = EnvSpec::new(Game::Gymnasium(unstarted(
            "/nonexistent/python3",
            "CartPole-v1",
        )))
        .with(chosen);
        let error = VecEnv::new(&spec, &[1], 1).err().expect("refused");
        assert!(
            matches!(error, EnvError::WrapperMismatch { wrapper: w, .. } if w == wrapper),
            "{error}"
        );
        let static_check = observation_space(&spec).unwrap_err();
        assert!(
            matches!(static_check, EnvError::WrapperMismatch { .. }),
            "{static_check}"
        );
    }
}

#[test]
fn snapshots_say_python_state_cannot_be_saved() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "CartPole-v1", 1)));
    let envs = VecEnv::new(&spec, &[1], 1).unwrap();
    let message = envs.snapshot().unwrap_err().to_string();
    assert!(message.contains("cannot save"), "{message}");
}

#[test]
fn an_exception_in_a_users_step_names_the_environment_and_leaves_no_process() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "TandemTest/Counter-v0", 2);
    spec.make_args = vec![
        ("length".into(), Scalar::Int(100)),
        ("raise_at".into(), Scalar::Int(3)),
        ("raise_seed".into(), Scalar::Int(12)),
    ];
    let mut envs = VecEnv::new(&EnvSpec::new(Game::Gymnasium(spec)), &[10, 11, 12], 1).unwrap();
    let pids = envs.gym_info().unwrap().worker_pids.clone();
    envs.reset();
    envs.step(&[0, 0, 0]).unwrap();
    envs.step(&[0, 0, 0]).unwrap();
    let message = envs.step(&[0, 0, 0]).unwrap_err().to_string();
    assert!(
        message.contains("environment 2 raised an exception in step"),
        "{message}"
    );
    assert!(
        message.contains("Traceback") && message.contains("ValueError: boom from the user's step"),
        "{message}"
    );
    // The pool is dead: it says so again rather than stepping half a batch.
    assert!(envs.step(&[0, 0, 0]).is_err());
    drop(envs);
    for pid in pids {
        assert!(!alive(pid), "worker {pid} left behind");
    }
}

#[test]
fn a_killed_worker_is_reported_and_the_others_are_reaped() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "CartPole-v1", 2)));
    let mut envs = VecEnv::new(&spec, &env_seeds(1, 0, 0, 4), 1).unwrap();
    let pids = envs.gym_info().unwrap().worker_pids.clone();
    envs.reset();
    envs.step(&[0; 4]).unwrap();
    let killed = Command::new("kill")
        .arg("-9")
        .arg(pids[1].to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let message = envs.step(&[0; 4]).unwrap_err().to_string();
    assert!(
        message.contains(&format!(
            "worker 1 (pid {}, environments 2..4) died",
            pids[1]
        )),
        "{message}"
    );
    for pid in &pids {
        assert!(!alive(*pid), "worker {pid} left behind after the failure");
    }
}

/// A worker that dies while the caller works between `begin_step` and `finish_step`: the
/// finish reports it, and nothing else may be asked while a step is begun.
#[test]
fn a_worker_killed_during_a_begun_step_is_reported_by_its_finish() {
    let Some(python) = venv_python() else { return };
    // Each step sleeps a second in the worker: the kill lands while it simulates.
    let mut spec = gym(&python, "TandemTest/Counter-v0", 2);
    spec.make_args = vec![("sleep".into(), Scalar::Float(1.0))];
    let spec = EnvSpec::new(Game::Gymnasium(spec));
    let mut envs = VecEnv::new(&spec, &env_seeds(1, 0, 0, 4), 1).unwrap();
    let pids = envs.gym_info().unwrap().worker_pids.clone();
    envs.reset();
    envs.begin_step(&[0; 4]).unwrap();
    envs.finish_step().unwrap();
    envs.begin_step(&[1; 4]).unwrap();
    let refused = envs.step(&[0; 4]).unwrap_err().to_string();
    assert!(refused.contains("begun and not finished"), "{refused}");
    let killed = Command::new("kill")
        .arg("-9")
        .arg(pids[0].to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let message = envs.finish_step().unwrap_err().to_string();
    assert!(
        message.contains(&format!(
            "worker 0 (pid {}, environments 0..2) died",
            pids[0]
        )),
        "{message}"
    );
    for pid in &pids {
        assert!(!alive(*pid), "worker {pid} left behind after the failure");
    }
    let again = envs.finish_step().unwrap_err().to_string();
    assert!(again.contains("without a begun step"), "{again}");
}

#[test]
fn a_worker_that_stops_answering_is_killed_at_the_timeout() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "TandemTest/Counter-v0", 2);
    spec.step_timeout_s = 1.0;
    spec.make_args = vec![("sleep".into(), Scalar::Float(600.0))];
    let mut envs = VecEnv::new(&EnvSpec::new(Game::Gymnasium(spec)), &[1, 2], 1).unwrap();
    let pids = envs.gym_info().unwrap().worker_pids.clone();
    envs.reset();
    let message = envs.step(&[0, 0]).unwrap_err().to_string();
    assert!(
        message.contains("did not answer within 1 s while stepping and was killed"),
        "{message}"
    );
    for pid in &pids {
        assert!(!alive(*pid), "worker {pid} left behind after the timeout");
    }
}

#[test]
fn box_actions_normalisers_groups_and_threads_work_together() {
    let Some(python) = venv_python() else { return };
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "Pendulum-v1", 2)))
        .with(Wrapper::TimeLimit { max_steps: 30 })
        .with(Wrapper::NormalizeObs { clip: 10.0 })
        .with(Wrapper::NormalizeReward {
            gamma: 0.99,
            clip: 10.0,
        });
    let mut envs = VecEnv::new(&spec, &env_seeds(4, 0, 0, 4), 2).unwrap();
    envs.set_min_parallel_work(Duration::ZERO);
    assert_eq!(
        envs.action_space(),
        &ActionSpace::Box {
            low: vec![-2.0].into(),
            high: vec![2.0].into()
        }
    );
    envs.reset();
    let mut truncations = 0;
    for t in 0..90 {
        let a = (t % 5) as f32 - 2.0;
        envs.step(&[a, -a, a * 0.5, 0.0]).unwrap();
        truncations += envs.truncated().iter().filter(|&&x| x).count();
        assert!(envs.obs().iter().all(|v| v.is_finite() && v.abs() <= 10.0));
    }
    assert_eq!(
        truncations,
        4 * 3,
        "every environment truncated at 30, 60 and 90"
    );
    // A group step leaves the other rows alone.
    let before = envs.obs()[2 * 3..].to_vec();
    envs.step_group(0..2, &[1.0, 1.0]).unwrap();
    assert_eq!(&envs.obs()[2 * 3..], before.as_slice());
    envs.step_group(2..4, &[1.0, 1.0]).unwrap();
    assert_ne!(&envs.obs()[2 * 3..], before.as_slice());
    assert!(envs.normalizer_stats().iter().all(|s| s.count > 0.0));
    // Box actions are refused where discrete ones are expected and vice versa.
    assert!(envs.step(&[0, 0, 0, 0]).is_err());
}

/// The Drawn fixture with make argument `fault`.
fn drawn(python: &Path, workers: usize, fault: &str) -> EnvSpec {
    let mut spec = gym(python, "TandemTest/Drawn-v0", workers);
    spec.make_args = vec![("fault".into(), Scalar::Str(fault.into()))];
    EnvSpec::new(Game::Gymnasium(spec))
}

#[test]
fn rendering_returns_the_workers_frame_and_leaves_the_episode_alone() {
    let Some(python) = venv_python() else { return };
    let seeds = env_seeds(9, 0, 0, 3);
    let mut drawn_envs = start(&drawn(&python, 2, ""), &seeds, true);
    let mut plain = start(&drawn(&python, 2, ""), &seeds, false);
    // Not made for drawing: nothing is drawn and nothing fails.
    assert_eq!(plain.render_rgb(0).unwrap(), None);
    assert_eq!(drawn_envs.reset(), plain.reset());
    let mut rng = Xoshiro256::new(3);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for t in 0..20 {
        // Env 0 lives on worker 0, envs 1 and 2 on worker 1.
        for i in 0..3 {
            let frame = drawn_envs.render_rgb(i).unwrap().expect("made for drawing");
            assert_eq!((frame.height, frame.width), (4, 6));
            let steps = drawn_envs.obs()[i * 2] as usize;
            assert_eq!(steps, t % 6, "episodes are 6 steps long");
            // Row-major, channels interleaved: pixel (h, w, c) = h*18 + w*3 + c + 10 t.
            let (h, w, c) = (3usize, 5usize, 1usize);
            assert_eq!(
                frame.pixels[(h * 6 + w) * 3 + c] as usize,
                (h * 18 + w * 3 + c + 10 * steps) % 256
            );
            let x = drawn_envs.obs()[i * 2 + 1] as f64;
            assert_eq!(
                frame.pixels[2] as i64,
                ((x * 10.0).round() as i64).rem_euclid(256),
                "the picture shows the state the observation shows"
            );
        }
        let actions: Vec<i64> = (0..3).map(|_| rng.below(2) as i64).collect();
        drawn_envs.step(&actions).unwrap();
        plain.step(&actions).unwrap();
        assert_eq!(bits(drawn_envs.obs()), bits(plain.obs()), "obs at step {t}");
        assert_eq!(
            bits(drawn_envs.rewards()),
            bits(plain.rewards()),
            "step {t}"
        );
        assert_eq!(drawn_envs.terminated(), plain.terminated(), "step {t}");
    }
}

#[test]
fn a_render_that_fails_names_the_id_and_why_and_leaves_no_process() {
    let Some(python) = venv_python() else { return };
    for (fault, words) in [
        ("raise", "render() raised RuntimeError: no picture today"),
        ("none", "render() returned None"),
        (
            "gray",
            "render() returned an array of shape (4, 6) and dtype uint8",
        ),
    ] {
        let mut envs = start(&drawn(&python, 1, fault), &[1, 2], true);
        let pids = envs.gym_info().unwrap().worker_pids.clone();
        envs.reset();
        let message = envs.render_rgb(1).unwrap_err().to_string();
        assert!(
            message.contains("gymnasium `TandemTest/Drawn-v0`: environment 1 could not render")
                && message.contains(words),
            "{fault}: {message}"
        );
        // The failure ends the workers: the next step reports it rather than going on.
        let again = envs.step(&[0, 0]).unwrap_err().to_string();
        assert_eq!(again, message);
        drop(envs);
        for pid in pids {
            assert!(!alive(pid), "{fault}: worker {pid} left behind");
        }
    }
}

/// Whether `message` says the machine cannot draw MuJoCo offscreen; then the rendering
/// test skips (or fails) by the tools rule.
fn cannot_draw_offscreen(message: &str) -> bool {
    let missing = message.contains("could not render") && message.contains("MUJOCO_GL");
    if missing {
        tools::tool_missing(
            "offscreen OpenGL (EGL) for MuJoCo",
            "drawing HalfCheetah-v5",
            &format!("the bridge said: {message}"),
        );
    }
    missing
}

#[test]
fn half_cheetah_draws_offscreen_without_changing_its_episode() {
    let Some(python) = venv_python() else { return };
    let seeds = env_seeds(5, 0, 0, 1);
    let mut spec = gym(&python, "HalfCheetah-v5", 1);
    spec.imports.clear();
    let spec = EnvSpec::new(Game::Gymnasium(spec));
    let mut drawn_envs = start(&spec, &seeds, true);
    let mut plain = start(&spec, &seeds, false);
    assert_eq!(drawn_envs.reset(), plain.reset());
    let first = match drawn_envs.render_rgb(0) {
        Ok(frame) => frame.expect("made for drawing"),
        Err(e) if cannot_draw_offscreen(&e.to_string()) => return,
        Err(e) => panic!("{e}"),
    };
    // gymnasium's MuJoCo default size.
    assert_eq!((first.height, first.width), (480, 480));
    let distinct: std::collections::HashSet<&[u8]> = first.pixels.chunks_exact(3).collect();
    assert!(distinct.len() > 10, "a real picture, not a blank one");
    let mut rng = Xoshiro256::new(8);
    for t in 0..30 {
        let action: Vec<f32> = (0..6).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
        drawn_envs.step(&action).unwrap();
        plain.step(&action).unwrap();
        drawn_envs
            .render_rgb(0)
            .unwrap()
            .expect("a frame every step");
        assert_eq!(drawn_envs.obs(), plain.obs(), "obs at step {t}");
        assert_eq!(drawn_envs.rewards(), plain.rewards(), "reward at step {t}");
    }
    let last = drawn_envs.render_rgb(0).unwrap().unwrap();
    assert_ne!(last.pixels, first.pixels, "the cheetah moved");
}

#[test]
fn a_machine_without_egl_is_told_what_to_install() {
    let Some(python) = venv_python() else { return };
    let mut spec = gym(&python, "HalfCheetah-v5", 1);
    // Stands for a machine without libEGL (the import fails as it would there).
    spec.imports = vec!["tests.gym_fixtures.no_egl".into()];
    let envs = start(&EnvSpec::new(Game::Gymnasium(spec)), &[1], true);
    let message = envs.render_rgb(0).unwrap_err().to_string();
    for words in [
        "gymnasium `HalfCheetah-v5`: environment 0 could not render",
        "libEGL.so.1: cannot open shared object file",
        "MUJOCO_GL='egl'",
        "apt-get install libegl1 libegl-mesa0 libopengl0 libgl1-mesa-dri",
    ] {
        assert!(message.contains(words), "{words}: {message}");
    }
}

/// A NaN observation or a non-finite reward is the environment's, and said so: before, they
/// reached the policy and were reported as "has the policy diverged?" or "the loss diverged".
#[test]
fn values_that_are_not_finite_are_blamed_on_the_environment_that_returned_them() {
    let Some(python) = venv_python() else { return };
    let cases = [
        (
            vec![("nan_obs_at".to_string(), Scalar::Int(2))],
            "environment 0 returned a value that is not finite after a step: observation entry 1 is NaN (as float32)",
        ),
        (
            vec![("bad_reward_at".to_string(), Scalar::Int(3))],
            "environment 0 returned a value that is not finite after a step: the reward is NaN",
        ),
        (
            vec![
                ("bad_reward_at".to_string(), Scalar::Int(3)),
                ("bad_reward".to_string(), Scalar::Float(1e300)),
            ],
            "environment 0 returned a value that is not finite after a step: the reward 1e300 is past float32's range",
        ),
    ];
    for (make_args, expected) in cases {
        let mut spec = gym(&python, "TandemTest/Counter-v0", 1);
        spec.make_args = make_args;
        let mut envs = VecEnv::new(&EnvSpec::new(Game::Gymnasium(spec)), &[1, 2], 1).unwrap();
        envs.reset();
        let mut error = None;
        for _ in 0..4 {
            if let Err(e) = envs.step(&[0, 0]) {
                error = Some(e.to_string());
                break;
            }
        }
        let message = error.expect("the bad value is reported");
        assert!(message.contains(expected), "{message}");
        assert!(message.contains("not the policy"), "{message}");
    }
}

/// What an environment starts (here a `sleep 600` per environment) ends with the run: its
/// worker's process group is killed when the pool closes, and when a worker fails.
#[test]
fn processes_an_environment_starts_end_with_its_worker() {
    let Some(python) = venv_python() else { return };
    let pid_file = std::env::temp_dir().join(format!("tandem-spawner-{}.pids", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    let pids = || -> Vec<u32> {
        std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect()
    };
    let mut spec = gym(&python, "TandemTest/Spawner-v0", 2);
    spec.make_args = vec![(
        "pid_file".into(),
        Scalar::Str(pid_file.display().to_string()),
    )];
    let envs = VecEnv::new(&EnvSpec::new(Game::Gymnasium(spec)), &[1, 2], 1).unwrap();
    let sleepers = pids();
    assert_eq!(sleepers.len(), 2, "{sleepers:?}");
    assert!(sleepers.iter().all(|&p| alive(p)), "{sleepers:?}");
    drop(envs);
    for _ in 0..100 {
        if sleepers.iter().all(|&p| !alive(p)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in sleepers {
        assert!(!alive(pid), "sleep {pid} outlived the run");
    }
    let _ = std::fs::remove_file(&pid_file);
}

#[test]
fn groups_of_worker_processes_step_at_once_and_a_worker_is_never_split() {
    let Some(python) = venv_python() else { return };
    // 8 environments in 4 workers of 2.
    let spec = EnvSpec::new(Game::Gymnasium(gym(&python, "CartPole-v1", 4)));
    let acts = |first: usize, n: usize, t: usize| -> Vec<i64> {
        (first..first + n)
            .map(|i| ((i * 7 + t * 3) / 5 % 2) as i64)
            .collect()
    };
    let mut in_turn = VecEnv::new(&spec, &env_seeds(6, 0, 0, 8), 1).unwrap();
    in_turn.reset();
    for t in 0..50 {
        in_turn.step_group(0..4, &acts(0, 4, t)).unwrap();
        in_turn.step_group(4..8, &acts(4, 4, t)).unwrap();
    }
    let mut at_once = VecEnv::new(&spec, &env_seeds(6, 0, 0, 8), 1).unwrap();
    at_once.reset();
    let refused = at_once.with_groups(8, |_| ()).unwrap_err().to_string();
    assert!(
        refused.contains("environments 0..2 would serve two of 8 groups"),
        "{refused}"
    );
    at_once
        .with_groups(2, |groups| {
            std::thread::scope(|scope| {
                for mut group in groups {
                    scope.spawn(move || {
                        for t in 0..50 {
                            let first = group.envs().start;
                            group.step(&acts(first, 4, t)).unwrap();
                        }
                    });
                }
            })
        })
        .unwrap();
    assert_eq!(in_turn.obs(), at_once.obs());
    let sorted = |mut e: Vec<tandem_env::EpisodeStats>| {
        e.sort_by_key(|e| (e.env_index, e.length));
        e
    };
    let finished = sorted(in_turn.drain_episodes());
    assert!(!finished.is_empty());
    assert_eq!(finished, sorted(at_once.drain_episodes()));
}

#[test]
fn groups_of_worker_processes_are_asked_to_step_at_the_same_time() {
    let Some(python) = venv_python() else { return };
    // Two environments in two workers, each its own group; every step, each worker waits for
    // the other to be stepping too, which it can only be if its request did not wait for the
    // first worker's reply.
    let meet = std::env::temp_dir().join(format!("tandem-rendezvous-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&meet);
    std::fs::create_dir_all(&meet).unwrap();
    let mut spec = gym(&python, "TandemTest/Rendezvous-v0", 2);
    spec.make_args = vec![
        ("meet".into(), Scalar::Str(meet.display().to_string())),
        ("patience".into(), Scalar::Float(20.0)),
    ];
    let mut envs = VecEnv::new(
        &EnvSpec::new(Game::Gymnasium(spec)),
        &env_seeds(1, 0, 0, 2),
        1,
    )
    .unwrap();
    envs.reset();
    let rewards = envs
        .with_groups(2, |groups| {
            std::thread::scope(|scope| {
                let steppers: Vec<_> = groups
                    .into_iter()
                    .map(|mut group| {
                        scope.spawn(move || {
                            (0..3)
                                .map(|_| {
                                    group.step(&[0i64]).unwrap();
                                    group.rewards()[0]
                                })
                                .collect::<Vec<f32>>()
                        })
                    })
                    .collect();
                steppers
                    .into_iter()
                    .map(|s| s.join().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&meet);
    assert_eq!(
        rewards,
        vec![vec![1.0; 3]; 2],
        "a worker waited for the other in vain"
    );
}

/// The Scored fixture (episodes of 1, 2, 3, 1, ... steps; `steps` in every step's info,
/// `is_success` in the last one's) logging `keys`, in 4 environments of 2 workers.
fn scored(python: &Path, keys: &[&str], fault: &str) -> EnvSpec {
    let mut spec = gym(python, "TandemTest/Scored-v0", 2);
    spec.info_keys = keys.iter().map(|k| k.to_string()).collect();
    spec.make_args = vec![("fault".into(), Scalar::Str(fault.into()))];
    EnvSpec::new(Game::Gymnasium(spec))
}

#[test]
fn info_values_at_each_episodes_end_arrive_with_its_statistics() {
    let Some(python) = venv_python() else { return };
    let spec = scored(&python, &["is_success", "steps"], "");
    let mut envs = VecEnv::new(&spec, &env_seeds(2, 0, 0, 4), 1).unwrap();
    envs.reset();
    // Two cycles of 1 + 2 + 3 steps: six episodes an environment.
    for _ in 0..12 {
        envs.step(&[0i64, 1, 0, 1]).unwrap();
    }
    let episodes = envs.drain_episodes();
    assert_eq!(episodes.len(), 24);
    for e in &episodes {
        // The last step's values: its own count, and success on odd lengths (a numpy bool).
        let success = f64::from(e.length % 2 == 1);
        assert_eq!(e.info, [success, e.length as f64], "{e:?}");
    }
    // Groups stepping at once read their own episodes' values.
    let mut grouped = VecEnv::new(&spec, &env_seeds(2, 0, 0, 4), 1).unwrap();
    grouped.reset();
    grouped
        .with_groups(2, |groups| {
            std::thread::scope(|scope| {
                for mut group in groups {
                    scope.spawn(move || {
                        for _ in 0..12 {
                            group.step(&[1i64, 0]).unwrap();
                        }
                    });
                }
            })
        })
        .unwrap();
    let mut by_env = grouped.drain_episodes();
    by_env.sort_by_key(|e| e.env_index);
    let mut expected = episodes;
    expected.sort_by_key(|e| e.env_index);
    let infos = |list: &[tandem_env::EpisodeStats]| -> Vec<(usize, Vec<f64>)> {
        list.iter().map(|e| (e.env_index, e.info.clone())).collect()
    };
    assert_eq!(infos(&by_env), infos(&expected));
}

/// A time-limit's cut is an episode's end too: its values are the cut step's, and a key
/// only the environment's own last step gives is missing there.
#[test]
fn a_time_limits_cut_logs_the_cut_steps_values_or_names_the_missing_key() {
    let Some(python) = venv_python() else { return };
    let cut = scored(&python, &["steps"], "").with(Wrapper::TimeLimit { max_steps: 2 });
    let mut envs = VecEnv::new(&cut, &env_seeds(2, 0, 0, 4), 1).unwrap();
    envs.reset();
    for _ in 0..6 {
        envs.step(&[0i64, 0, 0, 0]).unwrap();
    }
    let episodes = envs.drain_episodes();
    assert!(episodes.iter().any(|e| e.truncated), "{episodes:?}");
    assert!(
        episodes.iter().all(|e| e.info == [e.length as f64]),
        "{episodes:?}"
    );
    let cut = scored(&python, &["is_success"], "").with(Wrapper::TimeLimit { max_steps: 2 });
    let mut envs = VecEnv::new(&cut, &env_seeds(2, 0, 0, 4), 1).unwrap();
    envs.reset();
    let message = (0..6)
        .find_map(|_| envs.step(&[0i64, 0, 0, 0]).err())
        .expect("the cut episode's missing key is refused")
        .to_string();
    assert!(
        message.contains("'s episode ended at a step whose info has no `is_success`"),
        "{message}"
    );
}

#[test]
fn an_info_value_that_is_missing_at_the_end_not_a_number_or_not_finite_is_named() {
    let Some(python) = venv_python() else { return };
    for (fault, key, words) in [
        (
            "unfinished",
            "is_success",
            "'s episode ended at a step whose info has no `is_success`",
        ),
        (
            "text",
            "steps",
            ": info['steps'] is 'two' (a str); info-keys logs numbers and booleans",
        ),
        (
            "nan",
            "steps",
            ": info['steps'] is np.float32(nan), not a finite number",
        ),
    ] {
        let spec = scored(&python, &[key], fault);
        let mut envs = VecEnv::new(&spec, &env_seeds(2, 0, 0, 4), 1).unwrap();
        let pids = envs.gym_info().unwrap().worker_pids.clone();
        envs.reset();
        let message = (0..6)
            .find_map(|_| envs.step(&[0i64, 0, 0, 0]).err())
            .unwrap_or_else(|| panic!("{fault}: refused"))
            .to_string();
        // The environment is named (which one ends first depends on its seed).
        assert!(
            message.contains("gymnasium `TandemTest/Scored-v0`: environment "),
            "{message}"
        );
        assert!(message.contains(words), "{fault}: {message}");
        // The failure is the pool's: every later request says the same, and no worker is left.
        let again = envs.step(&[0i64, 0, 0, 0]).unwrap_err().to_string();
        assert_eq!(again, message);
        drop(envs);
        assert!(pids.iter().all(|&pid| !alive(pid)), "{fault}");
    }
}

//! The gymnasium bridge's PettingZoo side with real Python worker processes: mpe2's own
//! `simple_spread_v3` through the bridge against the native `mpe-simple-spread` (same seeds,
//! same actions, every observation, reward and flag equal, across episode ends), a fixture
//! game whose agents observe vectors of different lengths (rows padded), an action mask from a
//! Dict observation, an agent that leaves early and an agent count the experiment got wrong
//! (both refused with the environment, the agent and the step), and PettingZoo's connect four
//! through the AEC API (whose turn it is, the masks of the mover and of the waiting player, a
//! win, a move the mask forbids, and either API's function given the other's setting). Needs the venv of
//! scripts/gym-venv-setup.sh (mpe2 1.1.1 and pettingzoo 1.27.0 in it); without it the tests
//! skip, unless TANDEM_REQUIRE_PYTHON_TOOLS=1 (tests/common/tools.rs).

#[path = "../../../tests/common/tools.rs"]
mod tools;

use std::path::{Path, PathBuf};

use tandem_env::mpe::simple_spread::SpreadParams;
use tandem_env::{ActionMask, EnvSpec, Game, PettingZoo, Scalar, VecEnv, ZooApi};

const FIXTURES: &str = "tests.gym_fixtures.zoo_envs";

/// The venv's interpreter, or `None` (after the tools rule) when it is missing.
fn venv_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv-gym/bin/python");
    if python.exists() {
        Some(python)
    } else {
        tools::tool_missing(
            &python.display().to_string(),
            "the pettingzoo bridge test",
            "run scripts/gym-venv-setup.sh (scripts/setup --test does)",
        );
        None
    }
}

fn zoo(python: &Path, module: &str, agents: usize, args: &[(&str, Scalar)]) -> PettingZoo {
    PettingZoo {
        module: module.into(),
        function: "parallel_env".into(),
        agents,
        python: python.display().to_string(),
        imports: Vec::new(),
        make_args: args
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        workers: 2,
        step_timeout_s: 30.0,
        action_mask: ActionMask::None,
        api: ZooApi::Parallel,
    }
}

fn build(game: PettingZoo, seeds: &[u64]) -> Result<VecEnv, tandem_env::EnvError> {
    VecEnv::new(&EnvSpec::new(Game::PettingZoo(game)), seeds, 1)
}

#[test]
fn mpe2_simple_spread_through_the_bridge_is_the_native_game() {
    let Some(python) = venv_python() else { return };
    let seeds = [3, 11, 12345];
    let args = [("N", Scalar::Int(3)), ("max_cycles", Scalar::Int(25))];
    let mut bridge = build(zoo(&python, "mpe2.simple_spread_v3", 3, &args), &seeds).unwrap();
    let native_game = Game::MpeSimpleSpread(SpreadParams::MPE2);
    let mut native = VecEnv::new(&EnvSpec::new(native_game), &seeds, 1).unwrap();
    assert_eq!(bridge.num_envs(), 9);
    assert_eq!(bridge.agents_per_game(), 3);
    assert_eq!(bridge.obs_len(), native.obs_len());
    assert_eq!(bridge.action_space(), native.action_space());
    assert_eq!(
        bridge.reset(),
        native.reset(),
        "observations after the seeded reset"
    );
    let mut ends = 0;
    // Past two episode ends (max_cycles 25): the worker's autoreset continues mpe2's stream.
    for t in 0..60 {
        let actions: Vec<i64> = (0..9)
            .map(|r| ((t * 7 + r * 3 + t / 5) % 5) as i64)
            .collect();
        bridge.step(&actions[..]).unwrap();
        native.step(&actions[..]).unwrap();
        assert_eq!(bridge.obs(), native.obs(), "observations at step {t}");
        assert_eq!(bridge.rewards(), native.rewards(), "rewards at step {t}");
        assert_eq!(bridge.terminated(), native.terminated(), "step {t}");
        assert_eq!(bridge.truncated(), native.truncated(), "step {t}");
        if bridge.truncated()[0] {
            ends += 1;
            assert_eq!(
                bridge.final_obs(),
                native.final_obs(),
                "final observations, step {t}"
            );
        }
    }
    assert_eq!(ends, 2);
    let (mine, theirs) = (bridge.drain_episodes(), native.drain_episodes());
    assert_eq!(mine.len(), 18);
    for (a, b) in mine.iter().zip(&theirs) {
        assert_eq!((a.env_index, a.length), (b.env_index, b.length));
        assert_eq!(a.episode_return, b.episode_return);
    }
    assert!(!bridge.can_snapshot());
}

#[test]
fn agents_of_different_lengths_are_padded_rows_with_their_own_rewards() {
    let Some(python) = venv_python() else { return };
    let mut venv = build(
        zoo(&python, FIXTURES, 3, &[("length", Scalar::Int(3))]),
        &[7, 1008],
    )
    .unwrap();
    assert_eq!(venv.obs_len(), 4, "the widest agent's observation");
    let obs = venv.reset().to_vec();
    #[rustfmt::skip]
    let want = [
        0.0, 7.0, 0.0, 0.0,    0.0, 7.0, 0.0, 0.0,    0.0, 7.0, 10.0, -1.0,
        0.0, 8.0, 0.0, 0.0,    0.0, 8.0, 0.0, 0.0,    0.0, 8.0, 10.0, -1.0,
    ];
    assert_eq!(obs, want);
    venv.step(&[0i64, 1, 2, 2, 1, 0][..]).unwrap();
    assert_eq!(venv.rewards(), &[0.0, 1.0, 2.0, 2.0, 1.0, 0.0]);
    assert_eq!(&venv.obs()[8..12], &[1.0, 7.0, 11.0, 2.0]);
    for _ in 0..2 {
        venv.step(&[1i64; 6][..]).unwrap();
    }
    assert!(venv.truncated().iter().all(|&t| t) && venv.terminated().iter().all(|&t| !t));
    assert_eq!(&venv.final_obs()[8..12], &[3.0, 7.0, 13.0, 1.0]);
    assert_eq!(
        &venv.obs()[8..12],
        &[0.0, 7.0, 10.0, -1.0],
        "reset unseeded"
    );
    let episodes = venv.drain_episodes();
    assert_eq!(episodes.len(), 6);
    assert_eq!(episodes[2].episode_return, 4.0);
}

#[test]
fn a_dict_observation_gives_its_action_mask() {
    let Some(python) = venv_python() else { return };
    let mut game = zoo(&python, FIXTURES, 3, &[("masked", Scalar::Bool(true))]);
    game.action_mask = ActionMask::Observation;
    game.workers = 1;
    let mut venv = build(game.clone(), &[5]).unwrap();
    venv.reset();
    assert_eq!(
        venv.obs_len(),
        7,
        "each agent's 4 values and its 3-entry mask"
    );
    assert_eq!(&venv.obs()[..7], &[0.0, 5.0, 10.0, -1.0, 0.0, 1.0, 1.0]);
    assert_eq!(&venv.obs()[14..21], &[0.0, 5.0, 10.0, -1.0, 1.0, 1.0, 0.0]);
    // A mask is the last entries of a row: agents of different lengths would not share them.
    game.make_args.clear();
    let error = build(game, &[5]).err().unwrap().to_string();
    assert!(
        error.contains("reads the `action_mask` entry of a Dict"),
        "{error}"
    );
}

#[test]
fn an_agent_that_leaves_early_stops_the_run_naming_it_and_the_step() {
    let Some(python) = venv_python() else { return };
    let args = [("leave_at", Scalar::Int(2)), ("length", Scalar::Int(5))];
    let mut venv = build(zoo(&python, FIXTURES, 3, &args), &[1, 2]).unwrap();
    venv.reset();
    venv.step(&[0i64; 6][..]).unwrap();
    let error = venv.step(&[0i64; 6][..]).unwrap_err().to_string();
    for part in [
        "pettingzoo `tests.gym_fixtures.zoo_envs`",
        "agent `guard` left at step 2",
        "`scout_0`, `scout_1` played on",
        "not supported yet",
    ] {
        assert!(error.contains(part), "{part:?} not in {error}");
    }
    // Every later request reports the same failure.
    assert!(venv.step(&[0i64; 6][..]).is_err());
    // Agents that change between games: at the reset that ends the first game.
    let mut game = zoo(&python, FIXTURES, 3, &[("length", Scalar::Int(2))]);
    game.function = "shifting".into();
    let mut venv = build(game, &[1]).unwrap();
    venv.reset();
    venv.step(&[0i64; 3][..]).unwrap();
    let error = venv.step(&[0i64; 3][..]).unwrap_err().to_string();
    assert!(
        error.contains("its possible_agents changed at a reset: ['scout_0', 'scout_1', 'guard'] became ['scout_0', 'guard']"),
        "{error}"
    );
}

#[test]
fn the_experiments_agent_count_is_checked_against_the_game() {
    let Some(python) = venv_python() else { return };
    let error = build(zoo(&python, FIXTURES, 2, &[]), &[1])
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("has 3 agent(s) (scout_0, scout_1, guard)")
            && error.contains("set `agents 3`"),
        "{error}"
    );
    let mut other = zoo(&python, FIXTURES, 2, &[]);
    other.function = "two_scouts".into();
    assert_eq!(build(other, &[1]).unwrap().num_envs(), 2);
    let mut mixed = zoo(&python, FIXTURES, 3, &[]);
    mixed.function = "mixed_actions".into();
    let error = build(mixed, &[1]).err().unwrap().to_string();
    assert!(
        error.contains(
            "`tests.gym_fixtures.zoo_envs`'s agents act differently: guard takes 2 discrete actions"
        ),
        "{error}"
    );
    let mut missing = zoo(&python, FIXTURES, 2, &[]);
    missing.function = "no_such".into();
    let error = build(missing, &[1]).err().unwrap().to_string();
    assert!(error.contains("has no function `no_such`"), "{error}");
}

fn connect_four(python: &Path, api: ZooApi) -> PettingZoo {
    PettingZoo {
        function: "env".into(),
        action_mask: ActionMask::Observation,
        api,
        workers: 1,
        ..zoo(python, "pettingzoo.classic.connect_four_v3", 2, &[])
    }
}

/// Row `row`'s action mask: the last 7 entries of its observation.
fn mask_of(envs: &VecEnv, row: usize) -> Vec<f32> {
    let len = envs.obs_len();
    envs.obs()[row * len..(row + 1) * len][len - 7..].to_vec()
}

#[test]
fn connect_four_takes_turns_through_the_aec_api() {
    let Some(python) = venv_python() else { return };
    let mut envs = build(connect_four(&python, ZooApi::Aec), &[1, 2]).unwrap();
    assert_eq!((envs.num_envs(), envs.obs_len()), (4, 91));
    envs.reset();
    // player_0 moves first in both games; the waiting player is shown every column as legal.
    assert_eq!(envs.acting(), Some(vec![true, false, true, false]));
    assert_eq!(mask_of(&envs, 1), [1.0; 7]);
    // player_0 plays column 0, player_1 column 1, and so on: each row's action is played on its
    // own turns only (the waiting row's 6 would be another column).
    let mut rewards = Vec::new();
    for t in 0..7 {
        let (mover, waiter) = if t % 2 == 0 { (0, 1) } else { (1, 0) };
        let mut actions = [6i64; 4];
        actions[mover] = mover as i64;
        actions[mover + 2] = mover as i64;
        envs.step(&actions[..]).unwrap();
        rewards.push(envs.rewards()[..2].to_vec());
        if t < 6 {
            assert_eq!(
                envs.acting().unwrap()[..2],
                [waiter == 0, waiter == 1],
                "after move {t}"
            );
            assert!(!envs.terminated()[0], "after move {t}");
        }
    }
    // player_0's fourth stone in column 0 wins: +1 and -1, the game over for both.
    assert_eq!(rewards[6], [1.0, -1.0]);
    assert!(rewards[..6].iter().all(|r| r == &[0.0, 0.0]), "{rewards:?}");
    assert_eq!(envs.terminated(), [true, true, true, true]);
    // The next game starts with player_0 to move again.
    assert_eq!(envs.acting(), Some(vec![true, false, true, false]));
    let episodes = envs.drain_episodes();
    let scores: Vec<f64> = episodes.iter().map(|e| e.episode_return).collect();
    assert_eq!(scores, [1.0, -1.0, 1.0, -1.0]);
}

#[test]
fn a_move_the_mask_forbids_stops_the_run_naming_the_agent_and_the_legal_moves() {
    let Some(python) = venv_python() else { return };
    let mut envs = build(connect_four(&python, ZooApi::Aec), &[1]).unwrap();
    envs.reset();
    // Six stones fill column 3; the seventh is illegal.
    for _ in 0..6 {
        envs.step(&[3i64, 3][..]).unwrap();
    }
    assert_eq!(mask_of(&envs, 0), [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
    let err = envs.step(&[3i64, 3][..]).unwrap_err().to_string();
    assert!(
        err.contains("agent `player_0` played action 3 at step 7 of its episode, which its action mask forbids (legal: [0, 1, 2, 4, 5, 6])"),
        "{err}"
    );
}

#[test]
fn each_api_refuses_the_other_apis_environment_with_the_setting_to_change() {
    let Some(python) = venv_python() else { return };
    let err = build(connect_four(&python, ZooApi::Parallel), &[1])
        .err()
        .expect("an AEC environment as Parallel")
        .to_string();
    assert!(
        err.contains("an AEC environment whose agents take turns")
            && err.contains("Write `api \"aec\"`"),
        "{err}"
    );
    let args = [("N", Scalar::Int(3))];
    let spread = PettingZoo {
        api: ZooApi::Aec,
        ..zoo(&python, "mpe2.simple_spread_v3", 3, &args)
    };
    let err = build(spread, &[1])
        .err()
        .expect("a Parallel environment as AEC")
        .to_string();
    assert!(
        err.contains("it is not an AEC environment") && err.contains("Write `api \"parallel\"`"),
        "{err}"
    );
}

//! The gymnasium bridge's PettingZoo side with real Python worker processes: mpe2's own
//! `simple_spread_v3` through the bridge against the native `mpe-simple-spread` (same seeds,
//! same actions, every observation, reward and flag equal, across episode ends), a fixture
//! game whose agents observe vectors of different lengths (rows padded), an action mask from a
//! Dict observation, agents that leave their game early (absent until it ends), agents that
//! break the API's rules and an agent count the experiment got wrong (refused with the
//! environment, the agent and the step), and PettingZoo's connect four
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

/// Row `row` of a batch buffer of rows `width` wide.
fn row(values: &[f32], width: usize, row: usize) -> &[f32] {
    &values[row * width..(row + 1) * width]
}

/// Each drained episode as (row, return, length, truncated).
fn episodes(venv: &mut VecEnv) -> Vec<(usize, f64, u64, bool)> {
    let drained = venv.drain_episodes();
    (drained.iter())
        .map(|e| (e.env_index, e.episode_return, e.length, e.truncated))
        .collect()
}

/// Two games whose `guard` (rows 2 and 5) terminates at step 2 of 5 while the scouts play on:
/// it gets its reward and flag and leaves its last observation in `final_obs` then, and until
/// its game ends it observes zeros, gets nothing, is left out of `acting()` and its action is
/// not passed on (the fixture raises if it is). Its episode is counted once, when it leaves;
/// the scouts' at the game's end. After the reset it plays again.
#[test]
fn an_agent_that_leaves_early_is_absent_until_its_game_ends() {
    let Some(python) = venv_python() else { return };
    let args = [("leave_at", Scalar::Int(2)), ("length", Scalar::Int(5))];
    let mut venv = build(zoo(&python, FIXTURES, 3, &args), &[1, 2]).unwrap();
    venv.reset();
    assert_eq!(venv.acting(), None);
    let actions = [1i64, 2, 2, 2, 1, 1];
    let given: Vec<f32> = actions.iter().map(|&a| a as f32).collect();
    venv.step(&actions[..]).unwrap();
    assert_eq!(venv.rewards(), given);
    assert_eq!(venv.acting(), None);
    venv.step(&actions[..]).unwrap();
    assert_eq!(venv.rewards(), given, "the guard's reward as it leaves");
    assert_eq!(venv.terminated(), [false, false, true, false, false, true]);
    assert!(venv.truncated().iter().all(|&t| !t));
    assert_eq!(row(venv.final_obs(), 4, 2), [2.0, 1.0, 12.0, 2.0]);
    assert_eq!(row(venv.final_obs(), 4, 5), [2.0, 2.0, 12.0, 1.0]);
    assert_eq!(row(venv.obs(), 4, 2), [0.0; 4], "the guard is gone");
    assert_eq!(row(venv.obs(), 4, 3), [2.0, 2.0, 0.0, 0.0]);
    let away = Some(vec![true, true, false, true, true, false]);
    assert_eq!(venv.acting(), away);
    assert_eq!(
        episodes(&mut venv),
        [(2, 4.0, 2, false), (5, 2.0, 2, false)]
    );
    for t in 3..5 {
        venv.step(&actions[..]).unwrap();
        assert_eq!(venv.rewards(), [1.0, 2.0, 0.0, 2.0, 1.0, 0.0], "step {t}");
        assert!(venv.terminated().iter().all(|&t| !t), "step {t}");
        assert!(venv.truncated().iter().all(|&t| !t), "step {t}");
        assert_eq!(row(venv.obs(), 4, 5), [0.0; 4], "step {t}");
        assert_eq!(venv.acting(), away, "step {t}");
        assert!(episodes(&mut venv).is_empty(), "step {t}");
    }
    venv.step(&actions[..]).unwrap();
    assert_eq!(venv.rewards(), [1.0, 2.0, 0.0, 2.0, 1.0, 0.0]);
    assert_eq!(venv.truncated(), [true, true, false, true, true, false]);
    assert!(venv.terminated().iter().all(|&t| !t));
    assert_eq!(row(venv.final_obs(), 4, 1), [5.0, 1.0, 0.0, 0.0]);
    assert_eq!(row(venv.final_obs(), 4, 2), [0.0; 4]);
    assert_eq!(
        row(venv.obs(), 4, 2),
        [0.0, 1.0, 10.0, -1.0],
        "back after the reset"
    );
    assert_eq!(venv.acting(), None);
    assert_eq!(
        episodes(&mut venv),
        [
            (0, 5.0, 5, true),
            (1, 10.0, 5, true),
            (3, 10.0, 5, true),
            (4, 5.0, 5, true)
        ]
    );
    venv.step(&actions[..]).unwrap();
    assert_eq!(venv.rewards(), given, "the guard plays the next game");
}

/// A guard that leaves by truncation has `truncated` set and its last observation kept, to
/// bootstrap from; while it is away its action mask allows every action.
#[test]
fn an_agent_that_leaves_by_truncation_keeps_its_last_observation_and_may_do_anything() {
    let Some(python) = venv_python() else { return };
    let args = [
        ("leave_at", Scalar::Int(1)),
        ("leave_by", Scalar::Str("truncation".into())),
        ("length", Scalar::Int(3)),
        ("masked", Scalar::Bool(true)),
    ];
    let mut game = zoo(&python, FIXTURES, 3, &args);
    game.action_mask = ActionMask::Observation;
    let mut venv = build(game, &[5]).unwrap();
    venv.reset();
    venv.step(&[1i64, 1, 1][..]).unwrap();
    assert_eq!(venv.truncated(), [false, false, true]);
    assert_eq!(venv.terminated(), [false; 3]);
    let last = [1.0, 5.0, 11.0, 1.0, 1.0, 1.0, 0.0];
    assert_eq!(row(venv.final_obs(), 7, 2), last);
    let absent = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    assert_eq!(row(venv.obs(), 7, 2), absent);
    assert_eq!(venv.acting(), Some(vec![true, true, false]));
    assert_eq!(episodes(&mut venv), [(2, 1.0, 1, true)]);
    venv.step(&[1i64, 1, 2][..]).unwrap();
    assert_eq!(row(venv.obs(), 7, 2), absent);
    assert_eq!(venv.rewards(), [1.0, 1.0, 0.0]);
    venv.step(&[1i64, 1, 2][..]).unwrap();
    assert_eq!(venv.truncated(), [true, true, false]);
    assert_eq!(row(venv.final_obs(), 7, 2), absent);
    assert_eq!(row(venv.obs(), 7, 2), [0.0, 5.0, 10.0, -1.0, 1.0, 1.0, 0.0]);
    assert_eq!(venv.acting(), None);
}

/// The learner's game of agents that leave (`escape`): its game ends when the last runner
/// leaves, whoever left before, or after 10 steps, terminating those still in it.
#[test]
fn escape_ends_when_every_runner_has_left_or_after_ten_steps() {
    let Some(python) = venv_python() else { return };
    let mut game = zoo(&python, FIXTURES, 3, &[]);
    game.function = "escape".into();
    let mut venv = build(game, &[1]).unwrap();
    assert_eq!(venv.obs_len(), 2);
    assert_eq!(venv.reset(), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    venv.step(&[1i64, 0, 0][..]).unwrap();
    assert_eq!(venv.rewards(), [-1.0, 0.0, 0.0], "against the closed door");
    assert_eq!(venv.terminated(), [true, false, false]);
    assert_eq!(venv.final_obs()[..2], [0.1, 1.0]);
    assert_eq!(venv.obs(), [0.0, 0.0, 0.1, 1.0, 0.1, 1.0]);
    assert_eq!(venv.acting(), Some(vec![false, true, true]));
    venv.step(&[0i64, 0, 1][..]).unwrap();
    venv.step(&[0i64, 0, 0][..]).unwrap();
    venv.step(&[0i64, 1, 0][..]).unwrap();
    assert_eq!(venv.rewards(), [0.0, 1.0, 0.0], "through the open door");
    assert_eq!(venv.terminated(), [false, true, false]);
    assert_eq!(venv.final_obs()[2..4], [0.4, 1.0]);
    assert_eq!(venv.obs(), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0], "a new game");
    assert_eq!(venv.acting(), None);
    let scores: Vec<(usize, f64, u64)> = (episodes(&mut venv).iter())
        .map(|&(row, score, length, _)| (row, score, length))
        .collect();
    assert_eq!(scores, [(0, -1.0, 1), (2, -1.0, 2), (1, 1.0, 4)]);
    for _ in 0..10 {
        venv.step(&[0i64; 3][..]).unwrap();
    }
    assert_eq!(venv.terminated(), [true; 3]);
    assert_eq!(venv.truncated(), [false; 3]);
    let lengths: Vec<u64> = episodes(&mut venv).iter().map(|e| e.2).collect();
    assert_eq!(lengths, [10; 3]);
}

/// The error of the batch's first step that fails, in `steps` steps of `function`'s game.
fn failure(python: &Path, function: &str, args: &[(&str, Scalar)], steps: usize) -> String {
    let mut game = zoo(python, FIXTURES, 3, args);
    game.function = function.into();
    let mut venv = build(game, &[1]).unwrap();
    venv.reset();
    let error = (0..steps).find_map(|_| venv.step(&[0i64; 3][..]).err());
    let error = error.expect("a step fails").to_string();
    // Every later request reports the same failure.
    assert!(venv.step(&[0i64; 3][..]).is_err());
    error
}

fn assert_says(error: &str, parts: &[&str]) {
    for part in parts {
        assert!(error.contains(part), "{part:?} not in {error}");
    }
}

/// What a Parallel game may not do stops the run naming the environment, the game, the agent
/// and the step: leave `agents` without a flag, give no entry for an agent still in the game,
/// change its agents between games. An AEC game's agent may not leave early at all.
#[test]
fn agents_that_break_the_rules_stop_the_run_naming_the_agent_and_the_step() {
    let Some(python) = venv_python() else { return };
    let fault = |f: &str| [("fault", Scalar::Str(f.into()))];
    let error = failure(&python, "sloppy", &fault("unflagged"), 2);
    assert_says(
        &error,
        &[
            "pettingzoo `tests.gym_fixtures.zoo_envs`: game 0",
            "agent `guard` left at step 2 of its episode without being terminated or truncated",
        ],
    );
    let error = failure(&python, "sloppy", &fault("no_reward"), 2);
    assert_says(
        &error,
        &[
            "agent `guard` is in the game at step 2 of its episode, and the environment gave no reward for it",
        ],
    );
    let error = failure(&python, "shifting", &[("length", Scalar::Int(2))], 2);
    assert_says(
        &error,
        &[
            "its possible_agents changed at a reset: ['scout_0', 'scout_1', 'guard'] became ['scout_0', 'guard']",
        ],
    );
    let mut turns = zoo(&python, FIXTURES, 3, &[("leave_at", Scalar::Int(2))]);
    (turns.function, turns.api) = ("turns".into(), ZooApi::Aec);
    let mut venv = build(turns, &[1]).unwrap();
    venv.reset();
    let error = (0..7).find_map(|_| venv.step(&[0i64; 3][..]).err());
    assert_says(
        &error.expect("an AEC departure").to_string(),
        &[
            "agent `guard` left at step 6",
            "not supported yet with api \"aec\"",
        ],
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

//! A batch of multi-agent games (`VecEnv` over MPE simple_spread): every agent is a row, in
//! game order; rows hold what the games alone give, episodes end for a game's agents together
//! (final observations kept, the game reset), each agent's episode is counted on its own row;
//! results do not depend on threads or groups; snapshots resume exactly; every row shows its
//! game's picture; rows that cut a game and wrappers are refused. Agents whose observations
//! are vectors of different lengths (simple_tag's) get rows as wide as the widest, padded with
//! zeros; agents that act differently or observe other kinds of observation are refused.

use tandem_env::mpe::simple_spread::{SimpleSpread, SpreadParams};
use tandem_env::mpe::simple_tag::{SimpleTag, TagParams};
use tandem_env::multi_agent::{AgentSpec, ParallelEnv, observation_len};
use tandem_env::{
    Action, ActionSpace, Dtype, EnvError, EnvSpec, Game, Layout, ObsSpace, Step, VecEnv, Wrapper,
};

const AGENTS: usize = 3;
const GAMES: usize = 2;
const SEEDS: [u64; GAMES] = [5, 9];

fn spec() -> EnvSpec {
    EnvSpec::new(Game::MpeSimpleSpread(SpreadParams::MPE2))
}

/// A fixed action per row and step, different for every row.
fn actions(t: usize, rows: usize) -> Vec<i64> {
    (0..rows).map(|r| ((t * 7 + r * 3) % 5) as i64).collect()
}

fn batch(threads: usize) -> VecEnv {
    let mut venv = VecEnv::new(&spec(), &SEEDS, threads).unwrap();
    venv.set_min_parallel_work(std::time::Duration::ZERO);
    venv
}

#[test]
fn rows_are_the_games_agents_and_episodes_end_together() {
    let mut venv = batch(1);
    assert_eq!(venv.num_envs(), GAMES * AGENTS);
    assert_eq!(venv.agents_per_game(), AGENTS);
    let obs_len = venv.obs_len();
    assert_eq!(obs_len, 18);
    let mut games: Vec<SimpleSpread> = SEEDS
        .iter()
        .map(|&s| SimpleSpread::new(SpreadParams::MPE2, s).unwrap())
        .collect();
    let mut alone = vec![0f32; GAMES * AGENTS * obs_len];
    for (g, game) in games.iter_mut().enumerate() {
        let rows = &mut alone[g * AGENTS * obs_len..(g + 1) * AGENTS * obs_len];
        game.reset(Some(SEEDS[g]), rows);
    }
    assert_eq!(venv.reset(), &alone[..], "reset rows");
    let mut sums = [0f64; GAMES * AGENTS];
    let mut steps = vec![Step::default(); AGENTS];
    for t in 0..25 {
        let a = actions(t, GAMES * AGENTS);
        venv.step(&a[..]).unwrap();
        let mut rewards = Vec::new();
        for (g, game) in games.iter_mut().enumerate() {
            let moves: Vec<Action> = a[g * AGENTS..(g + 1) * AGENTS]
                .iter()
                .map(|&i| Action::Discrete(i as usize))
                .collect();
            let rows = &mut alone[g * AGENTS * obs_len..(g + 1) * AGENTS * obs_len];
            game.step(&moves, rows, &mut steps);
            rewards.extend(steps.iter().map(|s| s.reward));
        }
        assert_eq!(venv.rewards(), &rewards[..], "step {t}: rewards");
        for (sum, r) in sums.iter_mut().zip(&rewards) {
            *sum += f64::from(*r);
        }
        if t < 24 {
            assert_eq!(venv.obs(), &alone[..], "step {t}: observations");
            assert!(venv.truncated().iter().all(|&f| !f), "step {t}");
            assert!(venv.drain_episodes().is_empty());
        }
    }
    assert!(
        venv.truncated().iter().all(|&f| f),
        "every agent truncated at 25"
    );
    assert!(venv.terminated().iter().all(|&f| !f));
    assert_eq!(venv.final_obs(), &alone[..], "the last observations");
    assert_ne!(venv.obs(), &alone[..], "the games were reset");
    let episodes = venv.drain_episodes();
    let rows: Vec<usize> = episodes.iter().map(|e| e.env_index).collect();
    assert_eq!(rows, (0..GAMES * AGENTS).collect::<Vec<_>>());
    for e in &episodes {
        assert_eq!(e.length, 25);
        assert!(e.truncated);
        assert_eq!(e.episode_return, sums[e.env_index], "row {}", e.env_index);
        assert_eq!(e.raw_score, sums[e.env_index]);
    }
    // Agents of one game share the team's reward but not their collisions: the rows differ.
    assert!(sums.iter().any(|s| *s != sums[0]));
}

/// Everything a run of `steps` batch steps shows, taken in `groups` groups each step.
fn run(threads: usize, groups: usize, steps: usize) -> (Vec<f32>, Vec<f32>, Vec<u64>) {
    let mut venv = batch(threads);
    venv.reset();
    let rows = venv.num_envs();
    let mut rewards = Vec::new();
    for t in 0..steps {
        let a = actions(t, rows);
        if groups == 1 {
            venv.step(&a[..]).unwrap();
        } else {
            venv.with_groups(groups, |mut split| {
                for group in &mut split {
                    let envs = group.envs();
                    group.step(&a[envs]).unwrap();
                }
            })
            .unwrap();
        }
        rewards.extend_from_slice(venv.rewards());
    }
    let ends = venv
        .drain_episodes()
        .iter()
        .map(|e| e.env_index as u64)
        .collect();
    (venv.obs().to_vec(), rewards, ends)
}

#[test]
fn threads_and_groups_change_nothing() {
    let one = run(1, 1, 60);
    assert_eq!(
        one.2.len(),
        2 * GAMES * AGENTS,
        "two episodes of every agent ended"
    );
    assert_eq!(run(2, 1, 60), one, "two threads");
    assert_eq!(run(1, 2, 60), one, "two groups of one game");
}

#[test]
fn a_snapshot_resumes_exactly() {
    let mut venv = batch(1);
    venv.reset();
    for t in 0..10 {
        venv.step(&actions(t, venv.num_envs())[..]).unwrap();
    }
    let snapshot = venv.snapshot().unwrap();
    let mut resumed = VecEnv::new(&spec(), &[1, 2], 1).unwrap();
    resumed.restore(&snapshot).unwrap();
    for t in 10..40 {
        let a = actions(t, venv.num_envs());
        venv.step(&a[..]).unwrap();
        resumed.step(&a[..]).unwrap();
        assert_eq!(venv.obs(), resumed.obs(), "step {t}");
        assert_eq!(venv.rewards(), resumed.rewards(), "step {t}");
    }
    assert_eq!(venv.drain_episodes(), resumed.drain_episodes());
    let other = EnvSpec::new(Game::MpeSimpleSpread(SpreadParams {
        agents: 4,
        ..SpreadParams::MPE2
    }));
    let error = VecEnv::new(&other, &SEEDS, 1)
        .unwrap()
        .restore(&snapshot)
        .unwrap_err();
    assert!(error.to_string().contains("taken of"), "{error}");
}

#[test]
fn rows_that_cut_a_game_are_refused() {
    let mut venv = batch(1);
    venv.reset();
    let error = venv.step_group(0..2, &[0i64, 1][..]).unwrap_err();
    assert!(
        error.to_string().contains("cut a game of 3 agents"),
        "{error}"
    );
    venv.step_group(3..6, &[0i64, 1, 2][..]).unwrap();
}

#[test]
fn wrappers_are_refused_on_a_multi_agent_game() {
    let mut spec = spec();
    spec.wrappers.push(Wrapper::ScaleReward { factor: 0.1 });
    let error = VecEnv::new(&spec, &SEEDS, 1).err().expect("refused");
    assert!(error.to_string().contains("several agents"), "{error}");
}

#[test]
fn the_game_alone_writes_every_agent() {
    let game = SimpleSpread::new(SpreadParams::MPE2, 0).unwrap();
    assert_eq!(observation_len(game.agents()), AGENTS * 18);
    let names: Vec<&str> = game.agents().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["agent_0", "agent_1", "agent_2"]);
}

#[test]
fn every_agent_of_a_game_shows_its_game() {
    let mut venv = batch(1);
    venv.reset();
    let first = venv
        .render_rgb(0)
        .unwrap()
        .expect("MPE games draw themselves");
    assert_eq!((first.width, first.height), (256, 256));
    assert_eq!(
        venv.render_rgb(2).unwrap(),
        Some(first.clone()),
        "agent 2 of game 0"
    );
    let second = venv.render_rgb(3).unwrap().unwrap();
    assert_ne!(second, first, "game 1 is another game");
    // Agents (blue) and landmarks (grey) are drawn on white.
    let colours: std::collections::BTreeSet<[u8; 3]> =
        first.pixels.chunks(3).map(|p| [p[0], p[1], p[2]]).collect();
    for colour in [[255, 255, 255], [70, 70, 170], [50, 50, 50]] {
        assert!(
            colours.contains(&colour),
            "{colour:?} missing from {colours:?}"
        );
    }
}

/// simple_tag's predators observe 16 floats and its prey 14: every row is as wide as the
/// widest, a prey's row holds its own observation then zeros, and everything else is as the
/// game alone gives it, whatever the threads or groups, and across a snapshot.
#[test]
fn agents_whose_observations_differ_in_length_get_rows_as_wide_as_the_widest() {
    const TAG_AGENTS: usize = 4;
    const PREDATOR: usize = 16;
    const PREY: usize = 14;
    let spec = EnvSpec::new(Game::MpeSimpleTag(TagParams::MPE2));
    let tag_batch = |threads| {
        let mut venv = VecEnv::new(&spec, &SEEDS, threads).unwrap();
        venv.set_min_parallel_work(std::time::Duration::ZERO);
        venv
    };
    let mut venv = tag_batch(1);
    assert_eq!(venv.num_envs(), GAMES * TAG_AGENTS);
    assert_eq!(venv.obs_len(), PREDATOR);
    assert_eq!(venv.obs_shape(), vec![PREDATOR]);
    let mut games: Vec<SimpleTag> = SEEDS
        .iter()
        .map(|&s| SimpleTag::new(TagParams::MPE2, s).unwrap())
        .collect();
    let own = 3 * PREDATOR + PREY;
    assert_eq!(observation_len(games[0].agents()), own);
    // The games' own observations, packed as each writes them.
    let mut alone = vec![0f32; GAMES * own];
    // What the batch's rows must hold: each agent's own observation, padded with zeros.
    let rows_of = |alone: &[f32]| -> Vec<f32> {
        let mut rows = Vec::new();
        for packed in alone.chunks(own) {
            let (predators, prey) = packed.split_at(3 * PREDATOR);
            rows.extend_from_slice(predators);
            rows.extend_from_slice(prey);
            rows.extend_from_slice(&[0.0; PREDATOR - PREY]);
        }
        rows
    };
    for (g, game) in games.iter_mut().enumerate() {
        game.reset(Some(SEEDS[g]), &mut alone[g * own..(g + 1) * own]);
    }
    let first = venv.reset().to_vec();
    assert_eq!(first, rows_of(&alone), "reset rows");
    let prey_row = &first[3 * PREDATOR..4 * PREDATOR];
    assert_eq!(
        &prey_row[..PREY],
        &alone[3 * PREDATOR..own],
        "the prey's own 14"
    );
    assert_eq!(&prey_row[PREY..], &[0.0, 0.0], "then zeros");
    assert!(prey_row[..PREY].iter().any(|&v| v != 0.0));
    let mut steps = vec![Step::default(); TAG_AGENTS];
    for t in 0..25 {
        let a = actions(t, GAMES * TAG_AGENTS);
        venv.step(&a[..]).unwrap();
        let mut rewards = Vec::new();
        for (g, game) in games.iter_mut().enumerate() {
            let moves: Vec<Action> = a[g * TAG_AGENTS..(g + 1) * TAG_AGENTS]
                .iter()
                .map(|&i| Action::Discrete(i as usize))
                .collect();
            game.step(&moves, &mut alone[g * own..(g + 1) * own], &mut steps);
            rewards.extend(steps.iter().map(|s| s.reward));
        }
        assert_eq!(venv.rewards(), &rewards[..], "step {t}: rewards");
        if t < 24 {
            assert_eq!(venv.obs(), &rows_of(&alone)[..], "step {t}: observations");
        }
    }
    assert!(
        venv.truncated().iter().all(|&f| f),
        "every agent truncated at 25"
    );
    assert_eq!(
        venv.final_obs(),
        &rows_of(&alone)[..],
        "the last observations"
    );
    for row in venv.obs().chunks(PREDATOR).skip(3).step_by(TAG_AGENTS) {
        assert_eq!(&row[PREY..], &[0.0, 0.0], "a prey's row after the reset");
    }
    assert_eq!(venv.drain_episodes().len(), GAMES * TAG_AGENTS);

    // Threads and groups change nothing; a snapshot resumes the padded rows exactly.
    let run = |threads: usize, groups: usize| {
        let mut venv = tag_batch(threads);
        venv.reset();
        let mut seen = Vec::new();
        for t in 0..30 {
            let a = actions(t, venv.num_envs());
            venv.with_groups(groups, |mut split| {
                for group in &mut split {
                    let envs = group.envs();
                    group.step(&a[envs]).unwrap();
                }
            })
            .unwrap();
            seen.extend_from_slice(venv.obs());
            seen.extend_from_slice(venv.rewards());
        }
        seen
    };
    assert_eq!(run(1, 1), run(2, 2));
    let mut venv = tag_batch(1);
    venv.reset();
    for t in 0..10 {
        venv.step(&actions(t, venv.num_envs())[..]).unwrap();
    }
    let snapshot = venv.snapshot().unwrap();
    let mut resumed = tag_batch(1);
    resumed.restore(&snapshot).unwrap();
    for t in 10..40 {
        let a = actions(t, venv.num_envs());
        venv.step(&a[..]).unwrap();
        resumed.step(&a[..]).unwrap();
        assert_eq!(venv.obs(), resumed.obs(), "step {t}");
    }
}

/// A game of agents that observe `observations` and act in `actions` (one agent each), for
/// what a batch refuses: it is never stepped.
struct Agents(Vec<AgentSpec>);

impl ParallelEnv for Agents {
    fn name(&self) -> &'static str {
        "made-up"
    }
    fn agents(&self) -> &[AgentSpec] {
        &self.0
    }
    fn reset(&mut self, _: Option<u64>, _: &mut [f32]) {}
    fn step(&mut self, _: &[Action<'_>], _: &mut [f32], _: &mut [Step]) {}
    fn save_state(&self, _: &mut Vec<u8>) -> Result<(), EnvError> {
        Ok(())
    }
    fn load_state(&mut self, _: &mut &[u8]) -> Result<(), EnvError> {
        Ok(())
    }
}

fn refusal(agents: Vec<AgentSpec>) -> String {
    let games: Vec<Box<dyn ParallelEnv>> = vec![Box::new(Agents(agents))];
    VecEnv::from_games(games, vec![0], 1)
        .err()
        .expect("refused")
        .to_string()
}

/// Agents of one batch share their action space, and may differ in what they observe only
/// by the length of a vector: other actions, an image beside a vector, or another type of
/// vector are refused, naming the agents.
#[test]
fn agents_that_act_differently_or_observe_other_kinds_are_refused() {
    let vector = |len| ObsSpace::vector(len, Dtype::F32);
    let moves = ActionSpace::discrete(5);
    let said = refusal(vec![
        AgentSpec::new("adversary", 0, vector(16), moves.clone()),
        AgentSpec::new("agent", 0, vector(14), ActionSpace::discrete(4)),
    ]);
    assert!(
        said.contains("`made-up`'s agents act differently"),
        "{said}"
    );
    assert!(
        said.contains("agent_0 takes") && said.contains("adversary_0 takes"),
        "{said}"
    );
    let image = ObsSpace::image(10, 10, 4, Layout::Chw, Dtype::F32);
    let said = refusal(vec![
        AgentSpec::new("a", 0, vector(400), moves.clone()),
        AgentSpec::new("b", 0, image, moves.clone()),
    ]);
    assert!(said.contains("observe different kinds"), "{said}");
    assert!(said.contains("b_0 observes"), "{said}");
    let said = refusal(vec![
        AgentSpec::new("a", 0, vector(4), moves.clone()),
        AgentSpec::new("b", 0, ObsSpace::vector(2, Dtype::U8), moves),
    ]);
    assert!(said.contains("observe different kinds"), "{said}");
}

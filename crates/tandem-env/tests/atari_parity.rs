//! Atari parity with the Python reference stack (fixtures from
//! `scripts/parity/atari_fixture.py`): gymnasium's seeding of `AtariEnv`, and
//! ALE/Breakout-v5 + `AtariPreprocessing(noop_max=30, frame_skip=4,
//! screen_size=84, grayscale)` + `FrameStackObservation(4)` rebuilt from this
//! crate's wrappers, compared step by step.
#![cfg(feature = "atari")]

use sha2::{Digest, Sha256};
use tandem_env::atari::atari_env_seeds;
use tandem_env::atari::{AtariConfig, AtariGame, AtariObservation, GymNoopReset};
use tandem_env::gym_seeding::{NumpyGenerator, SeedSequence};
use tandem_env::{Env, ObsBuf, Wrapper, wrappers};

fn fields(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn seed_sequence_pcg64_and_noop_draws_match_numpy() {
    let fixture = include_str!("atari_fixtures/numpy_seeding.txt");
    let mut checked = 0;
    for line in fixture.lines().filter(|line| !line.starts_with('#')) {
        let values: Vec<u64> = fields(line)
            .iter()
            .map(|field| field.parse().expect("numbers"))
            .collect();
        let (seed, numpy_seed, ale_seed, draws) = (values[0], values[1], values[2], &values[3..]);
        assert_eq!(
            SeedSequence::new(seed).generate_u32(2),
            vec![numpy_seed as u32, ale_seed as u32],
            "seed {seed}"
        );
        let (mut generator, derived_ale_seed) = atari_env_seeds(seed);
        assert_eq!(u64::from(derived_ale_seed), ale_seed);
        let ours: Vec<u64> = draws
            .iter()
            .map(|_| u64::from(1 + generator.below(30)))
            .collect();
        assert_eq!(ours, draws, "no-op counts for seed {seed}");
        checked += 1;
    }
    assert_eq!(checked, 10);
}

#[test]
fn single_value_ranges_consume_no_draw() {
    let mut a = NumpyGenerator::from_seed(3);
    let mut b = NumpyGenerator::from_seed(3);
    assert_eq!(a.below(1), 0);
    assert_eq!(a.next_u64(), b.next_u64());
}

/// gymnasium's frame skip, terminal steps included, to show that the crate's
/// `frame-skip` differs from it only there: gymnasium captures a frame only
/// after checking that the episode goes on and pools in place, so a step that
/// ends the episode returns frames of earlier steps; tandem's includes the
/// frames of the final step.
struct GymnasiumFrameSkip {
    inner: Box<dyn Env>,
    /// gymnasium's `obs_buffer`: [0] latest (pooled in place), [1] second-to-last.
    buffers: [Vec<u8>; 2],
    scratch: Vec<u8>,
}

impl GymnasiumFrameSkip {
    const SKIP: usize = 4;

    fn new(inner: Box<dyn Env>) -> Self {
        let len = inner.observation_space().len();
        GymnasiumFrameSkip {
            inner,
            buffers: [vec![0; len], vec![0; len]],
            scratch: vec![0; len],
        }
    }

    fn pool_into(&mut self, obs: ObsBuf<'_>) {
        let [latest, previous] = &mut self.buffers;
        for (a, &b) in latest.iter_mut().zip(previous.iter()) {
            *a = (*a).max(b);
        }
        if let ObsBuf::U8(out) = obs {
            out.copy_from_slice(latest);
        }
    }
}

impl Env for GymnasiumFrameSkip {
    fn observation_space(&self) -> tandem_env::ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> tandem_env::ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.inner.reset(seed, ObsBuf::U8(&mut self.buffers[0]));
        self.buffers[1].fill(0);
        self.pool_into(obs);
    }
    fn step(&mut self, action: tandem_env::Action<'_>, obs: ObsBuf<'_>) -> tandem_env::Step {
        let action = action.index();
        let mut total = tandem_env::Step::default();
        for t in 0..Self::SKIP {
            let step = self.inner.step(
                tandem_env::Action::Discrete(action),
                ObsBuf::U8(&mut self.scratch),
            );
            total.reward += step.reward;
            total.raw_reward += step.raw_reward;
            total.terminated |= step.terminated;
            total.truncated |= step.truncated;
            total.game_over |= step.game_over;
            if step.done() {
                break;
            }
            if t == Self::SKIP - 2 {
                self.buffers[1].copy_from_slice(&self.scratch);
            } else if t == Self::SKIP - 1 {
                self.buffers[0].copy_from_slice(&self.scratch);
            }
        }
        self.pool_into(obs);
        total
    }
    fn lives(&self) -> u32 {
        self.inner.lives()
    }
}

/// `AtariPreprocessing` + frame stack built from tandem's wrappers (with
/// gymnasium's terminal-step frame skip when `gymnasium_frame_skip`).
fn preprocessed_breakout(
    observation: AtariObservation,
    construction_seed: u64,
    gymnasium_frame_skip: bool,
) -> Box<dyn Env> {
    let config = AtariConfig {
        observation,
        ..AtariConfig::v5("breakout")
    };
    let game = AtariGame::new(config, construction_seed).expect("Breakout loads");
    let mut env: Box<dyn Env> = Box::new(GymNoopReset::new(game, 30).expect("noop_max > 0"));
    let mut index = 0;
    let mut add = |env: Box<dyn Env>, wrapper: Wrapper| {
        index += 1;
        wrappers::wrap(&wrapper, index, env, 0).expect("wrapper fits")
    };
    if observation == AtariObservation::Rgb {
        env = add(env, Wrapper::Grayscale);
    }
    env = if gymnasium_frame_skip {
        Box::new(GymnasiumFrameSkip::new(env))
    } else {
        add(
            env,
            Wrapper::FrameSkip {
                n: 4,
                max_pool: true,
            },
        )
    };
    env = add(
        env,
        Wrapper::Resize {
            height: 84,
            width: 84,
        },
    );
    env = add(env, Wrapper::FrameStack { n: 4 });
    assert_eq!(env.observation_space().len(), 4 * 84 * 84);
    env
}

fn short_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[derive(Debug, Default, PartialEq)]
struct Replay {
    steps: usize,
    resets: usize,
    /// Steps whose observation differs although everything else matched.
    terminal_observation_mismatches: Vec<usize>,
}

fn replay(fixture: &str, observation: AtariObservation, gymnasium_frame_skip: bool) -> Replay {
    let mut lines = fixture
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.starts_with('#'));
    let (_, config) = lines.next().expect("config line");
    let seed: u64 = fields(config)[1].parse().expect("seed");
    // Built with another seed: the seeded reset must reseed like gymnasium's.
    let mut env = preprocessed_breakout(observation, seed + 1000, gymnasium_frame_skip);
    let mut stack = vec![0u8; 4 * 84 * 84];
    let mut replay = Replay::default();
    let mut next_reset_seed = Some(seed);
    for (number, text) in lines {
        let line = number + 1;
        let expected = fields(text);
        if expected[0] == "R" {
            env.reset(next_reset_seed.take(), ObsBuf::U8(&mut stack));
            replay.resets += 1;
            assert_eq!(
                env.lives().to_string(),
                expected[2],
                "lives after reset, line {line}"
            );
            assert_eq!(
                short_hash(&stack),
                expected[3],
                "observation after reset, line {line}"
            );
            continue;
        }
        let action: usize = expected[0].parse().expect("action");
        let step = env.step(tandem_env::Action::Discrete(action), ObsBuf::U8(&mut stack));
        replay.steps += 1;
        assert_eq!(
            step.reward,
            expected[1].parse::<f32>().expect("reward"),
            "reward, line {line}"
        );
        assert_eq!(
            step.terminated,
            expected[2] == "1",
            "terminated, line {line}"
        );
        assert_eq!(step.truncated, expected[3] == "1", "truncated, line {line}");
        assert_eq!(env.lives().to_string(), expected[4], "lives, line {line}");
        if short_hash(&stack) != expected[5] {
            assert!(
                step.terminated || step.truncated,
                "observation differs mid-episode, line {line}"
            );
            replay.terminal_observation_mismatches.push(line);
        }
    }
    replay
}

const SEED_7: &str = include_str!("atari_fixtures/breakout_preprocessed_seed7.txt");
const SEED_2024: &str = include_str!("atari_fixtures/breakout_preprocessed_seed2024.txt");

#[test]
fn preprocessed_breakout_matches_gymnasium_exactly_seed_7() {
    let replay = replay(SEED_7, AtariObservation::Grayscale, true);
    assert_eq!((replay.steps, replay.resets), (1200, 6));
    assert_eq!(replay.terminal_observation_mismatches, Vec::<usize>::new());
}

#[test]
fn preprocessed_breakout_from_rgb_matches_gymnasium_exactly_seed_2024() {
    let replay = replay(SEED_2024, AtariObservation::Rgb, true);
    assert_eq!((replay.steps, replay.resets), (800, 5));
    assert_eq!(replay.terminal_observation_mismatches, Vec::<usize>::new());
}

/// The crate's own frame-skip matches gymnasium everywhere, the observations of
/// steps that end the game in their last two frames included (fixture lines 818
/// and 716 are such steps).
#[test]
fn crate_frame_skip_matches_gymnasium_on_terminal_observations_too() {
    let replay_7 = replay(SEED_7, AtariObservation::Grayscale, false);
    assert_eq!((replay_7.steps, replay_7.resets), (1200, 6));
    assert_eq!(
        replay_7.terminal_observation_mismatches,
        Vec::<usize>::new()
    );
    let replay_2024 = replay(SEED_2024, AtariObservation::Rgb, false);
    assert_eq!((replay_2024.steps, replay_2024.resets), (800, 5));
    assert_eq!(
        replay_2024.terminal_observation_mismatches,
        Vec::<usize>::new()
    );
}

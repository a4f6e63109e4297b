//! The Atari game inside tandem's machinery: built from specs, wrapped in the
//! DeepMind preprocessing, stepped by VecEnv with any thread count, and
//! rejecting bad settings with errors.
#![cfg(feature = "atari")]

#[path = "support/deepmind.rs"]
mod deepmind;
use tandem_env::atari::{AtariConfig, AtariGame, AtariObservation, GymNoopReset};
use tandem_env::{Env, EnvError, Game, ObsBuf, VecEnv, env_seeds, make_env, make_game};

fn breakout_spec() -> Game {
    Game::from_name("atari-breakout").expect("known game")
}

/// Runs `steps` batch steps of the DeepMind-preprocessed Breakout; returns a
/// checksum per step, all rewards and all episode statistics.
/// (environment, return, raw score, length) of a finished episode.
type Episode = (usize, f64, f64, u64);

fn run(threads: usize, steps: usize) -> (Vec<f64>, Vec<f32>, Vec<Episode>) {
    let spec = deepmind::deepmind_atari(breakout_spec());
    let mut venv = VecEnv::new(&spec, &env_seeds(5, 0, 0, 3), threads).expect("Breakout builds");
    venv.reset();
    let (mut checksums, mut rewards, mut episodes) = (Vec::new(), Vec::new(), Vec::new());
    for t in 0..steps {
        let actions: Vec<i64> = (0..3)
            .map(|env| ((t * 7 + env * 3) / 5 % 4) as i64)
            .collect();
        venv.step(&actions).expect("valid actions");
        checksums.push(
            venv.obs()
                .iter()
                .enumerate()
                .map(|(i, &v)| f64::from(v) * (1 + i % 97) as f64)
                .sum(),
        );
        rewards.extend_from_slice(venv.rewards());
        episodes.extend(
            venv.drain_episodes()
                .into_iter()
                .map(|e| (e.env_index, e.episode_return, e.raw_score, e.length)),
        );
    }
    (checksums, rewards, episodes)
}

#[test]
fn deepmind_breakout_is_identical_with_one_and_two_threads() {
    let one = run(1, 200);
    let two = run(2, 200);
    assert!(
        one.1.iter().any(|&reward| reward > 0.0),
        "the policy scores, so the comparison sees rewards"
    );
    assert!(
        !one.2.is_empty(),
        "episodes end (episodic life), so auto-reset is covered"
    );
    assert!(one == two);
}

#[test]
fn deepmind_breakout_has_the_network_observation() {
    let spec = deepmind::deepmind_atari(breakout_spec());
    let env = make_env(&spec, 1).expect("builds");
    assert_eq!(env.observation_space().network_shape(), vec![4, 84, 84]);
    assert_eq!(env.action_space(), tandem_env::ActionSpace::discrete(4));
    assert_eq!(env.lives(), 5);
}

#[test]
fn game_steps_one_frame_and_reports_the_game() {
    let mut game = make_game(&breakout_spec(), 3).expect("builds");
    assert_eq!(game.observation_space().network_shape(), vec![3, 210, 160]);
    let mut rgb = vec![0u8; 210 * 160 * 3];
    game.reset(None, ObsBuf::U8(&mut rgb));
    assert!(rgb.iter().any(|&value| value > 0));
    let frame = game.render_rgb().expect("Atari games render");
    assert_eq!((frame.height, frame.width), (210, 160));
    assert_eq!(frame.pixels, rgb, "the render is the observation");
    let mut f32_obs = vec![0f32; 210 * 160 * 3];
    let step = game.step(tandem_env::Action::Discrete(0), ObsBuf::F32(&mut f32_obs));
    assert!(!step.done());
    assert_eq!(step.reward, step.raw_reward);
    assert!(
        f32_obs.iter().all(|&v| (0.0..=255.0).contains(&v)) && f32_obs.iter().any(|&v| v > 0.0)
    );
    // Play until the game ends: 5 lives lost, then the step says terminated.
    let mut frames = 0;
    loop {
        let step = game.step(tandem_env::Action::Discrete(frames % 4), ObsBuf::Skip);
        frames += 1;
        if step.done() {
            assert!(step.terminated && step.game_over && !step.truncated);
            break;
        }
        assert!(
            frames < 100_000,
            "Breakout ends under a fixed cycling policy"
        );
    }
    assert_eq!(game.lives(), 0);
}

#[test]
fn same_seed_same_frames_and_seeded_reset_restarts_the_stream() {
    let config = AtariConfig {
        observation: AtariObservation::Grayscale,
        ..AtariConfig::v5("breakout")
    };
    let play = |game: &mut AtariGame, seed: Option<u64>| -> Vec<u8> {
        let mut gray = vec![0u8; 210 * 160];
        game.reset(seed, ObsBuf::U8(&mut gray));
        let mut trace = Vec::new();
        for frame in 0..1500 {
            if game
                .step(
                    tandem_env::Action::Discrete((frame / 3) % 4),
                    ObsBuf::U8(&mut gray),
                )
                .done()
            {
                game.reset(None, ObsBuf::U8(&mut gray));
            }
            trace.extend_from_slice(&gray[gray.len() / 2..gray.len() / 2 + 64]);
        }
        trace
    };
    let mut a = AtariGame::new(config.clone(), 77).unwrap();
    let mut b = AtariGame::new(config.clone(), 77).unwrap();
    let first = play(&mut a, None);
    assert_eq!(first, play(&mut b, None));
    assert_eq!(
        play(&mut a, Some(77)),
        first,
        "reset(Some(seed)) equals a game built with that seed"
    );
    let mut c = AtariGame::new(config, 78).unwrap();
    assert_ne!(play(&mut c, None), first, "sticky actions follow the seed");
}

#[test]
fn gym_noop_reset_takes_the_gymnasium_noop_count() {
    // gymnasium's first no-op count for reset seed 7 is 14 (tests/atari_fixtures/numpy_seeding.txt).
    let game = AtariGame::new(AtariConfig::v5("breakout"), 7).unwrap();
    let mut env = GymNoopReset::new(game, 30).unwrap();
    env.reset(Some(7), ObsBuf::Skip);
    assert_eq!(env.game().ale().episode_frame_number(), 14);
    let error = GymNoopReset::new(AtariGame::new(AtariConfig::v5("breakout"), 7).unwrap(), 0).err();
    assert!(matches!(error, Some(EnvError::InvalidArgument(_))));
}

#[test]
fn bad_atari_settings_are_errors_naming_the_problem() {
    let unknown = tandem_env::atari::make_atari("breakuot", 1)
        .err()
        .expect("unknown ROM is an error");
    assert!(unknown.to_string().contains("atari-breakuot"), "{unknown}");
    for probability in [1.5, -0.5] {
        let error = AtariGame::new(
            AtariConfig {
                repeat_action_probability: probability,
                ..AtariConfig::v5("breakout")
            },
            1,
        )
        .err()
        .expect("probability out of range");
        assert!(
            matches!(error, EnvError::InvalidGameParameter { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains(&probability.to_string()),
            "{error}"
        );
    }
}

#[test]
fn full_action_space_has_eighteen_actions() {
    let config = AtariConfig {
        full_action_space: true,
        ..AtariConfig::v5("breakout")
    };
    assert_eq!(
        AtariGame::new(config, 1).unwrap().action_space(),
        tandem_env::ActionSpace::discrete(18)
    );
    let catalogue = make_game(&breakout_spec(), 1).unwrap();
    assert_eq!(
        catalogue.action_space(),
        tandem_env::ActionSpace::discrete(4)
    );
}

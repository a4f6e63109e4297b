//! Wrapper behaviour on a scripted u8 RGB 210x160x3 game (the shape ALE produces), and
//! the errors for wrappers that do not fit.

#[path = "support/deepmind.rs"]
mod deepmind;
use std::sync::{Arc, Mutex};

use tandem_env::space::{Dtype, Layout, ObsBuf, ObsSpace};
use tandem_env::wrappers::image::{AreaResizer, rgb_to_gray};
use tandem_env::wrappers::wrap;
use tandem_env::{
    Env, EnvError, EnvSpec, Game, Step, VecEnv, Wrapper, make_env, observation_space,
};

const H: usize = 210;
const W: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Reset,
    Step(usize),
}

/// A scripted "Atari" game: 4 actions, 3 lives (one lost every 10 frames), rewards
/// cycling through -1, 0, 1, 2, 3, and a frame that depends on the frame counter.
struct ScriptedGame {
    frame: u64,
    lives: u32,
    log: Arc<Mutex<Vec<Event>>>,
}

impl ScriptedGame {
    fn boxed() -> (Box<dyn Env>, Arc<Mutex<Vec<Event>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        (
            Box::new(ScriptedGame {
                frame: 0,
                lives: 3,
                log: log.clone(),
            }),
            log,
        )
    }

    fn pixels(frame: u64) -> Vec<u8> {
        let mut px = vec![0u8; H * W * 3];
        for (i, v) in px.iter_mut().enumerate() {
            // Different frames are larger in different places, so max-pooling shows.
            *v = ((i as u64 * 7 + frame * 53 + (i as u64 / 480) * frame * 11) % 251) as u8;
        }
        px
    }

    fn reward(frame: u64) -> f32 {
        (frame % 5) as f32 - 1.0
    }
}

impl Env for ScriptedGame {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::image(H, W, 3, Layout::Hwc, Dtype::U8)
    }
    fn action_space(&self) -> tandem_env::ActionSpace {
        tandem_env::ActionSpace::discrete(4)
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.log.lock().unwrap().push(Event::Reset);
        self.frame = 0;
        self.lives = 3;
        obs.write_u8(&Self::pixels(0));
    }
    fn step(&mut self, action: tandem_env::Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        let action = action.index();
        self.log.lock().unwrap().push(Event::Step(action));
        self.frame += 1;
        if self.frame.is_multiple_of(10) {
            self.lives -= 1;
        }
        if !obs.is_skip() {
            obs.write_u8(&Self::pixels(self.frame));
        }
        Step::game(Self::reward(self.frame), self.lives == 0, false)
    }
    fn lives(&self) -> u32 {
        self.lives
    }
}

fn chain(wrappers: &[Wrapper]) -> (Box<dyn Env>, Arc<Mutex<Vec<Event>>>) {
    let (mut env, log) = ScriptedGame::boxed();
    for (i, w) in wrappers.iter().enumerate() {
        env = wrap(w, i, env, 1000 + i as u64).unwrap();
    }
    (env, log)
}

fn u8_obs(env: &dyn Env) -> Vec<u8> {
    vec![0; env.observation_space().len()]
}

#[test]
fn deepmind_preprocessing_composes_on_an_rgb_frame_source() {
    let spec = deepmind::deepmind_atari(Game::from_name("atari-breakout").unwrap());
    let wrappers = spec.wrappers.clone();
    // The game itself lives in tandem-ale; validation alone knows its frame format.
    assert_eq!(
        observation_space(&spec).unwrap(),
        ObsSpace {
            frames: 4,
            ..ObsSpace::image(84, 84, 4, Layout::Chw, Dtype::U8)
        }
    );
    let (env, _) = chain(&wrappers);
    assert_eq!(env.observation_space(), observation_space(&spec).unwrap());
    let envs: Vec<Box<dyn Env>> = vec![env, chain(&wrappers).0];
    let mut venv = VecEnv::from_envs(envs, vec![1, 2], 2).unwrap();
    assert_eq!(venv.obs_shape(), vec![4, 84, 84]);
    let obs = venv.reset().to_vec();
    assert_eq!(obs.len(), 2 * 4 * 84 * 84);
    assert!(
        obs.iter()
            .all(|&v| v.fract() == 0.0 && (0.0..=255.0).contains(&v)),
        "pixels stay 0..=255"
    );
    for _ in 0..3 {
        venv.step(&[0, 3]).unwrap();
        assert!(
            venv.rewards().iter().all(|r| [-1.0, 0.0, 1.0].contains(r)),
            "{:?}",
            venv.rewards()
        );
    }
}

#[test]
fn frame_skip_sums_rewards_and_max_pools_the_last_two_frames() {
    let (mut env, log) = chain(&[Wrapper::FrameSkip {
        n: 4,
        max_pool: true,
    }]);
    let mut obs = u8_obs(&*env);
    env.reset(Some(1), ObsBuf::U8(&mut obs));
    let step = env.step(tandem_env::Action::Discrete(2), ObsBuf::U8(&mut obs));
    let expected_reward: f32 = (1..=4).map(ScriptedGame::reward).sum();
    assert_eq!(
        (step.reward, step.raw_reward),
        (expected_reward, expected_reward)
    );
    let (a, b) = (ScriptedGame::pixels(3), ScriptedGame::pixels(4));
    let pooled: Vec<u8> = a.iter().zip(&b).map(|(x, y)| *x.max(y)).collect();
    assert_ne!(pooled, b, "the scripted frames must make pooling visible");
    assert_eq!(obs, pooled);
    assert_eq!(log.lock().unwrap()[1..], [Event::Step(2); 4]);
}

#[test]
fn grayscale_then_resize_equal_the_direct_functions() {
    let (mut env, _) = chain(&[
        Wrapper::Grayscale,
        Wrapper::Resize {
            height: 84,
            width: 84,
        },
    ]);
    let mut obs = u8_obs(&*env);
    env.reset(None, ObsBuf::U8(&mut obs));
    env.step(tandem_env::Action::Discrete(0), ObsBuf::U8(&mut obs));
    let mut gray = vec![0u8; H * W];
    rgb_to_gray(&ScriptedGame::pixels(1), &mut gray);
    let mut small = vec![0u8; 84 * 84];
    AreaResizer::new((H, W), (84, 84), 1).resize(&gray, &mut small);
    assert_eq!(obs, small);
}

#[test]
fn clip_reward_keeps_the_raw_reward() {
    let (mut env, _) = chain(&[Wrapper::ClipReward]);
    env.reset(None, ObsBuf::Skip);
    let steps: Vec<Step> = (0..5)
        .map(|_| env.step(tandem_env::Action::Discrete(0), ObsBuf::Skip))
        .collect();
    let clipped: Vec<f32> = steps.iter().map(|s| s.reward).collect();
    let raw: Vec<f32> = steps.iter().map(|s| s.raw_reward).collect();
    assert_eq!(raw, [0.0, 1.0, 2.0, 3.0, -1.0]);
    assert_eq!(clipped, [0.0, 1.0, 1.0, 1.0, -1.0]);
}

#[test]
fn scale_reward_multiplies_the_reward_and_keeps_the_raw_one() {
    // After clip-reward it scales the sign, as a chain applies wrappers in order.
    let (mut env, _) = chain(&[Wrapper::ClipReward, Wrapper::ScaleReward { factor: 0.5 }]);
    env.reset(None, ObsBuf::Skip);
    let steps: Vec<Step> = (0..5)
        .map(|_| env.step(tandem_env::Action::Discrete(0), ObsBuf::Skip))
        .collect();
    let scaled: Vec<f32> = steps.iter().map(|s| s.reward).collect();
    let raw: Vec<f32> = steps.iter().map(|s| s.raw_reward).collect();
    assert_eq!(raw, [0.0, 1.0, 2.0, 3.0, -1.0]);
    assert_eq!(scaled, [0.0, 0.5, 0.5, 0.5, -0.5]);
}

#[test]
fn clamp_reward_bounds_the_reward_and_keeps_the_raw_one() {
    let (mut env, _) = chain(&[Wrapper::ClampReward {
        low: -0.5,
        high: 2.5,
    }]);
    env.reset(None, ObsBuf::Skip);
    let steps: Vec<Step> = (0..5)
        .map(|_| env.step(tandem_env::Action::Discrete(0), ObsBuf::Skip))
        .collect();
    let clamped: Vec<f32> = steps.iter().map(|s| s.reward).collect();
    let raw: Vec<f32> = steps.iter().map(|s| s.raw_reward).collect();
    assert_eq!(raw, [0.0, 1.0, 2.0, 3.0, -1.0]);
    assert_eq!(clamped, [0.0, 1.0, 2.0, 2.5, -0.5]);
}

#[test]
fn episodic_life_ends_episodes_per_life_but_statistics_per_game() {
    let (env, log) = chain(&[Wrapper::EpisodicLife]);
    let mut venv = VecEnv::from_envs(vec![env], vec![0], 1).unwrap();
    venv.reset();
    let mut episode_ends = Vec::new();
    for t in 1..=40 {
        venv.step(&[1]).unwrap();
        if venv.terminated()[0] {
            episode_ends.push(t);
        }
        if t == 27 {
            let resets = log
                .lock()
                .unwrap()
                .iter()
                .filter(|e| **e == Event::Reset)
                .count();
            assert_eq!(
                resets, 1,
                "lost lives must not restart the game before it is over"
            );
        }
    }
    // A life every 10 frames; continuing after a lost life takes a no-op frame, so the
    // agent sees the losses at steps 10, 19 and 28 (the last ending the game).
    assert_eq!(episode_ends[..3], [10, 19, 28]);
    let games = venv.drain_episodes();
    assert_eq!(games.len(), 1, "{games:?}");
    assert!(!games[0].truncated);
    let frames_played = 30; // the game's frame counter at game over
    let noop_frames = 2;
    assert_eq!(games[0].length, frames_played - noop_frames);
    let expected_raw: f32 = (1..=frames_played).map(ScriptedGame::reward).sum::<f32>()
        - [11, 21]
            .iter()
            .map(|&f| ScriptedGame::reward(f))
            .sum::<f32>();
    assert_eq!(games[0].raw_score, f64::from(expected_raw));
}

#[test]
fn frame_stack_orders_oldest_first_and_fills_on_reset() {
    let (mut env, _) = chain(&[
        Wrapper::Grayscale,
        Wrapper::Resize {
            height: 21,
            width: 16,
        },
        Wrapper::FrameStack { n: 3 },
    ]);
    assert_eq!(
        env.observation_space(),
        ObsSpace {
            frames: 3,
            ..ObsSpace::image(21, 16, 3, Layout::Chw, Dtype::U8)
        }
    );
    let mut obs = u8_obs(&*env);
    let plane = 21 * 16;
    env.reset(None, ObsBuf::U8(&mut obs));
    assert_eq!(obs[..plane], obs[plane..2 * plane]);
    assert_eq!(obs[..plane], obs[2 * plane..]);
    let first = obs[..plane].to_vec();
    env.step(tandem_env::Action::Discrete(0), ObsBuf::U8(&mut obs));
    let second = obs[2 * plane..].to_vec();
    env.step(tandem_env::Action::Discrete(0), ObsBuf::U8(&mut obs));
    assert_eq!(obs[..plane], first[..]);
    assert_eq!(obs[plane..2 * plane], second[..]);
    assert_ne!(first, second);
}

#[test]
fn frame_stack_of_rgb_frames_is_channels_first() {
    let (mut env, _) = chain(&[Wrapper::FrameStack { n: 2 }]);
    assert_eq!(
        env.observation_space(),
        ObsSpace {
            frames: 2,
            ..ObsSpace::image(H, W, 6, Layout::Chw, Dtype::U8)
        }
    );
    let mut obs = u8_obs(&*env);
    env.reset(None, ObsBuf::U8(&mut obs));
    env.step(tandem_env::Action::Discrete(0), ObsBuf::U8(&mut obs));
    let (old, new) = (ScriptedGame::pixels(0), ScriptedGame::pixels(1));
    let plane = H * W;
    for p in [0, 1, 777, plane - 1] {
        for c in 0..3 {
            assert_eq!(obs[c * plane + p], old[p * 3 + c]);
            assert_eq!(obs[(3 + c) * plane + p], new[p * 3 + c]);
        }
    }
}

#[test]
fn noop_and_fire_reset_press_the_expected_buttons() {
    let (mut env, log) = chain(&[Wrapper::NoopReset { max: 5 }, Wrapper::FireReset]);
    let mut counts = Vec::new();
    for _ in 0..40 {
        log.lock().unwrap().clear();
        env.reset(None, ObsBuf::Skip);
        let events = log.lock().unwrap().clone();
        assert_eq!(events[0], Event::Reset);
        let noops = events[1..]
            .iter()
            .take_while(|e| **e == Event::Step(0))
            .count();
        assert!((1..=5).contains(&noops), "{events:?}");
        assert_eq!(events[1 + noops..], [Event::Step(1), Event::Step(2)]);
        counts.push(noops);
    }
    assert!(counts.contains(&1) && counts.contains(&5), "{counts:?}");
    // The same seed gives the same noop counts.
    let replay = |seed| {
        let (mut env, log) = chain(&[Wrapper::NoopReset { max: 30 }]);
        env.reset(Some(seed), ObsBuf::Skip);
        log.lock().unwrap().len()
    };
    assert_eq!(replay(7), replay(7));
    assert!(
        (0..20)
            .map(replay)
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 3
    );
}

#[test]
fn sticky_actions_repeat_with_the_given_probability() {
    // Probability 1 is outside the wrapper's declared range ([0, 1)); the type itself takes it.
    let (game, log) = ScriptedGame::boxed();
    let mut env = tandem_env::wrappers::StickyActions::new(game, 1.0, 1000, 1);
    env.reset(Some(3), ObsBuf::Skip);
    env.step(tandem_env::Action::Discrete(3), ObsBuf::Skip);
    assert_eq!(
        log.lock().unwrap()[1],
        Event::Step(0),
        "probability 1 always repeats the no-op of the reset"
    );
    let (mut env, log) = chain(&[Wrapper::StickyActions { probability: 0.25 }]);
    env.reset(Some(3), ObsBuf::Skip);
    let mut expected_previous = 0;
    let mut repeats = 0;
    for t in 0..4000 {
        let action = t % 4;
        env.step(tandem_env::Action::Discrete(action), ObsBuf::Skip);
        let Event::Step(done) = *log.lock().unwrap().last().unwrap() else {
            panic!()
        };
        if done != action {
            assert_eq!(done, expected_previous);
            repeats += 1;
        }
        expected_previous = done;
        if env.lives() == 0 {
            env.reset(None, ObsBuf::Skip);
            expected_previous = 0;
        }
    }
    // The cycling actions make (almost) every repeat visible: about 25% of 4000.
    assert!((880..1120).contains(&repeats), "{repeats}");
}

#[test]
fn time_limit_truncates_and_ends_the_game() {
    let (mut env, _) = chain(&[Wrapper::TimeLimit { max_steps: 4 }]);
    env.reset(None, ObsBuf::Skip);
    let steps: Vec<Step> = (0..4)
        .map(|_| env.step(tandem_env::Action::Discrete(0), ObsBuf::Skip))
        .collect();
    assert!(steps[..3].iter().all(|s| !s.done()));
    assert!(steps[3].truncated && !steps[3].terminated && steps[3].game_over);
}

#[test]
fn wrappers_that_do_not_fit_are_named_with_the_reason() {
    let cartpole = |wrappers: Vec<Wrapper>| {
        observation_space(&EnvSpec {
            game: Game::Cartpole,
            wrappers,
        })
    };
    let err = cartpole(vec![Wrapper::ClipReward, Wrapper::Grayscale]).unwrap_err();
    assert!(
        matches!(
            err,
            EnvError::WrapperMismatch {
                index: 1,
                wrapper: "grayscale",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "wrapper #1 `grayscale` does not fit its input observation vector of 4 f32: needs RGB image observations (cartpole observes a vector of 4 floats at this point of the chain)"
    );
    assert!(matches!(
        cartpole(vec![Wrapper::Resize {
            height: 2,
            width: 2
        }]),
        Err(EnvError::WrapperMismatch {
            index: 0,
            wrapper: "resize",
            ..
        })
    ));
    assert!(matches!(
        cartpole(vec![Wrapper::FireReset]),
        Err(EnvError::WrapperMismatch {
            wrapper: "fire-reset",
            ..
        })
    ));
    assert!(matches!(
        cartpole(vec![Wrapper::FrameSkip {
            n: 0,
            max_pool: true
        }]),
        Err(EnvError::InvalidWrapperParameter {
            wrapper: "frame-skip",
            ..
        })
    ));
    assert!(matches!(
        cartpole(vec![Wrapper::NormalizeReward {
            gamma: 1.5,
            clip: 10.0
        }]),
        Err(EnvError::InvalidWrapperParameter {
            wrapper: "normalize-reward",
            ..
        })
    ));
    let atari = Game::from_name("atari-breakout").unwrap();
    let atari_chain = |wrappers: Vec<Wrapper>| {
        observation_space(&EnvSpec {
            game: atari.clone(),
            wrappers,
        })
    };
    let err = atari_chain(vec![Wrapper::Resize {
        height: 300,
        width: 84,
    }])
    .unwrap_err();
    assert!(err.to_string().contains("only shrinks"), "{err}");
    // normalize-obs takes vectors only: networks scale images themselves.
    assert!(matches!(
        atari_chain(vec![
            Wrapper::Grayscale,
            Wrapper::NormalizeObs { clip: 5.0 }
        ]),
        Err(EnvError::WrapperMismatch { index: 1, .. })
    ));
    // A stacked (channels-first) RGB frame is no longer an RGB image.
    assert!(atari_chain(vec![Wrapper::FrameStack { n: 4 }, Wrapper::Grayscale]).is_err());
    assert!(make_env(&EnvSpec::new(Game::Cartpole).with(Wrapper::Grayscale), 0).is_err());
}

#[test]
fn normaliser_statistics_can_be_read_synced_and_restored() {
    let spec = EnvSpec::new(Game::Cartpole)
        .with(Wrapper::NormalizeObs { clip: 10.0 })
        .with(Wrapper::NormalizeReward {
            gamma: 0.99,
            clip: 10.0,
        });
    let mut a = VecEnv::new(&spec, &tandem_env::env_seeds(1, 0, 0, 4), 2).unwrap();
    let mut b = VecEnv::new(&spec, &tandem_env::env_seeds(1, 1, 0, 4), 1).unwrap();
    a.reset();
    b.reset();
    let mut observed = [4.0, 4.0];
    for t in 0..20 {
        a.step(&[t % 2, 1, 0, 1]).unwrap();
        b.step(&[1, t % 2, 1, 0]).unwrap();
        for (n, venv) in observed.iter_mut().zip([&a, &b]) {
            // One observation per step, plus the first of the next episode at a boundary.
            *n += 4.0
                + venv
                    .terminated()
                    .iter()
                    .zip(venv.truncated())
                    .filter(|(x, y)| **x || **y)
                    .count() as f64;
        }
    }
    let stats = a.normalizer_stats();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[0].count, observed[0]);
    assert_eq!(stats[1].dim(), 1);
    // Two ranks exchange their deltas and end up equal.
    let deltas_a = a.normalizer_deltas();
    let deltas_b = b.normalizer_deltas();
    let merged: Vec<_> = deltas_a
        .iter()
        .zip(&deltas_b)
        .map(|(x, y)| {
            let mut m = x.clone();
            m.merge(y);
            m
        })
        .collect();
    a.apply_normalizer_sync(&merged).unwrap();
    b.apply_normalizer_sync(&merged).unwrap();
    assert_eq!(a.normalizer_stats(), b.normalizer_stats());
    assert_eq!(a.normalizer_stats()[0].count, observed[0] + observed[1]);
    assert!(a.normalizer_deltas()[0].count == 0.0);
    // Observations are normalised with the shared statistics: roughly zero-mean now.
    a.step(&[0, 0, 0, 0]).unwrap();
    assert!(a.obs().iter().all(|v| v.abs() < 10.0));
    // Restore from a checkpoint; wrong shapes are rejected.
    let saved = a.normalizer_stats();
    b.set_normalizer_stats(&saved).unwrap();
    assert_eq!(b.normalizer_stats(), saved);
    assert!(b.set_normalizer_stats(&saved[..1]).is_err());
    let mut bad = saved.clone();
    bad[0].var[0] = -1.0;
    assert!(b.set_normalizer_stats(&bad).is_err());
}

#[test]
fn vec_env_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<VecEnv>();
    assert_send::<Box<dyn Env>>();
}

/// Per-dimension mean and (population) variance of rows of `dim` values.
fn column_stats(values: &[f32], dim: usize) -> Vec<(f64, f64)> {
    let rows = (values.len() / dim) as f64;
    (0..dim)
        .map(|d| {
            let column = values.iter().skip(d).step_by(dim).map(|&v| f64::from(v));
            let mean = column.clone().sum::<f64>() / rows;
            let var = column.map(|v| (v - mean).powi(2)).sum::<f64>() / rows;
            (mean, var)
        })
        .collect()
}

/// After warm-up, normalize-obs standardises each dimension: over the next 400 steps the
/// outputs have mean within 0.2 of 0 and variance within [0.7, 1.3]. The reference is computed
/// here from an unwrapped copy of the same environments stepped alike, whose raw observations
/// are far from standardised (which is what makes the check worth anything).
#[test]
fn normalised_observations_have_zero_mean_and_unit_variance_after_warm_up() {
    let envs = 8;
    let seeds = tandem_env::env_seeds(3, 0, 0, envs);
    let wrapped = EnvSpec::new(Game::Cartpole).with(Wrapper::NormalizeObs { clip: 10.0 });
    let mut normalised = VecEnv::new(&wrapped, &seeds, 1).unwrap();
    let mut raw = VecEnv::new(&EnvSpec::new(Game::Cartpole), &seeds, 1).unwrap();
    normalised.reset();
    raw.reset();
    let (mut outputs, mut inputs) = (Vec::new(), Vec::new());
    let mut lcg = 12345u64;
    for t in 0..600 {
        let actions: Vec<i64> = (0..envs)
            .map(|_| {
                lcg = lcg
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (lcg >> 63) as i64
            })
            .collect();
        normalised.step(&actions).unwrap();
        raw.step(&actions).unwrap();
        // A rank alone syncs its own deltas, as the trainer does after each rollout.
        if t % 16 == 15 {
            let deltas = normalised.normalizer_deltas();
            normalised.apply_normalizer_sync(&deltas).unwrap();
        }
        if t >= 200 {
            outputs.extend_from_slice(normalised.obs());
            inputs.extend_from_slice(raw.obs());
        }
    }
    let reference = column_stats(&inputs, 4);
    assert!(
        reference
            .iter()
            .any(|&(m, v)| m.abs() > 0.2 || !(0.7..=1.3).contains(&v)),
        "the raw observations are already standardised ({reference:?}): the check below would \
         not show a normaliser that does nothing"
    );
    for (d, ((mean, var), (raw_mean, raw_var))) in column_stats(&outputs, 4)
        .into_iter()
        .zip(reference)
        .enumerate()
    {
        assert!(
            mean.abs() < 0.2 && (0.7..=1.3).contains(&var),
            "dimension {d}: normalised mean {mean:.3}, variance {var:.3} (raw: mean \
             {raw_mean:.3}, variance {raw_var:.4}); want mean near 0, variance near 1"
        );
    }
}

/// keep-obs passes on the chosen entries of the wrapped observation, in ascending order, and
/// refuses entries outside it, an empty choice and image observations.
#[test]
fn keep_obs_passes_on_the_chosen_entries_and_refuses_what_it_cannot_keep() {
    let spec = |mask| EnvSpec::new(Game::Cartpole).with(Wrapper::KeepObs { mask });
    let full = VecEnv::new(&EnvSpec::new(Game::Cartpole), &[3], 1).unwrap();
    let mut kept = VecEnv::new(&spec(0b1010), &[3], 1).unwrap();
    let mut whole = full;
    whole.reset();
    kept.reset();
    assert_eq!(kept.obs_len(), 2);
    for _ in 0..20 {
        let all = whole.obs().to_vec();
        assert_eq!(kept.obs(), &[all[1], all[3]]);
        whole.step(&[1]).unwrap();
        kept.step(&[1]).unwrap();
    }
    assert!(kept.obs().iter().any(|&v| v != 0.0));
    let err = observation_space(&spec(1 << 4)).unwrap_err().to_string();
    assert!(
        err.contains("keep-obs") && err.contains("entry 4 is outside the observation"),
        "{err}"
    );
    assert!(matches!(
        observation_space(&spec(0)),
        Err(EnvError::InvalidWrapperParameter {
            wrapper: "keep-obs",
            ..
        })
    ));
    let atari =
        EnvSpec::new(Game::from_name("atari-breakout").unwrap()).with(Wrapper::KeepObs { mask: 1 });
    let err = observation_space(&atari).unwrap_err().to_string();
    assert!(err.contains("needs vector observations"), "{err}");
}

//! VecEnv snapshots: a batch restored into freshly built environments (with other
//! seeds, so nothing can be re-derived from them) continues bit-identically to the
//! batch the snapshot was taken of, for every game and wrapper; snapshots of other
//! batches and damaged snapshots are refused with errors that say why.

#[cfg(feature = "atari")]
#[path = "support/deepmind.rs"]
mod deepmind;
use tandem_env::atari::{AtariConfig, AtariGame};
use tandem_env::minatar::Breakout;
use tandem_env::rng::Xoshiro256;
use tandem_env::{
    ActionSpace, Env, EnvError, EnvSpec, EpisodeStats, Game, SNAPSHOT_FORMAT_VERSION, VecEnv,
    Wrapper, env_seeds, wrappers,
};

/// Everything a trainer can observe after one batch step, floats as bit patterns.
#[derive(Debug, PartialEq)]
struct Observed {
    obs: Vec<u32>,
    final_obs: Vec<u32>,
    rewards: Vec<u32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    episodes: Vec<EpisodeStats>,
    lives: Vec<u32>,
    normalizer_stats: Vec<(u64, Vec<u64>, Vec<u64>)>,
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn observe(envs: &mut VecEnv) -> Observed {
    let done: Vec<bool> = envs
        .terminated()
        .iter()
        .zip(envs.truncated())
        .map(|(te, tr)| te | tr)
        .collect();
    // Final observations only mean something in rows whose episode just ended.
    let final_obs = (0..envs.num_envs())
        .filter(|&i| done[i])
        .flat_map(|i| bits(envs.final_obs_row(i)))
        .collect();
    Observed {
        obs: bits(envs.obs()),
        final_obs,
        rewards: bits(envs.rewards()),
        terminated: envs.terminated().to_vec(),
        truncated: envs.truncated().to_vec(),
        episodes: envs.drain_episodes(),
        lives: envs.lives(),
        normalizer_stats: envs
            .normalizer_stats()
            .into_iter()
            .map(|s| {
                let f = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
                (s.count.to_bits(), f(&s.mean), f(&s.var))
            })
            .collect(),
    }
}

/// One batch of actions, of the batch's action space.
#[derive(Debug, Clone)]
enum Actions {
    Discrete(Vec<i64>),
    /// Row-major `num_envs x dim`.
    Box(Vec<f32>),
}

/// Uniform actions; box actions reach half the box's width beyond its bounds, so that
/// clipping is part of what is replayed.
fn random_actions(rng: &mut Xoshiro256, envs: &VecEnv) -> Actions {
    match envs.action_space().clone() {
        ActionSpace::Discrete { n } => Actions::Discrete(
            (0..envs.num_envs())
                .map(|_| rng.below(n as u64) as i64)
                .collect(),
        ),
        ActionSpace::Box { low, high } => Actions::Box(
            (0..envs.num_envs())
                .flat_map(|_| low.iter().zip(high.iter()).collect::<Vec<_>>())
                .map(|(&l, &h)| {
                    let margin = f64::from(h - l) / 4.0;
                    rng.uniform(f64::from(l) - margin, f64::from(h) + margin) as f32
                })
                .collect(),
        ),
        ActionSpace::MultiDiscrete { nvec } => Actions::Discrete(
            (0..envs.num_envs())
                .flat_map(|_| {
                    nvec.iter()
                        .map(|&n| rng.below(n as u64) as i64)
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
    }
}

fn step(envs: &mut VecEnv, actions: &Actions) {
    match actions {
        Actions::Discrete(a) => envs.step(a).unwrap(),
        Actions::Box(a) => envs.step(a).unwrap(),
    }
}

/// What a round trip saw: how many episodes ended in the compared stretch (to show it
/// covered episode boundaries) and the snapshot's size.
struct RoundTrip {
    episodes_after: usize,
    snapshot_len: usize,
}

/// Steps a batch `before` random steps (draining episodes only now and then, so some
/// are pending in the snapshot), snapshots it, records `after` more steps; then builds
/// the same spec with other seeds and thread count, scrambles it, restores and checks
/// that the same actions replay bit-identically.
fn round_trip(spec: &EnvSpec, num_envs: usize, before: usize, after: usize) -> RoundTrip {
    let build = |seeds: &[u64], threads| VecEnv::new(spec, seeds, threads).unwrap();
    round_trip_of(build, num_envs, before, after)
}

/// [`round_trip`] of the batches `build` makes from seeds and a thread count.
fn round_trip_of(
    build: impl Fn(&[u64], usize) -> VecEnv,
    num_envs: usize,
    before: usize,
    after: usize,
) -> RoundTrip {
    let mut original = build(&env_seeds(1, 0, 0, num_envs), 1);
    let mut rng = Xoshiro256::new(42);
    original.reset();
    for t in 0..before {
        let actions = random_actions(&mut rng, &original);
        step(&mut original, &actions);
        if t % 7 == 0 {
            original.drain_episodes();
        }
    }
    let snapshot = original.snapshot().unwrap();
    let mut actions = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..after {
        actions.push(random_actions(&mut rng, &original));
        step(&mut original, actions.last().unwrap());
        expected.push(observe(&mut original));
    }

    let mut restored = build(&env_seeds(999, 3, 0, num_envs), 2);
    restored.set_min_parallel_work(std::time::Duration::ZERO);
    restored.reset();
    let mut scramble = Xoshiro256::new(7);
    for _ in 0..5 {
        let a = random_actions(&mut scramble, &restored);
        step(&mut restored, &a);
    }
    restored.restore(&snapshot).unwrap();
    assert!(
        restored.snapshot().unwrap() == snapshot,
        "a restored batch snapshots to the same bytes"
    );
    for (t, (a, want)) in actions.iter().zip(&expected).enumerate() {
        step(&mut restored, a);
        let got = observe(&mut restored);
        assert!(got == *want, "step {t} after the restore differs");
    }
    RoundTrip {
        episodes_after: expected.iter().map(|o| o.episodes.len()).sum(),
        snapshot_len: snapshot.len(),
    }
}

fn game(name: &str) -> EnvSpec {
    EnvSpec::new(Game::from_name(name).unwrap())
}

/// A batch of games built by `make` from each seed (the options the catalogue's games do
/// not take: other sticky actions, full action sets).
fn batch_of(make: impl Fn(u64) -> Box<dyn Env>, seeds: &[u64], threads: usize) -> VecEnv {
    let envs = seeds.iter().map(|&seed| make(seed)).collect();
    VecEnv::from_envs(envs, seeds.to_vec(), threads).unwrap()
}

fn minatar_breakout(
    sticky_action_prob: f64,
    full_action_set: bool,
) -> impl Fn(u64) -> Box<dyn Env> {
    move |seed| Box::new(Breakout::new(seed, sticky_action_prob, full_action_set))
}

#[test]
fn cartpole_resumes_exactly() {
    let trip = round_trip(&game("cartpole"), 4, 40, 150);
    assert!(
        trip.episodes_after > 0,
        "episodes end in the compared stretch"
    );
    // O(state): a few hundred bytes per environment for a game of 4 numbers.
    assert!(trip.snapshot_len < 4 * 300, "{} bytes", trip.snapshot_len);
}

#[test]
fn every_classic_control_game_resumes_exactly() {
    for name in [
        "acrobot",
        "mountain-car",
        "mountain-car-continuous",
        "pendulum",
    ] {
        // Random play ends these by their time limits (999 steps at most) or sooner.
        let trip = round_trip(&game(name), 3, 150, 1000);
        assert!(trip.episodes_after > 0, "{name}: no episode ended");
        assert!(
            trip.snapshot_len < 3 * 400,
            "{name}: {} bytes",
            trip.snapshot_len
        );
        // Right after a reset, Acrobot's state is float32 and MountainCarContinuous's
        // float64, unlike later: the snapshot must carry which.
        round_trip(&game(name), 2, 0, 30);
    }
}

#[test]
fn every_minatar_game_resumes_exactly() {
    for name in [
        "minatar-breakout",
        "minatar-asterix",
        "minatar-freeway",
        "minatar-space-invaders",
        "minatar-seaquest",
    ] {
        let trip = round_trip(&game(name), 3, 150, 400);
        // Freeway's games last 2500 steps; the others end under random play.
        if name != "minatar-freeway" {
            assert!(trip.episodes_after > 0, "{name}: no episode ended");
        }
    }
}

#[test]
fn minatar_games_with_the_full_action_set_resume_exactly() {
    let build = |seeds: &[u64], threads| batch_of(minatar_breakout(0.3, true), seeds, threads);
    round_trip_of(build, 2, 20, 60);
}

/// Every generic wrapper in one chain on planes and one on vectors, with short time limits
/// so truncations happen. The Atari wrappers (no-op and FIRE resets, episodic life, the image
/// ones) resume in the DeepMind chain below.
#[test]
fn a_chain_with_every_generic_wrapper_resumes_exactly() {
    let spec = game("minatar-breakout")
        .with(Wrapper::StickyActions { probability: 0.3 })
        .with(Wrapper::FrameSkip {
            n: 2,
            max_pool: true,
        })
        .with(Wrapper::TimeLimit { max_steps: 12 })
        .with(Wrapper::ClipReward)
        .with(Wrapper::NormalizeReward {
            gamma: 0.99,
            clip: 10.0,
        })
        .with(Wrapper::FrameStack { n: 3 });
    let trip = round_trip(&spec, 3, 30, 80);
    assert!(trip.episodes_after > 0);
    // Vector observations take the other frame-stack and normaliser paths.
    let spec = game("cartpole")
        .with(Wrapper::FrameStack { n: 2 })
        .with(Wrapper::NormalizeObs { clip: 10.0 })
        .with(Wrapper::NormalizeReward {
            gamma: 0.99,
            clip: 10.0,
        })
        .with(Wrapper::TimeLimit { max_steps: 30 });
    round_trip(&spec, 2, 20, 50);
}

#[cfg(feature = "atari")]
#[test]
fn atari_breakout_resumes_exactly_sticky_actions_included() {
    // One step is one frame. Frequent sticky actions exercise the restored sticky-action
    // RNG on most frames. (That the held action itself is restored is shown by
    // tandem-ale's tests/state.rs and here by the byte-identical re-snapshot.)
    let sticky = |seed| -> Box<dyn Env> {
        let config = AtariConfig {
            repeat_action_probability: 0.75,
            ..AtariConfig::v5("breakout")
        };
        Box::new(AtariGame::new(config, seed).unwrap())
    };
    round_trip_of(
        |seeds, threads| batch_of(sticky, seeds, threads),
        4,
        300,
        300,
    );
}

#[cfg(feature = "atari")]
#[test]
fn the_deepmind_atari_chain_resumes_exactly() {
    let spec = deepmind::deepmind_atari(Game::from_name("atari-breakout").unwrap());
    let trip = round_trip(&spec, 2, 120, 150);
    // Episodic life ends agent episodes at every lost life.
    assert!(
        trip.episodes_after > 0,
        "no lost life in the compared stretch"
    );
    // O(state), per environment: the f32 observation and final-observation rows
    // (2 x 113 KB), frame-skip's two RGB frames (2 x 100 KB), the frame stack and the
    // batch's conversion buffer (2 x 28 KB), the emulator with its screen (~38 KB).
    assert!(
        trip.snapshot_len < 2 * 560_000,
        "snapshot of {} bytes",
        trip.snapshot_len
    );
}

fn stepped(spec: &EnvSpec, num_envs: usize) -> VecEnv {
    let mut envs = VecEnv::new(spec, &env_seeds(5, 0, 0, num_envs), 1).unwrap();
    envs.reset();
    for t in 0..10 {
        envs.step(&vec![(t % 2) as i64; num_envs]).unwrap();
    }
    envs
}

fn snapshot_error(result: Result<(), EnvError>) -> String {
    match result {
        Err(EnvError::Snapshot(message)) => message,
        other => panic!("expected a snapshot error, got {other:?}"),
    }
}

#[test]
fn restoring_into_a_different_batch_names_the_difference() {
    let breakout = game("minatar-breakout").with(Wrapper::TimeLimit { max_steps: 100 });
    let snapshot = stepped(&breakout, 2).snapshot().unwrap();

    let mut cartpole = stepped(&game("cartpole"), 2);
    let message = snapshot_error(cartpole.restore(&snapshot));
    assert!(
        message.contains("`minatar-breakout` with wrappers [time-limit]")
            && message.contains("`cartpole` with wrappers []"),
        "{message}"
    );

    let mut three = stepped(&breakout, 3);
    let message = snapshot_error(three.restore(&snapshot));
    assert!(
        message.contains("2 environment(s)") && message.contains("3 environment(s)"),
        "{message}"
    );

    let mut other_wrappers = stepped(&game("minatar-breakout").with(Wrapper::ClipReward), 2);
    let message = snapshot_error(other_wrappers.restore(&snapshot));
    assert!(
        message.contains("[time-limit]") && message.contains("[clip-reward]"),
        "{message}"
    );

    // Same chain, another parameter: found in the wrapper's own section.
    let mut longer = stepped(
        &game("minatar-breakout").with(Wrapper::TimeLimit { max_steps: 200 }),
        2,
    );
    let message = snapshot_error(longer.restore(&snapshot));
    assert!(
        message.contains("environment 0: time-limit: max_steps is 100 in the snapshot, 200"),
        "{message}"
    );
    let limited = |seed| {
        let game = minatar_breakout(0.5, false)(seed);
        wrappers::wrap(&Wrapper::TimeLimit { max_steps: 100 }, 0, game, seed).unwrap()
    };
    let mut stickier = batch_of(limited, &env_seeds(5, 0, 0, 2), 1);
    stickier.reset();
    let message = snapshot_error(stickier.restore(&snapshot));
    assert!(
        message.contains(
            "time-limit: minatar-breakout: sticky_action_prob is 0.1 in the snapshot, 0.5"
        ),
        "{message}"
    );
}

#[test]
fn damaged_snapshots_are_refused_and_the_batch_still_restores_afterwards() {
    let spec = game("minatar-asterix").with(Wrapper::FrameStack { n: 2 });
    let mut envs = stepped(&spec, 2);
    let snapshot = envs.snapshot().unwrap();

    let message = snapshot_error(envs.restore(&snapshot[..snapshot.len() / 2]));
    assert!(message.contains("checksum"), "{message}");
    let message = snapshot_error(envs.restore(&snapshot[..5]));
    assert!(
        message.contains("not a tandem VecEnv snapshot"),
        "{message}"
    );
    let message = snapshot_error(envs.restore(b"a text file, not a snapshot"));
    assert!(
        message.contains("not a tandem VecEnv snapshot"),
        "{message}"
    );

    let mut flipped = snapshot.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x10;
    let message = snapshot_error(envs.restore(&flipped));
    assert!(message.contains("checksum does not match"), "{message}");

    let mut future = snapshot.clone();
    future[8..12].copy_from_slice(&(SNAPSHOT_FORMAT_VERSION + 1).to_le_bytes());
    let message = snapshot_error(envs.restore(&future));
    assert!(
        message.contains(&format!(
            "format version {}; this build reads version {SNAPSHOT_FORMAT_VERSION}",
            SNAPSHOT_FORMAT_VERSION + 1
        )),
        "{message}"
    );

    // None of the refusals touched the batch: it still restores and matches.
    let before = envs.snapshot().unwrap();
    assert!(before == snapshot);
    envs.restore(&snapshot).unwrap();
}

#[test]
fn environments_without_snapshot_support_say_so() {
    struct Plain;
    impl tandem_env::Env for Plain {
        fn observation_space(&self) -> tandem_env::ObsSpace {
            tandem_env::ObsSpace::vector(1, tandem_env::Dtype::F32)
        }
        fn action_space(&self) -> tandem_env::ActionSpace {
            tandem_env::ActionSpace::discrete(1)
        }
        fn reset(&mut self, _seed: Option<u64>, mut obs: tandem_env::ObsBuf<'_>) {
            obs.write_f32(&[0.0]);
        }
        fn step(
            &mut self,
            _action: tandem_env::Action<'_>,
            mut obs: tandem_env::ObsBuf<'_>,
        ) -> tandem_env::Step {
            obs.write_f32(&[0.0]);
            tandem_env::Step::game(0.0, false, false)
        }
    }
    let envs = VecEnv::from_envs(vec![Box::new(Plain)], vec![0], 1).unwrap();
    let message = match envs.snapshot() {
        Err(EnvError::Snapshot(message)) => message,
        other => panic!("{other:?}"),
    };
    assert!(
        message.contains("environment 0")
            && message.contains("Plain")
            && message.contains("cannot save"),
        "{message}"
    );
}

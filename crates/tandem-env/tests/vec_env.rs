//! VecEnv behaviour: thread-count independence, automatic reset, final observations,
//! episode statistics and action checking.

use tandem_env::{EnvError, EnvSpec, Game, VecEnv, Wrapper, env_seeds};

/// A fixed, state-dependent action sequence so runs differ if observations differ.
fn policy(obs: &[f32], obs_len: usize, t: usize, num_actions: usize) -> Vec<i64> {
    obs.chunks(obs_len)
        .enumerate()
        .map(|(i, row)| {
            let s: f32 = row
                .iter()
                .enumerate()
                .map(|(j, v)| v * (j % 7) as f32)
                .sum();
            ((s.abs() * 13.0) as usize + t + i) as i64 % num_actions as i64
        })
        .collect()
}

/// Runs `steps` batch steps and returns a digest of everything observable.
fn run(
    spec: &EnvSpec,
    envs: usize,
    threads: usize,
    steps: usize,
) -> (Vec<f32>, Vec<f32>, Vec<bool>, Vec<tandem_env::EpisodeStats>) {
    run_in_groups(spec, envs, threads, steps, 1)
}

/// [`run`] with each batch step taken as `groups` group steps, in environment order.
fn run_in_groups(
    spec: &EnvSpec,
    envs: usize,
    threads: usize,
    steps: usize,
    groups: usize,
) -> (Vec<f32>, Vec<f32>, Vec<bool>, Vec<tandem_env::EpisodeStats>) {
    let mut venv = VecEnv::new(spec, &env_seeds(11, 1, 0, envs), threads).unwrap();
    // These batches are too small to be worth a pool by default; force it.
    venv.set_min_parallel_work(std::time::Duration::ZERO);
    let mut obs_trace = Vec::new();
    let mut rewards = Vec::new();
    let mut dones = Vec::new();
    let mut obs = venv.reset().to_vec();
    for t in 0..steps {
        let actions = policy(&obs, venv.obs_len(), t, venv.num_actions());
        if groups == 1 {
            venv.step(&actions).unwrap();
        } else {
            let size = envs / groups;
            for g in 0..groups {
                let range = g * size..(g + 1) * size;
                venv.step_group(range.clone(), &actions[range]).unwrap();
            }
        }
        obs = venv.obs().to_vec();
        // Keep the trace small but sensitive: a checksum per step.
        obs_trace.push(
            obs.iter()
                .enumerate()
                .map(|(i, v)| v * (1 + i % 31) as f32)
                .sum(),
        );
        rewards.extend_from_slice(venv.rewards());
        dones.extend(
            venv.terminated()
                .iter()
                .zip(venv.truncated())
                .map(|(a, b)| *a || *b),
        );
    }
    (obs_trace, rewards, dones, venv.drain_episodes())
}

#[test]
fn same_seed_same_results_with_one_and_two_threads() {
    let specs = [
        EnvSpec::new(Game::Cartpole),
        EnvSpec::new(Game::from_name("minatar-breakout").unwrap()),
        EnvSpec::new(Game::from_name("minatar-asterix").unwrap()),
        EnvSpec::new(Game::from_name("minatar-space-invaders").unwrap()),
        EnvSpec::new(Game::from_name("minatar-seaquest").unwrap()),
        // Freeway games last 2501 steps; cut them short to see episode ends.
        EnvSpec::new(Game::from_name("minatar-freeway").unwrap())
            .with(Wrapper::TimeLimit { max_steps: 120 }),
        EnvSpec::new(Game::Cartpole)
            .with(Wrapper::StickyActions { probability: 0.3 })
            .with(Wrapper::NormalizeObs { clip: 5.0 })
            .with(Wrapper::NormalizeReward {
                gamma: 0.99,
                clip: 10.0,
            }),
    ];
    for spec in &specs {
        let one = run(spec, 9, 1, 300);
        let two = run(spec, 9, 2, 300);
        assert!(
            !one.3.is_empty(),
            "some episodes should finish for {spec:?}"
        );
        assert_eq!(one, two, "1 and 2 threads differ for {spec:?}");
    }
}

#[test]
fn stepping_in_groups_equals_stepping_the_whole_batch() {
    // Without shared normalisers (whose statistics are merged after every group step), the
    // environments are independent, so stepping the batch group by group changes nothing.
    let specs = [
        EnvSpec::new(Game::Cartpole).with(Wrapper::StickyActions { probability: 0.3 }),
        EnvSpec::new(Game::from_name("minatar-breakout").unwrap()),
    ];
    for spec in &specs {
        let whole = run(spec, 9, 1, 300);
        assert!(!whole.3.is_empty(), "some episodes should finish");
        for (threads, groups) in [(1, 3), (2, 3), (1, 9)] {
            let grouped = run_in_groups(spec, 9, threads, 300, groups);
            assert_eq!(
                whole, grouped,
                "{groups} groups on {threads} thread(s) differ for {spec:?}"
            );
        }
    }
}

#[test]
fn a_group_step_checks_its_range_and_actions_and_leaves_other_rows_alone() {
    let spec = EnvSpec::new(Game::Cartpole);
    let mut venv = VecEnv::new(&spec, &env_seeds(3, 0, 0, 4), 1).unwrap();
    let obs = venv.reset().to_vec();
    assert!(matches!(
        venv.step_group(2..5, &[0, 0, 0]),
        Err(EnvError::InvalidArgument(_))
    ));
    assert_eq!(
        venv.step_group(2..4, &[0]),
        Err(EnvError::ActionCount {
            expected: 2,
            got: 1
        })
    );
    // The error names the environment's index in the batch.
    assert_eq!(
        venv.step_group(2..4, &[0, 5]),
        Err(EnvError::InvalidAction {
            env: 3,
            action: 5,
            num_actions: 2
        })
    );
    assert_eq!(venv.obs(), &obs[..], "a rejected step changes nothing");
    venv.step_group(2..4, &[1, 1]).unwrap();
    assert_eq!(
        &venv.obs()[..8],
        &obs[..8],
        "environments 0 and 1 did not move"
    );
    assert_ne!(&venv.obs()[8..], &obs[8..]);
}

#[test]
fn different_seeds_give_different_streams() {
    let spec = EnvSpec::new(Game::Cartpole);
    let mut a = VecEnv::new(&spec, &env_seeds(1, 0, 0, 4), 1).unwrap();
    let mut b = VecEnv::new(&spec, &env_seeds(1, 1, 0, 4), 1).unwrap();
    assert_ne!(a.reset(), b.reset());
    let first = a.obs()[..4].to_vec();
    assert_ne!(
        first,
        a.obs()[4..8].to_vec(),
        "environments of one rank must differ"
    );
}

#[test]
fn episode_end_resets_and_keeps_the_final_observation() {
    let spec = EnvSpec::new(Game::Cartpole);
    let mut venv = VecEnv::new(&spec, &env_seeds(3, 0, 0, 2), 1).unwrap();
    venv.reset();
    // Always pushing right topples the pole within a few dozen steps.
    let mut steps = 0;
    loop {
        let before = venv.obs().to_vec();
        venv.step(&[1, 1]).unwrap();
        steps += 1;
        if venv.terminated()[0] {
            let last = venv.final_obs_row(0);
            // The final observation is past a threshold; the new first one is near zero.
            assert!(last[0].abs() > 2.4 || last[2].abs() > 0.2094, "{last:?}");
            assert!(venv.obs()[..4].iter().all(|v| v.abs() <= 0.05));
            assert_ne!(&before[..4], last);
            break;
        }
        assert!(steps < 200, "pole never fell");
    }
    let episodes = venv.drain_episodes();
    let first = episodes.iter().find(|e| e.env_index == 0).unwrap();
    assert_eq!(first.length, steps);
    assert_eq!(first.episode_return, steps as f64);
    assert_eq!(first.raw_score, steps as f64);
    assert!(
        venv.drain_episodes().is_empty(),
        "drained statistics are gone"
    );
}

#[test]
fn bad_actions_are_rejected_before_stepping() {
    let spec = EnvSpec::new(Game::Cartpole);
    let mut venv = VecEnv::new(&spec, &env_seeds(3, 0, 0, 2), 2).unwrap();
    let obs = venv.reset().to_vec();
    assert_eq!(
        venv.step(&[0]),
        Err(EnvError::ActionCount {
            expected: 2,
            got: 1
        })
    );
    assert_eq!(
        venv.step(&[0, 2]),
        Err(EnvError::InvalidAction {
            env: 1,
            action: 2,
            num_actions: 2
        })
    );
    assert_eq!(
        venv.step(&[-1, 0]),
        Err(EnvError::InvalidAction {
            env: 0,
            action: -1,
            num_actions: 2
        })
    );
    assert_eq!(venv.obs(), &obs[..], "a rejected step changes nothing");
    assert!(VecEnv::new(&spec, &[], 1).is_err());
    assert!(VecEnv::new(&spec, &[1], 0).is_err());
}

#[test]
fn normalised_rewards_keep_the_raw_score_and_time_limits_truncate() {
    let spec = EnvSpec::new(Game::Cartpole)
        .with(Wrapper::NormalizeReward {
            gamma: 0.9,
            clip: 10.0,
        })
        .with(Wrapper::TimeLimit { max_steps: 5 });
    let mut venv = VecEnv::new(&spec, &env_seeds(3, 0, 0, 3), 2).unwrap();
    venv.reset();
    for _ in 0..5 {
        venv.step(&[0, 1, 0]).unwrap();
    }
    assert_eq!(venv.truncated(), &[true, true, true]);
    let episodes = venv.drain_episodes();
    assert_eq!(episodes.len(), 3);
    for e in &episodes {
        assert_eq!((e.length, e.raw_score), (5, 5.0));
        assert!(e.truncated);
        assert!(
            (e.episode_return - 5.0).abs() > 1e-3,
            "normalised rewards differ from the raw ones"
        );
    }
}

/// scale-reward on a native game: the learner's return is scaled, the game's score is not.
/// (A gymnasium environment's proxy is the bottom of the same chain, so it scales alike.)
#[test]
fn scaled_rewards_scale_the_return_but_not_the_score() {
    let spec = EnvSpec::new(Game::Cartpole)
        .with(Wrapper::ScaleReward { factor: 0.01 })
        .with(Wrapper::TimeLimit { max_steps: 5 });
    let mut venv = VecEnv::new(&spec, &env_seeds(3, 0, 0, 2), 1).unwrap();
    venv.reset();
    for _ in 0..5 {
        venv.step(&[0, 1]).unwrap();
        assert_eq!(venv.rewards(), &[0.01, 0.01]);
    }
    for e in venv.drain_episodes() {
        assert_eq!((e.length, e.raw_score), (5, 5.0));
        assert!(
            (e.episode_return - 0.05).abs() < 1e-6,
            "{}",
            e.episode_return
        );
    }
}

/// VecEnv lets environments update their rows in place; the rows must always equal
/// the observations a fully written buffer gets, across episode ends and through
/// wrappers that pass observations on.
#[test]
fn in_place_rows_equal_fully_written_observations() {
    use tandem_env::space::ObsBuf;
    use tandem_env::{Env, make_env};
    let spec = EnvSpec::new(Game::from_name("minatar-breakout").unwrap())
        .with(Wrapper::StickyActions { probability: 0.2 })
        .with(Wrapper::ClipReward)
        .with(Wrapper::TimeLimit { max_steps: 150 });
    let seeds = env_seeds(5, 0, 0, 3);
    let mut venv = VecEnv::new(&spec, &seeds, 1).unwrap();
    let mut reference: Vec<Box<dyn Env>> =
        seeds.iter().map(|&s| make_env(&spec, s).unwrap()).collect();
    let mut obs = vec![vec![0f32; 400]; 3];
    venv.reset();
    for ((env, o), &seed) in reference.iter_mut().zip(&mut obs).zip(&seeds) {
        env.reset(Some(seed), ObsBuf::F32(o));
    }
    let mut ends = 0;
    for t in 0..3000usize {
        let actions: Vec<i64> = (0..3).map(|i| ((t * 7 + i * 3) / 5 % 3) as i64).collect();
        venv.step(&actions).unwrap();
        for (i, (env, o)) in reference.iter_mut().zip(&mut obs).enumerate() {
            // Poison the reference buffer so a partial write would show.
            o.fill(0.5);
            let step = env.step(
                tandem_env::Action::Discrete(actions[i] as usize),
                ObsBuf::F32(o),
            );
            assert_eq!(step.reward, venv.rewards()[i]);
            if step.done() {
                assert_eq!(
                    venv.final_obs_row(i),
                    &o[..],
                    "final observation, step {t} env {i}"
                );
                o.fill(0.5);
                env.reset(None, ObsBuf::F32(o));
                ends += 1;
            }
            assert_eq!(
                &venv.obs()[i * 400..(i + 1) * 400],
                &o[..],
                "step {t} env {i}"
            );
        }
    }
    assert!(ends > 20, "{ends}");
}

/// A box-action environment whose observation is the action it was given, clipped to its
/// bounds, and whose episode ends after three steps.
struct EchoBox {
    steps: u32,
}

impl tandem_env::Env for EchoBox {
    fn observation_space(&self) -> tandem_env::ObsSpace {
        tandem_env::ObsSpace::vector(2, tandem_env::Dtype::F32)
    }
    fn action_space(&self) -> tandem_env::ActionSpace {
        tandem_env::ActionSpace::Box {
            low: vec![-1.0, 0.0].into(),
            high: vec![1.0, 5.0].into(),
        }
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: tandem_env::ObsBuf<'_>) {
        self.steps = 0;
        obs.write_f32(&[9.0, 9.0]);
    }
    fn step(
        &mut self,
        action: tandem_env::Action<'_>,
        mut obs: tandem_env::ObsBuf<'_>,
    ) -> tandem_env::Step {
        let a = action.values();
        obs.write_f32(&[a[0].clamp(-1.0, 1.0), a[1].clamp(0.0, 5.0)]);
        self.steps += 1;
        tandem_env::Step::game(a[0] + a[1], self.steps == 3, false)
    }
}

fn echo_boxes(n: usize) -> VecEnv {
    let envs = (0..n)
        .map(|_| Box::new(EchoBox { steps: 0 }) as Box<dyn tandem_env::Env>)
        .collect();
    let mut venv = VecEnv::from_envs(envs, vec![1; n], 1).unwrap();
    venv.reset();
    venv
}

#[test]
fn box_actions_reach_each_environment_as_its_row() {
    let mut venv = echo_boxes(3);
    assert_eq!(venv.action_space().dim(), 2);
    assert_eq!(venv.num_actions(), 0);
    assert_eq!(
        venv.action_space().to_string(),
        "a box of 2 numbers in [-1, 0] .. [1, 5]"
    );
    venv.step(&[0.5, 1.0, -3.0, 2.0, 0.25, 7.0]).unwrap();
    assert_eq!(venv.obs(), &[0.5, 1.0, -1.0, 2.0, 0.25, 5.0]);
    assert_eq!(venv.rewards(), &[1.5, -1.0, 7.25]);
    venv.step_group(1..2, &[0.0, 4.0]).unwrap();
    assert_eq!(venv.obs(), &[0.5, 1.0, 0.0, 4.0, 0.25, 5.0]);
    // The third step ends environment 1's episode: its row restarts, the final row keeps it.
    venv.step_group(1..2, &[0.75, 0.5]).unwrap();
    assert!(venv.terminated()[1]);
    assert_eq!(&venv.obs()[2..4], &[9.0, 9.0]);
    assert_eq!(venv.final_obs_row(1), &[0.75, 0.5]);
}

#[test]
fn box_actions_of_the_wrong_kind_count_or_value_are_refused_before_stepping() {
    let mut venv = echo_boxes(2);
    let before = venv.obs().to_vec();
    let err = venv.step(&[0, 1]).unwrap_err().to_string();
    assert!(
        err.contains("discrete actions given") && err.contains("box of 2"),
        "{err}"
    );
    assert!(matches!(
        venv.step(&[0.0; 3]),
        Err(EnvError::ActionCount {
            expected: 4,
            got: 3
        })
    ));
    let err = venv
        .step(&[0.0, 0.0, f32::NAN, 1.0])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("environment 1") && err.contains("NaN"),
        "{err}"
    );
    assert_eq!(venv.obs(), before.as_slice());
    let mut discrete =
        VecEnv::new(&EnvSpec::new(Game::Cartpole), &env_seeds(1, 0, 0, 2), 1).unwrap();
    let err = discrete.step(&[0.0, 0.0]).unwrap_err().to_string();
    assert!(
        err.contains("box actions given") && err.contains("2 discrete actions"),
        "{err}"
    );
}

#[test]
fn wrappers_that_pick_discrete_actions_refuse_a_box_game() {
    for wrapper in [
        Wrapper::NoopReset { max: 30 },
        Wrapper::FireReset,
        Wrapper::StickyActions { probability: 0.25 },
    ] {
        let name = wrapper.name();
        let env = Box::new(EchoBox { steps: 0 }) as Box<dyn tandem_env::Env>;
        let err = match tandem_env::wrappers::wrap(&wrapper, 0, env, 1) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{name} took a box game"),
        };
        assert!(err.contains(name) && err.contains("box of 2"), "{err}");
    }
    for wrapper in [
        Wrapper::TimeLimit { max_steps: 27_000 },
        Wrapper::FrameStack { n: 4 },
        Wrapper::NormalizeObs { clip: 10.0 },
        Wrapper::ClipReward,
    ] {
        let name = wrapper.name();
        let env = Box::new(EchoBox { steps: 0 }) as Box<dyn tandem_env::Env>;
        assert!(
            tandem_env::wrappers::wrap(&wrapper, 0, env, 1).is_ok(),
            "{name}"
        );
    }
}

/// A step begun and finished in two calls is the step: the same observations, rewards, flags
/// and episodes. Until the finish the batch shows the observations before the step, and a
/// second step, a snapshot or a frame (or a finish without a begin) is refused.
#[test]
fn a_begun_and_finished_step_is_a_step_and_shows_the_old_rows_until_finished() {
    let spec = EnvSpec {
        game: Game::Cartpole,
        wrappers: vec![Wrapper::TimeLimit { max_steps: 20 }],
    };
    let seeds = env_seeds(4, 0, 0, 3);
    let (mut stepped, mut begun) = (
        VecEnv::new(&spec, &seeds, 1).unwrap(),
        VecEnv::new(&spec, &seeds, 1).unwrap(),
    );
    stepped.reset();
    begun.reset();
    for t in 0..60 {
        let actions = policy(stepped.obs(), stepped.obs_len(), t, 2);
        stepped.step(&actions).unwrap();
        let before = begun.obs().to_vec();
        begun.begin_step(&actions).unwrap();
        assert_eq!(
            begun.obs(),
            before.as_slice(),
            "step {t}: rows changed before the finish"
        );
        for refused in [
            begun.step(&actions).unwrap_err(),
            begun.snapshot().unwrap_err(),
            begun.render_rgb(0).unwrap_err(),
        ] {
            let refused = refused.to_string();
            assert!(refused.contains("begun and not finished"), "{refused}");
        }
        begun.finish_step().unwrap();
        assert_eq!(begun.obs(), stepped.obs(), "observations at step {t}");
        assert_eq!(begun.rewards(), stepped.rewards(), "rewards at step {t}");
        assert_eq!(begun.terminated(), stepped.terminated(), "step {t}");
        assert_eq!(begun.truncated(), stepped.truncated(), "step {t}");
        assert_eq!(begun.final_obs(), stepped.final_obs(), "step {t}");
    }
    assert_eq!(begun.drain_episodes(), stepped.drain_episodes());
    let err = begun.finish_step().unwrap_err().to_string();
    assert!(err.contains("without a begun step"), "{err}");
}

/// Normaliser statistics do not change under a begun step: its outcome is normalised at the
/// finish, so a sync or a restore in between would normalise it with statistics an unsplit
/// step never saw.
#[test]
fn normaliser_statistics_are_not_changed_under_a_begun_step() {
    let spec = EnvSpec::new(Game::Cartpole).with(Wrapper::NormalizeObs { clip: 5.0 });
    let mut envs = VecEnv::new(&spec, &env_seeds(5, 0, 0, 2), 1).unwrap();
    envs.reset();
    envs.step(&[0, 1]).unwrap();
    let stats = envs.normalizer_stats();
    let deltas = envs.normalizer_deltas();
    envs.begin_step(&[1, 0]).unwrap();
    for refused in [
        envs.apply_normalizer_sync(&deltas).unwrap_err(),
        envs.set_normalizer_stats(&stats).unwrap_err(),
    ] {
        let refused = refused.to_string();
        assert!(refused.contains("begun and not finished"), "{refused}");
    }
    envs.finish_step().unwrap();
    envs.apply_normalizer_sync(&envs.normalizer_deltas())
        .unwrap();
    envs.set_normalizer_stats(&stats).unwrap();
}

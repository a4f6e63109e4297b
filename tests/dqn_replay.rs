//! The replay memory against references: the sum-tree against a brute-force prefix search and
//! sampling frequencies, prioritized sampling and its importance weights, and frame storage
//! against the stacked observations a real VecEnv produced, across episode boundaries
//! (terminations and time-limit truncations) and ring wrap-around.

use std::collections::HashMap;

use tandem::algo::actions::{ActionBatch, ActionKind};
use tandem::algo::storage::replay::{ReplayBuffer, ReplaySpec, SumTree, VectorStep};
use tandem_env::rng::Xoshiro256;
use tandem_env::{EnvSpec, Game, VecEnv, Wrapper};

/// The leaf a prefix mass falls into, by a linear scan.
fn brute_force_find(priorities: &[f64], mass: f64) -> usize {
    let mut acc = 0.0;
    for (i, &p) in priorities.iter().enumerate() {
        acc += p;
        if mass < acc {
            return i;
        }
    }
    priorities.iter().rposition(|&p| p > 0.0).unwrap()
}

#[test]
fn sum_tree_matches_a_brute_force_prefix_search_through_updates() {
    let mut rng = Xoshiro256::new(7);
    let n = 37; // not a power of two: the padding leaves must never be chosen
    let mut tree = SumTree::new(n);
    let mut reference = vec![0.0f64; n];
    for round in 0..5 {
        // Update a random subset, some to zero.
        for _ in 0..20 {
            let i = rng.below(n as u64) as usize;
            let p = if rng.next_f64() < 0.2 {
                0.0
            } else {
                rng.uniform(0.01, 5.0)
            };
            tree.set(i, p);
            reference[i] = p;
        }
        let total: f64 = reference.iter().sum();
        assert!(
            (tree.total() - total).abs() < 1e-9,
            "round {round}: total {} vs {total}",
            tree.total()
        );
        for (i, &p) in reference.iter().enumerate() {
            assert_eq!(tree.get(i), p);
        }
        for _ in 0..2000 {
            let mass = rng.next_f64() * total;
            let found = tree.find(mass);
            let expected = brute_force_find(&reference, mass);
            // Rounding may move a mass sitting on a boundary to the neighbour; it must still
            // be a leaf whose interval (within rounding) holds the mass, and never a zero leaf.
            assert!(reference[found] > 0.0, "round {round}: zero leaf {found}");
            if found != expected {
                let before: f64 = reference[..found].iter().sum();
                assert!(
                    (mass - before).abs() < 1e-9 || (mass - before - reference[found]).abs() < 1e-9,
                    "round {round}: mass {mass} found {found}, brute force {expected}"
                );
            }
        }
        // The edges: the total itself and zero pick the last and first positive leaves.
        assert_eq!(
            tree.find(total),
            reference.iter().rposition(|&p| p > 0.0).unwrap()
        );
        assert_eq!(
            tree.find(0.0),
            reference.iter().position(|&p| p > 0.0).unwrap()
        );
    }
}

#[test]
fn sum_tree_sampling_frequencies_follow_the_priorities() {
    let priorities = [1.0, 0.0, 3.0, 0.5, 6.0, 0.0, 2.5, 7.0];
    let mut tree = SumTree::new(priorities.len());
    for (i, &p) in priorities.iter().enumerate() {
        tree.set(i, p);
    }
    // A priority update must show up in the frequencies too.
    tree.set(0, 4.0);
    let mut expected = priorities;
    expected[0] = 4.0;
    let total: f64 = expected.iter().sum();
    let mut rng = Xoshiro256::new(11);
    let draws = 200_000;
    let mut counts = [0usize; 8];
    for _ in 0..draws {
        counts[tree.find(rng.next_f64() * tree.total())] += 1;
    }
    for i in 0..8 {
        let p = expected[i] / total;
        let freq = counts[i] as f64 / draws as f64;
        // Five standard errors of a binomial proportion.
        let tolerance = 5.0 * (p * (1.0 - p) / draws as f64).sqrt() + 1e-12;
        assert!(
            (freq - p).abs() <= tolerance,
            "leaf {i}: frequency {freq} vs probability {p} (tolerance {tolerance})"
        );
    }
}

fn vector_spec(capacity: usize, num_envs: usize, n_step: usize, alpha: Option<f64>) -> ReplaySpec {
    ReplaySpec {
        capacity,
        num_envs,
        obs_len: 1,
        stack: 1,
        pixels: false,
        n_step,
        gamma: 0.5,
        priority_alpha: alpha,
        actions: ActionKind::Discrete,
    }
}

/// Pushes `steps` vector steps of a synthetic single-value environment whose observation is the
/// step number and whose reward is 1; `done_every` ends an episode (terminated). Actions: step
/// t % 3 in every environment.
fn push_counting(buffer: &mut ReplayBuffer, num_envs: usize, steps: usize, done_every: usize) {
    push_counting_with(buffer, num_envs, steps, done_every, |t| {
        ActionBatch::Discrete(vec![(t % 3) as i64; num_envs])
    });
}

/// [`push_counting`] with the actions `actions(t)` at step t.
fn push_counting_with(
    buffer: &mut ReplayBuffer,
    num_envs: usize,
    steps: usize,
    done_every: usize,
    actions: impl Fn(usize) -> ActionBatch,
) {
    for t in 0..steps {
        let obs: Vec<f32> = (0..num_envs).map(|_| t as f32).collect();
        let done = (t + 1) % done_every == 0;
        let finals: Vec<f32> = (0..num_envs).map(|_| 1000.0 + t as f32).collect();
        buffer
            .push(&VectorStep {
                obs: &obs,
                actions: &actions(t),
                rewards: &vec![1.0; num_envs],
                terminated: &vec![done; num_envs],
                truncated: &vec![false; num_envs],
                final_obs: &finals,
            })
            .unwrap();
    }
}

#[test]
fn n_step_returns_stop_at_episode_ends_and_bootstrap_from_n_steps_later() {
    let mut buffer = ReplayBuffer::new(vector_spec(64, 1, 3, None)).unwrap();
    push_counting(&mut buffer, 1, 20, 5);
    let mut rng = Xoshiro256::new(3);
    let s = buffer.sample(16, 0.4, &mut rng).unwrap();
    for i in 0..16 {
        let t = s.obs[i] as usize;
        let steps_left = 4 - t % 5; // steps after t in its episode
        if steps_left >= 3 {
            assert_eq!(s.returns[i], 1.0 + 0.5 + 0.25, "t={t}");
            assert_eq!(s.discounts[i], 0.125, "t={t}");
            assert_eq!(s.next_obs[i], (t + 3) as f32, "t={t}");
        } else {
            let m = steps_left + 1;
            let ret: f32 = (0..m).map(|j| 0.5f32.powi(j as i32)).sum();
            assert_eq!(s.returns[i], ret, "t={t}");
            assert_eq!(s.discounts[i], 0.0, "terminal within n steps, t={t}");
            assert_eq!(s.next_obs[i], 1000.0 + (t + steps_left) as f32, "t={t}");
        }
        assert_eq!(s.actions.discrete("test").unwrap()[i], (t % 3) as i64);
        assert_eq!(s.weights[i], 1.0);
    }
    // The newest n rows are not ready: step 19 - 2 = 17 is the last one that can be drawn.
    let all = buffer.sample(buffer.sampleable(), 0.4, &mut rng).unwrap();
    assert!(all.obs.iter().all(|&t| t <= 16.0), "{:?}", all.obs);
    assert_eq!(buffer.sampleable(), 17);
}

#[test]
fn prioritized_sampling_follows_updated_priorities_with_normalised_weights() {
    let mut buffer = ReplayBuffer::new(vector_spec(16, 1, 1, Some(1.0))).unwrap();
    push_counting(&mut buffer, 1, 9, 1000);
    assert_eq!(buffer.sampleable(), 8);
    let mut rng = Xoshiro256::new(5);
    let s = buffer.sample(8, 1.0, &mut rng).unwrap();
    // Give observation 2 nine times the priority of every other transition.
    let errors: Vec<f32> = s
        .obs
        .iter()
        .map(|&t| if t == 2.0 { 9.0 } else { 1.0 })
        .collect();
    buffer.update_priorities(&s.slots, &errors).unwrap();
    let mut hits = 0;
    let draws = 4000;
    for _ in 0..draws / 8 {
        let s = buffer.sample(8, 1.0, &mut rng).unwrap();
        for (i, &t) in s.obs.iter().enumerate() {
            if t == 2.0 {
                hits += 1;
                // The most likely transition has the smallest weight: (N P)^-1 normalised by the
                // batch maximum, which belongs to a priority-1 transition: 1/9.
                assert!((s.weights[i] - 1.0 / 9.0).abs() < 1e-3, "{}", s.weights[i]);
            } else {
                assert!((s.weights[i] - 1.0).abs() < 1e-6);
            }
        }
    }
    // P(2) = 9 / 16; stratified sampling keeps the count close.
    let freq = hits as f64 / draws as f64;
    assert!((freq - 9.0 / 16.0).abs() < 0.03, "frequency {freq}");
    // New transitions enter at the largest priority seen (9).
    push_counting(&mut buffer, 1, 1, 1000);
    assert_eq!(buffer.sampleable(), 9);
}

/// One environment's step from observation `obs` (a single value) with `actions`, reward 0,
/// the episode running on.
fn single_step<'a>(obs: &'a [f32], actions: &'a ActionBatch) -> VectorStep<'a> {
    VectorStep {
        obs,
        actions,
        rewards: &[0.0],
        terminated: &[false],
        truncated: &[false],
        final_obs: obs,
    }
}

#[test]
fn bad_inputs_are_errors() {
    let err = ReplayBuffer::new(vector_spec(4, 1, 5, None)).unwrap_err();
    assert!(err.to_string().contains("n-step 5"), "{err}");
    let mut buffer = ReplayBuffer::new(vector_spec(16, 2, 1, None)).unwrap();
    let err = buffer
        .push(&single_step(&[0.0], &ActionBatch::Discrete(vec![0])))
        .unwrap_err();
    assert!(err.to_string().contains("2 environments"), "{err}");
    let mut rng = Xoshiro256::new(1);
    let err = buffer.sample(4, 0.4, &mut rng).unwrap_err();
    assert!(err.to_string().contains("0 are ready"), "{err}");
    let mut pixels = ReplayBuffer::new(ReplaySpec {
        pixels: true,
        ..vector_spec(16, 1, 1, None)
    })
    .unwrap();
    let err = pixels
        .push(&single_step(&[0.5], &ActionBatch::Discrete(vec![0])))
        .unwrap_err();
    assert!(err.to_string().contains("0.5"), "{err}");
}

/// What a transition looked like when the env produced it.
struct Recorded {
    obs: Vec<f32>,
    next: Vec<f32>,
}

/// Steps a real VecEnv with random actions into a buffer and checks every stored transition's
/// rebuilt observation and next observation against what the env returned.
fn check_frame_storage(spec: EnvSpec, stack: usize, pixels: bool, capacity_rows: usize) {
    let num_envs = 3;
    let mut envs = VecEnv::new(&spec, &[10, 11, 12], 1).unwrap();
    let obs_len = envs.obs_len();
    let mut buffer = ReplayBuffer::new(ReplaySpec {
        capacity: capacity_rows * num_envs,
        num_envs,
        obs_len,
        stack,
        pixels,
        n_step: 1,
        gamma: 0.99,
        priority_alpha: None,
        actions: ActionKind::Discrete,
    })
    .unwrap();
    let mut rng = Xoshiro256::new(99);
    envs.reset();
    let mut recorded: HashMap<(u64, usize), Recorded> = HashMap::new();
    let (mut terminations, mut truncations) = (0, 0);
    let steps = capacity_rows as u64 * 3 + 5;
    for t in 0..steps {
        let obs = envs.obs().to_vec();
        let actions: Vec<i64> = (0..num_envs)
            .map(|_| rng.below(envs.num_actions() as u64) as i64)
            .collect();
        envs.step(&actions).unwrap();
        buffer
            .push(&VectorStep {
                obs: &obs,
                actions: &ActionBatch::Discrete(actions.clone()),
                rewards: envs.rewards(),
                terminated: envs.terminated(),
                truncated: envs.truncated(),
                final_obs: envs.final_obs(),
            })
            .unwrap();
        for e in 0..num_envs {
            let done = envs.terminated()[e] || envs.truncated()[e];
            terminations += envs.terminated()[e] as usize;
            truncations += (envs.truncated()[e] && !envs.terminated()[e]) as usize;
            let next = if done {
                envs.final_obs_row(e).to_vec()
            } else {
                envs.obs()[e * obs_len..(e + 1) * obs_len].to_vec()
            };
            recorded.insert(
                (t, e),
                Recorded {
                    obs: obs[e * obs_len..(e + 1) * obs_len].to_vec(),
                    next,
                },
            );
        }
        let _ = envs.drain_episodes();
    }
    assert!(
        terminations > 3 && truncations > 3,
        "{terminations} terminations, {truncations} truncations"
    );
    // Rows still in the ring with their whole stack: the newest `capacity_rows - stack + 1`,
    // except the newest one (its next observation is not stored yet).
    let newest = steps - 1;
    let oldest_full = newest + 1 - capacity_rows as u64 + (stack as u64 - 1);
    let mut checked = 0;
    for t in oldest_full..newest {
        for e in 0..num_envs {
            let slot = (t % capacity_rows as u64) as usize * num_envs + e;
            let want = &recorded[&(t, e)];
            assert_eq!(
                buffer.observation(slot),
                want.obs,
                "observation of step {t}, env {e}"
            );
            assert_eq!(
                buffer.next_observation(slot),
                want.next,
                "next observation of step {t}, env {e}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3 * (capacity_rows - stack - 1));
    // Sampled batches return exactly these too.
    let s = buffer.sample(32, 0.4, &mut rng).unwrap();
    for i in 0..32 {
        let obs = &s.obs[i * obs_len..(i + 1) * obs_len];
        let next = &s.next_obs[i * obs_len..(i + 1) * obs_len];
        assert_eq!(obs, buffer.observation(s.slots[i]).as_slice());
        assert_eq!(next, buffer.next_observation(s.slots[i]).as_slice());
    }
}

#[test]
fn frame_storage_rebuilds_cartpole_stacks_across_terminations_and_truncations() {
    let spec = EnvSpec {
        game: Game::Cartpole,
        wrappers: vec![
            Wrapper::TimeLimit { max_steps: 13 },
            Wrapper::FrameStack { n: 4 },
        ],
    };
    check_frame_storage(spec, 4, false, 60);
}

#[test]
fn frame_storage_rebuilds_minatar_stacks_as_bytes() {
    let spec = EnvSpec {
        game: Game::MinatarBreakout,
        wrappers: vec![
            Wrapper::TimeLimit { max_steps: 7 },
            Wrapper::FrameStack { n: 3 },
        ],
    };
    check_frame_storage(spec, 3, true, 50);
}

#[test]
fn a_buffer_survives_a_round_trip_through_its_file() {
    let mut buffer = ReplayBuffer::new(vector_spec(32, 2, 2, Some(0.6))).unwrap();
    push_counting(&mut buffer, 2, 40, 7);
    let dir = std::env::temp_dir().join(format!("tandem-replay-{}", std::process::id()));
    let path = dir.join("replay-rank0.bin");
    buffer.save(&path).unwrap();
    let loaded = ReplayBuffer::load(vector_spec(32, 2, 2, Some(0.6)), &path).unwrap();
    assert_eq!(loaded.to_bytes(), buffer.to_bytes());
    let (mut a, mut b) = (Xoshiro256::new(4), Xoshiro256::new(4));
    assert_eq!(
        loaded.sample(8, 0.5, &mut a).unwrap(),
        buffer.sample(8, 0.5, &mut b).unwrap()
    );
    let err = ReplayBuffer::load(vector_spec(32, 2, 3, Some(0.6)), &path).unwrap_err();
    assert!(format!("{err:#}").contains("another layout"), "{err:#}");
    std::fs::write(&path, b"garbage").unwrap();
    let err = ReplayBuffer::load(vector_spec(32, 2, 2, Some(0.6)), &path).unwrap_err();
    assert!(
        format!("{err:#}").contains("truncated") || format!("{err:#}").contains("magic"),
        "{err:#}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stack_that_does_not_continue_its_previous_frames_is_an_error() {
    let mut buffer = ReplayBuffer::new(ReplaySpec {
        capacity: 16,
        num_envs: 1,
        obs_len: 2,
        stack: 2,
        pixels: false,
        n_step: 1,
        gamma: 0.9,
        priority_alpha: None,
        actions: ActionKind::Discrete,
    })
    .unwrap();
    let zero = ActionBatch::Discrete(vec![0]);
    let step = |obs: &'static [f32]| VectorStep {
        obs,
        actions: &zero,
        rewards: &[0.0],
        terminated: &[false],
        truncated: &[false],
        final_obs: &[0.0, 0.0],
    };
    buffer.push(&step(&[1.0, 1.0])).unwrap();
    buffer.push(&step(&[1.0, 2.0])).unwrap();
    // The older frame should be 2 (the previous newest frame), as frame-stack would give.
    let err = buffer.push(&step(&[5.0, 3.0])).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not continue its frame stack"),
        "{err}"
    );
}

fn box_spec(num_envs: usize, n_step: usize, alpha: Option<f64>) -> ReplaySpec {
    ReplaySpec {
        actions: ActionKind::Box { dim: 2 },
        ..vector_spec(64, num_envs, n_step, alpha)
    }
}

/// The box action environment `env` took at step `t`: both values distinct per step and env.
fn box_action(t: usize, env: usize) -> [f32; 2] {
    [t as f32 + 0.25, env as f32 - 0.5]
}

/// [`push_counting`] with box actions.
fn push_counting_boxes(
    buffer: &mut ReplayBuffer,
    num_envs: usize,
    steps: usize,
    done_every: usize,
) {
    push_counting_with(buffer, num_envs, steps, done_every, |t| ActionBatch::Box {
        dim: 2,
        values: (0..num_envs).flat_map(|env| box_action(t, env)).collect(),
    });
}

#[test]
fn box_actions_come_back_with_their_transitions_and_n_step_returns() {
    let mut buffer = ReplayBuffer::new(box_spec(2, 2, None)).unwrap();
    push_counting_boxes(&mut buffer, 2, 20, 5);
    let s = buffer.sample(24, 0.4, &mut Xoshiro256::new(5)).unwrap();
    let ActionBatch::Box { dim: 2, values } = &s.actions else {
        panic!("box replay sampled {:?}", s.actions);
    };
    assert_eq!(values.len(), 24 * 2);
    for i in 0..24 {
        let (t, env) = (s.obs[i] as usize, s.slots[i] % 2);
        assert_eq!(&values[2 * i..2 * i + 2], &box_action(t, env), "sample {i}");
        let steps_left = 4 - t % 5; // steps after t in its episode
        let expected = if steps_left >= 1 { 1.5 } else { 1.0 };
        assert_eq!(s.returns[i], expected, "t={t}");
        let discount = if steps_left >= 2 { 0.25 } else { 0.0 };
        assert_eq!(s.discounts[i], discount, "t={t}");
    }
}

#[test]
fn actions_of_the_other_kind_are_refused_by_push() {
    let mut boxes = ReplayBuffer::new(box_spec(1, 1, None)).unwrap();
    let err = boxes
        .push(&single_step(&[0.0], &ActionBatch::Discrete(vec![0])))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("stores box actions of 2 f32, the vector step holds discrete actions"),
        "{err}"
    );
    let err = boxes
        .push(&single_step(
            &[0.0],
            &ActionBatch::Box {
                dim: 2,
                values: vec![0.0; 4],
            },
        ))
        .unwrap_err();
    assert!(err.to_string().contains("1 environments"), "{err}");
}

#[test]
fn replay_files_record_their_action_kind_and_refuse_the_other() {
    let dir = std::env::temp_dir().join(format!("tandem-replay-kinds-{}", std::process::id()));
    let (box_file, discrete_file) = (dir.join("box.bin"), dir.join("discrete.bin"));
    let mut boxes = ReplayBuffer::new(box_spec(2, 2, Some(0.6))).unwrap();
    push_counting_boxes(&mut boxes, 2, 40, 7);
    boxes.save(&box_file).unwrap();
    let loaded = ReplayBuffer::load(box_spec(2, 2, Some(0.6)), &box_file).unwrap();
    assert_eq!(loaded.to_bytes(), boxes.to_bytes());
    let (mut a, mut b) = (Xoshiro256::new(4), Xoshiro256::new(4));
    assert_eq!(
        loaded.sample(8, 0.5, &mut a).unwrap(),
        boxes.sample(8, 0.5, &mut b).unwrap()
    );
    let mut discrete = ReplayBuffer::new(vector_spec(64, 2, 2, Some(0.6))).unwrap();
    push_counting(&mut discrete, 2, 40, 7);
    discrete.save(&discrete_file).unwrap();
    let err = ReplayBuffer::load(vector_spec(64, 2, 2, Some(0.6)), &box_file).unwrap_err();
    assert!(
        format!("{err:#}").contains(
            "the replay file holds box actions of 2 f32, this run's environments take discrete actions"
        ),
        "{err:#}"
    );
    let err = ReplayBuffer::load(box_spec(2, 2, Some(0.6)), &discrete_file).unwrap_err();
    assert!(
        format!("{err:#}").contains("holds discrete actions, this run's environments take box"),
        "{err:#}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Files written before box actions (format 2: no action field in the header, discrete slots
/// laid out as now) still load, as the same buffer.
#[test]
fn format_2_replay_files_load_as_discrete() {
    let spec = vector_spec(32, 2, 2, Some(0.6));
    let mut buffer = ReplayBuffer::new(spec.clone()).unwrap();
    push_counting(&mut buffer, 2, 40, 7);
    let current = buffer.to_bytes();
    assert_eq!(&current[..8], b"TNDMRPL3");
    // Format 2: its own magic, and the header's 11 numbers without the 12th (the action field).
    let header_end = 8 + 11 * 8;
    let mut old = b"TNDMRPL2".to_vec();
    old.extend_from_slice(&current[8..header_end]);
    old.extend_from_slice(&current[header_end + 8..]);
    let loaded = ReplayBuffer::from_bytes(spec.clone(), &old).unwrap();
    assert_eq!(loaded.to_bytes(), current);
    let err = ReplayBuffer::from_bytes(box_spec(2, 2, Some(0.6)), &old).unwrap_err();
    assert!(err.to_string().contains("holds discrete actions"), "{err}");
}

/// The off-policy skeleton samples between the two halves of a push (the environments are still
/// stepping). Every sample there must be the one the whole push would have given: a real
/// stacked CartPole with terminations and truncations, n-step returns, prioritized replay with
/// priorities updated after each sample, and a ring that wraps around. (Letting the sample
/// window reach one row further, into the row whose outcome is not in yet, fails it.)
#[test]
fn a_sample_between_the_halves_of_a_push_is_the_sample_after_the_whole_push() {
    let spec = EnvSpec {
        game: Game::Cartpole,
        wrappers: vec![
            Wrapper::TimeLimit { max_steps: 9 },
            Wrapper::FrameStack { n: 2 },
        ],
    };
    let num_envs = 2;
    let mut envs = VecEnv::new(&spec, &[5, 6], 1).unwrap();
    let replay = |envs: &VecEnv| {
        ReplayBuffer::new(ReplaySpec {
            capacity: 40 * num_envs,
            num_envs,
            obs_len: envs.obs_len(),
            stack: 2,
            pixels: false,
            n_step: 3,
            gamma: 0.9,
            priority_alpha: Some(0.6),
            actions: ActionKind::Discrete,
        })
        .unwrap()
    };
    let (mut whole, mut halves) = (replay(&envs), replay(&envs));
    let mut rng = Xoshiro256::new(3);
    envs.reset();
    let mut compared = 0;
    for t in 0..150u64 {
        let obs = envs.obs().to_vec();
        let actions = ActionBatch::Discrete(
            (0..num_envs)
                .map(|_| rng.below(envs.num_actions() as u64) as i64)
                .collect(),
        );
        let ActionBatch::Discrete(indices) = &actions else {
            unreachable!()
        };
        envs.begin_step(indices).unwrap();
        halves.push_observations(&obs, &actions).unwrap();
        envs.finish_step().unwrap();
        whole
            .push(&VectorStep {
                obs: &obs,
                actions: &actions,
                rewards: envs.rewards(),
                terminated: envs.terminated(),
                truncated: envs.truncated(),
                final_obs: envs.final_obs(),
            })
            .unwrap();
        assert_eq!(halves.sampleable(), whole.sampleable(), "step {t}");
        if whole.sampleable() >= 8 {
            let a = whole.sample(8, 0.4, &mut Xoshiro256::new(t)).unwrap();
            let b = halves.sample(8, 0.4, &mut Xoshiro256::new(t)).unwrap();
            assert_eq!(a, b, "the samples of step {t}");
            let td: Vec<f32> = a.slots.iter().map(|&s| (s % 7) as f32 + 0.5).collect();
            whole.update_priorities(&a.slots, &td).unwrap();
            halves.update_priorities(&b.slots, &td).unwrap();
            compared += 1;
        }
        halves
            .push_outcome(
                envs.rewards(),
                envs.terminated(),
                envs.truncated(),
                envs.final_obs(),
            )
            .unwrap();
        let _ = envs.drain_episodes();
    }
    assert!(compared > 100, "{compared} samples compared");
    assert_eq!(
        whole.to_bytes(),
        halves.to_bytes(),
        "the buffers at the end"
    );
}

#[test]
fn the_halves_of_a_push_come_in_order() {
    let mut buffer = ReplayBuffer::new(vector_spec(16, 1, 1, None)).unwrap();
    let actions = ActionBatch::Discrete(vec![0]);
    let outcome = |b: &mut ReplayBuffer| b.push_outcome(&[1.0], &[false], &[false], &[0.0]);
    let err = outcome(&mut buffer).unwrap_err().to_string();
    assert!(err.contains("without the observations"), "{err}");
    buffer.push_observations(&[0.0], &actions).unwrap();
    let err = buffer
        .push_observations(&[1.0], &actions)
        .unwrap_err()
        .to_string();
    assert!(err.contains("outcome was never pushed"), "{err}");
    let file = std::env::temp_dir().join(format!("tandem-halves-{}.bin", std::process::id()));
    let err = buffer.save(&file).unwrap_err().to_string();
    assert!(err.contains("awaits its outcome"), "{err}");
    assert!(!file.exists());
    outcome(&mut buffer).unwrap();
    buffer.save(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
}

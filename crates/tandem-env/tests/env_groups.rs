//! `VecEnv::with_groups`: a batch split into groups that step on their own threads. Stepped in
//! turn, the groups give exactly what `step_group` in turn gives (normalisers included);
//! stepped at the same time, each environment still sees exactly its own sequence.

use tandem_env::{EnvError, EnvGroup, EnvSpec, EpisodeStats, Game, VecEnv, Wrapper, env_seeds};

const ENVS: usize = 9;
const GROUPS: usize = 3;
const STEPS: usize = 300;

/// Environment `env`'s action at step `t`: depends on its observation, so any difference in
/// what an environment saw changes what follows.
fn action(row: &[f32], env: usize, t: usize, num_actions: usize) -> i64 {
    let s: f32 = row
        .iter()
        .enumerate()
        .map(|(j, v)| v * (j % 7) as f32)
        .sum();
    ((s.abs() * 13.0) as usize + t + env) as i64 % num_actions as i64
}

fn actions(obs: &[f32], first: usize, obs_len: usize, t: usize, num_actions: usize) -> Vec<i64> {
    obs.chunks(obs_len)
        .enumerate()
        .map(|(k, row)| action(row, first + k, t, num_actions))
        .collect()
}

/// Everything one environment showed: per step its reward, flags and an observation checksum.
type Trace = Vec<Vec<(f32, bool, bool, f32)>>;

fn checksum(row: &[f32]) -> f32 {
    row.iter()
        .enumerate()
        .map(|(i, v)| v * (1 + i % 31) as f32)
        .sum()
}

fn batch(spec: &EnvSpec) -> VecEnv {
    let mut venv = VecEnv::new(spec, &env_seeds(11, 1, 0, ENVS), 1).unwrap();
    venv.reset();
    venv
}

/// Records one step of the environments `first..` whose rows are given.
fn record(trace: &mut Trace, first: usize, obs_len: usize, rows: Rows<'_>) {
    for k in 0..rows.rewards.len() {
        trace[first + k].push((
            rows.rewards[k],
            rows.terminated[k],
            rows.truncated[k],
            checksum(&rows.obs[k * obs_len..(k + 1) * obs_len]),
        ));
    }
}

struct Rows<'a> {
    obs: &'a [f32],
    rewards: &'a [f32],
    terminated: &'a [bool],
    truncated: &'a [bool],
}

fn group_rows<'a>(group: &'a EnvGroup<'_>) -> Rows<'a> {
    Rows {
        obs: group.obs(),
        rewards: group.rewards(),
        terminated: group.terminated(),
        truncated: group.truncated(),
    }
}

/// `step_group` over the groups in turn, every step.
fn stepped_group_by_group(spec: &EnvSpec) -> (Trace, Vec<EpisodeStats>, VecEnv) {
    let mut venv = batch(spec);
    let (obs_len, num_actions) = (venv.obs_len(), venv.num_actions());
    let size = ENVS / GROUPS;
    let mut trace: Trace = vec![Vec::new(); ENVS];
    for t in 0..STEPS {
        for g in 0..GROUPS {
            let envs = g * size..(g + 1) * size;
            let rows = &venv.obs()[envs.start * obs_len..envs.end * obs_len];
            let acts = actions(rows, envs.start, obs_len, t, num_actions);
            venv.step_group(envs.clone(), &acts).unwrap();
            let rows = Rows {
                obs: &venv.obs()[envs.start * obs_len..envs.end * obs_len],
                rewards: &venv.rewards()[envs.clone()],
                terminated: &venv.terminated()[envs.clone()],
                truncated: &venv.truncated()[envs.clone()],
            };
            record(&mut trace, envs.start, obs_len, rows);
        }
    }
    let episodes = venv.drain_episodes();
    (trace, episodes, venv)
}

/// The same steps through `with_groups`, the groups stepped in turn on this thread.
fn split_in_turn(spec: &EnvSpec) -> (Trace, Vec<EpisodeStats>, VecEnv) {
    let mut venv = batch(spec);
    let (obs_len, num_actions) = (venv.obs_len(), venv.num_actions());
    let mut trace: Trace = vec![Vec::new(); ENVS];
    venv.with_groups(GROUPS, |mut groups| {
        for t in 0..STEPS {
            for group in &mut groups {
                let first = group.envs().start;
                let acts = actions(group.obs(), first, obs_len, t, num_actions);
                group.step(&acts).unwrap();
                record(&mut trace, first, obs_len, group_rows(group));
            }
        }
    })
    .unwrap();
    let episodes = venv.drain_episodes();
    (trace, episodes, venv)
}

/// The same steps with each group on a thread of its own, all at once.
fn split_on_threads(spec: &EnvSpec) -> (Trace, Vec<EpisodeStats>) {
    let mut venv = batch(spec);
    let (obs_len, num_actions) = (venv.obs_len(), venv.num_actions());
    let traces = venv
        .with_groups(GROUPS, |groups| {
            std::thread::scope(|scope| {
                let workers: Vec<_> = groups
                    .into_iter()
                    .map(|mut group| {
                        scope.spawn(move || {
                            let mut trace: Trace = vec![Vec::new(); ENVS];
                            for t in 0..STEPS {
                                let first = group.envs().start;
                                let acts = actions(group.obs(), first, obs_len, t, num_actions);
                                group.step(&acts).unwrap();
                                record(&mut trace, first, obs_len, group_rows(&group));
                            }
                            trace
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().unwrap())
                    .collect::<Vec<Trace>>()
            })
        })
        .unwrap();
    let mut trace: Trace = vec![Vec::new(); ENVS];
    for part in traces {
        for (env, steps) in part.into_iter().enumerate() {
            trace[env].extend(steps);
        }
    }
    let mut episodes = venv.drain_episodes();
    episodes.sort_by_key(|e| (e.env_index, e.length));
    (trace, episodes)
}

#[test]
fn a_split_batch_stepped_in_turn_is_step_group_in_turn_normalisers_included() {
    let specs = [
        EnvSpec::new(Game::Cartpole).with(Wrapper::StickyActions { probability: 0.3 }),
        // Shared normalisers: each group must take up the statistics merged so far.
        EnvSpec::new(Game::Cartpole)
            .with(Wrapper::StickyActions { probability: 0.3 })
            .with(Wrapper::NormalizeObs { clip: 5.0 })
            .with(Wrapper::NormalizeReward {
                gamma: 0.99,
                clip: 10.0,
            }),
    ];
    for spec in &specs {
        let (want, want_episodes, want_venv) = stepped_group_by_group(spec);
        let (got, got_episodes, got_venv) = split_in_turn(spec);
        assert!(!want_episodes.is_empty(), "some episodes should finish");
        assert_eq!(want, got, "traces differ for {spec:?}");
        assert_eq!(want_episodes, got_episodes, "episodes differ for {spec:?}");
        assert_eq!(
            want_venv.normalizer_stats(),
            got_venv.normalizer_stats(),
            "normaliser statistics differ for {spec:?}"
        );
        assert_eq!(want_venv.obs(), got_venv.obs());
    }
}

#[test]
fn groups_stepping_at_once_on_their_own_threads_give_each_environment_its_own_sequence() {
    let specs = [
        EnvSpec::new(Game::Cartpole).with(Wrapper::StickyActions { probability: 0.3 }),
        EnvSpec::new(Game::from_name("minatar-breakout").unwrap()),
    ];
    for spec in &specs {
        let (want, mut want_episodes, _) = stepped_group_by_group(spec);
        want_episodes.sort_by_key(|e| (e.env_index, e.length));
        let (got, got_episodes) = split_on_threads(spec);
        assert!(!want_episodes.is_empty(), "some episodes should finish");
        assert_eq!(want, got, "traces differ for {spec:?}");
        assert_eq!(want_episodes, got_episodes, "episodes differ for {spec:?}");
    }
}

#[test]
fn a_split_is_refused_when_groups_do_not_divide_the_batch_or_a_step_is_pending() {
    let mut venv = batch(&EnvSpec::new(Game::Cartpole));
    for groups in [0, 2, 4] {
        let refused = venv.with_groups(groups, |_| ()).unwrap_err();
        assert!(
            matches!(&refused, EnvError::InvalidArgument(m) if m.contains("evenly")),
            "{groups} groups: {refused}"
        );
    }
    venv.begin_step(&[0i64; ENVS]).unwrap();
    let refused = venv.with_groups(3, |_| ()).unwrap_err();
    assert!(refused.to_string().contains("finish_step"), "{refused}");
}

#[test]
fn a_group_refuses_bad_actions_by_their_index_in_the_batch_before_stepping() {
    let mut venv = batch(&EnvSpec::new(Game::Cartpole));
    let before = venv.obs().to_vec();
    venv.with_groups(3, |mut groups| {
        let group = &mut groups[1];
        assert_eq!(group.index(), 1);
        assert_eq!(group.envs(), 3..6);
        assert_eq!(
            group.step(&[0i64, 0]),
            Err(EnvError::ActionCount {
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            group.step(&[0i64, 2, 0]),
            Err(EnvError::InvalidAction {
                env: 4,
                action: 2,
                num_actions: 2
            })
        );
        group.step(&[1i64, 1, 1]).unwrap();
    })
    .unwrap();
    let obs_len = venv.obs_len();
    assert_eq!(&venv.obs()[..3 * obs_len], &before[..3 * obs_len]);
    assert_eq!(&venv.obs()[6 * obs_len..], &before[6 * obs_len..]);
    assert_ne!(
        &venv.obs()[3 * obs_len..6 * obs_len],
        &before[3 * obs_len..6 * obs_len]
    );
}

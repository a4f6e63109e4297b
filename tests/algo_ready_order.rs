//! Collection in ready order (free sampling with env groups): each group steps on a rollout
//! worker of its own and the policy serves whichever has stepped. With a deterministic policy
//! the batch is the one collection in turn records, time-limit bootstraps included; a group
//! that waits does not hold the others back (where collection in turn cannot go on); groups
//! that stepped while the policy ran share its next forward pass; and a game that panics ends
//! the collection with an error instead of a hang.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::Result;
use tandem::algo::actions::ActionKind;
use tandem::algo::collect::{RolloutCollector, RolloutPolicy, StepHook};
use tandem::algo::learner::Phases;
use tandem::algo::{Batch, RolloutBuffer};
use tandem::nn::ActTaken;
use tandem_env::{
    Action, ActionSpace, Dtype, Env, EnvSpec, Game, ObsBuf, ObsSpace, Step, VecEnv, Wrapper,
    env_seeds,
};
use tch::{Device, Kind, Tensor};

/// Pushes right when the pole leans right; V(s) is a fixed function of the observation, so
/// the values and the time-limit bootstraps differ from row to row.
struct Lean;

impl RolloutPolicy for Lean {
    fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        let n = obs.size()[0];
        Ok(ActTaken {
            actions: obs.select(1, 2).gt(0.0).to_kind(Kind::Int64),
            log_probs: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            values: self.value(obs)?,
        })
    }
    fn env_actions(&self, actions: &Tensor) -> Tensor {
        actions.shallow_clone()
    }
    fn value(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(obs.sum_dim_intlist(1, false, Kind::Float) + 1.0)
    }
}

const ENVS: usize = 8;

fn collect_twice(collector: &RolloutCollector, steps: i64) -> Vec<Batch> {
    // Sticky actions make each game its own; the time limit cuts episodes, so the batch
    // needs V(final observation) for them.
    let spec = EnvSpec::new(Game::Cartpole)
        .with(Wrapper::StickyActions { probability: 0.25 })
        .with(Wrapper::TimeLimit { max_steps: 23 });
    let mut envs = VecEnv::new(&spec, &env_seeds(5, 0, 0, ENVS), 1).unwrap();
    envs.reset();
    let kind = ActionKind::Discrete;
    let mut buffer = RolloutBuffer::new(steps, ENVS as i64, &[4], kind, Device::Cpu).unwrap();
    let batches = (0..2)
        .map(|_| {
            let last = collector
                .collect(&Lean, &mut envs, &mut buffer, &mut Phases::default())
                .unwrap();
            buffer.gae_batch(&last, 0.99, 0.95).unwrap()
        })
        .collect();
    assert!(
        envs.drain_episodes().iter().any(|e| e.truncated),
        "the time limit cut some episodes"
    );
    batches
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    a.size() == b.size() && a.equal(b)
}

#[test]
fn ready_order_records_what_collection_in_turn_records() {
    let steps = 40;
    let kind = ActionKind::Discrete;
    let in_turn = RolloutCollector::new(ENVS, 2, &[4], kind).unwrap();
    let want = collect_twice(&in_turn, steps);
    for groups in [2, 4] {
        let ready = RolloutCollector::in_ready_order(ENVS, groups, &[4], kind).unwrap();
        let got = collect_twice(&ready, steps);
        for (want, got) in want.iter().zip(&got) {
            for (what, w, g) in [
                ("obs", &want.obs, &got.obs),
                ("actions", &want.actions, &got.actions),
                ("values", &want.values, &got.values),
                ("advantages", &want.advantages, &got.advantages),
                ("returns", &want.returns, &got.returns),
            ] {
                assert!(same(w, g), "{groups} groups in ready order: {what} differ");
            }
        }
    }
}

/// Records how many groups the hook is told each forward pass serves.
struct GroupsTold(Vec<usize>);

impl StepHook for GroupsTold {
    fn before_step(&mut self, first_group_chosen: bool, groups: usize) -> Result<()> {
        assert!(!first_group_chosen, "ready order chooses no actions ahead");
        self.0.push(groups);
        Ok(())
    }
}

/// [`Lean`], taking `pause` over every forward pass and recording how many rows each had.
struct SlowLean {
    pause: Duration,
    rows: Mutex<Vec<i64>>,
}

impl RolloutPolicy for SlowLean {
    fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        std::thread::sleep(self.pause);
        self.rows.lock().unwrap().push(obs.size()[0]);
        Lean.act(obs)
    }
    fn env_actions(&self, actions: &Tensor) -> Tensor {
        actions.shallow_clone()
    }
    fn value(&self, obs: &Tensor) -> Result<Tensor> {
        Lean.value(obs)
    }
}

#[test]
fn groups_that_stepped_while_the_policy_ran_share_one_forward_pass() {
    // CartPole steps in microseconds, so while the policy takes 20 ms for one group's actions
    // the other groups step and report: the next pass serves them together.
    let (steps, groups) = (12, 4);
    let policy = SlowLean {
        pause: Duration::from_millis(20),
        rows: Mutex::new(Vec::new()),
    };
    let kind = ActionKind::Discrete;
    let mut envs =
        VecEnv::new(&EnvSpec::new(Game::Cartpole), &env_seeds(5, 0, 0, ENVS), 1).unwrap();
    envs.reset();
    let mut buffer = RolloutBuffer::new(steps, ENVS as i64, &[4], kind, Device::Cpu).unwrap();
    let ready = RolloutCollector::in_ready_order(ENVS, groups, &[4], kind).unwrap();
    let mut hook = GroupsTold(Vec::new());
    let _ = ready
        .collect_with(
            &policy,
            &mut envs,
            &mut buffer,
            &mut Phases::default(),
            &mut hook,
        )
        .unwrap();
    let rows = policy.rows.into_inner().unwrap();
    let group_size = (ENVS / groups) as i64;
    // Free sampling's lag statistics count a version for each group a pass serves.
    let told: Vec<i64> = hook.0.iter().map(|&g| g as i64 * group_size).collect();
    assert_eq!(
        told, rows,
        "the hook is told how many groups each pass serves"
    );
    // Every group's every step acted on once; the bootstrap's values are not actions.
    assert_eq!(rows.iter().sum::<i64>(), ENVS as i64 * steps, "{rows:?}");
    assert_eq!(
        rows[0], ENVS as i64,
        "the first pass serves every group: {rows:?}"
    );
    assert!(
        rows[1..].iter().any(|&n| n > group_size),
        "every later pass served one group: {rows:?}"
    );
    let in_turn_passes = groups * (steps as usize - 1) + 1;
    assert!(
        rows.len() < in_turn_passes,
        "{} passes: {rows:?}",
        rows.len()
    );
}

#[test]
fn ready_order_needs_more_than_one_group() {
    let refused = RolloutCollector::in_ready_order(ENVS, 1, &[4], ActionKind::Discrete)
        .err()
        .unwrap();
    assert!(refused.to_string().contains("only one"), "{refused}");
}

/// Steps of the environment whose progress another waits for, with a condition variable.
type Progress = Arc<(Mutex<u32>, Condvar)>;

/// Observes `[id, steps]`. The environment with `wait_at` waits at that step until the
/// watched environment has taken `until` steps, at most `patience`, and records whether it had
/// to give up; any other environment with `progress` counts its steps there.
struct Rendezvous {
    id: f32,
    steps: u32,
    progress: Progress,
    wait_at: Option<(u32, u32)>,
    patience: Duration,
    gave_up: Arc<Mutex<bool>>,
    panic_at: Option<u32>,
}

impl Env for Rendezvous {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }
    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(2)
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        obs.write_f32(&[self.id, self.steps as f32]);
    }
    fn step(&mut self, _action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        self.steps += 1;
        assert!(Some(self.steps) != self.panic_at, "a game that fails");
        let (count, changed) = &*self.progress;
        match self.wait_at {
            Some((at, until)) if self.steps == at => {
                let guard = count.lock().unwrap();
                let (guard, waited) = changed
                    .wait_timeout_while(guard, self.patience, |n| *n < until)
                    .unwrap();
                drop(guard);
                *self.gave_up.lock().unwrap() = waited.timed_out();
            }
            Some(_) => {}
            None => {
                *count.lock().unwrap() += 1;
                changed.notify_all();
            }
        }
        obs.write_f32(&[self.id, self.steps as f32]);
        Step::game(1.0, false, false)
    }
}

/// Environment 0 (group 0 of 2) waits at its second step until environment 2 (group 1) has
/// taken `until` steps, for at most `patience`; environment 3 panics at `panic_at`. Returns
/// whether environment 0 gave up, and the collection's result.
fn rendezvous(
    ready_order: bool,
    until: u32,
    patience: Duration,
    panic_at: Option<u32>,
) -> (bool, Result<Tensor>) {
    let progress: Progress = Arc::new((Mutex::new(0), Condvar::new()));
    let gave_up = Arc::new(Mutex::new(false));
    let envs = (0..4)
        .map(|id| {
            Box::new(Rendezvous {
                id: id as f32,
                steps: 0,
                // Environment 1 neither waits nor counts: a fresh, unwatched counter.
                progress: if id == 1 {
                    Arc::new((Mutex::new(0), Condvar::new()))
                } else {
                    progress.clone()
                },
                wait_at: (id == 0).then_some((2, until)),
                patience,
                gave_up: gave_up.clone(),
                panic_at: panic_at.filter(|_| id == 3),
            }) as Box<dyn Env>
        })
        .collect();
    let mut venv = VecEnv::from_envs(envs, vec![1; 4], 1).unwrap();
    venv.reset();
    let kind = ActionKind::Discrete;
    let collector = if ready_order {
        RolloutCollector::in_ready_order(4, 2, &[2], kind).unwrap()
    } else {
        RolloutCollector::new(4, 2, &[2], kind).unwrap()
    };
    let mut buffer = RolloutBuffer::new(8, 4, &[2], kind, Device::Cpu).unwrap();
    let result = collector.collect(&Zero, &mut venv, &mut buffer, &mut Phases::default());
    let gave_up = *gave_up.lock().unwrap();
    (gave_up, result)
}

/// Always action 0.
struct Zero;

impl RolloutPolicy for Zero {
    fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        let n = obs.size()[0];
        Ok(ActTaken {
            actions: Tensor::zeros([n], (Kind::Int64, Device::Cpu)),
            log_probs: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            values: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
        })
    }
    fn env_actions(&self, actions: &Tensor) -> Tensor {
        actions.shallow_clone()
    }
    fn value(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(Tensor::zeros([obs.size()[0]], (Kind::Float, Device::Cpu)))
    }
}

#[test]
fn a_waiting_group_does_not_hold_back_the_others_in_ready_order() {
    // Group 1 must take five steps while group 0 waits in its second: in ready order it does.
    let (gave_up, result) = rendezvous(true, 5, Duration::from_secs(60), None);
    let _ = result.unwrap();
    assert!(
        !gave_up,
        "environment 0 waited in vain: group 1 was held back"
    );
    // Collection in turn steps group 1 only after group 0, so the wait can only give up.
    let (gave_up, result) = rendezvous(false, 5, Duration::from_millis(300), None);
    let _ = result.unwrap();
    assert!(gave_up, "collection in turn let group 1 run ahead");
}

#[test]
fn a_game_that_panics_in_a_rollout_worker_ends_the_collection_with_an_error() {
    let (_, result) = rendezvous(true, 0, Duration::ZERO, Some(3));
    let error = format!("{:#}", result.unwrap_err());
    assert!(
        error.contains("stepping environment group 1")
            && error.contains("an environment of group 1 panicked"),
        "{error}"
    );
}

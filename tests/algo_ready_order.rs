//! Collection in ready order (free sampling with env groups): each group steps on a rollout
//! worker of its own and the policy serves whichever has stepped, through free sampling's
//! exchange. With a deterministic policy the batches are the ones collection in turn records,
//! time-limit bootstraps included; a group that waits does not hold the others back (where
//! collection in turn cannot go on); groups that stepped while the policy ran share its next
//! forward pass; groups that finish a batch go on into the next while the slowest finishes it;
//! a round's stop finishes the oldest open batch and the next round goes on where the groups
//! left off; and a game that panics ends the collection with an error instead of a hang.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::Result;
use tandem::algo::actions::ActionKind;
use tandem::algo::learner::Phases;
use tandem::algo::sampling::collect::{RolloutCollector, RolloutPolicy};
use tandem::algo::sampling::free::FreeCollection;
use tandem::algo::sampling::free::exchange::{Exchange, QueuedBatch, collect_round};
use tandem::algo::sampling::free::open_batches::ReadyState;
use tandem::algo::sampling::free::policy_worker::PolicyWorker;
use tandem::algo::{Batch, RolloutBuffer};
use tandem::nn::ActTaken;
use tandem_env::{
    Action, ActionSpace, Dtype, Env, EnvSpec, Game, ObsBuf, ObsSpace, Step, VecEnv, Wrapper,
    env_seeds,
};
use tch::nn::VarStore;
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

/// One round of free sampling in ready order, with `spare` empty buffers of `steps` steps for
/// the collector and no learner (nothing published, nothing given back): `meanwhile` runs on
/// this thread while the round goes on, then this thread takes `take` batches and stops the
/// round. The batches taken, or the collector's error.
fn ready_round(
    collector: &PolicyWorker,
    policy: &(dyn RolloutPolicy + Sync),
    envs: &mut VecEnv,
    state: &mut ReadyState,
    (spare, steps): (usize, i64),
    take: usize,
    meanwhile: impl FnOnce(&Exchange),
) -> Result<Vec<QueuedBatch>> {
    let obs_shape = [envs.obs().len() as i64 / envs.num_envs() as i64];
    let n = envs.num_envs() as i64;
    let buffers = (0..spare)
        .map(|_| RolloutBuffer::new(steps, n, &obs_shape, ActionKind::Discrete, Device::Cpu))
        .collect::<Result<Vec<_>>>()?;
    let exchange = Exchange::new(VecDeque::new(), buffers, VarStore::new(Device::Cpu), 0);
    let mut behaviour = VarStore::new(Device::Cpu);
    let shared = &exchange;
    std::thread::scope(|scope| {
        let collecting = scope.spawn(move || {
            collect_round(shared, &mut behaviour, &mut 0, |c| {
                collector.collect_ready_round(policy, envs, state, c, &mut Phases::default())
            })
        });
        meanwhile(&exchange);
        let taken: Vec<QueuedBatch> = (0..take).map_while(|_| exchange.take_full().ok()).collect();
        exchange.stop();
        collecting.join().expect("the collector thread panicked")?;
        Ok(taken)
    })
}

fn collect_twice(collection: &mut FreeCollection, steps: i64) -> Vec<Batch> {
    // Sticky actions make each game its own; the time limit cuts episodes, so the batch
    // needs V(final observation) for them.
    let spec = EnvSpec::new(Game::Cartpole)
        .with(Wrapper::StickyActions { probability: 0.25 })
        .with(Wrapper::TimeLimit { max_steps: 23 });
    let mut envs = VecEnv::new(&spec, &env_seeds(5, 0, 0, ENVS), 1).unwrap();
    envs.reset();
    let kind = ActionKind::Discrete;
    let batches = match collection {
        FreeCollection::ReadyOrder(worker, state) => {
            let round = (2, steps);
            ready_round(worker, &Lean, &mut envs, state, round, 2, |_| {})
                .unwrap()
                .iter()
                .map(|b| b.buffer.gae_batch(&b.last_values, 0.99, 0.95).unwrap())
                .collect()
        }
        // A buffer a batch, as in ready order: a batch's observations are a view of its own.
        FreeCollection::InTurn(collector) => (0..2)
            .map(|_| {
                let mut buffer =
                    RolloutBuffer::new(steps, ENVS as i64, &[4], kind, Device::Cpu).unwrap();
                let last = collector
                    .collect(&Lean, &mut envs, &mut buffer, &mut Phases::default())
                    .unwrap();
                buffer.gae_batch(&last, 0.99, 0.95).unwrap()
            })
            .collect(),
    };
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
    let want = collect_twice(&mut FreeCollection::InTurn(in_turn), steps);
    for groups in [2, 4] {
        let ready = PolicyWorker::new(ENVS, groups, &[4], kind).unwrap();
        let got = collect_twice(
            &mut FreeCollection::ReadyOrder(ready, ReadyState::default()),
            steps,
        );
        assert_eq!(got.len(), 2);
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
    let ready = PolicyWorker::new(ENVS, groups, &[4], kind).unwrap();
    let mut state = ReadyState::default();
    let batches = ready_round(
        &ready,
        &policy,
        &mut envs,
        &mut state,
        (1, steps),
        1,
        |_| {},
    )
    .unwrap();
    let rows = policy.rows.into_inner().unwrap();
    let group_size = (ENVS / groups) as i64;
    // Free sampling's lag statistics count a version for each group a pass serves.
    assert_eq!(
        batches[0].versions.len(),
        groups * steps as usize,
        "a version for each group and step"
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
    let refused = PolicyWorker::new(ENVS, 1, &[4], ActionKind::Discrete)
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

/// What environment 0 of the rendezvous does: at step `at` it waits until environment 2 has
/// taken `until` steps, for at most `patience`.
struct Wait {
    at: u32,
    until: u32,
    patience: Duration,
}

/// Four [`Rendezvous`] environments in two groups of 2: environment 0 (group 0) waits as
/// `wait` says; environment 2 (group 1) counts its steps in the returned progress;
/// environment 3 panics at `panic_at`. Also returns whether environment 0 gave up waiting.
fn rendezvous_envs(wait: Wait, panic_at: Option<u32>) -> (VecEnv, Progress, Arc<Mutex<bool>>) {
    let progress: Progress = Arc::new((Mutex::new(0), Condvar::new()));
    let gave_up = Arc::new(Mutex::new(false));
    let envs = (0..4)
        .map(|id| {
            Box::new(Rendezvous {
                id: id as f32,
                steps: 0,
                // Environments 1 and 3 neither wait nor count: fresh, unwatched counters.
                progress: if id % 2 == 1 {
                    Arc::new((Mutex::new(0), Condvar::new()))
                } else {
                    progress.clone()
                },
                wait_at: (id == 0).then_some((wait.at, wait.until)),
                patience: wait.patience,
                gave_up: gave_up.clone(),
                panic_at: panic_at.filter(|_| id == 3),
            }) as Box<dyn Env>
        })
        .collect();
    let mut venv = VecEnv::from_envs(envs, vec![1; 4], 1).unwrap();
    venv.reset();
    (venv, progress, gave_up)
}

/// Rendezvous batches are 8 steps long.
const STEPS: i64 = 8;

/// Collects one batch of the rendezvous, in turn or in ready order with `spare` buffers.
/// Returns whether environment 0 gave up waiting, and the batches (ready order) or V(s_T) (in
/// turn), or the collection's error.
fn rendezvous(
    ready_order: Option<usize>,
    wait: Wait,
    panic_at: Option<u32>,
) -> (bool, Result<Vec<QueuedBatch>>) {
    let (mut venv, _, gave_up) = rendezvous_envs(wait, panic_at);
    let kind = ActionKind::Discrete;
    let result = match ready_order {
        Some(spare) => {
            let collector = PolicyWorker::new(4, 2, &[2], kind).unwrap();
            let mut state = ReadyState::default();
            let round = (spare, STEPS);
            ready_round(&collector, &Zero, &mut venv, &mut state, round, 1, |_| {})
        }
        None => {
            let collector = RolloutCollector::new(4, 2, &[2], kind).unwrap();
            let mut buffer = RolloutBuffer::new(STEPS, 4, &[2], kind, Device::Cpu).unwrap();
            collector
                .collect(&Zero, &mut venv, &mut buffer, &mut Phases::default())
                .map(|_| Vec::new())
        }
    };
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
    let patience = Duration::from_secs(60);
    let (gave_up, result) = rendezvous(
        Some(1),
        Wait {
            at: 2,
            until: 5,
            patience,
        },
        None,
    );
    assert_eq!(result.unwrap().len(), 1);
    assert!(
        !gave_up,
        "environment 0 waited in vain: group 1 was held back"
    );
    // Collection in turn steps group 1 only after group 0, so the wait can only give up.
    let patience = Duration::from_millis(300);
    let (gave_up, result) = rendezvous(
        None,
        Wait {
            at: 2,
            until: 5,
            patience,
        },
        None,
    );
    let _ = result.unwrap();
    assert!(gave_up, "collection in turn let group 1 run ahead");
}

/// Each environment's step counts `[batches, steps, envs]` in the batches' observations, and
/// `[batches, envs]` in their s_T.
fn step_counts(batches: &[QueuedBatch]) -> (Tensor, Tensor) {
    let rows = batches
        .iter()
        .map(|b| b.buffer.steps().unwrap().obs.select(1, 1));
    let rows: Vec<Tensor> = rows.map(|obs| obs.view([STEPS, 4])).collect();
    let ends: Vec<Tensor> = batches
        .iter()
        .map(|b| b.buffer.bootstrap().0.select(1, 1))
        .collect();
    (Tensor::stack(&rows, 0), Tensor::stack(&ends, 0))
}

/// The step counts of consecutive batches from the `first`'th on: batch b's row t holds step
/// b * STEPS + t of every environment, its s_T step (b + 1) * STEPS.
fn consecutive(first: i64, batches: usize) -> (Tensor, Tensor) {
    let b = Tensor::arange_start(first, first + batches as i64, (Kind::Float, Device::Cpu));
    let t = Tensor::arange(STEPS, (Kind::Float, Device::Cpu));
    let rows =
        (b.view([-1, 1, 1]) * STEPS as f64 + t.view([1, -1, 1])).expand([-1, STEPS, 4], false);
    let ends = ((b + 1.0) * STEPS as f64)
        .view([-1, 1])
        .expand([-1, 4], false);
    (rows.contiguous(), ends.contiguous())
}

#[test]
fn groups_that_finish_a_batch_fill_the_next_while_the_slowest_finishes_it() {
    // Environment 0 waits in the batch's last step until group 1 is five steps into the next
    // batch: with a second spare buffer group 1 goes on into it.
    let in_the_last_step = |patience| Wait {
        at: STEPS as u32,
        until: STEPS as u32 + 5,
        patience,
    };
    let (gave_up, result) = rendezvous(Some(2), in_the_last_step(Duration::from_secs(60)), None);
    assert!(!gave_up, "group 1 waited for group 0 to finish the batch");
    let batches = result.unwrap();
    let (rows, ends) = step_counts(&batches);
    let (want_rows, want_ends) = consecutive(0, 1);
    assert!(
        same(&rows, &want_rows) && same(&ends, &want_ends),
        "{rows} {ends}"
    );
    // With no second buffer (the learner holds the others) there is nothing to go on into.
    let wait = in_the_last_step(Duration::from_millis(300));
    let (gave_up, result) = rendezvous(Some(1), wait, None);
    assert_eq!(result.unwrap().len(), 1);
    assert!(gave_up, "group 1 went on without a buffer");
}

#[test]
fn a_round_stops_after_its_oldest_batch_and_the_next_goes_on_where_the_groups_left_off() {
    // Environment 0 waits in batch 0's last step until this thread lets it go; meanwhile group
    // 1 runs into batch 1, and the round is told to stop. The stop finishes batch 0 only:
    // batch 1, begun by group 1 alone, stays open for the next round, which completes it.
    let patience = Duration::from_secs(60);
    let release = 1_000_000;
    let wait = Wait {
        at: STEPS as u32,
        until: release,
        patience,
    };
    let (mut venv, progress, gave_up) = rendezvous_envs(wait, None);
    let kind = ActionKind::Discrete;
    let collector = PolicyWorker::new(4, 2, &[2], kind).unwrap();
    let mut state = ReadyState::default();
    let stop_with_group_1_in_batch_1 = |exchange: &Exchange| {
        let (count, changed) = &*progress;
        let guard = count.lock().unwrap();
        let (mut guard, waited) = changed
            .wait_timeout_while(guard, patience, |n| *n < STEPS as u32 + 3)
            .unwrap();
        assert!(!waited.timed_out(), "group 1 did not go on into batch 1");
        exchange.stop();
        *guard += release;
        changed.notify_all();
    };
    let first = ready_round(
        &collector,
        &Zero,
        &mut venv,
        &mut state,
        (3, STEPS),
        2,
        stop_with_group_1_in_batch_1,
    )
    .unwrap();
    assert!(!*gave_up.lock().unwrap());
    assert_eq!(first.len(), 1, "the stopped round queued batch 0 only");
    let second = ready_round(
        &collector,
        &Zero,
        &mut venv,
        &mut state,
        (2, STEPS),
        1,
        |_| {},
    )
    .unwrap();
    let both: Vec<QueuedBatch> = first.into_iter().chain(second).collect();
    let (rows, ends) = step_counts(&both);
    let (want_rows, want_ends) = consecutive(0, 2);
    assert!(
        same(&rows, &want_rows) && same(&ends, &want_ends),
        "steps were lost between the rounds: {rows} {ends}"
    );
}

#[test]
fn a_game_that_panics_in_a_rollout_worker_ends_the_collection_with_an_error() {
    let wait = Wait {
        at: 2,
        until: 0,
        patience: Duration::ZERO,
    };
    let (_, result) = rendezvous(Some(1), wait, Some(3));
    let error = format!("{:#}", result.err().expect("the collection failed"));
    assert!(
        error.contains("stepping environment group 1")
            && error.contains("an environment of group 1 panicked"),
        "{error}"
    );
}

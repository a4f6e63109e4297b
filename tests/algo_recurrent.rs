//! The recurrent actor-critic and its rollouts: evaluating a whole sequence recomputes exactly
//! the states that stepping it one observation at a time carries; an episode start zeroes the
//! state and nothing else does; the collector keeps each environment's state at the rollout's
//! start, the episode starts of every step, and carries both into the next rollout; PPO's
//! micro-batches of environments give the update of whole minibatches; V-trace's view of a
//! batch re-runs its sequences to the values the collector saw; and what a recurrent network
//! cannot do is refused with a message.

mod common;

use tandem::algo::actions::ActionKind;
use tandem::algo::learner::Phases;
use tandem::algo::on_policy::update::learner_view;
use tandem::algo::sampling::collect::RolloutCollector;
use tandem::algo::storage::memory::Memory;
use tandem::algo::{RolloutBuffer, VtraceClips};
use tandem::nn::{ActorCritic, ActorCriticSpec, Core, CoreSpec, NetworkSpec};
use tandem_env::{Action, ActionSpace, Dtype, Env, ObsBuf, ObsSpace, Step, VecEnv};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn recurrent(kind: Core, obs: i64) -> (VarStore, ActorCritic) {
    common::seeded(3, || {
        let vs = VarStore::new(Device::Cpu);
        let spec = ActorCriticSpec {
            share_torso: true,
            core: Some(CoreSpec { kind, size: 8 }),
            ..ActorCriticSpec::for_network(NetworkSpec::default_mlp(), common::orthogonal_init())
        };
        let model =
            ActorCritic::new(&vs.root(), &spec, &[obs], ActionSpace::Discrete { n: 2 }).unwrap();
        (vs, model)
    })
}

fn floats(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.reshape([-1])).unwrap()
}

#[test]
fn evaluating_a_sequence_equals_stepping_it() {
    for kind in [Core::Lstm, Core::Gru] {
        let (_vs, model) = recurrent(kind, 3);
        let (steps, n) = (6, 3);
        let (obs, starts, state0, actions) = common::seeded(5, || {
            let opts = (Kind::Float, Device::Cpu);
            (
                Tensor::randn([steps * n, 3], opts),
                Tensor::from_slice(&[
                    0f32, 0., 1., 0., 0., 0., 1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1., 0.,
                ]),
                Tensor::randn([n, model.state_width()], opts),
                Tensor::randint(2, [steps * n], (Kind::Int64, Device::Cpu)),
            )
        });
        let whole = model
            .evaluate_recurrent(
                &obs,
                &actions,
                &starts,
                &state0,
                tandem::nn::EntropyUse::ReportOnly,
            )
            .unwrap();
        let mut state = state0.shallow_clone();
        let mut stepped = Vec::new();
        for t in 0..steps {
            let rows = |x: &Tensor| x.narrow(0, t * n, n);
            stepped.push(
                model
                    .value_recurrent(&rows(&obs), &rows(&starts), &state)
                    .unwrap(),
            );
            state = model
                .act_greedy_recurrent(&rows(&obs), &rows(&starts), &state)
                .unwrap()
                .1;
        }
        let (a, b) = (floats(&whole.values), floats(&Tensor::cat(&stepped, 0)));
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() < 1e-6,
                "{kind:?} row {i}: sequence {x}, stepped {y}"
            );
        }
    }
}

#[test]
fn an_episode_start_zeroes_the_state_and_the_state_matters_otherwise() {
    for kind in [Core::Lstm, Core::Gru] {
        let (_vs, model) = recurrent(kind, 3);
        let (obs, state) = common::seeded(6, || {
            (
                Tensor::randn([4, 3], (Kind::Float, Device::Cpu)),
                Tensor::randn([4, model.state_width()], (Kind::Float, Device::Cpu)),
            )
        });
        let zero = model.initial_state(4, Device::Cpu);
        let (ones, zeros) = (
            Tensor::ones([4], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4], (Kind::Float, Device::Cpu)),
        );
        let fresh = floats(&model.value_recurrent(&obs, &zeros, &zero).unwrap());
        let started = floats(&model.value_recurrent(&obs, &ones, &state).unwrap());
        let carried = floats(&model.value_recurrent(&obs, &zeros, &state).unwrap());
        assert_eq!(fresh, started, "{kind:?}: a start must forget the state");
        let moved = fresh
            .iter()
            .zip(&carried)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            moved > 1e-4,
            "{kind:?}: the state changed no value ({moved})"
        );
    }
}

#[test]
fn a_recurrent_network_needs_its_state_and_a_shared_torso() {
    let (_vs, model) = recurrent(Core::Lstm, 3);
    let err = model
        .forward(&Tensor::zeros([2, 3], (Kind::Float, Device::Cpu)))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("recurrent; step it with its state"),
        "{err}"
    );
    let vs = VarStore::new(Device::Cpu);
    let spec = ActorCriticSpec {
        share_torso: false,
        core: Some(CoreSpec {
            kind: Core::Gru,
            size: 8,
        }),
        ..ActorCriticSpec::for_network(NetworkSpec::default_mlp(), common::orthogonal_init())
    };
    let err =
        ActorCritic::new(&vs.root(), &spec, &[3], ActionSpace::Discrete { n: 2 }).unwrap_err();
    assert!(
        err.to_string()
            .contains("recurrent core sits on one shared torso"),
        "{err}"
    );
}

/// Observes `[id, step]`; its episodes last `length` steps.
struct Counter {
    id: f32,
    length: u32,
    steps: u32,
}

impl Env for Counter {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Discrete { n: 2 }
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.steps = 0;
        obs.write_f32(&[self.id, 0.0]);
    }
    fn step(&mut self, _action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        self.steps += 1;
        obs.write_f32(&[self.id, self.steps as f32]);
        Step::game(1.0, self.steps == self.length, false)
    }
}

#[test]
fn the_collector_keeps_start_states_and_episode_starts_and_carries_them_over() {
    let mut envs = two_counters();
    let (_vs, model) = recurrent(Core::Lstm, 2);
    let steps = 4;
    let mut buffer = RolloutBuffer::new(steps, 2, &[2], ActionKind::Discrete, Device::Cpu).unwrap();
    let collector = RolloutCollector::new(2, 1, &[2], ActionKind::Discrete).unwrap();
    let mut memory = Memory::new(&model, 2, Device::Cpu);
    let mut phases = Phases::default();
    // The action draws come from the global generator: no other test may draw meanwhile.
    let _rng = common::torch_rng();
    tch::manual_seed(1);
    let last = collector
        .collect_recurrent(&model, &mut envs, &mut memory, &mut buffer, &mut phases)
        .unwrap();
    let first = buffer.gae_batch(&last, 0.9, 0.9).unwrap();
    let sequences = first.sequences.as_ref().expect("a recurrent rollout");
    assert_eq!(floats(&sequences.initial_state), vec![0.0; 2 * 16]);
    // Row t * 2 + env: both start at step 0; env 0 (episodes of 3) again at step 3.
    assert_eq!(
        floats(&sequences.starts),
        vec![1., 1., 0., 0., 0., 0., 1., 0.]
    );
    let after_first = floats(&memory.state);
    assert!(after_first.iter().any(|&x| x != 0.0));
    // After four steps env 0 is one step into its second episode and env 1 (episodes of 5)
    // one step before its end: neither starts an episode at the next rollout's first step.
    assert_eq!(floats(&memory.starts), vec![0., 0.]);
    let last = collector
        .collect_recurrent(&model, &mut envs, &mut memory, &mut buffer, &mut phases)
        .unwrap();
    let second = buffer.gae_batch(&last, 0.9, 0.9).unwrap();
    let sequences = second.sequences.as_ref().unwrap();
    assert_eq!(floats(&sequences.initial_state), after_first);
    // Env 0 restarts at global steps 6 (rollout row 2); env 1 at step 5 (row 1).
    assert_eq!(
        floats(&sequences.starts),
        vec![0., 0., 0., 1., 1., 0., 0., 0.]
    );
    let groups = RolloutCollector::new(2, 2, &[2], ActionKind::Discrete).unwrap();
    let err = groups
        .collect_recurrent(&model, &mut envs, &mut memory, &mut buffer, &mut phases)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("train.env-groups 2 cannot step a recurrent policy"),
        "{err}"
    );
}

/// A sequence batch of 4 environments x 8 steps with episode starts inside and non-zero
/// initial states.
fn sequence_batch(width: i64) -> tandem::algo::Batch {
    common::seeded(9, || {
        let opts = (Kind::Float, Device::Cpu);
        let rows = 32;
        let values = Tensor::randn([rows], opts);
        let advantages = Tensor::randn([rows], opts);
        let mut batch = tandem::algo::Batch::new(
            Tensor::randn([rows, 3], opts),
            Tensor::randint(2, [rows], (Kind::Int64, Device::Cpu)),
            Tensor::randn([rows], opts) * 0.1 - 0.7,
            values.shallow_clone(),
            advantages.shallow_clone(),
            &values + &advantages,
        )
        .unwrap();
        batch.sequences = Some(tandem::algo::Sequences {
            starts: Tensor::rand([rows], opts).lt(0.2).to_kind(Kind::Float),
            initial_state: Tensor::randn([4, width], opts),
        });
        batch
    })
}

#[test]
fn micro_batches_of_environments_give_the_update_of_whole_minibatches() {
    // One libtorch thread, so that both runs reduce in the same order whatever else loads the
    // machine (with two it failed once, in a loaded run of the whole suite).
    tch::set_num_threads(1);
    let train = |micro_batches: usize| {
        let (vs, model) = recurrent(Core::Lstm, 3);
        let config = tandem_config::Ppo {
            epochs: 2,
            minibatches: 1,
            micro_batches,
            lr: 3e-3,
            ..common::cleanrl_ppo()
        };
        let mut ppo = tandem::algo::Ppo::new(&vs, config, 0).unwrap();
        let batch = sequence_batch(model.state_width());
        let plan: Vec<Vec<Tensor>> = (0..2)
            .map(|_| vec![Tensor::from_slice(&[2i64, 0, 3, 1])])
            .collect();
        for _ in 0..3 {
            ppo.update_with_minibatches(&model, &batch, 0.0, &plan, &mut tandem::algo::Local)
                .unwrap();
        }
        tandem::nn::trainable_parameters_in_order(&vs)
            .iter()
            .flat_map(|p| floats(&p.detach()))
            .collect::<Vec<f32>>()
    };
    let (whole, parts) = (train(1), train(2));
    let diff = whole
        .iter()
        .zip(&parts)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        diff < 1e-5,
        "micro-batches of environments differ by {diff}"
    );
    let err = {
        let (vs, model) = recurrent(Core::Lstm, 3);
        let config = tandem_config::Ppo {
            epochs: 1,
            minibatches: 1,
            ..common::cleanrl_ppo()
        };
        let mut ppo = tandem::algo::Ppo::new(&vs, config, 0).unwrap();
        let batch = sequence_batch(model.state_width());
        // Environment 4 of a batch of 4.
        let plan = vec![vec![Tensor::from_slice(&[1i64, 2, 3, 4])]];
        ppo.update_with_minibatches(&model, &batch, 0.0, &plan, &mut tandem::algo::Local)
            .unwrap_err()
            .to_string()
    };
    assert!(
        err.contains("indexes environments 1..=4 of a batch of 4"),
        "{err}"
    );
}

/// A learner that has not moved since it collected sees the batch as the collector did: its own
/// log-probabilities, values and V(s_T) (a recurrent one re-running the stored sequences from
/// their initial states, on to s_T), so V-trace's targets are GAE's returns. Feed-forward and
/// recurrent, over two rollouts (the second starts from carried states, one episode starting at
/// its first step).
#[test]
fn vtrace_sees_an_unmoved_learners_batch_as_the_collector_did() {
    let feed_forward = common::seeded(3, || {
        let vs = VarStore::new(Device::Cpu);
        let spec =
            ActorCriticSpec::for_network(NetworkSpec::default_mlp(), common::orthogonal_init());
        let model =
            ActorCritic::new(&vs.root(), &spec, &[2], ActionSpace::Discrete { n: 2 }).unwrap();
        (vs, model)
    });
    for (_vs, model) in [feed_forward, recurrent(Core::Lstm, 2)] {
        let mut envs = two_counters();
        let mut buffer = RolloutBuffer::new(4, 2, &[2], ActionKind::Discrete, Device::Cpu).unwrap();
        let collector = RolloutCollector::new(2, 1, &[2], ActionKind::Discrete).unwrap();
        let mut memory = Memory::new(&model, 2, Device::Cpu);
        let mut phases = Phases::default();
        // The action draws come from the global generator: no other test may draw meanwhile.
        let _rng = common::torch_rng();
        tch::manual_seed(1);
        for rollout in 0..2 {
            let last = if model.is_recurrent() {
                collector.collect_recurrent(
                    &model,
                    &mut envs,
                    &mut memory,
                    &mut buffer,
                    &mut phases,
                )
            } else {
                collector.collect(&model, &mut envs, &mut buffer, &mut phases)
            }
            .unwrap();
            let view = learner_view(&model, &buffer).unwrap();
            let stored = buffer.steps().unwrap();
            let what = format!("recurrent {}, rollout {rollout}", model.is_recurrent());
            assert_close(&view.last_values, &last, &format!("{what}: V(s_T)"));
            assert_close(&view.values, &stored.values, &format!("{what}: V(s_t)"));
            assert_close(
                &view.log_probs,
                &stored.log_probs,
                &format!("{what}: log pi"),
            );
            let clips = VtraceClips { rho: 1.0, c: 1.0 };
            let vtrace = buffer.vtrace_batch(&view, 0.9, 0.9, clips).unwrap();
            let gae = buffer.gae_batch(&last, 0.9, 0.9).unwrap();
            assert_close(&vtrace.returns, &gae.returns, &format!("{what}: targets"));
        }
    }
}

fn assert_close(a: &Tensor, b: &Tensor, what: &str) {
    let (a, b) = (floats(a), floats(b));
    assert_eq!(a.len(), b.len(), "{what}");
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-5, "{what}: {a:?} against {b:?}");
    }
}

/// Two counting environments whose episodes last 3 and 5 steps, reset.
fn two_counters() -> VecEnv {
    let envs: Vec<Box<dyn Env>> = [3, 5]
        .iter()
        .enumerate()
        .map(|(id, &length)| {
            Box::new(Counter {
                id: id as f32,
                length,
                steps: 0,
            }) as Box<dyn Env>
        })
        .collect();
    let mut envs = VecEnv::from_envs(envs, vec![1, 1], 1).unwrap();
    envs.reset();
    envs
}

//! The rollout collector stepping a box-action VecEnv: the policy's `[n, d]` actions reach each
//! environment as its row (with and without double-buffered env groups), and the buffer records
//! them beside the observations they were chosen from; a Gaussian actor-critic's environments
//! receive its samples scaled and clipped to the bounds while the buffer keeps them unclipped.

mod common;

use std::sync::{Arc, Mutex};

use anyhow::Result;
use tandem::algo::actions::ActionKind;
use tandem::algo::learner::Phases;
use tandem::algo::sampling::collect::{RolloutCollector, RolloutPolicy};
use tandem::algo::{Batch, RolloutBuffer};
use tandem::nn::{ActTaken, Activation, ActorCritic, ActorCriticSpec, NetworkSpec};
use tandem_env::{Action, ActionSpace, Dtype, Env, ObsBuf, ObsSpace, Step, VecEnv};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// Observes the action it was given (so the next observation shows which row reached it);
/// starts every episode at `[id, 0]` and ends it after four steps.
struct EchoBox {
    id: f32,
    steps: u32,
}

impl Env for EchoBox {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Box {
            low: vec![-100.0; 2].into(),
            high: vec![100.0; 2].into(),
        }
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.steps = 0;
        obs.write_f32(&[self.id, 0.0]);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        obs.write_f32(action.values());
        self.steps += 1;
        Step::game(0.0, self.steps == 4, false)
    }
}

fn echo_boxes(n: usize) -> VecEnv {
    let envs = (0..n)
        .map(|id| {
            Box::new(EchoBox {
                id: id as f32,
                steps: 0,
            }) as Box<dyn Env>
        })
        .collect();
    let mut venv = VecEnv::from_envs(envs, vec![1; n], 1).unwrap();
    venv.reset();
    venv
}

/// Acts `obs + [0, 1]`: the second value counts the episode's steps.
struct CountingPolicy;

impl RolloutPolicy for CountingPolicy {
    fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        let n = obs.size()[0];
        let step = Tensor::from_slice(&[0f32, 1.0]);
        Ok(ActTaken {
            actions: obs + step,
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

fn collect(n: usize, groups: usize, steps: i64) -> Batch {
    let kind = ActionKind::Box { dim: 2 };
    let mut envs = echo_boxes(n);
    let mut buffer = RolloutBuffer::new(steps, n as i64, &[2], kind, Device::Cpu).unwrap();
    let collector = RolloutCollector::new(n, groups, &[2], kind).unwrap();
    let last = collector
        .collect(
            &CountingPolicy,
            &mut envs,
            &mut buffer,
            &mut Phases::default(),
        )
        .unwrap();
    buffer.gae_batch(&last, 0.9, 0.9).unwrap()
}

fn row(t: &Tensor, r: i64) -> Vec<f32> {
    Vec::<f32>::try_from(&t.get(r)).unwrap()
}

#[test]
fn box_actions_step_each_environment_and_are_recorded_with_their_observations() {
    let (n, steps) = (4, 6);
    for groups in [1, 2] {
        let batch = collect(n, groups, steps);
        assert_eq!(batch.actions.size(), [steps * n as i64, 2]);
        for t in 0..steps {
            for env in 0..n as i64 {
                let i = t * n as i64 + env;
                let count = (t % 4) as f32;
                // Environment `env` saw its own row: its id stays, its count advances.
                assert_eq!(
                    row(&batch.obs, i),
                    [env as f32, count],
                    "groups={groups} t={t}"
                );
                assert_eq!(
                    row(&batch.actions, i),
                    [env as f32, count + 1.0],
                    "groups={groups} t={t}"
                );
            }
        }
    }
}

#[test]
fn a_collector_refuses_environments_of_another_action_kind() {
    let mut envs = echo_boxes(2);
    let mut buffer = RolloutBuffer::new(2, 2, &[2], ActionKind::Discrete, Device::Cpu).unwrap();
    let collector = RolloutCollector::new(2, 1, &[2], ActionKind::Discrete).unwrap();
    let err = collector
        .collect(
            &CountingPolicy,
            &mut envs,
            &mut buffer,
            &mut Phases::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the environments take box actions of 2 f32")
            && err.contains("collector was built for discrete actions"),
        "{err}"
    );
}

/// A box game over [-2, 2] x [0, 1] that records every action it receives, never ends, and
/// observes a constant.
struct RecordingBox {
    received: Arc<Mutex<Vec<f32>>>,
}

impl Env for RecordingBox {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Box {
            low: vec![-2.0, 0.0].into(),
            high: vec![2.0, 1.0].into(),
        }
    }
    fn reset(&mut self, _seed: Option<u64>, mut obs: ObsBuf<'_>) {
        obs.write_f32(&[0.5, -0.5]);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        self.received
            .lock()
            .unwrap()
            .extend_from_slice(action.values());
        obs.write_f32(&[0.5, -0.5]);
        Step::game(0.0, false, false)
    }
}

#[test]
fn the_environment_receives_clipped_scaled_samples_and_the_buffer_keeps_them_unclipped() {
    let received = Arc::new(Mutex::new(Vec::new()));
    let env = Box::new(RecordingBox {
        received: received.clone(),
    }) as Box<dyn Env>;
    let mut envs = VecEnv::from_envs(vec![env], vec![1], 1).unwrap();
    envs.reset();
    let spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![8],
            activation: Activation::Tanh,
        },
        common::orthogonal_init(),
    );
    let vs = VarStore::new(Device::Cpu);
    let model = ActorCritic::new(&vs.root(), &spec, &[2], envs.action_space().clone()).unwrap();
    // A wide policy (sigma 3) samples far outside the unit box.
    tch::no_grad(|| {
        for (name, mut t) in vs.variables() {
            if name == "policy_log_std" {
                let _ = t.fill_(3f64.ln());
            }
        }
    });
    let kind = ActionKind::Box { dim: 2 };
    let steps = 200;
    let mut buffer = RolloutBuffer::new(steps, 1, &[2], kind, Device::Cpu).unwrap();
    let collector = RolloutCollector::new(1, 1, &[2], kind).unwrap();
    // The samples come from the global generator: no other test may draw meanwhile.
    let _rng = common::torch_rng();
    tch::manual_seed(11);
    let last = collector
        .collect(&model, &mut envs, &mut buffer, &mut Phases::default())
        .unwrap();
    let stored = buffer.gae_batch(&last, 0.9, 0.9).unwrap().actions;
    let stored = Vec::<f32>::try_from(stored.reshape([-1])).unwrap();
    let sent = received.lock().unwrap().clone();
    assert_eq!(sent.len(), stored.len());
    let (mut clipped, mut inside) = (0, 0);
    for (k, (&u, &a)) in stored.iter().zip(&sent).enumerate() {
        let (low, high, center, half) = if k % 2 == 0 {
            (-2.0, 2.0, 0.0, 2.0)
        } else {
            (0.0, 1.0, 0.5, 0.5)
        };
        let want = (center + half * u).clamp(low, high);
        assert!(
            (a - want).abs() < 1e-6,
            "value {k}: stored {u}, sent {a}, expected {want}"
        );
        if u.abs() > 1.0 {
            clipped += 1;
        } else {
            inside += 1;
        }
    }
    // Both cases occurred: clipping was exercised and the buffer kept what was sampled.
    assert!(
        clipped > 50 && inside > 50,
        "{clipped} clipped, {inside} inside"
    );
}

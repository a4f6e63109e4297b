//! What the rules of the off-policy learners over a bounded box (SAC, TD3) share: the action
//! box their tanh-squashed actors' unit-box actions scale to, the uniform warm-up actions, the
//! seeding of an update's noise, the one-step schedule they hand the skeleton, and the
//! checkpoint counters of their grouped optimizers.

use anyhow::{Result, bail, ensure};
use tch::{Device, Kind, Tensor};

use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::learner::Setting;
use crate::algo::off_policy::{ActAt, ReturnSpec, Schedule, TransitionBatch};
use crate::algo::optim::Optimizer;
use crate::algo::storage::host_rows::host_actions;
use crate::nn::ActionBounds;
use crate::seeds::{Purpose, derived_seed};

/// A box learner's rule's place: its action box, and the seeds of its update noise.
pub struct BoxActing {
    pub bounds: ActionBounds,
    pub action_dim: i64,
    seed: u64,
    rank: u64,
}

impl BoxActing {
    /// For `algorithm` on this rank's environments; an error for a discrete or unbounded box.
    pub fn new(algorithm: &str, setting: &Setting) -> Result<BoxActing> {
        let space = setting.envs.action_space();
        Ok(BoxActing {
            bounds: squashable_bounds(algorithm, space, setting.device)?,
            action_dim: space.dim() as i64,
            seed: setting.experiment.seed,
            rank: setting.rank as u64,
        })
    }

    /// The environments' actions for `obs`: uniform in the box while warming up, else
    /// `policy`'s unit-box action; scaled to the bounds.
    pub fn act(
        &self,
        obs: &Tensor,
        at: ActAt,
        policy: impl FnOnce() -> Result<Tensor>,
    ) -> Result<ActionBatch> {
        let unit = if at.warming_up {
            let shape = [obs.size()[0], self.action_dim];
            Tensor::rand(shape, (Kind::Float, obs.device())) * 2.0 - 1.0
        } else {
            policy()?
        };
        let action = self.bounds.scale(&unit);
        host_actions(
            &action,
            ActionKind::Box {
                dim: self.action_dim as usize,
            },
        )
    }

    /// The batch's actions in the unit box, after seeding torch's generator for the noise of
    /// gradient step `step` (a function of the seed, the rank and the step, so a resumed run
    /// draws what the uninterrupted one would have); an error for discrete actions.
    pub fn prepare_update(
        &self,
        algorithm: &str,
        batch: &TransitionBatch,
        step: u64,
    ) -> Result<Tensor> {
        ensure!(
            batch.actions.is_floating_point(),
            "{algorithm} needs box actions, got a batch of {:?}",
            batch.actions.kind()
        );
        tch::manual_seed(derived_seed(self.seed, Purpose::UpdateNoise, self.rank, step) as i64);
        Ok(self.bounds.unscale(&batch.actions))
    }
}

/// The skeleton's schedule and one-step returns for a box learner's settings.
pub fn one_step_schedule(
    learning_starts: u64,
    train_frequency: u64,
    gradient_steps: u64,
    checkpoint_replay: bool,
    gamma: f64,
) -> (Schedule, ReturnSpec) {
    let schedule = Schedule {
        learning_starts,
        train_frequency,
        gradient_steps,
        checkpoint_replay,
    };
    let returns = ReturnSpec {
        n_step: 1,
        gamma,
        priority_alpha: None,
    };
    (schedule, returns)
}

/// The checkpoint counter of optimizer `name`'s step count.
fn optimizer_counter(name: &str) -> &'static str {
    match name {
        "actor" => "actor_optimizer_steps",
        "critic" => "critic_optimizer_steps",
        _ => "alpha_optimizer_steps",
    }
}

/// A box learner's checkpoint counters: its `gradient_steps`, and the step count of each of
/// the optimizer `groups` that `opt` has (`actor_optimizer_steps`, ...).
pub fn counters(gradient_steps: u64, opt: &Optimizer, groups: &[&str]) -> Vec<(&'static str, u64)> {
    let steps = groups.iter().filter_map(|name| {
        let g = opt.group(name).ok()?;
        Some((optimizer_counter(name), opt.group_step_count(g)))
    });
    std::iter::once(("gradient_steps", gradient_steps))
        .chain(steps)
        .collect()
}

/// Restores the [`counters`] entry `counter` into `gradient_steps` or `opt`; an error, naming
/// `algorithm`'s learner, for a counter it does not have.
pub fn set_counter(
    algorithm: &str,
    (gradient_steps, opt): (&mut u64, &mut Optimizer),
    groups: &[&str],
    counter: &str,
    value: u64,
) -> Result<()> {
    if counter == "gradient_steps" {
        *gradient_steps = value;
        return Ok(());
    }
    let group = groups
        .iter()
        .find(|g| optimizer_counter(g) == counter)
        .filter(|g| opt.group(g).is_ok());
    let Some(group) = group else {
        bail!("the {algorithm} learner has no counter {counter}");
    };
    let g = opt.group(group)?;
    opt.set_group_step_count(g, value);
    Ok(())
}

/// The bounds a tanh-squashed actor's unit-box actions are scaled to (SAC's, TD3's); an error,
/// naming `algorithm`, for a discrete space or a box with an infinite bound.
pub fn squashable_bounds(
    algorithm: &str,
    space: &tandem_env::ActionSpace,
    device: Device,
) -> Result<ActionBounds> {
    ensure!(
        space.is_box(),
        "{algorithm} chooses box actions, but the environment takes {space}"
    );
    let bounds = ActionBounds::new(space, device)?;
    ensure!(
        bounds.is_bounded(),
        "{algorithm} squashes its actions into the action box, but {space} is unbounded in \
         some dimension; give the environment finite bounds (or wrap it so it has them)"
    );
    Ok(bounds)
}

/// What SAC's and TD3's learners share: one grouped optimiser over every trainable tensor (the
/// actor's group, the critics', SAC's temperature) and a count of gradient steps. Each learner
/// gives its optimiser, counters and networks; the rest is read from them here.
pub trait BoxLearner {
    fn optimizer(&self) -> &Optimizer;
    fn gradient_steps(&self) -> u64;
    /// The gradient-step count and the optimiser, as a resume sets them.
    fn counters_mut(&mut self) -> (&mut u64, &mut Optimizer);
    /// Every network's tensors by name, online and target (`model.*`, `target.*`).
    fn named_state(&self) -> Vec<(String, Tensor)>;

    /// Every trainable tensor, group after group (each in name order): the list DDP is built
    /// over and every step synchronises.
    fn trainable_parameters(&self) -> Vec<Tensor> {
        self.optimizer()
            .parameters()
            .iter()
            .map(Tensor::shallow_clone)
            .collect()
    }

    /// The parameters of optimizer group `name` (`actor`, `critic`, SAC's `alpha`).
    fn group_parameters(&self, name: &str) -> Result<&[Tensor]> {
        let optimizer = self.optimizer();
        Ok(optimizer.group_parameters(optimizer.group(name)?))
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.optimizer().state_tensors()
    }
}

/// The `OffPolicyRule` methods a box learner's rule (SAC's, TD3's) hands alike to its learner
/// `self.$learner`: its parameters, networks, optimiser state, gradient steps, and counters
/// under the optimiser groups the rule's module names `GROUPS`.
macro_rules! box_learner_methods {
    ($learner:ident, $name:literal) => {
        fn trainable_parameters(&self) -> Vec<Tensor> {
            self.$learner.trainable_parameters()
        }

        fn networks(&self) -> Vec<(String, Tensor)> {
            self.$learner.named_state()
        }

        fn optimizer_state(&self) -> Vec<(String, Tensor)> {
            self.$learner.optimizer_state()
        }

        fn counters(&self) -> Vec<(&'static str, u64)> {
            let learner = &self.$learner;
            $crate::algo::off_policy::box_rule::counters(
                learner.gradient_steps(),
                learner.optimizer(),
                &GROUPS,
            )
        }

        fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
            let counters = self.$learner.counters_mut();
            $crate::algo::off_policy::box_rule::set_counter($name, counters, &GROUPS, name, value)
        }

        fn gradient_steps(&self) -> u64 {
            self.$learner.gradient_steps()
        }
    };
}
pub(crate) use box_learner_methods;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discrete_and_unbounded_spaces_are_refused() {
        use tandem_env::ActionSpace;
        let err = squashable_bounds("sac", &ActionSpace::discrete(3), Device::Cpu).unwrap_err();
        assert!(
            err.to_string().starts_with("sac chooses box actions"),
            "{err}"
        );
        let open = ActionSpace::Box {
            low: vec![-1.0, f32::NEG_INFINITY].into(),
            high: vec![1.0, f32::INFINITY].into(),
        };
        let err = squashable_bounds("td3", &open, Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("td3 squashes") && err.contains("is unbounded in some dimension"),
            "{err}"
        );
        let bounded = ActionSpace::uniform_box(2, -2.0, 2.0);
        assert!(squashable_bounds("sac", &bounded, Device::Cpu).is_ok());
    }

    #[test]
    fn counters_round_trip_and_an_unknown_or_absent_counter_is_an_error() {
        use crate::algo::optim::OptimizerSpec;
        let stores: Vec<tch::nn::VarStore> = (0..2)
            .map(|_| tch::nn::VarStore::new(Device::Cpu))
            .collect();
        for vs in &stores {
            let _ = vs.root().zeros("w", &[2]);
        }
        let spec = OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        };
        let mut opt =
            Optimizer::grouped(&[("actor", &stores[0]), ("critic", &stores[1])], spec).unwrap();
        let groups = ["actor", "critic", "alpha"];
        let mut steps = 0u64;
        for (name, value) in [
            ("gradient_steps", 7),
            ("actor_optimizer_steps", 3),
            ("critic_optimizer_steps", 7),
        ] {
            set_counter("td3", (&mut steps, &mut opt), &groups, name, value).unwrap();
        }
        assert_eq!(
            counters(steps, &opt, &groups),
            vec![
                ("gradient_steps", 7),
                ("actor_optimizer_steps", 3),
                ("critic_optimizer_steps", 7)
            ]
        );
        for absent in ["alpha_optimizer_steps", "optimizer_steps"] {
            let err = set_counter("td3", (&mut steps, &mut opt), &groups, absent, 1).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("the td3 learner has no counter {absent}")
            );
        }
    }
}

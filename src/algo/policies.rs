//! The learners of a run, keyed by the policy each trains ([`Policies`]): what the run skeleton
//! drives. A run trains one policy today, the experiment's `algorithm`, named [`SOLE`]; the
//! multi-agent work adds the mapping from agents to several (docs/architecture.md).
//!
//! Every policy is learned data-parallel over all the ranks: their trainable tensors form one
//! list, policy after policy, that DDP averages. What a checkpoint, a fingerprint, a counter or
//! a log names of a policy is its learner's name prefixed `policy.<name>.` (scalar tags
//! `policy/<name>/`), except with one policy, whose names stay the learner's own, so that the
//! checkpoints of a one-policy run are those it wrote before policies existed.

use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use tch::{Device, Tensor};

use tandem_config::Experiment;
use tandem_env::VecEnv;

use super::learner::{Learner, Resumed, Round};

/// The name of a run's one policy.
pub const SOLE: &str = "default";

/// The learners of a run by policy name, in the order they were given (the order of their
/// tensors in every list).
pub struct Policies {
    learners: Vec<(String, Box<dyn Learner>)>,
}

impl Policies {
    /// This rank's learner of the experiment's algorithm, its one policy.
    pub fn build(
        experiment: &Experiment,
        envs: &VecEnv,
        rank: usize,
        world: usize,
        device: Device,
    ) -> Result<Policies> {
        let learner = super::build::build(experiment, envs, rank, world, device)?;
        Policies::of(vec![(SOLE.to_string(), learner)])
    }

    /// Learners by policy name: at least one, names unique, and all advancing the run alike
    /// (the same global steps an update and updates a round), as the skeleton counts one run.
    pub fn of(learners: Vec<(String, Box<dyn Learner>)>) -> Result<Policies> {
        let Some((_, first)) = learners.first() else {
            bail!("a run trains at least one policy");
        };
        let pace = (first.steps_per_update(), first.updates_per_round());
        for (i, (name, learner)) in learners.iter().enumerate() {
            ensure!(
                !learners[..i].iter().any(|(n, _)| n == name),
                "two policies are named {name}"
            );
            ensure!(
                (learner.steps_per_update(), learner.updates_per_round()) == pace,
                "policy {name} advances the run by {} steps an update and {} updates a round, \
                 the first policy by {} and {}",
                learner.steps_per_update(),
                learner.updates_per_round(),
                pace.0,
                pace.1
            );
        }
        Ok(Policies { learners })
    }

    /// The name under which policy `policy`'s `name` is kept, `sep` between the parts.
    fn key(&self, policy: &str, name: &str, sep: char) -> String {
        match self.learners.len() {
            1 => name.to_string(),
            _ => format!("policy{sep}{policy}{sep}{name}"),
        }
    }

    /// Every learner's named tensors, keyed by policy.
    fn keyed(&self, of: impl Fn(&dyn Learner) -> Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
        self.learners
            .iter()
            .flat_map(|(policy, learner)| {
                of(learner.as_ref())
                    .into_iter()
                    .map(move |(name, t)| (self.key(policy, &name, '.'), t))
            })
            .collect()
    }

    /// Global steps one update adds (all ranks together): every policy's alike.
    pub fn steps_per_update(&self) -> u64 {
        self.learners[0].1.steps_per_update()
    }

    pub fn updates_per_round(&self) -> u64 {
        self.learners[0].1.updates_per_round()
    }

    /// Every policy's trainable tensors, policy after policy: the list DDP averages.
    pub fn trainable_parameters(&self) -> Vec<Tensor> {
        let each = self.learners.iter().map(|(_, l)| l.trainable_parameters());
        each.flatten().collect()
    }

    pub fn networks(&self) -> Vec<(String, Tensor)> {
        self.keyed(|l| l.networks())
    }

    pub fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.keyed(|l| l.optimizer_state())
    }

    /// Every tensor a checkpoint holds and a resume restores (see [`Learner::state`]).
    pub fn state(&self) -> Vec<(String, Tensor)> {
        self.keyed(|l| l.state())
    }

    /// Every learner's counters, keyed by policy.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let keyed = self.learners.iter().flat_map(|(policy, learner)| {
            let counters = learner.counters().into_iter();
            counters.map(move |(name, value)| (self.key(policy, name, '.'), value))
        });
        keyed.collect()
    }

    /// Sets the counter [`Policies::counters`] names `key`.
    pub fn set_counter(&mut self, key: &str, value: u64) -> Result<()> {
        let several = self.learners.len() > 1;
        for (policy, learner) in &mut self.learners {
            let name = match several {
                false => Some(key),
                true => key.strip_prefix(&format!("policy.{policy}.")),
            };
            if let Some(name) = name {
                return learner.set_counter(name, value);
            }
        }
        bail!("no policy has the counter {key}")
    }

    /// One round of the run. With one policy, its learner's round over the rank's environments;
    /// several act together only in a multi-agent environment, which picks each agent's policy.
    pub fn round(&mut self, envs: &mut VecEnv, round: Round) -> Result<()> {
        match &mut self.learners[..] {
            [(_, learner)] => learner.round(envs, round),
            _ => bail!(
                "{} policies need a multi-agent environment to act in; tandem's environments \
                 have one agent",
                self.learners.len()
            ),
        }
    }

    /// Every learner's scalars of its latest update, tagged by policy.
    pub fn scalars(&self) -> Vec<(String, f64)> {
        let keyed = self.learners.iter().flat_map(|(policy, learner)| {
            let scalars = learner.scalars().into_iter();
            scalars.map(move |(tag, value)| (self.key(policy, tag, '/'), value))
        });
        keyed.collect()
    }

    /// Whether any learner's latest update diverged.
    pub fn diverged(&self) -> bool {
        self.learners.iter().any(|(_, l)| l.diverged())
    }

    /// Every learner's fields of `summary.json`, keyed by policy (`_` between the parts).
    pub fn summary_fields(&self) -> Vec<(String, String)> {
        let keyed = self.learners.iter().flat_map(|(policy, learner)| {
            let fields = learner.summary_fields().into_iter();
            fields.map(move |(name, value)| (self.key(policy, name, '_'), value))
        });
        keyed.collect()
    }

    /// Each learner's per-rank files, in a folder of its policy's where there are several.
    pub fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        let several = self.learners.len() > 1;
        for (policy, learner) in &mut self.learners {
            let dir = policy_dir(dir, policy, several);
            if several {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            learner
                .save_rank_files(&dir, global_step)
                .with_context(|| format!("policy {policy}"))?;
        }
        Ok(())
    }

    pub fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        let several = self.learners.len() > 1;
        for (policy, learner) in &mut self.learners {
            let dir = policy_dir(resumed.dir, policy, several);
            let resumed = Resumed {
                dir: &dir,
                ..*resumed
            };
            learner
                .restore_rank_files(&resumed)
                .with_context(|| format!("policy {policy}"))?;
        }
        Ok(())
    }
}

/// Where a policy's per-rank files go in a checkpoint directory: the directory itself for a
/// run's one policy, `policy-<name>/` where there are several (a save makes it; a restore only
/// reads it).
fn policy_dir(dir: &Path, policy: &str, several: bool) -> std::path::PathBuf {
    match several {
        false => dir.to_path_buf(),
        true => dir.join(format!("policy-{policy}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::learner::Scalars;

    /// A learner with one tensor, one counter, one scalar and one summary field, advancing the
    /// run by `steps` an update, that writes a file of its own at a checkpoint.
    struct Fake {
        weight: Tensor,
        optimizer_steps: u64,
        steps: u64,
    }

    fn fake(value: f32, steps: u64) -> Box<dyn Learner> {
        Box::new(Fake {
            weight: Tensor::from_slice(&[value]),
            optimizer_steps: value as u64,
            steps,
        })
    }

    impl Learner for Fake {
        fn steps_per_update(&self) -> u64 {
            self.steps
        }
        fn trainable_parameters(&self) -> Vec<Tensor> {
            vec![self.weight.shallow_clone()]
        }
        fn networks(&self) -> Vec<(String, Tensor)> {
            vec![("model.w".into(), self.weight.shallow_clone())]
        }
        fn optimizer_state(&self) -> Vec<(String, Tensor)> {
            Vec::new()
        }
        fn counters(&self) -> Vec<(&'static str, u64)> {
            vec![("optimizer_steps", self.optimizer_steps)]
        }
        fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
            ensure!(name == "optimizer_steps", "no counter {name}");
            self.optimizer_steps = value;
            Ok(())
        }
        fn round(&mut self, _envs: &mut VecEnv, _round: Round) -> Result<()> {
            bail!("not run in these tests")
        }
        fn scalars(&self) -> Scalars {
            vec![("loss/policy", self.optimizer_steps as f64)]
        }
        fn diverged(&self) -> bool {
            self.optimizer_steps == 99
        }
        fn summary_fields(&self) -> Vec<(&'static str, String)> {
            vec![("gradient_steps", self.optimizer_steps.to_string())]
        }
        fn save_rank_files(&mut self, dir: &Path, _global_step: u64) -> Result<()> {
            Ok(std::fs::write(
                dir.join("rank0.bin"),
                [self.optimizer_steps as u8],
            )?)
        }
    }

    fn names<T>(named: &[(String, T)]) -> Vec<&str> {
        named.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn one_policy_keeps_its_learners_names() {
        let mut one = Policies::of(vec![(SOLE.into(), fake(3.0, 8))]).unwrap();
        assert_eq!(names(&one.state()), ["model.w"]);
        assert_eq!(one.counters(), [("optimizer_steps".to_string(), 3)]);
        assert_eq!(one.scalars(), [("loss/policy".to_string(), 3.0)]);
        assert_eq!(names(&one.summary_fields()), ["gradient_steps"]);
        one.set_counter("optimizer_steps", 7).unwrap();
        assert_eq!(one.counters()[0].1, 7);
        assert_eq!(one.steps_per_update(), 8);
    }

    #[test]
    fn several_policies_are_keyed_by_name_in_every_list() {
        let learners = vec![("red".into(), fake(1.0, 8)), ("blue".into(), fake(2.0, 8))];
        let mut two = Policies::of(learners).unwrap();
        assert_eq!(
            names(&two.state()),
            ["policy.red.model.w", "policy.blue.model.w"]
        );
        assert_eq!(two.trainable_parameters().len(), 2);
        assert_eq!(
            names(&two.counters()),
            ["policy.red.optimizer_steps", "policy.blue.optimizer_steps"]
        );
        assert_eq!(
            names(&two.scalars()),
            ["policy/red/loss/policy", "policy/blue/loss/policy"]
        );
        assert_eq!(
            names(&two.summary_fields()),
            ["policy_red_gradient_steps", "policy_blue_gradient_steps"]
        );
        two.set_counter("policy.blue.optimizer_steps", 99).unwrap();
        assert_eq!(two.counters()[1].1, 99);
        assert!(two.diverged(), "the blue policy's learner diverged");
        let unknown = two.set_counter("optimizer_steps", 1).unwrap_err();
        assert!(unknown.to_string().contains("no policy has"), "{unknown}");
        let dir = std::env::temp_dir().join(format!("tandem-policies-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        two.save_rank_files(&dir, 0).unwrap();
        assert_eq!(
            std::fs::read(dir.join("policy-red/rank0.bin")).unwrap(),
            [1]
        );
        assert_eq!(
            std::fs::read(dir.join("policy-blue/rank0.bin")).unwrap(),
            [99]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn policies_must_be_named_once_and_advance_the_run_alike() {
        let err = |learners| Policies::of(learners).err().unwrap().to_string();
        assert!(err(Vec::new()).contains("at least one"));
        let twice = vec![("a".into(), fake(1.0, 8)), ("a".into(), fake(1.0, 8))];
        assert!(err(twice).contains("two policies are named a"));
        let paces = vec![("a".into(), fake(1.0, 8)), ("b".into(), fake(1.0, 16))];
        assert!(err(paces).contains("policy b advances the run by 16 steps"));
    }
}

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

use super::league::{League, Taken};
use super::learner::{Learner, Resumed, Round, SeatedLearner, Setting};
use super::sampling::collect::Draws;
use super::sampling::joint::collect_joint;
use super::seats::{Seats, owners};

/// The name of a run's one policy.
pub const SOLE: &str = "default";

/// The learners of a run by policy name, in the order they were given (the order of their
/// tensors in every list).
pub struct Policies {
    learners: Vec<(String, Box<dyn Learner>)>,
    /// What names a joint round's draws (the run's seed, this rank).
    seed: u64,
    rank: usize,
    /// The policy of each row of the rank's batch, where there are several (else empty: 0).
    row_policy: Vec<usize>,
    /// The snapshots the one policy plays against, where the experiment has a league.
    league: Option<League>,
}

impl Policies {
    /// This rank's learners: the experiment's algorithm for its one policy, or one learner of
    /// it for each policy of `train.policies`, each playing its agents' rows of the batch.
    pub fn build(
        experiment: &Experiment,
        envs: &VecEnv,
        rank: usize,
        world: usize,
        device: Device,
    ) -> Result<Policies> {
        let all_rows = Setting {
            experiment,
            envs,
            rank,
            world,
            device,
            seats: None,
        };
        let plans = seated_plans(experiment, envs)?;
        let mut row_policy = Vec::new();
        let mut league = None;
        let learners = match plans.as_slice() {
            [] if experiment.league.every.is_some() => {
                let (built, seats) = League::new(experiment, envs, rank, device)?;
                league = Some(built);
                let setting = Setting {
                    seats: Some(&seats),
                    ..all_rows
                };
                vec![(SOLE.to_string(), super::build::build(&setting)?)]
            }
            [] => vec![(SOLE.to_string(), super::build::build(&all_rows)?)],
            plans => {
                let mut learners = Vec::with_capacity(plans.len());
                let owns = (plans.iter())
                    .map(|plan| experiment_of(experiment, &plan.name))
                    .collect::<Result<Vec<_>>>()?;
                let seats: Vec<Seats> = (plans.iter().zip(&owns))
                    .map(|(plan, own)| Seats::of_plan(own, envs, plan))
                    .collect();
                row_policy = owners(&seats, envs.num_envs());
                for ((plan, seats), own) in plans.iter().zip(&seats).zip(&owns) {
                    let setting = Setting {
                        experiment: own,
                        seats: Some(seats),
                        ..all_rows
                    };
                    let learner = super::build::build(&setting)
                        .with_context(|| format!("policy {}", plan.name))?;
                    learners.push((plan.name.clone(), learner));
                }
                learners
            }
        };
        let mut policies = Policies::of(learners)?;
        policies.seed = experiment.seed;
        policies.rank = rank;
        policies.row_policy = row_policy;
        policies.league = league;
        Ok(policies)
    }

    /// Learners by policy name: at least one, names unique. Several policies play seats of
    /// one batch ([`Learner::seated`]), all stepping it together; each advances the run by
    /// the steps of its own rows.
    pub fn of(learners: Vec<(String, Box<dyn Learner>)>) -> Result<Policies> {
        ensure!(!learners.is_empty(), "a run trains at least one policy");
        for (i, (name, _)) in learners.iter().enumerate() {
            ensure!(
                !learners[..i].iter().any(|(n, _)| n == name),
                "two policies are named {name}"
            );
        }
        Ok(Policies {
            learners,
            seed: 0,
            rank: 0,
            row_policy: Vec::new(),
            league: None,
        })
    }

    /// The name under which policy `policy`'s `name` is kept, `sep` between the parts.
    fn key(&self, policy: &str, name: &str, sep: char) -> String {
        key(self.learners.len(), policy, name, sep)
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

    /// The policies' names, in their order.
    pub fn names(&self) -> Vec<&str> {
        self.learners
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The index of the policy that plays row `row` of the rank's batch.
    pub fn of_row(&self, row: usize) -> usize {
        self.row_policy.get(row).copied().unwrap_or(0)
    }

    /// Whether row `row`'s episodes are a learner's, which the run scores (not a league
    /// snapshot's).
    pub fn scores_row(&self, row: usize) -> bool {
        self.league.as_ref().is_none_or(|l| l.is_learners(row))
    }

    /// Global steps one update adds (all ranks together): every policy's rows' steps, and the
    /// rows of a league's snapshots, as many again for each other agent of a game.
    pub fn steps_per_update(&self) -> u64 {
        let learners: u64 = self
            .learners
            .iter()
            .map(|(_, l)| l.steps_per_update())
            .sum();
        learners * self.league.as_ref().map_or(1, |l| l.agents() as u64)
    }

    /// The league, where the run has one.
    pub fn league(&self) -> Option<&League> {
        self.league.as_ref()
    }

    /// Adds snapshots taken at `step` to the league ([`League::add`]).
    pub fn add_to_league(&mut self, taken: Vec<Taken>, step: u64) -> Result<()> {
        let league = self.league.as_mut().context("the run has no league")?;
        league.add(taken, step)
    }

    /// What a checkpoint keeps of the league ([`League::state`]); nothing without one.
    pub fn league_state(&self) -> Vec<(String, Tensor)> {
        self.league.as_ref().map_or_else(Vec::new, League::state)
    }

    /// The league a checkpoint's `tensors` hold, where the run has one.
    pub fn restore_league(&mut self, tensors: &[(String, Tensor)]) -> Result<()> {
        match &mut self.league {
            Some(league) => league.restore(tensors),
            None => Ok(()),
        }
    }

    /// Each policy's trainable tensors, policy after policy: the parts DDP averages one at a
    /// time (`Ddp::with_parts`), in the order [`Collective::select_part`] names them.
    pub fn parameter_parts(&self) -> Vec<Vec<Tensor>> {
        let each = self.learners.iter().map(|(_, l)| l.trainable_parameters());
        each.collect()
    }

    /// Every learner takes `experiment`'s explored settings ([`Learner::retune`]): a population
    /// member's, whose one policy this is.
    pub fn retune(&mut self, experiment: &Experiment) -> Result<()> {
        for (_, learner) in &mut self.learners {
            learner.retune(experiment)?;
        }
        Ok(())
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

    /// One round of the run. With one policy that plays every row as it is, its learner's
    /// round over the rank's environments; with seats (several policies, or a centralised
    /// critic's input), a joint round: all collect at once, then each learns from its rows.
    pub fn round(&mut self, envs: &mut VecEnv, round: Round) -> Result<()> {
        match &mut self.learners[..] {
            [(_, learner)] if self.row_policy.is_empty() && self.league.is_none() => {
                learner.round(envs, round)
            }
            _ => self.joint_round(envs, round),
        }
    }

    /// One rollout of every policy's seats, then each policy's update, its gradients
    /// averaged over the ranks in its own part of the collective; the run advances once.
    fn joint_round(&mut self, envs: &mut VecEnv, round: Round) -> Result<()> {
        let Round {
            counters,
            limits,
            collective,
            phases,
        } = round;
        let steps = self.steps_per_update();
        let draws = Draws {
            seed: self.seed,
            rank: self.rank,
            update: counters.update,
        };
        if let Some(league) = &mut self.league {
            league.draw_all(counters.update)?;
        }
        let mut seated: Vec<&mut dyn SeatedLearner> = self
            .learners
            .iter_mut()
            .map(|(name, learner)| {
                learner.seated().with_context(|| {
                    format!(
                        "policy {name} cannot play beside other policies: several policies \
                         need a synchronous, feed-forward on-policy learner (ppo or a2c)"
                    )
                })
            })
            .collect::<Result<_>>()?;
        let mut players: Vec<_> = seated.iter_mut().map(|s| s.player()).collect();
        let last_values = collect_joint(&mut players, self.league.as_mut(), envs, draws, phases)?;
        drop(players);
        for (part, (learner, last)) in seated.iter_mut().zip(&last_values).enumerate() {
            collective.select_part(part)?;
            // Each learner counts its update as a round of its own would; the run counts one.
            let mut own = *counters;
            let round = Round {
                counters: &mut own,
                limits,
                collective: &mut *collective,
                phases: &mut *phases,
            };
            learner.learn_collected(last, round)?;
        }
        drop(seated);
        collective.select_part(0)?;
        counters.update += 1;
        counters.global_step += steps;
        if let Some(league) = &mut self.league {
            league.updated(collective)?;
        }
        Ok(())
    }

    /// Every learner's scalars of its latest update, tagged by policy, and the league's.
    pub fn scalars(&self) -> Vec<(String, f64)> {
        let keyed = self.learners.iter().flat_map(|(policy, learner)| {
            let scalars = learner.scalars().into_iter();
            scalars.map(move |(tag, value)| (self.key(policy, tag, '/'), value))
        });
        let league = self.league.iter().flat_map(League::scalars);
        keyed
            .chain(league.map(|(tag, v)| (tag.to_string(), v)))
            .collect()
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
        if let Some(league) = &self.league {
            league.save_rank(dir, self.rank, global_step)?;
        }
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
        if let Some(league) = &mut self.league {
            league.restore_rank(resumed, self.rank)?;
        }
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

/// The policies that play seats of `envs`' batch, over its game's agents as built (a
/// pettingzoo environment's are known only then: its patterns are checked here, as the
/// resolver checks the catalogue's games').
pub fn seated_plans(
    experiment: &Experiment,
    envs: &VecEnv,
) -> Result<Vec<tandem_config::PolicyPlan>> {
    let agents = envs.agents();
    let misfits = experiment.policy_misfits(&agents);
    if !misfits.is_empty() {
        let said: Vec<String> = misfits.iter().map(|m| m.message(experiment)).collect();
        let ids: Vec<&str> = agents.iter().map(|(id, _)| id.as_str()).collect();
        anyhow::bail!(
            "train.policies does not fit the environment's agents ({}): {}",
            ids.join(", "),
            said.join("; ")
        );
    }
    Ok(experiment.seated_policies_among(&agents))
}

/// The experiment policy `name` learns by, with its own settings ([`Experiment::for_policy`]).
pub fn experiment_of(experiment: &Experiment, name: &str) -> Result<Experiment> {
    experiment
        .for_policy(name)
        .map_err(|diags| anyhow::anyhow!("policy {name}'s own settings: {diags}"))
}

/// The name under which policy `policy`'s `name` is kept in a run of `policies` policies:
/// `policy<sep><policy><sep><name>`, or `name` itself where the run has one (its checkpoints are
/// those of a run before policies existed). `tandem play` and evaluation name what they restore
/// by it too (`crate::cast`).
pub fn key(policies: usize, policy: &str, name: &str, sep: char) -> String {
    match policies {
        1 => name.to_string(),
        _ => format!("policy{sep}{policy}{sep}{name}"),
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
    fn policies_must_be_named_once_and_advance_the_run_by_all_their_rows() {
        let err = |learners| Policies::of(learners).err().unwrap().to_string();
        assert!(err(Vec::new()).contains("at least one"));
        let twice = vec![("a".into(), fake(1.0, 8)), ("a".into(), fake(1.0, 8))];
        assert!(err(twice).contains("two policies are named a"));
        let three_and_one = vec![("a".into(), fake(1.0, 24)), ("b".into(), fake(1.0, 8))];
        assert_eq!(Policies::of(three_and_one).unwrap().steps_per_update(), 32);
    }

    /// A learner that cannot share a batch (an off-policy one, or these fakes) stops a joint
    /// round before anything is collected, naming its policy.
    #[test]
    fn a_joint_round_needs_every_policy_seated() {
        let learners = vec![("red".into(), fake(1.0, 8)), ("blue".into(), fake(2.0, 8))];
        let mut two = Policies::of(learners).unwrap();
        let spec = tandem_env::EnvSpec::new(tandem_env::Game::Cartpole);
        let mut envs = VecEnv::new(&spec, &[1, 2], 1).unwrap();
        let mut counters = crate::algo::learner::Counters::default();
        let round = Round {
            counters: &mut counters,
            limits: crate::algo::learner::Limits {
                total_updates: 1,
                stop_step: 1,
                total_steps: 1,
            },
            collective: &mut crate::algo::Local,
            phases: &mut Default::default(),
        };
        let err = two.round(&mut envs, round).unwrap_err().to_string();
        assert!(
            err.contains("policy red cannot play beside other policies"),
            "{err}"
        );
        assert_eq!(counters.update, 0);
    }
}

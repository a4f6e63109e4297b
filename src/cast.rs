//! Who acts in a batch where a run's policies are judged rather than trained (`tandem play`,
//! evaluation during training): the run's one policy in every row, or each policy of a run of
//! several in its seats (`crate::algo::seats`), any of which may be replaced by uniformly random
//! moves (`tandem play --random`) to measure what the others learned.

use anyhow::{Context, Result};
use tch::{Device, Tensor};

use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::seats::{Seats, owners};
use crate::algo::storage::host_rows::{host_actions, rows_to_batch};
use crate::policy::Policy;
use tandem_config::Experiment;
use tandem_env::{ActionSpace, VecEnv};

/// The policies acting in a batch.
pub enum Cast {
    /// The run's one policy, reading observations of this shape.
    One(Policy, Vec<i64>),
    Several(Vec<Player>),
}

/// One policy of a run of several in its seats of the batch; without a network where it acts
/// uniformly at random (among the moves its action masks allow: `mask`, their length, 0 for
/// a game without masks).
pub struct Player {
    pub name: String,
    pub seats: Seats,
    pub policy: Option<Policy>,
    pub mask: usize,
}

impl Cast {
    /// Fresh networks of `experiment`'s policies for `envs` (to be filled from a checkpoint's
    /// or the learner's tensors by the names [`Cast::targets`] gives); the policies `random`
    /// names act at random.
    pub fn build(experiment: &Experiment, envs: &VecEnv, random: &[String]) -> Result<Cast> {
        let plans = crate::algo::policies::seated_plans(experiment, envs)?;
        if plans.is_empty() {
            if let Some(name) = random.first() {
                let said = format!(
                    "--random {name}: the run trained one policy; --random picks one of several"
                );
                return Err(crate::usage::UsageError(said).into());
            }
            let (spec, obs_shape) = crate::algo::learner::network_for(experiment, envs)?;
            let space = envs.action_space();
            let policy = Policy::build(experiment, &spec, &obs_shape, space, envs.num_envs())?;
            return Ok(Cast::One(policy, obs_shape));
        }
        if let Some(name) = random.iter().find(|r| !plans.iter().any(|p| &&p.name == r)) {
            let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
            let said = format!(
                "--random {name}: the run's policies are {}",
                names.join(", ")
            );
            return Err(crate::usage::UsageError(said).into());
        }
        let mask = match random.is_empty() {
            true => 0,
            false => mask_len(experiment, envs, "--random")?,
        };
        let mut players = Vec::with_capacity(plans.len());
        for plan in plans {
            let own = crate::algo::policies::experiment_of(experiment, &plan.name)?;
            let seats = Seats::of_plan(&own, envs, &plan);
            let policy = match random.contains(&plan.name) {
                true => None,
                false => Some(seated_policy(&own, envs, &seats)?),
            };
            players.push(Player {
                name: plan.name,
                seats,
                policy,
                mask,
            });
        }
        Ok(Cast::Several(players))
    }

    /// Every network's variables by the names the run's learners give them (`policy.<name>.`
    /// before each policy's where there are several).
    pub fn targets(&self) -> Vec<(String, Tensor)> {
        match self {
            Cast::One(policy, _) => policy.targets(),
            Cast::Several(players) => players
                .iter()
                .filter_map(|p| p.policy.as_ref().map(|policy| (p, policy)))
                .flat_map(|(p, policy)| {
                    let prefix = self.prefix(&p.name);
                    let named = policy.targets().into_iter();
                    named.map(move |(n, t)| (format!("{prefix}{n}"), t))
                })
                .collect(),
        }
    }

    /// What a policy's names start with in the learners' lists (`policies::key`): `policy.<name>.`
    /// where there are several, nothing for a run's one (a centralised critic's seats are one
    /// policy).
    fn prefix(&self, name: &str) -> String {
        let count = match self {
            Cast::One(..) => 1,
            Cast::Several(players) => players.len(),
        };
        crate::algo::policies::key(count, name, "", '.')
    }

    /// Takes up the learners' current networks (named as [`Cast::targets`] names them); every
    /// row's next observation starts an episode.
    pub fn copy_from(&mut self, networks: &[(String, Tensor)]) -> Result<()> {
        match self {
            Cast::One(policy, _) => policy.copy_from(networks),
            Cast::Several(players) => {
                let count = players.len();
                for p in players.iter_mut() {
                    let Some(policy) = &mut p.policy else {
                        continue;
                    };
                    let prefix = crate::algo::policies::key(count, &p.name, "", '.');
                    let own: Vec<(String, Tensor)> = networks
                        .iter()
                        .filter_map(|(n, t)| {
                            let name = n.strip_prefix(&prefix)?;
                            Some((name.to_string(), t.shallow_clone()))
                        })
                        .collect();
                    policy
                        .copy_from(&own)
                        .with_context(|| format!("policy {}", p.name))?;
                }
                Ok(())
            }
        }
    }

    /// Every row's action for the batch's current observations.
    pub fn act(&mut self, envs: &VecEnv, greedy: bool) -> Result<ActionBatch> {
        let kind = ActionKind::of(envs.action_space());
        let rows = envs.num_envs();
        match self {
            Cast::One(policy, obs_shape) => {
                let obs = rows_to_batch(envs.obs(), rows, obs_shape, Device::Cpu);
                let action = tch::no_grad(|| policy.act(&obs, greedy))?;
                host_actions(&action, kind)
            }
            Cast::Several(players) => {
                let mut all = match players.iter().any(|p| p.policy.is_none()) {
                    true => host_actions(&uniform(envs.action_space(), rows), kind)?,
                    false => ActionBatch::zeros(kind, rows),
                };
                for p in players.iter_mut() {
                    let Some(policy) = &mut p.policy else {
                        if p.mask > 0 {
                            let legal = legal_moves(envs, p.seats.rows(), p.mask);
                            p.seats.place_actions(&legal, &mut all);
                        }
                        continue;
                    };
                    let shape = [p.seats.input_len() as i64];
                    let mine = p.seats.observations(envs.obs());
                    let obs = rows_to_batch(&mine, p.seats.len(), &shape, Device::Cpu);
                    let action = tch::no_grad(|| policy.act(&obs, greedy))?;
                    p.seats
                        .place_actions(&host_actions(&action, kind)?, &mut all);
                }
                Ok(all)
            }
        }
    }

    /// After a batch step: a recurrent policy's state is zeroed where an episode ended (only a
    /// run of one policy has a recurrent core).
    pub fn stepped(&mut self, envs: &VecEnv) {
        if let Cast::One(policy, _) = self {
            policy.stepped(envs);
        }
    }

    /// The policies' names ([`Cast::One`]: none) and the index of the one that plays each of
    /// `rows` rows.
    pub fn names_by_row(&self, rows: usize) -> (Vec<String>, Vec<usize>) {
        let Cast::Several(players) = self else {
            return (Vec::new(), vec![0; rows]);
        };
        let names = players.iter().map(|p| p.name.clone()).collect();
        (names, owners(players.iter().map(|p| &p.seats), rows))
    }
}

/// A fresh network of the learner of a policy's `experiment` (its own) for the rows of
/// `seats`.
fn seated_policy(experiment: &Experiment, envs: &VecEnv, seats: &Seats) -> Result<Policy> {
    let (spec, obs_shape, rows) =
        crate::algo::learner::network_for_seats(experiment, envs, Some(seats))?;
    Policy::build(experiment, &spec, &obs_shape, envs.action_space(), rows)
}

/// How many entries at the end of each row's observation are the action mask that random
/// moves keep to: the discrete moves' count where the experiment has masks, 0 without. `option`
/// (`--random`) names what is refused for masks of other moves.
pub(crate) fn mask_len(experiment: &Experiment, envs: &VecEnv, option: &str) -> Result<usize> {
    let masked = experiment.env.game.action_mask() != tandem_config::ActionMask::None;
    match (masked, envs.action_space()) {
        (false, _) => Ok(0),
        (true, ActionSpace::Discrete { n }) => Ok(*n),
        (true, space) => {
            crate::usage::mistake!("{option} keeps to action masks of discrete moves, not {space}")
        }
    }
}

/// A move for each of `rows`, drawn uniformly (from the current torch seed) among those its
/// action mask, the last `mask` entries of its observation, allows.
pub(crate) fn legal_moves(envs: &VecEnv, rows: &[usize], mask: usize) -> ActionBatch {
    let len = envs.obs_len();
    let draw = |&row: &usize| {
        let allowed = &envs.obs()[(row + 1) * len - mask..(row + 1) * len];
        let legal: Vec<i64> = (0..mask as i64)
            .filter(|&a| allowed[a as usize] > 0.5)
            .collect();
        let pick = Tensor::randint(legal.len() as i64, [1], (tch::Kind::Int64, Device::Cpu));
        legal[pick.int64_value(&[0]) as usize]
    };
    ActionBatch::Discrete(rows.iter().map(draw).collect())
}

/// `rows` actions drawn uniformly from `space` (from the current torch seed).
pub(crate) fn uniform(space: &ActionSpace, rows: usize) -> Tensor {
    let rows = rows as i64;
    let options = |n: usize| Tensor::randint(n as i64, [rows], (tch::Kind::Int64, Device::Cpu));
    match space {
        ActionSpace::Discrete { n } => options(*n),
        ActionSpace::Box { low, high } => {
            let low = Tensor::from_slice(low);
            let high = Tensor::from_slice(high);
            let draw = Tensor::rand([rows, low.size()[0]], (tch::Kind::Float, Device::Cpu));
            draw * (&high - &low) + low
        }
        ActionSpace::MultiDiscrete { nvec } => {
            let each: Vec<Tensor> = nvec.iter().map(|&n| options(n)).collect();
            Tensor::stack(&each, 1)
        }
    }
}

//! Self-play against past selves ([`League`], the experiment's `league` section): the run's one
//! learner plays one seat of every game (agent g mod agents in game g,
//! [`Seats::league_sides`]), and a frozen snapshot of its network drawn from the league when
//! the game starts plays the others, sampling its actions as it learned to. Only the learner's
//! rows are learned from and scored.
//!
//! Every `league.every` steps the learner's parameters join the league (its initial ones first),
//! or, with `league.pool "population"`, every population member's (sent by the run,
//! `crate::train::population`); past `league.size` the oldest leave. The league keeps, for each snapshot, the learner's
//! record against it and the rating the learner had when it was taken; the learner's Elo
//! rating moves by its results against them. The records are summed over the learner's ranks
//! after every update, so every rank holds the same league and rank 0's checkpoint holds it
//! whole (`league.*` tensors); each rank keeps its games in progress (their opponents and
//! returns) beside it, so a resumed run whose environments continue plays on exactly as the
//! uninterrupted one, and one whose environments start afresh draws their opponents afresh.

use std::collections::VecDeque;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use tandem_config::{Experiment, OpponentRule};
use tandem_env::{ActionSpace, VecEnv};

use super::Collective;
use super::actions::{ActionBatch, ActionKind};
use super::learner::Resumed;
use super::seats::{Seats, is_league_learners, league_learner_agent};
use super::storage::host_rows::{host_actions, rows_to_batch};
use crate::nn::{ActorCritic, ActorCriticSpec, copy_named, named_parameters};
use crate::seeds::{Purpose, derived_seed};

/// How far one game moves the learner's Elo rating.
const ELO_K: f64 = 16.0;
/// The rating the learner starts from, and its initial parameters' snapshot with it.
const ELO_START: f64 = 1000.0;
/// The recent win rate is over at least this many of the learner's latest games.
const RECENT_GAMES: f64 = 100.0;

/// A game's result for the learner: its return above, equal to or below the best of its
/// opponents'. Its value is the result's index in a record (wins, draws, losses).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Win = 0,
    Draw = 1,
    Loss = 2,
}

/// Wins, draws and losses.
type Record = [f64; 3];

/// Numbers a snapshot's row of `league.records` holds.
const RECORD: usize = 7;

/// A snapshot to add ([`League::add`]): whose (`None`: the learner's own), its networks, and
/// the rating of whom it was taken of.
pub struct Taken {
    pub member: Option<usize>,
    pub networks: Vec<(String, Tensor)>,
    pub rating: f64,
}

/// A frozen copy of the learner's network, and how the learner has fared against it.
struct Snapshot {
    /// Its place in the order snapshots were taken (0: the initial parameters).
    id: u64,
    /// The run's step at which it was taken.
    step: u64,
    /// The rating of the learner it was taken of, when it was taken.
    rating: f64,
    /// The population member it was taken of (`league.pool "population"`); `None`: the
    /// learner's own.
    member: Option<usize>,
    /// The learner's wins, draws and losses against it, over the run.
    record: Record,
    /// The variables `model` reads.
    vs: VarStore,
    model: ActorCritic,
}

/// What a snapshot's network is: the learner's.
struct Blueprint {
    spec: ActorCriticSpec,
    obs_shape: Vec<i64>,
    action_space: ActionSpace,
    device: Device,
}

pub struct League {
    rule: OpponentRule,
    size: usize,
    every: u64,
    blueprint: Blueprint,
    agents: usize,
    /// For each agent of a game, the agents its result is against ([`rivals`]).
    rivals: Vec<Vec<usize>>,
    /// The snapshots' rows of the rank's batch.
    opponents: Seats,
    /// Oldest first.
    snapshots: Vec<Snapshot>,
    next_id: u64,
    rating: f64,
    /// Each game's opponent (a snapshot's id).
    playing: Vec<u64>,
    /// Each row's return in its current game.
    returns: Vec<f64>,
    /// This update's results on this rank, by snapshot (the `snapshots` order).
    tally: Vec<Record>,
    /// The latest updates' results over all ranks, oldest first: at least
    /// [`RECENT_GAMES`] games where the run has played them.
    recent: VecDeque<Record>,
    /// Whether every game has drawn its opponent since the league was built (or restored).
    drawn: bool,
    seed: u64,
    rank: usize,
}

impl League {
    /// The league of `experiment` (whose `league.every` is set) on this rank's `envs`, and the
    /// seats its learner plays; empty until [`League::add`] gives it the initial parameters
    /// (the run's, at its start).
    pub fn new(
        experiment: &Experiment,
        envs: &VecEnv,
        rank: usize,
        device: Device,
    ) -> Result<(League, Seats)> {
        let every = experiment
            .league
            .every
            .context("a league needs `league.every`")?;
        let agents = envs.agents_per_game();
        let games = envs.num_envs() / agents.max(1);
        ensure!(
            agents >= 2 && games.is_multiple_of(agents),
            "a league needs games of several agents, a multiple of agents a rank: {games} \
             game(s) of {agents} agent(s)"
        );
        let (learner, opponents) = Seats::league_sides(agents, games, envs.obs_len());
        let (spec, obs_shape, _) =
            super::learner::network_for_seats(experiment, envs, Some(&learner))?;
        let blueprint = Blueprint {
            spec,
            obs_shape,
            action_space: envs.action_space().clone(),
            device,
        };
        let league = League {
            rule: experiment.league.opponent,
            size: experiment.league.size as usize,
            every,
            blueprint,
            agents,
            rivals: rivals(&envs.teams()),
            opponents,
            snapshots: Vec::new(),
            next_id: 0,
            rating: ELO_START,
            playing: vec![0; games],
            returns: vec![0.0; games * agents],
            tally: Vec::new(),
            recent: VecDeque::new(),
            drawn: false,
            seed: experiment.seed,
            rank,
        };
        Ok((league, learner))
    }

    /// Agents of a game: the run's steps are the learner's times this.
    pub fn agents(&self) -> usize {
        self.agents
    }

    /// Rows of the rank's batch the snapshots play.
    pub fn opponent_rows(&self) -> usize {
        self.opponents.len()
    }

    /// Whether row `row`'s episodes are the learner's (the run's scores), not a snapshot's.
    pub fn is_learners(&self, row: usize) -> bool {
        is_league_learners(row, self.agents)
    }

    /// Whether the league holds no snapshot yet: the run's start, before [`League::add`] gives
    /// it the initial parameters.
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty()
    }

    /// The learner's rating.
    pub fn rating(&self) -> f64 {
        self.rating
    }

    /// Whether the update that took the run from `before` to `after` steps crossed a multiple
    /// of `league.every`: new snapshots are due.
    pub fn due(&self, before: u64, after: u64) -> bool {
        before / self.every != after / self.every
    }

    /// New snapshots taken at `step`: each the `networks` (named as the learner names them)
    /// of the learner, or of a member of its population, with that one's rating. Past the
    /// league's size the oldest leave, and the games they played draw again (from the draws
    /// of `step`).
    pub fn add(&mut self, taken: Vec<Taken>, step: u64) -> Result<()> {
        for t in taken {
            let snapshot = self.snapshot(self.next_id, step, t.member, t.rating, &t.networks)?;
            self.next_id += 1;
            self.snapshots.push(snapshot);
            self.tally.push([0.0; 3]);
        }
        let excess = self.snapshots.len().saturating_sub(self.size);
        let gone: Vec<u64> = self.snapshots.drain(..excess).map(|s| s.id).collect();
        self.tally.drain(..excess);
        if self.drawn && !gone.is_empty() {
            for game in 0..self.playing.len() {
                if gone.contains(&self.playing[game]) {
                    self.playing[game] = self.draw(step, u64::MAX, game);
                }
            }
        }
        Ok(())
    }

    /// Every game draws its opponent at `update`'s start, the first time (the run's start, or
    /// its resumption) and only then.
    pub fn draw_all(&mut self, update: u64) -> Result<()> {
        ensure!(!self.is_empty(), "the league holds no snapshot to play");
        if !self.drawn {
            for game in 0..self.playing.len() {
                self.playing[game] = self.draw(update, 0, game);
            }
            self.drawn = true;
        }
        Ok(())
    }

    /// A frozen network holding `networks`' parameters (named as the learner names them), of
    /// `member` (`None`: the learner's own) rated `rating`, with no record yet.
    fn snapshot(
        &self,
        id: u64,
        step: u64,
        member: Option<usize>,
        rating: f64,
        networks: &[(String, Tensor)],
    ) -> Result<Snapshot> {
        let b = &self.blueprint;
        let vs = VarStore::new(b.device);
        let model = ActorCritic::new(&vs.root(), &b.spec, &b.obs_shape, b.action_space.clone())?;
        let targets = named_parameters(&vs, "model");
        copy_named(networks, "the learner's tensor", &targets, |name| {
            format!("the league's snapshot {id} has no tensor `{name}`")
        })?;
        for (_, t) in &targets {
            let _ = t.shallow_clone().set_requires_grad(false);
        }
        Ok(Snapshot {
            id,
            step,
            rating,
            member,
            record: [0.0; 3],
            vs,
            model,
        })
    }

    /// The snapshot game `game` draws when it starts at step `t` of `update`'s rollout, by the
    /// league's rule.
    fn draw(&self, update: u64, t: u64, game: usize) -> u64 {
        let u = unit(self.seed, self.rank, update, t, game);
        let records: Vec<Record> = self.snapshots.iter().map(|s| s.record).collect();
        self.snapshots[choose(self.rule, &records, u)].id
    }

    /// Every snapshot's actions for the rows of the games it plays, into `actions`; the draws
    /// come from libtorch's generator, after the learner's.
    pub fn act(&self, envs: &VecEnv, actions: &mut ActionBatch) -> Result<()> {
        ensure!(
            self.drawn,
            "the league's games have not drawn their opponents"
        );
        let kind = ActionKind::of(envs.action_space());
        let obs = envs.obs();
        for snapshot in &self.snapshots {
            let rows: Vec<usize> = (self.opponents.rows().iter().copied())
                .filter(|&row| self.playing[row / self.agents] == snapshot.id)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let seats = self.opponents.with_rows(rows);
            let shape = [seats.input_len() as i64];
            let input = rows_to_batch(
                &seats.observations(obs),
                seats.len(),
                &shape,
                self.blueprint.device,
            );
            let chosen = tch::no_grad(|| snapshot.model.act(&input))?;
            let theirs = host_actions(&snapshot.model.env_actions(&chosen.actions), kind)?;
            seats.place_actions(&theirs, actions);
        }
        Ok(())
    }

    /// Counts the step `envs` just took: each row's reward into its game's returns, and the
    /// result of every game the learner's row finished, whose slot then draws its next
    /// opponent (at step `t` of `update`'s rollout).
    pub fn stepped(&mut self, envs: &VecEnv, update: u64, t: u64) {
        let step = (envs.rewards(), envs.terminated(), envs.truncated());
        self.count(step, update, t);
    }

    /// [`League::stepped`] on a step's rewards and flags, one per row.
    fn count(&mut self, step: (&[f32], &[bool], &[bool]), update: u64, t: u64) {
        let (rewards, terminated, truncated) = step;
        for (ret, &r) in self.returns.iter_mut().zip(rewards) {
            *ret += f64::from(r);
        }
        for game in 0..self.playing.len() {
            let first = game * self.agents;
            let seat = league_learner_agent(game, self.agents);
            let mine = first + seat;
            if !(terminated[mine] || truncated[mine]) {
                continue;
            }
            let theirs = (self.rivals[seat].iter())
                .map(|&agent| self.returns[first + agent])
                .fold(f64::NEG_INFINITY, f64::max);
            let outcome = outcome(self.returns[mine], theirs);
            if let Some(i) = self.index_of(self.playing[game]) {
                self.tally[i][outcome as usize] += 1.0;
            }
            self.returns[first..first + self.agents].fill(0.0);
            self.playing[game] = self.draw(update, t + 1, game);
        }
    }

    fn index_of(&self, id: u64) -> Option<usize> {
        self.snapshots.iter().position(|s| s.id == id)
    }

    /// After an update: its results summed over the learner's ranks into the records and the
    /// rating.
    pub fn updated(&mut self, collective: &mut dyn Collective) -> Result<()> {
        let mut flat: Vec<f64> = self.tally.iter().flatten().copied().collect();
        collective.all_reduce_sum(&mut flat)?;
        let results: Vec<Record> = flat.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
        self.rating += elo_change(self.rating, &self.snapshots, &results);
        let mut total = [0.0; 3];
        for (snapshot, result) in self.snapshots.iter_mut().zip(&results) {
            for k in 0..3 {
                snapshot.record[k] += result[k];
                total[k] += result[k];
            }
        }
        self.tally.iter_mut().for_each(|t| *t = [0.0; 3]);
        self.recent.push_back(total);
        while self.recent.len() > 1
            && games(&self.recent) - games_of(&self.recent[0]) >= RECENT_GAMES
        {
            self.recent.pop_front();
        }
        Ok(())
    }

    /// The league's scalars of the latest update: the learner's rating, its win, draw and
    /// score rates over its recent games, the snapshots held and the newest's step.
    pub fn scalars(&self) -> Vec<(&'static str, f64)> {
        let mut recent = [0.0; 3];
        for r in &self.recent {
            (0..3).for_each(|k| recent[k] += r[k]);
        }
        let n = recent.iter().sum::<f64>().max(1.0);
        vec![
            ("league/elo", self.rating),
            ("league/win_rate", recent[0] / n),
            ("league/draw_rate", recent[1] / n),
            ("league/score_rate", (recent[0] + recent[1] / 2.0) / n),
            ("league/games", self.recent.back().map_or(0.0, games_of)),
            ("league/snapshots", self.snapshots.len() as f64),
            (
                "league/newest_step",
                self.snapshots.last().map_or(0.0, |s| s.step as f64),
            ),
        ]
    }

    /// What a checkpoint keeps of the league: each snapshot's parameters (`league.<i>.model.*`,
    /// oldest first), their records (`league.records`: id, step, rating, wins, draws, losses,
    /// member (-1: the learner's own) a row) and the learner's rating, the next snapshot's id
    /// and the recent window (`league.state`).
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut named = Vec::new();
        let mut records = Vec::with_capacity(self.snapshots.len() * RECORD);
        for (i, s) in self.snapshots.iter().enumerate() {
            for (name, t) in named_parameters(&s.vs, "model") {
                named.push((format!("league.{i}.{name}"), t));
            }
            let member = s.member.map_or(-1.0, |m| m as f64);
            let [wins, draws, losses] = s.record;
            records.extend([
                s.id as f64,
                s.step as f64,
                s.rating,
                wins,
                draws,
                losses,
                member,
            ]);
        }
        let rows = self.snapshots.len() as i64;
        named.push((
            "league.records".into(),
            Tensor::from_slice(&records).reshape([rows, RECORD as i64]),
        ));
        // The rating, the next id, then the recent window's records, oldest first.
        let mut state = vec![self.rating, self.next_id as f64];
        state.extend(self.recent.iter().flatten());
        named.push(("league.state".into(), Tensor::from_slice(&state)));
        named
    }

    /// Writes this rank's games in progress (each one's opponent, each row's return so far)
    /// into checkpoint directory `dir`, with the run's step.
    pub fn save_rank(&self, dir: &Path, rank: usize, global_step: u64) -> Result<()> {
        let games = serde_json::json!({
            "global_step": global_step,
            "playing": self.playing,
            "returns": self.returns,
        });
        let file = games_file(dir, rank);
        crate::atomic::write_atomic(&file, games.to_string().as_bytes())
            .with_context(|| format!("cannot write {}", file.display()))
    }

    /// This rank's games in progress, where its environments continue the saved episodes:
    /// then a resumed run plays on exactly as the uninterrupted one; otherwise (or where the
    /// file does not match the checkpoint, with a warning) every game draws its opponent
    /// afresh.
    pub fn restore_rank(&mut self, resumed: &Resumed, rank: usize) -> Result<()> {
        if !resumed.envs_restored {
            tracing::info!("rank {rank}: fresh games draw their league opponents afresh");
            return Ok(());
        }
        let file = games_file(resumed.dir, rank);
        let read = || -> Result<(Vec<u64>, Vec<f64>)> {
            let text = std::fs::read_to_string(&file)?;
            let games: serde_json::Value = serde_json::from_str(&text)?;
            let step = games["global_step"].as_u64();
            ensure!(
                step == Some(resumed.global_step),
                "it was written at step {step:?}, the checkpoint at {}",
                resumed.global_step
            );
            let playing: Vec<u64> = serde_json::from_value(games["playing"].clone())?;
            let returns: Vec<f64> = serde_json::from_value(games["returns"].clone())?;
            ensure!(
                playing.len() == self.playing.len() && returns.len() == self.returns.len(),
                "it holds {} games of {} rows, this rank plays {} of {}",
                playing.len(),
                returns.len(),
                self.playing.len(),
                self.returns.len()
            );
            let unknown = playing.iter().find(|id| self.index_of(**id).is_none());
            ensure!(
                unknown.is_none(),
                "snapshot {unknown:?} is not in the league"
            );
            Ok((playing, returns))
        };
        match read() {
            Ok((playing, returns)) => {
                self.playing = playing;
                self.returns = returns;
                self.drawn = true;
            }
            // The games go on against opponents drawn afresh: the run continues, not exactly.
            Err(e) => tracing::warn!(
                "rank {rank}: cannot resume the league's games from {} ({e:#}); their \
                 opponents are drawn afresh",
                file.display()
            ),
        }
        Ok(())
    }

    /// The league a checkpoint's `tensors` hold ([`League::state`]), in place of this one's.
    pub fn restore(&mut self, tensors: &[(String, Tensor)]) -> Result<()> {
        let find = |name: &str| {
            (tensors.iter().find(|(n, _)| n == name))
                .map(|(_, t)| t.shallow_clone())
                .with_context(|| {
                    format!("the checkpoint holds no `{name}`: it was written without a league")
                })
        };
        let records =
            Vec::<f64>::try_from(find("league.records")?.to_kind(Kind::Double).flatten(0, -1))?;
        let state = Vec::<f64>::try_from(find("league.state")?.to_kind(Kind::Double))?;
        ensure!(
            records.len() % RECORD == 0 && state.len() >= 2 && (state.len() - 2) % 3 == 0,
            "the checkpoint's league records are damaged"
        );
        self.snapshots.clear();
        self.tally.clear();
        for (i, row) in records.chunks(RECORD).enumerate() {
            let prefix = format!("league.{i}.");
            let own: Vec<(String, Tensor)> = (tensors.iter())
                .filter_map(|(n, t)| {
                    n.strip_prefix(&prefix)
                        .map(|n| (n.to_string(), t.shallow_clone()))
                })
                .collect();
            let member = (row[6] >= 0.0).then_some(row[6] as usize);
            let mut snapshot = self.snapshot(row[0] as u64, row[1] as u64, member, row[2], &own)?;
            snapshot.record = [row[3], row[4], row[5]];
            self.snapshots.push(snapshot);
            self.tally.push([0.0; 3]);
        }
        self.rating = state[0];
        self.next_id = state[1] as u64;
        self.recent = state[2..].chunks(3).map(|r| [r[0], r[1], r[2]]).collect();
        self.drawn = false;
        Ok(())
    }
}

/// Where rank `rank` keeps its league games in progress in a checkpoint directory.
fn games_file(dir: &Path, rank: usize) -> std::path::PathBuf {
    dir.join(format!("league-rank{rank}.json"))
}

/// For each of a game's agents (of `teams`, each agent's team), the agents its result is held
/// against: those of other teams (simple_tag's predators `adversary` against its prey), or,
/// where every agent is of one team (connect four's `player_0` and `player_1`), every other
/// agent.
fn rivals(teams: &[String]) -> Vec<Vec<usize>> {
    let one_team = teams.iter().all(|t| *t == teams[0]);
    (0..teams.len())
        .map(|a| {
            (0..teams.len())
                .filter(|&b| b != a && (one_team || teams[b] != teams[a]))
                .collect()
        })
        .collect()
}

/// The result of a game in which one side's best return (or score) was `mine` and the other
/// side's best `theirs`.
pub fn outcome(mine: f64, theirs: f64) -> Outcome {
    match mine.partial_cmp(&theirs) {
        Some(std::cmp::Ordering::Greater) => Outcome::Win,
        Some(std::cmp::Ordering::Less) => Outcome::Loss,
        _ => Outcome::Draw,
    }
}

/// A uniform draw in [0, 1) from the league's stream at (rank, update), for the game `game`
/// starting at step `t`.
fn unit(seed: u64, rank: usize, update: u64, t: u64, game: usize) -> f64 {
    let stream = derived_seed(seed, Purpose::League, rank as u64, update);
    (derived_seed(stream, Purpose::League, t, game as u64) >> 11) as f64 / (1u64 << 53) as f64
}

/// The snapshot (an index into `records`, oldest first, at least one) that `rule` draws with
/// `u`, uniform in [0, 1).
fn choose(rule: OpponentRule, records: &[Record], u: f64) -> usize {
    let n = records.len();
    match rule {
        OpponentRule::Latest => n - 1,
        OpponentRule::Uniform => ((u * n as f64) as usize).min(n - 1),
        OpponentRule::WinRate => {
            let weights: Vec<f64> = records.iter().map(priority).collect();
            pick(&weights, u)
        }
    }
}

/// How often the win-rate rule draws a snapshot: (1 - p)^2, p the learner's score rate against
/// it with one win and one loss assumed (an unplayed snapshot's p is 1/2).
fn priority(record: &Record) -> f64 {
    let [wins, draws, losses] = *record;
    let p = (wins + draws / 2.0 + 1.0) / (wins + draws + losses + 2.0);
    (1.0 - p).powi(2)
}

/// The index `u` (uniform in [0, 1)) falls on when each index takes its weight's share.
fn pick(weights: &[f64], u: f64) -> usize {
    let total: f64 = weights.iter().sum();
    let mut at = u * total;
    for (i, w) in weights.iter().enumerate() {
        if at < *w {
            return i;
        }
        at -= w;
    }
    weights.len() - 1
}

/// The Elo change of a player rated `rating` for `results` (wins, draws, losses) against
/// opponents of the snapshots' ratings: K (S - E) summed over the games, S the score (1, 1/2,
/// 0) and E = 1 / (1 + 10^((R_opponent - R) / 400)) the expected one, all at the rating
/// before these games.
fn elo_change(rating: f64, snapshots: &[Snapshot], results: &[Record]) -> f64 {
    let ratings: Vec<f64> = snapshots.iter().map(|s| s.rating).collect();
    elo_change_against(rating, &ratings, results)
}

fn elo_change_against(rating: f64, ratings: &[f64], results: &[Record]) -> f64 {
    (ratings.iter().zip(results))
        .map(|(theirs, [w, d, l])| {
            let expected = 1.0 / (1.0 + 10f64.powf((theirs - rating) / 400.0));
            ELO_K * (w + d / 2.0 - (w + d + l) * expected)
        })
        .sum()
}

fn games_of(r: &Record) -> f64 {
    r.iter().sum()
}

fn games(recent: &VecDeque<Record>) -> f64 {
    recent.iter().map(games_of).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, Init, InitSpec, NetworkSpec};

    /// A league of `games` games of two agents, `player_0` and `player_1`, on one rank, over a
    /// tiny network (3 observations, 2 actions), by `rule`, keeping `size`.
    fn league(games: usize, rule: OpponentRule, size: usize) -> League {
        let init = InitSpec {
            scheme: Init::Orthogonal,
            torso_gain: 1.0,
            policy_gain: 0.01,
            value_gain: 1.0,
        };
        let network = NetworkSpec::Mlp {
            hidden: vec![4],
            activation: Activation::Tanh,
        };
        let (_, opponents) = Seats::league_sides(2, games, 3);
        League {
            rule,
            size,
            every: 100,
            blueprint: Blueprint {
                spec: ActorCriticSpec::for_network(network, init),
                obs_shape: vec![3],
                action_space: ActionSpace::Discrete { n: 2 },
                device: Device::Cpu,
            },
            agents: 2,
            rivals: rivals(&["player".into(), "player".into()]),
            opponents,
            snapshots: Vec::new(),
            next_id: 0,
            rating: ELO_START,
            playing: vec![0; games],
            returns: vec![0.0; games * 2],
            tally: Vec::new(),
            recent: VecDeque::new(),
            drawn: false,
            seed: 1,
            rank: 0,
        }
    }

    /// The learner's own parameters, as a fresh network of the league's blueprint holds them.
    fn learner(l: &League) -> Vec<(String, Tensor)> {
        let b = &l.blueprint;
        let vs = VarStore::new(Device::Cpu);
        let _model =
            ActorCritic::new(&vs.root(), &b.spec, &b.obs_shape, b.action_space.clone()).unwrap();
        named_parameters(&vs, "model")
            .into_iter()
            .map(|(n, t)| (n, t.copy()))
            .collect()
    }

    fn taken(l: &League) -> Vec<Taken> {
        vec![Taken {
            member: None,
            networks: learner(l),
            rating: l.rating,
        }]
    }

    /// Two games: the learner plays agent 0 of game 0 and agent 1 of game 1. Its rewards add up
    /// over a game's steps, it wins game 0 (1 against -1 over two steps) and loses game 1 (its
    /// agent 1 ends at -1); each result goes to the snapshot the game played, and the update
    /// moves the rating from the snapshot's by K (S - E): one win and one loss at equal ratings
    /// leave it, two wins raise it by K.
    #[test]
    fn games_are_scored_for_the_learner_and_move_its_rating() {
        let mut l = league(2, OpponentRule::Latest, 8);
        l.add(taken(&l), 0).unwrap();
        l.draw_all(0).unwrap();
        let none = [false; 4];
        l.count((&[0.5, 0.0, 0.0, 0.0], &none, &none), 0, 0);
        let ended = [true; 4];
        l.count((&[0.5, -1.0, 1.0, -1.0], &ended, &none), 0, 1);
        assert_eq!(l.tally, [[1.0, 0.0, 1.0]]);
        assert_eq!(l.returns, [0.0; 4], "a finished game's returns start again");
        l.updated(&mut crate::algo::Local).unwrap();
        assert_eq!(l.snapshots[0].record, [1.0, 0.0, 1.0]);
        assert_eq!(l.rating, ELO_START);
        // Truncation ends a game too: two wins.
        l.count((&[1.0, 0.0, 0.0, 1.0], &none, &ended), 1, 0);
        l.updated(&mut crate::algo::Local).unwrap();
        assert_eq!(l.snapshots[0].record, [3.0, 0.0, 1.0]);
        assert!(
            (l.rating - (ELO_START + ELO_K)).abs() < 1e-9,
            "{}",
            l.rating
        );
        let scalars: std::collections::HashMap<_, _> = l.scalars().into_iter().collect();
        assert_eq!(scalars["league/win_rate"], 0.75);
        assert_eq!(scalars["league/games"], 2.0);
        // A game still going counts nothing.
        l.count((&[1.0, -1.0, 1.0, -1.0], &none, &none), 2, 0);
        assert_eq!(l.tally, [[0.0; 3]]);
    }

    /// The recent rates cover the fewest latest updates that hold at least 100 games: after
    /// updates of 60 wins, 60 losses and 60 draws, the last two.
    #[test]
    fn the_recent_rates_cover_at_least_the_last_100_games() {
        let mut l = league(2, OpponentRule::Latest, 8);
        l.add(taken(&l), 0).unwrap();
        let rates = |l: &League| {
            let s: std::collections::HashMap<_, _> = l.scalars().into_iter().collect();
            (s["league/win_rate"], s["league/draw_rate"])
        };
        for (k, expected) in [(0, (1.0, 0.0)), (2, (0.5, 0.0)), (1, (0.0, 0.5))] {
            l.tally[0][k] = 60.0;
            l.updated(&mut crate::algo::Local).unwrap();
            assert_eq!(rates(&l), expected, "after the update of results {k}");
        }
        assert_eq!(l.recent.len(), 2);
    }

    /// Past its size the oldest snapshots leave, the games that played them draw a snapshot
    /// still held, and ids keep counting.
    #[test]
    fn the_oldest_snapshots_leave_and_their_games_draw_again() {
        let mut l = league(4, OpponentRule::Uniform, 2);
        l.add(taken(&l), 0).unwrap();
        l.draw_all(0).unwrap();
        assert_eq!(l.playing, [0; 4]);
        l.add(taken(&l), 100).unwrap();
        l.add(taken(&l), 200).unwrap();
        let ids: Vec<u64> = l.snapshots.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(l.tally.len(), 2);
        assert!(
            l.playing.iter().all(|id| ids.contains(id)),
            "{:?}",
            l.playing
        );
        assert!(l.due(99, 100) && !l.due(100, 199) && l.due(150, 250));
    }

    /// Each rule over three snapshots: the newest; a third of [0, 1) each; the win-rate weights.
    #[test]
    fn each_rule_draws_its_snapshot() {
        let records = [[0.0; 3], [10.0, 0.0, 0.0], [0.0, 0.0, 10.0]];
        assert_eq!(choose(OpponentRule::Latest, &records, 0.0), 2);
        let uniform = |u| choose(OpponentRule::Uniform, &records, u);
        assert_eq!(
            (uniform(0.0), uniform(0.34), uniform(0.67), uniform(0.999)),
            (0, 1, 2, 2)
        );
        // Weights 1/4, (1/12)^2 and (11/12)^2 (of 1.097): the unbeaten snapshot most.
        let win_rate = |u| choose(OpponentRule::WinRate, &records, u);
        assert_eq!(
            (win_rate(0.0), win_rate(0.22), win_rate(0.23), win_rate(0.9)),
            (0, 0, 1, 2)
        );
    }

    /// The draws are uniform in [0, 1), differ by every coordinate, and stay what they were.
    #[test]
    fn a_leagues_draws_are_its_seeds() {
        let draws: Vec<f64> = (0..1000).map(|g| unit(1, 0, 3, 5, g)).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = draws.iter().sum::<f64>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        let base = unit(1, 0, 3, 5, 7);
        for other in [
            unit(2, 0, 3, 5, 7),
            unit(1, 1, 3, 5, 7),
            unit(1, 0, 4, 5, 7),
            unit(1, 0, 3, 6, 7),
        ] {
            assert_ne!(base, other);
        }
        assert_eq!(base, PINNED);
    }

    const PINNED: f64 = 0.600514241849159;

    #[test]
    fn rivals_are_the_other_teams_or_every_other_player() {
        let teams = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let tag = teams(&["adversary", "adversary", "adversary", "agent"]);
        assert_eq!(rivals(&tag), [vec![3], vec![3], vec![3], vec![0, 1, 2]]);
        assert_eq!(rivals(&teams(&["player", "player"])), [vec![1], vec![0]]);
    }

    #[test]
    fn a_game_is_won_lost_or_drawn_against_the_best_opponent() {
        assert_eq!(outcome(1.0, -1.0), Outcome::Win);
        assert_eq!(outcome(-1.0, 1.0), Outcome::Loss);
        assert_eq!(outcome(0.0, 0.0), Outcome::Draw);
    }

    /// Equal ratings expect half a point: a win gains K/2, a loss loses it, a draw changes
    /// nothing; 400 points above, a win gains K/11.
    #[test]
    fn elo_moves_by_the_score_above_the_expected() {
        let change = |r: f64, theirs: f64, res: Record| elo_change_against(r, &[theirs], &[res]);
        assert!((change(1000.0, 1000.0, [1.0, 0.0, 0.0]) - 8.0).abs() < 1e-12);
        assert!((change(1000.0, 1000.0, [0.0, 0.0, 1.0]) + 8.0).abs() < 1e-12);
        assert_eq!(change(1000.0, 1000.0, [0.0, 1.0, 0.0]), 0.0);
        assert!((change(1400.0, 1000.0, [1.0, 0.0, 0.0]) - 16.0 / 11.0).abs() < 1e-12);
        let two = elo_change_against(
            1000.0,
            &[1000.0, 1400.0],
            &[[2.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        );
        assert!((two - (16.0 - 16.0 / 11.0)).abs() < 1e-12);
    }

    /// The win-rate rule draws the snapshots the learner beats least most often, and never
    /// leaves one out.
    #[test]
    fn the_win_rate_rule_favours_the_snapshots_it_scores_least_against() {
        let unplayed = priority(&[0.0; 3]);
        assert_eq!(unplayed, 0.25);
        let beaten = priority(&[98.0, 0.0, 0.0]);
        let beating = priority(&[0.0, 0.0, 98.0]);
        assert!(beaten > 0.0 && beaten < unplayed && unplayed < beating);
        assert!((beating - 0.99f64.powi(2)).abs() < 1e-12);
        // A draw counts half: ten draws are even.
        assert!((priority(&[0.0, 10.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((priority(&[3.0, 4.0, 1.0]) - (1.0 - 6.0 / 10.0f64).powi(2)).abs() < 1e-12);
        let weights = [1.0, 3.0];
        assert_eq!(pick(&weights, 0.0), 0);
        assert_eq!(pick(&weights, 0.2499), 0);
        assert_eq!(pick(&weights, 0.25), 1);
        assert_eq!(pick(&weights, 0.9999), 1);
    }
}

//! [`VecEnv`]: a batch of environments stepped together in parallel on a rayon pool
//! it owns, writing observations, rewards and episode-end flags into contiguous
//! buffers (ready to become tensors without per-environment copies), resetting
//! environments automatically at episode end, and collecting per-game statistics.
//!
//! Episode boundaries: when `step` ends an environment's episode (terminated or
//! truncated), that environment is reset at once and its row of [`VecEnv::obs`] holds
//! the FIRST observation of the next episode; the LAST observation of the ended episode
//! (needed to bootstrap a truncated episode) is in the same row of
//! [`VecEnv::final_obs`], valid for the rows whose `terminated` or `truncated` flag is set
//! in the latest step. An agent that leaves its game before the others (PettingZoo's
//! Parallel API) has its flags set, and its last observation in `final_obs`, at the step it
//! leaves at; until its game ends its row observes zeros and gets no reward or flags, and
//! [`VecEnv::acting`] leaves it out. Its episode statistics are recorded when it leaves, the
//! others' at the game's end.
//!
//! Snapshots ([`VecEnv::snapshot`], [`VecEnv::restore`]) capture the whole batch so a
//! resumed run continues exactly where it stopped. Format (version
//! [`SNAPSHOT_FORMAT_VERSION`]), all integers little-endian:
//!
//! ```text
//! magic  b"TANDEMVE"        8 bytes
//! format version            u32
//! game name                 string (u64 byte length + UTF-8), e.g. "atari-breakout"
//! wrapper names             u64 count + strings, in chain order (first wraps the game)
//! environments, obs values per row, actions    3 x u64
//! batch state               seeds, seeded flag, obs / final_obs / rewards / flags rows,
//!                           finished episodes not yet drained, shared normaliser
//!                           statistics (kind, synced, local delta)
//! per environment           return / length / raw score in progress, finished game,
//!                           conversion buffer, then the chain's state: one section per
//!                           wrapper, outermost first, ending with the game's
//! checksum                  u32 CRC-32 (IEEE) of every byte before it
//! ```
//!
//! Sections (see [`crate::snapshot`]) are tagged with the wrapper or game name and
//! length-prefixed, so a snapshot restored into differently built environments fails
//! with an error naming the part that differs.
//!
//! Results never depend on the thread count: every environment only touches its own
//! state and rows, and anything shared (episode statistics, normaliser statistics) is
//! combined afterwards in environment order.

use std::ops::Range;
use std::time::{Duration, Instant};

use rayon::prelude::*;

mod groups;
pub use groups::EnvGroup;

use crate::EnvError;
use crate::env::{Env, Step};
use crate::gym::{BridgeOptions, GymInfo, Launch, Pool as GymPool, Sent};
use crate::multi_agent::{AgentSpec, ParallelEnv};
use crate::norm::{NormKind, NormStats, Normalizer};
use crate::snapshot::{Persist, checksum, load_buffer, snapshot_error, take};
use crate::space::{
    Action, ActionSpace, Actions, Dtype, GroupActions, Layout, ObsBuf, ObsShape, ObsSpace, ObsStore,
};
use crate::spec::{EnvSpec, Game, make_env, wrap_chain};

/// Statistics of one finished game (all lives, under episodic-life).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EpisodeStats {
    /// Which environment of the batch played it.
    pub env_index: usize,
    /// Sum of the rewards the agent saw (after clipping/normalisation wrappers).
    pub episode_return: f64,
    /// Agent steps (one per `VecEnv::step`).
    pub length: u64,
    /// Sum of the game's untouched rewards: the game score.
    pub raw_score: f64,
    /// True if the game ended by truncation (time limit) rather than by its rules.
    pub truncated: bool,
    /// A gymnasium environment's `info-keys` values in the info of the step that ended the
    /// game, in the keys' order (empty for native games and without keys).
    pub info: Vec<f64>,
}

// `info` is left out: only gymnasium episodes carry it, and a gymnasium batch is never
// snapshotted (its state lives in Python), so the format stays that of native games.
crate::snapshot::persist_fields!(EpisodeStats {
    env_index,
    episode_return,
    length,
    raw_score,
    truncated
});

/// The version of the snapshot format [`VecEnv::snapshot`] writes and
/// [`VecEnv::restore`] reads (see the module documentation).
pub const SNAPSHOT_FORMAT_VERSION: u32 = 2;
const SNAPSHOT_MAGIC: &[u8; 8] = b"TANDEMVE";

/// What a snapshot was taken of: checked first on restore.
#[derive(Debug, Clone, PartialEq, Default)]
struct SnapshotHeader {
    game: String,
    wrappers: Vec<String>,
    num_envs: usize,
    obs_len: usize,
    actions: ActionSpace,
}

crate::snapshot::persist_fields!(SnapshotHeader {
    game,
    wrappers,
    num_envs,
    obs_len,
    actions
});

impl std::fmt::Display for SnapshotHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} environment(s) of `{}` with wrappers [{}] ({} observation values, {})",
            self.num_envs,
            self.game,
            self.wrappers.join(", "),
            self.obs_len,
            self.actions
        )
    }
}

/// How a slot's observation reaches its f32 channels-first row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emit {
    /// The environment writes f32 straight into the row.
    Direct,
    /// Into a scratch buffer, then cast (and transposed from HWC when `channels > 1`).
    Convert {
        height: usize,
        width: usize,
        channels: usize,
        transpose: bool,
    },
}

/// What one slot of a batch plays.
enum Players {
    /// One agent's environment: a game and its wrappers, one row.
    One(Box<dyn Env>),
    /// A game of several agents, one row each, in the game's order.
    Several {
        game: Box<dyn ParallelEnv>,
        /// The latest step of each agent (kept to spare an allocation per step).
        steps: Vec<Step>,
        /// Where the game writes its agents' observations when they differ in length
        /// (`None` when they are equal: the game writes straight into its rows).
        packed: Option<Packed>,
    },
}

/// The observations of a game whose agents observe vectors of different lengths, as the game
/// writes them (agent after agent, each as long as its own: the [`ParallelEnv`] contract),
/// before [`Packed::spread`] puts each at the start of its agent's row. The batch is one
/// matrix, so every row is as wide as the widest agent's observation and the rest of a
/// narrower agent's row is zeros; a policy that plays only one team takes its team's columns.
struct Packed {
    obs: Vec<f32>,
    /// Each agent's observation length, in the game's order.
    lens: Vec<usize>,
}

impl Packed {
    /// For a game whose agents observe `lens` values each; `None` when they are all equal.
    fn for_lens(lens: Vec<usize>) -> Option<Packed> {
        let differ = lens.iter().any(|&len| len != lens[0]);
        differ.then(|| Packed {
            obs: vec![0.0; lens.iter().sum()],
            lens,
        })
    }

    /// Writes each agent's observation at the start of its row of `rows` (one row per agent,
    /// all as wide) and zeros after it.
    fn spread(&self, rows: &mut [f32]) {
        let width = rows.len() / self.lens.len();
        let mut from = 0;
        for (row, &len) in rows.chunks_exact_mut(width).zip(&self.lens) {
            row[..len].copy_from_slice(&self.obs[from..from + len]);
            row[len..].fill(0.0);
            from += len;
        }
    }
}

/// Where the two kinds of slot differ beside stepping: a multi-agent game has no wrapper
/// chain, so no normalisers or lives, and names itself.
impl Players {
    fn visit_normalizers(&mut self, visit: &mut dyn FnMut(&mut Normalizer)) {
        if let Players::One(env) = self {
            env.visit_normalizers(visit);
        }
    }

    /// Lives left in the game (0 for a multi-agent game).
    fn lives(&self) -> u32 {
        match self {
            Players::One(env) => env.lives(),
            Players::Several { .. } => 0,
        }
    }

    fn render_rgb(&self) -> Option<crate::env::RgbFrame> {
        match self {
            Players::One(env) => env.render_rgb(),
            Players::Several { game, .. } => game.render_rgb(),
        }
    }

    fn chain_names(&self, names: &mut Vec<String>) {
        match self {
            Players::One(env) => env.chain_names(names),
            Players::Several { game, .. } => names.push(game.name().to_owned()),
        }
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        match self {
            Players::One(env) => env.save_state(out),
            Players::Several { game, .. } => game.save_state(out),
        }
    }

    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        match self {
            Players::One(env) => env.load_state(input),
            Players::Several { game, .. } => game.load_state(input),
        }
    }
}

/// One agent's row in a slot: the episode in progress and the game it finished.
#[derive(Default)]
struct Seat {
    episode_return: f64,
    length: u64,
    raw_score: f64,
    finished: Option<EpisodeStats>,
    /// The agent left the game in progress before the others (its episode is recorded), and
    /// counts nothing until the game ends. Not in snapshots: only PettingZoo's games have
    /// agents that leave, and their batches are never snapshotted.
    left: bool,
}

impl Seat {
    fn start(&mut self) {
        self.episode_return = 0.0;
        self.length = 0;
        self.raw_score = 0.0;
        self.left = false;
    }

    /// Counts one step of row `row`; a step that ends the game records its statistics.
    fn record(&mut self, row: usize, step: &Step) {
        self.count(step);
        if step.done() && step.game_over {
            self.finish(row, step);
        }
    }

    /// Counts one step of a game's agent at row `row`. Its episode ends when its flags are
    /// set: at the game's end, or when it leaves before the others, after which it counts
    /// nothing (its return is what it had when it left) until the game's end.
    fn record_agent(&mut self, row: usize, step: &Step) {
        if self.left {
            self.left = !step.game_over;
            return;
        }
        self.count(step);
        if step.done() {
            self.finish(row, step);
            self.left = !step.game_over;
        }
    }

    fn count(&mut self, step: &Step) {
        self.episode_return += f64::from(step.reward);
        self.raw_score += f64::from(step.raw_reward);
        self.length += 1;
    }

    fn finish(&mut self, row: usize, step: &Step) {
        self.finished = Some(EpisodeStats {
            env_index: row,
            episode_return: self.episode_return,
            length: self.length,
            raw_score: self.raw_score,
            truncated: step.truncated && !step.terminated,
            info: Vec::new(),
        });
        self.start();
    }
}

/// The rows of one slot in a batch step: observations, final observations, rewards, flags.
struct SlotRows<'a> {
    obs: &'a mut [f32],
    final_obs: &'a mut [f32],
    rewards: &'a mut [f32],
    terminated: &'a mut [bool],
    truncated: &'a mut [bool],
}

struct Slot {
    players: Players,
    scratch: Option<ObsStore>,
    /// One per row of the slot.
    seats: Vec<Seat>,
}

impl Slot {
    fn buf<'a>(scratch: &'a mut Option<ObsStore>, row: &'a mut [f32]) -> ObsBuf<'a> {
        match scratch {
            Some(store) => store.buf(),
            None => ObsBuf::F32(row),
        }
    }

    fn reset(&mut self, seed: Option<u64>, rows: &mut [f32], emit: Emit) {
        match &mut self.players {
            Players::One(env) => {
                env.reset(seed, Self::buf(&mut self.scratch, rows));
                emit_row(&self.scratch, rows, emit);
            }
            Players::Several {
                game, packed: None, ..
            } => game.reset(seed, rows),
            Players::Several {
                game,
                packed: Some(packed),
                ..
            } => {
                game.reset(seed, &mut packed.obs);
                packed.spread(rows);
            }
        }
        self.seats.iter_mut().for_each(Seat::start);
    }

    /// Steps the slot: `action(j)` is the action of its row `j`, `first` the batch index of
    /// its first row.
    fn step<'a>(
        &mut self,
        first: usize,
        action: impl Fn(usize) -> Action<'a>,
        mut rows: SlotRows<'_>,
        emit: Emit,
    ) {
        match &mut self.players {
            Players::One(env) => {
                let step = step_chain(env, &mut self.scratch, action(0), rows.obs, emit);
                self.seats[0].record(first, &step);
                if step.done() {
                    rows.final_obs.copy_from_slice(rows.obs);
                    // Only the agent's episode restarts after a lost life; the game goes on.
                    env.reset(None, Self::buf(&mut self.scratch, rows.obs));
                    emit_row(&self.scratch, rows.obs, emit);
                }
                write_flags(&step, 0, &mut rows);
            }
            Players::Several {
                game,
                steps,
                packed,
            } => {
                let actions: Vec<Action<'a>> = (0..steps.len()).map(action).collect();
                match packed {
                    None => game.step(&actions, rows.obs, steps),
                    Some(packed) => {
                        game.step(&actions, &mut packed.obs, steps);
                        packed.spread(rows.obs);
                    }
                }
                for (j, (seat, step)) in self.seats.iter_mut().zip(steps.iter()).enumerate() {
                    seat.record_agent(first + j, step);
                    write_flags(step, j, &mut rows);
                }
                // A game ends every agent's episode at once (the ParallelEnv contract), also
                // of those that left it before.
                if steps.iter().any(|step| step.game_over) {
                    rows.final_obs.copy_from_slice(rows.obs);
                    match packed {
                        None => game.reset(None, rows.obs),
                        Some(packed) => {
                            game.reset(None, &mut packed.obs);
                            packed.spread(rows.obs);
                        }
                    }
                } else {
                    keep_last_observations(game.as_ref(), steps, packed.as_ref(), rows.final_obs);
                }
            }
        }
    }

    /// Whether an agent of the slot has left its game (the slot plays one).
    fn someone_left(&self) -> bool {
        self.seats.iter().any(|seat| seat.left)
    }
}

/// Writes into its row of `final_obs` the last observation of each agent that left `game`
/// in its latest `steps` (its flags set while the game goes on), at the start of the row
/// (the agent's own length, [`Packed`]) and zeros after it.
fn keep_last_observations(
    game: &dyn ParallelEnv,
    steps: &[Step],
    packed: Option<&Packed>,
    final_obs: &mut [f32],
) {
    let width = final_obs.len() / steps.len();
    let leaving = steps.iter().enumerate().filter(|(_, step)| step.done());
    for (j, _) in leaving {
        let row = &mut final_obs[j * width..(j + 1) * width];
        let len = packed.map_or(width, |p| p.lens[j]);
        game.last_observation(j, &mut row[..len]);
        row[len..].fill(0.0);
    }
}

/// The env's step of one agent's chain, into its row (in place when nothing converts).
fn step_chain(
    env: &mut Box<dyn Env>,
    scratch: &mut Option<ObsStore>,
    action: Action<'_>,
    row: &mut [f32],
    emit: Emit,
) -> Step {
    let step = match scratch {
        // The row holds this environment's previous observation and nothing else
        // writes it, so the environment may update it in place.
        None => env.step_in_place(action, row),
        Some(store) => env.step(action, store.buf()),
    };
    emit_row(scratch, row, emit);
    step
}

/// Row `j`'s reward and flags of the latest step.
fn write_flags(step: &Step, j: usize, rows: &mut SlotRows<'_>) {
    rows.rewards[j] = step.reward;
    rows.terminated[j] = step.terminated;
    rows.truncated[j] = step.truncated;
}

/// Puts into each of the `finished` games of a gymnasium batch the info values of the step
/// that ended it ([`GymPool::end_info`]).
fn end_info(gym: Option<&GymPool>, finished: &mut [EpisodeStats]) -> Result<(), EnvError> {
    if let Some(gym) = gym {
        for game in finished {
            game.info = gym.end_info(game.env_index)?;
        }
    }
    Ok(())
}

fn emit_row(scratch: &Option<ObsStore>, row: &mut [f32], emit: Emit) {
    let Emit::Convert {
        height,
        width,
        channels,
        transpose,
    } = emit
    else {
        return;
    };
    let Some(store) = scratch else { return };
    if !transpose {
        store.write_to(&mut ObsBuf::F32(row));
        return;
    }
    let plane = height * width;
    match store {
        ObsStore::U8(src) => {
            for (p, px) in src.chunks_exact(channels).enumerate() {
                for (c, &v) in px.iter().enumerate() {
                    row[c * plane + p] = f32::from(v);
                }
            }
        }
        ObsStore::F32(src) => {
            for (p, px) in src.chunks_exact(channels).enumerate() {
                for (c, &v) in px.iter().enumerate() {
                    row[c * plane + p] = v;
                }
            }
        }
    }
}

/// One slot's share of a batch step: the slot and its output rows.
type StepItem<'a> = (
    usize,
    (
        (
            ((&'a mut Slot, &'a mut [f32]), &'a mut [f32]),
            &'a mut [f32],
        ),
        (&'a mut [bool], &'a mut [bool]),
    ),
);

/// Running statistics shared by position `k` in every environment's chain.
#[derive(Debug, Clone)]
struct SharedNorm {
    kind: NormKind,
    /// Agreed across ranks (the runtime syncs it).
    synced: NormStats,
    /// This rank's values since the last sync.
    local: NormStats,
}

/// A batch of environments. See the module documentation for episode boundaries.
pub struct VecEnv {
    slots: Vec<Slot>,
    /// Rows per slot: the agents of each game (1 for single-agent environments).
    agents: usize,
    seeds: Vec<u64>,
    seeded: bool,
    env_space: ObsSpace,
    emit: Emit,
    obs_len: usize,
    action_space: ActionSpace,
    obs: Vec<f32>,
    final_obs: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    episodes: Vec<EpisodeStats>,
    norms: Vec<SharedNorm>,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    /// Below this much work per batch step (as if done on one thread), stepping stays on
    /// the calling thread: waking pool threads would cost more than it saves.
    min_parallel_work: Duration,
    /// Running estimate of one batch step's single-thread cost, in seconds.
    work_estimate: Option<f64>,
    /// The worker processes of a gymnasium environment, stepped before the chains.
    gym: Option<GymPool>,
    /// A batch step begun and not yet finished ([`VecEnv::begin_step`]).
    pending: Option<PendingStep>,
}

/// A batch step between [`VecEnv::begin_step`] and
/// [`VecEnv::finish_step`]: its environments, its actions, and the gymnasium requests on their
/// way.
struct PendingStep {
    envs: Range<usize>,
    actions: OwnedActions,
    sent: Option<Sent>,
}

enum OwnedActions {
    Discrete(Vec<i64>),
    Box { values: Vec<f32>, dim: usize },
    MultiDiscrete { indices: Vec<i64>, dim: usize },
}

impl OwnedActions {
    fn of(actions: GroupActions<'_>) -> OwnedActions {
        match actions {
            GroupActions::Discrete(a) => OwnedActions::Discrete(a.to_vec()),
            GroupActions::Box { values, dim } => OwnedActions::Box {
                values: values.to_vec(),
                dim,
            },
            GroupActions::MultiDiscrete { indices, dim } => OwnedActions::MultiDiscrete {
                indices: indices.to_vec(),
                dim,
            },
        }
    }

    fn as_group(&self) -> GroupActions<'_> {
        match self {
            OwnedActions::Discrete(a) => GroupActions::Discrete(a),
            OwnedActions::Box { values, dim } => GroupActions::Box { values, dim: *dim },
            OwnedActions::MultiDiscrete { indices, dim } => {
                GroupActions::MultiDiscrete { indices, dim: *dim }
            }
        }
    }
}

/// Default for [`VecEnv::set_min_parallel_work`].
pub const DEFAULT_MIN_PARALLEL_WORK: Duration = Duration::from_micros(100);

impl VecEnv {
    /// Builds `seeds.len()` environments from `spec`, environment `i` seeded with
    /// `seeds[i]` (see [`crate::env_seeds`]), stepped on `threads` threads (1 = on the
    /// calling thread, no pool).
    ///
    /// A gymnasium environment ([`Game::Gymnasium`]) starts its worker processes
    /// here and resets environment `i` with `seeds[i]`; [`VecEnv::gym_info`] then says
    /// which interpreter and versions run it.
    pub fn new(spec: &EnvSpec, seeds: &[u64], threads: usize) -> Result<Self, EnvError> {
        Self::with_bridge(spec, seeds, threads, &BridgeOptions::default())
    }

    /// [`VecEnv::new`], a gymnasium environment's workers run with `bridge`'s options.
    pub fn with_bridge(
        spec: &EnvSpec,
        seeds: &[u64],
        threads: usize,
        bridge: &BridgeOptions,
    ) -> Result<Self, EnvError> {
        if let Game::Gymnasium(gym) = &spec.game {
            if seeds.is_empty() {
                return Err(EnvError::InvalidArgument(
                    "a VecEnv needs at least one environment".into(),
                ));
            }
            let pool = GymPool::start(&spec.wrappers, &Launch::new(gym, bridge)?, seeds)?;
            let envs = seeds
                .iter()
                .enumerate()
                .map(|(i, &seed)| wrap_chain(spec, pool.proxy(i), seed))
                .collect::<Result<Vec<_>, _>>()?;
            let mut batch = Self::from_envs(envs, seeds.to_vec(), threads)?;
            batch.gym = Some(pool);
            return Ok(batch);
        }
        if let Game::PettingZoo(zoo) = &spec.game {
            if seeds.is_empty() {
                return Err(EnvError::InvalidArgument(
                    "a VecEnv needs at least one environment".into(),
                ));
            }
            let launch = Launch::pettingzoo(zoo, bridge)?;
            let pool = GymPool::start(&spec.wrappers, &launch, seeds)?;
            let games = (0..seeds.len()).map(|i| pool.game(i)).collect();
            let mut batch = Self::from_games(games, seeds.to_vec(), threads)?;
            batch.gym = Some(pool);
            return Ok(batch);
        }
        if spec.game.is_multi_agent() {
            // The fit rule refuses every wrapper on a multi-agent game, in its own words.
            crate::spec::observation_space(spec)?;
            let games = seeds
                .iter()
                .map(|&seed| crate::mpe::make(&spec.game, seed))
                .collect::<Result<Vec<_>, _>>()?;
            return Self::from_games(games, seeds.to_vec(), threads);
        }
        let envs = seeds
            .iter()
            .map(|&seed| make_env(spec, seed))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_envs(envs, seeds.to_vec(), threads)
    }

    /// Batches already-built environments, which must agree on observation space,
    /// action count and normalisers.
    pub fn from_envs(
        mut envs: Vec<Box<dyn Env>>,
        seeds: Vec<u64>,
        threads: usize,
    ) -> Result<Self, EnvError> {
        let (env_space, action_space) = check_batch(&envs, &seeds, threads)?;
        let norms = shared_normalizers(&mut envs)?;
        let emit = Emit::for_space(&env_space);
        let slots = envs
            .into_iter()
            .map(|env| Slot {
                players: Players::One(env),
                scratch: (emit != Emit::Direct).then(|| ObsStore::zeros(&env_space)),
                seats: vec![Seat::default()],
            })
            .collect();
        Self::assemble(slots, seeds, (env_space, action_space), norms, threads)
    }

    /// Batches games of several agents, each agent a row of the batch (game `g`'s agent `j`
    /// is row `g * agents + j`), game `g` seeded with `seeds[g]`. Every agent must act in the
    /// same space and observe the same kind of observation; vectors of different lengths are
    /// each written at the start of a row as wide as the widest and followed by zeros
    /// ([`Packed`]).
    pub fn from_games(
        games: Vec<Box<dyn ParallelEnv>>,
        seeds: Vec<u64>,
        threads: usize,
    ) -> Result<Self, EnvError> {
        let (env_space, action_space, agents) = check_games(&games, &seeds, threads)?;
        let slots = games
            .into_iter()
            .map(|game| Slot {
                players: Players::Several {
                    packed: Packed::for_lens(
                        game.agents().iter().map(|a| a.observation.len()).collect(),
                    ),
                    game,
                    steps: vec![Step::default(); agents],
                },
                scratch: None,
                seats: (0..agents).map(|_| Seat::default()).collect(),
            })
            .collect();
        Self::assemble(slots, seeds, (env_space, action_space), Vec::new(), threads)
    }

    /// A batch of `slots` (each with the same number of seats) and empty row buffers.
    fn assemble(
        slots: Vec<Slot>,
        seeds: Vec<u64>,
        (env_space, action_space): (ObsSpace, ActionSpace),
        norms: Vec<SharedNorm>,
        threads: usize,
    ) -> Result<Self, EnvError> {
        let agents = slots.first().map_or(1, |s| s.seats.len());
        let rows = slots.len() * agents;
        let obs_len = env_space.len();
        Ok(VecEnv {
            slots,
            agents,
            seeds,
            seeded: false,
            env_space,
            emit: Emit::for_space(&env_space),
            obs_len,
            action_space,
            obs: vec![0.0; rows * obs_len],
            final_obs: vec![0.0; rows * obs_len],
            rewards: vec![0.0; rows],
            terminated: vec![false; rows],
            truncated: vec![false; rows],
            episodes: Vec::new(),
            norms,
            pool: thread_pool(threads)?,
            threads,
            min_parallel_work: DEFAULT_MIN_PARALLEL_WORK,
            work_estimate: None,
            gym: None,
            pending: None,
        })
    }

    /// The interpreter, versions, spaces and worker process ids of a gymnasium
    /// environment (`None` for native games).
    pub fn gym_info(&self) -> Option<&GymInfo> {
        self.gym.as_ref().map(GymPool::info)
    }

    /// Whether [`VecEnv::snapshot`] can capture this batch: not for gymnasium
    /// environments, whose state lives in the Python worker processes.
    pub fn can_snapshot(&self) -> bool {
        self.gym.is_none()
    }

    /// Rows of the batch: one per environment, or per agent of a multi-agent game.
    pub fn num_envs(&self) -> usize {
        self.slots.len() * self.agents
    }

    /// Agents of each game: rows per game (1 for single-agent environments).
    pub fn agents_per_game(&self) -> usize {
        self.agents
    }

    /// A multi-agent game's agents, their ids and observations, in the order of each game's
    /// rows; empty for single-agent environments.
    pub fn agents(&self) -> Vec<(String, ObsSpace)> {
        (self.agent_specs().iter())
            .map(|a| (a.name.clone(), a.observation))
            .collect()
    }

    /// The team each of a multi-agent game's agents plays for ([`AgentSpec::team`]), in the
    /// order of each game's rows; empty for single-agent environments.
    pub fn teams(&self) -> Vec<String> {
        self.agent_specs().iter().map(|a| a.team.clone()).collect()
    }

    fn agent_specs(&self) -> &[AgentSpec] {
        match self.slots.first().map(|slot| &slot.players) {
            Some(Players::Several { game, .. }) => game.agents(),
            _ => &[],
        }
    }

    pub fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    /// The number of discrete actions; 0 for a box space.
    pub fn num_actions(&self) -> usize {
        self.action_space.num_discrete().unwrap_or(0)
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Batch steps estimated to take less than `work` on one thread run on the calling
    /// thread even when the VecEnv has a pool (default [`DEFAULT_MIN_PARALLEL_WORK`];
    /// zero: always use the pool). Results are identical either way; only speed differs.
    pub fn set_min_parallel_work(&mut self, work: Duration) {
        self.min_parallel_work = work;
    }

    /// Whether the next batch step should use the pool.
    fn use_pool(&self) -> bool {
        self.pool.is_some()
            && (self.min_parallel_work.is_zero()
                || self
                    .work_estimate
                    .is_some_and(|w| w >= self.min_parallel_work.as_secs_f64()))
    }

    /// The observation space of each environment's chain (before the conversion to
    /// f32 channels-first that the batch buffer holds).
    pub fn env_observation_space(&self) -> ObsSpace {
        self.env_space
    }

    /// Shape of one row of [`VecEnv::obs`] as the network sees it: `[len]` or `[C, H, W]`.
    pub fn obs_shape(&self) -> Vec<usize> {
        self.env_space.network_shape()
    }

    /// Values per environment row of [`VecEnv::obs`].
    pub fn obs_len(&self) -> usize {
        self.obs_len
    }

    /// Resets every environment. The first call seeds each with its construction seed;
    /// later calls continue their random streams. Returns all observations,
    /// `num_envs * obs_len` values, row per environment. A gymnasium worker's failure
    /// here is reported by the next [`VecEnv::step`].
    pub fn reset(&mut self) -> &[f32] {
        let seeded = std::mem::replace(&mut self.seeded, true);
        let seeds = if seeded {
            None
        } else {
            Some(self.seeds.clone())
        };
        self.reset_impl(seeds.as_deref());
        &self.obs
    }

    fn reset_impl(&mut self, seeds: Option<&[u64]>) {
        // A step begun and not finished is completed first (its failure, if any, is kept by the
        // pool like the reset's own and reported by the caller or the next step).
        if self.pending.is_some() {
            let _ = self.finish_step();
        }
        // A failure is kept by the pool and reported by the caller or the next step.
        if let Some(gym) = &self.gym {
            let _ = gym.reset_all(seeds);
        }
        let emit = self.emit;
        let work = |(i, (slot, rows)): (usize, (&mut Slot, &mut [f32]))| {
            slot.reset(seeds.map(|s| s[i]), rows, emit);
        };
        let obs_len = self.obs_len * self.agents;
        match self.pool.as_ref().filter(|_| self.use_pool()) {
            None => self
                .slots
                .iter_mut()
                .zip(self.obs.chunks_mut(obs_len))
                .enumerate()
                .for_each(work),
            Some(pool) => pool.install(|| {
                self.slots
                    .par_iter_mut()
                    .zip(self.obs.par_chunks_mut(obs_len))
                    .enumerate()
                    .for_each(work)
            }),
        }
        self.rewards.fill(0.0);
        self.terminated.fill(false);
        self.truncated.fill(false);
        self.sync_normalizers_in_batch();
    }

    /// Steps every environment with its action (row `i` of `actions` for environment `i`),
    /// resetting those whose episode ends. Errors, before anything is stepped, if the actions'
    /// kind is not the space's, their number is wrong, or one is out of range (discrete) or
    /// not finite (box).
    pub fn step<'a>(&mut self, actions: impl Into<Actions<'a>>) -> Result<(), EnvError> {
        self.step_group(0..self.num_envs(), actions)
    }

    /// Steps only the environments in `envs` (row `k` of `actions` for environment
    /// `envs.start + k`), like [`VecEnv::step`] does all of them; the rows of the others
    /// (observations, rewards, flags) are left as they are. A trainer steps the groups of
    /// a batch in turn this way, overlapping one group's step with the policy's forward
    /// pass for another.
    pub fn step_group<'a>(
        &mut self,
        envs: Range<usize>,
        actions: impl Into<Actions<'a>>,
    ) -> Result<(), EnvError> {
        let actions = self.action_check().checked(&envs, actions.into())?;
        self.step_checked(envs, actions)
    }

    /// Starts [`VecEnv::step`]: the actions are checked and, for a gymnasium environment,
    /// sent to its workers, which simulate while the caller goes on (the learners update
    /// their networks meanwhile). Until [`VecEnv::finish_step`] the batch still shows the
    /// observations before this step; another step, a snapshot, a restore, a frame or new
    /// normaliser statistics are refused, and a reset finishes the step first.
    pub fn begin_step<'a>(&mut self, actions: impl Into<Actions<'a>>) -> Result<(), EnvError> {
        let envs = 0..self.num_envs();
        let actions = self.action_check().checked(&envs, actions.into())?;
        self.begin_checked(envs, actions)
    }

    /// Completes the step begun by [`VecEnv::begin_step`]: waits for the
    /// gymnasium workers (native environments step here), then runs the wrapper chains, as
    /// [`VecEnv::step`] does. Errors if no step was begun.
    pub fn finish_step(&mut self) -> Result<(), EnvError> {
        let Some(pending) = self.pending.take() else {
            return Err(EnvError::InvalidArgument(
                "finish_step without a begun step".into(),
            ));
        };
        if let (Some(gym), Some(sent)) = (&self.gym, pending.sent) {
            gym.await_step(sent)?;
        }
        self.step_slots(pending.envs, pending.actions.as_group())
    }

    /// What checks a batch's actions: its space and size.
    fn action_check(&self) -> ActionCheck<'_> {
        ActionCheck {
            space: &self.action_space,
            num_envs: self.num_envs(),
        }
    }

    fn step_checked(
        &mut self,
        envs: Range<usize>,
        actions: GroupActions<'_>,
    ) -> Result<(), EnvError> {
        self.refuse_while_pending()?;
        if let Some(gym) = &self.gym {
            let sent = gym.send_step(envs.clone(), actions)?;
            gym.await_step(sent)?;
        }
        self.step_slots(envs, actions)
    }

    fn begin_checked(
        &mut self,
        envs: Range<usize>,
        actions: GroupActions<'_>,
    ) -> Result<(), EnvError> {
        self.refuse_while_pending()?;
        let sent = match &self.gym {
            Some(gym) => Some(gym.send_step(envs.clone(), actions)?),
            None => None,
        };
        self.pending = Some(PendingStep {
            envs,
            actions: OwnedActions::of(actions),
            sent,
        });
        Ok(())
    }

    fn refuse_while_pending(&self) -> Result<(), EnvError> {
        match self.pending {
            Some(_) => Err(EnvError::InvalidArgument(
                "a batch step was begun and not finished (finish_step)".into(),
            )),
            None => Ok(()),
        }
    }

    /// The wrapper chains' half of a step: each slot's environment (a gymnasium proxy reads
    /// what its worker wrote) through its wrappers, then episodes and normalisers.
    fn step_slots(
        &mut self,
        envs: Range<usize>,
        actions: GroupActions<'_>,
    ) -> Result<(), EnvError> {
        let pooled = self.use_pool();
        let (emit, obs_len, agents) = (self.emit, self.obs_len, self.agents);
        let started = Instant::now();
        let (mut rows, pool) = self.group_rows(envs)?;
        let mut finished = rows.step(actions, emit, (obs_len, agents), pool.filter(|_| pooled));
        // A pooled step's single-thread cost is at most its time on all threads.
        let elapsed =
            started.elapsed().as_secs_f64() * if pooled { self.threads as f64 } else { 1.0 };
        self.work_estimate = Some(
            self.work_estimate
                .map_or(elapsed, |w| 0.9 * w + 0.1 * elapsed),
        );
        // A reset round trip (time-limit) inside a chain may have failed.
        if let Some(error) = self.gym.as_ref().and_then(GymPool::failure) {
            return Err(error);
        }
        end_info(self.gym.as_ref(), &mut finished)?;
        self.episodes.extend(finished);
        self.sync_normalizers_in_batch();
        Ok(())
    }

    /// The slots and rows of the environments `envs`, borrowed for a step, and the pool
    /// that may step them (with its thread count).
    #[allow(clippy::type_complexity)]
    fn group_rows(
        &mut self,
        envs: Range<usize>,
    ) -> Result<(GroupRows<'_>, Option<(&rayon::ThreadPool, usize)>), EnvError> {
        let games = whole_games(&envs, self.agents)?;
        let rows = envs.start * self.obs_len..envs.end * self.obs_len;
        let group = GroupRows {
            first: envs.start,
            slots: &mut self.slots[games],
            obs: &mut self.obs[rows.clone()],
            final_obs: &mut self.final_obs[rows],
            rewards: &mut self.rewards[envs.clone()],
            terminated: &mut self.terminated[envs.clone()],
            truncated: &mut self.truncated[envs],
        };
        Ok((group, self.pool.as_ref().map(|pool| (pool, self.threads))))
    }

    /// Observations, `num_envs * obs_len` f32 values, one row per environment, images
    /// channels-first with pixel values 0..=255.
    pub fn obs(&self) -> &[f32] {
        &self.obs
    }

    /// Last observation of the episode that ended in the latest step, per row; only
    /// rows with `terminated[i] || truncated[i]` are meaningful.
    pub fn final_obs(&self) -> &[f32] {
        &self.final_obs
    }

    pub fn final_obs_row(&self, env: usize) -> &[f32] {
        &self.final_obs[env * self.obs_len..(env + 1) * self.obs_len]
    }

    pub fn rewards(&self) -> &[f32] {
        &self.rewards
    }

    pub fn terminated(&self) -> &[bool] {
        &self.terminated
    }

    pub fn truncated(&self) -> &[bool] {
        &self.truncated
    }

    /// Which rows act on the next step, in a batch of games of several agents: in a game
    /// whose agents take turns the row of the agent whose turn it is, and in any game not the
    /// row of an agent that has left it (from the step after the one it left at until its
    /// game's reset). The other rows' actions are not played. `None` when every row acts on
    /// the next step (no game takes turns and no agent is absent).
    pub fn acting(&self) -> Option<Vec<bool>> {
        let Some(Players::Several { game, .. }) = self.slots.first().map(|slot| &slot.players)
        else {
            return None;
        };
        // The games of a batch are all of one kind: the first says whether they take turns.
        if !game.takes_turns() && !self.slots.iter().any(Slot::someone_left) {
            return None;
        }
        let agents = self.agents;
        let rows = self.slots.iter().flat_map(|slot| {
            (0..agents).map(move |j| match &slot.players {
                Players::Several { game, .. } => game.acts(j),
                Players::One(_) => true,
            })
        });
        Some(rows.collect())
    }

    /// Statistics of the games finished since the last call, in the order they ended
    /// (by step, then by environment index).
    pub fn drain_episodes(&mut self) -> Vec<EpisodeStats> {
        std::mem::take(&mut self.episodes)
    }

    fn snapshot_header(&self) -> SnapshotHeader {
        let mut names = Vec::new();
        self.slots[0].players.chain_names(&mut names);
        // chain_names lists outermost first; configs list the game, then wrappers inside out.
        let game = names.pop().unwrap_or_default();
        names.reverse();
        SnapshotHeader {
            game,
            wrappers: names,
            num_envs: self.slots.len(),
            obs_len: self.obs_len,
            actions: self.action_space.clone(),
        }
    }

    /// Everything that determines this batch's future observations, rewards, flags and
    /// episode statistics, as bytes [`VecEnv::restore`] reads back: every game's state
    /// and random streams, every wrapper's buffers and counters, normaliser statistics
    /// (shared and per environment), the episodes in progress and finished but not yet
    /// drained, and the current observation, reward and flag buffers. Costs time and
    /// space in proportion to that state (mostly frame buffers).
    ///
    /// Fails only if an environment cannot save its state (a custom [`Env`] without
    /// [`Env::save_state`]).
    pub fn snapshot(&self) -> Result<Vec<u8>, EnvError> {
        self.refuse_while_pending()?;
        let mut out = Vec::new();
        out.extend_from_slice(SNAPSHOT_MAGIC);
        SNAPSHOT_FORMAT_VERSION.save(&mut out);
        self.snapshot_header().save(&mut out);
        self.seeds.save(&mut out);
        self.seeded.save(&mut out);
        self.obs.save(&mut out);
        self.final_obs.save(&mut out);
        self.rewards.save(&mut out);
        self.terminated.save(&mut out);
        self.truncated.save(&mut out);
        self.episodes.save(&mut out);
        self.norms.len().save(&mut out);
        for norm in &self.norms {
            norm_kind_code(norm.kind).save(&mut out);
            norm.synced.save(&mut out);
            norm.local.save(&mut out);
        }
        for (i, slot) in self.slots.iter().enumerate() {
            for seat in &slot.seats {
                seat.episode_return.save(&mut out);
                seat.length.save(&mut out);
                seat.raw_score.save(&mut out);
                seat.finished.save(&mut out);
            }
            slot.scratch.is_some().save(&mut out);
            if let Some(scratch) = &slot.scratch {
                scratch.save(&mut out);
            }
            slot.players
                .save_state(&mut out)
                .map_err(|e| within_env(i, e))?;
        }
        let sum = checksum(&out);
        sum.save(&mut out);
        Ok(out)
    }

    /// Restores a [`VecEnv::snapshot`] into this batch, which must be built from the
    /// same spec with the same number of environments (its seeds may differ: the
    /// snapshot's state and seeds replace them). Afterwards stepping with the same
    /// actions gives bit-identical results to the batch the snapshot was taken of.
    ///
    /// Errors, naming what is wrong: not a snapshot, another format version, a
    /// checksum mismatch (corruption), truncation, or a batch built differently (game,
    /// wrapper chain, environment count, observation size, action count, a wrapper or
    /// game parameter, a buffer size). The magic, version, checksum and header are
    /// checked before anything changes; a mismatch found deeper (e.g. a wrapper
    /// parameter) may leave this batch partly restored, so rebuild it after an error.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), EnvError> {
        self.refuse_while_pending()?;
        let mut input = bytes;
        let magic = take(&mut input, SNAPSHOT_MAGIC.len(), "the snapshot magic")
            .map_err(|_| snapshot_error("not a tandem VecEnv snapshot (too short)"))?;
        if magic != SNAPSHOT_MAGIC {
            return Err(snapshot_error(
                "not a tandem VecEnv snapshot (its first bytes are not `TANDEMVE`)",
            ));
        }
        let mut version = 0u32;
        version.load(&mut input)?;
        if version != SNAPSHOT_FORMAT_VERSION {
            return Err(snapshot_error(format!(
                "format version {version}; this build reads version {SNAPSHOT_FORMAT_VERSION}"
            )));
        }
        let Some(body_len) = input.len().checked_sub(4) else {
            return Err(snapshot_error("truncated: no checksum"));
        };
        let (body, stored_sum) = input.split_at(body_len);
        let stored_sum = u32::from_le_bytes(stored_sum.try_into().expect("4 bytes"));
        if checksum(&bytes[..bytes.len() - 4]) != stored_sum {
            return Err(snapshot_error(
                "corrupt or truncated: the checksum does not match the contents",
            ));
        }
        let mut input = body;
        let mut header = SnapshotHeader::default();
        header.load(&mut input)?;
        let ours = self.snapshot_header();
        if header != ours {
            return Err(snapshot_error(format!(
                "taken of {header}; this VecEnv has {ours}"
            )));
        }
        let mut seeds = Vec::new();
        seeds.load(&mut input)?;
        if seeds.len() != self.slots.len() {
            return Err(snapshot_error(format!(
                "corrupt: {} seeds for {} environments",
                seeds.len(),
                self.slots.len()
            )));
        }
        self.seeds = seeds;
        self.seeded.load(&mut input)?;
        load_buffer(&mut self.obs, "the observation batch", &mut input)?;
        load_buffer(
            &mut self.final_obs,
            "the final-observation batch",
            &mut input,
        )?;
        load_buffer(&mut self.rewards, "the reward batch", &mut input)?;
        load_buffer(&mut self.terminated, "the terminated flags", &mut input)?;
        load_buffer(&mut self.truncated, "the truncated flags", &mut input)?;
        self.episodes.load(&mut input)?;
        let mut norm_count = 0usize;
        norm_count.load(&mut input)?;
        if norm_count != self.norms.len() {
            return Err(snapshot_error(format!(
                "{norm_count} shared normalisers in the snapshot, {} here",
                self.norms.len()
            )));
        }
        for (k, norm) in self.norms.iter_mut().enumerate() {
            let mut kind = 0u8;
            kind.load(&mut input)?;
            if kind != norm_kind_code(norm.kind) {
                return Err(snapshot_error(format!(
                    "shared normaliser {k} is of another kind in the snapshot"
                )));
            }
            let dim = norm.synced.dim();
            norm.synced.load(&mut input)?;
            norm.local.load(&mut input)?;
            for stats in [&norm.synced, &norm.local] {
                if stats.mean.len() != dim || stats.var.len() != dim {
                    return Err(snapshot_error(format!(
                        "shared normaliser {k} has dimension {} in the snapshot, {dim} here",
                        stats.mean.len()
                    )));
                }
            }
        }
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let mut restore_slot = |input: &mut &[u8]| -> Result<(), EnvError> {
                for seat in &mut slot.seats {
                    seat.episode_return.load(input)?;
                    seat.length.load(input)?;
                    seat.raw_score.load(input)?;
                    seat.finished.load(input)?;
                }
                let mut has_scratch = false;
                has_scratch.load(input)?;
                match (&mut slot.scratch, has_scratch) {
                    (Some(scratch), true) => scratch.load(input)?,
                    (None, false) => {}
                    _ => {
                        return Err(snapshot_error(
                            "corrupt: conversion buffer presence differs",
                        ));
                    }
                }
                slot.players.load_state(input)
            };
            restore_slot(&mut input).map_err(|e| within_env(i, e))?;
        }
        if !input.is_empty() {
            return Err(snapshot_error(format!(
                "{} bytes left unread after the last environment",
                input.len()
            )));
        }
        Ok(())
    }

    /// Lives left in each row's game (0 for the agents of a multi-agent game).
    pub fn lives(&self) -> Vec<u32> {
        self.slots
            .iter()
            .flat_map(|s| std::iter::repeat_n(s.players.lives(), s.seats.len()))
            .collect()
    }

    /// The RGB screen of one row's game (the agents of a multi-agent game show the same one):
    /// `Ok(None)` when its game does not draw itself (a gymnasium environment draws itself only
    /// when made for it, [`BridgeOptions::render`]); an error when a gymnasium worker failed to
    /// draw it.
    pub fn render_rgb(&self, env: usize) -> Result<Option<crate::env::RgbFrame>, EnvError> {
        self.refuse_while_pending()?;
        // Every agent of a game shows the same game.
        let frame = self
            .slots
            .get(env / self.agents)
            .and_then(|slot| slot.players.render_rgb());
        if frame.is_none()
            && let Some(error) = self.gym.as_ref().and_then(GymPool::failure)
        {
            return Err(error);
        }
        Ok(frame)
    }

    /// Merges the values every environment's normalisers saw in the latest step into
    /// this rank's delta, in environment order, and hands every environment the new
    /// effective statistics.
    fn sync_normalizers_in_batch(&mut self) {
        if self.norms.is_empty() {
            return;
        }
        merge_pending(&mut self.slots, &mut self.norms);
        self.push_effective_stats();
    }

    fn push_effective_stats(&mut self) {
        set_current(&mut self.slots, &effective_stats(&self.norms));
    }

    /// Effective statistics of each normaliser (synced plus this rank's delta): what
    /// observations are normalised with, and what a checkpoint should save.
    pub fn normalizer_stats(&self) -> Vec<NormStats> {
        effective_stats(&self.norms)
    }

    /// [`VecEnv::normalizer_stats`] of the normalisers of one kind, in chain order: what a
    /// batch of the same chain without the other kind's normalisers sets (an evaluation's,
    /// which has no reward normaliser).
    pub fn normalizer_stats_of(&self, kind: NormKind) -> Vec<NormStats> {
        let all = self.normalizer_stats();
        self.norms
            .iter()
            .zip(all)
            .filter(|(n, _)| n.kind == kind)
            .map(|(_, s)| s)
            .collect()
    }

    /// Restores statistics (e.g. from a checkpoint): they become the synced statistics
    /// and this rank's delta is cleared.
    pub fn set_normalizer_stats(&mut self, stats: &[NormStats]) -> Result<(), EnvError> {
        self.refuse_while_pending()?;
        self.check_norm_shapes(stats)?;
        for (n, s) in self.norms.iter_mut().zip(stats) {
            n.synced = s.clone();
            n.local = NormStats::empty(s.dim());
        }
        self.push_effective_stats();
        Ok(())
    }

    /// Stops every normaliser from learning from what it sees: observations and rewards are
    /// normalised with the statistics they hold now (an evaluation's, restored from training's).
    pub fn freeze_normalizers(&mut self) {
        for slot in &mut self.slots {
            slot.players
                .visit_normalizers(&mut |n: &mut Normalizer| n.update = false);
        }
    }

    /// This rank's statistics gathered since the last [`VecEnv::apply_normalizer_sync`]
    /// (all-reduce these across ranks, e.g. as [`NormStats::to_sums`]).
    pub fn normalizer_deltas(&self) -> Vec<NormStats> {
        self.norms.iter().map(|n| n.local.clone()).collect()
    }

    /// Folds the merged deltas of all ranks into the synced statistics and clears this
    /// rank's delta; after every rank applies the same merged deltas, all ranks
    /// normalise identically.
    pub fn apply_normalizer_sync(&mut self, merged_deltas: &[NormStats]) -> Result<(), EnvError> {
        // The begun step's outcome is normalised at its finish, with the statistics before
        // the change, as an unsplit step would have been.
        self.refuse_while_pending()?;
        self.check_norm_shapes(merged_deltas)?;
        for (n, d) in self.norms.iter_mut().zip(merged_deltas) {
            n.synced.merge(d);
            n.local = NormStats::empty(d.dim());
        }
        self.push_effective_stats();
        Ok(())
    }

    fn check_norm_shapes(&self, stats: &[NormStats]) -> Result<(), EnvError> {
        if stats.len() != self.norms.len() {
            return Err(EnvError::InvalidArgument(format!(
                "{} normaliser statistics given, the environments have {} normalisers",
                stats.len(),
                self.norms.len()
            )));
        }
        for (k, (n, s)) in self.norms.iter().zip(stats).enumerate() {
            let valid = s.mean.len() == s.var.len()
                && s.count.is_finite()
                && s.count >= 0.0
                && s.mean.iter().chain(&s.var).all(|v| v.is_finite())
                && s.var.iter().all(|&v| v >= 0.0);
            if s.dim() != n.synced.dim() || !valid {
                return Err(EnvError::InvalidArgument(format!(
                    "normaliser {k} statistics must have {} finite means and non-negative variances and a non-negative count; got {} means, {} variances, count {}",
                    n.synced.dim(),
                    s.mean.len(),
                    s.var.len(),
                    s.count
                )));
            }
        }
        Ok(())
    }
}

fn norm_kind_code(kind: NormKind) -> u8 {
    match kind {
        NormKind::Observation => 0,
        NormKind::Reward => 1,
    }
}

/// Says which environment of the batch a snapshot error concerns.
fn within_env(index: usize, error: EnvError) -> EnvError {
    match error {
        EnvError::Snapshot(message) => snapshot_error(format!("environment {index}: {message}")),
        other => other,
    }
}

/// The spaces every environment of a batch shares, or why the batch cannot be made: no
/// environments, a seed count that is not theirs, no thread, an empty space, or two
/// environments that differ.
fn check_batch(
    envs: &[Box<dyn Env>],
    seeds: &[u64],
    threads: usize,
) -> Result<(ObsSpace, ActionSpace), EnvError> {
    if envs.is_empty() {
        return Err(EnvError::InvalidArgument(
            "a VecEnv needs at least one environment".into(),
        ));
    }
    if seeds.len() != envs.len() {
        return Err(EnvError::InvalidArgument(format!(
            "{} seeds given for {} environments",
            seeds.len(),
            envs.len()
        )));
    }
    if threads == 0 {
        return Err(EnvError::InvalidArgument(
            "a VecEnv needs at least one thread".into(),
        ));
    }
    let env_space = envs[0].observation_space();
    let action_space = envs[0].action_space();
    if env_space.is_empty() || action_space.dim() == 0 || action_space.num_discrete() == Some(0) {
        return Err(EnvError::InvalidArgument(format!(
            "environment has an empty observation ({env_space}) or no actions ({action_space})"
        )));
    }
    for (i, env) in envs.iter().enumerate() {
        if env.observation_space() != env_space || env.action_space() != action_space {
            return Err(EnvError::InvalidArgument(format!(
                "environment {i} has observation {} and {}, environment 0 has {env_space} and {action_space}",
                env.observation_space(),
                env.action_space()
            )));
        }
    }
    Ok((env_space, action_space))
}

/// The row every agent of a batch of multi-agent games is written in (the widest agent's
/// observation, see [`Packed`]), the action space they share and the agents per game, or why
/// the batch cannot be made (as [`check_batch`], and agents that act in different spaces or
/// observe different kinds of observation: images, or vectors of another type).
fn check_games(
    games: &[Box<dyn ParallelEnv>],
    seeds: &[u64],
    threads: usize,
) -> Result<(ObsSpace, ActionSpace, usize), EnvError> {
    let Some(first) = games.first() else {
        return Err(EnvError::InvalidArgument(
            "a VecEnv needs at least one environment".into(),
        ));
    };
    if seeds.len() != games.len() || threads == 0 {
        return Err(EnvError::InvalidArgument(format!(
            "{} seeds and {threads} threads given for {} games (one seed each, at least one thread)",
            seeds.len(),
            games.len()
        )));
    }
    let agents = first.agents();
    let (lead, action_space) = (&agents[0], agents[0].actions.clone());
    if let Some(other) = agents.iter().find(|a| a.actions != action_space) {
        return Err(EnvError::InvalidArgument(format!(
            "`{}`'s agents act differently: {} takes {}, {} takes {action_space}; one batch \
             holds agents that share their action space",
            first.name(),
            other.name,
            other.actions,
            lead.name
        )));
    }
    // Agents may differ only in the length of a vector: anything else would not be the same
    // columns of one matrix.
    let same_kind = |a: &ObsSpace| {
        let len = a.len();
        a.is_vector()
            && lead.observation.is_vector()
            && *a
                == ObsSpace {
                    shape: ObsShape::Vector { len },
                    ..lead.observation
                }
    };
    let apart = agents
        .iter()
        .find(|a| a.observation != lead.observation && !same_kind(&a.observation));
    if let Some(other) = apart {
        return Err(EnvError::InvalidArgument(format!(
            "`{}`'s agents observe different kinds of observation: {} observes {}, {} observes \
             {}; one batch holds agents whose observations are equal or vectors of one type \
             that differ only in length",
            first.name(),
            other.name,
            other.observation,
            lead.name,
            lead.observation
        )));
    }
    if games.iter().any(|g| g.agents() != agents) {
        return Err(EnvError::InvalidArgument(
            "the games of a batch have different agents".into(),
        ));
    }
    let row = agents
        .iter()
        .map(|a| a.observation)
        .max_by_key(ObsSpace::len)
        .unwrap_or(lead.observation);
    Ok((row, action_space, agents.len()))
}

/// The slots of rows `envs` in a batch of `agents` rows per game; rows that cut a game are
/// refused (its agents step together).
fn whole_games(envs: &Range<usize>, agents: usize) -> Result<Range<usize>, EnvError> {
    if !envs.start.is_multiple_of(agents) || !envs.end.is_multiple_of(agents) {
        return Err(EnvError::InvalidArgument(format!(
            "rows {envs:?} cut a game of {agents} agents; a group of rows holds whole games"
        )));
    }
    Ok(envs.start / agents..envs.end / agents)
}

/// Takes over the normalisers of every environment's chain (the batch keeps their statistics
/// equal) and returns one shared record per chain position; every chain must have the same
/// normalisers in the same places.
fn shared_normalizers(envs: &mut [Box<dyn Env>]) -> Result<Vec<SharedNorm>, EnvError> {
    let mut norms: Vec<SharedNorm> = Vec::new();
    for (i, env) in envs.iter_mut().enumerate() {
        let mut layout = Vec::new();
        env.visit_normalizers(&mut |n: &mut Normalizer| {
            n.managed = true;
            layout.push((n.kind, n.current().dim()));
        });
        if i == 0 {
            norms = layout
                .iter()
                .map(|&(kind, dim)| SharedNorm {
                    kind,
                    synced: NormStats::empty(dim),
                    local: NormStats::empty(dim),
                })
                .collect();
        } else if layout.len() != norms.len()
            || layout
                .iter()
                .zip(&norms)
                .any(|(l, n)| l.0 != n.kind || l.1 != n.synced.dim())
        {
            return Err(EnvError::InvalidArgument(format!(
                "environment {i} has different normalising wrappers from environment 0"
            )));
        }
    }
    Ok(norms)
}

/// The pool a batch steps on: none for one thread (the caller's thread steps).
fn thread_pool(threads: usize) -> Result<Option<rayon::ThreadPool>, EnvError> {
    if threads <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tandem-env-{i}"))
        .build()
        .map(Some)
        .map_err(|e| {
            EnvError::InvalidArgument(format!("cannot start {threads} environment threads: {e}"))
        })
}

/// Merges what the normalisers of `slots` saw since their last merge into this rank's
/// deltas, in environment order.
fn merge_pending(slots: &mut [Slot], norms: &mut [SharedNorm]) {
    for slot in slots {
        let mut k = 0;
        slot.players.visit_normalizers(&mut |n: &mut Normalizer| {
            norms[k].local.merge(&n.take_pending());
            k += 1;
        });
    }
}

/// Each shared normaliser's effective statistics: synced plus this rank's delta.
fn effective_stats(norms: &[SharedNorm]) -> Vec<NormStats> {
    norms
        .iter()
        .map(|n| {
            let mut s = n.synced.clone();
            s.merge(&n.local);
            s
        })
        .collect()
}

/// Hands the normalisers of `slots` the statistics they normalise with.
fn set_current(slots: &mut [Slot], stats: &[NormStats]) {
    for slot in slots {
        let mut k = 0;
        slot.players.visit_normalizers(&mut |n: &mut Normalizer| {
            n.set_current(&stats[k]);
            k += 1;
        });
    }
}

/// The slots and rows of consecutive environments `first..first + slots.len()` of a batch:
/// what one step of them writes.
struct GroupRows<'a> {
    first: usize,
    slots: &'a mut [Slot],
    obs: &'a mut [f32],
    final_obs: &'a mut [f32],
    rewards: &'a mut [f32],
    terminated: &'a mut [bool],
    truncated: &'a mut [bool],
}

impl GroupRows<'_> {
    /// Steps each environment with its action (`actions.get(k)` for the k-th), on `pool`
    /// (with its thread count) when given, else on this thread; returns the games that ended,
    /// in environment order.
    fn step(
        &mut self,
        actions: GroupActions<'_>,
        emit: Emit,
        (obs_len, agents): (usize, usize),
        pool: Option<(&rayon::ThreadPool, usize)>,
    ) -> Vec<EpisodeStats> {
        let first = self.first;
        let work =
            |(g, ((((slot, obs), final_obs), rewards), (terminated, truncated))): StepItem<'_>| {
                let rows = SlotRows {
                    obs,
                    final_obs,
                    rewards,
                    terminated,
                    truncated,
                };
                let row = g * agents;
                slot.step(first + row, |j| actions.get(row + j), rows, emit);
            };
        let slot_len = obs_len * agents;
        match pool {
            None => self
                .slots
                .iter_mut()
                .zip(self.obs.chunks_mut(slot_len))
                .zip(self.final_obs.chunks_mut(slot_len))
                .zip(self.rewards.chunks_mut(agents))
                .zip(
                    self.terminated
                        .chunks_mut(agents)
                        .zip(self.truncated.chunks_mut(agents)),
                )
                .enumerate()
                .for_each(work),
            Some((pool, threads)) => {
                let min_len = (self.slots.len() / (threads * 4)).max(1);
                pool.install(|| {
                    self.slots
                        .par_iter_mut()
                        .zip(self.obs.par_chunks_mut(slot_len))
                        .zip(self.final_obs.par_chunks_mut(slot_len))
                        .zip(self.rewards.par_chunks_mut(agents))
                        .zip(
                            self.terminated
                                .par_chunks_mut(agents)
                                .zip(self.truncated.par_chunks_mut(agents)),
                        )
                        .enumerate()
                        .with_min_len(min_len)
                        .for_each(work)
                })
            }
        }
        // Only rows whose episode ended can have finished a game.
        let ended = self
            .terminated
            .iter()
            .zip(self.truncated.iter())
            .map(|(&te, &tr)| te || tr);
        self.slots
            .iter_mut()
            .flat_map(|slot| slot.seats.iter_mut())
            .zip(ended)
            .filter(|(_, ended)| *ended)
            .filter_map(|(seat, _)| seat.finished.take())
            .collect()
    }
}

/// Checks actions for environments of a batch against its action space, before anything
/// steps: what [`VecEnv`] and each of its [`EnvGroup`]s refuse.
#[derive(Clone, Copy)]
pub(crate) struct ActionCheck<'a> {
    space: &'a ActionSpace,
    num_envs: usize,
}

impl ActionCheck<'_> {
    /// `actions` checked against the space for the environments `envs`.
    pub(crate) fn checked<'a>(
        &self,
        envs: &Range<usize>,
        actions: Actions<'a>,
    ) -> Result<GroupActions<'a>, EnvError> {
        match actions {
            Actions::Discrete(a) => self.checked_discrete(envs, a),
            Actions::Box(values) => self.checked_box(envs, values),
        }
    }

    fn checked_discrete<'a>(
        &self,
        envs: &Range<usize>,
        actions: &'a [i64],
    ) -> Result<GroupActions<'a>, EnvError> {
        if let ActionSpace::MultiDiscrete { nvec } = &self.space {
            return self.checked_multi_discrete(envs, actions, nvec);
        }
        self.check_group(envs, actions.len(), 1)?;
        let Some(n) = self.space.num_discrete() else {
            return Err(self.wrong_kind("discrete actions"));
        };
        if let Some((k, &action)) = actions
            .iter()
            .enumerate()
            .find(|&(_, &a)| a < 0 || a as u64 >= n as u64)
        {
            return Err(EnvError::InvalidAction {
                env: envs.start + k,
                action,
                num_actions: n,
            });
        }
        Ok(GroupActions::Discrete(actions))
    }

    /// Rows of one index per component, each within its component's count.
    fn checked_multi_discrete<'a>(
        &self,
        envs: &Range<usize>,
        actions: &'a [i64],
        nvec: &[usize],
    ) -> Result<GroupActions<'a>, EnvError> {
        let dim = nvec.len();
        self.check_group(envs, actions.len(), dim)?;
        let outside = actions
            .iter()
            .enumerate()
            .find(|&(k, &a)| a < 0 || a as u64 >= nvec[k % dim] as u64);
        if let Some((k, &action)) = outside {
            return Err(EnvError::InvalidArgument(format!(
                "environment {}: component {} of its action is {action}, outside 0..{}",
                envs.start + k / dim,
                k % dim,
                nvec[k % dim]
            )));
        }
        Ok(GroupActions::MultiDiscrete {
            indices: actions,
            dim,
        })
    }

    fn checked_box<'a>(
        &self,
        envs: &Range<usize>,
        actions: &'a [f32],
    ) -> Result<GroupActions<'a>, EnvError> {
        if !self.space.is_box() {
            return Err(self.wrong_kind("box actions"));
        }
        let dim = self.space.dim();
        self.check_group(envs, actions.len(), dim)?;
        if let Some(k) = actions.iter().position(|a| !a.is_finite()) {
            return Err(EnvError::InvalidArgument(format!(
                "environment {}: action value {} is not finite",
                envs.start + k / dim,
                actions[k]
            )));
        }
        Ok(GroupActions::Box {
            values: actions,
            dim,
        })
    }

    fn wrong_kind(&self, given: &str) -> EnvError {
        EnvError::InvalidArgument(format!(
            "{given} given to environments that take {}",
            self.space
        ))
    }

    /// Checks that `envs` is within the batch and `values` holds `per_env` values for each.
    fn check_group(
        &self,
        envs: &Range<usize>,
        values: usize,
        per_env: usize,
    ) -> Result<(), EnvError> {
        if envs.start > envs.end || envs.end > self.num_envs {
            return Err(EnvError::InvalidArgument(format!(
                "environment group {envs:?} is not within the batch of {}",
                self.num_envs
            )));
        }
        if values != envs.len() * per_env {
            return Err(EnvError::ActionCount {
                expected: envs.len() * per_env,
                got: values,
            });
        }
        Ok(())
    }
}

impl Emit {
    /// How the batch writes observations of `space`: f32 vectors, planar f32 images and
    /// single-channel images straight into their rows, anything else through a conversion
    /// (bytes to floats, interleaved channels to planes).
    fn for_space(space: &ObsSpace) -> Emit {
        let direct = space.dtype == Dtype::F32
            && (matches!(
                space.shape,
                ObsShape::Vector { .. }
                    | ObsShape::ImageAndVector { .. }
                    | ObsShape::Image {
                        layout: Layout::Chw,
                        ..
                    }
            ) || space.is_single_channel_image());
        match space.shape {
            _ if direct => Emit::Direct,
            ObsShape::Vector { .. } | ObsShape::ImageAndVector { .. } => Emit::Convert {
                height: 1,
                width: space.len(),
                channels: 1,
                transpose: false,
            },
            ObsShape::Image {
                height,
                width,
                channels,
                layout,
            } => Emit::Convert {
                height,
                width,
                channels,
                transpose: layout == Layout::Hwc && channels > 1,
            },
        }
    }
}

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
//! in the latest step.
//!
//! Results never depend on the thread count: every environment only touches its own
//! state and rows, and anything shared (episode statistics, normaliser statistics) is
//! combined afterwards in environment order.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::EnvError;
use crate::env::Env;
use crate::norm::{NormKind, NormStats, Normalizer};
use crate::space::{Dtype, Layout, ObsBuf, ObsShape, ObsSpace, ObsStore};
use crate::spec::{EnvSpec, make_env};

/// Statistics of one finished game (all lives, under episodic-life).
#[derive(Debug, Clone, PartialEq)]
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

struct Slot {
    env: Box<dyn Env>,
    scratch: Option<ObsStore>,
    episode_return: f64,
    length: u64,
    raw_score: f64,
    finished: Option<EpisodeStats>,
}

impl Slot {
    fn buf<'a>(scratch: &'a mut Option<ObsStore>, row: &'a mut [f32]) -> ObsBuf<'a> {
        match scratch {
            Some(store) => store.buf(),
            None => ObsBuf::F32(row),
        }
    }

    fn reset(&mut self, seed: Option<u64>, row: &mut [f32], emit: Emit) {
        self.env.reset(seed, Self::buf(&mut self.scratch, row));
        self.episode_return = 0.0;
        self.length = 0;
        self.raw_score = 0.0;
        emit_row(&self.scratch, row, emit);
    }

    fn step(
        &mut self,
        index: usize,
        action: usize,
        row: &mut [f32],
        final_row: &mut [f32],
        emit: Emit,
    ) -> (f32, bool, bool) {
        let step = match &mut self.scratch {
            // The row holds this environment's previous observation and nothing else
            // writes it, so the environment may update it in place.
            None => self.env.step_in_place(action, row),
            Some(store) => self.env.step(action, store.buf()),
        };
        emit_row(&self.scratch, row, emit);
        self.episode_return += f64::from(step.reward);
        self.raw_score += f64::from(step.raw_reward);
        self.length += 1;
        if step.done() {
            final_row.copy_from_slice(row);
            if step.game_over {
                self.finished = Some(EpisodeStats {
                    env_index: index,
                    episode_return: self.episode_return,
                    length: self.length,
                    raw_score: self.raw_score,
                    truncated: step.truncated && !step.terminated,
                });
                self.episode_return = 0.0;
                self.length = 0;
                self.raw_score = 0.0;
            }
            // Only the agent's episode restarts after a lost life; the game goes on.
            self.env.reset(None, Self::buf(&mut self.scratch, row));
            emit_row(&self.scratch, row, emit);
        }
        (step.reward, step.terminated, step.truncated)
    }
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

/// One environment's share of a batch step: its slot, action and output rows.
type StepItem<'a> = (
    usize,
    (
        (
            (((&'a mut Slot, &'a i64), &'a mut [f32]), &'a mut [f32]),
            &'a mut f32,
        ),
        (&'a mut bool, &'a mut bool),
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
    seeds: Vec<u64>,
    seeded: bool,
    env_space: ObsSpace,
    emit: Emit,
    obs_len: usize,
    num_actions: usize,
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
}

/// Default for [`VecEnv::set_min_parallel_work`].
pub const DEFAULT_MIN_PARALLEL_WORK: Duration = Duration::from_micros(100);

impl VecEnv {
    /// Builds `seeds.len()` environments from `spec`, environment `i` seeded with
    /// `seeds[i]` (see [`crate::env_seeds`]), stepped on `threads` threads (1 = on the
    /// calling thread, no pool).
    pub fn new(spec: &EnvSpec, seeds: &[u64], threads: usize) -> Result<Self, EnvError> {
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
        let num_actions = envs[0].num_actions();
        if env_space.is_empty() || num_actions == 0 {
            return Err(EnvError::InvalidArgument(format!(
                "environment has an empty observation ({env_space}) or no actions ({num_actions})"
            )));
        }
        for (i, env) in envs.iter().enumerate() {
            if env.observation_space() != env_space || env.num_actions() != num_actions {
                return Err(EnvError::InvalidArgument(format!(
                    "environment {i} has observation {} and {} actions, environment 0 has {env_space} and {num_actions}",
                    env.observation_space(),
                    env.num_actions()
                )));
            }
        }
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
        let direct = env_space.dtype == Dtype::F32
            && (matches!(
                env_space.shape,
                ObsShape::Vector { .. }
                    | ObsShape::Image {
                        layout: Layout::Chw,
                        ..
                    }
            ) || env_space.is_single_channel_image());
        let emit = match env_space.shape {
            _ if direct => Emit::Direct,
            ObsShape::Vector { len } => Emit::Convert {
                height: 1,
                width: len,
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
        };
        let n = envs.len();
        let obs_len = env_space.len();
        let slots = envs
            .into_iter()
            .map(|env| Slot {
                env,
                scratch: (emit != Emit::Direct).then(|| ObsStore::zeros(&env_space)),
                episode_return: 0.0,
                length: 0,
                raw_score: 0.0,
                finished: None,
            })
            .collect();
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("tandem-env-{i}"))
                    .build()
                    .map_err(|e| {
                        EnvError::InvalidArgument(format!(
                            "cannot start {threads} environment threads: {e}"
                        ))
                    })?,
            )
        } else {
            None
        };
        Ok(VecEnv {
            slots,
            seeds,
            seeded: false,
            env_space,
            emit,
            obs_len,
            num_actions,
            obs: vec![0.0; n * obs_len],
            final_obs: vec![0.0; n * obs_len],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            episodes: Vec::new(),
            norms,
            pool,
            threads,
            min_parallel_work: DEFAULT_MIN_PARALLEL_WORK,
            work_estimate: None,
        })
    }

    pub fn num_envs(&self) -> usize {
        self.slots.len()
    }

    pub fn num_actions(&self) -> usize {
        self.num_actions
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
    /// `num_envs * obs_len` values, row per environment.
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

    /// Resets every environment with explicit seeds (one per environment).
    pub fn reset_with_seeds(&mut self, seeds: &[u64]) -> Result<&[f32], EnvError> {
        if seeds.len() != self.slots.len() {
            return Err(EnvError::InvalidArgument(format!(
                "{} seeds given for {} environments",
                seeds.len(),
                self.slots.len()
            )));
        }
        self.seeded = true;
        self.reset_impl(Some(seeds));
        Ok(&self.obs)
    }

    fn reset_impl(&mut self, seeds: Option<&[u64]>) {
        let emit = self.emit;
        let work = |(i, (slot, row)): (usize, (&mut Slot, &mut [f32]))| {
            slot.reset(seeds.map(|s| s[i]), row, emit);
        };
        let obs_len = self.obs_len;
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

    /// Steps every environment with its action (`actions[i]` for environment `i`),
    /// resetting those whose episode ends. Errors, before anything is stepped, if the
    /// number of actions is wrong or an action is out of range.
    pub fn step(&mut self, actions: &[i64]) -> Result<(), EnvError> {
        if actions.len() != self.slots.len() {
            return Err(EnvError::ActionCount {
                expected: self.slots.len(),
                got: actions.len(),
            });
        }
        if let Some((env, &action)) = actions
            .iter()
            .enumerate()
            .find(|&(_, &a)| a < 0 || a as u64 >= self.num_actions as u64)
        {
            return Err(EnvError::InvalidAction {
                env,
                action,
                num_actions: self.num_actions,
            });
        }
        let emit = self.emit;
        let obs_len = self.obs_len;
        let work = |(
            i,
            (((((slot, &action), row), final_row), reward), (terminated, truncated)),
        ): StepItem<'_>| {
            let (r, te, tr) = slot.step(i, action as usize, row, final_row, emit);
            *reward = r;
            *terminated = te;
            *truncated = tr;
        };
        let started = Instant::now();
        let pooled = self.use_pool();
        match self.pool.as_ref().filter(|_| pooled) {
            None => self
                .slots
                .iter_mut()
                .zip(actions)
                .zip(self.obs.chunks_mut(obs_len))
                .zip(self.final_obs.chunks_mut(obs_len))
                .zip(self.rewards.iter_mut())
                .zip(self.terminated.iter_mut().zip(self.truncated.iter_mut()))
                .enumerate()
                .for_each(work),
            Some(pool) => {
                let min_len = (self.slots.len() / (self.threads * 4)).max(1);
                pool.install(|| {
                    self.slots
                        .par_iter_mut()
                        .zip(actions)
                        .zip(self.obs.par_chunks_mut(obs_len))
                        .zip(self.final_obs.par_chunks_mut(obs_len))
                        .zip(self.rewards.par_iter_mut())
                        .zip(
                            self.terminated
                                .par_iter_mut()
                                .zip(self.truncated.par_iter_mut()),
                        )
                        .enumerate()
                        .with_min_len(min_len)
                        .for_each(work)
                })
            }
        }
        // A pooled step's single-thread cost is at most its time on all threads.
        let elapsed =
            started.elapsed().as_secs_f64() * if pooled { self.threads as f64 } else { 1.0 };
        self.work_estimate = Some(
            self.work_estimate
                .map_or(elapsed, |w| 0.9 * w + 0.1 * elapsed),
        );
        // Only environments whose episode ended can have finished a game.
        for (i, (te, tr)) in self.terminated.iter().zip(&self.truncated).enumerate() {
            if *te || *tr {
                self.episodes.extend(self.slots[i].finished.take());
            }
        }
        self.sync_normalizers_in_batch();
        Ok(())
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

    /// Statistics of the games finished since the last call, in the order they ended
    /// (by step, then by environment index).
    pub fn drain_episodes(&mut self) -> Vec<EpisodeStats> {
        std::mem::take(&mut self.episodes)
    }

    /// Lives left in each environment's game.
    pub fn lives(&self) -> Vec<u32> {
        self.slots.iter().map(|s| s.env.lives()).collect()
    }

    /// The RGB screen of one environment, if its game can draw itself.
    pub fn render_rgb(&self, env: usize) -> Option<crate::env::RgbFrame> {
        self.slots.get(env).and_then(|s| s.env.render_rgb())
    }

    /// Merges the values every environment's normalisers saw in the latest step into
    /// this rank's delta, in environment order, and hands every environment the new
    /// effective statistics.
    fn sync_normalizers_in_batch(&mut self) {
        if self.norms.is_empty() {
            return;
        }
        for slot in &mut self.slots {
            let mut k = 0;
            let norms = &mut self.norms;
            slot.env.visit_normalizers(&mut |n: &mut Normalizer| {
                norms[k].local.merge(&n.take_pending());
                k += 1;
            });
        }
        self.push_effective_stats();
    }

    fn push_effective_stats(&mut self) {
        let effective = self.normalizer_stats();
        for slot in &mut self.slots {
            let mut k = 0;
            slot.env.visit_normalizers(&mut |n: &mut Normalizer| {
                n.set_current(&effective[k]);
                k += 1;
            });
        }
    }

    /// Kinds of the normalising wrappers in chain order (innermost first).
    pub fn normalizer_kinds(&self) -> Vec<NormKind> {
        self.norms.iter().map(|n| n.kind).collect()
    }

    /// Effective statistics of each normaliser (synced plus this rank's delta): what
    /// observations are normalised with, and what a checkpoint should save.
    pub fn normalizer_stats(&self) -> Vec<NormStats> {
        self.norms
            .iter()
            .map(|n| {
                let mut s = n.synced.clone();
                s.merge(&n.local);
                s
            })
            .collect()
    }

    /// Restores statistics (e.g. from a checkpoint): they become the synced statistics
    /// and this rank's delta is cleared.
    pub fn set_normalizer_stats(&mut self, stats: &[NormStats]) -> Result<(), EnvError> {
        self.check_norm_shapes(stats)?;
        for (n, s) in self.norms.iter_mut().zip(stats) {
            n.synced = s.clone();
            n.local = NormStats::empty(s.dim());
        }
        self.push_effective_stats();
        Ok(())
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
        self.check_norm_shapes(merged_deltas)?;
        for (n, d) in self.norms.iter_mut().zip(merged_deltas) {
            n.synced.merge(d);
            n.local = NormStats::empty(d.dim());
        }
        self.push_effective_stats();
        Ok(())
    }

    /// Freezes (false) or resumes (true) updating the normaliser statistics.
    pub fn set_normalizer_update(&mut self, update: bool) {
        for slot in &mut self.slots {
            slot.env
                .visit_normalizers(&mut |n: &mut Normalizer| n.update = update);
        }
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

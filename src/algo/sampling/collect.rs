//! Rollout collection for on-policy learners: T steps of a rank's N environments with the
//! current policy, into a [`RolloutBuffer`], plus the bootstrap values after the last step.
//!
//! With `train.env-groups` k > 1 the collection is double-buffered: the environments step in k
//! groups in turn on one extra thread while this thread runs the policy for the next group. The
//! policy and every libtorch call stay on this thread and the draws happen in a fixed order, so
//! results do not depend on timing (or on k).
//!
//! A recurrent policy collects through [`RolloutCollector::collect_recurrent`], carrying each
//! environment's [`Memory`] from step to step and rollout to rollout; it steps all environments
//! at once (the config refuses env-groups for it).
//!
//! [`collect_batch`] is one rollout as every sampling mode takes it: the action draws seeded
//! for the update that learns from it ([`Draws`]), whichever thread collects.

use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tch::Tensor;

use tandem_env::VecEnv;

use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::learner::Phases;
use crate::algo::storage::host_rows::{
    copy_rows_into, flags_to_tensor, host_actions, row_to_tensor, rows_to_batch,
};
use crate::algo::storage::memory::Memory;
use crate::algo::storage::rollout::{RolloutBuffer, StepRecord};
use crate::nn::{ActTaken, ActorCritic};

/// What collection needs of a policy: sampled actions (with their log-probabilities and values),
/// what the environments receive for them, and values alone. A trait so that a learner with
/// another model collects through the same code.
pub trait RolloutPolicy {
    /// Actions `[n]` (discrete) or `[n, d]` (box) for observations `[n, ...]`: what the buffer
    /// stores and the log-probabilities are of.
    fn act(&self, obs: &Tensor) -> Result<ActTaken>;
    /// The actions sent to the environments for actions [`RolloutPolicy::act`] chose (a box
    /// policy scales and clips them; the stored ones stay unclipped).
    fn env_actions(&self, actions: &Tensor) -> Tensor;
    /// V(s) `[n]`.
    fn value(&self, obs: &Tensor) -> Result<Tensor>;
}

impl RolloutPolicy for ActorCritic {
    fn act(&self, obs: &Tensor) -> Result<ActTaken> {
        ActorCritic::act(self, obs)
    }
    fn env_actions(&self, actions: &Tensor) -> Tensor {
        ActorCritic::env_actions(self, actions)
    }
    fn value(&self, obs: &Tensor) -> Result<Tensor> {
        ActorCritic::value(self, obs)
    }
}

/// What runs before each step of a collection, on the collecting thread: free-running sampling
/// takes up the learner's newest parameters there (`super::free`). The policy is not in use
/// while it runs.
pub trait StepHook {
    /// Before a step of all groups, or in ready order before each forward pass, which chooses
    /// the actions of the `groups` groups it serves (a step of all groups: every group).
    /// `first_group_chosen`: the step's first group already has its actions, chosen while the
    /// step before stepped (double-buffered groups), so a change of parameters now reaches
    /// that group one step later.
    fn before_step(&mut self, first_group_chosen: bool, groups: usize) -> Result<()>;
}

/// The hook of an ordinary collection: nothing between steps.
pub struct NoHook;

impl StepHook for NoHook {
    fn before_step(&mut self, _first_group_chosen: bool, _groups: usize) -> Result<()> {
        Ok(())
    }
}

/// Collects rollouts of one rank's environments, stepped in `groups` groups.
pub struct RolloutCollector {
    groups: usize,
    group_size: usize,
    obs_shape: Vec<i64>,
    action_kind: ActionKind,
    /// Steps a group while the policy acts for the next one. One long-lived thread: a thread
    /// per group step cost about 0.5 ms each on Atari, a fifth of the step itself.
    env_thread: Option<rayon::ThreadPool>,
}

/// Where the double-buffered collection stands: the actions of the group that steps next,
/// when they were chosen while the group before it stepped.
type Chosen = Option<ActTaken>;

impl RolloutCollector {
    /// A collector stepping `num_envs` environments in `groups` groups in turn: with more than
    /// one, double-buffered on an environment thread.
    pub fn new(
        num_envs: usize,
        groups: usize,
        obs_shape: &[i64],
        action_kind: ActionKind,
    ) -> Result<RolloutCollector> {
        let mut collector = Self::unstarted(num_envs, groups, obs_shape, action_kind)?;
        if groups > 1 {
            tracing::info!(
                "stepping {num_envs} environments in {groups} groups of {}, each group's step \
                 overlapping the policy's forward pass for the next (double-buffered sampling)",
                collector.group_size
            );
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "tandem-env-groups".into())
                .build()
                .context("cannot start the environment thread of train.env-groups")?;
            collector.env_thread = Some(pool);
        }
        Ok(collector)
    }

    fn unstarted(
        num_envs: usize,
        groups: usize,
        obs_shape: &[i64],
        action_kind: ActionKind,
    ) -> Result<RolloutCollector> {
        Ok(RolloutCollector {
            groups,
            group_size: group_size(num_envs, groups)?,
            obs_shape: obs_shape.to_vec(),
            action_kind,
            env_thread: None,
        })
    }

    /// Fills `buffer` with one rollout of `envs` under `model`'s policy and returns V(s_T), the
    /// values of the observations after the last step. Phases: `rollout` in all, of it
    /// `inference` (the policy's forward passes) and `env` (stepping the games and wrappers).
    pub fn collect(
        &self,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
    ) -> Result<Tensor> {
        self.collect_with(model, envs, buffer, phases, &mut NoHook)
    }

    /// [`RolloutCollector::collect`] with `hook` run before every step.
    pub fn collect_with(
        &self,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
        hook: &mut dyn StepHook,
    ) -> Result<Tensor> {
        self.check_kinds(envs, buffer)?;
        let start = Instant::now();
        buffer.reset();
        // Row 0 holds every group's observation; each group's next observations go into the
        // next row as soon as that group has stepped.
        copy_rows_into(&buffer.next_obs()?, envs.obs())?;
        let mut chosen: Chosen = None;
        for t in 0..buffer.num_steps() {
            hook.before_step(chosen.is_some(), self.groups)?;
            self.collect_step(t, model, envs, buffer, &mut chosen, phases)?;
        }
        let last_values = self.bootstrap(model, envs, buffer, phases)?;
        phases.add("rollout", start.elapsed());
        Ok(last_values)
    }

    /// Records s_T, the environments' observations after the rollout's last step, in the
    /// buffer and returns V(s_T).
    fn bootstrap(
        &self,
        model: &dyn RolloutPolicy,
        envs: &VecEnv,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
    ) -> Result<Tensor> {
        let last_obs = self.current_obs(envs, buffer);
        buffer.set_bootstrap(&last_obs, None, envs.acting().as_deref())?;
        timed(phases, "inference", || {
            tch::no_grad(|| model.value(&last_obs))
        })
    }

    /// [`RolloutCollector::collect`] for a recurrent `model`, from and into `memory`. The buffer
    /// keeps the state at the rollout's start and every step's episode starts, from which the
    /// update recomputes the states.
    pub fn collect_recurrent(
        &self,
        model: &ActorCritic,
        envs: &mut VecEnv,
        memory: &mut Memory,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
    ) -> Result<Tensor> {
        self.collect_recurrent_with(model, envs, memory, buffer, phases, &mut NoHook)
    }

    /// [`RolloutCollector::collect_recurrent`] with `hook` run before every step.
    pub fn collect_recurrent_with(
        &self,
        model: &ActorCritic,
        envs: &mut VecEnv,
        memory: &mut Memory,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
        hook: &mut dyn StepHook,
    ) -> Result<Tensor> {
        ensure!(
            self.groups == 1,
            "train.env-groups {} cannot step a recurrent policy: its next group's actions \
             would need states the current step has not produced",
            self.groups
        );
        let start = Instant::now();
        self.check_kinds(envs, buffer)?;
        buffer.reset();
        buffer.set_initial_state(&memory.state)?;
        copy_rows_into(&buffer.next_obs()?, envs.obs())?;
        for t in 0..buffer.num_steps() {
            hook.before_step(false, 1)?;
            let obs = buffer.obs_row(t)?;
            buffer.set_starts(&memory.starts)?;
            let (taken, state) = timed(phases, "inference", || {
                model.act_recurrent(&obs, &memory.starts, &memory.state)
            })?;
            let actions = host_actions(&model.env_actions(&taken.actions), self.action_kind)?;
            let acting = envs.acting();
            let stepping = Instant::now();
            envs.step(&actions)?;
            phases.add("env", stepping.elapsed());
            if t + 1 < buffer.num_steps() {
                copy_rows_into(&buffer.obs_row(t + 1)?, envs.obs())?;
            }
            // The final observation of a cut episode continues its state: no reset before it.
            let no_starts = Tensor::zeros_like(&memory.starts);
            let truncation_value =
                |finals: &Tensor| model.value_recurrent(finals, &no_starts, &state);
            record_step(
                buffer,
                &Stepped::of(envs),
                &obs,
                acting.as_deref(),
                &taken,
                &truncation_value,
                phases,
            )?;
            let ended = envs
                .terminated()
                .iter()
                .zip(envs.truncated())
                .map(|(&terminated, &truncated)| terminated || truncated);
            memory.starts = flags_to_tensor(&ended.collect::<Vec<_>>(), buffer.device());
            memory.state = state;
        }
        let last_obs = self.current_obs(envs, buffer);
        buffer.set_bootstrap(&last_obs, Some(&memory.starts), envs.acting().as_deref())?;
        let last_values = timed(phases, "inference", || {
            model.value_recurrent(&last_obs, &memory.starts, &memory.state)
        })?;
        phases.add("rollout", start.elapsed());
        Ok(last_values)
    }

    /// The environments' current observations on the buffer's device: the ones after the
    /// rollout's last step.
    fn current_obs(&self, envs: &VecEnv, buffer: &RolloutBuffer) -> Tensor {
        rows_to_batch(
            envs.obs(),
            envs.num_envs(),
            &self.obs_shape,
            buffer.device(),
        )
    }

    /// The policy's actions go to the environments (as [`RolloutPolicy::env_actions`] maps
    /// them) and into the buffer, so all three must agree on what an action is.
    fn check_kinds(&self, envs: &VecEnv, buffer: &RolloutBuffer) -> Result<()> {
        let env_kind = ActionKind::of(envs.action_space());
        ensure!(
            env_kind == self.action_kind && buffer.action_kind() == self.action_kind,
            "rollout collection: the environments take {env_kind} ({}), the collector was built \
             for {} and the buffer holds {}",
            envs.action_space(),
            self.action_kind,
            buffer.action_kind()
        );
        Ok(())
    }

    /// Step t: every group acts and steps, then the step is recorded.
    fn collect_step(
        &self,
        t: i64,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        buffer: &mut RolloutBuffer,
        chosen: &mut Chosen,
        phases: &mut Phases,
    ) -> Result<()> {
        let obs = buffer.obs_row(t)?;
        // Whose turn it is is a property of the observations the actions are chosen from.
        let acting = envs.acting();
        let mut taken_by_group = Vec::with_capacity(self.groups);
        for g in 0..self.groups {
            let taken = self.act_and_step_group(t, g, &obs, model, envs, buffer, chosen, phases)?;
            taken_by_group.push(taken);
        }
        let taken = concat_groups(taken_by_group);
        let truncation_value = |finals: &Tensor| model.value(finals);
        record_step(
            buffer,
            &Stepped::of(envs),
            &obs,
            acting.as_deref(),
            &taken,
            &truncation_value,
            phases,
        )
    }

    /// Group g of step t acts (unless its actions were chosen while the group before it
    /// stepped) and steps; while it steps, the policy acts for the group after it. Its next
    /// observations go into row t + 1.
    #[allow(clippy::too_many_arguments)]
    fn act_and_step_group(
        &self,
        t: i64,
        g: usize,
        obs: &Tensor,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        buffer: &RolloutBuffer,
        chosen: &mut Chosen,
        phases: &mut Phases,
    ) -> Result<ActTaken> {
        let taken = match chosen.take() {
            Some(taken) => taken,
            None => timed(phases, "inference", || {
                tch::no_grad(|| model.act(&self.group_rows(obs, g)))
            })?,
        };
        let actions = host_actions(&model.env_actions(&taken.actions), self.action_kind)?;
        let range = g * self.group_size..(g + 1) * self.group_size;
        *chosen = match self.next_group(t, g, buffer.num_steps()) {
            None => {
                let stepping = Instant::now();
                envs.step_group(range.clone(), &actions)?;
                phases.add("env", stepping.elapsed());
                None
            }
            Some((next_t, next_g)) => {
                let next_obs = if next_t == t {
                    obs.shallow_clone()
                } else {
                    buffer.obs_row(next_t)?
                };
                let next_rows = self.group_rows(&next_obs, next_g);
                Some(self.step_while_acting(
                    model,
                    envs,
                    range.clone(),
                    &actions,
                    &next_rows,
                    phases,
                )?)
            }
        };
        if t + 1 < buffer.num_steps() {
            let floats = envs.obs_len();
            copy_rows_into(
                &self.group_rows(&buffer.obs_row(t + 1)?, g),
                &envs.obs()[range.start * floats..range.end * floats],
            )?;
        }
        Ok(taken)
    }

    /// The group that acts while group g of step t steps: the next group of the same step, or
    /// the next step's first group after the last; none without double buffering or at the end.
    fn next_group(&self, t: i64, g: usize, num_steps: i64) -> Option<(i64, usize)> {
        if g + 1 < self.groups {
            Some((t, g + 1))
        } else if self.groups > 1 && t + 1 < num_steps {
            Some((t + 1, 0))
        } else {
            None
        }
    }

    /// Steps the environments of `range` on the environment thread while this thread runs the
    /// policy on `next_rows`; returns the policy's choice for those.
    fn step_while_acting(
        &self,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        range: Range<usize>,
        actions: &ActionBatch,
        next_rows: &Tensor,
        phases: &mut Phases,
    ) -> Result<ActTaken> {
        let mut stepped: Option<(Result<()>, Duration)> = None;
        let (infer_time, next_taken) = self
            .env_thread
            .as_ref()
            .context("a pipelined rollout needs its environment thread")?
            .in_place_scope(|scope| {
                let stepped = &mut stepped;
                scope.spawn(move |_| {
                    let stepping = Instant::now();
                    let result = envs.step_group(range, actions).map_err(anyhow::Error::from);
                    *stepped = Some((result, stepping.elapsed()));
                });
                let infer = Instant::now();
                let next_taken = tch::no_grad(|| model.act(next_rows));
                (infer.elapsed(), next_taken)
            });
        phases.add("inference", infer_time);
        let (result, stepping_time) =
            stepped.context("the environment thread did not step its group")?;
        result?;
        phases.add("env", stepping_time);
        next_taken
    }

    fn group_rows(&self, rows: &Tensor, g: usize) -> Tensor {
        group_rows(rows, g, self.group_size)
    }
}

/// One step's choices of all groups as one batch (no copy with a single group).
fn concat_groups(mut taken_by_group: Vec<ActTaken>) -> ActTaken {
    if taken_by_group.len() == 1 {
        return taken_by_group.swap_remove(0);
    }
    let cat = |part: fn(&ActTaken) -> &Tensor| {
        Tensor::cat(&taken_by_group.iter().map(part).collect::<Vec<_>>(), 0)
    };
    ActTaken {
        actions: cat(|a| &a.actions),
        log_probs: cat(|a| &a.log_probs),
        values: cat(|a| &a.values),
    }
}

/// What one step left in some environments' rows: the last observations of the episodes that
/// ended, and how they ended.
pub(super) struct EndedRows<'a> {
    pub final_obs: &'a [f32],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    pub obs_shape: &'a [i64],
}

impl EndedRows<'_> {
    /// V(final observation) of every row (`truncation_value`), where the step cut an episode
    /// by its time limit (truncated, not terminated); `None` where it cut none.
    pub(super) fn truncation_values(
        &self,
        device: tch::Device,
        truncation_value: &dyn Fn(&Tensor) -> Result<Tensor>,
        phases: &mut Phases,
    ) -> Result<Option<Tensor>> {
        let cut_by_time_limit = self
            .truncated
            .iter()
            .zip(self.terminated)
            .any(|(&truncated, &terminated)| truncated && !terminated);
        if !cut_by_time_limit {
            return Ok(None);
        }
        let rows = self.terminated.len();
        let finals = rows_to_batch(self.final_obs, rows, self.obs_shape, device);
        timed(phases, "inference", || {
            tch::no_grad(|| truncation_value(&finals))
        })
        .map(Some)
    }
}

/// What a batch step left in the rows a buffer records: each row's reward and flags, and the
/// last observations of the episodes that ended.
pub(super) struct Stepped<'a> {
    pub rewards: &'a [f32],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    pub final_obs: &'a [f32],
}

impl<'a> Stepped<'a> {
    /// Every row of `envs`'s last step.
    pub(super) fn of(envs: &'a VecEnv) -> Stepped<'a> {
        Stepped {
            rewards: envs.rewards(),
            terminated: envs.terminated(),
            truncated: envs.truncated(),
            final_obs: envs.final_obs(),
        }
    }
}

/// Pushes the step the environments just took. A time-limit cut (truncated, not terminated)
/// bootstraps from V(final observation), which `truncation_value` gives; the environment has
/// already reset.
pub(super) fn record_step(
    buffer: &mut RolloutBuffer,
    stepped: &Stepped,
    obs: &Tensor,
    acting: Option<&[bool]>,
    taken: &ActTaken,
    truncation_value: &dyn Fn(&Tensor) -> Result<Tensor>,
    phases: &mut Phases,
) -> Result<()> {
    let device = buffer.device();
    let rewards = row_to_tensor(stepped.rewards, device);
    let terminated = flags_to_tensor(stepped.terminated, device);
    let truncated = flags_to_tensor(stepped.truncated, device);
    let ended = EndedRows {
        final_obs: stepped.final_obs,
        terminated: stepped.terminated,
        truncated: stepped.truncated,
        obs_shape: &obs.size()[1..],
    };
    let truncation_values = ended.truncation_values(device, truncation_value, phases)?;
    buffer.push(&StepRecord {
        obs,
        actions: &taken.actions,
        log_probs: &taken.log_probs,
        values: &taken.values,
        rewards: &rewards,
        terminated: &terminated,
        truncated: &truncated,
        truncation_values: truncation_values.as_ref(),
        acting,
    })
}

/// Runs `work`, adding its wall time to `phase`.
pub(super) fn timed<T>(phases: &mut Phases, phase: &'static str, work: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = work();
    phases.add(phase, start.elapsed());
    result
}

/// The size of each of `groups` groups of `num_envs` environments; refuses a split that leaves
/// some over.
pub(super) fn group_size(num_envs: usize, groups: usize) -> Result<usize> {
    ensure!(
        groups >= 1 && num_envs.is_multiple_of(groups),
        "train.env-groups {groups} must divide this rank's {num_envs} environments"
    );
    Ok(num_envs / groups)
}

/// Group `g`'s rows of a batch of rows, groups of `size` side by side in group order.
pub(super) fn group_rows(rows: &Tensor, g: usize, size: usize) -> Tensor {
    rows.narrow(0, (g * size) as i64, size as i64)
}

/// Whose action draws a collection makes: the sampling stream of (seed, rank, update), the
/// update that learns from the batch, whichever thread collects it.
#[derive(Debug, Clone, Copy)]
pub struct Draws {
    pub seed: u64,
    pub rank: usize,
    pub update: u64,
}

impl Draws {
    /// Seeds this thread's torch generator with the stream's start.
    pub fn seed_sampling(self) {
        let Draws { seed, rank, update } = self;
        tch::manual_seed(crate::seeds::derived_seed(
            seed,
            crate::seeds::Purpose::Sampling,
            rank as u64,
            update,
        ) as i64);
    }
}

/// One rollout of `envs` under `policy` into `buffer` (from and into `memory` for a
/// recurrent policy), returning V(s_T).
#[allow(clippy::too_many_arguments)]
pub fn collect_batch(
    collector: &RolloutCollector,
    policy: &ActorCritic,
    memory: Option<&mut Memory>,
    envs: &mut tandem_env::VecEnv,
    buffer: &mut RolloutBuffer,
    draws: Draws,
    phases: &mut Phases,
    hook: &mut dyn StepHook,
) -> Result<Tensor> {
    draws.seed_sampling();
    match memory {
        Some(memory) => {
            collector.collect_recurrent_with(policy, envs, memory, buffer, phases, hook)
        }
        None => collector.collect_with(policy, envs, buffer, phases, hook),
    }
}

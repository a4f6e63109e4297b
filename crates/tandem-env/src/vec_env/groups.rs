//! [`VecEnv::with_groups`]: a batch split into groups of environments that step at the same
//! time, each from its own thread, as sample-factory's rollout workers do. A group only touches
//! its own environments and rows; what the groups share (finished games, normaliser
//! statistics) is merged under one lock after each group's step.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use super::{
    ActionCheck, Emit, EpisodeStats, GroupRows, SharedNorm, Slot, VecEnv, effective_stats,
    end_info, merge_pending, set_current,
};
use crate::EnvError;
use crate::gym::Pool as GymPool;
use crate::space::Actions;

/// What the groups of a split batch share.
struct Shared<'a> {
    norms: &'a mut Vec<SharedNorm>,
    episodes: &'a mut Vec<EpisodeStats>,
}

/// Consecutive environments of a batch, stepped on their own ([`VecEnv::with_groups`]).
pub struct EnvGroup<'a> {
    index: usize,
    rows: GroupRows<'a>,
    obs_len: usize,
    /// Rows per game.
    agents: usize,
    emit: Emit,
    check: ActionCheck<'a>,
    gym: Option<&'a GymPool>,
    normalised: bool,
    shared: &'a Mutex<Shared<'a>>,
}

impl VecEnv {
    /// Splits the batch into `groups` groups of consecutive environments, of equal size, and
    /// runs `work` with them; the batch is whole again afterwards. Each [`EnvGroup`] steps its
    /// environments one after another on the thread that calls [`EnvGroup::step`], and may be
    /// sent to a thread of its own, so that the groups step at the same time. Games that end
    /// are added to the batch's in the order the groups' steps end; each group's normalisers
    /// take up the newest merged statistics before it steps, which is what a
    /// [`VecEnv::step_group`] of the groups in turn does, so stepping the groups one after
    /// another gives that sequence's results exactly.
    ///
    /// Errors if `groups` does not divide the batch, a step is begun and not finished, or a
    /// gymnasium worker process holds environments of two groups (its requests would mix).
    pub fn with_groups<R>(
        &mut self,
        groups: usize,
        work: impl FnOnce(Vec<EnvGroup<'_>>) -> R,
    ) -> Result<R, EnvError> {
        self.refuse_while_pending()?;
        let size = self.group_size(groups)?;
        let result = {
            let VecEnv {
                slots,
                obs,
                final_obs,
                rewards,
                terminated,
                truncated,
                norms,
                episodes,
                gym,
                action_space,
                emit,
                obs_len,
                agents,
                ..
            } = self;
            let (obs_len, emit, agents) = (*obs_len, *emit, *agents);
            let check = ActionCheck {
                space: action_space,
                num_envs: slots.len() * agents,
            };
            let normalised = !norms.is_empty();
            let shared = Mutex::new(Shared { norms, episodes });
            let rows = size * obs_len;
            let split: Vec<EnvGroup<'_>> = slots
                .chunks_mut(size / agents)
                .zip(obs.chunks_mut(rows))
                .zip(final_obs.chunks_mut(rows))
                .zip(rewards.chunks_mut(size))
                .zip(terminated.chunks_mut(size).zip(truncated.chunks_mut(size)))
                .enumerate()
                .map(
                    |(index, ((((slots, obs), final_obs), rewards), (terminated, truncated)))| {
                        EnvGroup {
                            index,
                            rows: GroupRows {
                                first: index * size,
                                slots,
                                obs,
                                final_obs,
                                rewards,
                                terminated,
                                truncated,
                            },
                            obs_len,
                            agents,
                            emit,
                            check,
                            gym: gym.as_ref(),
                            normalised,
                            shared: &shared,
                        }
                    },
                )
                .collect();
            work(split)
        };
        self.push_effective_stats();
        Ok(result)
    }

    /// The size of each of `groups` groups: they must divide the batch, and no gymnasium
    /// worker's environments may fall into two of them.
    fn group_size(&self, groups: usize) -> Result<usize, EnvError> {
        let games = self.slots.len();
        if groups == 0 || !games.is_multiple_of(groups) {
            return Err(EnvError::InvalidArgument(format!(
                "{groups} groups cannot split a batch of {games} environments evenly"
            )));
        }
        let size = games / groups * self.agents;
        if let Some(gym) = &self.gym {
            let straddling = gym
                .worker_envs()
                .into_iter()
                .find(|envs| envs.start / size != (envs.end - 1) / size);
            if let Some(envs) = straddling {
                return Err(EnvError::InvalidArgument(format!(
                    "the gymnasium worker of environments {envs:?} would serve two of {groups} \
                     groups of {size}; make the workers a multiple of the groups"
                )));
            }
        }
        Ok(size)
    }
}

impl EnvGroup<'_> {
    /// Which group of the split this is, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The environments of this group, as indices into the batch.
    pub fn envs(&self) -> Range<usize> {
        self.rows.first..self.rows.first + self.rows.slots.len() * self.agents
    }

    /// Steps the group's environments, `actions` row `k` for environment `envs().start + k`,
    /// as [`VecEnv::step_group`] does for them; the same checks refuse bad actions before
    /// anything steps.
    pub fn step<'b>(&mut self, actions: impl Into<Actions<'b>>) -> Result<(), EnvError> {
        let envs = self.envs();
        let actions = self.check.checked(&envs, actions.into())?;
        if self.normalised {
            let stats = effective_stats(lock(self.shared).norms);
            set_current(self.rows.slots, &stats);
        }
        if let Some(gym) = self.gym {
            let sent = gym.send_step(envs, actions)?;
            gym.await_step(sent)?;
        }
        let mut finished = self
            .rows
            .step(actions, self.emit, (self.obs_len, self.agents), None);
        // A reset round trip (time-limit) inside a chain may have failed.
        if let Some(error) = self.gym.and_then(GymPool::failure) {
            return Err(error);
        }
        end_info(self.gym, &mut finished)?;
        // A group's steps are recorded without knowing which rows acted (free sampling), so
        // a row whose agent has left would be learned from as if it had played.
        if let Some(slot) = self.rows.slots.iter().position(Slot::someone_left) {
            return Err(EnvError::InvalidArgument(format!(
                "an agent of game {} left it before the others; free sampling over groups of \
                 environments cannot leave its rows out of learning: set `env-groups 1`, or \
                 `sampling \"synchronous\"`",
                self.rows.first / self.agents + slot
            )));
        }
        let mut shared = lock(self.shared);
        shared.episodes.extend(finished);
        if self.normalised {
            merge_pending(self.rows.slots, shared.norms);
        }
        Ok(())
    }

    /// The group's observations after its latest step, one row per environment.
    pub fn obs(&self) -> &[f32] {
        self.rows.obs
    }

    /// The last observation of each episode that ended in the latest step (see
    /// [`VecEnv::final_obs`]).
    pub fn final_obs(&self) -> &[f32] {
        self.rows.final_obs
    }

    pub fn rewards(&self) -> &[f32] {
        self.rows.rewards
    }

    pub fn terminated(&self) -> &[bool] {
        self.rows.terminated
    }

    pub fn truncated(&self) -> &[bool] {
        self.rows.truncated
    }
}

fn lock<'m, 'a>(shared: &'m Mutex<Shared<'a>>) -> MutexGuard<'m, Shared<'a>> {
    // A panic while the lock was held leaves the shared state as between two merges.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

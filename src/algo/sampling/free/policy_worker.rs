//! The policy worker of ready order (`train.sampling "free"` with `train.env-groups` k > 1):
//! sample-factory's policy worker on one rank, beside its rollout workers (`rollout_worker`). Each
//! of the k groups of environments has a rollout worker thread of its own (`tandem-rollout-<g>`)
//! that steps the group whenever it is given actions; the collector thread is the inference worker:
//! it serves whichever groups have stepped, recording their steps and running the policy once on
//! all their new observations (one forward pass for every group that reported while the last one
//! ran, as sample-factory's policy worker batches its requests), so a slow environment delays only
//! its own group. The policy and every libtorch call stay on the collector thread.
//!
//! Groups advance through a batch at their own pace; a step goes into the buffer when every group
//! has taken it. A group that has taken a batch's last step records its s_T and V(s_T) and goes on
//! into the next batch, in a second spare buffer, while the slowest group finishes (as
//! sample-factory's rollout workers never wait for each other); a batch is queued for the learner
//! when its last group finishes it. At most [`OPEN_BATCHES`] are open at once (`open_batches`). A
//! round's stop finishes the oldest open batch; the one after it stays open, with each group's
//! place in it, for the next round ([`ReadyState`]), so no step is lost.
//!
//! Not reproducible: the order in which groups are served, and so which actions draw which random
//! numbers and which parameters chose them, depends on timing (as everything under free sampling
//! does).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};
use tch::Tensor;

use tandem_env::{EnvGroup, VecEnv};

use super::exchange::Collecting;
use super::open_batches::{
    GroupStep, OpenBatch, Place, ReadyState, push_complete_steps, queue_complete_batches,
};
use super::rollout_worker::{Stepped, lock, reports, rollout_worker};
use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::learner::Phases;
use crate::algo::sampling::collect::{EndedRows, RolloutPolicy, group_rows, group_size, timed};
use crate::algo::storage::host_rows::{
    copy_rows_into, flags_to_tensor, host_actions, row_to_tensor,
};
use crate::algo::storage::rollout::RolloutBuffer;
use crate::nn::ActTaken;

/// Batches open at once: the one the slowest group is filling, and the next, which the groups
/// that have finished it fill meanwhile.
pub const OPEN_BATCHES: usize = 2;

/// The policy worker of ready order for one rank's environments in `groups` groups of
/// `group_size`: the layout it serves them in.
pub struct PolicyWorker {
    groups: usize,
    group_size: usize,
    obs_shape: Vec<i64>,
    action_kind: ActionKind,
}

/// Where a round's stop stands for the collector: not seen yet; seen, with the oldest batch
/// open then still to finish (only the groups in it are served); or that batch queued (no
/// group is served, those stepping report and keep their places for the next round).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    NotYet,
    FinishingOldest,
    Finished,
}

impl Stop {
    fn observe(&mut self, collecting: &Collecting<'_>, state: &ReadyState) {
        if *self == Stop::NotYet && collecting.stopping() {
            *self = match state.open.is_empty() {
                true => Stop::Finished,
                false => Stop::FinishingOldest,
            };
        }
    }

    /// Whether a group at `place` is served.
    fn serves(self, place: Place) -> bool {
        match self {
            Stop::NotYet => true,
            Stop::FinishingOldest => place.batch == 0,
            Stop::Finished => false,
        }
    }
}

/// The collector thread's view of one round: the groups (each behind the lock its rollout
/// worker steps it under), the channels to the workers, and the actions in flight.
struct Serving<'r, 'g> {
    groups: &'r [Mutex<EnvGroup<'g>>],
    workers: Vec<Sender<ActionBatch>>,
    in_flight: Vec<Option<ActTaken>>,
}

impl PolicyWorker {
    /// A policy worker for `num_envs` environments in `groups` groups (more than one), each
    /// stepping on a rollout worker of its own.
    pub fn new(
        num_envs: usize,
        groups: usize,
        obs_shape: &[i64],
        action_kind: ActionKind,
    ) -> Result<PolicyWorker> {
        ensure!(
            groups > 1,
            "ready-order collection serves groups of environments; there is only one"
        );
        let worker = PolicyWorker {
            groups,
            group_size: group_size(num_envs, groups)?,
            obs_shape: obs_shape.to_vec(),
            action_kind,
        };
        tracing::info!(
            "free sampling: each of the {groups} groups of {} environments steps on a rollout \
             worker of its own, and the policy serves the groups that have stepped, in one forward \
             pass (ready order)",
            worker.group_size
        );
        Ok(worker)
    }

    /// The collector's side of a round of free sampling in ready order (see the module
    /// documentation): fills the buffers `collecting` gives, queues each batch as its last
    /// group finishes it, and returns when the round stops, leaving the open batch the stop
    /// did not finish in `state`. `model` is the behaviour network whose parameters
    /// `collecting` takes up before each forward pass. Phases: `rollout` in all (without the
    /// waits for a spare buffer), of it `inference` (the policy's forward passes and the
    /// groups' bootstraps), `env` (the groups' stepping, summed over the workers, which step at
    /// the same time) and `inference_wait` (this thread waiting for a group to step).
    pub fn collect_ready_round(
        &self,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        state: &mut ReadyState,
        collecting: &mut Collecting<'_>,
        phases: &mut Phases,
    ) -> Result<()> {
        let (start, waited_before) = (Instant::now(), collecting.waited());
        if state.places.len() != self.groups {
            state.open.clear();
            state.places = vec![Place { batch: 0, step: 0 }; self.groups];
        }
        envs.with_groups(self.groups, |groups| {
            let groups: Vec<Mutex<EnvGroup<'_>>> = groups.into_iter().map(Mutex::new).collect();
            std::thread::scope(|scope| {
                let (ready_tx, ready) = channel();
                let mut workers = Vec::with_capacity(groups.len());
                for (g, group) in groups.iter().enumerate() {
                    let (actions_tx, actions) = channel();
                    let ready_tx = ready_tx.clone();
                    std::thread::Builder::new()
                        .name(format!("tandem-rollout-{g}"))
                        .spawn_scoped(scope, move || rollout_worker(g, group, actions, ready_tx))
                        .context("cannot start a rollout worker thread")?;
                    workers.push(actions_tx);
                }
                drop(ready_tx);
                let mut serving = Serving {
                    groups: &groups,
                    workers,
                    in_flight: (0..groups.len()).map(|_| None).collect(),
                };
                // Dropping the senders when serving ends (done or failed) ends the workers.
                self.serve(&mut serving, &ready, model, state, collecting, phases)
            })
        })??;
        let waited = collecting.waited() - waited_before;
        phases.add("rollout", start.elapsed().saturating_sub(waited));
        Ok(())
    }

    /// The inference worker's loop over a round: serves the groups that have stepped, opening
    /// batches as groups need them, until the round has stopped, the oldest batch open then is
    /// queued and no group is stepping.
    fn serve(
        &self,
        serving: &mut Serving<'_, '_>,
        ready: &Receiver<Stepped>,
        model: &dyn RolloutPolicy,
        state: &mut ReadyState,
        collecting: &mut Collecting<'_>,
        phases: &mut Phases,
    ) -> Result<()> {
        let mut to_serve: Vec<usize> = (0..self.groups).filter(|&g| state.has_batch(g)).collect();
        let mut stepping = 0;
        let mut stop = Stop::NotYet;
        loop {
            if state.open.is_empty() {
                // Every group has finished every batch: a new one, or the round's end.
                let Some(buffer) = collecting.spare() else {
                    return Ok(());
                };
                to_serve = self.open_batch(buffer, serving, state)?;
            } else if stop == Stop::NotYet
                && state.open.len() < OPEN_BATCHES
                && state.waiting().next().is_some()
                && let Some(buffer) = collecting.spare_now()
            {
                to_serve.extend(self.open_batch(buffer, serving, state)?);
            }
            stop.observe(collecting, state);
            to_serve.retain(|&g| stop.serves(state.places[g]));
            if to_serve.is_empty() && stepping == 0 && stop != Stop::NotYet {
                return Ok(());
            }
            if !to_serve.is_empty() {
                self.act_for(&to_serve, serving, model, state, collecting, phases)?;
                stepping += to_serve.len();
                to_serve.clear();
            }
            // A group with a batch is stepping or was served above; with none stepping, every
            // group waited for a batch, and the loop's start opened one or ended the round.
            ensure!(
                stepping > 0,
                "ready order: no environment group is stepping (a bug)"
            );
            let mut finished = Vec::new();
            for stepped in reports(ready, phases)? {
                stepping -= 1;
                phases.add("env", stepped.took);
                let g = stepped.group;
                stepped
                    .result
                    .with_context(|| format!("stepping environment group {g}"))?;
                if let Some(batch) = self.record(g, serving, model, state, phases)? {
                    finished.push((batch, g));
                }
                if state.has_batch(g) {
                    to_serve.push(g);
                }
            }
            self.bootstrap_finished(&finished, model, state, phases)?;
            // Seen before queueing, a stop that came while these groups stepped finishes the
            // batch they may just have completed, not the one after it.
            stop.observe(collecting, state);
            if queue_complete_batches(state, collecting)? > 0 && stop == Stop::FinishingOldest {
                stop = Stop::Finished;
            }
        }
    }

    /// Opens a batch in `buffer` for every group waiting for one: their observations become
    /// its first row. Returns those groups.
    fn open_batch(
        &self,
        mut buffer: RolloutBuffer,
        serving: &Serving<'_, '_>,
        state: &mut ReadyState,
    ) -> Result<Vec<usize>> {
        buffer.reset();
        let k = self.groups;
        let starting: Vec<usize> = state.waiting().collect();
        let first_row = buffer.obs_row(0)?;
        for &g in &starting {
            copy_rows_into(
                &self.group_rows(&first_row, g),
                lock(&serving.groups[g]).obs(),
            )?;
        }
        state.open.push_back(OpenBatch {
            buffer,
            recorded: (0..k).map(|_| VecDeque::new()).collect(),
            versions: Vec::new(),
            last_values: (0..k).map(|_| None).collect(),
        });
        Ok(starting)
    }

    /// Chooses the actions of groups `to_serve` for their next steps in one forward pass over
    /// their observations (each group's own row of its own batch, as groups are at different
    /// steps), with the newest parameters `collecting` has, and sends each group its part.
    fn act_for(
        &self,
        to_serve: &[usize],
        serving: &mut Serving<'_, '_>,
        model: &dyn RolloutPolicy,
        state: &mut ReadyState,
        collecting: &mut Collecting<'_>,
        phases: &mut Phases,
    ) -> Result<()> {
        let version = collecting.take_up_newest()?;
        let rows = to_serve
            .iter()
            .map(|&g| {
                let Place { batch, step } = state.places[g];
                let batch = &mut state.open[batch];
                batch.versions.push(version);
                Ok(self.group_rows(&batch.buffer.obs_row(step)?, g))
            })
            .collect::<Result<Vec<Tensor>>>()?;
        let obs = Tensor::cat(&rows, 0);
        let taken = timed(phases, "inference", || tch::no_grad(|| model.act(&obs)))?;
        let env_actions = model.env_actions(&taken.actions);
        let size = self.group_size as i64;
        for (i, &g) in to_serve.iter().enumerate() {
            let part = |all: &Tensor| all.narrow(0, i as i64 * size, size);
            let actions = host_actions(&part(&env_actions), self.action_kind)?;
            serving.in_flight[g] = Some(ActTaken {
                actions: part(&taken.actions),
                log_probs: part(&taken.log_probs),
                values: part(&taken.values),
            });
            serving.workers[g]
                .send(actions)
                .map_err(|_| anyhow!("the rollout worker of environment group {g} has stopped"))?;
        }
        Ok(())
    }

    /// Group `g` has taken its next step: its new observations go into its batch's next row,
    /// and the step is kept until every group has taken it. After the batch's last step the
    /// observations are the group's s_T, and its first row of the next batch when that is
    /// open; returns that batch's place then, for its V(s_T).
    fn record(
        &self,
        g: usize,
        serving: &mut Serving<'_, '_>,
        model: &dyn RolloutPolicy,
        state: &mut ReadyState,
        phases: &mut Phases,
    ) -> Result<Option<usize>> {
        let group = lock(&serving.groups[g]);
        let Place { batch: b, step: t } = state.places[g];
        let batch = &mut state.open[b];
        let device = batch.buffer.device();
        let last_step = t + 1 == batch.buffer.num_steps();
        if !last_step {
            copy_rows_into(
                &self.group_rows(&batch.buffer.obs_row(t + 1)?, g),
                group.obs(),
            )?;
        }
        let ended = EndedRows {
            final_obs: group.final_obs(),
            terminated: group.terminated(),
            truncated: group.truncated(),
            obs_shape: &self.obs_shape,
        };
        let truncation_values =
            ended.truncation_values(device, &|finals| model.value(finals), phases)?;
        let taken = serving.in_flight[g]
            .take()
            .context("a group stepped without actions chosen for it")?;
        batch.recorded[g].push_back(GroupStep {
            taken,
            rewards: row_to_tensor(group.rewards(), device),
            terminated: flags_to_tensor(group.terminated(), device),
            truncated: flags_to_tensor(group.truncated(), device),
            truncation_values,
        });
        push_complete_steps(batch)?;
        if !last_step {
            state.places[g].step = t + 1;
            return Ok(None);
        }
        let size = self.group_size as i64;
        copy_rows_into(
            &batch.buffer.bootstrap_rows(g as i64 * size, size),
            group.obs(),
        )?;
        state.places[g] = Place {
            batch: b + 1,
            step: 0,
        };
        if let Some(next) = state.open.get(b + 1) {
            copy_rows_into(&self.group_rows(&next.buffer.obs_row(0)?, g), group.obs())?;
        }
        Ok(Some(b))
    }

    /// V(s_T) of the groups that have just taken their batch's last step (batch, group), in
    /// one forward pass over their s_T rows.
    fn bootstrap_finished(
        &self,
        finished: &[(usize, usize)],
        model: &dyn RolloutPolicy,
        state: &mut ReadyState,
        phases: &mut Phases,
    ) -> Result<()> {
        if finished.is_empty() {
            return Ok(());
        }
        let rows: Vec<Tensor> = finished
            .iter()
            .map(|&(b, g)| self.group_rows(state.open[b].buffer.bootstrap().0, g))
            .collect();
        let obs = Tensor::cat(&rows, 0);
        let values = timed(phases, "inference", || tch::no_grad(|| model.value(&obs)))?;
        let size = self.group_size as i64;
        for (i, &(b, g)) in finished.iter().enumerate() {
            state.open[b].last_values[g] = Some(values.narrow(0, i as i64 * size, size));
        }
        Ok(())
    }

    /// Group `g`'s rows of a batch of rows.
    fn group_rows(&self, rows: &Tensor, g: usize) -> Tensor {
        group_rows(rows, g, self.group_size)
    }
}

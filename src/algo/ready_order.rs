//! Collection in ready order (`train.sampling "free"` with `train.env-groups` k > 1):
//! sample-factory's rollout and policy workers on one rank. Each of the k groups of
//! environments has a rollout worker thread of its own (`tandem-rollout-<g>`) that steps the
//! group whenever it is given actions; this thread is the inference worker: it serves whichever
//! groups have stepped, recording their steps and running the policy once on all their new
//! observations (one forward pass for every group that reported while the last one ran, as
//! sample-factory's policy worker batches its requests), so a slow environment delays only its
//! own group. Groups advance through the rollout at their own pace; a step of the buffer is
//! recorded when every group has taken it, and the rollout ends when the slowest group has
//! taken its last. The policy and every libtorch call stay on this thread.
//!
//! Not reproducible: the order in which groups are served, and so which actions draw which
//! random numbers and which parameters chose them, depends on timing (as everything under
//! free sampling does).

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tch::Tensor;

use tandem_env::{EnvGroup, VecEnv};

use super::actions::ActionBatch;
use super::collect::{EndedRows, RolloutCollector, RolloutPolicy, StepHook, timed};
use super::host_rows::{copy_rows_into, flags_to_tensor, host_actions, row_to_tensor};
use super::learner::Phases;
use super::rollout::{RolloutBuffer, StepRecord};
use crate::nn::ActTaken;

/// A rollout worker's report: its group stepped (or failed to), and how long that took.
struct Stepped {
    group: usize,
    took: Duration,
    result: Result<()>,
}

/// One group's part of one step, kept until every group has taken that step.
struct GroupStep {
    taken: ActTaken,
    rewards: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    /// V(final observation) where the step cut an episode by its time limit, else `None`.
    truncation_values: Option<Tensor>,
}

/// Where the inference worker stands: each group's next step, its action in flight, and its
/// recorded steps not yet in the buffer; and the channels that send each group's worker its
/// actions.
struct Progress {
    workers: Vec<Sender<ActionBatch>>,
    next_step: Vec<i64>,
    in_flight: Vec<Option<ActTaken>>,
    recorded: Vec<VecDeque<GroupStep>>,
}

impl RolloutCollector {
    /// [`RolloutCollector::collect_with`] in ready order (see the module documentation):
    /// `hook` runs before each group's actions are chosen. Phases: `inference` (the policy's
    /// forward passes), `env` (the groups' stepping, summed over the workers, which step at
    /// the same time) and `inference_wait` (this thread waiting for a group to step).
    pub(super) fn collect_ready(
        &self,
        model: &dyn RolloutPolicy,
        envs: &mut VecEnv,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
        hook: &mut dyn StepHook,
    ) -> Result<Tensor> {
        let start = Instant::now();
        buffer.reset();
        copy_rows_into(&buffer.next_obs()?, envs.obs())?;
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
                // Dropping the senders when serving ends (done or failed) ends the workers.
                self.serve(&groups, workers, &ready, model, buffer, phases, hook)
            })
        })??;
        let last_values = self.bootstrap(model, envs, buffer, phases)?;
        phases.add("rollout", start.elapsed());
        Ok(last_values)
    }

    /// The inference worker's loop: acts for every group, then serves the groups that have
    /// stepped until every group has taken the rollout's last step.
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &self,
        groups: &[Mutex<EnvGroup<'_>>],
        workers: Vec<Sender<ActionBatch>>,
        ready: &Receiver<Stepped>,
        model: &dyn RolloutPolicy,
        buffer: &mut RolloutBuffer,
        phases: &mut Phases,
        hook: &mut dyn StepHook,
    ) -> Result<()> {
        let k = groups.len();
        let mut progress = Progress {
            workers,
            next_step: vec![0; k],
            in_flight: (0..k).map(|_| None).collect(),
            recorded: (0..k).map(|_| VecDeque::new()).collect(),
        };
        let all: Vec<usize> = (0..k).collect();
        self.act_for(&all, &mut progress, model, buffer, phases, hook)?;
        let mut stepping = k;
        while stepping > 0 {
            let mut to_serve = Vec::with_capacity(k);
            for stepped in reports(ready, phases)? {
                phases.add("env", stepped.took);
                let g = stepped.group;
                stepped
                    .result
                    .with_context(|| format!("stepping environment group {g}"))?;
                self.record(g, &lock(&groups[g]), &mut progress, model, buffer, phases)?;
                if progress.next_step[g] < buffer.num_steps() {
                    to_serve.push(g);
                } else {
                    stepping -= 1;
                }
            }
            push_complete_steps(&mut progress, buffer)?;
            if !to_serve.is_empty() {
                self.act_for(&to_serve, &mut progress, model, buffer, phases, hook)?;
            }
        }
        Ok(())
    }

    /// Chooses the actions of groups `to_serve` for their next steps in one forward pass over
    /// their observations in the buffer (each group's own row, as groups are at different
    /// steps) and sends each group's part to its worker.
    #[allow(clippy::too_many_arguments)]
    fn act_for(
        &self,
        to_serve: &[usize],
        progress: &mut Progress,
        model: &dyn RolloutPolicy,
        buffer: &RolloutBuffer,
        phases: &mut Phases,
        hook: &mut dyn StepHook,
    ) -> Result<()> {
        hook.before_step(false, to_serve.len())?;
        let rows = to_serve
            .iter()
            .map(|&g| Ok(self.group_rows(&buffer.obs_row(progress.next_step[g])?, g)))
            .collect::<Result<Vec<Tensor>>>()?;
        let obs = Tensor::cat(&rows, 0);
        let taken = timed(phases, "inference", || tch::no_grad(|| model.act(&obs)))?;
        let env_actions = model.env_actions(&taken.actions);
        let size = self.group_size as i64;
        for (i, &g) in to_serve.iter().enumerate() {
            let part = |all: &Tensor| all.narrow(0, i as i64 * size, size);
            let actions = host_actions(&part(&env_actions), self.action_kind)?;
            progress.in_flight[g] = Some(ActTaken {
                actions: part(&taken.actions),
                log_probs: part(&taken.log_probs),
                values: part(&taken.values),
            });
            progress.workers[g]
                .send(actions)
                .map_err(|_| anyhow!("the rollout worker of environment group {g} has stopped"))?;
        }
        Ok(())
    }

    /// Group `g` has taken its next step: its new observations go into the buffer's next row
    /// (none after the last step: the batch's bootstrap reads them from the environments), and
    /// the step is kept until every group has taken it.
    fn record(
        &self,
        g: usize,
        group: &EnvGroup<'_>,
        progress: &mut Progress,
        model: &dyn RolloutPolicy,
        buffer: &RolloutBuffer,
        phases: &mut Phases,
    ) -> Result<()> {
        let t = progress.next_step[g];
        if t + 1 < buffer.num_steps() {
            copy_rows_into(&self.group_rows(&buffer.obs_row(t + 1)?, g), group.obs())?;
        }
        let device = buffer.device();
        let ended = EndedRows {
            final_obs: group.final_obs(),
            terminated: group.terminated(),
            truncated: group.truncated(),
            obs_shape: &self.obs_shape,
        };
        let truncation_values =
            ended.truncation_values(device, &|finals| model.value(finals), phases)?;
        let taken = progress.in_flight[g]
            .take()
            .context("a group stepped without actions chosen for it")?;
        progress.recorded[g].push_back(GroupStep {
            taken,
            rewards: row_to_tensor(group.rewards(), device),
            terminated: flags_to_tensor(group.terminated(), device),
            truncated: flags_to_tensor(group.truncated(), device),
            truncation_values,
        });
        progress.next_step[g] = t + 1;
        Ok(())
    }
}

/// Waits for a rollout worker's report and takes every other report already queued with it,
/// so that the groups that stepped while the policy last ran are served by one forward pass.
fn reports(ready: &Receiver<Stepped>, phases: &mut Phases) -> Result<Vec<Stepped>> {
    let waiting = Instant::now();
    let first = ready
        .recv()
        .map_err(|_| anyhow!("the rollout workers stopped without reporting"))?;
    phases.add("inference_wait", waiting.elapsed());
    Ok(std::iter::once(first).chain(ready.try_iter()).collect())
}

/// A rollout worker: steps its group with each batch of actions it is sent and reports, until
/// the inference worker stops sending. A panic in a game is reported as a failure, so that
/// the inference worker never waits for a report that cannot come.
fn rollout_worker(
    g: usize,
    group: &Mutex<EnvGroup<'_>>,
    actions: Receiver<ActionBatch>,
    ready: Sender<Stepped>,
) {
    for batch in actions {
        let stepping = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock(group).step(&batch).map_err(anyhow::Error::from)
        }))
        .unwrap_or_else(|_| {
            Err(anyhow!(
                "an environment of group {g} panicked while stepping"
            ))
        });
        let failed = result.is_err();
        let report = Stepped {
            group: g,
            took: stepping.elapsed(),
            result,
        };
        if ready.send(report).is_err() || failed {
            return;
        }
    }
}

/// Pushes every step all groups have taken into the buffer, in order: each field is the
/// groups' parts concatenated in group order, as the environments are.
fn push_complete_steps(progress: &mut Progress, buffer: &mut RolloutBuffer) -> Result<()> {
    while progress.recorded.iter().all(|steps| !steps.is_empty()) {
        let parts: Vec<GroupStep> = progress
            .recorded
            .iter_mut()
            .map(|steps| steps.pop_front().expect("checked non-empty"))
            .collect();
        let cat = |field: fn(&GroupStep) -> &Tensor| {
            Tensor::cat(&parts.iter().map(field).collect::<Vec<_>>(), 0)
        };
        let truncation_values = parts
            .iter()
            .any(|p| p.truncation_values.is_some())
            .then(|| {
                let each: Vec<Tensor> = parts
                    .iter()
                    .map(|p| match &p.truncation_values {
                        Some(v) => v.shallow_clone(),
                        None => p.rewards.zeros_like(),
                    })
                    .collect();
                Tensor::cat(&each, 0)
            });
        let obs = buffer.obs_row(buffer.len())?;
        buffer.push(&StepRecord {
            obs: &obs,
            actions: &cat(|p| &p.taken.actions),
            log_probs: &cat(|p| &p.taken.log_probs),
            values: &cat(|p| &p.taken.values),
            rewards: &cat(|p| &p.rewards),
            terminated: &cat(|p| &p.terminated),
            truncated: &cat(|p| &p.truncated),
            truncation_values: truncation_values.as_ref(),
        })?;
    }
    Ok(())
}

fn lock<'m, 'a>(group: &'m Mutex<EnvGroup<'a>>) -> MutexGuard<'m, EnvGroup<'a>> {
    // A worker that panicked while stepping has already reported it; the rows are still there.
    group.lock().unwrap_or_else(|e| e.into_inner())
}

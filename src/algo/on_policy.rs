//! The on-policy learner (PPO, A2C): an actor-critic, its rollout buffer and collector, and an
//! update rule. Each round collects T steps of this rank's N environments with the current
//! policy, then updates on them once (gradients averaged over ranks by the collective).
//!
//! A recurrent policy's [`Memory`] (each environment's state and episode starts) lives here
//! between rounds, and in this rank's checkpoint files (`memory-rank{r}.bin`) between runs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use tch::Tensor;
use tch::nn::VarStore;

use super::Collective;
use super::actions::ActionKind;
use super::collect::{Memory, RolloutCollector};
use super::learner::{Counters, Learner, Resumed, Round, Scalars, Setting};
use super::optim::Optimizer;
use super::rollout::{Batch, RolloutBuffer};
use crate::nn::{
    ActorCritic, EntropyUse, Evaluation, named_parameters, trainable_parameters_in_order,
};

/// An on-policy update rule: what PPO and A2C each do with a full rollout buffer.
pub trait PolicyUpdate {
    fn optimizer(&self) -> &Optimizer;
    fn optimizer_mut(&mut self) -> &mut Optimizer;
    /// One update on this rank's rollout; `last_values` are V(s_T) after it, `progress` the
    /// fraction of training done before this update. Returns the update's scalars.
    fn learn(
        &mut self,
        model: &ActorCritic,
        rollout: &RolloutBuffer,
        last_values: &Tensor,
        at: UpdateAt,
        collective: &mut dyn Collective,
    ) -> Result<Scalars>;
}

/// Which update this is, for schedules and per-update random streams.
#[derive(Debug, Clone, Copy)]
pub struct UpdateAt {
    pub seed: u64,
    pub rank: usize,
    pub update: u64,
    pub progress: f64,
}

pub struct OnPolicy<U: PolicyUpdate> {
    vs: VarStore,
    model: ActorCritic,
    rule: U,
    buffer: RolloutBuffer,
    collector: RolloutCollector,
    /// The recurrent state carried between rounds; `None` for a feed-forward policy.
    memory: Option<Memory>,
    seed: u64,
    rank: usize,
    steps_per_update: u64,
    latest: Scalars,
}

impl<U: PolicyUpdate> OnPolicy<U> {
    /// The actor-critic (from the current torch seed), then the update rule `make_rule` builds
    /// over its variables.
    pub fn new(setting: &Setting, make_rule: impl FnOnce(&VarStore) -> Result<U>) -> Result<Self> {
        let Setting {
            experiment,
            envs,
            rank,
            world,
            device,
        } = *setting;
        let (spec, obs_shape) = super::learner::network_for(experiment, envs)?;
        let vs = VarStore::new(device);
        let model = ActorCritic::new(&vs.root(), &spec, &obs_shape, envs.action_space().clone())?;
        let rule = make_rule(&vs)?;
        let n_envs = experiment.per_rank_envs();
        let rollout = experiment.train.rollout;
        let action_kind = ActionKind::of(envs.action_space());
        let buffer = RolloutBuffer::new(
            rollout as i64,
            n_envs as i64,
            &obs_shape,
            action_kind,
            device,
        )?;
        let collector =
            RolloutCollector::new(n_envs, experiment.train.env_groups, &obs_shape, action_kind)?;
        let memory = model
            .is_recurrent()
            .then(|| Memory::new(&model, n_envs as i64, device));
        Ok(OnPolicy {
            vs,
            model,
            rule,
            buffer,
            collector,
            memory,
            seed: experiment.seed,
            rank,
            steps_per_update: (n_envs * rollout * world) as u64,
            latest: Vec::new(),
        })
    }
}

impl<U: PolicyUpdate> Learner for OnPolicy<U> {
    fn steps_per_update(&self) -> u64 {
        self.steps_per_update
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        trainable_parameters_in_order(&self.vs)
    }

    fn networks(&self) -> Vec<(String, Tensor)> {
        named_parameters(&self.vs, "model")
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.rule.optimizer().state_tensors()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("optimizer_steps", self.rule.optimizer().step_count())]
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        match name {
            "optimizer_steps" => self.rule.optimizer_mut().set_step_count(value),
            other => bail!("the on-policy learner has no counter {other}"),
        }
        Ok(())
    }

    fn round(&mut self, envs: &mut tandem_env::VecEnv, round: Round) -> Result<()> {
        let Counters { update, .. } = *round.counters;
        tch::manual_seed(crate::seeds::derived_seed(
            self.seed,
            crate::seeds::Purpose::Sampling,
            self.rank as u64,
            update,
        ) as i64);
        let last_values = match &mut self.memory {
            Some(memory) => self.collector.collect_recurrent(
                &self.model,
                envs,
                memory,
                &mut self.buffer,
                round.phases,
            )?,
            None => self
                .collector
                .collect(&self.model, envs, &mut self.buffer, round.phases)?,
        };

        let learning = Instant::now();
        let at = UpdateAt {
            seed: self.seed,
            rank: self.rank,
            update,
            progress: update as f64 / round.limits.total_updates as f64,
        };
        self.latest = self
            .rule
            .learn(
                &self.model,
                &self.buffer,
                &last_values,
                at,
                round.collective,
            )
            .with_context(|| format!("update {update}"))?;
        let sync = round.collective.take_sync_time();
        round
            .phases
            .add("learn", learning.elapsed().saturating_sub(sync));
        round.phases.add("sync", sync);

        round.counters.update += 1;
        round.counters.global_step += self.steps_per_update;
        Ok(())
    }

    fn scalars(&self) -> Scalars {
        self.latest.clone()
    }

    fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        let Some(memory) = &self.memory else {
            return Ok(());
        };
        let file = memory_file(dir, self.rank);
        crate::atomic::write_atomic(&file, &memory_bytes(memory, global_step)?)
            .with_context(|| format!("cannot write {}", file.display()))
    }

    /// The saved memory continues the saved episodes, so it comes back exactly when the
    /// environments do; otherwise the fresh episodes start from zero states.
    fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        let Some(memory) = &mut self.memory else {
            return Ok(());
        };
        if !resumed.envs_restored {
            tracing::info!(
                "rank {}: environments start fresh episodes, so the recurrent state starts at zero",
                self.rank
            );
            return Ok(());
        }
        let file = memory_file(resumed.dir, self.rank);
        let bytes =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        *memory = memory_from_bytes(&bytes, memory, resumed.global_step).with_context(|| {
            format!("cannot resume the recurrent state from {}", file.display())
        })?;
        Ok(())
    }

    /// Explained variance is legitimately NaN when returns are constant; nothing else is.
    fn diverged(&self) -> bool {
        self.latest
            .iter()
            .any(|(tag, v)| !v.is_finite() && !tag.ends_with("explained_variance"))
    }
}

/// Where rank `rank` keeps its recurrent memory in a checkpoint directory.
fn memory_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("memory-rank{rank}.bin"))
}

const MEMORY_MAGIC: &[u8; 8] = b"TNDMMEM1";

/// The memory as bytes: magic, the global step it was saved at, environments and state width
/// (u64 little-endian each), then the states and the starts as f32 little-endian.
fn memory_bytes(memory: &Memory, global_step: u64) -> Result<Vec<u8>> {
    let shape = memory.state.size();
    let host = |t: &Tensor| -> Result<Vec<f32>> {
        let flat = t.to_device(tch::Device::Cpu).reshape([-1]);
        Vec::<f32>::try_from(&flat).context("copying the recurrent state to the host")
    };
    let mut bytes = MEMORY_MAGIC.to_vec();
    for word in [global_step, shape[0] as u64, shape[1] as u64] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    for value in host(&memory.state)?
        .into_iter()
        .chain(host(&memory.starts)?)
    {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    Ok(bytes)
}

/// The memory `memory_bytes` wrote, checked against the step and the shape of `like`.
fn memory_from_bytes(bytes: &[u8], like: &Memory, global_step: u64) -> Result<Memory> {
    let shape = like.state.size();
    let (envs, width) = (shape[0] as usize, shape[1] as usize);
    let header = MEMORY_MAGIC.len() + 24;
    ensure!(
        bytes.len() >= header && &bytes[..8] == MEMORY_MAGIC,
        "not a recurrent-state file"
    );
    let word = |i: usize| {
        let at = 8 + 8 * i;
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    ensure!(
        word(0) == global_step,
        "it was saved at global step {}, the checkpoint is at step {global_step}",
        word(0)
    );
    ensure!(
        (word(1), word(2)) == (envs as u64, width as u64),
        "it holds states of {} environments of width {}, this run has {envs} of width {width}",
        word(1),
        word(2)
    );
    ensure!(
        bytes.len() == header + 4 * (envs * width + envs),
        "it is {} bytes long, {} expected",
        bytes.len(),
        header + 4 * (envs * width + envs)
    );
    let floats: Vec<f32> = bytes[header..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let device = like.state.device();
    let (state, starts) = floats.split_at(envs * width);
    Ok(Memory {
        state: Tensor::from_slice(state)
            .view([envs as i64, width as i64])
            .to_device(device),
        starts: Tensor::from_slice(starts).to_device(device),
    })
}

/// The policy's evaluation of a (micro-)batch's rows, as PPO's and A2C's losses read it: step
/// by step from the initial states for environment sequences, else row by row.
pub(crate) fn evaluate_rows(
    model: &ActorCritic,
    batch: &Batch,
    entropy: EntropyUse,
) -> Result<Evaluation> {
    match &batch.sequences {
        Some(sequences) => model.evaluate_recurrent(
            &batch.obs,
            &batch.actions,
            &sequences.starts,
            &sequences.initial_state,
            entropy,
        ),
        None => model.evaluate(&batch.obs, &batch.actions, entropy),
    }
}

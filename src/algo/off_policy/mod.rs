//! The off-policy skeleton (DQN, SAC, TD3): each iteration steps this rank's environments
//! `train-frequency` times with the rule's behaviour policy into the rank's own replay buffer,
//! then, once learning has started, takes the rule's gradient steps on batches sampled from it
//! (gradients averaged over ranks). What differs between algorithms (how to act, what one
//! gradient step is, which networks and optimizers there are) is an [`OffPolicyRule`]; the
//! acting loop, learning-starts, the gradient-step decisions, rounds, and the checkpointed
//! replay files and their resume rules exist once, here.
//!
//! Every rank runs the same number of iterations and takes a gradient step in the same ones:
//! whether an iteration trains is a function of the global step counter and of the number of
//! vector steps pushed, which all ranks share. A round is [`EXCHANGE_EVERY`] iterations (fewer
//! at the end): exchanging episodes and decisions every iteration would put three collectives on
//! every environment step of a small game.

pub mod box_rule;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tch::{Device, Tensor};

use tandem_config::{Experiment, Wrapper};
use tandem_env::rng::Xoshiro256;
use tandem_env::{Dtype, VecEnv};

use crate::algo::Collective;
use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::learner::{Learner, Resumed, Round, Scalars, Setting};
use crate::algo::storage::host_rows::rows_to_batch;
use crate::algo::storage::replay::{ReplayBuffer, ReplaySpec, Sample};
use crate::seeds::{Purpose, derived_seed};

/// Iterations per round (between exchanges of episodes and control decisions).
pub const EXCHANGE_EVERY: u64 = 16;

/// A batch of transitions as tensors (see `replay::Sample` for the meaning of each). Actions
/// are int64 `[B]` (discrete) or f32 `[B, d]` in the environment's units (box).
pub struct TransitionBatch {
    pub obs: Tensor,
    pub actions: Tensor,
    pub returns: Tensor,
    pub discounts: Tensor,
    pub next_obs: Tensor,
    pub weights: Tensor,
}

impl TransitionBatch {
    fn from_sample(
        sample: &Sample,
        n: usize,
        obs_shape: &[i64],
        device: Device,
    ) -> TransitionBatch {
        let actions = match &sample.actions {
            ActionBatch::Discrete(a) => Tensor::from_slice(a),
            ActionBatch::Box { dim, values } => {
                Tensor::from_slice(values).view([n as i64, *dim as i64])
            }
            ActionBatch::MultiDiscrete { dim, values } => {
                Tensor::from_slice(values).view([n as i64, *dim as i64])
            }
        };
        TransitionBatch {
            obs: rows_to_batch(&sample.obs, n, obs_shape, device),
            actions: actions.to_device(device),
            returns: Tensor::from_slice(&sample.returns).to_device(device),
            discounts: Tensor::from_slice(&sample.discounts).to_device(device),
            next_obs: rows_to_batch(&sample.next_obs, n, obs_shape, device),
            weights: Tensor::from_slice(&sample.weights).to_device(device),
        }
    }
}

/// When the skeleton acts and learns, from the algorithm's settings.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Global steps before the first gradient step.
    pub learning_starts: u64,
    /// Vector steps per iteration.
    pub train_frequency: u64,
    /// Gradient steps per iteration once learning has started.
    pub gradient_steps: u64,
    pub checkpoint_replay: bool,
}

/// What the replay buffer computes for the rule: n-step returns with `gamma`, and priorities
/// when `priority_alpha` is set.
#[derive(Debug, Clone, Copy)]
pub struct ReturnSpec {
    pub n_step: usize,
    pub gamma: f64,
    pub priority_alpha: Option<f64>,
}

/// Where an acting step stands.
#[derive(Debug, Clone, Copy)]
pub struct ActAt {
    pub global_step: u64,
    pub total_steps: u64,
    /// Learning has not started yet (`global_step < learning-starts`).
    pub warming_up: bool,
}

/// An off-policy algorithm as the skeleton drives it.
pub trait OffPolicyRule {
    /// Actions for this rank's environments observing `obs`, as the environments take them
    /// and replay stores them. Randomness comes from torch's generator (seeded per iteration).
    fn act(&mut self, obs: &Tensor, at: ActAt) -> Result<ActionBatch>;
    /// The importance-sampling exponent of this iteration's samples (prioritised replay).
    fn sampling_beta(&mut self, _global_step: u64, _total_steps: u64) -> f64 {
        1.0
    }
    /// One gradient step on this rank's batch; new priorities (|δ| per sample) when the rule
    /// has them.
    fn learn(
        &mut self,
        batch: &TransitionBatch,
        collective: &mut dyn Collective,
    ) -> Result<Option<Vec<f32>>>;
    fn trainable_parameters(&self) -> Vec<Tensor>;
    fn networks(&self) -> Vec<(String, Tensor)>;
    fn optimizer_state(&self) -> Vec<(String, Tensor)>;
    fn counters(&self) -> Vec<(&'static str, u64)>;
    fn set_counter(&mut self, name: &str, value: u64) -> Result<()>;
    /// The rule's scalars; `sampleable` is the replay's count, for the rule to place.
    fn scalars(&self, sampleable: usize) -> Scalars;
    fn diverged(&self) -> bool;
    fn gradient_steps(&self) -> u64;
}

pub struct OffPolicy<R> {
    rule: R,
    schedule: Schedule,
    replay: ReplayBuffer,
    replay_spec: ReplaySpec,
    obs_shape: Vec<i64>,
    device: Device,
    seed: u64,
    rank: usize,
    per_rank_batch: usize,
    steps_per_vector_step: u64,
}

impl<R: OffPolicyRule> OffPolicy<R> {
    pub fn new(
        setting: &Setting,
        rule: R,
        schedule: Schedule,
        returns: ReturnSpec,
    ) -> Result<OffPolicy<R>> {
        let Setting {
            experiment,
            envs,
            rank,
            world,
            device,
            seats: _,
        } = *setting;
        let obs_shape = envs.obs_shape().iter().map(|&d| d as i64).collect();
        let replay_spec = replay_spec(experiment, envs, returns)?;
        let replay = ReplayBuffer::new(replay_spec.clone())
            .with_context(|| format!("cannot build the replay buffer of rank {rank}"))?;
        Ok(OffPolicy {
            rule,
            schedule,
            replay,
            replay_spec,
            obs_shape,
            device,
            seed: experiment.seed,
            rank,
            per_rank_batch: experiment
                .per_rank_batch_size()
                .context("an off-policy learner has a per-rank batch size")?,
            steps_per_vector_step: (experiment.per_rank_rows() * world) as u64,
        })
    }

    /// `train-frequency` vector steps of the rule's behaviour policy into this rank's replay.
    /// The last one is only begun: its environments step (in their own processes, for
    /// gymnasium) while the rule learns, and [`OffPolicy::finish_acting`] completes it. The
    /// gradient steps sample what they would after the whole step (see
    /// `ReplayBuffer::push_observations`), so the overlap changes nothing but the time.
    fn act(&mut self, envs: &mut VecEnv, global_step: &mut u64, total_steps: u64) -> Result<()> {
        let n_envs = envs.num_envs();
        for step in 0..self.schedule.train_frequency {
            let at = ActAt {
                global_step: *global_step,
                total_steps,
                warming_up: *global_step < self.schedule.learning_starts,
            };
            let obs_rows = envs.obs().to_vec();
            let obs = rows_to_batch(&obs_rows, n_envs, &self.obs_shape, self.device);
            let actions = self.rule.act(&obs, at)?;
            envs.begin_step(&actions)?;
            self.replay.push_observations(&obs_rows, &actions)?;
            *global_step += self.steps_per_vector_step;
            if step + 1 < self.schedule.train_frequency {
                self.finish_acting(envs)?;
            }
        }
        Ok(())
    }

    /// Completes the vector step [`OffPolicy::act`] began: the environments' outcome into the
    /// replay row.
    fn finish_acting(&mut self, envs: &mut VecEnv) -> Result<()> {
        envs.finish_step()?;
        self.replay.push_outcome(
            envs.rewards(),
            envs.terminated(),
            envs.truncated(),
            envs.final_obs(),
        )
    }

    /// The rule's gradient steps on batches sampled from this rank's replay, once learning has
    /// started (the same decision on every rank: global counters only).
    fn learn(
        &mut self,
        iteration: u64,
        global_step: u64,
        total_steps: u64,
        collective: &mut dyn Collective,
    ) -> Result<()> {
        if global_step < self.schedule.learning_starts
            || self.replay.sampleable() < self.per_rank_batch
        {
            return Ok(());
        }
        let beta = self.rule.sampling_beta(global_step, total_steps);
        let seed = derived_seed(self.seed, Purpose::Replay, self.rank as u64, iteration);
        let mut rng = Xoshiro256::new(seed);
        let n = self.per_rank_batch;
        for _ in 0..self.schedule.gradient_steps {
            let sample = self.replay.sample(n, beta, &mut rng)?;
            let batch = TransitionBatch::from_sample(&sample, n, &self.obs_shape, self.device);
            if let Some(priorities) = self.rule.learn(&batch, collective)? {
                self.replay.update_priorities(&sample.slots, &priorities)?;
            }
        }
        Ok(())
    }

    fn replay_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("replay-rank{}.bin", self.rank))
    }
}

impl<R: OffPolicyRule> Learner for OffPolicy<R> {
    fn steps_per_update(&self) -> u64 {
        self.steps_per_vector_step * self.schedule.train_frequency
    }

    fn updates_per_round(&self) -> u64 {
        EXCHANGE_EVERY
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        self.rule.trainable_parameters()
    }

    /// The online networks and their targets. Targets are in the start-up broadcast: from
    /// there on they change only by deterministic updates from the (identical) online
    /// parameters.
    fn networks(&self) -> Vec<(String, Tensor)> {
        self.rule.networks()
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.rule.optimizer_state()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.rule.counters()
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        self.rule.set_counter(name, value)
    }

    /// Iterations up to the next multiple of [`EXCHANGE_EVERY`] (so a resumed run exchanges
    /// where the uninterrupted one did), or to the end.
    fn round(&mut self, envs: &mut VecEnv, round: Round) -> Result<()> {
        let total_steps = round.limits.total_steps;
        loop {
            let iteration = round.counters.update;
            let acting = Instant::now();
            let seed = derived_seed(self.seed, Purpose::Acting, self.rank as u64, iteration);
            tch::manual_seed(seed as i64);
            self.act(envs, &mut round.counters.global_step, total_steps)?;
            round.phases.add("acting", acting.elapsed());

            let learning = Instant::now();
            let global_step = round.counters.global_step;
            self.learn(iteration, global_step, total_steps, round.collective)?;
            let sync = round.collective.take_sync_time();
            round
                .phases
                .add("learn", learning.elapsed().saturating_sub(sync));
            round.phases.add("sync", sync);
            let finishing = Instant::now();
            self.finish_acting(envs)?;
            round.phases.add("acting", finishing.elapsed());

            round.counters.update += 1;
            if round.counters.update.is_multiple_of(EXCHANGE_EVERY)
                || round.limits.reached(*round.counters)
            {
                return Ok(());
            }
        }
    }

    fn scalars(&self) -> Scalars {
        self.rule.scalars(self.replay.sampleable())
    }

    fn diverged(&self) -> bool {
        self.rule.diverged()
    }

    fn summary_fields(&self) -> Vec<(&'static str, String)> {
        vec![("gradient_steps", self.rule.gradient_steps().to_string())]
    }

    fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        if self.schedule.checkpoint_replay {
            self.replay.set_tag(global_step);
            self.replay.save(&self.replay_file(dir))?;
        }
        Ok(())
    }

    fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        if !self.schedule.checkpoint_replay {
            return Ok(());
        }
        let rank = self.rank;
        if resumed.saved_world != resumed.world {
            // Buffers hold each rank's own environments' streams; they cannot be split or merged.
            tracing::warn!(
                "rank {rank}: the checkpoint was written on {} rank(s), this run has {}; \
                 per-rank replay buffers do not carry over, starting with an empty one",
                resumed.saved_world,
                resumed.world
            );
            return Ok(());
        }
        let file = self.replay_file(resumed.dir);
        if !file.exists() {
            tracing::warn!(
                "rank {rank}: no replay buffer at {}; continuing with an empty one",
                file.display()
            );
            return Ok(());
        }
        let loaded = ReplayBuffer::load(self.replay_spec.clone(), &file).context(
            "cannot resume this rank's replay buffer; resume with checkpoint-replay #false \
             to start with an empty one",
        )?;
        if loaded.tag() != resumed.global_step {
            bail!(
                "{} was saved at global step {} but the checkpoint {} is at step {}; \
                 they were not written together",
                file.display(),
                loaded.tag(),
                resumed.checkpoint.display(),
                resumed.global_step
            );
        }
        if resumed.envs_restored {
            self.replay = loaded;
        } else {
            // The buffer's newest stacks continue episodes that the fresh environments no
            // longer play; joining them would make transitions that never happened.
            tracing::warn!(
                "rank {rank}: the environments start fresh episodes, so the saved replay \
                 buffer cannot continue; starting with an empty one"
            );
        }
        Ok(())
    }
}

/// The replay buffer this rank keeps: its share of the capacity, frames stored once where the
/// observations are stacks, bytes where they are whole numbers in 0..=255.
fn replay_spec(experiment: &Experiment, envs: &VecEnv, returns: ReturnSpec) -> Result<ReplaySpec> {
    Ok(ReplaySpec {
        capacity: experiment
            .per_rank_buffer_capacity()
            .context("an off-policy learner has a per-rank buffer capacity")?,
        num_envs: envs.num_envs(),
        obs_len: envs.obs_len(),
        stack: experiment.replay_stack(),
        pixels: stores_bytes(experiment, envs.env_observation_space().dtype),
        n_step: returns.n_step,
        gamma: returns.gamma,
        priority_alpha: returns.priority_alpha,
        actions: ActionKind::of(envs.action_space()),
    })
}

/// Whether observations are whole numbers in 0..=255 that replay can keep as bytes: images
/// (u8) and MinAtar's binary planes, unless a normaliser turns them into arbitrary floats.
/// (The buffer checks every stored value, so a wrong guess is an error, not a silent loss.)
fn stores_bytes(experiment: &Experiment, dtype: Dtype) -> bool {
    let normalised = experiment
        .env
        .wrappers
        .iter()
        .any(|w| matches!(w, Wrapper::NormalizeObs { .. }));
    let binary_planes = experiment.observation().is_some_and(|o| o.is_planes());
    (dtype == Dtype::U8 || binary_planes) && !normalised
}

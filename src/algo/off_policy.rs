//! The off-policy learner (DQN): each iteration steps this rank's environments
//! `train-frequency` times with an ε-greedy policy into the rank's own replay buffer, then takes
//! one gradient step on a batch sampled from it (gradients averaged over ranks).
//!
//! Every rank runs the same number of iterations and takes a gradient step in the same ones:
//! whether an iteration trains is a function of the global step counter and of the number of
//! vector steps pushed, which all ranks share. A round is [`EXCHANGE_EVERY`] iterations (fewer
//! at the end): exchanging episodes and decisions every iteration would put three collectives on
//! every environment step of a small game.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tch::{Device, Tensor};

use tandem_config::{Experiment, Wrapper};
use tandem_env::rng::Xoshiro256;
use tandem_env::{Dtype, VecEnv};

use super::actions::{ActionBatch, ActionKind};
use super::dqn::{Dqn, DqnConfig, DqnStats, TransitionBatch, annealed, epsilon_at};
use super::host_rows::{actions_to_host, rows_to_batch};
use super::learner::{Learner, Resumed, Round, Scalars, Setting};
use super::replay::{ReplayBuffer, ReplaySpec, VectorStep};
use crate::nn::trainable_parameters_in_order;
use crate::seeds::{Purpose, derived_seed};

/// Iterations per round (between exchanges of episodes and control decisions).
pub const EXCHANGE_EVERY: u64 = 16;

pub struct OffPolicy {
    dqn: Dqn,
    cfg: tandem_config::Dqn,
    replay: ReplayBuffer,
    replay_spec: ReplaySpec,
    obs_shape: Vec<i64>,
    device: Device,
    seed: u64,
    rank: usize,
    per_rank_batch: usize,
    steps_per_vector_step: u64,
    latest: Option<DqnStats>,
    epsilon: f64,
    beta: f64,
}

impl OffPolicy {
    pub fn new(setting: &Setting, cfg: &tandem_config::Dqn) -> Result<OffPolicy> {
        let Setting {
            experiment,
            envs,
            rank,
            world,
            device,
        } = *setting;
        let (spec, obs_shape) = super::learner::network_for(experiment, envs)?;
        let dqn = Dqn::new(
            device,
            &spec,
            &obs_shape,
            envs.num_actions() as i64,
            cfg.dueling,
            DqnConfig::from_config(cfg),
        )?;
        let replay_spec = replay_spec(experiment, envs, cfg)?;
        let replay = ReplayBuffer::new(replay_spec.clone())
            .with_context(|| format!("cannot build the replay buffer of rank {rank}"))?;
        Ok(OffPolicy {
            dqn,
            cfg: cfg.clone(),
            replay,
            replay_spec,
            obs_shape,
            device,
            seed: experiment.seed,
            rank,
            per_rank_batch: experiment
                .per_rank_batch_size()
                .context("dqn has a per-rank batch size")?,
            steps_per_vector_step: (experiment.per_rank_envs() * world) as u64,
            latest: None,
            epsilon: cfg.epsilon_start,
            beta: cfg.priority_beta_start,
        })
    }

    /// `train-frequency` ε-greedy vector steps into this rank's replay buffer.
    fn act(&mut self, envs: &mut VecEnv, global_step: &mut u64, total_steps: u64) -> Result<()> {
        let n_envs = envs.num_envs();
        for _ in 0..self.cfg.train_frequency {
            let cfg = &self.cfg;
            self.epsilon = epsilon_at(
                cfg.epsilon_start,
                cfg.epsilon_end,
                cfg.epsilon_fraction,
                *global_step,
                total_steps,
            );
            let obs_rows = envs.obs().to_vec();
            let obs = rows_to_batch(&obs_rows, n_envs, &self.obs_shape, self.device);
            let actions = actions_to_host(&self.dqn.act(&obs, self.epsilon)?)?;
            envs.step(&actions)?;
            self.replay.push(&VectorStep {
                obs: &obs_rows,
                actions: &ActionBatch::Discrete(actions),
                rewards: envs.rewards(),
                terminated: envs.terminated(),
                truncated: envs.truncated(),
                final_obs: envs.final_obs(),
            })?;
            *global_step += self.steps_per_vector_step;
        }
        Ok(())
    }

    /// One gradient step on a batch sampled from this rank's replay, once learning has started
    /// (the same decision on every rank: global counters only).
    fn learn(
        &mut self,
        iteration: u64,
        global_step: u64,
        total_steps: u64,
        collective: &mut dyn super::Collective,
    ) -> Result<()> {
        if global_step < self.cfg.learning_starts || self.replay.sampleable() < self.per_rank_batch
        {
            return Ok(());
        }
        let cfg = &self.cfg;
        self.beta = annealed(
            cfg.priority_beta_start,
            cfg.priority_beta_end,
            global_step as f64 / total_steps as f64,
        );
        let seed = derived_seed(self.seed, Purpose::Replay, self.rank as u64, iteration);
        let mut rng = Xoshiro256::new(seed);
        let n = self.per_rank_batch;
        let sample = self.replay.sample(n, self.beta, &mut rng)?;
        let (shape, device) = (&self.obs_shape, self.device);
        let batch = TransitionBatch {
            obs: rows_to_batch(&sample.obs, n, shape, device),
            actions: Tensor::from_slice(sample.actions.discrete("dqn")?).to_device(device),
            returns: Tensor::from_slice(&sample.returns).to_device(device),
            discounts: Tensor::from_slice(&sample.discounts).to_device(device),
            next_obs: rows_to_batch(&sample.next_obs, n, shape, device),
            weights: Tensor::from_slice(&sample.weights).to_device(device),
        };
        let stats = self.dqn.update(&batch, collective)?;
        self.replay
            .update_priorities(&sample.slots, &stats.td_errors)?;
        self.latest = Some(stats);
        Ok(())
    }

    fn replay_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("replay-rank{}.bin", self.rank))
    }
}

impl Learner for OffPolicy {
    fn steps_per_update(&self) -> u64 {
        self.steps_per_vector_step * self.cfg.train_frequency
    }

    fn updates_per_round(&self) -> u64 {
        EXCHANGE_EVERY
    }

    fn trainable_parameters(&self) -> Vec<Tensor> {
        trainable_parameters_in_order(self.dqn.online_vs())
    }

    /// The online and target networks. The target is in the start-up broadcast: from there on
    /// it changes only by deterministic updates from the (identical) online parameters.
    fn networks(&self) -> Vec<(String, Tensor)> {
        self.dqn.named_state()
    }

    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.dqn.optimizer().state_tensors()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("optimizer_steps", self.dqn.optimizer().step_count()),
            ("gradient_steps", self.dqn.gradient_steps()),
        ]
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<()> {
        match name {
            "optimizer_steps" => self.dqn.optimizer_mut().set_step_count(value),
            "gradient_steps" => self.dqn.set_gradient_steps(value),
            other => bail!("the DQN learner has no counter {other}"),
        }
        Ok(())
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

            round.counters.update += 1;
            if round.counters.update.is_multiple_of(EXCHANGE_EVERY)
                || round.limits.reached(*round.counters)
            {
                return Ok(());
            }
        }
    }

    fn scalars(&self) -> Scalars {
        let mut s: Scalars = vec![
            ("dqn/epsilon", self.epsilon),
            ("dqn/gradient_steps", self.dqn.gradient_steps() as f64),
            ("replay/sampleable", self.replay.sampleable() as f64),
        ];
        if self.cfg.prioritized {
            s.push(("replay/beta", self.beta));
        }
        if let Some(st) = &self.latest {
            s.push(("loss/td", st.loss));
            s.push(("dqn/q_mean", st.q_mean));
            s.push(("dqn/td_abs_mean", st.td_abs_mean));
            s.push(("optim/grad_norm", st.grad_norm));
        }
        s
    }

    fn diverged(&self) -> bool {
        self.latest
            .as_ref()
            .is_some_and(|s| !s.loss.is_finite() || !s.grad_norm.is_finite())
    }

    fn summary_fields(&self) -> Vec<(&'static str, String)> {
        vec![("gradient_steps", self.dqn.gradient_steps().to_string())]
    }

    fn save_rank_files(&mut self, dir: &Path, global_step: u64) -> Result<()> {
        if self.cfg.checkpoint_replay {
            self.replay.set_tag(global_step);
            self.replay.save(&self.replay_file(dir))?;
        }
        Ok(())
    }

    fn restore_rank_files(&mut self, resumed: &Resumed) -> Result<()> {
        if !self.cfg.checkpoint_replay {
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
fn replay_spec(
    experiment: &Experiment,
    envs: &VecEnv,
    cfg: &tandem_config::Dqn,
) -> Result<ReplaySpec> {
    Ok(ReplaySpec {
        capacity: experiment
            .per_rank_buffer_capacity()
            .context("dqn has a per-rank buffer capacity")?,
        num_envs: envs.num_envs(),
        obs_len: envs.obs_len(),
        stack: experiment.replay_stack(),
        pixels: stores_bytes(experiment, envs.env_observation_space().dtype),
        n_step: cfg.n_step,
        gamma: cfg.gamma,
        priority_alpha: cfg.prioritized.then_some(cfg.priority_alpha),
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
    let binary_planes = matches!(
        experiment.observation(),
        Some(tandem_config::Observation::Planes { .. })
    );
    (dtype == Dtype::U8 || binary_planes) && !normalised
}

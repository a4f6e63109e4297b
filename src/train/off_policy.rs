//! The off-policy training loop (DQN): each iteration steps this rank's environments
//! `train-frequency` times with an ε-greedy policy into the rank's own replay buffer, then takes
//! one gradient step on a batch sampled from it (gradients averaged over ranks by DDP).
//!
//! Every rank runs the same number of iterations and takes a gradient step in the same ones:
//! whether an iteration trains is a function of the global step counter and of the number of
//! vector steps pushed, which all ranks share. Stopping, logging and NaN handling are decided at
//! exchange points (every [`EXCHANGE_EVERY`] iterations and at the end) in one collective, with
//! rank 0's answer taken for stop and log. Rank 0 writes summaries and model checkpoints; every
//! rank writes its own replay buffer beside them when `checkpoint-replay` is on.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tch::{Device, Kind, Tensor};

use tandem_config::{Algorithm, Experiment, Interval, Wrapper};
use tandem_env::Dtype;
use tandem_env::rng::Xoshiro256;

use super::checkpoint::{self, Checkpoint};
use super::console::Console;
use super::envs::make_vec_env;
use super::metrics::{self, Episode, RecentEpisodes};
use super::shared::{
    RunSummary, batch_tensor, normalizer_tensors, open_summaries, params_finite,
    process_cpu_seconds, restore_envs, restore_normalizers, sync_normalizers, sync_policy,
    write_summary,
};
use super::{Outcome, RankContext, actor_critic_spec, derived_seed};
use crate::algo::Collective;
use crate::algo::dqn::{Dqn, DqnConfig, DqnStats, TdLoss, annealed, epsilon_at};
use crate::algo::replay::{ReplayBuffer, ReplaySpec, VectorStep};
use crate::dist::{Ddp, SyncPolicy};
use crate::nn::trainable_parameters_in_order;

/// Seeds for distinct purposes (see [`derived_seed`]); the on-policy trainer uses 1..=3.
const SEED_INIT: u64 = 1;
const SEED_ACTING: u64 = 4;
const SEED_REPLAY: u64 = 5;

/// Iterations between exchanges of episodes and control decisions. Exchanging every iteration
/// would put three collectives on every environment step of a small game.
pub const EXCHANGE_EVERY: u64 = 16;

/// Adam's epsilon for DQN: torch's default, as in CleanRL's and SB3's DQN.
const ADAM_EPS: f64 = 1e-8;

/// Frames per stacked observation that the replay can rebuild: the frame-stack's `n` when no
/// later wrapper changes observations, else 1 (whole observations are stored).
fn replay_stack(experiment: &Experiment) -> usize {
    let mut stack = 1;
    for w in &experiment.env.wrappers {
        match w {
            Wrapper::FrameStack { n } => stack = *n as usize,
            Wrapper::NormalizeObs { .. } | Wrapper::Resize { .. } | Wrapper::Grayscale => stack = 1,
            _ => {}
        }
    }
    stack.max(1)
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
        tandem_config::Observation::Planes { .. }
    );
    (dtype == Dtype::U8 || binary_planes) && !normalised
}

/// Where rank `rank` keeps its replay buffer in a run directory.
pub fn replay_path(run_dir: &std::path::Path, rank: usize) -> PathBuf {
    checkpoint::checkpoint_dir(run_dir).join(format!("replay-rank{rank}.bin"))
}

#[derive(Default)]
struct Phases {
    acting: Duration,
    learn: Duration,
    sync: Duration,
    log: Duration,
}

pub(super) fn run(ctx: RankContext) -> Result<Outcome> {
    let RankContext {
        experiment: exp,
        hash,
        device,
        pg,
        run_dir,
        resume,
        threads,
        stop_requested,
    } = ctx;
    let Algorithm::Dqn(cfg) = &exp.algorithm else {
        bail!(
            "the off-policy trainer runs dqn, not {}",
            exp.algorithm.name()
        );
    };
    let cfg = cfg.clone();
    let rank = pg.rank();
    let world = pg.world_size();
    let n_envs = exp.per_rank_envs();

    let mut envs = make_vec_env(&exp, rank, threads)?;
    let obs_shape: Vec<i64> = envs.obs_shape().iter().map(|&d| d as i64).collect();
    let obs_len = envs.obs_len();

    tch::manual_seed(derived_seed(exp.seed, SEED_INIT, rank as u64, 0) as i64);
    let spec = actor_critic_spec(&exp)?;
    let mut learner = Dqn::new(
        device,
        &spec.network,
        &spec.init,
        spec.scale_pixels,
        &obs_shape,
        envs.num_actions() as i64,
        cfg.dueling,
        dqn_config(&cfg),
    )?;
    let params = trainable_parameters_in_order(learner.online_vs());
    let mut ddp = Ddp::new(pg, &params, sync_policy(&exp))?;

    let per_rank_batch = exp
        .per_rank_batch_size()
        .context("dqn has a per-rank batch size")?;
    let replay_spec = ReplaySpec {
        capacity: exp
            .per_rank_buffer_capacity()
            .context("dqn has a per-rank buffer capacity")?,
        num_envs: n_envs,
        obs_len,
        stack: replay_stack(&exp),
        pixels: stores_bytes(&exp, envs.env_observation_space().dtype),
        n_step: cfg.n_step,
        gamma: cfg.gamma,
        priority_alpha: cfg.prioritized.then_some(cfg.priority_alpha),
    };
    let mut replay = ReplayBuffer::new(replay_spec.clone())
        .with_context(|| format!("cannot build the replay buffer of rank {rank}"))?;

    // A global step is one environment step on one rank's environment.
    let steps_per_vector_step = (n_envs * world) as u64;
    let steps_per_iteration = steps_per_vector_step * cfg.train_frequency;
    let total_iterations = exp.train.total_steps.div_ceil(steps_per_iteration).max(1);
    let stop_step = exp.step_limit().min(exp.train.total_steps);
    let mut iteration: u64 = 0;
    let mut global_step: u64 = 0;
    let mut recent = RecentEpisodes::new(100);
    let mut env_restored = false;

    if resume {
        let path = checkpoint::locate(&run_dir)?;
        let ckpt = checkpoint::load(&path)?;
        let mut targets = learner.named_state();
        targets.extend(learner.optimizer().state_tensors());
        checkpoint::restore_into(&ckpt, &targets)
            .with_context(|| format!("restoring {}", path.display()))?;
        let counter = |name: &str| {
            ckpt.tensors
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.int64_value(&[0]) as u64)
                .with_context(|| format!("{} has no {name}", path.display()))
        };
        learner
            .optimizer_mut()
            .set_step_count(counter("learner.optimizer_steps")?);
        learner.set_gradient_steps(counter("learner.gradient_steps")?);
        restore_normalizers(&mut envs, &ckpt)?;
        env_restored = restore_envs(&mut envs, &run_dir, &ckpt, rank, world)?;
        iteration = ckpt.update;
        global_step = ckpt.global_step;
        if cfg.checkpoint_replay && ckpt.world_size as usize != world {
            // Buffers hold each rank's own environments' streams; they cannot be split or merged.
            tracing::warn!(
                "rank {rank}: the checkpoint was written on {} rank(s), this run has {world}; \
                 per-rank replay buffers do not carry over, starting with an empty one",
                ckpt.world_size
            );
        } else if cfg.checkpoint_replay {
            let file = replay_path(&run_dir, rank);
            if file.exists() {
                let loaded = ReplayBuffer::load(replay_spec.clone(), &file).context(
                    "cannot resume this rank's replay buffer; resume with checkpoint-replay #false \
                     to start with an empty one",
                )?;
                if loaded.tag() != global_step {
                    bail!(
                        "{} was saved at global step {} but the checkpoint {} is at step {global_step}; \
                         they were not written together",
                        file.display(),
                        loaded.tag(),
                        path.display()
                    );
                }
                if env_restored {
                    replay = loaded;
                } else {
                    // The buffer's newest stacks continue episodes that the fresh environments
                    // no longer play; joining them would make transitions that never happened.
                    tracing::warn!(
                        "rank {rank}: the environments start fresh episodes, so the saved replay \
                         buffer cannot continue; starting with an empty one"
                    );
                }
            } else {
                tracing::warn!(
                    "rank {rank}: no replay buffer at {}; continuing with an empty one",
                    file.display()
                );
            }
        }
        tracing::info!(
            "resumed from {} at iteration {iteration}, step {global_step} (saved on {} rank(s))",
            path.display(),
            ckpt.world_size
        );
    }

    // Lesson 5 of DESIGN.md: identical start on every rank, also after a resume. The target
    // network is included: from here on it changes only by deterministic updates from the
    // (identical) online parameters.
    let mut shared_state: Vec<Tensor> = learner.named_state().into_iter().map(|(_, t)| t).collect();
    shared_state.extend(
        learner
            .optimizer()
            .state_tensors()
            .into_iter()
            .map(|(_, t)| t),
    );
    ddp.broadcast_from_rank0(&shared_state)?;
    let _ = ddp.take_sync_time();

    let mut writer = open_summaries(&exp, rank, &run_dir, &hash, global_step)?;
    let (loop_start, loop_start_step) = (Instant::now(), global_step);
    let loop_start_cpu = process_cpu_seconds();

    if !env_restored {
        envs.reset();
    }
    let mut console = Console::new(rank == 0, stop_step, global_step);
    let mut phases = Phases::default();
    let mut last_log = Instant::now();
    let mut last_log_iteration = iteration;
    let mut interval_start_step = global_step;
    let mut outcome = Outcome::Finished;
    let mut my_episodes: Vec<Episode> = Vec::new();
    let mut last_stats: Option<DqnStats> = None;
    let mut epsilon = cfg.epsilon_start;
    let mut beta = cfg.priority_beta_start;

    while iteration < total_iterations && global_step < stop_step {
        // ---- act: train-frequency vector steps into this rank's replay buffer
        let t0 = Instant::now();
        tch::manual_seed(derived_seed(exp.seed, SEED_ACTING, rank as u64, iteration) as i64);
        for _ in 0..cfg.train_frequency {
            epsilon = epsilon_at(
                cfg.epsilon_start,
                cfg.epsilon_end,
                cfg.epsilon_fraction,
                global_step,
                exp.train.total_steps,
            );
            let obs_rows = envs.obs().to_vec();
            let obs = batch_tensor(&obs_rows, n_envs, &obs_shape, device);
            let actions = Vec::<i64>::try_from(
                learner
                    .act(&obs, epsilon)?
                    .to_device(Device::Cpu)
                    .to_kind(Kind::Int64),
            )?;
            envs.step(&actions)?;
            replay.push(&VectorStep {
                obs: &obs_rows,
                actions: &actions,
                rewards: envs.rewards(),
                terminated: envs.terminated(),
                truncated: envs.truncated(),
                final_obs: envs.final_obs(),
            })?;
            for e in envs.drain_episodes() {
                my_episodes.push(Episode {
                    ret: e.episode_return,
                    length: e.length as f64,
                    score: e.raw_score,
                });
            }
            global_step += steps_per_vector_step;
        }
        phases.acting += t0.elapsed();

        // ---- learn: the same decision on every rank (global counters only)
        let t1 = Instant::now();
        if global_step >= cfg.learning_starts && replay.sampleable() >= per_rank_batch {
            beta = annealed(
                cfg.priority_beta_start,
                cfg.priority_beta_end,
                global_step as f64 / exp.train.total_steps as f64,
            );
            let mut rng =
                Xoshiro256::new(derived_seed(exp.seed, SEED_REPLAY, rank as u64, iteration));
            let sample = replay.sample(per_rank_batch, beta, &mut rng)?;
            let batch = crate::algo::dqn::TransitionBatch {
                obs: batch_tensor(&sample.obs, per_rank_batch, &obs_shape, device),
                actions: Tensor::from_slice(&sample.actions).to_device(device),
                returns: Tensor::from_slice(&sample.returns).to_device(device),
                discounts: Tensor::from_slice(&sample.discounts).to_device(device),
                next_obs: batch_tensor(&sample.next_obs, per_rank_batch, &obs_shape, device),
                weights: Tensor::from_slice(&sample.weights).to_device(device),
            };
            let stats = learner.update(&batch, &mut ddp)?;
            replay.update_priorities(&sample.slots, &stats.td_errors)?;
            last_stats = Some(stats);
        }
        let sync_in_learn = ddp.take_sync_time();
        phases.learn += t1.elapsed().saturating_sub(sync_in_learn);
        phases.sync += sync_in_learn;
        iteration += 1;

        let last_iteration = iteration >= total_iterations || global_step >= stop_step;
        if !iteration.is_multiple_of(EXCHANGE_EVERY) && !last_iteration {
            continue;
        }

        // ---- exchange: episodes, normalisers, fingerprints and rank 0's decisions
        let t2 = Instant::now();
        sync_normalizers(&mut envs, &mut ddp)?;
        if let Some(every) = exp.sync.check_every
            && (iteration / EXCHANGE_EVERY).is_multiple_of(every)
            && ddp.ranks_should_agree()
        {
            let mut named = learner.named_state();
            if ddp.steps_locally() && !matches!(ddp.policy(), SyncPolicy::Broadcast) {
                named.extend(learner.optimizer().state_tensors());
            }
            ddp.check_fingerprints(&named)?;
        }
        let episodes = metrics::gather_episodes(Some(ddp.group()), &my_episodes)?;
        my_episodes.clear();
        recent.extend(&episodes);
        let nan = last_stats
            .as_ref()
            .is_some_and(|s| !s.loss.is_finite() || !s.grad_norm.is_finite())
            || !params_finite(&params);
        let log_due = match exp.log.interval {
            Interval::Updates(n) => iteration - last_log_iteration >= n.max(1),
            Interval::Seconds(s) => last_log.elapsed() >= Duration::from_secs(s),
        };
        // Lesson 9: rank 0's stop and log decisions, any rank's NaN, in one collective.
        let mut decisions = [
            (rank == 0 && stop_requested()) as u8 as f64,
            (rank == 0 && log_due) as u8 as f64,
            nan as u8 as f64,
        ];
        ddp.all_reduce_sum(&mut decisions)?;
        let stop = decisions[0] > 0.0 || decisions[2] > 0.0;
        let nan = decisions[2] > 0.0;
        let log_now = decisions[1] > 0.0 || last_iteration || stop;
        phases.sync += t2.elapsed();

        // ---- log and checkpoint
        let t3 = Instant::now();
        let (sps_mean, sps_min, sps_max) = if log_now {
            let elapsed = last_log.elapsed().as_secs_f64().max(1e-9);
            let my_sps = ((global_step - interval_start_step) as f64 / world as f64) / elapsed;
            metrics::reduce_per_rank(Some(ddp.group()), my_sps)?
        } else {
            (0.0, 0.0, 0.0)
        };
        if let Some(w) = writer.as_mut() {
            let step = global_step as i64;
            if let Some((mean, min, max)) =
                metrics::summary(&episodes.iter().map(|e| e.ret).collect::<Vec<_>>())
            {
                let lengths: Vec<f64> = episodes.iter().map(|e| e.length).collect();
                let scores: Vec<f64> = episodes.iter().map(|e| e.score).collect();
                w.scalars(
                    step,
                    &[
                        ("episode/return_mean", mean),
                        ("episode/return_min", min),
                        ("episode/return_max", max),
                        (
                            "episode/length_mean",
                            metrics::summary(&lengths).map(|s| s.0).unwrap_or(0.0),
                        ),
                        (
                            "episode/score_mean",
                            metrics::summary(&scores).map(|s| s.0).unwrap_or(0.0),
                        ),
                    ],
                )?;
            }
            if log_now {
                let secs = last_log.elapsed().as_secs_f64().max(1e-9);
                let mut s: Vec<(&str, f64)> = vec![
                    (
                        "perf/steps_per_second",
                        (global_step - interval_start_step) as f64 / secs,
                    ),
                    ("perf/rank_steps_per_second_mean", sps_mean),
                    ("perf/rank_steps_per_second_min", sps_min),
                    ("perf/rank_steps_per_second_max", sps_max),
                    ("time/acting_s", phases.acting.as_secs_f64()),
                    ("time/learn_s", phases.learn.as_secs_f64()),
                    ("time/sync_s", phases.sync.as_secs_f64()),
                    ("time/log_s", phases.log.as_secs_f64()),
                    ("dqn/epsilon", epsilon),
                    ("dqn/gradient_steps", learner.gradient_steps() as f64),
                    ("replay/sampleable", replay.sampleable() as f64),
                ];
                if cfg.prioritized {
                    s.push(("replay/beta", beta));
                }
                if let Some(st) = &last_stats {
                    s.push(("loss/td", st.loss));
                    s.push(("dqn/q_mean", st.q_mean));
                    s.push(("dqn/td_abs_mean", st.td_abs_mean));
                    s.push(("optim/grad_norm", st.grad_norm));
                }
                if let Some(r) = recent.mean_return() {
                    s.push(("episode/recent_return_mean", r));
                }
                w.scalars(step, &s)?;
            }
        }
        console.update(global_step, recent.mean_return(), log_now);
        if log_now {
            last_log = Instant::now();
            last_log_iteration = iteration;
            interval_start_step = global_step;
            phases = Phases::default();
        }
        phases.log += t3.elapsed();

        if nan {
            bail!(
                "training diverged at iteration {iteration}: the TD loss, gradient or a parameter is NaN or infinite"
            );
        }
        let checkpoint_due = match exp.checkpoint.every {
            Some(every) => {
                let every = every.max(1);
                match exp.checkpoint.unit {
                    tandem_config::CheckpointUnit::Updates => {
                        iteration / every > (iteration - EXCHANGE_EVERY.min(iteration)) / every
                    }
                    tandem_config::CheckpointUnit::Steps => {
                        let previous = global_step
                            .saturating_sub(steps_per_iteration * EXCHANGE_EVERY.min(iteration));
                        global_step / every > previous / every
                    }
                }
            }
            None => false,
        };
        if checkpoint_due || last_iteration || stop {
            // Every rank saves its environments mid-episode, so a resumed run continues exactly
            // (and its replay buffer's stacks continue with them).
            checkpoint::save_env_snapshot(&run_dir, iteration, rank, &envs.snapshot()?)?;
            if rank == 0 {
                let mut tensors = learner.named_state();
                tensors.extend(learner.optimizer().state_tensors());
                tensors.push((
                    "learner.optimizer_steps".into(),
                    Tensor::from_slice(&[learner.optimizer().step_count() as i64]),
                ));
                tensors.push((
                    "learner.gradient_steps".into(),
                    Tensor::from_slice(&[learner.gradient_steps() as i64]),
                ));
                tensors.extend(normalizer_tensors(&envs));
                let path = checkpoint::save(
                    &run_dir,
                    &Checkpoint {
                        update: iteration,
                        global_step,
                        episodes: recent.total(),
                        world_size: world as u64,
                        config_hash: hash.clone(),
                        resolved_config: tandem_config::canonical_kdl(&exp),
                        tensors,
                    },
                    exp.checkpoint.keep,
                )?;
                tracing::debug!("checkpoint {}", path.display());
            }
            if cfg.checkpoint_replay {
                replay.set_tag(global_step);
                replay.save(&replay_path(&run_dir, rank))?;
            }
        }
        if stop {
            outcome = Outcome::Interrupted;
            break;
        }
    }
    if let Some(w) = writer.as_mut() {
        w.flush()?;
    }
    console.finish(
        global_step,
        recent.mean_return(),
        recent.total(),
        &run_dir,
        outcome == Outcome::Interrupted,
    );
    if rank == 0 {
        // The on-policy trainer's fields; `update` counts iterations.
        write_summary(
            &run_dir,
            &RunSummary {
                update: iteration,
                global_step,
                recent: &recent,
                loop_steps: global_step - loop_start_step,
                loop_seconds: loop_start.elapsed().as_secs_f64(),
                loop_cpu_seconds: process_cpu_seconds() - loop_start_cpu,
                hash: &hash,
                world,
                interrupted: outcome == Outcome::Interrupted,
                extra: vec![("gradient_steps", learner.gradient_steps().to_string())],
            },
        )?;
    }
    // Nobody leaves while another rank may still be in a collective or need rank 0's store.
    ddp.into_group()
        .shutdown(Duration::from_secs_f64(exp.sync.collective_timeout_s))?;
    Ok(outcome)
}

/// The learner's settings from the config's `algorithm "dqn"` node.
pub fn dqn_config(cfg: &tandem_config::Dqn) -> DqnConfig {
    DqnConfig {
        learning_rate: cfg.lr,
        adam_eps: ADAM_EPS,
        double: cfg.double,
        loss: match cfg.loss {
            tandem_config::Loss::Huber => TdLoss::Huber,
            tandem_config::Loss::Mse => TdLoss::Mse,
        },
        max_grad_norm: cfg.max_grad_norm.unwrap_or(f64::INFINITY),
        target_every: cfg.target_every,
        tau: cfg.tau,
    }
}

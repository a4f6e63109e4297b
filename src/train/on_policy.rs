//! The on-policy training loop (PPO, A2C): collect T steps from this rank's N environments with
//! the current policy, compute advantages, update (gradients averaged over ranks by DDP), then
//! keep the rest of the state equal across ranks (normaliser statistics, control decisions) and
//! let rank 0 log and checkpoint.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use tandem_config::{Algorithm, Experiment, Interval};

use super::checkpoint::{self, Checkpoint};
use super::console::Console;
use super::envs::make_vec_env;
use super::metrics::{self, Episode, RecentEpisodes};
use super::shared::{
    RunSummary, batch_tensor, fill_rows, normalizer_tensors, open_summaries, params_finite,
    process_cpu_seconds, restore_envs, restore_normalizers, sync_normalizers, sync_policy,
    write_summary,
};
use super::{Outcome, RankContext, derived_seed};
use crate::algo::{
    A2c, A2cConfig, A2cStats, Collective, MinibatchSampler, OptimizerSpec, Ppo, PpoConfig,
    PpoStats, RolloutBuffer, StepRecord,
};
use crate::dist::{Ddp, SyncPolicy};
use crate::nn::{
    ActTaken, ActionSpace, ActorCritic, ActorCriticSpec, named_parameters, parameters_in_order,
    trainable_parameters_in_order,
};

/// Seeds for distinct purposes (see [`derived_seed`]).
const SEED_INIT: u64 = 1;
const SEED_SAMPLING: u64 = 2;
const SEED_SHUFFLE: u64 = 3;

enum Learner {
    Ppo(Ppo),
    A2c(A2c),
}

/// The scalars one update produced, by TensorBoard tag.
type Scalars = Vec<(&'static str, f64)>;

impl Learner {
    fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        match self {
            Learner::Ppo(p) => p.optimizer().state_tensors(),
            Learner::A2c(a) => a.optimizer().state_tensors(),
        }
    }

    fn optimizer_steps(&self) -> u64 {
        match self {
            Learner::Ppo(p) => p.optimizer().step_count(),
            Learner::A2c(a) => a.optimizer().step_count(),
        }
    }

    fn set_optimizer_steps(&mut self, steps: u64) {
        match self {
            Learner::Ppo(p) => p.optimizer_mut().set_step_count(steps),
            Learner::A2c(a) => a.optimizer_mut().set_step_count(steps),
        }
    }
}

/// Maps the config's network onto the nn module's spec.
pub fn actor_critic_spec(experiment: &Experiment) -> Result<ActorCriticSpec> {
    ActorCriticSpec::from_experiment(experiment)
}

fn ppo_config(p: &tandem_config::Ppo, rollout: usize, minibatches: usize) -> PpoConfig {
    PpoConfig {
        num_steps: rollout as i64,
        learning_rate: p.lr,
        anneal_lr: p.anneal_lr,
        adam_eps: p.adam_eps,
        gamma: p.gamma,
        gae_lambda: p.gae_lambda,
        update_epochs: p.epochs,
        num_minibatches: minibatches as i64,
        micro_batches: p.micro_batches as i64,
        normalize_advantages: p.normalize_advantages,
        clip_coef: p.clip,
        value_clip_coef: p.value_clip,
        ent_coef: p.entropy_coef,
        vf_coef: p.value_coef,
        max_grad_norm: p.max_grad_norm.unwrap_or(f64::INFINITY),
        target_kl: p.target_kl,
    }
}

fn a2c_config(a: &tandem_config::A2c, rollout: usize) -> A2cConfig {
    A2cConfig {
        num_steps: rollout as i64,
        learning_rate: a.lr,
        anneal_lr: a.anneal_lr,
        gamma: a.gamma,
        gae_lambda: a.gae_lambda.unwrap_or(1.0),
        ent_coef: a.entropy_coef,
        vf_coef: a.value_coef,
        max_grad_norm: a.max_grad_norm.unwrap_or(f64::INFINITY),
        normalize_advantages: a.normalize_advantages,
        optimizer: match a.optimizer {
            tandem_config::Optimizer::Rmsprop => OptimizerSpec::RmsProp {
                alpha: a.rmsprop_alpha,
                eps: a.optimizer_eps,
            },
            tandem_config::Optimizer::Adam => OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: a.optimizer_eps,
            },
        },
    }
}

/// Per-phase wall time of one logging interval.
#[derive(Default)]
struct Phases {
    rollout: Duration,
    /// The part of `rollout` spent in the policy's forward passes (libtorch).
    inference: Duration,
    /// The part of `rollout` spent stepping the environments (games and wrappers).
    env: Duration,
    learn: Duration,
    sync: Duration,
    log: Duration,
}

/// A per-environment row of host values as a tensor on `device` (no copy dispatched on CPU).
fn host_row(values: &[f32], device: Device) -> Tensor {
    let row = Tensor::from_slice(values);
    if device == Device::Cpu {
        row
    } else {
        row.to_device(device)
    }
}

/// Sampled actions as host integers, without dispatching a conversion when they already are
/// int64 on the CPU (this runs every step).
fn host_actions(actions: &Tensor) -> Result<Vec<i64>> {
    Ok(
        if actions.device() == Device::Cpu && actions.kind() == Kind::Int64 {
            Vec::<i64>::try_from(actions)?
        } else {
            Vec::<i64>::try_from(actions.to_device(Device::Cpu).to_kind(Kind::Int64))?
        },
    )
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
    let rank = pg.rank();
    let world = pg.world_size();
    let n_envs = exp.per_rank_envs();
    let rollout = exp.train.rollout;

    let mut envs = make_vec_env(&exp, rank, threads)?;
    let obs_shape: Vec<i64> = envs.obs_shape().iter().map(|&d| d as i64).collect();

    // Ranks initialise differently on purpose; the broadcast below makes rank 0's weights everyone's.
    tch::manual_seed(derived_seed(exp.seed, SEED_INIT, rank as u64, 0) as i64);
    let vs = VarStore::new(device);
    let spec = actor_critic_spec(&exp)?;
    let model = ActorCritic::new(
        &vs.root(),
        &spec,
        &obs_shape,
        ActionSpace::Discrete {
            n: envs.num_actions() as i64,
        },
    )?;
    let shuffle_seed = derived_seed(exp.seed, SEED_SHUFFLE, rank as u64, 0);
    let (mut learner, gae_lambda, gamma) = match &exp.algorithm {
        Algorithm::Ppo(p) => {
            let minibatches = p.minibatches;
            (
                Learner::Ppo(Ppo::new(
                    &vs,
                    ppo_config(p, rollout, minibatches),
                    shuffle_seed,
                )?),
                Some(p.gae_lambda),
                p.gamma,
            )
        }
        Algorithm::A2c(a) => (
            Learner::A2c(A2c::new(&vs, a2c_config(a, rollout))?),
            a.gae_lambda,
            a.gamma,
        ),
        Algorithm::Dqn(_) => unreachable!("dispatched to the off-policy trainer"),
    };
    let params = trainable_parameters_in_order(&vs);
    let mut ddp = Ddp::new(pg, &params, sync_policy(&exp))?;

    // Counters. A global step is one environment step on one rank's environment.
    let steps_per_update = (n_envs * rollout * world) as u64;
    let total_updates = exp.train.total_steps.div_ceil(steps_per_update).max(1);
    let stop_step = exp
        .train
        .max_steps
        .unwrap_or(exp.train.total_steps)
        .min(exp.train.total_steps);
    let mut update: u64 = 0;
    let mut global_step: u64 = 0;
    let mut recent = RecentEpisodes::new(100);

    let mut env_restored = false;
    if resume {
        let path = checkpoint::locate(&run_dir)?;
        let ckpt = checkpoint::load(&path)?;
        // The model and optimizer are the same whatever the world size, so a checkpoint from 2
        // ranks resumes on 1 and vice versa.
        let mut targets = named_parameters(&vs, "model");
        targets.extend(learner.optimizer_state());
        checkpoint::restore_into(&ckpt, &targets)
            .with_context(|| format!("restoring {}", path.display()))?;
        learner.set_optimizer_steps(
            ckpt.tensors
                .iter()
                .find(|(n, _)| n == "learner.optimizer_steps")
                .map(|(_, t)| t.int64_value(&[0]) as u64)
                .unwrap_or(0),
        );
        env_restored = restore_envs(&mut envs, &run_dir, &ckpt, rank, world)?;
        if !env_restored {
            envs = make_vec_env(&exp, rank, threads)?;
            restore_normalizers(&mut envs, &ckpt)?;
        }
        update = ckpt.update;
        global_step = ckpt.global_step;
        tracing::info!(
            "resumed from {} at update {update}, step {global_step} (saved on {} rank(s))",
            path.display(),
            ckpt.world_size
        );
    }

    // Lesson 5 of DESIGN.md: identical start on every rank, also after a resume.
    let mut shared_state: Vec<Tensor> = parameters_in_order(&vs)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    shared_state.extend(learner.optimizer_state().into_iter().map(|(_, t)| t));
    ddp.broadcast_from_rank0(&shared_state)?;
    let _ = ddp.take_sync_time();

    let mut writer = open_summaries(&exp, rank, &run_dir, &hash, global_step)?;

    let mut buffer = RolloutBuffer::new(rollout as i64, n_envs as i64, &obs_shape, device)?;
    // The environments step in `groups` groups in turn (train.env-groups; the resolver checks
    // that they divide the rank's environments).
    let groups = exp.train.env_groups;
    ensure!(
        groups >= 1 && n_envs.is_multiple_of(groups),
        "train.env-groups {groups} must divide this rank's {n_envs} environments"
    );
    let group_size = n_envs / groups;
    let group_rows =
        |rows: &Tensor, g: usize| rows.narrow(0, (g * group_size) as i64, group_size as i64);
    // One long-lived thread steps a group while this one runs the policy for the next (a
    // thread per group step cost about 0.5 ms each on Atari, a fifth of the step itself).
    let env_thread = if groups > 1 {
        tracing::info!(
            "stepping {n_envs} environments in {groups} groups of {group_size}, each group's step \
             overlapping the policy's forward pass for the next (double-buffered sampling)"
        );
        Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "tandem-env-groups".into())
                .build()
                .context("cannot start the environment thread of train.env-groups")?,
        )
    } else {
        None
    };
    if !env_restored {
        envs.reset();
    }
    let mut console = Console::new(rank == 0, stop_step, global_step);
    let mut phases = Phases::default();
    let mut last_log = Instant::now();
    let mut interval_start_step = global_step;
    let mut interval_start = Instant::now();
    let mut outcome = Outcome::Finished;
    let check_every = exp.sync.check_every;
    let (loop_start, loop_start_step) = (Instant::now(), global_step);
    let loop_start_cpu = process_cpu_seconds();

    while update < total_updates && global_step < stop_step {
        // ---- rollout: T steps of N environments with the current policy
        let t0 = Instant::now();
        tch::manual_seed(derived_seed(exp.seed, SEED_SAMPLING, rank as u64, update) as i64);
        buffer.reset();
        let mut my_episodes: Vec<Episode> = Vec::new();
        // Row 0 holds every group's observation; each group's next observations go into the
        // next row as soon as that group has stepped.
        fill_rows(&buffer.next_obs()?, envs.obs())?;
        // The actions of the group that steps next, when they were chosen while the group
        // before it stepped.
        let mut chosen: Option<ActTaken> = None;
        for t in 0..rollout as i64 {
            let obs = buffer.obs_row(t)?;
            let mut taken_by_group: Vec<ActTaken> = Vec::with_capacity(groups);
            for g in 0..groups {
                let taken = match chosen.take() {
                    Some(taken) => taken,
                    None => {
                        let infer = Instant::now();
                        let taken = tch::no_grad(|| model.act(&group_rows(&obs, g)))?;
                        phases.inference += infer.elapsed();
                        taken
                    }
                };
                let actions = host_actions(&taken.actions)?;
                let envs_of_group = g * group_size..(g + 1) * group_size;
                // Double-buffered sampling: while this group steps on a second thread, the
                // policy acts for the group after it (the next step's first group after the
                // last), whose observations are already in the buffer.
                let next = if g + 1 < groups {
                    Some((t, g + 1))
                } else if groups > 1 && t + 1 < rollout as i64 {
                    Some((t + 1, 0))
                } else {
                    None
                };
                let (stepped, stepping_time, next_taken) = match next {
                    None => {
                        let stepping = Instant::now();
                        let stepped = envs.step_group(envs_of_group.clone(), &actions);
                        (stepped, stepping.elapsed(), None)
                    }
                    Some((next_t, next_g)) => {
                        let next_obs = if next_t == t {
                            obs.shallow_clone()
                        } else {
                            buffer.obs_row(next_t)?
                        };
                        let range = envs_of_group.clone();
                        let mut stepped = None;
                        let (infer_time, next_taken) = env_thread
                            .as_ref()
                            .context("a pipelined rollout needs its environment thread")?
                            .in_place_scope(|scope| {
                                let (envs, actions, stepped) = (&mut envs, &actions, &mut stepped);
                                scope.spawn(move |_| {
                                    let stepping = Instant::now();
                                    *stepped =
                                        Some((envs.step_group(range, actions), stepping.elapsed()));
                                });
                                let infer = Instant::now();
                                let next_taken =
                                    tch::no_grad(|| model.act(&group_rows(&next_obs, next_g)));
                                (infer.elapsed(), next_taken)
                            });
                        phases.inference += infer_time;
                        let (stepped, stepping_time) =
                            stepped.context("the environment thread did not step its group")?;
                        (stepped, stepping_time, Some(next_taken?))
                    }
                };
                stepped?;
                phases.env += stepping_time;
                chosen = next_taken;
                // This group's next observations: the next row, or (after the last step) they
                // stay in the environments for the bootstrap value below.
                if t + 1 < rollout as i64 {
                    let floats = envs.obs_len();
                    fill_rows(
                        &group_rows(&buffer.obs_row(t + 1)?, g),
                        &envs.obs()[envs_of_group.start * floats..envs_of_group.end * floats],
                    )?;
                }
                taken_by_group.push(taken);
            }
            let taken = if groups == 1 {
                taken_by_group.swap_remove(0)
            } else {
                let cat = |part: fn(&ActTaken) -> &Tensor| {
                    Tensor::cat(&taken_by_group.iter().map(part).collect::<Vec<_>>(), 0)
                };
                ActTaken {
                    actions: cat(|a| &a.actions),
                    log_probs: cat(|a| &a.log_probs),
                    values: cat(|a| &a.values),
                }
            };
            let flags = |bits: &[bool]| bits.iter().map(|&b| b as u8 as f32).collect::<Vec<_>>();
            let rewards = host_row(envs.rewards(), device);
            let terminated = host_row(&flags(envs.terminated()), device);
            let truncated_flags: Vec<bool> = envs.truncated().to_vec();
            let truncated = host_row(&flags(&truncated_flags), device);
            // A time-limit cut bootstraps from V(final observation); the env has already reset.
            let truncation_values = if truncated_flags
                .iter()
                .zip(envs.terminated())
                .any(|(&tr, &te)| tr && !te)
            {
                let finals = batch_tensor(envs.final_obs(), n_envs, &obs_shape, device);
                let infer = Instant::now();
                let values = tch::no_grad(|| model.value(&finals))?;
                phases.inference += infer.elapsed();
                Some(values)
            } else {
                None
            };
            buffer.push(&StepRecord {
                obs: &obs,
                actions: &taken.actions,
                log_probs: &taken.log_probs,
                values: &taken.values,
                rewards: &rewards,
                terminated: &terminated,
                truncated: &truncated,
                truncation_values: truncation_values.as_ref(),
            })?;
            for e in envs.drain_episodes() {
                my_episodes.push(Episode {
                    ret: e.episode_return,
                    length: e.length as f64,
                    score: e.raw_score,
                });
            }
        }
        let last_obs = batch_tensor(envs.obs(), n_envs, &obs_shape, device);
        let infer = Instant::now();
        let last_values = tch::no_grad(|| model.value(&last_obs))?;
        phases.inference += infer.elapsed();
        phases.rollout += t0.elapsed();

        // ---- learn (gradients are averaged across ranks inside, by DDP)
        let t1 = Instant::now();
        let progress = update as f64 / total_updates as f64;
        let scalars: Scalars = match &mut learner {
            Learner::Ppo(ppo) => {
                // Minibatch order is derived from (seed, rank, update), not carried state, so a
                // resumed run shuffles exactly as the uninterrupted one.
                ppo.set_sampler(MinibatchSampler::new(derived_seed(
                    exp.seed,
                    SEED_SHUFFLE,
                    rank as u64,
                    update,
                )));
                let batch = buffer.gae_batch(&last_values, gamma, gae_lambda.unwrap_or(1.0))?;
                ppo_scalars(&ppo.update(&model, &batch, progress, &mut ddp)?)
            }
            Learner::A2c(a2c) => {
                let batch = match gae_lambda {
                    Some(l) => buffer.gae_batch(&last_values, gamma, l)?,
                    None => buffer.n_step_batch(&last_values, gamma)?,
                };
                a2c_scalars(&a2c.update(&model, &batch, progress, &mut ddp)?)
            }
        };
        let sync_in_learn = ddp.take_sync_time();
        phases.learn += t1.elapsed().saturating_sub(sync_in_learn);
        phases.sync += sync_in_learn;

        // ---- keep the rest equal across ranks
        let t2 = Instant::now();
        sync_normalizers(&mut envs, &mut ddp)?;
        update += 1;
        global_step += steps_per_update;
        if let Some(every) = check_every
            && update.is_multiple_of(every)
            && ddp.ranks_should_agree()
        {
            ddp.check_fingerprints(&agreed_state(&vs, &learner, ddp.policy()))?;
        }
        let episodes = metrics::gather_episodes(Some(ddp.group()), &my_episodes)?;
        recent.extend(&episodes);
        // Explained variance is legitimately NaN when returns are constant; everything else is not.
        let nan = scalars
            .iter()
            .any(|(k, v)| !v.is_finite() && !k.ends_with("explained_variance"))
            || !params_finite(&params);
        // Lesson 9: decisions that change how many collectives run are rank 0's, broadcast.
        let stop = ddp.decide(stop_requested() || nan)?;
        phases.sync += t2.elapsed();

        // ---- log and checkpoint (rank 0 writes)
        let t3 = Instant::now();
        let log_now = match exp.log.interval {
            Interval::Updates(n) => update.is_multiple_of(n.max(1)),
            // Clocks differ between ranks, and logging runs a collective: rank 0's clock decides.
            Interval::Seconds(s) => ddp.decide(last_log.elapsed() >= Duration::from_secs(s))?,
        } || update == total_updates
            || global_step >= stop_step
            || stop;
        let (sps_mean, sps_min, sps_max) = if log_now {
            let elapsed = interval_start.elapsed().as_secs_f64().max(1e-9);
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
                w.scalars(
                    step,
                    &[
                        ("episode/return_mean", mean),
                        ("episode/return_min", min),
                        ("episode/return_max", max),
                    ],
                )?;
                let lengths: Vec<f64> = episodes.iter().map(|e| e.length).collect();
                let scores: Vec<f64> = episodes.iter().map(|e| e.score).collect();
                w.scalars(
                    step,
                    &[
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
                let mut s: Vec<(&str, f64)> = scalars.iter().map(|(k, v)| (*k, *v)).collect();
                let secs = interval_start.elapsed().as_secs_f64().max(1e-9);
                s.push((
                    "perf/steps_per_second",
                    (global_step - interval_start_step) as f64 / secs,
                ));
                s.push(("perf/rank_steps_per_second_mean", sps_mean));
                s.push(("perf/rank_steps_per_second_min", sps_min));
                s.push(("perf/rank_steps_per_second_max", sps_max));
                s.push(("time/rollout_s", phases.rollout.as_secs_f64()));
                s.push(("time/inference_s", phases.inference.as_secs_f64()));
                s.push(("time/env_s", phases.env.as_secs_f64()));
                s.push(("time/learn_s", phases.learn.as_secs_f64()));
                s.push(("time/sync_s", phases.sync.as_secs_f64()));
                s.push(("time/log_s", phases.log.as_secs_f64()));
                if let Some(r) = recent.mean_return() {
                    s.push(("episode/recent_return_mean", r));
                }
                w.scalars(global_step as i64, &s)?;
                if let Some(every) = exp.log.histogram_every
                    && update.is_multiple_of(every.max(1))
                {
                    for (name, t) in parameters_in_order(&vs) {
                        let values =
                            Vec::<f32>::try_from(t.detach().to_device(Device::Cpu).flatten(0, -1))?;
                        w.histogram(&format!("params/{name}"), global_step as i64, &values)?;
                    }
                }
            }
        }
        console.update(global_step, recent.mean_return(), log_now);
        if log_now {
            if rank == 0 && crate::logging::console_kind() != crate::logging::ConsoleKind::Plain {
                tracing::debug!("update {update}: {:?}", scalars);
            }
            last_log = Instant::now();
            interval_start = Instant::now();
            interval_start_step = global_step;
            phases = Phases::default();
        }
        phases.log += t3.elapsed();

        if nan && stop {
            bail!("training diverged at update {update}: a loss or parameter is NaN or infinite");
        }
        let checkpoint_due = match exp.checkpoint.every {
            Some(every) => match exp.checkpoint.unit {
                tandem_config::CheckpointUnit::Updates => update.is_multiple_of(every.max(1)),
                tandem_config::CheckpointUnit::Steps => {
                    (global_step / every.max(1)) > ((global_step - steps_per_update) / every.max(1))
                }
            },
            None => false,
        };
        let last = stop || update >= total_updates || global_step >= stop_step;
        if checkpoint_due || last {
            // Every rank saves its environments mid-episode, so a resumed run continues exactly.
            checkpoint::save_env_snapshot(&run_dir, update, rank, &envs.snapshot()?)?;
        }
        if rank == 0 && (checkpoint_due || last) {
            let mut tensors: Vec<(String, Tensor)> = named_parameters(&vs, "model");
            tensors.extend(learner.optimizer_state());
            tensors.push((
                "learner.optimizer_steps".into(),
                Tensor::from_slice(&[learner.optimizer_steps() as i64]),
            ));
            tensors.extend(normalizer_tensors(&envs));
            let path = checkpoint::save(
                &run_dir,
                &Checkpoint {
                    update,
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
        if stop {
            outcome = Outcome::Interrupted;
            break;
        }
    }
    if let Some(w) = writer.as_mut() {
        w.flush()?;
    }
    // The run ends with proof that every rank holds the same model (lesson 5 of DESIGN.md).
    if world > 1 && ddp.ranks_should_agree() {
        let state = agreed_state(&vs, &learner, ddp.policy());
        ddp.check_fingerprints(&state)?;
        tracing::info!(
            "all {world} ranks hold bitwise identical copies of {} tensors",
            state.len()
        );
    }
    console.finish(
        global_step,
        recent.mean_return(),
        recent.total(),
        &run_dir,
        outcome == Outcome::Interrupted,
    );
    if rank == 0 {
        write_summary(
            &run_dir,
            &RunSummary {
                update,
                global_step,
                recent: &recent,
                loop_steps: global_step - loop_start_step,
                loop_seconds: loop_start.elapsed().as_secs_f64(),
                loop_cpu_seconds: process_cpu_seconds() - loop_start_cpu,
                hash: &hash,
                world,
                interrupted: outcome == Outcome::Interrupted,
                extra: Vec::new(),
            },
        )?;
    }
    // Nobody leaves while another rank may still be in a collective or need rank 0's store.
    ddp.into_group()
        .shutdown(Duration::from_secs_f64(exp.sync.collective_timeout_s))?;
    Ok(outcome)
}

/// What ranks must hold identically under `policy`: the model, and the optimizer state unless
/// only rank 0 steps.
fn agreed_state(vs: &VarStore, learner: &Learner, policy: &SyncPolicy) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = named_parameters(vs, "model");
    if !matches!(policy, SyncPolicy::Broadcast) {
        named.extend(learner.optimizer_state());
    }
    named
}

fn ppo_scalars(s: &PpoStats) -> Scalars {
    vec![
        ("loss/policy", s.policy_loss),
        ("loss/value", s.value_loss),
        ("loss/entropy", s.entropy),
        ("ppo/approx_kl", s.approx_kl),
        ("ppo/clip_fraction", s.clip_fraction),
        ("ppo/explained_variance", s.explained_variance),
        ("ppo/epochs", s.epochs_run as f64),
        ("optim/grad_norm", s.grad_norm),
        ("optim/learning_rate", s.learning_rate),
    ]
}

fn a2c_scalars(s: &A2cStats) -> Scalars {
    vec![
        ("loss/policy", s.policy_loss),
        ("loss/value", s.value_loss),
        ("loss/entropy", s.entropy),
        ("a2c/explained_variance", s.explained_variance),
        ("optim/grad_norm", s.grad_norm),
        ("optim/learning_rate", s.learning_rate),
    ]
}

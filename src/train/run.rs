//! The run skeleton, the one training loop every learner runs in: set-up, resume, the start-up
//! broadcast, then rounds of (learner round -> exchange -> log -> checkpoint) until the one stop
//! decision, then teardown. Rank 0 writes summaries and checkpoints; every rank writes its own
//! environment snapshot (and the learner's per-rank files) beside them.
//!
//! Decisions that change how many collectives run are taken together after every round, in one
//! collective: any rank's stop request (Ctrl-C, a scheduler's SIGTERM/SIGUSR1), rank 0's log
//! clock, and any rank's NaN. Everything else is a pure function of counters every rank shares
//! (checkpoint and histogram intervals, fingerprints).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tch::{Device, Tensor};

use tandem_config::{EveryUnit, Experiment, IntervalUnit, Objective};
use tandem_env::VecEnv;

use super::checkpoint::{self, Checkpoint};
use super::console::Console;
use super::envs::{
    make_vec_env, normalizer_tensors, restore_envs, restore_normalizers, set_normalizers,
    sync_normalizers,
};
use super::eval::{Evaluated, Evaluation, Recording};
use super::metrics::{self, Episode, RecentEpisodes};
use super::population::{Member, Population, PopulationEnd};
use super::report::{RunSummary, Summaries, process_cpu_seconds, write_summary};
use super::{Outcome, RankContext, Stop};
use crate::algo::Collective;
use crate::algo::league::Taken;
use crate::algo::learner::{Counters, Limits, Phases, Resumed, Round};
use crate::algo::policies::Policies;
use crate::dist::{Ddp, SyncPolicy};
use crate::seeds::{Purpose, derived_seed};

/// Runs one rank's training from its resolved config to the end (or to a stop request): the
/// run it describes, or, in a population, the run of this rank's member.
pub fn run(ctx: RankContext) -> Result<Outcome> {
    let (ctx, population) = match ctx.experiment.population.members {
        Some(_) => member_context(ctx)?,
        None => (ctx, None),
    };
    let mut run = Run::start(ctx, population)?;
    let outcome = run.train()?;
    run.finish(outcome)
}

/// A population rank's context as its member's run: the member's experiment, its ranks'
/// group (formed here, over the job's store) and its directory; the job's group goes to the
/// population's side of the run.
fn member_context(ctx: RankContext) -> Result<(RankContext, Option<Population>)> {
    let (rank, ranks) = (ctx.pg.rank(), ctx.experiment.world_size());
    let member = Member::of_rank(&ctx.experiment, rank, &ctx.run_dir, ctx.resume)?;
    let timeout = Duration::from_secs_f64(ctx.experiment.sync.rendezvous_timeout);
    let first = member.index * ranks;
    let group = ctx
        .pg
        .subgroup(
            &format!("member-{}", member.index),
            first..first + ranks,
            timeout,
        )
        .with_context(|| format!("forming member {}'s group", member.index))?;
    std::fs::create_dir_all(&member.run_dir)
        .with_context(|| format!("creating {}", member.run_dir.display()))?;
    if rank == first && !ctx.resume {
        // The member's run as it starts, as a run's directory holds it (its checkpoints hold the
        // config it trains with after a copy, as a resumed run's rewrite it): trained alone, it
        // is this member's run wherever no member copies another (`exploit 0`); `tandem plot`
        // and `sweep` read it as a run's.
        let text = tandem_config::canonical_kdl(&member.experiment);
        let hash = tandem_config::config_hash(&member.experiment);
        super::report::write_resolved(&member.run_dir, &text, &hash)?;
    }
    let population = Population::new(ctx.pg, ctx.experiment, &member, &ctx.run_dir);
    if !ctx.resume {
        population.record_start()?;
    }
    tracing::info!(
        "member {} of the population, on ranks {first}..{} ({})",
        member.index,
        first + ranks,
        member.run_dir.display()
    );
    let ctx = RankContext {
        hash: tandem_config::config_hash(&member.experiment),
        experiment: member.experiment,
        pg: group,
        run_dir: member.run_dir,
        ..ctx
    };
    Ok((ctx, Some(population)))
}

/// The decisions of one exchange, the same on every rank.
struct Decisions {
    /// Preemption wins over Ctrl-C when both were asked for: it says the job runs again.
    stop: Option<Stop>,
    log: bool,
    diverged: bool,
}

struct Run {
    exp: Experiment,
    hash: String,
    rank: usize,
    world: usize,
    run_dir: PathBuf,
    stop_requested: Box<dyn Fn() -> Option<Stop> + Send>,
    /// How many times this run was resumed, this attempt included.
    restarts: u64,
    envs: VecEnv,
    /// The learners of the run, by the policy each trains (one today).
    policies: Policies,
    ddp: Ddp,
    trainable: Vec<Tensor>,
    counters: Counters,
    limits: Limits,
    recent: RecentEpisodes,
    summaries: Summaries,
    /// Evaluation during training, when the experiment asks for it, and what it found.
    eval: Option<Evaluation>,
    evaluated: Option<EvalRecord>,
    console: Console,
    interval: LogInterval,
    loop_start: (Instant, u64, f64),
    /// In a population: the job's group and population-based training between the members.
    population: Option<Population>,
}

/// What the current logging interval has seen.
struct LogInterval {
    started: Instant,
    start_step: u64,
    phases: Phases,
}

impl LogInterval {
    fn new(step: u64) -> LogInterval {
        LogInterval {
            started: Instant::now(),
            start_step: step,
            phases: Phases::default(),
        }
    }
}

impl Run {
    /// Environments, learner and DDP; the checkpoint when resuming; rank 0's state broadcast;
    /// then the summaries, console and clocks of the loop, from the step it starts at.
    fn start(ctx: RankContext, population: Option<Population>) -> Result<Run> {
        let RankContext {
            experiment: exp,
            hash,
            device,
            pg,
            run_dir,
            resume,
            threads,
            console,
            stop_requested,
        } = ctx;
        let (rank, world) = (pg.rank(), pg.world_size());
        let mut envs = make_vec_env(&exp, rank, threads)?;
        // Ranks initialise differently on purpose; the broadcast below makes rank 0's weights
        // everyone's.
        tch::manual_seed(derived_seed(exp.seed, Purpose::Init, rank as u64, 0) as i64);
        let mut policies = Policies::build(&exp, &envs, rank, world, device)?;
        let trainable = policies.trainable_parameters();
        let policy = exp.sync.policy;
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "gradient sync {policy:?}; ranks compare fingerprints {}",
            match exp.sync.check_every {
                Some(every) => format!("every {every} round(s) and at the end"),
                None => "at the end".into(),
            }
        );
        let parts = policies.parameter_parts();
        let parts: Vec<&[Tensor]> = parts.iter().map(Vec::as_slice).collect();
        let mut ddp = Ddp::with_parts(pg, &parts, policy)?;
        let limits = Limits {
            total_updates: exp
                .train
                .total_steps
                .div_ceil(policies.steps_per_update())
                .max(1),
            stop_step: exp.step_limit(),
            total_steps: exp.train.total_steps,
        };
        let place = Place {
            exp: &exp,
            run_dir: &run_dir,
            rank,
            world,
            threads,
        };
        let resumed = if resume {
            Some(place.resume(&mut envs, &mut policies, &mut ddp)?)
        } else {
            None
        };
        broadcast_rank0_state(&mut ddp, &policies)?;
        let mut recent = RecentEpisodes::new(metrics::FINAL_SCORE_EPISODES);
        let (counters, restarts) = match &resumed {
            Some(r) => {
                recent.restore(r.episodes, &r.recent);
                if rank == 0 {
                    record_resumed_config(&run_dir, &exp, &hash, r)?;
                }
                (r.counters, r.restarts)
            }
            None => (Counters::default(), 0),
        };
        let step = counters.global_step;
        let mut population = population;
        if let (Some(p), true) = (&mut population, resumed.is_some()) {
            p.resumed_at(step)?;
        }
        let mut summaries =
            Summaries::open(&exp, rank, &run_dir, &hash, (step, resumed.is_some()))?;
        summaries.scalars(step, &[("run/restarts", restarts as f64)])?;
        if !resumed.as_ref().is_some_and(|r| r.envs_restored) {
            envs.reset();
        }
        let eval = Evaluation::new(&exp, rank, world)?;
        // One console for the job: a population's first member's.
        let console_rank = population.as_ref().map_or(rank, Population::job_rank);
        if let Some(p) = &population {
            let scalars = p.scalars(&p.values);
            summaries.scalars(step, &tagged(&scalars))?;
        }
        Ok(Run {
            population,
            // The steps the run really takes (whole updates): the count ends at its total.
            console: Console::new(
                console_rank == 0,
                console,
                tandem_config::steps_run(&exp).1,
                step,
            ),
            interval: LogInterval::new(step),
            loop_start: (Instant::now(), step, process_cpu_seconds()),
            exp,
            hash,
            rank,
            world,
            run_dir,
            stop_requested,
            restarts,
            envs,
            policies,
            ddp,
            trainable,
            counters,
            limits,
            recent,
            summaries,
            eval,
            evaluated: resumed
                .as_ref()
                .and_then(|r| r.eval_best)
                .map(|best| EvalRecord { latest: None, best }),
        })
    }

    /// Rounds until the limits or a stop.
    fn train(&mut self) -> Result<Outcome> {
        // A league starts from the parameters every rank now holds (broadcast, or restored with
        // the league).
        if self.policies.league().is_some_and(|l| l.is_empty()) {
            self.add_to_league()?;
        }
        while !self.limits.reached(self.counters) {
            let before = self.counters;
            self.policies.round(
                &mut self.envs,
                Round {
                    counters: &mut self.counters,
                    limits: self.limits,
                    collective: &mut self.ddp,
                    phases: &mut self.interval.phases,
                },
            )?;
            let exchanging = Instant::now();
            let (episodes, decisions) = self.exchange(before)?;
            self.interval.phases.add("sync", exchanging.elapsed());

            let logging = Instant::now();
            self.log(before, &episodes, &decisions)?;
            self.interval.phases.add("log", logging.elapsed());
            if decisions.diverged {
                bail!(
                    "training diverged at update {}: a loss, gradient or parameter is NaN or infinite",
                    self.counters.update
                );
            }
            if self.eval_due(before) {
                self.evaluate()?;
            }
            let league_due = (self.policies.league())
                .is_some_and(|l| l.due(before.global_step, self.counters.global_step));
            if league_due {
                self.add_to_league()?;
            }
            let exploit_due = (self.population.as_ref())
                .is_some_and(|p| p.due(before.global_step, self.counters.global_step));
            if exploit_due && decisions.stop.is_none() && !self.limits.reached(self.counters) {
                self.exploit()?;
            }
            let last = decisions.stop.is_some() || self.limits.reached(self.counters);
            if last || self.checkpoint_due(before) {
                self.checkpoint()?;
            }
            match decisions.stop {
                Some(Stop::Interrupt) => return Ok(Outcome::Interrupted),
                Some(Stop::Preempt) => return Ok(Outcome::Preempted),
                None => {}
            }
        }
        Ok(Outcome::Finished)
    }

    /// After a round: normalisers merged, fingerprints checked when due, episodes gathered from
    /// every rank, and the round's decisions taken together.
    fn exchange(&mut self, before: Counters) -> Result<(Vec<Episode>, Decisions)> {
        sync_normalizers(&mut self.envs, &mut self.ddp)?;
        let rounds = self.counters.update / self.policies.updates_per_round();
        if let Some(every) = self.exp.sync.check_every
            && rounds.is_multiple_of(every)
            && self.ddp.ranks_should_agree()
        {
            let state = self.agreed_state();
            self.ddp.check_fingerprints(&state)?;
            tracing::info!(
                target: crate::logging::LOG_ONLY,
                "ranks agree on {} tensors at update {}",
                state.len(),
                self.counters.update
            );
        }
        let policies = &self.policies;
        let played = |e: &tandem_env::EpisodeStats| Episode::of(e, policies.of_row(e.env_index));
        let drained = self.envs.drain_episodes();
        // A league's snapshots' episodes are not the run's: its score is the learner's.
        let scored = drained.iter().filter(|e| policies.scores_row(e.env_index));
        let mine: Vec<Episode> = scored.map(played).collect();
        let keys = self.exp.env.info_keys().len();
        let episodes = metrics::gather_episodes(Some(self.ddp.group()), &mine, keys)?;
        self.recent.extend(&episodes);
        let decisions = self.decide(before)?;
        Ok((episodes, decisions))
    }

    /// Any rank's stop request, rank 0's log clock, any rank's divergence, in one collective.
    /// Under an external launcher every rank gets the scheduler's signal itself, at slightly
    /// different moments; counting any rank's makes all stop after the same update.
    fn decide(&mut self, before: Counters) -> Result<Decisions> {
        let diverged = self.policies.diverged() || !all_finite(&self.trainable);
        let every = self.exp.log.interval;
        let log_due = match self.exp.log.interval_unit {
            IntervalUnit::Updates => crossed(before.update, self.counters.update, every),
            // Clocks differ between ranks: rank 0's decides.
            IntervalUnit::Seconds => self.interval.started.elapsed() >= Duration::from_secs(every),
        };
        let rank0 = self.rank == 0;
        let asked = (self.stop_requested)();
        let mut votes = [
            (asked == Some(Stop::Interrupt)) as u8 as f64,
            (asked == Some(Stop::Preempt)) as u8 as f64,
            (rank0 && log_due) as u8 as f64,
            diverged as u8 as f64,
        ];
        let population_stop = match &mut self.population {
            // Every member stops after the same update, or the others would wait at the next
            // exploit for it: stop requests are summed over the whole job, one round late (the
            // sum of this round's runs while the next round does), so that no member waits for
            // the others at every round; the log clock and divergence are the member's own.
            Some(population) => Some(population.stop_votes_of_last_round([votes[0], votes[1]])?),
            None => None,
        };
        self.ddp.all_reduce_sum(&mut votes)?;
        if let Some([interrupt, preempt]) = population_stop {
            (votes[0], votes[1]) = (interrupt, preempt);
        }
        let diverged = votes[3] > 0.0;
        let stop = if votes[1] > 0.0 {
            Some(Stop::Preempt)
        } else if votes[0] > 0.0 || diverged {
            Some(Stop::Interrupt)
        } else {
            None
        };
        Ok(Decisions {
            stop,
            log: votes[2] > 0.0 || stop.is_some() || self.limits.reached(self.counters),
            diverged,
        })
    }

    /// Episode scalars whenever episodes ended; the rest when the decisions say so.
    fn log(&mut self, before: Counters, episodes: &[Episode], decisions: &Decisions) -> Result<()> {
        let step = self.counters.global_step;
        let secs = self.interval.started.elapsed().as_secs_f64().max(1e-9);
        let per_rank_rate = if decisions.log {
            let mine = (step - self.interval.start_step) as f64 / self.world as f64 / secs;
            Some(metrics::reduce_per_rank(Some(self.ddp.group()), mine)?)
        } else {
            None
        };
        write_episode_scalars(
            &mut self.summaries,
            step,
            episodes,
            self.exp.env.info_keys(),
        )?;
        self.write_policy_scores(step, episodes)?;
        if let Some(rates) = per_rank_rate {
            self.write_interval_scalars(before, secs, rates)?;
        }
        self.console.update(step, &self.recent, decisions.log);
        if decisions.log {
            if self.rank == 0 && self.console.kind() != tandem_config::Console::Plain {
                tracing::debug!(
                    "update {}: {:?}",
                    self.counters.update,
                    self.policies.scalars()
                );
            }
            self.interval = LogInterval::new(step);
        }
        Ok(())
    }

    /// Rank 0's scalars of a logging interval: the learner's, throughput, phase times, the
    /// recent return; parameter histograms when due.
    fn write_interval_scalars(
        &mut self,
        before: Counters,
        secs: f64,
        rates: (f64, f64, f64),
    ) -> Result<()> {
        if !self.summaries.written_here() {
            return Ok(());
        }
        let step = self.counters.global_step;
        let learned = self.policies.scalars();
        let mut s: Vec<(&str, f64)> = learned.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        s.push((
            "perf/steps_per_second",
            (step - self.interval.start_step) as f64 / secs,
        ));
        s.push(("perf/rank_steps_per_second_mean", rates.0));
        s.push(("perf/rank_steps_per_second_min", rates.1));
        s.push(("perf/rank_steps_per_second_max", rates.2));
        let phases: Vec<(String, f64)> = self
            .interval
            .phases
            .iter()
            .map(|(phase, time)| (format!("time/{phase}_s"), time.as_secs_f64()))
            .collect();
        if let Some(score) = metrics::final_score(&self.recent) {
            s.push(("episode/recent_score_mean", score));
        }
        if let Some(r) = self.recent.mean_return() {
            s.push(("train/recent_return_mean", r));
        }
        let info = info_scalars(
            "episode/recent_info",
            self.exp.env.info_keys(),
            self.recent.mean_info(),
        );
        let mut all = s;
        all.extend(phases.iter().map(|(k, v)| (k.as_str(), *v)));
        all.extend(info.iter().map(|(k, v)| (k.as_str(), *v)));
        self.summaries.scalars(step, &all)?;
        if let Some(every) = self.exp.log.histogram_every
            && crossed(before.update, self.counters.update, every)
            && let Some(w) = self.summaries.events()
        {
            for (name, t) in self.policies.networks() {
                if let Some(param) = name.strip_prefix("model.") {
                    let values =
                        Vec::<f32>::try_from(t.detach().to_device(Device::Cpu).flatten(0, -1))?;
                    w.histogram(&format!("params/{param}"), step as i64, &values)?;
                }
            }
        }
        Ok(())
    }

    fn checkpoint_due(&self, before: Counters) -> bool {
        self.due(before, self.exp.checkpoint.every, self.exp.checkpoint.unit)
    }

    fn eval_due(&self, before: Counters) -> bool {
        self.eval.is_some() && self.due(before, self.exp.eval.every, self.exp.eval.unit)
    }

    /// Whether the round since `before` crossed a multiple of `every` `unit`s.
    fn due(&self, before: Counters, every: Option<u64>, unit: EveryUnit) -> bool {
        let Some(every) = every else {
            return false;
        };
        match unit {
            EveryUnit::Updates => crossed(before.update, self.counters.update, every),
            EveryUnit::Steps => crossed(before.global_step, self.counters.global_step, every),
        }
    }

    /// Every rank evaluates the learner's current networks; rank 0 reports the scores, and
    /// every rank keeps the best mean (all see the same episodes).
    fn evaluate(&mut self) -> Result<()> {
        let Some(eval) = self.eval.as_mut() else {
            return Ok(());
        };
        let started = Instant::now();
        let networks = self.policies.networks();
        let Counters {
            update,
            global_step: step,
        } = self.counters;
        tracing::info!(target: crate::logging::LOG_ONLY, "evaluating at step {step}");
        let acting = eval.acting();
        let (result, recording) =
            eval.run(&networks, &self.envs, update, Some(self.ddp.group()))?;
        self.interval.phases.add("eval", started.elapsed());
        if let Some(recording) = recording {
            self.keep_video(step, recording)?;
        }
        let (mean, std, min, max) = result.score;
        self.summaries.scalars(
            step,
            &[
                ("eval/score_mean", mean),
                ("eval/score_std", std),
                ("eval/score_min", min),
                ("eval/score_max", max),
                ("eval/length_mean", result.length_mean),
                ("eval/episodes", result.episodes.len() as f64),
            ],
        )?;
        self.write_policy_eval_scores(step, &result.episodes)?;
        let improved = self.evaluated.as_ref().is_none_or(|r| mean > r.best.0);
        let best = match &self.evaluated {
            Some(r) if !improved => r.best,
            _ => (mean, step),
        };
        let episodes = result.episodes.len();
        self.evaluated = Some(EvalRecord {
            latest: Some((result, step)),
            best,
        });
        if self.rank == 0 && improved {
            let path = checkpoint::save_best(&self.run_dir, &self.checkpoint_state())?;
            tracing::debug!("best checkpoint {}", path.display());
        }
        // Every rank's log: all gathered the same episodes.
        tracing::info!(
            "eval at step {step}: score {mean:.2} ± {std:.2} over {episodes} episodes, {acting} (best {:.2} at step {})",
            best.0,
            best.1
        );
        Ok(())
    }

    /// Rank 0's recording of an evaluation episode, as `videos/eval-<step>.gif` and the
    /// TensorBoard image `eval/video`.
    fn keep_video(&mut self, step: u64, recording: Recording) -> Result<()> {
        let Recording {
            width,
            height,
            frames,
        } = recording;
        if frames.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let (w, h) = (u16::try_from(width)?, u16::try_from(height)?);
        let gif = tandem_summary::encode_gif(w, h, &frames, tandem_summary::FRAME_CENTIS)
            .context("cannot encode the evaluation video")?;
        let dir = self.run_dir.join("videos");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("eval-{step:09}.gif"));
        crate::atomic::write_atomic(&path, &gif)?;
        let bytes = gif.len();
        if let Some(w) = self.summaries.events() {
            w.animation("eval/video", step as i64, height as u32, width as u32, gif)?;
        }
        self.interval.phases.add("video", started.elapsed());
        tracing::info!(
            target: crate::logging::LOG_ONLY,
            "recorded {} ({} frames of {width}x{height}, {bytes} bytes, encoded in {:.2} s)",
            path.display(),
            frames.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Every rank saves its environments mid-episode (so a resumed run continues exactly) and
    /// its learner's per-rank files; rank 0 saves the checkpoint.
    fn checkpoint(&mut self) -> Result<()> {
        let Counters {
            update,
            global_step,
        } = self.counters;
        if self.envs.can_snapshot() {
            checkpoint::save_env_snapshot(
                &self.run_dir,
                update,
                self.rank,
                &self.envs.snapshot()?,
            )?;
        }
        if self.rank == 0 {
            let state = self.checkpoint_state();
            let saved = checkpoint::save(&self.run_dir, &state, self.exp.checkpoint.keep);
            let path = saved.inspect_err(|_| {
                // The checkpoint and this rank's snapshot are one: the snapshot goes with a
                // checkpoint that could not be written (a full disk). Other ranks' snapshots of
                // this update are removed when the run is resumed.
                let _ = std::fs::remove_file(checkpoint::env_snapshot_path(
                    &self.run_dir,
                    update,
                    self.rank,
                ));
            })?;
            tracing::debug!("checkpoint {}", path.display());
        }
        self.policies
            .save_rank_files(&checkpoint::checkpoint_dir(&self.run_dir), global_step)
    }

    /// What rank 0's checkpoint holds now: the learner's state and counters, the normalisers,
    /// the best evaluation so far, the run's counters and config.
    fn checkpoint_state(&self) -> Checkpoint {
        let mut tensors = self.policies.state();
        tensors.extend(self.policies.league_state());
        for (name, value) in self.policies.counters() {
            tensors.push((
                format!("learner.{name}"),
                Tensor::from_slice(&[value as i64]),
            ));
        }
        tensors.extend(normalizer_tensors(&self.envs));
        if let Some(r) = &self.evaluated {
            let best = [r.best.0, r.best.1 as f64];
            tensors.push((checkpoint::EVAL_BEST.into(), Tensor::from_slice(&best)));
        }
        Checkpoint {
            update: self.counters.update,
            global_step: self.counters.global_step,
            episodes: self.recent.total(),
            recent: self.recent.window(),
            restarts: self.restarts,
            world_size: self.world as u64,
            config_hash: self.hash.clone(),
            resolved_config: tandem_config::canonical_kdl(&self.exp),
            tensors,
        }
    }

    /// With several policies, each one's mean score over its episodes that ended at `step`
    /// (`policy/<name>/episode/score_mean`) and over its episodes of the run's recent window
    /// (`policy/<name>/episode/recent_score_mean`).
    fn write_policy_scores(&mut self, step: u64, episodes: &[Episode]) -> Result<()> {
        let names = self.policies.names();
        if names.len() < 2 {
            return Ok(());
        }
        let mut scalars = metrics::policy_score_means(&names, episodes, "episode/score_mean");
        for (i, name) in names.iter().enumerate() {
            if let Some(recent) = self
                .recent
                .policy_score_last(i, metrics::FINAL_SCORE_EPISODES)
            {
                scalars.push((format!("policy/{name}/episode/recent_score_mean"), recent));
            }
        }
        let tagged: Vec<(&str, f64)> = scalars.iter().map(|(t, v)| (t.as_str(), *v)).collect();
        self.summaries.scalars(step, &tagged)
    }

    /// With several policies, each one's mean evaluation score (`policy/<name>/eval/score_mean`).
    fn write_policy_eval_scores(&mut self, step: u64, episodes: &[Episode]) -> Result<()> {
        let names = self.policies.names();
        if names.len() < 2 {
            return Ok(());
        }
        let scalars = metrics::policy_score_means(&names, episodes, "eval/score_mean");
        let tagged: Vec<(&str, f64)> = scalars.iter().map(|(t, v)| (t.as_str(), *v)).collect();
        self.summaries.scalars(step, &tagged)
    }

    /// summary.json's fields beyond the run's own: each policy's score where there are
    /// several, the learners', then the evaluations'.
    fn summary_fields(&self) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        let names = self.policies.names();
        for (i, name) in names.iter().enumerate().filter(|_| names.len() > 1) {
            let score = self
                .recent
                .policy_score_last(i, metrics::FINAL_SCORE_EPISODES);
            let json = score.map_or("null".into(), |s| s.to_string());
            fields.push((format!("policy_{name}_final_score"), json));
        }
        fields.extend(self.policies.summary_fields());
        if let Some(r) = &self.evaluated {
            if let Some((latest, step)) = &r.latest {
                fields.extend([
                    ("eval_score_mean".into(), format!("{}", latest.score.0)),
                    ("eval_score_std".into(), format!("{}", latest.score.1)),
                    ("eval_step".into(), step.to_string()),
                ]);
            }
            fields.extend([
                ("eval_best_score_mean".into(), format!("{}", r.best.0)),
                ("eval_best_step".into(), r.best.1.to_string()),
            ]);
        }
        let keys = self.exp.env.info_keys();
        if !keys.is_empty() {
            // Over the final score's window, as `episode/recent_info/<key>` logs it.
            let means = keys
                .iter()
                .cloned()
                .zip(
                    self.recent
                        .mean_info()
                        .into_iter()
                        .map(serde_json::Value::from),
                )
                .collect();
            let object = serde_json::Value::Object(means);
            fields.push(("recent_info".into(), object.to_string()));
        }
        fields
    }

    /// What ranks must hold identically under the sync policy: the networks, and the optimizer
    /// state where every rank steps on the same averaged gradient (all-reduce). Under broadcast
    /// only rank 0 steps; periodic averaging makes the parameters equal, not the moments.
    fn agreed_state(&self) -> Vec<(String, Tensor)> {
        let mut named = self.policies.networks();
        if matches!(self.ddp.policy(), SyncPolicy::Allreduce { .. }) && self.ddp.steps_locally() {
            named.extend(self.policies.optimizer_state());
        }
        named
    }

    /// Flushes summaries, proves every rank holds the same model, writes the summary, and leaves
    /// only when no other rank can still need this one.
    fn finish(mut self, outcome: Outcome) -> Result<Outcome> {
        self.summaries.flush()?;
        if self.world > 1 && self.ddp.ranks_should_agree() {
            let state = self.agreed_state();
            self.ddp.check_fingerprints(&state)?;
            tracing::info!(
                "all {} ranks hold bitwise identical copies of {} tensors",
                self.world,
                state.len()
            );
        }
        let interrupted = outcome != Outcome::Finished;
        let Counters {
            update,
            global_step,
        } = self.counters;
        match &self.population {
            Some(_) => self.console.close(),
            None => self
                .console
                .finish(global_step, &self.recent, &self.run_dir, interrupted),
        }
        if self.rank == 0 {
            let (started, start_step, start_cpu) = self.loop_start;
            write_summary(
                &self.run_dir,
                &RunSummary {
                    update,
                    global_step,
                    recent: &self.recent,
                    loop_steps: global_step - start_step,
                    loop_seconds: started.elapsed().as_secs_f64(),
                    loop_cpu_seconds: process_cpu_seconds() - start_cpu,
                    hash: &self.hash,
                    world: self.world,
                    interrupted,
                    restarts: self.restarts,
                    extra: self.summary_fields(),
                },
            )?;
        }
        let timeout = Duration::from_secs_f64(self.exp.sync.collective_timeout);
        let population = self.population.take();
        self.ddp.into_group().shutdown(timeout)?;
        if let Some(population) = population {
            population.finish(PopulationEnd {
                final_score: metrics::final_score(&self.recent),
                episodes: self.recent.total(),
                global_step,
                interrupted,
                rule: metrics::FINAL_SCORE_RULE,
            })?;
        }
        Ok(outcome)
    }

    /// The latest value of the scalar a population ranks its members by (`objective-scalar`),
    /// among the learner's and its league's of the latest update.
    fn objective_scalar(&self, population: &Population) -> Result<f64> {
        let tag = population.objective_scalar().unwrap_or_default();
        let scalars = self.policies.scalars();
        if let Some((_, value)) = scalars.iter().find(|(t, _)| *t == tag) {
            return Ok(*value);
        }
        let logged: Vec<&str> = scalars.iter().map(|(t, _)| t.as_str()).collect();
        bail!(
            "population.objective-scalar `{tag}` is not a scalar the learner logs; it logs {}",
            logged.join(", ")
        )
    }

    /// Snapshots join the league: the learner's, or every member's of the population (each
    /// rank of the job at the same update).
    fn add_to_league(&mut self) -> Result<()> {
        let Some(league) = self.policies.league() else {
            return Ok(());
        };
        let mine = Taken {
            member: None,
            networks: self.policies.networks(),
            rating: league.rating(),
        };
        let taken = match &self.population {
            Some(population) if population.shares_league() => population.gather_snapshots(&mine)?,
            _ => vec![mine],
        };
        self.policies
            .add_to_league(taken, self.counters.global_step)
    }

    /// Population-based training's exploit and explore, on every rank of the job at the same
    /// update: the members' objectives gathered and rank 0's plan taken; each member that
    /// copies another receives its parameters, optimiser state and normalisers, and goes on
    /// with the plan's hyperparameters.
    fn exploit(&mut self) -> Result<()> {
        let Some(mut population) = self.population.take() else {
            return Ok(());
        };
        let done = self.exploit_in(&mut population);
        self.population = Some(population);
        done
    }

    fn exploit_in(&mut self, population: &mut Population) -> Result<()> {
        let step = self.counters.global_step;
        let objective = match population.objective() {
            Objective::Score => self.recent.mean_score_last(metrics::FINAL_SCORE_EPISODES),
            Objective::Eval => (self.evaluated.as_ref())
                .and_then(|r| r.latest.as_ref())
                .map(|(evaluated, _)| evaluated.score.0),
            Objective::Scalar => Some(self.objective_scalar(population)?),
        };
        let steps = population.agree_on_plan(objective.unwrap_or(f64::NAN), step)?;
        // A member copies or is copied from, never both (top and bottom are apart), so each
        // rank's tensors are taken once for every copy of this exploit.
        let state: Vec<Tensor> = self.policies.state().into_iter().map(|(_, t)| t).collect();
        let normalizers: Vec<Tensor> = normalizer_tensors(&self.envs)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        for (to, copy) in steps.iter().enumerate().filter(|(to, s)| s.source != *to) {
            population.copy_member(copy.source, to, &state)?;
            population.copy_member(copy.source, to, &normalizers)?;
            if to == population.member {
                set_normalizers(&mut self.envs, &normalizers)?;
            }
        }
        let mine = &steps[population.member];
        if mine.source != population.member {
            population.values = mine.values.clone();
            self.exp = population.experiment_with(&population.values)?;
            // The member's checkpoints hold this config and its hash from here on.
            self.hash = tandem_config::config_hash(&self.exp);
            // A population that explores nothing copies, and retunes nothing (any learner).
            if !population.values.is_empty() {
                self.policies.retune(&self.exp)?;
            }
            tracing::info!(
                "exploit at step {step}: member {} copies member {} and goes on with {}",
                population.member,
                mine.source,
                population.describe(&population.values)
            );
        }
        let mut scalars = population.scalars(&population.values);
        scalars.push(("population/source".into(), mine.source as f64));
        if let Some(objective) = objective {
            scalars.push(("population/objective".into(), objective));
        }
        self.summaries.scalars(step, &tagged(&scalars))
    }
}

fn tagged(scalars: &[(String, f64)]) -> Vec<(&str, f64)> {
    scalars.iter().map(|(t, v)| (t.as_str(), *v)).collect()
}

/// The latest evaluation of this attempt with its step, and the best mean score of the run
/// (a resumed run's from its checkpoint) with its step.
struct EvalRecord {
    latest: Option<(Evaluated, u64)>,
    best: (f64, u64),
}

/// Where a rank stands in its run: what resuming needs besides the learner and environments.
struct Place<'a> {
    exp: &'a Experiment,
    run_dir: &'a std::path::Path,
    rank: usize,
    world: usize,
    threads: usize,
}

impl Place<'_> {
    /// Restores the newest checkpoint every rank can read ([`Place::agree_on_checkpoint`]):
    /// the learner's state and counters, the environments (or fresh ones with the saved
    /// normalisers), the learner's per-rank files. Returns where the run continues from.
    fn resume(
        &self,
        envs: &mut VecEnv,
        policies: &mut Policies,
        ddp: &mut Ddp,
    ) -> Result<ResumedRun> {
        let (path, ckpt) = self.agree_on_checkpoint(ddp)?;
        // The learner's state is the same whatever the world size, so a checkpoint from 2 ranks
        // resumes on 1 and vice versa.
        checkpoint::restore_into(&ckpt, &policies.state())
            .with_context(|| format!("restoring {}", path.display()))?;
        policies
            .restore_league(&ckpt.tensors)
            .with_context(|| format!("restoring {}", path.display()))?;
        for (name, _) in policies.counters() {
            let value = ckpt.counter(&format!("learner.{name}"))?;
            policies.set_counter(&name, value)?;
        }
        let envs_restored = restore_envs(envs, self.run_dir, &ckpt, self.rank, self.world)?;
        if !envs_restored {
            // A failed restore may leave environments half restored, so they are built again;
            // ones that cannot be snapshotted were not touched, and building them again would
            // start a second set of Python workers for nothing.
            if envs.can_snapshot() {
                *envs = make_vec_env(self.exp, self.rank, self.threads)?;
            }
            restore_normalizers(envs, &ckpt)?;
        }
        policies.restore_rank_files(&Resumed {
            dir: &checkpoint::checkpoint_dir(self.run_dir),
            checkpoint: &path,
            global_step: ckpt.global_step,
            saved_world: ckpt.world_size as usize,
            world: self.world,
            envs_restored,
        })?;
        let restarts = ckpt.restarts + 1;
        tracing::info!(
            "resumed (restart {restarts}) from step {}",
            ckpt.global_step
        );
        tracing::info!(
            "resumed from {} at update {}, step {} (saved on {} rank(s))",
            path.display(),
            ckpt.update,
            ckpt.global_step,
            ckpt.world_size
        );
        let eval_best = eval_best(&ckpt)?;
        Ok(ResumedRun {
            counters: Counters {
                update: ckpt.update,
                global_step: ckpt.global_step,
            },
            envs_restored,
            restarts,
            episodes: ckpt.episodes,
            recent: ckpt.recent,
            eval_best,
            config_hash: ckpt.config_hash,
            resolved_config: ckpt.resolved_config,
        })
    }

    /// The newest checkpoint that every rank reads whole. Ranks try the same files, newest
    /// first, and vote on each: one that any rank cannot read (damaged, or not visible there)
    /// is skipped by all with a warning, so every rank loads the same one.
    fn agree_on_checkpoint(&self, ddp: &mut Ddp) -> Result<(PathBuf, Checkpoint)> {
        let candidates = checkpoint::newest_first(self.run_dir)?;
        if candidates.is_empty() {
            checkpoint::locate(self.run_dir)?;
        }
        let mut skipped = Vec::new();
        let mut damaged_here = Vec::new();
        for path in candidates {
            let update = checkpoint::update_of(&path).unwrap_or(0);
            let mine = checkpoint::load(&path);
            // [ranks that cannot read it, the update every rank looks at, summed]
            let mut votes = [mine.is_err() as u8 as f64, update as f64];
            ddp.all_reduce_sum(&mut votes)?;
            if votes[1] != update as f64 * self.world as f64 {
                bail!(
                    "the ranks see different checkpoints in {} (this rank tried {}); \
                     every rank must read the same run directory",
                    checkpoint::checkpoint_dir(self.run_dir).display(),
                    path.display()
                );
            }
            match mine {
                Ok(ckpt) if votes[0] == 0.0 => {
                    if self.rank == 0 {
                        set_aside(&damaged_here);
                    }
                    return Ok((path, ckpt));
                }
                Ok(_) => {
                    let why = format!(
                        "{} cannot be read on {} other rank(s)",
                        path.display(),
                        votes[0]
                    );
                    tracing::warn!("{why}; falling back to the checkpoint before it");
                    skipped.push(why);
                }
                Err(e) => {
                    tracing::warn!("{e:#}; falling back to the checkpoint before it");
                    skipped.push(format!("{e:#}"));
                    damaged_here.push(path);
                }
            }
        }
        bail!(
            "{} holds no checkpoint every rank can read:\n{}",
            self.run_dir.display(),
            skipped.join("\n")
        )
    }
}

/// Rank 0, once the resume has a checkpoint: the files it could not read are renamed
/// `<name>.damaged`, kept for a look but out of the rotation, so that they neither count toward
/// `checkpoint.keep` (a good checkpoint pruned in their place) nor are tried again. A resume that
/// fails renames nothing (it changes nothing in the run directory).
fn set_aside(damaged: &[PathBuf]) {
    for path in damaged {
        let aside = PathBuf::from(format!("{}.damaged", path.display()));
        match std::fs::rename(path, &aside) {
            Ok(()) => tracing::warn!("set {} aside as {}", path.display(), aside.display()),
            Err(e) => tracing::warn!("cannot set {} aside: {e}", path.display()),
        }
    }
}

/// Where a resumed run continues: its counters, and what rank 0's summaries count over the
/// whole run.
struct ResumedRun {
    counters: Counters,
    envs_restored: bool,
    /// This attempt's number: the checkpoint's count plus one.
    restarts: u64,
    episodes: u64,
    recent: Vec<Episode>,
    /// The config the checkpoint was written under.
    config_hash: String,
    resolved_config: String,
    /// The best evaluation's mean score and step, when the run had evaluated.
    eval_best: Option<(f64, u64)>,
}

/// The best evaluation a checkpoint holds ([`checkpoint::EVAL_BEST`]), if any.
fn eval_best(ckpt: &Checkpoint) -> Result<Option<(f64, u64)>> {
    let Some((_, t)) = ckpt
        .tensors
        .iter()
        .find(|(n, _)| n == checkpoint::EVAL_BEST)
    else {
        return Ok(None);
    };
    match Vec::<f64>::try_from(t)?.as_slice() {
        &[score, step] => Ok(Some((score, step as u64))),
        other => bail!(
            "{} in the checkpoint is malformed: {other:?}",
            checkpoint::EVAL_BEST
        ),
    }
}

/// Once every rank has loaded its checkpoint: the run directory's `resolved.kdl` and
/// `resolved.sha256` become the config that now runs (until here they still describe the run
/// as it was, so a resume that fails leaves the run resumable), and a config that differs from
/// the checkpoint's (another world size, an allowed change) is appended to
/// `config-changes.log`.
fn record_resumed_config(
    run_dir: &std::path::Path,
    exp: &Experiment,
    hash: &str,
    resumed: &ResumedRun,
) -> Result<()> {
    let canonical = tandem_config::canonical_kdl(exp);
    if resumed.config_hash != hash {
        let changes = checkpoint::config_difference(&resumed.resolved_config, &canonical);
        let record = format!(
            "restart {} at update {}, step {}: config {} -> {}\n{}",
            resumed.restarts,
            resumed.counters.update,
            resumed.counters.global_step,
            &resumed.config_hash[..resumed.config_hash.len().min(12)],
            &hash[..12],
            changes
                .iter()
                .map(|c| format!("    {c}\n"))
                .collect::<String>()
        );
        tracing::warn!(
            "the resumed run's config differs from its checkpoint's: {}",
            changes.join("; ")
        );
        let log = run_dir.join("config-changes.log");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        // One whole write, as the append-only files are written (src/atomic.rs).
        std::io::Write::write_all(&mut file, record.as_bytes())
            .with_context(|| format!("cannot write {}", log.display()))?;
    }
    super::report::write_resolved(run_dir, &canonical, hash)
}

/// Identical start on every rank, also after a resume (docs/design.md, "Ranks hold one model,
/// and prove it").
fn broadcast_rank0_state(ddp: &mut Ddp, policies: &Policies) -> Result<()> {
    let state: Vec<Tensor> = policies.state().into_iter().map(|(_, t)| t).collect();
    ddp.broadcast_from_rank0(&state)?;
    let _ = ddp.take_sync_time();
    Ok(())
}

/// Whether a counter going from `before` to `now` passed a multiple of `every`.
fn crossed(before: u64, now: u64, every: u64) -> bool {
    let every = every.max(1);
    now / every > before / every
}

fn all_finite(params: &[Tensor]) -> bool {
    params
        .iter()
        .all(|p| p.isfinite().all().int64_value(&[]) != 0)
}

/// `<prefix>/<key>` for each info key with its value.
fn info_scalars(prefix: &str, keys: &[String], values: Vec<f64>) -> Vec<(String, f64)> {
    keys.iter()
        .zip(values)
        .map(|(key, v)| (format!("{prefix}/{key}"), v))
        .collect()
}

/// The episodes that ended at `step`: the game's score first (`episode/score_*`, the untouched
/// rewards), then the return of the rewards the learner saw (`train/return_*`, which differs
/// from the score under clip-reward or normalize-reward), and each info key's mean at those
/// episodes' ends (`episode/info/<key>`).
fn write_episode_scalars(
    w: &mut Summaries,
    step: u64,
    episodes: &[Episode],
    info_keys: &[String],
) -> Result<()> {
    let scores: Vec<f64> = episodes.iter().map(|e| e.score).collect();
    let returns: Vec<f64> = episodes.iter().map(|e| e.ret).collect();
    let (Some(score), Some(ret)) = (metrics::summary(&scores), metrics::summary(&returns)) else {
        return Ok(());
    };
    let lengths: Vec<f64> = episodes.iter().map(|e| e.length).collect();
    let length_mean = metrics::summary(&lengths).map_or(0.0, |s| s.0);
    let info = info_scalars(
        "episode/info",
        info_keys,
        metrics::mean_info(episodes.iter()),
    );
    let mut all = vec![
        ("episode/score_mean", score.0),
        ("episode/score_min", score.1),
        ("episode/score_max", score.2),
        ("episode/length_mean", length_mean),
        ("train/return_mean", ret.0),
        ("train/return_min", ret.1),
        ("train/return_max", ret.2),
    ];
    all.extend(info.iter().map(|(k, v)| (k.as_str(), *v)));
    w.scalars(step, &all)?;
    Ok(())
}

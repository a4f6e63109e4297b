//! `tandem play`: evaluates a checkpoint with the resolved config stored inside it (never the
//! source files) and the normalisers' statistics it holds (frozen while it plays), prints each
//! episode's return and game score, and can write an animated GIF
//! of the first episode for games that draw themselves. A recurrent policy carries its state
//! from step to step, zeroed where an episode starts, as in training.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tch::Device;

use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::seats::Seats;
use crate::algo::storage::host_rows::{host_actions, rows_to_batch};
use crate::policy::{Acting, Policy};
use crate::seeds::{Purpose, derived_seed};
use crate::train::{checkpoint, envs};

/// Which checkpoint a command reads (`tandem play`, `tandem export`): a checkpoint file, or a
/// run directory and which of its checkpoints.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckpointChoice {
    /// A run directory (its newest checkpoint unless --checkpoint) or a checkpoint file.
    #[arg(value_name = "RUN_DIR|CHECKPOINT")]
    pub path: PathBuf,
    /// Which of the run directory's checkpoints: an update number, or `best` (the best by
    /// evaluation, `checkpoints/best.pt`, kept by a run with an `eval` section).
    #[arg(long, value_name = "N|best")]
    pub checkpoint: Option<String>,
    /// `tandem play`'s flag before `--checkpoint` existed: refused with the new spelling.
    #[arg(long, hide = true)]
    pub best: bool,
}

impl CheckpointChoice {
    /// The checkpoint file chosen.
    pub fn file(&self) -> Result<PathBuf> {
        if self.best {
            bail!("--best is now spelled --checkpoint best");
        }
        checkpoint::must_exist(&self.path)?;
        if self.path.is_file() {
            if self.checkpoint.is_some() {
                bail!(
                    "--checkpoint picks among a run directory's checkpoints; {} is a checkpoint file",
                    self.path.display()
                );
            }
            return Ok(self.path.clone());
        }
        checkpoint::pick(&self.path, self.checkpoint.as_deref())
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct PlayArgs {
    #[command(flatten)]
    pub checkpoint: CheckpointChoice,
    /// Number of evaluation episodes.
    #[arg(long, default_value_t = 5)]
    pub episodes: usize,
    /// Write an animated GIF of the first episode here.
    #[arg(long, value_name = "FILE")]
    pub gif: Option<PathBuf>,
    /// Keep every Nth frame of the GIF (each shown N times as long, so it plays in real time).
    /// MuJoCo draws a 480x480 frame in about 0.2 s on a CPU and holds 0.7 MB of it until the
    /// GIF is written, so a 1000-step episode wants N of 4 or more.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub gif_every: u16,
    /// Act deterministically: the most likely action (a box policy's mean; a Q-learner without
    /// exploration). The default where the experiment's `eval.deterministic` is `#true` (its
    /// default), as evaluation during training acts.
    #[arg(long, conflicts_with = "sample")]
    pub greedy: bool,
    /// Act stochastically: sample from the policy (a Q-learner acts epsilon-greedily, epsilon
    /// 0.05; TD3's deterministic actor adds its exploration noise). The default where the
    /// experiment's `eval.deterministic` is `#false`.
    #[arg(long)]
    pub sample: bool,
    /// Seed of the evaluation environments and action sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Give up on an episode after this many steps.
    #[arg(long, default_value_t = 100_000)]
    pub max_steps: u64,
    /// A policy of a run of several that acts uniformly at random instead of as trained (its
    /// agents' moves drawn uniformly), to measure what the others learned against it; may be
    /// given more than once.
    #[arg(long, value_name = "POLICY")]
    pub random: Vec<String>,
}

/// What an evaluation produced.
#[derive(Debug, Clone)]
pub struct PlayReport {
    pub acting: Acting,
    pub returns: Vec<f64>,
    pub scores: Vec<f64>,
    /// With several policies, each one's name and its agents' episode scores.
    pub policy_scores: Vec<(String, Vec<f64>)>,
    pub gif_frames: usize,
    /// What the GIF cost: seconds spent drawing its frames and encoding them, its bytes.
    pub gif_cost: GifCost,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct GifCost {
    pub draw_seconds: f64,
    pub encode_seconds: f64,
    pub bytes: usize,
}

/// How often a long recording says how far it got.
const RECORDING_NOTE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

pub fn run(args: &PlayArgs) -> Result<ExitCode> {
    // The float mode the training ranks ran in, so the policy acts as it did there.
    crate::torch_ops::flush_denormals();
    let report = evaluate(args)?;
    let why = asked(args).map_or(
        "the experiment's eval.deterministic, as evaluation during training acts",
        |(_, flag)| flag,
    );
    println!("acting {} ({why})", report.acting);
    // The game's score first; the return of the rewards the policy was trained on second.
    for (i, (s, r)) in report.scores.iter().zip(&report.returns).enumerate() {
        println!("episode {}: score {s:.2}, train return {r:.2}", i + 1);
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len().max(1) as f64;
    println!(
        "mean score over {} episode(s): {:.2} (train return {:.2})",
        report.scores.len(),
        mean(&report.scores),
        mean(&report.returns)
    );
    for (name, scores) in &report.policy_scores {
        let random = args.random.contains(name);
        println!(
            "policy {name}{}: mean score over {} agent episode(s): {:.2}",
            if random { " (acting at random)" } else { "" },
            scores.len(),
            mean(scores)
        );
    }
    if let Some(gif) = &args.gif {
        let cost = report.gif_cost;
        println!(
            "wrote {} ({} frames, {} bytes; drawing took {:.1} s, encoding {:.1} s)",
            gif.display(),
            report.gif_frames,
            cost.bytes,
            cost.draw_seconds,
            cost.encode_seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--greedy` or `--sample` where given (clap refuses both), else as evaluation during
/// training acts: [`Acting::rule`] on the experiment's `eval.deterministic`.
fn acting(args: &PlayArgs, experiment: &tandem_config::Experiment) -> Acting {
    Acting::rule(
        experiment.eval.deterministic,
        asked(args).map(|(acting, _)| acting),
    )
}

/// How the command line asks the policy to act, and the flag that asks it; `None` without one.
fn asked(args: &PlayArgs) -> Option<(Acting, &'static str)> {
    match (args.greedy, args.sample) {
        (true, _) => Some((Acting::Greedy, "--greedy")),
        (_, true) => Some((Acting::Sampled, "--sample")),
        _ => None,
    }
}

/// The policy `ckpt` holds, acting in `env` (built from its experiment, one environment): the
/// normalisers' statistics restored from the checkpoint and frozen, so the policy reads
/// observations as training normalised them when the checkpoint was written and nothing it
/// plays moves them. Returns the policy and the observation shape it reads.
pub fn restored_policy(
    experiment: &tandem_config::Experiment,
    ckpt: &checkpoint::Checkpoint,
    env: &mut tandem_env::VecEnv,
) -> Result<(Policy, Vec<i64>)> {
    let plans = experiment.policy_plans();
    if !plans.is_empty() {
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "the run trained {} policies ({}); pick one with --policy",
            names.len(),
            names.join(", ")
        );
    }
    envs::restore_normalizers(env, ckpt)?;
    env.freeze_normalizers();
    crate::algo::build::takes_the_action_space(&experiment.algorithm, env.action_space())?;
    let (spec, obs_shape) = crate::algo::learner::network_for(experiment, env)?;
    let policy = Policy::build(experiment, &spec, &obs_shape, env.action_space(), 1)?;
    checkpoint::restore_into(ckpt, &policy.targets())?;
    Ok((policy, obs_shape))
}

/// Who acts in a played game: the checkpoint's one policy in every row, or, for a run of
/// several, each policy in its seats.
enum Cast {
    One(Policy, Vec<i64>),
    Several(Vec<Player>),
}

/// One policy of a run of several, in its seats of the played game; without a network where
/// `--random` asks it to act uniformly at random.
struct Player {
    name: String,
    seats: Seats,
    policy: Option<Policy>,
}

impl Cast {
    /// The checkpoint's policies, restored, acting in `env`.
    fn restore(
        experiment: &tandem_config::Experiment,
        ckpt: &checkpoint::Checkpoint,
        env: &mut tandem_env::VecEnv,
        random: &[String],
    ) -> Result<Cast> {
        let plans = experiment.policy_plans();
        if plans.is_empty() {
            if let Some(name) = random.first() {
                bail!("--random {name}: the run trained one policy; --random picks one of several");
            }
            let (policy, obs_shape) = restored_policy(experiment, ckpt, env)?;
            return Ok(Cast::One(policy, obs_shape));
        }
        if let Some(name) = random.iter().find(|r| !plans.iter().any(|p| &&p.name == r)) {
            let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "--random {name}: the run's policies are {}",
                names.join(", ")
            );
        }
        envs::restore_normalizers(env, ckpt)?;
        env.freeze_normalizers();
        let games = env.num_envs() / env.agents_per_game();
        let mut players = Vec::with_capacity(plans.len());
        for plan in plans {
            let seats = Seats::new(
                &plan.agents,
                env.agents_per_game(),
                games,
                plan.observation.len(),
                env.obs_len(),
            );
            let policy = match random.contains(&plan.name) {
                true => None,
                false => Some(seated_policy(experiment, ckpt, env, &plan.name, &seats)?),
            };
            players.push(Player {
                name: plan.name,
                seats,
                policy,
            });
        }
        Ok(Cast::Several(players))
    }

    /// Every row's action for the batch's current observations.
    fn act(&mut self, env: &tandem_env::VecEnv, greedy: bool) -> Result<ActionBatch> {
        let kind = ActionKind::of(env.action_space());
        match self {
            Cast::One(policy, obs_shape) => {
                let obs = rows_to_batch(env.obs(), env.num_envs(), obs_shape, Device::Cpu);
                let action = tch::no_grad(|| policy.act(&obs, greedy))?;
                host_actions(&action, kind)
            }
            Cast::Several(players) => {
                let rows = env.num_envs();
                let mut all = match players.iter().any(|p| p.policy.is_none()) {
                    true => host_actions(&uniform(env.action_space(), rows), kind)?,
                    false => ActionBatch::zeros(kind, rows),
                };
                for p in players.iter_mut() {
                    let Some(policy) = &mut p.policy else {
                        continue;
                    };
                    let shape = [p.seats.obs_len() as i64];
                    let mine = p.seats.observations(env.obs());
                    let obs = rows_to_batch(&mine, p.seats.len(), &shape, Device::Cpu);
                    let action = tch::no_grad(|| policy.act(&obs, greedy))?;
                    p.seats
                        .place_actions(&host_actions(&action, kind)?, &mut all);
                }
                Ok(all)
            }
        }
    }

    fn stepped(&mut self, env: &tandem_env::VecEnv) {
        if let Cast::One(policy, _) = self {
            policy.stepped(env);
        }
    }

    /// The policies' names and which plays each row ([`Cast::One`]: none).
    fn names_by_row(&self, rows: usize) -> (Vec<String>, Vec<usize>) {
        let Cast::Several(players) = self else {
            return (Vec::new(), Vec::new());
        };
        let mut by_row = vec![0; rows];
        for (i, p) in players.iter().enumerate() {
            for &row in p.seats.rows() {
                by_row[row] = i;
            }
        }
        (players.iter().map(|p| p.name.clone()).collect(), by_row)
    }
}

/// Policy `name` of a run of several, restored from `ckpt` to act in `env`'s rows of its
/// agents (one game), and the observation shape it reads.
pub fn restored_one_of_several(
    experiment: &tandem_config::Experiment,
    ckpt: &checkpoint::Checkpoint,
    env: &mut tandem_env::VecEnv,
    name: &str,
) -> Result<(Policy, Vec<i64>)> {
    let plans = experiment.policy_plans();
    let Some(plan) = plans.iter().find(|p| p.name == name) else {
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        bail!(match names.is_empty() {
            true => format!("--policy {name}: the run trained one policy, which needs no name"),
            false => format!(
                "--policy {name}: the run's policies are {}",
                names.join(", ")
            ),
        });
    };
    envs::restore_normalizers(env, ckpt)?;
    env.freeze_normalizers();
    let games = env.num_envs() / env.agents_per_game();
    let (rows, width) = (env.agents_per_game(), env.obs_len());
    let seats = Seats::new(&plan.agents, rows, games, plan.observation.len(), width);
    let policy = seated_policy(experiment, ckpt, env, name, &seats)?;
    Ok((policy, vec![seats.obs_len() as i64]))
}

/// Policy `name` of a run of several, restored from `ckpt` (its tensors `policy.<name>.*`),
/// acting in `seats`.
fn seated_policy(
    experiment: &tandem_config::Experiment,
    ckpt: &checkpoint::Checkpoint,
    env: &tandem_env::VecEnv,
    name: &str,
    seats: &Seats,
) -> Result<Policy> {
    let (spec, obs_shape, rows) =
        crate::algo::learner::network_for_seats(experiment, env, Some(seats))?;
    let policy = Policy::build(experiment, &spec, &obs_shape, env.action_space(), rows)?;
    let prefix = format!("policy.{name}.");
    let targets: Vec<(String, tch::Tensor)> = (policy.targets().into_iter())
        .map(|(n, t)| (format!("{prefix}{n}"), t))
        .collect();
    checkpoint::restore_into(ckpt, &targets).with_context(|| format!("policy {name}"))?;
    Ok(policy)
}

/// `rows` actions drawn uniformly from `space` (from the current torch seed).
fn uniform(space: &tandem_env::ActionSpace, rows: usize) -> tch::Tensor {
    let rows = rows as i64;
    match space {
        tandem_env::ActionSpace::Box { low, high } => {
            let low = tch::Tensor::from_slice(low);
            let high = tch::Tensor::from_slice(high);
            let draw = tch::Tensor::rand([rows, low.size()[0]], (tch::Kind::Float, Device::Cpu));
            draw * (&high - &low) + low
        }
        discrete => {
            let n = discrete.num_discrete().unwrap_or(1) as i64;
            tch::Tensor::randint(n, [rows], (tch::Kind::Int64, Device::Cpu))
        }
    }
}

pub fn evaluate(args: &PlayArgs) -> Result<PlayReport> {
    if args.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let (ckpt, experiment) = checkpoint::open(&args.checkpoint.file()?)?;
    // Drawing costs every step, so a gymnasium environment draws only for a GIF.
    let bridge = tandem_env::BridgeOptions {
        log_prefix: String::new(),
        render: args.gif.is_some(),
    };
    let seed = derived_seed(args.seed, Purpose::Play, 0, 0);
    let mut env =
        tandem_env::VecEnv::with_bridge(&envs::scoring_env_spec(&experiment), &[seed], 1, &bridge)
            .context("cannot build the evaluation environment")?;
    let mut cast = Cast::restore(&experiment, &ckpt, &mut env, &args.random)?;
    let (names, policy_of_row) = cast.names_by_row(env.num_envs());
    let mut policy_scores: Vec<(String, Vec<f64>)> =
        names.into_iter().map(|n| (n, Vec::new())).collect();
    let acting = acting(args, &experiment);
    let greedy = acting.is_greedy();
    tch::manual_seed(seed as i64);

    let want_gif = args.gif.is_some();
    if want_gif && env.render_rgb(0)?.is_none() {
        bail!(
            "{} does not draw itself; --gif needs an image-based game",
            experiment.env.game.name()
        );
    }
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut size = (0usize, 0usize);
    let mut returns = Vec::new();
    let mut scores = Vec::new();
    env.reset();
    let mut steps = 0u64;
    let mut cost = GifCost::default();
    let mut last_note = std::time::Instant::now();
    while returns.len() < args.episodes {
        if want_gif && returns.is_empty() && steps.is_multiple_of(u64::from(args.gif_every)) {
            let drawing = std::time::Instant::now();
            if let Some(f) = env.render_rgb(0)? {
                size = (f.width, f.height);
                frames.push(f.pixels);
            }
            cost.draw_seconds += drawing.elapsed().as_secs_f64();
            if last_note.elapsed() >= RECORDING_NOTE_EVERY {
                last_note = std::time::Instant::now();
                eprintln!(
                    "play: recording episode 1: {} frames of {}x{} so far, {:.2} s a frame \
                     (--gif-every N keeps every Nth)",
                    frames.len(),
                    size.0,
                    size.1,
                    cost.draw_seconds / frames.len().max(1) as f64
                );
            }
        }
        let actions = cast.act(&env, greedy)?;
        env.step(&actions)?;
        cast.stepped(&env);
        steps += 1;
        for e in env.drain_episodes() {
            returns.push(e.episode_return);
            scores.push(e.raw_score);
            if let Some(&policy) = policy_of_row.get(e.env_index) {
                policy_scores[policy].1.push(e.raw_score);
            }
            steps = 0;
        }
        if steps >= args.max_steps {
            bail!(
                "an episode ran past --max-steps {}; the policy may be stuck",
                args.max_steps
            );
        }
    }
    let gif_frames = frames.len();
    if let Some(gif) = &args.gif {
        let (w, h) = size;
        eprintln!(
            "play: encoding {gif_frames} frames of {w}x{h} into {}",
            gif.display()
        );
        let encoding = std::time::Instant::now();
        let delay = tandem_summary::FRAME_CENTIS * args.gif_every;
        let bytes = tandem_summary::encode_gif(w as u16, h as u16, &frames, delay)
            .with_context(|| format!("cannot encode {}", gif.display()))?;
        cost.encode_seconds = encoding.elapsed().as_secs_f64();
        cost.bytes = bytes.len();
        crate::atomic::write_atomic(gif, &bytes)?;
    }
    Ok(PlayReport {
        acting,
        returns,
        scores,
        policy_scores,
        gif_frames,
        gif_cost: cost,
    })
}

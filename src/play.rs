//! `tandem play`: evaluates a checkpoint with the resolved config stored inside it (never the
//! source files) and the normalisers' statistics it holds (frozen while it plays), prints each
//! episode's return and game score, and can write an animated GIF
//! of the first episode for games that draw themselves. A recurrent policy carries its state
//! from step to step, zeroed where an episode starts, as in training.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::algo::actions::ActionBatch;
use crate::algo::storage::host_rows::host_actions;
use crate::cast::Cast;
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
            crate::usage::mistake!("--best is now spelled --checkpoint best");
        }
        checkpoint::must_exist(&self.path)?;
        if self.path.is_file() {
            if self.checkpoint.is_some() {
                crate::usage::mistake!(
                    "--checkpoint picks among a run directory's checkpoints; {} is a checkpoint file",
                    self.path.display()
                );
            }
            return Ok(self.path.clone());
        }
        checkpoint::pick(&self.path, self.checkpoint.as_deref())
    }

    /// The chosen checkpoint, read, with its experiment and its path. A run directory's newest
    /// (no `--checkpoint`) that is damaged gives way to the one before it, as `--resume` does,
    /// and `command` says so on stderr; a checkpoint named (a file, `--checkpoint N` or `best`)
    /// is read or refused as it is.
    pub fn open(
        &self,
        command: &str,
    ) -> Result<(checkpoint::Checkpoint, tandem_config::Experiment, PathBuf)> {
        let chosen = self.file()?;
        let named = self.path.is_file() || self.checkpoint.is_some();
        let first = match checkpoint::open(&chosen) {
            Ok((ckpt, experiment)) => return Ok((ckpt, experiment, chosen)),
            Err(e) if named => return Err(e),
            Err(e) => e,
        };
        let older = checkpoint::newest_first(&self.path)?;
        let mut failed = format!("{first:#}");
        for path in older.iter().filter(|p| **p != chosen) {
            eprintln!("{command}: {failed}; trying {} instead", path.display());
            match checkpoint::open(path) {
                Ok((ckpt, experiment)) => return Ok((ckpt, experiment, path.clone())),
                Err(e) => failed = format!("{e:#}"),
            }
        }
        Err(first)
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
    /// In a game of several agents, the agents whose ids match PATTERN (`*` matching any run
    /// of characters: `player_1`, `adversary_*`) move uniformly at random, among the moves
    /// their action mask allows, instead of as trained; the scores of those agents and of the
    /// others are printed apart (how a self-play policy is held against a random opponent).
    #[arg(long, value_name = "PATTERN")]
    pub random_agents: Option<String>,
    /// In a game of several agents, the agents `--opponent-agents` matches play as the policy
    /// of this run directory's newest checkpoint, or of this checkpoint file, instead of as
    /// trained (another run's, or an earlier checkpoint of this one: how a self-played policy
    /// is held against its past); the games each side won are printed.
    #[arg(long, value_name = "RUN_DIR|CHECKPOINT", requires = "opponent_agents", conflicts_with_all = ["random_agents", "random"])]
    pub opponent: Option<PathBuf>,
    /// The agents (a pattern as `--random-agents`') that `--opponent` plays.
    #[arg(long, value_name = "PATTERN", requires = "opponent")]
    pub opponent_agents: Option<String>,
}

/// What an evaluation produced.
#[derive(Debug, Clone)]
pub struct PlayReport {
    pub acting: Acting,
    pub returns: Vec<f64>,
    pub scores: Vec<f64>,
    /// With several policies, each one's name and its agents' episode scores.
    pub policy_scores: Vec<(String, Vec<f64>)>,
    /// With `--random-agents` or `--opponent`, the episode scores of the agents replaced and
    /// of the others.
    pub random_agent_scores: Option<(Vec<f64>, Vec<f64>)>,
    /// With `--random-agents` or `--opponent`, the games the others won, drew and lost against
    /// the agents replaced (by the game's scores: the others' best against theirs).
    pub outcomes: Option<[usize; 3]>,
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
    // Each policy's line where there are several (one seated policy is the run's one).
    for (name, scores) in report
        .policy_scores
        .iter()
        .filter(|_| report.policy_scores.len() > 1)
    {
        let random = args.random.contains(name);
        println!(
            "policy {name}{}: mean score over {} agent episode(s): {:.2}",
            if random { " (acting at random)" } else { "" },
            scores.len(),
            mean(scores)
        );
    }
    if let (Some((pattern, by)), Some((random, others))) =
        (replaced(args), &report.random_agent_scores)
    {
        println!(
            "agents {pattern} ({by}): mean score over {} agent episode(s): {:.2}",
            random.len(),
            mean(random)
        );
        println!(
            "the other agents: mean score over {} agent episode(s): {:.2}",
            others.len(),
            mean(others)
        );
    }
    if let Some([won, drew, lost]) = report.outcomes {
        let games = (won + drew + lost).max(1) as f64;
        println!(
            "the other agents won {won}, drew {drew} and lost {lost} of {} games ({:.1}% won)",
            won + drew + lost,
            100.0 * won as f64 / games
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

/// The pattern of the agents replaced and what replaces them, where `--random-agents` or
/// `--opponent` is given.
fn replaced(args: &PlayArgs) -> Option<(&str, String)> {
    if let Some(pattern) = &args.random_agents {
        return Some((pattern, "acting at random".into()));
    }
    let (path, pattern) = (args.opponent.as_ref()?, args.opponent_agents.as_ref()?);
    Some((pattern, format!("playing {}", path.display())))
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
    let plans = experiment.seated_policies();
    match plans.as_slice() {
        [] => {}
        // One policy with a centralised critic: its input carries the game's state.
        [one] => return restored_seated(experiment, ckpt, env, &one.name),
        several => {
            let names: Vec<&str> = several.iter().map(|p| p.name.as_str()).collect();
            crate::usage::mistake!(
                "the run trained {} policies ({}); pick one with --policy",
                names.len(),
                names.join(", ")
            );
        }
    }
    envs::restore_normalizers(env, ckpt)?;
    env.freeze_normalizers();
    crate::algo::build::takes_the_action_space(&experiment.algorithm, env.action_space())?;
    let (spec, obs_shape) = crate::algo::learner::network_for(experiment, env)?;
    let policy = Policy::build(experiment, &spec, &obs_shape, env.action_space(), 1)?;
    checkpoint::restore_into(ckpt, &policy.targets())?;
    Ok((policy, obs_shape))
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
    if !plans.iter().any(|p| p.name == name) {
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        crate::usage::mistake!(
            "{}",
            match names.is_empty() {
                true => format!("--policy {name}: the run trained one policy, which needs no name"),
                false => format!(
                    "--policy {name}: the run's policies are {}",
                    names.join(", ")
                ),
            }
        );
    }
    restored_seated(experiment, ckpt, env, name)
}

/// Seated policy `name` (of several, or a centralised critic's one), restored from `ckpt` to
/// act in `env`'s rows of its agents, and the input shape it reads.
fn restored_seated(
    experiment: &tandem_config::Experiment,
    ckpt: &checkpoint::Checkpoint,
    env: &mut tandem_env::VecEnv,
    name: &str,
) -> Result<(Policy, Vec<i64>)> {
    // The others act at random here: only the picked policy's network is built and restored.
    let others: Vec<String> = (experiment.seated_policies().into_iter())
        .map(|p| p.name)
        .filter(|n| n != name)
        .collect();
    let Cast::Several(players) = restored_cast(experiment, ckpt, env, &others)? else {
        unreachable!("a run of several policies casts several");
    };
    let player = players
        .into_iter()
        .find_map(|p| p.policy.map(|policy| (policy, p.seats)));
    let (policy, seats) = player.context("the policy picked")?;
    Ok((policy, vec![seats.input_len() as i64]))
}

/// Every policy `ckpt` holds, acting in `env` with its normalisers restored and frozen; those
/// `random` names act at random.
fn restored_cast(
    experiment: &tandem_config::Experiment,
    ckpt: &checkpoint::Checkpoint,
    env: &mut tandem_env::VecEnv,
    random: &[String],
) -> Result<Cast> {
    if experiment.seated_policies().is_empty() && random.is_empty() {
        let (policy, obs_shape) = restored_policy(experiment, ckpt, env)?;
        return Ok(Cast::One(policy, obs_shape));
    }
    envs::restore_normalizers(env, ckpt)?;
    env.freeze_normalizers();
    let cast = Cast::build(experiment, env, random)?;
    checkpoint::restore_into(ckpt, &cast.targets())?;
    Ok(cast)
}

pub fn evaluate(args: &PlayArgs) -> Result<PlayReport> {
    if args.episodes == 0 {
        crate::usage::mistake!("--episodes must be at least 1");
    }
    let (ckpt, experiment, _) = args.checkpoint.open("play")?;
    // Drawing costs every step, so a gymnasium environment draws only for a GIF.
    let bridge = tandem_env::BridgeOptions {
        log_prefix: String::new(),
        render: args.gif.is_some(),
    };
    let seed = derived_seed(args.seed, Purpose::Play, 0, 0);
    let mut env =
        tandem_env::VecEnv::with_bridge(&envs::scoring_env_spec(&experiment), &[seed], 1, &bridge)
            .context("cannot build the evaluation environment")?;
    let mut cast = restored_cast(&experiment, &ckpt, &mut env, &args.random)?;
    let mut random_rows = replaced_agents(args, &experiment, &mut env)?;
    let mut games = Games::new(env.agents_per_game());
    let mut random_agent_scores = random_rows.as_ref().map(|_| (Vec::new(), Vec::new()));
    let (names, policy_of_row) = cast.names_by_row(env.num_envs());
    let mut policy_scores: Vec<(String, Vec<f64>)> =
        names.into_iter().map(|n| (n, Vec::new())).collect();
    let acting = acting(args, &experiment);
    let greedy = acting.is_greedy();
    tch::manual_seed(seed as i64);

    let want_gif = args.gif.is_some();
    if want_gif && env.render_rgb(0)?.is_none() {
        crate::usage::mistake!(
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
        let mut actions = cast.act(&env, greedy)?;
        if let Some(random) = &mut random_rows {
            random.replace(&env, &mut actions, greedy)?;
        }
        env.step(&actions)?;
        cast.stepped(&env);
        if let Some(replaced) = &mut random_rows {
            replaced.stepped(&env);
        }
        steps += 1;
        for e in env.drain_episodes() {
            returns.push(e.episode_return);
            scores.push(e.raw_score);
            // Each policy's scores where the run has several (one policy's are the scores).
            let policy = policy_of_row.get(e.env_index).copied();
            if let Some((_, mine)) = policy.and_then(|p| policy_scores.get_mut(p)) {
                mine.push(e.raw_score);
            }
            if let (Some(random), Some((theirs, others))) = (&random_rows, &mut random_agent_scores)
            {
                let replaced = random.rows[e.env_index];
                match replaced {
                    true => theirs.push(e.raw_score),
                    false => others.push(e.raw_score),
                }
                games.ended(e.env_index, replaced, e.raw_score);
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
        outcomes: random_rows.as_ref().map(|_| games.outcomes),
        random_agent_scores,
        gif_frames,
        gif_cost: cost,
    })
}

/// The agents `--random-agents` or `--opponent-agents` replaces in `env`, and what replaces
/// them; `None` without either.
fn replaced_agents(
    args: &PlayArgs,
    experiment: &tandem_config::Experiment,
    env: &mut tandem_env::VecEnv,
) -> Result<Option<Replaced>> {
    let (pattern, by) = match (&args.random_agents, &args.opponent, &args.opponent_agents) {
        (Some(pattern), ..) => (pattern, By::Random),
        (None, Some(path), Some(pattern)) => (
            pattern,
            By::Policy(Box::new(opponent(path, experiment, env)?)),
        ),
        _ => return Ok(None),
    };
    Ok(Some(Replaced::of(env, pattern, experiment, by)?))
}

/// `--opponent`'s policy, restored to act in `env` as the run's policy does: a run of the same
/// environment, whose observations neither run normalises (one environment holds one set of
/// normaliser statistics).
fn opponent(
    path: &std::path::Path,
    experiment: &tandem_config::Experiment,
    env: &mut tandem_env::VecEnv,
) -> Result<Cast> {
    let choice = CheckpointChoice {
        path: path.to_path_buf(),
        checkpoint: None,
        best: false,
    };
    let (ckpt, theirs, file) = choice.open("play")?;
    if theirs.env != experiment.env {
        crate::usage::mistake!(
            "--opponent {}: its run plays another environment than this one (its `env` \
             section differs)",
            file.display()
        );
    }
    if !env.normalizer_stats().is_empty() {
        crate::usage::mistake!(
            "--opponent cannot play an environment whose observations are normalised yet: one \
             environment holds one set of statistics"
        );
    }
    restored_cast(&theirs, &ckpt, env, &[])
}

/// The games the agents not replaced won, drew and lost, counted as their episodes end: a
/// game is decided once every agent's episode has, by the best score of each side.
struct Games {
    agents: usize,
    /// Each game's episodes ended so far: how many, and each side's best score (replaced,
    /// others).
    pending: std::collections::HashMap<usize, (usize, f64, f64)>,
    outcomes: [usize; 3],
}

impl Games {
    fn new(agents: usize) -> Games {
        Games {
            agents: agents.max(1),
            pending: Default::default(),
            outcomes: [0; 3],
        }
    }

    fn ended(&mut self, row: usize, replaced: bool, score: f64) {
        let game = row / self.agents;
        let entry = (self.pending.entry(game)).or_insert((0, f64::NEG_INFINITY, f64::NEG_INFINITY));
        entry.0 += 1;
        match replaced {
            true => entry.1 = entry.1.max(score),
            false => entry.2 = entry.2.max(score),
        }
        if entry.0 == self.agents {
            let (_, theirs, ours) = self.pending.remove(&game).unwrap_or_default();
            self.outcomes[crate::algo::league::outcome(ours, theirs) as usize] += 1;
        }
    }
}

/// `--random-agents` or `--opponent`: the seats of the agents whose ids match the pattern
/// (and which rows they are), and what plays them instead of the run's policy.
struct Replaced {
    seats: crate::algo::seats::Seats,
    rows: Vec<bool>,
    by: By,
    /// Random moves: how many of each observation's last entries are the action mask they
    /// keep to (0: none).
    mask: usize,
}

/// What plays the agents [`Replaced`] picks.
enum By {
    /// Uniform moves, among those the action mask allows where the game has masks.
    Random,
    /// Another checkpoint's policy.
    Policy(Box<Cast>),
}

impl By {
    fn flag(&self) -> &'static str {
        match self {
            By::Random => "--random-agents",
            By::Policy(_) => "--opponent-agents",
        }
    }
}

impl Replaced {
    fn of(
        env: &tandem_env::VecEnv,
        pattern: &str,
        experiment: &tandem_config::Experiment,
        by: By,
    ) -> Result<Replaced> {
        let flag = by.flag();
        let ids: Vec<String> = env.agents().into_iter().map(|(id, _)| id).collect();
        let mistake = |said: String| Err(crate::usage::UsageError(said).into());
        if ids.is_empty() {
            let game = experiment.env.game.name();
            return mistake(format!("{flag} {pattern}: {game} has one agent"));
        }
        let picked: Vec<usize> = (0..ids.len())
            .filter(|&i| tandem_config::agent_matches(pattern, &ids[i]))
            .collect();
        if picked.is_empty() {
            let ids = ids.join(", ");
            return mistake(format!(
                "{flag} {pattern} matches none of the agents, {ids}"
            ));
        }
        if picked.len() == ids.len() {
            return mistake(format!(
                "{flag} {pattern} matches every agent; leave the run's policy at least one"
            ));
        }
        let (agents, len) = (ids.len(), env.obs_len());
        let seats =
            crate::algo::seats::Seats::new(&picked, agents, env.num_envs() / agents, len, len);
        let mut rows = vec![false; env.num_envs()];
        seats.rows().iter().for_each(|&r| rows[r] = true);
        let mask = match by {
            By::Random => crate::cast::mask_len(experiment, env, flag)?,
            By::Policy(_) => 0,
        };
        Ok(Replaced {
            seats,
            rows,
            by,
            mask,
        })
    }

    /// After a batch step: an opponent's recurrent state zeroed where an episode ended, as the
    /// run's policy's is.
    fn stepped(&mut self, env: &tandem_env::VecEnv) {
        if let By::Policy(opponent) = &mut self.by {
            opponent.stepped(env);
        }
    }

    /// Replaces the picked rows' actions: by uniform draws (from the current torch seed),
    /// among the moves their masks allow where the game has masks, or by the opponent's.
    fn replace(
        &mut self,
        env: &tandem_env::VecEnv,
        actions: &mut ActionBatch,
        greedy: bool,
    ) -> Result<()> {
        let kind = crate::algo::actions::ActionKind::of(env.action_space());
        let mine = match &mut self.by {
            By::Policy(opponent) => {
                let theirs = opponent.act(env, greedy)?;
                for &row in self.seats.rows() {
                    actions.copy_row(row, &theirs, row);
                }
                return Ok(());
            }
            By::Random if self.mask == 0 => host_actions(
                &crate::cast::uniform(env.action_space(), self.seats.len()),
                kind,
            )?,
            By::Random => crate::cast::legal_moves(env, self.seats.rows(), self.mask),
        };
        self.seats.place_actions(&mine, actions);
        Ok(())
    }
}

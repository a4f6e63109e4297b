//! Evaluation during training (the `eval` section): every rank plays its share of the
//! episodes on environments of its own, with the learner's current networks, and every rank
//! gets everyone's episodes back. The environments are the training chain without its reward
//! transforms (those `Wrapper::transforms_reward` names: the score is the game's anyway), cut
//! at `max-episode-steps` (a game of several agents at its own `max-cycles`), seeded apart from
//! training's and reset before each evaluation; their observation normalisers hold training's
//! statistics, frozen. Each environment plays one
//! episode an evaluation, so long episodes weigh as much as short ones.

use anyhow::{Context, Result, bail};

use tandem_config::{Experiment, Wrapper};
use tandem_env::norm::NormKind;
use tandem_env::{BridgeOptions, VecEnv};

use super::envs::scoring_env_spec;
use super::metrics::{self, Episode};
use crate::cast::Cast;
use crate::dist::ProcessGroup;
use crate::policy::Acting;
use crate::seeds::{Purpose, derived_seed};

/// This rank's evaluation environments and the policy it evaluates with.
pub struct Evaluation {
    /// None on a rank whose share of the episodes is none.
    share: Option<Share>,
    seed: u64,
    rank: usize,
    acting: Acting,
    /// Rank 0 records an episode every this many evaluations.
    video_every: Option<u64>,
    /// Evaluations run so far by this attempt.
    done: u64,
}

/// A rank's evaluation environments, one an episode, and the policies that act in them.
struct Share {
    envs: VecEnv,
    cast: Cast,
    /// The index of the policy that plays each row.
    policy_of_row: Vec<usize>,
}

/// Most frames a recording keeps, and most bytes of drawn frames: a longer episode's video
/// shows its start.
const VIDEO_FRAMES: usize = 1000;
const VIDEO_BYTES: usize = 64 << 20;

/// One evaluation's episodes, every rank's, and their summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub episodes: Vec<Episode>,
    /// Mean, standard deviation, minimum and maximum of the scores.
    pub score: (f64, f64, f64, f64),
    pub length_mean: f64,
}

/// An evaluation episode drawn step by step: `width` x `height` RGB frames.
#[derive(Default)]
pub struct Recording {
    pub width: usize,
    pub height: usize,
    pub frames: Vec<Vec<u8>>,
}

/// The episodes of an evaluation rank `rank` of `world` plays, and the global index of its
/// first: the episodes split as evenly as they go, the first ranks taking one more.
pub fn share(episodes: usize, world: usize, rank: usize) -> (usize, usize) {
    let (base, extra) = (episodes / world, episodes % world);
    (
        base + usize::from(rank < extra),
        rank * base + rank.min(extra),
    )
}

impl Evaluation {
    /// How the policy acts in these evaluations.
    pub fn acting(&self) -> Acting {
        self.acting
    }

    /// This rank's evaluation, or `None` when the experiment evaluates never. Rank 0's
    /// environments draw when the experiment records videos; one that cannot is an error.
    pub fn new(exp: &Experiment, rank: usize, world: usize) -> Result<Option<Evaluation>> {
        if exp.eval.every.is_none() {
            return Ok(None);
        }
        let (count, first) = share(exp.eval.episodes, world, rank);
        let seed = derived_seed(exp.seed, Purpose::Eval, 0, 0);
        let records = exp.eval.video_every.is_some() && rank == 0;
        let share = if count == 0 {
            None
        } else {
            let seeds = tandem_env::env_seeds(seed, 0, first, count);
            let envs = eval_envs(exp, rank, seeds, records)?;
            if records && envs.render_rgb(0)?.is_none() {
                bail!(
                    "eval.video-every: {} does not draw itself, so its evaluations cannot be \
                     recorded; remove video-every",
                    exp.env.game.name()
                );
            }
            let cast = Cast::build(exp, &envs, &[])?;
            let (_, policy_of_row) = cast.names_by_row(envs.num_envs());
            Some(Share {
                envs,
                cast,
                policy_of_row,
            })
        };
        Ok(Some(Evaluation {
            share,
            seed,
            rank,
            acting: Acting::rule(exp.eval.deterministic, None),
            video_every: exp.eval.video_every.filter(|_| records),
            done: 0,
        }))
    }

    /// Plays this rank's episodes with `networks` (the learner's, by name) and the training
    /// environments' observation statistics, then gathers every rank's: every rank calls this
    /// after the same update. Rank 0 also gives the drawing of its first environment's
    /// episode when a recording is due (the first evaluation, then every `video-every`).
    pub fn run(
        &mut self,
        networks: &[(String, tch::Tensor)],
        training: &VecEnv,
        update: u64,
        group: Option<&ProcessGroup>,
    ) -> Result<(Evaluated, Option<Recording>)> {
        let due = self
            .video_every
            .is_some_and(|every| self.done.is_multiple_of(every));
        self.done += 1;
        let mut recording = due.then(Recording::default);
        let mine = match &mut self.share {
            Some(share) => {
                let stats = training.normalizer_stats_of(NormKind::Observation);
                share.envs.set_normalizer_stats(&stats)?;
                share.cast.copy_from(networks)?;
                let seed = derived_seed(self.seed, Purpose::Eval, self.rank as u64, update);
                tch::manual_seed(seed as i64);
                share.play_one_each((self.acting.is_greedy(), recording.as_mut()))?
            }
            None => Vec::new(),
        };
        // The evaluation environments log no info values (`scoring_env_spec`).
        let episodes = metrics::gather_episodes(group, &mine, 0)?;
        Ok((summarise(episodes)?, recording))
    }
}

/// The evaluation chain: training's wrappers without the reward transforms, then a time limit
/// at `max-episode-steps`; its normalisers frozen. `render`: made to draw (a gymnasium
/// environment with `render_mode="rgb_array"`).
fn eval_envs(exp: &Experiment, rank: usize, seeds: Vec<u64>, render: bool) -> Result<VecEnv> {
    let mut spec = scoring_env_spec(exp);
    spec.wrappers.retain(|w| !w.transforms_reward());
    // A game of several agents takes no wrapper; its own `max-cycles` ends its episodes (the
    // resolver refuses a `max-episode-steps` set for it).
    if !exp.env.game.is_multi_agent() {
        spec.wrappers.push(Wrapper::TimeLimit {
            max_steps: exp.eval.max_episode_steps,
        });
    }
    let bridge = BridgeOptions {
        log_prefix: format!("rank {rank} eval "),
        render,
    };
    let mut envs = VecEnv::with_bridge(&spec, &seeds, 1, &bridge)
        .with_context(|| format!("cannot build the evaluation environments of rank {rank}"))?;
    envs.freeze_normalizers();
    Ok(envs)
}

impl Share {
    /// Resets the environments and steps them all until each has finished an episode; each
    /// one's first. `(deterministic, recording)`: how the policy acts, and where the first
    /// environment draws each step of its episode, if anywhere.
    fn play_one_each(
        &mut self,
        (deterministic, mut recording): (bool, Option<&mut Recording>),
    ) -> Result<Vec<Episode>> {
        let Share {
            envs,
            cast,
            policy_of_row,
        } = self;
        let n = envs.num_envs();
        let mut first: Vec<Option<Episode>> = vec![None; n];
        envs.reset();
        while first.iter().any(Option::is_none) {
            if let Some(r) = recording.as_deref_mut()
                && first[0].is_none()
            {
                draw(envs, r)?;
            }
            let actions = cast.act(envs, deterministic)?;
            envs.step(&actions)?;
            cast.stepped(envs);
            for e in envs.drain_episodes() {
                let policy = policy_of_row[e.env_index];
                first[e.env_index].get_or_insert(Episode::of(&e, policy));
            }
        }
        Ok(first.into_iter().flatten().collect())
    }
}

/// The first environment's frame now, while the recording has room.
fn draw(envs: &VecEnv, recording: &mut Recording) -> Result<()> {
    let held: usize = recording.frames.iter().map(Vec::len).sum();
    if recording.frames.len() >= VIDEO_FRAMES || held >= VIDEO_BYTES {
        return Ok(());
    }
    if let Some(frame) = envs.render_rgb(0)? {
        (recording.width, recording.height) = (frame.width, frame.height);
        recording.frames.push(frame.pixels);
    }
    Ok(())
}

fn summarise(episodes: Vec<Episode>) -> Result<Evaluated> {
    let scores: Vec<f64> = episodes.iter().map(|e| e.score).collect();
    let lengths: Vec<f64> = episodes.iter().map(|e| e.length).collect();
    let (mean, min, max) = metrics::summary(&scores).context("an evaluation played no episode")?;
    let variance = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / scores.len() as f64;
    let length_mean = metrics::summary(&lengths).map_or(0.0, |s| s.0);
    Ok(Evaluated {
        episodes,
        score: (mean, variance.sqrt(), min, max),
        length_mean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_split_over_ranks_cover_each_index_once() {
        for (episodes, world) in [(10, 1), (10, 3), (2, 4), (7, 7)] {
            let mut next = 0;
            for rank in 0..world {
                let (count, first) = share(episodes, world, rank);
                assert_eq!(first, next, "{episodes} over {world}, rank {rank}");
                next += count;
            }
            assert_eq!(next, episodes);
        }
        assert_eq!(share(10, 3, 0), (4, 0));
        assert_eq!(share(2, 4, 3), (0, 2));
    }
}

//! Statistics across ranks: every rank's finished episodes are gathered to all ranks (so rank 0
//! can summarise the whole run and every rank agrees on recent returns), and per-rank scalars
//! are reduced to mean/min/max.

use std::collections::VecDeque;

use anyhow::{Result, bail};
use tch::Tensor;

use crate::dist::{ProcessGroup, ReduceOp};

/// A finished episode as reported in summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub ret: f64,
    pub length: f64,
    /// The game's own score (before reward clipping, across all lives).
    pub score: f64,
    /// The values of the experiment's `info-keys` at the episode's end, in the keys' order
    /// (empty without keys).
    pub info: Vec<f64>,
    /// The index of the policy that played it, in the run's policies (0 with one policy).
    pub policy: usize,
}

impl Episode {
    /// What the environments report of a finished episode, as summaries keep it.
    /// `policy` played it.
    pub fn of(stats: &tandem_env::EpisodeStats, policy: usize) -> Episode {
        Episode {
            ret: stats.episode_return,
            length: stats.length as f64,
            score: stats.raw_score,
            info: stats.info.clone(),
            policy,
        }
    }

    /// The numbers a gathered episode is sent as: return, length, score, policy, then its info
    /// values.
    fn row(&self) -> impl Iterator<Item = f64> + '_ {
        [self.ret, self.length, self.score, self.policy as f64]
            .into_iter()
            .chain(self.info.iter().copied())
    }

    /// [`Episode::row`] read back.
    fn from_row(row: &[f64]) -> Episode {
        Episode {
            ret: row[0],
            length: row[1],
            score: row[2],
            policy: row[3] as usize,
            info: row[4..].to_vec(),
        }
    }
}

/// Every rank's episodes of this update, in rank order. All ranks get the same list. Each
/// episode holds `info_keys` info values (the experiment's, the same on every rank).
pub fn gather_episodes(
    pg: Option<&ProcessGroup>,
    mine: &[Episode],
    info_keys: usize,
) -> Result<Vec<Episode>> {
    if let Some(e) = mine.iter().find(|e| e.info.len() != info_keys) {
        bail!(
            "an episode came with {} info values where the experiment's info-keys name {info_keys}",
            e.info.len()
        );
    }
    let Some(pg) = pg else {
        return Ok(mine.to_vec());
    };
    if pg.world_size() == 1 {
        return Ok(mine.to_vec());
    }
    // Counts first, so every rank can pad to the same length (collectives need equal sizes).
    let counts = pg.all_gather_agreed(&Tensor::from_slice(&[mine.len() as i64]))?;
    let counts: Vec<usize> = counts
        .iter()
        .map(|t| t.int64_value(&[0]) as usize)
        .collect();
    let longest = counts.iter().copied().max().unwrap_or(0);
    if longest == 0 {
        return Ok(Vec::new());
    }
    let width = 4 + info_keys;
    let mut flat = vec![0f64; longest * width];
    for (row, e) in flat.chunks_exact_mut(width).zip(mine) {
        for (slot, v) in row.iter_mut().zip(e.row()) {
            *slot = v;
        }
    }
    // Every rank pads to the same gathered maximum.
    let all = pg.all_gather_agreed(&Tensor::from_slice(&flat))?;
    let mut out = Vec::new();
    for (rank, t) in all.iter().enumerate() {
        let v = Vec::<f64>::try_from(t)?;
        out.extend(
            v.chunks_exact(width)
                .take(counts[rank])
                .map(Episode::from_row),
        );
    }
    Ok(out)
}

/// Each of `names`' mean game score over the `episodes` its agents played, tagged
/// `policy/<name>/<tag>`; a policy without episodes gets no scalar.
pub fn policy_score_means(names: &[&str], episodes: &[Episode], tag: &str) -> Vec<(String, f64)> {
    let mut means = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let scores: Vec<f64> = (episodes.iter().filter(|e| e.policy == i))
            .map(|e| e.score)
            .collect();
        if let Some((mean, ..)) = summary(&scores) {
            means.push((format!("policy/{name}/{tag}"), mean));
        }
    }
    means
}

/// Mean, min and max of one value per rank.
pub fn reduce_per_rank(pg: Option<&ProcessGroup>, value: f64) -> Result<(f64, f64, f64)> {
    let Some(pg) = pg else {
        return Ok((value, value, value));
    };
    let mut t = [
        Tensor::from_slice(&[value]),
        Tensor::from_slice(&[value]),
        Tensor::from_slice(&[value]),
    ];
    let world = pg.world_size() as f64;
    pg.all_reduce(&mut t[0..1], ReduceOp::Sum)?;
    pg.all_reduce(&mut t[1..2], ReduceOp::Min)?;
    pg.all_reduce(&mut t[2..3], ReduceOp::Max)?;
    Ok((
        t[0].double_value(&[0]) / world,
        t[1].double_value(&[0]),
        t[2].double_value(&[0]),
    ))
}

/// How many of a run's newest episodes its final score averages: [`final_score`].
pub const FINAL_SCORE_EPISODES: usize = 100;

/// The rule of [`final_score`] in words, as every output that reports it names it (the console,
/// `summary.json`'s `final_score_rule`, and through that `tandem sweep` and `tandem plot`).
pub const FINAL_SCORE_RULE: &str = "mean game score of the last 100 episodes";

/// A run's one final score: the mean game score (untouched rewards) of its newest
/// [`FINAL_SCORE_EPISODES`] episodes, or of all it finished if fewer; `None` before the first.
/// The console shows it, `summary.json` stores it (`final_score`), the sweep's table and
/// `tandem plot` read it from there, and `episode/recent_score_mean` logs it every interval.
pub fn final_score(recent: &RecentEpisodes) -> Option<f64> {
    recent.mean_score_last(FINAL_SCORE_EPISODES)
}

/// How many episodes [`final_score`] averages now (fewer than [`FINAL_SCORE_EPISODES`] early on).
pub fn final_score_window(recent: &RecentEpisodes) -> usize {
    recent.newest(FINAL_SCORE_EPISODES).len()
}

/// The last `capacity` episodes of the whole run.
#[derive(Debug, Clone)]
pub struct RecentEpisodes {
    capacity: usize,
    episodes: VecDeque<Episode>,
    total: u64,
}

impl RecentEpisodes {
    pub fn new(capacity: usize) -> Self {
        RecentEpisodes {
            capacity,
            episodes: VecDeque::with_capacity(capacity),
            total: 0,
        }
    }

    pub fn extend(&mut self, new: &[Episode]) {
        for e in new {
            if self.episodes.len() == self.capacity {
                self.episodes.pop_front();
            }
            self.episodes.push_back(e.clone());
            self.total += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The window's episodes, oldest first (what a checkpoint carries).
    pub fn window(&self) -> Vec<Episode> {
        self.episodes.iter().cloned().collect()
    }

    /// Continues a resumed run's counts: the run's total so far and its newest episodes.
    pub fn restore(&mut self, total: u64, newest: &[Episode]) {
        self.episodes.clear();
        self.extend(&newest[newest.len().saturating_sub(self.capacity)..]);
        self.total = total;
    }

    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    pub fn mean_return(&self) -> Option<f64> {
        mean(self.episodes.iter().map(|e| e.ret))
    }

    /// The mean game score of policy `policy`'s newest `n` episodes of the window (fewer if
    /// fewer finished); `None` before its first.
    pub fn policy_score_last(&self, policy: usize, n: usize) -> Option<f64> {
        let played = self.episodes.iter().rev().filter(|e| e.policy == policy);
        let scores: Vec<f64> = played.take(n).map(|e| e.score).collect();
        mean(scores.into_iter())
    }

    /// Mean return of the newest `n` episodes (fewer if fewer finished).
    pub fn mean_return_last(&self, n: usize) -> Option<f64> {
        mean(self.newest(n).map(|e| e.ret))
    }

    /// The newest `n` episodes (fewer if fewer finished), oldest first.
    fn newest(&self, n: usize) -> impl ExactSizeIterator<Item = &Episode> {
        self.episodes
            .iter()
            .skip(self.episodes.len().saturating_sub(n))
    }

    pub fn mean_score(&self) -> Option<f64> {
        mean(self.episodes.iter().map(|e| e.score))
    }

    /// The mean of each info value (the experiment's `info-keys`, in order) over the window;
    /// empty before the first episode.
    pub fn mean_info(&self) -> Vec<f64> {
        mean_info(self.episodes.iter())
    }

    /// Mean game score (untouched rewards) of the newest `n` episodes: the figure to compare
    /// when a wrapper (normalize-reward) changes the rewards the return sums.
    pub fn mean_score_last(&self, n: usize) -> Option<f64> {
        mean(self.newest(n).map(|e| e.score))
    }
}

/// The mean of each info value (the experiment's `info-keys`, in order) over `episodes`, which
/// all hold as many; empty without episodes.
pub fn mean_info<'a>(episodes: impl ExactSizeIterator<Item = &'a Episode> + Clone) -> Vec<f64> {
    let keys = episodes.clone().next().map_or(0, |e| e.info.len());
    (0..keys)
        .filter_map(|k| mean(episodes.clone().map(|e| e.info[k])))
        .collect()
}

fn mean(values: impl ExactSizeIterator<Item = f64>) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        None
    } else {
        Some(values.sum::<f64>() / n as f64)
    }
}

/// Mean, min and max of a list (None when empty).
pub fn summary(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((mean, min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_score_is_the_mean_of_the_newest_100_episodes_and_says_so() {
        assert!(FINAL_SCORE_RULE.contains(&format!(" {FINAL_SCORE_EPISODES} ")));
        let mut recent = RecentEpisodes::new(FINAL_SCORE_EPISODES);
        assert_eq!(final_score(&recent), None);
        let episode = |score| Episode {
            ret: 0.0,
            length: 1.0,
            score,
            info: Vec::new(),
            policy: 0,
        };
        recent.extend(&[episode(1.0), episode(3.0)]);
        assert_eq!(
            (final_score(&recent), final_score_window(&recent)),
            (Some(2.0), 2)
        );
        // 150 more of 10: the oldest two and 48 more fall out of the window.
        recent.extend(&vec![episode(10.0); 150]);
        assert_eq!(
            (final_score(&recent), final_score_window(&recent)),
            (Some(10.0), 100)
        );
        recent.extend(&vec![episode(20.0); 50]);
        assert_eq!(final_score(&recent), Some(15.0));
        assert_eq!(final_score(&recent), recent.mean_score());
    }

    #[test]
    fn info_values_travel_with_their_episode_and_average_over_the_window() {
        let episode = |info: &[f64]| Episode {
            ret: 1.0,
            length: 2.0,
            score: 3.0,
            info: info.to_vec(),
            policy: 1,
        };
        let row: Vec<f64> = episode(&[1.0, 7.5]).row().collect();
        assert_eq!(row, [1.0, 2.0, 3.0, 1.0, 1.0, 7.5]);
        assert_eq!(Episode::from_row(&row), episode(&[1.0, 7.5]));
        let mut recent = RecentEpisodes::new(2);
        assert!(recent.mean_info().is_empty());
        recent.extend(&[
            episode(&[1.0, 10.0]),
            episode(&[0.0, 20.0]),
            episode(&[1.0, 40.0]),
        ]);
        // A window of two: the oldest fell out.
        assert_eq!(recent.mean_info(), [0.5, 30.0]);
        let refused = gather_episodes(None, &[episode(&[1.0])], 2).unwrap_err();
        assert!(refused.to_string().contains("1 info values"), "{refused}");
    }
}

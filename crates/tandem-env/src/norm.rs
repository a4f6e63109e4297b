//! Running mean/variance statistics for the normalize-obs and normalize-reward
//! wrappers, in a form the distributed runtime can all-reduce and checkpoints can save.
//!
//! Statistics flow in three levels so that results do not depend on thread scheduling:
//! each environment's [`Normalizer`] collects the values it saw during one batch step
//! (`pending`); [`crate::VecEnv`] merges those in environment order into its rank-local
//! delta after every step, and normalises with `synced ⊕ local delta`; the distributed
//! runtime periodically all-reduces the local deltas of all ranks and folds them into
//! `synced` (see `VecEnv::normalizer_deltas` / `VecEnv::apply_normalizer_sync`).

/// Count, per-element mean and per-element population variance of the values seen.
#[derive(Debug, Clone, PartialEq)]
pub struct NormStats {
    pub count: f64,
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

impl NormStats {
    /// Statistics of no values over `dim` elements (mean 0, variance 1, so normalising
    /// with them changes nothing).
    pub fn empty(dim: usize) -> Self {
        NormStats {
            count: 0.0,
            mean: vec![0.0; dim],
            var: vec![1.0; dim],
        }
    }

    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// The mean and `1 / sqrt(var + epsilon)` as the f32 values a normaliser computes with:
    /// `(x - mean) * inv_std` (an exported policy applies them by the same operations).
    pub fn f32_mean_and_inv_std(&self, epsilon: f64) -> (Vec<f32>, Vec<f32>) {
        let mean = self.mean.iter().map(|&m| m as f32).collect();
        let inv_std = (self.var.iter())
            .map(|&v| (1.0 / (v + epsilon).sqrt()) as f32)
            .collect();
        (mean, inv_std)
    }

    /// Adds one value vector (Welford's update).
    pub fn push(&mut self, values: impl IntoIterator<Item = f64>) {
        self.count += 1.0;
        let n = self.count;
        let first = n == 1.0;
        for ((m, v), x) in self.mean.iter_mut().zip(self.var.iter_mut()).zip(values) {
            if first {
                *m = x;
                *v = 0.0;
            } else {
                let delta = x - *m;
                *m += delta / n;
                *v = (*v * (n - 1.0) + delta * (x - *m)) / n;
            }
        }
    }

    /// Combines the statistics of another disjoint set of values into these (Chan et
    /// al.'s parallel update); the result is what pushing all values would give, up to
    /// rounding.
    pub fn merge(&mut self, other: &NormStats) {
        assert_eq!(
            self.dim(),
            other.dim(),
            "merging normaliser statistics of different sizes"
        );
        if other.count == 0.0 {
            return;
        }
        if self.count == 0.0 {
            *self = other.clone();
            return;
        }
        let total = self.count + other.count;
        let weight = other.count / total;
        for i in 0..self.mean.len() {
            let delta = other.mean[i] - self.mean[i];
            let m2 = self.var[i] * self.count
                + other.var[i] * other.count
                + delta * delta * self.count * other.count / total;
            self.mean[i] += delta * weight;
            self.var[i] = m2 / total;
        }
        self.count = total;
    }

    /// Flattens to `[count, sum_0.., sum_of_squares_0..]`: element-wise sums of these
    /// vectors over ranks (an all-reduce SUM) give the sums of the union.
    pub fn to_sums(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(1 + 2 * self.dim());
        out.push(self.count);
        out.extend(self.mean.iter().map(|m| m * self.count));
        out.extend(
            self.mean
                .iter()
                .zip(&self.var)
                .map(|(m, v)| (v + m * m) * self.count),
        );
        out
    }

    /// Inverse of [`NormStats::to_sums`]; `None` if the length is not `1 + 2 * dim`.
    pub fn from_sums(sums: &[f64]) -> Option<Self> {
        if sums.is_empty() || !(sums.len() - 1).is_multiple_of(2) {
            return None;
        }
        let dim = (sums.len() - 1) / 2;
        let count = sums[0];
        if count <= 0.0 {
            return Some(NormStats::empty(dim));
        }
        let mean: Vec<f64> = sums[1..=dim].iter().map(|s| s / count).collect();
        let var = sums[dim + 1..]
            .iter()
            .zip(&mean)
            .map(|(sq, m)| (sq / count - m * m).max(0.0))
            .collect();
        Some(NormStats { count, mean, var })
    }
}

/// What a normaliser normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKind {
    Observation,
    /// Rewards, scaled by the standard deviation of the discounted return.
    Reward,
}

/// The statistics state of one normalising wrapper in one environment.
#[derive(Debug, Clone)]
pub struct Normalizer {
    pub kind: NormKind,
    /// Statistics used to normalise (shared by the whole batch when managed by a VecEnv).
    current: NormStats,
    /// Values seen since the manager last collected them.
    pending: NormStats,
    /// When a VecEnv manages the statistics it merges `pending` itself; a lone
    /// environment folds its values straight into `current`.
    pub(crate) managed: bool,
    /// False freezes the statistics (evaluation).
    pub(crate) update: bool,
    epsilon: f64,
    mean32: Vec<f32>,
    inv_std32: Vec<f32>,
}

crate::snapshot::persist_fields!(NormStats { count, mean, var });

impl crate::snapshot::Persist for Normalizer {
    fn save(&self, out: &mut Vec<u8>) {
        crate::snapshot::save_param(&self.epsilon, out);
        self.current.save(out);
        self.pending.save(out);
        self.managed.save(out);
        self.update.save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), crate::EnvError> {
        crate::snapshot::expect_same(&self.epsilon, "normaliser epsilon", input)?;
        let dim = self.current.dim();
        self.current.load(input)?;
        self.pending.load(input)?;
        self.managed.load(input)?;
        self.update.load(input)?;
        for stats in [&self.current, &self.pending] {
            if stats.mean.len() != dim || stats.var.len() != dim {
                return Err(crate::snapshot::snapshot_error(format!(
                    "normaliser statistics of {} means and {} variances in the snapshot, this normaliser has dimension {dim}",
                    stats.mean.len(),
                    stats.var.len()
                )));
            }
        }
        self.refresh_cache();
        Ok(())
    }
}

impl Normalizer {
    pub fn new(kind: NormKind, dim: usize, epsilon: f64) -> Self {
        let mut n = Normalizer {
            kind,
            current: NormStats::empty(dim),
            pending: NormStats::empty(dim),
            managed: false,
            update: true,
            epsilon,
            mean32: Vec::new(),
            inv_std32: Vec::new(),
        };
        n.refresh_cache();
        n
    }

    pub fn current(&self) -> &NormStats {
        &self.current
    }

    pub(crate) fn set_current(&mut self, stats: &NormStats) {
        self.current.clone_from(stats);
        self.refresh_cache();
    }

    pub(crate) fn take_pending(&mut self) -> NormStats {
        let dim = self.pending.dim();
        std::mem::replace(&mut self.pending, NormStats::empty(dim))
    }

    fn refresh_cache(&mut self) {
        (self.mean32, self.inv_std32) = self.current.f32_mean_and_inv_std(self.epsilon);
    }

    /// Records one value vector.
    pub(crate) fn observe(&mut self, values: impl IntoIterator<Item = f64>) {
        if !self.update {
            return;
        }
        if self.managed {
            self.pending.push(values);
        } else {
            self.current.push(values);
            self.refresh_cache();
        }
    }

    /// `(x - mean) / sqrt(var + epsilon)` element-wise, clipped to `[-clip, clip]`.
    pub(crate) fn normalize(&self, values: &mut [f32], clip: f32) {
        for ((x, m), s) in values.iter_mut().zip(&self.mean32).zip(&self.inv_std32) {
            *x = ((*x - m) * s).clamp(-clip, clip);
        }
    }

    /// `x / sqrt(var + epsilon)` (rewards keep their sign), clipped to `[-clip, clip]`.
    pub(crate) fn scale(&self, x: f32, clip: f32) -> f32 {
        (x * self.inv_std32[0]).clamp(-clip, clip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_of(rows: &[[f64; 2]]) -> NormStats {
        let mut s = NormStats::empty(2);
        for r in rows {
            s.push(r.iter().copied());
        }
        s
    }

    #[test]
    fn push_matches_direct_mean_and_variance() {
        let s = stats_of(&[[1.0, 10.0], [2.0, 10.0], [6.0, 13.0]]);
        assert_eq!(s.count, 3.0);
        assert!((s.mean[0] - 3.0).abs() < 1e-12);
        assert!((s.var[0] - 14.0 / 3.0).abs() < 1e-12);
        assert!((s.var[1] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn merge_and_sums_agree_with_pushing_everything() {
        let rows = [[1.0, -2.0], [4.0, 0.5], [2.5, 3.0], [-1.0, 8.0], [0.0, 0.0]];
        let all = stats_of(&rows);
        let mut a = stats_of(&rows[..2]);
        a.merge(&stats_of(&rows[2..]));
        let sums: Vec<f64> = stats_of(&rows[..3])
            .to_sums()
            .iter()
            .zip(stats_of(&rows[3..]).to_sums())
            .map(|(x, y)| x + y)
            .collect();
        let b = NormStats::from_sums(&sums).unwrap();
        for s in [&a, &b] {
            assert_eq!(s.count, all.count);
            for i in 0..2 {
                assert!((s.mean[i] - all.mean[i]).abs() < 1e-9);
                assert!((s.var[i] - all.var[i]).abs() < 1e-9);
            }
        }
        let mut empty = NormStats::empty(2);
        empty.merge(&all);
        assert_eq!(empty, all);
        assert!(NormStats::from_sums(&[1.0, 2.0]).is_none());
    }
}

//! keep-obs: observes only chosen entries of a vector observation (a CartPole without its
//! velocities is a task that needs memory).

use super::{forward_to_inner, observation_methods, wrapper_snapshot_methods};
use crate::env::Env;
use crate::space::{ObsBuf, ObsSpace, ObsStore};

/// The entries of a `mask` (bit i: keep entry i), in ascending order.
pub fn kept_indices(mask: u64) -> Vec<usize> {
    (0..64).filter(|i| mask >> i & 1 == 1).collect()
}

/// Passes on the entries of the inner vector observation that `mask` keeps, in order.
pub struct KeepObs {
    inner: Box<dyn Env>,
    mask: u64,
    kept: Vec<usize>,
    input: ObsStore,
    output: ObsSpace,
}

impl KeepObs {
    /// `output` is the observation space [`super::output_space`] gave for `mask` on `inner`.
    pub fn new(inner: Box<dyn Env>, mask: u64, output: ObsSpace) -> Self {
        let input = inner.observation_space();
        KeepObs {
            inner,
            mask,
            kept: kept_indices(mask),
            input: ObsStore::zeros(&input),
            output,
        }
    }

    fn select(&self, obs: &mut ObsBuf<'_>) {
        match (&self.input, obs) {
            (ObsStore::F32(all), ObsBuf::F32(out)) => {
                for (o, &i) in out.iter_mut().zip(&self.kept) {
                    *o = all[i];
                }
            }
            (ObsStore::U8(all), ObsBuf::U8(out)) => {
                for (o, &i) in out.iter_mut().zip(&self.kept) {
                    *o = all[i];
                }
            }
            (ObsStore::U8(all), ObsBuf::F32(out)) => {
                for (o, &i) in out.iter_mut().zip(&self.kept) {
                    *o = f32::from(all[i]);
                }
            }
            // An f32 inner observation into a u8 buffer does not match this wrapper's space;
            // skipped buffers want nothing.
            _ => {}
        }
    }
}

impl Env for KeepObs {
    observation_methods!(select);
    wrapper_snapshot_methods!("keep-obs", params: [mask], state: []);
    forward_to_inner!(with_normalizers);
}

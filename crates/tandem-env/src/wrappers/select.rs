//! keep-obs: observes only chosen entries of a vector observation (a CartPole without its
//! velocities is a task that needs memory).

use super::{forward_to_inner, wrapper_snapshot_methods};
use crate::env::{Env, Step};
use crate::space::{Action, ActionSpace, ObsBuf, ObsSpace, ObsStore};

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
    fn observation_space(&self) -> ObsSpace {
        self.output
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.inner
            .reset(seed, obs.scratch_if_wanted(self.input.buf()));
        self.select(&mut obs);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        let step = self
            .inner
            .step(action, obs.scratch_if_wanted(self.input.buf()));
        self.select(&mut obs);
        step
    }
    wrapper_snapshot_methods!("keep-obs", params: [mask], state: []);
    forward_to_inner!(with_normalizers);
}

//! The buffer an environment writes its observation into, the action it receives, and the
//! batches of actions [`crate::VecEnv`] steps with. The spaces themselves are tandem-spec's.

pub use tandem_spec::{ActionSpace, Dtype, Layout, ObsShape, ObsSpace};

/// Where an environment writes an observation. Its variant must match the
/// environment's [`ObsSpace::dtype`] and its length [`ObsSpace::len`];
/// [`ObsBuf::Skip`] tells the environment the caller will not look at this
/// observation (e.g. the skipped frames of frame-skip), so it may avoid producing it.
#[derive(Debug)]
pub enum ObsBuf<'a> {
    U8(&'a mut [u8]),
    F32(&'a mut [f32]),
    Skip,
}

impl ObsBuf<'_> {
    /// A shorter-lived copy of this buffer handle, for passing it down a wrapper chain.
    pub fn reborrow(&mut self) -> ObsBuf<'_> {
        match self {
            ObsBuf::U8(b) => ObsBuf::U8(b),
            ObsBuf::F32(b) => ObsBuf::F32(b),
            ObsBuf::Skip => ObsBuf::Skip,
        }
    }

    /// The sub-buffer `start..end` (a skip stays a skip).
    pub fn slice(&mut self, start: usize, end: usize) -> ObsBuf<'_> {
        match self {
            ObsBuf::U8(b) => ObsBuf::U8(&mut b[start..end]),
            ObsBuf::F32(b) => ObsBuf::F32(&mut b[start..end]),
            ObsBuf::Skip => ObsBuf::Skip,
        }
    }

    pub fn is_skip(&self) -> bool {
        matches!(self, ObsBuf::Skip)
    }

    /// `scratch` if this buffer wants an observation, else `Skip`: where a wrapper that
    /// converts observations has its inner environment write.
    pub fn scratch_if_wanted<'b>(&self, scratch: ObsBuf<'b>) -> ObsBuf<'b> {
        if self.is_skip() {
            ObsBuf::Skip
        } else {
            scratch
        }
    }

    /// Writes the given values, converting to the buffer's element type (u8 buffers
    /// saturate-round; intended for values already in 0..=255).
    pub fn write_f32(&mut self, values: &[f32]) {
        match self {
            ObsBuf::F32(b) => b.copy_from_slice(values),
            ObsBuf::U8(b) => {
                for (d, &v) in b.iter_mut().zip(values) {
                    *d = v.round().clamp(0.0, 255.0) as u8;
                }
            }
            ObsBuf::Skip => {}
        }
    }

    /// Writes the given pixels, converting to the buffer's element type.
    pub fn write_u8(&mut self, values: &[u8]) {
        match self {
            ObsBuf::U8(b) => b.copy_from_slice(values),
            ObsBuf::F32(b) => {
                for (d, &v) in b.iter_mut().zip(values) {
                    *d = f32::from(v);
                }
            }
            ObsBuf::Skip => {}
        }
    }
}

/// A space is recorded as its kind (0 discrete, 1 box, 2 multi-discrete), then the count, the
/// bounds or the components' counts.
impl crate::snapshot::Persist for ActionSpace {
    fn save(&self, out: &mut Vec<u8>) {
        match self {
            ActionSpace::Discrete { n } => {
                out.push(0);
                n.save(out);
            }
            ActionSpace::Box { low, high } => {
                out.push(1);
                low.save(out);
                high.save(out);
            }
            ActionSpace::MultiDiscrete { nvec } => {
                out.push(2);
                nvec[..].save(out);
            }
        }
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), crate::EnvError> {
        let kind = crate::snapshot::take(input, 1, "action space kind")?[0];
        *self = match kind {
            0 => {
                let mut n = 0usize;
                n.load(input)?;
                ActionSpace::Discrete { n }
            }
            1 => {
                let (mut low, mut high) = (Vec::new(), Vec::new());
                low.load(input)?;
                high.load(input)?;
                ActionSpace::Box {
                    low: low.into(),
                    high: high.into(),
                }
            }
            2 => {
                let mut nvec: Vec<usize> = Vec::new();
                nvec.load(input)?;
                ActionSpace::MultiDiscrete { nvec: nvec.into() }
            }
            other => {
                return Err(crate::snapshot::snapshot_error(format!(
                    "corrupt: action space kind {other}"
                )));
            }
        };
        Ok(())
    }
}

/// One action as an environment receives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    Discrete(usize),
    Box(&'a [f32]),
    /// One index per component of a multi-discrete space.
    MultiDiscrete(&'a [i64]),
}

impl<'a> Action<'a> {
    /// The index of a discrete action. [`crate::VecEnv`] hands an environment only
    /// actions of its own space, so a discrete game never sees a box action.
    pub fn index(self) -> usize {
        match self {
            Action::Discrete(index) => index,
            other => unreachable!("a discrete environment was given the action {other:?}"),
        }
    }

    /// The values of a box action (see [`Action::index`] for why this cannot fail).
    pub fn values(self) -> &'a [f32] {
        match self {
            Action::Box(values) => values,
            other => unreachable!("a box environment was given the action {other:?}"),
        }
    }
}

/// An owned observation of one space, used by wrappers that keep frames.
#[derive(Debug, Clone, PartialEq)]
pub enum ObsStore {
    U8(Vec<u8>),
    F32(Vec<f32>),
}

/// An observation buffer keeps the element type and length it was built with.
impl crate::snapshot::Persist for ObsStore {
    fn save(&self, out: &mut Vec<u8>) {
        match self {
            ObsStore::U8(v) => {
                out.push(0);
                crate::snapshot::save_buffer(v, out);
            }
            ObsStore::F32(v) => {
                out.push(1);
                crate::snapshot::save_buffer(v, out);
            }
        }
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), crate::EnvError> {
        let kind = crate::snapshot::take(input, 1, "observation buffer type")?[0];
        match (kind, self) {
            (0, ObsStore::U8(v)) => crate::snapshot::load_buffer(v, "u8 observation buffer", input),
            (1, ObsStore::F32(v)) => {
                crate::snapshot::load_buffer(v, "f32 observation buffer", input)
            }
            (kind @ (0 | 1), this) => Err(crate::snapshot::snapshot_error(format!(
                "observation buffer holds {} in the snapshot, {} in this environment",
                if kind == 0 { "u8" } else { "f32" },
                if matches!(this, ObsStore::U8(_)) {
                    "u8"
                } else {
                    "f32"
                }
            ))),
            (other, _) => Err(crate::snapshot::snapshot_error(format!(
                "corrupt: observation buffer type {other}"
            ))),
        }
    }
}

impl ObsStore {
    pub fn zeros(space: &ObsSpace) -> Self {
        match space.dtype {
            Dtype::U8 => ObsStore::U8(vec![0; space.len()]),
            Dtype::F32 => ObsStore::F32(vec![0.0; space.len()]),
        }
    }

    pub fn buf(&mut self) -> ObsBuf<'_> {
        match self {
            ObsStore::U8(v) => ObsBuf::U8(v),
            ObsStore::F32(v) => ObsBuf::F32(v),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ObsStore::U8(v) => v.len(),
            ObsStore::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies this observation into `out` (converting element types if needed).
    pub fn write_to(&self, out: &mut ObsBuf<'_>) {
        match self {
            ObsStore::U8(v) => out.write_u8(v),
            ObsStore::F32(v) => out.write_f32(v),
        }
    }
}

/// The actions of one batch step, one row per environment: what [`crate::VecEnv`] steps with.
/// A discrete space takes one index per environment, a box one row of `dim` values, a
/// multi-discrete space one row of an index per component (`Discrete`'s slice, `dim` a row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Actions<'a> {
    Discrete(&'a [i64]),
    Box(&'a [f32]),
}

/// Slices, vectors and arrays of indices are discrete batches; of floats, box batches.
macro_rules! actions_from {
    ($element:ty => $variant:ident) => {
        impl<'a> From<&'a [$element]> for Actions<'a> {
            fn from(rows: &'a [$element]) -> Self {
                Actions::$variant(rows)
            }
        }
        impl<'a> From<&'a Vec<$element>> for Actions<'a> {
            fn from(rows: &'a Vec<$element>) -> Self {
                Actions::$variant(rows)
            }
        }
        impl<'a, const N: usize> From<&'a [$element; N]> for Actions<'a> {
            fn from(rows: &'a [$element; N]) -> Self {
                Actions::$variant(rows)
            }
        }
    };
}
actions_from!(i64 => Discrete);
actions_from!(f32 => Box);

/// The actions of one step of a group of environments, checked against the space.
#[derive(Clone, Copy)]
pub(crate) enum GroupActions<'a> {
    Discrete(&'a [i64]),
    Box { values: &'a [f32], dim: usize },
    MultiDiscrete { indices: &'a [i64], dim: usize },
}

impl<'a> GroupActions<'a> {
    /// The action of the group's `k`-th environment.
    pub(crate) fn get(self, k: usize) -> Action<'a> {
        match self {
            GroupActions::Discrete(indices) => Action::Discrete(indices[k] as usize),
            GroupActions::Box { values, dim } => Action::Box(&values[k * dim..(k + 1) * dim]),
            GroupActions::MultiDiscrete { indices, dim } => {
                Action::MultiDiscrete(&indices[k * dim..(k + 1) * dim])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_conversions_round_and_saturate() {
        let mut bytes = [0u8; 3];
        ObsBuf::U8(&mut bytes).write_f32(&[1.6, -3.0, 300.0]);
        assert_eq!(bytes, [2, 0, 255]);
        let mut floats = [0f32; 2];
        ObsBuf::F32(&mut floats).write_u8(&[7, 255]);
        assert_eq!(floats, [7.0, 255.0]);
    }
}

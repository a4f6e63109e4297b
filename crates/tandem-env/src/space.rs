//! Observation spaces (shape, element type, image layout), the buffer an environment
//! writes its observation into, and action spaces with the action an environment receives.

use std::fmt;

/// Element type of an observation inside a wrapper chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// Raw pixels 0..=255 (game frames and image wrappers working on them).
    U8,
    F32,
}

/// Memory order of an image observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Height, width, channel (interleaved pixels, as ALE and OpenCV produce).
    Hwc,
    /// Channel, height, width (planar, as libtorch convolutions consume).
    Chw,
}

/// Shape of an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObsShape {
    /// A flat vector of `len` values.
    Vector { len: usize },
    /// An image; `layout` says how it is stored.
    Image {
        height: usize,
        width: usize,
        channels: usize,
        layout: Layout,
    },
}

/// What an environment (or a wrapper chain) writes on every reset and step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObsSpace {
    pub shape: ObsShape,
    pub dtype: Dtype,
}

impl ObsSpace {
    pub fn vector(len: usize, dtype: Dtype) -> Self {
        ObsSpace {
            shape: ObsShape::Vector { len },
            dtype,
        }
    }

    pub fn image(
        height: usize,
        width: usize,
        channels: usize,
        layout: Layout,
        dtype: Dtype,
    ) -> Self {
        ObsSpace {
            shape: ObsShape::Image {
                height,
                width,
                channels,
                layout,
            },
            dtype,
        }
    }

    /// Number of values in one observation.
    pub fn len(&self) -> usize {
        match self.shape {
            ObsShape::Vector { len } => len,
            ObsShape::Image {
                height,
                width,
                channels,
                ..
            } => height * width * channels,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape a network receives from [`crate::VecEnv`] for this space: `[len]` for
    /// vectors, `[C, H, W]` for images.
    pub fn network_shape(&self) -> Vec<usize> {
        match self.shape {
            ObsShape::Vector { len } => vec![len],
            ObsShape::Image {
                height,
                width,
                channels,
                ..
            } => vec![channels, height, width],
        }
    }

    /// True for images of raw u8 pixels (0..=255), which image networks scale.
    pub fn is_pixel_image(&self) -> bool {
        self.dtype == Dtype::U8 && matches!(self.shape, ObsShape::Image { .. })
    }

    /// True for single-channel images, whose HWC and CHW layouts coincide.
    pub(crate) fn is_single_channel_image(&self) -> bool {
        matches!(self.shape, ObsShape::Image { channels: 1, .. })
    }
}

impl fmt::Display for ObsSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dtype = match self.dtype {
            Dtype::U8 => "u8",
            Dtype::F32 => "f32",
        };
        match self.shape {
            ObsShape::Vector { len } => write!(f, "vector of {len} {dtype}"),
            ObsShape::Image {
                height,
                width,
                channels,
                layout: Layout::Hwc,
            } => {
                write!(
                    f,
                    "{dtype} image {height}x{width}x{channels} (height x width x channels)"
                )
            }
            ObsShape::Image {
                height,
                width,
                channels,
                layout: Layout::Chw,
            } => {
                write!(
                    f,
                    "{dtype} image {channels}x{height}x{width} (channels x height x width)"
                )
            }
        }
    }
}

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

/// What an environment accepts as an action.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionSpace {
    /// One of `n` actions, `0..n`.
    Discrete { n: usize },
    /// A vector of `low.len()` f32 values with bounds `low[i] <= a[i] <= high[i]`. The
    /// environment decides what a value out of bounds does (gymnasium's games clip);
    /// [`crate::VecEnv`] refuses values that are not finite.
    Box { low: Vec<f32>, high: Vec<f32> },
}

impl ActionSpace {
    pub fn discrete(n: usize) -> Self {
        ActionSpace::Discrete { n }
    }

    /// A box of `dim` values, each within `[low, high]`.
    pub fn uniform_box(dim: usize, low: f32, high: f32) -> Self {
        ActionSpace::Box {
            low: vec![low; dim],
            high: vec![high; dim],
        }
    }

    /// The number of actions of a discrete space.
    pub fn num_discrete(&self) -> Option<usize> {
        match self {
            ActionSpace::Discrete { n } => Some(*n),
            ActionSpace::Box { .. } => None,
        }
    }

    pub fn is_discrete(&self) -> bool {
        matches!(self, ActionSpace::Discrete { .. })
    }

    /// Values in one action: the box's length, 1 for a discrete space (the index).
    pub fn dim(&self) -> usize {
        match self {
            ActionSpace::Discrete { .. } => 1,
            ActionSpace::Box { low, .. } => low.len(),
        }
    }
}

impl fmt::Display for ActionSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionSpace::Discrete { n } => write!(f, "{n} discrete actions"),
            ActionSpace::Box { low, high } => {
                let bounds = |v: &[f32]| match v.first() {
                    Some(first) if v.iter().all(|x| x == first) => first.to_string(),
                    _ => format!("{v:?}"),
                };
                write!(
                    f,
                    "box of {} f32 in [{}, {}]",
                    low.len(),
                    bounds(low),
                    bounds(high)
                )
            }
        }
    }
}

/// A space is recorded as its kind (0 discrete, 1 box), then the count or the bounds.
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
                ActionSpace::Box { low, high }
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

/// An empty discrete space: what a snapshot's recorded space is read into.
impl Default for ActionSpace {
    fn default() -> Self {
        ActionSpace::discrete(0)
    }
}

/// One action as an environment receives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    Discrete(usize),
    Box(&'a [f32]),
}

impl<'a> Action<'a> {
    /// The index of a discrete action. [`crate::VecEnv`] hands an environment only
    /// actions of its own space, so a discrete game never sees a box action.
    pub fn index(self) -> usize {
        match self {
            Action::Discrete(index) => index,
            Action::Box(values) => {
                unreachable!("a discrete environment was given the box action {values:?}")
            }
        }
    }

    /// The values of a box action (see [`Action::index`] for why this cannot fail).
    pub fn values(self) -> &'a [f32] {
        match self {
            Action::Box(values) => values,
            Action::Discrete(index) => {
                unreachable!("a box environment was given the discrete action {index}")
            }
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
/// A discrete space takes one index per environment, a box one row of `dim` values.
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
}

impl<'a> GroupActions<'a> {
    /// The action of the group's `k`-th environment.
    pub(crate) fn get(self, k: usize) -> Action<'a> {
        match self {
            GroupActions::Discrete(indices) => Action::Discrete(indices[k] as usize),
            GroupActions::Box { values, dim } => Action::Box(&values[k * dim..(k + 1) * dim]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_network_shapes() {
        let atari = ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8);
        assert_eq!(atari.len(), 210 * 160 * 3);
        assert_eq!(atari.network_shape(), vec![3, 210, 160]);
        assert_eq!(ObsSpace::vector(4, Dtype::F32).network_shape(), vec![4]);
        assert_eq!(
            atari.to_string(),
            "u8 image 210x160x3 (height x width x channels)"
        );
    }

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

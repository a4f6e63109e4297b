//! Observation and action spaces: what a game produces and accepts, and what each wrapper of a
//! chain turns them into. The env crate writes observations of these shapes; the config
//! language checks wrappers and networks against them and names them in its diagnostics
//! ([`ObsSpace::describe`], the `Display` of [`ActionSpace`]).

use std::borrow::Cow;
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
    /// An image observed beside a vector (a gymnasium Dict or Tuple with one u8 image entry
    /// among entries the bridge encodes as floats): one f32 row holding the image's pixels
    /// (0..=255) channels first, then the `vector` values.
    ImageAndVector {
        height: usize,
        width: usize,
        channels: usize,
        vector: usize,
    },
}

/// What an environment (or a wrapper chain) writes on every reset and step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObsSpace {
    pub shape: ObsShape,
    pub dtype: Dtype,
    /// How many consecutive observations of the game one observation holds: `frame-stack`'s
    /// count, 1 without it. An image's channels are `frames` times a frame's.
    pub frames: usize,
}

impl ObsSpace {
    pub const fn vector(len: usize, dtype: Dtype) -> Self {
        ObsSpace {
            shape: ObsShape::Vector { len },
            dtype,
            frames: 1,
        }
    }

    pub const fn image(
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
            frames: 1,
        }
    }

    /// An image of `channels` x `height` x `width` pixels beside `vector` floats, in one f32
    /// row ([`ObsShape::ImageAndVector`]).
    pub const fn image_beside_vector(
        height: usize,
        width: usize,
        channels: usize,
        vector: usize,
    ) -> Self {
        ObsSpace {
            shape: ObsShape::ImageAndVector {
                height,
                width,
                channels,
                vector,
            },
            dtype: Dtype::F32,
            frames: 1,
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
            ObsShape::ImageAndVector {
                height,
                width,
                channels,
                vector,
                ..
            } => height * width * channels + vector,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape a network receives for this space: `[len]` for vectors, `[C, H, W]` for
    /// images, `[len]` for an image beside a vector (the image torsos find the image in the
    /// row's first values through [`ObsSpace::image_entry`]).
    pub fn network_shape(&self) -> Vec<usize> {
        match self.shape {
            ObsShape::Vector { len } => vec![len],
            ObsShape::ImageAndVector { .. } => vec![self.len()],
            ObsShape::Image {
                height,
                width,
                channels,
                ..
            } => vec![channels, height, width],
        }
    }

    /// Where an image observed beside a vector lies in the row; `None` for any other
    /// observation.
    pub fn image_entry(&self) -> Option<ImageEntry> {
        match self.shape {
            ObsShape::ImageAndVector {
                height,
                width,
                channels,
                vector,
            } => Some(ImageEntry {
                shape: [channels, height, width],
                vector,
            }),
            _ => None,
        }
    }

    pub fn is_vector(&self) -> bool {
        matches!(self.shape, ObsShape::Vector { .. })
    }

    pub fn is_image(&self) -> bool {
        matches!(self.shape, ObsShape::Image { .. })
    }

    /// True for images of raw u8 pixels (0..=255), which image networks scale.
    pub fn is_pixel_image(&self) -> bool {
        self.dtype == Dtype::U8 && self.is_image()
    }

    /// True for images of floats: the catalogue's only such are MinAtar's binary feature
    /// planes (the fit rule keeps `normalize-obs` off images, so pixels never become floats).
    pub fn is_planes(&self) -> bool {
        self.dtype == Dtype::F32 && self.is_image()
    }

    /// True for single-channel images, whose HWC and CHW layouts coincide.
    pub fn is_single_channel_image(&self) -> bool {
        matches!(self.shape, ObsShape::Image { channels: 1, .. })
    }

    /// True for pixel images of RGB frames (3 channels a frame).
    pub fn is_rgb(&self) -> bool {
        matches!(self.shape, ObsShape::Image { channels, .. }
            if self.dtype == Dtype::U8 && channels == 3 * self.frames)
    }

    /// The observation in a user's words, as diagnostics name it: "a vector of 4 floats",
    /// "10x10x4 binary planes", "4 stacked 84x84 grayscale images".
    pub fn describe(&self) -> String {
        match self.shape {
            ObsShape::Vector { len } => format!("a vector of {len} floats"),
            ObsShape::Image {
                height,
                width,
                channels,
                ..
            } if self.dtype == Dtype::F32 => {
                format!("{height}x{width}x{channels} binary planes")
            }
            ObsShape::Image { height, width, .. } => {
                let color = if self.is_rgb() { "RGB" } else { "grayscale" };
                match self.frames {
                    1 => format!("{height}x{width} {color} images"),
                    frames => format!("{frames} stacked {height}x{width} {color} images"),
                }
            }
            ObsShape::ImageAndVector {
                height,
                width,
                channels,
                vector,
            } => {
                let image = match channels {
                    1 => "grayscale image".to_string(),
                    3 => "RGB image".to_string(),
                    c => format!("image of {c} channels"),
                };
                format!("a {height}x{width} {image} beside a vector of {vector} floats")
            }
        }
    }
}

/// An image observed beside a vector, as the row holds it: the first `C * H * W` values are the
/// image's pixels (0..=255) channels first, the `vector` values follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageEntry {
    /// `[C, H, W]`.
    pub shape: [usize; 3],
    pub vector: usize,
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
            } => write!(
                f,
                "{dtype} image {height}x{width}x{channels} (height x width x channels)"
            ),
            ObsShape::Image {
                height,
                width,
                channels,
                layout: Layout::Chw,
            } => write!(
                f,
                "{dtype} image {channels}x{height}x{width} (channels x height x width)"
            ),
            ObsShape::ImageAndVector {
                height,
                width,
                channels,
                vector,
            } => write!(
                f,
                "{dtype} image {channels}x{height}x{width} of 0..255 pixels (channels x height x width), then {vector} {dtype} values"
            ),
        }
    }
}

/// What a game accepts as an action.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionSpace {
    /// One of `n` actions, `0..n`.
    Discrete { n: usize },
    /// A vector of `low.len()` f32 values with bounds `low[i] <= a[i] <= high[i]`. The
    /// environment decides what a value out of bounds does (gymnasium's games clip). The
    /// catalogue's bounds are static, a gymnasium environment's are read when it starts.
    Box {
        low: Cow<'static, [f32]>,
        high: Cow<'static, [f32]>,
    },
    /// One choice per component, component `i` among `nvec[i]` options `0..nvec[i]`
    /// (gymnasium's MultiDiscrete; a MultiBinary of `n` is `n` components of 2).
    MultiDiscrete { nvec: Cow<'static, [usize]> },
}

impl ActionSpace {
    pub const fn discrete(n: usize) -> Self {
        ActionSpace::Discrete { n }
    }

    /// A box of `dim` values, each within `[low, high]`.
    pub fn uniform_box(dim: usize, low: f32, high: f32) -> Self {
        ActionSpace::Box {
            low: vec![low; dim].into(),
            high: vec![high; dim].into(),
        }
    }

    /// The number of actions of a discrete space; `None` for a box or a multi-discrete space.
    pub fn num_discrete(&self) -> Option<usize> {
        match self {
            ActionSpace::Discrete { n } => Some(*n),
            ActionSpace::Box { .. } | ActionSpace::MultiDiscrete { .. } => None,
        }
    }

    /// True for one choice among `n` (not for a multi-discrete space).
    pub fn is_discrete(&self) -> bool {
        matches!(self, ActionSpace::Discrete { .. })
    }

    pub fn is_box(&self) -> bool {
        matches!(self, ActionSpace::Box { .. })
    }

    /// The actions to choose among, summed over a multi-discrete space's components: what a
    /// categorical policy has logits for and an action mask has entries for; `None` for a box.
    pub fn choices(&self) -> Option<usize> {
        match self {
            ActionSpace::Discrete { n } => Some(*n),
            ActionSpace::MultiDiscrete { nvec } => Some(nvec.iter().sum()),
            ActionSpace::Box { .. } => None,
        }
    }

    /// Values in one action: the box's length, 1 for a discrete space (the index), the
    /// number of components of a multi-discrete space (an index each).
    pub fn dim(&self) -> usize {
        match self {
            ActionSpace::Discrete { .. } => 1,
            ActionSpace::Box { low, .. } => low.len(),
            ActionSpace::MultiDiscrete { nvec } => nvec.len(),
        }
    }
}

/// An empty discrete space: what a snapshot's recorded space is read into.
impl Default for ActionSpace {
    fn default() -> Self {
        ActionSpace::discrete(0)
    }
}

impl fmt::Display for ActionSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionSpace::Discrete { n } => write!(f, "{n} discrete actions"),
            ActionSpace::MultiDiscrete { nvec } => {
                let sizes: Vec<String> = nvec.iter().map(|n| n.to_string()).collect();
                write!(
                    f,
                    "{} discrete choices of [{}] actions",
                    nvec.len(),
                    sizes.join(", ")
                )
            }
            ActionSpace::Box { low, high } => {
                let bounds = |v: &[f32]| {
                    v.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if low.len() == 1 {
                    write!(f, "a box of 1 number in [{}, {}]", low[0], high[0])
                } else {
                    write!(
                        f,
                        "a box of {} numbers in [{}] .. [{}]",
                        low.len(),
                        bounds(low),
                        bounds(high)
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_shapes_and_words() {
        let atari = ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8);
        assert_eq!(atari.len(), 210 * 160 * 3);
        assert_eq!(atari.network_shape(), vec![3, 210, 160]);
        assert_eq!(
            atari.to_string(),
            "u8 image 210x160x3 (height x width x channels)"
        );
        assert_eq!(atari.describe(), "210x160 RGB images");
        let stacked = ObsSpace {
            frames: 4,
            ..ObsSpace::image(84, 84, 4, Layout::Chw, Dtype::U8)
        };
        assert_eq!(stacked.describe(), "4 stacked 84x84 grayscale images");
        let rgb_stack = ObsSpace {
            frames: 1,
            ..ObsSpace::image(84, 84, 3, Layout::Chw, Dtype::U8)
        };
        assert_eq!(rgb_stack.describe(), "84x84 RGB images");
        let planes = ObsSpace::image(10, 10, 4, Layout::Chw, Dtype::F32);
        assert_eq!(planes.describe(), "10x10x4 binary planes");
        assert_eq!(
            ObsSpace::vector(4, Dtype::F32).describe(),
            "a vector of 4 floats"
        );
        let beside = ObsSpace::image_beside_vector(6, 5, 3, 7);
        assert_eq!(
            (beside.len(), beside.network_shape(), beside.image_entry()),
            (
                97,
                vec![97],
                Some(ImageEntry {
                    shape: [3, 6, 5],
                    vector: 7
                })
            )
        );
        assert!(!beside.is_image() && !beside.is_vector() && !beside.is_pixel_image());
        assert_eq!(atari.image_entry(), None);
        assert_eq!(
            beside.describe(),
            "a 6x5 RGB image beside a vector of 7 floats"
        );
        assert_eq!(
            beside.to_string(),
            "f32 image 3x6x5 of 0..255 pixels (channels x height x width), then 7 f32 values"
        );
    }

    #[test]
    fn action_spaces_in_words() {
        assert_eq!(ActionSpace::discrete(6).to_string(), "6 discrete actions");
        let multi = ActionSpace::MultiDiscrete {
            nvec: vec![3, 2].into(),
        };
        assert_eq!(multi.to_string(), "2 discrete choices of [3, 2] actions");
        assert_eq!(multi.dim(), 2);
        assert_eq!(multi.choices(), Some(5));
        assert_eq!(ActionSpace::discrete(6).choices(), Some(6));
        assert_eq!(ActionSpace::uniform_box(2, -1.0, 1.0).choices(), None);
        assert_eq!(
            ActionSpace::uniform_box(1, -2.0, 2.0).to_string(),
            "a box of 1 number in [-2, 2]"
        );
        let uneven = ActionSpace::Box {
            low: vec![-1.0, 0.0].into(),
            high: vec![1.0, 5.0].into(),
        };
        assert_eq!(
            uneven.to_string(),
            "a box of 2 numbers in [-1, 0] .. [1, 5]"
        );
    }
}

//! The wrappers tandem-spec's [`Wrapper`] names: how each changes the observation space
//! ([`output_space`], also used for validation) and how each is built ([`wrap`]).

mod episode;
mod frames;
pub mod image;
mod normalize;
mod select;

pub use episode::{EpisodicLife, FireReset, NoopReset, StickyActions, TimeLimit};
pub use frames::{FrameSkip, FrameStack};
pub use image::{Grayscale, Resize};
pub use normalize::{ClipReward, NormalizeObs, NormalizeReward};
pub use select::{KeepObs, kept_indices};

use crate::EnvError;
use crate::env::Env;
use crate::space::{ActionSpace, Dtype, Layout, ObsShape, ObsSpace};
use tandem_spec::Wrapper;

/// What the normalisers add to a variance before its square root.
pub const NORMALIZER_EPSILON: f64 = 1e-8;

/// Forwards the trait methods a wrapper does not change to the wrapped `inner`.
macro_rules! forward_to_inner {
    () => {
        fn lives(&self) -> u32 {
            self.inner.lives()
        }
        fn render_rgb(&self) -> Option<$crate::env::RgbFrame> {
            self.inner.render_rgb()
        }
    };
    (with_normalizers) => {
        forward_to_inner!();
        fn visit_normalizers(&mut self, visit: &mut dyn FnMut(&mut $crate::norm::Normalizer)) {
            self.inner.visit_normalizers(visit)
        }
    };
}
pub(crate) use forward_to_inner;

/// `step` and `step_in_place` of a wrapper that hands observations through unchanged,
/// both going through its `step_with(action, ObsOut) -> Step`.
macro_rules! pass_through_step {
    () => {
        fn step(
            &mut self,
            action: $crate::space::Action<'_>,
            obs: $crate::space::ObsBuf<'_>,
        ) -> $crate::env::Step {
            self.step_with(action, $crate::env::ObsOut::Buf(obs))
        }
        fn step_in_place(
            &mut self,
            action: $crate::space::Action<'_>,
            obs: &mut [f32],
        ) -> $crate::env::Step {
            self.step_with(action, $crate::env::ObsOut::InPlace(obs))
        }
    };
}
pub(crate) use pass_through_step;

/// The snapshot methods of a wrapper: one section tagged with the wrapper's name that
/// holds its build parameters (checked on restore), its state fields (in-place
/// [`crate::snapshot::Persist`]), then the wrapped environment's section. Buffers a
/// wrapper always overwrites before reading (conversion scratch) are left out.
macro_rules! wrapper_snapshot_methods {
    ($tag:literal, params: [$($param:ident),* $(,)?], state: [$($field:ident),* $(,)?]) => {
        fn chain_names(&self, names: &mut Vec<String>) {
            names.push($tag.to_owned());
            self.inner.chain_names(names);
        }
        fn save_state(&self, out: &mut Vec<u8>) -> Result<(), $crate::EnvError> {
            $crate::snapshot::save_section(out, $tag, |out| {
                $( $crate::snapshot::save_param(&self.$param, out); )*
                $( $crate::snapshot::Persist::save(&self.$field, out); )*
                self.inner.save_state(out)
            })
        }
        fn load_state(&mut self, input: &mut &[u8]) -> Result<(), $crate::EnvError> {
            $crate::snapshot::load_section(input, $tag, |input| {
                $( $crate::snapshot::expect_same(&self.$param, stringify!($param), input)?; )*
                $( $crate::snapshot::Persist::load(&mut self.$field, input)?; )*
                self.inner.load_state(input)
            })
        }
    };
}
pub(crate) use wrapper_snapshot_methods;

fn mismatch(
    wrapper: &Wrapper,
    index: usize,
    input: &ObsSpace,
    reason: impl Into<String>,
) -> EnvError {
    EnvError::WrapperMismatch {
        index,
        wrapper: wrapper.name(),
        input: input.to_string(),
        reason: reason.into(),
    }
}

fn bad_parameter(wrapper: &Wrapper, index: usize, reason: impl Into<String>) -> EnvError {
    EnvError::InvalidWrapperParameter {
        index,
        wrapper: wrapper.name(),
        reason: reason.into(),
    }
}

/// The observation space `wrapper` (at position `index`) produces from `input`, or
/// why it cannot take `input`. `actions` is the game's action space when known.
pub fn output_space(
    wrapper: &Wrapper,
    index: usize,
    input: &ObsSpace,
    actions: Option<&ActionSpace>,
) -> Result<ObsSpace, EnvError> {
    if let Some(space @ ActionSpace::Box { .. }) = actions
        && matches!(
            wrapper,
            Wrapper::NoopReset { .. } | Wrapper::FireReset | Wrapper::StickyActions { .. }
        )
    {
        return Err(mismatch(
            wrapper,
            index,
            input,
            format!("it picks discrete actions itself, the game takes a {space}"),
        ));
    }
    let num_actions = actions.and_then(ActionSpace::num_discrete);
    let param = |ok: bool, reason: String| {
        if ok {
            Ok(())
        } else {
            Err(bad_parameter(wrapper, index, reason))
        }
    };
    match *wrapper {
        Wrapper::NoopReset { max: max_noops } => {
            param(
                max_noops >= 1,
                format!("max noops must be at least 1, got {max_noops}"),
            )?;
            Ok(*input)
        }
        Wrapper::FireReset => {
            if let Some(n) = num_actions.filter(|&n| n < 3) {
                return Err(mismatch(
                    wrapper,
                    index,
                    input,
                    format!("needs at least 3 actions (FIRE is action 1), the game has {n}"),
                ));
            }
            Ok(*input)
        }
        Wrapper::FrameSkip { n: skip, .. } => {
            param(skip >= 1, format!("skip must be at least 1, got {skip}"))?;
            Ok(*input)
        }
        Wrapper::EpisodicLife | Wrapper::ClipReward => Ok(*input),
        Wrapper::TimeLimit { max_steps } => {
            param(
                max_steps >= 1,
                format!("max steps must be at least 1, got {max_steps}"),
            )?;
            Ok(*input)
        }
        Wrapper::StickyActions { probability: prob } => {
            param(
                (0.0..=1.0).contains(&prob),
                format!("probability {prob} is outside [0, 1]"),
            )?;
            Ok(*input)
        }
        Wrapper::Grayscale => match input.shape {
            ObsShape::Image {
                height,
                width,
                channels: 3,
                layout: Layout::Hwc,
            } if input.dtype == Dtype::U8 => {
                Ok(ObsSpace::image(height, width, 1, Layout::Chw, Dtype::U8))
            }
            _ => Err(mismatch(
                wrapper,
                index,
                input,
                "needs a u8 RGB image (height x width x 3)",
            )),
        },
        Wrapper::Resize { height, width } => {
            let (height, width) = (height as usize, width as usize);
            param(
                height >= 1 && width >= 1,
                format!("target size {height}x{width} must be at least 1x1"),
            )?;
            match input.shape {
                ObsShape::Image {
                    height: h,
                    width: w,
                    channels,
                    layout,
                } if input.dtype == Dtype::U8 && (layout == Layout::Hwc || channels == 1) => {
                    if height > h || width > w {
                        return Err(mismatch(
                            wrapper,
                            index,
                            input,
                            format!(
                                "resize only shrinks (INTER_AREA); {height}x{width} is larger than {h}x{w}"
                            ),
                        ));
                    }
                    Ok(ObsSpace::image(height, width, channels, layout, Dtype::U8))
                }
                _ => Err(mismatch(
                    wrapper,
                    index,
                    input,
                    "needs a u8 image in height x width x channels order (put resize before frame-stack and normalize-obs)",
                )),
            }
        }
        Wrapper::FrameStack { n: frames } => {
            param(
                frames >= 1,
                format!("frames must be at least 1, got {frames}"),
            )?;
            let k = frames as usize;
            Ok(match input.shape {
                ObsShape::Vector { len } => ObsSpace::vector(len * k, input.dtype),
                ObsShape::Image {
                    height,
                    width,
                    channels,
                    ..
                } => ObsSpace::image(height, width, channels * k, Layout::Chw, input.dtype),
            })
        }
        Wrapper::NormalizeObs { clip } => {
            param(clip > 0.0, format!("clip must be positive, got {clip}"))?;
            Ok(ObsSpace {
                shape: input.shape,
                dtype: Dtype::F32,
            })
        }
        Wrapper::NormalizeReward { gamma, clip } => {
            param(
                gamma > 0.0 && gamma <= 1.0,
                format!("gamma {gamma} is outside (0, 1]"),
            )?;
            param(clip > 0.0, format!("clip must be positive, got {clip}"))?;
            Ok(*input)
        }
        Wrapper::KeepObs { mask } => {
            param(mask != 0, "it keeps no entry".into())?;
            let ObsShape::Vector { len } = input.shape else {
                return Err(mismatch(
                    wrapper,
                    index,
                    input,
                    "needs a vector observation",
                ));
            };
            let kept = kept_indices(mask);
            if let Some(&outside) = kept.iter().find(|&&i| i >= len) {
                return Err(mismatch(
                    wrapper,
                    index,
                    input,
                    format!("entry {outside} is outside an observation of {len} entries"),
                ));
            }
            Ok(ObsSpace::vector(kept.len(), input.dtype))
        }
    }
}

/// Wraps `inner` in `wrapper` (at position `index` of the chain); `seed` seeds the
/// wrapper's own random stream, if it has one.
pub fn wrap(
    wrapper: &Wrapper,
    index: usize,
    inner: Box<dyn Env>,
    seed: u64,
) -> Result<Box<dyn Env>, EnvError> {
    let input = inner.observation_space();
    let output = output_space(wrapper, index, &input, Some(&inner.action_space()))?;
    let stream = index as u64 + 1;
    Ok(match *wrapper {
        Wrapper::NoopReset { max: max_noops } => {
            Box::new(NoopReset::new(inner, max_noops, seed, stream))
        }
        Wrapper::FireReset => Box::new(FireReset::new(inner)),
        Wrapper::FrameSkip { n: skip, max_pool } => Box::new(FrameSkip::new(inner, skip, max_pool)),
        Wrapper::EpisodicLife => Box::new(EpisodicLife::new(inner)),
        Wrapper::Resize { height, width } => {
            Box::new(Resize::new(inner, height as usize, width as usize))
        }
        Wrapper::Grayscale => Box::new(Grayscale::new(inner)),
        Wrapper::ClipReward => Box::new(ClipReward::new(inner)),
        Wrapper::FrameStack { n: frames } => {
            Box::new(FrameStack::new(inner, frames as usize, output))
        }
        Wrapper::TimeLimit { max_steps } => Box::new(TimeLimit::new(inner, max_steps)),
        Wrapper::StickyActions { probability: prob } => {
            Box::new(StickyActions::new(inner, prob, seed, stream))
        }
        // The normalisers keep f32 statistics; the config states the clip as f64.
        Wrapper::NormalizeObs { clip } => {
            Box::new(NormalizeObs::new(inner, clip as f32, NORMALIZER_EPSILON))
        }
        Wrapper::NormalizeReward { gamma, clip } => Box::new(NormalizeReward::new(
            inner,
            gamma,
            clip as f32,
            NORMALIZER_EPSILON,
        )),
        Wrapper::KeepObs { mask } => Box::new(KeepObs::new(inner, mask, output)),
    })
}

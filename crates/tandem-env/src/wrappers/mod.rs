//! The wrappers tandem-spec's [`Wrapper`] names and how each is built ([`wrap`]); where each
//! fits, and what it makes of the observation ([`output_space`]), is tandem-spec's fit rule.

mod episode;
mod frames;
pub mod image;
mod normalize;
mod select;

pub use episode::{EpisodicLife, FireReset, NoopReset, StickyActions, TimeLimit};
pub use frames::{FrameSkip, FrameStack};
pub use image::{Grayscale, Resize};
pub use normalize::{ClampReward, ClipReward, NormalizeObs, NormalizeReward, ScaleReward};
pub use select::{KeepObs, kept_indices};

use crate::EnvError;
use crate::env::Env;
use crate::space::ObsSpace;
use tandem_spec::Wrapper;
use tandem_spec::fit::{self, GameFacts, Misfit};

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

/// The `Env` methods of a wrapper that changes observations only: its space is `self.output`,
/// the inner environment writes its observation into `self.input` (or straight into the
/// caller's buffer where the caller wants none), and `self.$convert(&mut obs)` makes this
/// wrapper's observation of it.
macro_rules! observation_methods {
    ($convert:ident) => {
        fn observation_space(&self) -> $crate::space::ObsSpace {
            self.output
        }
        fn action_space(&self) -> $crate::space::ActionSpace {
            self.inner.action_space()
        }
        fn reset(&mut self, seed: Option<u64>, mut obs: $crate::space::ObsBuf<'_>) {
            self.inner
                .reset(seed, obs.scratch_if_wanted(self.input.buf()));
            self.$convert(&mut obs);
        }
        fn step(
            &mut self,
            action: $crate::space::Action<'_>,
            mut obs: $crate::space::ObsBuf<'_>,
        ) -> $crate::env::Step {
            let step = self
                .inner
                .step(action, obs.scratch_if_wanted(self.input.buf()));
            self.$convert(&mut obs);
            step
        }
    };
}
pub(crate) use observation_methods;

/// The `Env` of a wrapper that changes only the rewards its `step_with` returns: spaces and
/// resets are the inner environment's, steps go through `step_with` (`pass_through_step!`), and
/// its snapshot holds its `params` alone.
macro_rules! reward_wrapper_env {
    ($wrapper:ident, $tag:literal, params: [$($param:ident),* $(,)?]) => {
        impl $crate::env::Env for $wrapper {
            fn observation_space(&self) -> $crate::space::ObsSpace {
                self.inner.observation_space()
            }
            fn action_space(&self) -> $crate::space::ActionSpace {
                self.inner.action_space()
            }
            fn reset(&mut self, seed: Option<u64>, obs: $crate::space::ObsBuf<'_>) {
                self.inner.reset(seed, obs)
            }
            $crate::wrappers::pass_through_step!();
            $crate::wrappers::wrapper_snapshot_methods!($tag, params: [$($param),*], state: []);
            $crate::wrappers::forward_to_inner!(with_normalizers);
        }
    };
}
pub(crate) use reward_wrapper_env;

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

/// The env crate's error for a misfit of tandem-spec's rule: the wrapper at `index` of the
/// chain, what it receives (`input`, in words) and why it does not fit.
pub(crate) fn misfit_error(
    wrapper: &Wrapper,
    index: usize,
    input: String,
    misfit: Misfit,
) -> EnvError {
    match misfit {
        Misfit::Input { label, help } => EnvError::WrapperMismatch {
            index,
            wrapper: wrapper.name(),
            input,
            reason: format!("{label} ({help})"),
        },
        Misfit::Parameter(reason) => EnvError::InvalidWrapperParameter {
            index,
            wrapper: wrapper.name(),
            reason,
        },
    }
}

/// The observation space `wrapper` (at position `index`) produces from `input` on a chain on
/// `game`, or why it does not fit there: tandem-spec's fit rule, the one the config checks by.
pub fn output_space(
    wrapper: &Wrapper,
    index: usize,
    input: &ObsSpace,
    game: &GameFacts,
) -> Result<ObsSpace, EnvError> {
    fit::fits(wrapper, game, input).map_err(|m| misfit_error(wrapper, index, input.to_string(), m))
}

/// Wraps `inner` in `wrapper` (at position `index` of the chain); `seed` seeds the
/// wrapper's own random stream, if it has one. Of the game only its actions are known here;
/// [`crate::make_env`] holds a chain to everything its game spec knows.
pub fn wrap(
    wrapper: &Wrapper,
    index: usize,
    inner: Box<dyn Env>,
    seed: u64,
) -> Result<Box<dyn Env>, EnvError> {
    let game = GameFacts {
        name: "the environment".into(),
        family: None,
        actions: Some(inner.action_space()),
        lives: None,
        fire: None,
    };
    wrap_on(wrapper, index, inner, seed, &game)
}

/// [`wrap`] on a chain on `game`.
pub(crate) fn wrap_on(
    wrapper: &Wrapper,
    index: usize,
    inner: Box<dyn Env>,
    seed: u64,
    game: &GameFacts,
) -> Result<Box<dyn Env>, EnvError> {
    let input = inner.observation_space();
    let output = output_space(wrapper, index, &input, game)?;
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
        Wrapper::ScaleReward { factor } => Box::new(ScaleReward::new(inner, factor)),
        Wrapper::ClampReward { low, high } => Box::new(ClampReward::new(inner, low, high)),
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

//! What tandem's experiment language (tandem-config) and its environments (tandem-env) both
//! name, declared once: the games and their catalogue ([`Game`], [`GameInfo`]), observation
//! and action spaces ([`ObsSpace`], [`ActionSpace`]), the
//! wrappers of an environment's chain ([`Wrapper`]) and the one rule for where a wrapper fits
//! ([`fit`]), the layers of a network declared in the experiment and the rule for their shapes
//! ([`Layer`], [`layer::shapes`]). The config resolves a file into these values and checks them with that rule; the
//! env crate builds from the same values and refuses what the same rule refuses, so there is
//! no second type to map them onto and no second rule to keep in step. No dependencies: both
//! crates sit above it.

pub mod fit;
pub mod game;
pub mod layer;
mod space;
pub mod wrapper;

pub use fit::{Family, GameFacts, Misfit};
pub use game::{ActionMask, Game, GameInfo, PettingZoo, SpreadParams, TagParams, Team, ZooApi};
pub use layer::Layer;
pub use space::{ActionSpace, Dtype, ImageEntry, Layout, ObsShape, ObsSpace};
pub use wrapper::Wrapper;

//! tandem: reinforcement-learning experiments declared in KDL, trained data-parallel with one
//! process per device. See docs/architecture.md for the map of the code.

pub mod algo;
pub mod alloc;
pub mod atomic;
pub mod cast;
pub mod dist;
pub mod export;
pub mod launch;
pub mod logging;
pub mod nn;
pub mod play;
pub mod policy;
pub mod seeds;
pub mod sweep;
pub mod torch_ops;
pub mod train;
pub mod usage;
pub mod version;

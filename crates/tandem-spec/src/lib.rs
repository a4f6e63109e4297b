//! What tandem's experiment language (tandem-config) and its environments (tandem-env) both
//! name, declared once: the wrappers of an environment's chain ([`Wrapper`]). The config
//! resolves a file into these values and the env crate builds from the same values, so there
//! is no second type to map them onto. No dependencies: both crates sit above it.

mod wrapper;

pub use wrapper::Wrapper;

//! placeholder: owned by the tandem-env work in progress.

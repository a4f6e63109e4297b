//! placeholder: owned by the tandem-summary work in progress.

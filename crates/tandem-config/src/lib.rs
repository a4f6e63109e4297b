//! placeholder: owned by the tandem-config work in progress.

//! placeholder: Arcade Learning Environment bindings (GPL-2.0), work in progress.

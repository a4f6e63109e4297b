//! The user's mistake, as opposed to a failure: [`UsageError`], which `main` reports with exit
//! code 2 for every subcommand (`train`, `sweep`, `play`, `export`, `plot`), where anything else
//! that goes wrong is exit code 1. Every module may raise it; it depends on nothing.

/// A mistake on the command line or in a config, found before anything ran (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `bail!` for the user's mistake: returns early with a [`UsageError`] of the formatted words.
macro_rules! mistake {
    ($($words:tt)*) => {
        return Err($crate::usage::UsageError(format!($($words)*)).into())
    };
}
pub(crate) use mistake;

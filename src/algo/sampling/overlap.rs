//! The collection thread the pipelined and free modes share: a round's collection runs on a
//! scoped `tandem-collect` thread while the learner updates on the rank's main thread.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What a collection thread gave, and how long the learner waited for it after its update.
pub type Collected<C> = (Result<C>, Duration);

/// Runs `learn` on this thread while `collect`, when there is one, runs on a `tandem-collect`
/// thread; returns what each gave and how long the learner then waited for the collection.
pub fn overlapped<C: Send, L>(
    collect: Option<impl FnOnce() -> Result<C> + Send>,
    learn: impl FnOnce() -> L,
) -> Result<(L, Option<Collected<C>>)> {
    let threads = tch::get_num_threads();
    std::thread::scope(|scope| {
        let collecting = collect
            .map(|collect| {
                std::thread::Builder::new()
                    .name("tandem-collect".into())
                    .spawn_scoped(scope, move || {
                        // libtorch's thread count is per thread: this one computes as the
                        // rank's main thread does.
                        tch::set_num_threads(threads);
                        collect()
                    })
            })
            .transpose()
            .context("cannot start the collection thread of pipelined sampling")?;
        let learned = learn();
        let waiting = Instant::now();
        let collected = collecting.map(|handle| {
            let result = handle.join().unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "the collection thread of pipelined sampling panicked"
                ))
            });
            (result, waiting.elapsed())
        });
        Ok((learned, collected))
    })
}

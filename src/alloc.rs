//! How the process's allocator treats freed memory: the `tandem` binary and the timing examples
//! allocate through mimalloc (declared in each as the global allocator, with `override`, so
//! libtorch allocates through it too) and call [`keep_freed_memory`] first, so their figures
//! match a training run.

/// `mi_option_purge_delay` in the pinned libmimalloc-sys 0.1.49 (mimalloc v3's `mi_option_e`;
/// the crate does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its default in that version, in milliseconds (mimalloc v3's `options.c`; the comment in
/// its header still says 10).
const MI_DEFAULT_PURGE_DELAY: std::ffi::c_long = 1000;

/// Keeps freed memory mapped for reuse instead of returning it to the OS a second after it is
/// freed: an update allocates and frees the same large tensors (a 29 MB Atari minibatch, conv
/// activations) again and again, and each return made the next use fault every page back in
/// (kernel `clear_page` was 9% of an Atari PPO profile). Resident memory stays at the run's
/// peak. A value set through `MIMALLOC_PURGE_DELAY` is left alone.
pub fn keep_freed_memory() {
    // SAFETY: mi_option_get/set take an option index and a value and touch only mimalloc's own
    // option table, which they may do from any thread; the index is this pinned version's purge
    // delay (checked by the test below).
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == MI_DEFAULT_PURGE_DELAY
            && std::env::var_os("MIMALLOC_PURGE_DELAY").is_none()
        {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards the hard-coded option index: in the pinned mimalloc, index 15 is the purge delay
    /// (default 10 ms, settable to -1), and its neighbours are not.
    #[test]
    fn the_purge_delay_option_index_is_right() {
        // SAFETY: reads one entry of mimalloc's option table by a valid index (below
        // _mi_option_last, asserted here); no memory of ours is involved.
        unsafe {
            let before = libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY);
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                assert_eq!(before, MI_DEFAULT_PURGE_DELAY);
            }
            // The next option the crate names is use_numa_nodes, right after it.
            assert_eq!(
                libmimalloc_sys::mi_option_use_numa_nodes,
                MI_OPTION_PURGE_DELAY + 1
            );
            assert_eq!(libmimalloc_sys::_mi_option_last, 47);
        }
        keep_freed_memory();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                // SAFETY: as above, a read of a valid option index.
                unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
                -1
            );
        }
    }
}

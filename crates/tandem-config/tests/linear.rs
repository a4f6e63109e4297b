//! Resolving (and reporting on) a file costs work and memory in proportion to its size:
//! measured by counting, not timing, with an allocator that counts allocations and the
//! peak of live bytes. Its own test binary, with one test, so nothing else allocates
//! while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use tandem_config::{Source, resolve};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as it came.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations made and peak live bytes above the start while resolving `text` and
/// rendering its diagnostics in both forms.
fn cost(text: String) -> (usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    if let Err(diags) = resolve(&Source::Stdin(text), &[]) {
        std::hint::black_box((diags.render(false), diags.to_json()));
    }
    (
        ALLOCATIONS.load(Ordering::Relaxed) - before,
        PEAK.load(Ordering::Relaxed) - base,
    )
}

fn unknown_settings(n: usize) -> String {
    format!("experiment \"x\" {{\n{}}}\n", "    foo 1\n".repeat(n))
}

fn comments(n: usize) -> String {
    let comment = "    // a comment line that a generator might have written\n";
    format!(
        "experiment \"x\" {{\n    env \"cartpole\"\n{}}}\n",
        comment.repeat(n)
    )
}

#[test]
fn four_times_the_file_costs_at_most_five_times_the_work_and_memory() {
    for (what, make) in [
        ("unknown settings", unknown_settings as fn(usize) -> String),
        ("comments", comments),
    ] {
        let (small_allocs, small_peak) = cost(make(5_000));
        let (large_allocs, large_peak) = cost(make(20_000));
        assert!(
            large_allocs < 5 * small_allocs,
            "{what}: {large_allocs} allocations against {small_allocs}"
        );
        assert!(
            large_peak < 5 * small_peak,
            "{what}: peak {large_peak} bytes against {small_peak}"
        );
    }
}

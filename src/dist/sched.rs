//! Scheduling hints for the threads that carry collectives.
//!
//! Gloo moves data on its own threads (a TCP event loop and the process group's workers). When
//! ranks share a few cores, those threads wake while compute threads hold every core, and Linux's
//! EEVDF scheduler lets a running thread finish its time slice (1-3 ms by default) before a woken
//! one of the same priority runs. A collective is a chain of such wake-ups on every rank, and
//! each can wait out a slice.
//!
//! Since Linux 6.12 a thread may ask for a shorter slice (`sched_setattr` with `sched_runtime`,
//! normal policy and priority, no privilege needed); a woken thread with a shorter slice than the
//! running one preempts it. The thread that forms a process group asks for the shortest slice,
//! and the threads Gloo starts inherit it; compute threads keep the default. Older kernels accept
//! and ignore the request. On this project's 2-core machine, with `pin-cores`, it took 2-rank
//! PPO on MinAtar from 1.2-1.3x to 1.3-1.5x the steps per second of one rank
//! (docs/performance.md, Distributed).

use std::time::Duration;

/// The shortest slice Linux grants (`sched_setattr` clamps `sched_runtime` to 0.1-100 ms).
pub const COMMUNICATION_SLICE: Duration = Duration::from_micros(100);

/// `struct sched_attr` as far as its first version (`SCHED_ATTR_SIZE_VER0`, 48 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

fn get_attr(tid: i32) -> std::io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: the kernel writes at most `size` bytes into `attr`, which is that large.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut _, size, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(attr)
}

/// Asks for [`COMMUNICATION_SLICE`] for the calling thread (and so for the threads it starts),
/// keeping its policy and nice value. Only normal-policy threads are changed.
pub fn shorten_this_threads_slice() -> std::io::Result<()> {
    let mut attr = get_attr(0)?;
    if attr.policy != libc::SCHED_OTHER as u32 {
        return Ok(());
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.flags = 0;
    attr.runtime = COMMUNICATION_SLICE.as_nanos() as u64;
    // SAFETY: `attr` is a valid sched_attr of the size it declares.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const _, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The time slice of thread `tid` of this process (0: the calling thread), where the kernel
/// reports one (6.12 and later report the slice of a normal-policy thread as its runtime).
pub fn time_slice(tid: i32) -> Option<Duration> {
    let attr = get_attr(tid).ok()?;
    (attr.policy == libc::SCHED_OTHER as u32 && attr.runtime > 0)
        .then(|| Duration::from_nanos(attr.runtime))
}

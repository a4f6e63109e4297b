//! Everything between ranks: the c10d shim's safe wrapper ([`ProcessGroup`], [`Store`]), what a
//! rank joins with ([`GroupOptions`]) and the rendezvous protocol. The rest of tandem sees other
//! ranks only through this module.

pub mod ddp;
mod ffi;
pub mod group;
mod liveness;
mod options;
mod relay;
mod rendezvous;
pub mod sched;
mod store;

use std::time::Duration;

pub use ddp::{Ddp, SyncPolicy};
pub use group::{
    Layout, PendingSum, ProcessGroup, ReduceOp, bind_device, check_interfaces, compiled_backends,
    free_loopback_port, libtorch_version, set_cuda_device,
};
pub use liveness::Peers;
pub use options::{Backend, GroupOptions};
pub use relay::JobSecret;
pub use store::Store;

#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("{context} failed: {message}")]
    C10d { context: String, message: String },
    #[error("timed out after {}s waiting for {what}{}", after.as_secs_f64(), missing_suffix(.missing))]
    Timeout {
        what: String,
        after: Duration,
        missing: Vec<String>,
    },
    #[error("{0}")]
    Mismatch(String),
    #[error("{0}")]
    Invalid(String),
}

fn missing_suffix(missing: &[String]) -> String {
    if missing.is_empty() {
        String::new()
    } else {
        format!("; missing: {}", missing.join(", "))
    }
}

/// This machine's host name, for messages and for Gloo's interface choice.
pub(crate) fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Raises this process's limit on open descriptors to its hard limit, and returns the limit in
/// force: rank 0's rendezvous door and every rank's connections hold a descriptor each, and a
/// soft limit of 1024 (a common default) is soon reached when strangers crowd the door.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write an `rlimit` this function owns, and change
    // nothing but this process's descriptor limit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    limit.rlim_cur
}

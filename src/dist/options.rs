//! What a rank joins a process group with ([`GroupOptions`]): its place, its deadlines, the
//! backend its device takes ([`Backend`]), the identity the rendezvous compares and the job's
//! secret. Read by the group (`super::group`) and the rendezvous (`super::rendezvous`) alike.

use std::time::Duration;

use tch::Device;

use super::relay::JobSecret;

/// Which c10d backend a group uses; chosen from the rank's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Gloo,
    Nccl,
}

impl Backend {
    pub fn for_device(device: Device) -> Backend {
        match device {
            Device::Cuda(_) => Backend::Nccl,
            _ => Backend::Gloo,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        }
    }
}

/// Facts a group is created from. The rank's identity (config hash, tandem version) is
/// compared across ranks at rendezvous.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    pub rank: usize,
    pub world_size: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// Deadline for the rendezvous (all ranks present and the group formed).
    pub rendezvous_timeout: Duration,
    /// Deadline for each collective.
    pub collective_timeout: Duration,
    pub backend: Backend,
    /// What each rank must agree on; compared field by field at rendezvous. Fields named in
    /// the rendezvous' INFORMATIVE list (`node`, `ranks-per-node`, ...) only name ranks.
    pub identity: Vec<(String, String)>,
    /// Network interfaces Gloo binds to (`GLOO_SOCKET_IFNAME`), one device each; empty: the
    /// address the group's `interface_host` picks.
    pub gloo_interfaces: Vec<String>,
    /// What every rank of this job holds and nobody else does; the store admits only holders.
    pub secret: JobSecret,
}

//! Where and how wide each rank runs: its [`Device`] and its compute [`Threads`].

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl Device {
    /// Parses `cpu` or `cuda:N`, the only forms a resolved config holds.
    pub fn parse(text: &str) -> Option<Device> {
        if text == "cpu" {
            return Some(Device::Cpu);
        }
        let index = text.strip_prefix("cuda:")?;
        if index.is_empty()
            || !index.bytes().all(|b| b.is_ascii_digit())
            || (index.len() > 1 && index.starts_with('0'))
        {
            return None;
        }
        index.parse().ok().map(Device::Cuda)
    }

    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

/// Multiply-adds of an MLP's largest layer over one update's minibatch below which
/// `threads "auto"` keeps one compute thread. Between the two workloads measured on two cores
/// (docs/performance.md, "7. Threads"): CartPole's PPO (128 rows of 64x64, 0.5M) ran no faster
/// on two threads, HalfCheetah's SAC (256 rows of 256x256, 16.8M) 1.4x faster.
pub const SMALL_LAYER_MACS: usize = 1 << 22;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Cores divided by ranks, decided by the launcher on the machine it runs on.
    Auto,
    PerRank(usize),
}

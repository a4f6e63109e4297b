//! What a run costs before it starts: the global steps of one update (and so the steps a run
//! really takes, since updates run whole), a lower bound on each rank's memory computed from the
//! resolved experiment, and the memory a machine has available. The machine is read only when a
//! caller asks ([`Machine::detect`]) and is handed to [`crate::resolve_on`] explicitly, so a
//! resolution stays a function of its inputs.

use std::fmt;

use crate::model::*;

/// Global environment steps one update takes: every environment (of every rank) steps `rollout`
/// times (ppo, a2c) or `train-frequency` times (dqn, sac, td3) between two updates.
pub fn update_steps(e: &Experiment) -> u64 {
    ((e.env.envs * e.agents_per_env()) as u64)
        .saturating_mul(steps_per_env(e))
        .max(1)
}

/// Steps each environment takes per update, and the setting that says so.
fn steps_per_env(e: &Experiment) -> u64 {
    match &e.algorithm {
        Algorithm::Ppo(_) | Algorithm::A2c(_) => e.train.rollout as u64,
        Algorithm::Dqn(d) => d.train_frequency,
        Algorithm::Sac(s) => s.train_frequency,
        Algorithm::Td3(t) => t.train_frequency,
    }
}

/// `rollout 128 × envs 4 = 512`: how [`update_steps`] comes about, in the settings' names.
pub fn update_formula(e: &Experiment) -> String {
    let per_env = if e.algorithm.is_on_policy() {
        "rollout"
    } else {
        "train-frequency"
    };
    format!(
        "{per_env} {} × envs {} = {}",
        steps_per_env(e),
        e.env.envs,
        update_steps(e)
    )
}

/// Updates and global steps the run takes: whole updates until the step limit (`max-steps`, else
/// `total-steps`) is reached, and at least one.
pub fn steps_run(e: &Experiment) -> (u64, u64) {
    let unit = update_steps(e);
    let updates = e.step_limit().div_ceil(unit).max(1);
    (updates, updates.saturating_mul(unit))
}

/// What holds a rank's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryPart {
    /// Each environment's state, its observation buffers and frame stacks.
    Environments,
    /// The on-policy rollout: `rollout` steps of every environment of the rank.
    Rollout,
    /// The off-policy replay buffer.
    Replay,
    /// Parameters, gradients, optimizer state and target networks.
    Networks,
}

impl MemoryPart {
    pub fn describe(self) -> &'static str {
        match self {
            MemoryPart::Environments => "environments and their observations",
            MemoryPart::Rollout => "rollout storage",
            MemoryPart::Replay => "replay buffer",
            MemoryPart::Networks => "networks and optimizer state",
        }
    }

    /// The setting that sizes this part (where a diagnostic about it points).
    pub fn setting(self) -> &'static str {
        match self {
            MemoryPart::Environments | MemoryPart::Rollout => "env.envs",
            MemoryPart::Replay => "algorithm.buffer-capacity",
            MemoryPart::Networks => "network",
        }
    }
}

/// A lower bound on one rank's memory, by part, in bytes: the buffers whose sizes the experiment
/// fixes. Activations, libtorch's own allocations and the process itself come on top.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEstimate {
    pub parts: Vec<(MemoryPart, u64)>,
}

impl MemoryEstimate {
    pub fn per_rank(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |sum, (_, b)| sum.saturating_add(*b))
    }

    /// The largest part.
    pub fn dominant(&self) -> (MemoryPart, u64) {
        self.parts
            .iter()
            .copied()
            .max_by_key(|(_, b)| *b)
            .unwrap_or((MemoryPart::Networks, 0))
    }

    /// `rollout storage 1.2 GiB, environments ... 3.0 KiB, ...`, largest first.
    pub fn breakdown(&self) -> String {
        let mut parts = self.parts.clone();
        parts.sort_by_key(|(_, b)| std::cmp::Reverse(*b));
        let parts: Vec<String> = parts
            .iter()
            .map(|(p, b)| format!("{} {}", p.describe(), Bytes(*b)))
            .collect();
        parts.join(", ")
    }
}

/// A byte count in binary units: `512 B`, `3.0 KiB`, `1.5 GiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut value = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", UNITS[unit])
    }
}

/// Floats and bytes per stored observation value.
const F32: f64 = 4.0;
/// Per environment, beyond its observations: its RNG, episode counters and the vector's slots.
const ENV_OVERHEAD: f64 = 64.0;
/// Per rollout step and environment, beside the observation: log-prob, value, reward, the two
/// episode-end flags, the truncation value, the start flag, and the advantage and return the
/// update computes (nine floats).
const ROLLOUT_FLOATS: f64 = 9.0;

/// The lower bound of each rank's memory ([`MemoryEstimate`]). A gymnasium game's observation is
/// known only once it is built: it counts as one value here.
pub fn memory_estimate(e: &Experiment) -> MemoryEstimate {
    let envs = e.per_rank_rows() as f64;
    let observation = e.observation();
    let obs_len = observation.map_or(1, |o| o.len()) as f64;
    let action_bytes = match e.actions() {
        Some(ActionSpace::Box { low, .. }) => F32 * low.len() as f64,
        // Discrete actions are stored as 64-bit indices.
        _ => 8.0,
    };
    let raw = e.env.game.info().map_or(0.0, |info| {
        let values = info.observation.len() as f64;
        if info.observation.is_pixel_image() {
            values
        } else {
            F32 * values
        }
    });
    let stacks = tandem_spec::wrapper::stacks_frames(&e.env.wrappers);
    // The vector's observation and final-observation buffers, and a stack's own frames.
    let buffers = F32 * obs_len * if stacks { 3.0 } else { 2.0 };
    let mut parts = vec![(
        MemoryPart::Environments,
        bytes(envs * (raw + buffers + ENV_OVERHEAD)),
    )];
    if e.algorithm.is_on_policy() {
        let per_step = F32 * (obs_len + ROLLOUT_FLOATS) + action_bytes;
        let rollout = e.train.rollout as f64 * envs * per_step;
        parts.push((MemoryPart::Rollout, bytes(rollout)));
    } else {
        parts.push((MemoryPart::Replay, bytes(replay(e, obs_len, action_bytes))));
    }
    parts.push((MemoryPart::Networks, bytes(networks(e, obs_len))));
    MemoryEstimate { parts }
}

fn bytes(value: f64) -> u64 {
    // `as` saturates: an absurd size stays u64::MAX instead of wrapping.
    value.max(0.0) as u64
}

/// The replay ring: single frames when frames are stacked (bytes for camera images, floats
/// otherwise), the action, reward, two flags and episode position of each slot, a priority tree
/// when prioritised, and the sampled batch (observation and next observation).
fn replay(e: &Experiment, obs_len: f64, action_bytes: f64) -> f64 {
    let capacity = e.per_rank_buffer_capacity().unwrap_or(0) as f64;
    let batch = e.per_rank_batch_size().unwrap_or(0) as f64;
    let frame_len = obs_len / e.replay_stack() as f64;
    let pixels = e.observation().is_some_and(|o| o.is_pixel_image());
    let value_bytes = if pixels { 1.0 } else { F32 };
    let prioritized = matches!(&e.algorithm, Algorithm::Dqn(d) if d.prioritized);
    let per_slot = frame_len * value_bytes
        + action_bytes
        + 4.0
        + 2.0
        + 8.0
        + if prioritized { 16.0 } else { 0.0 };
    capacity * per_slot + batch * 2.0 * F32 * obs_len
}

/// Bytes of the networks: each trained parameter has its value, its gradient and two optimizer
/// moments (four floats); a target network's parameter has its value.
fn networks(e: &Experiment, obs_len: f64) -> f64 {
    let shape: Vec<usize> = e
        .observation()
        .map_or_else(|| vec![obs_len as usize], |o| o.network_shape());
    let (torso, features) = torso_params(&shape, &e.network.torso);
    let core = e.network.core.map_or(0.0, |core| {
        let gates = if core == Core::Lstm { 4.0 } else { 3.0 };
        let (input, hidden) = (features, e.network.core_size as f64);
        gates * (input + hidden + 2.0) * hidden
    });
    let out = if e.network.core.is_some() {
        e.network.core_size as f64
    } else {
        features
    };
    // A categorical head has a logit per choice, a Gaussian a mean and a log-std per dimension.
    let actions = e
        .actions()
        .map_or(1.0, |a| a.choices().unwrap_or(2 * a.dim()) as f64);
    let heads = (out + 1.0) * (actions + 1.0);
    let trained = 4.0 * F32;
    match &e.algorithm {
        Algorithm::Ppo(_) | Algorithm::A2c(_) => {
            let torsos = if e.network.shared() { 1.0 } else { 2.0 };
            trained * (torsos * torso + core + heads)
        }
        Algorithm::Dqn(_) => (trained + F32) * (torso + heads),
        // An actor and two critics trained; sac keeps target critics, td3 a target of each.
        Algorithm::Sac(_) => trained * 3.0 * (torso + heads) + F32 * 2.0 * (torso + heads),
        Algorithm::Td3(_) => (trained + F32) * 3.0 * (torso + heads),
    }
}

/// Parameters of a torso on an input of `shape` (`[len]` or `[channels, height, width]`) and the
/// features it gives.
fn torso_params(shape: &[usize], torso: &Torso) -> (f64, f64) {
    let (c, h, w) = match *shape {
        [c, h, w] => (c as f64, h as f64, w as f64),
        [len] => (len as f64, 1.0, 1.0),
        _ => (shape.iter().product::<usize>() as f64, 1.0, 1.0),
    };
    let conv = |cin: f64, cout: f64, k: f64| (cin * k * k + 1.0) * cout;
    let shrink = |x: f64, k: f64, s: f64| ((x - k) / s + 1.0).floor().max(1.0);
    match torso {
        // A list that does not fit its input is refused by the network check; it weighs nothing.
        Torso::Layers { layers } => tandem_spec::layer::parameters(layers, shape)
            .map_or((0.0, 0.0), |(params, features)| {
                (params as f64, features as f64)
            }),
        Torso::Mlp { hidden, .. } => {
            let mut input = c * h * w;
            let mut params = 0.0;
            for &units in hidden {
                params += (input + 1.0) * units as f64;
                input = units as f64;
            }
            (params, input)
        }
        Torso::NatureCnn { features } => {
            let (h3, w3) = (
                shrink(shrink(shrink(h, 8.0, 4.0), 4.0, 2.0), 3.0, 1.0),
                shrink(shrink(shrink(w, 8.0, 4.0), 4.0, 2.0), 3.0, 1.0),
            );
            let f = *features as f64;
            let convs = conv(c, 32.0, 8.0) + conv(32.0, 64.0, 4.0) + conv(64.0, 64.0, 3.0);
            (convs + (64.0 * h3 * w3 + 1.0) * f, f)
        }
        Torso::MinatarCnn { channels, features } => {
            let (k, f) = (*channels as f64, *features as f64);
            let cells = shrink(h, 3.0, 1.0) * shrink(w, 3.0, 1.0);
            (conv(c, k, 3.0) + (k * cells + 1.0) * f, f)
        }
        Torso::ImpalaCnn { channels, features } => {
            let (mut cin, mut h, mut w, mut params) = (c, h, w, 0.0);
            for &k in channels {
                let k = k as f64;
                // A convolution, a max-pool halving the size, two residual blocks of two each.
                params += conv(cin, k, 3.0) + 4.0 * conv(k, k, 3.0);
                (cin, h, w) = (k, (h / 2.0).ceil(), (w / 2.0).ceil());
            }
            let f = *features as f64;
            (params + (cin * h * w + 1.0) * f, f)
        }
    }
}

/// A machine's memory, for [`crate::resolve_on`]: what is available now and over how many
/// machines the experiment's ranks are spread (evenly, as the launcher does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    pub available_bytes: u64,
    /// `usize::MAX` when the spread is not known: then one rank must fit here.
    pub nodes: usize,
}

impl Machine {
    /// This machine: `MemAvailable` of /proc/meminfo, or what this process's cgroup still
    /// allows when that is less; `None` when neither can be read (nothing is checked then).
    /// `nodes`: the machines the ranks are spread over, `None` when not known yet (`tandem
    /// validate`; a scheduler deriving it later), which checks that one rank fits.
    pub fn detect(nodes: Option<usize>) -> Option<Machine> {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
        let available = meminfo.as_deref().and_then(mem_available);
        let cgroup = cgroup_room();
        let available_bytes = match (available, cgroup) {
            (Some(a), Some(c)) => a.min(c),
            (a, c) => a.or(c)?,
        };
        Some(Machine {
            available_bytes,
            nodes: nodes.map_or(usize::MAX, |n| n.max(1)),
        })
    }

    /// Ranks of an experiment of `world` ranks on each machine.
    pub fn ranks_here(&self, world: usize) -> usize {
        world.div_ceil(self.nodes.max(1))
    }
}

/// `MemAvailable:  123456 kB` in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// What this process's cgroup (v2, else v1) lets it still allocate; `None` when unlimited or
/// unknown.
fn cgroup_room() -> Option<u64> {
    let read =
        |path: String| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let own = std::fs::read_to_string("/proc/self/cgroup").ok();
    let v2 = own
        .as_deref()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("0::")))
        .map(|p| format!("/sys/fs/cgroup{}", p.trim_end_matches('/')));
    if let Some(dir) = v2
        && let Some(max) = read(format!("{dir}/memory.max"))
    {
        let used = read(format!("{dir}/memory.current")).unwrap_or(0);
        return Some(max.saturating_sub(used));
    }
    let limit = read("/sys/fs/cgroup/memory/memory.limit_in_bytes".into())?;
    // v1 writes a huge page-rounded number for "no limit".
    if limit >= 1 << 60 {
        return None;
    }
    let used = read("/sys/fs/cgroup/memory/memory.usage_in_bytes".into()).unwrap_or(0);
    Some(limit.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_in_binary_units() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(3 << 10).to_string(), "3.0 KiB");
        assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
        assert_eq!(Bytes(u64::MAX).to_string(), "16.0 EiB");
    }

    #[test]
    fn meminfo_gives_bytes() {
        let text = "MemTotal:  2048 kB\nMemFree: 1 kB\nMemAvailable:    1024 kB\n";
        assert_eq!(mem_available(text), Some(1 << 20));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn an_unknown_spread_checks_one_rank_and_a_known_one_its_share() {
        let machine = |nodes| Machine {
            available_bytes: 0,
            nodes,
        };
        assert_eq!(machine(usize::MAX).ranks_here(8), 1);
        assert_eq!(machine(1).ranks_here(8), 8);
        assert_eq!(machine(3).ranks_here(8), 3);
        if let Some(here) = Machine::detect(None) {
            assert_eq!(here.ranks_here(8), 1);
            assert!(here.available_bytes > 0);
        }
    }

    #[test]
    fn a_nature_cnn_on_84_by_84_has_its_known_size() {
        // 4x84x84 -> 20x20 -> 9x9 -> 7x7, then 3136 -> 512: 1,684,128 parameters in all.
        let (params, features) = torso_params(&[4, 84, 84], &Torso::NatureCnn { features: 512 });
        assert_eq!((params, features), (1_684_128.0, 512.0));
    }
}

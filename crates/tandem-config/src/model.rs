//! The typed, fully resolved experiment that the rest of tandem codes against, with
//! the helpers that turn global sizes into per-rank ones and describe the
//! observation each environment produces after its wrappers.

use std::fmt;

pub use tandem_spec::Wrapper;

pub use crate::catalogue::{
    ActionSpace, Dtype, Family, Game, GameFacts, GameInfo, Gymnasium, Layout, ObsShape, ObsSpace,
    Scalar,
};

/// A fully resolved experiment: every default is explicit, every size is global.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub seed: u64,
    /// One rank per entry, in rank order.
    pub devices: Vec<Device>,
    pub threads: Threads,
    /// Confine each rank's process to its own slice of the cores.
    pub pin_cores: bool,
    pub algorithm: Algorithm,
    pub env: Env,
    pub network: Network,
    pub sync: Sync,
    pub train: Train,
    pub log: Log,
    pub checkpoint: Checkpoint,
}

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

#[derive(Debug, Clone, PartialEq)]
pub enum Algorithm {
    Ppo(Ppo),
    A2c(A2c),
    Dqn(Dqn),
    Sac(Sac),
    Td3(Td3),
}

impl Algorithm {
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::Ppo(_) => "ppo",
            Algorithm::A2c(_) => "a2c",
            Algorithm::Dqn(_) => "dqn",
            Algorithm::Sac(_) => "sac",
            Algorithm::Td3(_) => "td3",
        }
    }

    pub fn is_on_policy(&self) -> bool {
        !matches!(
            self,
            Algorithm::Dqn(_) | Algorithm::Sac(_) | Algorithm::Td3(_)
        )
    }

    /// Whether the algorithm acts in a bounded box through a tanh-squashed actor (sac, td3).
    pub fn squashes_box_actions(&self) -> bool {
        matches!(self, Algorithm::Sac(_) | Algorithm::Td3(_))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ppo {
    pub lr: f64,
    pub gamma: f64,
    pub gae_lambda: f64,
    pub clip: f64,
    pub value_clip: Option<f64>,
    pub entropy_coef: f64,
    pub value_coef: f64,
    pub epochs: usize,
    pub minibatches: usize,
    pub micro_batches: usize,
    pub max_grad_norm: Option<f64>,
    pub anneal_lr: bool,
    pub target_kl: Option<f64>,
    pub normalize_advantages: bool,
    pub adam_eps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optimizer {
    Rmsprop,
    Adam,
}

#[derive(Debug, Clone, PartialEq)]
pub struct A2c {
    pub lr: f64,
    pub gamma: f64,
    /// `None`: n-step returns over the rollout.
    pub gae_lambda: Option<f64>,
    pub entropy_coef: f64,
    pub value_coef: f64,
    pub max_grad_norm: Option<f64>,
    pub optimizer: Optimizer,
    pub optimizer_eps: f64,
    pub rmsprop_alpha: f64,
    pub anneal_lr: bool,
    pub normalize_advantages: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    Huber,
    Mse,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dqn {
    pub lr: f64,
    pub gamma: f64,
    /// Global; see [`Experiment::per_rank_buffer_capacity`].
    pub buffer_capacity: usize,
    /// Global; see [`Experiment::per_rank_batch_size`].
    pub batch_size: usize,
    pub learning_starts: u64,
    pub train_frequency: u64,
    pub target_every: u64,
    pub tau: f64,
    pub double: bool,
    pub dueling: bool,
    pub n_step: usize,
    pub loss: Loss,
    pub epsilon_start: f64,
    pub epsilon_end: f64,
    pub epsilon_fraction: f64,
    pub prioritized: bool,
    pub priority_alpha: f64,
    pub priority_beta_start: f64,
    pub priority_beta_end: f64,
    pub max_grad_norm: Option<f64>,
    pub checkpoint_replay: bool,
}

/// Where SAC's entropy temperature or target entropy comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AutoOr {
    /// `"auto"`: learned (alpha), or minus the action dimension (target entropy).
    Auto,
    Value(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sac {
    pub actor_lr: f64,
    pub critic_lr: f64,
    pub alpha_lr: f64,
    pub gamma: f64,
    pub tau: f64,
    /// Global; see [`Experiment::per_rank_buffer_capacity`].
    pub buffer_capacity: usize,
    /// Global; see [`Experiment::per_rank_batch_size`].
    pub batch_size: usize,
    pub learning_starts: u64,
    pub train_frequency: u64,
    pub gradient_steps: u64,
    pub alpha: AutoOr,
    pub initial_alpha: f64,
    pub target_entropy: AutoOr,
    pub max_grad_norm: Option<f64>,
    pub checkpoint_replay: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Td3 {
    pub actor_lr: f64,
    pub critic_lr: f64,
    pub gamma: f64,
    pub tau: f64,
    /// Global; see [`Experiment::per_rank_buffer_capacity`].
    pub buffer_capacity: usize,
    /// Global; see [`Experiment::per_rank_batch_size`].
    pub batch_size: usize,
    pub learning_starts: u64,
    pub train_frequency: u64,
    pub gradient_steps: u64,
    pub policy_delay: u64,
    /// Noises are standard deviations (and the clip a bound) in the unit action box.
    pub exploration_noise: f64,
    pub target_policy_noise: f64,
    pub target_noise_clip: f64,
    pub max_grad_norm: Option<f64>,
    pub checkpoint_replay: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Env {
    pub game: Game,
    /// Global; see [`Experiment::per_rank_envs`].
    pub envs: usize,
    pub wrappers: Vec<Wrapper>,
}

impl Env {
    /// The observation after every wrapper, as the network receives it (tandem-spec's fit
    /// rule walks the chain); `None` for gymnasium (known once the environment is built) and
    /// for a chain the rule refuses, which the resolver reports.
    pub fn observation(&self) -> Option<ObsSpace> {
        let game = self.game.info()?;
        let facts = game.facts();
        self.wrappers
            .iter()
            .try_fold(game.observation, |obs, wrapper| {
                tandem_spec::fit::fits(wrapper, &facts, &obs).ok()
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Tanh,
    Relu,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Torso {
    Mlp {
        hidden: Vec<usize>,
        activation: Activation,
    },
    NatureCnn {
        features: usize,
    },
    MinatarCnn {
        channels: usize,
        features: usize,
    },
    ImpalaCnn {
        channels: Vec<usize>,
        features: usize,
    },
}

impl Torso {
    pub fn name(&self) -> &'static str {
        match self {
            Torso::Mlp { .. } => "mlp",
            Torso::NatureCnn { .. } => "nature-cnn",
            Torso::MinatarCnn { .. } => "minatar-cnn",
            Torso::ImpalaCnn { .. } => "impala-cnn",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    Orthogonal,
    Default,
    Torch,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub torso: Torso,
    /// `true`: one torso feeds both heads; `false`: actor and critic have their own.
    pub shared: bool,
    pub init: Init,
    pub torso_gain: f64,
    pub policy_gain: f64,
    pub value_gain: f64,
    /// The recurrent core between the torso and the heads; `None`: feed-forward.
    pub core: Option<Core>,
    /// `core-size`: the core's units (kept when there is no core, to check it is not set).
    pub core_size: usize,
}

/// A recurrent core's cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    Lstm,
    Gru,
}

impl Core {
    pub fn name(self) -> &'static str {
        match self {
            Core::Lstm => "lstm",
            Core::Gru => "gru",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Bf16,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SyncPolicy {
    Allreduce {
        bucket_mb: f64,
        compression: Compression,
    },
    Broadcast,
    Periodic {
        every: u64,
    },
    None,
}

impl SyncPolicy {
    pub fn name(&self) -> &'static str {
        match self {
            SyncPolicy::Allreduce { .. } => "allreduce",
            SyncPolicy::Broadcast => "broadcast",
            SyncPolicy::Periodic { .. } => "periodic",
            SyncPolicy::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sync {
    pub policy: SyncPolicy,
    /// Updates between cross-rank fingerprint checks; `None` disables them.
    pub check_every: Option<u64>,
    pub rendezvous_timeout_s: f64,
    pub collective_timeout_s: f64,
    pub backend: SyncBackend,
}

/// The c10d backend the ranks' collectives use (`sync { backend ... }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncBackend {
    /// NCCL when the devices are CUDA, Gloo otherwise.
    Auto,
    Gloo,
    Nccl,
}

impl SyncBackend {
    pub fn name(self) -> &'static str {
        match self {
            SyncBackend::Auto => "auto",
            SyncBackend::Gloo => "gloo",
            SyncBackend::Nccl => "nccl",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Train {
    /// Global environment steps.
    pub total_steps: u64,
    /// Steps per environment per update (on-policy algorithms).
    pub rollout: usize,
    /// Groups each rank's environments are stepped in, overlapping one group's environment
    /// step with the next group's forward pass (on-policy algorithms; 1: no overlap).
    pub env_groups: usize,
    /// Global steps after which to stop early; schedules still use `total_steps`.
    pub max_steps: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Console {
    Progress,
    Plain,
    Quiet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Updates(u64),
    Seconds(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Log {
    pub tensorboard: bool,
    pub console: Console,
    pub interval: Interval,
    pub histogram_every: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointUnit {
    Updates,
    /// Global environment steps.
    Steps,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Interval in `unit`; `None`: only the final checkpoint.
    pub every: Option<u64>,
    pub unit: CheckpointUnit,
    pub keep: usize,
}

impl Experiment {
    /// Number of ranks: one per device.
    pub fn world_size(&self) -> usize {
        self.devices.len()
    }

    /// Environments each rank runs. The resolver guarantees exact division.
    pub fn per_rank_envs(&self) -> usize {
        self.env.envs / self.world_size()
    }

    /// Transitions per on-policy update over all ranks: environments times rollout.
    pub fn batch_size(&self) -> usize {
        self.env.envs * self.train.rollout
    }

    /// Transitions each rank collects per on-policy update.
    pub fn per_rank_batch(&self) -> usize {
        self.per_rank_envs() * self.train.rollout
    }

    /// PPO minibatch size on each rank (the resolver guarantees exact division);
    /// `None` for other algorithms.
    pub fn per_rank_minibatch_size(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Ppo(ppo) => Some(self.per_rank_batch() / ppo.minibatches),
            _ => None,
        }
    }

    /// Replay capacity of each rank's buffer (DQN, SAC, TD3); `None` for on-policy algorithms.
    pub fn per_rank_buffer_capacity(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Dqn(dqn) => Some(dqn.buffer_capacity / self.world_size()),
            Algorithm::Sac(sac) => Some(sac.buffer_capacity / self.world_size()),
            Algorithm::Td3(td3) => Some(td3.buffer_capacity / self.world_size()),
            _ => None,
        }
    }

    /// Transitions each rank samples per gradient step (DQN, SAC, TD3); `None` for on-policy
    /// algorithms.
    pub fn per_rank_batch_size(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Dqn(dqn) => Some(dqn.batch_size / self.world_size()),
            Algorithm::Sac(sac) => Some(sac.batch_size / self.world_size()),
            Algorithm::Td3(td3) => Some(td3.batch_size / self.world_size()),
            _ => None,
        }
    }

    /// Compute threads for a rank with `cores` cores to itself (its share of the machine, or
    /// its pinned cores), from the work: `"auto"` gives one thread to a network whose layers
    /// are too small to split across threads with profit, and the rank's cores to one whose
    /// layers are not (the launcher may give fewer where other processes hold cores; see
    /// `src/launch/worker.rs`). Small: an MLP whose largest hidden layer does fewer than
    /// [`SMALL_LAYER_MACS`] multiply-adds over one update's minibatch. Every CNN counts as
    /// large: even MinAtar's ran 1.35x faster on two threads than on one on a quiet machine.
    pub fn threads_for_rank(&self, cores: usize) -> usize {
        match self.threads {
            Threads::PerRank(n) => n,
            Threads::Auto if self.layers_are_small() => 1,
            Threads::Auto => cores.max(1),
        }
    }

    /// Whether the network's layers are too small for a second compute thread to pay.
    fn layers_are_small(&self) -> bool {
        match &self.network.torso {
            Torso::MinatarCnn { .. } | Torso::NatureCnn { .. } | Torso::ImpalaCnn { .. } => false,
            Torso::Mlp { hidden, .. } => {
                let widest = match hidden.as_slice() {
                    [only] => only * only,
                    layers => layers.windows(2).map(|w| w[0] * w[1]).max().unwrap_or(0),
                };
                let rows = match &self.algorithm {
                    Algorithm::Ppo(_) => self.per_rank_minibatch_size().unwrap_or(0),
                    Algorithm::A2c(_) => self.per_rank_batch(),
                    Algorithm::Dqn(_) | Algorithm::Sac(_) | Algorithm::Td3(_) => {
                        self.per_rank_batch_size().unwrap_or(0)
                    }
                };
                rows.saturating_mul(widest) < SMALL_LAYER_MACS
            }
        }
    }

    /// Global environment steps this run takes: `max-steps` when set, else `total-steps`.
    pub fn step_limit(&self) -> u64 {
        self.train
            .max_steps
            .map_or(self.train.total_steps, |m| m.min(self.train.total_steps))
    }

    /// Frames per stored observation that an off-policy replay can rebuild from single frames:
    /// the last `frame-stack`'s `n` when no later wrapper (a normaliser, a resize, grayscale)
    /// changes the stacked observation, else 1 (whole observations are stored).
    pub fn replay_stack(&self) -> usize {
        let mut stack = 1;
        for w in &self.env.wrappers {
            match w {
                Wrapper::FrameStack { n } => stack = *n as usize,
                Wrapper::NormalizeObs { .. } | Wrapper::Resize { .. } | Wrapper::Grayscale => {
                    stack = 1
                }
                _ => {}
            }
        }
        stack.max(1)
    }

    /// The observation the network receives; `None` for gymnasium.
    pub fn observation(&self) -> Option<ObsSpace> {
        self.env.observation()
    }

    /// The game's action space; `None` for gymnasium.
    pub fn actions(&self) -> Option<ActionSpace> {
        self.env.game.info().map(|i| i.actions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_strings_are_strict() {
        assert_eq!(Device::parse("cpu"), Some(Device::Cpu));
        assert_eq!(Device::parse("cuda:0"), Some(Device::Cuda(0)));
        assert_eq!(Device::parse("cuda:12"), Some(Device::Cuda(12)));
        for bad in [
            "",
            "gpu",
            "cuda",
            "cuda:",
            "cuda:01",
            "cuda:-1",
            "CUDA:0",
            "cuda:0 ",
            "cuda:99999999999",
        ] {
            assert_eq!(Device::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
    }

    #[test]
    fn wrappers_change_observations() {
        let env = |game, wrappers| Env {
            game,
            envs: 1,
            wrappers,
        };
        let atari = env(
            Game::Atari { rom: "breakout" },
            vec![
                Wrapper::Grayscale,
                Wrapper::Resize {
                    height: 84,
                    width: 84,
                },
                Wrapper::FrameStack { n: 4 },
            ],
        );
        assert_eq!(
            atari.observation().unwrap().network_shape(),
            vec![4, 84, 84]
        );
        let vector = env(
            Game::Cartpole,
            vec![Wrapper::FrameStack { n: 3 }, Wrapper::ClipReward],
        );
        assert_eq!(vector.observation().unwrap().network_shape(), vec![12]);
        let misfit = env(Game::Cartpole, vec![Wrapper::Grayscale]);
        assert_eq!(misfit.observation(), None);
    }

    #[test]
    fn every_game_has_a_name_that_maps_back() {
        for info in crate::games() {
            let game = Game::from_name(info.name).unwrap();
            assert_eq!(game.name(), info.name);
        }
        assert_eq!(Game::from_name("gymnasium"), None);
    }
}

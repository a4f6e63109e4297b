//! The typed, fully resolved experiment that the rest of tandem codes against, with
//! the helpers that turn global sizes into per-rank ones and describe the
//! observation each environment produces after its wrappers.

use crate::setting::{
    ANY_FLOAT, COUNT, Dflt, NON_NEGATIVE, POSITIVE, Reader, SECONDS, SectionKind, Setting, Ty,
    UNIT_CLOSED, UNIT_OPEN, UNIT_OPEN_CLOSED, Val, Writer, ZERO_OR_MORE, algorithms, choices,
    kinds, settings,
};

pub use tandem_spec::Wrapper;
pub use tandem_spec::layer::{self, Layer};

pub use crate::devices::{Device, SMALL_LAYER_MACS, Threads};

pub use crate::catalogue::{
    ActionMask, ActionSpace, Dtype, Family, Game, GameFacts, GameInfo, Gymnasium, Layout, ObsShape,
    ObsSpace, PettingZoo, Scalar, SpreadParams, TagParams, ZooApi,
};

settings! {
    /// A fully resolved experiment: every default is explicit, every size is global.
    pub struct Experiment {
        sections {
            algorithm: Algorithm = "algorithm";
            env: Env = "env";
            network: Network = "network";
            sync: Sync = "sync";
            train: Train = "train";
            log: Log = "log";
            checkpoint: Checkpoint = "checkpoint";
            eval: Eval = "eval";
            population: Population = "population";
            league: League = "league";
        }
        name: String = "name", Ty::Name, Dflt::Required,
            "The experiment's name: the argument of `experiment`; letters, digits, `-`, `_`, `.`.";
        seed: u64 = "seed", ZERO_OR_MORE, Dflt::Int(1),
            "Base random seed; each rank derives its own seed from it.";
        devices: Vec<Device> = "devices", Ty::Devices, Dflt::Devices,
            "One rank per device: `devices \"cpu\" \"cpu\"`, `devices \"cuda:0\" \"cuda:1\"` or `devices count=2 kind=\"cuda\"`. Several `cpu` are allowed; a CUDA device may appear once. The number of devices is the world size.";
        threads: Threads = "threads", Ty::Threads, Dflt::Auto,
            "Compute threads per rank (libtorch's and the environments'): a count, or `\"auto\"`, decided at launch from the work and the machine: one where the network's layers are too small to gain from a second thread (an `mlp` whose largest hidden layer does fewer than 2^22 multiply-adds over one update's minibatch, or batch for the off-policy learners), otherwise the rank's share of the cores (the machine's cores divided by its ranks, or its pinned cores), less the cores other processes held busy at start (unpinned ranks only; a process whose nice value is at least 10 above the rank's, or whose session group's is where the kernel groups tasks by session, gives its core way and does not count). The log says what it chose and why.";
        pin_cores: bool = "pin-cores", Ty::Bool, Dflt::Bool(false),
            "Confine each rank's process (its libtorch, environment and Gloo threads) to its own share of the cores this process may use: with L ranks on a machine, local rank r gets the r-th of L equal slices (at least one core each; ranks share cores when there are more ranks than cores). Keeps one rank's communication threads off the core another rank computes on; worth it for several CPU ranks on a small machine (docs/performance.md, Distributed).";
    }
}

algorithms! {
    /// The learning algorithm: the `algorithm` section's kind. The one table of tandem's
    /// learners: each row is a section declared below with its settings (`settings!`, `as
    /// "name"`) and what the rest of tandem asks of the algorithm ([`AlgorithmFacts`]).
    pub enum Algorithm {
        Ppo(Ppo) = AlgorithmFacts {
            learns: Learns::OnPolicy,
            acts: Acts::AnySpace,
            corrects_lag: true,
            explorable: &[
                "lr", "gamma", "gae-lambda", "clip", "value-clip", "entropy-coef", "value-coef",
                "max-grad-norm", "target-kl",
            ],
        };
        A2c(A2c) = AlgorithmFacts {
            learns: Learns::OnPolicy,
            acts: Acts::AnySpace,
            corrects_lag: false,
            explorable: &["lr", "gamma", "gae-lambda", "entropy-coef", "value-coef", "max-grad-norm"],
        };
        Dqn(Dqn) = AlgorithmFacts {
            learns: Learns::OffPolicy,
            acts: Acts::Discrete,
            corrects_lag: false,
            explorable: &[],
        };
        Sac(Sac) = AlgorithmFacts {
            learns: Learns::OffPolicy,
            acts: Acts::SquashedBox,
            corrects_lag: false,
            explorable: &[],
        };
        Td3(Td3) = AlgorithmFacts {
            learns: Learns::OffPolicy,
            acts: Acts::SquashedBox,
            corrects_lag: false,
            explorable: &[],
        };
    }
}

/// What the algorithm table says of a learner, for the defaults, checks and messages that
/// depend on the kind of learner rather than on one learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlgorithmFacts {
    pub learns: Learns,
    pub acts: Acts,
    /// Whether its update corrects for batches another policy collected (ppo's clipped ratio
    /// against the behaviour policy's stored log-probabilities), so that pipelined and free
    /// sampling may feed it.
    pub corrects_lag: bool,
    /// The settings of its section an update reads afresh each time, so that a population
    /// member may change them during a run (`population.explore`).
    pub explorable: &'static [&'static str],
}

/// Where a learner's experience comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learns {
    /// Rollouts of its current policy (`train.rollout` steps of every environment), by an
    /// actor-critic: the one network a recurrent core, an action mask or separate torsos apply to.
    OnPolicy,
    /// A per-rank replay buffer, a gradient step every `train-frequency` vector steps; one
    /// environment per rank by default, as the peers train.
    OffPolicy,
}

/// The action spaces a learner chooses in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acts {
    /// Discrete, multi-discrete and box actions (a categorical or Gaussian head).
    AnySpace,
    /// Discrete actions only (a Q-value per action).
    Discrete,
    /// Bounded boxes only, through a tanh-squashed actor.
    SquashedBox,
}

/// `names` as a sentence lists them with `conjunction`: "a", "a or b", "a, b or c"; empty for
/// none.
pub(crate) fn listed(names: &[&str], conjunction: &str) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} {conjunction} {last}", rest.join(", ")),
    }
}

impl Algorithm {
    /// The table's facts of the algorithm named `name`; `None` for a name it does not hold.
    pub fn facts_of(name: &str) -> Option<AlgorithmFacts> {
        Self::TABLE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, facts)| facts)
    }

    /// The names of the algorithms whose facts pass `which`, in the table's order, as a
    /// sentence writes them with `conjunction`: "dqn, sac or td3".
    pub fn names_where(which: impl Fn(AlgorithmFacts) -> bool, conjunction: &str) -> String {
        let names: Vec<&str> = Self::TABLE
            .iter()
            .filter(|&&(_, facts)| which(facts))
            .map(|&(name, _)| name)
            .collect();
        listed(&names, conjunction)
    }

    pub fn is_on_policy(&self) -> bool {
        self.facts().learns == Learns::OnPolicy
    }

    /// Whether the algorithm acts in a bounded box through a tanh-squashed actor (sac, td3).
    pub fn squashes_box_actions(&self) -> bool {
        self.facts().acts == Acts::SquashedBox
    }
}

choices! {
    /// A2C's optimiser.
    pub enum Optimizer {
        Rmsprop = "rmsprop",
        Adam = "adam",
    }
}

choices! {
    /// PPO's advantage and value-target estimator.
    pub enum Advantages {
        Gae = "gae",
        Vtrace = "vtrace",
    }
}

choices! {
    /// DQN's temporal-difference loss.
    pub enum Loss {
        Huber = "huber",
        Mse = "mse",
    }
}

settings! {
    pub struct Ppo as "ppo",
        "Proximal policy optimisation (clipped surrogate objective)." {
        lr: f64 = "lr", POSITIVE, Dflt::Float(2.5e-4),
            "Adam learning rate.";
        gamma: f64 = "gamma", UNIT_OPEN_CLOSED, Dflt::Float(0.99),
            "Discount factor.";
        gae_lambda: f64 = "gae-lambda", UNIT_CLOSED, Dflt::Float(0.95),
            "GAE lambda; with `advantages \"vtrace\"`, V-trace's lambda (its traces are c_t = lambda min(c-bar, pi/mu)).";
        advantages: Advantages = "advantages", Ty::Choice(Advantages::NAMES), Dflt::Str("gae"),
            "How advantages and value targets are estimated: `\"gae\"`, GAE(lambda) from the values stored when the batch was collected; `\"vtrace\"`, V-trace (Espeholt et al. 2018, IMPALA) from the learner's own policy and values at the update's start, each step weighted by its truncated importance ratio against the policy that collected it: the correction for a batch that lags the learner (`train.sampling \"pipelined\"`). On-policy, V-trace's targets are GAE's returns. docs/sampling.md says which values it takes where the batch holds no observation.";
        vtrace_rho_clip: f64 = "vtrace-rho-clip", POSITIVE, Dflt::Float(1.0),
            "V-trace's rho-bar: the importance ratios weighting the temporal differences and the policy gradient are clipped to at most this (advantages \"vtrace\" only).";
        vtrace_c_clip: f64 = "vtrace-c-clip", POSITIVE, Dflt::Float(1.0),
            "V-trace's c-bar: the ratios of the traces are clipped to at most this; at most vtrace-rho-clip (advantages \"vtrace\" only).";
        clip: f64 = "clip", POSITIVE, Dflt::Float(0.2),
            "Policy ratio clip range.";
        value_clip: Option<f64> = "value-clip", POSITIVE, Dflt::Null,
            "Clip range of the value loss; `#null` disables value clipping.";
        entropy_coef: f64 = "entropy-coef", NON_NEGATIVE, Dflt::Float(0.01),
            "Entropy bonus coefficient.";
        value_coef: f64 = "value-coef", NON_NEGATIVE, Dflt::Float(0.5),
            "Value loss coefficient.";
        epochs: usize = "epochs", Ty::Int { min: 1, max: 1000 }, Dflt::Int(4),
            "Passes over each batch.";
        minibatches: usize = "minibatches", COUNT, Dflt::Int(4),
            "Minibatches per epoch; must divide each rank's batch (its environments times the rollout).";
        micro_batches: usize = "micro-batches", COUNT, Dflt::Int(1),
            "Micro-batches per minibatch: gradients are accumulated over them and synchronised across ranks once per minibatch (for minibatches too large for the device at once); must divide each rank's minibatch.";
        max_grad_norm: Option<f64> = "max-grad-norm", POSITIVE, Dflt::Float(0.5),
            "Global gradient norm clip; `#null` disables clipping.";
        anneal_lr: bool = "anneal-lr", Ty::Bool, Dflt::Bool(true),
            "Decay the learning rate linearly to 0 over the run.";
        target_kl: Option<f64> = "target-kl", POSITIVE, Dflt::Null,
            "Stop an update after the first epoch whose approximate KL, averaged over all ranks, exceeds this (rank 0 decides for all); `#null` never stops.";
        normalize_advantages: AdvantageNorm = "normalize-advantages", Ty::OrWord("minibatch", &Ty::Bool), Dflt::Bool(true),
            "Normalise advantages to mean 0 and standard deviation 1: `#true` over the global batch (every rank's transitions of the update), once before the epochs; `\"minibatch\"` over each global minibatch (every rank's share of it), as Stable-Baselines3 and CleanRL do; `#false` not at all.";
        adam_eps: f64 = "adam-eps", UNIT_OPEN, Dflt::Float(1e-5),
            "Adam epsilon.";
    }
}

settings! {
    pub struct A2c as "a2c",
        "Synchronous advantage actor-critic." {
        lr: f64 = "lr", POSITIVE, Dflt::Float(7e-4),
            "Learning rate.";
        gamma: f64 = "gamma", UNIT_OPEN_CLOSED, Dflt::Float(0.99),
            "Discount factor.";
        gae_lambda: Option<f64> = "gae-lambda", UNIT_CLOSED, Dflt::Null,
            "GAE lambda; `#null` uses n-step returns over the rollout.";
        entropy_coef: f64 = "entropy-coef", NON_NEGATIVE, Dflt::Float(0.01),
            "Entropy bonus coefficient.";
        value_coef: f64 = "value-coef", NON_NEGATIVE, Dflt::Float(0.5),
            "Value loss coefficient.";
        max_grad_norm: Option<f64> = "max-grad-norm", POSITIVE, Dflt::Float(0.5),
            "Global gradient norm clip; `#null` disables clipping.";
        optimizer: Optimizer = "optimizer", Ty::Choice(Optimizer::NAMES), Dflt::Str("rmsprop"),
            "Optimiser.";
        optimizer_eps: f64 = "optimizer-eps", UNIT_OPEN, Dflt::Float(1e-5),
            "Epsilon of the optimiser.";
        rmsprop_alpha: f64 = "rmsprop-alpha", UNIT_OPEN, Dflt::Float(0.99),
            "RMSprop smoothing constant (adam refuses a value other than the default).";
        anneal_lr: bool = "anneal-lr", Ty::Bool, Dflt::Bool(false),
            "Decay the learning rate linearly to 0 over the run.";
        normalize_advantages: bool = "normalize-advantages", Ty::Bool, Dflt::Bool(false),
            "Normalise advantages to mean 0 and standard deviation 1 over the global batch (every rank's transitions of the update).";
    }
}

settings! {
    pub struct Dqn as "dqn",
        "Deep Q-learning with optional double, dueling, n-step and prioritised replay. Each rank keeps its own replay buffer." {
        lr: f64 = "lr", POSITIVE, Dflt::Float(1e-4),
            "Adam learning rate.";
        gamma: f64 = "gamma", UNIT_OPEN_CLOSED, Dflt::Float(0.99),
            "Discount factor.";
        buffer_capacity: usize = "buffer-capacity", COUNT, Dflt::Int(100_000),
            "Replay capacity in transitions, global: each rank holds capacity / world size.";
        batch_size: usize = "batch-size", COUNT, Dflt::Int(32),
            "Transitions per gradient step, global: each rank samples batch-size / world size.";
        learning_starts: u64 = "learning-starts", ZERO_OR_MORE, Dflt::Int(10_000),
            "Global environment steps before the first gradient step; at least batch-size.";
        train_frequency: u64 = "train-frequency", COUNT, Dflt::Int(4),
            "Vector steps (one step of every environment) per iteration.";
        gradient_steps: u64 = "gradient-steps", COUNT, Dflt::Int(1),
            "Gradient steps per iteration, once learning has started.";
        target_every: u64 = "target-every", COUNT, Dflt::Int(1000),
            "Gradient steps between target network updates.";
        tau: f64 = "tau", UNIT_OPEN_CLOSED, Dflt::Float(1.0),
            "Target update coefficient: 1 copies the online network, less than 1 is Polyak averaging.";
        double: bool = "double", Ty::Bool, Dflt::Bool(false),
            "Double DQN targets.";
        dueling: bool = "dueling", Ty::Bool, Dflt::Bool(false),
            "Dueling value/advantage head.";
        n_step: usize = "n-step", Ty::Int { min: 1, max: 100 }, Dflt::Int(1),
            "Steps of the bootstrapped return.";
        loss: Loss = "loss", Ty::Choice(Loss::NAMES), Dflt::Str("huber"),
            "TD loss.";
        epsilon_start: f64 = "epsilon-start", UNIT_CLOSED, Dflt::Float(1.0),
            "Initial exploration rate.";
        epsilon_end: f64 = "epsilon-end", UNIT_CLOSED, Dflt::Float(0.01),
            "Final exploration rate; at most epsilon-start.";
        epsilon_fraction: f64 = "epsilon-fraction", UNIT_OPEN_CLOSED, Dflt::Float(0.1),
            "Fraction of total steps over which epsilon decays linearly.";
        prioritized: bool = "prioritized", Ty::Bool, Dflt::Bool(false),
            "Prioritised experience replay.";
        priority_alpha: f64 = "priority-alpha", UNIT_CLOSED, Dflt::Float(0.6),
            "Priority exponent.";
        priority_beta_start: f64 = "priority-beta-start", UNIT_CLOSED, Dflt::Float(0.4),
            "Initial importance-sampling exponent.";
        priority_beta_end: f64 = "priority-beta-end", UNIT_CLOSED, Dflt::Float(1.0),
            "Final importance-sampling exponent.";
        max_grad_norm: Option<f64> = "max-grad-norm", POSITIVE, Dflt::Float(10.0),
            "Global gradient norm clip; `#null` disables clipping.";
        checkpoint_replay: bool = "checkpoint-replay", Ty::Bool, Dflt::Bool(false),
            "Write the replay buffers into checkpoints (large).";
    }
}

settings! {
    pub struct Sac as "sac",
        "Soft actor-critic with twin Q-networks, Polyak-averaged targets and automatic entropy tuning, for box actions. Each rank keeps its own replay buffer; one gradient sync per gradient step covers actor, critics and temperature." {
        actor_lr: f64 = "actor-lr", POSITIVE, Dflt::Float(3e-4),
            "Adam learning rate of the actor.";
        critic_lr: f64 = "critic-lr", POSITIVE, Dflt::Float(1e-3),
            "Adam learning rate of the twin Q-networks.";
        alpha_lr: f64 = "alpha-lr", POSITIVE, Dflt::Float(1e-3),
            "Adam learning rate of the log temperature (with alpha \"auto\").";
        gamma: f64 = "gamma", UNIT_OPEN_CLOSED, Dflt::Float(0.99),
            "Discount factor.";
        tau: f64 = "tau", UNIT_OPEN_CLOSED, Dflt::Float(0.005),
            "Polyak coefficient of the target Q-networks, applied after every gradient step.";
        buffer_capacity: usize = "buffer-capacity", COUNT, Dflt::Int(1_000_000),
            "Replay capacity in transitions, global: each rank holds capacity / world size.";
        batch_size: usize = "batch-size", COUNT, Dflt::Int(256),
            "Transitions per gradient step, global: each rank samples batch-size / world size.";
        learning_starts: u64 = "learning-starts", ZERO_OR_MORE, Dflt::Int(5_000),
            "Global environment steps of uniformly random actions before the first gradient step; at least batch-size.";
        train_frequency: u64 = "train-frequency", COUNT, Dflt::Int(1),
            "Vector steps (one step of every environment) per iteration.";
        gradient_steps: u64 = "gradient-steps", COUNT, Dflt::Int(1),
            "Gradient steps per iteration, once learning has started.";
        alpha: AutoOr = "alpha", Ty::OrWord("auto", &POSITIVE), Dflt::Str("auto"),
            "Entropy temperature: a fixed number, or \"auto\" to learn it towards target-entropy.";
        initial_alpha: f64 = "initial-alpha", POSITIVE, Dflt::Float(1.0),
            "Starting temperature with alpha \"auto\".";
        target_entropy: AutoOr = "target-entropy", Ty::OrWord("auto", &ANY_FLOAT), Dflt::Str("auto"),
            "Entropy target of the tuned temperature, in the unit action box; \"auto\" is minus the action dimension.";
        max_grad_norm: Option<f64> = "max-grad-norm", POSITIVE, Dflt::Null,
            "Gradient norm clip of each network (actor, critics) on its own; `#null` disables clipping.";
        checkpoint_replay: bool = "checkpoint-replay", Ty::Bool, Dflt::Bool(false),
            "Write the replay buffers into checkpoints (large).";
    }
}

settings! {
    pub struct Td3 as "td3",
        "Twin delayed DDPG: a deterministic actor, twin Q-networks, target policy smoothing, delayed actor and target updates, for bounded box actions. Each rank keeps its own replay buffer; a gradient step steps the critics, then on the delayed steps the actor against the critics just updated (the paper's order), each after a gradient sync." {
        actor_lr: f64 = "actor-lr", POSITIVE, Dflt::Float(3e-4),
            "Adam learning rate of the actor.";
        critic_lr: f64 = "critic-lr", POSITIVE, Dflt::Float(3e-4),
            "Adam learning rate of the twin Q-networks.";
        gamma: f64 = "gamma", UNIT_OPEN_CLOSED, Dflt::Float(0.99),
            "Discount factor.";
        tau: f64 = "tau", UNIT_OPEN_CLOSED, Dflt::Float(0.005),
            "Polyak coefficient of the target actor and target Q-networks, applied on each delayed (actor) step.";
        buffer_capacity: usize = "buffer-capacity", COUNT, Dflt::Int(1_000_000),
            "Replay capacity in transitions, global: each rank holds capacity / world size.";
        batch_size: usize = "batch-size", COUNT, Dflt::Int(256),
            "Transitions per gradient step, global: each rank samples batch-size / world size.";
        learning_starts: u64 = "learning-starts", ZERO_OR_MORE, Dflt::Int(25_000),
            "Global environment steps of uniformly random actions before the first gradient step; at least batch-size.";
        train_frequency: u64 = "train-frequency", COUNT, Dflt::Int(1),
            "Vector steps (one step of every environment) per iteration.";
        gradient_steps: u64 = "gradient-steps", COUNT, Dflt::Int(1),
            "Gradient steps per iteration, once learning has started.";
        policy_delay: u64 = "policy-delay", COUNT, Dflt::Int(2),
            "Critic gradient steps per actor step: the actor and the targets move on every policy-delay-th gradient step.";
        exploration_noise: f64 = "exploration-noise", NON_NEGATIVE, Dflt::Float(0.1),
            "Standard deviation of the Gaussian noise added to the actor's action when acting, in units of the action box's half-range.";
        target_policy_noise: f64 = "target-policy-noise", NON_NEGATIVE, Dflt::Float(0.2),
            "Standard deviation of the smoothing noise on the target actor's action, in units of the action box's half-range.";
        target_noise_clip: f64 = "target-noise-clip", NON_NEGATIVE, Dflt::Float(0.5),
            "The smoothing noise is clipped to plus or minus this, in units of the action box's half-range.";
        max_grad_norm: Option<f64> = "max-grad-norm", POSITIVE, Dflt::Null,
            "Gradient norm clip of each network (actor, critics) on its own; `#null` disables clipping.";
        checkpoint_replay: bool = "checkpoint-replay", Ty::Bool, Dflt::Bool(false),
            "Write the replay buffers into checkpoints (large).";
    }
}

/// Over what PPO normalises its advantages (`normalize-advantages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvantageNorm {
    /// `#false`.
    Off,
    /// `#true`: over the global batch, once before the epochs.
    Batch,
    /// `"minibatch"`: over each global minibatch.
    Minibatch,
}

/// Where SAC's entropy temperature or target entropy comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AutoOr {
    /// `"auto"`: learned (alpha), or minus the action dimension (target entropy).
    Auto,
    Value(f64),
}

settings! {
    /// The `env` section: The game, how many copies run, and the ordered wrappers applied to each: `env \"cartpole\" { ... }`. The game is required.
    pub struct Env {
        kind game: Game;
        envs: usize = "envs", COUNT, Dflt::Envs,
            "Number of environments, global: each rank runs envs / world size. The off-policy learners' default is one per rank, as CleanRL and Stable-Baselines3 train them on one environment: each gradient step then follows one new transition (with `train-frequency 1`), where eight environments would give it eight.";
        wrappers: Vec<Wrapper> = "wrappers", Ty::Wrappers, Dflt::NoWrappers,
            "Ordered block of wrappers, applied first to last (see the wrapper table).";
    }
}

impl Env {
    /// The keys of the environment's `info` whose values the run logs at each episode's end
    /// (a gymnasium environment's `info-keys`; none for the catalogue's games).
    pub fn info_keys(&self) -> &[String] {
        match &self.game {
            Game::Gymnasium(g) => &g.info_keys,
            _ => &[],
        }
    }

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

/// A list of strings the bridge's kinds read (`import`, `info-keys`); none when unset.
fn strings(r: &Reader, field: &str) -> Vec<String> {
    match r.get(field) {
        Some(Val::Strings(list)) => list.clone(),
        _ => Vec::new(),
    }
}

/// A block of keyword arguments the bridge's kinds read (`make-args`); none when unset.
fn keyword_args(r: &Reader, field: &str) -> Vec<(String, Scalar)> {
    match r.get(field) {
        Some(Val::Args(args)) => args.clone(),
        _ => Vec::new(),
    }
}

impl SectionKind for Game {
    fn read(r: &Reader) -> Game {
        match r.kind() {
            "gymnasium" => Game::Gymnasium(Gymnasium {
                id: r.read("id"),
                python: r.read("python"),
                imports: strings(r, "import"),
                make_args: keyword_args(r, "make-args"),
                workers: r.read("workers"),
                step_timeout_s: r.read("step-timeout"),
                action_mask: r.read("action-mask"),
                info_keys: strings(r, "info-keys"),
            }),
            "pettingzoo" => Game::PettingZoo(PettingZoo {
                module: r.read("module"),
                function: r.read("function"),
                agents: r.read("agents"),
                python: r.read("python"),
                imports: strings(r, "import"),
                make_args: keyword_args(r, "make-args"),
                workers: r.read("workers"),
                step_timeout_s: r.read("step-timeout"),
                action_mask: r.read("action-mask"),
                api: r.read("api"),
            }),
            "mpe-simple-spread" => Game::MpeSimpleSpread(SpreadParams {
                agents: r.read("agents"),
                local_ratio: r.read("local-ratio"),
                max_cycles: r.read("max-cycles"),
                continuous_actions: r.read("continuous-actions"),
            }),
            "mpe-simple-tag" => Game::MpeSimpleTag(TagParams {
                num_good: r.read("num-good"),
                num_adversaries: r.read("num-adversaries"),
                num_obstacles: r.read("num-obstacles"),
                max_cycles: r.read("max-cycles"),
                continuous_actions: r.read("continuous-actions"),
            }),
            // The schema admits only the catalogue's names; anything else reads as its first.
            kind => Game::from_name(kind).unwrap_or_else(|| tandem_spec::game::NATIVE[0].0.clone()),
        }
    }

    fn write(&self, w: &mut Writer) {
        w.kind(self.name());
        if let Game::Gymnasium(g) = self {
            w.write("id", &g.id);
            w.write("python", &g.python);
            w.put("import", Val::Strings(g.imports.clone()));
            w.put("make-args", Val::Args(g.make_args.clone()));
            w.write("workers", &g.workers);
            w.write("step-timeout", &g.step_timeout_s);
            w.write("action-mask", &g.action_mask);
            w.put("info-keys", Val::Strings(g.info_keys.clone()));
        }
        if let Game::PettingZoo(z) = self {
            w.write("module", &z.module);
            w.write("function", &z.function);
            w.write("agents", &z.agents);
            w.write("python", &z.python);
            w.put("import", Val::Strings(z.imports.clone()));
            w.put("make-args", Val::Args(z.make_args.clone()));
            w.write("api", &z.api);
            w.write("workers", &z.workers);
            w.write("step-timeout", &z.step_timeout_s);
            w.write("action-mask", &z.action_mask);
        }
        if let Game::MpeSimpleSpread(p) = self {
            w.write("agents", &p.agents);
            w.write("local-ratio", &p.local_ratio);
            w.write("max-cycles", &p.max_cycles);
            w.write("continuous-actions", &p.continuous_actions);
        }
        if let Game::MpeSimpleTag(p) = self {
            w.write("num-good", &p.num_good);
            w.write("num-adversaries", &p.num_adversaries);
            w.write("num-obstacles", &p.num_obstacles);
            w.write("max-cycles", &p.max_cycles);
            w.write("continuous-actions", &p.continuous_actions);
        }
    }
}

choices! {
    /// The activation between an MLP's layers.
    pub enum Activation {
        Tanh = "tanh",
        Relu = "relu",
    }
}

kinds! {
    /// The network's torso: the `network` section's kind.
    #[derive(Eq)]
    pub enum Torso {
        Mlp = "mlp", "Fully connected torso; flattens any observation." {
            hidden: Vec<usize> = "hidden", Ty::IntList {
                        min: 1,
                        max: 65_536,
                    }, Dflt::Learner {
                        usual: &Dflt::IntList(&[64, 64]),
                        box_actor: &Dflt::IntList(&[256, 256]),
                    },
                "Hidden layer sizes, e.g. `hidden 64 64`. sac's and td3's default is the 256 256 of CleanRL's and Stable-Baselines3's SAC and CleanRL's TD3.";
            activation: Activation = "activation", Ty::Choice(Activation::NAMES), Dflt::Learner {
                    usual: &Dflt::Str("tanh"),
                    box_actor: &Dflt::Str("relu"),
                },
                "Activation between layers. sac's and td3's default is ReLU, as in CleanRL and Stable-Baselines3.";
        },
        NatureCnn = "nature-cnn", "The DQN Nature convolutional torso; needs image observations of at least 36x36." {
            features: usize = "features", Ty::Int {
                    min: 1,
                    max: 65_536,
                }, Dflt::Int(512),
                "Width of the final dense layer.";
        },
        MinatarCnn = "minatar-cnn", "One 3x3 convolution and a dense layer, for MinAtar planes." {
            channels: usize = "channels", Ty::Int { min: 1, max: 4096 }, Dflt::Int(16),
                "Convolution channels.";
            features: usize = "features", Ty::Int {
                        min: 1,
                        max: 65_536,
                    }, Dflt::Int(128),
                "Width of the dense layer.";
        },
        ImpalaCnn = "impala-cnn", "The IMPALA residual torso; needs image observations." {
            channels: Vec<usize> = "channels", Ty::IntList { min: 1, max: 4096 }, Dflt::IntList(&[16, 32, 32]),
                "Channels of each residual stage.";
            features: usize = "features", Ty::Int {
                        min: 1,
                        max: 65_536,
                    }, Dflt::Int(256),
                "Width of the final dense layer.";
        },
        Layers = "layers", "A network of your own: the layers of its `layers` block, in order, from the observation to the heads (see Layers below); shapes are checked against the observation where the config knows it, and when the run builds the network." {
            layers: Vec<tandem_spec::Layer> = "layers", Ty::Layers, Dflt::Required,
                "The torso's layers, in order: `layers { linear 64; tanh; residual { linear 64; tanh } }`. The heads (and a recurrent core, with `core`) follow the last layer, reading its output flattened.";
        },
    }
}

impl Torso {
    /// A built-in torso as the layers it is, for observations that are (`pixels`) or are not
    /// raw 0..255 pixels (the Nature and IMPALA torsos scale those, MinAtar's planes are 0/1):
    /// `network "layers"` with this list builds the same network, variables, draws and fast
    /// paths included ([`Torso::preset_of`]). `None` for a declared list itself.
    pub fn as_layers(&self, pixels: bool) -> Option<Vec<Layer>> {
        use layer::Activation::Relu;
        let relu = Layer::Activation(Relu);
        let conv = |out: usize, kernel: u32, stride: u32, padding: u32| Layer::Conv {
            out: out as u32,
            kernel,
            stride,
            padding,
        };
        let linear = |out: usize| Layer::Linear { out: out as u32 };
        let scale: Vec<Layer> = if pixels {
            vec![Layer::ScalePixels]
        } else {
            Vec::new()
        };
        Some(match self {
            Torso::Layers { .. } => return None,
            Torso::Mlp { hidden, activation } => {
                let activation = Layer::Activation(match activation {
                    Activation::Tanh => layer::Activation::Tanh,
                    Activation::Relu => Relu,
                });
                hidden
                    .iter()
                    .flat_map(|&width| [linear(width), activation.clone()])
                    .collect()
            }
            Torso::NatureCnn { features } => {
                let convs =
                    [(32, 8, 4), (64, 4, 2), (64, 3, 1)].map(|(out, k, s)| conv(out, k, s, 0));
                let mut list = scale;
                for c in convs {
                    list.extend([c, relu.clone()]);
                }
                list.extend([linear(*features), relu]);
                list
            }
            Torso::MinatarCnn { channels, features } => {
                vec![
                    conv(*channels, 3, 1, 0),
                    relu.clone(),
                    linear(*features),
                    relu,
                ]
            }
            Torso::ImpalaCnn { channels, features } => {
                let mut list = scale;
                for &c in channels {
                    let block = Layer::Residual {
                        body: vec![
                            relu.clone(),
                            conv(c, 3, 1, 1),
                            relu.clone(),
                            conv(c, 3, 1, 1),
                        ],
                    };
                    let pool = Layer::MaxPool {
                        kernel: 3,
                        stride: 2,
                        padding: 1,
                    };
                    list.extend([conv(c, 3, 1, 1), pool, block.clone(), block]);
                }
                list.extend([relu.clone(), linear(*features), relu]);
                list
            }
        })
    }

    /// The built-in torso `layers` spell out for observations that are (`pixels`) or are not
    /// raw pixels, if any: its parameters read off the list, then held to its
    /// [`Torso::as_layers`] exactly.
    pub fn preset_of(layers: &[Layer], pixels: bool) -> Option<Torso> {
        let outs = |pick: fn(&Layer) -> Option<u32>| -> Vec<usize> {
            layers.iter().filter_map(pick).map(|o| o as usize).collect()
        };
        let linears = outs(|l| match l {
            Layer::Linear { out } => Some(*out),
            _ => None,
        });
        let convs = outs(|l| match l {
            Layer::Conv { out, .. } => Some(*out),
            _ => None,
        });
        let features = linears.last().copied().unwrap_or(0);
        let activation = match layers.get(1) {
            Some(Layer::Activation(layer::Activation::Relu)) => Activation::Relu,
            _ => Activation::Tanh,
        };
        let candidates = [
            Torso::Mlp {
                hidden: linears.clone(),
                activation,
            },
            Torso::NatureCnn { features },
            Torso::MinatarCnn {
                channels: convs.first().copied().unwrap_or(0),
                features,
            },
            Torso::ImpalaCnn {
                channels: convs,
                features,
            },
        ];
        candidates
            .into_iter()
            .find(|torso| torso.as_layers(pixels).as_deref() == Some(layers))
    }
}

choices! {
    /// How the network's weights start.
    pub enum Init {
        /// Orthogonal weights (Saxe et al. 2014) multiplied by the role's gain, and zero
        /// biases. For a weight `W` of shape `[out, in]` (a conv kernel flattened to
        /// `[out, in * k * k]`), the smaller of `W Wᵀ` and `Wᵀ W` is `gain² I`.
        Orthogonal = "orthogonal",
        /// What tch 0.26's `nn::linear` and `nn::conv2d` give with their default configs:
        /// weights Kaiming-uniform for ReLU, `U(-b, b)` with `b = sqrt(6 / fan_in)` (`fan_in` is
        /// the layer's inputs, times the kernel area for a conv); linear biases
        /// `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, conv biases zero. (PyTorch's own modules draw
        /// their weights from a narrower `U(±1/sqrt(fan_in))`; this is tch's default, not
        /// PyTorch's.) Stacked layers get the same draws, slice by slice, in the same order
        /// (bias, then weight) as separate layers. The gains are not used.
        Default = "default",
        /// PyTorch's `nn.Linear` and `nn.Conv2d` defaults: weights and biases `U(-b, b)` with
        /// `b = 1/sqrt(fan_in)`, biases drawn first (tch's order). What SB3's and CleanRL's SAC
        /// networks start from. The gains are not used.
        Torch = "torch",
    }
}

choices! {
    /// Whether actor and critic share one torso.
    pub enum ActorCritic {
        /// One torso feeds both heads.
        Shared = "shared",
        /// Actor and critic have their own.
        Separate = "separate",
    }
}

choices! {
    /// The number format an image torso's layers compute in.
    pub enum Precision {
        /// IEEE single precision, as everything else.
        Float32 = "float32",
        /// bfloat16 operands (8 significant bits) with float32 weights, gradients and
        /// everything outside the torso.
        Bfloat16 = "bfloat16",
    }
}

choices! {
    /// A recurrent core's cell.
    pub enum Core {
        Lstm = "lstm",
        Gru = "gru",
    }
}

/// `#true` and `#false` keep the canonical text they had when the setting was a switch.
impl Setting for AdvantageNorm {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Str(_)) => Self::Minibatch,
            Some(Val::Bool(false)) => Self::Off,
            _ => Self::Batch,
        }
    }
    fn to_val(&self) -> Val {
        match self {
            Self::Off => Val::Bool(false),
            Self::Batch => Val::Bool(true),
            Self::Minibatch => Val::Str("minibatch".into()),
        }
    }
}

impl Setting for AutoOr {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Float(x)) => Self::Value(*x),
            _ => Self::Auto,
        }
    }
    fn to_val(&self) -> Val {
        match self {
            Self::Auto => Val::Str("auto".into()),
            Self::Value(x) => Val::Float(*x),
        }
    }
}

/// One of tandem-spec's named choices (`choices`, each written as `name` gives it), read by
/// name; the schema admits only their names, so anything else reads as the default.
fn choice_by_name<T: Copy + Default>(
    val: Option<&Val>,
    choices: &[T],
    name: fn(T) -> &'static str,
) -> T {
    let text = match val {
        Some(Val::Str(s)) => s.as_str(),
        _ => "",
    };
    choices
        .iter()
        .copied()
        .find(|&choice| name(choice) == text)
        .unwrap_or_default()
}

/// `env "gymnasium" { action-mask }` (and pettingzoo's).
impl Setting for ActionMask {
    fn from_val(val: Option<&Val>) -> Self {
        choice_by_name(val, &ActionMask::ALL, ActionMask::name)
    }
    fn to_val(&self) -> Val {
        Val::Str(self.name().to_string())
    }
}

/// `env "pettingzoo" { api }`.
impl Setting for ZooApi {
    fn from_val(val: Option<&Val>) -> Self {
        choice_by_name(val, &ZooApi::ALL, ZooApi::name)
    }
    fn to_val(&self) -> Val {
        Val::Str(self.name().to_string())
    }
}

/// `network.core`: "none", or a cell.
impl Setting for Option<Core> {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Str(name)) if name != "none" => Some(Core::from_val(val)),
            _ => None,
        }
    }
    fn to_val(&self) -> Val {
        self.map_or(Val::Str("none".into()), |core| core.to_val())
    }
}

/// `network.core`'s choices: no core, or one of [`Core`].
const CORE_CHOICES: [&str; Core::NAMES.len() + 1] = {
    let mut choices = ["none"; Core::NAMES.len() + 1];
    let mut i = 0;
    while i < Core::NAMES.len() {
        choices[i + 1] = Core::NAMES[i];
        i += 1;
    }
    choices
};

settings! {
    /// The `network` section: The policy/value network: `network \"nature-cnn\" { ... }`.
    pub struct Network {
        kind torso: Torso;
        actor_critic: ActorCritic = "actor-critic", Ty::Choice(ActorCritic::NAMES), Dflt::ActorCritic,
            "Whether actor and critic share one torso or each has its own. The default gives ppo's and a2c's MLPs without a core separate torsos, as CleanRL's and Stable-Baselines3's MLP policies have them: a shared MLP lets the critic's unnormalised value loss swamp the policy's gradient (docs/defaults.md). Image torsos and recurrent cores are shared, as CleanRL's Atari agents share them. Separate MLP torsos and their heads are stored and computed stacked (checkpoint names `torsos.fc{i}.weight` `[2, in, out]` and `heads.weight` `[2, features, actions]`, index 0 the actor's (for a box of d, `actions` is d: the Gaussian's means), the value head in column 0 of index 1), which halves the operations of a classic-control update; separate image torsos are `actor_torso.*` and `critic_torso.*`. A policy over box actions adds `policy_log_std` `[1, d]`, its state-independent log standard deviation.";
        init: Init = "init", Ty::Choice(Init::NAMES), Dflt::Learner {
                usual: &Dflt::Str("orthogonal"),
                box_actor: &Dflt::Str("torch"),
            },
            "Weight initialisation: orthogonal with the gains below; tch's default layers' (weights uniform in ±sqrt(6 / fan-in), linear biases uniform in ±1 / sqrt(fan-in), conv biases zero); or PyTorch's default modules' (weights and biases uniform in ±1 / sqrt(fan-in), what Stable-Baselines3's and CleanRL's off-policy networks start from, and so sac's and td3's default). Only orthogonal takes the gains.";
        torso_gain: f64 = "torso-gain", NON_NEGATIVE, Dflt::Float(std::f64::consts::SQRT_2),
            "Orthogonal gain of torso layers.";
        policy_gain: f64 = "policy-gain", NON_NEGATIVE, Dflt::Float(0.01),
            "Orthogonal gain of the policy head (actor-critics; dqn refuses it).";
        value_gain: f64 = "value-gain", NON_NEGATIVE, Dflt::Float(1.0),
            "Orthogonal gain of the value head, and of dqn's Q heads.";
        core: Option<Core> = "core", Ty::Choice(&CORE_CHOICES), Dflt::Str("none"),
            "A recurrent core between the torso and the heads (ppo and a2c, with a shared torso): one LSTM or GRU layer of `core-size` units (variables `core.input.*` and `core.hidden.*`, orthogonal with gain 1 under init \"orthogonal\"). Each environment's state is carried across rollouts, zeroed where an episode starts, kept in checkpoints and in `tandem play`; updates recompute the states over whole environment sequences from the rollout's start, so ppo's minibatches are made of environments (minibatches must divide each rank's environments), and env-groups cannot be used.";
        core_size: usize = "core-size", Ty::Int {
                min: 1,
                max: 65_536,
            }, Dflt::Int(128),
            "Units of the recurrent core (with `core` \"lstm\" or \"gru\").";
        critic_input: CriticInput = "critic-input", Ty::Choice(CriticInput::NAMES), Dflt::Str("own"),
            "What the critic reads in a game of several agents: `\"own\"`, the agent's own observation, as the actor does (independent learners, IPPO); or `\"state\"`, the game's state, a centralised critic (MAPPO): every agent's observation in the game (each as wide as the batch's row, in the game's order) and a one-hot of the agent's index, after the agent's own observation, while the actor still reads only its own. Needs a multi-agent game, ppo or a2c with synchronous sampling, `actor-critic \"separate\"` MLP torsos and no core; the critic's first layer then reads own + agents x row + agents floats (a checkpoint's `critic_torso.*` and `actor_torso.*`, not the stacked `torsos.*`), and an exported policy takes the same input.";
        agent_index: bool = "agent-index", Ty::Bool, Dflt::Bool(false),
            "In a game of several agents, tell the policy which of its agents each row is: a one-hot of the agent's index among the agents the policy plays follows the agent's observation in the input of the actor and of the critic (one policy sharing its parameters over agents that should act differently, as MAPPO's agent id does). Needs a multi-agent game of the catalogue, ppo or a2c with synchronous sampling and no core; the torsos' first layer then reads observation + agents floats, and an exported policy takes the same input.";
        precision: Precision = "precision", Ty::Choice(Precision::NAMES), Dflt::Str("float32"),
            "The number format of an image torso's convolutions and dense layer (nature-cnn, minatar-cnn, impala-cnn): \"float32\", or \"bfloat16\", where each layer reads its input and a bfloat16 copy of its float32 weights and the torso's output returns to float32 for the heads, the recurrent core and the losses; gradients, optimizer state and checkpoints stay float32. On an Intel Xeon with AMX (Sapphire Rapids and later) Atari Breakout PPO trained 1.8 times as fast on one thread and MinAtar Breakout PPO 1.3 times (docs/performance.md); on a CPU without bfloat16 instructions libtorch converts in software, which may be much slower than float32 (not measured on these machines). Results differ from float32's from the first update (bfloat16 keeps 8 significant bits). MLP torsos refuse it: their small products run on the host in float32.";
    }
}

impl Network {
    /// Whether one torso feeds both heads.
    pub fn shared(&self) -> bool {
        self.actor_critic == ActorCritic::Shared
    }
}

choices! {
    /// What a multi-agent actor-critic's critic reads (`network.critic-input`).
    pub enum CriticInput {
        /// The agent's own observation (independent learners).
        Own = "own",
        /// Every agent's observation in the game and the agent's index (a centralised critic).
        State = "state",
    }
}

choices! {
    /// How allreduce sends gradients.
    pub enum Compression {
        None = "none",
        Bf16 = "bf16",
    }
}

kinds! {
    /// How ranks stay in step: the `sync` section's kind.
    #[derive(Copy)]
    pub enum SyncPolicy {
        Allreduce = "allreduce", "Average gradients across ranks every update (DDP)." {
            bucket_mb: f64 = "bucket-mb", Ty::Float {
                        min: 0.0,
                        min_open: true,
                        max: 4096.0,
                        max_open: false,
                    }, Dflt::Float(25.0),
                "Gradient bucket size in MiB.";
            compression: Compression = "compression", Ty::Choice(Compression::NAMES), Dflt::Str("none"),
                "Gradient compression on the wire.";
        },
        Broadcast = "broadcast", "Rank 0 broadcasts its parameters to the others after every update.",
        Periodic = "periodic", "Ranks train independently and average parameters every N updates." {
            every: u64 = "every", COUNT, Dflt::Int(10),
                "Updates between parameter averages.";
        },
        None = "none", "No synchronisation after the initial broadcast (independent ranks).",
    }
}

settings! {
    /// The `sync` section: How ranks stay in step: `sync \"allreduce\" { ... }`.
    pub struct Sync {
        kind policy: SyncPolicy;
        check_every: Option<u64> = "check-every", COUNT, Dflt::Int(100),
            "Updates between cross-rank parameter fingerprint checks; `#null` disables them.";
        rendezvous_timeout: f64 = "rendezvous-timeout", SECONDS, Dflt::Float(120.0),
            "Seconds to wait for all ranks at start.";
        collective_timeout: f64 = "collective-timeout", SECONDS, Dflt::Float(300.0),
            "Seconds before a collective operation fails.";
        backend: SyncBackend = "backend", Ty::Choice(SyncBackend::NAMES), Dflt::Str("auto"),
            "Collective backend: `auto` takes NCCL when the devices are CUDA and Gloo otherwise; `gloo` also runs CUDA tensors (copied through the host), e.g. for several ranks on one GPU, which NCCL refuses; `nccl` needs every device to be CUDA and distinct on each host.";
    }
}

choices! {
    /// The c10d backend the ranks' collectives use.
    pub enum SyncBackend {
        /// NCCL when the devices are CUDA, Gloo otherwise.
        Auto = "auto",
        Gloo = "gloo",
        Nccl = "nccl",
    }
}

settings! {
    /// The `train` section: How long and in what steps to train.
    pub struct Train {
        total_steps: u64 = "total-steps", COUNT, Dflt::Int(1_000_000),
            "Environment steps over all ranks.";
        rollout: usize = "rollout", Ty::Int {
                min: 1,
                max: 1_000_000,
            }, Dflt::Int(128),
            "Steps per environment per update (ppo, a2c).";
        env_groups: usize = "env-groups", Ty::Int { min: 1, max: 1024 }, Dflt::Int(1),
            "Step each rank's environments in this many groups in turn, each group's environment step running on a second thread while the policy acts for the next group (double-buffered sampling; ppo, a2c). 1 steps them all at once. Must divide each rank's environments. Worth it when stepping the environments costs about as much as the forward pass (Atari); the grouping changes the order of the action draws, so a run's results depend on it. With sampling \"free\" the groups are not stepped in turn: each steps on a rollout worker thread of its own and the policy serves the groups that have stepped, all of them in one forward pass (ready order, sample-factory's rollout and policy workers), so a slow environment delays only its own group, and a group that finishes a batch goes on into the next while the slowest finishes it; with gymnasium environments the workers must then be a multiple of the groups.";
        sampling: Sampling = "sampling", Ty::Choice(Sampling::NAMES), Dflt::Str("synchronous"),
            "How collection and learning take turns (ppo): `\"synchronous\"` collects a batch with the current policy, then updates on it; `\"pipelined\"` collects the next batch on a second thread, with a copy of the policy taken before the update, while the learner updates on the batch before it, so every batch after the first lags the learner by exactly one update (policy lag 1, corrected by PPO's ratio against the stored behaviour log-probabilities; deterministic, bit-reproducible like a synchronous run). Worth it where stepping the environments costs about as much as the update; a checkpoint keeps the batch in flight. `\"free\"` runs collection on its own thread without waiting for the learner (sample-factory's asynchronous sampling): batches queue as they complete, the learner publishes its parameters after every update and the collector takes them up between steps, so the policy lag varies with timing (logged per update; not reproducible); with env-groups, in ready order. docs/sampling.md.";
        round_updates: u64 = "round-updates", COUNT, Dflt::Int(8),
            "With sampling \"free\": updates per round, across which collection runs free. Between rounds the collector stops at the end of its batch so that the run can merge normaliser statistics, gather episodes, take the stop decision (Ctrl-C waits for the round) and checkpoint; the batches collected and not yet learned from carry over to the next round.";
        max_policy_lag: Option<u64> = "max-policy-lag", COUNT, Dflt::Null,
            "With sampling \"free\": a batch with any step chosen by parameters more than this many updates behind the learner is dropped, and the learner takes the next (sample-factory's max_policy_lag); `#null` learns from every batch.";
        policies: PolicyMap = "policies", Ty::Policies, Dflt::NoArgs,
            "Several policies in one multi-agent game (ppo or a2c, synchronous sampling, no recurrent core): a block naming each policy and the ids of the agents it plays, `policies { predators \"adversary_*\"; prey \"agent_*\" }` (`*` matches any run of characters). Every agent is played by exactly one policy, and one policy's agents see observations of one length. Each policy has its own network and optimizer, by the `network` and `algorithm` sections' settings or by its own: a block after its pattern sets any of those sections' settings for it alone, `prey \"agent_*\" { algorithm.lr 1e-3; network.hidden 128 128 }` (the algorithm and torso kinds stay the experiment's; each value is checked as `--set` checks one, on the policy's whole experiment). It learns from its own agents' rows, and has its gradients averaged over the ranks on its own; all act on every step of one shared batch. Scalars are tagged `policy/<name>/` (each policy's episode and evaluation scores among them), checkpoints name tensors `policy.<name>.`; `tandem play` plays them all (`--random <name>` replaces one by uniform moves), `tandem export --policy <name>` exports one. Empty (the default): one policy, `default`, plays every agent (parameter sharing).";
        max_steps: Option<u64> = "max-steps", COUNT, Dflt::Null,
            "Stop after this many global steps, keeping schedules computed from total-steps (for short deterministic runs, e.g. `--set train.max-steps=4096`); `#null` runs to total-steps.";
    }
}

choices! {
    /// How an on-policy learner's collection and update take turns (`train.sampling`).
    pub enum Sampling {
        Synchronous = "synchronous",
        /// The next batch is collected with a one-update-old copy of the policy while the
        /// learner updates on the batch before it.
        Pipelined = "pipelined",
        /// Collection runs free on its own thread, the learner takes the batches as they
        /// complete, and the collector takes up the newest parameters between steps.
        Free = "free",
    }
}

choices! {
    /// Console output.
    pub enum Console {
        Progress = "progress",
        Plain = "plain",
        Quiet = "quiet",
    }
}

choices! {
    /// What `log.interval` counts.
    pub enum IntervalUnit {
        Updates = "updates",
        Seconds = "seconds",
    }
}

settings! {
    /// The `log` section: What rank 0 reports.
    pub struct Log {
        tensorboard: bool = "tensorboard", Ty::Bool, Dflt::Bool(true),
            "Write TensorBoard event files.";
        console: Console = "console", Ty::Choice(Console::NAMES), Dflt::Str("progress"),
            "Console output: a progress bar, plain log lines, or nothing but errors.";
        interval: u64 = "interval", COUNT, Dflt::Int(10),
            "How often to log, in interval-unit.";
        interval_unit: IntervalUnit = "interval-unit", Ty::Choice(IntervalUnit::NAMES), Dflt::Str("updates"),
            "Unit of interval.";
        histogram_every: Option<u64> = "histogram-every", COUNT, Dflt::Null,
            "Updates between parameter histograms; `#null` writes none.";
    }
}

choices! {
    /// What an `every` counts (`checkpoint.every`, `eval.every`).
    pub enum EveryUnit {
        Updates = "updates",
        /// Global environment steps.
        Steps = "steps",
    }
}

settings! {
    /// The `checkpoint` section: Checkpoints written by rank 0.
    pub struct Checkpoint {
        every: Option<u64> = "every", COUNT, Dflt::Int(100),
            "Checkpoint interval in unit; `#null` writes only the final checkpoint.";
        unit: EveryUnit = "unit", Ty::Choice(EveryUnit::NAMES), Dflt::Str("updates"),
            "Unit of every: updates, or global environment steps.";
        keep: usize = "keep", Ty::Int {
                min: 1,
                max: 100_000,
            }, Dflt::Int(3),
            "How many recent checkpoints to keep.";
    }
}

settings! {
    /// The `eval` section: Evaluation during training, on environments of its own.
    pub struct Eval {
        every: Option<u64> = "every", COUNT, Dflt::Null,
            "Evaluation interval in unit; `#null` (the default, as in SB3, CleanRL and RLlib) evaluates never. Every rank evaluates after the same update, on environments of its own (seeded apart from training's; the training chain without its reward transforms, normalisers frozen at training's statistics), and the episodes' scores are gathered: `eval/score_*` and `eval/length_mean` in TensorBoard and scalars.jsonl, `eval_*` in summary.json, a line on the console.";
        unit: EveryUnit = "unit", Ty::Choice(EveryUnit::NAMES), Dflt::Str("updates"),
            "Unit of every: updates, or global environment steps.";
        episodes: usize = "episodes", Ty::Int {
                min: 1,
                max: 100_000,
            }, Dflt::Int(10),
            "Episodes of one evaluation, over all ranks (each rank plays its share, one environment an episode).";
        deterministic: bool = "deterministic", Ty::Bool, Dflt::Bool(true),
            "Act with the most likely action (a box policy's mean, a Q-learner's greedy action, TD3's actor without noise), as SB3's EvalCallback does by default; `#false` samples (a Q-learner acts epsilon-greedily with epsilon 0.05).";
        max_episode_steps: u64 = "max-episode-steps", COUNT, Dflt::Int(27_000),
            "An evaluation episode still running after this many agent steps is cut there and counted with the score it has (27,000: the 108,000 frames at which the ALE ends an Atari game, at frame-skip 4), so a policy that stalls cannot hold the run.";
        video_every: Option<u64> = "video-every", COUNT, Dflt::Null,
            "Record one episode every this many evaluations (the first, then every this many): rank 0's first evaluation environment draws each step of its episode, kept as `videos/eval-<step>.gif` and as the image `eval/video` in TensorBoard (played by its image plugin). At most 1,000 frames and 64 MiB of drawn frames are kept (the start of a longer episode). `#null` records none; a game that does not draw itself stops the run at its start.";
    }
}

choices! {
    /// What population-based training ranks members by (`population.objective`).
    pub enum Objective {
        /// The mean game score of the member's last 100 episodes (the final-score rule).
        Score = "score",
        /// The mean score of the member's latest evaluation (`eval.every` must be set).
        Eval = "eval",
        /// A scalar the member's learner logs at every update (`objective-scalar`).
        Scalar = "scalar",
    }
}

settings! {
    /// The `population` section: Several members trained at once, each by its own ranks, with population-based training between them.
    pub struct Population {
        members: Option<u64> = "members", Ty::Int { min: 2, max: 4096 }, Dflt::Null,
            "Train this many members at once, each a learner of its own on an equal share of the devices (member k on ranks k*m..k*m+m-1, m = devices / members), its gradients averaged inside its own ranks only; each member has its own seed (derived from the experiment's) and trains `train.total-steps` steps of its own. Its files go in `members/<k>/` of the run directory, laid out as a run's. `#null` (the default): one learner, no population. docs/population.md.";
        period: u64 = "period", COUNT, Dflt::Int(50_000),
            "Population-based training's interval, in each member's own environment steps: after the update that crosses a multiple of it, every member's objective is gathered, the bottom `exploit` fraction copies the parameters, optimiser state and observation normaliser of a member drawn from the top fraction, and explores (perturbs the hyperparameters of `explore`).";
        objective: Objective = "objective", Ty::Choice(Objective::NAMES), Dflt::Str("score"),
            "What members are ranked by: `\"score\"`, the mean score of the member's last 100 episodes; `\"eval\"`, its latest evaluation's mean score (needs `eval.every`); `\"scalar\"`, the latest value of the scalar `objective-scalar` names.";
        objective_scalar: Option<String> = "objective-scalar", Ty::Text, Dflt::Null,
            "With `objective \"scalar\"`, the tag of the scalar members are ranked by, higher ranking higher: one the member's learner logs at every update, as TensorBoard shows it (`league/elo`, a league's rating; `league/win_rate`; `loss/entropy`...). A tag the learner does not log stops the run at the first period, listing those it does.";
        exploit: f64 = "exploit", Ty::Float {
                min: 0.0,
                min_open: false,
                max: 0.5,
                max_open: false,
            }, Dflt::Float(0.25),
            "The fraction of members (rounded up, at least one where it is above 0) that copy a better member at each period, and the fraction at the top they copy from; 0 trains the members side by side without exchange (a population of fixed hyperparameters, the baseline PBT is held against).";
        explore: ExploreList = "explore", Ty::Explore, Dflt::NoArgs,
            "The hyperparameters members differ in and explore: a block of number settings of the algorithm section, each `algorithm.lr factor=1.25 min=1e-5 max=1e-2` (multiplied or divided by factor, kept within the range) or `algorithm.entropy-coef 0 0.003 0.01 0.03` (a step to a neighbouring value); `spread=#false` starts every member from the experiment's value instead of a seeded draw from the range (log-uniform) or the list (uniform). Settings an update reads afresh each time: for ppo lr, gamma, gae-lambda, clip, value-clip, entropy-coef, value-coef, max-grad-norm, target-kl; for a2c lr, gamma, gae-lambda, entropy-coef, value-coef, max-grad-norm.";
    }
}

choices! {
    /// How a league draws the opponent of each game (`league.opponent`).
    pub enum OpponentRule {
        /// The newest snapshot.
        Latest = "latest",
        /// Any snapshot, uniformly.
        Uniform = "uniform",
        /// Snapshots the learner scores least against, more often (prioritised fictitious
        /// self-play).
        WinRate = "win-rate",
    }
}

choices! {
    /// Whose snapshots join a league (`league.pool`).
    pub enum LeaguePool {
        /// The learner's own.
        Own = "own",
        /// Every member's of the learner's population.
        Population = "population",
    }
}

settings! {
    /// The `league` section: Self-play against the learner's past selves: every game's other seats played by a frozen snapshot drawn from a league.
    pub struct League {
        every: Option<u64> = "every", COUNT, Dflt::Null,
            "Add a snapshot of the learner to its league every this many of its run's environment steps (after the update that crosses a multiple of it; the initial parameters are the first). In game g of a rank the learner plays agent g mod agents, and a snapshot drawn from the league when the game starts plays the others, acting as it learned, sampled; only the learner's rows are learned from. `#null` (the default): no league, one policy plays every agent. docs/population.md, Self-play.";
        size: u64 = "size", Ty::Int { min: 1, max: 100_000 }, Dflt::Int(32),
            "Snapshots the league keeps; when a new one would make more, the oldest leaves. Each is a copy of the network's parameters, on the rank's device.";
        pool: LeaguePool = "pool", Ty::Choice(LeaguePool::NAMES), Dflt::Str("own"),
            "Whose snapshots join the league: `\"own\"`, the learner's; `\"population\"`, every member's of its population at each `every` (members' parameters are sent to every rank of the job then; needs `population.members`), so each member also plays the others' past selves.";
        opponent: OpponentRule = "opponent", Ty::Choice(OpponentRule::NAMES), Dflt::Str("win-rate"),
            "How each game's opponent is drawn: `\"latest\"`, the newest snapshot; `\"uniform\"`, any of them alike; `\"win-rate\"`, snapshot i with weight (1 - p_i)^2, where p_i = (wins + draws/2 + 1) / (games + 2) is the learner's score rate against it over the run, so the ones it beats least come most often (prioritised fictitious self-play).";
    }
}

/// `population.explore`: the hyperparameters population-based training explores, sorted by
/// path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExploreList(pub Vec<Explore>);

pub use crate::setting::{Explore, ExploreRule};

impl Setting for ExploreList {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Explore(list)) => ExploreList(list.clone()),
            _ => ExploreList::default(),
        }
    }
    fn to_val(&self) -> Val {
        Val::Explore(self.0.clone())
    }
}

/// `train.policies`: each policy's name, the pattern of the agent ids it plays and its own
/// settings, sorted by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyMap(pub Vec<Policy>);

pub use crate::setting::Policy;

impl Setting for PolicyMap {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Policies(list)) => PolicyMap(list.clone()),
            _ => PolicyMap::default(),
        }
    }
    fn to_val(&self) -> Val {
        Val::Policies(self.0.clone())
    }
}

/// Whether agent id `agent` fits `pattern`, where `*` matches any run of characters.
pub fn agent_matches(pattern: &str, agent: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == agent,
        Some((head, rest)) => {
            let Some(tail) = agent.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| agent_matches(rest, &tail[i..]))
        }
    }
}

/// One policy of a run of several, and the agents it plays in every game.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyPlan {
    pub name: String,
    /// Indices into each game's agents, ascending.
    pub agents: Vec<usize>,
    /// What its agents observe (the first agent's; the resolver refuses a policy whose agents
    /// differ).
    pub observation: ObsSpace,
}

/// A multi-agent game's agents in the game's order: their ids and what each observes.
pub fn agents_of(game: &Game) -> Vec<(String, ObsSpace)> {
    let teams = game.teams().into_iter();
    let each = teams.flat_map(|team| {
        (0..team.agents).map(move |i| (format!("{}_{i}", team.name), team.observation))
    });
    each.collect()
}

/// What is wrong with `train.policies` over a game's agents ([`Experiment::policy_misfits`]);
/// policies by their index in `train.policies`.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyMisfit {
    MatchesNone {
        policy: usize,
    },
    MixedLengths {
        policy: usize,
        lengths: Vec<usize>,
    },
    Unplayed {
        agent: String,
    },
    PlayedTwice {
        agent: String,
        policies: Vec<usize>,
    },
    /// A policy's rows on a rank (`batch`) do not split into ppo's minibatches.
    Minibatches {
        policy: usize,
        batch: usize,
        minibatches: usize,
    },
}

impl PolicyMisfit {
    /// What is wrong, in words, naming the policies of `e`.
    pub fn message(&self, e: &Experiment) -> String {
        let name = |p: &usize| e.train.policies.0[*p].name.as_str();
        match self {
            PolicyMisfit::MatchesNone { policy } => format!(
                "policy `{}`'s pattern `{}` matches no agent",
                name(policy),
                e.train.policies.0[*policy].pattern
            ),
            PolicyMisfit::MixedLengths { policy, lengths } => {
                let lengths: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
                format!(
                    "policy `{}` plays agents that observe different lengths ({})",
                    name(policy),
                    lengths.join(", ")
                )
            }
            PolicyMisfit::Unplayed { agent } => format!("agent `{agent}` is played by no policy"),
            PolicyMisfit::PlayedTwice { agent, policies } => {
                let names: Vec<&str> = policies.iter().map(name).collect();
                format!(
                    "agent `{agent}` is played by {} (one policy an agent)",
                    names.join(" and ")
                )
            }
            PolicyMisfit::Minibatches {
                policy,
                batch,
                minibatches,
            } => format!(
                "policy `{}`'s {batch} transitions a rank cannot be split into {minibatches} minibatches",
                name(policy)
            ),
        }
    }
}

impl Experiment {
    /// The policies that play seats of the batch: those of `train.policies`, or, where one
    /// policy plays every agent with a centralised critic (`critic-input "state"`) or told
    /// each agent's index (`agent-index`), that one, `default`, over every agent (its
    /// observation the batch's row); empty otherwise. The agents are the game's as the
    /// catalogue lists them; a pettingzoo environment's are known once it is built
    /// ([`Experiment::seated_policies_among`]).
    pub fn seated_policies(&self) -> Vec<PolicyPlan> {
        self.seated_policies_among(&agents_of(&self.env.game))
    }

    /// [`Experiment::seated_policies`] for a game of `agents` (ids and observations, in the
    /// game's order).
    pub fn seated_policies_among(&self, agents: &[(String, ObsSpace)]) -> Vec<PolicyPlan> {
        let plans = self.policy_plans_among(agents);
        let seated = self.network.critic_input == CriticInput::State || self.network.agent_index;
        match seated {
            true if plans.is_empty() => vec![PolicyPlan {
                name: "default".into(),
                agents: (0..self.agents_per_env()).collect(),
                observation: self
                    .observation()
                    .unwrap_or(ObsSpace::vector(0, Dtype::F32)),
            }],
            _ => plans,
        }
    }

    /// The policies of `train.policies`, each with the agents it plays (those its pattern
    /// matches) among the game's as the catalogue lists them; empty where one policy plays
    /// every agent.
    pub fn policy_plans(&self) -> Vec<PolicyPlan> {
        self.policy_plans_among(&agents_of(&self.env.game))
    }

    /// What is wrong with `train.policies` over a game of `agents`: a pattern that matches
    /// none, a policy of agents that observe different lengths, an agent no policy or two
    /// play, a policy's rows that ppo's minibatches do not split. Empty where nothing is, and
    /// where there are no policies (one plays every agent).
    pub fn policy_misfits(&self, agents: &[(String, ObsSpace)]) -> Vec<PolicyMisfit> {
        let plans = self.policy_plans_among(agents);
        let mut misfits = Vec::new();
        if plans.is_empty() {
            return misfits;
        }
        for (policy, plan) in plans.iter().enumerate() {
            if plan.agents.is_empty() {
                misfits.push(PolicyMisfit::MatchesNone { policy });
            }
            let lengths: Vec<usize> = plan.agents.iter().map(|&a| agents[a].1.len()).collect();
            if lengths.iter().any(|&len| len != plan.observation.len()) {
                misfits.push(PolicyMisfit::MixedLengths { policy, lengths });
            }
        }
        for (a, (agent, _)) in agents.iter().enumerate() {
            let players: Vec<usize> = (0..plans.len())
                .filter(|&p| plans[p].agents.contains(&a))
                .collect();
            match players.len() {
                1 => {}
                0 => misfits.push(PolicyMisfit::Unplayed {
                    agent: agent.clone(),
                }),
                _ => misfits.push(PolicyMisfit::PlayedTwice {
                    agent: agent.clone(),
                    policies: players,
                }),
            }
        }
        if let (Algorithm::Ppo(ppo), true) = (&self.algorithm, misfits.is_empty()) {
            for (policy, plan) in plans.iter().enumerate() {
                let batch = self.per_rank_envs() * plan.agents.len() * self.train.rollout;
                // A policy's own `algorithm.minibatches` (canonical: its digits) splits its rows.
                let own = self.train.policies.0[policy].settings.iter();
                let minibatches = own
                    .filter(|(path, _)| path == "algorithm.minibatches")
                    .find_map(|(_, value)| value.parse().ok())
                    .unwrap_or(ppo.minibatches);
                if !batch.is_multiple_of(minibatches) {
                    misfits.push(PolicyMisfit::Minibatches {
                        policy,
                        batch,
                        minibatches,
                    });
                }
            }
        }
        misfits
    }

    /// [`Experiment::policy_plans`] for a game of `agents` (ids and observations, in the
    /// game's order).
    pub fn policy_plans_among(&self, agents: &[(String, ObsSpace)]) -> Vec<PolicyPlan> {
        let plan = |policy: &Policy| {
            let mine: Vec<usize> = (0..agents.len())
                .filter(|&i| agent_matches(&policy.pattern, &agents[i].0))
                .collect();
            let observation = mine
                .first()
                .map_or(ObsSpace::vector(0, Dtype::F32), |&i| agents[i].1);
            PolicyPlan {
                name: policy.name.clone(),
                agents: mine,
                observation,
            }
        };
        self.train.policies.0.iter().map(plan).collect()
    }

    /// The ranks of the whole job: one per device.
    pub fn job_ranks(&self) -> usize {
        self.devices.len()
    }

    /// The ranks one learner spans, whose gradients are averaged together and over which
    /// every global size is divided: every device, or a population member's share of them.
    pub fn world_size(&self) -> usize {
        match self.population.members {
            Some(members) => self.devices.len() / (members as usize).max(1),
            None => self.devices.len(),
        }
    }

    /// Environments each rank runs. The resolver guarantees exact division.
    pub fn per_rank_envs(&self) -> usize {
        self.env.envs / self.world_size()
    }

    /// Agents that act in each environment's game: 1, but for a multi-agent game, whose every
    /// agent is a row of the batch (a gymnasium environment counts as one; a pettingzoo one as
    /// its `agents` setting says, which the run checks against the built environment).
    pub fn agents_per_env(&self) -> usize {
        self.env.game.agents()
    }

    /// Rows each rank steps: its environments times their agents. Every per-rank buffer
    /// (rollout, replay, recurrent state) holds this many; a step counts one per row.
    pub fn per_rank_rows(&self) -> usize {
        self.per_rank_envs() * self.agents_per_env()
    }

    /// Transitions per on-policy update over all ranks: rows times rollout.
    pub fn batch_size(&self) -> usize {
        self.env.envs * self.agents_per_env() * self.train.rollout
    }

    /// Transitions each rank collects per on-policy update.
    pub fn per_rank_batch(&self) -> usize {
        self.per_rank_rows() * self.train.rollout
    }

    /// PPO minibatch size on each rank (the resolver guarantees exact division);
    /// `None` for other algorithms.
    pub fn per_rank_minibatch_size(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Ppo(ppo) => Some(self.per_rank_batch() / ppo.minibatches),
            Algorithm::A2c(_) | Algorithm::Dqn(_) | Algorithm::Sac(_) | Algorithm::Td3(_) => None,
        }
    }

    /// Replay capacity of each rank's buffer (DQN, SAC, TD3); `None` for on-policy algorithms.
    pub fn per_rank_buffer_capacity(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Dqn(dqn) => Some(dqn.buffer_capacity / self.world_size()),
            Algorithm::Sac(sac) => Some(sac.buffer_capacity / self.world_size()),
            Algorithm::Td3(td3) => Some(td3.buffer_capacity / self.world_size()),
            Algorithm::Ppo(_) | Algorithm::A2c(_) => None,
        }
    }

    /// Transitions each rank samples per gradient step (DQN, SAC, TD3); `None` for on-policy
    /// algorithms.
    pub fn per_rank_batch_size(&self) -> Option<usize> {
        match &self.algorithm {
            Algorithm::Dqn(dqn) => Some(dqn.batch_size / self.world_size()),
            Algorithm::Sac(sac) => Some(sac.batch_size / self.world_size()),
            Algorithm::Td3(td3) => Some(td3.batch_size / self.world_size()),
            Algorithm::Ppo(_) | Algorithm::A2c(_) => None,
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
            Torso::Layers { layers } if layer::convolves(layers) => false,
            Torso::Layers { layers } => {
                let widths: Vec<usize> = layer::preorder(layers)
                    .iter()
                    .filter_map(|l| match l {
                        tandem_spec::Layer::Linear { out } => Some(*out as usize),
                        _ => None,
                    })
                    .collect();
                self.rows_times_widest(&widths) < SMALL_LAYER_MACS
            }
            Torso::Mlp { hidden, .. } => self.rows_times_widest(hidden) < SMALL_LAYER_MACS,
        }
    }

    /// The rows of one update's product times its widest layer's weights (in x out), with
    /// `hidden`'s widths in order.
    fn rows_times_widest(&self, hidden: &[usize]) -> usize {
        let widest = match hidden {
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
        rows.saturating_mul(widest)
    }

    /// Global environment steps this run takes: `max-steps` when set, else `total-steps`.
    pub fn step_limit(&self) -> u64 {
        self.train
            .max_steps
            .map_or(self.train.total_steps, |m| m.min(self.train.total_steps))
    }

    /// Frames per stored observation that an off-policy replay can rebuild from single frames
    /// (tandem-spec's [`tandem_spec::wrapper::replay_stack`]).
    pub fn replay_stack(&self) -> usize {
        tandem_spec::wrapper::replay_stack(&self.env.wrappers)
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
mod preset_tests {
    use super::*;

    fn presets() -> Vec<Torso> {
        vec![
            Torso::Mlp {
                hidden: vec![64, 32],
                activation: Activation::Tanh,
            },
            Torso::Mlp {
                hidden: vec![256],
                activation: Activation::Relu,
            },
            Torso::NatureCnn { features: 512 },
            Torso::MinatarCnn {
                channels: 16,
                features: 128,
            },
            Torso::ImpalaCnn {
                channels: vec![16, 32, 32],
                features: 256,
            },
        ]
    }

    #[test]
    fn every_preset_is_found_again_from_its_layers_on_pixels_and_not() {
        for torso in presets() {
            for pixels in [false, true] {
                let layers = torso.as_layers(pixels).unwrap();
                assert_eq!(
                    Torso::preset_of(&layers, pixels),
                    Some(torso.clone()),
                    "{layers:?}"
                );
            }
        }
        assert_eq!(Torso::Layers { layers: Vec::new() }.as_layers(true), None);
    }

    #[test]
    fn a_list_that_differs_from_a_preset_anywhere_is_no_preset() {
        let nature = Torso::NatureCnn { features: 512 }.as_layers(true).unwrap();
        // Without the pixel scaling it is the preset only where observations are not pixels.
        assert_eq!(Torso::preset_of(&nature[1..], true), None);
        assert!(Torso::preset_of(&nature[1..], false).is_some());
        let mut wider = nature.clone();
        wider[1] = Layer::Conv {
            out: 32,
            kernel: 8,
            stride: 4,
            padding: 1,
        };
        assert_eq!(Torso::preset_of(&wider, true), None);
        let mixed = vec![
            Layer::Linear { out: 8 },
            Layer::Activation(layer::Activation::Tanh),
            Layer::Linear { out: 8 },
            Layer::Activation(layer::Activation::Relu),
        ];
        assert_eq!(Torso::preset_of(&mixed, false), None);
        let gelu = vec![
            Layer::Linear { out: 8 },
            Layer::Activation(layer::Activation::Gelu),
        ];
        assert_eq!(Torso::preset_of(&gelu, false), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Source, resolve};

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

    /// The algorithm table reads every kind back as itself: the section the user names is
    /// the learner that runs, with its facts, and its write names it again.
    #[test]
    fn every_algorithm_of_the_table_resolves_to_itself() {
        assert_eq!(Algorithm::KINDS.len(), Algorithm::TABLE.len());
        for &(name, facts) in Algorithm::TABLE {
            let text = format!(
                "experiment \"x\" {{\n    algorithm \"{name}\"\n    env \"pendulum\"\n}}\n"
            );
            let sets = match facts.acts {
                Acts::Discrete => vec!["env=\"cartpole\"".to_string()],
                Acts::AnySpace | Acts::SquashedBox => vec![],
            };
            let e = resolve(&Source::Stdin(text), &sets).unwrap().experiment;
            assert_eq!(e.algorithm.name(), name);
            assert_eq!(e.algorithm.facts(), facts);
            assert_eq!(Algorithm::facts_of(name), Some(facts));
        }
        assert_eq!(Algorithm::facts_of("reinforce"), None);
        assert_eq!(
            Algorithm::names_where(|f| f.learns == Learns::OffPolicy, "or"),
            "dqn, sac or td3"
        );
        assert_eq!(Algorithm::names_where(|f| f.corrects_lag, "and"), "ppo");
    }

    #[test]
    fn every_game_has_a_name_that_maps_back() {
        for info in crate::games() {
            let game = Game::from_name(info.name).unwrap();
            assert_eq!(game.name(), info.name);
        }
        assert_eq!(Game::from_name("gymnasium"), None);
    }

    /// A struct's field is its setting's user name with `_` for `-`, so code reads the names
    /// users write (`epochs`, not `update_epochs`).
    #[test]
    fn each_field_is_named_as_users_write_the_setting() {
        let declared = [
            (Ppo::FIELDS, Ppo::RUST_NAMES),
            (A2c::FIELDS, A2c::RUST_NAMES),
            (Dqn::FIELDS, Dqn::RUST_NAMES),
            (Sac::FIELDS, Sac::RUST_NAMES),
            (Td3::FIELDS, Td3::RUST_NAMES),
            (Env::FIELDS, Env::RUST_NAMES),
            (Network::FIELDS, Network::RUST_NAMES),
            (Sync::FIELDS, Sync::RUST_NAMES),
            (Train::FIELDS, Train::RUST_NAMES),
            (Log::FIELDS, Log::RUST_NAMES),
            (Checkpoint::FIELDS, Checkpoint::RUST_NAMES),
            (Eval::FIELDS, Eval::RUST_NAMES),
            (Experiment::FIELDS, Experiment::RUST_NAMES),
        ];
        for (fields, rust) in declared {
            assert_eq!(fields.len(), rust.len());
            for (field, rust) in fields.iter().zip(rust) {
                assert_eq!(field.name.replace('-', "_"), *rust);
            }
        }
    }

    /// `Default` is what the resolver fills in when nothing is written.
    #[test]
    fn a_sections_default_is_the_resolved_default() {
        let resolved = |algorithm: &str| {
            let text = "experiment \"x\" {\n    env \"pendulum\"\n}\n";
            let set = [format!("algorithm={algorithm}")];
            resolve(&Source::Stdin(text.into()), &set)
                .unwrap()
                .experiment
        };
        assert_eq!(resolved("ppo").algorithm, Algorithm::Ppo(Ppo::default()));
        assert_eq!(resolved("a2c").algorithm, Algorithm::A2c(A2c::default()));
        assert_eq!(resolved("sac").algorithm, Algorithm::Sac(Sac::default()));
        assert_eq!(resolved("td3").algorithm, Algorithm::Td3(Td3::default()));
        let e = resolved("ppo");
        assert_eq!(e.train, Train::default());
        assert_eq!(e.log, Log::default());
        assert_eq!(e.checkpoint, Checkpoint::default());
        let cartpole = "experiment \"x\" {\n    env \"cartpole\"\n    algorithm \"dqn\"\n}\n";
        let e = resolve(&Source::Stdin(cartpole.into()), &[])
            .unwrap()
            .experiment;
        assert_eq!(e.algorithm, Algorithm::Dqn(Dqn::default()));
    }
}

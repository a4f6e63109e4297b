//! The flat, schema-shaped view of an experiment (value path -> checked value) and
//! the two conversions between it and the typed [`Experiment`]. The resolver fills
//! this map; the canonical printers walk it in schema order.

use std::collections::BTreeMap;

use crate::model::*;
use crate::schema::{self, Dflt};

/// A checked value of one setting (or of a section's kind, stored as `Str`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Null,
    IntList(Vec<i64>),
    Devices(Vec<Device>),
    Threads(Threads),
    Wrappers(Vec<Wrapper>),
    /// Python module names, in order.
    Modules(Vec<String>),
    /// Keyword arguments, sorted by name.
    Args(Vec<(String, Scalar)>),
}

pub(crate) type Values = BTreeMap<String, Val>;

impl Val {
    pub fn from_default(d: &Dflt) -> Option<Val> {
        Some(match *d {
            Dflt::Required => return None,
            Dflt::Null => Val::Null,
            Dflt::Int(i) => Val::Int(i),
            Dflt::Float(x) => Val::Float(x),
            Dflt::Bool(b) => Val::Bool(b),
            Dflt::Str(s) => Val::Str(s.to_string()),
            Dflt::IntList(l) => Val::IntList(l.to_vec()),
            Dflt::Devices => Val::Devices(vec![Device::Cpu]),
            Dflt::Auto => Val::Threads(Threads::Auto),
            Dflt::NoWrappers => Val::Wrappers(Vec::new()),
            Dflt::NoModules => Val::Modules(Vec::new()),
            Dflt::NoArgs => Val::Args(Vec::new()),
            // Rewritten by the resolver once the learner and the network are known.
            Dflt::ActorCritic => Val::Str("shared".into()),
        })
    }
}

/// Typed reads from a complete map. The resolver has checked every value against
/// the schema, so a mismatch here is a bug; it falls back to zero-like values
/// rather than panicking, and the round-trip tests guard against such bugs.
struct Reader<'a> {
    values: &'a Values,
    prefix: &'static str,
}

impl Reader<'_> {
    fn get(&self, field: &str) -> Option<&Val> {
        let path = if self.prefix.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.prefix)
        };
        self.values.get(&path)
    }
    fn int(&self, field: &str) -> i64 {
        match self.get(field) {
            Some(Val::Int(i)) => *i,
            _ => 0,
        }
    }
    fn u64(&self, field: &str) -> u64 {
        self.int(field).max(0) as u64
    }
    fn usize(&self, field: &str) -> usize {
        self.int(field).max(0) as usize
    }
    fn opt_u64(&self, field: &str) -> Option<u64> {
        match self.get(field) {
            Some(Val::Int(i)) => Some((*i).max(0) as u64),
            _ => None,
        }
    }
    fn float(&self, field: &str) -> f64 {
        match self.get(field) {
            Some(Val::Float(x)) => *x,
            _ => 0.0,
        }
    }
    fn opt_float(&self, field: &str) -> Option<f64> {
        match self.get(field) {
            Some(Val::Float(x)) => Some(*x),
            _ => None,
        }
    }
    fn auto_or(&self, field: &str) -> AutoOr {
        match self.get(field) {
            Some(Val::Float(x)) => AutoOr::Value(*x),
            _ => AutoOr::Auto,
        }
    }
    fn boolean(&self, field: &str) -> bool {
        matches!(self.get(field), Some(Val::Bool(true)))
    }
    fn text(&self, field: &str) -> &str {
        match self.get(field) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }
    fn list(&self, field: &str) -> Vec<usize> {
        match self.get(field) {
            Some(Val::IntList(l)) => l.iter().map(|i| (*i).max(0) as usize).collect(),
            _ => Vec::new(),
        }
    }
    fn kind(&self) -> &str {
        match self.values.get(self.prefix) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }
}

pub(crate) fn to_experiment(values: &Values) -> Experiment {
    let top = Reader { values, prefix: "" };
    let algorithm = algorithm(values);
    let env = env(values);
    let network = network(values);
    let s = Reader {
        values,
        prefix: "sync",
    };
    let policy = match s.kind() {
        "broadcast" => SyncPolicy::Broadcast,
        "periodic" => SyncPolicy::Periodic {
            every: s.u64("every"),
        },
        "none" => SyncPolicy::None,
        _ => SyncPolicy::Allreduce {
            bucket_mb: s.float("bucket-mb"),
            compression: if s.text("compression") == "bf16" {
                Compression::Bf16
            } else {
                Compression::None
            },
        },
    };
    let sync = Sync {
        policy,
        check_every: s.opt_u64("check-every"),
        rendezvous_timeout_s: s.float("rendezvous-timeout"),
        collective_timeout_s: s.float("collective-timeout"),
        backend: match s.text("backend") {
            "gloo" => SyncBackend::Gloo,
            "nccl" => SyncBackend::Nccl,
            _ => SyncBackend::Auto,
        },
    };
    let t = Reader {
        values,
        prefix: "train",
    };
    let train = Train {
        total_steps: t.u64("total-steps"),
        rollout: t.usize("rollout"),
        env_groups: t.usize("env-groups"),
        max_steps: t.opt_u64("max-steps"),
    };
    let l = Reader {
        values,
        prefix: "log",
    };
    let log = Log {
        tensorboard: l.boolean("tensorboard"),
        console: match l.text("console") {
            "plain" => Console::Plain,
            "quiet" => Console::Quiet,
            _ => Console::Progress,
        },
        interval: if l.text("interval-unit") == "seconds" {
            Interval::Seconds(l.u64("interval"))
        } else {
            Interval::Updates(l.u64("interval"))
        },
        histogram_every: l.opt_u64("histogram-every"),
    };
    let c = Reader {
        values,
        prefix: "checkpoint",
    };
    let checkpoint = Checkpoint {
        every: c.opt_u64("every"),
        unit: if c.text("unit") == "steps" {
            CheckpointUnit::Steps
        } else {
            CheckpointUnit::Updates
        },
        keep: c.usize("keep"),
    };
    Experiment {
        name: top.text("name").to_string(),
        seed: top.u64("seed"),
        devices: match top.get("devices") {
            Some(Val::Devices(d)) => d.clone(),
            _ => vec![Device::Cpu],
        },
        threads: match top.get("threads") {
            Some(Val::Threads(t)) => *t,
            _ => Threads::Auto,
        },
        pin_cores: top.boolean("pin-cores"),
        algorithm,
        env,
        network,
        sync,
        train,
        log,
        checkpoint,
    }
}

/// The `algorithm` section as its typed value.
fn algorithm(values: &Values) -> Algorithm {
    let a = Reader {
        values,
        prefix: "algorithm",
    };
    match a.kind() {
        "a2c" => Algorithm::A2c(A2c {
            lr: a.float("lr"),
            gamma: a.float("gamma"),
            gae_lambda: a.opt_float("gae-lambda"),
            entropy_coef: a.float("entropy-coef"),
            value_coef: a.float("value-coef"),
            max_grad_norm: a.opt_float("max-grad-norm"),
            optimizer: if a.text("optimizer") == "adam" {
                Optimizer::Adam
            } else {
                Optimizer::Rmsprop
            },
            optimizer_eps: a.float("optimizer-eps"),
            rmsprop_alpha: a.float("rmsprop-alpha"),
            anneal_lr: a.boolean("anneal-lr"),
            normalize_advantages: a.boolean("normalize-advantages"),
        }),
        "dqn" => Algorithm::Dqn(Dqn {
            lr: a.float("lr"),
            gamma: a.float("gamma"),
            buffer_capacity: a.usize("buffer-capacity"),
            batch_size: a.usize("batch-size"),
            learning_starts: a.u64("learning-starts"),
            train_frequency: a.u64("train-frequency"),
            target_every: a.u64("target-every"),
            tau: a.float("tau"),
            double: a.boolean("double"),
            dueling: a.boolean("dueling"),
            n_step: a.usize("n-step"),
            loss: if a.text("loss") == "mse" {
                Loss::Mse
            } else {
                Loss::Huber
            },
            epsilon_start: a.float("epsilon-start"),
            epsilon_end: a.float("epsilon-end"),
            epsilon_fraction: a.float("epsilon-fraction"),
            prioritized: a.boolean("prioritized"),
            priority_alpha: a.float("priority-alpha"),
            priority_beta_start: a.float("priority-beta-start"),
            priority_beta_end: a.float("priority-beta-end"),
            max_grad_norm: a.opt_float("max-grad-norm"),
            checkpoint_replay: a.boolean("checkpoint-replay"),
        }),
        "sac" => Algorithm::Sac(Sac {
            actor_lr: a.float("actor-lr"),
            critic_lr: a.float("critic-lr"),
            alpha_lr: a.float("alpha-lr"),
            gamma: a.float("gamma"),
            tau: a.float("tau"),
            buffer_capacity: a.usize("buffer-capacity"),
            batch_size: a.usize("batch-size"),
            learning_starts: a.u64("learning-starts"),
            train_frequency: a.u64("train-frequency"),
            gradient_steps: a.u64("gradient-steps"),
            alpha: a.auto_or("alpha"),
            initial_alpha: a.float("initial-alpha"),
            target_entropy: a.auto_or("target-entropy"),
            max_grad_norm: a.opt_float("max-grad-norm"),
            checkpoint_replay: a.boolean("checkpoint-replay"),
        }),
        "td3" => Algorithm::Td3(Td3 {
            actor_lr: a.float("actor-lr"),
            critic_lr: a.float("critic-lr"),
            gamma: a.float("gamma"),
            tau: a.float("tau"),
            buffer_capacity: a.usize("buffer-capacity"),
            batch_size: a.usize("batch-size"),
            learning_starts: a.u64("learning-starts"),
            train_frequency: a.u64("train-frequency"),
            gradient_steps: a.u64("gradient-steps"),
            policy_delay: a.u64("policy-delay"),
            exploration_noise: a.float("exploration-noise"),
            target_policy_noise: a.float("target-policy-noise"),
            target_noise_clip: a.float("target-noise-clip"),
            max_grad_norm: a.opt_float("max-grad-norm"),
            checkpoint_replay: a.boolean("checkpoint-replay"),
        }),
        _ => Algorithm::Ppo(Ppo {
            lr: a.float("lr"),
            gamma: a.float("gamma"),
            gae_lambda: a.float("gae-lambda"),
            clip: a.float("clip"),
            value_clip: a.opt_float("value-clip"),
            entropy_coef: a.float("entropy-coef"),
            value_coef: a.float("value-coef"),
            epochs: a.usize("epochs"),
            minibatches: a.usize("minibatches"),
            micro_batches: a.usize("micro-batches"),
            max_grad_norm: a.opt_float("max-grad-norm"),
            anneal_lr: a.boolean("anneal-lr"),
            target_kl: a.opt_float("target-kl"),
            normalize_advantages: a.boolean("normalize-advantages"),
            adam_eps: a.float("adam-eps"),
        }),
    }
}

/// The `env` section as its typed value.
fn env(values: &Values) -> Env {
    let e = Reader {
        values,
        prefix: "env",
    };
    let game = match e.kind() {
        "gymnasium" => Game::Gymnasium(Gymnasium {
            id: e.text("id").to_string(),
            python: e.text("python").to_string(),
            imports: match e.get("import") {
                Some(Val::Modules(m)) => m.clone(),
                _ => Vec::new(),
            },
            make_args: match e.get("make-args") {
                Some(Val::Args(a)) => a.clone(),
                _ => Vec::new(),
            },
            workers: e.usize("workers"),
            step_timeout_s: e.float("step-timeout"),
        }),
        kind => Game::from_name(kind).unwrap_or(Game::Cartpole),
    };
    Env {
        game,
        envs: e.usize("envs"),
        wrappers: match e.get("wrappers") {
            Some(Val::Wrappers(w)) => w.clone(),
            _ => Vec::new(),
        },
    }
}

/// The `network` section as its typed value.
fn network(values: &Values) -> Network {
    let nw = Reader {
        values,
        prefix: "network",
    };
    let torso = match nw.kind() {
        "nature-cnn" => Torso::NatureCnn {
            features: nw.usize("features"),
        },
        "minatar-cnn" => Torso::MinatarCnn {
            channels: nw.usize("channels"),
            features: nw.usize("features"),
        },
        "impala-cnn" => Torso::ImpalaCnn {
            channels: nw.list("channels"),
            features: nw.usize("features"),
        },
        _ => Torso::Mlp {
            hidden: nw.list("hidden"),
            activation: if nw.text("activation") == "relu" {
                Activation::Relu
            } else {
                Activation::Tanh
            },
        },
    };
    Network {
        torso,
        shared: nw.text("actor-critic") != "separate",
        init: match nw.text("init") {
            "default" => Init::Default,
            "torch" => Init::Torch,
            _ => Init::Orthogonal,
        },
        torso_gain: nw.float("torso-gain"),
        policy_gain: nw.float("policy-gain"),
        value_gain: nw.float("value-gain"),
        core: match nw.text("core") {
            "lstm" => Some(Core::Lstm),
            "gru" => Some(Core::Gru),
            _ => None,
        },
        core_size: nw.usize("core-size"),
    }
}

/// Inserts values under one section prefix.
struct Writer<'a> {
    values: &'a mut Values,
    prefix: &'static str,
}

impl Writer<'_> {
    fn put(&mut self, field: &str, val: Val) {
        let path = if self.prefix.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.prefix)
        };
        self.values.insert(path, val);
    }
    fn kind(&mut self, kind: &str) {
        self.values
            .insert(self.prefix.to_string(), Val::Str(kind.to_string()));
    }
    fn int(&mut self, field: &str, v: impl TryInto<i64>) {
        self.put(field, Val::Int(v.try_into().unwrap_or(i64::MAX)));
    }
    fn opt_int(&mut self, field: &str, v: Option<u64>) {
        self.put(
            field,
            v.map_or(Val::Null, |v| {
                Val::Int(i64::try_from(v).unwrap_or(i64::MAX))
            }),
        );
    }
    fn float(&mut self, field: &str, v: f64) {
        self.put(field, Val::Float(v));
    }
    fn opt_float(&mut self, field: &str, v: Option<f64>) {
        self.put(field, v.map_or(Val::Null, Val::Float));
    }
    fn auto_or(&mut self, field: &str, v: AutoOr) {
        self.put(
            field,
            match v {
                AutoOr::Auto => Val::Str("auto".into()),
                AutoOr::Value(x) => Val::Float(x),
            },
        );
    }
    fn boolean(&mut self, field: &str, v: bool) {
        self.put(field, Val::Bool(v));
    }
    fn text(&mut self, field: &str, v: &str) {
        self.put(field, Val::Str(v.to_string()));
    }
    fn list(&mut self, field: &str, v: &[usize]) {
        self.put(
            field,
            Val::IntList(
                v.iter()
                    .map(|i| i64::try_from(*i).unwrap_or(i64::MAX))
                    .collect(),
            ),
        );
    }
}

pub(crate) fn from_experiment(e: &Experiment) -> Values {
    let mut values = Values::new();
    let mut top = Writer {
        values: &mut values,
        prefix: "",
    };
    top.text("name", &e.name);
    top.int("seed", e.seed);
    top.put("devices", Val::Devices(e.devices.clone()));
    top.put("threads", Val::Threads(e.threads));
    top.boolean("pin-cores", e.pin_cores);

    write_algorithm(&mut values, e);
    write_env_and_network(&mut values, e);

    let mut s = Writer {
        values: &mut values,
        prefix: "sync",
    };
    s.kind(e.sync.policy.name());
    s.opt_int("check-every", e.sync.check_every);
    s.float("rendezvous-timeout", e.sync.rendezvous_timeout_s);
    s.float("collective-timeout", e.sync.collective_timeout_s);
    s.text("backend", e.sync.backend.name());
    match e.sync.policy {
        SyncPolicy::Allreduce {
            bucket_mb,
            compression,
        } => {
            s.float("bucket-mb", bucket_mb);
            s.text(
                "compression",
                if compression == Compression::Bf16 {
                    "bf16"
                } else {
                    "none"
                },
            );
        }
        SyncPolicy::Periodic { every } => s.int("every", every),
        SyncPolicy::Broadcast | SyncPolicy::None => {}
    }

    let mut t = Writer {
        values: &mut values,
        prefix: "train",
    };
    t.int("total-steps", e.train.total_steps);
    t.int("rollout", e.train.rollout);
    t.int("env-groups", e.train.env_groups);
    t.opt_int("max-steps", e.train.max_steps);

    let mut l = Writer {
        values: &mut values,
        prefix: "log",
    };
    l.boolean("tensorboard", e.log.tensorboard);
    l.text(
        "console",
        match e.log.console {
            Console::Progress => "progress",
            Console::Plain => "plain",
            Console::Quiet => "quiet",
        },
    );
    let (interval, unit) = match e.log.interval {
        Interval::Updates(n) => (n, "updates"),
        Interval::Seconds(n) => (n, "seconds"),
    };
    l.int("interval", interval);
    l.text("interval-unit", unit);
    l.opt_int("histogram-every", e.log.histogram_every);

    let mut c = Writer {
        values: &mut values,
        prefix: "checkpoint",
    };
    c.opt_int("every", e.checkpoint.every);
    c.text(
        "unit",
        if e.checkpoint.unit == CheckpointUnit::Steps {
            "steps"
        } else {
            "updates"
        },
    );
    c.int("keep", e.checkpoint.keep);
    values
}

/// Writes the `algorithm` section of `e`.
fn write_algorithm(values: &mut Values, e: &Experiment) {
    let mut a = Writer {
        values,
        prefix: "algorithm",
    };
    a.kind(e.algorithm.name());
    match &e.algorithm {
        Algorithm::Ppo(p) => {
            a.float("lr", p.lr);
            a.float("gamma", p.gamma);
            a.float("gae-lambda", p.gae_lambda);
            a.float("clip", p.clip);
            a.opt_float("value-clip", p.value_clip);
            a.float("entropy-coef", p.entropy_coef);
            a.float("value-coef", p.value_coef);
            a.int("epochs", p.epochs);
            a.int("minibatches", p.minibatches);
            a.int("micro-batches", p.micro_batches);
            a.opt_float("max-grad-norm", p.max_grad_norm);
            a.boolean("anneal-lr", p.anneal_lr);
            a.opt_float("target-kl", p.target_kl);
            a.boolean("normalize-advantages", p.normalize_advantages);
            a.float("adam-eps", p.adam_eps);
        }
        Algorithm::A2c(p) => {
            a.float("lr", p.lr);
            a.float("gamma", p.gamma);
            a.opt_float("gae-lambda", p.gae_lambda);
            a.float("entropy-coef", p.entropy_coef);
            a.float("value-coef", p.value_coef);
            a.opt_float("max-grad-norm", p.max_grad_norm);
            a.text(
                "optimizer",
                if p.optimizer == Optimizer::Adam {
                    "adam"
                } else {
                    "rmsprop"
                },
            );
            a.float("optimizer-eps", p.optimizer_eps);
            a.float("rmsprop-alpha", p.rmsprop_alpha);
            a.boolean("anneal-lr", p.anneal_lr);
            a.boolean("normalize-advantages", p.normalize_advantages);
        }
        Algorithm::Dqn(p) => {
            a.float("lr", p.lr);
            a.float("gamma", p.gamma);
            a.int("buffer-capacity", p.buffer_capacity);
            a.int("batch-size", p.batch_size);
            a.int("learning-starts", p.learning_starts);
            a.int("train-frequency", p.train_frequency);
            a.int("target-every", p.target_every);
            a.float("tau", p.tau);
            a.boolean("double", p.double);
            a.boolean("dueling", p.dueling);
            a.int("n-step", p.n_step);
            a.text("loss", if p.loss == Loss::Mse { "mse" } else { "huber" });
            a.float("epsilon-start", p.epsilon_start);
            a.float("epsilon-end", p.epsilon_end);
            a.float("epsilon-fraction", p.epsilon_fraction);
            a.boolean("prioritized", p.prioritized);
            a.float("priority-alpha", p.priority_alpha);
            a.float("priority-beta-start", p.priority_beta_start);
            a.float("priority-beta-end", p.priority_beta_end);
            a.opt_float("max-grad-norm", p.max_grad_norm);
            a.boolean("checkpoint-replay", p.checkpoint_replay);
        }
        Algorithm::Sac(p) => {
            a.float("actor-lr", p.actor_lr);
            a.float("critic-lr", p.critic_lr);
            a.float("alpha-lr", p.alpha_lr);
            a.float("gamma", p.gamma);
            a.float("tau", p.tau);
            a.int("buffer-capacity", p.buffer_capacity);
            a.int("batch-size", p.batch_size);
            a.int("learning-starts", p.learning_starts);
            a.int("train-frequency", p.train_frequency);
            a.int("gradient-steps", p.gradient_steps);
            a.auto_or("alpha", p.alpha);
            a.float("initial-alpha", p.initial_alpha);
            a.auto_or("target-entropy", p.target_entropy);
            a.opt_float("max-grad-norm", p.max_grad_norm);
            a.boolean("checkpoint-replay", p.checkpoint_replay);
        }
        Algorithm::Td3(p) => {
            a.float("actor-lr", p.actor_lr);
            a.float("critic-lr", p.critic_lr);
            a.float("gamma", p.gamma);
            a.float("tau", p.tau);
            a.int("buffer-capacity", p.buffer_capacity);
            a.int("batch-size", p.batch_size);
            a.int("learning-starts", p.learning_starts);
            a.int("train-frequency", p.train_frequency);
            a.int("gradient-steps", p.gradient_steps);
            a.int("policy-delay", p.policy_delay);
            a.float("exploration-noise", p.exploration_noise);
            a.float("target-policy-noise", p.target_policy_noise);
            a.float("target-noise-clip", p.target_noise_clip);
            a.opt_float("max-grad-norm", p.max_grad_norm);
            a.boolean("checkpoint-replay", p.checkpoint_replay);
        }
    }
}

/// Writes the `env` and `network` sections of `e`.
fn write_env_and_network(values: &mut Values, e: &Experiment) {
    let mut en = Writer {
        values,
        prefix: "env",
    };
    en.kind(e.env.game.name());
    en.int("envs", e.env.envs);
    en.put("wrappers", Val::Wrappers(e.env.wrappers.clone()));
    if let Game::Gymnasium(g) = &e.env.game {
        en.text("id", &g.id);
        en.text("python", &g.python);
        en.put("import", Val::Modules(g.imports.clone()));
        en.put("make-args", Val::Args(g.make_args.clone()));
        en.int("workers", g.workers);
        en.float("step-timeout", g.step_timeout_s);
    }

    let mut nw = Writer {
        values,
        prefix: "network",
    };
    nw.kind(e.network.torso.name());
    nw.text(
        "actor-critic",
        if e.network.shared {
            "shared"
        } else {
            "separate"
        },
    );
    nw.text(
        "init",
        match e.network.init {
            Init::Default => "default",
            Init::Torch => "torch",
            Init::Orthogonal => "orthogonal",
        },
    );
    nw.float("torso-gain", e.network.torso_gain);
    nw.float("policy-gain", e.network.policy_gain);
    nw.float("value-gain", e.network.value_gain);
    nw.text("core", e.network.core.map_or("none", Core::name));
    nw.int("core-size", e.network.core_size);
    match &e.network.torso {
        Torso::Mlp { hidden, activation } => {
            nw.list("hidden", hidden);
            nw.text(
                "activation",
                if *activation == Activation::Relu {
                    "relu"
                } else {
                    "tanh"
                },
            );
        }
        Torso::NatureCnn { features } => nw.int("features", *features),
        Torso::MinatarCnn { channels, features } => {
            nw.int("channels", *channels);
            nw.int("features", *features);
        }
        Torso::ImpalaCnn { channels, features } => {
            nw.list("channels", channels);
            nw.int("features", *features);
        }
    }
}

/// The kind in effect for a section of a complete map.
pub(crate) fn kind_of<'a>(values: &'a Values, section: &schema::Section) -> Option<&'a str> {
    match values.get(section.name) {
        Some(Val::Str(s)) if section.has_kinds() => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SECTIONS;
    use crate::{Source, resolve};

    /// `from_experiment` must write exactly the paths the schema expects for every
    /// kind; a forgotten nullable field would otherwise print as `#null` unnoticed.
    #[test]
    fn every_schema_path_is_written_for_every_kind() {
        let text = "experiment \"x\" {\n    env \"atari-breakout\"\n}\n";
        let combos = [
            ["algorithm=ppo", "network=nature-cnn", "sync=allreduce"],
            ["algorithm=a2c", "network=impala-cnn", "sync=periodic"],
            ["algorithm=dqn", "network=mlp", "sync=broadcast"],
            ["algorithm=dqn", "network=nature-cnn", "sync=none"],
        ];
        for combo in combos {
            let sets: Vec<String> = combo.iter().map(|s| s.to_string()).collect();
            let e = resolve(&Source::Stdin(text.into()), &sets)
                .unwrap()
                .experiment;
            let values = from_experiment(&e);
            let mut expected: Vec<String> = Vec::new();
            for section in SECTIONS {
                let kind = kind_of(&values, section).and_then(|k| section.kind(k));
                if section.has_kinds() {
                    expected.push(section.name.to_string());
                }
                expected.extend(section.fields(kind).map(|f| section.path(f.name)));
            }
            expected.sort();
            let written: Vec<String> = values.keys().cloned().collect();
            assert_eq!(written, expected, "{combo:?}");
            assert_eq!(to_experiment(&values), e, "{combo:?}");
        }
        for text in [
            "experiment \"x\" {\n    env \"minatar-breakout\"\n    network \"minatar-cnn\"\n}\n",
            "experiment \"x\" {\n    env \"gymnasium\" { id \"A-v0\"; import \"m\"; make-args { a 1 } }\n}\n",
        ] {
            let e = resolve(&Source::Stdin(text.into()), &[])
                .unwrap()
                .experiment;
            let values = from_experiment(&e);
            let env_paths = values.keys().filter(|k| k.starts_with("env")).count();
            let kind = kind_of(&values, &schema::ENV).and_then(|k| schema::ENV.kind(k));
            assert_eq!(env_paths, 1 + schema::ENV.fields(kind).count(), "{text}");
            assert_eq!(to_experiment(&values), e);
        }
    }
}

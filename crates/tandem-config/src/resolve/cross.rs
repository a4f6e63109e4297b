//! The checks that involve more than one setting (sizes that must divide over the
//! ranks, settings that contradict each other, wrappers and networks that do not
//! fit the game), made on the typed experiment once every value is known; each
//! points at the settings involved, or at the experiment's name for defaults.

use std::collections::HashMap;

use miette::SourceSpan;

use super::apply::Applier;
use super::memory::{self, Labels};
use crate::Machine;
use crate::budget::{update_formula, update_steps};
use crate::diag::{SourceId, error, warning};
use crate::model::*;
use tandem_spec::fit::{self, Misfit};

/// Checks that involve more than one setting.
pub(super) struct CrossCheck<'a, 'b> {
    pub(super) applier: &'a mut Applier<'b>,
    pub(super) experiment: &'a Experiment,
    /// Where each value was written (defaults: the experiment's name).
    pub(super) labels: &'a Labels,
    /// The machine to fit in, when the caller asked.
    pub(super) machine: Option<&'a Machine>,
}

impl CrossCheck<'_, '_> {
    fn ok(&self, paths: &[&str]) -> bool {
        // Every size counts rows, the environments times their agents (a pettingzoo
        // environment's `agents`): a refused agent count leaves the sizes unchecked too.
        let failed = |p: &str| self.applier.failed.contains(p);
        paths
            .iter()
            .all(|p| !failed(p) && (*p != "env.envs" || !failed("env.agents")))
    }

    fn at(&self, path: &str) -> (SourceId, SourceSpan, bool) {
        self.labels.at(path)
    }

    fn label(&self, path: &str, text: &str) -> (SourceId, SourceSpan, String) {
        self.labels.label(path, text)
    }

    fn report(
        &mut self,
        code: &'static str,
        message: String,
        primary: &str,
        primary_text: &str,
        secondary: Option<(&str, &str)>,
        help: String,
    ) {
        let (s, span, text) = self.label(primary, primary_text);
        let mut b = error(code, message).at(s, span, text);
        if let Some((path, text)) = secondary {
            let (s2, span2, written) = self.at(path);
            if written {
                b = b.also(s2, span2, text.to_string());
            }
        }
        self.applier.push(b.help(help));
    }

    pub(super) fn run(mut self) {
        // First: a refused device list marks `devices` failed for the checks after it.
        self.backend_fits_devices();
        self.env_split();
        match &self.experiment.algorithm {
            Algorithm::Ppo(ppo) => {
                self.global_batch();
                self.ppo(ppo);
                self.vtrace_clips(ppo);
            }
            Algorithm::Dqn(dqn) => {
                self.off_policy_sizes(dqn.batch_size, dqn.buffer_capacity, dqn.learning_starts);
                self.dqn(dqn);
                self.replay(dqn.n_step);
                self.no_critic();
                self.no_policy_head();
            }
            Algorithm::Sac(sac) => {
                self.off_policy_sizes(sac.batch_size, sac.buffer_capacity, sac.learning_starts);
                self.replay(1);
                self.actor_critic_mlps();
            }
            Algorithm::Td3(td3) => {
                self.off_policy_sizes(td3.batch_size, td3.buffer_capacity, td3.learning_starts);
                self.replay(1);
                self.actor_critic_mlps();
            }
            Algorithm::A2c(a2c) => {
                self.global_batch();
                self.rmsprop_alpha_needs_rmsprop(a2c);
            }
        }
        self.max_steps();
        self.sampling();
        self.eval_limit_unused();
        if !self.experiment.train.policies.0.is_empty() && self.ok(&["env", "train.policies"]) {
            self.policies();
        }
        if self.experiment.network.critic_input == CriticInput::State {
            self.central_critic();
        }
        if self.experiment.population.members.is_some() && self.ok(&["population", "devices"]) {
            self.population();
        } else {
            self.population_unused();
        }
        if self.experiment.league.every.is_some() && self.ok(&["league", "env"]) {
            self.league();
        } else {
            self.league_unused();
        }
        if self.experiment.env.game.takes_turns() {
            self.turns();
        }
        if self.experiment.network.agent_index {
            self.agent_index();
        }
        self.less_than_one_update();
        if self.ok(&["env", "env.wrappers"]) {
            self.wrappers();
        }
        if self.ok(&["env", "env.wrappers", "network"]) {
            self.network();
        }
        if self.ok(&["env", "algorithm"]) {
            self.learner_takes_the_actions();
        }
        let bridge_workers = match &self.experiment.env.game {
            Game::Gymnasium(g) => Some(g.workers),
            Game::PettingZoo(z) => Some(z.workers),
            _ => None,
        };
        if let Some(workers) = bridge_workers {
            self.gymnasium_workers(workers);
        }
        if self.experiment.env.game.action_mask() != ActionMask::None {
            self.action_mask();
        }
        self.gains_need_orthogonal_init();
        self.recurrent_core();
        self.precision_needs_an_image_torso();
        if let Some(machine) = self.machine
            && self.applier.diags.is_empty()
        {
            self.memory(machine);
        }
    }

    /// Updates run whole, so a step limit below one update's steps runs a whole update: more,
    /// maybe many times more, than asked. A warning: the run is what it is, and a smoke test
    /// (`--max-steps 1`) asks for exactly that.
    fn less_than_one_update(&mut self) {
        let e = self.experiment;
        let paths = [
            "env.envs",
            "train.rollout",
            "train.total-steps",
            "train.max-steps",
        ];
        let (unit, limit) = (update_steps(e), e.step_limit());
        if !self.ok(&paths) || limit >= unit {
            return;
        }
        let path = match e.train.max_steps {
            Some(max) if max < e.train.total_steps => "train.max-steps",
            _ => "train.total-steps",
        };
        let name = &path["train.".len()..];
        let (source, span, text) =
            self.label(path, &format!("less than one update of {unit} steps"));
        let lever = if e.algorithm.is_on_policy() {
            "`rollout` or `envs`"
        } else {
            "`train-frequency` or `envs`"
        };
        self.applier.push(
            warning(
                "config::less-than-one-update",
                format!("{name} {limit} is less than one update: the run takes {unit} steps"),
            )
            .at(source, span, text)
            .help(format!(
                "an update runs whole, and one takes {} global steps (`envs` counts the \
                 environments of every rank); set {name} to at least {unit}, or lower {lever}",
                update_formula(e)
            )),
        );
    }

    /// The ranks this machine runs must fit in its available memory ([`memory_estimate`]).
    fn memory(&mut self, machine: &Machine) {
        if let Some(b) = memory::misfit(self.experiment, self.labels, machine) {
            self.applier.push(b);
        }
    }

    /// A recurrent core: only the actor-critics have one, on a shared torso, stepping every
    /// environment at once; its size needs it; ppo's minibatches are whole environments.
    fn recurrent_core(&mut self) {
        let e = self.experiment;
        let Some(core) = e.network.core else {
            let default = setting_default_int(&crate::schema::NETWORK, "core-size");
            if self.ok(&["network.core-size", "network.core"])
                && Some(e.network.core_size as i64) != default
            {
                self.report(
                    "config::inconsistent",
                    "`core-size` has no effect without a recurrent core".into(),
                    "network.core-size",
                    "the size of a recurrent core",
                    Some(("network.core", "no core")),
                    "write `core \"lstm\"` or `core \"gru\"`, or remove `core-size`".into(),
                );
            }
            return;
        };
        let name = core.name();
        if !e.algorithm.is_on_policy() {
            if self.ok(&["algorithm", "network.core"]) {
                let algorithm = e.algorithm.name();
                self.report(
                    "config::inconsistent",
                    format!("{algorithm} has no recurrent policy"),
                    "network.core",
                    &format!("not used by {algorithm}"),
                    Some(("algorithm", algorithm)),
                    format!(
                        "recurrent cores are for {}; remove `core \"{name}\"`",
                        Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "or")
                    ),
                );
            }
            return;
        }
        if self.ok(&["network.core", "network.actor-critic"]) && !e.network.shared() {
            self.report(
                "config::inconsistent",
                "a recurrent core needs a shared torso".into(),
                "network.core",
                "one core between the torso and both heads",
                Some(("network.actor-critic", "separate torsos")),
                "remove `actor-critic \"separate\"` (the default is shared)".into(),
            );
        }
        if self.ok(&["network.core", "train.env-groups"]) && e.train.env_groups > 1 {
            self.report(
                "config::inconsistent",
                "environment groups cannot step a recurrent policy".into(),
                "train.env-groups",
                "double-buffered sampling",
                Some(("network.core", "a recurrent core")),
                format!("the next group's actions would need states this step has not produced; remove env-groups or `core \"{name}\"`"),
            );
        }
        if let Algorithm::Ppo(ppo) = &e.algorithm {
            self.recurrent_minibatches(ppo);
        }
    }

    /// PPO's minibatches of a recurrent policy are whole environment sequences.
    fn recurrent_minibatches(&mut self, ppo: &Ppo) {
        let e = self.experiment;
        let (world, world_text) = world(e);
        // A multi-agent game's agents are sequences of their own.
        let per_rank = e.per_rank_rows();
        if !self.ok(&[
            "devices",
            "env.envs",
            "algorithm.minibatches",
            "network.core",
        ]) || !e.env.envs.is_multiple_of(world)
        {
            return;
        }
        if !per_rank.is_multiple_of(ppo.minibatches) {
            self.report(
                "config::not-divisible",
                format!(
                    "{} minibatches do not divide each rank's {per_rank} environments",
                    ppo.minibatches
                ),
                "algorithm.minibatches",
                &format!("does not divide {per_rank}"),
                Some(("network.core", "a recurrent core")),
                format!(
                    "a recurrent policy learns from whole environment sequences, so each minibatch holds whole environments; each rank steps {per_rank} ({} over {world_text}{}): choose minibatches dividing {per_rank}",
                    e.env.envs,
                    match e.agents_per_env() {
                        1 => String::new(),
                        agents => format!(", a sequence for each of their {agents} agents"),
                    }
                ),
            );
        } else if self.ok(&["algorithm.micro-batches"])
            && !(per_rank / ppo.minibatches).is_multiple_of(ppo.micro_batches)
        {
            let envs = per_rank / ppo.minibatches;
            self.report(
                "config::not-divisible",
                format!(
                    "{} micro-batches do not divide a minibatch of {envs} environments",
                    ppo.micro_batches
                ),
                "algorithm.micro-batches",
                &format!("does not divide {envs}"),
                Some(("network.core", "a recurrent core")),
                format!(
                    "with a recurrent core, micro-batches split a minibatch's environments; choose micro-batches dividing {envs}"
                ),
            );
        }
    }

    /// The gains scale orthogonal weights; tch's default initialisation has none. (A gain left
    /// at its default is fine: the canonical form writes every setting out.)
    fn gains_need_orthogonal_init(&mut self) {
        if self.experiment.network.init == Init::Orthogonal {
            return;
        }
        let n = &self.experiment.network;
        for (gain, value) in [
            ("torso-gain", n.torso_gain),
            ("policy-gain", n.policy_gain),
            ("value-gain", n.value_gain),
        ] {
            let path = format!("network.{gain}");
            if self.ok(&[path.as_str(), "network.init"]) && !is_default_gain(gain, value) {
                self.report(
                    "config::inconsistent",
                    format!("`{gain}` has no effect with init \"default\""),
                    &path,
                    "a gain of orthogonal initialisation",
                    Some(("network.init", "libtorch's default initialisation")),
                    format!("gains apply only to init \"orthogonal\"; remove `{gain}` or use init \"orthogonal\""),
                );
            }
        }
    }

    /// V-trace's truncation levels do nothing for GAE; c-bar above rho-bar breaks V-trace's
    /// condition (Espeholt et al. 2018, Theorem 1 assumes c-bar <= rho-bar).
    fn vtrace_clips(&mut self, ppo: &Ppo) {
        if ppo.advantages == Advantages::Gae {
            for (name, value) in [
                ("vtrace-rho-clip", ppo.vtrace_rho_clip),
                ("vtrace-c-clip", ppo.vtrace_c_clip),
            ] {
                let path = format!("algorithm.{name}");
                let default = setting_default(&crate::schema::ALGORITHM, Some("ppo"), name);
                if self.ok(&[&path, "algorithm.advantages"]) && default != Some(value) {
                    self.report(
                        "config::inconsistent",
                        format!("`{name}` has no effect with advantages \"gae\""),
                        &path,
                        "a truncation level of V-trace",
                        Some(("algorithm.advantages", "gae has none")),
                        format!("remove `{name}`, or use advantages \"vtrace\""),
                    );
                }
            }
        } else if self.ok(&["algorithm.vtrace-rho-clip", "algorithm.vtrace-c-clip"])
            && ppo.vtrace_c_clip > ppo.vtrace_rho_clip
        {
            self.report(
                "config::inconsistent",
                "V-trace's c-bar exceeds its rho-bar".into(),
                "algorithm.vtrace-c-clip",
                &format!("above vtrace-rho-clip {}", ppo.vtrace_rho_clip),
                Some(("algorithm.vtrace-rho-clip", "rho-bar")),
                "V-trace's targets converge for c-bar <= rho-bar (Espeholt et al. 2018, Theorem 1): lower vtrace-c-clip or raise vtrace-rho-clip".into(),
            );
        }
    }

    /// Adam has no smoothing constant of RMSprop's to take.
    fn rmsprop_alpha_needs_rmsprop(&mut self, a2c: &A2c) {
        let default = setting_default(&crate::schema::ALGORITHM, Some("a2c"), "rmsprop-alpha");
        if a2c.optimizer == Optimizer::Adam
            && self.ok(&["algorithm.rmsprop-alpha", "algorithm.optimizer"])
            && default != Some(a2c.rmsprop_alpha)
        {
            self.report(
                "config::inconsistent",
                "`rmsprop-alpha` has no effect with optimizer \"adam\"".into(),
                "algorithm.rmsprop-alpha",
                "RMSprop's smoothing constant",
                Some(("algorithm.optimizer", "adam has none")),
                "remove `rmsprop-alpha`, or use optimizer \"rmsprop\"".into(),
            );
        }
    }

    /// DQN's Q-network has no policy head for a gain to scale (its heads use `value-gain`);
    /// only a gain other than the default says otherwise.
    fn no_policy_head(&mut self) {
        let value = self.experiment.network.policy_gain;
        if self.ok(&["algorithm", "network.policy-gain"]) && !is_default_gain("policy-gain", value)
        {
            self.report(
                "config::inconsistent",
                "dqn has no policy head".into(),
                "network.policy-gain",
                "not used by dqn",
                Some(("algorithm", "dqn")),
                "dqn's Q heads are initialised with `value-gain`; remove `policy-gain`".into(),
            );
        }
    }

    /// NCCL runs CUDA tensors only, one rank per GPU: it refuses a CPU rank, and two ranks on one
    /// GPU fail its setup ("duplicate GPU"). Caught here rather than at the rendezvous.
    fn backend_fits_devices(&mut self) {
        let e = self.experiment;
        if !self.ok(&["devices", "sync.backend"]) {
            return;
        }
        let nccl = match e.sync.backend {
            SyncBackend::Gloo => return,
            SyncBackend::Nccl => true,
            SyncBackend::Auto => false,
        };
        let cuda: Vec<u32> = e
            .devices
            .iter()
            .filter_map(|d| match d {
                Device::Cuda(i) => Some(*i),
                Device::Cpu => None,
            })
            .collect();
        let all_cuda = cuda.len() == e.devices.len();
        if nccl && !all_cuda {
            self.report(
                "config::backend-device",
                "the NCCL backend needs every device to be CUDA".into(),
                "sync.backend",
                "nccl",
                Some(("devices", "has a cpu device")),
                "use backend \"gloo\" (or \"auto\") for CPU ranks, or CUDA devices only".into(),
            );
            return;
        }
        // `auto` takes NCCL only when every rank is on CUDA.
        if !all_cuda {
            return;
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = cuda.iter().find(|i| !seen.insert(**i)) {
            self.report(
                "config::duplicate-device",
                format!("device `cuda:{twice}` appears twice"),
                "devices",
                &format!("cuda:{twice} twice"),
                Some(("sync.backend", e.sync.backend.name())),
                "NCCL runs one rank per GPU: give each rank its own, or set `sync { backend \"gloo\" }` to run several ranks on one GPU (Gloo copies CUDA tensors through the host)".into(),
            );
            // As a bad value would: the checks that divide by the ranks skip a refused list.
            self.applier.failed.insert("devices".into());
        }
    }

    /// The environments split evenly over the ranks, and each rank's into its groups.
    fn env_split(&mut self) {
        let e = self.experiment;
        let (world, world_text) = world(e);
        if self.ok(&["devices", "env.envs"]) && !e.env.envs.is_multiple_of(world) {
            self.report(
                "config::not-divisible",
                format!(
                    "{} environments cannot be split evenly over {world_text}",
                    e.env.envs
                ),
                "env.envs",
                &format!("not a multiple of {world}"),
                Some(("devices", &world_text)),
                format!(
                    "sizes are global: use a multiple of {world}, e.g. envs {}",
                    e.env.envs.div_ceil(world) * world
                ),
            );
        } else if self.ok(&["devices", "env.envs", "train.env-groups"])
            && !e.per_rank_envs().is_multiple_of(e.train.env_groups)
        {
            let per_rank = e.per_rank_envs();
            self.report(
                "config::not-divisible",
                format!(
                    "{} environment groups do not divide each rank's {per_rank} environments",
                    e.train.env_groups
                ),
                "train.env-groups",
                &format!("does not divide {per_rank}"),
                Some(("env.envs", "envs")),
                format!(
                    "each rank steps {per_rank} environments ({} over {world_text}); choose env-groups dividing {per_rank}",
                    e.env.envs
                ),
            );
        }
    }

    /// Each rank's batch splits into the minibatches, and those into micro-batches.
    fn ppo(&mut self, ppo: &Ppo) {
        let e = self.experiment;
        let (world, _) = world(e);
        let batch = e.per_rank_batch();
        if self.ok(&[
            "devices",
            "env.envs",
            "train.rollout",
            "algorithm",
            "algorithm.minibatches",
        ]) && e.env.envs.is_multiple_of(world)
            && !batch.is_multiple_of(ppo.minibatches)
        {
            self.report(
                "config::not-divisible",
                format!("{} minibatches do not divide each rank's batch of {batch}", ppo.minibatches),
                "algorithm.minibatches",
                &format!("does not divide {batch}"),
                Some(("train.rollout", "rollout")),
                format!(
                    "each rank collects {} x rollout {} = {batch} transitions per update; choose minibatches dividing {batch}",
                    match e.agents_per_env() {
                        1 => format!("{} environments", e.per_rank_envs()),
                        agents => format!(
                            "{} rows ({} environments of {agents} agents)",
                            e.per_rank_rows(),
                            e.per_rank_envs()
                        ),
                    },
                    e.train.rollout
                ),
            );
        } else if self.ok(&["algorithm.micro-batches"])
            && e.env.envs.is_multiple_of(world)
            && batch.is_multiple_of(ppo.minibatches)
            && !(batch / ppo.minibatches).is_multiple_of(ppo.micro_batches)
        {
            let minibatch = batch / ppo.minibatches;
            self.report(
                "config::not-divisible",
                format!(
                    "{} micro-batches do not divide each rank's minibatch of {minibatch}",
                    ppo.micro_batches
                ),
                "algorithm.micro-batches",
                &format!("does not divide {minibatch}"),
                Some(("algorithm.minibatches", "minibatches")),
                format!(
                    "each rank's batch of {batch} splits into {} minibatches of {minibatch}; choose micro-batches dividing {minibatch}",
                    ppo.minibatches
                ),
            );
        }
    }

    /// Global replay sizes split over the ranks; buffer, batch and warm-up agree; the
    /// environments step all at once (DQN, SAC).
    fn off_policy_sizes(
        &mut self,
        batch_size: usize,
        buffer_capacity: usize,
        learning_starts: u64,
    ) {
        let e = self.experiment;
        let algorithm = e.algorithm.name();
        let (world, world_text) = world(e);
        for (path, value, what) in [
            ("algorithm.batch-size", batch_size, "batch-size"),
            (
                "algorithm.buffer-capacity",
                buffer_capacity,
                "buffer-capacity",
            ),
        ] {
            if self.ok(&["devices", "algorithm", path]) && !value.is_multiple_of(world) {
                self.report(
                    "config::not-divisible",
                    format!("{what} {value} cannot be split evenly over {world_text}"),
                    path,
                    &format!("not a multiple of {world}"),
                    Some(("devices", &world_text)),
                    format!(
                        "sizes are global: use a multiple of {world}, e.g. {what} {}",
                        value.div_ceil(world) * world
                    ),
                );
            }
        }
        if self.ok(&[
            "algorithm",
            "algorithm.batch-size",
            "algorithm.buffer-capacity",
        ]) && buffer_capacity < batch_size
        {
            self.report(
                "config::inconsistent",
                "the replay buffer is smaller than one batch".into(),
                "algorithm.buffer-capacity",
                &format!("smaller than batch-size {batch_size}"),
                Some(("algorithm.batch-size", "batch-size")),
                "buffer-capacity must be at least batch-size".into(),
            );
        }
        if self.ok(&[
            "algorithm",
            "algorithm.batch-size",
            "algorithm.learning-starts",
        ]) && learning_starts < batch_size as u64
        {
            self.report(
                "config::inconsistent",
                "learning starts before one batch of transitions exists".into(),
                "algorithm.learning-starts",
                &format!("less than batch-size {batch_size}"),
                Some(("algorithm.batch-size", "batch-size")),
                "learning-starts must be at least batch-size".into(),
            );
        }
        if self.ok(&["algorithm", "train.env-groups"]) && e.train.env_groups > 1 {
            self.report(
                "config::inconsistent",
                "environment groups are for on-policy rollouts".into(),
                "train.env-groups",
                &format!("not used by {algorithm}"),
                Some(("algorithm", algorithm)),
                format!(
                    "{algorithm} steps its environments all at once; remove env-groups or use {}",
                    Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "or")
                ),
            );
        }
    }

    /// Pipelined and free sampling hand the update batches that lag it; only PPO's ratio
    /// against the stored behaviour log-probabilities corrects for that. The free mode's own
    /// settings do nothing in the others.
    fn sampling(&mut self) {
        let e = self.experiment;
        if !self.ok(&["algorithm", "train.sampling"]) {
            return;
        }
        if e.train.sampling != Sampling::Free {
            self.free_settings_unused();
        }
        if e.train.sampling == Sampling::Synchronous {
            return;
        }
        let algorithm = e.algorithm.name();
        let facts = e.algorithm.facts();
        let correcting = Algorithm::names_where(|f| f.corrects_lag, "or");
        let help = match facts.learns {
            _ if facts.corrects_lag => return,
            Learns::OnPolicy => format!(
                "{algorithm}'s gradient assumes the batch came from the policy it updates; use {correcting}, whose clipped ratio is taken against the behaviour policy's stored log-probabilities, or remove `sampling`"
            ),
            Learns::OffPolicy => format!(
                "{algorithm} learns from its replay buffer as it steps; sampling is for {correcting}'s rollouts: remove `sampling`"
            ),
        };
        let (mode, lag) = match e.train.sampling {
            Sampling::Free => ("free", "batches that lag the learner"),
            _ => ("pipelined", "batches one update behind the learner"),
        };
        self.report(
            "config::inconsistent",
            format!("{algorithm} cannot learn from {mode} sampling"),
            "train.sampling",
            lag,
            Some(("algorithm", algorithm)),
            help,
        );
    }

    /// `round-updates` and `max-policy-lag` set away from their defaults without `sampling
    /// "free"`.
    fn free_settings_unused(&mut self) {
        let t = &self.experiment.train;
        let default_round = setting_default_int(&crate::schema::TRAIN, "round-updates");
        let unused = [
            (
                "round-updates",
                default_round != Some(t.round_updates as i64),
            ),
            ("max-policy-lag", t.max_policy_lag.is_some()),
        ];
        for (name, set) in unused {
            let path = format!("train.{name}");
            if set && self.ok(&[&path]) {
                self.report(
                    "config::inconsistent",
                    format!("`{name}` has no effect without free sampling"),
                    &path,
                    "a setting of sampling \"free\"",
                    Some(("train.sampling", "not free")),
                    format!("remove `{name}`, or use sampling \"free\""),
                );
            }
        }
    }

    /// A multi-agent game's episodes end at its own `max-cycles`: evaluation's time limit,
    /// a wrapper on one agent's environment, does not apply to it.
    fn eval_limit_unused(&mut self) {
        let e = self.experiment;
        let multi_agent = e.env.game.is_multi_agent();
        let default = setting_default_int(&crate::schema::EVAL, "max-episode-steps");
        let path = "eval.max-episode-steps";
        if multi_agent
            && default != Some(e.eval.max_episode_steps as i64)
            && self.ok(&[path, "env"])
        {
            self.report(
                "config::inconsistent",
                format!("`max-episode-steps` has no effect on {}", e.env.game.name()),
                path,
                "a time limit on one agent's environment",
                Some(("env", "a game of several agents")),
                "its evaluation episodes end at the game's own `max-cycles`: set that in `env`, and remove `max-episode-steps`".into(),
            );
        }
    }

    /// Several policies: a game of several agents, each agent played by exactly one policy,
    /// one observation length a policy, and a learner that can share a batch. A pettingzoo
    /// environment's agents are known once it is built: the run checks them at its start.
    fn policies(&mut self) {
        let e = self.experiment;
        let path = "train.policies";
        let game = e.env.game.name();
        if !e.env.game.is_multi_agent() {
            return self.report(
                "config::inconsistent",
                format!("{game} has one agent: there is nothing for several policies to play"),
                path,
                "several policies",
                Some(("env", "a game of one agent")),
                "remove `policies`, or pick a game of several agents (`mpe-simple-tag`)".into(),
            );
        }
        let Some(entry) = self.applier.entries.get(path).cloned() else {
            return;
        };
        let at = |i: usize| entry.items.get(i).copied().unwrap_or(entry.span);
        let agents = crate::model::agents_of(&e.env.game);
        let known = !matches!(e.env.game, Game::PettingZoo(_));
        let (mut refused, mut minibatches) = (false, false);
        for misfit in e.policy_misfits(&agents).into_iter().filter(|_| known) {
            // One refusal of `minibatches`, for the first policy it does not split.
            let split = matches!(misfit, PolicyMisfit::Minibatches { .. });
            if split && std::mem::replace(&mut minibatches, true) {
                continue;
            }
            refused |= !split;
            self.policy_misfit(&misfit, entry.source, &at, &agents);
        }
        if refused {
            return;
        }
        let subject = format!("{} policies", e.train.policies.0.len());
        self.seats_can_share_a_batch(&subject, path);
        self.policies_own_settings(entry.source, &at);
    }

    /// One of [`Experiment::policy_misfits`], at the policy it is about (`at` its index), or,
    /// for an agent, the whole map.
    fn policy_misfit(
        &mut self,
        misfit: &PolicyMisfit,
        source: SourceId,
        at: &dyn Fn(usize) -> SourceSpan,
        agents: &[(String, ObsSpace)],
    ) {
        let e = self.experiment;
        let message = misfit.message(e);
        let listed: Vec<&str> = agents.iter().map(|(id, _)| id.as_str()).collect();
        let help = format!(
            "{}'s agents are {}: give every one exactly one policy",
            e.env.game.name(),
            listed.join(", ")
        );
        let b = match misfit {
            PolicyMisfit::MatchesNone { policy } => error("config::policies", message)
                .at(source, at(*policy), "matches no agent")
                .help(help),
            PolicyMisfit::MixedLengths { policy, .. } => error("config::policies", message)
                .at(source, at(*policy), "agents of more than one team")
                .help("one network reads one length: give each team a policy of its own"),
            PolicyMisfit::Unplayed { .. } => {
                let whole = self.applier.entries.get("train.policies").map(|e| e.span);
                error("config::policies", message)
                    .at(source, whole.unwrap_or(at(0)), "no pattern matches it")
                    .help(help)
            }
            PolicyMisfit::PlayedTwice { policies, .. } => error("config::policies", message)
                .at(source, at(policies[1]), "plays it")
                .also(source, at(policies[0]), "plays it too")
                .help(help),
            PolicyMisfit::Minibatches { policy, .. } => {
                if !self.ok(&["algorithm.minibatches"]) {
                    return;
                }
                let agents = e.policy_plans()[*policy].agents.len();
                return self.report(
                    "config::inconsistent",
                    message,
                    "algorithm.minibatches",
                    "does not divide a policy's batch",
                    Some(("train.policies", "the policies")),
                    format!(
                        "each policy's batch on a rank is environments a rank x its agents \
                         ({agents}) x rollout: pick minibatches that divide it"
                    ),
                );
            }
        };
        self.applier.push(b);
    }

    /// Each policy's own settings, checked as its whole experiment
    /// ([`Experiment::for_policy`]); a refusal points at the policy (`at` its index).
    fn policies_own_settings(&mut self, source: SourceId, at: &dyn Fn(usize) -> SourceSpan) {
        let e = self.experiment;
        for (i, policy) in e.train.policies.0.iter().enumerate() {
            let Err(diags) = e.for_policy(&policy.name) else {
                continue;
            };
            for d in diags
                .iter()
                .filter(|d| d.severity() == crate::Severity::Error)
            {
                let under = d.label().map(|l| format!(" ({l})")).unwrap_or_default();
                self.applier.push(
                    error(
                        "config::policy-setting",
                        format!("policy `{}`'s own settings: {}{under}", policy.name, d.message()),
                    )
                    .at(source, at(i), "its own settings")
                    .help(d.help().unwrap_or("a policy's own settings are checked with the rest of the experiment as `--set`s of it")),
                );
            }
        }
    }

    /// A seated setting (`subject`, written `setting` at `path`) needs a game of several agents
    /// that the resolver knows (the catalogue's): false where it refused the setting, with the
    /// words of `refusals` (for a game of one agent, for a game whose agents are known only once
    /// it is built).
    fn agents_are_known(
        &mut self,
        path: &str,
        subject: &str,
        setting: &str,
        (one_agent, unknown): (String, String),
    ) -> bool {
        let e = self.experiment;
        let refusal = if !e.env.game.is_multi_agent() {
            let help = format!("remove `{setting}`, or pick a game of several agents");
            (one_agent, ("env", "a game of one agent"), help)
        } else if e.observation().is_none() {
            let help =
                format!("remove `{setting}`, or use a game of the catalogue (`mpe-simple-spread`)");
            (unknown, ("env", "this environment"), help)
        } else {
            return true;
        };
        let (message, secondary, help) = refusal;
        self.report(
            "config::inconsistent",
            message,
            path,
            subject,
            Some(secondary),
            help,
        );
        false
    }

    /// A centralised critic reads every agent's observation in a game beside the actor's own:
    /// separate MLP torsos (the actor's reads fewer inputs), in a game of several agents.
    fn central_critic(&mut self) {
        let e = self.experiment;
        let path = "network.critic-input";
        if !self.ok(&[path, "env", "network", "network.actor-critic"]) {
            return;
        }
        let game = e.env.game.name();
        let refusals = (
            format!("{game} has one agent: there is no game state beside its observation"),
            format!(
                "a centralised critic cannot read {game} yet: its agents' observations are \
                 known only once it is built"
            ),
        );
        if !self.agents_are_known(path, "a centralised critic", "critic-input", refusals) {
            return;
        }
        let mlp = matches!(e.network.torso, Torso::Mlp { .. });
        if !mlp || e.network.shared() {
            return self.report(
                "config::inconsistent",
                "a centralised critic needs an actor and a critic of their own".into(),
                path,
                "a centralised critic",
                Some(("network.actor-critic", "this layout")),
                "write `network \"mlp\" { actor-critic \"separate\" }`: the critic's torso reads the game's state, the actor's only the agent's observation".into(),
            );
        }
        self.seats_can_share_a_batch("a centralised critic", path);
    }

    /// A population: its members share the devices equally, each member one learner of one
    /// policy, collected synchronously (an exploit changes a member's parameters between
    /// updates, which a batch in flight would not see), and what it explores is a setting its
    /// learner reads afresh at every update.
    fn population(&mut self) {
        let e = self.experiment;
        let members = e.population.members.unwrap_or(1) as usize;
        let devices = e.devices.len();
        let path = "population.members";
        if !devices.is_multiple_of(members) || devices < members {
            let help = format!(
                "each member trains on an equal share of the devices: list a multiple of {members} devices (`devices count={} kind=\"cpu\"`), or pick members dividing {devices}",
                members * devices.div_ceil(members).max(1)
            );
            return self.report(
                "config::inconsistent",
                format!("{members} members cannot share {devices} device(s) equally"),
                path,
                "does not divide the devices",
                Some(("devices", "these devices")),
                help,
            );
        }
        let refusals = [
            (
                !e.train.policies.0.is_empty(),
                "train.policies",
                "several policies",
                "remove `policies`: each member is one policy",
            ),
            (
                e.train.sampling != Sampling::Synchronous
                    && e.algorithm.facts().learns == Learns::OnPolicy,
                "train.sampling",
                "pipelined or free sampling",
                "set `sampling \"synchronous\"`: a member that copies another's parameters would learn from a batch its old ones collected",
            ),
            (
                e.population.objective == Objective::Eval && e.eval.every.is_none(),
                "population.objective",
                "an objective of evaluations",
                "set `eval { every N }`, or rank members by `objective \"score\"`",
            ),
        ];
        for (refused, at, what, help) in refusals {
            if refused && self.ok(&[at]) {
                self.report(
                    "config::inconsistent",
                    format!("a population cannot have {what} yet"),
                    at,
                    what,
                    Some((path, "a population")),
                    help.into(),
                );
            }
        }
        let path = "population.objective-scalar";
        let scalar = e.population.objective == Objective::Scalar;
        if scalar && e.population.objective_scalar.is_none() && self.ok(&["population.objective"]) {
            self.report(
                "config::inconsistent",
                "members ranked by a scalar need its tag".into(),
                "population.objective",
                "which scalar?",
                None,
                "name it: `objective-scalar \"league/elo\"` (a tag the learner logs at every update)".into(),
            );
        }
        let unused = !scalar;
        if unused && e.population.objective_scalar.is_some() && self.ok(&[path]) {
            self.report(
                "config::inconsistent",
                "`objective-scalar` has no effect unless members are ranked by a scalar".into(),
                path,
                "a scalar",
                Some(("population.objective", "members ranked by this")),
                "set `objective \"scalar\"`, or remove `objective-scalar`".into(),
            );
        }
        self.explored_settings();
    }

    /// A league: the learner plays one seat of every game beside snapshots of itself, so the
    /// game has several agents, the run one policy (the learner) that reads only its own
    /// observation, collected synchronously, and each rank's games give it every seat alike.
    fn league(&mut self) {
        let e = self.experiment;
        let path = "league.every";
        let game = e.env.game.name();
        if !e.env.game.is_multi_agent() {
            return self.report(
                "config::inconsistent",
                format!("{game} has one agent: a league has no seat to give a snapshot"),
                path,
                "a league",
                Some(("env", "a game of one agent")),
                "remove `league`, or pick a game of several agents (a pettingzoo one, `mpe-simple-tag`)".into(),
            );
        }
        let refusals = [
            (
                !e.train.policies.0.is_empty(),
                "train.policies",
                "several policies",
                "remove `policies`: the league's learner is the run's one policy",
            ),
            (
                e.network.critic_input == CriticInput::State,
                "network.critic-input",
                "a centralised critic",
                "set `critic-input \"own\"`",
            ),
            (
                e.network.agent_index,
                "network.agent-index",
                "agents told their index",
                "set `agent-index #false`",
            ),
        ];
        if e.league.pool == LeaguePool::Population
            && e.population.members.is_none()
            && self.ok(&["league.pool"])
        {
            self.report(
                "config::inconsistent",
                "a league of the population's snapshots needs a population".into(),
                "league.pool",
                "the population's snapshots",
                None,
                "set `members` in `population`, or `pool \"own\"`".into(),
            );
        }
        for (refused, at, what, help) in refusals {
            if refused && self.ok(&[at]) {
                self.report(
                    "config::inconsistent",
                    format!("a league cannot have {what} yet"),
                    at,
                    what,
                    Some((path, "a league")),
                    help.into(),
                );
            }
        }
        if !self.seats_can_share_a_batch("a league", path) {
            return;
        }
        let (games, agents) = (e.per_rank_envs(), e.agents_per_env());
        if !games.is_multiple_of(agents) && self.ok(&["env.envs"]) {
            return self.report(
                "config::inconsistent",
                format!(
                    "a rank's {games} games cannot give the learner each of the {agents} seats alike"
                ),
                "env.envs",
                "games a rank",
                Some((path, "a league")),
                format!(
                    "in game g the learner plays agent g mod {agents}: pick `envs` so that each rank has a multiple of {agents} games"
                ),
            );
        }
        let Algorithm::Ppo(ppo) = &e.algorithm else {
            return;
        };
        // A turn-based game's turns are checked by `turns`, which counts the same rows.
        let rows = games * e.train.rollout;
        if !e.env.game.takes_turns()
            && !rows.is_multiple_of(ppo.minibatches)
            && self.ok(&["algorithm.minibatches"])
        {
            self.report(
                "config::inconsistent",
                format!(
                    "the learner's {rows} rows of a rank's rollout cannot be split into {} minibatches",
                    ppo.minibatches
                ),
                "algorithm.minibatches",
                "does not divide its rows",
                Some((path, "a league")),
                "the learner plays one agent a game: pick minibatches that divide environments a rank x rollout".into(),
            );
        }
    }

    /// The league's settings do nothing without `every`: any written is refused.
    fn league_unused(&mut self) {
        if self.experiment.league.every.is_some() {
            return;
        }
        let l = &self.experiment.league;
        let default = crate::model::League::default();
        let changed = [
            ("size", l.size != default.size),
            ("pool", l.pool != default.pool),
            ("opponent", l.opponent != default.opponent),
        ];
        let help = "set `every` in `league` to train against snapshots, or remove this setting";
        self.refuse_unused("league", "a league", &changed, help);
    }

    /// The population's settings do nothing without members: any written is refused.
    fn population_unused(&mut self) {
        if self.experiment.population.members.is_some() {
            return;
        }
        // The canonical form writes every setting: only a value other than the default counts.
        let p = &self.experiment.population;
        let default = Population::default();
        let changed = [
            ("period", p.period != default.period),
            ("objective", p.objective != default.objective),
            ("exploit", p.exploit != default.exploit),
            ("explore", !p.explore.0.is_empty()),
            ("objective-scalar", p.objective_scalar.is_some()),
        ];
        let help = "set `members` in `population` (2 or more), or remove this setting";
        self.refuse_unused("population", "a population", &changed, help);
    }

    /// Each setting of `section` that `changed` marks written, refused at its place: it has no
    /// effect without `what` (the setting that enables the section is off).
    fn refuse_unused(&mut self, section: &str, what: &str, changed: &[(&str, bool)], help: &str) {
        for (name, _) in changed.iter().filter(|(_, changed)| *changed) {
            let path = format!("{section}.{name}");
            if self.ok(&[&path]) {
                self.report(
                    "config::inconsistent",
                    format!("`{name}` has no effect without {what}"),
                    &path,
                    &format!("set for {what}"),
                    None,
                    help.into(),
                );
            }
        }
    }

    /// Each explored setting is one the experiment's learner reads afresh at every update.
    fn explored_settings(&mut self) {
        let e = self.experiment;
        let path = "population.explore";
        let Some(entry) = self.applier.entries.get(path).cloned() else {
            return;
        };
        let facts = e.algorithm.facts();
        let algorithm = e.algorithm.name();
        for (i, explore) in e.population.explore.0.iter().enumerate() {
            let name = explore.path.trim_start_matches("algorithm.");
            let at = entry.items.get(i).copied().unwrap_or(entry.span);
            if facts.explorable.contains(&name) {
                if !explore.spread && e.number_at(&explore.path).is_none() {
                    self.applier.push(
                        error(
                            "config::inconsistent",
                            format!("`{}` is #null: members cannot start from it", explore.path),
                        )
                        .at(entry.source, at, "spread=#false from #null")
                        .help(format!("set `{}` to a number, or let the members start spread over the rule's values", explore.path)),
                    );
                }
                continue;
            }
            let help = match facts.explorable {
                [] => format!(
                    "{algorithm} cannot change a setting during a run yet: remove `explore`, or train with {}",
                    Algorithm::names_where(|f| !f.explorable.is_empty(), "or")
                ),
                some => format!("{algorithm} explores {}", listed(some, "and")),
            };
            self.applier.push(
                error(
                    "config::inconsistent",
                    format!("{algorithm} cannot explore `{}`", explore.path),
                )
                .at(entry.source, at, "not read afresh at each update")
                .help(help),
            );
        }
    }

    /// The agent's index in its policy's input: a game of several agents whose agents the
    /// resolver knows, and a learner that plays seats.
    fn agent_index(&mut self) {
        let e = self.experiment;
        let path = "network.agent-index";
        if !self.ok(&[path, "env"]) {
            return;
        }
        let game = e.env.game.name();
        let refusals = (
            format!("{game} has one agent: there is no index to tell"),
            format!(
                "the agent's index is not yet for {game}: its agents are known only once it is built"
            ),
        );
        if !self.agents_are_known(path, "the agent's index", "agent-index", refusals) {
            return;
        }
        // Several policies and a centralised critic check the same for their seats.
        let seated = !e.train.policies.0.is_empty() || e.network.critic_input == CriticInput::State;
        if !seated {
            self.seats_can_share_a_batch("the agent's index", path);
        }
    }

    /// A turn-based game: its learner keeps each row's own turns of a synchronous rollout,
    /// one row a game on each step, and splits those into minibatches.
    fn turns(&mut self) {
        let e = self.experiment;
        let path = "env.api";
        if !self.ok(&[path, "env"]) {
            return;
        }
        if !e.train.policies.0.is_empty() {
            // Each policy learns from all its rows, those that waited weighted zero, and
            // `policies` checks that its minibatches divide them.
            return;
        }
        if !self.seats_can_share_a_batch("a turn-based game", path) {
            return;
        }
        let Algorithm::Ppo(ppo) = &e.algorithm else {
            return;
        };
        let turns = e.per_rank_envs() * e.train.rollout;
        if !turns.is_multiple_of(ppo.minibatches) && self.ok(&["algorithm.minibatches"]) {
            self.report(
                "config::inconsistent",
                format!(
                    "a rank's {turns} turns cannot be split into {} minibatches",
                    ppo.minibatches
                ),
                "algorithm.minibatches",
                "does not divide the turns",
                Some((path, "a turn-based game")),
                "a rank learns from one turn a game on each step, environments a rank x rollout: \
                 pick minibatches that divide it"
                    .into(),
            );
        }
    }

    /// Learners that play seats of a batch (several policies, a centralised critic) or learn
    /// from some of its rows (a turn-based game) collect synchronously, without a recurrent
    /// state; false where `subject`, written at `path`, was refused for it.
    fn seats_can_share_a_batch(&mut self, subject: &str, path: &str) -> bool {
        let e = self.experiment;
        let not_yet = |what: &str| format!("{subject} cannot {what} yet");
        if e.algorithm.facts().learns != Learns::OnPolicy && self.ok(&["algorithm"]) {
            let learners = Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "or");
            self.report(
                "config::inconsistent",
                not_yet(&format!("learn with {}", e.algorithm.name())),
                path,
                subject,
                Some(("algorithm", "an off-policy learner")),
                format!("it learns with {learners}"),
            );
            return false;
        }
        let refusals = [
            (
                e.train.sampling != Sampling::Synchronous,
                "train.sampling",
                "sample other than synchronously",
                "set `sampling \"synchronous\"`",
            ),
            (
                e.train.env_groups > 1,
                "train.env-groups",
                "step the environments in groups",
                "set `env-groups 1`",
            ),
            (
                e.network.core.is_some(),
                "network.core",
                "carry a recurrent core",
                "set `core \"none\"`",
            ),
        ];
        for (refused, other, what, fix) in refusals {
            if refused && self.ok(&[other]) {
                self.report(
                    "config::inconsistent",
                    not_yet(what),
                    path,
                    subject,
                    Some((other, "this setting")),
                    fix.into(),
                );
                return false;
            }
        }
        true
    }

    /// Epsilon decays.
    fn dqn(&mut self, dqn: &Dqn) {
        if self.ok(&[
            "algorithm",
            "algorithm.epsilon-start",
            "algorithm.epsilon-end",
        ]) && dqn.epsilon_end > dqn.epsilon_start
        {
            self.report(
                "config::inconsistent",
                "epsilon rises instead of decaying".into(),
                "algorithm.epsilon-end",
                &format!("greater than epsilon-start {}", dqn.epsilon_start),
                Some(("algorithm.epsilon-start", "epsilon-start")),
                "epsilon-end must be at most epsilon-start".into(),
            );
        }
    }

    /// On-policy updates normalise advantages and report statistics over the global
    /// batch, whose variance needs at least two samples.
    fn global_batch(&mut self) {
        let e = self.experiment;
        if self.ok(&["env.envs", "train.rollout"]) && e.batch_size() < 2 {
            self.report(
                "config::too-small",
                format!(
                    "a global batch of {} transition cannot be normalised",
                    e.batch_size()
                ),
                "train.rollout",
                "1 step per environment",
                Some(("env.envs", "1 environment")),
                format!(
                    "{} updates over all ranks' environments x rollout transitions, at least 2: raise envs or rollout",
                    e.algorithm.name()
                ),
            );
        }
    }

    /// Each rank's replay ring must hold, per environment, more steps than the frame
    /// stack and the n-step return reach back and ahead.
    fn replay(&mut self, n_step: usize) {
        let e = self.experiment;
        if !self.ok(&[
            "devices",
            "env.envs",
            "env.wrappers",
            "algorithm.buffer-capacity",
            "algorithm.n-step",
        ]) {
            return;
        }
        let stack = e.replay_stack();
        let rows = e.per_rank_buffer_capacity().unwrap_or(0) / e.per_rank_rows().max(1);
        let reserved = stack - 1 + n_step;
        if rows > reserved {
            self.frame_skip_after_stack();
            return;
        }
        self.report(
            "config::too-small",
            format!("the replay buffer holds {rows} steps per environment, too few to sample from"),
            "algorithm.buffer-capacity",
            &format!("{rows} steps per environment"),
            Some(("algorithm.n-step", "n-step")),
            format!(
                "each rank keeps buffer-capacity / devices = {} transitions over its {} environments; stacks of {stack} frames and n-step {} need more than {reserved} steps per environment: raise buffer-capacity",
                e.per_rank_buffer_capacity().unwrap_or(0),
                e.per_rank_rows(),
                n_step
            ),
        );
    }

    /// Replay stores each stacked observation as its newest frame and rebuilds the
    /// stack from the previous steps; a frame skip after the stack moves the stack by
    /// several frames per step, so it cannot be rebuilt.
    fn frame_skip_after_stack(&mut self) {
        let e = self.experiment;
        let Some(entry) = self.applier.entries.get("env.wrappers").cloned() else {
            return;
        };
        let Some((skip, stack)) = tandem_spec::wrapper::skip_after_stack(&e.env.wrappers) else {
            return;
        };
        let (Some(skip_span), Some(stack_span)) = (entry.items.get(skip), entry.items.get(stack))
        else {
            return;
        };
        let (skip_name, stack_name) = (e.env.wrappers[skip].name(), e.env.wrappers[stack].name());
        self.applier.push(
            error(
                "config::wrapper-mismatch",
                format!("`{skip_name}` after `{stack_name}` does not fit dqn's replay"),
            )
            .at(entry.source, *skip_span, "skips frames of a stacked observation")
            .also(entry.source, *stack_span, "the stack")
            .help(format!(
                "dqn's replay rebuilds stacks one frame per step: put `{skip_name}` before `{stack_name}`"
            )),
        );
    }

    /// DQN learns one Q-network: there is no critic to give its own torso.
    fn no_critic(&mut self) {
        if self.ok(&["algorithm", "network.actor-critic"]) && !self.experiment.network.shared() {
            self.report(
                "config::inconsistent",
                "dqn has no critic to separate".into(),
                "network.actor-critic",
                "not used by dqn",
                Some(("algorithm", "dqn")),
                format!(
                    "dqn learns one Q-network; remove `actor-critic \"separate\"` or use {}",
                    Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "or")
                ),
            );
        }
    }

    /// SAC's and TD3's actor and critics are MLPs over vector observations, each with its own
    /// torso.
    fn actor_critic_mlps(&mut self) {
        let e = self.experiment;
        let name = e.algorithm.name();
        if self.ok(&["algorithm", "network"]) && !matches!(e.network.torso, Torso::Mlp { .. }) {
            self.report(
                "config::inconsistent",
                format!("{name} takes an mlp network, not {}", e.network.torso.name()),
                "network",
                "not an mlp",
                Some(("algorithm", name)),
                format!("{name} builds its actor and twin critics from `network \"mlp\"`; use it (with vector observations)"),
            );
        }
        if self.ok(&["env", "env.wrappers", "algorithm"])
            && let Some(obs) = e.observation()
            && !obs.is_vector()
        {
            self.report(
                "config::inconsistent",
                format!(
                    "{name} cannot read the pixel observations of {}",
                    e.env.game.name()
                ),
                "env",
                "observes images or planes",
                Some(("algorithm", name)),
                format!("{name} reads vector observations through MLPs; choose a game that observes a vector"),
            );
        }
        if self.ok(&["algorithm", "network.actor-critic"]) && !e.network.shared() {
            self.report(
                "config::inconsistent",
                format!("{name}'s actor and critics never share a torso"),
                "network.actor-critic",
                &format!("not used by {name}"),
                Some(("algorithm", name)),
                format!("{name} always gives its actor and each critic their own MLP; remove `actor-critic \"separate\"`"),
            );
        }
    }

    /// A run cannot be stopped after its end.
    fn max_steps(&mut self) {
        let e = self.experiment;
        if let Some(max) = e.train.max_steps
            && self.ok(&["train.max-steps", "train.total-steps"])
            && max > e.train.total_steps
        {
            self.report(
                "config::inconsistent",
                "max-steps exceeds total-steps".into(),
                "train.max-steps",
                &format!("more than total-steps {}", e.train.total_steps),
                Some(("train.total-steps", "total-steps")),
                "max-steps stops a run early; it cannot extend it past total-steps".into(),
            );
        }
    }

    /// dqn chooses among discrete actions, sac and td3 act in a box; ppo and a2c take either
    /// kind.
    fn learner_takes_the_actions(&mut self) {
        let e = self.experiment;
        let Some(info) = e.env.game.info() else {
            return;
        };
        let algorithm = e.algorithm.name();
        if e.algorithm.squashes_box_actions() {
            let policy = if matches!(e.algorithm, Algorithm::Sac(_)) {
                "a squashed Gaussian policy"
            } else {
                "a deterministic tanh policy"
            };
            if info.actions.is_discrete() {
                self.report(
                    "config::action-mismatch",
                    format!("{algorithm} cannot act in {}", info.name),
                    "env",
                    &format!("acts with {}", info.actions),
                    Some(("algorithm", "takes box actions only")),
                    format!(
                        "{algorithm} learns {policy} over a box of continuous actions, and {} takes {}; choose a game with box actions (e.g. `env \"pendulum\"`), or {} for discrete ones",
                        info.name, info.actions, Algorithm::names_where(|f| f.acts != Acts::SquashedBox, "or")
                    ),
                );
            }
            return;
        }
        if info.actions.is_discrete() || e.algorithm.facts().acts != Acts::Discrete {
            return;
        }
        self.report(
            "config::action-mismatch",
            format!("{algorithm} cannot act in {}", info.name),
            "env",
            &format!("acts with {}", info.actions),
            Some(("algorithm", "takes discrete actions only")),
            format!(
                "{algorithm} chooses among discrete actions, and {} takes {}; use {}, or choose a game with discrete actions (e.g. `env \"mountain-car\"` for `mountain-car-continuous`)",
                info.name, info.actions, Algorithm::names_where(|f| f.acts == Acts::AnySpace, "or")
            ),
        );
    }

    /// Each gymnasium worker steps at least one of the rank's environments.
    fn gymnasium_workers(&mut self, workers: usize) {
        let e = self.experiment;
        let (world, world_text) = world(e);
        let per_rank = e.env.envs / world;
        if self.ok(&["devices", "env.envs", "env.workers"])
            && e.env.envs.is_multiple_of(world)
            && workers > per_rank
        {
            self.report(
                "config::inconsistent",
                format!("{workers} gymnasium workers for {per_rank} environments per rank"),
                "env.workers",
                &format!("more than the rank's {per_rank} environments"),
                Some(("env.envs", "envs")),
                format!(
                    "each rank runs {per_rank} environments ({} over {world_text}) on its workers; use at most {per_rank} workers, or more envs",
                    e.env.envs
                ),
            );
        }
        self.gymnasium_workers_in_groups(workers);
    }

    /// Free sampling steps each environment group on a rollout worker of its own, so a
    /// gymnasium worker process must serve one group only: its requests would mix.
    fn gymnasium_workers_in_groups(&mut self, workers: usize) {
        let e = self.experiment;
        let groups = e.train.env_groups;
        if self.ok(&["env.workers", "train.env-groups", "train.sampling"])
            && e.train.sampling == Sampling::Free
            && groups > 1
            && !workers.is_multiple_of(groups)
        {
            self.report(
                "config::inconsistent",
                format!(
                    "{workers} gymnasium workers cannot be split among {groups} environment groups"
                ),
                "env.workers",
                &format!("not a multiple of env-groups {groups}"),
                Some(("train.env-groups", "env-groups")),
                format!(
                    "free sampling steps each group on its own, and a worker must serve one group only: use a multiple of {groups} workers, e.g. workers {}",
                    groups * workers.div_ceil(groups)
                ),
            );
        }
    }

    /// An action mask is read by ppo's and a2c's categorical heads only, and it follows the
    /// observation as its last entries, which normalize-obs would shift and keep-obs cut.
    fn action_mask(&mut self) {
        let e = self.experiment;
        if self.ok(&["algorithm", "env.action-mask"]) && !e.algorithm.is_on_policy() {
            self.report(
                "config::inconsistent",
                format!("{} does not take an action mask", e.algorithm.name()),
                "env.action-mask",
                "an action mask",
                Some(("algorithm", "this algorithm")),
                format!("action masks are applied to the categorical policies of {}; use one of them, or action-mask \"none\"", Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "and")),
            );
        }
        let changes_mask = e
            .env
            .wrappers
            .iter()
            .find(|w| matches!(w, Wrapper::NormalizeObs { .. } | Wrapper::KeepObs { .. }));
        if let Some(wrapper) = changes_mask
            && self.ok(&["env.wrappers", "env.action-mask"])
        {
            self.report(
                "config::inconsistent",
                format!("wrapper `{}` would change the action mask", wrapper.name()),
                "env.action-mask",
                "the mask follows the observation",
                Some(("env.wrappers", "these wrappers")),
                format!(
                    "the action mask is the observation's last entries, which `{}` would change; \
                     normalise or select inside your environment instead",
                    wrapper.name()
                ),
            );
        }
    }

    /// Every wrapper held to tandem-spec's fit rule where the chain puts it (the env crate
    /// builds by the same rule). A gymnasium environment's observation is known once it is
    /// built, so only the rule's half that needs the game alone is checked for one.
    fn wrappers(&mut self) {
        let e = self.experiment;
        self.duplicate_wrappers();
        let Some(entry) = self.applier.entries.get("env.wrappers").cloned() else {
            return;
        };
        let facts = e.env.game.facts();
        let mut obs = e.env.game.info().map(|game| game.observation);
        for (wrapper, span) in e.env.wrappers.iter().zip(entry.items.iter()) {
            let fit = match &obs {
                Some(input) => fit::fits(wrapper, &facts, input).map(Some),
                None => fit::fits_game(wrapper, &facts).map(|()| None),
            };
            let (label, help) = match fit {
                Ok(output) => {
                    obs = output.or(obs);
                    continue;
                }
                Err(Misfit::Input { label, help }) => (label, Some(help)),
                Err(Misfit::Parameter(reason)) => (reason, None),
            };
            let mut report = error(
                "config::wrapper-mismatch",
                format!("wrapper `{}` does not fit {}", wrapper.name(), facts.name),
            )
            .at(entry.source, *span, label);
            if let Some(help) = help {
                report = report.help(help);
            }
            self.applier.push(report);
        }
    }

    fn duplicate_wrappers(&mut self) {
        let e = self.experiment;
        let Some(entry) = self.applier.entries.get("env.wrappers").cloned() else {
            return;
        };
        let mut seen: HashMap<&str, SourceSpan> = HashMap::new();
        for (wrapper, span) in e.env.wrappers.iter().zip(entry.items.iter()) {
            let name = wrapper.name();
            if let Some(first) = seen.get(name) {
                self.applier.push(
                    error(
                        "config::duplicate-wrapper",
                        format!("wrapper `{name}` appears twice"),
                    )
                    .at(entry.source, *span, "second time")
                    .also(entry.source, *first, "first time")
                    .help("each wrapper may appear once"),
                );
            } else {
                seen.insert(name, *span);
            }
        }
    }

    /// bfloat16 is an image torso's: an MLP's products are small and run on the host in float32.
    fn precision_needs_an_image_torso(&mut self) {
        let network = &self.experiment.network;
        if network.precision == Precision::Float32
            || !matches!(network.torso, Torso::Mlp { .. } | Torso::Layers { .. })
            || !self.ok(&["network", "network.precision"])
        {
            return;
        }
        if matches!(network.torso, Torso::Layers { .. }) {
            return self.report(
                "config::precision-needs-image-torso",
                "`precision \"bfloat16\"` is for the built-in image torsos, not `layers`".into(),
                "network.precision",
                "bfloat16 convolutions and dense layer",
                Some(("network", "declared layers")),
                "declared layers compute in float32; remove `precision`, or use nature-cnn, minatar-cnn or impala-cnn".into(),
            );
        }
        self.report(
            "config::precision-needs-image-torso",
            "`precision \"bfloat16\"` is for image torsos, not `mlp`".into(),
            "network.precision",
            "bfloat16 convolutions and dense layer",
            Some(("network", "an mlp torso")),
            "an MLP's small products gain nothing from bfloat16 (they run on the host in float32); \
             remove `precision`, or use an image torso (nature-cnn, minatar-cnn, impala-cnn)"
                .into(),
        );
    }

    /// A declared network's layers held to tandem-spec's shape rule on the game's observation
    /// (the network is built by the same rule): the first layer that cannot read what reaches
    /// it is named at its line.
    fn layers_fit(&mut self, layers: &[tandem_spec::Layer], obs: ObsSpace) {
        let Some(entry) = self.applier.entries.get("network.layers").cloned() else {
            return;
        };
        let input = obs.network_shape();
        let Err(misfit) = tandem_spec::layer::shapes(layers, &input) else {
            return;
        };
        let Some(span) = entry.items.get(misfit.at) else {
            return;
        };
        let e = self.experiment;
        self.applier.push(
            error(
                "config::layer-mismatch",
                format!(
                    "layer `{}` does not fit the observations of {}",
                    misfit.name,
                    e.env.game.name()
                ),
            )
            .at(entry.source, *span, misfit.message)
            .help(format!(
                "the network reads {} ({} after its wrappers); `tandem validate --deep` shows each layer's shape",
                tandem_spec::layer::shown(&input),
                obs.describe()
            )),
        );
    }

    fn network(&mut self) {
        let e = self.experiment;
        // A gymnasium environment's observation is known once it is built; the run checks then.
        let Some(obs) = e.observation() else {
            return;
        };
        let at_least = |side: usize| match obs.shape {
            ObsShape::Image { height, width, .. }
            | ObsShape::ImageAndVector { height, width, .. } => height >= side && width >= side,
            ObsShape::Vector { .. } => false,
        };
        let need = match &e.network.torso {
            Torso::Layers { layers } => return self.layers_fit(layers, obs),
            Torso::NatureCnn { .. } if obs.is_pixel_image() && at_least(36) => None,
            Torso::NatureCnn { .. } => Some("image observations of at least 36x36"),
            Torso::MinatarCnn { .. } if obs.is_planes() && at_least(3) => None,
            Torso::MinatarCnn { .. } => Some("binary plane observations (MinAtar)"),
            Torso::ImpalaCnn { .. } if at_least(8) => None,
            Torso::ImpalaCnn { .. } => Some("image observations of at least 8x8"),
            Torso::Mlp { .. } => None,
        };
        if let Some(need) = need {
            let name = e.network.torso.name();
            let suggestion = if obs.is_vector() {
                "network \"mlp\""
            } else if obs.is_planes() {
                "network \"minatar-cnn\""
            } else {
                "network \"nature-cnn\""
            };
            self.report(
                "config::network-mismatch",
                format!(
                    "network `{name}` does not fit the observations of {}",
                    e.env.game.name()
                ),
                "network",
                &format!("needs {need}"),
                Some(("env", "the game")),
                format!(
                    "after its wrappers, {} observes {}; use `{suggestion}`",
                    e.env.game.name(),
                    obs.describe()
                ),
            );
        }
    }
}

/// The number of ranks (at least 1) and how messages name it.
fn world(e: &Experiment) -> (usize, String) {
    let world = e.world_size().max(1);
    (
        world,
        format!("{world} device{}", if world == 1 { "" } else { "s" }),
    )
}

/// The schema's default of one of `section`'s common integer settings.
fn setting_default_int(section: &crate::schema::Section, name: &str) -> Option<i64> {
    match section.common.iter().find(|f| f.name == name)?.default {
        crate::schema::Dflt::Int(d) => Some(d),
        _ => None,
    }
}

/// Whether `value` is the schema's default for the network setting `gain`.
fn is_default_gain(gain: &str, value: f64) -> bool {
    setting_default(&crate::schema::NETWORK, None, gain) == Some(value)
}

/// The schema's default of a number setting: one of `section`'s common settings, or one of
/// kind `kind`'s.
fn setting_default(
    section: &crate::schema::Section,
    kind: Option<&str>,
    name: &str,
) -> Option<f64> {
    let fields = match kind {
        Some(kind) => section.kind(kind)?.fields,
        None => section.common,
    };
    match fields.iter().find(|f| f.name == name)?.default {
        crate::schema::Dflt::Float(d) => Some(d),
        _ => None,
    }
}

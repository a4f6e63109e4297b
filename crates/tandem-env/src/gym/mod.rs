//! The gymnasium bridge: environments of any registered gymnasium id, run by a few Python
//! worker processes per rank ([`Gymnasium::workers`], each owning a contiguous share of the
//! rank's environments) and stepped as one batch.
//!
//! One batch step is one request line and one reply line per worker, all workers at once;
//! observations, actions, rewards and flags travel through a shared-memory file
//! ([`shm`]). [`crate::VecEnv`] first steps the batch in the workers, then runs each
//! environment's wrapper chain as for native games; the bottom of each chain is a proxy
//! ([`GymEnv`]) that reads its precomputed result from shared memory.
//!
//! Semantics:
//! - Seeds: environment `i`'s first reset is `env.reset(seed=s)` with `s` the u64 seed
//!   tandem gives it (gymnasium takes any non-negative Python int, so the seed passes
//!   unchanged), and `env.action_space.seed(s)`; later resets are unseeded.
//! - Episode ends: the worker resets at once, keeping the last observation (VecEnv's
//!   `final_obs`); terminated and truncated stay as gymnasium reports them. A reset that
//!   tandem's own wrappers ask for (time-limit) is one more round trip for that worker.
//! - Spaces: a `Box` observation of float32, float64 (sent as f32) or uint8 is taken as it
//!   is: a 3-D uint8 box is a height x width x channels image, a 2-D uint8 box a
//!   one-channel image (both go through the image wrappers like ALE frames), anything else
//!   is flattened to a vector. The worker encodes any other observation (`Discrete`,
//!   `MultiDiscrete`, `MultiBinary`, `Dict` and `Tuple` of them and of boxes) into one f32
//!   vector, led by the pixels of the one image a Dict or Tuple may hold, channels first
//!   ([`ObsShape::ImageAndVector`]); an action mask follows as its last entries. Actions:
//!   `Discrete(n)` starting at 0, a float box, a one-dimensional `MultiDiscrete` or
//!   `MultiBinary`. Other spaces (two images, Text, Graph, ...) are refused with the space,
//!   the entry and the id.
//! - Wrappers that step the inner environment other than once per agent step
//!   (noop-reset, fire-reset, frame-skip, episodic-life) or replace the agent's action
//!   (sticky-actions) are refused: the batch was already stepped with the agent's actions.
//! - Errors inside a step (a Python exception, with its traceback and the rank-local
//!   environment index; a worker that died; a worker that did not answer within
//!   [`Gymnasium::step_timeout_s`]) come back as [`EnvError::Backend`] from `VecEnv::step`,
//!   and every worker is killed then; dropping the VecEnv closes and reaps the workers.
//! - Info values ([`Gymnasium::info_keys`]): the worker writes each step's values of the
//!   keys into the shared memory (a missing key as NaN, a value that is not a finite number
//!   or boolean refused at once, naming the key), before an episode's end resets the
//!   environment; [`Pool::end_info`] reads an ended episode's values, and refuses a key its
//!   last step lacks.
//! - Snapshots: a Python environment's state cannot be saved in general, so
//!   [`Env::save_state`] refuses (a resumed run starts fresh episodes).
//! - Rendering: only with [`BridgeOptions::render`] (which `tandem play --gif` sets; training
//!   never does) are the environments made with `render_mode="rgb_array"`. Then
//!   [`Env::render_rgb`] is one round trip to the owning worker, which calls
//!   `env.render()` and replies with the uint8 height x width x 3 frame hex-encoded in its
//!   reply line (frames are rare and their size is known only once drawn, so they travel
//!   through the pipe, not the fixed shared-memory layout). Rendering reads the state
//!   only: the episode is the same with and without it. A `render()` that raises or
//!   returns anything but such a frame is an [`EnvError::Backend`] naming the id, reported
//!   by `VecEnv::render_rgb`. MuJoCo renders offscreen with `MUJOCO_GL=egl` (the worker's
//!   default when rendering and `MUJOCO_GL` is unset) or `osmesa`; a machine without the
//!   GL libraries gets a message that says which to install.

mod pool;
mod shm;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::EnvError;
use crate::env::{Env, RgbFrame, Step};
use crate::multi_agent::{AgentSpec, ParallelEnv};
use crate::space::{
    Action, ActionSpace, Dtype, GroupActions, Layout as ImageLayout, ObsBuf, ObsSpace,
};
use crate::wrappers::misfit_error;
use pool::{Failure, Worker, await_replies};
use shm::{Layout, Shm};
use tandem_spec::Wrapper;
use tandem_spec::fit::{self, GameFacts};
pub use tandem_spec::game::{ActionMask, Gymnasium, PettingZoo, Scalar, ZooApi};

/// How this process runs a gymnasium environment's workers, beyond what the environment's
/// settings ([`Gymnasium`]) say: not settings of the run, so not in the config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BridgeOptions {
    /// Put before each line a worker writes to stderr (e.g. `rank 1 `).
    pub log_prefix: String,
    /// Make the environments with `render_mode="rgb_array"` so that [`Env::render_rgb`]
    /// draws them (`tandem play --gif`); training never pays for drawing.
    pub render: bool,
}

/// What a bridge's worker builds: a gymnasium environment of one agent, or a PettingZoo
/// environment of several (the Parallel API), one game per environment of the pool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    Gymnasium,
    PettingZoo {
        module: String,
        function: String,
        /// The agents the experiment says each game has, checked against the game's.
        agents: usize,
        /// The function builds an AEC environment, whose agents take turns.
        turns: bool,
    },
}

/// A bridge environment's settings, checked and in the bridge's units, with this
/// process's options.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The gymnasium id, or the PettingZoo module.
    pub id: String,
    /// How messages name the environment: ``gymnasium `CartPole-v1` ``,
    /// ``pettingzoo `mpe2.simple_spread_v3` ``.
    pub label: String,
    pub source: Source,
    /// The interpreter: a path, or a command name looked up on `PATH`.
    pub python: PathBuf,
    /// Modules imported before `gymnasium.make` (or the PettingZoo module). The worker's
    /// working directory is on `sys.path`.
    pub imports: Vec<String>,
    /// Keyword arguments of `gymnasium.make` (or the PettingZoo function), as the worker
    /// reads them.
    pub make_args: serde_json::Value,
    /// Worker processes per rank (at most one per environment).
    pub workers: usize,
    /// How long one worker may take to answer a step or reset request.
    pub step_timeout: Duration,
    pub log_prefix: String,
    pub render: bool,
    pub action_mask: ActionMask,
    pub info_keys: Vec<String>,
}

/// The settings both kinds of bridge environment share, as [`Launch::checked`] reads them.
struct Common<'a> {
    python: &'a str,
    imports: &'a [String],
    make_args: &'a [(String, Scalar)],
    workers: usize,
    step_timeout_s: f64,
    action_mask: ActionMask,
}

impl Launch {
    /// `gym`'s settings checked: an id, a worker, a positive step timeout that is a
    /// duration, finite float arguments.
    pub(crate) fn new(gym: &Gymnasium, options: &BridgeOptions) -> Result<Self, EnvError> {
        let common = Common {
            python: &gym.python,
            imports: &gym.imports,
            make_args: &gym.make_args,
            workers: gym.workers,
            step_timeout_s: gym.step_timeout_s,
            action_mask: gym.action_mask,
        };
        let mut launch = Self::checked(&gym.id, Source::Gymnasium, &common, options)?;
        launch.info_keys = gym.info_keys.clone();
        Ok(launch)
    }

    /// `zoo`'s settings checked as [`Launch::new`] checks a gymnasium environment's, and a
    /// function to call and at least one agent.
    pub(crate) fn pettingzoo(zoo: &PettingZoo, options: &BridgeOptions) -> Result<Self, EnvError> {
        let common = Common {
            python: &zoo.python,
            imports: &zoo.imports,
            make_args: &zoo.make_args,
            workers: zoo.workers,
            step_timeout_s: zoo.step_timeout_s,
            action_mask: zoo.action_mask,
        };
        let source = Source::PettingZoo {
            module: zoo.module.clone(),
            function: zoo.function.clone(),
            agents: zoo.agents,
            turns: zoo.api == tandem_spec::ZooApi::Aec,
        };
        let launch = Self::checked(&zoo.module, source, &common, options)?;
        let bad = |reason: &str| {
            Err(EnvError::InvalidGameParameter {
                game: launch.label.clone(),
                reason: reason.into(),
            })
        };
        if zoo.function.trim().is_empty() {
            return bad("the function that builds the environment is empty");
        }
        if zoo.agents == 0 {
            return bad("needs at least one agent");
        }
        Ok(launch)
    }

    fn checked(
        id: &str,
        source: Source,
        gym: &Common<'_>,
        options: &BridgeOptions,
    ) -> Result<Self, EnvError> {
        let label = match source {
            Source::Gymnasium => format!("gymnasium `{id}`"),
            Source::PettingZoo { .. } => format!("pettingzoo `{id}`"),
        };
        let bad = |reason: String| {
            Err(EnvError::InvalidGameParameter {
                game: label.clone(),
                reason,
            })
        };
        if id.trim().is_empty() {
            return bad(match source {
                Source::Gymnasium => "the environment id is empty".into(),
                Source::PettingZoo { .. } => "the module is empty".into(),
            });
        }
        if gym.workers == 0 {
            return bad("needs at least one worker".into());
        }
        let step_timeout = match Duration::try_from_secs_f64(gym.step_timeout_s) {
            Ok(timeout) if !timeout.is_zero() => timeout,
            _ => {
                return bad(format!(
                    "the step timeout must be a positive number of seconds, got {}",
                    gym.step_timeout_s
                ));
            }
        };
        let mut make_args = serde_json::Map::new();
        for (name, value) in gym.make_args {
            let value = match value {
                Scalar::Bool(b) => serde_json::Value::from(*b),
                Scalar::Int(i) => serde_json::Value::from(*i),
                Scalar::Float(f) if f.is_finite() => serde_json::Value::from(*f),
                Scalar::Float(f) => {
                    return bad(format!(
                        "make argument `{name}` is {f}, not a finite number"
                    ));
                }
                Scalar::Str(s) => serde_json::Value::from(s.as_str()),
                Scalar::Null => serde_json::Value::Null,
            };
            make_args.insert(name.clone(), value);
        }
        Ok(Launch {
            id: id.to_owned(),
            label,
            source,
            python: PathBuf::from(gym.python),
            imports: gym.imports.to_vec(),
            make_args: serde_json::Value::Object(make_args),
            workers: gym.workers,
            step_timeout,
            log_prefix: options.log_prefix.clone(),
            render: options.render,
            action_mask: gym.action_mask,
            info_keys: Vec::new(),
        })
    }

    /// The agents of each game: 1 for gymnasium.
    pub(crate) fn agents(&self) -> usize {
        match self.source {
            Source::Gymnasium => 1,
            Source::PettingZoo { agents, .. } => agents,
        }
    }
}

/// What the workers reported at start: which interpreter and versions a run used, for
/// its log.
#[derive(Debug, Clone, PartialEq)]
pub struct GymInfo {
    pub id: String,
    /// `sys.executable` of the workers.
    pub python: String,
    pub python_version: String,
    pub gymnasium_version: String,
    /// PettingZoo's version, for a PettingZoo environment.
    pub pettingzoo_version: Option<String>,
    pub numpy_version: String,
    /// The spaces as Python prints them.
    pub observation_space: String,
    pub action_space: String,
    /// How a structured observation (anything but a Box) becomes tandem's flat vector of
    /// floats, entry by entry (see [`encoding_words`]); `None` for a Box, taken as it is.
    pub observation_encoding: Option<String>,
    /// Process ids of the workers, in share order.
    pub worker_pids: Vec<u32>,
}

impl std::fmt::Display for GymInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pettingzoo_version {
            Some(version) => write!(
                f,
                "pettingzoo {version} (gymnasium {})",
                self.gymnasium_version
            )?,
            None => write!(f, "gymnasium {}", self.gymnasium_version)?,
        }
        write!(
            f,
            " `{}`, {} worker(s) running {} (Python {}, numpy {})",
            self.id,
            self.worker_pids.len(),
            self.python,
            self.python_version,
            self.numpy_version
        )
    }
}

/// The worker's list of a structured observation's entries in words: "as 20 floats: `goal`
/// Discrete(4) one-hot at 0..4, `pos` Box(...) values at 4..20", or for a single space
/// "as 16 floats, one-hot".
fn encoding_words(obs: &serde_json::Value) -> Option<String> {
    let entries = obs["entries"].as_array()?;
    if let [only] = entries.as_slice()
        && only["path"] == ""
    {
        let len = only["len"].as_u64().unwrap_or(0);
        return Some(format!(
            "as {len} floats, {}",
            only["how"].as_str().unwrap_or("?")
        ));
    }
    let mut start = 0;
    let parts: Vec<String> = entries
        .iter()
        .map(|e| {
            let len = e["len"].as_u64().unwrap_or(0);
            let path = e["path"].as_str().unwrap_or("");
            let name = if path.is_empty() {
                String::new()
            } else {
                format!("`{path}` ")
            };
            let words = format!(
                "{name}{} {} at {start}..{}",
                e["space"].as_str().unwrap_or("?"),
                e["how"].as_str().unwrap_or("?"),
                start + len
            );
            start += len;
            words
        })
        .collect();
    Some(format!("as {start} floats: {}", parts.join(", ")))
}

/// Refuses wrappers that cannot sit on a batch stepped ahead of the chain (see the module
/// documentation), by the half of tandem-spec's fit rule that needs the game alone.
pub(crate) fn check_wrappers(wrappers: &[Wrapper], launch: &Launch) -> Result<(), EnvError> {
    let game = match launch.source {
        Source::Gymnasium => GameFacts::gymnasium(),
        // No wrapper fits a game of several agents (tandem-spec's rule for them).
        Source::PettingZoo { .. } => GameFacts {
            name: launch.label.clone(),
            family: Some(tandem_spec::Family::Mpe),
            ..GameFacts::gymnasium()
        },
    };
    for (index, wrapper) in wrappers.iter().enumerate() {
        fit::fits_game(wrapper, &game).map_err(|misfit| {
            // The space is not known yet: the message names the environment instead.
            misfit_error(wrapper, index, launch.label.clone(), misfit)
        })?;
    }
    Ok(())
}

/// One rank's workers and the shared memory they write.
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

/// Requests on their way: the workers that got one, and when their replies are due.
#[must_use = "a sent step must be awaited before the workers are asked anything else"]
pub(crate) struct Sent {
    workers: Vec<usize>,
    deadline: Instant,
}

struct Shared {
    /// How messages name the environment ([`Launch::label`]).
    id: String,
    /// The gymnasium id or PettingZoo module, for [`ParallelEnv::name`].
    name: &'static str,
    /// A PettingZoo game's agents, in `possible_agents` order; empty for gymnasium.
    agents: Vec<AgentSpec>,
    /// A PettingZoo AEC game: its worker writes whose turn it is after every step and reset.
    turns: bool,
    step_timeout: Duration,
    shm: Shm,
    workers: Vec<Mutex<Worker>>,
    /// The environments each worker holds, in worker order: fixed at the start, and kept
    /// outside the workers' locks, which a wait for a reply holds, so that a request for some
    /// workers never waits for another request's replies.
    shares: Vec<Range<usize>>,
    /// The first failure; once set every request fails with it and the workers are dead.
    failure: Mutex<Option<EnvError>>,
    info: GymInfo,
    obs_space: ObsSpace,
    action: ActionSpace,
    /// [`BridgeOptions::render`]: the workers' environments can draw themselves.
    render: bool,
    /// [`Gymnasium::info_keys`], in the order of each row of the shared memory's `info`.
    info_keys: Vec<String>,
}

/// Environments `0..n` split into `workers` contiguous shares differing by at most one.
fn shares(n: usize, workers: usize) -> Vec<Range<usize>> {
    let workers = workers.min(n).max(1);
    (0..workers)
        .map(|w| (w * n / workers)..((w + 1) * n / workers))
        .collect()
}

impl Pool {
    /// Starts the workers for `seeds.len()` environments, checks their spaces, maps the
    /// shared memory, and resets environment `i` with `seeds[i]`. `wrappers` is checked
    /// before anything starts.
    pub fn start(wrappers: &[Wrapper], gym: &Launch, seeds: &[u64]) -> Result<Self, EnvError> {
        check_wrappers(wrappers, gym)?;
        let mut workers = Vec::new();
        let shares = shares(seeds.len(), gym.workers);
        let (kind, module, function, turns) = match &gym.source {
            Source::Gymnasium => ("gymnasium", "", "", false),
            Source::PettingZoo {
                module,
                function,
                turns,
                ..
            } => ("pettingzoo", module.as_str(), function.as_str(), *turns),
        };
        for (w, envs) in shares.iter().cloned().enumerate() {
            let config = serde_json::json!({
                "kind": kind,
                "module": module,
                "function": function,
                "id": gym.id,
                "imports": gym.imports,
                "make_args": gym.make_args,
                "render": gym.render,
                "action_mask": gym.action_mask.name(),
                "api": if turns { "aec" } else { "parallel" },
                "info_keys": gym.info_keys,
                "lo": envs.start,
                "hi": envs.end,
            });
            workers.push(Worker::spawn(gym, w, envs, &config)?);
        }
        let hellos = {
            let mut refs: Vec<&mut Worker> = workers.iter_mut().collect();
            await_replies(&mut refs, pool::start_deadline(gym)).map_err(|(k, f)| {
                describe_failure(
                    &gym.label,
                    gym.step_timeout,
                    &mut workers[k],
                    f,
                    pool::STARTING,
                )
            })?
        };
        let hello: serde_json::Value = serde_json::from_str(&hellos[0]).map_err(|e| {
            EnvError::Backend(format!(
                "{}: worker 0 answered {:?} instead of its handshake: {e}",
                gym.label, hellos[0]
            ))
        })?;
        let agents = match gym.source {
            Source::Gymnasium => Vec::new(),
            Source::PettingZoo { .. } => agents_of(gym, &hello)?,
        };
        let (obs_space, obs_bytes) = observation_space(&gym.label, &hello["obs"])?;
        let action = action_kind(&gym.label, &hello["action"])?;
        if agents.is_empty() {
            // A game's agents are checked one by one (agents_of).
            check_mask(&gym.label, gym.action_mask, &hello, &action)?;
        }
        // Discrete actions travel as int64 (one per component), box actions as float32 values.
        let act_bytes = match &action {
            ActionSpace::Discrete { .. } => 8,
            ActionSpace::Box { low, .. } => 4 * low.len(),
            ActionSpace::MultiDiscrete { nvec } => 8 * nvec.len(),
        };
        let text = |key: &str| hello[key].as_str().unwrap_or("?").to_owned();
        let info = GymInfo {
            id: gym.id.clone(),
            python: text("python"),
            python_version: text("python_version"),
            gymnasium_version: text("gymnasium"),
            pettingzoo_version: hello["pettingzoo"].as_str().map(str::to_owned),
            numpy_version: text("numpy"),
            observation_space: hello["obs"]["repr"].as_str().unwrap_or("?").to_owned(),
            action_space: hello["action"]["repr"].as_str().unwrap_or("?").to_owned(),
            observation_encoding: encoding_words(&hello["obs"]),
            worker_pids: workers.iter().map(|w| w.pid).collect(),
        };
        let per_game = (!agents.is_empty()).then_some(agents.len());
        let layout = Layout::new(
            seeds.len(),
            per_game,
            obs_bytes,
            act_bytes,
            gym.info_keys.len(),
        );
        let mut shm = Shm::create(layout)?;
        let map_line = format!(
            "{}\n",
            shm.layout.to_json(shm.path().expect("not yet unlinked"))
        );
        for worker in &mut workers {
            worker.send(&map_line);
        }
        {
            let mut refs: Vec<&mut Worker> = workers.iter_mut().collect();
            let deadline = pool::start_deadline(gym);
            await_replies(&mut refs, deadline).map_err(|(k, f)| {
                describe_failure(
                    &gym.label,
                    gym.step_timeout,
                    &mut workers[k],
                    f,
                    pool::MAPPING,
                )
            })?;
        }
        shm.unlink();
        let pool = Pool {
            shared: Arc::new(Shared {
                id: gym.label.clone(),
                // Once per pool: ParallelEnv names its game with a static string.
                name: Box::leak(gym.id.clone().into_boxed_str()),
                agents,
                turns,
                step_timeout: gym.step_timeout,
                shm,
                workers: workers.into_iter().map(Mutex::new).collect(),
                shares,
                failure: Mutex::new(None),
                info,
                obs_space,
                action,
                render: gym.render,
                info_keys: gym.info_keys.clone(),
            }),
        };
        let requests: Vec<(usize, Option<u64>)> = seeds
            .iter()
            .enumerate()
            .map(|(i, &s)| (i, Some(s)))
            .collect();
        pool.shared.reset(&requests)?;
        Ok(pool)
    }

    pub fn info(&self) -> &GymInfo {
        &self.shared.info
    }

    /// The bottom of environment `index`'s wrapper chain.
    pub fn proxy(&self, index: usize) -> Box<dyn Env> {
        Box::new(GymEnv {
            shared: Arc::clone(&self.shared),
            index,
        })
    }

    /// Game `index` of a PettingZoo pool, as [`ParallelEnv`].
    pub fn game(&self, index: usize) -> Box<dyn ParallelEnv> {
        Box::new(ZooGame {
            shared: Arc::clone(&self.shared),
            index,
        })
    }

    /// The failure that ended the workers, if any.
    pub fn failure(&self) -> Option<EnvError> {
        self.shared.failure()
    }

    /// The environments each worker process holds, in worker order.
    pub fn worker_envs(&self) -> Vec<Range<usize>> {
        self.shared.shares.clone()
    }

    /// Sends the workers the step of environments `envs` (`actions.get(k)` for
    /// `envs.start + k`, already checked against the space) and returns at once: the workers
    /// simulate while the caller goes on, until [`Pool::await_step`] collects their replies.
    pub fn send_step(
        &self,
        envs: Range<usize>,
        actions: GroupActions<'_>,
    ) -> Result<Sent, EnvError> {
        let shm = &self.shared.shm;
        let l = &shm.layout;
        // A PettingZoo game's agents are consecutive rows: the workers step whole games.
        let per = l.agents.unwrap_or(1);
        if !envs.start.is_multiple_of(per) || !envs.end.is_multiple_of(per) {
            return Err(EnvError::InvalidArgument(format!(
                "rows {envs:?} cut a game of {per} agents; a group of rows holds whole games"
            )));
        }
        for (k, i) in envs.clone().enumerate() {
            match actions.get(k) {
                Action::Discrete(a) => shm.write(l.act + i * 8, &(a as i64).to_ne_bytes()),
                Action::Box(values) => shm.write_f32(l.act + i * l.act_bytes, values),
                Action::MultiDiscrete(indices) => {
                    for (c, a) in indices.iter().enumerate() {
                        shm.write(l.act + i * l.act_bytes + 8 * c, &a.to_ne_bytes());
                    }
                }
            }
        }
        self.shared.send_step(envs.start / per..envs.end / per)
    }

    /// Waits for the replies to a [`Pool::send_step`]; the proxies then read the outcome.
    pub fn await_step(&self, sent: Sent) -> Result<(), EnvError> {
        self.shared.await_sent(sent, "stepping").map(drop)
    }

    /// The info values (one per [`Gymnasium::info_keys`], empty without keys) of the step
    /// that ended environment `env`'s episode, the latest it took. A key missing from that
    /// step's info is an error naming it, kept as the pool's failure.
    pub fn end_info(&self, env: usize) -> Result<Vec<f64>, EnvError> {
        let keys = &self.shared.info_keys;
        let (shm, l) = (&self.shared.shm, &self.shared.shm.layout);
        let row = l.info + env * keys.len() * 8;
        let values: Vec<f64> = (0..keys.len()).map(|k| shm.f64_at(row + k * 8)).collect();
        if let Some(k) = values.iter().position(|v| v.is_nan()) {
            let error = EnvError::Backend(format!(
                "{}: environment {env}'s episode ended at a step whose info has no \
                 `{}`; info-keys logs each key's value at an episode's end, so the step that \
                 ends one (by the environment or by a time-limit) must give every key",
                self.shared.id, keys[k]
            ));
            return Err(self.shared.fail(error, &mut []));
        }
        Ok(values)
    }

    /// Resets every environment before a batch reset (`seeds` per environment, or
    /// unseeded); a failure is kept for the next step to report.
    pub fn reset_all(&self, seeds: Option<&[u64]>) -> Result<(), EnvError> {
        let n = self.shared.shm.layout.n;
        let requests: Vec<(usize, Option<u64>)> =
            (0..n).map(|i| (i, seeds.map(|s| s[i]))).collect();
        self.shared.reset(&requests)
    }
}

/// An error for `worker`'s `failure` while `doing` something, with its recent stderr.
fn describe_failure(
    id: &str,
    step_timeout: Duration,
    worker: &mut Worker,
    failure: Failure,
    doing: &str,
) -> EnvError {
    let who = format!(
        "worker {} (pid {}, environments {}..{})",
        worker.index, worker.pid, worker.envs.start, worker.envs.end
    );
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or("").to_owned();
    let message = match failure {
        Failure::Reply(v) => match v["error"].as_str().unwrap_or("") {
            "gymnasium" => format!(
                "gymnasium is not importable by `{}` (Python {}): {}; install it into that interpreter (`{} -m pip install gymnasium`) or point the environment's `python` at one that has it",
                text(&v, "python"),
                text(&v, "python_version"),
                text(&v, "message"),
                text(&v, "python")
            ),
            "import" => format!(
                "{id}: importing module `{}` failed:\n{}",
                text(&v, "module"),
                text(&v, "traceback").trim_end()
            ),
            "make" => format!(
                "{id}: could not make environment {}: {}\n{}",
                v["env"],
                text(&v, "message"),
                text(&v, "traceback").trim_end()
            ),
            "info" => format!(
                "{id}: environment {}: {} (the experiment's info-keys)",
                v["env"],
                text(&v, "message")
            ),
            "agents" => format!("{id}: game {}: {}", v["env"], text(&v, "message")),
            "observation" => format!("{id}: environment {}: {}", v["env"], text(&v, "message")),
            "render" => format!(
                "{id}: environment {} could not render: {}",
                v["env"],
                text(&v, "message").trim_end()
            ),
            kind @ ("step" | "reset") => format!(
                "{id}: environment {} raised an exception in {kind}:\n{}",
                v["env"],
                text(&v, "traceback").trim_end()
            ),
            _ => format!("{id}: {who} failed while {doing}: {v}"),
        },
        Failure::Died(status) => {
            let tail = worker.stderr_tail(Duration::from_millis(500));
            format!(
                "{id}: {who} died while {doing} ({status}){}{tail}",
                render_hint(doing)
            )
        }
        Failure::Timeout => {
            worker.kill();
            let tail = worker.stderr_tail(Duration::from_millis(500));
            format!(
                "{}{}{tail}",
                timeout_message(id, &who, doing, step_timeout),
                render_hint(doing)
            )
        }
    };
    EnvError::Backend(message)
}

/// A worker that did not answer in time: how long it had while `doing`, and how to give a slow
/// one more (the start's minimum is not the step timeout, so it is said).
fn timeout_message(id: &str, who: &str, doing: &str, step_timeout: Duration) -> String {
    let waited = pool::timeout_for(doing, step_timeout);
    let hint = if waited == step_timeout {
        "raise the environment's step timeout if it is just slow".to_string()
    } else {
        format!(
            "while {doing} a worker has the step timeout or {} s, whichever is longer: raise the \
             step timeout if its imports are just slow",
            pool::MIN_START_TIMEOUT.as_secs()
        )
    };
    format!(
        "{id}: {who} did not answer within {} s while {doing} and was killed ({hint})",
        waited.as_secs_f64()
    )
}

/// What to check when a worker died or hung while drawing: offscreen OpenGL is the usual
/// cause (the worker's own error names it when `render()` raises instead).
fn render_hint(doing: &str) -> &'static str {
    if doing == "rendering" {
        "; drawing offscreen needs OpenGL: MuJoCo uses MUJOCO_GL=egl (Debian: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) or MUJOCO_GL=osmesa (libosmesa6), see docs/environments.md"
    } else {
        ""
    }
}

/// The frame of environment `i` in a worker's render reply (`{"frame": {"height",
/// "width", "hex"}}`, the RGB bytes row-major).
fn decode_frame(id: &str, i: usize, reply: &str) -> Result<RgbFrame, EnvError> {
    let bad = |why: &str| {
        EnvError::Backend(format!(
            "{id}: environment {i}'s worker answered a render request with {why}"
        ))
    };
    let value: serde_json::Value =
        serde_json::from_str(reply).map_err(|_| bad("a line that is not JSON"))?;
    let frame = &value["frame"];
    let dim = |key: &str| frame[key].as_u64().map(|v| v as usize).filter(|&v| v > 0);
    let (Some(height), Some(width), Some(hex)) =
        (dim("height"), dim("width"), frame["hex"].as_str())
    else {
        return Err(bad("no frame"));
    };
    let hex = hex.as_bytes();
    if hex.len() != height * width * 3 * 2 {
        return Err(bad(
            "a frame whose size does not match its height and width",
        ));
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let pixels = hex
        .chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| bad("a frame that is not hexadecimal"))?;
    Ok(RgbFrame {
        height,
        width,
        pixels,
    })
}

/// A PettingZoo game's agents as its worker describes them (`hello["agents"]`), each
/// observing its own float32 vector, or why tandem cannot batch them: another number of
/// agents than the experiment's `agents`, or a space it cannot take.
fn agents_of(launch: &Launch, hello: &serde_json::Value) -> Result<Vec<AgentSpec>, EnvError> {
    let id = &launch.label;
    let listed = hello["agents"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = listed
        .iter()
        .map(|a| a["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    if names.len() != launch.agents() {
        let (n, said) = (names.len(), launch.agents());
        return Err(EnvError::InvalidGameParameter {
            game: id.clone(),
            reason: format!(
                "the environment has {n} agent(s) ({}), and the experiment's `agents` says {said}: \
                 set `agents {n}` (the batch's rows, and every size the config derives from \
                 them, count the agents)",
                names.join(", ")
            ),
        });
    }
    let agents = listed
        .iter()
        .zip(names)
        .map(|(agent, name)| {
            let who = format!("{id}'s agent `{name}`");
            let (space, _) = observation_space(&who, &agent["obs"])?;
            let action = action_kind(&who, &agent["action"])?;
            check_mask(&who, launch.action_mask, agent, &action)?;
            Ok(AgentSpec {
                team: team_of(&name).to_owned(),
                name,
                // The worker writes every agent's observation as float32 values.
                observation: ObsSpace::vector(space.len(), Dtype::F32),
                actions: action,
            })
        })
        .collect::<Result<Vec<_>, EnvError>>()?;
    // A mask is the last entries of each row; a narrower agent's would not be there.
    let lens: Vec<usize> = agents.iter().map(|a| a.observation.len()).collect();
    if launch.action_mask != ActionMask::None && lens.iter().any(|&len| len != lens[0]) {
        let each: Vec<String> = agents
            .iter()
            .map(|a| format!("{} {}", a.name, a.observation.len()))
            .collect();
        return Err(EnvError::Backend(format!(
            "{id}: action-mask needs every agent's observation to be as long (the mask is the \
             last entries of each row), and they differ: {}",
            each.join(", ")
        )));
    }
    Ok(agents)
}

/// The team of a PettingZoo agent id: the id without its trailing `_<index>`
/// (`adversary_0` plays for `adversary`); an id without one is its own team.
pub fn team_of(id: &str) -> &str {
    match id.rsplit_once('_') {
        Some((team, index))
            if !team.is_empty()
                && !index.is_empty()
                && index.bytes().all(|b| b.is_ascii_digit()) =>
        {
            team
        }
        _ => id,
    }
}

fn observation_space(id: &str, obs: &serde_json::Value) -> Result<(ObsSpace, usize), EnvError> {
    let repr = obs["repr"].as_str().unwrap_or("?");
    if obs["kind"] != "box" && obs["kind"] != "encoded" {
        let why = obs["why"]
            .as_str()
            .map_or_else(String::new, |why| format!(": {why}"));
        return Err(EnvError::Backend(format!(
            "{id}: observation space {repr} is not supported{why}"
        )));
    }
    let shape: Vec<usize> = obs["shape"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as usize)
                .collect()
        })
        .unwrap_or_default();
    let len: usize = shape.iter().product();
    let image = &obs["image"];
    let space = match (obs["dtype"].as_str().unwrap_or(""), shape.as_slice()) {
        _ if image.is_object() => image_and_vector(image, len),
        ("uint8", &[h, w, c]) => ObsSpace::image(h, w, c, ImageLayout::Hwc, Dtype::U8),
        ("uint8", &[h, w]) => ObsSpace::image(h, w, 1, ImageLayout::Hwc, Dtype::U8),
        ("uint8", _) => ObsSpace::vector(len, Dtype::U8),
        ("float32" | "float64", _) => ObsSpace::vector(len, Dtype::F32),
        (dtype, _) => {
            return Err(EnvError::Backend(format!(
                "{id}: observation space {repr} has dtype {dtype}; tandem takes Box observations of float32, float64 or uint8"
            )));
        }
    };
    if len == 0 {
        return Err(EnvError::Backend(format!(
            "{id}: observation space {repr} is empty"
        )));
    }
    let bytes = len * if space.dtype == Dtype::U8 { 1 } else { 4 };
    Ok((space, bytes))
}

/// An encoded row led by an image entry: its `[C, H, W]` pixels, then the other entries.
fn image_and_vector(image: &serde_json::Value, len: usize) -> ObsSpace {
    let side = |key: &str| image[key].as_u64().unwrap_or(0) as usize;
    let (height, width, channels) = (side("height"), side("width"), side("channels"));
    let vector = len.saturating_sub(height * width * channels);
    ObsSpace::image_beside_vector(height, width, channels, vector)
}

/// The mask the worker appends to the observation has one entry per action (per
/// component's action), as the policy's logits do.
fn check_mask(
    id: &str,
    mask: ActionMask,
    hello: &serde_json::Value,
    action: &ActionSpace,
) -> Result<(), EnvError> {
    if mask == ActionMask::None {
        return Ok(());
    }
    let Some(logits) = action.choices() else {
        return Err(EnvError::Backend(format!(
            "{id}: action-mask \"{}\" needs Discrete or MultiDiscrete actions; the environment takes {}",
            mask.name(),
            hello["action"]["repr"].as_str().unwrap_or("?")
        )));
    };
    // The worker says how long the mask it appends is in the observation's description.
    let given = hello["obs"]["mask"].as_u64().unwrap_or(0) as usize;
    if given != logits {
        return Err(EnvError::Backend(format!(
            "{id}: its action mask has {given} entries, its actions ({action}) need {logits}"
        )));
    }
    Ok(())
}

/// A JSON list of counts; anything else is an empty list.
fn counts(list: &serde_json::Value) -> Vec<usize> {
    list.as_array()
        .map(|v| v.iter().map(|n| n.as_u64().unwrap_or(0) as usize).collect())
        .unwrap_or_default()
}

fn action_kind(id: &str, act: &serde_json::Value) -> Result<ActionSpace, EnvError> {
    let repr = act["repr"].as_str().unwrap_or("?");
    let unsupported = |why: &str| {
        Err(EnvError::Backend(format!(
            "{id}: action space {repr} is not supported: {why}"
        )))
    };
    let bounds = |key: &str| -> Vec<f32> {
        act[key]
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|x| x.as_f64().unwrap_or(f64::NAN) as f32)
                    .collect()
            })
            .unwrap_or_default()
    };
    match act["kind"].as_str() {
        Some("discrete") if act["start"].as_i64() == Some(0) && act["n"].as_u64() > Some(0) => Ok(
            ActionSpace::discrete(act["n"].as_u64().unwrap_or(0) as usize),
        ),
        Some("discrete") => unsupported("discrete actions must start at 0"),
        Some("box")
            if act["dtype"]
                .as_str()
                .is_some_and(|d| d.starts_with("float")) =>
        {
            let (low, high) = (bounds("low"), bounds("high"));
            if low.is_empty() || low.len() != high.len() {
                return unsupported("an empty box");
            }
            // JSON has no infinities: the worker's unbounded sides arrive as null (NaN).
            let low = low
                .iter()
                .map(|&v| if v.is_nan() { f32::NEG_INFINITY } else { v })
                .collect();
            let high = high
                .iter()
                .map(|&v| if v.is_nan() { f32::INFINITY } else { v })
                .collect();
            Ok(ActionSpace::Box { low, high })
        }
        Some("box") => unsupported("box actions must be floating point"),
        Some("multi-discrete") => {
            let nvec: Vec<usize> = counts(&act["nvec"]);
            if nvec.is_empty() || nvec.contains(&0) {
                return unsupported(
                    "a MultiDiscrete needs at least one component, each with an action",
                );
            }
            Ok(ActionSpace::MultiDiscrete { nvec: nvec.into() })
        }
        Some("multi-binary") => match act["n"].as_u64() {
            Some(n) if n > 0 => Ok(ActionSpace::MultiDiscrete {
                nvec: vec![2; n as usize].into(),
            }),
            _ => unsupported("an empty MultiBinary"),
        },
        _ => unsupported(
            "tandem takes Discrete(n) actions starting at 0, float Box actions, and \
             one-dimensional MultiDiscrete and MultiBinary actions",
        ),
    }
}

impl Shared {
    fn failure(&self) -> Option<EnvError> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the first failure and kills every worker (those in `held` through their
    /// guards, the others by locking them).
    fn fail(&self, error: EnvError, held: &mut [MutexGuard<'_, Worker>]) -> EnvError {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let first = slot.get_or_insert(error).clone();
        drop(slot);
        let held_indices: Vec<usize> = held.iter().map(|w| w.index).collect();
        for worker in held.iter_mut() {
            worker.kill();
        }
        for (w, worker) in self.workers.iter().enumerate() {
            if !held_indices.contains(&w) {
                worker.lock().unwrap_or_else(|e| e.into_inner()).kill();
            }
        }
        first
    }

    /// Sends each worker its line (`None`: nothing for it) and awaits every reply; the
    /// replies of the workers that got a line, in worker order.
    fn round_trip(&self, lines: Vec<Option<String>>, doing: &str) -> Result<Vec<String>, EnvError> {
        let sent = self.send(lines)?;
        self.await_sent(sent, doing)
    }

    /// Sends each worker its line (`None`: nothing for it); the step timeout starts now.
    fn send(&self, lines: Vec<Option<String>>) -> Result<Sent, EnvError> {
        if let Some(error) = self.failure() {
            return Err(error);
        }
        let mut workers = Vec::new();
        for (w, line) in lines.iter().enumerate() {
            if let Some(line) = line {
                self.workers[w]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .send(line);
                workers.push(w);
            }
        }
        Ok(Sent {
            workers,
            deadline: Instant::now() + self.step_timeout,
        })
    }

    /// The replies of the workers `sent` went to, in worker order.
    fn await_sent(&self, sent: Sent, doing: &str) -> Result<Vec<String>, EnvError> {
        let mut held: Vec<MutexGuard<'_, Worker>> = sent
            .workers
            .iter()
            .map(|&w| self.workers[w].lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let deadline = sent.deadline;
        let result = {
            let mut refs: Vec<&mut Worker> = held.iter_mut().map(|g| &mut **g).collect();
            await_replies(&mut refs, deadline)
        };
        match result {
            Ok(replies) => Ok(replies),
            Err((k, failure)) => {
                let error =
                    describe_failure(&self.id, self.step_timeout, &mut held[k], failure, doing);
                Err(self.fail(error, &mut held))
            }
        }
    }

    fn send_step(&self, envs: Range<usize>) -> Result<Sent, EnvError> {
        let lines = self
            .shares
            .iter()
            .map(|share| {
                let (lo, hi) = (share.start.max(envs.start), share.end.min(envs.end));
                (lo < hi).then(|| format!("s {lo} {hi}\n"))
            })
            .collect();
        self.send(lines)
    }

    /// The worker that owns environment `i`.
    fn owner(&self, i: usize) -> usize {
        self.shares
            .iter()
            .position(|share| share.contains(&i))
            .expect("every env has a worker")
    }

    /// Environment `i`'s current picture, drawn by its worker (see the module
    /// documentation).
    fn render(&self, i: usize) -> Result<RgbFrame, EnvError> {
        let mut lines: Vec<Option<String>> = vec![None; self.workers.len()];
        lines[self.owner(i)] = Some(format!("f {i}\n"));
        let replies = self.round_trip(lines, "rendering")?;
        decode_frame(&self.id, i, &replies[0])
    }

    /// Whether environment `i`'s observation row already holds a reset that fits `seed`.
    fn ready_for(&self, i: usize, seed: Option<u64>) -> bool {
        let l = &self.shm.layout;
        self.shm.byte(l.ready + i) == 1
            && seed.is_none_or(|s| {
                self.shm.byte(l.seeded + i) == 1 && self.shm.u64_at(l.seed + i * 8) == s
            })
    }

    /// Resets the listed environments whose rows do not already hold a fitting reset.
    fn reset(&self, requests: &[(usize, Option<u64>)]) -> Result<(), EnvError> {
        let mut lines: Vec<Option<String>> = vec![None; self.workers.len()];
        for &(i, seed) in requests {
            if self.ready_for(i, seed) {
                continue;
            }
            let line = lines[self.owner(i)].get_or_insert_with(|| "r".to_owned());
            match seed {
                Some(s) => line.push_str(&format!(" {i} {s}")),
                None => line.push_str(&format!(" {i} -")),
            }
        }
        for line in lines.iter_mut().flatten() {
            line.push('\n');
        }
        if lines.iter().all(Option::is_none) {
            return Ok(());
        }
        self.round_trip(lines, "resetting").map(drop)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let deadline = pool::close_deadline();
        for worker in &mut self.workers {
            worker
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .close(deadline);
        }
    }
}

/// The bottom of a gymnasium environment's wrapper chain: hands out the result its
/// worker computed in the latest batch step or reset.
struct GymEnv {
    shared: Arc<Shared>,
    index: usize,
}

impl Shared {
    /// Copies environment `index`'s observation row; a value that is not finite is recorded
    /// as the environment's failure, so a NaN is blamed on its source and not on the policy it
    /// would poison (`after` says when: "reset", "step").
    fn copy_row(&self, index: usize, offset: usize, obs: ObsBuf<'_>, after: &str) {
        let shm = &self.shm;
        let bytes = shm.layout.obs_bytes;
        match obs {
            ObsBuf::U8(out) => shm.read(offset + index * bytes, out),
            ObsBuf::F32(out) => self.read_finite(index, offset + index * bytes, out, after),
            ObsBuf::Skip => {}
        }
    }

    /// Copies f32 observation values of environment `index` from byte `at`, a value that is
    /// not finite recorded as [`Shared::copy_row`] does.
    fn read_finite(&self, index: usize, at: usize, out: &mut [f32], after: &str) {
        self.shm.read_f32(at, out);
        if let Some((k, x)) = out.iter().enumerate().find(|(_, x)| !x.is_finite()) {
            self.record_not_finite(
                index,
                &format!("observation entry {k} is {x} (as float32)"),
                after,
            );
        }
    }

    /// Reward `slot` of the latest step (environment `index`'s, or one of its agents'), a
    /// value that is not finite, or past float32's range, recorded as its failure.
    fn reward(&self, index: usize, slot: usize) -> f32 {
        let l = &self.shm.layout;
        let reward = self.shm.f64_at(l.rew + slot * 8);
        if !reward.is_finite() {
            self.record_not_finite(index, &format!("the reward is {reward}"), "step");
        } else if !(reward as f32).is_finite() {
            self.record_not_finite(
                index,
                &format!("the reward {reward:e} is past float32's range"),
                "step",
            );
        }
        reward as f32
    }

    fn record_not_finite(&self, index: usize, what: &str, after: &str) {
        self.record(EnvError::Backend(format!(
            "{}: environment {index} returned a value that is not finite after a {after}: \
             {what}; tandem cannot learn from it (the environment produced it, not the policy: \
             check its dynamics or its observation code)",
            self.id
        )));
    }

    fn record(&self, error: EnvError) {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(error);
    }

    /// Makes environment `index`'s observation row hold a reset that fits `seed` (asking its
    /// worker unless its latest step already reset it) and takes it; false after a failure,
    /// which is kept for VecEnv to report after this batch step.
    fn take_reset(&self, index: usize, seed: Option<u64>) -> bool {
        let l = &self.shm.layout;
        if !self.ready_for(index, seed) && self.reset(&[(index, seed)]).is_err() {
            return false;
        }
        self.shm.set_byte(l.ready + index, 0);
        true
    }

    /// Takes environment `index`'s latest step: false (and a failure recorded) unless its
    /// worker stepped it since it was last taken.
    fn take_step(&self, index: usize) -> bool {
        let l = &self.shm.layout;
        if self.shm.byte(l.stepped + index) != 1 {
            if self.failure().is_none() {
                self.record(EnvError::Backend(format!(
                    "{}: environment {index} was stepped twice in one batch step (by a wrapper that steps more than once per agent step?)",
                    self.id
                )));
            }
            return false;
        }
        self.shm.set_byte(l.stepped + index, 0);
        true
    }
}

impl Env for GymEnv {
    fn observation_space(&self) -> ObsSpace {
        self.shared.obs_space
    }

    fn action_space(&self) -> ActionSpace {
        self.shared.action.clone()
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        let l = &self.shared.shm.layout;
        if self.shared.take_reset(self.index, seed) {
            self.shared.copy_row(self.index, l.obs, obs, "reset");
        }
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let shm = &self.shared.shm;
        let l = &shm.layout;
        let i = self.index;
        if !self.shared.take_step(i) {
            return Step::default();
        }
        if let Action::Discrete(a) = action {
            let sent = shm.u64_at(l.act + i * 8);
            if sent != a as u64 {
                self.shared.record(EnvError::Backend(format!(
                    "{}: environment {i} was stepped with action {a} but the batch sent {sent} (a wrapper changed the action?)",
                    self.shared.id
                )));
            }
        }
        let terminated = shm.byte(l.term + i) == 1;
        let truncated = shm.byte(l.trunc + i) == 1;
        let row = if terminated || truncated {
            l.fin
        } else {
            l.obs
        };
        self.shared.copy_row(i, row, obs, "step");
        Step::game(self.shared.reward(i, i), terminated, truncated)
    }

    fn chain_names(&self, names: &mut Vec<String>) {
        names.push(format!("gymnasium:{}", self.shared.id));
    }

    /// `None` unless made for rendering; a failure is kept for `VecEnv::render_rgb` (and
    /// every later request) to report.
    fn render_rgb(&self) -> Option<RgbFrame> {
        if !self.shared.render {
            return None;
        }
        self.shared
            .render(self.index)
            .map_err(|e| self.shared.record(e))
            .ok()
    }

    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), EnvError> {
        Err(EnvError::Snapshot(format!(
            "{} runs in Python worker processes, whose environment state tandem cannot save; a resumed run starts fresh episodes",
            self.shared.id
        )))
    }
}

/// A PettingZoo game of the pool, as [`ParallelEnv`]: hands out what its worker computed in
/// the latest batch step or reset, every agent's observation agent after agent (the
/// worker writes them so) and each agent's reward and flags. Its worker ends the game when
/// every agent has left or is done; an agent that leaves before (Parallel API) is absent
/// until then, as the worker writes it: zeros in its observation, reward and flags, its
/// last observation in the `final` row, and a byte in `left`.
struct ZooGame {
    shared: Arc<Shared>,
    index: usize,
}

impl ZooGame {
    /// The byte where agent `agent`'s entry of a per-agent array at `offset` is.
    fn agent_byte(&self, offset: usize, agent: usize) -> usize {
        offset + self.index * self.shared.agents.len() + agent
    }
}

impl ParallelEnv for ZooGame {
    fn name(&self) -> &'static str {
        self.shared.name
    }

    fn agents(&self) -> &[AgentSpec] {
        &self.shared.agents
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        let l = &self.shared.shm.layout;
        if self.shared.take_reset(self.index, seed) {
            self.shared
                .copy_row(self.index, l.obs, ObsBuf::F32(obs), "reset");
        }
    }

    fn step(&mut self, _actions: &[Action<'_>], obs: &mut [f32], steps: &mut [Step]) {
        let (shared, i) = (&self.shared, self.index);
        if !shared.take_step(i) {
            steps.fill(Step::default());
            return;
        }
        let (shm, l) = (&shared.shm, &shared.shm.layout);
        // A game that ended was reset by its worker, whose first observations wait for
        // VecEnv's reset (`ready`); its last ones are in the `final` row.
        let ended = shm.byte(l.ready + i) == 1;
        let first = i * steps.len();
        for (j, step) in steps.iter_mut().enumerate() {
            let (terminated, truncated) = (
                shm.byte(l.term + first + j) == 1,
                shm.byte(l.trunc + first + j) == 1,
            );
            *step = Step {
                game_over: ended,
                ..Step::game(shared.reward(i, first + j), terminated, truncated)
            };
        }
        let row = if ended { l.fin } else { l.obs };
        shared.copy_row(i, row, ObsBuf::F32(obs), "step");
    }

    fn takes_turns(&self) -> bool {
        self.shared.turns
    }

    fn acts(&self, agent: usize) -> bool {
        let (shm, l) = (&self.shared.shm, &self.shared.shm.layout);
        let left = shm.byte(self.agent_byte(l.left, agent)) == 1;
        let waits = self.shared.turns && shm.u64_at(l.turn + 8 * self.index) as usize != agent;
        !left && !waits
    }

    fn last_observation(&self, agent: usize, out: &mut [f32]) {
        let l = &self.shared.shm.layout;
        let before: usize = (self.shared.agents[..agent].iter())
            .map(|a| a.observation.len())
            .sum();
        let at = l.fin + self.index * l.obs_bytes + 4 * before;
        self.shared.read_finite(self.index, at, out, "step");
    }

    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), EnvError> {
        Err(EnvError::Snapshot(format!(
            "{} runs in Python worker processes, whose environment state tandem cannot save; a resumed run starts fresh episodes",
            self.shared.id
        )))
    }

    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        self.save_state(&mut input.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pettingzoo_team_is_the_id_without_its_index() {
        assert_eq!(team_of("adversary_0"), "adversary");
        assert_eq!(team_of("agent_12"), "agent");
        assert_eq!(team_of("red_team_3"), "red_team");
        assert_eq!(team_of("prey"), "prey");
        assert_eq!(team_of("player_one"), "player_one");
        assert_eq!(team_of("_1"), "_1");
        assert_eq!(team_of("x_"), "x_");
    }

    /// A hanging import was killed after 120.9 s with "did not answer within 10 s while
    /// starting": the message must say the time the phase really had.
    #[test]
    fn a_timeout_names_the_time_its_phase_had() {
        let step = Duration::from_secs(10);
        let starting = timeout_message("Hang-v0", "worker 0", pool::STARTING, step);
        assert!(
            starting.contains("did not answer within 120 s while starting"),
            "{starting}"
        );
        assert!(
            starting.contains("the step timeout or 120 s, whichever is longer"),
            "{starting}"
        );
        let mapping = timeout_message("Hang-v0", "worker 0", pool::MAPPING, step);
        assert!(
            mapping.contains("within 120 s while mapping shared memory"),
            "{mapping}"
        );
        let stepping = timeout_message("Hang-v0", "worker 0", "stepping", step);
        assert!(
            stepping.contains("within 10 s while stepping"),
            "{stepping}"
        );
        assert!(stepping.contains("raise the environment's step timeout if it is just slow"));
        // A step timeout past the minimum is what starting has too.
        let long = timeout_message(
            "Hang-v0",
            "worker 0",
            pool::STARTING,
            Duration::from_secs(300),
        );
        assert!(long.contains("within 300 s while starting"), "{long}");
    }
}

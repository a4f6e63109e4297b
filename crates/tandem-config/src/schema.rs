//! The schema of the experiment language as data: every section, every kind a
//! section can take (algorithm, game, network, sync policy), every setting with its
//! type, range, default and meaning, and every environment wrapper. The resolver
//! checks values against these tables, the canonical form is printed in their order,
//! and the reference tables of `docs/config.md` are generated from them. The wrappers are
//! tandem-spec's table, read in the schema's types.

use std::sync::LazyLock;

use tandem_spec::game::{ATARI_DOC, Game};
use tandem_spec::{SpreadParams, TagParams};

use crate::model::{
    Acts, Algorithm, Checkpoint, Env, Eval, Experiment, League, Learns, Log, Network, Population,
    Sync, SyncPolicy, Torso, Train,
};
use crate::setting::{COUNT, ENVS_ON_POLICY, GYM_WORKERS, SECONDS, UNIT_CLOSED};
pub(crate) use crate::setting::{Dflt, Field, Kind, Ty};

#[derive(Debug)]
pub(crate) struct Section {
    /// Empty for the settings directly inside `experiment`.
    pub name: &'static str,
    pub doc: &'static str,
    /// What the kind is called in messages and in the JSON form (`kind`, `game`).
    pub kind_key: &'static str,
    pub kinds: &'static [Kind],
    /// `None` with kinds present means the kind must be given.
    pub default_kind: Option<&'static str>,
    pub common: &'static [Field],
}

impl Section {
    pub fn kind(&self, name: &str) -> Option<&'static Kind> {
        self.kinds.iter().find(|k| k.name == name)
    }

    pub fn has_kinds(&self) -> bool {
        !self.kinds.is_empty()
    }

    /// The common settings, then those of `kind`: the order of the canonical form.
    pub fn fields<'a>(&'a self, kind: Option<&'a Kind>) -> impl Iterator<Item = &'a Field> + 'a {
        self.common
            .iter()
            .chain(kind.into_iter().flat_map(|k| k.fields.iter()))
    }

    pub fn path(&self, field: &str) -> String {
        if self.name.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.name)
        }
    }
}

/// A wrapper or a layer as the schema reads it: a node of a block with named parameters.
#[derive(Debug)]
pub(crate) struct ItemSpec {
    /// What it is, as messages say: "wrapper" or "layer".
    pub kind: &'static str,
    pub name: &'static str,
    pub doc: &'static str,
    /// A node with two parameters, for help texts: `frame-skip 4 max-pool=#false`.
    pub example: &'static str,
    /// The first parameter may also be written as the wrapper's only argument.
    pub params: Vec<Field>,
}

impl ItemSpec {
    /// The parameter a wrapper takes as all its arguments: its first, when that is a list
    /// (`keep-obs 0 2`).
    pub(crate) fn list_argument(&self) -> Option<&Field> {
        self.params
            .first()
            .filter(|f| matches!(f.ty, Ty::IntList { .. }))
    }
}

const fn f(name: &'static str, ty: Ty, default: Dflt, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        nullable: false,
        default,
        doc,
    }
}

pub(crate) static TOP: Section = Section {
    name: "",
    doc: "Settings directly inside `experiment \"name\" { ... }`.",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Experiment::FIELDS,
};

pub(crate) static ALGORITHM: Section = Section {
    name: "algorithm",
    doc: "The learning algorithm and its hyperparameters: `algorithm \"ppo\" { ... }`. Changing the kind drops the settings given for the previous kind.",
    kind_key: "kind",
    kinds: Algorithm::KINDS,
    default_kind: Some(Algorithm::TABLE[0].0),
    common: &[],
};

const fn game(name: &'static str, doc: &'static str) -> Kind {
    Kind {
        name,
        doc,
        fields: &[],
    }
}

/// The games written out in the catalogue, in its order, with tandem-spec's docs of them.
const NATIVE_KINDS: [Kind; tandem_spec::game::NATIVE.len()] = {
    let rows = tandem_spec::game::NATIVE;
    let mut out = [game("", ""); tandem_spec::game::NATIVE.len()];
    let mut i = 0;
    while i < rows.len() {
        out[i].name = rows[i].1.name;
        out[i].doc = rows[i].1.doc;
        out[i].fields = game_fields(&rows[i].0);
        i += 1;
    }
    out
};

/// The settings a game of the catalogue takes (only the multi-agent games take any).
const fn game_fields(game: &Game) -> &'static [Field] {
    match game {
        Game::MpeSimpleSpread(_) => SPREAD_FIELDS,
        Game::MpeSimpleTag(_) => TAG_FIELDS,
        _ => &[],
    }
}

const SPREAD: SpreadParams = SpreadParams::MPE2;

const SPREAD_FIELDS: &[Field] = &[
    f(
        "agents",
        Ty::Int { min: 1, max: 64 },
        Dflt::Int(SPREAD.agents as i64),
        "Agents, and as many landmarks (mpe2's `N`).",
    ),
    f(
        "local-ratio",
        UNIT_CLOSED,
        Dflt::Float(SPREAD.local_ratio),
        "The weight of an agent's own reward (-1 per agent it overlaps) against the team's (minus each landmark's distance to its nearest agent): `reward = team * (1 - local-ratio) + own * local-ratio`.",
    ),
    f(
        "max-cycles",
        Ty::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        Dflt::Int(SPREAD.max_cycles as i64),
        "Steps of an episode; every agent is truncated at the last.",
    ),
    f(
        "continuous-actions",
        Ty::Bool,
        Dflt::Bool(SPREAD.continuous_actions),
        "Five pushes in [0, 1] per agent (the +x push less the -x one moves it along x, likewise y) instead of five moves.",
    ),
];

const TAG: TagParams = TagParams::MPE2;

const TAG_FIELDS: &[Field] = &[
    f(
        "num-good",
        Ty::Int { min: 1, max: 64 },
        Dflt::Int(TAG.num_good as i64),
        "Prey (`agent_*`), each a row of the batch (mpe2's `num_good`).",
    ),
    f(
        "num-adversaries",
        Ty::Int { min: 1, max: 64 },
        Dflt::Int(TAG.num_adversaries as i64),
        "Predators (`adversary_*`), each a row of the batch, before the prey (mpe2's `num_adversaries`).",
    ),
    f(
        "num-obstacles",
        Ty::Int { min: 0, max: 64 },
        Dflt::Int(TAG.num_obstacles as i64),
        "Obstacles: discs that neither move nor let agents through; every agent sees where they are (mpe2's `num_obstacles`).",
    ),
    f(
        "max-cycles",
        Ty::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        Dflt::Int(TAG.max_cycles as i64),
        "Steps of an episode; every agent is truncated at the last.",
    ),
    f(
        "continuous-actions",
        Ty::Bool,
        Dflt::Bool(TAG.continuous_actions),
        "Five pushes in [0, 1] per agent (the +x push less the -x one moves it along x, likewise y) instead of five moves.",
    ),
];

const ATARI_KINDS: [Kind; tandem_spec::game::ATARI_ROWS.len()] = {
    let rows = tandem_spec::game::ATARI_ROWS;
    let mut out = [game("", ATARI_DOC); tandem_spec::game::ATARI_ROWS.len()];
    let mut i = 0;
    while i < rows.len() {
        out[i].name = rows[i].name;
        i += 1;
    }
    out
};

const GYMNASIUM_KIND: Kind = Kind {
    name: "gymnasium",
    doc: "Any gymnasium environment, stepped by Python worker processes (the gymnasium bridge): `env \"gymnasium\" { id \"CartPole-v1\" }`. Its observation and action spaces are known once the environment is built, so the checks that need them are made when the run starts. Wrappers that step the game other than once per agent step with the agent's action, or that need lives or FIRE (`noop-reset`, `fire-reset`, `frame-skip`, `episodic-life`, `sticky-actions`), are refused: use gymnasium's own wrappers inside the environment instead.",
    fields: &[
        f(
            "id",
            Ty::Text,
            Dflt::Required,
            "The id passed to `gymnasium.make`, e.g. `\"CartPole-v1\"` or `\"ALE/Pong-v5\"`.",
        ),
        PYTHON_FIELD,
        f(
            "import",
            Ty::Modules,
            Dflt::NoStrings,
            "Modules imported before `gymnasium.make`, in order (those that register environments, e.g. `import \"ale_py\"`).",
        ),
        f(
            "make-args",
            Ty::Args,
            Dflt::NoArgs,
            "Keyword arguments of `gymnasium.make`, one `name value` per entry: `make-args { continuous #true; gravity -9.8 }`. Values are integers, numbers, booleans, strings or `#null` (Python's None); names are Python identifiers.",
        ),
        WORKERS_FIELD,
        STEP_TIMEOUT_FIELD,
        ACTION_MASK_FIELD,
        f(
            "info-keys",
            Ty::InfoKeys,
            Dflt::NoStrings,
            "Keys of the environment's `info` whose values are logged by name, as Stable-Baselines3's `info_keywords` and sample-factory's `episode_extra_stats` are: `info-keys \"is_success\" \"distance\"`. Each episode gives the value in the `info` of the step that ends it (Stable-Baselines3's Monitor reads `is_success` there), and the episodes that end are averaged: TensorBoard's `episode/info/<key>` over those of each update, `episode/recent_info/<key>` over the run's last 100 (summary.json's `recent_info`). A value is a number or a boolean, finite; the step that ends an episode must hold every key (other steps need not: many environments put `is_success` only there), else the run stops with an error naming the key. docs/environments.md says more.",
        ),
    ],
};

const PYTHON_FIELD: Field = f(
    "python",
    Ty::Text,
    Dflt::Str("python3"),
    "The Python interpreter the workers run on: a path (a relative one from the folder of the file that names it; in `--set` or standard input, from the directory tandem runs in), or a name without `/` looked up on PATH. It must be able to import gymnasium.",
);

const WORKERS_FIELD: Field = f(
    "workers",
    COUNT,
    Dflt::Workers,
    "Python worker processes per rank, each stepping its share of the rank's environments; at most the rank's environments.",
);

const STEP_TIMEOUT_FIELD: Field = f(
    "step-timeout",
    SECONDS,
    Dflt::Float(60.0),
    "Seconds a worker may take for one step or reset before the run stops with an error.",
);

const ACTION_MASK_FIELD: Field = f(
    "action-mask",
    Ty::Choice(tandem_spec::ActionMask::NAMES),
    Dflt::Str("none"),
    "Where the environment says which actions are valid: `\"info\"` (`info[\"action_mask\"]` of every reset and step, gymnasium's convention), `\"observation\"` (the `action_mask` entry of a Dict observation, PettingZoo's), or `\"none\"`. The mask (0/1, one entry per action, or per component's action of a MultiDiscrete) follows the observation as its last entries, and ppo and a2c give invalid actions no probability when acting and in the update, as MaskablePPO does. Needs Discrete or MultiDiscrete actions and a vector observation; `normalize-obs` and `keep-obs` would change the mask, so they are refused with it.",
);

const PETTINGZOO_KIND: Kind = Kind {
    name: "pettingzoo",
    doc: "A PettingZoo environment of several agents, through its Parallel API (or its AEC API, whose agents take turns: `api \"aec\"`), stepped by the gymnasium bridge's Python worker processes: `env \"pettingzoo\" { module \"mpe2.simple_spread_v3\"; agents 3 }`. Every agent is a row of the batch, a game's agents consecutive in `possible_agents` order; agents whose observations are vectors of different lengths share rows as wide as the widest. Each agent's team is its id without the trailing `_<n>` (`adversary_0` plays for `adversary`). The game ends when every agent has left or is terminated or truncated; an agent that leaves before the others (its own flags set) keeps its row, absent and weighing nothing in the loss, until the game ends. No wrapper fits a game of several agents. docs/environments.md says more.",
    fields: &[
        f(
            "module",
            Ty::Text,
            Dflt::Required,
            "The Python module that holds the environment, e.g. `\"mpe2.simple_spread_v3\"` or a module of your own (the worker's working directory is on `sys.path`).",
        ),
        f(
            "function",
            Ty::Text,
            Dflt::Str("parallel_env"),
            "The module's function that builds the environment, called with `make-args` as keyword arguments; PettingZoo's environments name it `parallel_env`.",
        ),
        f(
            "agents",
            COUNT,
            Dflt::Required,
            "How many agents each game has (`len(possible_agents)`). The config counts every agent as a row of the batch (rows per rank, batch and minibatch sizes, the memory estimate) before anything is built, so it is said here; the run checks it against the built environment at its start and stops with the environment's count if they differ.",
        ),
        PYTHON_FIELD,
        f(
            "import",
            Ty::Modules,
            Dflt::NoStrings,
            "Modules imported before the environment's module, in order.",
        ),
        f(
            "make-args",
            Ty::Args,
            Dflt::NoArgs,
            "Keyword arguments of the function, one `name value` per entry: `make-args { N 3; max_cycles 25 }`. Values are integers, numbers, booleans, strings or `#null` (Python's None); names are Python identifiers.",
        ),
        f(
            "api",
            Ty::Choice(tandem_spec::ZooApi::NAMES),
            Dflt::Str("parallel"),
            "Which of PettingZoo's APIs `function` builds: `\"parallel\"` (every agent observes and acts on every step: `parallel_env`) or `\"aec\"` (agents take turns, as in the board games of `pettingzoo.classic`: `env`, with `function \"env\"`). In a turn-based game every agent still has a row on every step, and only the row of the agent whose turn it is (`agent_selection`) acts: the other rows' actions are not played, and the learner learns from each agent's own turns, its reward summing what it got until its next turn. Steps count every row, so a game of 20 moves between two agents is 40 steps. Needs ppo or a2c with synchronous sampling and no recurrent core. One policy playing every agent learns from the turns alone; several policies (`train.policies`, a policy a side) each learn from all their agents' rows, those that waited weighing nothing in the loss; `action-mask \"observation\"` gives the mover only its legal moves (an agent waiting for its turn is shown every move as legal), and a move the mask forbids stops the run.",
        ),
        WORKERS_FIELD,
        STEP_TIMEOUT_FIELD,
        ACTION_MASK_FIELD,
    ],
};

/// Copies `parts` one after the other into one array (statics cannot be concatenated
/// otherwise).
const fn concat<const N: usize>(parts: &[&[Kind]]) -> [Kind; N] {
    let mut out = [game("", ""); N];
    let (mut p, mut k) = (0, 0);
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[k] = parts[p][i];
            i += 1;
            k += 1;
        }
        p += 1;
    }
    assert!(k == N, "the env kinds do not fill their array");
    out
}

const ENV_KIND_COUNT: usize = NATIVE_KINDS.len() + ATARI_KINDS.len() + 2;

/// Every game `env` accepts: the catalogue's natives, every Atari ROM, gymnasium, pettingzoo.
static ENV_KINDS: [Kind; ENV_KIND_COUNT] = concat(&[
    &NATIVE_KINDS,
    &ATARI_KINDS,
    &[GYMNASIUM_KIND, PETTINGZOO_KIND],
]);

pub(crate) static ENV: Section = Section {
    name: "env",
    doc: "The game, how many copies run, and the ordered wrappers applied to each: `env \"cartpole\" { ... }`. The game is required.",
    kind_key: "game",
    kinds: &ENV_KINDS,
    default_kind: None,
    common: Env::FIELDS,
};

pub(crate) static NETWORK: Section = Section {
    name: "network",
    doc: "The policy/value network: `network \"nature-cnn\" { ... }`.",
    kind_key: "kind",
    kinds: Torso::KINDS,
    default_kind: Some("mlp"),
    common: Network::FIELDS,
};

pub(crate) static SYNC: Section = Section {
    name: "sync",
    doc: "How ranks stay in step: `sync \"allreduce\" { ... }`.",
    kind_key: "policy",
    kinds: SyncPolicy::KINDS,
    default_kind: Some("allreduce"),
    common: Sync::FIELDS,
};

pub(crate) static TRAIN: Section = Section {
    name: "train",
    doc: "How long and in what steps to train.",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Train::FIELDS,
};

pub(crate) static LOG: Section = Section {
    name: "log",
    doc: "What rank 0 reports.",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Log::FIELDS,
};

pub(crate) static CHECKPOINT: Section = Section {
    name: "checkpoint",
    doc: "Checkpoints written by rank 0.",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Checkpoint::FIELDS,
};

pub(crate) static EVAL: Section = Section {
    name: "eval",
    doc: "Evaluation during training, on environments of its own (off unless `every` is set).",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Eval::FIELDS,
};

pub(crate) static POPULATION: Section = Section {
    name: "population",
    doc: "Several members trained at once, each by its own ranks, with population-based training between them (off unless `members` is set).",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: Population::FIELDS,
};

pub(crate) static LEAGUE: Section = Section {
    name: "league",
    doc: "Self-play against the learner's past selves, drawn from a league of its snapshots (off unless `every` is set).",
    kind_key: "",
    kinds: &[],
    default_kind: None,
    common: League::FIELDS,
};

/// Every section in canonical order; the first holds the top-level settings.
pub(crate) static SECTIONS: [&Section; 11] = [
    &TOP,
    &ALGORITHM,
    &ENV,
    &NETWORK,
    &SYNC,
    &TRAIN,
    &LOG,
    &CHECKPOINT,
    &EVAL,
    &POPULATION,
    &LEAGUE,
];

pub(crate) fn section(name: &str) -> Option<&'static Section> {
    SECTIONS.iter().skip(1).find(|s| s.name == name).copied()
}

/// Whether setting `name` of section number `section` (of any kind) is written as a block of
/// child nodes (the wrapper list, keyword arguments) rather than as values.
pub(crate) fn takes_a_block(section: usize, name: &str) -> bool {
    let section = SECTIONS[section];
    section
        .common
        .iter()
        .chain(section.kinds.iter().flat_map(|k| k.fields.iter()))
        .any(|f| {
            f.name == name
                && matches!(
                    f.ty,
                    Ty::Wrappers | Ty::Layers | Ty::Args | Ty::Policies | Ty::Explore
                )
        })
}

/// The wrappers as the schema reads them: tandem-spec's table (`tandem_spec::wrapper::WRAPPERS`,
/// where each is declared once) in the schema's types.
pub(crate) static WRAPPERS: LazyLock<Vec<ItemSpec>> = LazyLock::new(|| {
    tandem_spec::wrapper::WRAPPERS
        .iter()
        .map(|w| ItemSpec {
            kind: "wrapper",
            name: w.name,
            doc: w.doc,
            example: "frame-skip 4 max-pool=#false",
            params: w.params.iter().map(wrapper_field).collect(),
        })
        .collect()
});

/// A wrapper parameter as a setting of the schema.
fn wrapper_field(p: &tandem_spec::wrapper::Param) -> Field {
    use tandem_spec::wrapper::{Range, Value};
    let ty = match p.range {
        Range::Int { min, max } => Ty::Int { min, max },
        Range::Float {
            min,
            min_open,
            max,
            max_open,
        } => Ty::Float {
            min,
            min_open,
            max,
            max_open,
        },
        Range::Bool => Ty::Bool,
        Range::Indices { min, max } => Ty::IntList { min, max },
    };
    let default = match p.default {
        None => Dflt::Required,
        Some(Value::Int(i)) => Dflt::Int(i),
        Some(Value::Float(x)) => Dflt::Float(x),
        Some(Value::Bool(b)) => Dflt::Bool(b),
        Some(Value::Indices(_)) => unreachable!("no wrapper has default indices"),
    };
    f(p.name, ty, default, p.doc)
}

pub(crate) fn wrapper(name: &str) -> Option<&'static ItemSpec> {
    WRAPPERS.iter().find(|w| w.name == name)
}

/// The layers of a declared network as the schema reads them: tandem-spec's table
/// (`tandem_spec::layer::LAYERS`, where each is declared once) in the schema's types.
pub(crate) static LAYERS: LazyLock<Vec<ItemSpec>> = LazyLock::new(|| {
    tandem_spec::layer::LAYERS
        .iter()
        .map(|l| ItemSpec {
            kind: "layer",
            name: l.name,
            doc: l.doc,
            example: tandem_spec::layer::written::SHORT,
            params: l.params.iter().map(wrapper_field).collect(),
        })
        .collect()
});

pub(crate) fn layer(name: &str) -> Option<&'static ItemSpec> {
    LAYERS.iter().find(|l| l.name == name)
}

fn float_text(x: f64) -> String {
    if x == f64::INFINITY {
        "∞".into()
    } else {
        format!("{x}")
    }
}

/// Human description of a type and range, used in messages and in the docs.
pub(crate) fn describe(ty: &Ty) -> String {
    match *ty {
        Ty::Int { min, max } if max == i64::MAX => format!("integer >= {min}"),
        Ty::Int { min, max } => format!("integer in {min}..={max}"),
        Ty::Float {
            min, min_open, max, ..
        } if max == f64::INFINITY => {
            format!(
                "number {} {}",
                if min_open { ">" } else { ">=" },
                float_text(min)
            )
        }
        Ty::Float {
            min,
            min_open,
            max,
            max_open,
        } => format!(
            "number in {}{}, {}{}",
            if min_open { "(" } else { "[" },
            float_text(min),
            float_text(max),
            if max_open { ")" } else { "]" }
        ),
        Ty::Bool => "boolean (`#true` or `#false`)".into(),
        Ty::Choice(choices) => {
            let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
            format!("one of {}", quoted.join(", "))
        }
        Ty::IntList { min, max } => format!("one or more integers in {min}..={max}"),
        Ty::Name | Ty::Text => "string".into(),
        Ty::Modules => "zero or more module names (strings)".into(),
        Ty::InfoKeys => "zero or more distinct strings".into(),
        Ty::Args => "block of `name value` keyword arguments".into(),
        Ty::Policies => "block of `name \"agent pattern\"` policies".into(),
        Ty::Explore => {
            "block of `algorithm.<setting> factor= min= max=` or `algorithm.<setting> VALUES...`"
                .into()
        }
        Ty::Devices => "device strings, or count= and kind=".into(),
        Ty::Threads => "integer >= 1 or \"auto\"".into(),
        Ty::OrWord(word, inner) => format!("\"{word}\" or {}", describe(inner)),
        Ty::Wrappers => "block of wrappers".into(),
        Ty::Layers => "block of layers".into(),
    }
}

/// How a default is written in the docs: exactly as in the canonical form.
pub(crate) fn default_text(d: &Dflt) -> String {
    match *d {
        Dflt::Required => "required".into(),
        Dflt::Null => "`#null`".into(),
        Dflt::Int(i) => format!("`{i}`"),
        Dflt::Float(x) => format!("`{x:?}`"),
        Dflt::Bool(b) => format!("`#{b}`"),
        Dflt::Str(s) => format!("`\"{s}\"`"),
        Dflt::IntList(l) => format!(
            "`{}`",
            l.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Dflt::Devices => "`\"cpu\"`".into(),
        Dflt::Auto => "`\"auto\"`".into(),
        Dflt::NoWrappers | Dflt::NoArgs => "empty".into(),
        Dflt::NoStrings => "none".into(),
        Dflt::ActorCritic => format!(
            "`\"separate\"` for {} on an mlp (or layers without a convolution) without a core, else `\"shared\"`",
            Algorithm::names_where(|f| f.learns == Learns::OnPolicy, "and")
        ),
        Dflt::Envs => format!(
            "`{ENVS_ON_POLICY}`; for {} one per device",
            Algorithm::names_where(|f| f.learns == Learns::OffPolicy, "and")
        ),
        Dflt::Workers => format!("`{GYM_WORKERS}`, or the rank's environments where fewer"),
        Dflt::Learner { usual, box_actor } => format!(
            "{}; for {} {}",
            default_text(usual),
            Algorithm::names_where(|f| f.acts == Acts::SquashedBox, "and"),
            default_text(box_actor)
        ),
    }
}

/// `env.envs`'s default: one environment per rank for the off-policy learners (dqn, sac, td3),
/// whose peers train on one, [`ENVS_ON_POLICY`] for the others.
pub(crate) fn envs_default(algorithm: &str, ranks: usize) -> usize {
    let off_policy = Algorithm::facts_of(algorithm).is_some_and(|f| f.learns == Learns::OffPolicy);
    if off_policy {
        ranks.max(1)
    } else {
        ENVS_ON_POLICY
    }
}

/// `network.actor-critic`'s default, from the learner and the network: separate torsos for
/// an actor-critic MLP, or declared layers without a convolution (`reads_vectors`), without
/// a recurrent core, one shared torso otherwise (image torsos,
/// recurrent cores; dqn, sac and td3 do not read it).
pub(crate) fn actor_critic_default(
    algorithm: &str,
    reads_vectors: bool,
    core: &str,
) -> &'static str {
    let actor_critic = Algorithm::facts_of(algorithm).is_some_and(|f| f.learns == Learns::OnPolicy);
    if actor_critic && reads_vectors && core == "none" {
        "separate"
    } else {
        "shared"
    }
}

fn field_rows(out: &mut String, fields: &[Field]) {
    out.push_str("| setting | type | default | meaning |\n|---|---|---|---|\n");
    for field in fields {
        let ty = describe(&field.ty) + if field.nullable { " or `#null`" } else { "" };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            field.name,
            ty,
            default_text(&field.default),
            field.doc
        ));
    }
}

/// One row per kind; the Atari games share one row that lists their names (a hundred rows
/// of one text would bury the others).
fn kind_rows(out: &mut String, kinds: &[Kind]) {
    let mut atari: Vec<String> = Vec::new();
    for kind in kinds {
        if kind.doc == ATARI_DOC {
            if atari.is_empty() {
                out.push_str("| `\"atari-<rom>\"` | ATARI_ROWS |\n");
            }
            atari.push(format!("`{}`", kind.name));
        } else {
            out.push_str(&format!("| `\"{}\"` | {} |\n", kind.name, kind.doc));
        }
    }
    let games = format!(
        "{ATARI_DOC} The {} games: {}.",
        atari.len(),
        atari.join(" ")
    );
    *out = out.replace("ATARI_ROWS", &games);
}

/// The reference part of `docs/config.md`, generated from the tables above so the
/// page and the schema cannot disagree (a test compares them).
pub fn reference_markdown() -> String {
    let mut out = String::new();
    for section in SECTIONS {
        let title = if section.name.is_empty() {
            "experiment".to_string()
        } else {
            section.name.to_string()
        };
        out.push_str(&format!("### `{title}`\n\n{}\n\n", section.doc));
        if section.has_kinds() {
            let default = match section.default_kind {
                Some(d) => format!("default `\"{d}\"`"),
                None => "required".to_string(),
            };
            out.push_str(&format!("The {} ({default}):\n\n", section.kind_key));
            out.push_str(&format!("| {} | meaning |\n|---|---|\n", section.kind_key));
            kind_rows(&mut out, section.kinds);
            out.push('\n');
        }
        if !section.common.is_empty() {
            if section.has_kinds() {
                out.push_str(&format!("Settings of every {}:\n\n", section.kind_key));
            }
            field_rows(&mut out, section.common);
            out.push('\n');
        }
        for kind in section.kinds.iter().filter(|k| !k.fields.is_empty()) {
            out.push_str(&format!(
                "#### `{} \"{}\"`\n\n",
                if section.name.is_empty() {
                    ""
                } else {
                    section.name
                },
                kind.name
            ));
            field_rows(&mut out, kind.fields);
            out.push('\n');
        }
    }
    let (short, canonical) = (
        tandem_spec::wrapper::written::SHORT,
        tandem_spec::wrapper::written::CANONICAL,
    );
    out.push_str(&format!("### Wrappers\n\nInside `env {{ wrappers {{ ... }} }}`, one node per wrapper, applied in order. The first parameter may be written as the only argument (`{short}`); the canonical form names every parameter (`{canonical}`).\n\n"));
    out.push_str("| wrapper | meaning |\n|---|---|\n");
    for w in WRAPPERS.iter() {
        out.push_str(&format!("| `{}` | {} |\n", w.name, w.doc));
    }
    out.push('\n');
    for w in WRAPPERS.iter().filter(|w| !w.params.is_empty()) {
        out.push_str(&format!("#### wrapper `{}`\n\n", w.name));
        field_rows(&mut out, &w.params);
        out.push('\n');
    }
    layers_reference(&mut out);
    out
}

/// The built-in torsos as the layers they are (`Torso::as_layers`), on raw pixels where they
/// scale them.
fn presets_reference(out: &mut String) {
    use crate::model::{Activation, Torso};
    out.push_str("The built-in torsos are presets of this language: a list that spells one out exactly (for the observation at hand: the Nature and IMPALA torsos begin with `scale-pixels` on raw 0..255 pixels and not otherwise) builds as that torso does, with its variables' names, draws and fast paths, and trains the same run bit for bit (`tests/layer_presets.rs`); any other list builds as declared, through autograd. On raw pixels:\n\n| preset | its layers |\n|---|---|\n");
    let presets = [
        (
            "`mlp` with `hidden 64 64` (tanh)",
            Torso::Mlp {
                hidden: vec![64, 64],
                activation: Activation::Tanh,
            },
        ),
        (
            "`nature-cnn` with `features 512`",
            Torso::NatureCnn { features: 512 },
        ),
        (
            "`minatar-cnn` with `channels 16`, `features 128`",
            Torso::MinatarCnn {
                channels: 16,
                features: 128,
            },
        ),
        (
            "`impala-cnn` with `channels 16 32`, `features 256`",
            Torso::ImpalaCnn {
                channels: vec![16, 32],
                features: 256,
            },
        ),
    ];
    for (label, torso) in presets {
        let list = torso.as_layers(true).unwrap_or_default();
        out.push_str(&format!("| {label} | `{}` |\n", written_list(&list)));
    }
    out.push('\n');
}

/// `list` as one line, `;` between layers, every parameter named, a block in braces.
fn written_list(list: &[tandem_spec::Layer]) -> String {
    list.iter()
        .map(|layer| {
            let mut text = layer.written();
            if !layer.body().is_empty() {
                text.push_str(&format!(" {{ {} }}", written_list(layer.body())));
            }
            text
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `### Layers` section: what `network "layers"` may hold.
fn layers_reference(out: &mut String) {
    use tandem_spec::layer::{MAX_DEPTH, MAX_LAYERS, written};
    out.push_str(&format!(
        "### Layers\n\nInside `network \"layers\" {{ layers {{ ... }} }}`, one node per layer, applied in order from the observation (as the network receives it: `[len]` for vectors, `[C, H, W]` for pictures, one row for a picture beside a vector) to the heads, which read the last layer's output flattened (`{}`). The first parameter may be written as the only argument (`{}`); the canonical form names every parameter (`{}`); JSON writes a list of objects, `{}`, a residual's layers under `\"layers\"` (`{}`). At most {MAX_LAYERS} layers, counting those inside residual blocks, nested at most {MAX_DEPTH} deep. Linear and convolution weights start as `init` says for torso layers (`torso-gain`); variables are named by each layer's place, `torso.0.weight` (a residual's layers below its own, `torso.2.1.weight`; `actor_torso.*` and `critic_torso.*` for separate torsos). Shapes are checked against the observation where the config knows it, else when the run builds the network; `tandem validate --deep` lists them.\n\n",
        written::LIST,
        written::SHORT,
        written::CANONICAL,
        written::JSON,
        written::RESIDUAL_JSON
    ));
    presets_reference(out);
    out.push_str("| layer | meaning |\n|---|---|\n");
    for l in LAYERS.iter() {
        out.push_str(&format!("| `{}` | {} |\n", l.name, l.doc));
    }
    out.push('\n');
    for l in LAYERS.iter().filter(|l| !l.params.is_empty()) {
        out.push_str(&format!("#### layer `{}`\n\n", l.name));
        field_rows(out, &l.params);
        out.push('\n');
    }
}

/// One setting of the schema, as tools and tests outside this crate see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingInfo {
    /// Where it is written: `seed`, `algorithm.lr`, `env.wrappers`; for a wrapper
    /// parameter, the wrapper and the parameter (`frame-skip.n`); for a section's kind,
    /// the section's name (`algorithm`); for a wrapper itself, its name (`frame-skip`).
    pub path: String,
    /// The section (`""` for the settings directly inside `experiment`, `"wrappers"`
    /// for wrappers and their parameters).
    pub section: &'static str,
    /// The kind the setting belongs to (`Some("ppo")` for `algorithm.lr` of ppo),
    /// `None` for settings of every kind, kinds themselves and wrappers.
    pub kind: Option<&'static str>,
    /// What it is: a setting, a section's kind (one row per kind value), a wrapper,
    /// or a wrapper's parameter.
    pub role: SettingRole,
    /// The type and range in words, as in the docs.
    pub ty: String,
    /// The default as the canonical form writes it (`required`, `empty` for no
    /// wrappers, `-` for a wrapper or a kind value).
    pub default: String,
}

/// What a [`SettingInfo`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingRole {
    Setting,
    Kind,
    Wrapper,
    WrapperParameter,
    /// A layer of `network "layers"`, and one of a layer's parameters (`conv.kernel`).
    Layer,
    LayerParameter,
}

/// Every setting of the schema, every kind of every section, every wrapper and every layer
/// with its parameters, in canonical order: what a test needs to cover each of them.
pub fn schema_settings() -> Vec<SettingInfo> {
    let mut out = Vec::new();
    for section in SECTIONS {
        for kind in section.kinds {
            out.push(SettingInfo {
                path: section.name.to_string(),
                section: section.name,
                kind: Some(kind.name),
                role: SettingRole::Kind,
                ty: format!("{} \"{}\"", section.kind_key, kind.name),
                default: "-".into(),
            });
        }
        let fields = section.common.iter().map(|f| (None, f)).chain(
            section
                .kinds
                .iter()
                .flat_map(|k| k.fields.iter().map(move |f| (Some(k.name), f))),
        );
        for (kind, field) in fields {
            out.push(setting_info(
                section.path(field.name),
                section.name,
                kind,
                SettingRole::Setting,
                field,
            ));
        }
    }
    items(
        &mut out,
        &WRAPPERS,
        "wrappers",
        [SettingRole::Wrapper, SettingRole::WrapperParameter],
    );
    items(
        &mut out,
        &LAYERS,
        "layers",
        [SettingRole::Layer, SettingRole::LayerParameter],
    );
    out
}

/// Each wrapper or layer of `list` and its parameters, in `section`, with their `roles`.
fn items(
    out: &mut Vec<SettingInfo>,
    list: &[ItemSpec],
    section: &'static str,
    roles: [SettingRole; 2],
) {
    for item in list {
        out.push(SettingInfo {
            path: item.name.to_string(),
            section,
            kind: None,
            role: roles[0],
            ty: item.kind.into(),
            default: "-".into(),
        });
        for p in &item.params {
            let path = format!("{}.{}", item.name, p.name);
            out.push(setting_info(path, section, None, roles[1], p));
        }
    }
}

fn setting_info(
    path: String,
    section: &'static str,
    kind: Option<&'static str>,
    role: SettingRole,
    field: &Field,
) -> SettingInfo {
    SettingInfo {
        path,
        section,
        kind,
        role,
        ty: describe(&field.ty) + if field.nullable { " or `#null`" } else { "" },
        default: default_text(&field.default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_env_kind_is_a_game() {
        let bridge = ["gymnasium", "pettingzoo"];
        for kind in ENV.kinds.iter().filter(|k| !bridge.contains(&k.name)) {
            assert!(
                crate::model::Game::from_name(kind.name).is_some(),
                "{} has no game info",
                kind.name
            );
        }
        assert_eq!(ENV.kinds.len(), crate::games().count() + bridge.len());
        for info in crate::games() {
            assert!(
                ENV.kind(info.name).is_some(),
                "{} is no env kind",
                info.name
            );
        }
    }

    #[test]
    fn defaults_satisfy_their_own_types() {
        let all = SECTIONS
            .iter()
            .flat_map(|s| {
                s.common
                    .iter()
                    .chain(s.kinds.iter().flat_map(|k| k.fields.iter()))
            })
            .chain(WRAPPERS.iter().flat_map(|w| w.params.iter()));
        for field in all {
            assert!(
                fits(field, &field.default),
                "default of `{}` does not fit its type",
                field.name
            );
        }
    }

    fn fits(field: &Field, default: &Dflt) -> bool {
        match (field.ty, *default) {
            (_, Dflt::Learner { usual, box_actor }) => fits(field, usual) && fits(field, box_actor),
            (_, Dflt::Required) => true,
            (_, Dflt::Null) => field.nullable,
            (Ty::Int { min, max }, Dflt::Int(i)) => (min..=max).contains(&i),
            (
                Ty::Float {
                    min,
                    min_open,
                    max,
                    max_open,
                },
                Dflt::Float(x),
            ) => {
                (if min_open { x > min } else { x >= min })
                    && (if max_open { x < max } else { x <= max })
            }
            (Ty::Bool, Dflt::Bool(_)) => true,
            (Ty::Choice(c), Dflt::Str(s)) => c.contains(&s),
            (Ty::Int { min, max }, Dflt::Envs) => (min..=max).contains(&(ENVS_ON_POLICY as i64)),
            (Ty::Int { min, max }, Dflt::Workers) => (min..=max).contains(&(GYM_WORKERS as i64)),
            (Ty::Choice(c), Dflt::ActorCritic) => c.contains(&"shared") && c.contains(&"separate"),
            (Ty::IntList { min, max }, Dflt::IntList(l)) => {
                l.iter().all(|i| (min..=max).contains(i))
            }
            (Ty::Text, Dflt::Str(s)) => !s.is_empty(),
            (Ty::OrWord(word, _), Dflt::Str(s)) => s == word,
            (Ty::OrWord(_, Ty::Bool), Dflt::Bool(_)) => true,
            (Ty::Devices, Dflt::Devices)
            | (Ty::Threads, Dflt::Auto)
            | (Ty::Wrappers, Dflt::NoWrappers)
            | (Ty::Modules | Ty::InfoKeys, Dflt::NoStrings)
            | (Ty::Args | Ty::Policies | Ty::Explore, Dflt::NoArgs) => true,
            _ => false,
        }
    }
}

//! The games tandem names ([`Game`]) and their catalogue ([`GameInfo`]): the classic-control
//! and MinAtar games written out here, and every Atari ROM that tandem-ale's ALE loads, from
//! the table generated from ALE (`game/atari.rs`). For each game it holds what the wrappers'
//! fit rule and the resolver check against (observation, action space, lives, FIRE); the
//! config names games by it and the env crate builds them from it.

// Generated in its own layout (one row per line); rustfmt would reflow it and the check
// against ALE compares the file byte for byte.
#[rustfmt::skip]
mod atari;

use std::borrow::Cow;

use atari::ATARI;

use crate::fit::{Family, GameFacts};
use crate::space::{ActionSpace, Dtype, Layout, ObsSpace};

/// The game of an experiment: one of the catalogue (see [`games`]), or a
/// gymnasium environment with the parameters of its bridge.
#[derive(Debug, Clone, PartialEq)]
pub enum Game {
    Cartpole,
    Acrobot,
    MountainCar,
    MountainCarContinuous,
    Pendulum,
    MinatarBreakout,
    MinatarAsterix,
    MinatarFreeway,
    MinatarSpaceInvaders,
    MinatarSeaquest,
    /// MPE's simple_spread (mpe2 1.1.1): several agents in one game, one row of the batch each.
    MpeSimpleSpread(SpreadParams),
    /// MPE's simple_tag (mpe2 1.1.1): predators chase prey, one row of the batch per agent.
    MpeSimpleTag(TagParams),
    /// An Atari 2600 ROM; `rom` is ALE's name of it (`space_invaders` for
    /// `atari-space-invaders`).
    Atari {
        rom: &'static str,
    },
    Gymnasium(Gymnasium),
    /// A PettingZoo environment of several agents (its Parallel API) run by the bridge's
    /// Python worker processes, one row of the batch per agent.
    PettingZoo(PettingZoo),
}

impl Game {
    /// What the resolver knows of the game; `None` for gymnasium, whose spaces are known once
    /// the environment is built.
    pub fn info(&self) -> Option<GameInfo> {
        info(self)
    }

    /// The name in `env "<name>"`.
    pub fn name(&self) -> &'static str {
        match self {
            Game::Gymnasium(_) => "gymnasium",
            Game::PettingZoo(_) => "pettingzoo",
            game => game.info().map_or("", |i| i.name),
        }
    }

    /// What the wrappers' fit rule knows of the game (of gymnasium: the family only).
    pub fn facts(&self) -> GameFacts {
        match (self.info(), self) {
            (Some(info), _) => info.facts(),
            // Played by several agents: no wrapper fits it, as for MPE's.
            (None, Game::PettingZoo(_)) => GameFacts {
                name: "a pettingzoo environment".into(),
                family: Some(Family::Mpe),
                ..GameFacts::gymnasium()
            },
            (None, _) => GameFacts::gymnasium(),
        }
    }

    /// A game of several agents at once (MPE's, a PettingZoo environment's): built as one game
    /// and batched with a row per agent; no wrapper fits it.
    pub fn is_multi_agent(&self) -> bool {
        matches!(self, Game::PettingZoo(_)) || self.info().is_some_and(|i| i.family == Family::Mpe)
    }

    /// The agents of each game: a multi-agent game's (a PettingZoo environment's as its
    /// `agents` setting says, checked when the run builds it), 1 for any other.
    pub fn agents(&self) -> usize {
        match self {
            Game::PettingZoo(p) => p.agents,
            game => game.info().map_or(1, |info| info.agents),
        }
    }

    /// Where the environment gives its action mask (a bridge environment's `action-mask`;
    /// none for the catalogue's games).
    pub fn action_mask(&self) -> ActionMask {
        match self {
            Game::Gymnasium(g) => g.action_mask,
            Game::PettingZoo(p) => p.action_mask,
            _ => ActionMask::None,
        }
    }

    /// A game whose agents take turns (a PettingZoo AEC environment): one agent acts on each
    /// step, and only its row's step is a transition of its own.
    pub fn takes_turns(&self) -> bool {
        matches!(self, Game::PettingZoo(p) if p.api == ZooApi::Aec)
    }

    /// The catalogue game called `name`; `None` for unknown names and for `gymnasium`,
    /// which needs its settings.
    pub fn from_name(name: &str) -> Option<Game> {
        by_name(name)
    }

    /// The teams of a multi-agent game (MPE's), in the game's agent order: simple_spread's
    /// one team `agent`, simple_tag's `adversary` (predators) then `agent` (prey). Empty for
    /// every game of one agent.
    pub fn teams(&self) -> Vec<Team> {
        match self {
            Game::MpeSimpleSpread(p) => vec![Team {
                name: "agent",
                agents: p.agents,
                observation: vector(p.observation_len()),
            }],
            Game::MpeSimpleTag(p) => vec![
                Team {
                    name: "adversary",
                    agents: p.num_adversaries,
                    observation: vector(p.predator_observation_len()),
                },
                Team {
                    name: "agent",
                    agents: p.num_good,
                    observation: vector(p.prey_observation_len()),
                },
            ],
            _ => Vec::new(),
        }
    }
}

/// One team of a multi-agent game: agents `<name>_0`, `<name>_1`, … in the game's order,
/// sharing their spaces.
#[derive(Debug, Clone, PartialEq)]
pub struct Team {
    pub name: &'static str,
    pub agents: usize,
    pub observation: ObsSpace,
}

/// A gymnasium environment run by the bridge's Python worker processes.
#[derive(Debug, Clone, PartialEq)]
pub struct Gymnasium {
    /// The id passed to `gymnasium.make`, e.g. `CartPole-v1`.
    pub id: String,
    /// The interpreter the workers run on.
    pub python: String,
    /// Modules imported before `gymnasium.make` (to register environments), in order.
    pub imports: Vec<String>,
    /// Keyword arguments of `gymnasium.make`, sorted by name.
    pub make_args: Vec<(String, Scalar)>,
    /// Worker processes per rank.
    pub workers: usize,
    /// Seconds one step (or reset) of a worker may take before the run stops.
    pub step_timeout_s: f64,
    /// Where the environment says which actions are valid, if it does.
    pub action_mask: ActionMask,
    /// Keys of the environment's `info` whose numeric values at each episode's end are
    /// logged, in the order given; distinct.
    pub info_keys: Vec<String>,
}

/// A PettingZoo environment run by the bridge's Python worker processes through PettingZoo's
/// Parallel API: `<module>.<function>(**make_args)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PettingZoo {
    /// The module that holds the environment, e.g. `mpe2.simple_spread_v3`.
    pub module: String,
    /// The module's function that builds it (`parallel_env`, PettingZoo's convention).
    pub function: String,
    /// How many agents each game has (`len(possible_agents)`), checked when the run starts.
    pub agents: usize,
    /// The interpreter the workers run on.
    pub python: String,
    /// Modules imported before the environment's module, in order.
    pub imports: Vec<String>,
    /// Keyword arguments of the function, sorted by name.
    pub make_args: Vec<(String, Scalar)>,
    /// Worker processes per rank.
    pub workers: usize,
    /// Seconds one step (or reset) of a worker may take before the run stops.
    pub step_timeout_s: f64,
    /// Where each agent's action mask comes from, if it has one.
    pub action_mask: ActionMask,
    /// Which of PettingZoo's APIs the function builds: every agent acting on every step, or
    /// one agent a turn.
    pub api: ZooApi,
}

/// PettingZoo's two APIs: Parallel (every agent observes and acts on every step) and AEC
/// (agents take turns: on each step one agent, `agent_selection`, acts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZooApi {
    #[default]
    Parallel,
    Aec,
}

impl ZooApi {
    pub const ALL: [ZooApi; 2] = [ZooApi::Parallel, ZooApi::Aec];
    pub const NAMES: &'static [&'static str] = &["parallel", "aec"];

    /// The name the user writes.
    pub fn name(self) -> &'static str {
        match self {
            ZooApi::Parallel => "parallel",
            ZooApi::Aec => "aec",
        }
    }
}

/// Where a gymnasium environment gives its action mask: one 0/1 entry per action (per
/// component's action, for a multi-discrete space), 1 where the action is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ActionMask {
    /// No mask: every action is always valid.
    #[default]
    None,
    /// `info["action_mask"]` of every reset and step (gymnasium's own convention, e.g. Taxi).
    Info,
    /// The `action_mask` entry of a Dict observation (PettingZoo's convention).
    Observation,
}

impl ActionMask {
    pub const ALL: [ActionMask; 3] = [ActionMask::None, ActionMask::Info, ActionMask::Observation];
    pub const NAMES: &'static [&'static str] = &["none", "info", "observation"];

    /// The name the user writes.
    pub fn name(self) -> &'static str {
        match self {
            ActionMask::None => "none",
            ActionMask::Info => "info",
            ActionMask::Observation => "observation",
        }
    }
}

/// The parameters of MPE's simple_spread, as mpe2's `simple_spread_v3.parallel_env` takes
/// them (its defaults: [`SpreadParams::MPE2`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadParams {
    /// Agents, and as many landmarks.
    pub agents: usize,
    /// The weight of an agent's own reward (collisions) against the team's (coverage), in
    /// [0, 1].
    pub local_ratio: f64,
    /// Steps of an episode (all agents are truncated together).
    pub max_cycles: u32,
    /// Five pushes in [0, 1] per agent instead of five moves.
    pub continuous_actions: bool,
}

impl SpreadParams {
    pub const MPE2: SpreadParams = SpreadParams {
        agents: 3,
        local_ratio: 0.5,
        max_cycles: 25,
        continuous_actions: false,
    };

    /// What an agent observes: its velocity and position, the landmarks' and the other
    /// agents' positions relative to its own, and the others' (silent) communication.
    pub fn observation_len(&self) -> usize {
        6 * self.agents
    }
}

/// The parameters of MPE's simple_tag, as mpe2's `simple_tag_v3.parallel_env` takes them
/// (its defaults: [`TagParams::MPE2`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TagParams {
    /// Prey (`agent_*`).
    pub num_good: usize,
    /// Predators (`adversary_*`).
    pub num_adversaries: usize,
    /// Obstacles, which neither move nor are seen to move.
    pub num_obstacles: usize,
    /// Steps of an episode (all agents are truncated together).
    pub max_cycles: u32,
    /// Five pushes in [0, 1] per agent instead of five moves.
    pub continuous_actions: bool,
}

impl TagParams {
    pub const MPE2: TagParams = TagParams {
        num_good: 1,
        num_adversaries: 3,
        num_obstacles: 2,
        max_cycles: 25,
        continuous_actions: false,
    };

    /// What a predator observes: its velocity and position, the obstacles' and the other
    /// agents' positions relative to its own, and every prey's velocity.
    pub const fn predator_observation_len(&self) -> usize {
        self.seen(self.num_good)
    }

    /// What a prey observes: as a predator, but the velocities of the other prey only (so
    /// two floats fewer).
    pub const fn prey_observation_len(&self) -> usize {
        self.seen(self.num_good.saturating_sub(1))
    }

    /// Own velocity and position, the obstacles and other agents relative to it, and
    /// `prey_seen` prey velocities.
    const fn seen(&self, prey_seen: usize) -> usize {
        let others = (self.num_good + self.num_adversaries).saturating_sub(1);
        4 + 2 * self.num_obstacles + 2 * others + 2 * prey_seen
    }
}

/// One value of a keyword argument (`make-args`), as Python receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    /// Python's `None`.
    Null,
}

/// What the resolver knows about a game of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct GameInfo {
    /// The name in `env "<name>"`.
    pub name: &'static str,
    /// What the game is, for the config's reference (docs/config.md).
    pub doc: &'static str,
    pub family: Family,
    /// The observation before any wrapper.
    pub observation: ObsSpace,
    /// The action space (Atari: the ROM's minimal action set).
    pub actions: ActionSpace,
    /// The game reports lives (`episodic-life` needs them).
    pub has_lives: bool,
    /// FIRE is one of the game's actions (`fire-reset` presses it).
    pub has_fire: bool,
    /// Agents that act in one game, each a row of the batch (1 but for multi-agent games);
    /// `observation` and `actions` are each agent's.
    pub agents: usize,
}

impl GameInfo {
    /// What the wrappers' fit rule knows of the game: everything.
    pub fn facts(&self) -> GameFacts {
        GameFacts {
            name: self.name.into(),
            family: Some(self.family),
            actions: Some(self.actions.clone()),
            lives: Some(self.has_lives),
            fire: Some(self.has_fire),
        }
    }
}

/// One row of the generated Atari table.
#[derive(Debug, Clone, Copy)]
pub struct AtariRow {
    pub name: &'static str,
    /// ALE's name of the ROM (`space_invaders`).
    pub rom: &'static str,
    /// Size of the minimal action set.
    pub actions: usize,
    pub fire: bool,
    pub lives: bool,
}

/// Every Atari ROM of the catalogue, by name (as `const`, for tables built at compile time).
pub const ATARI_ROWS: &[AtariRow] = ATARI;

const fn vector(len: usize) -> ObsSpace {
    ObsSpace::vector(len, Dtype::F32)
}

/// MinAtar's `channels` binary feature planes of 10x10 cells.
const fn planes(channels: usize) -> ObsSpace {
    ObsSpace::image(10, 10, channels, Layout::Chw, Dtype::F32)
}

/// A box of one number in `[low, high]`.
const fn scalar_box(bounds: &'static [[f32; 1]; 2]) -> ActionSpace {
    ActionSpace::Box {
        low: Cow::Borrowed(&bounds[0]),
        high: Cow::Borrowed(&bounds[1]),
    }
}

const fn native(
    name: &'static str,
    family: Family,
    observation: ObsSpace,
    actions: ActionSpace,
    doc: &'static str,
) -> GameInfo {
    GameInfo {
        name,
        doc,
        family,
        observation,
        actions,
        has_lives: false,
        has_fire: false,
        agents: 1,
    }
}

const fn discrete(n: usize) -> ActionSpace {
    ActionSpace::discrete(n)
}

/// The games written out here (gymnasium 1.x's classic control, MinAtar's minimal action
/// sets), in the order of the docs.
pub const NATIVE: &[(Game, GameInfo)] = &[
    (
        Game::Cartpole,
        native(
            "cartpole",
            Family::ClassicControl,
            vector(4),
            discrete(2),
            "Classic cart-pole balancing (gymnasium's CartPole-v1); observes a vector of 4 floats, 2 actions.",
        ),
    ),
    (
        Game::Acrobot,
        native(
            "acrobot",
            Family::ClassicControl,
            vector(6),
            discrete(3),
            "Swing up a two-link pendulum (gymnasium's Acrobot-v1); observes a vector of 6 floats, 3 actions.",
        ),
    ),
    (
        Game::MountainCar,
        native(
            "mountain-car",
            Family::ClassicControl,
            vector(2),
            discrete(3),
            "Drive an underpowered car up a hill (gymnasium's MountainCar-v0); observes a vector of 2 floats, 3 actions.",
        ),
    ),
    (
        Game::MountainCarContinuous,
        native(
            "mountain-car-continuous",
            Family::ClassicControl,
            vector(2),
            scalar_box(&[[-1.0], [1.0]]),
            "Mountain car with a continuous force (gymnasium's MountainCarContinuous-v0); observes a vector of 2 floats, acts with a box of 1 number in [-1, 1].",
        ),
    ),
    (
        Game::Pendulum,
        native(
            "pendulum",
            Family::ClassicControl,
            vector(3),
            scalar_box(&[[-2.0], [2.0]]),
            "Swing up and hold a pendulum (gymnasium's Pendulum-v1); observes a vector of 3 floats, acts with a box of 1 number in [-2, 2].",
        ),
    ),
    (
        Game::MinatarBreakout,
        native(
            "minatar-breakout",
            Family::MinAtar,
            planes(4),
            discrete(3),
            "MinAtar Breakout; observes 10x10x4 binary planes, 3 actions; MinAtar's own sticky actions (probability 0.1) are always on, as for every MinAtar game.",
        ),
    ),
    (
        Game::MinatarAsterix,
        native(
            "minatar-asterix",
            Family::MinAtar,
            planes(4),
            discrete(5),
            "MinAtar Asterix; observes 10x10x4 binary planes, 5 actions.",
        ),
    ),
    (
        Game::MinatarFreeway,
        native(
            "minatar-freeway",
            Family::MinAtar,
            planes(7),
            discrete(3),
            "MinAtar Freeway; observes 10x10x7 binary planes, 3 actions.",
        ),
    ),
    (
        Game::MinatarSpaceInvaders,
        native(
            "minatar-space-invaders",
            Family::MinAtar,
            planes(6),
            discrete(4),
            "MinAtar Space Invaders; observes 10x10x6 binary planes, 4 actions.",
        ),
    ),
    (
        Game::MinatarSeaquest,
        native(
            "minatar-seaquest",
            Family::MinAtar,
            planes(10),
            discrete(6),
            "MinAtar Seaquest; observes 10x10x10 binary planes, 6 actions.",
        ),
    ),
    (
        Game::MpeSimpleSpread(SpreadParams::MPE2),
        spread_info(&SpreadParams::MPE2),
    ),
    (
        Game::MpeSimpleTag(TagParams::MPE2),
        tag_info(&TagParams::MPE2),
    ),
];

/// An MPE agent's moves: none, -x, +x, -y, +y.
pub const MPE_MOVES: usize = 5;
const MPE_PUSHES: [[f32; MPE_MOVES]; 2] = [[0.0; MPE_MOVES], [1.0; MPE_MOVES]];

/// An MPE agent's action space: its five moves, or (`continuous`) a push in [0, 1] for each.
pub const fn mpe_actions(continuous: bool) -> ActionSpace {
    if continuous {
        ActionSpace::Box {
            low: Cow::Borrowed(&MPE_PUSHES[0]),
            high: Cow::Borrowed(&MPE_PUSHES[1]),
        }
    } else {
        discrete(MPE_MOVES)
    }
}

const fn spread_info(params: &SpreadParams) -> GameInfo {
    let actions = mpe_actions(params.continuous_actions);
    GameInfo {
        name: "mpe-simple-spread",
        doc: "MPE's simple_spread (mpe2 1.1.1's simple_spread_v3, exact): `agents` agents (3) cover as many landmarks, rewarded by the team's coverage blended with their own collisions (`local-ratio`); each agent observes 6 x agents floats and takes 5 moves (or, with `continuous-actions`, 5 pushes in [0, 1]); episodes last `max-cycles` steps (25). Every agent is a row of the batch, all played by one shared policy (or several, with `train.policies`).",
        family: Family::Mpe,
        observation: vector(6 * params.agents),
        actions,
        has_lives: false,
        has_fire: false,
        agents: params.agents,
    }
}

const fn tag_info(params: &TagParams) -> GameInfo {
    let actions = mpe_actions(params.continuous_actions);
    GameInfo {
        name: "mpe-simple-tag",
        doc: "MPE's simple_tag (mpe2 1.1.1's simple_tag_v3, exact): `num-adversaries` predators (`adversary_*`, 3, larger and slower) chase `num-good` prey (`agent_*`, 1) among `num-obstacles` obstacles (2); every predator earns +10 for each predator-prey pair that touches, a prey loses 10 for each predator touching it and is pushed back from the edge by a penalty. Each agent observes its velocity and position, the obstacles' and the other agents' positions relative to its own, and the prey's velocities (4 + 2 x obstacles + 2 x other agents + 2 x prey floats for a predator, 2 fewer for a prey: 16 and 14 by default), and takes 5 moves (or, with `continuous-actions`, 5 pushes in [0, 1]); episodes last `max-cycles` steps (25). Every agent is a row of the batch, as wide as the widest agent's observation (a predator's): a prey's row is its observation followed by zeros. All rows are played by one shared policy, or each team by a policy of its own with `train.policies`.",
        family: Family::Mpe,
        // The batch's row: a predator's observation, the widest.
        observation: vector(params.predator_observation_len()),
        actions,
        has_lives: false,
        has_fire: false,
        agents: params.num_adversaries + params.num_good,
    }
}

/// What every Atari game is, for the config's reference.
pub const ATARI_DOC: &str = "An Atari 2600 game through the ALE, named `atari-` and the ROM's name in kebab case; observes 210x160 RGB frames, with the ROM's minimal action set. The ALE's own sticky actions are off; the `sticky-actions` wrapper adds them.";

fn atari_info(row: &AtariRow) -> GameInfo {
    GameInfo {
        name: row.name,
        doc: ATARI_DOC,
        family: Family::Atari,
        observation: ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8),
        actions: discrete(row.actions),
        has_lives: row.lives,
        has_fire: row.fire,
        agents: 1,
    }
}

/// The catalogue entry of `game`; `None` for a gymnasium environment (its spaces are known
/// once it is built).
fn info(game: &Game) -> Option<GameInfo> {
    match game {
        Game::Atari { rom } => ATARI.iter().find(|r| r.rom == *rom).map(atari_info),
        Game::Gymnasium(_) | Game::PettingZoo(_) => None,
        Game::MpeSimpleSpread(params) => Some(spread_info(params)),
        Game::MpeSimpleTag(params) => Some(tag_info(params)),
        native => NATIVE
            .iter()
            .find(|(g, _)| g == native)
            .map(|(_, i)| i.clone()),
    }
}

/// The catalogue game called `name` (`gymnasium` is not one: it carries settings).
fn by_name(name: &str) -> Option<Game> {
    if let Some((g, _)) = NATIVE.iter().find(|(_, i)| i.name == name) {
        return Some(g.clone());
    }
    ATARI
        .iter()
        .find(|r| r.name == name)
        .map(|r| Game::Atari { rom: r.rom })
}

/// Every game of the catalogue, natives first, then the Atari ROMs by name.
pub fn games() -> impl Iterator<Item = GameInfo> {
    NATIVE
        .iter()
        .map(|(_, i)| i.clone())
        .chain(ATARI.iter().map(atari_info))
}

/// Every name `env` accepts: the catalogue, then `gymnasium` and `pettingzoo`.
pub fn names() -> impl Iterator<Item = &'static str> + Clone {
    NATIVE
        .iter()
        .map(|(_, i)| i.name)
        .chain(ATARI.iter().map(|r| r.name))
        .chain(["gymnasium", "pettingzoo"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_maps_back_to_its_game() {
        for info in games() {
            let game = by_name(info.name).expect("a catalogue name");
            assert_eq!(game.name(), info.name);
            assert_eq!(self::info(&game), Some(info));
        }
        assert_eq!(games().count(), NATIVE.len() + ATARI.len());
        let mut names: Vec<&str> = names().collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a game name appears twice");
        assert_eq!(Game::from_name("gymnasium"), None);
    }

    #[test]
    fn atari_names_are_the_roms_in_kebab_case() {
        for row in ATARI {
            assert_eq!(row.name, format!("atari-{}", row.rom.replace('_', "-")));
            assert!(row.actions >= 2 && row.actions <= 18, "{}", row.name);
        }
        assert!(ATARI.len() > 100);
    }
}

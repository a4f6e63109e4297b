//! Games several agents play at once ([`ParallelEnv`], PettingZoo's Parallel API): every agent
//! observes and acts on every step, and each gets its own reward and flags; or in turns
//! (PettingZoo's AEC API), where every agent observes on every step and one of them acts. In
//! the Parallel API an agent may leave before the others. The agents of one game are listed
//! once ([`AgentSpec`]), in the game's order, and every buffer a game reads or writes holds
//! them in that order.

use crate::EnvError;
use crate::env::{RgbFrame, Step};
use crate::space::{Action, ActionSpace, ObsSpace};

/// One agent of a game, as PettingZoo names it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    /// The agent's id (`adversary_0`).
    pub name: String,
    /// The team the agent plays for: its id without the trailing `_<index>` (`adversary`).
    /// Agents of one team share their spaces and the rule their reward follows.
    pub team: String,
    pub observation: ObsSpace,
    pub actions: ActionSpace,
}

impl AgentSpec {
    /// An agent called `<team>_<index>`.
    pub fn new(team: &str, index: usize, observation: ObsSpace, actions: ActionSpace) -> Self {
        AgentSpec {
            name: format!("{team}_{index}"),
            team: team.to_owned(),
            observation,
            actions,
        }
    }
}

/// A game of several agents that all act on every step, or that take turns.
///
/// Contract: call [`ParallelEnv::reset`] before the first step, and again after a step that
/// ends the game: one that sets `game_over` on every agent's step. `obs` holds every agent's
/// observation, agent after agent, each as long as its space; `actions` and `steps` hold one
/// entry per agent.
///
/// An agent may leave before the others (PettingZoo's Parallel API): its step that sets
/// `terminated` or `truncated` while the game goes on (`game_over` unset) is its last, and
/// [`ParallelEnv::last_observation`] then holds what it last observed. From that step until
/// the game's end it is absent: its observation is zeros (where the game appends an action
/// mask, one that allows every action, so a policy's masked choice stays defined), its steps
/// are `Step::default()` but for `game_over` at the game's end, its action is not played, and
/// [`ParallelEnv::acts`] says `false`. At the next reset every agent is back.
pub trait ParallelEnv: Send {
    /// The game's name in the catalogue (`mpe-simple-spread`).
    fn name(&self) -> &'static str;

    /// The agents, in the order every buffer holds them.
    fn agents(&self) -> &[AgentSpec];

    /// Starts an episode. `Some(seed)` reseeds the game's random stream, `None` continues it.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]);

    /// Applies every agent's action at once and advances the game by one step. Only the
    /// actions of the agents that act ([`ParallelEnv::acts`]) are played.
    fn step(&mut self, actions: &[Action<'_>], obs: &mut [f32], steps: &mut [Step]);

    /// Whether the agents take turns (PettingZoo's AEC API): one agent acts on each step and
    /// the others wait, observing.
    fn takes_turns(&self) -> bool {
        false
    }

    /// Whether agent `agent` acts on the next step (after the latest reset or step): not
    /// while it waits for its turn in a game that takes turns, nor once it has left the game.
    fn acts(&self, agent: usize) -> bool {
        let _ = agent;
        true
    }

    /// The last observation of agent `agent`, which left the game at the latest step, into
    /// `out` (as long as its own observation): a learner bootstraps from it when the agent
    /// left by truncation. Asked only of games whose agents leave early; zeros otherwise.
    fn last_observation(&self, agent: usize, out: &mut [f32]) {
        let _ = agent;
        out.fill(0.0);
    }

    /// The game seen from above, if it can draw itself (for `tandem play --gif` and evaluation
    /// videos).
    fn render_rgb(&self) -> Option<RgbFrame> {
        None
    }

    /// Appends the game's state (bodies, random stream, step count) as one snapshot section.
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError>;

    /// Restores what [`ParallelEnv::save_state`] wrote; the game must be built with the same
    /// parameters.
    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError>;
}

/// The total length of every agent's observation: the `obs` buffer's length.
pub fn observation_len(agents: &[AgentSpec]) -> usize {
    agents.iter().map(|a| a.observation.len()).sum()
}

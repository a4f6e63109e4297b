//! Games several agents play at once ([`ParallelEnv`], PettingZoo's Parallel API): every agent
//! observes and acts on every step, and each gets its own reward and flags; or in turns
//! (PettingZoo's AEC API), where every agent observes on every step and one of them acts. The agents of one
//! game are listed once ([`AgentSpec`]), in the game's order, and every buffer a game reads or
//! writes holds them in that order.

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
/// ends the episode, which ends it for every agent at once (no agent leaves early). `obs` holds every agent's observation, agent after agent, each as long
/// as its space; `actions` and `steps` hold one entry per agent.
pub trait ParallelEnv: Send {
    /// The game's name in the catalogue (`mpe-simple-spread`).
    fn name(&self) -> &'static str;

    /// The agents, in the order every buffer holds them.
    fn agents(&self) -> &[AgentSpec];

    /// Starts an episode. `Some(seed)` reseeds the game's random stream, `None` continues it.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]);

    /// Applies every agent's action at once and advances the game by one step. In a game
    /// that takes turns, only the action of the agent whose turn it was is played.
    fn step(&mut self, actions: &[Action<'_>], obs: &mut [f32], steps: &mut [Step]);

    /// Whether the agents take turns (PettingZoo's AEC API): one agent acts on each step,
    /// [`ParallelEnv::turn`], and the others wait, observing.
    fn takes_turns(&self) -> bool {
        false
    }

    /// In a game that takes turns, the index of the agent to act on the next step (after the
    /// latest reset or step); meaningless otherwise.
    fn turn(&self) -> usize {
        0
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

//! The single-environment interface every game and wrapper implements.

use crate::EnvError;
use crate::norm::Normalizer;
use crate::space::{Action, ActionSpace, ObsBuf, ObsSpace};

/// What one step returned.
// repr(C) with the flags apart: the optimiser would otherwise read `terminated` and
// `truncated` as one 16-bit load from two separately written bytes, and that failed
// store-to-load forwarding stalled VecEnv behind every observation store (measured:
// about a third of a MinAtar step).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Step {
    /// The reward the agent sees (after clipping or normalisation wrappers).
    pub reward: f32,
    /// The episode ended by the environment's own rules (the agent's episode, which
    /// under episodic-life is a single life).
    pub terminated: bool,
    /// The game's own reward for this step, summed over skipped frames, untouched by
    /// reward wrappers: what episode statistics report as the game score.
    pub raw_reward: f32,
    /// The episode was cut short (time limit); the observation is still bootstrappable.
    pub truncated: bool,
    /// The whole game is over, so the next `reset` starts a new game. Equal to
    /// `terminated || truncated` except under episodic-life, where losing a life
    /// terminates the agent's episode but not the game.
    pub game_over: bool,
}

impl Step {
    /// A step of a game without wrappers: the raw reward is the reward and the game is
    /// over exactly when the episode ends.
    pub fn game(reward: f32, terminated: bool, truncated: bool) -> Self {
        Step {
            reward,
            terminated,
            truncated,
            raw_reward: reward,
            game_over: terminated || truncated,
        }
    }

    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// An RGB picture of the game (for GIFs): `height * width * 3` bytes, row-major,
/// interleaved R, G, B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbFrame {
    pub height: usize,
    pub width: usize,
    pub pixels: Vec<u8>,
}

/// One environment: a game, or a wrapper around another environment.
///
/// Contract: after construction, call [`Env::reset`] before the first [`Env::step`];
/// after a step that ends the episode (`terminated || truncated`) call `reset` before
/// stepping again. Every observation is written into the caller's [`ObsBuf`], which
/// must match [`Env::observation_space`] in element type and length (or be
/// [`ObsBuf::Skip`]). Actions are of [`Env::action_space`] (discrete in `0..n`, boxes of
/// its length with finite values); [`crate::VecEnv`] checks this before stepping.
pub trait Env: Send {
    fn observation_space(&self) -> ObsSpace;

    fn action_space(&self) -> ActionSpace;

    /// Starts a new episode. `Some(seed)` reseeds every random stream of the chain
    /// (the game's and the wrappers'), `None` continues them.
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>);

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step;

    /// [`Env::step`] into an f32 buffer that holds exactly the observation this
    /// environment wrote last (by `reset`, `step` or `step_in_place`), so that only the
    /// values that change need writing. [`crate::VecEnv`] uses it for rows only the
    /// environment writes. The default writes the whole observation.
    fn step_in_place(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        self.step(action, ObsBuf::F32(obs))
    }

    /// Lives left in the game (0 for games without lives).
    fn lives(&self) -> u32 {
        0
    }

    /// The current game screen in RGB, if this game can draw itself.
    fn render_rgb(&self) -> Option<RgbFrame> {
        None
    }

    /// Calls `visit` on every running normaliser of this chain, innermost first. Games
    /// have none; wrappers forward to the environment they wrap, then add their own.
    fn visit_normalizers(&mut self, _visit: &mut dyn FnMut(&mut Normalizer)) {}

    /// Names of the parts of this chain, outermost wrapper first and the game last
    /// (wrappers add their own name, then ask the environment they wrap). Snapshots
    /// record them to refuse being restored into a different chain.
    fn chain_names(&self, names: &mut Vec<String>) {
        names.push(std::any::type_name::<Self>().to_owned());
    }

    /// Appends everything that influences this environment's future observations,
    /// rewards and flags (game state, random streams, wrapper buffers and counters,
    /// normaliser statistics) to `out`, as one [`crate::snapshot`] section per part of
    /// the chain. Environments that cannot do so return [`EnvError::Snapshot`].
    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), EnvError> {
        Err(EnvError::Snapshot(format!(
            "`{}` cannot save its state",
            std::any::type_name::<Self>()
        )))
    }

    /// Restores the state [`Env::save_state`] wrote, reading it off the front of
    /// `input`. The environment must be built the same way (same game, wrappers and
    /// parameters; its seed may differ): a mismatch is an [`EnvError::Snapshot`] that
    /// names the part that does not fit. After an error the environment's state is
    /// unspecified (partly restored): restore again or rebuild it.
    fn load_state(&mut self, _input: &mut &[u8]) -> Result<(), EnvError> {
        Err(EnvError::Snapshot(format!(
            "`{}` cannot restore a state",
            std::any::type_name::<Self>()
        )))
    }
}

impl Env for Box<dyn Env> {
    fn observation_space(&self) -> ObsSpace {
        (**self).observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        (**self).action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        (**self).reset(seed, obs)
    }
    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        (**self).step(action, obs)
    }
    fn step_in_place(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        (**self).step_in_place(action, obs)
    }
    fn lives(&self) -> u32 {
        (**self).lives()
    }
    fn render_rgb(&self) -> Option<RgbFrame> {
        (**self).render_rgb()
    }
    fn visit_normalizers(&mut self, visit: &mut dyn FnMut(&mut Normalizer)) {
        (**self).visit_normalizers(visit)
    }
    fn chain_names(&self, names: &mut Vec<String>) {
        (**self).chain_names(names)
    }
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        (**self).save_state(out)
    }
    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        (**self).load_state(input)
    }
}

/// Where a wrapper that leaves observations untouched sends the wrapped environment's
/// observation: an ordinary buffer, or an in-place row (see [`Env::step_in_place`]).
pub enum ObsOut<'a> {
    Buf(ObsBuf<'a>),
    InPlace(&'a mut [f32]),
}

impl ObsOut<'_> {
    /// Steps `env` into this destination.
    pub fn step(self, env: &mut dyn Env, action: Action<'_>) -> Step {
        match self {
            ObsOut::Buf(obs) => env.step(action, obs),
            ObsOut::InPlace(obs) => env.step_in_place(action, obs),
        }
    }
}

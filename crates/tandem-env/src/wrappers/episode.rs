//! Wrappers that change how episodes start, end or act: noop-reset, fire-reset,
//! episodic-life, time-limit and sticky-actions.

use super::{forward_to_inner, pass_through_step, wrapper_snapshot_methods};
use crate::env::{Env, ObsOut, Step};
use crate::rng::{Xoshiro256, derive_seed};
use crate::space::{Action, ActionSpace, ObsBuf, ObsSpace};

const NOOP: Action<'static> = Action::Discrete(0);
const FIRE: Action<'static> = Action::Discrete(1);

/// Starts each episode with 1..=max_noops no-op actions.
pub struct NoopReset {
    inner: Box<dyn Env>,
    max_noops: u32,
    rng: Xoshiro256,
    stream: u64,
}

impl NoopReset {
    pub fn new(inner: Box<dyn Env>, max_noops: u32, seed: u64, stream: u64) -> Self {
        NoopReset {
            inner,
            max_noops,
            rng: Xoshiro256::new(seed),
            stream,
        }
    }
}

impl NoopReset {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        obs.step(&mut *self.inner, action)
    }
}

impl Env for NoopReset {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        if let Some(seed) = seed {
            self.rng = Xoshiro256::new(derive_seed(seed, self.stream));
        }
        self.inner.reset(seed, ObsBuf::Skip);
        let noops = 1 + self.rng.below(u64::from(self.max_noops));
        for i in 0..noops {
            let last = i + 1 == noops;
            let out = if last { obs.reborrow() } else { ObsBuf::Skip };
            if self.inner.step(NOOP, out).done() {
                self.inner
                    .reset(None, if last { obs.reborrow() } else { ObsBuf::Skip });
            }
        }
    }
    wrapper_snapshot_methods!("noop-reset", params: [max_noops, stream], state: [rng]);
    pass_through_step!();
    forward_to_inner!(with_normalizers);
}

/// Presses FIRE then action 2 after every reset, for games that wait for FIRE.
pub struct FireReset {
    inner: Box<dyn Env>,
}

impl FireReset {
    pub fn new(inner: Box<dyn Env>) -> Self {
        FireReset { inner }
    }
}

impl FireReset {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        obs.step(&mut *self.inner, action)
    }
}

impl Env for FireReset {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.inner.reset(seed, ObsBuf::Skip);
        if self.inner.step(FIRE, ObsBuf::Skip).done() {
            self.inner.reset(None, ObsBuf::Skip);
        }
        if self.inner.step(Action::Discrete(2), obs.reborrow()).done() {
            self.inner.reset(None, obs);
        }
    }
    wrapper_snapshot_methods!("fire-reset", params: [], state: []);
    pass_through_step!();
    forward_to_inner!(with_normalizers);
}

/// Ends the agent's episode when a life is lost; the following reset continues the
/// same game with a no-op step instead of restarting it.
pub struct EpisodicLife {
    inner: Box<dyn Env>,
    lives: u32,
    game_over: bool,
}

impl EpisodicLife {
    pub fn new(inner: Box<dyn Env>) -> Self {
        EpisodicLife {
            inner,
            lives: 0,
            game_over: true,
        }
    }
}

impl EpisodicLife {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        self.game_over = step.game_over;
        let lives = self.inner.lives();
        if lives < self.lives && lives > 0 {
            step.terminated = true;
        }
        self.lives = lives;
        step
    }
}

impl Env for EpisodicLife {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        if self.game_over || seed.is_some() {
            self.inner.reset(seed, obs);
        } else if self.inner.step(NOOP, obs.reborrow()).done() {
            self.inner.reset(None, obs);
        }
        self.game_over = false;
        self.lives = self.inner.lives();
    }
    wrapper_snapshot_methods!("episodic-life", params: [], state: [lives, game_over]);
    pass_through_step!();
    forward_to_inner!(with_normalizers);
}

/// Truncates episodes after a fixed number of steps.
pub struct TimeLimit {
    inner: Box<dyn Env>,
    max_steps: u64,
    steps: u64,
}

impl TimeLimit {
    pub fn new(inner: Box<dyn Env>, max_steps: u64) -> Self {
        TimeLimit {
            inner,
            max_steps,
            steps: 0,
        }
    }
}

impl TimeLimit {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        self.steps += 1;
        if self.steps >= self.max_steps && !step.terminated {
            step.truncated = true;
            // The next reset must restart the game, so statistics count it as over.
            step.game_over = true;
        }
        step
    }
}

impl Env for TimeLimit {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.steps = 0;
        self.inner.reset(seed, obs);
    }
    wrapper_snapshot_methods!("time-limit", params: [max_steps], state: [steps]);
    pass_through_step!();
    forward_to_inner!(with_normalizers);
}

/// Repeats the previously executed action with a given probability.
pub struct StickyActions {
    inner: Box<dyn Env>,
    prob: f64,
    /// The index of the action the game received last (sticky actions are discrete only).
    previous: usize,
    rng: Xoshiro256,
    stream: u64,
}

impl StickyActions {
    pub fn new(inner: Box<dyn Env>, prob: f64, seed: u64, stream: u64) -> Self {
        StickyActions {
            inner,
            prob,
            previous: 0,
            rng: Xoshiro256::new(seed),
            stream,
        }
    }
}

impl StickyActions {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        if self.rng.next_f64() >= self.prob {
            self.previous = action.index();
        }
        obs.step(&mut *self.inner, Action::Discrete(self.previous))
    }
}

impl Env for StickyActions {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        if let Some(seed) = seed {
            self.rng = Xoshiro256::new(derive_seed(seed, self.stream));
        }
        self.previous = 0;
        self.inner.reset(seed, obs);
    }
    wrapper_snapshot_methods!("sticky-actions", params: [prob, stream], state: [previous, rng]);
    pass_through_step!();
    forward_to_inner!(with_normalizers);
}

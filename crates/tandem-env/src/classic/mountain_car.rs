//! MountainCar-v0 and MountainCarContinuous-v0: an underpowered car in a valley
//! (height `sin(3 x)`) that must rock back and forth to reach the flag on the right
//! hill. The discrete game pushes left, not at all or right for reward -1 per step,
//! truncated after 200 steps; the continuous one applies a force in [-1, 1] (larger
//! actions are clipped) for reward `-0.1 a^2` per step and 100 on reaching the flag,
//! truncated after 999 steps.

use super::canvas::Canvas;
use crate::env::{Env, RgbFrame, Step};
use crate::gym_seeding::NumpyGenerator;
use crate::space::{Action, ActionSpace, Dtype, ObsBuf, ObsSpace};
use std::cmp::Ordering;
use std::ops::{Add, Mul, Sub};

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GRAVITY: f64 = 0.0025;
/// Reset draws the position from `[RESET_LOW, RESET_HIGH)`; the car starts at rest.
const RESET_LOW: f64 = -0.6;
const RESET_HIGH: f64 = -0.4;
pub const MAX_STEPS: u32 = 200;
pub const CONTINUOUS_MAX_STEPS: u32 = 999;

/// Draws gymnasium's reset state `[position, 0]`.
fn reset_state(np_random: &mut NumpyGenerator, seed: Option<u64>) -> [f64; 2] {
    np_random.reseed(seed);
    [np_random.uniform(RESET_LOW, RESET_HIGH), 0.0]
}

/// A 300x200 picture of the valley, the car at `position` and the flag at `goal`.
fn render_car(position: f64, goal: f64) -> RgbFrame {
    let height = |x: f64| (3.0 * x).sin() * 0.45 + 0.55;
    let span = MAX_POSITION - MIN_POSITION;
    let mut canvas = Canvas::new(300, 200, MIN_POSITION, 0.0, 300.0 / span);
    let samples = 120;
    for i in 0..samples {
        let x0 = MIN_POSITION + span * i as f64 / samples as f64;
        let x1 = MIN_POSITION + span * (i + 1) as f64 / samples as f64;
        canvas.line((x0, height(x0)), (x1, height(x1)), 0.01, [0, 0, 0]);
    }
    let flag = height(goal);
    canvas.line((goal, flag), (goal, flag + 0.12), 0.01, [0, 0, 0]);
    canvas.line(
        (goal, flag + 0.1),
        (goal + 0.05, flag + 0.1),
        0.04,
        [204, 204, 0],
    );
    canvas.disc(position, height(position) + 0.04, 0.045, [60, 60, 60]);
    canvas.finish()
}

/// State `[position, velocity]`; actions 0, 1, 2 accelerate left, not at all, right.
#[derive(Debug, Clone)]
pub struct MountainCar {
    state: [f64; 2],
    steps: u32,
    np_random: NumpyGenerator,
}

const FORCE: f64 = 0.001;
const GOAL_POSITION: f64 = 0.5;

impl MountainCar {
    pub fn new(seed: u64) -> Self {
        MountainCar {
            state: [0.0; 2],
            steps: 0,
            np_random: NumpyGenerator::from_seed(seed),
        }
    }

    pub fn state(&self) -> [f64; 2] {
        self.state
    }

    fn write_obs(&self, mut obs: ObsBuf<'_>) {
        obs.write_f32(&self.state.map(|v| v as f32));
    }

    /// One step of the float64 dynamics; returns whether the car reached the flag.
    fn advance(&mut self, action: usize) -> bool {
        let [mut position, mut velocity] = self.state;
        let push = (action as f64 - 1.0) * FORCE;
        velocity += push + (3.0 * position).cos() * -GRAVITY;
        velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        position += velocity;
        position = position.clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        self.state = [position, velocity];
        position >= GOAL_POSITION && velocity >= 0.0
    }
}

impl Env for MountainCar {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(3)
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.state = reset_state(&mut self.np_random, seed);
        self.steps = 0;
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let terminated = self.advance(action.index());
        self.steps += 1;
        self.write_obs(obs);
        Step::game(
            -1.0,
            terminated,
            super::truncated(terminated, self.steps, MAX_STEPS),
        )
    }

    fn render_rgb(&self) -> Option<RgbFrame> {
        Some(render_car(self.state[0], GOAL_POSITION))
    }

    crate::snapshot::game_snapshot_methods!(
        "mountain-car",
        params: [],
        state: [state, steps, np_random]
    );
}

/// A number in one of the three kinds gymnasium's continuous step mixes, with
/// numpy 2's promotion rules (NEP 50): float32 with a Python float stays float32
/// (the Python value rounded to float32 first, comparisons included), anything with
/// float64 is float64, and Python floats together are float64.
#[derive(Debug, Clone, Copy)]
enum Num {
    F32(f32),
    F64(f64),
    Py(f64),
}

impl Num {
    fn value(self) -> f64 {
        match self {
            Num::F32(v) => f64::from(v),
            Num::F64(v) | Num::Py(v) => v,
        }
    }

    /// Applies `op` in the precision numpy picks for `self` and `other`.
    fn combine(self, other: Num, op32: fn(f32, f32) -> f32, op64: fn(f64, f64) -> f64) -> Num {
        match (self, other) {
            (Num::F32(a), Num::F32(b)) => Num::F32(op32(a, b)),
            (Num::F32(a), Num::Py(b)) => Num::F32(op32(a, b as f32)),
            (Num::Py(a), Num::F32(b)) => Num::F32(op32(a as f32, b)),
            (Num::Py(a), Num::Py(b)) => Num::Py(op64(a, b)),
            (a, b) => Num::F64(op64(a.value(), b.value())),
        }
    }

    fn compare(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::F32(a), Num::Py(b)) => a.partial_cmp(&(b as f32)),
            (Num::Py(a), Num::F32(b)) => (a as f32).partial_cmp(&b),
            (a, b) => a.value().partial_cmp(&b.value()),
        }
    }

    fn gt(self, other: f64) -> bool {
        self.compare(Num::Py(other)) == Some(Ordering::Greater)
    }

    fn lt(self, other: f64) -> bool {
        self.compare(Num::Py(other)) == Some(Ordering::Less)
    }

    fn ge(self, other: f64) -> bool {
        matches!(
            self.compare(Num::Py(other)),
            Some(Ordering::Greater | Ordering::Equal)
        )
    }

    fn eq(self, other: f64) -> bool {
        self.compare(Num::Py(other)) == Some(Ordering::Equal)
    }
}

impl Add for Num {
    type Output = Num;
    fn add(self, other: Num) -> Num {
        self.combine(other, |a, b| a + b, |a, b| a + b)
    }
}

impl Sub for Num {
    type Output = Num;
    fn sub(self, other: Num) -> Num {
        self.combine(other, |a, b| a - b, |a, b| a - b)
    }
}

impl Mul for Num {
    type Output = Num;
    fn mul(self, other: Num) -> Num {
        self.combine(other, |a, b| a * b, |a, b| a * b)
    }
}

const MIN_ACTION: f32 = -1.0;
const MAX_ACTION: f32 = 1.0;
const POWER: f64 = 0.0015;
const CONTINUOUS_GOAL_POSITION: f64 = 0.45;

/// State `[position, velocity]`; the action is one force, clipped to [-1, 1].
#[derive(Debug, Clone)]
pub struct MountainCarContinuous {
    state: [f64; 2],
    /// gymnasium's reset state is a float64 array and every later state float32,
    /// which decides the precision of the next step's arithmetic.
    state_is_f32: bool,
    steps: u32,
    np_random: NumpyGenerator,
}

impl MountainCarContinuous {
    pub fn new(seed: u64) -> Self {
        MountainCarContinuous {
            state: [0.0; 2],
            state_is_f32: false,
            steps: 0,
            np_random: NumpyGenerator::from_seed(seed),
        }
    }

    pub fn state(&self) -> [f64; 2] {
        self.state
    }

    fn write_obs(&self, mut obs: ObsBuf<'_>) {
        obs.write_f32(&self.state.map(|v| v as f32));
    }

    /// One step with force `action` (a float32, as gymnasium's action space holds);
    /// returns the reward and whether the car reached the flag. The arithmetic
    /// follows gymnasium's expressions in numpy's precisions, so a float32 action or
    /// state keeps parts of it in float32.
    fn advance(&mut self, action: f32) -> (f64, bool) {
        let kind = |v: f64| {
            if self.state_is_f32 {
                Num::F32(v as f32)
            } else {
                Num::F64(v)
            }
        };
        let (mut position, mut velocity) = (kind(self.state[0]), kind(self.state[1]));
        // Python's min(max(a, -1.0), 1.0): a bound that wins is a Python float.
        let force = if action < MIN_ACTION {
            Num::Py(f64::from(MIN_ACTION))
        } else if action > MAX_ACTION {
            Num::Py(f64::from(MAX_ACTION))
        } else {
            Num::F32(action)
        };
        let slope = Num::Py((Num::Py(3.0) * position).value().cos());
        velocity = velocity + (force * Num::Py(POWER) - Num::Py(GRAVITY) * slope);
        if velocity.gt(MAX_SPEED) {
            velocity = Num::Py(MAX_SPEED);
        }
        if velocity.lt(-MAX_SPEED) {
            velocity = Num::Py(-MAX_SPEED);
        }
        position = position + velocity;
        if position.gt(MAX_POSITION) {
            position = Num::Py(MAX_POSITION);
        }
        if position.lt(MIN_POSITION) {
            position = Num::Py(MIN_POSITION);
        }
        if position.eq(MIN_POSITION) && velocity.lt(0.0) {
            velocity = Num::Py(0.0);
        }
        let terminated = position.ge(CONTINUOUS_GOAL_POSITION) && velocity.ge(0.0);
        // gymnasium charges the action as given, not as clipped; a float32 squared
        // is exact in float64, which is what `math.pow(a, 2)` returns.
        let action = f64::from(action);
        let bonus = if terminated { 100.0 } else { 0.0 };
        let reward = bonus - action * action * 0.1;
        self.state = [position, velocity].map(|v| f64::from(v.value() as f32));
        self.state_is_f32 = true;
        (reward, terminated)
    }
}

impl Env for MountainCarContinuous {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(2, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::uniform_box(1, MIN_ACTION, MAX_ACTION)
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.state = reset_state(&mut self.np_random, seed);
        self.state_is_f32 = false;
        self.steps = 0;
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let (reward, terminated) = self.advance(action.values()[0]);
        self.steps += 1;
        self.write_obs(obs);
        let truncated = super::truncated(terminated, self.steps, CONTINUOUS_MAX_STEPS);
        Step::game(reward as f32, terminated, truncated)
    }

    fn render_rgb(&self) -> Option<RgbFrame> {
        Some(render_car(self.state[0], CONTINUOUS_GOAL_POSITION))
    }

    crate::snapshot::game_snapshot_methods!(
        "mountain-car-continuous",
        params: [],
        state: [state, state_is_f32, steps, np_random]
    );
}

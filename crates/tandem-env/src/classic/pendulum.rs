//! Pendulum-v1: swing a pendulum up and hold it there with a torque in [-2, 2]
//! (larger actions are clipped); the cost per step grows with the angle from upright,
//! the speed and the torque, and episodes are truncated after 200 steps (they never
//! terminate).

use super::canvas::Canvas;
use super::{numpy_square, numpy_square_f32};
use crate::env::{Env, RgbFrame, Step};
use crate::gym_seeding::NumpyGenerator;
use crate::space::{Action, ActionSpace, Dtype, ObsBuf, ObsSpace};
use std::f64::consts::PI;

const MAX_SPEED: f64 = 8.0;
const MAX_TORQUE: f32 = 2.0;
const DT: f64 = 0.05;
const GRAVITY: f64 = 10.0;
const MASS: f64 = 1.0;
const LENGTH: f64 = 1.0;
/// Reset draws the angle from `[-pi, pi)` and the angular speed from `[-1, 1)`.
const RESET_SPEED: f64 = 1.0;
pub const MAX_STEPS: u32 = 200;

/// State `[theta, theta_dot]` (theta 0 is upright, not wrapped); observation
/// `[cos theta, sin theta, theta_dot]`.
#[derive(Debug, Clone)]
pub struct Pendulum {
    state: [f64; 2],
    steps: u32,
    np_random: NumpyGenerator,
}

/// numpy's float64 `a % b`: the remainder with the sign of `b` (Python's modulo).
fn numpy_remainder(a: f64, b: f64) -> f64 {
    let rem = a % b;
    if rem == 0.0 {
        0.0f64.copysign(b)
    } else if (b < 0.0) != (rem < 0.0) {
        rem + b
    } else {
        rem
    }
}

/// The angle moved by whole turns into `[-pi, pi)`, as gymnasium computes it.
fn angle_normalize(x: f64) -> f64 {
    numpy_remainder(x + PI, 2.0 * PI) - PI
}

impl Pendulum {
    pub fn new(seed: u64) -> Self {
        Pendulum {
            state: [0.0; 2],
            steps: 0,
            np_random: NumpyGenerator::from_seed(seed),
        }
    }

    pub fn state(&self) -> [f64; 2] {
        self.state
    }

    fn write_obs(&self, mut obs: ObsBuf<'_>) {
        let [theta, theta_dot] = self.state;
        obs.write_f32(&[theta.cos() as f32, theta.sin() as f32, theta_dot as f32]);
    }

    /// One step with torque `action` (float32, clipped to [-2, 2] in float32 as
    /// gymnasium's `np.clip` does); returns the reward. The torque terms stay float32
    /// until they meet a float64 value, as in numpy.
    fn advance(&mut self, action: f32) -> f64 {
        let [theta, theta_dot] = self.state;
        let u = action.clamp(-MAX_TORQUE, MAX_TORQUE);
        // Python floats meeting a float32 are rounded to float32 first (numpy 2).
        let torque_cost = 0.001f64 as f32 * numpy_square_f32(u);
        let cost = numpy_square(angle_normalize(theta))
            + 0.1 * numpy_square(theta_dot)
            + f64::from(torque_cost);
        let gravity_term = 3.0 * GRAVITY / (2.0 * LENGTH) * theta.sin();
        let torque_term = (3.0 / (MASS * LENGTH * LENGTH)) as f32 * u;
        let new_theta_dot = theta_dot + (gravity_term + f64::from(torque_term)) * DT;
        let new_theta_dot = new_theta_dot.clamp(-MAX_SPEED, MAX_SPEED);
        self.state = [theta + new_theta_dot * DT, new_theta_dot];
        -cost
    }
}

impl Env for Pendulum {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(3, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::uniform_box(1, -MAX_TORQUE, MAX_TORQUE)
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.np_random.reseed(seed);
        self.state = [
            self.np_random.uniform(-PI, PI),
            self.np_random.uniform(-RESET_SPEED, RESET_SPEED),
        ];
        self.steps = 0;
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let reward = self.advance(action.values()[0]);
        self.steps += 1;
        self.write_obs(obs);
        Step::game(reward as f32, false, self.steps >= MAX_STEPS)
    }

    /// A 200x200 picture: the rod from the pivot at the centre (upright is up).
    fn render_rgb(&self) -> Option<RgbFrame> {
        let reach = LENGTH * 1.2;
        let mut canvas = Canvas::square(200, -reach, -reach, 2.0 * reach);
        let theta = self.state[0];
        let end = (-LENGTH * theta.sin(), LENGTH * theta.cos());
        canvas.line((0.0, 0.0), end, 0.2, [204, 77, 77]);
        canvas.disc(0.0, 0.0, 0.05, [0, 0, 0]);
        Some(canvas.finish())
    }

    crate::snapshot::game_snapshot_methods!(
        "pendulum",
        params: [],
        state: [state, steps, np_random]
    );
}

//! Acrobot-v1: two links hanging from a fixed pivot, torque on the joint between them
//! (Sutton's book dynamics, gymnasium's default `book_or_nips = "book"`), one
//! fourth-order Runge-Kutta step of 0.2 s per action; reward -1 per step until the
//! free end rises one link length above the pivot, truncated after 500 steps.

use super::canvas::Canvas;
use crate::env::{Env, RgbFrame, Step};
use crate::gym_seeding::NumpyGenerator;
use crate::space::{Action, ActionSpace, Dtype, ObsBuf, ObsSpace};
use std::f64::consts::PI;

const DT: f64 = 0.2;
const LINK_LENGTH_1: f64 = 1.0;
/// Only drawn: the dynamics need the second link's centre of mass, not its length.
const LINK_LENGTH_2: f64 = 1.0;
const LINK_MASS_1: f64 = 1.0;
const LINK_MASS_2: f64 = 1.0;
const LINK_COM_1: f64 = 0.5;
const LINK_COM_2: f64 = 0.5;
const LINK_MOI: f64 = 1.0;
const GRAVITY: f64 = 9.8;
const MAX_VEL_1: f64 = 4.0 * PI;
const MAX_VEL_2: f64 = 9.0 * PI;
/// Torque of actions 0, 1 and 2.
const TORQUES: [f64; 3] = [-1.0, 0.0, 1.0];
/// Reset draws each state value from `[-RESET_BOUND, RESET_BOUND)`.
const RESET_BOUND: f64 = 0.1;
pub const MAX_STEPS: u32 = 500;

/// State `[theta1, theta2, dtheta1, dtheta2]` (`theta2` relative to the first link);
/// actions 0, 1, 2 apply torque -1, 0, +1. Observation
/// `[cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2]`.
#[derive(Debug, Clone)]
pub struct Acrobot {
    state: [f64; 4],
    /// gymnasium keeps the reset state as a float32 array (so its first observation
    /// takes numpy's float32 cosine and sine) and every later state as float64.
    state_is_f32: bool,
    steps: u32,
    np_random: NumpyGenerator,
}

impl Acrobot {
    pub fn new(seed: u64) -> Self {
        Acrobot {
            state: [0.0; 4],
            state_is_f32: true,
            steps: 0,
            np_random: NumpyGenerator::from_seed(seed),
        }
    }

    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    fn write_obs(&self, mut obs: ObsBuf<'_>) {
        let [theta1, theta2, dtheta1, dtheta2] = self.state;
        let (cos1, sin1, cos2, sin2) = if self.state_is_f32 {
            let (t1, t2) = (theta1 as f32, theta2 as f32);
            (f32_cos(t1), f32_sin(t1), f32_cos(t2), f32_sin(t2))
        } else {
            let f = |v: f64| v as f32;
            (
                f(theta1.cos()),
                f(theta1.sin()),
                f(theta2.cos()),
                f(theta2.sin()),
            )
        };
        obs.write_f32(&[cos1, sin1, cos2, sin2, dtheta1 as f32, dtheta2 as f32]);
    }

    /// One step with torque `TORQUES[action]`; returns whether the goal was reached.
    fn advance(&mut self, action: usize) -> bool {
        let [t1, t2, d1, d2] = self.state;
        let next = rk4([t1, t2, d1, d2, TORQUES[action]]);
        self.state = [
            wrap(next[0], -PI, PI),
            wrap(next[1], -PI, PI),
            bound(next[2], -MAX_VEL_1, MAX_VEL_1),
            bound(next[3], -MAX_VEL_2, MAX_VEL_2),
        ];
        self.state_is_f32 = false;
        let [t1, t2, ..] = self.state;
        -t1.cos() - (t2 + t1).cos() > 1.0
    }
}

/// The time derivative of `[theta1, theta2, dtheta1, dtheta2, torque]`.
fn derivatives(s: [f64; 5]) -> [f64; 5] {
    let (m1, m2, l1, lc1, lc2) = (
        LINK_MASS_1,
        LINK_MASS_2,
        LINK_LENGTH_1,
        LINK_COM_1,
        LINK_COM_2,
    );
    let (i1, i2, g) = (LINK_MOI, LINK_MOI, GRAVITY);
    let [theta1, theta2, dtheta1, dtheta2, torque] = s;
    let sq = super::numpy_square;
    let (cos2, sin2) = (theta2.cos(), theta2.sin());
    // Grouped as gymnasium writes them: Python evaluates left to right, and so does Rust.
    let d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * cos2) + i1 + i2;
    let d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos2) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * sq(dtheta2) * sin2 - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * sq(dtheta1) * sin2 - phi2)
        / (m2 * (lc2 * lc2) + i2 - sq(d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

/// One classic Runge-Kutta step of length [`DT`], element-wise as numpy evaluates
/// `y + dt / 6 * (k1 + 2 k2 + 2 k3 + k4)`.
fn rk4(y: [f64; 5]) -> [f64; 5] {
    let half = DT / 2.0;
    let shifted = |k: &[f64; 5], h: f64| std::array::from_fn(|i| y[i] + h * k[i]);
    let k1 = derivatives(y);
    let k2 = derivatives(shifted(&k1, half));
    let k3 = derivatives(shifted(&k2, half));
    let k4 = derivatives(shifted(&k3, DT));
    std::array::from_fn(|i| y[i] + DT / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]))
}

/// `x` moved by whole turns of `max - min` into `[min, max]`.
fn wrap(mut x: f64, min: f64, max: f64) -> f64 {
    let turn = max - min;
    while x > max {
        x -= turn;
    }
    while x < min {
        x += turn;
    }
    x
}

/// `min(max(x, low), high)` with Python's builtins (which keep `x` on ties).
fn bound(x: f64, low: f64, high: f64) -> f64 {
    let x = if low > x { low } else { x };
    if high < x { high } else { x }
}

/// numpy's float32 sine kernel for `|x| <= pi/4`, where it needs no range reduction:
/// an odd minimax polynomial evaluated with fused multiply-adds. It is not the
/// correctly rounded sine, and Acrobot's first observation (of a float32 state)
/// carries its last bits. Only reset states (`|x| <= 0.1`) come here.
fn f32_sin(x: f32) -> f32 {
    debug_assert!(x.abs() <= std::f32::consts::FRAC_PI_4);
    let x2 = x * x;
    let r = f32::from_bits(0x363e_9dde).mul_add(x2, f32::from_bits(0xb950_35dd));
    let r = r.mul_add(x2, f32::from_bits(0x3c08_88cd));
    let r = r.mul_add(x2, f32::from_bits(0xbe2a_aaab));
    let r = r.mul_add(x2, 0.0);
    r.mul_add(x, x)
}

/// numpy's float32 cosine kernel for `|x| <= pi/4` (see [`f32_sin`]).
fn f32_cos(x: f32) -> f32 {
    debug_assert!(x.abs() <= std::f32::consts::FRAC_PI_4);
    let x2 = x * x;
    let r = f32::from_bits(0x37cc_730b).mul_add(x2, f32::from_bits(0xbab6_036e));
    let r = r.mul_add(x2, f32::from_bits(0x3d2a_aa9e));
    let r = r.mul_add(x2, -0.5);
    r.mul_add(x2, 1.0)
}

impl Env for Acrobot {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(6, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(TORQUES.len())
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.np_random.reseed(seed);
        for v in &mut self.state {
            *v = f64::from(self.np_random.uniform(-RESET_BOUND, RESET_BOUND) as f32);
        }
        self.state_is_f32 = true;
        self.steps = 0;
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let terminated = self.advance(action.index());
        self.steps += 1;
        self.write_obs(obs);
        let reward = if terminated { 0.0 } else { -1.0 };
        Step::game(
            reward,
            terminated,
            super::truncated(terminated, self.steps, MAX_STEPS),
        )
    }

    /// A 250x250 picture: both links from the pivot at the centre, and the line the
    /// free end must rise above.
    fn render_rgb(&self) -> Option<RgbFrame> {
        let reach = LINK_LENGTH_1 + LINK_LENGTH_2 + 0.2;
        let mut canvas = Canvas::square(250, -reach, -reach, 2.0 * reach);
        canvas.line((-reach, 1.0), (reach, 1.0), 0.02, [0, 0, 0]);
        let [theta1, theta2, ..] = self.state;
        let elbow = (LINK_LENGTH_1 * theta1.sin(), -LINK_LENGTH_1 * theta1.cos());
        let tip = (
            elbow.0 + LINK_LENGTH_2 * (theta1 + theta2).sin(),
            elbow.1 - LINK_LENGTH_2 * (theta1 + theta2).cos(),
        );
        for (from, to) in [((0.0, 0.0), elbow), (elbow, tip)] {
            canvas.line(from, to, 0.2, [0, 204, 204]);
            canvas.disc(from.0, from.1, 0.1, [204, 204, 0]);
        }
        Some(canvas.finish())
    }

    crate::snapshot::game_snapshot_methods!(
        "acrobot",
        params: [],
        state: [state, state_is_f32, steps, np_random]
    );
}

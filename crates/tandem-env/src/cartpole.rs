//! CartPole-v1: the classic cart-pole balancing dynamics (Barto, Sutton and Anderson,
//! with the explicit-Euler integration and thresholds Gym uses), reward 1 per step,
//! episodes truncated after 500 steps.

use crate::env::{Env, RgbFrame, Step};
use crate::rng::Xoshiro256;
use crate::space::{Action, ActionSpace, Dtype, ObsBuf, ObsSpace};

const GRAVITY: f64 = 9.8;
const CART_MASS: f64 = 1.0;
const POLE_MASS: f64 = 0.1;
const TOTAL_MASS: f64 = CART_MASS + POLE_MASS;
/// Half the pole's length.
const POLE_HALF_LENGTH: f64 = 0.5;
const POLE_MASS_LENGTH: f64 = POLE_MASS * POLE_HALF_LENGTH;
const FORCE: f64 = 10.0;
const TAU: f64 = 0.02;
const ANGLE_LIMIT: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const POSITION_LIMIT: f64 = 2.4;
pub const MAX_STEPS: u32 = 500;

/// State `[x, x_dot, theta, theta_dot]`; actions 0 (push left) and 1 (push right).
#[derive(Debug, Clone)]
pub struct CartPole {
    state: [f64; 4],
    steps: u32,
    rng: Xoshiro256,
}

impl CartPole {
    pub fn new(seed: u64) -> Self {
        CartPole {
            state: [0.0; 4],
            steps: 0,
            rng: Xoshiro256::new(seed),
        }
    }

    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    /// Starts a new episode from `state` instead of a drawn one (the parity test puts the
    /// cart where gymnasium's own reset put it, since the two draw start states apart).
    pub fn start_at(&mut self, state: [f64; 4], obs: ObsBuf<'_>) {
        self.state = state;
        self.steps = 0;
        self.write_obs(obs);
    }

    fn write_obs(&self, mut obs: ObsBuf<'_>) {
        let values = self.state.map(|v| v as f32);
        obs.write_f32(&values);
    }
}

impl Env for CartPole {
    fn observation_space(&self) -> ObsSpace {
        ObsSpace::vector(4, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(2)
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        if let Some(seed) = seed {
            self.rng = Xoshiro256::new(seed);
        }
        for v in &mut self.state {
            *v = self.rng.uniform(-0.05, 0.05);
        }
        self.steps = 0;
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let action = action.index();
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action == 1 { FORCE } else { -FORCE };
        let (sin, cos) = theta.sin_cos();
        let temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin - cos * temp)
            / (POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        self.state = [
            x + TAU * x_dot,
            x_dot + TAU * x_acc,
            theta + TAU * theta_dot,
            theta_dot + TAU * theta_acc,
        ];
        self.steps += 1;
        let [x, _, theta, _] = self.state;
        let terminated = !(-POSITION_LIMIT..=POSITION_LIMIT).contains(&x)
            || !(-ANGLE_LIMIT..=ANGLE_LIMIT).contains(&theta);
        let truncated = !terminated && self.steps >= MAX_STEPS;
        self.write_obs(obs);
        Step::game(1.0, terminated, truncated)
    }

    crate::snapshot::game_snapshot_methods!("cartpole", params: [], state: [state, steps, rng]);

    /// A 160x240 side view: track, cart and pole.
    fn render_rgb(&self) -> Option<RgbFrame> {
        const H: usize = 160;
        const W: usize = 240;
        let mut pixels = vec![255u8; H * W * 3];
        let scale = W as f64 / (2.0 * POSITION_LIMIT * 1.2);
        let cart_x = (self.state[0] * scale + W as f64 / 2.0) as i64;
        let track_y = 120i64;
        let mut put = |x: i64, y: i64, rgb: [u8; 3]| {
            if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
                let i = (y as usize * W + x as usize) * 3;
                pixels[i..i + 3].copy_from_slice(&rgb);
            }
        };
        for x in 0..W as i64 {
            put(x, track_y, [0, 0, 0]);
        }
        for y in track_y - 8..track_y + 2 {
            for x in cart_x - 12..=cart_x + 12 {
                put(x, y, [40, 40, 40]);
            }
        }
        let pole_len = 2.0 * POLE_HALF_LENGTH * scale;
        let (sin, cos) = self.state[2].sin_cos();
        for t in 0..=(pole_len as i64) {
            let px = cart_x as f64 + sin * t as f64;
            let py = (track_y - 8) as f64 - cos * t as f64;
            for dx in -1..=1 {
                put(px as i64 + dx, py as i64, [202, 152, 101]);
            }
        }
        Some(RgbFrame {
            height: H,
            width: W,
            pixels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_draws_from_the_small_uniform_box() {
        let mut env = CartPole::new(1);
        let mut obs = [0f32; 4];
        for _ in 0..50 {
            env.reset(None, ObsBuf::F32(&mut obs));
            assert!(obs.iter().all(|v| v.abs() <= 0.05), "{obs:?}");
        }
    }

    #[test]
    fn one_step_follows_the_euler_dynamics() {
        let mut env = CartPole::new(0);
        env.state = [0.0; 4];
        let mut obs = [0f32; 4];
        let step = env.step(Action::Discrete(1), ObsBuf::F32(&mut obs));
        // From rest, pushing right: x_dot = tau * F / M_total * (1 + correction), theta_dot < 0.
        let temp = FORCE / TOTAL_MASS;
        let theta_acc = -temp / (POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc / TOTAL_MASS;
        assert_eq!(env.state, [0.0, TAU * x_acc, 0.0, TAU * theta_acc]);
        assert_eq!(step, Step::game(1.0, false, false));
    }

    #[test]
    fn falls_within_a_few_dozen_steps_when_pushed_one_way_and_truncates_at_500() {
        let mut env = CartPole::new(5);
        env.reset(None, ObsBuf::Skip);
        let steps = (1..)
            .find(|_| env.step(Action::Discrete(1), ObsBuf::Skip).terminated)
            .unwrap();
        assert!((5..60).contains(&steps), "{steps}");

        // Keep the pole balanced by hand-holding the state: only the step counter ends it.
        env.reset(None, ObsBuf::Skip);
        let mut last = Step::default();
        for _ in 0..MAX_STEPS {
            env.state = [0.0; 4];
            last = env.step(Action::Discrete(0), ObsBuf::Skip);
        }
        assert!(last.truncated && !last.terminated && last.game_over);
        assert!(env.render_rgb().is_some());
    }
}

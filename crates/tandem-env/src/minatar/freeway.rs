//! MinAtar Freeway.
//!
//! Rules: a chicken in column 4 starts on the bottom row (9) and tries to cross eight
//! lanes (rows 1-8) to row 0, which scores 1, sends it back to row 9 and redraws every
//! car's speed. It can move one row up or down at most once every 3 steps. Each lane has
//! one car moving left or right, one cell every |speed| + 1 steps (speed 1-5, drawn at
//! random with a random direction), wrapping around the edges. A car on the chicken's
//! cell (before or after moving) sends it back to row 9. The game ends after 2501 steps.
//! The observation has seven channels: chicken, car, and the cell behind each car in a
//! channel per speed (1-5).
//!
//! Randomness: one MT19937 `RandomState` per game for the sticky actions (one `rand()`
//! per step) and the car speeds (`randint(1, 6, 8)` then `rand(8)` for the directions,
//! at every reset and every crossing), as minatar draws them.

use super::{GRID, minatar_env};
use crate::env::{Env, Step};
use crate::mt19937::RandomState;
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};

const CHANNELS: usize = 7;
const CHICKEN: usize = 0;
const CAR: usize = 1;
/// Channel of the trail of a car with |speed| 1; speed s uses `SPEED1 + s - 1`.
const SPEED1: usize = 2;
const LANES: usize = 8;
const CHICKEN_X: i32 = 4;
const MOVE_COOLDOWN: i32 = 3;
const TIME_LIMIT: i32 = 2500;
/// Full-set indices of the minimal action set (stay, up, down).
const MINIMAL_ACTIONS: [usize; 3] = [0, 2, 4];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Car {
    x: i32,
    /// Steps until the next move.
    timer: i32,
    /// Signed: positive moves right.
    speed: i32,
}

crate::snapshot::persist_fields!(Car { x, timer, speed });

/// MinAtar Freeway with minatar's sticky actions.
#[derive(Debug, Clone)]
pub struct Freeway {
    rng: RandomState,
    sticky_action_prob: f64,
    full_action_set: bool,
    last_action: usize,
    /// Car of lane `i` (row `i + 1`).
    cars: [Car; LANES],
    chicken_y: i32,
    move_timer: i32,
    terminate_timer: i32,
    terminal: bool,
}

impl Freeway {
    /// A game seeded like minatar's `Environment("freeway")` after `seed(seed)` and
    /// `reset()` (see [`crate::mt19937::RandomState::from_u64`] for 64-bit seeds).
    pub fn new(seed: u64, sticky_action_prob: f64, full_action_set: bool) -> Self {
        let mut game = Freeway {
            rng: RandomState::from_u64(seed),
            sticky_action_prob,
            full_action_set,
            last_action: 0,
            cars: [Car {
                x: 0,
                timer: 0,
                speed: 0,
            }; LANES],
            chicken_y: 0,
            move_timer: 0,
            terminate_timer: 0,
            terminal: false,
        };
        game.reset_game();
        game
    }

    /// Draws new signed speeds for all lanes; `restart` also puts the cars at column 0.
    fn randomize_cars(&mut self, restart: bool) {
        let mut speeds = [0i32; LANES];
        for s in &mut speeds {
            *s = self.rng.randint(1, 6) as i32;
        }
        for s in &mut speeds {
            let r = self.rng.rand() - 0.5;
            // numpy.sign: 0 for an exact 0.5 draw.
            *s *= if r > 0.0 {
                1
            } else if r < 0.0 {
                -1
            } else {
                0
            };
        }
        for (car, &speed) in self.cars.iter_mut().zip(&speeds) {
            if restart {
                car.x = 0;
            }
            car.timer = speed.abs();
            car.speed = speed;
        }
    }

    /// `minatar.Environment.reset`.
    pub fn reset_game(&mut self) {
        self.randomize_cars(true);
        self.chicken_y = GRID as i32 - 1;
        self.move_timer = MOVE_COOLDOWN;
        self.terminate_timer = TIME_LIMIT;
        self.terminal = false;
    }

    fn hits(&self, car: &Car, lane: usize) -> bool {
        car.x == CHICKEN_X && lane as i32 + 1 == self.chicken_y
    }

    fn advance(&mut self, action: usize) -> f32 {
        if self.terminal {
            return 0.0;
        }
        let bottom = GRID as i32 - 1;
        if self.move_timer == 0 {
            match action {
                2 => {
                    self.move_timer = MOVE_COOLDOWN;
                    self.chicken_y = (self.chicken_y - 1).max(0);
                }
                4 => {
                    self.move_timer = MOVE_COOLDOWN;
                    self.chicken_y = (self.chicken_y + 1).min(bottom);
                }
                _ => {}
            }
        }
        let mut reward = 0.0;
        if self.chicken_y == 0 {
            reward += 1.0;
            self.randomize_cars(false);
            self.chicken_y = bottom;
        }
        for lane in 0..LANES {
            if self.hits(&self.cars[lane], lane) {
                self.chicken_y = bottom;
            }
            let car = &mut self.cars[lane];
            if car.timer == 0 {
                car.timer = car.speed.abs();
                car.x += if car.speed > 0 { 1 } else { -1 };
                if car.x < 0 {
                    car.x = bottom;
                } else if car.x > bottom {
                    car.x = 0;
                }
                if self.hits(&self.cars[lane], lane) {
                    self.chicken_y = bottom;
                }
            } else {
                car.timer -= 1;
            }
        }
        if self.move_timer > 0 {
            self.move_timer -= 1;
        }
        self.terminate_timer -= 1;
        if self.terminate_timer < 0 {
            self.terminal = true;
        }
        reward
    }

    /// Steps with an index of minatar's full action set (0..6), exactly as
    /// `minatar.Environment.act`; returns the reward and whether the game is over.
    pub fn act_full(&mut self, action: usize) -> (f32, bool) {
        let executed = if self.rng.rand() < self.sticky_action_prob {
            self.last_action
        } else {
            action
        };
        self.last_action = executed;
        let reward = self.advance(executed);
        (reward, self.terminal)
    }

    fn draw(&self, mut set: impl FnMut(usize, usize, usize)) {
        set(CHICKEN, CHICKEN_X as usize, self.chicken_y as usize);
        let last = GRID as i32 - 1;
        for (lane, car) in self.cars.iter().enumerate() {
            let y = lane + 1;
            set(CAR, car.x as usize, y);
            let mut behind = if car.speed > 0 { car.x - 1 } else { car.x + 1 };
            if behind < 0 {
                behind = last;
            } else if behind > last {
                behind = 0;
            }
            // A car of speed 0 (an exact 0.5 direction draw) has no trail channel.
            if (1..=5).contains(&car.speed.abs()) {
                set(
                    SPEED1 + car.speed.unsigned_abs() as usize - 1,
                    behind as usize,
                    y,
                );
            }
        }
    }

    /// The observation as 700 booleans in minatar's layout (10x10x7, height-width-channel).
    pub fn state_hwc(&self) -> Vec<bool> {
        let mut out = vec![false; GRID * GRID * CHANNELS];
        self.draw(|c, x, y| out[(y * GRID + x) * CHANNELS + c] = true);
        out
    }

    fn write_obs(&self, obs: ObsBuf<'_>) {
        let ObsBuf::F32(out) = obs else { return };
        out.fill(0.0);
        self.draw(|c, x, y| out[c * GRID * GRID + y * GRID + x] = 1.0);
    }
}

minatar_env!(
    Freeway,
    "minatar-freeway",
    reset: reset_game,
    params: [sticky_action_prob, full_action_set],
    state: [rng, last_action, cars, chicken_y, move_timer, terminate_timer, terminal]
);

//! MinAtar Asterix.
//!
//! Rules: the player moves on a 10x10 field, rows 1-8. Each of those eight rows holds
//! at most one entity, an enemy or a treasure, that enters at the left or right edge
//! and crosses the field one cell per move tick, leaving a trail cell behind it.
//! Touching a treasure scores 1 and removes it; touching an enemy ends the game.
//! Every `spawn_speed` steps a new entity appears in a random free row (direction and
//! kind drawn first: right-moving with probability 1/2, treasure with 1/3); entities move
//! every `move_speed` steps. With difficulty ramping, every 102nd step the spawn
//! interval shrinks by one and, on every other such ramp, the move interval too, both
//! down to 1.
//!
//! Randomness: one MT19937 `RandomState` per game for the sticky actions (one `rand()`
//! per step, before the game moves) and the spawns (`rand()`, `rand()`, then
//! `randint(free rows)` when a row is free), as minatar draws them.

use super::{GRID, minatar_env};
use crate::env::{Env, Step};
use crate::mt19937::RandomState;
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};

const CHANNELS: usize = 4;
const PLAYER: usize = 0;
const ENEMY: usize = 1;
const TRAIL: usize = 2;
const TREASURE: usize = 3;
const ROWS: usize = 8;
const RAMP_INTERVAL: i32 = 100;
const INITIAL_SPAWN_SPEED: i32 = 10;
const INITIAL_MOVE_SPEED: i32 = 5;
/// Full-set indices of the minimal action set (stay, left, up, right, down).
const MINIMAL_ACTIONS: [usize; 5] = [0, 1, 2, 3, 4];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Entity {
    x: i32,
    moving_right: bool,
    treasure: bool,
}

crate::snapshot::persist_fields!(Entity {
    x,
    moving_right,
    treasure
});

/// MinAtar Asterix with minatar's sticky actions and difficulty ramping.
#[derive(Debug, Clone)]
pub struct Asterix {
    rng: RandomState,
    sticky_action_prob: f64,
    full_action_set: bool,
    ramping: bool,
    last_action: usize,
    player_x: i32,
    player_y: i32,
    /// Entity of row `i + 1`.
    rows: [Option<Entity>; ROWS],
    spawn_speed: i32,
    spawn_timer: i32,
    move_speed: i32,
    move_timer: i32,
    ramp_timer: i32,
    ramp_index: i32,
    terminal: bool,
}

impl Asterix {
    /// A game seeded like minatar's `Environment("asterix")` after `seed(seed)` and
    /// `reset()` (see [`crate::mt19937::RandomState::from_u64`] for 64-bit seeds).
    pub fn new(seed: u64, sticky_action_prob: f64, full_action_set: bool) -> Self {
        let mut game = Asterix {
            rng: RandomState::from_u64(seed),
            sticky_action_prob,
            full_action_set,
            ramping: true,
            last_action: 0,
            player_x: 0,
            player_y: 0,
            rows: [None; ROWS],
            spawn_speed: 0,
            spawn_timer: 0,
            move_speed: 0,
            move_timer: 0,
            ramp_timer: 0,
            ramp_index: 0,
            terminal: false,
        };
        game.reset_game();
        game
    }

    /// `minatar.Environment.reset` (draws nothing).
    pub fn reset_game(&mut self) {
        self.player_x = 5;
        self.player_y = 5;
        self.rows = [None; ROWS];
        self.spawn_speed = INITIAL_SPAWN_SPEED;
        self.spawn_timer = self.spawn_speed;
        self.move_speed = INITIAL_MOVE_SPEED;
        self.move_timer = self.move_speed;
        self.ramp_timer = RAMP_INTERVAL;
        self.ramp_index = 0;
        self.terminal = false;
    }

    fn spawn(&mut self) {
        let moving_right = self.rng.rand() < 0.5;
        let treasure = self.rng.rand() < 1.0 / 3.0;
        let free: Vec<usize> = (0..ROWS).filter(|&r| self.rows[r].is_none()).collect();
        if free.is_empty() {
            return;
        }
        let row = free[self.rng.randint(0, free.len() as i64) as usize];
        self.rows[row] = Some(Entity {
            x: if moving_right { 0 } else { 9 },
            moving_right,
            treasure,
        });
    }

    /// Resolves contact between the player and the entity in its row.
    fn touch(&mut self, reward: &mut f32) {
        let row = (self.player_y - 1) as usize;
        if let Some(e) = self.rows[row]
            && e.x == self.player_x
        {
            if e.treasure {
                self.rows[row] = None;
                *reward += 1.0;
            } else {
                self.terminal = true;
            }
        }
    }

    fn advance(&mut self, action: usize) -> f32 {
        if self.terminal {
            return 0.0;
        }
        if self.spawn_timer == 0 {
            self.spawn();
            self.spawn_timer = self.spawn_speed;
        }
        match action {
            1 => self.player_x = (self.player_x - 1).max(0),
            3 => self.player_x = (self.player_x + 1).min(9),
            2 => self.player_y = (self.player_y - 1).max(1),
            4 => self.player_y = (self.player_y + 1).min(ROWS as i32),
            _ => {}
        }
        let mut reward = 0.0;
        self.touch(&mut reward);
        if self.move_timer == 0 {
            self.move_timer = self.move_speed;
            for slot in &mut self.rows {
                if let Some(e) = slot {
                    e.x += if e.moving_right { 1 } else { -1 };
                    if !(0..GRID as i32).contains(&e.x) {
                        *slot = None;
                    }
                }
            }
            self.touch(&mut reward);
        }
        self.spawn_timer -= 1;
        self.move_timer -= 1;
        if self.ramping && (self.spawn_speed > 1 || self.move_speed > 1) {
            if self.ramp_timer >= 0 {
                self.ramp_timer -= 1;
            } else {
                if self.move_speed > 1 && self.ramp_index % 2 == 1 {
                    self.move_speed -= 1;
                }
                if self.spawn_speed > 1 {
                    self.spawn_speed -= 1;
                }
                self.ramp_index += 1;
                self.ramp_timer = RAMP_INTERVAL;
            }
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

    /// The observation as 400 booleans in minatar's layout (10x10x4, height-width-channel).
    pub fn state_hwc(&self) -> [bool; GRID * GRID * CHANNELS] {
        let mut out = [false; GRID * GRID * CHANNELS];
        self.draw(|c, x, y| out[(y * GRID + x) * CHANNELS + c] = true);
        out
    }

    fn draw(&self, mut set: impl FnMut(usize, usize, usize)) {
        set(PLAYER, self.player_x as usize, self.player_y as usize);
        for (r, e) in self.rows.iter().enumerate() {
            let Some(e) = e else { continue };
            let y = r + 1;
            set(if e.treasure { TREASURE } else { ENEMY }, e.x as usize, y);
            let behind = if e.moving_right { e.x - 1 } else { e.x + 1 };
            if (0..GRID as i32).contains(&behind) {
                set(TRAIL, behind as usize, y);
            }
        }
    }

    fn write_obs(&self, obs: ObsBuf<'_>) {
        let ObsBuf::F32(out) = obs else { return };
        out.fill(0.0);
        self.draw(|c, x, y| out[c * GRID * GRID + y * GRID + x] = 1.0);
    }
}

minatar_env!(
    Asterix,
    "minatar-asterix",
    reset: reset_game,
    params: [sticky_action_prob, full_action_set, ramping],
    state: [rng, last_action, player_x, player_y, rows, spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index, terminal]
);

//! MinAtar Space Invaders.
//!
//! Rules: a cannon on the bottom row moves left or right or fires (at most once every
//! 5 steps); its bullets rise one row per step. A 4x6 block of aliens (rows 0-3, columns
//! 2-7) marches sideways, one column per move tick, and steps down a row (turning
//! around) when it reaches a side; the move interval is the smaller of the number of
//! aliens left and the level's interval (12, one less per cleared wave down to 6 with
//! ramping). Every 10 steps the alien nearest the cannon's column (ties: the lower
//! column; within the column, the lowest alien) drops a bullet that falls one row per
//! step. Shooting an alien scores 1. The game ends when an enemy bullet or an alien
//! reaches the cannon's cell, or the aliens would step down from the bottom row. A
//! cleared wave is replaced at once. Six channels: cannon, alien, alien moving left,
//! alien moving right, friendly bullet, enemy bullet.
//!
//! Randomness: none in the game; the MT19937 `RandomState` only drives the sticky
//! actions (one `rand()` per step), as in minatar.

use super::{GRID, minatar_env};
use crate::env::{Env, Step};
use crate::mt19937::RandomState;
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};

const CHANNELS: usize = 6;
const CANNON: usize = 0;
const ALIEN: usize = 1;
const ALIEN_LEFT: usize = 2;
const ALIEN_RIGHT: usize = 3;
const FRIENDLY_BULLET: usize = 4;
const ENEMY_BULLET: usize = 5;
const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_MOVE_INTERVAL: i32 = 12;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const BOTTOM: usize = GRID - 1;
const FULL_ROW: u16 = (1 << GRID) - 1;
/// Columns 2-7 of a fresh wave.
const WAVE_ROW: u16 = 0b00_1111_1100;
/// Full-set indices of the minimal action set (stay, left, right, fire).
const MINIMAL_ACTIONS: [usize; 4] = [0, 1, 3, 5];

/// Rows of cells as bit masks: bit x of `rows[y]` is cell (y, x).
type Grid = [u16; GRID];

fn has(grid: &Grid, x: usize, y: usize) -> bool {
    grid[y] >> x & 1 == 1
}

fn column_occupied(grid: &Grid, x: usize) -> bool {
    grid.iter().any(|row| row >> x & 1 == 1)
}

/// MinAtar Space Invaders with minatar's sticky actions and difficulty ramping.
#[derive(Debug, Clone)]
pub struct SpaceInvaders {
    rng: RandomState,
    sticky_action_prob: f64,
    full_action_set: bool,
    ramping: bool,
    last_action: usize,
    cannon: usize,
    friendly_bullets: Grid,
    enemy_bullets: Grid,
    aliens: Grid,
    /// -1: moving left, 1: moving right.
    alien_dir: i32,
    enemy_move_interval: i32,
    alien_move_timer: i32,
    alien_shot_timer: i32,
    ramp_index: i32,
    shot_timer: i32,
    terminal: bool,
}

impl SpaceInvaders {
    /// A game seeded like minatar's `Environment("space_invaders")` after `seed(seed)`
    /// and `reset()` (see [`crate::mt19937::RandomState::from_u64`] for 64-bit seeds).
    pub fn new(seed: u64, sticky_action_prob: f64, full_action_set: bool) -> Self {
        let mut game = SpaceInvaders {
            rng: RandomState::from_u64(seed),
            sticky_action_prob,
            full_action_set,
            ramping: true,
            last_action: 0,
            cannon: 0,
            friendly_bullets: [0; GRID],
            enemy_bullets: [0; GRID],
            aliens: [0; GRID],
            alien_dir: -1,
            enemy_move_interval: 0,
            alien_move_timer: 0,
            alien_shot_timer: 0,
            ramp_index: 0,
            shot_timer: 0,
            terminal: false,
        };
        game.reset_game();
        game
    }

    fn new_wave(aliens: &mut Grid) {
        for row in &mut aliens[0..4] {
            *row = WAVE_ROW;
        }
    }

    /// `minatar.Environment.reset` (draws nothing).
    pub fn reset_game(&mut self) {
        self.cannon = 5;
        self.friendly_bullets = [0; GRID];
        self.enemy_bullets = [0; GRID];
        self.aliens = [0; GRID];
        Self::new_wave(&mut self.aliens);
        self.alien_dir = -1;
        self.enemy_move_interval = ENEMY_MOVE_INTERVAL;
        self.alien_move_timer = self.enemy_move_interval;
        self.alien_shot_timer = ENEMY_SHOT_INTERVAL;
        self.ramp_index = 0;
        self.shot_timer = 0;
        self.terminal = false;
    }

    fn alien_count(&self) -> i32 {
        self.aliens.iter().map(|r| r.count_ones() as i32).sum()
    }

    /// The lowest alien of the occupied column nearest the cannon (lower column on ties).
    fn nearest_alien(&self) -> Option<(usize, usize)> {
        let mut columns: Vec<usize> = (0..GRID).collect();
        columns.sort_by_key(|&x| x.abs_diff(self.cannon));
        let x = columns
            .into_iter()
            .find(|&x| column_occupied(&self.aliens, x))?;
        let y = (0..GRID).rev().find(|&y| has(&self.aliens, x, y))?;
        Some((x, y))
    }

    fn advance(&mut self, action: usize) -> f32 {
        if self.terminal {
            return 0.0;
        }
        match action {
            5 if self.shot_timer == 0 => {
                self.friendly_bullets[BOTTOM] |= 1 << self.cannon;
                self.shot_timer = SHOT_COOL_DOWN;
            }
            1 => self.cannon = self.cannon.saturating_sub(1),
            3 => self.cannon = (self.cannon + 1).min(BOTTOM),
            _ => {}
        }
        // Friendly bullets rise a row (those on the top row leave); enemy bullets fall.
        self.friendly_bullets.rotate_left(1);
        self.friendly_bullets[BOTTOM] = 0;
        self.enemy_bullets.rotate_right(1);
        self.enemy_bullets[0] = 0;
        if has(&self.enemy_bullets, self.cannon, BOTTOM) || has(&self.aliens, self.cannon, BOTTOM) {
            self.terminal = true;
        }
        if self.alien_move_timer == 0 {
            self.alien_move_timer = self.alien_count().min(self.enemy_move_interval);
            let at_edge = (column_occupied(&self.aliens, 0) && self.alien_dir < 0)
                || (column_occupied(&self.aliens, BOTTOM) && self.alien_dir > 0);
            if at_edge {
                self.alien_dir = -self.alien_dir;
                if self.aliens[BOTTOM] != 0 {
                    self.terminal = true;
                }
                self.aliens.rotate_right(1);
            } else {
                for row in &mut self.aliens {
                    // Sideways by one column, wrapping around like numpy.roll.
                    *row = if self.alien_dir > 0 {
                        ((*row << 1) | (*row >> BOTTOM)) & FULL_ROW
                    } else {
                        ((*row >> 1) | (*row << BOTTOM)) & FULL_ROW
                    };
                }
            }
            if has(&self.aliens, self.cannon, BOTTOM) {
                self.terminal = true;
            }
        }
        if self.alien_shot_timer == 0 {
            self.alien_shot_timer = ENEMY_SHOT_INTERVAL;
            if let Some((x, y)) = self.nearest_alien() {
                self.enemy_bullets[y] |= 1 << x;
            }
        }
        let mut reward = 0.0;
        for (aliens, bullets) in self.aliens.iter_mut().zip(&mut self.friendly_bullets) {
            let hits = *aliens & *bullets;
            reward += hits.count_ones() as f32;
            *aliens &= !hits;
            *bullets &= !hits;
        }
        if self.shot_timer > 0 {
            self.shot_timer -= 1;
        }
        self.alien_move_timer -= 1;
        self.alien_shot_timer -= 1;
        if self.alien_count() == 0 {
            if self.enemy_move_interval > 6 && self.ramping {
                self.enemy_move_interval -= 1;
                self.ramp_index += 1;
            }
            Self::new_wave(&mut self.aliens);
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
        set(CANNON, self.cannon, BOTTOM);
        let moving = if self.alien_dir < 0 {
            ALIEN_LEFT
        } else {
            ALIEN_RIGHT
        };
        for y in 0..GRID {
            for x in 0..GRID {
                if has(&self.aliens, x, y) {
                    set(ALIEN, x, y);
                    set(moving, x, y);
                }
                if has(&self.friendly_bullets, x, y) {
                    set(FRIENDLY_BULLET, x, y);
                }
                if has(&self.enemy_bullets, x, y) {
                    set(ENEMY_BULLET, x, y);
                }
            }
        }
    }

    /// The observation as 600 booleans in minatar's layout (10x10x6, height-width-channel).
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
    SpaceInvaders,
    "minatar-space-invaders",
    reset: reset_game,
    params: [sticky_action_prob, full_action_set, ramping],
    state: [rng, last_action, cannon, friendly_bullets, enemy_bullets, aliens, alien_dir, enemy_move_interval, alien_move_timer, alien_shot_timer, ramp_index, shot_timer, terminal]
);

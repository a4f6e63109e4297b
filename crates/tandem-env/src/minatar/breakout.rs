//! MinAtar Breakout.
//!
//! Rules: a 10x10 field; three rows of bricks (rows 1-3); a paddle on the bottom row
//! that moves one cell left or right per step; a ball that moves one cell diagonally
//! per step and leaves a trail cell where it was. The ball bounces off the side walls
//! and the ceiling; hitting a brick removes it, scores 1 and bounces the ball back
//! vertically (at most one brick per consecutive run of brick contacts). Reaching the
//! bottom row the ball bounces straight back up if the paddle was under its previous
//! column, bounces back diagonally if the paddle is under its new column, and
//! otherwise the game ends. When the ball comes down to the paddle row with all bricks
//! gone, the three rows are restored. Each game starts with the ball on row 3 at the
//! left or right wall (chosen at random) moving down and away from it.
//!
//! Randomness: one MT19937 `RandomState` per game drives both the sticky actions (one
//! `rand()` per step: below the sticky probability the previous action repeats) and
//! the start side (`choice(2)` per reset), in that interleaving.

use super::{GRID, minatar_env};
use crate::env::{Env, RgbFrame, Step};
use crate::mt19937::RandomState;
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};

const CHANNELS: usize = 4;
const PADDLE: usize = 0;
const BALL: usize = 1;
const TRAIL: usize = 2;
const BRICK: usize = 3;
const BOTTOM: i32 = GRID as i32 - 1;
const BRICK_ROWS: std::ops::Range<usize> = 1..4;
const FULL_ROW: u16 = (1 << GRID) - 1;

/// The five cells of each 5-bit pattern (bit x = cell x) as observation values.
const FIVE_CELLS: [[f32; 5]; 32] = {
    let mut table = [[0.0; 5]; 32];
    let mut bits = 0;
    while bits < 32 {
        let mut x = 0;
        while x < 5 {
            table[bits][x] = ((bits >> x) & 1) as f32;
            x += 1;
        }
        bits += 1;
    }
    table
};

/// Actions of minatar's full set, by index: no-op, left, up, right, down, fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Move {
    Stay,
    Left,
    Right,
}

fn move_of(full_action: usize) -> Move {
    match full_action {
        1 => Move::Left,
        3 => Move::Right,
        _ => Move::Stay,
    }
}

/// Full-set indices of the minimal action set (no-op, left, right).
const MINIMAL_ACTIONS: [usize; 3] = [0, 1, 3];

/// Ball directions: up-left, up-right, down-right, down-left.
const DIRECTION_STEP: [(i32, i32); 4] = [(-1, -1), (1, -1), (1, 1), (-1, 1)];
const FLIP_HORIZONTAL: [u8; 4] = [1, 0, 3, 2];
const FLIP_VERTICAL: [u8; 4] = [3, 2, 1, 0];
const REVERSE: [u8; 4] = [2, 3, 0, 1];

/// MinAtar Breakout with minatar's sticky actions.
#[derive(Debug, Clone)]
pub struct Breakout {
    rng: RandomState,
    sticky_action_prob: f64,
    full_action_set: bool,
    /// Full-set index of the action executed last step.
    last_action: usize,
    ball_x: i32,
    ball_y: i32,
    trail_x: i32,
    trail_y: i32,
    direction: u8,
    paddle: i32,
    /// Bit x of row y set = brick at (y, x).
    bricks: [u16; GRID],
    /// The ball touched a brick last step (so touching one again does not count).
    striking: bool,
    terminal: bool,
    /// What the last observation written holds (for in-place updates).
    drawn: Drawn,
}

/// The movable parts of an observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Drawn {
    paddle: i32,
    ball: (i32, i32),
    trail: (i32, i32),
    brick_rows: [u16; 3],
}

crate::snapshot::persist_fields!(Drawn {
    paddle,
    ball,
    trail,
    brick_rows
});

fn cell(channel: usize, x: i32, y: i32) -> usize {
    channel * GRID * GRID + y as usize * GRID + x as usize
}

impl Breakout {
    /// A game seeded like `minatar.Environment("breakout", random_seed=seed)` (64-bit
    /// seeds beyond 2^32 seed numpy with the two 32-bit halves).
    pub fn new(seed: u64, sticky_action_prob: f64, full_action_set: bool) -> Self {
        let mut game = Breakout {
            rng: RandomState::from_u64(seed),
            sticky_action_prob,
            full_action_set,
            last_action: 0,
            ball_x: 0,
            ball_y: 0,
            trail_x: 0,
            trail_y: 0,
            direction: 0,
            paddle: 0,
            bricks: [0; GRID],
            striking: false,
            terminal: false,
            drawn: Drawn::default(),
        };
        // minatar's Environment builds its game with a reset, drawing from the stream.
        game.new_game();
        game
    }

    fn new_game(&mut self) {
        let from_right = self.rng.choice(2) == 1;
        self.ball_y = 3;
        (self.ball_x, self.direction) = if from_right { (9, 3) } else { (0, 2) };
        self.trail_x = self.ball_x;
        self.trail_y = self.ball_y;
        self.paddle = 4;
        self.bricks = [0; GRID];
        self.restore_bricks();
        self.striking = false;
        self.terminal = false;
    }

    fn restore_bricks(&mut self) {
        for row in BRICK_ROWS {
            self.bricks[row] = FULL_ROW;
        }
    }

    fn brick_at(&self, x: i32, y: i32) -> bool {
        self.bricks[y as usize] >> x & 1 == 1
    }

    /// Advances one step with a full-set action; returns the reward.
    fn advance(&mut self, action: usize) -> f32 {
        if self.terminal {
            return 0.0;
        }
        match move_of(action) {
            Move::Left => self.paddle = (self.paddle - 1).max(0),
            Move::Right => self.paddle = (self.paddle + 1).min(BOTTOM),
            Move::Stay => {}
        }
        self.trail_x = self.ball_x;
        self.trail_y = self.ball_y;
        let (dx, dy) = DIRECTION_STEP[self.direction as usize];
        let mut x = self.ball_x + dx;
        let mut y = self.ball_y + dy;
        let mut reward = 0.0;
        let mut touching_brick = false;
        if !(0..=BOTTOM).contains(&x) {
            x = x.clamp(0, BOTTOM);
            self.direction = FLIP_HORIZONTAL[self.direction as usize];
        }
        if y < 0 {
            y = 0;
            self.direction = FLIP_VERTICAL[self.direction as usize];
        } else if self.brick_at(x, y) {
            touching_brick = true;
            if !self.striking {
                reward = 1.0;
                self.striking = true;
                self.bricks[y as usize] &= !(1 << x);
                y = self.trail_y;
                self.direction = FLIP_VERTICAL[self.direction as usize];
            }
        } else if y == BOTTOM {
            if self.bricks.iter().all(|&row| row == 0) {
                self.restore_bricks();
            }
            if self.ball_x == self.paddle {
                self.direction = FLIP_VERTICAL[self.direction as usize];
                y = self.trail_y;
            } else if x == self.paddle {
                self.direction = REVERSE[self.direction as usize];
                y = self.trail_y;
            } else {
                self.terminal = true;
            }
        }
        if !touching_brick {
            self.striking = false;
        }
        self.ball_x = x;
        self.ball_y = y;
        reward
    }

    fn snapshot(&self) -> Drawn {
        Drawn {
            paddle: self.paddle,
            ball: (self.ball_x, self.ball_y),
            trail: (self.trail_x, self.trail_y),
            brick_rows: [self.bricks[1], self.bricks[2], self.bricks[3]],
        }
    }

    fn write_brick_row(out: &mut [f32], row: usize, bits: u16) {
        let base = cell(BRICK, 0, row as i32);
        let bits = usize::from(bits);
        out[base..base + 5].copy_from_slice(&FIVE_CELLS[bits & 31]);
        out[base + 5..base + 10].copy_from_slice(&FIVE_CELLS[bits >> 5]);
    }

    /// Writes the 4x10x10 channels-first observation (1.0 where a thing is).
    fn write_obs(&mut self, obs: ObsBuf<'_>) {
        let ObsBuf::F32(out) = obs else { return };
        out.fill(0.0);
        let now = self.snapshot();
        out[cell(PADDLE, now.paddle, BOTTOM)] = 1.0;
        out[cell(BALL, now.ball.0, now.ball.1)] = 1.0;
        out[cell(TRAIL, now.trail.0, now.trail.1)] = 1.0;
        // Bricks only ever exist on their three rows.
        for (row, &bits) in BRICK_ROWS.zip(&now.brick_rows) {
            Self::write_brick_row(out, row, bits);
        }
        self.drawn = now;
    }

    /// Turns the observation last written into the current one, touching only the
    /// cells that can have changed.
    fn update_obs(&mut self, out: &mut [f32]) {
        let old = self.drawn;
        let now = self.snapshot();
        // Clear before set, so an unmoved part stays drawn.
        out[cell(PADDLE, old.paddle, BOTTOM)] = 0.0;
        out[cell(BALL, old.ball.0, old.ball.1)] = 0.0;
        out[cell(TRAIL, old.trail.0, old.trail.1)] = 0.0;
        out[cell(PADDLE, now.paddle, BOTTOM)] = 1.0;
        out[cell(BALL, now.ball.0, now.ball.1)] = 1.0;
        out[cell(TRAIL, now.trail.0, now.trail.1)] = 1.0;
        for ((row, &was), &is) in BRICK_ROWS.zip(&old.brick_rows).zip(&now.brick_rows) {
            if was != is {
                Self::write_brick_row(out, row, is);
            }
        }
        self.drawn = now;
    }

    /// The observation as 400 booleans in minatar's own layout (10x10x4,
    /// height-width-channel): what the parity traces store.
    pub fn state_hwc(&self) -> [bool; GRID * GRID * CHANNELS] {
        let mut out = [false; GRID * GRID * CHANNELS];
        let mut set =
            |x: i32, y: i32, c: usize| out[(y as usize * GRID + x as usize) * CHANNELS + c] = true;
        set(self.paddle, BOTTOM, PADDLE);
        set(self.ball_x, self.ball_y, BALL);
        set(self.trail_x, self.trail_y, TRAIL);
        for row in BRICK_ROWS {
            for x in 0..GRID as i32 {
                if self.brick_at(x, row as i32) {
                    set(x, row as i32, BRICK);
                }
            }
        }
        out
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

    /// `minatar.Environment.reset`.
    pub fn reset_game(&mut self) {
        self.new_game();
    }
}

minatar_env!(
    Breakout,
    "minatar-breakout",
    reset: new_game,
    params: [sticky_action_prob, full_action_set],
    state: [rng, last_action, ball_x, ball_y, trail_x, trail_y, direction, paddle, bricks, striking, terminal, drawn];

    fn step_in_place(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        let (reward, terminal) = self.act_full(self.full_action(action));
        self.update_obs(obs);
        Step::game(reward, terminal, false)
    }

    /// The field scaled 16x: bricks red, paddle and ball white, trail grey.
    fn render_rgb(&self) -> Option<RgbFrame> {
        const SCALE: usize = 16;
        let side = GRID * SCALE;
        let mut pixels = vec![0u8; side * side * 3];
        let state = self.state_hwc();
        let colours: [[u8; 3]; CHANNELS] = [
            [255, 255, 255],
            [255, 255, 255],
            [110, 110, 110],
            [200, 60, 40],
        ];
        for y in 0..side {
            for x in 0..side {
                let cell = ((y / SCALE) * GRID + x / SCALE) * CHANNELS;
                // The ball is drawn over the trail, the trail over bricks.
                let colour = [BALL, PADDLE, TRAIL, BRICK]
                    .into_iter()
                    .find(|&c| state[cell + c]);
                if let Some(c) = colour {
                    pixels[(y * side + x) * 3..(y * side + x) * 3 + 3].copy_from_slice(&colours[c]);
                }
            }
        }
        Some(RgbFrame {
            height: side,
            width: side,
            pixels,
        })
    }
);

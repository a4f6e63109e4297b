//! MinAtar Seaquest.
//!
//! Rules: a submarine (rows 0-8, starting at the surface, row 0) moves one cell per
//! step or fires a torpedo (at most every 5 steps) that travels one cell per step the
//! way the sub faces. Enemy fish and enemy subs enter rows 1-8 from either side (one
//! spawn every `spawn_speed` steps, never into a row holding an enemy going the other
//! way) and move one cell every `move_speed` + 1 steps; enemy subs fire a bullet every
//! 11 steps that moves one cell per step. Divers enter every 30 steps and drift one cell
//! every 6 steps; touching one picks it up (at most 6). A torpedo hitting a fish or sub
//! scores 1. Touching an enemy or an enemy bullet, running out of oxygen (200 steps
//! under water), or surfacing with no diver ends the game. Surfacing with divers refills
//! the oxygen, uses up a diver (all six, plus oxygen/20 points, when all six are
//! aboard; then the count goes to -1, as in minatar) and ramps the difficulty. Ten
//! channels: sub front, sub back, friendly bullet, trail, enemy bullet, enemy fish,
//! enemy sub, oxygen gauge, diver gauge, diver.
//!
//! Randomness: one MT19937 `RandomState` per game for the sticky actions (one `rand()`
//! per step) and the spawns (enemy: `rand()`, `rand()`, `randint(1, 9)`; diver:
//! `rand()`, `randint(1, 9)`), as minatar draws them.
//!
//! Entities live in lists processed newest first, as minatar does; minatar removes
//! list elements by value, which here is removal by position: two entities with equal
//! values are interchangeable, so the lists' contents stay the same.

use super::GRID;
use crate::env::{Env, Step};
use crate::mt19937::RandomState;
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};

const CHANNELS: usize = 10;
const SUB_FRONT: usize = 0;
const SUB_BACK: usize = 1;
const FRIENDLY_BULLET: usize = 2;
const TRAIL: usize = 3;
const ENEMY_BULLET: usize = 4;
const ENEMY_FISH: usize = 5;
const ENEMY_SUB: usize = 6;
const OXYGEN_GAUGE: usize = 7;
const DIVER_GAUGE: usize = 8;
const DIVER: usize = 9;

const MAX_OXYGEN: i32 = 200;
const INITIAL_SPAWN_SPEED: i32 = 20;
const DIVER_SPAWN_SPEED: i32 = 30;
const INITIAL_MOVE_SPEED: i32 = 5;
const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const DIVER_MOVE_INTERVAL: i32 = 5;
const MAX_DIVERS: i32 = 6;
const LAST: i32 = GRID as i32 - 1;

/// Something that moves horizontally: position, direction, and move countdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Mover {
    x: i32,
    y: i32,
    right: bool,
    timer: i32,
}

impl Mover {
    fn step_x(&mut self) {
        self.x += if self.right { 1 } else { -1 };
    }

    fn outside(&self) -> bool {
        !(0..=LAST).contains(&self.x)
    }

    fn at(&self, x: i32, y: i32) -> bool {
        self.x == x && self.y == y
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct EnemySub {
    mover: Mover,
    shot_timer: i32,
}

crate::snapshot::persist_fields!(Mover { x, y, right, timer });
crate::snapshot::persist_fields!(EnemySub { mover, shot_timer });

/// Python's `list.remove(value)`: removes the first element equal to `value` (which
/// must be present) and returns its index.
fn remove_value<T: PartialEq>(list: &mut Vec<T>, value: &T) -> usize {
    let index = list
        .iter()
        .position(|v| v == value)
        .expect("removed value is in the list");
    list.remove(index);
    index
}

/// Where an element at `place` is after the element at `removed` left the list.
fn after_removal(place: Option<usize>, removed: usize) -> Option<usize> {
    match place {
        Some(p) if removed == p => None,
        Some(p) if removed < p => Some(p - 1),
        other => other,
    }
}

/// MinAtar Seaquest with minatar's sticky actions and difficulty ramping.
#[derive(Debug, Clone)]
pub struct Seaquest {
    rng: RandomState,
    sticky_action_prob: f64,
    ramping: bool,
    last_action: usize,
    oxygen: i32,
    diver_count: i32,
    sub_x: i32,
    sub_y: i32,
    facing_right: bool,
    /// Friendly torpedoes: `timer` unused.
    friendly_bullets: Vec<Mover>,
    /// Enemy bullets: `timer` unused.
    enemy_bullets: Vec<Mover>,
    fish: Vec<Mover>,
    subs: Vec<EnemySub>,
    divers: Vec<Mover>,
    spawn_speed: i32,
    spawn_timer: i32,
    diver_spawn_timer: i32,
    move_speed: i32,
    ramp_index: i32,
    shot_timer: i32,
    surfaced: bool,
    terminal: bool,
}

impl Seaquest {
    /// A game seeded like minatar's `Environment("seaquest")` after `seed(seed)` and
    /// `reset()` (see [`crate::mt19937::RandomState::from_u64`] for 64-bit seeds).
    /// Seaquest's minimal action set is minatar's full set of six actions.
    pub fn new(seed: u64, sticky_action_prob: f64) -> Self {
        let mut game = Seaquest {
            rng: RandomState::from_u64(seed),
            sticky_action_prob,
            ramping: true,
            last_action: 0,
            oxygen: 0,
            diver_count: 0,
            sub_x: 0,
            sub_y: 0,
            facing_right: false,
            friendly_bullets: Vec::new(),
            enemy_bullets: Vec::new(),
            fish: Vec::new(),
            subs: Vec::new(),
            divers: Vec::new(),
            spawn_speed: 0,
            spawn_timer: 0,
            diver_spawn_timer: 0,
            move_speed: 0,
            ramp_index: 0,
            shot_timer: 0,
            surfaced: true,
            terminal: false,
        };
        game.reset_game();
        game
    }

    /// `minatar.Environment.reset` (draws nothing).
    pub fn reset_game(&mut self) {
        self.oxygen = MAX_OXYGEN;
        self.diver_count = 0;
        self.sub_x = 5;
        self.sub_y = 0;
        self.facing_right = false;
        self.friendly_bullets.clear();
        self.enemy_bullets.clear();
        self.fish.clear();
        self.subs.clear();
        self.divers.clear();
        self.spawn_speed = INITIAL_SPAWN_SPEED;
        self.spawn_timer = self.spawn_speed;
        self.diver_spawn_timer = DIVER_SPAWN_SPEED;
        self.move_speed = INITIAL_MOVE_SPEED;
        self.ramp_index = 0;
        self.shot_timer = 0;
        self.surfaced = true;
        self.terminal = false;
    }

    fn spawn_enemy(&mut self) {
        let right = self.rng.rand() < 0.5;
        let is_sub = self.rng.rand() < 1.0 / 3.0;
        let y = self.rng.randint(1, 9) as i32;
        let x = if right { 0 } else { LAST };
        let blocked = self
            .subs
            .iter()
            .map(|s| &s.mover)
            .chain(&self.fish)
            .any(|m| m.y == y && m.right != right);
        if blocked {
            return;
        }
        let mover = Mover {
            x,
            y,
            right,
            timer: self.move_speed,
        };
        if is_sub {
            self.subs.push(EnemySub {
                mover,
                shot_timer: ENEMY_SHOT_INTERVAL,
            });
        } else {
            self.fish.push(mover);
        }
    }

    fn spawn_diver(&mut self) {
        let right = self.rng.rand() < 0.5;
        let y = self.rng.randint(1, 9) as i32;
        self.divers.push(Mover {
            x: if right { 0 } else { LAST },
            y,
            right,
            timer: DIVER_MOVE_INTERVAL,
        });
    }

    fn surface(&mut self) -> f32 {
        self.surfaced = true;
        let reward = if self.diver_count == MAX_DIVERS {
            self.diver_count = 0;
            (self.oxygen * 10 / MAX_OXYGEN) as f32
        } else {
            0.0
        };
        self.oxygen = MAX_OXYGEN;
        self.diver_count -= 1;
        if self.ramping && (self.spawn_speed > 1 || self.move_speed > 2) {
            if self.move_speed > 2 && self.ramp_index % 2 == 1 {
                self.move_speed -= 1;
            }
            if self.spawn_speed > 1 {
                self.spawn_speed -= 1;
            }
            self.ramp_index += 1;
        }
        reward
    }

    fn advance(&mut self, action: usize) -> f32 {
        if self.terminal {
            return 0.0;
        }
        if self.spawn_timer == 0 {
            self.spawn_enemy();
            self.spawn_timer = self.spawn_speed;
        }
        if self.diver_spawn_timer == 0 {
            self.spawn_diver();
            self.diver_spawn_timer = DIVER_SPAWN_SPEED;
        }
        match action {
            5 if self.shot_timer == 0 => {
                self.friendly_bullets.push(Mover {
                    x: self.sub_x,
                    y: self.sub_y,
                    right: self.facing_right,
                    timer: 0,
                });
                self.shot_timer = SHOT_COOL_DOWN;
            }
            1 => {
                self.sub_x = (self.sub_x - 1).max(0);
                self.facing_right = false;
            }
            3 => {
                self.sub_x = (self.sub_x + 1).min(LAST);
                self.facing_right = true;
            }
            2 => self.sub_y = (self.sub_y - 1).max(0),
            4 => self.sub_y = (self.sub_y + 1).min(LAST - 1),
            _ => {}
        }
        let (px, py) = (self.sub_x, self.sub_y);
        let mut reward = 0.0;

        // Each loop walks its list newest first the way Python's reversed() does (an
        // index that keeps counting down while elements are removed) and removes
        // elements by value, as minatar does.
        let mut next = self.friendly_bullets.len() as isize - 1;
        while next >= 0 && (next as usize) < self.friendly_bullets.len() {
            let i = next as usize;
            next -= 1;
            let mut bullet = self.friendly_bullets[i];
            bullet.step_x();
            self.friendly_bullets[i] = bullet;
            if bullet.outside() {
                remove_value(&mut self.friendly_bullets, &bullet);
            } else if let Some(f) = self.fish.iter().position(|f| f.at(bullet.x, bullet.y)) {
                let fish = self.fish[f];
                remove_value(&mut self.fish, &fish);
                remove_value(&mut self.friendly_bullets, &bullet);
                reward += 1.0;
            } else if let Some(s) = self
                .subs
                .iter()
                .position(|s| s.mover.at(bullet.x, bullet.y))
            {
                let sub = self.subs[s];
                remove_value(&mut self.subs, &sub);
                remove_value(&mut self.friendly_bullets, &bullet);
                reward += 1.0;
            }
        }

        let mut next = self.divers.len() as isize - 1;
        while next >= 0 && (next as usize) < self.divers.len() {
            let i = next as usize;
            next -= 1;
            let mut diver = self.divers[i];
            if diver.at(px, py) && self.diver_count < MAX_DIVERS {
                remove_value(&mut self.divers, &diver);
                self.diver_count += 1;
            } else if diver.timer == 0 {
                diver.timer = DIVER_MOVE_INTERVAL;
                diver.step_x();
                self.divers[i] = diver;
                if diver.outside() {
                    remove_value(&mut self.divers, &diver);
                } else if diver.at(px, py) && self.diver_count < MAX_DIVERS {
                    remove_value(&mut self.divers, &diver);
                    self.diver_count += 1;
                }
            } else {
                diver.timer -= 1;
                self.divers[i] = diver;
            }
        }

        let mut next = self.subs.len() as isize - 1;
        while next >= 0 && (next as usize) < self.subs.len() {
            let i = next as usize;
            next -= 1;
            let mut sub = self.subs[i];
            // Where this sub is in the list; None once it has been removed.
            let mut place = Some(i);
            if sub.mover.at(px, py) {
                self.terminal = true;
            }
            if sub.mover.timer == 0 {
                sub.mover.timer = self.move_speed;
                sub.mover.step_x();
                self.subs[i] = sub;
                if sub.mover.outside() {
                    place = after_removal(place, remove_value(&mut self.subs, &sub));
                } else if sub.mover.at(px, py) {
                    self.terminal = true;
                } else if let Some(b) = self
                    .friendly_bullets
                    .iter()
                    .position(|b| b.at(sub.mover.x, sub.mover.y))
                {
                    place = after_removal(place, remove_value(&mut self.subs, &sub));
                    self.friendly_bullets.remove(b);
                    reward += 1.0;
                }
            } else {
                sub.mover.timer -= 1;
            }
            // A sub removed this step still fires if its shot is due, as in minatar.
            if sub.shot_timer == 0 {
                sub.shot_timer = ENEMY_SHOT_INTERVAL;
                self.enemy_bullets.push(Mover {
                    timer: 0,
                    ..sub.mover
                });
            } else {
                sub.shot_timer -= 1;
            }
            if let Some(p) = place {
                self.subs[p] = sub;
            }
        }

        let mut next = self.enemy_bullets.len() as isize - 1;
        while next >= 0 && (next as usize) < self.enemy_bullets.len() {
            let i = next as usize;
            next -= 1;
            let mut bullet = self.enemy_bullets[i];
            if bullet.at(px, py) {
                self.terminal = true;
            }
            bullet.step_x();
            self.enemy_bullets[i] = bullet;
            if bullet.outside() {
                remove_value(&mut self.enemy_bullets, &bullet);
            } else if bullet.at(px, py) {
                self.terminal = true;
            }
        }

        let mut next = self.fish.len() as isize - 1;
        while next >= 0 && (next as usize) < self.fish.len() {
            let i = next as usize;
            next -= 1;
            let mut fish = self.fish[i];
            if fish.at(px, py) {
                self.terminal = true;
            }
            if fish.timer == 0 {
                fish.timer = self.move_speed;
                fish.step_x();
                self.fish[i] = fish;
                if fish.outside() {
                    remove_value(&mut self.fish, &fish);
                } else if fish.at(px, py) {
                    self.terminal = true;
                } else if let Some(b) = self
                    .friendly_bullets
                    .iter()
                    .position(|b| b.at(fish.x, fish.y))
                {
                    remove_value(&mut self.fish, &fish);
                    self.friendly_bullets.remove(b);
                    reward += 1.0;
                }
            } else {
                fish.timer -= 1;
                self.fish[i] = fish;
            }
        }

        if self.spawn_timer > 0 {
            self.spawn_timer -= 1;
        }
        if self.diver_spawn_timer > 0 {
            self.diver_spawn_timer -= 1;
        }
        if self.shot_timer > 0 {
            self.shot_timer -= 1;
        }
        if self.oxygen <= 0 {
            self.terminal = true;
        }
        if self.sub_y > 0 {
            self.oxygen -= 1;
            self.surfaced = false;
        } else if !self.surfaced {
            if self.diver_count == 0 {
                self.terminal = true;
            } else {
                reward += self.surface();
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

    fn draw(&self, mut set: impl FnMut(usize, usize, usize)) {
        let cell = |x: i32| x as usize;
        set(SUB_FRONT, cell(self.sub_x), cell(self.sub_y));
        // The sub can never face off the field; numpy would wrap -1 to the last column.
        let back = if self.facing_right {
            self.sub_x - 1
        } else {
            self.sub_x + 1
        };
        set(
            SUB_BACK,
            back.rem_euclid(GRID as i32) as usize,
            cell(self.sub_y),
        );
        let oxygen_cells = self.oxygen.max(0) * 10 / MAX_OXYGEN;
        for x in 0..oxygen_cells {
            set(OXYGEN_GAUGE, cell(x), GRID - 1);
        }
        // Columns 9 - count .. 8 (none when the count is zero or negative).
        for x in (LAST - self.diver_count).max(0)..LAST {
            set(DIVER_GAUGE, cell(x), GRID - 1);
        }
        for b in &self.friendly_bullets {
            set(FRIENDLY_BULLET, cell(b.x), cell(b.y));
        }
        for b in &self.enemy_bullets {
            set(ENEMY_BULLET, cell(b.x), cell(b.y));
        }
        let with_trail = |channel: usize, m: &Mover, set: &mut dyn FnMut(usize, usize, usize)| {
            set(channel, cell(m.x), cell(m.y));
            let behind = if m.right { m.x - 1 } else { m.x + 1 };
            if (0..=LAST).contains(&behind) {
                set(TRAIL, cell(behind), cell(m.y));
            }
        };
        for f in &self.fish {
            with_trail(ENEMY_FISH, f, &mut set);
        }
        for s in &self.subs {
            with_trail(ENEMY_SUB, &s.mover, &mut set);
        }
        for d in &self.divers {
            with_trail(DIVER, d, &mut set);
        }
    }

    /// The observation as 1000 booleans in minatar's layout (10x10x10, height-width-channel).
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

impl Env for Seaquest {
    crate::snapshot::game_snapshot_methods!("minatar-seaquest", params: [sticky_action_prob, ramping], state: [rng, last_action, oxygen, diver_count, sub_x, sub_y, facing_right, friendly_bullets, enemy_bullets, fish, subs, divers, spawn_speed, spawn_timer, diver_spawn_timer, move_speed, ramp_index, shot_timer, surfaced, terminal]);

    fn observation_space(&self) -> ObsSpace {
        ObsSpace::image(GRID, GRID, CHANNELS, Layout::Chw, Dtype::F32)
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(6)
    }

    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        if let Some(seed) = seed {
            *self = Seaquest::new(seed, self.sticky_action_prob);
        } else {
            self.reset_game();
        }
        self.write_obs(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        let action = action.index();
        let (reward, terminal) = self.act_full(action);
        self.write_obs(obs);
        Step::game(reward, terminal, false)
    }
}

//! The multi-particle environments (PettingZoo's MPE, as the `mpe2` 1.1.1 package has them):
//! discs on a plane that agents push, written out as mpe2 computes them (float64 state, the
//! same order of every sum, numpy's draws for the start state) so that from the same seed and
//! the same actions the observations and rewards are mpe2's bit for bit
//! (`tests/mpe_parity.rs`). The physics ([`World`]) is shared; each game ([`simple_spread`],
//! [`simple_tag`]) places its bodies and says what its agents see and earn.

pub mod simple_spread;
pub mod simple_tag;

use crate::EnvError;
use crate::classic::canvas::Canvas;
use crate::env::RgbFrame;
use crate::gym_seeding::NumpyGenerator;
use crate::multi_agent::ParallelEnv;
use crate::snapshot;
use crate::space::{Action, Dtype, ObsSpace};
use crate::spec::Game;
pub use tandem_spec::game::{MPE_MOVES, mpe_actions};

/// Builds the multi-agent game (`Game::is_multi_agent`) `game` names, seeded with `seed`.
pub fn make(game: &Game, seed: u64) -> Result<Box<dyn ParallelEnv>, EnvError> {
    match game {
        Game::MpeSimpleSpread(params) => Ok(Box::new(simple_spread::SimpleSpread::new(
            params.clone(),
            seed,
        )?)),
        Game::MpeSimpleTag(params) => {
            Ok(Box::new(simple_tag::SimpleTag::new(params.clone(), seed)?))
        }
        other => Err(EnvError::InvalidArgument(format!(
            "`{}` is played by one agent; make_env builds it",
            other.name()
        ))),
    }
}

/// Seconds of one step.
const DT: f64 = 0.1;
/// The share of velocity lost on every step.
const DAMPING: f64 = 0.25;
/// Stiffness of the soft contact between overlapping discs.
const CONTACT_FORCE: f64 = 1e2;
/// Width of the softplus that makes contact soft.
const CONTACT_MARGIN: f64 = 1e-3;
/// The push of a whole unit of action for an agent with no acceleration of its own.
const DEFAULT_SENSITIVITY: f64 = 5.0;

/// A disc of the world: an agent (movable) or a landmark.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Body {
    pub pos: [f64; 2],
    pub vel: [f64; 2],
    pub size: f64,
    pub movable: bool,
    /// Takes part in contacts (pushes and is pushed).
    pub collide: bool,
    /// The push of a whole unit of action (else [`DEFAULT_SENSITIVITY`]).
    pub accel: Option<f64>,
    pub max_speed: Option<f64>,
}

crate::snapshot::persist_fields!(Body { pos, vel });

impl Body {
    /// The distance between two bodies' centres, as mpe2 computes it.
    pub fn distance(&self, other: &Body) -> f64 {
        let dx = self.pos[0] - other.pos[0];
        let dy = self.pos[1] - other.pos[1];
        (dx * dx + dy * dy).sqrt()
    }

    /// The two discs overlap.
    pub fn touches(&self, other: &Body) -> bool {
        self.distance(other) < self.size + other.size
    }
}

/// A game in play: every body, agents first (in the agents' order), then landmarks (mpe2's
/// `world.entities`); the random stream its starts are drawn from (mpe2's `np_random`); the
/// steps of the episode so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct World {
    pub bodies: Vec<Body>,
    rng: NumpyGenerator,
    steps: u32,
}

impl World {
    /// A world of `bodies` whose random stream is seeded with `seed`.
    pub fn new(bodies: Vec<Body>, seed: u64) -> Self {
        World {
            bodies,
            rng: NumpyGenerator::from_seed(seed),
            steps: 0,
        }
    }

    /// Starts an episode: `Some(seed)` reseeds the random stream (as mpe2's `reset(seed)`),
    /// `None` continues it; the bodies are then placed by [`World::place`].
    pub fn restart(&mut self, seed: Option<u64>) {
        self.rng.reseed(seed);
        self.steps = 0;
    }

    /// Places `bodies[range]`, in order, uniformly in [low, high) on both axes (numpy's
    /// `uniform(low, high, 2)` each), at rest.
    pub fn place(&mut self, range: std::ops::Range<usize>, low: f64, high: f64) {
        for body in &mut self.bodies[range] {
            body.pos = [self.rng.uniform(low, high), self.rng.uniform(low, high)];
            body.vel = [0.0, 0.0];
        }
    }

    /// One step from the agents' actions (the first bodies are the agents): their pushes,
    /// then the physics. Returns the steps of the episode so far.
    pub fn advance(&mut self, actions: &[Action<'_>]) -> u32 {
        let controls: Vec<[f64; 2]> = actions
            .iter()
            .zip(&self.bodies)
            .map(|(action, body)| control(*action, body))
            .collect();
        self.step(&controls);
        self.steps += 1;
        self.steps
    }

    /// Appends the world as a snapshot section tagged with the game's name; `roles` (the
    /// count of the game's first kind of agent) is checked on restore, so a game of other
    /// teams with as many bodies is refused.
    pub fn save_state(&self, tag: &str, roles: usize, out: &mut Vec<u8>) -> Result<(), EnvError> {
        snapshot::save_section(out, tag, |out| {
            snapshot::save_param(&roles, out);
            snapshot::save_buffer(&self.bodies, out);
            snapshot::Persist::save(&self.rng, out);
            snapshot::Persist::save(&self.steps, out);
            Ok(())
        })
    }

    /// Restores what [`World::save_state`] wrote.
    pub fn load_state(
        &mut self,
        tag: &str,
        roles: usize,
        input: &mut &[u8],
    ) -> Result<(), EnvError> {
        snapshot::load_section(input, tag, |input| {
            snapshot::expect_same(&roles, "agents of the first team", input)?;
            snapshot::load_buffer(&mut self.bodies, "bodies", input)?;
            snapshot::Persist::load(&mut self.rng, input)?;
            snapshot::Persist::load(&mut self.steps, input)
        })
    }

    /// mpe2's `World.step`: the agents' pushes (`controls[i]` for body `i`, already scaled)
    /// plus the contact forces, then one step of damped motion.
    pub fn step(&mut self, controls: &[[f64; 2]]) {
        let mut forces: Vec<Option<[f64; 2]>> = vec![None; self.bodies.len()];
        for (i, control) in controls.iter().enumerate() {
            if self.bodies[i].movable {
                // mpe2 adds the motor noise, 0.0 when an agent has none.
                forces[i] = Some([control[0] + 0.0, control[1] + 0.0]);
            }
        }
        self.add_contact_forces(&mut forces);
        for (body, force) in self.bodies.iter_mut().zip(&forces) {
            if body.movable {
                integrate(body, *force);
            }
        }
    }

    /// Each pair's contact force, added to each body's force in mpe2's order (pairs (a, b)
    /// with a < b, a outer).
    fn add_contact_forces(&self, forces: &mut [Option<[f64; 2]>]) {
        let n = self.bodies.len();
        for a in 0..n {
            for b in a + 1..n {
                let Some(force) = contact_force(&self.bodies[a], &self.bodies[b]) else {
                    continue;
                };
                if self.bodies[a].movable {
                    forces[a] = Some(add(force, forces[a]));
                }
                if self.bodies[b].movable {
                    forces[b] = Some(add([-force[0], -force[1]], forces[b]));
                }
            }
        }
    }
}

/// `f + previous`, where a body with no force yet has 0.0 (as mpe2 starts it).
fn add(f: [f64; 2], previous: Option<[f64; 2]>) -> [f64; 2] {
    let p = previous.unwrap_or([0.0, 0.0]);
    [f[0] + p[0], f[1] + p[1]]
}

/// The force on `a` from overlapping `b`: a softplus of the overlap along the line between
/// the centres (mpe2's `get_collision_force`); `None` when either does not collide.
fn contact_force(a: &Body, b: &Body) -> Option<[f64; 2]> {
    if !a.collide || !b.collide {
        return None;
    }
    let delta = [a.pos[0] - b.pos[0], a.pos[1] - b.pos[1]];
    let dist = (delta[0] * delta[0] + delta[1] * delta[1]).sqrt();
    let dist_min = a.size + b.size;
    let k = CONTACT_MARGIN;
    let penetration = log_add_exp_zero(-(dist - dist_min) / k) * k;
    Some([
        CONTACT_FORCE * delta[0] / dist * penetration,
        CONTACT_FORCE * delta[1] / dist * penetration,
    ])
}

/// numpy's `logaddexp(0, y)` = ln(1 + e^y), by its own branches (so the rounding is numpy's).
fn log_add_exp_zero(y: f64) -> f64 {
    if y == 0.0 {
        return std::f64::consts::LN_2;
    }
    let tmp = 0.0 - y;
    if tmp > 0.0 {
        0.0 + (-tmp).exp().ln_1p()
    } else if tmp <= 0.0 {
        y + tmp.exp().ln_1p()
    } else {
        tmp
    }
}

/// mpe2's `integrate_state` for one movable body.
fn integrate(body: &mut Body, force: Option<[f64; 2]>) {
    for k in 0..2 {
        body.pos[k] += body.vel[k] * DT;
        body.vel[k] *= 1.0 - DAMPING;
    }
    if let Some(force) = force {
        // Every body's mass is 1.
        for (v, f) in body.vel.iter_mut().zip(force) {
            *v += f / 1.0 * DT;
        }
    }
    if let Some(max_speed) = body.max_speed {
        let speed = (body.vel[0] * body.vel[0] + body.vel[1] * body.vel[1]).sqrt();
        if speed > max_speed {
            for k in 0..2 {
                body.vel[k] = body.vel[k] / speed * max_speed;
            }
        }
    }
}

/// The push an agent's action makes (mpe2's `_set_action` for a silent, movable agent).
/// A continuous action is clipped to its box first, as mpe2's `ClipOutOfBoundsWrapper` does.
pub fn control(action: Action<'_>, body: &Body) -> [f64; 2] {
    let mut u = [0.0f64; 2];
    match action {
        Action::Box(a) => {
            let a: [f32; MPE_MOVES] = std::array::from_fn(|i| a[i].clamp(0.0, 1.0));
            // float32 differences, widened as numpy adds them to the float64 push.
            u[0] += f64::from(a[2] - a[1]);
            u[1] += f64::from(a[4] - a[3]);
        }
        action => match action.index() {
            1 => u[0] = -1.0,
            2 => u[0] = 1.0,
            3 => u[1] = -1.0,
            4 => u[1] = 1.0,
            _ => {}
        },
    }
    let sensitivity = body.accel.unwrap_or(DEFAULT_SENSITIVITY);
    [u[0] * sensitivity, u[1] * sensitivity]
}

/// An agent's observation space: `len` unbounded float32s.
pub fn observation_space(len: usize) -> ObsSpace {
    ObsSpace::vector(len, Dtype::F32)
}

/// The bodies seen from above, each disc in its colour (mpe2's, out of 200), on a square that
/// holds every body with a margin, as mpe2 zooms its view (a picture for GIFs, not mpe2's
/// pygame rendering).
pub fn draw(bodies: &[Body], colours: &[[f64; 3]]) -> RgbFrame {
    const SIZE: usize = 256;
    let reach = bodies
        .iter()
        .map(|b| b.pos[0].abs().max(b.pos[1].abs()) + b.size)
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut canvas = Canvas::square(SIZE, -reach, -reach, 2.0 * reach);
    // Landmarks first, agents over them: bodies list agents first.
    for (body, colour) in bodies.iter().zip(colours).rev() {
        let rgb = colour.map(|c| (c * 200.0).round().clamp(0.0, 255.0) as u8);
        canvas.disc(body.pos[0], body.pos[1], body.size, rgb);
    }
    canvas.finish()
}

/// Writes `values` (float64) as float32 at the front of `out` and returns the rest.
pub fn put<'a>(out: &'a mut [f32], values: &[f64]) -> &'a mut [f32] {
    let (head, rest) = out.split_at_mut(values.len());
    for (o, v) in head.iter_mut().zip(values) {
        *o = *v as f32;
    }
    rest
}

/// What every MPE agent sees first, written to the front of `out` (the rest is returned):
/// agent `i`'s velocity and position, then each landmark's and each other agent's position
/// relative to its own.
pub fn observe_positions<'a>(
    out: &'a mut [f32],
    agents: &[Body],
    i: usize,
    landmarks: &[Body],
) -> &'a mut [f32] {
    let me = &agents[i];
    let mut out = put(out, &me.vel);
    out = put(out, &me.pos);
    for landmark in landmarks {
        out = put(out, &relative(landmark, me));
    }
    for (_, other) in agents.iter().enumerate().filter(|(j, _)| *j != i) {
        out = put(out, &relative(other, me));
    }
    out
}

/// `a.pos - b.pos`.
pub fn relative(a: &Body, b: &Body) -> [f64; 2] {
    [a.pos[0] - b.pos[0], a.pos[1] - b.pos[1]]
}

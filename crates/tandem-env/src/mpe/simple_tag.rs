//! MPE's `simple_tag` (mpe2 1.1.1's `simple_tag_v3`): predators (`adversary_*`, larger and
//! slower) chase prey (`agent_*`) around obstacles. Every predator earns +10 for each
//! predator-prey pair that overlaps (a team reward); a prey loses 10 for each predator that
//! overlaps it, and is pushed back from the edge by a penalty per axis (0 inside 0.9, rising
//! linearly to 1 at 1.0, then e^(2x-2) up to 10). Episodes last `max_cycles` steps (truncated).
//! An agent sees its velocity, its position, the obstacles' and the other agents' positions
//! relative to its own, and the prey's velocities (the other prey's, for a prey).

use crate::EnvError;
use crate::env::{RgbFrame, Step};
use crate::mpe::{self, Body, World};
use crate::multi_agent::{AgentSpec, ParallelEnv};
use crate::space::Action;

pub use tandem_spec::TagParams;

pub struct SimpleTag {
    params: TagParams,
    agents: Vec<AgentSpec>,
    world: World,
}

const PREDATOR: Body = Body {
    pos: [0.0; 2],
    vel: [0.0; 2],
    size: 0.075,
    movable: true,
    collide: true,
    accel: Some(3.0),
    max_speed: Some(1.0),
};

const PREY: Body = Body {
    size: 0.05,
    accel: Some(4.0),
    max_speed: Some(1.3),
    ..PREDATOR
};

const OBSTACLE: Body = Body {
    pos: [0.0; 2],
    vel: [0.0; 2],
    size: 0.2,
    movable: false,
    collide: true,
    accel: None,
    max_speed: None,
};

impl SimpleTag {
    /// The game with its random stream seeded by `seed` (a reset with a seed reseeds it).
    pub fn new(params: TagParams, seed: u64) -> Result<Self, EnvError> {
        if params.num_good == 0 || params.num_adversaries == 0 || params.max_cycles == 0 {
            return Err(EnvError::InvalidGameParameter {
                game: "mpe-simple-tag".into(),
                reason: format!(
                    "needs at least one prey (num-good), one predator (num-adversaries) and \
                     max-cycles above 0; got {params:?}"
                ),
            });
        }
        let actions = mpe::mpe_actions(params.continuous_actions);
        let predator = mpe::observation_space(params.predator_observation_len());
        let prey = mpe::observation_space(params.prey_observation_len());
        let predators = (0..params.num_adversaries)
            .map(|i| AgentSpec::new("adversary", i, predator, actions.clone()));
        let prey = (0..params.num_good).map(|i| AgentSpec::new("agent", i, prey, actions.clone()));
        let agents = predators.chain(prey).collect();
        let mut bodies = vec![PREDATOR; params.num_adversaries];
        bodies.extend(std::iter::repeat_n(PREY, params.num_good));
        bodies.extend(std::iter::repeat_n(OBSTACLE, params.num_obstacles));
        Ok(SimpleTag {
            params,
            agents,
            world: World::new(bodies, seed),
        })
    }

    fn agent_count(&self) -> usize {
        self.params.num_adversaries + self.params.num_good
    }

    fn agent_bodies(&self) -> &[Body] {
        &self.world.bodies[..self.agent_count()]
    }

    fn predators(&self) -> &[Body] {
        &self.world.bodies[..self.params.num_adversaries]
    }

    fn prey(&self) -> &[Body] {
        &self.world.bodies[self.params.num_adversaries..self.agent_count()]
    }

    fn obstacles(&self) -> &[Body] {
        &self.world.bodies[self.agent_count()..]
    }

    fn is_predator(&self, i: usize) -> bool {
        i < self.params.num_adversaries
    }

    fn observe(&self, obs: &mut [f32]) {
        let mut out = obs;
        for i in 0..self.agent_count() {
            out = mpe::observe_positions(out, self.agent_bodies(), i, self.obstacles());
            // The other prey's velocities.
            let prey = self.agent_bodies().iter().enumerate();
            for (_, other) in prey.filter(|(j, _)| *j != i && !self.is_predator(*j)) {
                out = mpe::put(out, &other.vel);
            }
        }
    }

    /// Every predator's reward: +10 for each overlapping predator-prey pair.
    fn predator_reward(&self) -> f64 {
        let mut reward = 0.0;
        for prey in self.prey() {
            for predator in self.predators() {
                if prey.touches(predator) {
                    reward += 10.0;
                }
            }
        }
        reward
    }

    /// A prey's reward: -10 for each predator overlapping it, and the edge penalty per axis.
    fn prey_reward(&self, me: &Body) -> f64 {
        let mut reward = 0.0;
        for predator in self.predators() {
            if predator.touches(me) {
                reward -= 10.0;
            }
        }
        for p in me.pos {
            reward -= edge_penalty(p.abs());
        }
        reward
    }
}

/// How far past 0.9 a prey is on one axis, as mpe2's `bound`.
fn edge_penalty(x: f64) -> f64 {
    if x < 0.9 {
        0.0
    } else if x < 1.0 {
        (x - 0.9) * 10.0
    } else {
        (2.0 * x - 2.0).exp().min(10.0)
    }
}

impl ParallelEnv for SimpleTag {
    fn name(&self) -> &'static str {
        "mpe-simple-tag"
    }

    fn agents(&self) -> &[AgentSpec] {
        &self.agents
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        let (agents, bodies) = (self.agent_count(), self.world.bodies.len());
        self.world.restart(seed);
        self.world.place(0..agents, -1.0, 1.0);
        self.world.place(agents..bodies, -0.9, 0.9);
        self.observe(obs);
    }

    fn step(&mut self, actions: &[Action<'_>], obs: &mut [f32], steps: &mut [Step]) {
        let truncated = self.world.advance(actions) >= self.params.max_cycles;
        let predators = self.predator_reward();
        for (i, step) in steps.iter_mut().enumerate() {
            let reward = if self.is_predator(i) {
                predators
            } else {
                self.prey_reward(&self.world.bodies[i])
            };
            *step = Step::game(reward as f32, false, truncated);
        }
        self.observe(obs);
    }

    fn render_rgb(&self) -> Option<RgbFrame> {
        let colours: Vec<[f64; 3]> = (0..self.world.bodies.len())
            .map(|i| match i {
                i if self.is_predator(i) => [0.85, 0.35, 0.35],
                i if i < self.agent_count() => [0.35, 0.85, 0.35],
                _ => [0.25, 0.25, 0.25],
            })
            .collect();
        Some(mpe::draw(&self.world.bodies, &colours))
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        self.world
            .save_state(self.name(), self.params.num_adversaries, out)
    }

    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        self.world
            .load_state(self.name(), self.params.num_adversaries, input)
    }
}

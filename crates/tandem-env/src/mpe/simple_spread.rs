//! MPE's `simple_spread` (mpe2 1.1.1's `simple_spread_v3`): N agents cover N landmarks. Every
//! agent earns the team's reward, minus the sum over landmarks of the nearest agent's
//! distance, blended with its own, minus 1 for each agent it overlaps:
//! `reward = global * (1 - local_ratio) + own * local_ratio`. Episodes last `max_cycles`
//! steps (truncated). An agent sees its velocity, its position, each landmark's and each
//! other agent's position relative to its own, and the others' (silent, so zero)
//! communication: 6N numbers.

use crate::EnvError;
use crate::env::{RgbFrame, Step};
use crate::mpe::{self, Body, World};
use crate::multi_agent::{AgentSpec, ParallelEnv};
use crate::space::Action;

/// Width of the agents' (unused, zero) communication channel, which they still observe.
const DIM_C: usize = 2;
const AGENT_SIZE: f64 = 0.15;
/// mpe2's colours, out of 200 where it draws them.
const AGENT_COLOUR: [f64; 3] = [0.35, 0.35, 0.85];
const LANDMARK_COLOUR: [f64; 3] = [0.25, 0.25, 0.25];

pub use tandem_spec::SpreadParams;

pub struct SimpleSpread {
    params: SpreadParams,
    agents: Vec<AgentSpec>,
    world: World,
}

impl SimpleSpread {
    /// The game with its random stream seeded by `seed` (a reset with a seed reseeds it).
    pub fn new(params: SpreadParams, seed: u64) -> Result<Self, EnvError> {
        if params.agents == 0
            || !(0.0..=1.0).contains(&params.local_ratio)
            || params.max_cycles == 0
        {
            return Err(EnvError::InvalidGameParameter {
                game: "mpe-simple-spread".into(),
                reason: format!(
                    "needs at least one agent, local-ratio in [0, 1] and max-cycles above 0; \
                     got {params:?}"
                ),
            });
        }
        let n = params.agents;
        let agents = (0..n)
            .map(|i| {
                AgentSpec::new(
                    "agent",
                    i,
                    mpe::observation_space(params.observation_len()),
                    mpe::mpe_actions(params.continuous_actions),
                )
            })
            .collect();
        let agent = Body {
            size: AGENT_SIZE,
            movable: true,
            collide: true,
            ..Body::default()
        };
        // Landmarks keep mpe2's default size; they neither move nor collide.
        let landmark = Body {
            size: 0.05,
            ..Body::default()
        };
        let mut bodies = vec![agent; n];
        bodies.extend(std::iter::repeat_n(landmark, n));
        Ok(SimpleSpread {
            params,
            agents,
            world: World::new(bodies, seed),
        })
    }

    fn agent_bodies(&self) -> &[Body] {
        &self.world.bodies[..self.params.agents]
    }

    fn landmarks(&self) -> &[Body] {
        &self.world.bodies[self.params.agents..]
    }

    fn observe(&self, obs: &mut [f32]) {
        let mut out = obs;
        for i in 0..self.params.agents {
            out = mpe::observe_positions(out, self.agent_bodies(), i, self.landmarks());
            // The other agents' communication: silent, so zero.
            for _ in 1..self.params.agents {
                out = mpe::put(out, &[0.0; DIM_C]);
            }
        }
    }

    /// The team's reward: minus, for each landmark, the nearest agent's distance.
    fn global_reward(&self) -> f64 {
        let mut reward = 0.0;
        for landmark in self.landmarks() {
            let nearest = self
                .agent_bodies()
                .iter()
                .map(|a| a.distance(landmark))
                .fold(f64::INFINITY, f64::min);
            reward -= nearest;
        }
        reward
    }

    /// An agent's own reward: minus 1 for each other agent it overlaps.
    fn own_reward(&self, i: usize) -> f64 {
        let me = &self.agent_bodies()[i];
        let mut reward = 0.0;
        for (j, other) in self.agent_bodies().iter().enumerate() {
            if j != i && other.touches(me) {
                reward -= 1.0;
            }
        }
        reward
    }
}

impl ParallelEnv for SimpleSpread {
    fn name(&self) -> &'static str {
        "mpe-simple-spread"
    }

    fn agents(&self) -> &[AgentSpec] {
        &self.agents
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.world.restart(seed);
        self.world.place(0..2 * self.params.agents, -1.0, 1.0);
        self.observe(obs);
    }

    fn step(&mut self, actions: &[Action<'_>], obs: &mut [f32], steps: &mut [Step]) {
        let truncated = self.world.advance(actions) >= self.params.max_cycles;
        let global = self.global_reward();
        let ratio = self.params.local_ratio;
        for (i, step) in steps.iter_mut().enumerate() {
            let reward = global * (1.0 - ratio) + self.own_reward(i) * ratio;
            *step = Step::game(reward as f32, false, truncated);
        }
        self.observe(obs);
    }

    fn render_rgb(&self) -> Option<RgbFrame> {
        let n = self.params.agents;
        let colours: Vec<[f64; 3]> = (0..2 * n)
            .map(|i| if i < n { AGENT_COLOUR } else { LANDMARK_COLOUR })
            .collect();
        Some(mpe::draw(&self.world.bodies, &colours))
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        self.world.save_state(self.name(), self.params.agents, out)
    }

    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        self.world
            .load_state(self.name(), self.params.agents, input)
    }
}

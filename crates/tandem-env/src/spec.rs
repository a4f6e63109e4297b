//! Declarative environment specs: which game, which wrappers ([`Wrapper`], declared in
//! tandem-spec) in which order, and [`make_env`], which builds the chain and reports wrappers
//! that do not fit.

use crate::EnvError;
use crate::cartpole::CartPole;
use crate::classic::{Acrobot, MountainCar, MountainCarContinuous, Pendulum};
use crate::env::Env;
use crate::gym::GymSpec;
use crate::minatar::{Asterix, Breakout, Freeway, Seaquest, SpaceInvaders};
use crate::rng::derive_seed;
use crate::space::{ActionSpace, Dtype, Layout, ObsSpace};
use crate::wrappers;
use tandem_spec::Game;
pub use tandem_spec::Wrapper;
use tandem_spec::fit::{Family, GameFacts};

/// The game at the bottom of a wrapper chain.
#[derive(Debug, Clone, PartialEq)]
pub enum GameSpec {
    /// CartPole-v1: 4 f32 values, 2 actions, truncated at 500 steps.
    CartPole,
    /// Acrobot-v1, exact to gymnasium: 6 f32 values (cos and sin of both joint
    /// angles, both angular speeds), 3 actions (torque -1, 0, +1), truncated at 500.
    Acrobot,
    /// MountainCar-v0, exact to gymnasium: 2 f32 values (position, velocity), 3
    /// actions (push left, none, right), truncated at 200 steps.
    MountainCar,
    /// MountainCarContinuous-v0, exact to gymnasium: 2 f32 values (position,
    /// velocity), a box of 1 f32 force in [-1, 1], truncated at 999 steps.
    MountainCarContinuous,
    /// Pendulum-v1, exact to gymnasium: 3 f32 values (cos and sin of the angle, the
    /// angular speed), a box of 1 f32 torque in [-2, 2], truncated at 200 steps.
    Pendulum,
    /// MinAtar Breakout: f32 image 4x10x10 (channels paddle, ball, trail, brick),
    /// exact to the `minatar` package. `full_action_set` exposes minatar's 6 actions
    /// (n, l, u, r, d, f); otherwise the minimal set (n, l, r).
    MinAtarBreakout {
        sticky_action_prob: f64,
        full_action_set: bool,
    },
    /// MinAtar Asterix with difficulty ramping: f32 image 4x10x10 (channels player,
    /// enemy, trail, treasure), exact to the `minatar` package. Minimal action set: n,
    /// l, u, r, d; `full_action_set` adds f.
    MinAtarAsterix {
        sticky_action_prob: f64,
        full_action_set: bool,
    },
    /// MinAtar Freeway: f32 image 7x10x10 (channels chicken, car, and the trail of cars
    /// of speed 1 to 5), exact to the `minatar` package. Minimal action set: n, u, d;
    /// `full_action_set` exposes all six.
    MinAtarFreeway {
        sticky_action_prob: f64,
        full_action_set: bool,
    },
    /// MinAtar Space Invaders with difficulty ramping: f32 image 6x10x10 (channels
    /// cannon, alien, alien moving left, alien moving right, friendly bullet, enemy
    /// bullet), exact to the `minatar` package. Minimal action set: n, l, r, f.
    MinAtarSpaceInvaders {
        sticky_action_prob: f64,
        full_action_set: bool,
    },
    /// MinAtar Seaquest with difficulty ramping: f32 image 10x10x10 (channels sub front,
    /// sub back, friendly bullet, trail, enemy bullet, enemy fish, enemy sub, oxygen
    /// gauge, diver gauge, diver), exact to the `minatar` package; all six actions.
    MinAtarSeaquest { sticky_action_prob: f64 },
    /// An Atari 2600 game through ALE (cargo feature `atari`): u8 RGB image
    /// 210x160x3 (height x width x channels). `rom` is ALE's ROM name, e.g. `breakout`.
    Atari {
        rom: String,
        repeat_action_probability: f32,
        full_action_space: bool,
    },
    /// A gymnasium environment run by Python worker processes (see [`crate::gym`]):
    /// its spaces are known once the workers start, so only [`crate::VecEnv::new`]
    /// builds it.
    Gymnasium(GymSpec),
}

/// Game names accepted by [`GameSpec::from_name`] (Atari games are `atari-<rom>`).
pub const GAME_NAMES: &[&str] = &[
    "cartpole",
    "acrobot",
    "mountain-car",
    "mountain-car-continuous",
    "pendulum",
    "minatar-breakout",
    "minatar-asterix",
    "minatar-freeway",
    "minatar-space-invaders",
    "minatar-seaquest",
    "atari-breakout",
];

impl GameSpec {
    /// The game called `name`, with its default options: MinAtar sticky actions 0.1 and
    /// the minimal action set; Atari sticky actions 0.25 (ALE's v5 default, set
    /// explicitly) and the minimal action set.
    pub fn from_name(name: &str) -> Result<Self, EnvError> {
        match name {
            "cartpole" => Ok(GameSpec::CartPole),
            "acrobot" => Ok(GameSpec::Acrobot),
            "mountain-car" => Ok(GameSpec::MountainCar),
            "mountain-car-continuous" => Ok(GameSpec::MountainCarContinuous),
            "pendulum" => Ok(GameSpec::Pendulum),
            "minatar-breakout" => Ok(GameSpec::MinAtarBreakout {
                sticky_action_prob: 0.1,
                full_action_set: false,
            }),
            "minatar-asterix" => Ok(GameSpec::MinAtarAsterix {
                sticky_action_prob: 0.1,
                full_action_set: false,
            }),
            "minatar-freeway" => Ok(GameSpec::MinAtarFreeway {
                sticky_action_prob: 0.1,
                full_action_set: false,
            }),
            "minatar-space-invaders" => Ok(GameSpec::MinAtarSpaceInvaders {
                sticky_action_prob: 0.1,
                full_action_set: false,
            }),
            "minatar-seaquest" => Ok(GameSpec::MinAtarSeaquest {
                sticky_action_prob: 0.1,
            }),
            _ => match name.strip_prefix("atari-") {
                Some(rom)
                    if !rom.is_empty()
                        && rom
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
                {
                    Ok(GameSpec::Atari {
                        rom: rom.to_string(),
                        repeat_action_probability: 0.25,
                        full_action_space: false,
                    })
                }
                _ => Err(EnvError::UnknownGame {
                    name: name.to_string(),
                    known: GAME_NAMES.join(", ") + ", atari-<rom>",
                }),
            },
        }
    }

    pub fn name(&self) -> String {
        match self {
            GameSpec::CartPole => "cartpole".into(),
            GameSpec::Acrobot => "acrobot".into(),
            GameSpec::MountainCar => "mountain-car".into(),
            GameSpec::MountainCarContinuous => "mountain-car-continuous".into(),
            GameSpec::Pendulum => "pendulum".into(),
            GameSpec::MinAtarBreakout { .. } => "minatar-breakout".into(),
            GameSpec::MinAtarAsterix { .. } => "minatar-asterix".into(),
            GameSpec::MinAtarFreeway { .. } => "minatar-freeway".into(),
            GameSpec::MinAtarSpaceInvaders { .. } => "minatar-space-invaders".into(),
            GameSpec::MinAtarSeaquest { .. } => "minatar-seaquest".into(),
            GameSpec::Atari { rom, .. } => format!("atari-{rom}"),
            GameSpec::Gymnasium(gym) => format!("gymnasium:{}", gym.id),
        }
    }

    /// The observation the game produces, known without building it (not for gymnasium
    /// environments, whose workers report it).
    pub fn observation_space(&self) -> Option<ObsSpace> {
        Some(match self {
            GameSpec::CartPole => ObsSpace::vector(4, Dtype::F32),
            GameSpec::Acrobot => ObsSpace::vector(6, Dtype::F32),
            GameSpec::MountainCar | GameSpec::MountainCarContinuous => {
                ObsSpace::vector(2, Dtype::F32)
            }
            GameSpec::Pendulum => ObsSpace::vector(3, Dtype::F32),
            GameSpec::MinAtarBreakout { .. } | GameSpec::MinAtarAsterix { .. } => {
                ObsSpace::image(10, 10, 4, Layout::Chw, Dtype::F32)
            }
            GameSpec::MinAtarFreeway { .. } => ObsSpace::image(10, 10, 7, Layout::Chw, Dtype::F32),
            GameSpec::MinAtarSpaceInvaders { .. } => {
                ObsSpace::image(10, 10, 6, Layout::Chw, Dtype::F32)
            }
            GameSpec::MinAtarSeaquest { .. } => {
                ObsSpace::image(10, 10, 10, Layout::Chw, Dtype::F32)
            }
            GameSpec::Atari { .. } => ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8),
            GameSpec::Gymnasium(_) => return None,
        })
    }

    /// The action space, when known without building the game (ALE's minimal action
    /// sets need the ROM).
    pub fn action_space(&self) -> Option<ActionSpace> {
        let minimal_or_full = |full: bool, minimal: usize| if full { 6 } else { minimal };
        let n = match self {
            GameSpec::CartPole => 2,
            GameSpec::Acrobot | GameSpec::MountainCar => 3,
            GameSpec::MountainCarContinuous => return Some(ActionSpace::uniform_box(1, -1.0, 1.0)),
            GameSpec::Pendulum => return Some(ActionSpace::uniform_box(1, -2.0, 2.0)),
            GameSpec::MinAtarBreakout {
                full_action_set, ..
            } => minimal_or_full(*full_action_set, 3),
            GameSpec::MinAtarAsterix {
                full_action_set, ..
            } => minimal_or_full(*full_action_set, 5),
            GameSpec::MinAtarFreeway {
                full_action_set, ..
            } => minimal_or_full(*full_action_set, 3),
            GameSpec::MinAtarSpaceInvaders {
                full_action_set, ..
            } => minimal_or_full(*full_action_set, 4),
            GameSpec::MinAtarSeaquest { .. } => 6,
            GameSpec::Atari {
                full_action_space: true,
                ..
            } => 18,
            GameSpec::Atari { .. } | GameSpec::Gymnasium(_) => return None,
        };
        Some(ActionSpace::discrete(n))
    }

    /// What the wrappers' fit rule knows of the game: the catalogue's facts (tandem-spec's),
    /// with `actions` (of a game already built) or the actions known without building it.
    pub fn facts(&self, actions: Option<ActionSpace>) -> GameFacts {
        let mut facts = match self {
            GameSpec::Gymnasium(_) => GameFacts::gymnasium(),
            game => Game::from_name(&game.name())
                .map(|g| g.facts())
                .unwrap_or_else(|| GameFacts {
                    name: game.name(),
                    family: Some(Family::Atari),
                    actions: None,
                    lives: None,
                    fire: None,
                }),
        };
        if matches!(
            self,
            GameSpec::Atari {
                full_action_space: true,
                ..
            }
        ) {
            facts.fire = Some(true);
        }
        facts.actions = actions.or_else(|| self.action_space()).or(facts.actions);
        facts
    }

    fn validate(&self) -> Result<(), EnvError> {
        let bad = |reason: String| {
            Err(EnvError::InvalidGameParameter {
                game: self.name(),
                reason,
            })
        };
        match self {
            GameSpec::MinAtarBreakout {
                sticky_action_prob: p,
                ..
            }
            | GameSpec::MinAtarAsterix {
                sticky_action_prob: p,
                ..
            }
            | GameSpec::MinAtarFreeway {
                sticky_action_prob: p,
                ..
            }
            | GameSpec::MinAtarSpaceInvaders {
                sticky_action_prob: p,
                ..
            }
            | GameSpec::MinAtarSeaquest {
                sticky_action_prob: p,
            } if !(0.0..=1.0).contains(p) => {
                bad(format!("sticky action probability {p} is outside [0, 1]"))
            }
            GameSpec::Atari {
                repeat_action_probability: p,
                ..
            } if !(0.0..=1.0).contains(p) => {
                bad(format!("repeat action probability {p} is outside [0, 1]"))
            }
            GameSpec::Gymnasium(gym) => gym.validate(),
            _ => Ok(()),
        }
    }
}

/// A game and its wrappers.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    pub game: GameSpec,
    pub wrappers: Vec<Wrapper>,
}

impl EnvSpec {
    pub fn new(game: GameSpec) -> Self {
        EnvSpec {
            game,
            wrappers: Vec::new(),
        }
    }

    pub fn with(mut self, wrapper: Wrapper) -> Self {
        self.wrappers.push(wrapper);
        self
    }

    /// The DeepMind Atari preprocessing on `game`: noop-reset 30, fire-reset,
    /// frame-skip 4 with max-pool, episodic-life, grayscale, resize 84x84, clip-reward,
    /// frame-stack 4.
    pub fn deepmind_atari(game: GameSpec) -> Self {
        EnvSpec {
            game,
            wrappers: vec![
                Wrapper::NoopReset { max: 30 },
                Wrapper::FireReset,
                Wrapper::FrameSkip {
                    n: 4,
                    max_pool: true,
                },
                Wrapper::EpisodicLife,
                Wrapper::Grayscale,
                Wrapper::Resize {
                    height: 84,
                    width: 84,
                },
                Wrapper::ClipReward,
                Wrapper::FrameStack { n: 4 },
            ],
        }
    }
}

/// The observation space at the end of the chain, checking every wrapper's fit and
/// parameters without building the game (for config validation). A gymnasium
/// environment's space is known only once its workers start: for one, this checks the
/// game's parameters and refuses the wrappers it cannot take, then says so in an
/// [`EnvError::InvalidArgument`].
pub fn observation_space(spec: &EnvSpec) -> Result<ObsSpace, EnvError> {
    spec.game.validate()?;
    let game = spec.game.facts(None);
    let Some(mut space) = spec.game.observation_space() else {
        let GameSpec::Gymnasium(gym) = &spec.game else {
            unreachable!("only gymnasium environments have no static space")
        };
        crate::gym::check_wrappers(spec, gym)?;
        return Err(EnvError::InvalidArgument(format!(
            "the observation space of gymnasium `{}` is known once its workers start (VecEnv::new)",
            gym.id
        )));
    };
    for (index, wrapper) in spec.wrappers.iter().enumerate() {
        space = wrappers::output_space(wrapper, index, &space, &game)?;
    }
    Ok(space)
}

/// Builds the bare game, seeded with `seed`.
pub fn make_game(game: &GameSpec, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    game.validate()?;
    match game {
        GameSpec::CartPole => Ok(Box::new(CartPole::new(seed))),
        GameSpec::Acrobot => Ok(Box::new(Acrobot::new(seed))),
        GameSpec::MountainCar => Ok(Box::new(MountainCar::new(seed))),
        GameSpec::MountainCarContinuous => Ok(Box::new(MountainCarContinuous::new(seed))),
        GameSpec::Pendulum => Ok(Box::new(Pendulum::new(seed))),
        GameSpec::MinAtarBreakout {
            sticky_action_prob,
            full_action_set,
        } => Ok(Box::new(Breakout::new(
            seed,
            *sticky_action_prob,
            *full_action_set,
        ))),
        GameSpec::MinAtarAsterix {
            sticky_action_prob,
            full_action_set,
        } => Ok(Box::new(Asterix::new(
            seed,
            *sticky_action_prob,
            *full_action_set,
        ))),
        GameSpec::MinAtarFreeway {
            sticky_action_prob,
            full_action_set,
        } => Ok(Box::new(Freeway::new(
            seed,
            *sticky_action_prob,
            *full_action_set,
        ))),
        GameSpec::MinAtarSpaceInvaders {
            sticky_action_prob,
            full_action_set,
        } => Ok(Box::new(SpaceInvaders::new(
            seed,
            *sticky_action_prob,
            *full_action_set,
        ))),
        GameSpec::MinAtarSeaquest { sticky_action_prob } => {
            Ok(Box::new(Seaquest::new(seed, *sticky_action_prob)))
        }
        #[cfg(feature = "atari")]
        GameSpec::Atari { .. } => crate::atari::make_atari(game, seed),
        #[cfg(not(feature = "atari"))]
        GameSpec::Atari { .. } => Err(EnvError::FeatureDisabled {
            game: game.name(),
            feature: "atari",
        }),
        GameSpec::Gymnasium(gym) => Err(EnvError::InvalidArgument(format!(
            "gymnasium `{}` runs in worker processes that VecEnv::new starts; it cannot be built alone",
            gym.id
        ))),
    }
}

/// Builds the game and its wrappers; the game gets `seed`, wrapper `i` the sub-seed
/// `derive_seed(seed, i + 1)`. Errors name the first wrapper that does not fit.
pub fn make_env(spec: &EnvSpec, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    // Check the whole chain first so a misfit is reported before an expensive game loads.
    observation_space(spec)?;
    wrap_chain(spec, make_game(&spec.game, seed)?, seed)
}

/// Wraps an already-built `game` in `spec`'s wrappers, wrapper `i` seeded with
/// `derive_seed(seed, i + 1)`.
pub(crate) fn wrap_chain(
    spec: &EnvSpec,
    mut env: Box<dyn Env>,
    seed: u64,
) -> Result<Box<dyn Env>, EnvError> {
    let game = spec.game.facts(Some(env.action_space()));
    for (index, wrapper) in spec.wrappers.iter().enumerate() {
        let seed = derive_seed(seed, index as u64 + 1);
        env = wrappers::wrap_on(wrapper, index, env, seed, &game)?;
    }
    Ok(env)
}

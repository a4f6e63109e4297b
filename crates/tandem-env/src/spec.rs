//! What the env crate builds: a game of tandem-spec's catalogue ([`Game`]) with a chain of
//! wrappers ([`Wrapper`]), both declared in tandem-spec, so the config's resolved values are
//! built as they are. [`make_env`] builds the chain and refuses, by tandem-spec's fit rule,
//! wrappers that do not fit.

use crate::EnvError;
use crate::env::Env;
use crate::rng::derive_seed;
use crate::space::ObsSpace;
use crate::wrappers;
use tandem_spec::fit::GameFacts;
pub use tandem_spec::{Game, Wrapper};

pub use crate::minatar::MINATAR_STICKY_ACTION_PROB;

/// A game and its wrappers.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    pub game: Game,
    pub wrappers: Vec<Wrapper>,
}

impl EnvSpec {
    pub fn new(game: Game) -> Self {
        EnvSpec {
            game,
            wrappers: Vec::new(),
        }
    }

    pub fn with(mut self, wrapper: Wrapper) -> Self {
        self.wrappers.push(wrapper);
        self
    }
}

/// The observation space at the end of the chain, checking every wrapper's fit and
/// parameters without building the game (for config validation). A gymnasium
/// environment's space is known only once its workers start: for one, this checks the
/// game's parameters and refuses the wrappers it cannot take, then says so in an
/// [`EnvError::InvalidArgument`].
pub fn observation_space(spec: &EnvSpec) -> Result<ObsSpace, EnvError> {
    let Some(info) = spec.game.info() else {
        let launch = match &spec.game {
            Game::Gymnasium(gym) => crate::gym::Launch::new(gym, &Default::default())?,
            Game::PettingZoo(zoo) => crate::gym::Launch::pettingzoo(zoo, &Default::default())?,
            _ => unreachable!("only the bridge's environments are outside the catalogue"),
        };
        crate::gym::check_wrappers(&spec.wrappers, &launch)?;
        return Err(EnvError::InvalidArgument(format!(
            "the observation space of {} is known once its workers start (VecEnv::new)",
            launch.label
        )));
    };
    let game = info.facts();
    let mut space = info.observation;
    for (index, wrapper) in spec.wrappers.iter().enumerate() {
        space = wrappers::output_space(wrapper, index, &space, &game)?;
    }
    Ok(space)
}

/// Builds the bare game, seeded with `seed`: MinAtar's games with
/// [`MINATAR_STICKY_ACTION_PROB`] and their minimal action sets, Atari's with the ALE's own
/// sticky actions off and the ROM's minimal action set.
pub fn make_game(game: &Game, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    if let Some(env) = crate::classic::make(game, seed).or_else(|| crate::minatar::make(game, seed))
    {
        return Ok(env);
    }
    Ok(match game {
        #[cfg(feature = "atari")]
        Game::Atari { rom } => crate::atari::make_atari(rom, seed)?,
        #[cfg(not(feature = "atari"))]
        Game::Atari { .. } => {
            return Err(EnvError::FeatureDisabled {
                game: game.name().to_string(),
                feature: "atari",
            });
        }
        Game::Gymnasium(gym) => {
            return Err(EnvError::InvalidArgument(format!(
                "gymnasium `{}` runs in worker processes that VecEnv::new starts; it cannot be built alone",
                gym.id
            )));
        }
        Game::PettingZoo(zoo) => {
            return Err(EnvError::InvalidArgument(format!(
                "pettingzoo `{}` runs in worker processes that VecEnv::new starts; it cannot be built alone",
                zoo.module
            )));
        }
        several if several.is_multi_agent() => {
            return Err(EnvError::InvalidArgument(format!(
                "`{}` is played by several agents at once; VecEnv::new builds it, one row per agent",
                game.name()
            )));
        }
        other => unreachable!(
            "{} is a native game that classic::make or minatar::make builds",
            other.name()
        ),
    })
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
    let game = GameFacts {
        actions: Some(env.action_space()),
        ..spec.game.facts()
    };
    for (index, wrapper) in spec.wrappers.iter().enumerate() {
        let seed = derive_seed(seed, index as u64 + 1);
        env = wrappers::wrap_on(wrapper, index, env, seed, &game)?;
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every native game of tandem-spec's catalogue is built, with the spaces the catalogue
    /// states for it (the catalogue is what the config checks a chain against).
    #[test]
    fn every_native_game_builds_as_the_catalogue_states() {
        for (game, info) in tandem_spec::game::NATIVE {
            if game.is_multi_agent() {
                let several =
                    crate::mpe::make(game, 7).unwrap_or_else(|e| panic!("{}: {e}", info.name));
                assert_eq!(several.name(), info.name);
                assert_eq!(several.agents().len(), info.agents, "{}", info.name);
                for agent in several.agents() {
                    assert_eq!(agent.actions, info.actions, "{}", info.name);
                }
                // The catalogue's observation is the batch's row: the widest agent's.
                let widest = several.agents().iter().map(|a| a.observation);
                let widest = widest.max_by_key(ObsSpace::len);
                assert_eq!(widest, Some(info.observation), "{}", info.name);
                continue;
            }
            assert_eq!(info.agents, 1, "{}", info.name);
            let built = make_game(game, 7).unwrap_or_else(|e| panic!("{}: {e}", info.name));
            assert_eq!(built.observation_space(), info.observation, "{}", info.name);
            assert_eq!(built.action_space(), info.actions, "{}", info.name);
        }
    }

    /// Every MPE game's built agents are the teams tandem-spec declares for it, in order
    /// (names, teams, observations), at the catalogue's parameters and a few others.
    #[test]
    fn every_multi_agent_game_builds_the_teams_the_catalogue_declares() {
        use tandem_spec::{SpreadParams, TagParams};
        let mut games: Vec<Game> = tandem_spec::game::NATIVE
            .iter()
            .map(|(game, _)| game.clone())
            .filter(Game::is_multi_agent)
            .collect();
        assert_eq!(games.len(), 2, "simple_spread and simple_tag");
        for agents in [1, 5] {
            games.push(Game::MpeSimpleSpread(SpreadParams {
                agents,
                ..SpreadParams::MPE2
            }));
        }
        for (num_good, num_adversaries, num_obstacles) in [(1, 1, 0), (2, 3, 1), (4, 2, 5)] {
            games.push(Game::MpeSimpleTag(TagParams {
                num_good,
                num_adversaries,
                num_obstacles,
                continuous_actions: num_obstacles == 1,
                ..TagParams::MPE2
            }));
        }
        for game in &games {
            let built = crate::mpe::make(game, 3).unwrap_or_else(|e| panic!("{game:?}: {e}"));
            let teams = game.teams();
            let declared: Vec<(String, String, ObsSpace)> = teams
                .iter()
                .flat_map(|t| {
                    (0..t.agents).map(|i| (format!("{}_{i}", t.name), t.name.into(), t.observation))
                })
                .collect();
            let agents: Vec<(String, String, ObsSpace)> = built
                .agents()
                .iter()
                .map(|a| (a.name.clone(), a.team.clone(), a.observation))
                .collect();
            assert_eq!(agents, declared, "{game:?}");
            let info = game.info().unwrap();
            assert_eq!(info.agents, agents.len(), "{game:?}");
            let widest = teams
                .iter()
                .map(|t| t.observation)
                .max_by_key(ObsSpace::len);
            assert_eq!(widest, Some(info.observation), "{game:?}");
        }
        assert!(Game::Cartpole.teams().is_empty());
    }
}

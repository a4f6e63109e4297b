//! The DeepMind Atari preprocessing as an [`EnvSpec`], for the tests and benchmarks of this
//! crate (the shipped preset is `experiments/include/atari.kdl`, which the config resolves).

use tandem_env::{EnvSpec, Game, Wrapper};

/// The DeepMind Atari preprocessing on `game`: noop-reset 30, fire-reset, frame-skip 4 with
/// max-pool, episodic-life, grayscale, resize 84x84, clip-reward, and a stack of 4 frames.
pub fn deepmind_atari(game: Game) -> EnvSpec {
    [
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
    ]
    .into_iter()
    .fold(EnvSpec::new(game), EnvSpec::with)
}

//! Atari 2600 games through the Arcade Learning Environment (crate `tandem-ale`,
//! GPL-2.0, behind this crate's cargo feature `atari`): the [`AtariGame`]
//! environment, gymnasium's Atari seeding ([`atari_env_seeds`]) and a no-op reset
//! that draws its counts the way gymnasium's `AtariPreprocessing` does
//! ([`GymNoopReset`]).
//!
//! One [`Env::step`] of [`AtariGame`] is one emulated frame, like ale-py's
//! `AtariEnv` with `frameskip=1`: frame skipping, pooling, resizing and stacking
//! are the wrappers' job. Seeding follows gymnasium's `AtariEnv` exactly, so
//! `reset(Some(s))` here and `env.reset(seed=s)` there give the same game: the
//! seed goes through numpy's `SeedSequence`, whose first word seeds a PCG64
//! generator (used for no-op counts) and whose second word is ALE's seed.

use crate::EnvError;
use crate::env::{Env, RgbFrame, Step};
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsSpace};
use crate::gym_seeding::{NumpyGenerator, SeedSequence};
use crate::snapshot::{Persist, expect_same, load_section, save_param, save_section, snapshot_error};
use tandem_ale::{Ale, AleError, AleSettings, AleState, SCREEN_HEIGHT, SCREEN_WIDTH};

crate::snapshot::persist_fields!(AleState {
    system,
    player_a_action,
    player_b_action,
    paddle_a_strength,
    paddle_b_strength,
    screen
});

/// gymnasium's `ALE/*-v5` environments truncate episodes after 108,000 frames
/// (30 minutes of play).
pub const V5_MAX_FRAMES_PER_EPISODE: u32 = 108_000;

/// What an [`AtariGame`] writes as its observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtariObservation {
    /// u8 RGB, 210 x 160 x 3 (height x width x channels).
    Rgb,
    /// u8 luma from ALE's palette, 210 x 160 x 1: what gymnasium's
    /// `AtariPreprocessing` pools and resizes. For all 128 NTSC colours ALE's
    /// luma equals OpenCV's RGB2GRAY, i.e. the `grayscale` wrapper on RGB; this
    /// mode only saves the RGB detour.
    Grayscale,
}

/// Everything that defines an Atari game instance.
#[derive(Debug, Clone, PartialEq)]
pub struct AtariConfig {
    /// ALE's ROM name, e.g. `breakout`.
    pub rom: String,
    /// ALE's sticky-action probability (per emulated frame); always set explicitly.
    pub repeat_action_probability: f32,
    /// All 18 actions instead of the game's minimal set.
    pub full_action_space: bool,
    /// ALE truncates an episode after this many frames (`None`: never).
    pub max_frames_per_episode: Option<u32>,
    pub observation: AtariObservation,
}

impl AtariConfig {
    /// gymnasium's `ALE/<Rom>-v5` with `frameskip=1`: sticky actions 0.25, the
    /// minimal action set, truncation at 108,000 frames, RGB observations.
    pub fn v5(rom: &str) -> Self {
        AtariConfig {
            rom: rom.to_owned(),
            repeat_action_probability: 0.25,
            full_action_space: false,
            max_frames_per_episode: Some(V5_MAX_FRAMES_PER_EPISODE),
            observation: AtariObservation::Rgb,
        }
    }

    fn ale_settings(&self, ale_seed: u32) -> AleSettings {
        AleSettings {
            // ALE reads -1 as "seed from the clock" (gymnasium would pass it on, one
            // seed in 2^32); keep runs reproducible instead.
            seed: if ale_seed == u32::MAX {
                u32::MAX - 1
            } else {
                ale_seed
            },
            repeat_action_probability: self.repeat_action_probability,
            max_num_frames_per_episode: self.max_frames_per_episode,
            mode: None,
            difficulty: None,
            full_action_space: self.full_action_space,
        }
    }
}

/// Builds the catalogue's Atari game `rom` (`make_game` calls this): gymnasium's v5
/// settings with the ALE's own sticky actions off (a config that wants them declares the
/// `sticky-actions` wrapper) and the ROM's minimal action set.
pub fn make_atari(rom: &str, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    let config = AtariConfig {
        repeat_action_probability: 0.0,
        ..AtariConfig::v5(rom)
    };
    Ok(Box::new(AtariGame::new(config, seed)?))
}

fn backend_error(config: &AtariConfig, error: AleError) -> EnvError {
    match error {
        AleError::UnknownGame { .. } | AleError::InvalidSetting { .. } => {
            EnvError::InvalidGameParameter {
                game: format!("atari-{}", config.rom),
                reason: error.to_string(),
            }
        }
        other => EnvError::Backend(format!("atari-{}: {other}", config.rom)),
    }
}

/// An Atari 2600 game; one step is one emulated frame.
pub struct AtariGame {
    config: AtariConfig,
    ale: Ale,
    /// gymnasium's `AtariEnv.np_random`: where gymnasium-style no-op counts come from.
    np_random: NumpyGenerator,
    /// Screen scratch for f32 observations.
    rgb: Vec<u8>,
    /// The seed the game was built or last reseeded with, while nothing has
    /// happened since: reseeding then would only repeat the work (a new ALE
    /// environment costs ~0.2 s of CPU), so VecEnv's first, seeded reset is free.
    untouched_seed: Option<u64>,
}

impl AtariGame {
    /// Loads the game seeded as gymnasium's `reset(seed=seed)` would seed it.
    pub fn new(config: AtariConfig, seed: u64) -> Result<Self, EnvError> {
        let (np_random, ale_seed) = atari_env_seeds(seed);
        let ale = Ale::new(&config.rom, &config.ale_settings(ale_seed))
            .map_err(|error| backend_error(&config, error))?;
        Ok(AtariGame {
            config,
            ale,
            np_random,
            rgb: vec![0; SCREEN_HEIGHT * SCREEN_WIDTH * 3],
            untouched_seed: Some(seed),
        })
    }

    pub fn config(&self) -> &AtariConfig {
        &self.config
    }

    /// ALE action codes of the action set, in action-index order.
    pub fn action_set(&self) -> &[i32] {
        self.ale.action_set()
    }

    /// Draws a no-op count in `1..=noop_max` from this game's gymnasium stream, as
    /// `AtariPreprocessing.reset` does with `env.unwrapped.np_random`.
    pub fn gym_noop_count(&mut self, noop_max: u32) -> u32 {
        self.untouched_seed = None;
        1 + self.np_random.below(noop_max.max(1))
    }

    /// The emulator, e.g. for RAM inspection.
    pub fn ale(&self) -> &Ale {
        &self.ale
    }

    fn tag(&self) -> String {
        format!("atari-{}", self.config.rom)
    }

    /// Build parameters a restored state must agree with (the ROM is in the tag).
    fn params(&self) -> (f32, (bool, (Option<u32>, u8))) {
        let observation = match self.config.observation {
            AtariObservation::Rgb => 0u8,
            AtariObservation::Grayscale => 1,
        };
        (
            self.config.repeat_action_probability,
            (
                self.config.full_action_space,
                (self.config.max_frames_per_episode, observation),
            ),
        )
    }

    fn write_observation(&mut self, obs: ObsBuf<'_>) {
        let result = match obs {
            ObsBuf::Skip => return,
            ObsBuf::U8(out) => match self.config.observation {
                AtariObservation::Rgb => self.ale.screen_rgb(out),
                AtariObservation::Grayscale => self.ale.screen_grayscale(out),
            },
            ObsBuf::F32(out) => {
                let pixels = match self.config.observation {
                    AtariObservation::Rgb => &mut self.rgb[..],
                    AtariObservation::Grayscale => &mut self.rgb[..SCREEN_HEIGHT * SCREEN_WIDTH],
                };
                let result = match self.config.observation {
                    AtariObservation::Rgb => self.ale.screen_rgb(pixels),
                    AtariObservation::Grayscale => self.ale.screen_grayscale(pixels),
                };
                if out.len() != pixels.len() {
                    panic!(
                        "atari-{}: f32 observation buffer holds {} values, the observation space {}",
                        self.config.rom,
                        out.len(),
                        pixels.len()
                    );
                }
                for (value, &pixel) in out.iter_mut().zip(pixels.iter()) {
                    *value = f32::from(pixel);
                }
                result
            }
        };
        // Only a buffer of the wrong size can fail, which breaks the Env contract.
        if let Err(error) = result {
            panic!(
                "atari-{}: observation buffer does not match the observation space: {error}",
                self.config.rom
            );
        }
    }
}

impl Env for AtariGame {
    fn observation_space(&self) -> ObsSpace {
        match self.config.observation {
            AtariObservation::Rgb => {
                ObsSpace::image(SCREEN_HEIGHT, SCREEN_WIDTH, 3, Layout::Hwc, Dtype::U8)
            }
            AtariObservation::Grayscale => {
                ObsSpace::image(SCREEN_HEIGHT, SCREEN_WIDTH, 1, Layout::Hwc, Dtype::U8)
            }
        }
    }

    fn action_space(&self) -> ActionSpace {
        ActionSpace::discrete(self.ale.num_actions())
    }

    /// `Some(seed)`: reseed as gymnasium's `AtariEnv.reset(seed=seed)` (fresh ALE
    /// seed and no-op stream, game reloaded); then restart the game.
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        if let Some(seed) = seed.filter(|&seed| self.untouched_seed != Some(seed)) {
            let (np_random, ale_seed) = atari_env_seeds(seed);
            self.np_random = np_random;
            // The settings were validated when the game was built; only the seed changed.
            if let Err(error) = self.ale.reseed(&self.config.ale_settings(ale_seed)) {
                panic!("atari-{}: reseeding ALE failed: {error}", self.config.rom);
            }
        }
        self.untouched_seed = None;
        if let Err(error) = self.ale.reset() {
            panic!("atari-{}: ALE reset failed: {error}", self.config.rom);
        }
        self.write_observation(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        self.untouched_seed = None;
        // VecEnv checks actions against the action space before stepping.
        let reward = match self.ale.act(action.index()) {
            Ok(reward) => reward as f32,
            Err(error) => panic!("atari-{}: {error}", self.config.rom),
        };
        self.write_observation(obs);
        Step::game(reward, self.ale.game_over(), self.ale.truncated())
    }

    fn lives(&self) -> u32 {
        self.ale.lives().max(0) as u32
    }

    fn chain_names(&self, names: &mut Vec<String>) {
        names.push(self.tag());
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        let state = self
            .ale
            .save_state()
            .map_err(|error| snapshot_error(format!("{}: {error}", self.tag())))?;
        save_section(out, &self.tag(), |out| {
            save_param(&self.params(), out);
            self.np_random.save(out);
            self.untouched_seed.save(out);
            state.save(out);
            Ok(())
        })
    }

    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let tag = self.tag();
        let params = self.params();
        let mut state = AleState::default();
        load_section(input, &tag, |input| {
            expect_same(
                &params,
                "(sticky-action probability, (full action space, (frame limit, observation)))",
                input,
            )?;
            self.np_random.load(input)?;
            self.untouched_seed.load(input)?;
            state.load(input)
        })?;
        self.ale
            .load_state(&state)
            .map_err(|error| snapshot_error(format!("{tag}: {error}")))
    }

    fn render_rgb(&self) -> Option<RgbFrame> {
        let mut pixels = vec![0u8; SCREEN_HEIGHT * SCREEN_WIDTH * 3];
        self.ale.screen_rgb(&mut pixels).ok()?;
        Some(RgbFrame {
            height: SCREEN_HEIGHT,
            width: SCREEN_WIDTH,
            pixels,
        })
    }
}

/// No-op reset drawing its counts from the wrapped [`AtariGame`]'s gymnasium
/// stream, so that with the same seed it takes exactly the no-ops gymnasium's
/// `AtariPreprocessing(noop_max=...)` takes. Otherwise like the `noop-reset`
/// wrapper: after the game's reset, 1..=`noop_max` NOOP frames; a game that ends
/// during them is reset again.
pub struct GymNoopReset {
    game: AtariGame,
    noop_max: u32,
}

impl GymNoopReset {
    pub fn new(game: AtariGame, noop_max: u32) -> Result<Self, EnvError> {
        if noop_max == 0 {
            return Err(EnvError::InvalidArgument(
                "gymnasium no-op reset: noop_max must be at least 1".into(),
            ));
        }
        Ok(GymNoopReset { game, noop_max })
    }

    pub fn game(&self) -> &AtariGame {
        &self.game
    }
}

impl Env for GymNoopReset {
    fn observation_space(&self) -> ObsSpace {
        self.game.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.game.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.game.reset(seed, ObsBuf::Skip);
        let noops = self.game.gym_noop_count(self.noop_max);
        for noop in 1..=noops {
            let out = if noop == noops {
                obs.reborrow()
            } else {
                ObsBuf::Skip
            };
            if self.game.step(Action::Discrete(0), out).done() {
                // gymnasium resets with the episode's seed again here; the seed was
                // already applied above, so continuing unseeded differs only if a
                // game can end within 30 no-ops (Breakout cannot).
                let out = if noop == noops {
                    obs.reborrow()
                } else {
                    ObsBuf::Skip
                };
                self.game.reset(None, out);
            }
        }
    }
    fn step(&mut self, action: Action<'_>, obs: ObsBuf<'_>) -> Step {
        self.game.step(action, obs)
    }
    fn lives(&self) -> u32 {
        self.game.lives()
    }
    fn chain_names(&self, names: &mut Vec<String>) {
        names.push("gym-noop-reset".to_owned());
        self.game.chain_names(names);
    }
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), EnvError> {
        save_section(out, "gym-noop-reset", |out| {
            save_param(&self.noop_max, out);
            self.game.save_state(out)
        })
    }
    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        load_section(input, "gym-noop-reset", |input| {
            expect_same(&self.noop_max, "noop_max", input)?;
            self.game.load_state(input)
        })
    }
    fn render_rgb(&self) -> Option<RgbFrame> {
        self.game.render_rgb()
    }
}

/// What gymnasium's `AtariEnv.seed_game(seed)` derives: its `np_random` and
/// the ALE seed (the uint32 bit pattern ALE receives as an int32).
pub fn atari_env_seeds(seed: u64) -> (NumpyGenerator, u32) {
    let state = SeedSequence::new(seed).generate_u32(2);
    (NumpyGenerator::from_seed(u64::from(state[0])), state[1])
}

//! Safe bindings to the Arcade Learning Environment (ALE) 0.12.1 for tandem.
//!
//! This crate owns the whole ALE boundary: the CMake build of ALE's C++ source
//! (see `build.rs`; the source comes from the ale-py sdist that
//! `scripts/setup-ale` fetches and verifies), a small C shim that never lets a
//! C++ exception cross into Rust, the game ROMs (embedded in the binary at
//! build time, so nothing is read from the source tree at run time), and the
//! [`Ale`] type.
//!
//! # Licence
//!
//! ALE is GPL-2.0, so this crate, which links it statically, is
//! `GPL-2.0-only`. It is a separate crate, reached from `tandem-env` only
//! through the `atari` cargo feature, so that the rest of tandem stays
//! MIT/Apache-2.0 and a build without that feature contains no GPL code.
//!
//! # Determinism
//!
//! ALE's own defaults are a clock-derived seed and sticky actions with
//! probability 0.25. [`AleSettings`] has no `Default`: the seed and the
//! sticky-action probability are always chosen by the caller. With equal
//! settings and actions, screens, rewards and lives are bit-identical to the
//! `ale-py` 0.12.1 wheel (checked by `tests/raw_parity.rs`).

mod ffi;

use std::ffi::{CStr, CString, c_char, c_int};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

mod roms {
    include!(concat!(env!("OUT_DIR"), "/roms.rs"));
}

/// Height of every Atari 2600 screen ALE produces.
pub const SCREEN_HEIGHT: usize = 210;
/// Width of every Atari 2600 screen ALE produces.
pub const SCREEN_WIDTH: usize = 160;
/// Bytes of console RAM.
pub const RAM_SIZE: usize = 128;

const ERROR_CAPACITY: usize = 1024;

/// ALE reads `random_seed == -1` as "seed from the clock".
const CLOCK_SEED: u32 = u32::MAX;

/// Names of the games whose ROMs are built in, sorted (`"breakout"`, `"pong"`, ...).
pub fn available_games() -> impl Iterator<Item = &'static str> {
    roms::ROMS.iter().map(|(name, _)| *name)
}

/// The built-in ROM image of `game`, if there is one.
pub fn rom_image(game: &str) -> Option<&'static [u8]> {
    roms::ROMS
        .binary_search_by(|(name, _)| (*name).cmp(game))
        .ok()
        .map(|index| roms::ROMS[index].1)
}

/// Everything ALE needs before a ROM is loaded. No `Default`: the seed and the
/// sticky-action probability must be chosen explicitly (ALE's own defaults are
/// a clock seed and 0.25).
#[derive(Debug, Clone, PartialEq)]
pub struct AleSettings {
    /// ALE's `random_seed` (sticky actions and nothing else in Breakout).
    /// Passed bit-for-bit as the `int32` ale-py would pass; `u32::MAX` (= -1,
    /// ALE's "use the clock") is rejected.
    pub seed: u32,
    /// Probability in [0, 1] that ALE repeats the previous action instead of
    /// the requested one, per emulated frame (Machado et al. 2018 use 0.25).
    pub repeat_action_probability: f32,
    /// Truncate episodes after this many emulated frames (`None`: never).
    pub max_num_frames_per_episode: Option<u32>,
    /// Game mode; `None` keeps the ROM's default.
    pub mode: Option<u32>,
    /// Game difficulty; `None` keeps the ROM's default.
    pub difficulty: Option<u32>,
    /// Index actions into all 18 legal actions instead of the game's minimal set.
    pub full_action_space: bool,
}

impl AleSettings {
    /// Settings with the given seed and sticky-action probability, the ROM's
    /// default mode and difficulty, no frame limit and the minimal action set.
    pub fn new(seed: u32, repeat_action_probability: f32) -> Self {
        AleSettings {
            seed,
            repeat_action_probability,
            max_num_frames_per_episode: None,
            mode: None,
            difficulty: None,
            full_action_space: false,
        }
    }

    fn validate(&self) -> Result<ffi::TandemAleConfig, AleError> {
        if self.seed == CLOCK_SEED {
            return Err(AleError::InvalidSetting {
                setting: "seed",
                value: self.seed.to_string(),
                reason: "ALE reads this value (-1 as int32) as \"seed from the clock\"; choose any other seed",
            });
        }
        let probability = self.repeat_action_probability;
        if !(0.0..=1.0).contains(&probability) {
            return Err(AleError::InvalidSetting {
                setting: "repeat_action_probability",
                value: probability.to_string(),
                reason: "must be a probability in [0, 1]",
            });
        }
        let to_i32 =
            |setting: &'static str, value: Option<u32>, none: i32| -> Result<i32, AleError> {
                match value {
                    None => Ok(none),
                    Some(value) => i32::try_from(value).map_err(|_| AleError::InvalidSetting {
                        setting,
                        value: value.to_string(),
                        reason: "must be below 2^31",
                    }),
                }
            };
        if self.max_num_frames_per_episode == Some(0) {
            return Err(AleError::InvalidSetting {
                setting: "max_num_frames_per_episode",
                value: "0".into(),
                reason: "must be positive; use None for no limit",
            });
        }
        Ok(ffi::TandemAleConfig {
            random_seed: self.seed as i32,
            repeat_action_probability: probability,
            max_num_frames_per_episode: to_i32(
                "max_num_frames_per_episode",
                self.max_num_frames_per_episode,
                0,
            )?,
            mode: to_i32("mode", self.mode, -1)?,
            difficulty: to_i32("difficulty", self.difficulty, -1)?,
        })
    }
}

/// What can go wrong talking to ALE.
#[derive(Debug)]
pub enum AleError {
    /// No built-in ROM has this name.
    UnknownGame {
        game: String,
        suggestions: Vec<&'static str>,
    },
    /// A setting is out of range.
    InvalidSetting {
        setting: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A ROM file is not one ALE supports (its MD5 is not in ALE's table).
    UnsupportedRom { path: PathBuf },
    /// Writing or reading a ROM file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// ALE threw a C++ exception.
    Ale {
        operation: &'static str,
        message: String,
    },
    /// An action index outside the action set.
    ActionOutOfRange { index: usize, count: usize },
    /// A caller-provided buffer has the wrong length.
    BufferSize {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
}

impl fmt::Display for AleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AleError::UnknownGame { game, suggestions } if suggestions.is_empty() => {
                write!(
                    f,
                    "unknown Atari game {game:?}: no built-in ROM has this name (names are snake_case, e.g. \"breakout\", \"space_invaders\")"
                )
            }
            AleError::UnknownGame { game, suggestions } => {
                write!(
                    f,
                    "unknown Atari game {game:?}; did you mean {}?",
                    suggestions.join(", ")
                )
            }
            AleError::InvalidSetting {
                setting,
                value,
                reason,
            } => {
                write!(f, "invalid ALE setting {setting} = {value}: {reason}")
            }
            AleError::UnsupportedRom { path } => {
                write!(
                    f,
                    "{} is not a ROM ALE 0.12.1 supports (its MD5 is not in ALE's table)",
                    path.display()
                )
            }
            AleError::Io { path, source } => write!(f, "ROM file {}: {source}", path.display()),
            AleError::Ale { operation, message } => {
                write!(f, "ALE failed in {operation}: {message}")
            }
            AleError::ActionOutOfRange { index, count } => {
                write!(
                    f,
                    "action index {index} is outside the action set (0..{count})"
                )
            }
            AleError::BufferSize {
                what,
                expected,
                actual,
            } => {
                write!(f, "{what} buffer holds {actual} bytes, expected {expected}")
            }
        }
    }
}

impl std::error::Error for AleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AleError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Runs a shim call that reports failure through an error buffer.
fn checked(
    operation: &'static str,
    call: impl FnOnce(*mut c_char, usize) -> c_int,
) -> Result<(), AleError> {
    let mut buffer = [0 as c_char; ERROR_CAPACITY];
    if call(buffer.as_mut_ptr(), buffer.len()) == 0 {
        return Ok(());
    }
    // SAFETY: the shim always NUL-terminates within the capacity it was given.
    let message = unsafe { CStr::from_ptr(buffer.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Err(AleError::Ale { operation, message })
}

/// Loading a ROM builds a console whose TIA (re)computes lookup tables that
/// are static, shared by all instances, so instances are created one at a
/// time. The tables always get the same values, and after creation each
/// instance only touches its own state: stepping distinct instances in
/// parallel is safe (ale-py's vector environment does the same).
static CREATION_LOCK: Mutex<()> = Mutex::new(());

/// A temporary folder holding one ROM file; removed on drop. ALE only loads
/// ROMs from paths, and it falls back on the file stem to identify a game.
struct TemporaryRom {
    folder: PathBuf,
    path: PathBuf,
}

impl TemporaryRom {
    fn write(game: &str, image: &[u8]) -> Result<Self, AleError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let folder =
            std::env::temp_dir().join(format!("tandem-ale-{}-{unique}", std::process::id()));
        let path = folder.join(format!("{game}.bin"));
        let io_error = |source| AleError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(&folder).map_err(io_error)?;
        let rom = TemporaryRom {
            folder,
            path: path.clone(),
        };
        fs::write(&path, image).map_err(io_error)?;
        Ok(rom)
    }
}

impl Drop for TemporaryRom {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.folder);
    }
}

/// One emulator running one game.
pub struct Ale {
    handle: NonNull<ffi::TandemAle>,
    actions: Vec<i32>,
    height: usize,
    width: usize,
}

// SAFETY: an ALEInterface owns all its emulator state; the globals it touches
// (TIA tables while loading, the logger level once) are written under
// CREATION_LOCK or std::call_once. It is not Sync: even ALE's const getters
// are not documented as thread-safe.
unsafe impl Send for Ale {}

impl Ale {
    /// Loads the built-in ROM of `game` (snake_case, e.g. `"breakout"`).
    /// The game is at its start state; [`Ale::reset`] restarts it.
    pub fn new(game: &str, settings: &AleSettings) -> Result<Ale, AleError> {
        let image = rom_image(game).ok_or_else(|| AleError::UnknownGame {
            game: game.to_owned(),
            suggestions: suggest_games(game),
        })?;
        let rom = TemporaryRom::write(game, image)?;
        Self::from_rom_file(&rom.path, settings)
    }

    /// Loads a ROM file; ALE must recognise its MD5.
    pub fn from_rom_file(path: &Path, settings: &AleSettings) -> Result<Ale, AleError> {
        let config = settings.validate()?;
        let metadata = fs::metadata(path).map_err(|source| AleError::Io {
            path: path.to_owned(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(AleError::Io {
                path: path.to_owned(),
                source: std::io::Error::other("not a regular file"),
            });
        }
        let c_path =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| AleError::Io {
                path: path.to_owned(),
                source: std::io::Error::other("path contains a NUL byte"),
            })?;
        let _guard = CREATION_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // ALE calls std::exit() when asked to load a ROM it cannot wrap, so ask first.
        let mut supported: c_int = 0;
        // SAFETY: valid C string and out-pointers for the duration of the call.
        checked("checking the ROM", |error, capacity| unsafe {
            ffi::tandem_ale_rom_supported(c_path.as_ptr(), &mut supported, error, capacity)
        })?;
        if supported == 0 {
            return Err(AleError::UnsupportedRom {
                path: path.to_owned(),
            });
        }
        let mut raw: *mut ffi::TandemAle = std::ptr::null_mut();
        // SAFETY: as above; on success the shim hands over ownership of `raw`.
        checked("loading the ROM", |error, capacity| unsafe {
            ffi::tandem_ale_new(c_path.as_ptr(), &config, &mut raw, error, capacity)
        })?;
        let handle = NonNull::new(raw).ok_or(AleError::Ale {
            operation: "loading the ROM",
            message: "the shim returned no instance".into(),
        })?;
        let mut ale = Ale {
            handle,
            actions: Vec::new(),
            height: 0,
            width: 0,
        };
        ale.actions = ale.read_actions(settings.full_action_space);
        // SAFETY: `ale.handle` was just created and is owned by `ale`; the two out-pointers are
        // fields of `ale`, valid and exclusively borrowed for the call.
        unsafe {
            ffi::tandem_ale_screen_dims(ale.handle.as_ptr(), &mut ale.height, &mut ale.width)
        };
        Ok(ale)
    }

    fn read_actions(&self, full_action_space: bool) -> Vec<i32> {
        let reader = if full_action_space {
            ffi::tandem_ale_legal_actions
        } else {
            ffi::tandem_ale_minimal_actions
        };
        let mut actions = vec![0i32; 32];
        // SAFETY: live handle; the shim writes at most `capacity` entries and returns the true count.
        let count = unsafe { reader(self.handle.as_ptr(), actions.as_mut_ptr(), actions.len()) };
        if count > actions.len() {
            actions.resize(count, 0);
            // SAFETY: as above, now with room for all of them.
            unsafe { reader(self.handle.as_ptr(), actions.as_mut_ptr(), actions.len()) };
        }
        actions.truncate(count);
        actions
    }

    /// Puts the emulator in the state of the ROM freshly loaded with
    /// `settings`, which is what ale-py's `reset(seed=...)` achieves by
    /// reloading the ROM: sticky-action RNG seeded, previous action NOOP,
    /// frame counters at zero, the console (RAM, its own RNG) as right after
    /// loading, mode and difficulty reapplied; call [`Ale::reset`] next, as
    /// after [`Ale::new`]. The ROM file is not read again. Costs about as much
    /// as loading (~0.2 s: ALE's environment precomputes colour tables). The
    /// action-space choice of the original settings is kept.
    pub fn reseed(&mut self, settings: &AleSettings) -> Result<(), AleError> {
        let config = settings.validate()?;
        // SAFETY: live handle, valid config and error buffer for the duration of the call.
        checked("reseeding", |error, capacity| unsafe {
            ffi::tandem_ale_reseed(self.handle.as_ptr(), &config, error, capacity)
        })
    }

    /// Restarts the game (ALE's `reset_game`: 60 no-op frames, soft reset,
    /// the ROM's starting actions). The sticky-action RNG is not reseeded.
    pub fn reset(&mut self) -> Result<(), AleError> {
        // SAFETY: live handle, error buffer from `checked`.
        checked("reset", |error, capacity| unsafe {
            ffi::tandem_ale_reset(self.handle.as_ptr(), error, capacity)
        })
    }

    /// Emulates one frame with action `index` of [`Ale::action_set`]; returns its reward.
    pub fn act(&mut self, index: usize) -> Result<i32, AleError> {
        let code = *self.actions.get(index).ok_or(AleError::ActionOutOfRange {
            index,
            count: self.actions.len(),
        })?;
        let mut reward = 0;
        // SAFETY: live handle, valid out-pointer, error buffer from `checked`.
        checked("act", |error, capacity| unsafe {
            ffi::tandem_ale_act(self.handle.as_ptr(), code, &mut reward, error, capacity)
        })?;
        Ok(reward)
    }

    /// Number of actions [`Ale::act`] accepts.
    pub fn num_actions(&self) -> usize {
        self.actions.len()
    }

    /// ALE action codes (`ale::Action`: 0 NOOP, 1 FIRE, 2 UP, 3 RIGHT, 4 LEFT, ...)
    /// of the action set, in index order; for Breakout's minimal set `[0, 1, 3, 4]`.
    pub fn action_set(&self) -> &[i32] {
        &self.actions
    }

    /// Whether the game ended (not counting truncation by the frame limit).
    pub fn game_over(&self) -> bool {
        // SAFETY: `self.handle` is the instance this Ale owns, valid until Drop; the getter
        // takes no other pointer, and Ale is not Sync, so no other call runs on it meanwhile.
        unsafe { ffi::tandem_ale_game_over(self.handle.as_ptr()) != 0 }
    }

    /// Whether `max_num_frames_per_episode` cut the episode short.
    pub fn truncated(&self) -> bool {
        // SAFETY: `self.handle` is the instance this Ale owns, valid until Drop; the getter
        // takes no other pointer, and Ale is not Sync, so no other call runs on it meanwhile.
        unsafe { ffi::tandem_ale_game_truncated(self.handle.as_ptr()) != 0 }
    }

    /// Lives left, as the game's RAM reports them.
    pub fn lives(&self) -> i32 {
        // SAFETY: `self.handle` is the instance this Ale owns, valid until Drop; the getter
        // takes no other pointer, and Ale is not Sync, so no other call runs on it meanwhile.
        unsafe { ffi::tandem_ale_lives(self.handle.as_ptr()) }
    }

    /// Frames emulated since the ROM was loaded.
    pub fn frame_number(&self) -> i32 {
        // SAFETY: `self.handle` is the instance this Ale owns, valid until Drop; the getter
        // takes no other pointer, and Ale is not Sync, so no other call runs on it meanwhile.
        unsafe { ffi::tandem_ale_frame_number(self.handle.as_ptr()) }
    }

    /// Frames emulated since the last reset.
    pub fn episode_frame_number(&self) -> i32 {
        // SAFETY: `self.handle` is the instance this Ale owns, valid until Drop; the getter
        // takes no other pointer, and Ale is not Sync, so no other call runs on it meanwhile.
        unsafe { ffi::tandem_ale_episode_frame_number(self.handle.as_ptr()) }
    }

    /// (height, width) of the screen: (210, 160) for every 2600 game.
    pub fn screen_dims(&self) -> (usize, usize) {
        (self.height, self.width)
    }

    /// Writes the screen as height x width x RGB bytes, row-major.
    pub fn screen_rgb(&self, rgb: &mut [u8]) -> Result<(), AleError> {
        let expected = self.height * self.width * 3;
        if rgb.len() != expected {
            return Err(AleError::BufferSize {
                what: "RGB screen",
                expected,
                actual: rgb.len(),
            });
        }
        // SAFETY: live handle; the buffer holds exactly height*width*3 bytes.
        unsafe { ffi::tandem_ale_screen_rgb(self.handle.as_ptr(), rgb.as_mut_ptr()) };
        Ok(())
    }

    /// Writes the screen as height x width luma bytes (ALE's palette grayscale).
    pub fn screen_grayscale(&self, gray: &mut [u8]) -> Result<(), AleError> {
        let expected = self.height * self.width;
        if gray.len() != expected {
            return Err(AleError::BufferSize {
                what: "grayscale screen",
                expected,
                actual: gray.len(),
            });
        }
        // SAFETY: live handle; the buffer holds exactly height*width bytes.
        unsafe { ffi::tandem_ale_screen_grayscale(self.handle.as_ptr(), gray.as_mut_ptr()) };
        Ok(())
    }

    /// The whole emulator state, for [`Ale::load_state`]: ALE's own serialisation
    /// with its sticky-action RNG (`cloneState(include_rng=true)`: console, RAM,
    /// cartridge, the system RNG, ROM settings such as score and lives, frame
    /// counters), the sticky-action memory ALE leaves out of it (the action and
    /// paddle strength each player held last frame) and the current screen (which
    /// restoring does not redraw). About 2 KB plus the 33.6 KB screen.
    pub fn save_state(&self) -> Result<AleState, AleError> {
        let mut data: *mut c_char = std::ptr::null_mut();
        let mut size = 0usize;
        let mut extra = ffi::TandemAleExtraState::default();
        // SAFETY: live handle, valid out-pointers, error buffer from `checked`.
        checked("saving state", |error, capacity| unsafe {
            ffi::tandem_ale_save_state(
                self.handle.as_ptr(),
                &mut data,
                &mut size,
                &mut extra,
                error,
                capacity,
            )
        })?;
        // SAFETY: on success the shim allocated `size` bytes at `data`; they are
        // copied, then freed exactly once by the shim's own deallocator.
        let system = unsafe {
            let copy = std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec();
            ffi::tandem_ale_free_state(data);
            copy
        };
        let mut screen = vec![0u8; self.height * self.width];
        // SAFETY: live handle; the buffer holds exactly height*width bytes.
        unsafe { ffi::tandem_ale_screen_indices(self.handle.as_ptr(), screen.as_mut_ptr()) };
        Ok(AleState {
            system,
            player_a_action: extra.player_a_action,
            player_b_action: extra.player_b_action,
            paddle_a_strength: extra.paddle_a_strength,
            paddle_b_strength: extra.paddle_b_strength,
            screen,
        })
    }

    /// Restores a state [`Ale::save_state`] produced for the same ROM (the Rust
    /// side's business to check: ALE does not compare the cartridge). Afterwards
    /// the emulator continues exactly as the saved one would have, sticky actions
    /// included, whatever this instance's seed was. Errors for a malformed state.
    pub fn load_state(&mut self, state: &AleState) -> Result<(), AleError> {
        let invalid = |message: String| AleError::Ale {
            operation: "restoring state",
            message,
        };
        if state.screen.len() != self.height * self.width {
            return Err(AleError::BufferSize {
                what: "saved screen",
                expected: self.height * self.width,
                actual: state.screen.len(),
            });
        }
        if !(0..=17).contains(&state.player_a_action) || !(18..=35).contains(&state.player_b_action)
        {
            return Err(invalid(format!(
                "held actions {} and {} are not player A and player B actions",
                state.player_a_action, state.player_b_action
            )));
        }
        if !state.paddle_a_strength.is_finite() || !state.paddle_b_strength.is_finite() {
            return Err(invalid("paddle strengths are not finite".into()));
        }
        let extra = ffi::TandemAleExtraState {
            player_a_action: state.player_a_action,
            player_b_action: state.player_b_action,
            paddle_a_strength: state.paddle_a_strength,
            paddle_b_strength: state.paddle_b_strength,
        };
        // SAFETY: live handle; `system` is a valid slice for the call's duration.
        checked("restoring state", |error, capacity| unsafe {
            ffi::tandem_ale_load_state(
                self.handle.as_ptr(),
                state.system.as_ptr().cast::<c_char>(),
                state.system.len(),
                &extra,
                error,
                capacity,
            )
        })?;
        // SAFETY: live handle; the buffer holds exactly height*width bytes.
        unsafe { ffi::tandem_ale_set_screen_indices(self.handle.as_ptr(), state.screen.as_ptr()) };
        Ok(())
    }

    /// The console's 128 bytes of RAM.
    pub fn ram(&self) -> [u8; RAM_SIZE] {
        let mut ram = [0u8; RAM_SIZE];
        // SAFETY: live handle; ALE's RAM is exactly 128 bytes.
        unsafe { ffi::tandem_ale_ram(self.handle.as_ptr(), ram.as_mut_ptr()) };
        ram
    }
}

/// An emulator state from [`Ale::save_state`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AleState {
    /// ALE's serialised `ALEState` including its environment RNG.
    pub system: Vec<u8>,
    /// `ale::Action` player A held last frame (what a sticky action repeats).
    pub player_a_action: i32,
    /// `ale::Action` player B held last frame.
    pub player_b_action: i32,
    pub paddle_a_strength: f32,
    pub paddle_b_strength: f32,
    /// The screen as palette indices, height x width.
    pub screen: Vec<u8>,
}

impl Drop for Ale {
    fn drop(&mut self) {
        // SAFETY: the handle came from tandem_ale_new and is freed exactly once.
        unsafe { ffi::tandem_ale_free(self.handle.as_ptr()) }
    }
}

impl fmt::Debug for Ale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ale")
            .field("actions", &self.actions)
            .field("frame_number", &self.frame_number())
            .finish_non_exhaustive()
    }
}

/// Built-in games whose names share a word with `game` or contain it.
fn suggest_games(game: &str) -> Vec<&'static str> {
    let wanted = game.to_ascii_lowercase().replace(['-', ' '], "_");
    if let Some(exact) = available_games().find(|name| *name == wanted) {
        return vec![exact];
    }
    available_games()
        .filter(|name| !wanted.is_empty() && (name.contains(&wanted) || wanted.contains(name)))
        .take(5)
        .collect()
}

// C ABI over ale::ALEInterface for the Rust bindings in src/ffi.rs.
//
// Every entry point catches all C++ exceptions and turns them into a status
// code plus a message, because unwinding across the FFI boundary is undefined
// behaviour. ALE also calls std::exit() on some load failures (missing or
// unsupported ROM); the Rust side only ever hands over ROM files whose MD5 it
// has checked against ALE's own table first (tandem_ale_rom_supported).
//
// Part of tandem-ale, GPL-2.0-only like the ALE it links.

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "ale/ale_interface.hpp"
#include "ale/emucore/Props.hxx"
#include "ale/games/Roms.hpp"

struct TandemAle {
  ale::ALEInterface ale;
  // The whole emulated system right after the ROM was loaded, including the
  // console's own RNG (which seeds RAM and the RIOT timer on every reset);
  // reseeding restores it, so it equals a fresh load without re-reading the ROM.
  std::unique_ptr<ale::ALEState> loaded_state;
  ale::ActionVect minimal_actions;
  ale::ActionVect legal_actions;
};

namespace {

void write_error(char* buffer, std::size_t capacity, const std::string& message) {
  if (buffer == nullptr || capacity == 0) return;
  std::size_t length = message.size() < capacity - 1 ? message.size() : capacity - 1;
  std::memcpy(buffer, message.data(), length);
  buffer[length] = '\0';
}

// Runs body, mapping any exception to status 1 with its message.
template <typename Body>
int guarded(char* error, std::size_t error_capacity, Body&& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& exception) {
    write_error(error, error_capacity, exception.what());
  } catch (const char* message) {
    // Stella's Deserializer throws string literals on truncated or corrupt input.
    write_error(error, error_capacity, message);
  } catch (...) {
    write_error(error, error_capacity, "unknown C++ exception in ALE");
  }
  return 1;
}

// ALE logs a banner, every ROM load and every seed at Info to stderr. The level
// is a global, so it is set exactly once, before any instance logs.
void quiet_logging() {
  static std::once_flag once;
  std::call_once(once, [] { ale::Logger::setMode(ale::Logger::Error); });
}

// The sticky-action memory (the action and paddle strength each player held last
// frame) lives in private members of StellaEnvironment that ALE's state
// serialisation leaves out. An explicit template instantiation may name private
// members (the standard exempts it from access checks); the friend function it
// defines hands out the member pointer.
template <typename Tag, typename Tag::type Member>
struct ExposeMember {
  friend typename Tag::type member_of(Tag) { return Member; }
};

struct PlayerAAction {
  using type = ale::Action ale::StellaEnvironment::*;
  friend type member_of(PlayerAAction);
};
struct PlayerBAction {
  using type = ale::Action ale::StellaEnvironment::*;
  friend type member_of(PlayerBAction);
};
struct PaddleAStrength {
  using type = float ale::StellaEnvironment::*;
  friend type member_of(PaddleAStrength);
};
struct PaddleBStrength {
  using type = float ale::StellaEnvironment::*;
  friend type member_of(PaddleBStrength);
};
struct Screen {
  using type = ale::ALEScreen ale::StellaEnvironment::*;
  friend type member_of(Screen);
};

template struct ExposeMember<PlayerAAction, &ale::StellaEnvironment::m_player_a_action>;
template struct ExposeMember<PlayerBAction, &ale::StellaEnvironment::m_player_b_action>;
template struct ExposeMember<PaddleAStrength, &ale::StellaEnvironment::m_paddle_a_strength>;
template struct ExposeMember<PaddleBStrength, &ale::StellaEnvironment::m_paddle_b_strength>;
template struct ExposeMember<Screen, &ale::StellaEnvironment::m_screen>;

}  // namespace

extern "C" {

// The settings the Rust side always sets explicitly; see AleSettings.
struct TandemAleConfig {
  int32_t random_seed;
  float repeat_action_probability;
  int32_t max_num_frames_per_episode;  // 0: no limit
  int32_t mode;                        // -1: the ROM's default
  int32_t difficulty;                  // -1: the ROM's default
};

int tandem_ale_rom_supported(const char* rom_path, int* supported, char* error,
                             std::size_t error_capacity) {
  return guarded(error, error_capacity, [&] {
    *supported = ale::ALEInterface::isSupportedROM(rom_path).has_value() ? 1 : 0;
  });
}

int tandem_ale_new(const char* rom_path, const TandemAleConfig* config, TandemAle** out,
                   char* error, std::size_t error_capacity) {
  *out = nullptr;
  return guarded(error, error_capacity, [&] {
    quiet_logging();
    auto handle = std::make_unique<TandemAle>();
    handle->ale.setInt("random_seed", config->random_seed);
    handle->ale.setFloat("repeat_action_probability", config->repeat_action_probability);
    handle->ale.setInt("max_num_frames_per_episode", config->max_num_frames_per_episode);
    handle->ale.loadROM(rom_path);
    handle->loaded_state = std::make_unique<ale::ALEState>(handle->ale.cloneState(false));
    if (config->mode >= 0) handle->ale.setMode(static_cast<ale::game_mode_t>(config->mode));
    if (config->difficulty >= 0)
      handle->ale.setDifficulty(static_cast<ale::difficulty_t>(config->difficulty));
    handle->minimal_actions = handle->ale.getMinimalActionSet();
    handle->legal_actions = handle->ale.getLegalActionSet();
    *out = handle.release();
  });
}

void tandem_ale_free(TandemAle* handle) { delete handle; }

// What ale-py's reset(seed=...) achieves by loading the ROM again (which reads
// the ROM file): a new environment (sticky-action RNG seeded, previous action
// NOOP, fresh ROM wrapper), the emulated system as it was right after loading,
// then mode and difficulty. tests/api.rs checks it against fresh loads.
int tandem_ale_reseed(TandemAle* handle, const TandemAleConfig* config, char* error,
                      std::size_t error_capacity) {
  return guarded(error, error_capacity, [&] {
    ale::ALEInterface& ale = handle->ale;
    ale.setInt("random_seed", config->random_seed);
    ale.setFloat("repeat_action_probability", config->repeat_action_probability);
    ale.setInt("max_num_frames_per_episode", config->max_num_frames_per_episode);
    const ale::stella::Properties& properties = ale.theOSystem->console().properties();
    std::unique_ptr<ale::RomSettings> rom_settings(ale::buildRomRLWrapper(
        ale.theOSystem->romFile(), properties.get(ale::stella::Cartridge_MD5)));
    if (!rom_settings) throw std::runtime_error("ALE no longer recognises the loaded ROM");
    // The environment points at the ROM settings: drop it before replacing them.
    ale.environment.reset();
    ale.romSettings = std::move(rom_settings);
    ale.environment = std::make_unique<ale::StellaEnvironment>(ale.theOSystem.get(),
                                                                ale.romSettings.get());
    ale.max_num_frames = config->max_num_frames_per_episode;
    ale.restoreState(*handle->loaded_state);
    if (config->mode >= 0) ale.setMode(static_cast<ale::game_mode_t>(config->mode));
    if (config->difficulty >= 0)
      ale.setDifficulty(static_cast<ale::difficulty_t>(config->difficulty));
  });
}

int tandem_ale_reset(TandemAle* handle, char* error, std::size_t error_capacity) {
  return guarded(error, error_capacity, [&] { handle->ale.reset_game(); });
}

// Acts with ALE action code `action` (an ale::Action, not an index).
int tandem_ale_act(TandemAle* handle, int32_t action, int32_t* reward, char* error,
                   std::size_t error_capacity) {
  return guarded(error, error_capacity, [&] {
    *reward = handle->ale.act(static_cast<ale::Action>(action), 1.0f);
  });
}

int32_t tandem_ale_game_over(const TandemAle* handle) {
  return handle->ale.game_over(false) ? 1 : 0;
}

int32_t tandem_ale_game_truncated(const TandemAle* handle) {
  return handle->ale.game_truncated() ? 1 : 0;
}

// ALE throws only when no ROM is loaded, which a live handle rules out; -1 then.
int32_t tandem_ale_lives(TandemAle* handle) {
  try {
    return handle->ale.lives();
  } catch (...) {
    return -1;
  }
}

int32_t tandem_ale_frame_number(const TandemAle* handle) {
  return handle->ale.getFrameNumber();
}

int32_t tandem_ale_episode_frame_number(const TandemAle* handle) {
  return handle->ale.getEpisodeFrameNumber();
}

// Copies up to `capacity` action codes; returns how many there are.
std::size_t tandem_ale_minimal_actions(const TandemAle* handle, int32_t* actions,
                                       std::size_t capacity) {
  for (std::size_t i = 0; i < handle->minimal_actions.size() && i < capacity; ++i)
    actions[i] = static_cast<int32_t>(handle->minimal_actions[i]);
  return handle->minimal_actions.size();
}

std::size_t tandem_ale_legal_actions(const TandemAle* handle, int32_t* actions,
                                     std::size_t capacity) {
  for (std::size_t i = 0; i < handle->legal_actions.size() && i < capacity; ++i)
    actions[i] = static_cast<int32_t>(handle->legal_actions[i]);
  return handle->legal_actions.size();
}

void tandem_ale_screen_dims(const TandemAle* handle, std::size_t* height, std::size_t* width) {
  const ale::ALEScreen& screen = handle->ale.getScreen();
  *height = screen.height();
  *width = screen.width();
}

// `rgb` must hold height * width * 3 bytes (checked on the Rust side).
void tandem_ale_screen_rgb(TandemAle* handle, uint8_t* rgb) {
  const ale::ALEScreen& screen = handle->ale.getScreen();
  handle->ale.theOSystem->colourPalette().applyPaletteRGB(
      rgb, screen.getArray(), screen.height() * screen.width());
}

// `gray` must hold height * width bytes (checked on the Rust side).
void tandem_ale_screen_grayscale(TandemAle* handle, uint8_t* gray) {
  const ale::ALEScreen& screen = handle->ale.getScreen();
  handle->ale.theOSystem->colourPalette().applyPaletteGrayscale(
      gray, screen.getArray(), screen.height() * screen.width());
}

// What ALE's own state serialisation leaves out but the next frames depend on.
struct TandemAleExtraState {
  int32_t player_a_action;
  int32_t player_b_action;
  float paddle_a_strength;
  float paddle_b_strength;
};

// The whole game state: ALE's serialised ALEState with its environment RNG
// (cloneState(include_rng=true): console, cartridge, RIOT, TIA, the system and
// sticky-action RNGs, ROM settings such as score and lives, frame counters), plus
// the sticky-action memory. `*data` is allocated here; free it with
// tandem_ale_free_state.
int tandem_ale_save_state(TandemAle* handle, char** data, std::size_t* size,
                          TandemAleExtraState* extra, char* error, std::size_t error_capacity) {
  *data = nullptr;
  *size = 0;
  return guarded(error, error_capacity, [&] {
    std::string serialized = handle->ale.cloneState(true).serialize();
    char* copy = new char[serialized.size()];
    std::memcpy(copy, serialized.data(), serialized.size());
    *data = copy;
    *size = serialized.size();
    ale::StellaEnvironment& environment = *handle->ale.environment;
    extra->player_a_action = static_cast<int32_t>(environment.*member_of(PlayerAAction{}));
    extra->player_b_action = static_cast<int32_t>(environment.*member_of(PlayerBAction{}));
    extra->paddle_a_strength = environment.*member_of(PaddleAStrength{});
    extra->paddle_b_strength = environment.*member_of(PaddleBStrength{});
  });
}

void tandem_ale_free_state(char* data) { delete[] data; }

// Restores what tandem_ale_save_state produced for the same ROM.
int tandem_ale_load_state(TandemAle* handle, const char* data, std::size_t size,
                          const TandemAleExtraState* extra, char* error,
                          std::size_t error_capacity) {
  return guarded(error, error_capacity, [&] {
    ale::ALEState state(std::string(data, size));
    handle->ale.restoreState(state);
    ale::StellaEnvironment& environment = *handle->ale.environment;
    environment.*member_of(PlayerAAction{}) = static_cast<ale::Action>(extra->player_a_action);
    environment.*member_of(PlayerBAction{}) = static_cast<ale::Action>(extra->player_b_action);
    environment.*member_of(PaddleAStrength{}) = extra->paddle_a_strength;
    environment.*member_of(PaddleBStrength{}) = extra->paddle_b_strength;
  });
}

// The screen as ALE's palette indices, height * width bytes: restoring a state does
// not redraw it, so snapshots carry it.
void tandem_ale_screen_indices(const TandemAle* handle, uint8_t* pixels) {
  const ale::ALEScreen& screen = handle->ale.getScreen();
  std::memcpy(pixels, screen.getArray(), screen.height() * screen.width());
}

void tandem_ale_set_screen_indices(TandemAle* handle, const uint8_t* pixels) {
  ale::ALEScreen& screen = handle->ale.environment.get()->*member_of(Screen{});
  std::memcpy(screen.getArray(), pixels, screen.height() * screen.width());
}

// `ram` must hold 128 bytes.
void tandem_ale_ram(const TandemAle* handle, uint8_t* ram) {
  const ale::ALERAM& memory = handle->ale.getRAM();
  std::memcpy(ram, memory.array(), memory.size());
}

}  // extern "C"

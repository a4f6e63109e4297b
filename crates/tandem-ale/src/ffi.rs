//! Raw declarations of the C shim in `csrc/shim.cpp`. Functions returning
//! `c_int` report 0 on success and 1 after a C++ exception, whose message they
//! write NUL-terminated into the `error` buffer.

use std::ffi::{c_char, c_int};

/// Opaque `TandemAle` (an `ale::ALEInterface` plus cached action sets).
#[repr(C)]
pub(crate) struct TandemAle {
    _private: [u8; 0],
}

/// Mirrors `TandemAleConfig` in the shim.
#[repr(C)]
pub(crate) struct TandemAleConfig {
    pub random_seed: i32,
    pub repeat_action_probability: f32,
    pub max_num_frames_per_episode: i32,
    pub mode: i32,
    pub difficulty: i32,
}

/// Mirrors `TandemAleExtraState` in the shim: the sticky-action memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TandemAleExtraState {
    pub player_a_action: i32,
    pub player_b_action: i32,
    pub paddle_a_strength: f32,
    pub paddle_b_strength: f32,
}

unsafe extern "C" {
    pub(crate) fn tandem_ale_save_state(
        handle: *mut TandemAle,
        data: *mut *mut c_char,
        size: *mut usize,
        extra: *mut TandemAleExtraState,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_free_state(data: *mut c_char);
    pub(crate) fn tandem_ale_load_state(
        handle: *mut TandemAle,
        data: *const c_char,
        size: usize,
        extra: *const TandemAleExtraState,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_screen_indices(handle: *const TandemAle, pixels: *mut u8);
    pub(crate) fn tandem_ale_set_screen_indices(handle: *mut TandemAle, pixels: *const u8);
    pub(crate) fn tandem_ale_rom_supported(
        rom_path: *const c_char,
        supported: *mut c_int,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_new(
        rom_path: *const c_char,
        config: *const TandemAleConfig,
        out: *mut *mut TandemAle,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_free(handle: *mut TandemAle);
    pub(crate) fn tandem_ale_reseed(
        handle: *mut TandemAle,
        config: *const TandemAleConfig,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_reset(
        handle: *mut TandemAle,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_act(
        handle: *mut TandemAle,
        action: i32,
        reward: *mut i32,
        error: *mut c_char,
        error_capacity: usize,
    ) -> c_int;
    pub(crate) fn tandem_ale_game_over(handle: *const TandemAle) -> i32;
    pub(crate) fn tandem_ale_game_truncated(handle: *const TandemAle) -> i32;
    pub(crate) fn tandem_ale_lives(handle: *mut TandemAle) -> i32;
    pub(crate) fn tandem_ale_frame_number(handle: *const TandemAle) -> i32;
    pub(crate) fn tandem_ale_episode_frame_number(handle: *const TandemAle) -> i32;
    pub(crate) fn tandem_ale_minimal_actions(
        handle: *const TandemAle,
        actions: *mut i32,
        capacity: usize,
    ) -> usize;
    pub(crate) fn tandem_ale_legal_actions(
        handle: *const TandemAle,
        actions: *mut i32,
        capacity: usize,
    ) -> usize;
    pub(crate) fn tandem_ale_screen_dims(
        handle: *const TandemAle,
        height: *mut usize,
        width: *mut usize,
    );
    pub(crate) fn tandem_ale_screen_rgb(handle: *mut TandemAle, rgb: *mut u8);
    pub(crate) fn tandem_ale_screen_grayscale(handle: *mut TandemAle, gray: *mut u8);
    pub(crate) fn tandem_ale_ram(handle: *const TandemAle, ram: *mut u8);
}

//! Behaviour of the safe API: settings validation, errors instead of panics or
//! ALE's std::exit, determinism, and sticky actions actually being applied.

use std::path::Path;
use tandem_ale::{
    Ale, AleError, AleSettings, RAM_SIZE, SCREEN_HEIGHT, SCREEN_WIDTH, available_games, rom_image,
};

fn breakout(seed: u32, sticky: f32) -> Ale {
    Ale::new("breakout", &AleSettings::new(seed, sticky)).expect("Breakout loads")
}

/// Plays `frames` frames cycling through the actions; returns rewards and the final RAM.
fn play(ale: &mut Ale, frames: usize) -> (Vec<i32>, [u8; RAM_SIZE]) {
    ale.reset().unwrap();
    let rewards = (0..frames)
        .map(|frame| ale.act((frame / 7) % ale.num_actions()).unwrap())
        .collect();
    (rewards, ale.ram())
}

#[test]
fn breakout_has_the_documented_shape() {
    let ale = breakout(1, 0.25);
    assert_eq!(ale.action_set(), &[0, 1, 3, 4]);
    assert_eq!(ale.num_actions(), 4);
    assert_eq!(ale.screen_dims(), (SCREEN_HEIGHT, SCREEN_WIDTH));
    assert_eq!(ale.lives(), 5);
    assert!(!ale.game_over());
    assert!(available_games().any(|game| game == "breakout"));
    assert!(
        available_games().count() > 50,
        "all ROMs of the sdist are embedded"
    );
    assert_eq!(rom_image("breakout").map(<[u8]>::len), Some(2048));
}

#[test]
fn full_action_space_has_eighteen_actions() {
    let mut settings = AleSettings::new(1, 0.0);
    settings.full_action_space = true;
    let ale = Ale::new("breakout", &settings).unwrap();
    assert_eq!(ale.action_set(), (0..18).collect::<Vec<i32>>().as_slice());
}

#[test]
fn same_seed_same_game_different_seed_different_sticky_draws() {
    let (rewards_a, ram_a) = play(&mut breakout(11, 0.25), 3000);
    let (rewards_b, ram_b) = play(&mut breakout(11, 0.25), 3000);
    assert_eq!(rewards_a, rewards_b);
    assert_eq!(ram_a, ram_b);
    let (_, ram_c) = play(&mut breakout(12, 0.25), 3000);
    assert_ne!(ram_a, ram_c, "another seed changes which actions stick");
}

#[test]
fn sticky_actions_change_the_game_only_when_enabled() {
    // Without sticky actions the seed is irrelevant to Breakout.
    let (_, ram_a) = play(&mut breakout(1, 0.0), 2000);
    let (_, ram_b) = play(&mut breakout(2, 0.0), 2000);
    assert_eq!(ram_a, ram_b);
    let (_, ram_sticky) = play(&mut breakout(1, 0.9), 2000);
    assert_ne!(ram_a, ram_sticky);
}

#[test]
fn episode_frame_counter_restarts_on_reset() {
    let mut ale = breakout(3, 0.0);
    ale.reset().unwrap();
    for _ in 0..25 {
        ale.act(0).unwrap();
    }
    assert_eq!(ale.episode_frame_number(), 25);
    let total = ale.frame_number();
    ale.reset().unwrap();
    assert_eq!(ale.episode_frame_number(), 0);
    assert!(
        ale.frame_number() >= total,
        "the global counter keeps running"
    );
}

#[test]
fn frame_limit_truncates() {
    let mut settings = AleSettings::new(5, 0.0);
    settings.max_num_frames_per_episode = Some(50);
    let mut ale = Ale::new("breakout", &settings).unwrap();
    ale.reset().unwrap();
    let mut frames = 0;
    while !ale.truncated() && frames < 1000 {
        ale.act(0).unwrap();
        frames += 1;
    }
    assert_eq!(frames, 50);
    assert!(!ale.game_over(), "truncation is not a game over");
}

#[test]
fn grayscale_and_rgb_screens_fill_whole_buffers() {
    let mut ale = breakout(1, 0.0);
    ale.reset().unwrap();
    let mut rgb = vec![7u8; SCREEN_HEIGHT * SCREEN_WIDTH * 3];
    let mut gray = vec![7u8; SCREEN_HEIGHT * SCREEN_WIDTH];
    ale.screen_rgb(&mut rgb).unwrap();
    ale.screen_grayscale(&mut gray).unwrap();
    // Breakout's border is gray and its background black, so both values appear.
    assert!(gray.contains(&0) && gray.iter().any(|&value| value > 100));
    assert!(rgb.contains(&0) && rgb.iter().any(|&value| value > 100));
}

#[test]
fn wrong_buffer_sizes_are_errors() {
    let ale = breakout(1, 0.0);
    let mut small = vec![0u8; 100];
    let error = ale.screen_rgb(&mut small).unwrap_err();
    assert!(
        matches!(
            error,
            AleError::BufferSize {
                expected: 100_800,
                actual: 100,
                ..
            }
        ),
        "{error}"
    );
    assert!(ale.screen_grayscale(&mut small).is_err());
}

#[test]
fn out_of_range_action_is_an_error() {
    let mut ale = breakout(1, 0.0);
    let error = ale.act(4).unwrap_err();
    assert_eq!(
        error.to_string(),
        "action index 4 is outside the action set (0..4)"
    );
}

#[test]
fn invalid_settings_are_rejected_with_the_setting_named() {
    for (settings, name) in [
        (AleSettings::new(u32::MAX, 0.25), "seed"),
        (AleSettings::new(1, 1.5), "repeat_action_probability"),
        (AleSettings::new(1, f32::NAN), "repeat_action_probability"),
        (
            AleSettings {
                max_num_frames_per_episode: Some(0),
                ..AleSettings::new(1, 0.0)
            },
            "max_num_frames_per_episode",
        ),
        (
            AleSettings {
                mode: Some(u32::MAX),
                ..AleSettings::new(1, 0.0)
            },
            "mode",
        ),
    ] {
        let error = Ale::new("breakout", &settings).unwrap_err();
        assert!(
            matches!(error, AleError::InvalidSetting { setting, .. } if setting == name),
            "{error}"
        );
    }
}

#[test]
fn unavailable_mode_is_an_error_not_an_abort() {
    let settings = AleSettings {
        mode: Some(99),
        ..AleSettings::new(1, 0.0)
    };
    let error = Ale::new("breakout", &settings).unwrap_err();
    assert!(error.to_string().contains("Invalid game mode"), "{error}");
}

#[test]
fn unknown_games_get_suggestions() {
    let error = Ale::new("Breakout", &AleSettings::new(1, 0.0)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown Atari game \"Breakout\"; did you mean breakout?"
    );
    let error = Ale::new("invaders", &AleSettings::new(1, 0.0)).unwrap_err();
    assert!(error.to_string().contains("space_invaders"), "{error}");
    let error = Ale::new("zzz", &AleSettings::new(1, 0.0)).unwrap_err();
    assert!(error.to_string().contains("no built-in ROM"), "{error}");
}

#[test]
fn unsupported_or_missing_rom_files_are_errors() {
    let error = Ale::from_rom_file(
        Path::new("/nonexistent/breakout.bin"),
        &AleSettings::new(1, 0.0),
    )
    .unwrap_err();
    assert!(matches!(error, AleError::Io { .. }), "{error}");
    let folder = std::env::temp_dir().join(format!("tandem-ale-test-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let bogus = folder.join("not_a_game.bin");
    std::fs::write(&bogus, [0u8; 4096]).unwrap();
    let error = Ale::from_rom_file(&bogus, &AleSettings::new(1, 0.0)).unwrap_err();
    std::fs::remove_dir_all(&folder).unwrap();
    assert!(matches!(error, AleError::UnsupportedRom { .. }), "{error}");
}

#[test]
fn instances_can_be_created_and_stepped_on_several_threads() {
    let results: Vec<Vec<i32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| play(&mut breakout(9, 0.25), 1500).0))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
}

/// Plays `frames` frames with a fixed pattern, recording every RAM snapshot and grayscale screen.
fn trajectory(ale: &mut Ale, frames: usize) -> Vec<(i32, [u8; RAM_SIZE], Vec<u8>, i32)> {
    let mut gray = vec![0u8; SCREEN_HEIGHT * SCREEN_WIDTH];
    (0..frames)
        .map(|frame| {
            let reward = ale
                .act((frame / 5 + frame / 3) % ale.num_actions())
                .unwrap();
            ale.screen_grayscale(&mut gray).unwrap();
            if ale.game_over() {
                ale.reset().unwrap();
            }
            (reward, ale.ram(), gray.clone(), ale.frame_number())
        })
        .collect()
}

#[test]
fn reseeding_matches_a_freshly_loaded_rom() {
    let settings = AleSettings::new(2024, 0.25);
    let mut fresh = Ale::new("breakout", &settings).unwrap();
    fresh.reset().unwrap();
    let mut reseeded = breakout(5, 0.5);
    reseeded.reset().unwrap();
    trajectory(&mut reseeded, 777);
    reseeded.reseed(&settings).unwrap();
    reseeded.reset().unwrap();
    assert_eq!(reseeded.frame_number(), fresh.frame_number());
    assert!(trajectory(&mut fresh, 3000) == trajectory(&mut reseeded, 3000));
}

/// Freeway and Frostbite read state the console's own RNG sets on every reset
/// (RAM, RIOT timer), so a reseed that kept the console's RNG running would
/// diverge from a fresh load at once.
#[test]
fn reseeding_restores_the_console_state_of_a_fresh_load() {
    for game in ["freeway", "frostbite"] {
        let settings = AleSettings::new(31, 0.25);
        let mut fresh = Ale::new(game, &settings).unwrap();
        fresh.reset().unwrap();
        let mut reseeded = Ale::new(game, &AleSettings::new(8, 0.5)).unwrap();
        reseeded.reset().unwrap();
        trajectory(&mut reseeded, 300);
        reseeded.reseed(&settings).unwrap();
        reseeded.reset().unwrap();
        assert!(
            trajectory(&mut fresh, 1000) == trajectory(&mut reseeded, 1000),
            "{game}"
        );
    }
}

#[test]
fn reseeding_validates_settings() {
    let mut ale = breakout(1, 0.0);
    assert!(ale.reseed(&AleSettings::new(1, -0.1)).is_err());
    assert!(
        ale.reseed(&AleSettings {
            mode: Some(99),
            ..AleSettings::new(1, 0.0)
        })
        .is_err()
    );
    // The instance is still usable after a failed reseed.
    ale.reset().unwrap();
    assert_eq!(ale.act(1).unwrap(), 0);
}

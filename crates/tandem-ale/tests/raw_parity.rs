//! Frame-by-frame parity with the ale-py 0.12.1 wheel: the fixtures written by
//! `scripts/parity/atari_fixture.py` record, for a fixed seed, sticky-action
//! probability and action sequence, every frame's reward, lives, game-over flag,
//! frame counters and the sha256 of the RGB and grayscale screens.

use sha2::{Digest, Sha256};
use tandem_ale::{Ale, AleSettings, SCREEN_HEIGHT, SCREEN_WIDTH};

fn short_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

struct Screens {
    rgb: Vec<u8>,
    gray: Vec<u8>,
}

impl Screens {
    fn hashes(&mut self, ale: &mut Ale) -> (String, String) {
        ale.screen_rgb(&mut self.rgb)
            .expect("RGB buffer has the screen's size");
        ale.screen_grayscale(&mut self.gray)
            .expect("grayscale buffer has the screen's size");
        (short_hash(&self.rgb), short_hash(&self.gray))
    }
}

fn field<T: std::str::FromStr>(fields: &[&str], index: usize, line: usize) -> T {
    fields
        .get(index)
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("fixture line {line}: field {index} missing or malformed"))
}

/// Replays one fixture; returns how many frames it compared.
fn replay(fixture: &str) -> usize {
    let mut lines = fixture
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.starts_with('#'));
    let (number, config) = lines.next().expect("fixture has a config line");
    let config: Vec<&str> = config.split_whitespace().collect();
    assert_eq!(config[0], "config", "line {number}");
    let settings = AleSettings::new(field(&config, 1, number), field(&config, 2, number));
    let mut ale = Ale::new("breakout", &settings).expect("Breakout loads");
    ale.reset().expect("reset");
    let mut screens = Screens {
        rgb: vec![0; SCREEN_HEIGHT * SCREEN_WIDTH * 3],
        gray: vec![0; SCREEN_HEIGHT * SCREEN_WIDTH],
    };
    let mut frames = 0;
    for (number, line) in lines {
        let line_number = number + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields[0] == "R" {
            assert_eq!(
                ale.frame_number(),
                field::<i32>(&fields, 1, line_number),
                "frame number after reset, line {line_number}"
            );
            assert_eq!(
                ale.episode_frame_number(),
                field::<i32>(&fields, 2, line_number),
                "line {line_number}"
            );
            assert_eq!(
                ale.lives(),
                field::<i32>(&fields, 3, line_number),
                "lives after reset, line {line_number}"
            );
            assert_eq!(
                screens.hashes(&mut ale),
                (fields[4].to_owned(), fields[5].to_owned()),
                "screens after reset, line {line_number}"
            );
            continue;
        }
        let reward = ale
            .act(field(&fields, 0, line_number))
            .expect("valid action");
        frames += 1;
        assert_eq!(
            reward,
            field::<i32>(&fields, 1, line_number),
            "reward, line {line_number}"
        );
        assert_eq!(
            ale.lives(),
            field::<i32>(&fields, 2, line_number),
            "lives, line {line_number}"
        );
        let game_over = ale.game_over();
        assert_eq!(
            game_over,
            field::<u8>(&fields, 3, line_number) == 1,
            "game over, line {line_number}"
        );
        assert_eq!(
            ale.frame_number(),
            field::<i32>(&fields, 4, line_number),
            "frame number, line {line_number}"
        );
        assert_eq!(
            ale.episode_frame_number(),
            field::<i32>(&fields, 5, line_number),
            "line {line_number}"
        );
        assert_eq!(
            screens.hashes(&mut ale),
            (fields[6].to_owned(), fields[7].to_owned()),
            "screens, line {line_number}"
        );
        if game_over {
            ale.reset().expect("reset");
        }
    }
    frames
}

#[test]
fn sticky_actions_match_ale_py_frame_by_frame() {
    let frames = replay(include_str!("fixtures/breakout_raw_sticky.txt"));
    assert_eq!(frames, 2500);
}

#[test]
fn seed_above_2_pow_31_without_sticky_actions_matches_ale_py() {
    let frames = replay(include_str!("fixtures/breakout_raw_deterministic.txt"));
    assert_eq!(frames, 1500);
}

//! Saving and restoring the emulator: a restored instance, whatever its own seed,
//! continues exactly as the saved one (sticky actions included), and malformed
//! states are errors, never crashes.

use tandem_ale::{Ale, AleError, AleSettings, RAM_SIZE, SCREEN_HEIGHT, SCREEN_WIDTH};

fn breakout(seed: u32) -> Ale {
    Ale::new("breakout", &AleSettings::new(seed, 0.25)).expect("Breakout loads")
}

/// Everything observable over `frames` frames of a fixed action pattern.
#[derive(Debug, PartialEq)]
struct Trace {
    rewards: Vec<i32>,
    screens: Vec<Vec<u8>>,
    rams: Vec<[u8; RAM_SIZE]>,
    lives: Vec<i32>,
    over: Vec<bool>,
    frame_numbers: Vec<(i32, i32)>,
}

fn play(ale: &mut Ale, frames: usize, offset: usize) -> Trace {
    let mut trace = Trace {
        rewards: Vec::new(),
        screens: Vec::new(),
        rams: Vec::new(),
        lives: Vec::new(),
        over: Vec::new(),
        frame_numbers: Vec::new(),
    };
    for frame in 0..frames {
        // Changing actions often makes sticky repeats visible in the trace.
        let action = ((frame + offset) * 7 / 3) % ale.num_actions();
        trace.rewards.push(ale.act(action).unwrap());
        let mut screen = vec![0u8; SCREEN_HEIGHT * SCREEN_WIDTH * 3];
        ale.screen_rgb(&mut screen).unwrap();
        trace.screens.push(screen);
        trace.rams.push(ale.ram());
        trace.lives.push(ale.lives());
        trace.over.push(ale.game_over());
        trace
            .frame_numbers
            .push((ale.frame_number(), ale.episode_frame_number()));
    }
    trace
}

#[test]
fn a_restored_emulator_continues_exactly_like_the_saved_one() {
    let mut original = breakout(3);
    original.reset().unwrap();
    play(&mut original, 400, 0);
    let state = original.save_state().unwrap();
    let mut screen_before = vec![0u8; SCREEN_HEIGHT * SCREEN_WIDTH * 3];
    original.screen_rgb(&mut screen_before).unwrap();
    let expected = play(&mut original, 600, 400);

    // Another seed, and a game in another place: the state replaces all of it.
    let mut restored = breakout(77);
    restored.reset().unwrap();
    play(&mut restored, 123, 5);
    restored.load_state(&state).unwrap();
    let mut screen_after = vec![0u8; SCREEN_HEIGHT * SCREEN_WIDTH * 3];
    restored.screen_rgb(&mut screen_after).unwrap();
    assert_eq!(
        screen_after, screen_before,
        "the screen is part of the state"
    );
    let replayed = play(&mut restored, 600, 400);
    assert_eq!(replayed, expected);
    assert!(
        expected.rewards.iter().any(|&r| r > 0) || expected.lives.windows(2).any(|w| w[0] != w[1]),
        "the compared stretch should contain game events"
    );
}

#[test]
fn the_sticky_action_memory_is_part_of_the_state() {
    // With every frame sticky, the emulator keeps executing the action it held when
    // saved; a restored instance must hold the same one.
    let mut original = Ale::new("breakout", &AleSettings::new(5, 1.0)).unwrap();
    original.reset().unwrap();
    let state = original.save_state().unwrap();
    let mut changed = state.clone();
    changed.player_a_action = 1; // FIRE instead of the NOOP held after a reset
    let mut a = Ale::new("breakout", &AleSettings::new(6, 1.0)).unwrap();
    let mut b = Ale::new("breakout", &AleSettings::new(6, 1.0)).unwrap();
    a.load_state(&state).unwrap();
    b.load_state(&changed).unwrap();
    let (ta, tb) = (play(&mut a, 60, 0), play(&mut b, 60, 0));
    assert_eq!(ta, play(&mut original, 60, 0));
    assert_ne!(ta.rams, tb.rams, "a held FIRE serves the ball");
}

#[test]
fn malformed_states_are_errors() {
    let mut ale = breakout(1);
    ale.reset().unwrap();
    let state = ale.save_state().unwrap();

    let mut short_screen = state.clone();
    short_screen.screen.pop();
    assert!(matches!(
        ale.load_state(&short_screen),
        Err(AleError::BufferSize { .. })
    ));

    let mut bad_action = state.clone();
    bad_action.player_a_action = 40;
    let err = ale.load_state(&bad_action).unwrap_err();
    assert!(err.to_string().contains("held actions"), "{err}");

    let mut truncated = state.clone();
    truncated.system.truncate(truncated.system.len() / 2);
    let err = ale.load_state(&truncated).unwrap_err();
    assert!(err.to_string().contains("restoring state"), "{err}");

    // The instance still works after the refused restores.
    ale.load_state(&state).unwrap();
    ale.act(1).unwrap();
}

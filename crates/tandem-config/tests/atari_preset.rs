//! The shipped DeepMind Atari preset serves every ROM of the catalogue: `episodic-life` and
//! `fire-reset` stay in the resolved chain where the game has lives and FIRE, are left out with
//! a located note where it has not, and are still refused outside Atari.

use tandem_config::*;

/// The preset, as the shipped experiments include it (tests run in the crate's folder).
const PRESET: &str = "../../experiments/include/deepmind-atari.kdl";

fn with_preset(game: &str) -> Source {
    Source::Stdin(format!(
        "experiment \"x\" {{\n    include \"{PRESET}\"\n    algorithm \"ppo\"\n    env \"{game}\"\n}}\n"
    ))
}

/// The 1-based line of `node` in the preset.
fn preset_line(node: &str) -> usize {
    let text = std::fs::read_to_string(PRESET).expect("the preset exists");
    1 + text
        .lines()
        .position(|l| l.trim_start().starts_with(node))
        .unwrap_or_else(|| panic!("no {node} in the preset"))
}

#[test]
fn every_atari_rom_resolves_with_the_preset_and_states_what_applies() {
    let mut roms = 0;
    for game in games().filter(|g| g.family == Family::Atari) {
        roms += 1;
        let resolved = resolve(&with_preset(game.name), &[])
            .unwrap_or_else(|d| panic!("{} with the preset: {}", game.name, d.render(false)));
        let chain = &resolved.experiment.env.wrappers;
        assert_eq!(
            chain.contains(&Wrapper::EpisodicLife),
            game.has_lives,
            "{}: {chain:?}",
            game.name
        );
        assert_eq!(
            chain.contains(&Wrapper::FireReset),
            game.has_fire,
            "{}: {chain:?}",
            game.name
        );
        // One note per wrapper left out, at its line of the preset.
        let notes: Vec<_> = resolved.warnings.iter().collect();
        let expected = usize::from(!game.has_lives) + usize::from(!game.has_fire);
        assert_eq!(notes.len(), expected, "{}: {notes:?}", game.name);
        for note in notes {
            assert_eq!(note.code(), "config::wrapper-idle");
            assert_eq!(note.severity(), Severity::Warning);
            let node = if note.message().starts_with("`episodic-life`") {
                "episodic-life"
            } else {
                "fire-reset"
            };
            assert_eq!(
                note.line_column().map(|l| l.0),
                Some(preset_line(node)),
                "{}",
                note.message()
            );
            assert!(note.message().contains(game.name), "{}", note.message());
        }
    }
    assert!(roms > 57, "the catalogue has every ROM, found {roms}");
}

/// What the resolved config says is what runs: Pong's has neither wrapper, and resolving it
/// again gives the same experiment without a note.
#[test]
fn pongs_resolved_config_is_its_run() {
    let resolved = resolve(&with_preset("atari-pong"), &[]).expect("pong resolves");
    let canonical = canonical_kdl(&resolved.experiment);
    assert!(!canonical.contains("episodic-life"), "{canonical}");
    assert!(
        canonical.contains("fire-reset"),
        "Pong has FIRE: {canonical}"
    );
    let again = resolve(&Source::Stdin(canonical), &[]).expect("canonical resolves");
    assert_eq!(again.experiment, resolved.experiment);
    assert!(again.warnings.is_empty());
    // Breakout keeps both.
    let breakout = resolve(&with_preset("atari-breakout"), &[]).expect("breakout resolves");
    assert!(breakout.warnings.is_empty());
    let chain = breakout.experiment.env.wrappers;
    assert!(chain.contains(&Wrapper::EpisodicLife) && chain.contains(&Wrapper::FireReset));
}

/// Outside Atari the two wrappers are a mistake, not a preset's generality.
#[test]
fn outside_atari_they_are_still_refused() {
    for wrapper in ["episodic-life", "fire-reset"] {
        let text = format!(
            "experiment \"x\" {{\n    env \"minatar-breakout\" {{\n        wrappers {{\n            {wrapper}\n        }}\n    }}\n}}\n"
        );
        let diags = resolve(&Source::Stdin(text), &[]).expect_err("refused");
        let d = diags.iter().next().unwrap();
        assert_eq!(d.code(), "config::wrapper-mismatch", "{}", d.message());
        assert_eq!(d.line_column().map(|l| l.0), Some(4));
    }
}

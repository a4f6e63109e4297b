//! The Atari part of tandem-spec's game catalogue (`crates/tandem-spec/src/game/atari.rs`),
//! generated from and held against the ALE this crate links: every ROM tandem-ale bundles is
//! loaded, reset, and asked for its minimal action set (its size, whether FIRE is in it) and its
//! lives. The spec crate cannot link ALE (it stays free of GPL code), so it keeps the facts
//! as a generated table; this test recomputes the table and fails when the file differs.
//! `UPDATE_CATALOGUE=1 cargo test -p tandem-env --test atari_catalogue` rewrites the file.
#![cfg(feature = "atari")]

use std::path::PathBuf;

use tandem_ale::{Ale, AleError, AleSettings};

/// ALE's action code of FIRE (`ale::Action::PLAYER_A_FIRE`), which `fire-reset` presses.
const FIRE: i32 = 1;

/// One ROM's facts as ALE reports them.
struct Row {
    rom: &'static str,
    actions: usize,
    fire: bool,
    lives: bool,
}

/// The ROM's row; `None` for a bundled ROM whose MD5 ALE does not know (it cannot be played,
/// so the config language does not name it).
fn row(rom: &'static str) -> Option<Row> {
    let mut ale = match Ale::new(rom, &AleSettings::new(0, 0.0)) {
        Ok(ale) => ale,
        Err(AleError::UnsupportedRom { .. }) => return None,
        Err(e) => panic!("ALE cannot load its bundled ROM {rom}: {e}"),
    };
    ale.reset()
        .unwrap_or_else(|e| panic!("ALE cannot reset {rom}: {e}"));
    Some(Row {
        rom,
        actions: ale.num_actions(),
        fire: ale.action_set().contains(&FIRE),
        lives: ale.lives() > 0,
    })
}

/// The generated file's text for `rows`.
fn render(rows: &[Row], unsupported: &[&str]) -> String {
    let mut out = String::from(
        "//! The Atari 2600 games of the catalogue: every ROM that ALE 0.12.1 (as tandem-ale bundles\n\
         //! it) loads, with its minimal action set's size, whether FIRE is in it and whether the game\n\
         //! has lives after a reset. GENERATED from ALE by\n\
         //! `UPDATE_CATALOGUE=1 cargo test -p tandem-env --test atari_catalogue`, which also fails\n\
         //! when this file no longer matches ALE; do not edit.\n//!\n\
",
    );
    out.push_str(&format!(
        "//! Bundled ROMs ALE does not support (left out): {}.\n\nuse super::AtariRow;\n\npub(crate) const ATARI: &[AtariRow] = &[\n",
        unsupported.join(", ")
    ));
    for r in rows {
        out.push_str(&format!(
            "    AtariRow {{ name: \"atari-{}\", rom: \"{}\", actions: {}, fire: {}, lives: {} }},\n",
            r.rom.replace('_', "-"),
            r.rom,
            r.actions,
            r.fire,
            r.lives
        ));
    }
    out.push_str("];\n");
    out
}

fn catalogue_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tandem-spec/src/game/atari.rs")
}

#[test]
fn the_spec_catalogue_matches_ale() {
    let (mut rows, mut unsupported) = (Vec::new(), Vec::new());
    for rom in tandem_ale::available_games() {
        match row(rom) {
            Some(r) => rows.push(r),
            None => unsupported.push(rom),
        }
    }
    assert!(
        rows.len() > 100,
        "ALE supports only {} bundled ROMs",
        rows.len()
    );
    let expected = render(&rows, &unsupported);
    let path = catalogue_path();
    if std::env::var_os("UPDATE_CATALOGUE").is_some() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} does not match the ROMs ALE loads; rerun with UPDATE_CATALOGUE=1 and review the diff",
        path.display()
    );
}

#[test]
fn kebab_names_map_back_to_roms() {
    // The config names a ROM in kebab case; the mapping back replaces `-` by `_`, which is
    // only sound while no ROM name holds a `-` of its own.
    for rom in tandem_ale::available_games() {
        assert!(!rom.contains('-'), "ROM {rom} has a `-` in its name");
        assert_eq!(rom.replace('_', "-").replace('-', "_"), rom);
    }
}

//! What the chosen Atari game settles in the wrapper chain: `episodic-life` in a game without
//! lives and `fire-reset` in one without FIRE have nothing to do, as CleanRL's and
//! Stable-Baselines3's Atari wrappers have nothing to do there. They are left out of the
//! resolved chain with a note, so one preset (`include/deepmind-atari.kdl`) serves every ROM
//! and the resolved config still states exactly what runs for the game chosen. Outside Atari
//! the cross-field checks refuse them: there they are a mistake, not a preset's generality.

use super::apply::Applier;
use crate::catalogue::{Family, Game, GameInfo};
use crate::diag::warning;
use crate::model::Wrapper;
use crate::values::{Val, Values};

const WRAPPERS: &str = "env.wrappers";

/// Leaves the wrappers the Atari game in `values` gives nothing to do out of its chain, in
/// `values` and in the written entry alike (the later checks pair wrappers with their spans).
pub(super) fn drop_idle_wrappers(applier: &mut Applier, values: &mut Values) {
    let Some(Val::Str(name)) = values.get("env") else {
        return;
    };
    let Some(game) = Game::from_name(name).and_then(|g| g.info()) else {
        return;
    };
    if game.family != Family::Atari {
        return;
    }
    let Some(Val::Wrappers(chain)) = values.get(WRAPPERS) else {
        return;
    };
    // Why each wrapper of the chain has nothing to do, where it has not.
    let reasons: Vec<Option<String>> = chain.iter().map(|w| idle_reason(w, &game)).collect();
    if reasons.iter().all(Option::is_none) {
        return;
    }
    if let Some(entry) = applier.entries.get(WRAPPERS).cloned() {
        for ((wrapper, span), why) in chain.iter().zip(&entry.items).zip(&reasons) {
            let Some(why) = why else { continue };
            applier.push(
                warning(
                    "config::wrapper-idle",
                    format!("`{}` is left out: {why}", wrapper.name()),
                )
                .at(entry.source, *span, "nothing to do in this game")
                .help(format!(
                    "nothing to fix: the resolved config runs {} without it, as CleanRL's and Stable-Baselines3's Atari wrappers would; a chain written for this game alone can drop it",
                    game.name
                )),
            );
        }
    }
    let idle: Vec<bool> = reasons.iter().map(Option::is_some).collect();
    if let Some(Val::Wrappers(chain)) = values.get_mut(WRAPPERS) {
        drop_flagged(chain, &idle);
    }
    if let Some(entry) = applier.entries.get_mut(WRAPPERS) {
        if let Val::Wrappers(chain) = &mut entry.val {
            drop_flagged(chain, &idle);
        }
        drop_flagged(&mut entry.items, &idle);
    }
}

/// Removes the items whose flag is set.
fn drop_flagged<T>(list: &mut Vec<T>, flags: &[bool]) {
    let mut flags = flags.iter();
    list.retain(|_| !flags.next().copied().unwrap_or(false));
}

/// Why `wrapper` has nothing to do in `game`, if it has not.
fn idle_reason(wrapper: &Wrapper, game: &GameInfo) -> Option<String> {
    match wrapper {
        Wrapper::EpisodicLife if !game.has_lives => Some(format!(
            "{} has no lives, so no life is ever lost",
            game.name
        )),
        Wrapper::FireReset if !game.has_fire => {
            Some(format!("{} has no FIRE action to press", game.name))
        }
        _ => None,
    }
}

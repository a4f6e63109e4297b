//! Suggestions for a misspelt game and the catalogue in one line, for the resolver's
//! messages. The games and their catalogue are tandem-spec's (`Game`, `GameInfo`).

use crate::diag::closest;
use tandem_spec::game::names;
pub use tandem_spec::game::{
    ActionMask, Game, GameInfo, Gymnasium, PettingZoo, Scalar, SpreadParams, TagParams, ZooApi,
    games,
};
pub use tandem_spec::{ActionSpace, Dtype, Family, GameFacts, Layout, ObsShape, ObsSpace};

/// The help line for an unknown game `name`: the names it was probably meant to be, else
/// where the catalogue is listed.
pub(crate) fn suggest(name: &str) -> String {
    let names: Vec<&str> = names().collect();
    let normal = normalise(name);
    if let Some(exact) = names.iter().find(|n| **n == normal) {
        return format!("did you mean `{exact}`?");
    }
    // A game named without its family: `breakout` is `minatar-breakout` or `atari-breakout`.
    let bare: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            ["atari-", "minatar-"]
                .iter()
                .any(|p| n.strip_prefix(p) == Some(normal.as_str()))
        })
        .collect();
    match bare.as_slice() {
        [] => {}
        [one] => return format!("did you mean `{one}`?"),
        several => {
            let quoted: Vec<String> = several.iter().map(|n| format!("`{n}`")).collect();
            return format!("did you mean {}?", quoted.join(" or "));
        }
    }
    match closest(&normal, names.iter().copied()) {
        Some(c) => format!("did you mean `{c}`?"),
        None => format!("known games: {}", summary()),
    }
}

/// `Space Invaders`, `space_invaders`, `SpaceInvaders` all read as `space-invaders`.
fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous: Option<char> = None;
    for c in name.trim().chars() {
        let c2 = if c == '_' || c == ' ' { '-' } else { c };
        if c2.is_ascii_uppercase() && previous.is_some_and(|p| p.is_ascii_lowercase()) {
            out.push('-');
        }
        out.push(c2.to_ascii_lowercase());
        previous = Some(c);
    }
    out
}

/// The catalogue in one line, for messages: the natives by name, the Atari ROMs as a pattern.
pub(crate) fn summary() -> String {
    let (atari, natives): (Vec<GameInfo>, Vec<GameInfo>) =
        games().partition(|g| g.family == Family::Atari);
    let natives: Vec<String> = natives.iter().map(|g| format!("\"{}\"", g.name)).collect();
    format!(
        "{}, \"atari-<rom>\" for each of {} ALE ROMs (e.g. \"atari-pong\", \"atari-ms-pacman\"; docs/config.md lists them), \"gymnasium\" and \"pettingzoo\"",
        natives.join(", "),
        atari.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelt_games_get_the_intended_name() {
        for (typed, meant) in [
            ("minatar-space-invader", "`minatar-space-invaders`"),
            ("atari-spaceinvaders", "`atari-space-invaders`"),
            ("atari-space_invaders", "`atari-space-invaders`"),
            ("atari-SpaceInvaders", "`atari-space-invaders`"),
            ("atari-mspacman", "`atari-ms-pacman`"),
            ("atari-ms-packman", "`atari-ms-pacman`"),
            ("atari-packman", "`atari-pacman`"),
            ("pong", "`atari-pong`"),
            ("breakout", "`minatar-breakout` or `atari-breakout`"),
            ("mountaincar", "`mountain-car`"),
            ("cart-pole", "`cartpole`"),
            ("gymnasum", "`gymnasium`"),
        ] {
            let help = suggest(typed);
            assert_eq!(help, format!("did you mean {meant}?"), "{typed}");
        }
        let unknown = suggest("starcraft");
        assert!(
            unknown.starts_with("known games: \"cartpole\""),
            "{unknown}"
        );
        assert!(unknown.contains("atari-<rom>"), "{unknown}");
    }
}

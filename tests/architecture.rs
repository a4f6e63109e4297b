//! docs/architecture.md's counts, held: how many files a new learner, native game or wrapper
//! touches, that no `match` over the algorithm table hides one behind a wildcard, that each
//! learner lives in a room of its own, and how often a run's config is resolved. A count that
//! grows fails here, with the files, so the map and the code change together.
//!
//! "Touches" is measured as the compiler enforces it: a file that names every variant of an
//! enum (outside comments and tests) holds an exhaustive `match` or table that a new variant
//! must join; a file that names one variant is about that one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Rust source of the root crate and the member crates, outside their tests.
fn sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root().join("src")];
    for member in std::fs::read_dir(root().join("crates")).unwrap() {
        dirs.push(member.unwrap().path().join("src"));
    }
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A source's code: its unit tests (from the first `#[cfg(test)]`) and comment lines left out.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

/// Whether `code` names `path` (`Game::Pendulum`) as a whole path, not the start of a longer one.
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + path.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after) && before != Some(':')
    })
}

/// The variants of `pub enum {name}` in `file` (lines of the block at one indent that start
/// with a capital), or of the `algorithms!` table there.
fn variants(file: &str, block: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let start = text
        .find(block)
        .unwrap_or_else(|| panic!("{file} has no {block}"));
    let body = &text[start + block.len()..];
    let end = body
        .find("\n    }\n")
        .or_else(|| body.find("\n}\n"))
        .unwrap();
    body[..end]
        .lines()
        .filter(|l| {
            let indent = l.len() - l.trim_start().len();
            (indent == 4 || indent == 8) && l.trim_start().starts_with(char::is_uppercase)
        })
        .map(|l| {
            let l = l.trim_start();
            let end = l.find(|c: char| !c.is_alphanumeric()).unwrap_or(l.len());
            l[..end].to_string()
        })
        .collect()
}

/// The files whose code names every one of `variants` as `{enum_name}::{variant}`.
fn naming_all(enum_name: &str, variants: &[String]) -> BTreeSet<String> {
    sources()
        .iter()
        .filter(|f| {
            let code = code(f);
            variants
                .iter()
                .all(|v| names(&code, &format!("{enum_name}::{v}")))
        })
        .map(|f| relative(f))
        .collect()
}

fn algorithm_variants() -> Vec<String> {
    let v = variants(
        "crates/tandem-config/src/model.rs",
        "algorithms! {\n    /// The learning algorithm",
    );
    assert!(v.len() >= 5, "the algorithm table reads as {v:?}");
    v
}

fn set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|f| f.to_string()).collect()
}

/// docs/architecture.md, `src/algo/build.rs`: a new learner is its room under `src/algo/`, its
/// `mod` line in `algo/mod.rs`, and these five files, each of which the compiler sends it to
/// (an exhaustive `match`): its row and section in the table, the memory estimate, its
/// cross-checks, its arm in `build`, and how it acts in `play` and evaluation. Seven in all.
#[test]
fn a_new_learner_touches_five_files_besides_its_room_and_its_mod_line() {
    let touched = naming_all("Algorithm", &algorithm_variants());
    let expected = set(&[
        "crates/tandem-config/src/budget.rs",
        "crates/tandem-config/src/model.rs",
        "crates/tandem-config/src/resolve/cross.rs",
        "src/algo/build.rs",
        "src/policy.rs",
    ]);
    assert_eq!(
        touched, expected,
        "the files that name every algorithm changed: a new learner now touches these; make the \
         new place ask the algorithm table (`Algorithm::facts`), or update this test and \
         docs/architecture.md's count together"
    );
}

/// Each learner of the table has a room of its own under `src/algo/` (a folder, or one file
/// where it is small), and `algo/mod.rs` names it.
#[test]
fn every_learner_has_a_room() {
    let module = std::fs::read_to_string(root().join("src/algo/mod.rs")).unwrap();
    for (name, _) in tandem_config::Algorithm::TABLE {
        let dir = root().join("src/algo").join(name);
        let file = root().join(format!("src/algo/{name}.rs"));
        assert!(
            dir.join("mod.rs").is_file() || file.is_file(),
            "{name} has no room: src/algo/{name}/ or src/algo/{name}.rs"
        );
        assert!(
            module.contains(&format!("pub mod {name};")),
            "algo/mod.rs does not declare {name}"
        );
    }
}

/// The `match` blocks of `code` (from `match` to its closing brace).
fn match_blocks(code: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    for (at, _) in code.match_indices("match ") {
        let Some(open) = code[at..].find('{') else {
            continue;
        };
        let mut depth = 0;
        for (i, c) in code[at + open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                blocks.push(&code[at + open..at + open + i + 1]);
                break;
            }
        }
    }
    blocks
}

/// The parenthesised text at the start of `text`, to its closing parenthesis.
fn balanced(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return &text[..=i],
            ')' => depth -= 1,
            _ => {}
        }
    }
    text
}

/// Whether a `match` block has an arm `_ =>` (or `_ if ... =>`) at its own level.
fn has_wildcard_arm(block: &str) -> bool {
    let mut depth = 0;
    let mut line_start = true;
    for (i, c) in block.char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => depth -= 1,
            '\n' => line_start = true,
            c if c.is_whitespace() => {}
            _ => {
                let arm = &block[i..];
                if depth == 1 && line_start && (arm.starts_with("_ =>") || arm.starts_with("_ if "))
                {
                    return true;
                }
                line_start = false;
            }
        }
    }
    false
}

/// A `match` over the algorithm table with a wildcard arm would run a new learner through
/// another's code instead of failing to compile; so would `matches!` over a list of them.
#[test]
fn no_wildcard_arm_or_list_over_the_algorithms() {
    let mut found = Vec::new();
    for file in sources() {
        let code = code(&file);
        for block in match_blocks(&code) {
            if block.contains("Algorithm::") && has_wildcard_arm(block) {
                found.push(format!("{}: a wildcard arm in {block}", relative(&file)));
            }
        }
        for (at, _) in code.match_indices("matches!(") {
            let call = balanced(&code[at + "matches!".len()..]);
            if call.matches("Algorithm::").count() > 1 {
                found.push(format!("{}: {call}", relative(&file)));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n\n"));
}

#[test]
fn the_wildcard_check_sees_a_wildcard_arm_and_only_at_its_level() {
    let wildcard = "match a {\n    Algorithm::Ppo(_) => 1,\n    _ => 2,\n}";
    assert!(has_wildcard_arm(wildcard));
    let nested = "match a {\n    Algorithm::Ppo(p) => match p {\n        _ => 1,\n    },\n    Algorithm::Dqn(_) => 2,\n}";
    assert!(!has_wildcard_arm(nested));
    let guarded = "match a {\n    _ if cheap => 1,\n    Algorithm::Dqn(_) => 2,\n}";
    assert!(has_wildcard_arm(guarded));
    assert_eq!(balanced("(a, f(b) | c) d"), "(a, f(b) | c)");
}

/// docs/architecture.md, `crates/tandem-spec`: a native game touches three files, its catalogue
/// row (`game.rs`), its family's `mod.rs` (module and `make` arm), and its own; a game with
/// settings (MPE's) also the config's `model.rs` and `schema.rs`; no other file names one of
/// them.
#[test]
fn a_native_game_touches_three_files() {
    let games = variants("crates/tandem-spec/src/game.rs", "pub enum Game {");
    let native: Vec<&String> = games
        .iter()
        // The bridge's environments are not native games.
        .filter(|g| !["Atari", "Gymnasium", "PettingZoo"].contains(&g.as_str()))
        .collect();
    assert!(native.len() >= 10, "the game enum reads as {games:?}");
    for game in native {
        let naming: BTreeSet<String> = sources()
            .iter()
            .filter(|f| names(&code(f), &format!("Game::{game}")))
            .map(|f| relative(f))
            .collect();
        let expected = if game.starts_with("Minatar") {
            set(&[
                "crates/tandem-spec/src/game.rs",
                "crates/tandem-env/src/minatar/mod.rs",
            ])
        } else if game.starts_with("Mpe") {
            // A game with settings: the config reads and writes them (model.rs) and declares
            // them (schema.rs).
            set(&[
                "crates/tandem-spec/src/game.rs",
                "crates/tandem-env/src/mpe/mod.rs",
                "crates/tandem-config/src/model.rs",
                "crates/tandem-config/src/schema.rs",
            ])
        } else {
            set(&[
                "crates/tandem-spec/src/game.rs",
                "crates/tandem-env/src/classic/mod.rs",
            ])
        };
        assert_eq!(
            naming, expected,
            "Game::{game} is named outside its catalogue row, its family's make and (a game with settings) the config's reading and declaring of them"
        );
    }
}

/// docs/architecture.md, `crates/tandem-spec`: a wrapper touches its row in `wrapper.rs`, the
/// env's `wrappers/mod.rs` arm and its implementation, and `fit.rs` when it changes the
/// observation or needs a kind of game. Those two files name every wrapper; `fit.rs` names all
/// but the ones that change rewards, episode ends or actions alone.
#[test]
fn a_wrapper_touches_three_files_or_four() {
    let wrappers = variants("crates/tandem-spec/src/wrapper.rs", "pub enum Wrapper {");
    assert!(
        wrappers.len() >= 13,
        "the wrapper enum reads as {wrappers:?}"
    );
    assert_eq!(
        naming_all("Wrapper", &wrappers),
        set(&[
            "crates/tandem-env/src/wrappers/mod.rs",
            "crates/tandem-spec/src/wrapper.rs",
        ])
    );
    let fit = code(&root().join("crates/tandem-spec/src/fit.rs"));
    let not_in_fit: Vec<&String> = wrappers
        .iter()
        .filter(|w| !names(&fit, &format!("Wrapper::{w}")))
        .collect();
    assert_eq!(
        not_in_fit,
        [
            "ClipReward",
            "ScaleReward",
            "ClampReward",
            "TimeLimit",
            "NormalizeReward"
        ],
        "fit.rs's share of the wrappers changed; say which in docs/architecture.md"
    );
}

/// docs/architecture.md, "The one way data flows": `tandem train` resolves the experiment once
/// in the launcher; each rank resolves once more, the canonical text it was handed, to check
/// that it resolves to itself. A launcher that read the text back would be a second pass.
#[test]
fn the_launcher_resolves_once_and_a_rank_checks_once() {
    let req = tandem::launch::TrainRequest {
        file: Some(
            root()
                .join("experiments/cartpole.kdl")
                .display()
                .to_string(),
        ),
        ..Default::default()
    };
    let before = tandem_config::resolutions();
    let (canonical, _) = tandem::launch::resolve_canonical(&req).unwrap();
    assert_eq!(tandem_config::resolutions() - before, 1, "the launcher");
    let before = tandem_config::resolutions();
    tandem::launch::worker::parse_config(&canonical).unwrap();
    assert_eq!(tandem_config::resolutions() - before, 1, "a rank");
    // `train` itself resolves through `resolve_canonical` alone.
    let launch = code(&root().join("src/launch/mod.rs"));
    let train = &launch[launch.find("pub fn train(").unwrap()..];
    let train = &train[..train.find("\n}\n").unwrap()];
    let resolving = [
        "resolve_canonical(",
        "parse_config(",
        "parse_canonical(",
        "resolve(",
    ];
    let calls: Vec<&str> = resolving
        .iter()
        .copied()
        .filter(|call| train.contains(call))
        .collect();
    assert_eq!(calls, ["resolve_canonical("], "what `train` resolves with");
}

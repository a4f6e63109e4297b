//! Property tests: whatever the input (arbitrary text, token soup built from the
//! language's own words, mutations of a valid experiment, arbitrary `--set`),
//! parse + resolve ends in Ok or in at least one diagnostic, and rendering those
//! diagnostics (plain, colour, JSON) never panics either. Deep nesting and files that
//! include each other are in the grammar too: those must end as well, without overflowing the
//! stack or reading without bound.
//!
//! Each property runs 256 cases; `TANDEM_FUZZ_CASES=N` runs N (a longer fuzzing run).

use proptest::prelude::*;
use tandem_config::{Source, canonical_json, canonical_kdl, config_hash, parse_canonical, resolve};

const WORDS: &[&str] = &[
    "experiment",
    "\"x\"",
    "include",
    "\"../x.kdl\"",
    "seed",
    "devices",
    "\"cpu\"",
    "\"cuda:0\"",
    "\"cuda:1\"",
    "count=2",
    "kind=\"cuda\"",
    "threads",
    "\"auto\"",
    "algorithm",
    "\"ppo\"",
    "\"dqn\"",
    "\"a2c\"",
    "lr",
    "gamma",
    "minibatches",
    "micro-batches",
    "env-groups",
    "pin-cores",
    "batch-size",
    "buffer-capacity",
    "env",
    "\"cartpole\"",
    "\"atari-breakout\"",
    "\"minatar-breakout\"",
    "envs",
    "wrappers",
    "grayscale",
    "resize",
    "height=84",
    "frame-stack",
    "frame-skip",
    "max-pool=#true",
    "time-limit",
    "noop-reset",
    "fire-reset",
    "normalize-obs",
    "network",
    "\"nature-cnn\"",
    "\"mlp\"",
    "\"minatar-cnn\"",
    "\"impala-cnn\"",
    "hidden",
    "channels",
    "sync",
    "\"periodic\"",
    "every",
    "train",
    "rollout",
    "total-steps",
    "max-steps",
    "log",
    "console",
    "checkpoint",
    "keep",
    "{",
    "}",
    "{",
    "}",
    ";",
    "\n",
    "=",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "0.5",
    "1e300",
    "-0.0",
    "#nan",
    "#inf",
    "#-inf",
    "#null",
    "#true",
    "#false",
    "170141183460469231731687303715884105727",
    "\"\"",
    "\"é\"",
    "(ty)",
    "/-",
    "//c\n",
    "/*",
    "*/",
    "r#\"raw\"#",
    "\"\"\"\nmulti\n\"\"\"",
    "\\",
    "é",
    "🦀",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..60).prop_map(|tokens| tokens.join(" "))
}

fn check(text: &str, sets: &[String]) {
    match resolve(&Source::Stdin(text.to_string()), sets) {
        Ok(r) => {
            // Anything that resolves also round-trips.
            let canonical = canonical_kdl(&r.experiment);
            let back = parse_canonical(&canonical).expect("canonical text parses back");
            assert_eq!(config_hash(&back), config_hash(&r.experiment));
        }
        Err(d) => {
            assert!(!d.is_empty(), "an error without diagnostics for {text:?}");
            let _ = d.render(false);
            let _ = d.render(true);
            let _ = d.to_json();
        }
    }
}

fn valid_base() -> String {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/breakout.kdl"
    );
    canonical_kdl(&resolve(&Source::Path(dir.into()), &[]).unwrap().experiment)
}

/// The canonical JSON form of the same experiment.
fn valid_json() -> String {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/breakout.kdl"
    );
    canonical_json(&resolve(&Source::Path(dir.into()), &[]).unwrap().experiment)
}

const JSON_WORDS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\"kind\"",
    "\"include\"",
    "\"name\"",
    "null",
    "true",
    "1",
    "-0.5",
    "1e999",
    "99999999999999999999999999999999999999999",
    "\"\\u",
    "\"\\ud800\"",
    "{\"kind\": 1}",
    "[{}]",
    "\"env\": \"cartpole\"",
];

/// Words of a deeply nested text: mostly block openings, among the lexical forms that hold
/// a brace the parser must not count (strings, raw strings, comments) and broken ones.
const NESTING_WORDS: &[&str] = &[
    "a{",
    "a{",
    "a{",
    "a{",
    "a{",
    "a{",
    "{",
    "}",
    "\"{\"",
    "\"}\"",
    "#\"}\"#",
    "##\"\"#}\"##",
    "//}\n",
    "/*}*/",
    "/*",
    "*/",
    "\"",
    "#\"",
    "\n",
    "\u{2028}",
    "#",
    "\"\"\"\n}\n\"\"\"",
    "\"\"\"",
    "\\",
    "/-",
    ";",
    "b 1",
    "(t)",
    "a{}",
];

fn nesting_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(NESTING_WORDS), 0..400)
        .prop_map(|tokens| tokens.concat())
}

/// A soup, then a new line opening up to 120 blocks at once, then another soup: whatever the
/// first soup left open (a string, a comment) decides whether those blocks are structural.
fn deep_soup() -> impl Strategy<Value = String> {
    (nesting_soup(), 0usize..120, nesting_soup())
        .prop_map(|(before, levels, after)| format!("{before}\n{}{after}", "a{".repeat(levels)))
}

/// What one include file holds: a few settings and includes of the files of the same set.
fn include_body() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            (0usize..4).prop_map(|i| format!("include \"f{i}.kdl\"\n")),
            Just("algorithm \"ppo\"\n".to_string()),
            Just("train { rollout 8 }\n".to_string()),
            nesting_soup(),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn cases() -> u32 {
    std::env::var("TANDEM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// A nesting the scanner under-counts would reach the recursive parser and overflow this
    /// test thread's 2 MiB stack (about 56 levels in a debug build), aborting the run.
    #[test]
    fn deep_nesting_never_overflows(body in deep_soup(), sets in deep_soup()) {
        check(&body, &[]);
        check(&format!("experiment \"fuzz\" {{\n{body}\n}}\n"), &[]);
        let text = "experiment \"x\" {\n    env \"cartpole\"\n}\n";
        check(text, &[format!("env.wrappers={sets}"), format!("seed={sets}")]);
    }

    /// Four files that include each other in any pattern, nested in any way: resolution ends.
    #[test]
    fn files_that_include_each_other_end(bodies in prop::collection::vec(include_body(), 4)) {
        let dir = std::env::temp_dir().join(format!("tandem-fuzz-include-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, body) in bodies.iter().enumerate() {
            std::fs::write(dir.join(format!("f{i}.kdl")), body).unwrap();
        }
        let main = dir.join("main.kdl");
        std::fs::write(&main, "experiment \"x\" {\n    env \"cartpole\"\n    include \"f0.kdl\"\n}\n").unwrap();
        match resolve(&Source::Path(main), &[]) {
            Ok(_) => {}
            Err(d) => {
                prop_assert!(!d.is_empty());
                let _ = d.render(false);
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text, &[]);
    }

    #[test]
    fn token_soup_never_panics(body in soup()) {
        check(&body, &[]);
        check(&format!("experiment \"fuzz\" {{\n{body}\n}}\n"), &[]);
    }

    #[test]
    fn mutated_experiments_never_panic(start in 0usize..2000, len in 0usize..40, insert in soup()) {
        let base = valid_base();
        let start = start.min(base.len());
        let end = (start + len).min(base.len());
        if base.is_char_boundary(start) && base.is_char_boundary(end) {
            let mutated = format!("{}{}{}", &base[..start], insert, &base[end..]);
            check(&mutated, &[]);
        }
    }

    #[test]
    fn mutated_json_experiments_never_panic(start in 0usize..3000, len in 0usize..40, insert in prop::collection::vec(prop::sample::select(JSON_WORDS), 0..8)) {
        let base = valid_json();
        let start = start.min(base.len());
        let end = (start + len).min(base.len());
        if base.is_char_boundary(start) && base.is_char_boundary(end) {
            let mutated = format!("{}{}{}", &base[..start], insert.join(" "), &base[end..]);
            check(&mutated, &[]);
        }
    }

    #[test]
    fn arbitrary_sets_never_panic(path in "[a-z.=-]{0,24}", value in soup(), raw in any::<String>()) {
        let text = "experiment \"x\" {\n    env \"cartpole\"\n}\n";
        check(text, &[format!("{path}={value}"), raw]);
    }
}

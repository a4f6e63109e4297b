//! `env "gymnasium" { info-keys }`: what it resolves to, the canonical round trip and hash,
//! and the mistakes it refuses at their place.

use tandem_config::*;

fn text(keys: &str) -> String {
    format!(
        "experiment \"x\" {{\n    env \"gymnasium\" {{\n        id \"A-v0\"\n{keys}    }}\n}}\n"
    )
}

fn keys_of(e: &Experiment) -> Vec<String> {
    match &e.env.game {
        Game::Gymnasium(g) => g.info_keys.clone(),
        other => panic!("not gymnasium: {other:?}"),
    }
}

fn only_error(text: &str) -> Diagnostic {
    let diags = resolve(&Source::Stdin(text.into()), &[]).expect_err("refused");
    assert_eq!(diags.len(), 1, "{diags:?}");
    diags.iter().next().unwrap().clone()
}

#[test]
fn info_keys_keep_their_order_round_trip_and_enter_the_hash() {
    let e = resolve(&Source::Stdin(text("")), &[]).unwrap().experiment;
    assert!(keys_of(&e).is_empty());
    let bare = canonical_kdl(&e);
    assert!(bare.contains("        info-keys\n"), "{bare}");
    let given = text("        info-keys \"is_success\" \"distance to goal\"\n");
    let with = resolve(&Source::Stdin(given), &[]).unwrap().experiment;
    assert_eq!(keys_of(&with), ["is_success", "distance to goal"]);
    let canonical = canonical_kdl(&with);
    assert!(
        canonical.contains("        info-keys \"is_success\" \"distance to goal\"\n"),
        "{canonical}"
    );
    assert_eq!(parse_canonical(&canonical).unwrap(), with);
    assert_ne!(config_hash(&with), config_hash(&e));
    // The order is the order of the tags' values in every gathered episode: part of the run.
    let swapped = text("        info-keys \"distance to goal\" \"is_success\"\n");
    let swapped = resolve(&Source::Stdin(swapped), &[]).unwrap().experiment;
    assert_ne!(config_hash(&swapped), config_hash(&with));
    // From the command line too.
    let sets = vec!["env.info-keys=\"is_success\"".to_string()];
    let set = resolve(&Source::Stdin(text("")), &sets).unwrap().experiment;
    assert_eq!(keys_of(&set), ["is_success"]);
}

#[test]
fn a_key_listed_twice_is_refused_at_the_second() {
    let d = only_error(&text(
        "        info-keys \"is_success\" \"x\" \"is_success\"\n",
    ));
    assert_eq!(d.code(), "config::duplicate-key");
    assert_eq!(d.line_column().map(|l| l.0), Some(4));
    assert!(
        d.message().contains("`is_success` twice"),
        "{}",
        d.message()
    );
    assert!(d.help().is_some());
}

#[test]
fn a_key_that_is_not_a_string_or_is_empty_is_refused() {
    let d = only_error(&text("        info-keys \"is_success\" 3\n"));
    assert_eq!(d.code(), "config::type");
    assert_eq!(d.line_column().map(|l| l.0), Some(4));
    let d = only_error(&text("        info-keys \"\"\n"));
    assert_eq!(d.code(), "config::text");
    assert_eq!(d.line_column().map(|l| l.0), Some(4));
    let d = only_error(&text("        info-keys { is_success }\n"));
    assert_eq!(d.code(), "config::unexpected-block");
}

#[test]
fn info_keys_belong_to_the_gymnasium_kind_alone() {
    let d =
        only_error("experiment \"x\" {\n    env \"cartpole\" { info-keys \"is_success\" }\n}\n");
    assert_eq!(d.line_column().map(|l| l.0), Some(2));
}

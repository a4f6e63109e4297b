//! `docs/config.md` and the schema must agree: the page's reference section must
//! be exactly what the schema generates (`UPDATE_DOCS=1` rewrites it), and every
//! example experiment in `experiments/` is documented there by its settings.

const BEGIN: &str = "<!-- BEGIN GENERATED REFERENCE";
const END: &str = "<!-- END GENERATED REFERENCE -->";

fn page_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md")
}

#[test]
fn reference_section_matches_the_schema() {
    let path = page_path();
    let page = std::fs::read_to_string(&path).expect("docs/config.md exists");
    let begin = page.find(BEGIN).expect("begin marker");
    let body_start = begin + page[begin..].find("-->\n").expect("end of begin marker") + 4;
    let end = page.find(END).expect("end marker");
    let generated = tandem_config::reference_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{}{}", &page[..body_start], generated, &page[end..]);
        std::fs::write(&path, updated).expect("write docs/config.md");
        return;
    }
    let documented = &page[body_start..end];
    assert!(
        documented == generated,
        "docs/config.md disagrees with the schema; run UPDATE_DOCS=1 cargo test -p tandem-config --test docs"
    );
}

#[test]
fn reference_lists_every_setting_with_type_and_default() {
    let generated = tandem_config::reference_markdown();
    for needle in [
        "| `lr` | number > 0 | `0.00025` |",
        "| `gamma` | number in (0, 1] | `0.99` |",
        "| `target-kl` | number > 0 or `#null` | `#null` |",
        "| `devices` |",
        "| `\"atari-breakout\"` |",
        "#### wrapper `frame-skip`",
        "| `max-pool` | boolean (`#true` or `#false`) | `#true` |",
        "| `max-steps` | integer >= 1 | required |",
    ] {
        assert!(generated.contains(needle), "reference lacks {needle:?}");
    }
}

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
        "| `\"atari-<rom>\"` |",
        "`atari-ms-pacman`",
        "| `\"pendulum\"` |",
        "#### `env \"gymnasium\"`",
        "#### wrapper `frame-skip`",
        "| `max-pool` | boolean (`#true` or `#false`) | `#true` |",
        "| `max-steps` | integer >= 1 | required |",
    ] {
        assert!(generated.contains(needle), "reference lacks {needle:?}");
    }
}

/// The example experiments: every `experiments/*.kdl` (the pieces in `experiments/include/`
/// belong to the files that include them), in name order.
fn examples() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("experiments/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "kdl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no example experiments in {dir:?}");
    files
}

/// The page's "Example experiments" section.
fn examples_section(page: &str) -> &str {
    let start = page
        .find("\n## Example experiments\n")
        .expect("docs/config.md has a section `## Example experiments`");
    let rest = &page[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

/// Every example is listed in the page's examples section, and every setting an example (or a
/// piece it includes) sets is documented in the generated reference: a setting a reader copies
/// from an example can be looked up.
#[test]
fn every_example_experiment_is_documented_by_its_settings() {
    let page = std::fs::read_to_string(page_path()).expect("docs/config.md exists");
    let section = examples_section(&page);
    let reference = tandem_config::reference_markdown();
    let mut problems = Vec::new();
    for file in examples() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !section.contains(&format!("`experiments/{name}`")) {
            problems.push(format!(
                "experiments/{name} is not listed under `## Example experiments`"
            ));
        }
        let resolved = tandem_config::resolve(&tandem_config::Source::Path(file.clone()), &[])
            .unwrap_or_else(|e| panic!("experiments/{name} does not resolve: {e:?}"));
        for (path, origin) in resolved.provenance.iter() {
            if *origin == tandem_config::Origin::Default {
                continue;
            }
            let leaf = path.rsplit('.').next().unwrap();
            if !reference.contains(&format!("`{leaf}`")) {
                problems.push(format!(
                    "experiments/{name} sets `{path}` ({origin}), which the reference does not document"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const ATARI_BEGIN: &str = "<!-- BEGIN GENERATED ATARI TABLE";
const ATARI_END: &str = "<!-- END GENERATED ATARI TABLE -->";

/// The Atari games of the catalogue as docs/environments.md shows them.
fn atari_table() -> String {
    let mut table = String::from("| game | actions | FIRE | lives |\n|---|---:|:---:|:---:|\n");
    for game in tandem_config::games().filter(|g| g.family == tandem_config::Family::Atari) {
        let tandem_config::ActionSpace::Discrete { n } = game.actions else {
            panic!("{} has a box action space", game.name);
        };
        let mark = |b: bool| if b { "yes" } else { "" };
        table.push_str(&format!(
            "| `{}` | {n} | {} | {} |\n",
            game.name,
            mark(game.has_fire),
            mark(game.has_lives)
        ));
    }
    table
}

#[test]
fn environments_page_lists_the_whole_catalogue() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/environments.md");
    let page = std::fs::read_to_string(&path).expect("docs/environments.md exists");
    let begin = page.find(ATARI_BEGIN).expect("begin marker");
    let body_start = begin + page[begin..].find("-->\n").expect("end of begin marker") + 4;
    let end = page.find(ATARI_END).expect("end marker");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{}{}", &page[..body_start], atari_table(), &page[end..]);
        std::fs::write(&path, updated).expect("write docs/environments.md");
        return;
    }
    assert!(
        page[body_start..end] == atari_table(),
        "docs/environments.md's Atari table disagrees with the catalogue; run UPDATE_DOCS=1 cargo test -p tandem-config --test docs"
    );
    for game in tandem_config::games() {
        assert!(
            page.contains(&format!("`{}`", game.name)),
            "docs/environments.md does not name {}",
            game.name
        );
    }
}

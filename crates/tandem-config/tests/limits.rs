//! Inputs far beyond any real experiment get bounded answers: a file over the size cap
//! is refused before it is read, and however many problems a file holds (or however long
//! the line they are on), the rendered and JSON reports stay a few kilobytes.

use std::path::PathBuf;

use tandem_config::{Diagnostics, MAX_CONFIG_BYTES, Source, resolve};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-limits-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn errors_of(source: &Source) -> Diagnostics {
    match resolve(source, &[]) {
        Ok(_) => panic!("resolved"),
        Err(d) => d,
    }
}

/// `experiment "x" { ... }` padded with a comment to exactly `size` bytes.
fn valid_of_size(size: usize) -> String {
    let head = "experiment \"x\" {\n    env \"cartpole\"\n}\n// ";
    let mut text = format!("{head}{}", "x".repeat(size - head.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), size);
    text
}

#[test]
fn a_file_at_the_cap_is_read_and_one_byte_more_is_refused_with_its_size() {
    let dir = scratch("cap");
    let at_cap = dir.join("at-cap.kdl");
    std::fs::write(&at_cap, valid_of_size(MAX_CONFIG_BYTES)).unwrap();
    resolve(&Source::Path(at_cap), &[]).expect("a file of exactly the cap resolves");
    let over = dir.join("over.kdl");
    std::fs::write(&over, valid_of_size(MAX_CONFIG_BYTES + 1)).unwrap();
    let diags = errors_of(&Source::Path(over.clone()));
    assert_eq!(diags.len(), 1, "{diags}");
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large");
    assert_eq!(d.file(), Some(over.display().to_string().as_str()));
    assert!(
        d.message()
            .contains("is 1048577 bytes (1.0 MiB), more than the 1048576 bytes (1 MiB)"),
        "{}",
        d.message()
    );
    assert!(d.help().unwrap().contains("few kilobytes"), "{d:?}");
    // Standard input is read one byte past the cap, so its size is not known.
    let stdin = errors_of(&Source::Stdin(valid_of_size(MAX_CONFIG_BYTES + 1)));
    let d = stdin.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large");
    assert_eq!(
        d.message(),
        "<stdin> holds more than the 1048576 bytes (1 MiB) a config may hold"
    );
    let capped = tandem_config::read_capped(std::io::repeat(b' ')).unwrap();
    assert_eq!(capped.len(), MAX_CONFIG_BYTES + 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_included_file_over_the_cap_is_refused_at_its_include() {
    let dir = scratch("include");
    let big = format!("// {}\n", "x".repeat(MAX_CONFIG_BYTES));
    std::fs::write(dir.join("big.kdl"), big).unwrap();
    let main = dir.join("main.kdl");
    std::fs::write(
        &main,
        "experiment \"x\" {\n    include \"big.kdl\"\n    env \"cartpole\"\n}\n",
    )
    .unwrap();
    let diags = errors_of(&Source::Path(main));
    let d = diags.iter().next().unwrap();
    assert_eq!(d.code(), "config::too-large", "{diags}");
    assert_eq!(d.line_column(), Some((2, 13)));
    assert!(
        d.label().unwrap().starts_with("1048580 bytes (1.0 MiB)"),
        "{d:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hundred_thousand_unknown_settings_print_fifty_and_a_count() {
    let n = 100_000;
    let text = format!("experiment \"x\" {{\n{}}}\n", "    foo 1\n".repeat(n));
    assert!(text.len() <= MAX_CONFIG_BYTES);
    let diags = errors_of(&Source::Stdin(text));
    assert!(diags.len() > n, "{}", diags.len());
    let rendered = diags.render(false);
    let more = diags.len() - 50;
    assert!(
        rendered.ends_with(&format!(
            "and {more} more errors not shown (the first 50 are); fix these and check again\n"
        )),
        "{}",
        &rendered[rendered.len() - 300..]
    );
    assert!(rendered.len() < 50 * 1000, "{} bytes", rendered.len());
    let json: serde_json::Value = serde_json::from_str(&diags.to_json()).unwrap();
    let list = json.as_array().unwrap();
    assert_eq!(list.len(), 51);
    assert_eq!(list[50]["code"], "config::more-errors");
    assert_eq!(list[50]["severity"], "note");
}

#[test]
fn a_name_as_long_as_the_file_is_cut_in_the_report() {
    let name = "a".repeat(MAX_CONFIG_BYTES - 100);
    let text = format!("experiment \"x\" {{\n    env \"cartpole\"\n    {name} 1\n}}\n");
    let diags = errors_of(&Source::Stdin(text));
    let rendered = diags.render(false);
    assert!(
        rendered.len() < 4000,
        "{} bytes:\n{}",
        rendered.len(),
        &rendered[..2000]
    );
    let line = format!("    {name} 1");
    assert!(
        rendered.contains(&format!(
            "(line 3 is {} bytes long, too long to show)",
            line.len()
        )),
        "{rendered}"
    );
    assert!(
        rendered.contains("characters in all)"),
        "the name in the message is cut: {rendered}"
    );
    assert!(diags.to_json().len() < 4000, "{}", diags.to_json().len());
}

//! Golden tests of the rendered diagnostics: every `tests/golden/*.kdl` is an
//! invalid experiment (with `// set: PATH=VALUE` lines for command-line
//! overrides); its plain rendering must equal `tests/golden/<name>.txt`.
//! `UPDATE_GOLDEN=1 cargo test -p tandem-config --test golden` rewrites them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tandem_config::{Source, resolve};

fn cases() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/golden")
        .expect("tests/golden exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kdl"))
        .collect();
    files.sort();
    files
}

fn sets_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("readable case");
    text.lines()
        .filter_map(|l| l.strip_prefix("// set: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_invalid_config_renders_as_its_golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut mismatches = Vec::new();
    let mut codes = BTreeSet::new();
    let files = cases();
    assert!(files.len() >= 25, "only {} golden cases", files.len());
    for path in &files {
        let result = resolve(&Source::Path(path.clone()), &sets_of(path));
        let diags = match result {
            Ok(_) => panic!("{} should be invalid but resolved", path.display()),
            Err(d) => d,
        };
        assert!(!diags.is_empty(), "{}: no diagnostics", path.display());
        for d in diags.iter() {
            codes.insert(d.code().to_string());
            // Every diagnostic names a file, and those with a position have a help line.
            assert!(
                d.file().is_some(),
                "{}: diagnostic without a file: {}",
                path.display(),
                d.message()
            );
        }
        let rendered = diags.render(false);
        let golden = path.with_extension("txt");
        if update {
            std::fs::write(&golden, &rendered).expect("write golden");
        } else {
            let expected = std::fs::read_to_string(&golden).unwrap_or_default();
            if expected != rendered {
                mismatches.push(format!("--- {}\n{rendered}", golden.display()));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "renderings differ from goldens (UPDATE_GOLDEN=1 rewrites):\n{}",
        mismatches.join("\n")
    );
    for class in [
        "kdl::syntax",
        "config::unknown-node",
        "config::unknown-setting",
        "config::type",
        "config::range",
        "config::unknown-kind",
        "config::unknown-wrapper",
        "config::unknown-device",
        "config::duplicate-device",
        "config::not-divisible",
        "config::wrapper-mismatch",
        "config::network-mismatch",
        "config::layer-mismatch",
        "config::unknown-layer",
        "config::include-cycle",
        "config::include-missing",
        "config::unknown-path",
    ] {
        assert!(codes.contains(class), "no golden case produces {class}");
    }
}

#[test]
fn rendering_has_position_label_and_help() {
    let diags = resolve(&Source::Path("tests/golden/negative-lr.kdl".into()), &[]).unwrap_err();
    let d = diags.iter().next().unwrap();
    assert_eq!(d.file(), Some("tests/golden/negative-lr.kdl"));
    assert_eq!(d.line_column(), Some((3, 21)));
    assert!(
        d.label().unwrap().contains("found -0.0003"),
        "{:?}",
        d.label()
    );
    assert!(d.help().is_some());
    let text = diags.render(false);
    assert!(text.contains("tests/golden/negative-lr.kdl:3:21"), "{text}");
    assert!(!text.contains('\u{1b}'), "plain rendering has escape codes");
    assert!(
        diags.render(true).contains('\u{1b}'),
        "colour rendering has no escape codes"
    );
}

#[test]
fn json_diagnostics_are_machine_readable() {
    let diags = resolve(
        &Source::Path("tests/golden/unknown-setting.kdl".into()),
        &[],
    )
    .unwrap_err();
    let parsed: serde_json::Value = serde_json::from_str(&diags.to_json()).unwrap();
    let first = &parsed[0];
    assert_eq!(first["code"], "config::unknown-setting");
    assert_eq!(first["file"], "tests/golden/unknown-setting.kdl");
    assert_eq!(first["line"], 4);
    assert_eq!(first["column"], 9);
    assert_eq!(first["end_column"], 12);
    assert_eq!(first["help"], "did you mean `lr`?");
}

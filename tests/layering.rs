//! The dependency rules of docs/architecture.md ("Dependency rules"), enforced: every path a
//! module of the root crate names (`crate::x`) must be an edge the table below allows, and the
//! member crates must not depend on crates above them. A new edge is a decision: add it to the
//! table and to the architecture document together, or restructure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// For each top-level module of the root crate, the root modules it may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("atomic", &[]),
    ("seeds", &[]),
    ("logging", &[]),
    ("torch_ops", &[]),
    ("nn", &["torch_ops"]),
    ("algo", &["nn", "seeds", "atomic", "torch_ops"]),
    ("dist", &["algo", "torch_ops"]),
    (
        "train",
        &["algo", "nn", "dist", "seeds", "atomic", "logging"],
    ),
    (
        "play",
        &["train", "algo", "nn", "seeds", "atomic", "torch_ops"],
    ),
    ("version", &["dist"]),
    ("sweep", &["launch", "atomic"]),
    (
        "launch",
        &[
            "train",
            "dist",
            "algo",
            "nn",
            "seeds",
            "atomic",
            "logging",
            "torch_ops",
        ],
    ),
];

/// For each member crate, the workspace crates it may depend on.
const CRATES: &[(&str, &[&str])] = &[
    ("tandem-config", &[]),
    ("tandem-summary", &[]),
    ("tandem-ale", &[]),
    ("tandem-env", &["tandem-ale"]),
];

const WORKSPACE_CRATES: &[&str] = &[
    "tandem",
    "tandem-config",
    "tandem-env",
    "tandem-summary",
    "tandem-ale",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/algo/ppo.rs` -> `algo`).
fn module_of(file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root().join("src")).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "main" && name != "lib").then(|| name.to_string())
}

/// Every `crate::<module>` a line of code names (comments skipped), and `super::super::` paths,
/// which could climb out of a module unseen.
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // `crate::{a, b}` lists several.
        if name.is_empty() && after.starts_with('{') {
            let list = &after[1..after.find('}').unwrap_or(after.len())];
            found.extend(
                list.split(',')
                    .map(|s| s.trim().split("::").next().unwrap_or("").trim().to_string()),
            );
        } else {
            found.push(name);
        }
        rest = after;
    }
    if code.contains("super::super::") {
        found.push("super::super".into());
    }
    found
}

/// Every forbidden use in the root crate's `src/`, as "file:line: module -> used".
fn violations() -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let Some(module) = module_of(&file) else {
            continue;
        };
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        let Some(may_use) = allowed.get(module.as_str()) else {
            found.push(format!(
                "{shown}: module `{module}` has no row in tests/layering.rs's ALLOWED table"
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            for used in named_modules(line) {
                if used != module && !may_use.contains(&used.as_str()) {
                    found.push(format!(
                        "{shown}:{}: `{module}` uses `{used}`: {}",
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn modules_use_only_the_modules_the_dependency_rules_allow() {
    let found = violations();
    assert!(
        found.is_empty(),
        "forbidden imports (see docs/architecture.md, \"Dependency rules\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rules_table_knows_every_top_level_module() {
    let names: Vec<String> = std::fs::read_dir(root().join("src"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let name = name.strip_suffix(".rs").unwrap_or(&name).to_string();
            (name != "main" && name != "lib").then_some(name)
        })
        .collect();
    for name in &names {
        assert!(
            ALLOWED.iter().any(|(m, _)| m == name),
            "src/{name} has no row in the ALLOWED table"
        );
    }
}

#[test]
fn member_crates_depend_only_on_the_crates_below_them() {
    for (krate, may_use) in CRATES {
        let manifest = root().join("crates").join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let mut in_dependencies = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_dependencies = line.contains("dependencies");
                continue;
            }
            let Some(dependency) = line.split(['=', ' ']).next().filter(|_| in_dependencies) else {
                continue;
            };
            if WORKSPACE_CRATES.contains(&dependency) {
                assert!(
                    may_use.contains(&dependency),
                    "{krate} depends on {dependency} ({}); the dependency rules forbid it",
                    manifest.display()
                );
            }
        }
    }
}

#[test]
fn the_scanner_sees_paths_lists_and_skips_comments() {
    assert_eq!(named_modules("use crate::dist::Ddp;"), ["dist"]);
    assert_eq!(
        named_modules("use crate::{atomic, seeds::derived_seed};"),
        ["atomic", "seeds"]
    );
    assert!(named_modules("// see crate::launch").is_empty());
    assert_eq!(named_modules("let x = super::super::y;"), ["super::super"]);
}

//! The dependency rules of docs/architecture.md ("Dependency rules"), enforced: every path a
//! module of the root crate names (`crate::x`) must be an edge the table below allows, and the
//! member crates must not depend on crates above them. A new edge is a decision: add it to the
//! table and to the architecture document together, or restructure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// For each top-level module of the root crate, the root modules it may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("alloc", &[]),
    ("atomic", &[]),
    ("seeds", &[]),
    ("logging", &[]),
    ("torch_ops", &[]),
    ("usage", &[]),
    ("nn", &["torch_ops"]),
    ("algo", &["nn", "seeds", "atomic", "torch_ops"]),
    ("dist", &["algo", "torch_ops"]),
    ("policy", &["algo", "nn"]),
    ("cast", &["algo", "policy", "usage"]),
    (
        "train",
        &[
            "usage",
            "algo",
            "nn",
            "dist",
            "policy",
            "cast",
            "seeds",
            "atomic",
            "logging",
            "torch_ops",
        ],
    ),
    (
        "play",
        &[
            "usage",
            "train",
            "policy",
            "cast",
            "algo",
            "nn",
            "seeds",
            "atomic",
            "torch_ops",
        ],
    ),
    ("export", &["play", "train", "policy", "atomic", "usage"]),
    ("version", &["dist"]),
    ("sweep", &["launch", "atomic", "usage"]),
    (
        "launch",
        &[
            "usage",
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
    ("tandem-spec", &[]),
    ("tandem-config", &["tandem-spec"]),
    ("tandem-summary", &[]),
    ("tandem-ale", &[]),
    ("tandem-env", &["tandem-ale", "tandem-spec"]),
];

const WORKSPACE_CRATES: &[&str] = &[
    "tandem",
    "tandem-spec",
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

// ---------------------------------------------------------------- loops between files

/// Loops between files that remain, each as its files sorted, to be broken (issue 34). A loop
/// not listed here fails the test, and so does a listed one that no longer exists, so the list
/// only shrinks.
const KNOWN_LOOPS: &[&[&str]] = &[];

/// A crate's source folder and each of its files' module paths (`src/algo/ppo.rs` is
/// `["algo", "ppo"]`, `src/algo/mod.rs` is `["algo"]`, `src/lib.rs` is `[]`).
fn crate_modules(src: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| !f.ends_with("main.rs") || f.parent() != Some(src))
        .map(|file| {
            let relative = file.strip_prefix(src).unwrap();
            let mut path: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_str().unwrap().to_string())
                .collect();
            let last = path.pop().unwrap();
            let stem = last.strip_suffix(".rs").unwrap();
            if stem != "mod" && stem != "lib" {
                path.push(stem.to_string());
            }
            (file, path)
        })
        .collect()
}

/// The code of a file without comments and without its test module (a trailing
/// `#[cfg(test)]` module's `super::` means the file itself, not its parent).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    code
}

/// Every path starting at `crate::`, `super::` or `self::` in `code`, `use` lists expanded
/// (`super::{a, b::{C, D}}` gives `super::a`, `super::b::C`, `super::b::D`), as segments.
fn relative_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let boundary = i == 0
            || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':');
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|s| chars[i..].starts_with(&s.chars().collect::<Vec<_>>()));
        if boundary && starts {
            let mut end = i;
            path_tree(&chars, &mut end, Vec::new(), &mut found);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    found
}

/// Reads one path (or use tree) at `chars[*at..]` onto `prefix`.
fn path_tree(chars: &[char], at: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_space = |at: &mut usize| {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
    };
    loop {
        skip_space(at);
        if chars.get(*at) == Some(&'{') {
            *at += 1;
            loop {
                skip_space(at);
                if chars.get(*at) == Some(&'}') {
                    *at += 1;
                    return;
                }
                path_tree(chars, at, prefix.clone(), out);
                skip_space(at);
                match chars.get(*at) {
                    Some(',') => *at += 1,
                    Some('}') => {
                        *at += 1;
                        return;
                    }
                    _ => return,
                }
            }
        }
        let start = *at;
        while chars
            .get(*at)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '*')
        {
            *at += 1;
        }
        if *at > start {
            prefix.push(chars[start..*at].iter().collect());
        }
        if chars.get(*at..*at + 2) == Some(&[':', ':']) {
            *at += 2;
            continue;
        }
        if !prefix.is_empty() {
            out.push(prefix);
        }
        return;
    }
}

/// The module a path names from module `here`: its longest prefix that is a file's module.
fn target_module(here: &[String], path: &[String], modules: &[Vec<String>]) -> Option<Vec<String>> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("self") => {
            base = here.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            base = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut best = None;
    let mut candidate = base.clone();
    if modules.contains(&candidate) {
        best = Some(candidate.clone());
    }
    for segment in rest {
        candidate.push(segment.clone());
        if modules.contains(&candidate) {
            best = Some(candidate.clone());
        }
    }
    best
}

/// The file-to-file edges of one crate: file A names an item of file B's module. A module
/// naming its own descendants (declaring and re-exporting them) is structure, not an edge.
fn file_edges(src: &Path) -> (Vec<String>, Vec<(usize, usize)>) {
    let files = crate_modules(src);
    let modules: Vec<Vec<String>> = files.iter().map(|(_, m)| m.clone()).collect();
    let names = files
        .iter()
        .map(|(f, _)| f.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    let mut edges = Vec::new();
    for (from, (file, here)) in files.iter().enumerate() {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in relative_paths(&code) {
            let Some(target) = target_module(here, &path, &modules) else {
                continue;
            };
            if target.starts_with(here) {
                continue;
            }
            let to = modules.iter().position(|m| *m == target).unwrap();
            if !edges.contains(&(from, to)) {
                edges.push((from, to));
            }
        }
    }
    (names, edges)
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn loops(count: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [(usize, usize)],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let targets: Vec<usize> = s.edges.iter().filter(|e| e.0 == v).map(|e| e.1).collect();
        for w in targets {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..count {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Every loop between the files of the root crate and of each member crate, files sorted, and
/// the edges inside the loops ("a.rs -> b.rs"), to show where to cut.
fn file_loops() -> (Vec<Vec<String>>, Vec<String>) {
    let mut sources = vec![root().join("src")];
    for krate in WORKSPACE_CRATES.iter().filter(|c| **c != "tandem") {
        sources.push(root().join("crates").join(krate).join("src"));
    }
    let (mut all, mut inside) = (Vec::new(), Vec::new());
    for src in sources {
        let (names, edges) = file_edges(&src);
        for component in loops(names.len(), &edges) {
            let mut files: Vec<String> = component.iter().map(|&i| names[i].clone()).collect();
            files.sort();
            all.push(files);
            for (a, b) in edges
                .iter()
                .filter(|(a, b)| component.contains(a) && component.contains(b))
            {
                inside.push(format!("{} -> {}", names[*a], names[*b]));
            }
        }
    }
    all.sort();
    (all, inside)
}

#[test]
fn no_two_files_depend_on_each_other_beyond_the_known_loops() {
    let (found, inside) = file_loops();
    let known: Vec<Vec<String>> = KNOWN_LOOPS
        .iter()
        .map(|l| l.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<&Vec<String>> = found.iter().filter(|l| !known.contains(l)).collect();
    let gone: Vec<&Vec<String>> = known.iter().filter(|l| !found.contains(l)).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "files that depend on each other (docs/architecture.md, \"Dependency rules\"):\n\
         new loops: {new:#?}\nlisted in KNOWN_LOOPS but gone (remove them there): {gone:#?}\n\
         the edges inside the loops:\n{}",
        inside.join("\n")
    );
}

#[test]
fn the_loop_finder_reads_use_trees_and_finds_a_cycle() {
    let paths = relative_paths("use super::{a, b::{C, D}};\nlet x = crate::nn::X::new();");
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        shown,
        [
            "super::a",
            "super::b::C",
            "super::b::D",
            "crate::nn::X::new"
        ]
    );
    let modules = vec![
        vec![],
        vec!["algo".to_string()],
        vec!["algo".into(), "ppo".into()],
    ];
    let here = vec!["algo".to_string(), "a2c".to_string()];
    let path: Vec<String> = ["super", "ppo", "evaluate"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        target_module(&here, &path, &modules),
        Some(modules[2].clone())
    );
    assert_eq!(loops(3, &[(0, 1), (1, 2), (2, 0)]).len(), 1);
    assert!(loops(3, &[(0, 1), (1, 2)]).is_empty());
}

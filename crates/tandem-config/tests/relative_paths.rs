//! A gymnasium environment's relative `python` path is relative to the file that names it, as
//! include paths are, so an experiment runs from any directory: the resolved config holds
//! the absolute path. Absolute paths and bare command names (looked up on `PATH`) are kept,
//! and so is a path written in standard input or in `--set` (relative to the directory
//! tandem runs in).

use std::path::{Path, PathBuf};

use tandem_config::{Game, Source, canonical_kdl, parse_canonical, resolve};

/// An empty folder of this test's own, under its canonical name (the resolver resolves
/// links in the folder of a file).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-paths-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

fn gym_env(python: &str) -> String {
    format!(
        "    env \"gymnasium\" {{\n        id \"CartPole-v1\"\n        python \"{python}\"\n    }}\n"
    )
}

fn experiment(body: &str) -> String {
    format!("experiment \"x\" {{\n{body}}}\n")
}

fn python_of(source: &Source, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let resolved = resolve(source, &sets).unwrap();
    let Game::Gymnasium(gym) = &resolved.experiment.env.game else {
        panic!("not gymnasium")
    };
    gym.python.clone()
}

fn write(path: &Path, text: &str) -> Source {
    std::fs::write(path, text).unwrap();
    Source::Path(path.to_path_buf())
}

#[test]
fn a_relative_python_is_relative_to_the_experiment_file() {
    let dir = scratch("main");
    let file = write(
        &dir.join("gym.kdl"),
        &experiment(&gym_env("venv/bin/python")),
    );
    let expected = dir.join("venv/bin/python");
    assert_eq!(python_of(&file, &[]), expected.to_str().unwrap());
    // The canonical text holds the absolute path, and a worker reads it back unchanged.
    let text = canonical_kdl(&resolve(&file, &[]).unwrap().experiment);
    assert!(
        text.contains(&format!("python \"{}\"", expected.display())),
        "{text}"
    );
    let Game::Gymnasium(gym) = parse_canonical(&text).unwrap().env.game else {
        panic!("not gymnasium")
    };
    assert_eq!(gym.python, expected.to_str().unwrap());
}

#[test]
fn a_python_in_an_include_is_relative_to_the_include() {
    let dir = scratch("include");
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    write(
        &dir.join("parts/gym.kdl"),
        &gym_env("../.deps/venv/bin/python"),
    );
    let main = write(
        &dir.join("main.kdl"),
        &experiment("    include \"parts/gym.kdl\"\n"),
    );
    let expected = dir.join(".deps/venv/bin/python");
    assert_eq!(python_of(&main, &[]), expected.to_str().unwrap());
}

#[test]
fn absolute_paths_and_bare_names_are_kept() {
    let dir = scratch("kept");
    for python in ["/opt/py/bin/python3", "python3"] {
        let file = write(&dir.join("gym.kdl"), &experiment(&gym_env(python)));
        assert_eq!(python_of(&file, &[]), python);
    }
}

#[test]
fn stdin_and_set_paths_stay_relative_to_where_tandem_runs() {
    let text = experiment(&gym_env("venv/bin/python"));
    assert_eq!(python_of(&Source::Stdin(text), &[]), "venv/bin/python");
    let dir = scratch("set");
    let file = write(&dir.join("gym.kdl"), &experiment(&gym_env("python3")));
    assert_eq!(
        python_of(&file, &["env.python=\"other/bin/python\""]),
        "other/bin/python"
    );
}

/// Every shipped experiment that names an interpreter by a path names the repository's
/// venv, by a path from its own file (`../.deps/...` from `experiments/`), so it runs from
/// any directory.
#[test]
fn shipped_experiments_name_the_repositorys_venv_from_their_own_folder() {
    let repo = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
    let venv = repo.join(".deps/venv-gym/bin/python");
    let mut named = 0;
    for folder in ["experiments", "examples/gymnasium-package", "scripts/bench"] {
        for entry in std::fs::read_dir(repo.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "kdl") {
                continue;
            }
            let Ok(resolved) = resolve(&Source::Path(path.clone()), &[]) else {
                continue;
            };
            if let Game::Gymnasium(gym) = &resolved.experiment.env.game
                && gym.python.contains('/')
            {
                assert_eq!(gym.python, venv.to_str().unwrap(), "{}", path.display());
                named += 1;
            }
        }
    }
    assert!(named >= 10, "only {named} experiments name the venv");
}

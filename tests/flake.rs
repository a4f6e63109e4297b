//! Offline checks of `flake.nix`. No network (so no nixpkgs) is reachable where the suite runs,
//! so these parse the flake and its helper files, then evaluate the flake against the small stub
//! nixpkgs in `nix/stub-nixpkgs` (`--override-input`) and check that the outputs docs/nix.md
//! promises exist under those exact names and hold what they should: a misspelt attribute name
//! fails here, not on the first networked machine. Nothing is built.
//!
//! These tests only shell out to Nix (Debian's `nix-bin` works). Without it they print a note and
//! pass, unless `TANDEM_REQUIRE_PYTHON_TOOLS=1` (set by scripts/test), where a missing tool fails
//! (the rule is `tests/common/tools.rs`).

#[path = "common/tools.rs"]
mod tools;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const SYSTEM: &str = "x86_64-linux";
/// What the flake reads while it is evaluated; a copy of these is all an evaluation needs.
const FLAKE_INPUT_PATHS: &[&str] = &[
    "flake.nix",
    "flake.lock",
    "nix",
    "Cargo.toml",
    "Cargo.lock",
    "experiments",
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `nix` and `nix-instantiate` run; when they do not, fails if the suite requires them.
fn nix_is_available() -> bool {
    let runs = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if runs("nix") && runs("nix-instantiate") {
        return true;
    }
    tools::tool_missing(
        "`nix` / `nix-instantiate`",
        "the flake checks",
        "scripts/setup --test installs them (Debian package nix-bin)",
    );
    false
}

/// Deletes `path` even when it holds a Nix store, whose folders are read-only.
fn remove_tree(path: &Path) {
    if !path.exists() {
        return;
    }
    make_writable(path);
    fs::remove_dir_all(path).unwrap_or_else(|error| panic!("removing {}: {error}", path.display()));
}

fn make_writable(path: &Path) {
    let Ok(metadata) = fs::symlink_metadata(path) else {
        return;
    };
    if metadata.is_symlink() {
        return;
    }
    let mut permissions = metadata.permissions();
    // World-writable is harmless here: the tree is deleted right after.
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    let _ = fs::set_permissions(path, permissions);
    if metadata.is_dir()
        && let Ok(entries) = fs::read_dir(path)
    {
        for entry in entries.flatten() {
            make_writable(&entry.path());
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        fs::copy(from, to).unwrap_or_else(|error| {
            panic!("copying {} to {}: {error}", from.display(), to.display())
        });
    }
}

/// A private copy of the flake's inputs with its own Nix store, home and cache, so evaluation
/// needs no root, no daemon and no network, and never touches the repository or `~`.
struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new(test: &str) -> Sandbox {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flake-{test}"));
        remove_tree(&root);
        let flake = root.join("flake");
        fs::create_dir_all(&flake).unwrap();
        for relative in FLAKE_INPUT_PATHS {
            let from = repo_root().join(relative);
            if from.exists() {
                copy_tree(&from, &flake.join(relative));
            }
        }
        fs::create_dir_all(root.join("home")).unwrap();
        Sandbox { root }
    }

    fn flake(&self) -> PathBuf {
        self.root.join("flake")
    }

    /// Replaces `from` by `to` in a file of the copy (which must contain it).
    fn edit(&self, relative: &str, from: &str, to: &str) {
        let path = self.flake().join(relative);
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(from),
            "{relative} no longer contains {from:?}"
        );
        fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }

    fn nix(&self) -> Command {
        let mut command = Command::new("nix");
        command
            .env("HOME", self.root.join("home"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .args(["--extra-experimental-features", "nix-command flakes"])
            .arg("--store")
            .arg(self.root.join("store"))
            .arg("--offline");
        command
    }

    fn flake_ref(&self, attribute: &str) -> String {
        format!("path:{}#{attribute}", self.flake().display())
    }

    fn stub_override(&self) -> [String; 4] {
        [
            "--override-input".into(),
            "nixpkgs".into(),
            format!("path:{}", self.flake().join("nix/stub-nixpkgs").display()),
            "--no-write-lock-file".into(),
        ]
    }

    /// `nix eval --raw` of a flake attribute with the stub nixpkgs, optionally through `--apply`.
    fn eval(&self, attribute: &str, apply: Option<&str>) -> Result<String, String> {
        let mut command = self.nix();
        command.arg("eval").arg("--raw").args(self.stub_override());
        if let Some(function) = apply {
            command.args(["--apply", function]);
        }
        command.arg(self.flake_ref(attribute));
        run(&mut command)
    }

    fn attribute_names(&self, attribute: &str) -> Result<BTreeSet<String>, String> {
        let names = self.eval(
            attribute,
            Some("set: builtins.concatStringsSep \"\\n\" (builtins.attrNames set)"),
        )?;
        Ok(names.lines().map(str::to_owned).collect())
    }

    /// Everything wrong with the flake's outputs, as messages; empty when all is as promised.
    fn flake_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();

        // Types of every output, and every derivation instantiated (fixed-output hashes included).
        let mut check = self.nix();
        check
            .args(["flake", "check", "--no-build"])
            .args(self.stub_override())
            .arg(format!("path:{}", self.flake().display()));
        if let Err(error) = run(&mut check) {
            problems.push(format!("nix flake check --no-build failed:\n{error}"));
        }

        let mut expect_names = |attribute: &str, required: &[&str], exact: bool| match self
            .attribute_names(attribute)
        {
            Ok(names) => {
                let missing: Vec<&&str> =
                    required.iter().filter(|n| !names.contains(**n)).collect();
                if !missing.is_empty() {
                    problems.push(format!("{attribute} lacks {missing:?} (has {names:?})"));
                }
                if exact && names.len() != required.len() {
                    problems.push(format!(
                        "{attribute} is {names:?}, expected exactly {required:?}"
                    ));
                }
            }
            Err(error) => problems.push(format!("{attribute} does not evaluate: {error}")),
        };
        expect_names(
            &format!("packages.{SYSTEM}"),
            &["default", "libtorch"],
            false,
        );
        let mut apps: Vec<String> = experiment_files(&self.flake().join("experiments"))
            .iter()
            .map(|file| file.trim_end_matches(".kdl").to_string())
            .collect();
        apps.extend(["default".to_string(), "cartpole-seeds".to_string()]);
        let apps: Vec<&str> = apps.iter().map(String::as_str).collect();
        expect_names(&format!("apps.{SYSTEM}"), &apps, true);
        expect_names(&format!("devShells.{SYSTEM}"), &["default"], true);
        expect_names(
            &format!("checks.{SYSTEM}"),
            &["tests", "validate-experiments", "validate-sweeps"],
            true,
        );

        let package = format!("packages.{SYSTEM}.default");
        let libtorch = format!("packages.{SYSTEM}.libtorch");
        let app = format!("apps.{SYSTEM}.default");
        let shell = format!("devShells.{SYSTEM}.default");
        let tests = format!("checks.{SYSTEM}.tests");
        let validate = format!("checks.{SYSTEM}.validate-experiments");
        let (Ok(package_out), Ok(libtorch_out)) = (
            self.eval(&format!("{package}.outPath"), None),
            self.eval(&format!("{libtorch}.outPath"), None),
        ) else {
            problems.push(format!("{package} or {libtorch} has no outPath"));
            return problems;
        };

        let mut expect = |attribute: String, apply: Option<&str>, wanted: String| match self
            .eval(&attribute, apply)
        {
            Ok(value) if value == wanted => {}
            Ok(value) => problems.push(format!(
                "{attribute}{}: got {value:?}, expected {wanted:?}",
                apply.map(|f| format!(" (through {f})")).unwrap_or_default()
            )),
            Err(error) => problems.push(format!("{attribute} does not evaluate: {error}")),
        };
        // `nix run . -- experiments/breakout.kdl` runs `tandem experiments/breakout.kdl`.
        expect(format!("{app}.type"), None, "app".into());
        expect(
            format!("{app}.program"),
            None,
            format!("{package_out}/bin/tandem"),
        );

        // The package and the shell build against the pinned libtorch, ALE source and gloo.
        for built_with in [&package, &shell, &tests] {
            expect(format!("{built_with}.LIBTORCH"), None, libtorch_out.clone());
            expect(
                format!("{built_with}.TANDEM_ALE_SRC"),
                Some(
                    "path: if builtins.match \"/nix/store/[a-z0-9]+-ale-py-source-0.12.1\" path == null then \"not the ALE source: \" + path else \"ok\"",
                ),
                "ok".into(),
            );
            expect(
                format!("{built_with}.GLOO_INCLUDE_DIR"),
                Some(
                    "path: if builtins.match \"/nix/store/[a-z0-9]+-gloo-headers-.*/include\" path == null then \"not gloo's include/: \" + path else \"ok\"",
                ),
                "ok".into(),
            );
        }
        expect(
            format!("{shell}.packages"),
            Some("packages: builtins.concatStringsSep \" \" (map (p: p.pname or p.name) packages)"),
            "rustc cargo clippy rustfmt cmake zlib python3".into(),
        );

        // checks.tests runs the whole workspace's tests; checks.validate-experiments validates
        // every experiment in experiments/ (not the pieces under experiments/include/).
        expect(
            format!("{tests}.doCheck"),
            Some("on: if on then \"yes\" else \"no\""),
            "yes".into(),
        );
        expect(
            format!("{tests}.cargoTestFlags"),
            Some("builtins.concatStringsSep \" \""),
            "--workspace".into(),
        );
        // Every app runs its script; an experiment's script trains that file of the flake's
        // source with the package's tandem, passing its arguments on.
        for name in apps.iter().filter(|n| **n != "default") {
            let script = format!("legacyPackages.{SYSTEM}.scripts.{name}");
            // (When the script does not evaluate, the comparison with "" reports it.)
            let out = self
                .eval(&format!("{script}.outPath"), None)
                .unwrap_or_default();
            expect(format!("apps.{SYSTEM}.{name}.program"), None, out);
            if *name == "cartpole-seeds" {
                continue;
            }
            let pattern = format!(
                "exec {package_out}/bin/tandem train /nix/store/[a-z0-9]+-tandem-source/experiments/{name}[.]kdl \"[$]@\"\n"
            );
            expect(
                format!("{script}.text"),
                Some(
                    format!(
                        "text: if builtins.match \"{}\" text == null then text else \"ok\"",
                        pattern.replace('"', "\\\"").replace('\n', "\\n")
                    )
                    .as_str(),
                ),
                "ok".into(),
            );
        }
        expect(
            format!("{validate}.experiments"),
            Some("builtins.concatStringsSep \" \""),
            experiment_files(&self.flake().join("experiments")).join(" "),
        );
        problems
    }
}

/// Runs a command; its stdout on success, else its status and stderr.
fn run(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("could not run {command:?}: {error}"));
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{} ({command:?}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The experiment files directly in `dir`, sorted by name.
fn experiment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".kdl"))
        .collect();
    names.sort();
    names
}

fn nix_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            nix_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "nix") {
            found.push(path);
        }
    }
}

fn parses(path: &Path) -> Result<String, String> {
    run(Command::new("nix-instantiate").arg("--parse").arg(path))
}

#[test]
fn flake_and_its_nix_files_parse() {
    if !nix_is_available() {
        return;
    }
    let mut files = vec![repo_root().join("flake.nix")];
    nix_files(&repo_root().join("nix"), &mut files);
    assert!(
        files.len() >= 6,
        "expected flake.nix, nix/*.nix and the stub, found {files:?}"
    );
    for file in &files {
        if let Err(error) = parses(file) {
            panic!("{} does not parse: {error}", file.display());
        }
    }

    // The parser does reject broken Nix (so the loop above can fail).
    let sandbox = Sandbox::new("parse");
    let broken = sandbox.root.join("broken.nix");
    fs::write(&broken, "{ outputs = { self }: { packages = ; }; }").unwrap();
    assert!(
        parses(&broken).is_err(),
        "nix-instantiate --parse accepted broken Nix"
    );
    remove_tree(&sandbox.root);
}

#[test]
fn flake_outputs_exist_with_the_promised_names_against_stub_nixpkgs() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("outputs");
    let problems = sandbox.flake_problems();
    assert!(problems.is_empty(), "flake.nix:\n{}", problems.join("\n"));
    remove_tree(&sandbox.root);
}

#[test]
fn a_misspelt_output_name_is_reported() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("misspelt");
    sandbox.edit("flake.nix", "apps.${system} =", "app.${system} =");
    sandbox.edit(
        "flake.nix",
        "validate-experiments =",
        "validate-experiment =",
    );
    let problems = sandbox.flake_problems().join("\n");
    assert!(
        problems.contains(&format!("apps.{SYSTEM} does not evaluate")),
        "the missing apps output went unnoticed:\n{problems}"
    );
    assert!(
        problems.contains(&format!("checks.{SYSTEM} lacks [\"validate-experiments\"]")),
        "the misspelt check went unnoticed:\n{problems}"
    );
    remove_tree(&sandbox.root);
}

#[test]
fn an_experiment_the_flake_check_skips_is_reported() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("skipped-experiment");
    sandbox.edit(
        "flake.nix",
        "(builtins.readDir ./experiments).${name} == \"regular\"",
        "name != \"cartpole.kdl\" && (builtins.readDir ./experiments).${name} == \"regular\"",
    );
    let problems = sandbox.flake_problems().join("\n");
    assert!(
        problems.contains("validate-experiments.experiments"),
        "an experiment left out of checks.validate-experiments went unnoticed:\n{problems}"
    );
    remove_tree(&sandbox.root);
}

#[test]
fn flake_refuses_a_nixpkgs_with_an_old_rustc() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("old-rustc");
    sandbox.edit(
        "nix/stub-nixpkgs/packages.nix",
        "rustc = tool \"rustc\" \"1.95.0\"",
        "rustc = tool \"rustc\" \"1.90.0\"",
    );
    let error = sandbox
        .eval(&format!("packages.{SYSTEM}.default.name"), None)
        .expect_err("a nixpkgs with rustc 1.90 was accepted");
    assert!(
        error.contains("tandem needs rustc >= 1.95, but this nixpkgs has rustc 1.90.0"),
        "unexpected error: {error}"
    );
    remove_tree(&sandbox.root);
}

/// (file name, sha256) pairs the setup scripts download, read from the scripts themselves.
fn setup_script_pins() -> BTreeSet<(String, String)> {
    let mut pins = BTreeSet::new();
    let setup = fs::read_to_string(repo_root().join("scripts/setup")).unwrap();
    // The wheels=( "requirement file sha256" ... ) entries.
    for line in setup.lines().map(str::trim) {
        let fields: Vec<&str> = line.trim_matches('"').split_whitespace().collect();
        if line.starts_with('"') && fields.len() == 3 && fields[1].ends_with(".whl") {
            pins.insert((fields[1].to_owned(), fields[2].to_owned()));
        }
    }
    let setup_ale = fs::read_to_string(repo_root().join("scripts/setup-ale")).unwrap();
    let value = |name: &str| {
        setup_ale
            .lines()
            .find_map(|line| line.strip_prefix(&format!("readonly {name}=")))
            .unwrap_or_else(|| panic!("scripts/setup-ale no longer sets {name}"))
            .trim_matches('"')
            .to_owned()
    };
    let sdist = value("SDIST_NAME").replace("${ALE_VERSION}", &value("ALE_VERSION"));
    pins.insert((sdist, value("SDIST_SHA256")));
    pins
}

#[test]
fn flake_pins_the_files_the_setup_scripts_pin() {
    if !nix_is_available() {
        return;
    }
    let expected = setup_script_pins();
    assert_eq!(
        expected.len(),
        4,
        "scripts/setup and scripts/setup-ale changed shape: {expected:?}"
    );

    let sandbox = Sandbox::new("pins");
    let sources = repo_root().join("nix/sources.nix");
    let listing = run(sandbox
        .nix()
        .args(["eval", "--raw", "--impure", "--expr"])
        .arg(format!(
            "builtins.concatStringsSep \"\\n\" (map (s: \"${{s.file}} ${{s.sha256}} ${{s.url}}\") \
         (builtins.attrValues (import {})))",
            sources.display()
        )))
    .unwrap_or_else(|error| panic!("nix/sources.nix does not evaluate: {error}"));
    let mut pinned = BTreeSet::new();
    for line in listing.lines() {
        let [file, sha256, url] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("unexpected line {line:?}");
        };
        assert!(
            sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()),
            "{file}: {sha256:?} is not a hex sha256"
        );
        assert!(
            url.ends_with(&format!("/{file}")),
            "{file}: its URL {url} names another file"
        );
        pinned.insert((file.to_owned(), sha256.to_owned()));
    }
    let missing: Vec<_> = expected.difference(&pinned).collect();
    assert!(
        missing.is_empty(),
        "nix/sources.nix does not pin what scripts/setup(-ale) download: {missing:?}\n\
         nix/sources.nix has: {pinned:?}"
    );
    remove_tree(&sandbox.root);
}

impl Sandbox {
    /// Where a `/nix/store/...` path of this sandbox's store is on disk.
    fn on_disk(&self, store_path: &str) -> PathBuf {
        self.root
            .join("store")
            .join(store_path.trim_start_matches('/'))
    }

    /// `text` with every store path this sandbox's store holds made a real path, and the
    /// package's (unbuilt) tandem replaced by the one cargo built.
    fn runnable(&self, text: &str) -> String {
        let package = self
            .eval(&format!("packages.{SYSTEM}.default.outPath"), None)
            .unwrap();
        text.replace(
            &format!("{package}/bin/tandem"),
            env!("CARGO_BIN_EXE_tandem"),
        )
        .replace(
            "/nix/store/",
            &format!("{}/nix/store/", self.root.join("store").display()),
        )
    }

    /// The sweep variants `checks.validate-sweeps` validates, copied out of the store with their
    /// store paths made runnable; also the check's own command.
    fn sweep_variants(&self) -> (Vec<PathBuf>, String) {
        let check = format!("checks.{SYSTEM}.validate-sweeps");
        let listed = self
            .eval(
                &format!("{check}.variants"),
                Some("builtins.concatStringsSep \" \""),
            )
            .unwrap_or_else(|error| panic!("{check}.variants does not evaluate: {error}"));
        let copies = self.root.join("variants");
        fs::create_dir_all(&copies).unwrap();
        let files = listed
            .split_whitespace()
            .map(|path| {
                let text = fs::read_to_string(self.on_disk(path))
                    .unwrap_or_else(|error| panic!("{path} is not in the store: {error}"));
                let copy = copies.join(Path::new(path).file_name().unwrap());
                fs::write(&copy, self.runnable(&text)).unwrap();
                copy
            })
            .collect();
        let command = self.eval(&format!("{check}.buildCommand"), None).unwrap();
        (files, command)
    }
}

/// Runs a check's command as its builder would (tandem on PATH, `$out` to create), with the
/// variants in `$variants`.
fn run_check(command: &str, variants: &[PathBuf], out: &Path) -> Result<String, String> {
    let tandem_dir = Path::new(env!("CARGO_BIN_EXE_tandem")).parent().unwrap();
    let path = format!(
        "{}:{}",
        tandem_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let list: Vec<String> = variants.iter().map(|p| p.display().to_string()).collect();
    run(Command::new("bash")
        .args(["-euc", command])
        .env("PATH", path)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env("variants", list.join(" "))
        .env("out", out))
}

#[test]
fn the_library_writes_the_sweep_variants_and_their_check_validates_them() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("sweep-variants");
    let (files, command) = sandbox.sweep_variants();
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .split_once('-')
                .unwrap()
                .1
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "cartpole-short-seed-1.json",
            "cartpole-short-seed-2.json",
            "cartpole-short-seed-3.json"
        ]
    );
    // The files hold what nix/sweeps.nix says, as builtins.toJSON writes it (keys sorted,
    // includes as store paths of the included files).
    let first = fs::read_to_string(&files[0]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(json["name"], "cartpole-short-seed-1");
    assert_eq!(json["seed"], 1);
    assert_eq!(json["devices"], serde_json::json!(["cpu"]));
    assert_eq!(json["train"]["total-steps"], 50000);
    let includes: Vec<&str> = json["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(includes[0].ends_with("-ppo-cartpole.kdl"), "{includes:?}");
    assert!(includes[1].ends_with("-cpu-logging.kdl"), "{includes:?}");
    assert_eq!(
        fs::read_to_string(includes[0]).unwrap(),
        fs::read_to_string(repo_root().join("experiments/include/ppo-cartpole.kdl")).unwrap()
    );
    // The variant is cartpole.kdl with 50k steps, a new seed and name: same hash as that.
    let kdl = repo_root().join("experiments/cartpole.kdl");
    let hash = |file: &Path, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (out, err, code) =
            tandem_config::cli::resolve(&file.display().to_string(), &sets, false, true, false);
        assert_eq!(code, 0, "{err}");
        out
    };
    assert_eq!(
        hash(&files[1], &[]),
        hash(
            &kdl,
            &[
                "name=\"cartpole-short-seed-2\"",
                "seed=2",
                "train.total-steps=50000"
            ]
        )
    );

    // The check's command passes on these, and fails once a variant does not validate.
    let out = sandbox.root.join("check-out");
    run_check(&command, &files, &out).unwrap_or_else(|error| panic!("{error}"));
    assert!(out.exists(), "the check did not create $out");
    remove_tree(&sandbox.root);

    let broken = Sandbox::new("sweep-variants-broken");
    broken.edit(
        "nix/sweeps.nix",
        "train.total-steps = 50000;",
        "train.total-steps = -50000;",
    );
    let (files, command) = broken.sweep_variants();
    let error = run_check(&command, &files, &broken.root.join("check-out"))
        .expect_err("a sweep variant that does not validate passed the check");
    assert!(error.contains("train.total-steps"), "{error}");
    assert!(error.contains("cartpole-short-seed-1.json:1:"), "{error}");
    remove_tree(&broken.root);
}

#[test]
fn the_sweep_app_runs_three_seeds_and_prints_their_table() {
    if !nix_is_available() {
        return;
    }
    let sandbox = Sandbox::new("sweep-app");
    let script = sandbox
        .eval(
            &format!("legacyPackages.{SYSTEM}.scripts.cartpole-seeds.text"),
            None,
        )
        .unwrap();
    // The variant files the script names, with their includes made runnable.
    let (files, _) = sandbox.sweep_variants();
    let mut script = script;
    for copy in &files {
        let name = copy.file_name().unwrap().to_str().unwrap();
        let store_path = format!("/nix/store/{name}");
        assert!(
            script.contains(&store_path),
            "the app does not run {name}:\n{script}"
        );
        script = script.replace(&store_path, &copy.display().to_string());
    }
    let script = sandbox.runnable(&script);
    let runs = sandbox.root.join("runs");
    let output = run(Command::new("bash")
        .args([
            "-euc",
            &script,
            "cartpole-seeds",
            "--max-steps",
            "2048",
            "--quiet",
            "--dir",
        ])
        .arg(&runs)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR"))
    .unwrap_or_else(|error| panic!("the sweep app failed: {error}"));
    assert!(
        output.starts_with("sweep cartpole-seeds: 3 variants"),
        "{output}"
    );
    for seed in 1..=3 {
        let name = format!("cartpole-short-seed-{seed}");
        let summary: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(runs.join(&name).join("summary.json")).unwrap(),
        )
        .unwrap();
        let final_score = summary["final_score"].as_f64().unwrap();
        let row = output
            .lines()
            .find(|l| l.starts_with(&name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{output}"));
        assert!(
            row.ends_with(&format!("{final_score:.3}")) && row.contains(" 2048 "),
            "{row} against {summary}"
        );
    }
    assert!(output.contains("mean over seeds, n=3: "), "{output}");
    remove_tree(&sandbox.root);
}

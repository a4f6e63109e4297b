//! The gymnasium bridge through the `tandem` binary: PPO learns gymnasium's own CartPole-v1
//! (experiments/gymnasium-cartpole.kdl) on 1 and 2 ranks; a user's environment that raises or
//! stops answering stops the run with the traceback, the rank and the environment on the
//! console and no process left behind; bad input (interpreter, gymnasium, id, space) is a clear
//! error; a resumed run starts fresh episodes and continues from the checkpoint's step;
//! `tandem play --gif` draws a gymnasium environment through the bridge, or names the one that
//! cannot draw. The shipped HalfCheetah PPO experiment trains box actions through the bridge.
//! An environment's `info-keys` values reach TensorBoard, gathered from both ranks, and a key
//! its episodes end without stops the run.
//! The shipped gymnasium presets reach the scores their comments claim (HalfCheetah SAC and
//! TD3 by hand, with `--ignored`: minutes each).
//! crates/tandem-env/tests/gym_bridge.rs checks the bridge itself; these check what reaches a
//! user of the binary. Needs the venv of scripts/gym-venv-setup.sh; without it the tests skip,
//! unless TANDEM_REQUIRE_PYTHON_TOOLS=1 (tests/common/tools.rs).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::summary_number;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

/// Every process a run starts inherits this variable (with a value unique to the run), so the
/// run's leftovers can be found in /proc whatever their parent became.
const MARK: &str = "TANDEM_GYM_TRAIN_TEST_MARK";

/// The fixture environments' module, importable with crates/tandem-env on the path.
const FIXTURES: &str = "tests.gym_fixtures.test_envs";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's interpreter, or `None` (after the tools rule) when it is missing.
fn venv_python() -> Option<PathBuf> {
    let python = root().join(".deps/venv-gym/bin/python");
    if python.exists() {
        Some(python)
    } else {
        common::tools::tool_missing(
            &python.display().to_string(),
            "the gymnasium training test",
            "run scripts/gym-venv-setup.sh (scripts/setup --test does)",
        );
        None
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-gym-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mark(name: &str) -> String {
    format!("{}-{name}", std::process::id())
}

struct Ran {
    success: bool,
    code: Option<i32>,
    output: String,
    took: Duration,
}

/// `tandem train <args>` with the fixtures importable and the run's mark set.
fn tandem_command(name: &str, args: &[&str]) -> Command {
    tandem_subcommand(name, "train", args)
}

/// `tandem <subcommand> <args>` as [`tandem_command`] sets it up.
fn tandem_subcommand(name: &str, subcommand: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(TANDEM);
    cmd.env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env("PYTHONPATH", root().join("crates/tandem-env"))
        .env(MARK, mark(name))
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR")
        .arg(subcommand)
        .args(args);
    cmd
}

/// Runs [`tandem_command`]; a run still going after `limit` is killed and fails the test.
fn tandem(name: &str, args: &[&str], limit: Duration) -> Ran {
    run_to_end(tandem_command(name, args), limit)
}

/// Runs `cmd`; a process still going after `limit` is killed and fails the test.
fn run_to_end(mut cmd: Command, limit: Duration) -> Ran {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let done = common::finish(cmd.spawn().unwrap(), limit);
    Ran {
        success: done.success,
        code: done.status.code(),
        output: done.output,
        took: start.elapsed(),
    }
}

/// Writes `text` as the experiment file of run `name` and trains it into `<dir>/run`.
fn train_text(name: &str, text: &str, sets: &[String], limit: Duration) -> (PathBuf, Ran) {
    let dir = fresh_dir(name);
    let file = dir.join("experiment.kdl");
    std::fs::write(&file, text).unwrap();
    let run_dir = dir.join("run");
    let mut args = vec![
        file.to_str().unwrap().to_string(),
        "--run-dir".into(),
        run_dir.to_str().unwrap().into(),
    ];
    for s in sets {
        args.extend(["--set".to_string(), s.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (run_dir, tandem(name, &args, limit))
}

/// Pids of live processes carrying run `name`'s mark (zombies have no environment to read).
fn marked(name: &str) -> Vec<u32> {
    let needle = format!("{MARK}={}\0", mark(name));
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// Fails unless every process of run `name` (ranks and Python workers) is gone within a few
/// seconds: a worker whose rank was killed sees its stdin close and exits on its own.
fn assert_nothing_left(name: &str, output: &str) {
    let start = Instant::now();
    loop {
        let left = marked(name);
        if left.is_empty() {
            return;
        }
        let cmdlines: Vec<String> = left
            .iter()
            .map(|p| {
                let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                format!("{p}: {}", c.chars().take(80).collect::<String>())
            })
            .collect();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "run {name} left processes behind: {cmdlines:?}\n{output}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn python_set(python: &Path) -> String {
    format!("env.python=\"{}\"", python.display())
}

/// Trains `experiments/<file>` as run `name` on `python`, with one more `--set`.
fn train_shipped(
    name: &str,
    file: &str,
    python: &Path,
    set: &str,
    limit: Duration,
) -> (PathBuf, Ran) {
    let run_dir = fresh_dir(name).join("run");
    let experiment = root().join("experiments").join(file);
    let ran = tandem(
        name,
        &[
            experiment.to_str().unwrap(),
            "--run-dir",
            run_dir.to_str().unwrap(),
            "--set",
            &python_set(python),
            "--set",
            set,
        ],
        limit,
    );
    (run_dir, ran)
}

/// experiments/gymnasium-cartpole.kdl's claim, run as shipped (its 200k steps, 8 s here on one
/// rank beside another run): seed 1 scores 475 or more over its last 20 episodes on one rank and
/// on two (500 measured on each).
fn learns_cartpole(name: &str, devices: &str) {
    let Some(python) = venv_python() else { return };
    let (run_dir, ran) = train_shipped(
        name,
        "gymnasium-cartpole.kdl",
        &python,
        devices,
        Duration::from_secs(400),
    );
    assert!(ran.success, "{}", ran.output);
    let last20 = summary_number(&run_dir, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 475.0,
        "PPO on gymnasium CartPole-v1 ({devices}): mean score of the last 20 episodes {last20} < 475"
    );
    assert!(summary_number(&run_dir, "global_step").unwrap() <= 200_192.0);
    // The workers ran on the interpreter the run was told to use.
    let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
    let told = format!("`CartPole-v1`, 2 worker(s) running {}", python.display());
    assert!(log.contains(&told), "{log}");
    eprintln!("{name}: {:.1} s", ran.took.as_secs_f64());
    assert_nothing_left(name, &ran.output);
}

#[test]
fn ppo_learns_gymnasium_cartpole_on_one_rank() {
    learns_cartpole("learn-1", "devices=cpu");
}

#[test]
fn ppo_learns_gymnasium_cartpole_on_two_ranks() {
    learns_cartpole("learn-2", "devices=cpu cpu");
}

/// A small PPO run of a gymnasium environment; `{env}` is the body of its `env` block.
fn experiment(devices: &str, env: &str) -> String {
    format!(
        r#"experiment "gym-test" {{
    devices {devices}
    threads 1
    algorithm "ppo" {{ epochs 1; minibatches 1 }}
    env "gymnasium" {{
{env}
    }}
    network "mlp" {{ hidden 8 }}
    train {{ total-steps 4096; rollout 8 }}
    log {{ console "plain"; interval 1 }}
}}
"#
    )
}

/// The env block of the Counter fixture on the venv's interpreter with `args` for
/// gymnasium.make and `extra` lines.
fn counter(python: &Path, args: &str, extra: &str) -> String {
    format!(
        "        id \"TandemTest/Counter-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        make-args {{ {args} }}\n        workers 2\n        envs 4\n{extra}",
        python.display()
    )
}

/// The launcher's failure reports, in order ("tandem: rank N failed ...", first line).
fn failure_reports(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|l| l.starts_with("tandem: rank ") && l.contains(" failed "))
        .collect()
}

#[test]
fn an_exception_in_a_users_step_stops_one_rank_with_its_traceback() {
    let Some(python) = venv_python() else { return };
    let name = "raise-1";
    let text = experiment("\"cpu\"", &counter(&python, "length 50; raise_at 20", ""));
    let (_, ran) = train_text(name, &text, &[], Duration::from_secs(60));
    assert!(!ran.success, "{}", ran.output);
    let reports = failure_reports(&ran.output);
    assert_eq!(reports.len(), 1, "{}", ran.output);
    assert!(
        reports[0].starts_with("tandem: rank 0 failed (exited with code 1)")
            && reports[0].contains(
                "gymnasium `TandemTest/Counter-v0`: environment 0 raised an exception in step"
            ),
        "{}",
        ran.output
    );
    let after = &ran.output[ran.output.find(reports[0]).unwrap()..];
    assert!(
        after.contains("Traceback (most recent call last)")
            && after.contains("test_envs.py")
            && after.contains("ValueError: boom from the user's step"),
        "the traceback does not follow the report:\n{}",
        ran.output
    );
    assert_nothing_left(name, &ran.output);
}

/// Rank 1's second environment raises (the fixture raises in the environment first reset with
/// `raise_seed`); rank 0 is stopped by the launcher, which names rank 1's failure.
#[test]
fn an_exception_on_one_of_two_ranks_stops_both_and_names_the_first() {
    let Some(python) = venv_python() else { return };
    let name = "raise-2";
    // Environment 1 of rank 1 is the run's environment 3 (2 per rank). make-args integers are
    // i64: pick the first experiment seed whose environment 3 has a seed that fits.
    let (seed, env_seed) = (1u64..)
        .map(|s| (s, tandem_env::env_seed(s, 0, 3)))
        .find(|(_, e)| *e <= i64::MAX as u64)
        .unwrap();
    let text = experiment(
        "\"cpu\" \"cpu\"",
        &counter(
            &python,
            &format!("length 50; raise_at 20; raise_seed {env_seed}"),
            "",
        ),
    );
    let (run_dir, ran) = train_text(
        name,
        &text,
        &[format!("seed={seed}")],
        Duration::from_secs(60),
    );
    assert!(!ran.success, "{}", ran.output);
    let reports = failure_reports(&ran.output);
    assert!(
        reports
            .first()
            .is_some_and(|r| r.starts_with("tandem: rank 1 failed")
                && r.contains("environment 1 raised an exception in step")),
        "the first report is not rank 1's environment 1:\n{}",
        ran.output
    );
    assert!(
        !reports
            .iter()
            .any(|r| r.starts_with("tandem: rank 0 failed")),
        "rank 0 failed by itself, so the test shows nothing about stopping it:\n{}",
        ran.output
    );
    assert!(ran.output.contains("tandem: stopping the other ranks"));
    let rank1 = std::fs::read_to_string(run_dir.join("logs/rank-1.error")).unwrap();
    assert!(
        rank1.contains("ValueError: boom from the user's step"),
        "{rank1}"
    );
    // Rank 0 is gone too (its process carries the mark) and so are all four workers.
    assert_nothing_left(name, &ran.output);
}

#[test]
fn a_worker_that_stops_answering_fails_the_run_at_the_step_timeout() {
    let Some(python) = venv_python() else { return };
    let name = "timeout";
    let text = experiment(
        "\"cpu\"",
        &counter(&python, "sleep 600.0", "        step-timeout 2.0\n"),
    );
    let (_, ran) = train_text(name, &text, &[], Duration::from_secs(60));
    assert!(!ran.success, "{}", ran.output);
    let reports = failure_reports(&ran.output);
    assert!(
        reports
            .first()
            .is_some_and(|r| r.starts_with("tandem: rank 0 failed")
                && r.contains("did not answer within 2 s while stepping and was killed")),
        "{}",
        ran.output
    );
    // Start-up (two interpreters importing gymnasium) plus the 2 s deadline, with slack for a
    // loaded machine: far less than the 600 s the worker would sleep.
    assert!(
        ran.took < Duration::from_secs(2 + 30),
        "took {:?}",
        ran.took
    );
    assert_nothing_left(name, &ran.output);
}

/// A venv made from `python` without any packages, so gymnasium is not importable.
fn bare_venv(python: &Path) -> PathBuf {
    let bare = fresh_dir("bare-venv").join("venv");
    let made = Command::new(python)
        .args(["-m", "venv", "--without-pip", "--clear"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(made.success());
    bare.join("bin/python")
}

/// Each mistake of a gymnasium env block fails `tandem train` with its cause on the console,
/// quickly and without leftovers. The bridge's own tests check each message in detail; this
/// checks that it reaches the user of the binary.
#[test]
fn bad_gymnasium_input_is_a_clear_error_of_the_binary() {
    let Some(python) = venv_python() else { return };
    let bare = bare_venv(&python);
    let block = |id: &str, python: &Path, import: &str| {
        format!(
            "        id \"{id}\"\n        python \"{}\"\n        import {import}\n        envs 2\n",
            python.display()
        )
    };
    let fixtures = format!("\"{FIXTURES}\"");
    // An interpreter that is not there is the user's mistake, found before any rank starts:
    // exit 2, the setting named, nothing written.
    let (run_dir, ran) = train_text(
        "no-interpreter",
        &experiment(
            "\"cpu\"",
            &block("CartPole-v1", Path::new("/nonexistent/python"), ""),
        ),
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(ran.code, Some(2), "{}", ran.output);
    assert!(
        ran.output
            .contains("`/nonexistent/python` is not an interpreter on this machine"),
        "{}",
        ran.output
    );
    assert!(!run_dir.exists(), "{}", ran.output);
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "no-gymnasium",
            block("CartPole-v1", &bare, ""),
            vec![
                "gymnasium is not importable by",
                "No module named 'gymnasium'",
            ],
        ),
        (
            "unknown-id",
            block("TandemTest/NoSuchEnv-v0", &python, &fixtures),
            vec!["gymnasium `TandemTest/NoSuchEnv-v0`: could not make environment 0"],
        ),
        (
            "failing-import",
            block("CartPole-v1", &python, "\"tandem_no_such_module\""),
            vec![
                "importing module `tandem_no_such_module` failed",
                "ModuleNotFoundError",
            ],
        ),
        (
            "two-images",
            block("TandemTest/TwoPictures-v0", &python, &fixtures),
            vec![
                "TandemTest/TwoPictures-v0",
                "it holds 2 images (`frame`, `glance`)",
            ],
        ),
    ];
    let results = common::on_two_threads(&cases, |(name, env, _)| {
        let (_, ran) = train_text(
            name,
            &experiment("\"cpu\"", env),
            &[],
            Duration::from_secs(60),
        );
        ran
    });
    for ((name, _, words), ran) in cases.iter().zip(&results) {
        assert!(!ran.success, "{name} trained:\n{}", ran.output);
        let report = failure_reports(&ran.output)
            .first()
            .map(|r| r.to_string())
            .unwrap_or_else(|| panic!("{name}: no failure report:\n{}", ran.output));
        let from_report = &ran.output[ran.output.find(&report).unwrap()..];
        for word in words {
            assert!(
                from_report.contains(word),
                "{name}: the report lacks `{word}`:\n{}",
                ran.output
            );
        }
        assert!(
            !ran.output.contains("panicked"),
            "{name} panicked:\n{}",
            ran.output
        );
        assert_nothing_left(name, &ran.output);
    }
    eprintln!(
        "bad input runs: {:?}",
        results.iter().map(|r| r.took).collect::<Vec<_>>()
    );
}

/// Checkpoint files of a run directory.
fn checkpoint_files(run_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run_dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_resumed_gymnasium_run_starts_fresh_episodes_from_the_checkpoints_step() {
    let Some(python) = venv_python() else { return };
    let name = "resume";
    let env = format!(
        "        id \"CartPole-v1\"\n        python \"{}\"\n        workers 2\n        envs 4\n",
        python.display()
    );
    let text = experiment("\"cpu\" \"cpu\"", &env).replace(
        "    log {",
        "    checkpoint { every 4; keep 100 }\n    log {",
    );
    // 4 envs x rollout 8 = 32 steps an update: checkpoints at updates 4, 8 and 12 (step 384).
    let (run_dir, first) = train_text(
        name,
        &text,
        &["train.max-steps=384".into()],
        Duration::from_secs(60),
    );
    assert!(first.success, "{}", first.output);
    let saved = checkpoint_files(&run_dir);
    assert_eq!(
        saved,
        [
            "ckpt-000000004.pt",
            "ckpt-000000008.pt",
            "ckpt-000000012.pt"
        ],
        "gymnasium environments must not be snapshotted (no ckpt-*.rank-N.envs)"
    );
    let resumed = tandem(
        name,
        &["--resume", run_dir.to_str().unwrap(), "--max-steps", "640"],
        Duration::from_secs(60),
    );
    assert!(resumed.success, "{}", resumed.output);
    assert!(
        resumed.output.contains(&format!(
            "resumed from {} at update 12, step 384 (saved on 2 rank(s))",
            run_dir.join("checkpoints/ckpt-000000012.pt").display()
        )),
        "{}",
        resumed.output
    );
    assert!(
        resumed
            .output
            .contains("CartPole-v1 cannot be snapshotted (its state lives in Python processes): environments start fresh episodes"),
        "{}",
        resumed.output
    );
    assert_eq!(summary_number(&run_dir, "global_step").unwrap(), 640.0);
    for rank in 0..2 {
        let log = std::fs::read_to_string(run_dir.join(format!("logs/rank-{rank}.log"))).unwrap();
        // The resumed run's part of the log: its environments were started once, not again
        // after the checkpoint was read.
        let resumed_part = &log[log.rfind("resumed from").unwrap_or(0)..];
        let starts = log.matches(&format!("rank {rank} environments: ")).count();
        assert_eq!(
            starts, 2,
            "rank {rank}: workers started {starts} times over two runs:\n{log}"
        );
        if rank == 0 {
            assert!(
                resumed_part.contains("training finished: 640 steps"),
                "rank 0:\n{log}"
            );
        }
    }
    assert_eq!(
        checkpoint_files(&run_dir).last().unwrap(),
        "ckpt-000000020.pt",
        "{:?}",
        checkpoint_files(&run_dir)
    );
    assert!(
        checkpoint_files(&run_dir)
            .iter()
            .all(|n| n.ends_with(".pt")),
        "{:?}",
        checkpoint_files(&run_dir)
    );
    assert_nothing_left(name, &resumed.output);
}

/// The leftover check finds a marked process, so its silence above means something.
#[test]
fn the_leftover_check_sees_a_marked_process() {
    let mut child = Command::new("sleep")
        .arg("30")
        .env(MARK, mark("probe"))
        .spawn()
        .unwrap();
    // Looked for until it shows: once, under a loaded CI run, the first look right after the
    // spawn did not find the mark (a transient /proc read, cause not pinned down).
    let mut seen = Vec::new();
    common::wait_for("the probe's mark in /proc", Duration::from_secs(10), || {
        seen = marked("probe");
        !seen.is_empty()
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(seen, [child.id()]);
    assert!(marked("probe").is_empty());
}

/// A rank killed from outside while its worker is inside a long step: the worker cannot see
/// its stdin close until the step returns, so it must die with its parent instead.
#[test]
fn workers_die_with_a_rank_killed_from_outside_mid_step() {
    let Some(python) = venv_python() else { return };
    let name = "killed-rank";
    let dir = fresh_dir(name);
    let file = dir.join("experiment.kdl");
    let text = experiment(
        "\"cpu\"",
        &counter(&python, "sleep 600.0", "        step-timeout 900.0\n"),
    );
    std::fs::write(&file, text).unwrap();
    let run_dir = dir.join("run");
    let args = [
        "--quiet",
        "--run-dir",
        run_dir.to_str().unwrap(),
        file.to_str().unwrap(),
    ];
    let mut child = tandem_command(name, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let is_python = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("python"))
    };
    let start = Instant::now();
    while marked(name).iter().filter(|p| is_python(p)).count() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the workers never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the first step reach the sleeping environments.
    std::thread::sleep(Duration::from_secs(2));
    for pid in marked(name).into_iter().filter(|p| !is_python(p)) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    let _ = child.wait();
    assert_nothing_left(name, "(a worker outlived its killed rank)");
}

/// Trains `examples/gymnasium-package/<file>` as run `name` on `python`, quietly, with more
/// `--set`s: the example package as a user runs it.
fn train_example(
    name: &str,
    file: &str,
    python: &Path,
    sets: &[String],
    limit: Duration,
) -> (PathBuf, Ran) {
    let run_dir = fresh_dir(name).join("run");
    let experiment = root().join("examples/gymnasium-package").join(file);
    let mut args = vec![
        experiment.to_str().unwrap().to_string(),
        "--quiet".into(),
        "--run-dir".into(),
        run_dir.to_str().unwrap().to_string(),
        "--set".into(),
        python_set(python),
    ];
    for set in sets {
        args.extend(["--set".to_string(), set.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = tandem(name, &args, limit);
    (run_dir, ran)
}

/// The worked example of docs/environments.md, run as a user would: the example package
/// (examples/gymnasium-package, installed editable into the venv by scripts/gym-venv-setup.sh)
/// registers its own id, and the run imports it first and learns it.
#[test]
fn the_example_package_trains_through_its_own_registered_id() {
    let Some(python) = venv_python() else { return };
    let (run_dir, ran) = train_example(
        "example-package",
        "corridor.kdl",
        &python,
        &[],
        Duration::from_secs(120),
    );
    assert!(ran.success, "{}", ran.output);
    // Going right from a start in the left half pays about 0.955 on average; a policy that
    // has not learnt to go right walks about and pays less than 0.5.
    let last20 = summary_number(&run_dir, "last_20_return_mean").unwrap();
    assert!(last20 >= 0.9, "last-20 mean return {last20}");
    let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("`tandem_corridor/Corridor-v0`, 2 worker(s) running ")
            && log.contains("venv-gym/bin/python"),
        "the rank log does not name the interpreter:\n{log}"
    );
}

/// The example package's combination lock (examples/gymnasium-package/dials.kdl): a Dict
/// observation of MultiDiscrete entries and MultiDiscrete actions, learnt by PPO with one
/// categorical per dial. Its comment's claim for seed 2 (one that holds on every CPU kind
/// measured; seed 1 does not on an AMD EPYC with AVX2 only): 0.85 or more over the last 20
/// episodes within 200k steps (turning at random scores about -0.6).
#[test]
fn the_dials_example_learns_multi_discrete_actions_from_a_dict_observation() {
    let Some(python) = venv_python() else { return };
    let name = "example-dials";
    let seed = ["seed=2".to_string()];
    let (run_dir, ran) = train_example(name, "dials.kdl", &python, &seed, Duration::from_secs(300));
    assert!(ran.success, "{}", ran.output);
    let last20 = summary_number(&run_dir, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 0.85,
        "dials, seed 2: last-20 score {last20} < 0.85 at 200k steps"
    );
    let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("as 24 floats: `shown` MultiDiscrete([4 4 4]) one-hot per component at 0..12"),
        "the rank log does not say how the observation is encoded:\n{log}"
    );
    assert_nothing_left(name, &ran.output);
}

/// The example package's lamps (examples/gymnasium-package/lamps.kdl): a Dict observation of
/// a picture and a Discrete rule, read by the Nature CNN with the rule joining its dense
/// layer. Its comment's claim for seed 1: 7.2 or more over the last 20 episodes within 50k
/// steps, where a policy that reads only the picture scores 4 and one that reads only the rule 2.
#[test]
fn the_lamps_example_learns_from_a_picture_beside_a_rule() {
    let Some(python) = venv_python() else { return };
    let name = "example-lamps";
    let (run_dir, ran) = train_example(name, "lamps.kdl", &python, &[], Duration::from_secs(300));
    assert!(ran.success, "{}", ran.output);
    let last20 = summary_number(&run_dir, "last_20_score_mean").unwrap();
    assert!(
        last20 >= 7.2,
        "lamps, seed 1: last-20 score {last20} < 7.2 at 50k steps"
    );
    let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("as 1298 floats: `picture` Box(0, 255, (36, 36, 1), uint8) pixels, channels first at 0..1296, `rule` Discrete(2) one-hot at 1296..1298"),
        "the rank log does not say how the observation is encoded:\n{log}"
    );
    assert_nothing_left(name, &ran.output);
}

/// examples/gymnasium-package/dials-masked.kdl's claim: the lock with jammed dials, whose
/// jams only `info["action_mask"]` tells, learns with the mask (seed 1: 0.7 or more over the
/// last 20 episodes within 200k steps; 0.77 measured) and not without it (below -0.3, what the best policy
/// blind to the jams averages: it keeps turning jammed dials).
#[test]
fn the_jammed_lock_learns_only_with_its_action_mask() {
    let Some(python) = venv_python() else { return };
    let score = |name: &str, mask: &str, steps: u64| {
        let sets = [
            format!("env.action-mask=\"{mask}\""),
            format!("train.total-steps={steps}"),
        ];
        let (run_dir, ran) = train_example(
            name,
            "dials-masked.kdl",
            &python,
            &sets,
            Duration::from_secs(300),
        );
        assert!(ran.success, "{}", ran.output);
        assert_nothing_left(name, &ran.output);
        summary_number(&run_dir, "last_20_score_mean").unwrap()
    };
    let masked = score("jammed-masked", "info", 200_000);
    assert!(masked >= 0.7, "with the mask: last-20 score {masked} < 0.7");
    // No policy blind to the jams does better than -0.3 at any length: 50k steps show it.
    let blind = score("jammed-blind", "none", 50_000);
    assert!(
        blind < -0.3,
        "without the mask: last-20 score {blind} >= -0.3"
    );
}

/// The env block of the Drawn fixture (a 6-step episode that draws 4x6 frames) whose
/// render() misbehaves as `fault` says ("" for not at all).
fn drawn(python: &Path, fault: &str) -> String {
    format!(
        "        id \"TandemTest/Drawn-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        make-args {{ fault \"{fault}\" }}\n        workers 1\n        envs 2\n",
        python.display()
    )
}

/// Trains a small PPO run of the Drawn fixture; its run directory.
fn train_drawn(name: &str, python: &Path, fault: &str) -> PathBuf {
    let env = drawn(python, fault);
    let limit = Duration::from_secs(300);
    let (run_dir, ran) = train_text(name, &experiment("\"cpu\"", &env), &[], limit);
    assert!(ran.success, "{}", ran.output);
    run_dir
}

#[test]
fn play_writes_a_gif_of_a_gymnasium_environment() {
    let Some(python) = venv_python() else { return };
    let name = "play-gif";
    let run_dir = train_drawn(name, &python, "");
    let gif = run_dir.with_file_name("episode.gif");
    let args = [
        run_dir.to_str().unwrap(),
        "--episodes",
        "2",
        "--gif",
        gif.to_str().unwrap(),
    ];
    let played = run_to_end(
        tandem_subcommand(name, "play", &args),
        Duration::from_secs(120),
    );
    assert!(played.success, "{}", played.output);
    // One frame before each of the first episode's 6 steps.
    let wrote = format!("wrote {} (6 frames, ", gif.display());
    assert!(played.output.contains(&wrote), "{}", played.output);
    // What it cost is said: the encoding announced, the file's bytes and both times after.
    let bytes = std::fs::read(&gif).unwrap();
    assert!(
        played.output.contains(&format!(
            "play: encoding 6 frames of 6x4 into {}",
            gif.display()
        )),
        "{}",
        played.output
    );
    assert!(
        played
            .output
            .contains(&format!("(6 frames, {} bytes; drawing took ", bytes.len())),
        "{}",
        played.output
    );
    assert_eq!(&bytes[..6], b"GIF89a");
    let size = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    assert_eq!((size(6), size(8)), (6, 4), "the fixture's 6x4 frames");
    // Every 4th frame: before steps 0 and 4 of the 6.
    let sparse = run_dir.with_file_name("sparse.gif");
    let mut every = args.to_vec();
    every[4] = sparse.to_str().unwrap();
    every.extend(["--gif-every", "4"]);
    let played = run_to_end(
        tandem_subcommand(name, "play", &every),
        Duration::from_secs(120),
    );
    let wrote = format!("wrote {} (2 frames, ", sparse.display());
    assert!(played.output.contains(&wrote), "{}", played.output);
    assert_nothing_left(name, &played.output);
}

#[test]
fn play_gif_of_a_gymnasium_environment_that_cannot_draw_names_it() {
    let Some(python) = venv_python() else { return };
    let name = "play-gif-fails";
    // Training never draws, so a render() that raises does not stop it.
    let run_dir = train_drawn(name, &python, "raise");
    let gif = run_dir.with_file_name("episode.gif");
    let run = run_dir.to_str().unwrap();
    let with_gif = [run, "--episodes", "1", "--gif", gif.to_str().unwrap()];
    let played = run_to_end(
        tandem_subcommand(name, "play", &with_gif),
        Duration::from_secs(120),
    );
    assert!(!played.success, "{}", played.output);
    assert!(
        played.output.contains(
            "gymnasium `TandemTest/Drawn-v0`: environment 0 could not render: render() raised RuntimeError: no picture today"
        ),
        "{}",
        played.output
    );
    assert!(!gif.exists());
    let without = run_to_end(
        tandem_subcommand(name, "play", &[run, "--episodes", "1"]),
        Duration::from_secs(120),
    );
    assert!(without.success, "{}", without.output);
    assert_nothing_left(name, &played.output);
}

#[test]
fn the_shipped_halfcheetah_ppo_trains_box_actions_through_the_bridge() {
    let Some(python) = venv_python() else { return };
    let (run_dir, ran) = train_shipped(
        "halfcheetah",
        "halfcheetah-ppo.kdl",
        &python,
        "train.max-steps=4096",
        Duration::from_secs(200),
    );
    assert!(ran.success, "{}", ran.output);
    assert_eq!(summary_number(&run_dir, "global_step"), Some(4096.0));
    // HalfCheetah-v5 ends only at its 1000-step time limit: four episodes, scored (untouched
    // rewards) apart from the normalised returns.
    assert_eq!(summary_number(&run_dir, "episodes"), Some(4.0));
    let score = summary_number(&run_dir, "last_20_score_mean").unwrap();
    let ret = summary_number(&run_dir, "last_20_return_mean").unwrap();
    assert!(
        score.is_finite() && score != ret,
        "score {score}, return {ret}"
    );
    assert_nothing_left("halfcheetah", &ran.output);
}

/// The shipped gymnasium experiments run as written after the README's setup, from any
/// directory (here one outside the repository): they name the venv scripts/setup makes by its
/// path from the experiment file, which the resolver takes from the file's folder.
#[test]
fn the_shipped_gymnasium_experiments_run_as_written_after_setup() {
    let Some(_) = venv_python() else { return };
    for (file, steps) in [
        ("gymnasium-cartpole.kdl", 1024),
        ("halfcheetah-sac.kdl", 600),
    ] {
        let name = file.trim_end_matches(".kdl");
        let elsewhere = fresh_dir(name);
        let run_dir = elsewhere.join("run");
        let experiment = root().join("experiments").join(file);
        let mut cmd = tandem_command(
            name,
            &[
                experiment.to_str().unwrap(),
                "--run-dir",
                run_dir.to_str().unwrap(),
                "--set",
                &format!("train.max-steps={steps}"),
            ],
        );
        cmd.current_dir(&elsewhere);
        let ran = run_to_end(cmd, Duration::from_secs(300));
        assert!(ran.success, "{file} as shipped:\n{}", ran.output);
        let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
        let venv = root().join(".deps/venv-gym/bin/python");
        assert!(
            log.contains(&format!("running {} (Python", venv.display())),
            "{file} ran another interpreter than {}:\n{log}",
            venv.display()
        );
        assert_nothing_left(name, &ran.output);
    }
}

/// Trains the shipped `file` (its own interpreter, from the repository's root) as a run of
/// `steps` steps (`train.total-steps`, so schedules end there) and returns its last-20 score.
fn shipped_preset_score(name: &str, file: &str, steps: u64) -> f64 {
    preset_score(name, file, "train.total-steps", steps)
}

/// The last-20 score of the shipped `file`'s own run after its first `steps` steps
/// (`train.max-steps`: the schedules keep the file's length, so the figure is that of the
/// whole run at that point).
fn shipped_preset_prefix_score(name: &str, file: &str, steps: u64) -> f64 {
    preset_score(name, file, "train.max-steps", steps)
}

fn preset_score(name: &str, file: &str, stop_setting: &str, steps: u64) -> f64 {
    let run_dir = fresh_dir(name).join("run");
    let total = format!("{stop_setting}={steps}");
    let mut cmd = tandem_command(
        name,
        &[
            &format!("experiments/{file}"),
            "--run-dir",
            run_dir.to_str().unwrap(),
            "--quiet",
            "--set",
            &total,
        ],
    );
    cmd.current_dir(root());
    let ran = run_to_end(cmd, Duration::from_secs(600));
    assert!(ran.success, "{}", ran.output);
    // Training stops within one rollout (16 environments x 1,024 steps) past `steps`.
    let ran_steps = summary_number(&run_dir, "global_step").unwrap();
    assert!(
        ran_steps < steps as f64 + 16.0 * 1024.0,
        "{file} ran {ran_steps} steps"
    );
    assert_nothing_left(name, &ran.output);
    summary_number(&run_dir, "last_20_score_mean").unwrap()
}

/// experiments/lunarlander-continuous-ppo.kdl's claim, its first 400k steps (the whole 1M takes
/// three minutes; docs/performance.md gives its figure): seed 1 scores 40 or more over its
/// last 20 episodes.
#[test]
fn the_shipped_continuous_lunarlander_preset_lands_within_400k_steps() {
    let Some(_) = venv_python() else { return };
    let file = "lunarlander-continuous-ppo.kdl";
    let score = shipped_preset_score("lunarlander-continuous", file, 400_000);
    assert!(
        score >= 40.0,
        "LunarLanderContinuous-v3 PPO, seed 1: last-20 score {score} < 40 at 400k steps"
    );
}

/// experiments/hopper-sac.kdl's claim, its first 10k steps (the whole 200k takes about 36
/// minutes; docs/performance.md gives its figure): seed 1 scores 150 or more over its last 20
/// episodes (291.0 measured with the host SAC step, 241.0 before it; a random policy scores
/// about 18).
#[test]
fn the_shipped_hopper_sac_preset_hops_within_10k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_score("hopper-sac", "hopper-sac.kdl", 10_000);
    assert!(
        score >= 150.0,
        "Hopper-v5 SAC, seed 1: last-20 score {score} < 150 at 10k steps"
    );
}

/// experiments/walker2d-sac.kdl's claim, its first 10k steps: seed 1 scores 150 or more over
/// its last 20 episodes (270.1 measured with the host SAC step, 267.6 before it; a random
/// policy scores about 2).
#[test]
#[ignore = "about three minutes of Walker2d SAC (hopper-sac's test holds SAC through the bridge on CI); run with --ignored"]
fn the_shipped_walker2d_sac_preset_walks_within_10k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_score("walker2d-sac", "walker2d-sac.kdl", 10_000);
    assert!(
        score >= 150.0,
        "Walker2d-v5 SAC, seed 1: last-20 score {score} < 150 at 10k steps"
    );
}

/// experiments/ant-ppo.kdl's claim, the first 400k steps of its 1M (the whole run takes about
/// six minutes; docs/performance.md gives its curve): seed 1 scores 100 or more over its last 20
/// episodes (184.0 measured; a random policy scores about -40).
#[test]
#[ignore = "about seven minutes of Ant PPO (halfcheetah-ppo's and lunarlander-continuous' tests hold Gaussian PPO through the bridge on CI); run with --ignored"]
fn the_shipped_ant_preset_walks_within_400k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_prefix_score("ant", "ant-ppo.kdl", 400_000);
    assert!(
        score >= 100.0,
        "Ant-v5 PPO, seed 1: last-20 score {score} < 100 after 400k steps"
    );
}

/// experiments/lunarlander-ppo.kdl's claim, its first 400k steps (the whole 1M takes two
/// minutes; docs/performance.md gives its figure): seed 1 scores 40 or more over its last 20
/// episodes.
#[test]
fn the_shipped_lunarlander_preset_lands_within_400k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_score("lunarlander", "lunarlander-ppo.kdl", 400_000);
    assert!(
        score >= 40.0,
        "LunarLander-v3 PPO, seed 1: last-20 score {score} < 40 at 400k steps"
    );
}

/// experiments/bipedalwalker-ppo.kdl's claim, its first 1M steps (the whole 5M take 13 minutes;
/// docs/performance.md gives its figure): seed 1 scores -70 or more over its last 20 episodes
/// (-41.2 measured; a walker that falls is charged 100).
#[test]
#[ignore = "about eight minutes of BipedalWalker PPO (halfcheetah-ppo's and lunarlander-continuous' tests hold Gaussian PPO through the bridge on CI); run with --ignored"]
fn the_shipped_bipedalwalker_preset_walks_within_1m_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_score("bipedalwalker", "bipedalwalker-ppo.kdl", 1_048_576);
    assert!(
        score >= -70.0,
        "BipedalWalker-v3 PPO, seed 1: last-20 score {score} < -70 at 1M steps"
    );
}

/// experiments/halfcheetah-ppo.kdl's claim, the first 200k steps of its 1M (44 s here beside
/// another run): seed 1 scores 700 or more over its last 20 episodes (1,050.6 measured; the
/// episodes of halfcheetah-sac.kdl's uniformly random warm-up score -219 to -307).
#[test]
fn the_shipped_halfcheetah_ppo_preset_runs_within_200k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_prefix_score("halfcheetah-ppo", "halfcheetah-ppo.kdl", 200_000);
    assert!(
        score >= 700.0,
        "HalfCheetah-v5 PPO, seed 1: last-20 score {score} < 700 after 200k steps"
    );
}

/// experiments/halfcheetah-sac.kdl's claim, its first 30k steps (284 s here beside another run,
/// too long for CI; run it with `cargo test --release --test gym_train -- --ignored
/// halfcheetah_sac`): seed 1 scores 800 or more over its last 20 episodes (1,213.8 measured;
/// its episodes over the uniformly random first 5,000 steps score -219 to -307).
#[test]
#[ignore = "five minutes of HalfCheetah SAC; run with --ignored"]
fn the_shipped_halfcheetah_sac_preset_runs_within_30k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_prefix_score("halfcheetah-sac", "halfcheetah-sac.kdl", 30_000);
    assert!(
        score >= 800.0,
        "HalfCheetah-v5 SAC, seed 1: last-20 score {score} < 800 after 30k steps"
    );
}

/// experiments/halfcheetah-td3.kdl's claim, its first 50k steps (241 s here beside another run,
/// too long for CI; run it with `cargo test --release --test gym_train -- --ignored
/// halfcheetah_td3`): seed 1 scores 200 or more over its last 20 episodes, all after its 25k
/// steps of uniformly random actions (419.7 measured; single episodes near the end scored 413
/// and 982, so the mean moves by tens with one episode).
#[test]
#[ignore = "four minutes of HalfCheetah TD3; run with --ignored"]
fn the_shipped_halfcheetah_td3_preset_runs_within_50k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_prefix_score("halfcheetah-td3", "halfcheetah-td3.kdl", 50_000);
    assert!(
        score >= 200.0,
        "HalfCheetah-v5 TD3, seed 1: last-20 score {score} < 200 after 50k steps"
    );
}

/// experiments/frozenlake-ppo.kdl's claim: a Discrete observation, one-hot through the bridge,
/// learnt to the goal: seed 1's last 20 episodes all reach it within 40k steps.
#[test]
fn the_shipped_frozenlake_preset_reaches_the_goal_within_40k_steps() {
    let Some(_) = venv_python() else { return };
    let score = shipped_preset_score("frozenlake", "frozenlake-ppo.kdl", 40_000);
    assert_eq!(
        score, 1.0,
        "FrozenLake-v1 PPO, seed 1: last-20 score {score} at 40k steps"
    );
}

/// `validate --deep` builds the torso for the built environment's observation and refuses, at
/// the network's line, an image torso on vectors or on an image too small for its windows
/// (beside a vector too); the shipped lamps example passes.
/// A network declared as layers: `validate --deep` lists each layer's shape on what the
/// network reads, for a game the config knows and for a gymnasium environment it builds, and
/// names the layer that does not fit what the built environment observes.
#[test]
fn validate_deep_shows_declared_layers_shapes_and_the_layer_that_does_not_fit() {
    let shown = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(args)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), all)
    };
    let shipped = format!(
        "{}/experiments/cartpole-residual.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let (code, all) = shown(&["validate", "--deep", &shipped]);
    assert_eq!(code, Some(0), "{all}");
    for line in [
        "network layers on [4]:",
        "1 linear out=64 -> [64]",
        "3 residual -> [64]",
        "4   layer-norm -> [64]",
    ] {
        assert!(all.contains(line), "lacks `{line}`: {all}");
    }
    // Without --deep, no table.
    let (_, plain) = shown(&["validate", &shipped]);
    assert!(!plain.contains("network layers on"), "{plain}");

    let Some(python) = venv_python() else { return };
    let dir = fresh_dir("validate-deep-layers");
    let file = |name: &str, layers: &str| {
        let path = dir.join(name);
        let text = format!(
            "experiment \"x\" {{\n    algorithm \"ppo\"\n    env \"gymnasium\" {{\n        id \"CartPole-v1\"\n        python \"{}\"\n    }}\n    network \"layers\" {{ layers {{ {layers} }} }}\n}}\n",
            python.display()
        );
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let fits = file("fits.kdl", "linear 16; tanh");
    let (code, all) = shown(&["validate", "--deep", &fits]);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        all.contains("network layers on [4]:") && all.contains("1 linear out=16 -> [16]"),
        "{all}"
    );
    let misfit = file("misfit.kdl", "linear 16; max-pool 2");
    let (code, all) = shown(&["validate", "--deep", &misfit]);
    assert_eq!(code, Some(1), "{all}");
    let all = all.split_whitespace().collect::<Vec<_>>().join(" ");
    for words in [
        "host::network",
        "layer 2 (`max-pool`, counting from 1 in the order written) does not fit",
        "max-pool reads a picture [C, H, W]; it is given [16]",
    ] {
        assert!(all.contains(words), "lacks `{words}`: {all}");
    }
}

#[test]
fn validate_deep_refuses_a_network_the_built_observation_cannot_feed() {
    let Some(python) = venv_python() else { return };
    let dir = fresh_dir("validate-deep-network");
    let validate = |name: &str, env: &str| {
        let file = dir.join(name);
        let text = format!(
            "experiment \"x\" {{\n    algorithm \"ppo\"\n    env \"gymnasium\" {{\n{env}        python \"{}\"\n    }}\n    network \"nature-cnn\"\n}}\n",
            python.display()
        );
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["validate", "--deep"])
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, all) = validate("cartpole.kdl", "        id \"CartPole-v1\"\n");
    assert_eq!(code, Some(1), "{all}");
    for words in [
        "host::network",
        "network `nature-cnn` does not fit this environment's observations",
        "cartpole.kdl:7:",
        "got shape [4]",
        "the environment observes a vector of 4 floats",
    ] {
        assert!(all.contains(words), "lacks `{words}`: {all}");
    }
    let small = "        id \"tandem_corridor/Lamps-v0\"\n        import \"tandem_corridor\"\n        make-args { size 20; }\n";
    let (code, all) = validate("small-lamps.kdl", small);
    assert_eq!(code, Some(1), "{all}");
    let all = all.split_whitespace().collect::<Vec<_>>().join(" ");
    for words in [
        "the input to conv2 is 1 pixels wide",
        "the environment observes a 20x20 grayscale image beside a vector of 2 floats",
    ] {
        assert!(all.contains(words), "lacks `{words}`: {all}");
    }
    let lamps = root().join("examples/gymnasium-package/lamps.kdl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["validate", "--deep"])
        .arg(&lamps)
        .args(["--set", &python_set(&python)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `validate --deep` builds one environment and refuses an algorithm that cannot act in it,
/// at the algorithm's line (SAC on CartPole's discrete actions); without `--deep` nothing is
/// started and the file is valid.
#[test]
fn validate_deep_refuses_sac_on_a_discrete_gymnasium_environment() {
    let Some(python) = venv_python() else { return };
    let dir = fresh_dir("validate-deep");
    let file = dir.join("sac-cartpole.kdl");
    std::fs::write(
        &file,
        format!(
            "experiment \"x\" {{\n    algorithm \"sac\"\n    env \"gymnasium\" {{\n        id \"CartPole-v1\"\n        python \"{}\"\n    }}\n}}\n",
            python.display()
        ),
    )
    .unwrap();
    let validate = |deep: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"));
        cmd.arg("validate").arg(&file);
        if deep {
            cmd.arg("--deep");
        }
        cmd.output().unwrap()
    };
    let shallow = validate(false);
    assert!(shallow.status.success(), "{shallow:?}");
    let deep = validate(true);
    let all = String::from_utf8_lossy(&deep.stderr).to_string();
    assert_eq!(deep.status.code(), Some(1), "{all}");
    assert!(all.contains("host::action-space"), "{all}");
    assert!(all.contains("sac cannot act in this environment"), "{all}");
    assert!(all.contains("sac-cartpole.kdl:2:"), "{all}");
    assert!(
        all.contains("the environment takes 2 discrete actions"),
        "{all}"
    );
}

/// `validate --deep` passes gymnasium's whole exception message on when it cannot make the
/// environment: an unknown id, and keyword arguments the environment does not take (a message
/// longer than a diagnostic's label keeps).
#[test]
fn validate_deep_says_gymnasiums_whole_message_when_it_cannot_make_the_environment() {
    let Some(python) = venv_python() else { return };
    let dir = fresh_dir("validate-deep-make");
    for (name, env, says) in [
        (
            "unknown.kdl",
            "id \"NoSuchEnvXyz-v0\"",
            "NameNotFound: Environment `NoSuchEnvXyz` doesn't exist.",
        ),
        (
            "kwargs.kdl",
            "id \"CartPole-v1\"; make-args { bogus 3; }",
            "TypeError: CartPoleEnv.__init__() got an unexpected keyword argument 'bogus' was \
             raised from the environment creator for CartPole-v1 with kwargs ({'bogus': 3})",
        ),
    ] {
        let file = dir.join(name);
        let text = format!(
            "experiment \"x\" {{\n    env \"gymnasium\" {{ {env}; python \"{}\"; }}\n}}\n",
            python.display()
        );
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(TANDEM)
            .args(["validate", "--deep"])
            .arg(&file)
            .output()
            .unwrap();
        let all = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{all}");
        // The renderer wraps long lines: compare the words.
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(all.contains("host::env"), "{all}");
        assert!(words(&all).contains(&words(says)), "lacks `{says}`: {all}");
    }
}

/// The Scored fixture's info values reach TensorBoard, scalars.jsonl and summary.json as the
/// mean over the episodes that ended, gathered from both ranks. Every 6 steps an environment
/// ends 3 episodes of 1, 2 and 3 steps (in an order its seed picks), 2 of odd length: with
/// 6-step rollouts each update's `is_success` mean is 2/3 and its `steps` mean (the last
/// step's count) the episodes' mean length, 2. `phase` (each environment's seed % 3) averages
/// over all four environments only if rank 1's values arrive.
#[test]
fn info_values_reach_tensorboard_as_the_mean_over_ended_episodes_of_both_ranks() {
    let Some(python) = venv_python() else { return };
    let name = "info-keys";
    let phase = |seed: u64, envs: usize| -> f64 {
        (0..envs)
            .map(|i| (tandem_env::env_seed(seed, 0, i) % 3) as f64)
            .sum::<f64>()
            / envs as f64
    };
    // A seed whose four environments' mean phase is not rank 0's two's.
    let seed = (1u64..).find(|&s| phase(s, 4) != phase(s, 2)).unwrap();
    let env = format!(
        "        id \"TandemTest/Scored-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        envs 4\n        info-keys \"is_success\" \"steps\" \"phase\"\n",
        python.display()
    );
    let text = experiment("\"cpu\" \"cpu\"", &env);
    let sets = [
        format!("seed={seed}"),
        "train.rollout=6".into(),
        "train.total-steps=96".into(),
    ];
    let (run_dir, ran) = train_text(name, &text, &sets, Duration::from_secs(120));
    assert!(ran.success, "{}", ran.output);
    let success = common::binary::scalar_values(&run_dir, "episode/info/is_success");
    assert_eq!(success.len(), 4, "one value an update: {success:?}");
    assert!(
        success.iter().all(|&v| (v - 2.0 / 3.0).abs() < 1e-6),
        "{success:?}"
    );
    let steps = common::binary::scalar_values(&run_dir, "episode/info/steps");
    assert_eq!(
        steps,
        common::binary::scalar_values(&run_dir, "episode/length_mean")
    );
    assert!(steps.iter().all(|&v| v == 2.0), "{steps:?}");
    let phases = common::binary::scalar_values(&run_dir, "episode/info/phase");
    let all = phase(seed, 4) as f32;
    assert!(
        phases.len() == 4 && phases.iter().all(|&v| (v - all).abs() < 1e-6),
        "{phases:?}, expected {all} (rank 0's alone: {})",
        phase(seed, 2)
    );
    // The last 100 episodes' means, every log interval and in summary.json.
    let recent = common::binary::scalar_values(&run_dir, "episode/recent_info/is_success");
    assert!(!recent.is_empty() && recent.iter().all(|&v| (v - 2.0 / 3.0).abs() < 1e-6));
    let jsonl = common::jsonl_scalars(&run_dir, "episode/info/is_success");
    assert_eq!(jsonl.len(), 4, "{jsonl:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    let info = &summary["recent_info"];
    assert!(
        (info["is_success"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{summary}"
    );
    assert_eq!(info["steps"].as_f64(), Some(2.0), "{summary}");
    assert_nothing_left(name, &ran.output);
}

/// A key the environment's episodes end without stops the run, naming the key and the id.
#[test]
fn an_info_key_the_environment_never_gives_stops_the_run_with_its_name() {
    let Some(python) = venv_python() else { return };
    let name = "info-missing";
    let env = format!(
        "        id \"TandemTest/Scored-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        envs 4\n        info-keys \"is_sucess\"\n",
        python.display()
    );
    let text = experiment("\"cpu\"", &env);
    let (_, ran) = train_text(name, &text, &[], Duration::from_secs(60));
    assert!(!ran.success, "{}", ran.output);
    assert!(
        ran.output
            .contains("gymnasium `TandemTest/Scored-v0`: environment ")
            && ran
                .output
                .contains("'s episode ended at a step whose info has no `is_sucess`"),
        "{}",
        ran.output
    );
    assert_nothing_left(name, &ran.output);
}

/// Evaluation logs scores only: its own time limit cutting an episode at a step without the
/// keys (Scored's 3-step episodes at 2 steps, `is_success` only at their end) stops nothing.
#[test]
fn evaluation_cuts_episodes_without_asking_for_info_keys() {
    let Some(python) = venv_python() else { return };
    let name = "info-eval";
    let env = format!(
        "        id \"TandemTest/Scored-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        envs 4\n        info-keys \"is_success\"\n",
        python.display()
    );
    let text = experiment("\"cpu\"", &env);
    let sets = [
        "train.rollout=6".to_string(),
        "train.total-steps=48".into(),
        "eval.every=1".into(),
        "eval.episodes=4".into(),
        "eval.max-episode-steps=2".into(),
    ];
    let (run_dir, ran) = train_text(name, &text, &sets, Duration::from_secs(60));
    assert!(ran.success, "{}", ran.output);
    assert_eq!(
        common::binary::scalar_values(&run_dir, "eval/score_mean").len(),
        2,
        "{}",
        ran.output
    );
    assert_eq!(
        common::binary::scalar_values(&run_dir, "episode/info/is_success").len(),
        2
    );
    assert_nothing_left(name, &ran.output);
}

/// A checkpoint keeps the recent episodes' info values: right after a resume,
/// `episode/recent_info/<key>` still averages the window the checkpoint saved (whose
/// episodes would otherwise have no values, and the tag none).
#[test]
fn a_resumed_run_continues_the_recent_info_means_from_its_checkpoint() {
    let Some(python) = venv_python() else { return };
    let name = "info-resume";
    let env = format!(
        "        id \"TandemTest/Scored-v0\"\n        python \"{}\"\n        import \"{FIXTURES}\"\n        envs 4\n        info-keys \"is_success\"\n",
        python.display()
    );
    // 24 steps and 12 episodes an update: the checkpoint at update 10 holds a full window.
    let text = experiment("\"cpu\"", &env);
    let sets = ["train.rollout=6".to_string(), "train.max-steps=240".into()];
    let (run_dir, first) = train_text(name, &text, &sets, Duration::from_secs(60));
    assert!(first.success, "{}", first.output);
    let resumed = tandem(
        name,
        &["--resume", run_dir.to_str().unwrap(), "--max-steps", "264"],
        Duration::from_secs(60),
    );
    assert!(resumed.success, "{}", resumed.output);
    let recent = common::jsonl_scalars(&run_dir, "episode/recent_info/is_success");
    let after = recent.iter().find(|(step, _)| *step == 264);
    assert!(
        after.is_some_and(|(_, v)| (0.5..=0.8).contains(v)),
        "{recent:?}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        summary["recent_info"]["is_success"].as_f64(),
        after.map(|(_, v)| *v),
        "{summary}"
    );
    assert_nothing_left(name, &resumed.output);
}

/// mpe2's own simple_spread as a PettingZoo environment through the bridge (`env
/// "pettingzoo"`): PPO trains every agent as a row of the batch for three updates, and an
/// `agents` that is not the environment's stops the run with the count it has.
#[test]
fn ppo_trains_a_pettingzoo_environment_and_its_agent_count_is_checked() {
    let Some(python) = venv_python() else { return };
    let text = |agents: usize| {
        format!(
            r#"experiment "zoo" {{
    seed 1
    devices "cpu"
    threads 1
    algorithm "ppo" {{ epochs 1; minibatches 2 }}
    env "pettingzoo" {{
        module "mpe2.simple_spread_v3"
        agents {agents}
        make-args {{ N 3; max_cycles 25; }}
        python "{}"
        envs 4
    }}
    network "mlp" {{ hidden 16 }}
    train {{ total-steps 1152; rollout 32 }}
}}
"#,
            python.display()
        )
    };
    let (run_dir, ran) = train_text("zoo-ppo", &text(3), &[], Duration::from_secs(300));
    assert!(ran.success, "{}", ran.output);
    // 4 games x 3 agents x rollout 32 a update: three of them.
    assert_eq!(summary_number(&run_dir, "global_step"), Some(1152.0));
    // 96 vector steps end 3 episodes of 25 steps per game: 12 games' ends, 3 agents each.
    assert_eq!(summary_number(&run_dir, "episodes"), Some(36.0));
    let log = std::fs::read_to_string(run_dir.join("logs/rank-0.log")).unwrap();
    assert!(
        log.contains("environments: pettingzoo 1.27.0 (gymnasium ")
            && log.contains("`mpe2.simple_spread_v3`, 2 worker(s)"),
        "{log}"
    );
    assert_nothing_left("zoo-ppo", &ran.output);
    let (_, ran) = train_text("zoo-agents", &text(2), &[], Duration::from_secs(120));
    assert!(!ran.success);
    assert!(
        ran.output
            .contains("has 3 agent(s) (agent_0, agent_1, agent_2)")
            && ran.output.contains("set `agents 3`"),
        "{}",
        ran.output
    );
    assert_nothing_left("zoo-agents", &ran.output);
}

/// PettingZoo's connect four through the AEC API (`api "aec"`): one policy plays both players
/// (or, once with PPO, a policy a side), PPO and A2C each train it with the action mask and never play a forbidden move (the bridge
/// would stop the run), and every game gives its two rows opposite scores (+1 and -1, or 0 and
/// 0), so the mean over whole games is exactly 0.
#[test]
fn ppo_and_a2c_train_connect_four_taking_turns_without_a_forbidden_move() {
    let Some(python) = venv_python() else { return };
    let sides = r#"policies { first "player_0"; second "player_1" }"#;
    for (algorithm, policies) in [
        ("ppo\" { epochs 2; minibatches 4 }", ""),
        ("a2c\"", ""),
        ("ppo\" { epochs 2; minibatches 4 }", sides),
    ] {
        let text = format!(
            r#"experiment "four" {{
    seed 1
    devices "cpu"
    threads 1
    algorithm "{algorithm}
    env "pettingzoo" {{
        module "pettingzoo.classic.connect_four_v3"
        function "env"
        api "aec"
        agents 2
        action-mask "observation"
        python "{}"
        workers 1
        envs 8
    }}
    network "mlp" {{ hidden 32 }}
    train {{ total-steps 16384; rollout 32; {policies} }}
}}
"#,
            python.display()
        );
        let (run_dir, ran) = train_text("zoo-four", &text, &[], Duration::from_secs(300));
        assert!(ran.success, "{algorithm}: {}", ran.output);
        assert_eq!(summary_number(&run_dir, "global_step"), Some(16384.0));
        // 8192 moves in games of 7 to 42 moves, two episodes (one a player) a game.
        let episodes = summary_number(&run_dir, "episodes").unwrap();
        assert!(
            (390.0..=2341.0).contains(&episodes),
            "{algorithm}: {episodes}"
        );
        assert_eq!(episodes % 2.0, 0.0, "{algorithm}: {episodes}");
        assert_eq!(
            summary_number(&run_dir, "final_score"),
            Some(0.0),
            "{algorithm}"
        );
        if !policies.is_empty() {
            // A policy a side: every game's two scores are the two policies' (the rows of the
            // other side's moves weigh nothing in each one's loss: tests/algo_ppo.rs).
            let first = summary_number(&run_dir, "policy_first_final_score").unwrap();
            let second = summary_number(&run_dir, "policy_second_final_score").unwrap();
            assert_eq!(first, -second, "{first} {second}");
        }
        assert_nothing_left("zoo-four", &ran.output);
        // Against a player moving at random among its legal columns (none forbidden: the
        // bridge would stop the game), each game's two scores still cancel.
        let run = run_dir.to_str().unwrap();
        let args = [run, "--random-agents", "player_1", "--episodes", "40"];
        let played = run_to_end(
            tandem_subcommand("zoo-four", "play", &args),
            Duration::from_secs(120),
        );
        assert!(played.success, "{}", played.output);
        let mean_of = |prefix: &str| -> f64 {
            let line = played.output.lines().find(|l| l.starts_with(prefix));
            let line = line.unwrap_or_else(|| panic!("no {prefix}: {}", played.output));
            line.rsplit(": ").next().unwrap().trim().parse().unwrap()
        };
        let random =
            mean_of("agents player_1 (acting at random): mean score over 20 agent episode(s)");
        let learned = mean_of("the other agents: mean score over 20 agent episode(s)");
        assert_eq!(random, -learned, "{}", played.output);
    }
}

/// The shipped `experiments/connect-four.kdl`'s claim: the self-played policy, playing greedily
/// 200 games as either player against a player moving at random among its legal columns,
/// scores (a win 1, a loss -1) at least half of what seed 1 reached here.
#[test]
#[ignore = "about two and a half minutes of connect four (the league's test holds connect four self-play learning on CI); run with --ignored"]
fn the_shipped_connect_four_beats_a_random_player_from_either_seat() {
    if venv_python().is_none() {
        return;
    }
    let file = root().join("experiments/connect-four.kdl");
    let dir = fresh_dir("zoo-four-shipped").join("run");
    let args = [file.to_str().unwrap(), "--run-dir", dir.to_str().unwrap()];
    let ran = tandem("zoo-four-shipped", &args, Duration::from_secs(900));
    assert!(ran.success, "{}", ran.output);
    let against_random = |random: &str| -> f64 {
        let run = dir.to_str().unwrap();
        let args = [
            run,
            "--random-agents",
            random,
            "--episodes",
            "400",
            "--greedy",
        ];
        let cmd = tandem_subcommand("zoo-four-shipped", "play", &args);
        let played = run_to_end(cmd, Duration::from_secs(300));
        assert!(played.success, "{}", played.output);
        let prefix = "the other agents: mean score over 200 agent episode(s): ";
        let line = played.output.lines().find_map(|l| l.strip_prefix(prefix));
        line.unwrap_or_else(|| panic!("no score: {}", played.output))
            .trim()
            .parse()
            .unwrap()
    };
    let (first, second) = (against_random("player_1"), against_random("player_0"));
    eprintln!("connect four against a random player: {first:.2} first, {second:.2} second");
    // Seed 1 here: 0.91 first, 0.81 second.
    assert!(
        first >= 0.455 && second >= 0.405,
        "{first} first, {second} second"
    );
}

/// The shipped `experiments/connect-four-sides.kdl`'s claim: a policy for each side, each
/// playing greedily 200 games against a player moving at random among its legal columns
/// (`tandem play --random <the other policy>`), scores at least half of what seed 1 reached
/// here.
#[test]
#[ignore = "about five minutes of connect four with a policy a side (several_policies and connect four's own test hold both on CI); run with --ignored"]
fn the_shipped_connect_four_sides_each_beat_a_random_player() {
    if venv_python().is_none() {
        return;
    }
    let file = root().join("experiments/connect-four-sides.kdl");
    let dir = fresh_dir("zoo-four-sides").join("run");
    let args = [file.to_str().unwrap(), "--run-dir", dir.to_str().unwrap()];
    let ran = tandem("zoo-four-sides", &args, Duration::from_secs(900));
    assert!(ran.success, "{}", ran.output);
    let against_random = |random: &str, learned: &str| -> f64 {
        let run = dir.to_str().unwrap();
        let args = [run, "--random", random, "--episodes", "400", "--greedy"];
        let cmd = tandem_subcommand("zoo-four-sides", "play", &args);
        let played = run_to_end(cmd, Duration::from_secs(300));
        assert!(played.success, "{}", played.output);
        let prefix = format!("policy {learned}: mean score over 200 agent episode(s): ");
        let line = played.output.lines().find_map(|l| l.strip_prefix(&prefix));
        line.unwrap_or_else(|| panic!("no score: {}", played.output))
            .trim()
            .parse()
            .unwrap()
    };
    let first = against_random("second", "first");
    let second = against_random("first", "second");
    eprintln!("connect four sides against a random player: {first:.2} first, {second:.2} second");
    // Seed 1 here: 0.87 first, 0.74 second.
    assert!(
        first >= 0.435 && second >= 0.37,
        "{first} first, {second} second"
    );
}

/// Connect four games won by the policy of run `dir` (its newest checkpoint), playing greedily
/// or sampling, 100 as each player, against a random player (`against` `None`) or against the
/// policy of checkpoint `against`: the sum of the two `won` counts `tandem play` prints.
fn connect_four_wins(name: &str, dir: &Path, against: Option<&Path>, acting: &str) -> usize {
    let mut won = 0;
    for other in ["player_1", "player_0"] {
        let run = dir.to_str().unwrap();
        let mut args = vec![run, "--episodes", "200", acting];
        let opponent = against.map(|p| p.to_str().unwrap().to_string());
        match &opponent {
            Some(path) => args.extend(["--opponent", path.as_str(), "--opponent-agents", other]),
            None => args.extend(["--random-agents", other]),
        }
        let played = run_to_end(
            tandem_subcommand(name, "play", &args),
            Duration::from_secs(300),
        );
        assert!(played.success, "{}", played.output);
        let line = (played.output.lines())
            .find_map(|l| l.strip_prefix("the other agents won "))
            .unwrap_or_else(|| panic!("no games: {}", played.output));
        let of_100 = line.contains(" of 100 games");
        assert!(of_100, "{line}");
        won += line
            .split(',')
            .next()
            .unwrap()
            .trim()
            .parse::<usize>()
            .unwrap();
    }
    won
}

/// Self-play against a league (`experiments/connect-four-league.kdl`), shortened to 300k steps:
/// the learner, playing greedily, wins at least 170 of 200 games against a random
/// player, 100 as each player (seed 1 here, AMD EPYC Zen 3: 192; the bar leaves room for
/// other CPU kinds' kernels; a random player wins about half).
#[test]
fn a_league_learner_beats_a_random_player_at_connect_four() {
    if venv_python().is_none() {
        return;
    }
    let file = root().join("experiments/connect-four-league.kdl");
    let dir = fresh_dir("zoo-four-league").join("run");
    let run = dir.to_str().unwrap();
    let args = [
        file.to_str().unwrap(),
        "--run-dir",
        run,
        "--set",
        "train.total-steps=300000",
    ];
    let ran = tandem("zoo-four-league", &args, Duration::from_secs(600));
    assert!(ran.success, "{}", ran.output);
    let won = connect_four_wins("zoo-four-league", &dir, None, "--greedy");
    eprintln!("connect four league (300k steps) against a random player: {won} of 200 won");
    assert!(won >= 170, "{won} of 200");
}

/// The shipped `experiments/connect-four-league.kdl`'s claims, by hand (about 9 minutes):
/// over 200 games, 100 as either player, the final policy, playing greedily, wins at least 190
/// against a random player (95%, the issue's bar; seed 1 here: 192), and, sampling, at least
/// 120 (60%) against its checkpoint from a quarter of the run (seed 1 here: 196).
#[test]
#[ignore = "the shipped connect four league: about 9 minutes; run with --ignored"]
fn the_shipped_connect_four_league_beats_random_and_its_past() {
    if venv_python().is_none() {
        return;
    }
    let file = root().join("experiments/connect-four-league.kdl");
    let dir = fresh_dir("zoo-four-league-shipped").join("run");
    let args = [file.to_str().unwrap(), "--run-dir", dir.to_str().unwrap()];
    let ran = tandem("zoo-four-league-shipped", &args, Duration::from_secs(3600));
    assert!(ran.success, "{}", ran.output);
    let name = "zoo-four-league-shipped";
    let random = connect_four_wins(name, &dir, None, "--greedy");
    // 500k of 2M steps, at 4096 steps an update.
    let quarter = dir.join("checkpoints/ckpt-000000123.pt");
    let past = connect_four_wins(name, &dir, Some(&quarter), "--sample");
    eprintln!(
        "connect four league: {random} of 200 against random, {past} of 200 against a quarter"
    );
    assert!(random >= 190 && past >= 120, "{random} and {past} of 200");
}

/// Several policies over a pettingzoo environment (mpe2's own simple_tag through the bridge):
/// the patterns are matched against the agents the built game has, each policy learns its
/// team's rows (the prey with its own network), `tandem play` scores each; a pattern the game's
/// agents do not fit stops the run at its start, naming the agents and what is wrong.
#[test]
fn several_policies_play_a_pettingzoo_games_teams() {
    let Some(python) = venv_python() else { return };
    let text = |policies: &str| {
        format!(
            r#"experiment "zoo-tag" {{
    seed 1
    threads 1
    algorithm "ppo" {{ epochs 2; minibatches 2 }}
    env "pettingzoo" {{
        module "mpe2.simple_tag_v3"
        agents 4
        make-args {{ max_cycles 25; }}
        python "{}"
        workers 1
        envs 4
    }}
    network "mlp" {{ hidden 16 16 }}
    train {{
        total-steps 1024
        rollout 32
        policies {{
{policies}        }}
    }}
}}
"#,
            python.display()
        )
    };
    let teams = "            predators \"adversary_*\"\n            prey \"agent_*\" { network.hidden 32; }\n";
    let (run_dir, ran) = train_text("zoo-tag", &text(teams), &[], Duration::from_secs(300));
    assert!(ran.success, "{}", ran.output);
    let shape = |name: &str| common::binary::final_shape(&run_dir, name);
    // The prey's 14 floats into its own 32 units; the predators' 16 into the run's 16.
    assert_eq!(shape("policy.prey.model.torsos.fc0.weight"), [2, 14, 32]);
    assert_eq!(
        shape("policy.predators.model.torsos.fc0.weight"),
        [2, 16, 16]
    );
    let run = run_dir.to_str().unwrap();
    let played = run_to_end(
        tandem_subcommand("zoo-tag", "play", &[run, "--episodes", "8"]),
        Duration::from_secs(120),
    );
    assert!(played.success, "{}", played.output);
    for line in [
        "policy predators: mean score over 6 agent episode(s)",
        "policy prey: mean score over 2 agent episode(s)",
    ] {
        assert!(played.output.contains(line), "{}", played.output);
    }
    assert_nothing_left("zoo-tag", &ran.output);
    let wrong = "            predators \"adversary_*\"\n            wolves \"wolf_*\"\n";
    let (_, ran) = train_text("zoo-tag-wrong", &text(wrong), &[], Duration::from_secs(120));
    assert!(!ran.success);
    assert!(
        ran.output.contains("train.policies does not fit the environment's agents (adversary_0, adversary_1, adversary_2, agent_0): policy `wolves`'s pattern `wolf_*` matches no agent; agent `agent_0` is played by no policy"),
        "{}",
        ran.output
    );
    assert_nothing_left("zoo-tag-wrong", &ran.output);
}

/// The fixture's `escape` (crates/tandem-env/tests/gym_fixtures/zoo_envs.py): three runners
/// each leave their game when they choose, +1 through a door open from step 4, -1 against it
/// before (random play scores about -0.75 a runner). A runner that has left has rows until the
/// game ends; they weigh nothing in the loss.
fn escape(python: &Path, algorithm: &str, devices: &str) -> String {
    format!(
        r#"experiment "escape" {{
    seed 1
    devices {devices}
    threads 1
    algorithm "{algorithm}
    env "pettingzoo" {{
        module "{ZOO_FIXTURES}"
        function "escape"
        agents 3
        python "{}"
        workers 2
        envs 8
    }}
    network "mlp" {{ hidden 32 32 }}
    train {{ total-steps 100_000; rollout 32 }}
}}
"#,
        python.display()
    )
}

const ZOO_FIXTURES: &str = "tests.gym_fixtures.zoo_envs";

/// Agents that leave before their game ends: PPO on one rank and on two (each rank's batch
/// holding different numbers of rows that acted), and A2C, learn to wait for the door (final
/// scores 0.98, 1.00 and 0.96 here; random play scores about -0.75). Free sampling
/// over groups of environments, which cannot leave a row out, stops the run saying so.
#[test]
fn agents_that_leave_early_learn_on_one_rank_and_two() {
    let Some(python) = venv_python() else { return };
    let ppo = "ppo\" { epochs 4; minibatches 2; entropy-coef 0.01; lr 1e-3 }";
    for (algorithm, devices) in [
        (ppo, "\"cpu\""),
        (ppo, "\"cpu\" \"cpu\""),
        ("a2c\" { lr 1e-3 }", "\"cpu\""),
    ] {
        let text = escape(&python, algorithm, devices);
        let (run_dir, ran) = train_text("zoo-escape", &text, &[], Duration::from_secs(300));
        assert!(ran.success, "{algorithm} on {devices}: {}", ran.output);
        let score = summary_number(&run_dir, "final_score").unwrap();
        assert!(
            score >= 0.9,
            "{algorithm} on {devices}: final score {score}"
        );
        assert_nothing_left("zoo-escape", &ran.output);
    }
    let free = [
        "train.sampling=free".to_string(),
        "train.env-groups=2".to_string(),
    ];
    let text = escape(&python, ppo, "\"cpu\"");
    let (_, ran) = train_text("zoo-escape-free", &text, &free, Duration::from_secs(300));
    assert!(!ran.success);
    assert!(
        ran.output.contains("left it before the others")
            && ran.output.contains("set `env-groups 1`"),
        "{}",
        ran.output
    );
}

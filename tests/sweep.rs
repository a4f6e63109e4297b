//! `tandem sweep` end to end, the command the flake's sweep apps wrap: three seeds of a short
//! CartPole experiment (JSON variants, as the Nix library writes them), each in its own run
//! directory, and a table whose figures are those of each run's `summary.json`, with the mean
//! and its 95% Student-t interval computed here from those files.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

fn tandem() -> Command {
    let mut cmd = Command::new(TANDEM);
    cmd.env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_PORT")
        .env_remove("MASTER_ADDR");
    cmd
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The JSON of tests/configs/ppo-cartpole.kdl with `--set`s, written to `dir/file`.
fn variant(dir: &Path, file: &str, sets: &[String]) -> String {
    let config = format!(
        "{}/tests/configs/ppo-cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut cmd = tandem();
    cmd.args(["resolve", &config, "--format", "json"]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(file);
    std::fs::write(&path, &out.stdout).unwrap();
    path.display().to_string()
}

fn seeds(dir: &Path) -> Vec<String> {
    (1..=3)
        .map(|seed| {
            variant(
                dir,
                &format!("seed-{seed}.json"),
                &[
                    format!("seed={seed}"),
                    format!("name=\"cartpole-seed-{seed}\""),
                ],
            )
        })
        .collect()
}

/// The numbers of a table row's cells after the variant's name.
fn row<'t>(table: &'t str, name: &str) -> Vec<&'t str> {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{table}"));
    line.split_whitespace().skip(1).collect()
}

/// The 0.975 quantile of Student's t with 2 degrees of freedom (three seeds).
const T_975_DF2: f64 = 4.302_652_729_911_275;

#[test]
fn three_seeds_run_in_their_own_directories_and_the_table_matches_their_summaries() {
    let dir = fresh_dir("seeds");
    let files = seeds(&dir);
    let sweep_dir = dir.join("runs");
    let mut cmd = tandem();
    cmd.args([
        "sweep",
        "--name",
        "cartpole-seeds",
        "--max-steps",
        "4096",
        "--quiet",
        "--dir",
    ])
    .arg(&sweep_dir)
    .args(&files);
    let done = common::finish(
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(600),
    );
    assert!(done.status.success(), "{}", done.output);
    let table = std::fs::read_to_string(sweep_dir.join("sweep.txt")).unwrap();
    assert!(
        done.output.contains(&table),
        "the table is printed:\n{}",
        done.output
    );

    let mut returns = Vec::new();
    let mut hashes = Vec::new();
    for seed in 1..=3 {
        let name = format!("cartpole-seed-{seed}");
        let run_dir = sweep_dir.join(&name);
        let summary = |key: &str| common::summary_number(&run_dir, key).unwrap();
        let cells = row(&table, &name);
        assert_eq!(cells[0], seed.to_string(), "{table}");
        assert_eq!(cells[1].parse::<f64>().unwrap(), summary("global_step"));
        assert_eq!(cells[2].parse::<f64>().unwrap(), summary("episodes"));
        let score = summary("final_score");
        assert_eq!(cells[3], format!("{score:.3}"), "{table}");
        returns.push(score);
        let text = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
        hashes.push(text.split("\"config_hash\": ").nth(1).unwrap()[..66].to_string());
    }
    hashes.dedup();
    assert_eq!(hashes.len(), 3, "three different configs ran");
    let mean = returns.iter().sum::<f64>() / 3.0;
    let sd = (returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = T_975_DF2 * sd / 3f64.sqrt();
    assert!(half > 0.0, "three seeds gave the same return: {returns:?}");
    let expected = format!(
        "mean over seeds, n=3: {mean:.3} ± {half:.3} (95% Student-t interval [{:.3}, {:.3}])",
        mean - half,
        mean + half
    );
    // The table's t quantile has four decimals; allow the last printed digit to differ.
    let line = table
        .lines()
        .find(|l| l.starts_with("mean over seeds"))
        .unwrap();
    let numbers: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .filter_map(|w| w.parse().ok())
        .collect();
    let wanted: Vec<f64> = expected
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), wanted.len(), "{line}\n{expected}");
    for (got, want) in numbers.iter().zip(&wanted) {
        assert!((got - want).abs() <= 0.002, "{line}\nexpected {expected}");
    }
}

#[test]
fn a_variant_that_does_not_validate_stops_the_sweep_before_anything_runs() {
    let dir = fresh_dir("invalid");
    let mut files = seeds(&dir);
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        "{\"name\": \"bad\", \"env\": {\"game\": \"cartpole\", \"envz\": 2}}\n",
    )
    .unwrap();
    files.push(bad.display().to_string());
    let sweep_dir = dir.join("runs");
    let out = tandem()
        .args(["sweep", "--max-steps", "512", "--dir"])
        .arg(&sweep_dir)
        .args(&files)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The user's mistake, found before anything ran: exit 2, as `train`'s.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown setting `envz`"), "{err}");
    assert!(err.contains("bad.json:1:"), "{err}");
    assert!(err.contains("the sweep did not start"), "{err}");
    assert!(!sweep_dir.exists(), "a run started");
    // So are a --set of no setting and seeds that run backwards; `sweep --help` says so.
    for args in [vec!["--set", "algorithm.nope=1,2"], vec!["--seeds", "5..1"]] {
        let out = tandem()
            .arg("sweep")
            .args(&args)
            .arg("--dir")
            .arg(&sweep_dir)
            .arg(base_config())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!sweep_dir.exists(), "{args:?}: a run started");
    }
    let help = tandem().args(["sweep", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains(
            "2    a mistake on the command line, in a variant's config or in the --dir's"
        ),
        "{help}"
    );
}

/// The experiment the grid tests sweep.
fn base_config() -> String {
    format!(
        "{}/tests/configs/ppo-cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The width and height a PNG file states.
fn png_size(path: &Path) -> (u32, u32) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let info = png::Decoder::new(file).read_info().unwrap();
    (info.info().width, info.info().height)
}

#[test]
fn a_grid_of_values_and_seeds_runs_two_at_a_time_and_writes_its_curves_and_plot() {
    let dir = fresh_dir("grid");
    let base = base_config();
    let sweep_dir = dir.join("runs");
    let out = tandem()
        .args([
            "sweep",
            &base,
            "--seeds",
            "1..2",
            "--set",
            "algorithm.lr=1e-3,3e-4",
        ])
        .args([
            "--parallel",
            "2",
            "--max-steps",
            "4096",
            "--quiet",
            "--name",
            "grid",
            "--dir",
        ])
        .arg(&sweep_dir)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("4 variants in"), "{said}");
    let mut csv_rows = vec!["group,run,seed,step,score".to_string()];
    for (lr, label, canonical) in [
        ("1e-3", "lr 0.001", "lr 0.001"),
        ("3e-4", "lr 0.0003", "lr 0.0003"),
    ] {
        for seed in 1..=2 {
            let name = format!("ppo-cartpole-lr={lr}-seed{seed}");
            let run_dir = sweep_dir.join(&name);
            let resolved = std::fs::read_to_string(run_dir.join("resolved.kdl")).unwrap();
            assert!(
                resolved.contains(&format!("seed {seed}\n")),
                "{name}: {resolved}"
            );
            assert!(resolved.contains(canonical), "{name}: {resolved}");
            // Two at a time: each console went to its own file.
            assert!(
                sweep_dir.join(format!("{name}.console.log")).is_file(),
                "{name}"
            );
            // The run went to its end; its curve holds the episodes it finished (the last
            // update need not finish one).
            let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
            assert!(
                summary.contains("\"global_step\": 4096"),
                "{name}: {summary}"
            );
            let scores = common::jsonl_scalars(&run_dir, "episode/score_mean");
            assert!(
                scores.last().is_some_and(|s| s.0 > 2048 && s.0 <= 4096),
                "{name}: {scores:?}"
            );
            csv_rows.extend(
                scores
                    .iter()
                    .map(|(step, score)| format!("{label},{name},{seed},{step},{score}")),
            );
        }
    }
    let table = std::fs::read_to_string(sweep_dir.join("sweep.txt")).unwrap();
    assert!(table.contains("group 1 (lr 0.001), n=2: "), "{table}");
    assert!(table.contains("group 2 (lr 0.0003), n=2: "), "{table}");
    let csv = std::fs::read_to_string(sweep_dir.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().collect::<Vec<_>>(), csv_rows);
    assert_eq!(png_size(&sweep_dir.join("sweep.png")), (1000, 640));

    // `tandem plot` on the sweep's folder draws the same groups from the runs alone.
    let plotted = dir.join("again.png");
    let out = tandem()
        .arg("plot")
        .arg(&sweep_dir)
        .arg("-o")
        .arg(&plotted)
        .arg("--csv")
        .arg(dir.join("again.csv"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.join("again.csv")).unwrap(), csv);
    assert_eq!(png_size(&plotted), (1000, 640));
    assert!(said.contains("lr 0.001: "), "{said}");
    assert!(
        said.contains("final score: mean game score of the last 100 episodes"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_variant_twice_gets_two_run_directories() {
    let dir = fresh_dir("twice");
    let base = base_config();
    let sweep_dir = dir.join("runs");
    let out = tandem()
        .args([
            "sweep",
            &base,
            &base,
            "--max-steps",
            "512",
            "--quiet",
            "--dir",
        ])
        .arg(&sweep_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["ppo-cartpole-seed1-1", "ppo-cartpole-seed1-2"] {
        assert!(
            sweep_dir.join(name).join("summary.json").is_file(),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep of `tests/configs/ppo-cartpole.kdl` over `seeds`, one variant at a time unless
/// `parallel`, checkpointing every two updates, into `dir`.
fn stoppable_sweep(dir: &Path, seeds: &str, parallel: &str, extra: &[&str]) -> Command {
    let mut cmd = tandem();
    cmd.args(["sweep", "--quiet", "--seeds", seeds, "--parallel", parallel])
        .args(["--set", "checkpoint.every=2", "--dir"])
        .arg(dir)
        .args(extra)
        .arg(base_config())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Waits (at most a minute) until `run_dir` holds a checkpoint.
fn wait_for_checkpoint(run_dir: &Path) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let written = std::fs::read_dir(run_dir.join("checkpoints")).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "pt"))
        });
        if written {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} wrote no checkpoint in a minute", run_dir.display());
}

/// The rows of a sweep's table, without the line that names its folder.
fn rows(dir: &Path) -> Vec<String> {
    let table = std::fs::read_to_string(dir.join("sweep.txt")).unwrap();
    table.lines().skip(1).map(String::from).collect()
}

/// SIGTERM to a sweep (a scheduler's notice): the running variant checkpoints, no other starts,
/// the table is written with what finished, what stopped and what never started, and the exit is
/// 75 as `train`'s. `--resume` then keeps what finished and ends with the table of a sweep that
/// was never stopped: the same steps, episodes and final score for every variant.
#[test]
fn a_sweep_stopped_by_sigterm_exits_75_and_its_resume_ends_as_an_unstopped_sweep() {
    let dir = fresh_dir("sigterm");
    let (stopped, unstopped) = (dir.join("stopped"), dir.join("unstopped"));
    let limit = ["--max-steps", "60000"];
    let sweep = stoppable_sweep(&stopped, "1..3", "1", &limit)
        .spawn()
        .unwrap();
    wait_for_checkpoint(&stopped.join("ppo-cartpole-seed2"));
    common::send_signal(sweep.id(), libc::SIGTERM);
    let done = common::finish(sweep, Duration::from_secs(120));
    assert_eq!(done.status.code(), Some(75), "{}", done.output);
    let table = rows(&stopped);
    let row = |table: &[String], name: &str| {
        table
            .iter()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {table:#?}"))
            .clone()
    };
    let first = row(&table, "ppo-cartpole-seed1");
    assert!(
        row(&table, "ppo-cartpole-seed2").ends_with("stopped"),
        "{table:#?}"
    );
    assert!(
        row(&table, "ppo-cartpole-seed3").ends_with("not started"),
        "{table:#?}"
    );
    assert!(!stopped.join("ppo-cartpole-seed3").exists());
    assert!(
        stopped.join("sweep.csv").is_file(),
        "the curves of what ran are written"
    );

    let mut resume = tandem();
    resume
        .args(["sweep", "--quiet", "--resume"])
        .arg(&stopped)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let done = common::finish(resume.spawn().unwrap(), Duration::from_secs(300));
    assert!(done.status.success(), "{}", done.output);
    assert!(
        done.output
            .contains("continued: 1 finished before, 2 to run"),
        "{}",
        done.output
    );
    let resumed = rows(&stopped);
    assert_eq!(
        row(&resumed, "ppo-cartpole-seed1"),
        first,
        "a finished variant reran"
    );

    let sweep = stoppable_sweep(&unstopped, "1..3", "1", &limit)
        .spawn()
        .unwrap();
    let done = common::finish(sweep, Duration::from_secs(300));
    assert!(done.status.success(), "{}", done.output);
    assert_eq!(resumed, rows(&unstopped));
}

/// The pids of the processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

/// kill -9 of a sweep (nothing of it can run): its members still stop, each with a checkpoint,
/// within 10 s; the same command again continues them to their end.
#[test]
fn a_sweep_killed_leaves_no_member_running_and_the_same_command_continues_it() {
    let dir = fresh_dir("sigkill").join("runs");
    let sweep = stoppable_sweep(&dir, "1..2", "2", &[]).spawn().unwrap();
    for seed in [1, 2] {
        wait_for_checkpoint(&dir.join(format!("ppo-cartpole-seed{seed}")));
    }
    common::send_signal(sweep.id(), libc::SIGKILL);
    let done = common::finish(sweep, Duration::from_secs(30));
    assert_eq!(done.status.code(), None, "killed: {}", done.output);
    let start = std::time::Instant::now();
    while !processes_naming(&dir).is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        processes_naming(&dir),
        Vec::<String>::new(),
        "members outlived their sweep"
    );
    for seed in [1, 2] {
        let run_dir = dir.join(format!("ppo-cartpole-seed{seed}"));
        assert_eq!(
            common::summary_number(&run_dir, "restarts"),
            Some(0.0),
            "seed {seed}"
        );
        let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
        assert!(
            summary.contains("\"interrupted\": true"),
            "seed {seed} was not asked to checkpoint and stop: {summary}"
        );
    }
    let again = stoppable_sweep(&dir, "1..2", "2", &[]).spawn().unwrap();
    let done = common::finish(again, Duration::from_secs(300));
    assert!(done.status.success(), "{}", done.output);
    for seed in [1, 2] {
        let run_dir = dir.join(format!("ppo-cartpole-seed{seed}"));
        assert_eq!(common::summary_number(&run_dir, "restarts"), Some(1.0));
        assert_eq!(
            common::summary_number(&run_dir, "global_step"),
            Some(200192.0)
        );
    }
}

/// Ctrl-C: exit 130 as `train`'s, the table written; the folder's record then refuses another
/// plan (exit 2, nothing runs) and takes the same one.
#[test]
fn ctrl_c_stops_a_sweep_with_130_and_its_folder_takes_only_the_same_sweep_again() {
    let dir = fresh_dir("sigint").join("runs");
    let limit = ["--max-steps", "20000"];
    let sweep = stoppable_sweep(&dir, "1..2", "1", &limit).spawn().unwrap();
    wait_for_checkpoint(&dir.join("ppo-cartpole-seed1"));
    common::send_signal(sweep.id(), libc::SIGINT);
    let done = common::finish(sweep, Duration::from_secs(120));
    assert_eq!(done.status.code(), Some(130), "{}", done.output);
    let table = rows(&dir).join("\n");
    assert!(
        table.contains("stopped") && table.contains("not started"),
        "{table}"
    );
    assert!(table.contains("tandem sweep --resume"), "{table}");

    let other = stoppable_sweep(&dir, "1..3", "1", &limit).output().unwrap();
    let err = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{err}");
    assert!(err.contains("holds another sweep"), "{err}");
    assert!(!dir.join("ppo-cartpole-seed3").exists());

    let same = stoppable_sweep(&dir, "1..2", "1", &limit).spawn().unwrap();
    let done = common::finish(same, Duration::from_secs(300));
    assert!(done.status.success(), "{}", done.output);
    assert!(!rows(&dir).join("\n").contains("stopped"));
}

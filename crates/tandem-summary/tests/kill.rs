//! A process that dies without cleaning up (SIGKILL, or `exit` on a failure
//! path, which skips destructors) still leaves an event file that reads back
//! up to its last logged event, in Rust and in TensorBoard.
//!
//! The child processes are this test binary itself, re-run with an
//! environment variable that turns `child_process_entry` into the writer.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{only_event_file, scratch_dir, tensorboard_reading};
use tandem_summary::SummaryWriter;
use tandem_summary::reader::{read_event_file, scalars};

const CHILD_DIR_VAR: &str = "TANDEM_SUMMARY_TEST_CHILD_DIR";
const CHILD_MODE_VAR: &str = "TANDEM_SUMMARY_TEST_CHILD_MODE";
/// Steps the failure-exit child logs before calling `exit`.
const STEPS_BEFORE_EXIT: i64 = 50;
/// Steps the parent waits to see acknowledged before killing the child.
const STEPS_BEFORE_KILL: i64 = 300;
/// A child left running by a failed parent stops by itself after this.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

/// Not a test of its own: the body of the child processes.
#[test]
fn child_process_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let mode = std::env::var(CHILD_MODE_VAR).unwrap();
    // The test harness has printed "test child_process_entry ... " without a
    // newline; start the reports on a line of their own.
    println!();
    if mode == "file-size-limit" {
        write_until_the_file_size_limit(Path::new(&dir));
        return;
    }
    let mut writer = SummaryWriter::create(Path::new(&dir)).unwrap();
    writer.text("config", 0, "child").unwrap();
    let started = Instant::now();
    let mut step = 0i64;
    while started.elapsed() < CHILD_LIFETIME {
        writer.scalar("child/step", step, step as f64).unwrap();
        if step % 7 == 0 {
            let values: Vec<f32> = (0..64).map(|i| (i * step) as f32).collect();
            writer.histogram("child/values", step, &values).unwrap();
        }
        // Only events acknowledged here were certainly logged before the kill.
        println!("logged {step}");
        if mode == "exit" && step + 1 == STEPS_BEFORE_EXIT {
            // As a failing trainer might: no destructor, no flush.
            std::process::exit(3);
        }
        step += 1;
    }
}

/// Logs scalars under a small RLIMIT_FSIZE until writing fails, reporting
/// the step and error; the failing write is cut short by the limit part way
/// through a record.
fn write_until_the_file_size_limit(dir: &Path) {
    let mut writer = SummaryWriter::create(dir).unwrap();
    // SAFETY: plain libc calls with valid arguments. Ignoring SIGXFSZ turns
    // writes past the limit into EFBIG errors instead of killing the process.
    unsafe {
        assert_ne!(libc::signal(libc::SIGXFSZ, libc::SIG_IGN), libc::SIG_ERR);
        let mut limit: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        limit.rlim_cur = FILE_SIZE_LIMIT;
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    for step in 0.. {
        if let Err(error) = writer.scalar("child/step", step, step as f64) {
            println!("failed at {step}: {error}");
            // Later records must still land whole after the cut-back.
            assert!(writer.scalar("child/step", step, step as f64).is_err());
            return;
        }
    }
}

const FILE_SIZE_LIMIT: libc::rlim_t = 4096;

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(dir: &Path, mode: &str) -> KillOnDrop {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_VAR, dir)
        .env(CHILD_MODE_VAR, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    KillOnDrop(child)
}

/// Steps of "child/step" in the file, checking they run 0, 1, 2, ... with
/// nothing missing and no damaged record.
fn logged_steps(path: &Path) -> Vec<i64> {
    let file = read_event_file(path).unwrap();
    let steps: Vec<i64> = scalars(&file.events)
        .into_iter()
        .filter(|p| p.tag == "child/step")
        .map(|p| {
            assert_eq!(p.value, p.step as f32);
            p.step
        })
        .collect();
    for (expected, step) in steps.iter().enumerate() {
        assert_eq!(*step, expected as i64, "steps are contiguous from 0");
    }
    steps
}

#[test]
fn sigkill_leaves_every_acknowledged_event_readable() {
    let dir = scratch_dir("sigkill");
    let mut child = spawn_child(&dir, "run");
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut last_acknowledged = -1;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(step) = line.strip_prefix("logged ") {
            last_acknowledged = step.parse().unwrap();
            if last_acknowledged >= STEPS_BEFORE_KILL {
                break;
            }
        }
    }
    assert!(
        last_acknowledged >= STEPS_BEFORE_KILL,
        "child stopped early"
    );
    // Child::kill sends SIGKILL; the child is still writing at this moment.
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert!(!status.success());

    let path = only_event_file(&dir);
    let steps = logged_steps(&path);
    let last_in_file = *steps.last().unwrap();
    assert!(
        last_in_file >= last_acknowledged,
        "file ends at step {last_in_file}, child had logged {last_acknowledged}"
    );

    let Some(reading) = tensorboard_reading(&dir) else {
        return;
    };
    let tensorboard_steps: Vec<i64> = reading["accumulator"]["scalars"]["child/step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point[0].as_i64().unwrap())
        .collect();
    assert_eq!(tensorboard_steps, steps);
    assert_eq!(reading["provider"]["text"]["config"][0][1], "child");
}

#[test]
fn exit_without_destructors_loses_no_event() {
    let dir = scratch_dir("exit");
    let mut child = spawn_child(&dir, "exit");
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let path = only_event_file(&dir);
    let steps = logged_steps(&path);
    assert_eq!(steps.len() as i64, STEPS_BEFORE_EXIT);
    assert_eq!(read_event_file(&path).unwrap().incomplete_tail, 0);
}

#[test]
fn a_file_cut_mid_record_reads_up_to_the_last_whole_record() {
    let written = scratch_dir("cut-source");
    let mut writer = SummaryWriter::create(&written).unwrap();
    for step in 0..10 {
        writer.scalar("child/step", step, step as f64).unwrap();
    }
    let path = writer.path().to_path_buf();
    writer.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();

    // As if killed part way through writing the last record.
    let cut = scratch_dir("cut");
    let cut_path = cut.join(path.file_name().unwrap());
    std::fs::write(&cut_path, &bytes[..bytes.len() - 5]).unwrap();
    let file = read_event_file(&cut_path).unwrap();
    assert!(file.incomplete_tail > 0);
    assert_eq!(logged_steps(&cut_path), (0..9).collect::<Vec<_>>());

    let Some(reading) = tensorboard_reading(&cut) else {
        return;
    };
    let steps: Vec<i64> = reading["accumulator"]["scalars"]["child/step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point[0].as_i64().unwrap())
        .collect();
    assert_eq!(steps, (0..9).collect::<Vec<_>>());
}

#[test]
fn a_failed_write_is_an_error_and_leaves_no_partial_record() {
    let dir = scratch_dir("file-size-limit");
    let mut child = spawn_child(&dir, "file-size-limit");
    let mut stdout = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(child.0.wait().unwrap().success(), "child failed: {stdout}");
    let report = stdout
        .lines()
        .find_map(|line| line.strip_prefix("failed at "))
        .unwrap_or_else(|| panic!("child reported no failure: {stdout}"));
    let (step, message) = report.split_once(": ").unwrap();
    let failed_step: i64 = step.parse().unwrap();
    assert!(message.contains("writing an event to"), "{message}");

    let path = only_event_file(&dir);
    let file = read_event_file(&path).unwrap();
    assert_eq!(file.incomplete_tail, 0, "the partial record was cut off");
    assert!(std::fs::metadata(&path).unwrap().len() <= FILE_SIZE_LIMIT);
    assert_eq!(logged_steps(&path), (0..failed_step).collect::<Vec<_>>());
}

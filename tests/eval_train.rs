//! Evaluation during training (the `eval` section) with the `tandem` binary and real ranks:
//! both ranks evaluate after the same updates and see the same scores, rank 0 reports them
//! (TensorBoard, as TensorBoard itself reads it; scalars.jsonl; summary.json), records an
//! evaluation episode as a GIF in the run directory and in TensorBoard, and keeps the best
//! checkpoint apart, `play --checkpoint best` plays it, and an interrupt that lands in an
//! evaluation stops the run as any interrupt does.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::binary::*;
use common::{summary_number, wait_for, wait_or_kill};

/// The `eval at step …` lines of a rank's log, without their time stamps.
fn eval_lines(run_dir: &Path, rank: usize) -> Vec<String> {
    let log = std::fs::read_to_string(run_dir.join(format!("logs/rank-{rank}.log"))).unwrap();
    log.lines()
        .filter_map(|l| l.find("eval at step ").map(|at| l[at..].to_string()))
        .collect()
}

/// What `script` prints, run by TensorBoard's venv with the run directory and `tag` as its
/// arguments and `ea` the run's event file loaded; `None` (after the tools rule) without the venv.
fn tensorboard(run_dir: &Path, tag: &str, script: &str) -> Option<String> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/venv-tb/bin/python");
    if !python.exists() {
        common::tools::tool_missing(
            &python.display().to_string(),
            "the TensorBoard read-back of evaluations",
            "scripts/setup --test makes it",
        );
        return None;
    }
    let load = r#"
import glob, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
files = glob.glob(sys.argv[1] + "/tensorboard/events.out.tfevents.*")
ea = EventAccumulator(files[0], size_guidance={"scalars": 0, "images": 0})
ea.Reload()
"#;
    let out = Command::new(&python)
        .arg("-c")
        .arg(format!("{load}{script}"))
        .arg(run_dir)
        .arg(tag)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The steps TensorBoard's own reader finds for the scalar `tag`.
fn tensorboard_steps(run_dir: &Path, tag: &str) -> Option<Vec<i64>> {
    let script = r#"print(" ".join(str(e.step) for e in ea.Scalars(sys.argv[2])))"#;
    let steps = tensorboard(run_dir, tag, script)?;
    Some(
        steps
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect(),
    )
}

/// `(step, bytes, is a GIF)` of each image TensorBoard's own reader finds for `tag`.
fn tensorboard_images(run_dir: &Path, tag: &str) -> Option<Vec<(i64, usize, bool)>> {
    let script = r#"
for e in ea.Images(sys.argv[2]):
    print(e.step, len(e.encoded_image_string), e.encoded_image_string[:6] == b"GIF89a")
"#;
    let text = tensorboard(run_dir, tag, script)?;
    let image = |line: &str| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2] == "True")
    };
    Some(text.lines().map(image).collect())
}

/// CartPole PPO on two ranks, evaluated every 10 updates (of 256 steps) with 5 episodes,
/// which split 3 and 2 over the ranks.
#[test]
fn two_ranks_evaluate_after_the_same_updates_and_keep_the_best_checkpoint() {
    let dir = fresh_dir("eval-2");
    let sets = [
        "devices=cpu cpu",
        "train.max-steps=40960",
        "eval.every=10",
        "eval.episodes=5",
        "eval.video-every=8",
    ];
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &sets,
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    let means = common::jsonl_scalars(&dir, "eval/score_mean");
    let steps: Vec<u64> = means.iter().map(|(s, _)| *s).collect();
    let expected: Vec<u64> = (1..=16).map(|k| k * 10 * 256).collect();
    assert_eq!(steps, expected, "evaluations at every 10th update");
    if let Some(tb) = tensorboard_steps(&dir, "eval/score_mean") {
        assert_eq!(tb, expected.iter().map(|&s| s as i64).collect::<Vec<_>>());
    }
    // The first evaluation and every 8th after it are recorded: a GIF in videos/ and the same
    // bytes as the image eval/video, which TensorBoard's own reader finds.
    let videos = ["eval-000002560.gif", "eval-000023040.gif"];
    let mut listed: Vec<String> = std::fs::read_dir(dir.join("videos"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, videos);
    let gif = std::fs::read(dir.join("videos").join(videos[1])).unwrap();
    assert!(
        gif.starts_with(b"GIF89a") && gif.len() > 10_000,
        "{} bytes",
        gif.len()
    );
    if let Some(images) = tensorboard_images(&dir, "eval/video") {
        assert_eq!(images.len(), 2, "{images:?}");
        assert_eq!(images[1], (23040, gif.len(), true), "{images:?}");
    }
    let (rank0, rank1) = (eval_lines(&dir, 0), eval_lines(&dir, 1));
    assert_eq!(rank0.len(), 16, "{rank0:?}");
    assert_eq!(rank0, rank1, "the ranks saw different evaluations");
    assert!(rank0[0].contains("over 5 episodes"), "{rank0:?}");
    // The best mean is summary.json's and the best checkpoint's.
    let (best_step, best) = means
        .iter()
        .copied()
        .fold((0, f64::MIN), |b, (s, m)| if m > b.1 { (s, m) } else { b });
    assert_eq!(summary_number(&dir, "eval_best_score_mean"), Some(best));
    assert_eq!(
        summary_number(&dir, "eval_best_step"),
        Some(best_step as f64)
    );
    assert_eq!(summary_number(&dir, "eval_step"), Some(40960.0));
    assert!(
        best > 100.0,
        "CartPole evaluates at {best} at best within 160 updates"
    );
    let best_file = dir.join("checkpoints/best.pt");
    assert!(best_file.exists());
    let mut play = tandem();
    play.arg("play")
        .arg(&dir)
        .args(["--checkpoint", "best", "--greedy", "--episodes", "2"]);
    let played = run(&mut play, Duration::from_secs(60));
    assert!(played.status.success(), "{}", text(&played));
    // Rolling checkpoints leave it alone; a run without evaluation has none to play.
    let plain = fresh_dir("eval-none");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &plain,
        &["train.max-steps=8192"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut play = tandem();
    play.arg("play").arg(&plain).args(["--checkpoint", "best"]);
    let refused = run(&mut play, Duration::from_secs(60));
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("holds no best checkpoint") && text(&refused).contains("eval"),
        "{}",
        text(&refused)
    );
    // The flag's old spelling is refused with the new one, not taken as the newest checkpoint.
    let mut play = tandem();
    play.arg("play").arg(&dir).arg("--best");
    let old = run(&mut play, Duration::from_secs(60));
    assert!(!old.status.success());
    assert!(
        text(&old).contains("--best is now spelled --checkpoint best"),
        "{}",
        text(&old)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&plain);
}

/// Ctrl-C while both ranks evaluate (MountainCar's untrained policy plays every evaluation
/// episode to its 20,000-step cut): the evaluation ends, then the run stops as an interrupted
/// run does, with its checkpoint and summary, exit 130, nothing hung.
#[test]
fn an_interrupt_during_an_evaluation_stops_the_run_as_any_interrupt_does() {
    let dir = fresh_dir("eval-interrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let text_config = r#"experiment "eval-interrupt" {
    devices "cpu" "cpu"
    threads 1
    algorithm "ppo"
    env "mountain-car" { envs 4; }
    train { total-steps 10_000_000; rollout 32 }
    eval { every 1; episodes 8; max-episode-steps 20_000 }
}
"#;
    let console = std::fs::File::create(dir.join("console.txt")).unwrap();
    let mut launcher = tandem()
        .args(["train", "-", "--quiet", "--run-dir"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(console)
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = launcher.stdin.take().unwrap();
        stdin.write_all(text_config.as_bytes()).unwrap();
    }
    let log = dir.join("logs/rank-0.log");
    wait_for("the first evaluation", Duration::from_secs(60), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("evaluating at step"))
    });
    common::send_signal(launcher.id(), libc::SIGINT);
    let status = wait_or_kill(&mut launcher, Duration::from_secs(120));
    let console = std::fs::read_to_string(dir.join("console.txt")).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{console}");
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"interrupted\": true"), "{summary}");
    assert!(
        eval_lines(&dir, 0)
            .first()
            .is_some_and(|l| l.contains("over 8 episodes")),
        "the evaluation that was running finished: {:?}",
        eval_lines(&dir, 0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tandem play` acts as evaluation during training does, by one rule (the experiment's
/// `eval.deterministic`, `#true` by default, unless `--greedy` or `--sample`), and both say
/// which: a discrete policy plays greedily by default, and samples by default in a run that
/// evaluates with `deterministic #false`.
#[test]
fn play_and_evaluation_act_alike_by_default_and_say_how() {
    let played = |dir: &Path, flag: Option<&str>| {
        let mut play = tandem();
        play.arg("play").arg(dir).args(["--episodes", "2"]);
        play.args(flag);
        let out = run(&mut play, Duration::from_secs(60));
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (deterministic, acting, same_as) in [
        ("#true", "greedy", "--greedy"),
        ("#false", "sampled", "--sample"),
    ] {
        let dir = fresh_dir(&format!("play-acting-{acting}"));
        let sets = [
            "train.max-steps=4096",
            "eval.every=4",
            &format!("eval.deterministic={deterministic}"),
        ];
        let out = train(
            &config("ppo-cartpole.kdl"),
            &dir,
            &sets,
            Duration::from_secs(60),
        );
        assert!(out.status.success(), "{}", text(&out));
        let lines = eval_lines(&dir, 0);
        assert!(
            !lines.is_empty()
                && lines
                    .iter()
                    .all(|l| l.contains(&format!("episodes, {acting} (best"))),
            "{lines:?}"
        );
        let default = played(&dir, None);
        assert!(
            default.starts_with(&format!(
                "acting {acting} (the experiment's eval.deterministic"
            )),
            "{default}"
        );
        let chosen = played(&dir, Some(same_as));
        assert!(
            chosen.starts_with(&format!("acting {acting} ({same_as})")),
            "{chosen}"
        );
        // The same episodes: the default is the rule, not another way of acting.
        let episodes = |out: &str| out.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(episodes(&default), episodes(&chosen));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

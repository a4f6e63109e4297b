//! Populations through the built binary (docs/population.md): each member trained by its own
//! ranks is exactly the run its `resolved.kdl` describes where no member copies another, and
//! population-based training exploits at the same steps on every rank, reproducibly.

mod common;

use std::path::Path;
use std::time::Duration;

use common::binary::*;

fn population(dir: &Path, config: &str) {
    let file = dir.with_extension("kdl");
    std::fs::write(&file, config).unwrap();
    let mut cmd = tandem();
    cmd.arg("train").arg(&file).arg("--run-dir").arg(dir);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
}

/// The newest checkpoint of a run directory, as bytes.
fn newest_checkpoint(dir: &Path) -> Vec<u8> {
    let mut found: Vec<_> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt"))
        .collect();
    found.sort();
    std::fs::read(found.last().expect("a checkpoint")).unwrap()
}

/// The networks' and optimiser's tensors of one checkpoint file, as bytes by name.
fn learner_state(file: &Path) -> Vec<(String, Vec<u8>)> {
    let tensors = common::checkpoint_tensors(file).into_iter();
    let learner = |name: &str| name.starts_with("model.") || name.starts_with("optimizer");
    tensors.filter(|(name, _)| learner(name)).collect()
}

/// `config` trained in a fresh directory `name` up to `max_steps`, as a stopped job leaves it.
fn stopped_at(name: &str, config: &str, max_steps: u64) -> std::path::PathBuf {
    let dir = fresh_dir(name);
    let set = format!("train.max-steps={max_steps}");
    let out = train_text(config, &dir, &[set.as_str()], Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    dir
}

const TWO_BY_TWO: &str = r#"experiment "members" {
    devices count=4 kind="cpu"
    algorithm "ppo"
    env "cartpole" { envs 4; }
    train { total-steps 12288; }
    log { console "plain"; }
    population {
        members 2
        period 4096
        exploit 0
        explore { algorithm.lr factor=1.25 min=1e-4 max=1e-2; }
    }
}
"#;

/// Two members of two ranks each, with no exchange: member 1's checkpoint is byte for byte that
/// of its `resolved.kdl` trained alone on two ranks, so no gradient of member 0 reached its
/// all-reduce (a sum over the wrong ranks would change every parameter), and the two members
/// differ (their own seeds and learning rates).
#[test]
fn a_member_that_copies_nobody_is_the_run_its_start_describes() {
    let dir = fresh_dir("population-2x2");
    population(&dir, TWO_BY_TWO);
    let alone = fresh_dir("population-2x2-alone");
    let out = train(
        dir.join("members/1/resolved.kdl").to_str().unwrap(),
        &alone,
        &[],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    let member = newest_checkpoint(&dir.join("members/1"));
    assert!(
        member == newest_checkpoint(&alone),
        "member 1 differs from its run alone"
    );
    assert!(
        member != newest_checkpoint(&dir.join("members/0")),
        "the members trained alike"
    );
    let start = std::fs::read_to_string(dir.join("members/1/resolved.kdl")).unwrap();
    assert!(start.contains("devices \"cpu\" \"cpu\"\n"), "{start}");
    assert!(start.contains("members #null"), "{start}");
}

const FOUR: &str = r#"experiment "pbt" {
    devices count=4 kind="cpu"
    algorithm "ppo"
    env "cartpole" { envs 4; }
    train { total-steps 20480; }
    log { console "plain"; }
    checkpoint { every 8; keep 10; }
    population {
        members 4
        period 4096
        explore {
            algorithm.lr factor=1.25 min=1e-4 max=1e-2
            algorithm.entropy-coef 0 0.001 0.01
        }
    }
}
"#;

/// Four members of one rank: an exploit after each period's update (steps 4096, 8192, ...), in
/// which the bottom quarter (one member) copies the top one and moves its hyperparameters by
/// the rules; each member logs the values it trains with; and the same seed gives the same
/// lineage and the same members, byte for byte.
#[test]
fn four_members_exploit_at_the_same_steps_and_reproduce() {
    let dir = fresh_dir("population-4x1");
    population(&dir, FOUR);
    let lines = lineage(&dir);
    let (start, exploits): (Vec<_>, Vec<_>) = lines.iter().partition(|l| l["exploit"].is_null());
    assert_eq!(start.len(), 4);
    // 20480 steps of 512 an update: periods end at 4096, 8192, 12288 and 16384 (the last
    // update, 20480, exploits no more).
    assert_eq!(exploits.len(), 4 * 4, "{lines:?}");
    for (i, group) in exploits.chunks(4).enumerate() {
        let step = 4096 * (i as u64 + 1);
        assert!(
            group.iter().all(|l| l["step"] == step && l["exploit"] == i),
            "{group:?}"
        );
        let copied: Vec<_> = group
            .iter()
            .filter(|l| l["source"] != l["member"])
            .collect();
        assert_eq!(
            copied.len(),
            1,
            "one member in four copies another: {group:?}"
        );
        let (copy, source) = (
            copied[0],
            &group[copied[0]["source"].as_u64().unwrap() as usize],
        );
        let score = |l: &serde_json::Value| l["objective"].as_f64().unwrap_or(f64::NEG_INFINITY);
        assert!(
            group.iter().all(|l| score(copy) <= score(l)),
            "the worst copies: {group:?}"
        );
        assert!(
            group.iter().all(|l| score(source) >= score(l)),
            "from the best: {group:?}"
        );
        let lr = |l: &serde_json::Value| l["values"]["algorithm.lr"].as_f64().unwrap();
        let ratio = lr(copy) / lr(source);
        let moved = [1.25, 0.8].iter().any(|f| (ratio - f).abs() < 1e-9);
        let clamped = [1e-4, 1e-2].contains(&lr(copy));
        assert!(
            moved || clamped,
            "lr moves by the factor: {copy} from {source}"
        );
    }
    // A checkpoint of the update that exploits is written after the exchange: the copy holds
    // its source's networks and optimiser state exactly.
    for (i, group) in exploits.chunks(4).enumerate() {
        let copy = group.iter().find(|l| l["source"] != l["member"]).unwrap();
        let at = |member: &serde_json::Value| {
            let name = format!("members/{member}/checkpoints/ckpt-{:09}.pt", 8 * (i + 1));
            learner_state(&dir.join(name))
        };
        assert!(
            at(&copy["member"]) == at(&copy["source"]),
            "exploit {i}: {copy}"
        );
        let other = group
            .iter()
            .find(|l| l["member"] != copy["source"] && l["member"] != copy["member"]);
        assert!(
            at(&other.unwrap()["member"]) != at(&copy["source"]),
            "members differ"
        );
    }
    // The copying member trains with what the lineage says from that step on.
    let last = &exploits[exploits.len() - 4..];
    let copy = last.iter().find(|l| l["source"] != l["member"]).unwrap();
    let member = copy["member"].as_u64().unwrap();
    let logged = deterministic_scalars(&dir.join(format!("members/{member}")));
    let lr = (copy["values"]["algorithm.lr"].as_f64().unwrap() as f32).to_bits();
    assert!(
        logged.contains(&("population/algorithm.lr".into(), 16384, lr)),
        "member {member} logs the learning rate it goes on with at the exploit"
    );
    // A member is played, exported and plotted as a run; the population names its members.
    let mut play = tandem();
    play.arg("play").arg(&dir).args(["--episodes", "2"]);
    let out = run(&mut play, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("is a population: its members are the runs"),
        "{}",
        text(&out)
    );
    let mut play = tandem();
    play.arg("play")
        .arg(dir.join("members/3"))
        .args(["--episodes", "2"]);
    let out = run(&mut play, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let figure = dir.join("members.svg");
    let mut plot = tandem();
    plot.arg("plot").arg(&dir).arg("-o").arg(&figure);
    let out = run(&mut plot, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&figure).unwrap();
    assert_eq!(svg.matches("(1 seed)").count(), 4, "a curve a member");
    let again = fresh_dir("population-4x1-again");
    population(&again, FOUR);
    assert_eq!(lines, lineage(&again));
    for k in 0..4 {
        let member = format!("members/{k}");
        assert!(newest_checkpoint(&dir.join(&member)) == newest_checkpoint(&again.join(&member)));
    }
}

/// Stopped at 10240 steps (between exploits) and resumed, the population ends as the
/// uninterrupted one: the same lineage, every member's networks and optimiser the same, the
/// same final scores.
#[test]
fn a_stopped_population_resumes_where_it_stopped() {
    let whole = fresh_dir("population-whole");
    population(&whole, FOUR);
    let dir = stopped_at("population-stopped", FOUR, 10240);
    assert!(
        lineage(&dir)
            .iter()
            .all(|l| l["step"].as_u64().unwrap() <= 8192)
    );
    let mut cmd = tandem();
    cmd.arg("train")
        .arg("--resume")
        .arg(&dir)
        .args(["--set", "train.max-steps=#null"]);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(lineage(&dir), lineage(&whole));
    for k in 0..4 {
        let at =
            |d: &Path| learner_state(&d.join(format!("members/{k}/checkpoints/ckpt-000000040.pt")));
        assert!(
            at(&dir) == at(&whole),
            "member {k} differs from the uninterrupted run's"
        );
    }
    let scores = |d: &Path| {
        let text = std::fs::read_to_string(d.join("summary.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["member_final_scores"].clone()
    };
    assert_eq!(scores(&dir), scores(&whole));
}

/// Two members of two ranks stopped, then resumed on two devices: the members regroup to one
/// rank each and train on from their checkpoints, exploiting at the periods left.
#[test]
fn a_population_resumes_on_another_number_of_ranks() {
    let config = TWO_BY_TWO.replace("exploit 0", "exploit 0.5");
    let dir = stopped_at("population-regroup", &config, 6144);
    // Another config is refused, naming what differs from the population's.
    let mut cmd = tandem();
    cmd.arg("train")
        .arg("--resume")
        .arg(&dir)
        .args(["--set", "population.period=2048"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let refusal = text(&out);
    assert!(
        refusal.contains("differs from the population's"),
        "{refusal}"
    );
    assert!(
        refusal.contains("population.period: 4096 -> 2048"),
        "{refusal}"
    );
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir);
    cmd.args([
        "--set",
        "train.max-steps=#null",
        "--set",
        "devices=\"cpu\" \"cpu\"",
    ]);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    let console = text(&out);
    assert!(
        console.contains("population finished: 2 members of 12288 steps each"),
        "{console}"
    );
    let steps: Vec<u64> = lineage(&dir)
        .iter()
        .filter(|l| !l["exploit"].is_null())
        .map(|l| l["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [4096, 4096, 8192, 8192]);
    let log = std::fs::read_to_string(
        dir.join("members/1/checkpoints")
            .parent()
            .unwrap()
            .join("summary.json"),
    )
    .unwrap();
    assert!(log.contains("\"world_size\": 1"), "{log}");
}

/// The shipped example's claim (experiments/cartpole-pbt.kdl, seed 1): PBT lifts the median
/// member to 421.9, where the same population without exchange leaves it at 213.1.
#[test]
fn the_shipped_pbt_example_lifts_its_median_member() {
    let example = format!(
        "{}/experiments/cartpole-pbt.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let median = |exploit: &str| {
        let dir = fresh_dir(&format!("population-example-{exploit}"));
        let sets = [
            format!("population.exploit={exploit}"),
            "log.console=plain".into(),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let out = train(&example, &dir, &sets, Duration::from_secs(600));
        assert!(out.status.success(), "{}", text(&out));
        let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut scores: Vec<f64> = (summary["member_final_scores"].as_array().unwrap().iter())
            .map(|s| s.as_f64().unwrap())
            .collect();
        scores.sort_by(f64::total_cmp);
        (scores[1] + scores[2]) / 2.0
    };
    let (pbt, fixed) = (median("0.25"), median("0"));
    assert!(pbt >= 400.0, "PBT's median member {pbt}");
    assert!(
        fixed < 300.0,
        "the fixed population's median member {fixed}"
    );
}

/// A rank of a population that dies stops the job as a run's does: its name and cause, the
/// others stopped within the collective timeout, no worker left behind.
#[test]
fn a_killed_member_rank_stops_the_population_with_its_name() {
    killing_a_rank_of_a_run_stops_the_job_with_its_name(
        "population-killed",
        1,
        &["population.members=2"],
    );
}

/// Ctrl-C stops every member after the same update with a checkpoint each (exit 130), and the
/// population resumes from them.
#[test]
fn an_interrupted_population_stops_together_and_resumes() {
    let (dir, stopped_at) = ctrl_c_a_long_run(
        "population-interrupted",
        &["population.members=2", "population.period=2048"],
    );
    for k in 0..2 {
        let member = dir.join(format!("members/{k}"));
        let newest = tandem::train::checkpoint::locate(&member).unwrap();
        let ckpt = tandem::train::checkpoint::load(&newest).unwrap();
        assert_eq!(ckpt.global_step, stopped_at, "member {k}");
    }
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir);
    cmd.args(["--set", &format!("train.max-steps={}", stopped_at + 4096)]);
    let out = run(&mut cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        summary["global_step"].as_u64().unwrap() > stopped_at,
        "{summary}"
    );
    assert_eq!(summary["interrupted"], false);
}

/// A requeued job runs the same command again with `--resume-if-exists`: a population that has
/// checkpointed continues (its members' checkpoints say so), it does not refuse nor start over.
#[test]
fn a_requeued_population_continues_with_resume_if_exists() {
    let dir = fresh_dir("population-requeued");
    let file = dir.with_extension("kdl");
    std::fs::write(&file, FOUR).unwrap();
    let again = |max_steps: &str| {
        let mut cmd = tandem();
        cmd.arg("train")
            .arg(&file)
            .arg("--run-dir")
            .arg(&dir)
            .arg("--resume-if-exists");
        cmd.args(["--set", &format!("train.max-steps={max_steps}")]);
        let out = run(&mut cmd, Duration::from_secs(240));
        assert!(out.status.success(), "{}", text(&out));
    };
    again("6144");
    again("12288");
    let exploits: Vec<u64> = (lineage(&dir).iter())
        .filter(|l| !l["exploit"].is_null())
        .map(|l| l["step"].as_u64().unwrap())
        .collect();
    assert_eq!(
        exploits,
        [4096; 4]
            .iter()
            .chain(&[8192; 4])
            .copied()
            .collect::<Vec<_>>()
    );
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(text.contains("\"global_step\": 12288"), "{text}");
}

/// A sweep over seeds of a population reads each population's summary: the best member's final
/// score, every member's episodes.
#[test]
fn a_sweep_of_populations_tables_their_best_members() {
    let dir = fresh_dir("population-sweep");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("members.kdl");
    std::fs::write(&file, TWO_BY_TWO.replace("12288", "4096")).unwrap();
    let mut cmd = tandem();
    cmd.current_dir(&dir)
        .arg("sweep")
        .arg(&file)
        .args(["--seeds", "1..2"]);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    let table = text(&out);
    for seed in 1..=2 {
        let run_dir = std::fs::read_dir(dir.join("runs/sweep"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join(format!("members-seed{seed}"));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
                .unwrap();
        let score = summary["final_score"].as_f64().unwrap();
        let episodes = summary["episodes"].as_u64().unwrap();
        assert!(episodes > 0, "{summary}");
        let row = format!("members-seed{seed}       {seed}        4096");
        let line = table
            .lines()
            .find(|l| l.starts_with(&row))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(
            line.contains(&format!("{score:.3}")) && line.contains(&episodes.to_string()),
            "{line}"
        );
    }
    assert!(
        table.contains("the best member's mean game score"),
        "{table}"
    );
}

/// A resume needs every member's checkpoint: one member without any is named before a rank
/// starts.
#[test]
fn a_population_missing_a_members_checkpoints_is_refused_by_name() {
    let config = TWO_BY_TWO.replace("count=4", "count=2");
    let dir = stopped_at("population-member-lost", &config, 4096);
    std::fs::remove_dir_all(dir.join("members/1/checkpoints")).unwrap();
    let mut cmd = tandem();
    cmd.arg("train").arg("--resume").arg(&dir);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("holds no readable checkpoint of member 1"),
        "{said}"
    );
}

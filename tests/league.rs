//! Self-play against a league (docs/population.md, Self-play) through the built binary, on
//! MPE's simple_tag (native, four agents): the league holds the learner's parameters at each
//! `every` steps, frozen; the run scores only the learner's rows, and the league's records count
//! every game it finished, summed over ranks; a stopped run resumes its league; `tandem play
//! --opponent` plays one checkpoint against another.

mod common;

use std::path::Path;
use std::time::Duration;

use common::binary::*;

/// 8 games a rank of 4 agents, rollout 32: 1024 rows' steps an update a rank.
fn config(devices: usize) -> String {
    format!(
        r#"experiment "league" {{
    devices count={devices} kind="cpu"
    algorithm "ppo" {{ minibatches 2; }}
    env "mpe-simple-tag" {{ envs {envs}; }}
    network "mlp" {{ hidden 32 32; }}
    train {{ total-steps {steps}; rollout 32; }}
    log {{ console "plain"; }}
    checkpoint {{ every 2; keep 10; }}
    league {{ every {every}; }}
}}
"#,
        envs = 8 * devices,
        steps = 8192 * devices,
        every = 2048 * devices,
    )
}

fn trained(name: &str, devices: usize, sets: &[&str]) -> std::path::PathBuf {
    trained_from(name, &config(devices), sets)
}

fn trained_from(name: &str, config: &str, sets: &[&str]) -> std::path::PathBuf {
    let dir = fresh_dir(name);
    let out = train_text(config, &dir, sets, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    let each = bytes
        .chunks(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()));
    each.collect()
}

/// The league of a run's newest checkpoint: each snapshot's (id, step, rating, wins, draws,
/// losses, member), and every tensor by name.
fn league(dir: &Path) -> (Vec<[f64; 7]>, std::collections::BTreeMap<String, Vec<u8>>) {
    let tensors = common::checkpoint_tensors(dir);
    let records = f64s(&tensors["league.records"]);
    let rows = records.chunks(7).map(|r| r.try_into().unwrap()).collect();
    (rows, tensors)
}

fn episodes(dir: &Path) -> f64 {
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    summary["episodes"].as_f64().unwrap()
}

/// The learner's own tensors of a checkpoint (`model.*`).
fn learner(tensors: &std::collections::BTreeMap<String, Vec<u8>>) -> Vec<(String, Vec<u8>)> {
    (tensors.iter())
        .filter(|(n, _)| n.starts_with("model."))
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect()
}

/// Snapshot `i`'s tensors, named as the learner's (`model.*`).
fn snapshot(
    tensors: &std::collections::BTreeMap<String, Vec<u8>>,
    i: usize,
) -> Vec<(String, Vec<u8>)> {
    let prefix = format!("league.{i}.");
    (tensors.iter())
        .filter_map(|(n, t)| n.strip_prefix(&prefix).map(|n| (n.to_string(), t.clone())))
        .collect()
}

/// Snapshots at steps 0, 2048, ... 8192, the newest the final learner itself and the first
/// another network; every game the learner finished is in the records (a run that scored the
/// snapshots' rows too would count four episodes a game); the same seed gives the same run.
#[test]
fn a_league_holds_the_learners_past_and_its_record_against_it() {
    let dir = trained("league-one-rank", 1, &[]);
    let (records, tensors) = league(&dir);
    let steps: Vec<f64> = records.iter().map(|r| r[1]).collect();
    assert_eq!(steps, [0.0, 2048.0, 4096.0, 6144.0, 8192.0]);
    let ids: Vec<f64> = records.iter().map(|r| r[0]).collect();
    assert_eq!(ids, [0.0, 1.0, 2.0, 3.0, 4.0]);
    let learner = learner(&tensors);
    assert!(!learner.is_empty());
    assert!(
        snapshot(&tensors, 4) == learner,
        "the newest snapshot is not the learner"
    );
    assert!(
        snapshot(&tensors, 0) != learner,
        "the learner never moved from its start"
    );
    let games: f64 = records.iter().map(|r| r[3] + r[4] + r[5]).sum();
    // The learner plays one row of each game: its episodes are the games.
    assert_eq!(games, episodes(&dir), "{records:?}");
    assert!(games > 0.0);
    let again = trained("league-one-rank-again", 1, &[]);
    assert!(
        common::checkpoint_tensors(&again) == tensors,
        "the same seed trained another league"
    );
}

/// Two ranks: the records sum both ranks' games; a run stopped half way resumes its league on one
/// rank (its snapshots before the stop are the uninterrupted run's, and its records go on
/// counting).
#[test]
fn a_league_sums_its_ranks_and_resumes() {
    let whole = trained("league-two-ranks", 2, &[]);
    let (records, tensors) = league(&whole);
    let games: f64 = records.iter().map(|r| r[3] + r[4] + r[5]).sum();
    assert_eq!(games, episodes(&whole));
    let stopped = trained("league-two-ranks-stopped", 2, &["train.max-steps=8192"]);
    let (half, _) = league(&stopped);
    assert_eq!(half.len(), 3, "{half:?}");
    let mut cmd = tandem();
    // On one rank: the league is the same whatever the ranks.
    let sets = ["--set", "train.max-steps=16384", "--set", "devices=cpu"];
    cmd.arg("train").arg("--resume").arg(&stopped).args(sets);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    let (resumed, resumed_tensors) = league(&stopped);
    let steps: Vec<f64> = resumed.iter().map(|r| r[1]).collect();
    assert_eq!(steps, [0.0, 4096.0, 8192.0, 12288.0, 16384.0]);
    for i in 0..3 {
        assert!(
            snapshot(&resumed_tensors, i) == snapshot(&tensors, i),
            "snapshot {i} differs from the uninterrupted run's"
        );
    }
    let games: f64 = resumed.iter().map(|r| r[3] + r[4] + r[5]).sum();
    assert_eq!(games, episodes(&stopped), "{resumed:?}");
}

/// `--opponent` plays the agents it matches as another checkpoint's policy; the games each side
/// won add up to the games played; a pattern matching every agent is refused.
#[test]
fn play_holds_one_checkpoint_against_another() {
    let dir = trained("league-play", 1, &[]);
    let first = dir.join("checkpoints/ckpt-000000002.pt");
    assert!(first.is_file());
    let play = |pattern: &str| {
        let mut cmd = tandem();
        cmd.arg("play")
            .arg(&dir)
            .args(["--episodes", "40", "--greedy"]);
        cmd.arg("--opponent")
            .arg(&first)
            .args(["--opponent-agents", pattern]);
        run(&mut cmd, Duration::from_secs(120))
    };
    let out = play("adversary_*");
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    let line = said
        .lines()
        .find(|l| l.starts_with("the other agents won "))
        .unwrap_or_else(|| panic!("{said}"));
    let counts: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(counts[..3].iter().sum::<usize>(), 10, "{line}");
    assert_eq!(counts[3], 10, "{line}");
    assert!(said.contains("agents adversary_* (playing "), "{said}");
    let every = play("*");
    assert_eq!(every.status.code(), Some(2), "{}", text(&every));
    assert!(
        text(&every).contains("matches every agent"),
        "{}",
        text(&every)
    );
}

/// Two members of one rank, each with a league of the population's snapshots: at every
/// `every`, both members' parameters join both leagues, so member 0's snapshot of member 1 is
/// byte for byte the one member 1 took of itself, and each league's snapshots alternate
/// between the members.
#[test]
fn a_population_league_holds_every_members_snapshots() {
    let config = config(2)
        .replace("envs 16", "envs 8")
        .replace("total-steps 16384", "total-steps 8192")
        .replace("every 4096", "every 2048; pool \"population\"")
        .replace(
            "    log {",
            "    population { members 2; exploit 0; }\n    log {",
        );
    let dir = trained_from("league-population", &config, &[]);
    let (zero, zeros) = league(&dir.join("members/0"));
    let (one, ones) = league(&dir.join("members/1"));
    let members: Vec<f64> = zero.iter().map(|r| r[6]).collect();
    assert_eq!(members, [0.0, 1.0].repeat(5), "{zero:?}");
    let steps: Vec<f64> = one.iter().map(|r| r[1]).collect();
    assert_eq!(
        steps,
        [
            0.0, 0.0, 2048.0, 2048.0, 4096.0, 4096.0, 6144.0, 6144.0, 8192.0, 8192.0
        ]
    );
    for i in 0..10 {
        assert!(
            snapshot(&zeros, i) == snapshot(&ones, i),
            "snapshot {i} differs"
        );
    }
    assert!(
        snapshot(&zeros, 8) != snapshot(&zeros, 9),
        "the members are alike"
    );
    // Member 1's newest snapshot of itself is member 1's learner.
    assert!(snapshot(&ones, 9) == learner(&ones));
}

/// Two members with leagues, ranked by a scalar their learners log (`objective "scalar"`,
/// `league/elo`): each exploit's objectives are the members' ratings at that step; a tag no
/// learner logs stops the run at the first period, listing those it logs.
#[test]
fn a_population_ranks_its_members_by_a_logged_scalar() {
    let population = "    population {\n        members 2\n        period 4096\n        objective \"scalar\"\n        objective-scalar \"league/elo\"\n        explore { algorithm.lr factor=1.25 min=1e-4 max=1e-2; }\n    }\n    log {";
    let config = config(2)
        .replace("envs 16", "envs 8")
        .replace("total-steps 16384", "total-steps 8192")
        .replace("every 4096", "every 2048")
        .replace("    log {", population)
        .replace("console \"plain\";", "console \"plain\"; interval 1;");
    let dir = trained_from("league-population-elo", &config, &[]);
    let lines: Vec<serde_json::Value> = (lineage(&dir).into_iter())
        .filter(|l| !l["exploit"].is_null())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        let member = line["member"].as_u64().unwrap();
        assert_eq!(line["step"].as_u64(), Some(4096), "{line}");
        let scalars = std::fs::read_to_string(dir.join(format!("members/{member}/scalars.jsonl")));
        let elo = (scalars.unwrap().lines())
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|l| l["step"].as_u64() == Some(4096) && !l["league/elo"].is_null())
            .map(|l| l["league/elo"].as_f64().unwrap())
            .expect("league/elo at step 4096");
        assert_eq!(line["objective"].as_f64(), Some(elo), "member {member}");
        assert_ne!(elo, 1000.0, "member {member} never moved its rating");
    }
    let unknown = config.replace("league/elo", "league/nothing");
    let dir = fresh_dir("league-population-unknown-scalar");
    let out = train_text(&unknown, &dir, &[], Duration::from_secs(240));
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("population.objective-scalar `league/nothing` is not a scalar the learner logs; it logs ")
            && said.contains("league/elo"),
        "{said}"
    );
}

/// On one rank, a run stopped half way and resumed (its environments continue from their
/// snapshots, its games from their opponents and returns) ends as the uninterrupted one: the
/// learner, the league, its records and rating, byte for byte.
#[test]
fn a_stopped_league_run_resumes_exactly() {
    let whole = trained("league-exact-whole", 1, &[]);
    let stopped = trained("league-exact-stopped", 1, &["train.max-steps=4096"]);
    let mut cmd = tandem();
    let sets = ["--set", "train.max-steps=#null"];
    cmd.arg("train").arg("--resume").arg(&stopped).args(sets);
    let out = run(&mut cmd, Duration::from_secs(240));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        common::checkpoint_tensors(&stopped) == common::checkpoint_tensors(&whole),
        "the resumed league run differs from the uninterrupted one"
    );
}

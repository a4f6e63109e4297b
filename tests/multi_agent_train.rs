//! A multi-agent game through the built binary (`experiments/mpe-simple-spread.kdl`: MPE
//! simple_spread, one PPO policy shared by its 3 agents, each agent a row): it learns, a run
//! stopped and resumed ends with the parameters of one not stopped (the games' state is in the
//! checkpoint), two ranks split its games, `tandem play` plays every agent and draws the game,
//! evaluation plays games to their end, and DQN and SAC learn from the agents' rows too.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::binary::*;
use common::summary_number;

fn example() -> String {
    format!(
        "{}/experiments/mpe-simple-spread.kdl",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Agent steps of one update of the shipped file: 25 games x 3 agents x rollout 128.
const UPDATE: u64 = 25 * 3 * 128;

/// The shipped file's comment: seed 1 ends at -20.4 (measured here; seeds 2 and 3: -19.6 and
/// -18.3) over the last 100 agent episodes, where random play scores -27.0 (mpe2's own game,
/// 200 episodes of uniform moves). This holds -22, so another CPU's rounding may not fail it.
#[test]
fn the_shipped_simple_spread_learns() {
    let dir = fresh_dir("mpe-spread-learns");
    let out = train(&example(), &dir, &[], Duration::from_secs(600));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        summary_number(&dir, "global_step").unwrap() as u64,
        3_000_000u64.div_ceil(UPDATE) * UPDATE,
        "steps count agent steps"
    );
    let score = summary_number(&dir, "final_score").unwrap();
    assert!(
        score >= -22.0,
        "mpe-simple-spread.kdl ended at {score} (random play: -27.0)"
    );
}

fn short_run(name: &str, sets: &[&str]) -> PathBuf {
    let dir = fresh_dir(name);
    let mut all = vec!["train.total-steps=28800", "checkpoint.every=1"];
    all.extend_from_slice(sets);
    let out = train(&example(), &dir, &all, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    dir
}

#[test]
fn a_stopped_run_resumes_exactly() {
    // One compute thread, as `resume_to_match` says why.
    let whole = short_run("mpe-whole", &["threads=1"]);
    let parts = short_run("mpe-parts", &["threads=1", "train.max-steps=9600"]);
    assert_eq!(
        summary_number(&parts, "global_step").unwrap() as u64,
        UPDATE
    );
    resume_to_match(&parts, 28800, &whole);
    assert_eq!(
        summary_number(&parts, "global_step").unwrap() as u64,
        3 * UPDATE
    );
}

#[test]
fn two_ranks_split_the_games_and_play_plays_every_agent() {
    let dir = short_run(
        "mpe-two-ranks",
        &[
            "devices=\"cpu\" \"cpu\"",
            "env.envs=24",
            "train.max-steps=18432",
        ],
    );
    // 24 games (12 a rank) x 3 agents x 128 steps an update, two updates.
    assert_eq!(
        summary_number(&dir, "global_step").unwrap() as u64,
        2 * 24 * 3 * 128
    );
    // Every game ends after 25 steps: two updates, 256 steps, end 10 episodes of each of the
    // 72 agents, counted over both ranks.
    assert_eq!(summary_number(&dir, "episodes").unwrap() as u64, 10 * 72);
    let mut cmd = tandem();
    cmd.arg("play").arg(&dir).args(["--episodes", "6"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    // One game's 3 agents end together: 6 agent episodes are two games.
    assert!(said.contains("episode 6: score"), "{said}");
    assert!(said.contains("mean score over 6 episode(s)"), "{said}");
    // The game draws itself: one frame a step of the first game's 25.
    let gif = dir.join("play.gif");
    let mut cmd = tandem();
    cmd.arg("play")
        .arg(&dir)
        .args(["--episodes", "3", "--gif"])
        .arg(&gif);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("(25 frames"), "{}", text(&out));
    assert_eq!(&std::fs::read(&gif).unwrap()[..6], b"GIF89a");
}

/// The off-policy learners take the agents' rows as they take environments: DQN on the moves,
/// SAC on continuous pushes, their replay holding each agent's own transitions.
#[test]
fn dqn_and_sac_train_on_the_agents_rows() {
    for (name, sets) in [
        (
            "mpe-dqn",
            ["algorithm=\"dqn\"", "env.continuous-actions=#false"],
        ),
        (
            "mpe-sac",
            ["algorithm=\"sac\"", "env.continuous-actions=#true"],
        ),
    ] {
        let dir = fresh_dir(name);
        let config = "experiment \"offp\" {\n    seed 1\n    devices \"cpu\"\n    env \"mpe-simple-spread\" { envs 2 }\n    train { total-steps 3000 }\n}\n";
        let file = dir.with_extension("kdl");
        std::fs::write(&file, config).unwrap();
        let out = train(
            file.to_str().unwrap(),
            &dir,
            &sets,
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{name}: {}", text(&out));
        // 2 games x 3 agents: 6 agent steps a vector step; 500 of them end 20 games.
        assert_eq!(
            summary_number(&dir, "global_step").unwrap() as u64,
            3000,
            "{name}"
        );
        assert_eq!(
            summary_number(&dir, "episodes").unwrap() as u64,
            20 * 6,
            "{name}"
        );
    }
}

/// Evaluation during training plays every agent of its games to the end of their episodes (the
/// game's own `max-cycles` ends them; no time limit wraps a game of several agents).
#[test]
fn evaluation_plays_the_games_to_their_end() {
    let dir = short_run(
        "mpe-eval",
        &["eval.every=1", "eval.episodes=2", "train.max-steps=9600"],
    );
    let scores = scalar_values(&dir, "eval/score_mean");
    assert_eq!(scores.len(), 1, "one evaluation after the one update");
    // Two games of 3 agents: 6 agent episodes of 25 steps, each scored between random play's
    // worst and a perfect cover's 0.
    assert!(scores[0] < 0.0 && scores[0] > -100.0, "{scores:?}");
    let lengths = scalar_values(&dir, "eval/length_mean");
    assert_eq!(lengths, [25.0]);
}

/// `experiments/mpe-simple-spread-mappo.kdl`: the same game and learner with a centralised
/// critic (MAPPO) learns as far as the shipped IPPO file is held; a stopped run resumes exactly
/// (the critic's input is rebuilt from the restored games); play and export take the state
/// input.
#[test]
fn a_centralised_critic_learns_and_resumes() {
    let file = format!(
        "{}/experiments/mpe-simple-spread-mappo.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = fresh_dir("mpe-mappo-learns");
    let out = train(&file, &dir, &[], Duration::from_secs(600));
    assert!(out.status.success(), "{}", text(&out));
    let score = summary_number(&dir, "final_score").unwrap();
    assert!(
        score >= -22.0,
        "mpe-simple-spread-mappo.kdl ended at {score}"
    );
    let names = final_parameters(&dir);
    // The critic's first layer reads own 18 + 3 agents x 18 + 3 floats; the actor's own 18.
    for name in [
        "model.actor_torso.fc0.weight",
        "model.critic_torso.fc0.weight",
    ] {
        assert!(names.iter().any(|(n, _)| n == name), "no {name}");
    }
    let said = {
        let mut cmd = tandem();
        cmd.arg("play").arg(&dir).args(["--episodes", "6"]);
        let out = run(&mut cmd, Duration::from_secs(60));
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    };
    assert!(said.contains("mean score over 6 episode(s)"), "{said}");
    let mut cmd = tandem();
    cmd.arg("export")
        .arg(&dir)
        .arg("-o")
        .arg(dir.join("mappo.pt"));
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let run_of = |name: &str, sets: &[&str]| {
        let dir = fresh_dir(name);
        let mut all = vec!["train.total-steps=28800", "checkpoint.every=1"];
        all.extend_from_slice(sets);
        let out = train(&file, &dir, &all, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
        dir
    };
    // One compute thread, as `resume_to_match` says why.
    let whole = run_of("mpe-mappo-whole", &["threads=1"]);
    let parts = run_of("mpe-mappo-parts", &["threads=1", "train.max-steps=9600"]);
    resume_to_match(&parts, 28800, &whole);
}

/// `network.agent-index`: the one shared policy reads each agent's index after its
/// observation (18 + 3 floats into both torsos), trains, plays and exports; and the same
/// run told no index reads 18 (the setting is not ignored).
#[test]
fn the_agents_index_is_read_by_the_shared_policy() {
    let first_layer = |sets: &[&str]| {
        let dir = fresh_dir(&format!("mpe-index-{}", sets.len()));
        let mut all = vec!["train.total-steps=19200", "checkpoint.every=1"];
        all.extend_from_slice(sets);
        let out = train(&example(), &dir, &all, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
        let shape = final_shape(&dir, "model.torsos.fc0.weight");
        (dir, shape)
    };
    let (dir, indexed) = first_layer(&["network.agent-index=#true"]);
    // Two stacked torsos (actor, critic), 18 + 3 inputs, 64 units.
    assert_eq!(indexed, [2, 21, 64]);
    let (_, plain) = first_layer(&[]);
    assert_eq!(plain, [2, 18, 64]);
    let mut cmd = tandem();
    cmd.arg("play").arg(&dir).args(["--episodes", "3"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let mut cmd = tandem();
    cmd.arg("export")
        .arg(&dir)
        .arg("-o")
        .arg(dir.join("indexed.pt"));
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
}

//! MPE parity: replays the committed mpe2 1.1.1 traces (scripts/parity/mpe_traces.py:
//! simple_spread with its defaults and with 4 agents, continuous actions and another local
//! ratio; simple_tag with its defaults and with 2 prey, 2 predators, one obstacle and
//! continuous actions) through the native games, reset with the same seeds (or continuing the
//! stream where the trace did) and given the same actions, and requires every agent's
//! observation (float32) and reward (as the float32 Step carries it) to be mpe2's bit for bit
//! and every flag to match.

use std::io::Read;

use flate2::read::GzDecoder;
use serde_json::Value;
use tandem_env::mpe::simple_spread::{SimpleSpread, SpreadParams};
use tandem_env::mpe::simple_tag::{SimpleTag, TagParams};
use tandem_env::multi_agent::{ParallelEnv, observation_len};
use tandem_env::{Action, Step};

fn load(stem: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/{stem}.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn arg<T>(trace: &Value, name: &str, default: T, read: impl Fn(&Value) -> Option<T>) -> T {
    trace["args"]
        .get(name)
        .map_or(default, |v| read(v).unwrap())
}

fn build(trace: &Value) -> Box<dyn ParallelEnv> {
    let int = |name, default| arg(trace, name, default, |v| v.as_u64().map(|n| n as usize));
    let continuous_actions = arg(trace, "continuous_actions", false, Value::as_bool);
    // The seed of construction is never used: every trace starts with a seeded reset.
    match trace["game"].as_str().unwrap() {
        "simple_spread" => Box::new(
            SimpleSpread::new(
                SpreadParams {
                    agents: int("N", 3),
                    local_ratio: arg(trace, "local_ratio", 0.5, Value::as_f64),
                    max_cycles: int("max_cycles", 25) as u32,
                    continuous_actions,
                },
                0,
            )
            .unwrap(),
        ),
        "simple_tag" => Box::new(
            SimpleTag::new(
                TagParams {
                    num_good: int("num_good", 1),
                    num_adversaries: int("num_adversaries", 3),
                    num_obstacles: int("num_obstacles", 2),
                    max_cycles: int("max_cycles", 25) as u32,
                    continuous_actions,
                },
                0,
            )
            .unwrap(),
        ),
        other => panic!("no native game for {other}"),
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|agent| agent.as_array().unwrap())
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Per agent, the trace's action as the game takes it (an index, or five float32 pushes).
enum Recorded {
    Move(usize),
    Push(Vec<f32>),
}

fn recorded(v: &Value) -> Vec<Recorded> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| match a.as_u64() {
            Some(index) => Recorded::Move(index as usize),
            None => Recorded::Push(floats(&Value::Array(vec![a.clone()]))),
        })
        .collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn replay(stem: &str) {
    let trace = load(stem);
    let mut env = build(&trace);
    let names: Vec<String> = env.agents().iter().map(|a| a.name.clone()).collect();
    let expected_names: Vec<String> = trace["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, expected_names, "{stem}: agents");
    let agents = names.len();
    let mut obs = vec![0f32; observation_len(env.agents())];
    let mut steps = vec![Step::default(); agents];
    let mut compared = 0;
    for (e, episode) in trace["episodes"].as_array().unwrap().iter().enumerate() {
        env.reset(episode["seed"].as_u64(), &mut obs);
        assert_eq!(
            bits(&obs),
            bits(&floats(&episode["obs"])),
            "{stem} episode {e}: reset"
        );
        for (t, record) in episode["steps"].as_array().unwrap().iter().enumerate() {
            let actions = recorded(&record["actions"]);
            let actions: Vec<Action> = actions
                .iter()
                .map(|a| match a {
                    Recorded::Move(i) => Action::Discrete(*i),
                    Recorded::Push(p) => Action::Box(p),
                })
                .collect();
            env.step(&actions, &mut obs, &mut steps);
            let at = format!("{stem} episode {e} step {t}");
            assert_eq!(
                bits(&obs),
                bits(&floats(&record["obs"])),
                "{at}: observations"
            );
            for (i, step) in steps.iter().enumerate() {
                let reward = record["rewards"][i].as_f64().unwrap() as f32;
                assert_eq!(
                    step.reward.to_bits(),
                    reward.to_bits(),
                    "{at}: {} reward",
                    names[i]
                );
                assert_eq!(
                    step.terminated,
                    record["terminated"][i].as_bool().unwrap(),
                    "{at}"
                );
                assert_eq!(
                    step.truncated,
                    record["truncated"][i].as_bool().unwrap(),
                    "{at}"
                );
            }
            compared += 1;
        }
        assert!(
            steps.iter().all(Step::done),
            "{stem} episode {e}: mpe2 ended it, tandem did not"
        );
    }
    assert!(compared >= 200, "{stem}: only {compared} steps compared");
}

#[test]
fn simple_spread_is_mpe2s() {
    replay("mpe_simple_spread");
}

#[test]
fn simple_spread_with_four_agents_and_continuous_actions_is_mpe2s() {
    replay("mpe_simple_spread_n4_continuous");
}

#[test]
fn simple_tag_is_mpe2s() {
    replay("mpe_simple_tag");
}

#[test]
fn simple_tag_with_two_prey_and_continuous_actions_is_mpe2s() {
    replay("mpe_simple_tag_2v2_continuous");
}

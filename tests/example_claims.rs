//! Every number in the comments of the example experiments (`experiments/*.kdl` and
//! `experiments/include/*.kdl`) is checked: either it restates a setting, and the resolved file
//! is checked here to hold it, or it is a figure a training run reaches, and CLAIMS names the
//! test that runs the shipped file and asserts it (on CI, or, for a run too long for CI, an
//! `#[ignore]`d test that the comment says to run with `--ignored`). A number in a comment that
//! no entry covers fails the suite, naming the file, the line and the number, so an unchecked
//! claim cannot be added to an example.

use std::path::{Path, PathBuf};

use tandem_config::{Algorithm, Device, Experiment, Game, Source, SpreadParams, Wrapper};

/// How the numbers of one phrase are checked.
enum Check {
    /// The experiment file `resolve` (relative to `experiments/`), resolved with `sets`, holds
    /// what the phrase says (for an include, an experiment that includes it).
    Settings {
        resolve: &'static str,
        sets: &'static [&'static str],
        holds: fn(&Experiment) -> bool,
    },
    /// `tests/FILE.rs` has a test `NAME` (written `FILE::NAME`) that trains the shipped file and
    /// asserts the phrase's figures.
    Test(&'static str),
    /// As [`Check::Test`], for a run too long for CI: the test is `#[ignore]`d, run by hand
    /// with `--ignored`, and the file's comment must say so.
    LongTest(&'static str),
    /// The repository file `file` contains `text`: the number is a constant of the code.
    Source {
        file: &'static str,
        text: &'static str,
    },
}

/// A phrase of a comment in `file` (relative to `experiments/`) and how its numbers are
/// checked. Every number inside an occurrence of the phrase is covered by it.
struct Claim {
    file: &'static str,
    phrase: &'static str,
    check: Check,
}

const fn settings(resolve: &'static str, holds: fn(&Experiment) -> bool) -> Check {
    Check::Settings {
        resolve,
        sets: &[],
        holds,
    }
}

fn dqn(e: &Experiment) -> &tandem_config::Dqn {
    match &e.algorithm {
        Algorithm::Dqn(d) => d,
        other => panic!("{} is {}, not dqn", e.name, other.name()),
    }
}

fn ppo(e: &Experiment) -> &tandem_config::Ppo {
    match &e.algorithm {
        Algorithm::Ppo(p) => p,
        other => panic!("{} is {}, not ppo", e.name, other.name()),
    }
}

fn frame_skip(e: &Experiment) -> Option<u32> {
    e.env.wrappers.iter().find_map(|w| match w {
        Wrapper::FrameSkip { n, .. } => Some(*n),
        _ => None,
    })
}

fn time_limit(e: &Experiment) -> Option<u64> {
    e.env.wrappers.iter().find_map(|w| match w {
        Wrapper::TimeLimit { max_steps } => Some(*max_steps),
        _ => None,
    })
}

/// Environment steps (over all ranks) per gradient step of a DQN experiment.
fn env_steps_per_gradient_step(e: &Experiment) -> f64 {
    (e.env.envs as u64 * dqn(e).train_frequency) as f64 / dqn(e).gradient_steps as f64
}

const CLAIMS: &[Claim] = &[
    Claim {
        file: "mpe-simple-spread.kdl",
        phrase: "mpe2 1.1.1's",
        check: Check::Source {
            file: "crates/tandem-env/src/mpe/mod.rs",
            text: "as the `mpe2` 1.1.1 package has them",
        },
    },
    Claim {
        file: "mpe-simple-spread.kdl",
        phrase: "its episode of 25 steps",
        check: settings("mpe-simple-spread.kdl", |e| {
            e.env.game == Game::MpeSimpleSpread(SpreadParams::MPE2)
                && SpreadParams::MPE2.max_cycles == 25
        }),
    },
    Claim {
        file: "mpe-simple-spread.kdl",
        phrase: "mean agent return of -20.4 over the last 100 episodes on seed 1",
        check: Check::Test("multi_agent_train::the_shipped_simple_spread_learns"),
    },
    Claim {
        file: "mpe-simple-spread.kdl",
        phrase: "-27.0 (tests/multi_agent_train.rs holds it above -22)",
        check: Check::Test("multi_agent_train::the_shipped_simple_spread_learns"),
    },
    Claim {
        file: "mpe-simple-spread-mappo.kdl",
        phrase: "return of -20.1 over the last 100 episodes on seed 1, where random play scores -27.0",
        check: Check::Test("multi_agent_train::a_centralised_critic_learns_and_resumes"),
    },
    Claim {
        file: "mpe-simple-spread-mappo.kdl",
        phrase: "holds it above -22",
        check: Check::Test("multi_agent_train::a_centralised_critic_learns_and_resumes"),
    },
    Claim {
        file: "connect-four.kdl",
        phrase: "scores 0.91 as the first player and 0.81 as the second",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_beats_a_random_player_from_either_seat",
        ),
    },
    Claim {
        file: "connect-four.kdl",
        phrase: "--random-agents player_1 --episodes 400 --greedy",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_beats_a_random_player_from_either_seat",
        ),
    },
    Claim {
        file: "connect-four.kdl",
        phrase: "Seed 1, played greedily over 200 games",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_beats_a_random_player_from_either_seat",
        ),
    },
    Claim {
        file: "connect-four.kdl",
        phrase: "(a win counts 1, a loss -1)",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_beats_a_random_player_from_either_seat",
        ),
    },
    Claim {
        file: "connect-four.kdl",
        phrase: "at least half of each",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_beats_a_random_player_from_either_seat",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "every 250,000 steps",
        check: settings("connect-four-league.kdl", |e| {
            e.league.every == Some(250_000)
        }),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "keeps the newest 64",
        check: settings("connect-four-league.kdl", |e| e.league.size == 64),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "learning rate of 1e-3 annealed over 2M steps",
        check: settings("connect-four-league.kdl", |e| {
            ppo(e).lr == 1e-3 && ppo(e).anneal_lr && e.train.total_steps == 2_000_000
        }),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "three hidden layers of 256 (ReLU)",
        check: settings("connect-four-league.kdl", |e| {
            matches!(&e.network.torso, tandem_config::Torso::Mlp { hidden, activation }
                if hidden == &[256, 256, 256] && *activation == tandem_config::Activation::Relu)
        }),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "Seed 1, over 200 games (100 as either player)",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "the final policy wins 192",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "it wins 196 against its",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "checkpoint from a quarter of the run (500k steps)",
        check: settings("connect-four-league.kdl", |e| {
            e.checkpoint.every == Some(500_000) && e.train.total_steps == 2_000_000
        }),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "--random-agents player_1 --episodes 200 --greedy",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "ckpt-000000123.pt",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "--opponent-agents player_1 --episodes 200 --sample",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "tests/gym_train.rs holds it to at least 190 and 120 (95% and 60%)",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "connect-four-league.kdl",
        phrase: "(about 9 minutes); CI trains it for 300k steps",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_league_beats_random_and_its_past",
        ),
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "from 1e-5 to 1e-1",
        check: Check::Settings {
            resolve: "cartpole-pbt.kdl",
            sets: &[],
            holds: |e| {
                let lr = &e.population.explore.0[0];
                lr.path == "algorithm.lr"
                    && matches!(lr.rule, tandem_config::ExploreRule::Factor { min, max, .. } if min == 1e-5 && max == 1e-1)
            },
        },
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "the 100k steps of a member",
        check: Check::Settings {
            resolve: "cartpole-pbt.kdl",
            sets: &[],
            holds: |e| e.train.total_steps == 100_000,
        },
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "after every 10k steps",
        check: Check::Settings {
            resolve: "cartpole-pbt.kdl",
            sets: &[],
            holds: |e| e.population.period == 10_000,
        },
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "learning rate by 1.25",
        check: Check::Settings {
            resolve: "cartpole-pbt.kdl",
            sets: &[],
            holds: |e| matches!(e.population.explore.0[0].rule, tandem_config::ExploreRule::Factor { factor, .. } if factor == 1.25),
        },
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "Seed 1, the members' final scores: 376.9, 420.9, 422.8 and 446.1 (median 421.9)",
        check: Check::Test("population::the_shipped_pbt_example_lifts_its_median_member"),
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "`--set population.exploit=0`): 370.0, 56.2, 39.8 and 446.1",
        check: Check::Test("population::the_shipped_pbt_example_lifts_its_median_member"),
    },
    Claim {
        file: "cartpole-pbt.kdl",
        phrase: "median above 400 and the fixed one's below 300",
        check: Check::Test("population::the_shipped_pbt_example_lifts_its_median_member"),
    },
    Claim {
        file: "connect-four-sides.kdl",
        phrase: "scores 0.87 as `first` and 0.74 as `second`",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_sides_each_beat_a_random_player",
        ),
    },
    Claim {
        file: "connect-four-sides.kdl",
        phrase: "--random second --episodes 400 --greedy",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_sides_each_beat_a_random_player",
        ),
    },
    Claim {
        file: "connect-four-sides.kdl",
        phrase: "Seed 1, played greedily over 200 games",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_sides_each_beat_a_random_player",
        ),
    },
    Claim {
        file: "connect-four-sides.kdl",
        phrase: "(a win counts 1, a loss -1)",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_sides_each_beat_a_random_player",
        ),
    },
    Claim {
        file: "connect-four-sides.kdl",
        phrase: "at least half of each",
        check: Check::LongTest(
            "gym_train::the_shipped_connect_four_sides_each_beat_a_random_player",
        ),
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "mpe2 1.1.1's",
        check: Check::Source {
            file: "crates/tandem-env/src/mpe/mod.rs",
            text: "as the `mpe2` 1.1.1 package has them",
        },
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "After training on seed 1, played greedily over 400 games",
        check: Check::Test("several_policies::the_shipped_simple_tag_teaches_both_sides"),
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "--episodes 1600 --seed 7",
        check: Check::Test("several_policies::the_shipped_simple_tag_teaches_both_sides"),
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "the learned predators score 23.5 a predator against the learned prey, random ones 3.3",
        check: Check::Test("several_policies::the_shipped_simple_tag_teaches_both_sides"),
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "the learned prey scores -46.0 against the learned predators, a random one -54.2",
        check: Check::Test("several_policies::the_shipped_simple_tag_teaches_both_sides"),
    },
    Claim {
        file: "mpe-simple-tag.kdl",
        phrase: "at least 10 (predators) and 4 (prey) above",
        check: Check::Test("several_policies::the_shipped_simple_tag_teaches_both_sides"),
    },
    // breakout.kdl
    Claim {
        file: "breakout.kdl",
        phrase: "32 environments per rank",
        check: settings("breakout.kdl", |e| e.per_rank_envs() == 32),
    },
    Claim {
        file: "breakout.kdl",
        phrase: "devices \"cuda:0\" \"cuda:1\"",
        check: Check::Settings {
            resolve: "breakout.kdl",
            sets: &["devices=\"cuda:0\" \"cuda:1\""],
            holds: |e| e.world_size() == 2 && e.per_rank_envs() == 32,
        },
    },
    Claim {
        file: "breakout.kdl",
        phrase: "32 per rank on 2 devices",
        check: settings("breakout.kdl", |e| {
            e.per_rank_envs() == 32 && e.world_size() == 2
        }),
    },
    Claim {
        file: "breakout.kdl",
        phrase: "Seed 1 scores 12 or more over its last 20 games within 800k steps",
        check: Check::LongTest(
            "train_learning::the_shipped_breakout_a2c_preset_learns_within_800k_steps",
        ),
    },
    // breakout-ppo.kdl
    Claim {
        file: "breakout-ppo.kdl",
        phrase: "Seed 1 scores 8 or more over its last 20 games within 500k steps",
        check: Check::LongTest(
            "train_learning::the_shipped_breakout_ppo_preset_learns_within_500k_steps",
        ),
    },
    // breakout-ppo-lstm.kdl
    Claim {
        file: "breakout-ppo-lstm.kdl",
        phrase: "Seed 1 scores 8 or more over its last 20 games within 250k steps",
        check: Check::LongTest(
            "train_learning::the_shipped_breakout_ppo_lstm_preset_learns_within_250k_steps",
        ),
    },
    // pendulum-ppo.kdl
    Claim {
        file: "pendulum-ppo.kdl",
        phrase: "seed 1 reaches -400 within 300k steps",
        check: Check::Test("continuous_ppo::pendulum_ppo_reaches_minus_400_within_300k_steps"),
    },
    // acrobot-ppo.kdl
    Claim {
        file: "acrobot-ppo.kdl",
        phrase: "Seed 1 scores -110 or better over its last 20 episodes within 500k steps",
        check: Check::Test("train_learning::the_shipped_acrobot_preset_swings_up"),
    },
    // frozenlake-ppo.kdl
    Claim {
        file: "frozenlake-ppo.kdl",
        phrase: "Seed 1 scores 1.0 over its last 20 episodes within 40k steps",
        check: Check::Test(
            "gym_train::the_shipped_frozenlake_preset_reaches_the_goal_within_40k_steps",
        ),
    },
    Claim {
        file: "frozenlake-ppo.kdl",
        phrase: "the 4x4 map, not slippery",
        check: settings("frozenlake-ppo.kdl", |e| match &e.env.game {
            tandem_config::Game::Gymnasium(gym) => {
                let arg = |name: &str| {
                    gym.make_args
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v)
                };
                arg("map_name") == Some(&tandem_config::Scalar::Str("4x4".into()))
                    && arg("is_slippery") == Some(&tandem_config::Scalar::Bool(false))
            }
            _ => false,
        }),
    },
    // hopper-sac.kdl
    Claim {
        file: "hopper-sac.kdl",
        phrase: "Seed 1 scores 150 or more over its last 20 episodes within 10k steps",
        check: Check::Test("gym_train::the_shipped_hopper_sac_preset_hops_within_10k_steps"),
    },
    // ant-ppo.kdl
    Claim {
        file: "ant-ppo.kdl",
        phrase: "Seed 1 scores 100 or more over its last 20 episodes within 400k steps",
        check: Check::LongTest("gym_train::the_shipped_ant_preset_walks_within_400k_steps"),
    },
    Claim {
        file: "ant-ppo.kdl",
        phrase: "a random policy scores about -40",
        check: Check::LongTest("gym_train::the_shipped_ant_preset_walks_within_400k_steps"),
    },
    // walker2d-sac.kdl
    Claim {
        file: "walker2d-sac.kdl",
        phrase: "Seed 1 scores 150 or more over its last 20 episodes within 10k steps",
        check: Check::LongTest("gym_train::the_shipped_walker2d_sac_preset_walks_within_10k_steps"),
    },
    Claim {
        file: "walker2d-sac.kdl",
        phrase: "a random policy scores about 2",
        check: Check::LongTest("gym_train::the_shipped_walker2d_sac_preset_walks_within_10k_steps"),
    },
    // pong-ppo.kdl
    Claim {
        file: "pong-ppo.kdl",
        phrase: "Seed 1 scores -5 or more over its last 20 games within 2M steps",
        check: Check::LongTest("train_learning::the_shipped_pong_preset_learns_within_2m_steps"),
    },
    Claim {
        file: "pong-ppo.kdl",
        phrase: "a random policy scores about -20",
        check: Check::LongTest("train_learning::the_shipped_pong_preset_learns_within_2m_steps"),
    },
    // mountaincar-dqn.kdl
    Claim {
        file: "mountaincar-dqn.kdl",
        phrase: "Seed 1 scores -150 or better over its last 20 episodes within 120k steps",
        check: Check::Test("train_learning::the_shipped_mountain_car_dqn_preset_reaches_the_flag"),
    },
    Claim {
        file: "mountaincar-dqn.kdl",
        phrase: "never reaches the flag scores -200",
        check: Check::Test("train_learning::the_shipped_mountain_car_dqn_preset_reaches_the_flag"),
    },
    Claim {
        file: "mountaincar-dqn.kdl",
        phrase: "every 600 environment steps, which is target-every 300",
        check: settings("mountaincar-dqn.kdl", |e| {
            dqn(e).target_every == 300 && env_steps_per_gradient_step(e) * 300.0 == 600.0
        }),
    },
    // mountaincar-ppo.kdl
    Claim {
        file: "mountaincar-ppo.kdl",
        phrase: "Seed 1 scores -140 or better over its last 20 episodes within 1M steps",
        check: Check::Test("train_learning::the_shipped_mountain_car_preset_reaches_the_flag"),
    },
    // bipedalwalker-ppo.kdl
    Claim {
        file: "bipedalwalker-ppo.kdl",
        phrase: "Seed 1 scores -70 or more over its last 20 episodes within 1M steps",
        check: Check::LongTest("gym_train::the_shipped_bipedalwalker_preset_walks_within_1m_steps"),
    },
    // lunarlander-continuous-ppo.kdl
    Claim {
        file: "lunarlander-continuous-ppo.kdl",
        phrase: "Seed 1 scores 40 or more over its last 20 episodes within 400k steps",
        check: Check::Test(
            "gym_train::the_shipped_continuous_lunarlander_preset_lands_within_400k_steps",
        ),
    },
    // lunarlander-ppo.kdl
    Claim {
        file: "lunarlander-ppo.kdl",
        phrase: "Seed 1 scores 40 or more over its last 20 episodes within 400k steps",
        check: Check::Test("gym_train::the_shipped_lunarlander_preset_lands_within_400k_steps"),
    },
    // pendulum-sac.kdl
    Claim {
        file: "cartpole-masked-lstm.kdl",
        phrase: "Seed 1 reaches 475 within 500k steps",
        check: Check::Test("recurrent_train::an_lstm_core_learns_cartpole_without_velocities"),
    },
    Claim {
        file: "cartpole-masked-mlp.kdl",
        phrase: "it stays below 200 over the same 500k",
        check: Check::Test("recurrent_train::the_same_run_without_a_core_does_not_learn_it"),
    },
    Claim {
        file: "pendulum-sac.kdl",
        phrase: "Seed 1 reaches -250 within 10k steps on 1 rank",
        check: Check::Test("sac_train::sac_swings_up_the_pendulum_on_one_rank"),
    },
    Claim {
        file: "pendulum-sac.kdl",
        phrase: "within 10k steps on 2 ranks",
        check: Check::Test("sac_train::sac_swings_up_the_pendulum_on_two_ranks"),
    },
    // pendulum-td3.kdl
    Claim {
        file: "pendulum-td3.kdl",
        phrase: "Seed 1 reaches -250 within 20k steps on 1 rank",
        check: Check::Test("td3_train::td3_swings_up_the_pendulum_on_one_rank"),
    },
    Claim {
        file: "pendulum-td3.kdl",
        phrase: "within 20k steps on 2 ranks",
        check: Check::Test("td3_train::td3_swings_up_the_pendulum_on_two_ranks"),
    },
    // cartpole-dqn.kdl
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "3-step returns",
        check: settings("cartpole-dqn.kdl", |e| dqn(e).n_step == 3),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "one gradient step per 4 environment steps",
        check: settings("cartpole-dqn.kdl", |e| {
            env_steps_per_gradient_step(e) == 4.0
        }),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "buffer that holds the whole run",
        check: settings("cartpole-dqn.kdl", |e| {
            dqn(e).buffer_capacity as u64 >= e.train.total_steps
        }),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "the last 100 episodes",
        check: Check::Source {
            file: "src/train/metrics.rs",
            text: "pub const FINAL_SCORE_EPISODES: usize = 100;",
        },
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "Seed 1 on 1 CPU rank",
        check: settings("cartpole-dqn.kdl", |e| {
            e.seed == 1 && e.devices == [Device::Cpu]
        }),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "first at 475 by step 170,000",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "never below 475 after it, 499 or more at the end",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "its last 20 episodes at 499 or more at the end",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "falls to 402 after 150k steps and ends at 430",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "on Intel and on AMD with AVX-512 it is",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "AMD EPYC with AVX2 only (Zen 3)",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_one_rank"),
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "On 2 ranks",
        check: Check::Settings {
            resolve: "cartpole-dqn.kdl",
            sets: &["devices=\"cpu\" \"cpu\""],
            holds: |e| e.devices == [Device::Cpu, Device::Cpu],
        },
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "each steps 2 of the 4 environments",
        check: Check::Settings {
            resolve: "cartpole-dqn.kdl",
            sets: &["devices=\"cpu\" \"cpu\""],
            holds: |e| e.per_rank_envs() == 2 && e.env.envs == 4,
        },
    },
    Claim {
        file: "cartpole-dqn.kdl",
        phrase: "475 by step 120,000 and 500 from step 140,000 at the latest to the end",
        check: Check::Test("dqn_train::dqn_solves_cartpole_on_two_ranks"),
    },
    // cartpole-ddp.kdl
    Claim {
        file: "cartpole-ddp.kdl",
        phrase: "4 environments in total",
        check: settings("cartpole-ddp.kdl", |e| e.env.envs == 4),
    },
    Claim {
        file: "cartpole-ddp.kdl",
        phrase: "(2 per rank)",
        check: settings("cartpole-ddp.kdl", |e| e.per_rank_envs() == 2),
    },
    Claim {
        file: "cartpole-ddp.kdl",
        phrase: "--max-steps 61440",
        check: Check::Test(
            "train_learning::the_ci_run_of_cartpole_ddp_records_its_hash_and_learns",
        ),
    },
    Claim {
        file: "minatar-breakout-residual.kdl",
        phrase: "Seed 1 scores 10.1 over its last 20 episodes within 500k steps on one rank, 8.55 on two",
        check: Check::LongTest(
            "train_learning::the_residual_minatar_network_learns_breakout_on_one_and_two_ranks",
        ),
    },
    Claim {
        file: "minatar-breakout-residual.kdl",
        phrase: "holds at least 3 on both",
        check: Check::LongTest(
            "train_learning::the_residual_minatar_network_learns_breakout_on_one_and_two_ranks",
        ),
    },
    Claim {
        file: "cartpole-residual.kdl",
        phrase: "a mean score of 500 over the last 20 episodes on seed 1",
        check: Check::Test("train_learning::the_residual_mlp_declared_as_layers_solves_cartpole"),
    },
    Claim {
        file: "cartpole-residual.kdl",
        phrase: "holds at least 475",
        check: Check::Test("train_learning::the_residual_mlp_declared_as_layers_solves_cartpole"),
    },
    Claim {
        file: "cartpole-residual.kdl",
        phrase: "seeds 2 and 3 and seed 1 on two",
        check: Check::LongTest(
            "train_learning::the_residual_mlp_solves_cartpole_on_seeds_2_and_3_and_on_two_ranks",
        ),
    },
    Claim {
        file: "cartpole.kdl",
        phrase: "a mean score of 500 over the last 20 episodes on seeds 1-5",
        check: Check::Test("train_learning::the_first_run_solves_cartpole_on_seeds_1_to_5"),
    },
    Claim {
        file: "cartpole.kdl",
        phrase: "holds at least 475 on each seed",
        check: Check::Test("train_learning::the_first_run_solves_cartpole_on_seeds_1_to_5"),
    },
    Claim {
        file: "cartpole-ddp.kdl",
        phrase: "2 envs x 128 steps = 256, in 4 minibatches of 64",
        check: settings("cartpole-ddp.kdl", |e| {
            e.per_rank_envs() == 2 && e.train.rollout == 128 && ppo(e).minibatches == 4
        }),
    },
    // gymnasium-cartpole.kdl
    Claim {
        file: "gymnasium-cartpole.kdl",
        phrase: "Seed 1 scores 475 or more over its last 20 episodes within its 200k steps on 1 rank",
        check: Check::Test("gym_train::ppo_learns_gymnasium_cartpole_on_one_rank"),
    },
    Claim {
        file: "gymnasium-cartpole.kdl",
        phrase: "2 ranks",
        check: Check::Test("gym_train::ppo_learns_gymnasium_cartpole_on_two_ranks"),
    },
    // halfcheetah-ppo.kdl
    Claim {
        file: "halfcheetah-ppo.kdl",
        phrase: "Seed 1 scores 700 or more over its last 20 episodes within 200k steps",
        check: Check::Test("gym_train::the_shipped_halfcheetah_ppo_preset_runs_within_200k_steps"),
    },
    // halfcheetah-sac.kdl
    Claim {
        file: "halfcheetah-sac.kdl",
        phrase: "Seed 1 scores 800 or more over its last 20 episodes within 30k steps",
        check: Check::LongTest(
            "gym_train::the_shipped_halfcheetah_sac_preset_runs_within_30k_steps",
        ),
    },
    // halfcheetah-td3.kdl
    Claim {
        file: "halfcheetah-td3.kdl",
        phrase: "Seed 1 scores 200 or more over its last 20 episodes within 50k steps",
        check: Check::LongTest(
            "gym_train::the_shipped_halfcheetah_td3_preset_runs_within_50k_steps",
        ),
    },
    Claim {
        file: "minatar-breakout-dqn.kdl",
        phrase: "Seed 1 scores 7 or more over its last 20 episodes within 500k steps",
        check: Check::LongTest(
            "train_learning::the_shipped_minatar_breakout_dqn_preset_learns_within_500k_steps",
        ),
    },
    // minatar-breakout.kdl
    Claim {
        file: "minatar-breakout.kdl",
        phrase: "Seed 1 scores 3 or more over its last 20 episodes within 500k steps",
        check: Check::Test(
            "train_learning::the_shipped_minatar_breakout_preset_learns_within_500k_steps",
        ),
    },
    // include/deepmind-atari.kdl
    Claim {
        file: "include/deepmind-atari.kdl",
        phrase: "108k frames at frame-skip 4",
        check: settings("breakout.kdl", |e| {
            frame_skip(e) == Some(4) && time_limit(e).map(|t| t * 4) == Some(108_000)
        }),
    },
    // minatar-breakout-dqn.kdl
    Claim {
        file: "minatar-breakout-dqn.kdl",
        phrase: "each rank steps 2 of the 4 environments",
        check: settings("minatar-breakout-dqn.kdl", |e| {
            e.per_rank_envs() == 2 && e.env.envs == 4
        }),
    },
    Claim {
        file: "minatar-breakout-dqn.kdl",
        phrase: "one per 4 global environment steps",
        check: settings("minatar-breakout-dqn.kdl", |e| {
            env_steps_per_gradient_step(e) == 4.0
        }),
    },
    Claim {
        file: "minatar-breakout-dqn.kdl",
        phrase: "\"update every 4 frames\"",
        check: settings("minatar-breakout-dqn.kdl", |e| {
            env_steps_per_gradient_step(e) == 4.0
        }),
    },
    Claim {
        file: "minatar-breakout-dqn.kdl",
        phrase: "over the first 100k steps",
        check: settings("minatar-breakout-dqn.kdl", |e| {
            (dqn(e).epsilon_fraction * e.train.total_steps as f64).round() == 100_000.0
        }),
    },
    // minatar-breakout.kdl
    Claim {
        file: "minatar-breakout.kdl",
        phrase: "(10x10x4 binary planes)",
        check: settings("minatar-breakout.kdl", |e| {
            e.env
                .observation()
                .is_some_and(|o| o.is_planes() && o.network_shape() == [4, 10, 10])
        }),
    },
];

fn experiments_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments")
}

/// `experiments/*.kdl` and `experiments/include/*.kdl`, relative to `experiments/`, sorted.
fn example_files() -> Vec<String> {
    let mut files = Vec::new();
    for sub in ["", "include/"] {
        for entry in std::fs::read_dir(experiments_dir().join(sub))
            .unwrap()
            .flatten()
        {
            let name = entry.file_name().into_string().unwrap();
            if name.ends_with(".kdl") && entry.file_type().unwrap().is_file() {
                files.push(format!("{sub}{name}"));
            }
        }
    }
    files.sort();
    files
}

/// Where `claim` is made, as `experiments/FILE:LINE` (the first comment line holding its
/// phrase; the file alone when none does).
fn place(claim: &Claim) -> String {
    let text = std::fs::read_to_string(experiments_dir().join(claim.file)).unwrap_or_default();
    match comments(&text)
        .iter()
        .find(|(_, c)| c.contains(claim.phrase))
    {
        Some((line, _)) => format!("experiments/{}:{line}", claim.file),
        None => format!("experiments/{}", claim.file),
    }
}

/// The comments of a KDL text as (1-based line, comment text), one entry per line a comment
/// covers: `// ...` to the end of the line and `/* ... */` blocks; `//` inside a string is text.
fn comments(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    for (index, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut comment = String::new();
        let (mut i, mut in_string) = (0, false);
        while i < chars.len() {
            let (c, next) = (chars[i], chars.get(i + 1).copied());
            if in_block {
                if c == '*' && next == Some('/') {
                    in_block = false;
                    i += 1;
                } else {
                    comment.push(c);
                }
            } else if in_string {
                if c == '\\' {
                    i += 1;
                } else if c == '"' {
                    in_string = false;
                }
            } else if c == '"' {
                in_string = true;
            } else if c == '/' && next == Some('/') {
                comment.extend(&chars[i + 2..]);
                break;
            } else if c == '/' && next == Some('*') {
                in_block = true;
                i += 1;
            }
            i += 1;
        }
        if !comment.is_empty() {
            found.push((index + 1, comment));
        }
    }
    found
}

/// The numbers in `text` as (byte offset, text): a run of digits, with `,` `_` `.` between
/// digits, that does not follow a letter, digit or `_` (so `e2e`, `sha256` and `x10` are names,
/// not numbers).
fn numbers(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len()
            && (bytes[i].is_ascii_digit()
                || (matches!(bytes[i], b',' | b'_' | b'.')
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        found.push((start, text[start..i].to_string()));
        // Skip the rest of a token such as `10x10x4` or `100k`.
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
    }
    found
}

/// The numbers of `comment` that no phrase of `claims` covers, and which claims covered any.
fn uncovered<'a>(comment: &str, claims: &[&'a Claim]) -> (Vec<String>, Vec<&'a Claim>) {
    let mut covered = vec![false; comment.len()];
    let mut used = Vec::new();
    for claim in claims {
        for (at, _) in comment.match_indices(claim.phrase) {
            covered[at..at + claim.phrase.len()].fill(true);
            used.push(*claim);
        }
    }
    let missing = numbers(comment)
        .into_iter()
        .filter(|(at, _)| !covered[*at])
        .map(|(_, number)| number)
        .collect();
    (missing, used)
}

#[test]
fn every_number_in_an_example_comment_is_checked() {
    let mut problems = Vec::new();
    let mut used: Vec<*const Claim> = Vec::new();
    for file in example_files() {
        let text = std::fs::read_to_string(experiments_dir().join(&file)).unwrap();
        let mine: Vec<&Claim> = CLAIMS.iter().filter(|c| c.file == file).collect();
        for (line, comment) in comments(&text) {
            let (missing, covering) = uncovered(&comment, &mine);
            used.extend(covering.into_iter().map(|c| c as *const Claim));
            for number in missing {
                problems.push(format!(
                    "experiments/{file}:{line}: the comment states {number}, which no entry of \
                     CLAIMS in tests/example_claims.rs checks (comment: {:?})",
                    comment.trim()
                ));
            }
        }
    }
    for claim in CLAIMS {
        if !used.contains(&(claim as *const Claim)) {
            problems.push(format!(
                "CLAIMS names {:?} in experiments/{}, but no comment of that file says it",
                claim.phrase, claim.file
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_settings_that_example_comments_restate_hold() {
    let mut problems = Vec::new();
    for claim in CLAIMS {
        let Check::Settings {
            resolve,
            sets,
            holds,
        } = &claim.check
        else {
            continue;
        };
        let source = Source::Path(experiments_dir().join(resolve));
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        match tandem_config::resolve(&source, &sets) {
            Ok(resolved) if holds(&resolved.experiment) => {}
            Ok(_) => problems.push(format!(
                "{}: {:?} does not hold for experiments/{resolve} {sets:?}",
                place(claim),
                claim.phrase
            )),
            Err(diagnostics) => problems.push(format!(
                "{}: {:?}: experiments/{resolve} {sets:?} does not resolve: {diagnostics:?}",
                place(claim),
                claim.phrase
            )),
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_tests_that_check_example_figures_exist() {
    let mut problems = Vec::new();
    for claim in CLAIMS {
        let (name, ignored) = match claim.check {
            Check::Test(name) => (name, false),
            Check::LongTest(name) => (name, true),
            _ => continue,
        };
        let (file, function) = name.split_once("::").expect("FILE::NAME");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/{file}.rs"));
        let source = std::fs::read_to_string(&path).unwrap_or_default();
        if !has_test(&source, function, ignored) {
            let kind = if ignored {
                "#[ignore]d test"
            } else {
                "test run on CI"
            };
            problems.push(format!(
                "{}: {:?} is checked by {name}, but tests/{file}.rs has no {kind} {function}",
                place(claim),
                claim.phrase
            ));
        }
        let example = experiments_dir().join(claim.file);
        if ignored && !std::fs::read_to_string(&example).is_ok_and(|s| s.contains("--ignored")) {
            problems.push(format!(
                "{}: {:?} is held by a test CI does not run; the file's comment must say to run \
                 it with --ignored",
                place(claim),
                claim.phrase
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Whether `source` has a test `function`, `#[ignore = "..."]`d or not as `ignored` says: a
/// claim CI holds must not sit in a test CI skips.
fn has_test(source: &str, function: &str, ignored: bool) -> bool {
    let Some(at) = source.find(&format!("\nfn {function}()")) else {
        return false;
    };
    let attributes: Vec<&str> = source[..at]
        .lines()
        .rev()
        .take_while(|line| line.starts_with("#["))
        .collect();
    attributes.contains(&"#[test]")
        && attributes.iter().any(|a| a.starts_with("#[ignore")) == ignored
}

#[test]
fn the_code_constants_that_example_comments_restate_hold() {
    let mut problems = Vec::new();
    for claim in CLAIMS {
        let Check::Source { file, text } = claim.check else {
            continue;
        };
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        if !std::fs::read_to_string(&path)
            .unwrap_or_default()
            .contains(text)
        {
            problems.push(format!(
                "{}: {:?} rests on {file} containing {text:?}, which it does not",
                place(claim),
                claim.phrase
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_scanner_finds_numbers_in_comments_and_only_there() {
    let text = "node 12 // reaches 475 at step 153,600\n/* 10x10x4 */ \"a // 7\" // e2e cuda:0";
    let found: Vec<(usize, Vec<String>)> = comments(text)
        .into_iter()
        .map(|(line, c)| (line, numbers(&c).into_iter().map(|(_, n)| n).collect()))
        .collect();
    assert_eq!(
        found,
        vec![
            (1, vec!["475".to_string(), "153,600".to_string()]),
            (2, vec!["10".to_string(), "0".to_string()]),
        ]
    );
}

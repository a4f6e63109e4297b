//! `league { ... }`: self-play against the learner's past selves. What it resolves to, its round
//! trips and hash, and the mistakes it refuses at their place.

mod common;

use common::{resolved, the_error as only_error};
use tandem_config::*;

/// simple_tag (four agents) on `devices` ranks, `envs` games, with `extra` settings and this
/// league.
fn text(devices: usize, envs: usize, extra: &str, league: &str) -> String {
    format!(
        "experiment \"x\" {{\n    devices count={devices} kind=\"cpu\"\n    algorithm \"ppo\" {{ minibatches 2; }}\n    env \"mpe-simple-tag\" {{ envs {envs}; }}\n{extra}    league {{\n{league}    }}\n}}\n"
    )
}

#[test]
fn a_league_resolves_round_trips_and_enters_the_hash() {
    let e = resolved(&text(1, 8, "", "        every 5000\n        size 4\n"));
    let l = &e.league;
    assert_eq!(
        (l.every, l.size, l.opponent),
        (Some(5000), 4, OpponentRule::WinRate)
    );
    let canonical = canonical_kdl(&e);
    assert!(
        canonical.contains("    league {\n        every 5000\n        size 4\n        pool \"own\"\n        opponent \"win-rate\"\n    }\n"),
        "{canonical}"
    );
    assert_eq!(resolved(&canonical), e);
    let from_json = resolve(&Source::Stdin(canonical_json(&e)), &[])
        .unwrap()
        .experiment;
    assert_eq!(config_hash(&from_json), config_hash(&e));
    let latest = resolved(&text(
        1,
        8,
        "",
        "        every 5000\n        size 4\n        opponent \"latest\"\n",
    ));
    assert_ne!(config_hash(&latest), config_hash(&e));
    // Without a league, the section is at its defaults.
    let none = resolved(&text(1, 8, "", ""));
    assert_eq!(none.league, League::default());
    assert_eq!(none.league.every, None);
}

#[test]
fn a_league_needs_a_game_of_several_agents() {
    let one = "experiment \"x\" {\n    algorithm \"ppo\"\n    env \"cartpole\"\n    league {\n        every 1000\n    }\n}\n";
    let d = only_error(one);
    assert!(
        d.message().contains("cartpole has one agent"),
        "{}",
        d.message()
    );
    assert_eq!(d.label(), Some("a league"));
}

/// In game g the learner plays agent g mod 4: 6 games a rank would give it seats 0 and 1 twice.
#[test]
fn a_ranks_games_give_the_learner_every_seat_alike() {
    let d = only_error(&text(1, 6, "", "        every 1000\n"));
    assert!(
        d.message()
            .contains("a rank's 6 games cannot give the learner each of the 4 seats alike"),
        "{}",
        d.message()
    );
    assert_eq!(d.label(), Some("games a rank"));
    assert!(
        d.help().unwrap().contains("multiple of 4"),
        "{:?}",
        d.help()
    );
    // 16 games over 2 ranks: 8 a rank, two of each seat.
    resolved(&text(2, 16, "", "        every 1000\n"));
    let d = only_error(&text(2, 12, "", "        every 1000\n"));
    assert!(d.message().contains("a rank's 6 games"), "{}", d.message());
}

#[test]
fn what_a_league_cannot_have_yet_is_refused_where_it_is_written() {
    let refused = [
        (
            "    network \"mlp\" { actor-critic \"separate\"; critic-input \"state\"; }\n",
            "a league cannot have a centralised critic yet",
        ),
        (
            "    network \"mlp\" { agent-index #true; }\n",
            "a league cannot have agents told their index yet",
        ),
        (
            "    train { policies { red \"adversary_*\"; blue \"agent_*\"; } }\n",
            "a league cannot have several policies yet",
        ),
        (
            "    train { sampling \"pipelined\"; }\n",
            "a league cannot sample other than synchronously yet",
        ),
    ];
    for (extra, message) in refused {
        let diags = resolve(
            &Source::Stdin(text(1, 8, extra, "        every 1000\n")),
            &[],
        )
        .expect_err(message);
        let said: Vec<&str> = diags.iter().map(|d| d.message()).collect();
        assert!(said.contains(&message), "{message}: {said:?}");
    }
    let dqn =
        text(1, 8, "", "        every 1000\n").replace("\"ppo\" { minibatches 2; }", "\"dqn\"");
    let diags = resolve(&Source::Stdin(dqn), &[]).expect_err("dqn");
    assert!(
        diags
            .iter()
            .any(|d| d.message() == "a league cannot learn with dqn yet"),
        "{}",
        diags.render(false)
    );
}

/// The learner plays one agent a game: its rows of a rank's rollout are games x rollout.
#[test]
fn ppo_minibatches_divide_the_learners_rows() {
    let e = text(1, 8, "    train { rollout 5; }\n", "        every 1000\n")
        .replace("minibatches 2", "minibatches 16");
    let d = only_error(&e);
    assert!(
        d.message().contains(
            "the learner's 40 rows of a rank's rollout cannot be split into 16 minibatches"
        ),
        "{}",
        d.message()
    );
}

#[test]
fn league_settings_without_a_league_are_refused() {
    let d = only_error(&text(1, 8, "", "        size 3\n"));
    assert_eq!(d.message(), "`size` has no effect without a league");
    assert!(d.help().unwrap().contains("set `every`"), "{:?}", d.help());
    let d = only_error(&text(1, 8, "", "        opponent \"uniform\"\n"));
    assert_eq!(d.message(), "`opponent` has no effect without a league");
}

/// The population's snapshots need a population; a member alone keeps its own league (the
/// population sends it the others').
#[test]
fn a_population_pool_needs_a_population_and_its_members_pool_their_own() {
    let d = only_error(&text(
        1,
        8,
        "",
        "        every 1000\n        pool \"population\"\n",
    ));
    assert_eq!(
        d.message(),
        "a league of the population's snapshots needs a population"
    );
    assert_eq!(d.label(), Some("the population's snapshots"));
    let d = only_error(&text(1, 8, "", "        pool \"population\"\n"));
    assert_eq!(d.message(), "`pool` has no effect without a league");
    let population = "    population { members 2; exploit 0; }\n";
    let e = resolved(&text(
        2,
        16,
        population,
        "        every 1000\n        pool \"population\"\n",
    ));
    assert_eq!(e.league.pool, LeaguePool::Population);
    let member = e.for_member(1, 7, &[]).unwrap();
    assert_eq!(member.league.pool, LeaguePool::Own);
    assert_eq!(member.league.every, Some(1000));
}

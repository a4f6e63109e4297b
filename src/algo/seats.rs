//! Which rows of a rank's batch one policy plays ([`Seats`]): in a multi-agent game whose agents
//! several policies play, a policy's agents in every game, and the observation those agents
//! see. The batch holds a game's agents in consecutive rows, each as wide as the widest agent's
//! observation (tandem-env pads the narrower ones with zeros), so a policy reads its rows'
//! leading columns; everything it keeps (rollout buffer, network input) holds only those.
//! A policy told its agents' indices (`network.agent-index`) reads, after its observation, a
//! one-hot of the agent's index among the policy's agents; one with a centralised critic
//! (`network.critic-input "state"`) reads the game's state after those: every agent's row of
//! the game, then a one-hot of the agent's index in the game.

use crate::algo::actions::ActionBatch;

/// The rows of a rank's batch one policy acts for, in batch order.
#[derive(Debug, Clone, PartialEq)]
pub struct Seats {
    /// Row indices into the batch: game after game, the policy's agents in the game's order.
    rows: Vec<usize>,
    /// Floats of the observation the policy's agents see: the leading columns of each row.
    obs_len: usize,
    /// Floats of one row of the batch.
    row_len: usize,
    /// Agents of each game: where a row's game starts, and the one-hot's length.
    agents_per_game: usize,
    /// The policy's agents in each game, where each seat's input carries the one-hot of its
    /// agent's index among them after its observation (0: it does not).
    indexed: usize,
    /// Whether each seat's input carries the game's state after its own observation.
    state: bool,
}

impl Seats {
    /// The seats of `agents` (indices into each game's agents, ascending) in `games` games of
    /// `agents_per_game` rows each, rows `row_len` wide, of which the policy reads `obs_len`.
    pub fn new(
        agents: &[usize],
        agents_per_game: usize,
        games: usize,
        obs_len: usize,
        row_len: usize,
    ) -> Seats {
        debug_assert!(agents.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(agents.iter().all(|&a| a < agents_per_game) && obs_len <= row_len);
        let rows = (0..games)
            .flat_map(|game| agents.iter().map(move |&a| game * agents_per_game + a))
            .collect();
        Seats {
            rows,
            obs_len,
            row_len,
            agents_per_game,
            indexed: 0,
            state: false,
        }
    }

    /// The two sides of a league's games (`crate::algo::league`): in game g of `games` the
    /// learner plays agent g mod `agents_per_game` (so a rank's games give it every seat
    /// alike), the league's snapshots the others; both read whole rows, `row_len` wide.
    pub fn league_sides(agents_per_game: usize, games: usize, row_len: usize) -> (Seats, Seats) {
        let learner = |row: &usize| is_league_learners(*row, agents_per_game);
        let rows = 0..games * agents_per_game;
        let (mine, theirs): (Vec<usize>, Vec<usize>) = rows.partition(learner);
        let sides = Seats::new(&[], agents_per_game, 0, row_len, row_len);
        (sides.with_rows(mine), sides.with_rows(theirs))
    }

    /// These seats' reading of a row, at `rows` instead (ascending).
    pub fn with_rows(&self, rows: Vec<usize>) -> Seats {
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
        Seats {
            rows,
            ..self.clone()
        }
    }

    /// The seats of policy `plan` in `envs` (its agents in every game), with the game's state
    /// where the experiment's critic reads it.
    pub fn of_plan(
        experiment: &tandem_config::Experiment,
        envs: &tandem_env::VecEnv,
        plan: &tandem_config::PolicyPlan,
    ) -> Seats {
        let agents = envs.agents_per_game();
        let games = envs.num_envs() / agents;
        let len = plan.observation.len();
        let mut seats = Seats::new(&plan.agents, agents, games, len, envs.obs_len());
        if experiment.network.agent_index {
            seats = seats.with_index(plan.agents.len());
        }
        match experiment.network.critic_input {
            tandem_config::CriticInput::State => seats.with_state(),
            tandem_config::CriticInput::Own => seats,
        }
    }

    /// These seats with each one's index among the policy's `agents` agents of a game after
    /// its observation.
    pub fn with_index(self, agents: usize) -> Seats {
        Seats {
            indexed: agents,
            ..self
        }
    }

    /// These seats with the game's state after each one's own observation (a centralised
    /// critic's input).
    pub fn with_state(self) -> Seats {
        Seats {
            state: true,
            ..self
        }
    }

    /// Floats of one seat's input: its observation and its index, then, with the state,
    /// every row of its game and the one-hot of its agent.
    pub fn input_len(&self) -> usize {
        match self.state {
            false => self.actor_len(),
            true => self.actor_len() + self.agents_per_game * (self.row_len + 1),
        }
    }

    /// Floats of the input's part the actor reads: the observation and, where told, the
    /// agent's index.
    pub fn actor_len(&self) -> usize {
        self.obs_len + self.indexed
    }

    /// How many rows the policy plays: its buffers' environments.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row indices, in batch order.
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    pub fn obs_len(&self) -> usize {
        self.obs_len
    }

    /// The policy's inputs from a batch's `obs` (rows of `row_len`), seat after seat: its
    /// rows' leading `obs_len` floats, each followed, where told, by its index among the
    /// policy's agents, and, with the state, by its game's rows and its agent's one-hot.
    pub fn observations(&self, obs: &[f32]) -> Vec<f32> {
        let mut mine = Vec::with_capacity(self.rows.len() * self.input_len());
        for (seat, &row) in self.rows.iter().enumerate() {
            let start = row * self.row_len;
            mine.extend_from_slice(&obs[start..start + self.obs_len]);
            if self.indexed > 0 {
                // Seats run game after game, the policy's agents in order in each.
                let index = seat % self.indexed;
                mine.extend((0..self.indexed).map(|a| f32::from(u8::from(a == index))));
            }
            if self.state {
                let (game, agent) = (row / self.agents_per_game, row % self.agents_per_game);
                let first = game * self.agents_per_game * self.row_len;
                mine.extend_from_slice(&obs[first..first + self.agents_per_game * self.row_len]);
                mine.extend((0..self.agents_per_game).map(|a| f32::from(u8::from(a == agent))));
            }
        }
        mine
    }

    /// The policy's entries of a batch's per-row values (rewards, flags).
    pub fn of_rows<T: Copy>(&self, per_row: &[T]) -> Vec<T> {
        self.rows.iter().map(|&row| per_row[row]).collect()
    }

    /// Writes the policy's `actions` (one per seat) into their rows of the batch's `all`.
    pub fn place_actions(&self, actions: &ActionBatch, all: &mut ActionBatch) {
        match (actions, all) {
            (ActionBatch::Discrete(mine), ActionBatch::Discrete(all)) => {
                for (&row, &a) in self.rows.iter().zip(mine) {
                    all[row] = a;
                }
            }
            (
                ActionBatch::Box { dim, values: mine },
                ActionBatch::Box {
                    dim: all_dim,
                    values: all,
                },
            ) if dim == all_dim => {
                for (&row, a) in self.rows.iter().zip(mine.chunks(*dim)) {
                    all[row * dim..(row + 1) * dim].copy_from_slice(a);
                }
            }
            (
                ActionBatch::MultiDiscrete { dim, values: mine },
                ActionBatch::MultiDiscrete {
                    dim: all_dim,
                    values: all,
                },
            ) if dim == all_dim => {
                for (&row, a) in self.rows.iter().zip(mine.chunks(*dim)) {
                    all[row * dim..(row + 1) * dim].copy_from_slice(a);
                }
            }
            _ => unreachable!("every policy of a batch chooses actions of the batch's one kind"),
        }
    }
}

/// The agent a league's learner plays in game `game` of `agents_per_game` agents: agent g mod
/// agents, so that a rank's games give it every seat alike.
pub fn league_learner_agent(game: usize, agents_per_game: usize) -> usize {
    game % agents_per_game
}

/// Whether row `row` of a batch of games of `agents_per_game` agents is a league's learner's.
pub fn is_league_learners(row: usize, agents_per_game: usize) -> bool {
    row % agents_per_game == league_learner_agent(row / agents_per_game, agents_per_game)
}

/// Which of `seats` (one per policy, in order) plays each of a batch's `rows` rows: the one
/// row-to-policy map that training's episodes, evaluation's and `tandem play`'s are counted by.
pub fn owners<'a>(seats: impl IntoIterator<Item = &'a Seats>, rows: usize) -> Vec<usize> {
    let mut owner = vec![0; rows];
    for (policy, seats) in seats.into_iter().enumerate() {
        for &row in seats.rows() {
            owner[row] = policy;
        }
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two games of three agents, rows 4 wide; the policy plays agents 0 and 2, which see 3.
    fn seats() -> Seats {
        Seats::new(&[0, 2], 3, 2, 3, 4)
    }

    #[test]
    fn a_policy_plays_its_agents_in_every_game() {
        let s = seats();
        assert_eq!(s.rows, [0, 2, 3, 5]);
        let obs: Vec<f32> = (0..24).map(|v| v as f32).collect();
        assert_eq!(
            s.observations(&obs),
            [0., 1., 2., 8., 9., 10., 12., 13., 14., 20., 21., 22.]
        );
        assert_eq!(s.of_rows(&[1, 2, 3, 4, 5, 6]), [1, 3, 4, 6]);
        let others = Seats::new(&[1], 3, 2, 3, 4);
        assert_eq!(owners([&s, &others], 6), [0, 1, 0, 0, 1, 0]);
    }

    /// With the state, each seat reads its own columns, its whole game, then its agent.
    #[test]
    fn a_centralised_critic_reads_the_whole_game_and_the_agent() {
        let s = Seats::new(&[1], 2, 2, 1, 2).with_state();
        assert_eq!(s.input_len(), 1 + 2 * 3);
        let obs = [1., 2., 3., 4., 5., 6., 7., 8.];
        assert_eq!(
            s.observations(&obs),
            [3., 1., 2., 3., 4., 0., 1., 7., 5., 6., 7., 8., 0., 1.]
        );
    }

    /// Told the index, each seat reads its own columns, then its place among the policy's
    /// agents (here agents 0 and 2 of each game: indices 0 and 1), then, with the state, the
    /// game.
    #[test]
    fn an_indexed_seat_reads_its_place_among_the_policys_agents() {
        let s = seats().with_index(2);
        assert_eq!((s.actor_len(), s.input_len()), (5, 5));
        let obs: Vec<f32> = (0..24).map(|v| v as f32).collect();
        assert_eq!(
            s.observations(&obs),
            [
                0., 1., 2., 1., 0., 8., 9., 10., 0., 1., 12., 13., 14., 1., 0., 20., 21., 22., 0.,
                1.
            ]
        );
        let s = Seats::new(&[1], 2, 1, 1, 2).with_index(1).with_state();
        assert_eq!((s.actor_len(), s.input_len()), (2, 2 + 2 * 3));
        assert_eq!(
            s.observations(&[1., 2., 3., 4.]),
            [3., 1., 1., 2., 3., 4., 0., 1.]
        );
    }

    /// Three games of two agents: the learner plays agent 0 of game 0, agent 1 of game 1,
    /// agent 0 of game 2; the league the rest.
    #[test]
    fn a_league_gives_the_learner_each_seat_in_turn() {
        let (learner, league) = Seats::league_sides(2, 3, 4);
        assert_eq!(
            (learner.rows(), league.rows()),
            (&[0, 3, 4][..], &[1, 2, 5][..])
        );
        assert_eq!((learner.input_len(), league.input_len()), (4, 4));
        let (learner, _) = Seats::league_sides(3, 3, 1);
        assert_eq!(learner.rows(), [0, 4, 8]);
    }

    #[test]
    fn actions_go_to_the_policys_rows_only() {
        let s = seats();
        let mut all = ActionBatch::Discrete(vec![-1; 6]);
        s.place_actions(&ActionBatch::Discrete(vec![7, 8, 9, 10]), &mut all);
        assert!(matches!(&all, ActionBatch::Discrete(a) if a == &[7, -1, 8, 9, -1, 10]));
        let mut all = ActionBatch::Box {
            dim: 2,
            values: vec![0.0; 12],
        };
        let mine = ActionBatch::Box {
            dim: 2,
            values: vec![1., 2., 3., 4., 5., 6., 7., 8.],
        };
        s.place_actions(&mine, &mut all);
        let ActionBatch::Box { values, .. } = all else {
            unreachable!()
        };
        assert_eq!(values, [1., 2., 0., 0., 3., 4., 5., 6., 0., 0., 7., 8.]);
    }
}

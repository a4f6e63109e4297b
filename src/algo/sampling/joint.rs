//! Joint rollouts of a multi-agent batch whose agents several policies play: on each step every
//! policy acts for its seats ([`Seats`]), in the order of the run's policies, the batch steps
//! once with all their actions, and each policy's buffer records what its own rows saw. The
//! draws happen in that fixed order from the update's sampling stream, so a joint rollout is
//! as reproducible as a single policy's.

use std::time::Instant;

use anyhow::{Result, ensure};
use tch::Tensor;

use tandem_env::VecEnv;

use super::collect::{Draws, Stepped, record_step, timed};
use crate::algo::actions::{ActionBatch, ActionKind};
use crate::algo::league::League;
use crate::algo::learner::{Phases, Seated};
use crate::algo::storage::host_rows::{copy_rows_into, host_actions, rows_to_batch};
use crate::nn::ActTaken;

/// Fills every player's buffer with one rollout of `envs` and returns each one's V(s_T), the
/// values of its rows' observations after the last step. Phases as
/// [`super::collect::RolloutCollector::collect`]'s. With a `league`, its snapshots play the rows
/// the players do not, acting after them.
pub fn collect_joint(
    players: &mut [Seated],
    mut league: Option<&mut League>,
    envs: &mut VecEnv,
    draws: Draws,
    phases: &mut Phases,
) -> Result<Vec<Tensor>> {
    let start = Instant::now();
    let opponents = league.as_ref().map_or(0, |l| l.opponent_rows());
    let rows = opponents + players.iter().map(|p| p.seats.len()).sum::<usize>();
    ensure!(
        rows == envs.num_envs(),
        "the policies play {rows} rows of a batch of {}",
        envs.num_envs()
    );
    draws.seed_sampling();
    let kind = ActionKind::of(envs.action_space());
    let mut actions = ActionBatch::zeros(kind, rows);
    for p in players.iter_mut() {
        p.buffer.reset();
        copy_rows_into(&p.buffer.next_obs()?, &p.seats.observations(envs.obs()))?;
    }
    let steps = players.first().map_or(0, |p| p.buffer.num_steps());
    for t in 0..steps {
        let mut taken: Vec<(Tensor, ActTaken)> = Vec::with_capacity(players.len());
        for p in players.iter() {
            let obs = p.buffer.obs_row(t)?;
            let chosen = timed(phases, "inference", || tch::no_grad(|| p.model.act(&obs)))?;
            let mine = host_actions(&p.model.env_actions(&chosen.actions), kind)?;
            p.seats.place_actions(&mine, &mut actions);
            taken.push((obs, chosen));
        }
        if let Some(league) = league.as_deref() {
            timed(phases, "inference", || league.act(envs, &mut actions))?;
        }
        // Whose turn it is, and who has left, are properties of the observations acted on.
        let acting = envs.acting();
        let stepping = Instant::now();
        envs.step(&actions)?;
        phases.add("env", stepping.elapsed());
        if let Some(league) = league.as_deref_mut() {
            league.stepped(envs, draws.update, t as u64);
        }
        for (p, (obs, chosen)) in players.iter_mut().zip(taken) {
            if t + 1 < steps {
                copy_rows_into(&p.buffer.obs_row(t + 1)?, &p.seats.observations(envs.obs()))?;
            }
            let mine = acting.as_deref().map(|acting| p.seats.of_rows(acting));
            record_seats(p, envs, &obs, mine.as_deref(), &chosen, phases)?;
        }
    }
    let acting = envs.acting();
    let last_values = players
        .iter_mut()
        .map(|p| bootstrap(p, envs, acting.as_deref(), phases))
        .collect();
    phases.add("rollout", start.elapsed());
    last_values
}

/// Pushes the step a player's rows just took into its buffer; `acting`, which of them acted,
/// where some did not.
fn record_seats(
    p: &mut Seated,
    envs: &VecEnv,
    obs: &Tensor,
    acting: Option<&[bool]>,
    chosen: &ActTaken,
    phases: &mut Phases,
) -> Result<()> {
    let (rewards, terminated, truncated, final_obs) = (
        p.seats.of_rows(envs.rewards()),
        p.seats.of_rows(envs.terminated()),
        p.seats.of_rows(envs.truncated()),
        p.seats.observations(envs.final_obs()),
    );
    let stepped = Stepped {
        rewards: &rewards,
        terminated: &terminated,
        truncated: &truncated,
        final_obs: &final_obs,
    };
    let model = p.model;
    let truncation_value = |finals: &Tensor| model.value(finals);
    record_step(
        p.buffer,
        &stepped,
        obs,
        acting,
        chosen,
        &truncation_value,
        phases,
    )
}

/// Records s_T of a player's rows in its buffer, with which of them act on it (`acting`, every
/// row's, where some do not), and returns V(s_T).
fn bootstrap(
    p: &mut Seated,
    envs: &VecEnv,
    acting: Option<&[bool]>,
    phases: &mut Phases,
) -> Result<Tensor> {
    let device = p.buffer.device();
    let shape = [p.seats.input_len() as i64];
    let last_obs = rows_to_batch(
        &p.seats.observations(envs.obs()),
        p.seats.len(),
        &shape,
        device,
    );
    let mine = acting.map(|acting| p.seats.of_rows(acting));
    p.buffer.set_bootstrap(&last_obs, None, mine.as_deref())?;
    timed(phases, "inference", || {
        tch::no_grad(|| p.model.value(&last_obs))
    })
}

//! How the on-policy learner's experience is sampled, one mode a file, chosen once from
//! `train.sampling` ([`Sampler`]):
//!
//! - [`synchronous`]: collect with the current policy, then update;
//! - [`pipelined`]: update on the batch the round before collected while a second thread
//!   collects the next with the policy of one update before;
//! - [`free`]: sample-factory's asynchronous sampling, its roles (rollout worker, policy worker,
//!   the exchange, the learner's loop) each in a file of its own.
//!
//! Underneath them: the rollout collector every mode steps environments with ([`collect`]) and
//! the collection thread beside the learner ([`overlap`]). Where several policies play one
//! multi-agent batch, [`joint`] collects all their rollouts at once, synchronously.

pub mod collect;
pub mod free;
pub mod joint;
pub mod overlap;
pub mod pipelined;
pub mod synchronous;

use std::path::Path;

use anyhow::Result;
use tandem_config::{Sampling, Train};
use tandem_env::VecEnv;

use super::learner::{Resumed, Round, Scalars};
use super::on_policy::update::{Blueprint, Learning, PolicyUpdate};
use super::storage::memory::Memory;
use collect::RolloutCollector;
use free::policy_worker::PolicyWorker;
use free::{FreeCollection, FreeSampling};
use pipelined::Pipeline;

/// The sampling mode of an on-policy learner, with what it keeps between rounds.
pub enum Sampler {
    Synchronous(RolloutCollector),
    Pipelined(Pipeline),
    Free(FreeSampling),
}

impl Sampler {
    /// The mode `train.sampling` names, over the environments and networks of `blueprint`.
    pub fn new(train: &Train, blueprint: &Blueprint) -> Result<Sampler> {
        let (n_envs, groups) = (blueprint.n_envs as usize, train.env_groups);
        let in_turn =
            || RolloutCollector::new(n_envs, groups, &blueprint.obs_shape, blueprint.action_kind);
        Ok(match train.sampling {
            Sampling::Synchronous => Sampler::Synchronous(in_turn()?),
            Sampling::Pipelined => Sampler::Pipelined(Pipeline::new(in_turn()?, blueprint)?),
            Sampling::Free => {
                let collection = if groups > 1 {
                    let worker = PolicyWorker::new(
                        n_envs,
                        groups,
                        &blueprint.obs_shape,
                        blueprint.action_kind,
                    )?;
                    FreeCollection::ReadyOrder(worker, Default::default())
                } else {
                    FreeCollection::InTurn(in_turn()?)
                };
                Sampler::Free(FreeSampling::new(
                    collection,
                    blueprint,
                    train.round_updates,
                    train.max_policy_lag,
                )?)
            }
        })
    }

    /// Updates a round takes: one, or free sampling's `train.round-updates`.
    pub fn updates_per_round(&self) -> u64 {
        match self {
            Sampler::Synchronous(_) | Sampler::Pipelined(_) => 1,
            Sampler::Free(free) => free.round_updates(),
        }
    }

    /// One round of this mode; returns the last update's scalars.
    pub fn round<U: PolicyUpdate>(
        &mut self,
        learning: &mut Learning<U>,
        memory: Option<&mut Memory>,
        envs: &mut VecEnv,
        round: Round,
    ) -> Result<Scalars> {
        match self {
            Sampler::Synchronous(collector) => {
                synchronous::round(collector, learning, memory, envs, round)
            }
            Sampler::Pipelined(pipeline) => pipeline.round(learning, memory, envs, round),
            Sampler::Free(free) => free.round(learning, memory, envs, round),
        }
    }

    /// What this mode keeps beside a checkpoint: pipelined sampling's batch in flight.
    pub fn save(
        &self,
        learning: &Learning<impl PolicyUpdate>,
        dir: &Path,
        step: u64,
    ) -> Result<()> {
        match self {
            Sampler::Pipelined(pipeline) => {
                pipeline.save(&learning.buffer, dir, learning.rank, step)
            }
            Sampler::Synchronous(_) | Sampler::Free(_) => Ok(()),
        }
    }

    /// Takes back what [`Sampler::save`] kept, where the environments continue the saved
    /// episodes.
    pub fn restore(
        &mut self,
        learning: &mut Learning<impl PolicyUpdate>,
        resumed: &Resumed,
    ) -> Result<()> {
        let rank = learning.rank;
        match self {
            Sampler::Pipelined(pipeline) => pipeline.restore(&mut learning.buffer, resumed, rank),
            Sampler::Free(_) => {
                tracing::info!(
                    "rank {rank}: free sampling keeps no batches in flight in a checkpoint; the \
                     first round learns from batches collected afresh"
                );
                Ok(())
            }
            Sampler::Synchronous(_) => Ok(()),
        }
    }
}

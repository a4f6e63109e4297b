//! What learners keep between acting and learning: the on-policy rollout buffer with its
//! estimators ([`rollout`]), the off-policy replay ([`replay`]), raw copies of host rows in and
//! out of tensors ([`host_rows`]), and what the on-policy learner keeps per rank beside a
//! checkpoint: a recurrent policy's memory ([`memory`]) and pipelined sampling's batch in
//! flight ([`in_flight`]).

pub mod host_rows;
pub mod in_flight;
pub mod memory;
pub mod replay;
pub mod rollout;

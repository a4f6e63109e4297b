//! The rendezvous protocol on top of the store: every rank announces its identity (config hash,
//! tandem version, host, pid) under its own key, waits for every other rank's announcement, and
//! refuses to go on when any identity field differs. A rank that never comes is named at the
//! deadline.

use std::time::Instant;

use super::DistError;
use super::group::{GroupOptions, Store};

fn rank_key(rank: usize) -> String {
    format!("tandem/rendezvous/rank/{rank}")
}

/// Identity fields that are informative only and allowed to differ between ranks.
const INFORMATIVE: &[&str] = &["host", "pid"];

fn encode(identity: &[(String, String)]) -> Vec<u8> {
    let mut out = String::new();
    for (k, v) in identity {
        out.push_str(k);
        out.push('=');
        out.push_str(&v.replace('\n', " "));
        out.push('\n');
    }
    out.into_bytes()
}

fn decode(bytes: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn announce_and_check(
    store: &Store,
    opts: &GroupOptions,
    deadline: Instant,
) -> Result<(), DistError> {
    let mut identity = opts.identity.clone();
    identity.push((
        "host".into(),
        super::hostname().unwrap_or_else(|| "unknown".into()),
    ));
    identity.push(("pid".into(), std::process::id().to_string()));
    store.set(&rank_key(opts.rank), &encode(&identity))?;

    let keys: Vec<String> = (0..opts.world_size).map(rank_key).collect();
    let remaining = deadline.saturating_duration_since(Instant::now());
    let values = store
        .wait_all(&keys, remaining, "the rendezvous of all ranks")
        .map_err(|e| match e {
            DistError::Timeout { what, missing, .. } => DistError::Timeout {
                what: format!("{what} at {}", store.address()),
                // The configured timeout, not the measured wait (a few ms short of it).
                after: opts.rendezvous_timeout,
                missing: missing
                    .iter()
                    .map(|k| k.rsplit('/').next().unwrap_or(k).to_string())
                    .map(|r| format!("rank {r}"))
                    .collect(),
            },
            other => other,
        })?;

    // Rank 0 hosts the store: it must not leave (on a mismatch below) before every rank has
    // read every identity, or they would see "connection closed" instead of the real reason.
    store.add("tandem/rendezvous/read", 1)?;
    if opts.rank == 0 {
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(std::time::Duration::from_secs(5));
        let start = Instant::now();
        while store.add("tandem/rendezvous/read", 0)? < opts.world_size as i64
            && start.elapsed() < remaining
        {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let identities: Vec<Vec<(String, String)>> = values.iter().map(|v| decode(v)).collect();
    let mut problems = Vec::new();
    for (field, mine) in &opts.identity {
        if INFORMATIVE.contains(&field.as_str()) {
            continue;
        }
        let mut by_value: Vec<(String, Vec<usize>)> = Vec::new();
        for (rank, id) in identities.iter().enumerate() {
            let theirs = id
                .iter()
                .find(|(k, _)| k == field)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "<absent>".to_string());
            match by_value.iter_mut().find(|(v, _)| *v == theirs) {
                Some((_, ranks)) => ranks.push(rank),
                None => by_value.push((theirs, vec![rank])),
            }
        }
        if by_value.len() > 1 {
            let groups: Vec<String> = by_value
                .iter()
                .map(|(v, ranks)| format!("rank(s) {ranks:?} have {v}"))
                .collect();
            problems.push(format!(
                "{field} differs: {} (this is rank {} with {mine})",
                groups.join("; "),
                opts.rank
            ));
        }
    }
    if !problems.is_empty() {
        return Err(DistError::Mismatch(format!(
            "ranks disagree at rendezvous: {}",
            problems.join(". ")
        )));
    }
    Ok(())
}

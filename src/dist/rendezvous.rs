//! The rendezvous protocol on top of the store: every rank announces its identity (config hash,
//! tandem version, host, pid) under its own key, waits for every other rank's announcement, and
//! refuses to go on when any identity field differs. A rank that never comes is named at the
//! deadline.

use std::time::Instant;

use super::DistError;
use super::options::GroupOptions;
use super::store::Store;

fn rank_key(rank: usize) -> String {
    format!("tandem/rendezvous/rank/{rank}")
}

/// Identity fields that are informative only and allowed to differ between ranks.
const INFORMATIVE: &[&str] = &["host", "pid", "addr", "node", "ranks-per-node"];

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

/// Announces this rank (its identity plus `addr`, the address its group binds), waits for all,
/// checks that they agree, and returns every rank's identity, in rank order.
pub(super) fn announce_and_check(
    store: &Store,
    opts: &GroupOptions,
    addr: &str,
    deadline: Instant,
) -> Result<Vec<Vec<(String, String)>>, DistError> {
    let mut identity = opts.identity.clone();
    identity.push((
        "host".into(),
        super::hostname().unwrap_or_else(|| "unknown".into()),
    ));
    identity.push(("pid".into(), std::process::id().to_string()));
    identity.push(("addr".into(), addr.to_string()));
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
                missing: name_missing(
                    &missing
                        .iter()
                        .filter_map(|k| k.rsplit('/').next()?.parse().ok())
                        .collect::<Vec<usize>>(),
                    opts,
                ),
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
    Ok(identities)
}

/// The ranks that never came, by node when this rank knows how many ranks a node runs and the
/// job spans several nodes ("node 1 (ranks 2, 3) never joined"), else by rank.
fn name_missing(missing: &[usize], opts: &GroupOptions) -> Vec<String> {
    let per_node: Option<usize> = opts
        .identity
        .iter()
        .find(|(k, _)| k == "ranks-per-node")
        .and_then(|(_, v)| v.parse().ok())
        .filter(|&n| n > 0 && n < opts.world_size);
    let Some(per_node) = per_node else {
        return missing.iter().map(|r| format!("rank {r}")).collect();
    };
    let mut nodes: Vec<(usize, Vec<String>)> = Vec::new();
    for &r in missing {
        let node = r / per_node;
        match nodes.iter_mut().find(|(n, _)| *n == node) {
            Some((_, ranks)) => ranks.push(r.to_string()),
            None => nodes.push((node, vec![r.to_string()])),
        }
    }
    nodes
        .into_iter()
        .map(|(node, ranks)| {
            if ranks.len() == per_node {
                format!("node {node} (ranks {}) never joined", ranks.join(", "))
            } else {
                format!("rank(s) {} of node {node} never joined", ranks.join(", "))
            }
        })
        .collect()
}

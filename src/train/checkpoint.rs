//! Checkpoints, written by rank 0 only: one file per checkpoint holding named tensors (model,
//! optimizer state, normaliser statistics) and the run's metadata (counters, the resolved config
//! and its hash, the run's cumulative episode counts and restarts) as byte tensors, sealed by a
//! digest of all of them. Written atomically (temporary file, fsync, rename, fsync of the
//! directory) so a crash mid-write leaves the previous checkpoint intact; the last K are kept.
//! A damaged file is named in one line ([`load`]), and [`newest_first`] lists what a resume
//! falls back to.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use tch::{Device, Kind, Tensor};

use super::metrics::Episode;

/// Everything a run needs to continue.
pub struct Checkpoint {
    pub update: u64,
    pub global_step: u64,
    /// Episodes finished over the whole run, every attempt of it.
    pub episodes: u64,
    /// The newest episodes (at most the summaries' window), oldest first: the resumed run's
    /// recent means continue from them.
    pub recent: Vec<Episode>,
    /// How many times the run was resumed before this checkpoint was written.
    pub restarts: u64,
    /// The world size the checkpoint was written on (a resume may use another).
    pub world_size: u64,
    pub config_hash: String,
    pub resolved_config: String,
    /// Model parameters, optimizer state, normaliser statistics, by name.
    pub tensors: Vec<(String, Tensor)>,
}

const META_COUNTERS: &str = "meta.counters";
const META_HASH: &str = "meta.config_hash";
const META_CONFIG: &str = "meta.resolved_config";
const META_VERSION: &str = "meta.format_version";
const META_RECENT: &str = "meta.recent_episodes";
/// The recent episodes' info values (`[episodes, info keys]`), written only for an experiment
/// with `info-keys`, so other runs' checkpoints are as before.
const META_RECENT_INFO: &str = "meta.recent_info";
/// Which policy played each recent episode, where a run has several (and one played any).
const META_RECENT_POLICY: &str = "meta.recent_policy";
/// sha256 over every other tensor (names, kinds, shapes, bytes): a damaged file that libtorch
/// still reads is refused too. Checkpoints from before it have none and are read unchecked.
const META_DIGEST: &str = "meta.digest";
const FORMAT_VERSION: i64 = 1;

pub fn checkpoint_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoints")
}

/// Where rank `rank` keeps the snapshot of its environments that goes with checkpoint `update`.
/// Every rank writes its own (environments are per rank); rank 0 writes the model checkpoint.
pub fn env_snapshot_path(run_dir: &Path, update: u64, rank: usize) -> PathBuf {
    checkpoint_dir(run_dir).join(format!("ckpt-{update:09}.rank-{rank}.envs"))
}

/// Writes a rank's environment snapshot atomically.
pub fn save_env_snapshot(run_dir: &Path, update: u64, rank: usize, bytes: &[u8]) -> Result<()> {
    let path = env_snapshot_path(run_dir, update, rank);
    std::fs::create_dir_all(checkpoint_dir(run_dir))?;
    crate::atomic::write_atomic(&path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The update number a checkpoint or snapshot file name carries.
pub fn update_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("ckpt-")?.get(..9)?.parse().ok()
}

fn file_name(update: u64) -> String {
    format!("ckpt-{update:09}.pt")
}

fn bytes_tensor(text: &str) -> Tensor {
    Tensor::from_slice(text.as_bytes())
}

fn tensor_text(t: &Tensor) -> Result<String> {
    let bytes = Vec::<u8>::try_from(t.to_kind(Kind::Uint8))?;
    Ok(String::from_utf8(bytes)?)
}

/// The best checkpoint by evaluation, beside the rolling ones and never pruned nor resumed
/// from (`tandem play RUN_DIR --checkpoint best` plays it).
pub const BEST_FILE: &str = "best.pt";

/// The name of a checkpoint's tensor `[mean score, global step]` of the best evaluation so far,
/// which a resumed run continues from.
pub const EVAL_BEST: &str = "eval.best";

/// Writes `ckpt` into `run_dir/checkpoints/` and removes all but the newest `keep`.
pub fn save(run_dir: &Path, ckpt: &Checkpoint, keep: usize) -> Result<PathBuf> {
    let dir = checkpoint_dir(run_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(file_name(ckpt.update));
    crate::atomic::write_atomic(&path, &encode(ckpt)?).context("cannot write the checkpoint")?;
    prune(&dir, keep)?;
    Ok(path)
}

/// Writes `ckpt` as the run's best checkpoint, [`BEST_FILE`], replacing the one before.
pub fn save_best(run_dir: &Path, ckpt: &Checkpoint) -> Result<PathBuf> {
    let dir = checkpoint_dir(run_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(BEST_FILE);
    crate::atomic::write_atomic(&path, &encode(ckpt)?)
        .context("cannot write the best checkpoint")?;
    Ok(path)
}

/// The file's bytes: the tensors, then the metadata, then the digest of all of them.
fn encode(ckpt: &Checkpoint) -> Result<Vec<u8>> {
    let mut named: Vec<(String, Tensor)> = ckpt
        .tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.detach().to_device(Device::Cpu)))
        .collect();
    named.push((
        META_COUNTERS.into(),
        Tensor::from_slice(&[
            ckpt.update as i64,
            ckpt.global_step as i64,
            ckpt.episodes as i64,
            ckpt.world_size as i64,
            // Appended after the first four, which older readers and files have alone.
            ckpt.restarts as i64,
        ]),
    ));
    named.push((META_HASH.into(), bytes_tensor(&ckpt.config_hash)));
    named.push((META_CONFIG.into(), bytes_tensor(&ckpt.resolved_config)));
    named.push((META_VERSION.into(), Tensor::from_slice(&[FORMAT_VERSION])));
    let recent: Vec<f64> = ckpt
        .recent
        .iter()
        .flat_map(|e| [e.ret, e.length, e.score])
        .collect();
    named.push((META_RECENT.into(), Tensor::from_slice(&recent)));
    let keys = ckpt.recent.first().map_or(0, |e| e.info.len());
    if keys > 0 {
        let info: Vec<f64> = ckpt.recent.iter().flat_map(|e| e.info.clone()).collect();
        let rows = ckpt.recent.len() as i64;
        let info = Tensor::from_slice(&info).reshape([rows, keys as i64]);
        named.push((META_RECENT_INFO.into(), info));
    }
    if ckpt.recent.iter().any(|e| e.policy > 0) {
        let policies: Vec<i64> = ckpt.recent.iter().map(|e| e.policy as i64).collect();
        named.push((META_RECENT_POLICY.into(), Tensor::from_slice(&policies)));
    }
    named.push((META_DIGEST.into(), bytes_tensor(&digest(&named)?)));
    serialize(&named)
}

/// The checkpoint file's bytes, made in memory: libtorch's own file writer throws from a
/// destructor when a write fails (a full disk aborted the process with `unexpected pos`), so the
/// file is written by Rust, whose errors name the file and the cause. A checkpoint holds a
/// model, its optimizer state and small metadata (tens of MB for an Atari CNN), never a replay
/// buffer, so holding it once in memory is cheap. The bytes come from our own shim, not tch's
/// `save_multi_to_stream`, which is unsound for an empty tensor (as `recent` is before the
/// first finished episode; docs/design.md, "Rank 0 writes").
fn serialize(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    crate::torch_ops::save_named(named).context("cannot serialise the checkpoint")
}

/// Every file of `dir` with its name (nothing when the directory does not exist yet).
fn entries(dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((path, name));
    }
    Ok(out)
}

/// Removes the environment snapshots whose checkpoint was never written (every rank writes its
/// snapshot before rank 0 writes the checkpoint; a full disk or a kill between the two leaves
/// the snapshots alone), so that a run directory holds no snapshot without its checkpoint.
/// Only for a run directory held with no run in it (a resume, before its ranks start). Returns
/// the ones removed.
pub fn remove_orphan_snapshots(run_dir: &Path) -> Result<Vec<PathBuf>> {
    let files = entries(&checkpoint_dir(run_dir))?;
    let written: std::collections::BTreeSet<u64> = checkpoints(&files)
        .iter()
        .filter_map(|p| update_of(p))
        .collect();
    let mut removed = Vec::new();
    for (path, name) in files {
        let orphan = name.starts_with("ckpt-")
            && name.ends_with(".envs")
            && update_of(&path).is_some_and(|u| !written.contains(&u));
        if orphan {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// The model checkpoints among `entries`, oldest first.
fn checkpoints(entries: &[(PathBuf, String)]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = entries
        .iter()
        .filter(|(_, name)| name.starts_with("ckpt-") && name.ends_with(".pt"))
        .map(|(path, _)| path.clone())
        .collect();
    out.sort();
    out
}

fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(checkpoints(&entries(dir)?))
}

fn prune(dir: &Path, keep: usize) -> Result<()> {
    let files = entries(dir)?;
    let all = checkpoints(&files);
    let keep = keep.max(1);
    let oldest_kept = if all.len() > keep {
        for old in &all[..all.len() - keep] {
            std::fs::remove_file(old)
                .with_context(|| format!("cannot remove old checkpoint {}", old.display()))?;
        }
        update_of(&all[all.len() - keep]).unwrap_or(0)
    } else {
        0
    };
    let mine = format!(".pt.{}.", std::process::id());
    for (path, name) in files {
        // Environment snapshots of checkpoints that are gone.
        let stale_snapshot =
            name.ends_with(".envs") && update_of(&path).is_some_and(|u| u < oldest_kept);
        // Model-checkpoint temporaries of a writer that was killed (only rank 0 writes those; the
        // other ranks' snapshot temporaries may be in flight and are left alone).
        let dead_temporary = name.starts_with(".ckpt-")
            && name.contains(".pt.")
            && crate::atomic::is_temporary(&name)
            && !name.contains(&mine);
        if stale_snapshot || dead_temporary {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// A run directory's checkpoints, newest first: the order a resume tries them in.
pub fn newest_first(run_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut all = list(&checkpoint_dir(run_dir))?;
    all.reverse();
    Ok(all)
}

/// Refuses a path the user named (a run directory, a checkpoint) that is not there, in those
/// words: what a command makes of an existing path (no checkpoint in it, not a run directory)
/// would mislead about one that was mistyped.
pub fn must_exist(path: &Path) -> Result<()> {
    // symlink_metadata: a dangling link exists; what it points at is the reader's to name.
    if std::fs::symlink_metadata(path).is_err() {
        crate::usage::mistake!("{} does not exist", path.display());
    }
    Ok(())
}

/// Whether `run_dir` holds a population's run (docs/population.md): its members are runs of
/// their own under `members/<k>/`, beside the lineage `population.jsonl`.
pub fn is_population(run_dir: &Path) -> bool {
    run_dir.join("population.jsonl").is_file() && run_dir.join("members").is_dir()
}

/// The run directories whose checkpoints say where `run_dir` stands: itself, or a population's
/// members (each checkpoints at the same updates).
pub fn checkpointing_dirs(run_dir: &Path) -> Vec<PathBuf> {
    if !is_population(run_dir) {
        return vec![run_dir.to_path_buf()];
    }
    let mut members: Vec<PathBuf> = std::fs::read_dir(run_dir.join("members"))
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    members.sort();
    members
}

/// The newest checkpoint of a run directory, or the file itself when given a checkpoint file.
pub fn locate(path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    let dir = checkpoint_dir(path);
    let members = path.join("members");
    if !dir.exists() && is_population(path) {
        crate::usage::mistake!(
            "{} is a population: its members are the runs, each with its own checkpoints; name \
             one, {}",
            path.display(),
            members.join("<k>").display()
        );
    }
    match list(&dir)?.pop() {
        Some(newest) => Ok(newest),
        None => crate::usage::mistake!(
            "{} holds no checkpoint (looked in {})",
            path.display(),
            dir.display()
        ),
    }
}

/// A run directory's best checkpoint by evaluation ([`BEST_FILE`]).
pub fn best(run_dir: &Path) -> Result<PathBuf> {
    let path = checkpoint_dir(run_dir).join(BEST_FILE);
    if !path.is_file() {
        crate::usage::mistake!(
            "{} holds no best checkpoint ({} is missing): a run keeps one only when it evaluates \
             (set `eval {{ every N }}`)",
            run_dir.display(),
            path.display()
        );
    }
    Ok(path)
}

/// A checkpoint of a run directory by name: its newest without `which`, `best` for
/// [`best`], or an update number `N` for `ckpt-N`.
pub fn pick(run_dir: &Path, which: Option<&str>) -> Result<PathBuf> {
    match which {
        None => locate(run_dir),
        Some("best") => best(run_dir),
        Some(text) => {
            let Ok(update) = text.parse::<u64>() else {
                crate::usage::mistake!(
                    "--checkpoint takes an update number or `best`, not `{text}`"
                );
            };
            let path = checkpoint_dir(run_dir).join(file_name(update));
            if !path.is_file() {
                let kept: Vec<String> = list(&checkpoint_dir(run_dir))?
                    .iter()
                    .filter_map(|p| update_of(p).map(|u| u.to_string()))
                    .collect();
                crate::usage::mistake!(
                    "{} holds no checkpoint of update {update}; it keeps {}",
                    run_dir.display(),
                    if kept.is_empty() {
                        "none".to_string()
                    } else {
                        format!("updates {}", kept.join(", "))
                    }
                );
            }
            Ok(path)
        }
    }
}

/// Reads a checkpoint and the experiment it was trained with (the resolved config stored in
/// it, never the source files), refusing a config that does not match its hash.
pub fn open(path: &Path) -> Result<(Checkpoint, tandem_config::Experiment)> {
    let ckpt = load(path)?;
    let experiment =
        tandem_config::parse_stored(&ckpt.resolved_config, &path.display().to_string())
            .map_err(anyhow::Error::msg)?;
    if tandem_config::config_hash(&experiment) != ckpt.config_hash {
        bail!(
            "{} is damaged: its config does not match the hash stored with it",
            path.display()
        );
    }
    Ok((ckpt, experiment))
}

/// Reads a checkpoint; a file that is not whole (truncated, overwritten, its digest not
/// matching) is one line naming it and what is wrong, not libtorch's stack of C++ frames.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let mut named = Tensor::load_multi(path).map_err(|e| {
        anyhow!(
            "checkpoint {} is damaged or not a checkpoint: {}",
            path.display(),
            first_line(&e.to_string())
        )
    })?;
    if let Some(i) = named.iter().position(|(n, _)| n == META_DIGEST) {
        let saved = tensor_text(&named.remove(i).1)?;
        if digest(&named)? != saved {
            bail!(
                "checkpoint {} is damaged: its contents do not match the digest written with it",
                path.display()
            );
        }
    }
    let mut take = |name: &str| -> Result<Tensor> {
        let i = named.iter().position(|(n, _)| n == name).with_context(|| {
            format!("{} is not a tandem checkpoint (no {name})", path.display())
        })?;
        Ok(named.remove(i).1)
    };
    let version = take(META_VERSION)?.int64_value(&[0]);
    if version != FORMAT_VERSION {
        bail!(
            "{} has checkpoint format {version}; this tandem reads format {FORMAT_VERSION}",
            path.display()
        );
    }
    let counters = Vec::<i64>::try_from(take(META_COUNTERS)?)?;
    if counters.len() < 4 {
        bail!("{} is damaged: its counters are cut short", path.display());
    }
    let config_hash = tensor_text(&take(META_HASH)?)?;
    let resolved_config = tensor_text(&take(META_CONFIG)?)?;
    let mut recent: Vec<Episode> = match take(META_RECENT) {
        Ok(t) => Vec::<f64>::try_from(t)?
            .chunks_exact(3)
            .map(|e| Episode {
                ret: e[0],
                length: e[1],
                score: e[2],
                info: Vec::new(),
                policy: 0,
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if let Ok(info) = take(META_RECENT_INFO) {
        let size = info.size();
        if size.len() != 2 || size[0] != recent.len() as i64 {
            bail!(
                "{} is damaged: its recent episodes' info values do not fit its {} episodes",
                path.display(),
                recent.len()
            );
        }
        let values = Vec::<f64>::try_from(info.flatten(0, -1))?;
        for (e, row) in recent.iter_mut().zip(values.chunks_exact(size[1] as usize)) {
            e.info = row.to_vec();
        }
    }
    if let Ok(policies) = take(META_RECENT_POLICY) {
        let policies = Vec::<i64>::try_from(policies)?;
        if policies.len() != recent.len() {
            bail!(
                "{} is damaged: its recent episodes' policies do not fit its {} episodes",
                path.display(),
                recent.len()
            );
        }
        for (e, policy) in recent.iter_mut().zip(policies) {
            e.policy = policy as usize;
        }
    }
    Ok(Checkpoint {
        update: counters[0] as u64,
        global_step: counters[1] as u64,
        episodes: counters[2] as u64,
        world_size: counters[3] as u64,
        restarts: counters.get(4).map_or(0, |&r| r as u64),
        recent,
        config_hash,
        resolved_config,
        tensors: named,
    })
}

/// What a libtorch error says, without its C++ backtrace and advice: the first sentence of its
/// first line.
fn first_line(message: &str) -> &str {
    let line = message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(message);
    let line = line.strip_prefix("Internal torch error: ").unwrap_or(line);
    line.split(". ")
        .next()
        .unwrap_or(line)
        .trim_end_matches('.')
}

/// sha256 (hex) over named tensors in name order: each name, kind, shape and raw bytes.
fn digest(named: &[(String, Tensor)]) -> Result<String> {
    let mut order: Vec<&(String, Tensor)> = named.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hasher = Sha256::new();
    for (name, t) in order {
        let t = t.to_device(Device::Cpu).contiguous();
        hasher.update(name.as_bytes());
        hasher.update(format!("\0{:?}{:?}\0", t.kind(), t.size()).as_bytes());
        let mut bytes = vec![0u8; t.numel() * t.kind().elt_size_in_bytes()];
        t.copy_data_u8(&mut bytes, t.numel());
        hasher.update(&bytes);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

impl Checkpoint {
    /// The counter saved as the one-element tensor `name` (`learner.optimizer_steps`, ...).
    pub fn counter(&self, name: &str) -> Result<u64> {
        let (_, t) = self
            .tensors
            .iter()
            .find(|(n, _)| n == name)
            .with_context(|| format!("the checkpoint has no {name}"))?;
        Ok(t.int64_value(&[0]) as u64)
    }
}

/// What differs between two canonical configs, one line per setting (`algorithm.lr: 0.0003 ->
/// 0.1`): how a refused or recorded resume says what changed.
pub fn config_difference(run: &str, now: &str) -> Vec<String> {
    let (before, after) = (settings(run), settings(now));
    let value_in = |list: &[(String, String)], path: &str| {
        list.iter()
            .find(|(p, _)| p == path)
            .map_or("(absent)".to_string(), |(_, v)| v.clone())
    };
    let mut out = Vec::new();
    for (path, value) in &before {
        let now = value_in(&after, path);
        if &now != value {
            out.push(format!("{path}: {value} -> {now}"));
        }
    }
    for (path, value) in &after {
        if !before.iter().any(|(p, _)| p == path) {
            out.push(format!("{path}: (absent) -> {value}"));
        }
    }
    out
}

/// Each setting of a canonical text as (dotted path, value as written), blocks by their
/// indentation; a repeated name (a wrapper listed twice) gets its position, `name[2]`.
fn settings(text: &str) -> Vec<(String, String)> {
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let line = line.trim();
        if indent == 0 || line.is_empty() || line == "}" {
            continue;
        }
        while open.last().is_some_and(|(i, _)| *i >= indent) {
            open.pop();
        }
        let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
        let mut path: String = open.iter().map(|(_, n)| format!("{n}.")).collect();
        path.push_str(name);
        let seen = out
            .iter()
            .filter(|(p, _)| p == &path || p.starts_with(&format!("{path}[")))
            .count();
        if seen > 0 {
            path = format!("{path}[{}]", seen + 1);
        }
        match rest.strip_suffix('{') {
            Some(kind) => {
                if !kind.trim().is_empty() {
                    out.push((path.clone(), kind.trim().to_string()));
                }
                open.push((indent, path.rsplit('.').next().unwrap_or(name).to_string()));
            }
            None => out.push((path, rest.to_string())),
        }
    }
    out
}

/// Copies checkpointed tensors into `targets` by name; every target must be present with the
/// same shape.
pub fn restore_into(ckpt: &Checkpoint, targets: &[(String, Tensor)]) -> Result<()> {
    crate::nn::copy_named(&ckpt.tensors, "checkpoint tensor", targets, |name| {
        missing_tensor(ckpt, name, targets)
    })
}

/// Why `name` cannot be restored: the checkpoint's tensors of the same part (the first name
/// component, `model` or `optimizer`) that the model does not know either, which shows a
/// checkpoint of another network layout for what it is.
fn missing_tensor(ckpt: &Checkpoint, name: &str, targets: &[(String, Tensor)]) -> String {
    let part = name.split('.').next().unwrap_or(name);
    let unknown: Vec<&str> = ckpt
        .tensors
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| n.split('.').next() == Some(part) && !targets.iter().any(|(t, _)| t == n))
        .collect();
    let mut message = format!("the checkpoint has no tensor `{name}`");
    if !unknown.is_empty() {
        let shown = unknown.len().min(6);
        message += &format!(
            "; it holds {} this model does not: {}{}\nhelp: the checkpoint was written for another \
             network layout; separate-MLP actor-critics now store their torsos and heads stacked \
             (`torsos.*`, `heads.*`), and their checkpoints from before that change do not load",
            if unknown.len() == 1 {
                "a tensor"
            } else {
                "tensors"
            },
            unknown[..shown].join(", "),
            if unknown.len() > shown { ", ..." } else { "" }
        );
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(update: u64) -> Checkpoint {
        Checkpoint {
            update,
            global_step: update * 100,
            episodes: 7,
            recent: vec![Episode {
                ret: 1.0,
                length: 2.0,
                score: 3.0,
                info: Vec::new(),
                policy: 0,
            }],
            restarts: 3,
            world_size: 2,
            config_hash: "abc123".into(),
            resolved_config: "experiment \"x\" {\n}\n".into(),
            tensors: vec![("model.w".into(), Tensor::from_slice(&[1.5f32, -2.0]))],
        }
    }

    #[test]
    fn save_load_round_trip_and_keep_the_newest() {
        let dir = std::env::temp_dir().join(format!("tandem-ckpt-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for u in 1..=4 {
            save(&dir, &sample(u), 2).unwrap();
        }
        let files = list(&checkpoint_dir(&dir)).unwrap();
        assert_eq!(files.len(), 2);
        let newest = locate(&dir).unwrap();
        assert!(newest.ends_with("ckpt-000000004.pt"), "{newest:?}");
        let back = load(&newest).unwrap();
        assert_eq!(
            (
                back.update,
                back.global_step,
                back.episodes,
                back.world_size
            ),
            (4, 400, 7, 2)
        );
        assert_eq!((back.restarts, back.recent.clone()), (3, sample(4).recent));
        assert_eq!(back.config_hash, "abc123");
        assert_eq!(back.resolved_config, "experiment \"x\" {\n}\n");
        let target = vec![(
            "model.w".to_string(),
            Tensor::zeros([2], (Kind::Float, Device::Cpu)),
        )];
        restore_into(&back, &target).unwrap();
        assert_eq!(Vec::<f32>::try_from(&target[0].1).unwrap(), vec![1.5, -2.0]);
        let wrong = vec![(
            "model.w".to_string(),
            Tensor::zeros([3], (Kind::Float, Device::Cpu)),
        )];
        assert!(
            restore_into(&back, &wrong)
                .unwrap_err()
                .to_string()
                .contains("shape")
        );
        let renamed = vec![(
            "model.v".to_string(),
            Tensor::zeros([2], (Kind::Float, Device::Cpu)),
        )];
        let err = format!("{:#}", restore_into(&back, &renamed).unwrap_err());
        assert!(err.contains("no tensor `model.v`"), "{err}");
        assert!(
            err.contains("it holds a tensor this model does not: model.w"),
            "{err}"
        );
        assert!(
            err.contains("help: the checkpoint was written for another"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The recent episodes' info values come back with them, so a resumed run's
    /// `episode/recent_info/<key>` continues from the same window.
    #[test]
    fn recent_info_values_and_policies_round_trip() {
        let dir = std::env::temp_dir().join(format!("tandem-ckpt-info-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut ckpt = sample(1);
        ckpt.recent = (0..3)
            .map(|i| Episode {
                ret: 1.0,
                length: 2.0,
                score: i as f64,
                info: vec![(i % 2) as f64, 10.0 * i as f64],
                policy: i % 2,
            })
            .collect();
        let back = load(&save(&dir, &ckpt, 1).unwrap()).unwrap();
        assert_eq!(back.recent, ckpt.recent);
        // Without info keys or several policies there is no tensor for them: other runs'
        // files are as before.
        let plain = load(&save(&dir, &sample(2), 1).unwrap()).unwrap();
        assert!(plain.recent.iter().all(|e| e.info.is_empty()));
        assert!(plain.recent.iter().all(|e| e.policy == 0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Before the first finished episode `recent` is empty, so its tensor has no bytes: libtorch
    /// writes a zero-byte record with a null data pointer, which tch 0.26's in-memory writer
    /// made into a slice (a debug build aborted here: the checkpoint of a Ctrl-C during the first
    /// evaluation).
    #[test]
    fn a_checkpoint_with_empty_tensors_round_trips() {
        let dir = std::env::temp_dir().join(format!("tandem-ckpt-empty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut ckpt = sample(1);
        ckpt.recent.clear();
        ckpt.tensors.push((
            "model.none".into(),
            Tensor::zeros([0], (Kind::Float, Device::Cpu)),
        ));
        let back = load(&save(&dir, &ckpt, 1).unwrap()).unwrap();
        assert!(back.recent.is_empty());
        let none = back.tensors.iter().find(|(name, _)| name == "model.none");
        assert_eq!(none.map(|(_, t)| t.size()), Some(vec![0]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A cut-short file and one with a changed byte in a tensor's data are each one line that
    /// names the file and says it is damaged (libtorch's own error is 50 lines of C++ frames,
    /// and a changed byte in stored data it reads without complaint).
    #[test]
    fn a_damaged_checkpoint_is_one_line_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("tandem-ckpt-damaged-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = save(&dir, &sample(1), 2).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.join("cut.pt");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let flipped = dir.join("flipped.pt");
        let mut changed = bytes.clone();
        let at = changed
            .windows(4)
            .position(|w| w == 1.5f32.to_le_bytes())
            .expect("model.w's data in the file");
        changed[at + 3] ^= 0x01;
        std::fs::write(&flipped, &changed).unwrap();
        for file in [&cut, &flipped] {
            let err = format!("{:#}", load(file).err().expect("a damaged file loads"));
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(&file.display().to_string()), "{err}");
            assert!(err.contains("damaged"), "{err}");
        }
        // libtorch reads the changed byte without complaint; the digest does not match.
        let err = format!("{:#}", load(&flipped).err().unwrap());
        assert!(err.contains("do not match the digest"), "{err}");
        assert!(load(&path).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn config_differences_name_each_changed_setting_by_its_path() {
        let run = "experiment \"x\" {\n    seed 1\n    algorithm \"ppo\" {\n        lr 0.0003\n        epochs 4\n    }\n}\n";
        let now = "experiment \"x\" {\n    seed 1\n    algorithm \"ppo\" {\n        lr 0.1\n        epochs 4\n    }\n}\n";
        assert_eq!(
            config_difference(run, now),
            vec!["algorithm.lr: 0.0003 -> 0.1"]
        );
        assert!(config_difference(run, run).is_empty());
        let other = now.replace("\"ppo\"", "\"a2c\"");
        assert_eq!(
            config_difference(now, &other),
            vec!["algorithm: \"ppo\" -> \"a2c\""]
        );
    }

    #[test]
    fn a_directory_without_checkpoints_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("tandem-ckpt-none-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = locate(&dir).unwrap_err().to_string();
        assert!(err.contains("holds no checkpoint"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

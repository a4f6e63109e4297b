//! Where one `tandem train` process sits in a job: whether it spawns local ranks or is one rank
//! itself, its rank, world and rendezvous address, derived from the command line's layout flags
//! and the variables a scheduler sets (torchrun, Kubeflow's `PET_*`, Slurm's `SLURM_*`). This
//! module owns the precedence between those sources, the refusal of combinations that disagree,
//! Slurm's hostlist and tasks-per-node syntax, the default port of a Slurm job, and the sentence
//! each rank logs about which variables its place came from (docs/distributed.md, "Schedulers").
//!
//! Everything but [`from_process`] is a pure function over a map of variables, so the rules are
//! tested without touching the process environment.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::{JobLayout, UsageError};

/// Environment variables by name (only the ones this module reads matter).
pub type Vars = BTreeMap<String, String>;

/// The layout flags of `tandem train` as given (`None`: not on the command line).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub nnodes: Option<usize>,
    pub node_rank: Option<usize>,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
}

/// Which source described the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// No flags, no scheduler: every device of the experiment on this machine.
    Local,
    /// `--nnodes` / `--node-rank` on the command line.
    Flags,
    /// RANK/WORLD_SIZE (torchrun, or any launcher that sets them per process).
    Torchrun,
    /// Kubeflow PyTorchJob or Trainer v2 (`PET_*`): tandem is the pod's launcher.
    Kubeflow,
    /// Slurm (`SLURM_*`), one task per device or one task per node.
    Slurm,
}

/// This process is one rank; it neither spawns nor supervises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneRank {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    pub local_world: usize,
    pub master_addr: String,
    pub master_port: u16,
}

/// What this process does in the job.
#[derive(Debug, Clone)]
pub enum JobPlan {
    /// Start this node's share of the devices as workers and supervise them.
    Spawn(JobLayout),
    /// Be one rank.
    Rank(OneRank),
}

/// The derivation: the plan and where it came from.
#[derive(Debug, Clone)]
pub struct JobEnv {
    pub plan: JobPlan,
    pub scheduler: Scheduler,
    /// The flags and variables the plan was read from, in the order they matter.
    pub from: Vec<String>,
    /// Variables of a source that lost to a higher one (said in the log line, never silent).
    pub unused: Vec<String>,
    /// torchrun's `TORCHELASTIC_RESTART_COUNT`: how often the elastic agent restarted the job.
    pub restart_count: Option<u32>,
    /// `GLOO_SOCKET_IFNAME`'s interfaces, in order (empty: Gloo binds by address).
    pub gloo_interfaces: Vec<String>,
    /// How the default run directory (no `--run-dir`) is named.
    pub run_dir: RunDirName,
    /// The schedulers' job ids that are set, as `NAME=value` (`SLURM_JOB_ID`,
    /// `TORCHELASTIC_RUN_ID`): facts every process of the job is given alike, which the job's
    /// derived secret is made of ([`super::credential`]).
    pub job_ids: Vec<String>,
}

/// How a job's default run directory is named: processes of one job must name the same one
/// without talking to each other; a single process has nobody to agree with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunDirName {
    /// A fresh timestamped directory, as on one machine.
    Fresh,
    /// The job's id (`slurm-<SLURM_JOB_ID>`): alike in every process, and again after a requeue.
    Job(String),
    /// The config hash (`job-<hash>`): alike in every process of a job that has no id.
    ConfigHash,
}

/// Lowest default rendezvous port of a Slurm job; see [`slurm_default_port`].
pub const SLURM_PORT_BASE: u16 = 15_000;
/// How many ports the Slurm default spreads jobs over.
pub const SLURM_PORT_SPAN: u64 = 10_000;

/// The rendezvous port of Slurm job `job_id` when MASTER_PORT is not set:
/// `15000 + job_id mod 10000`. Every task of the job computes the same port without talking to
/// the others; the range is unprivileged and below Linux's ephemeral range (32768-60999), so an
/// outgoing connection never holds it. Two jobs on one master node collide only when their ids
/// differ by a multiple of 10000; rank 0 then fails at once with "address already in use".
pub fn slurm_default_port(job_id: u64) -> u16 {
    SLURM_PORT_BASE + (job_id % SLURM_PORT_SPAN) as u16
}

const TORCHRUN_MARKERS: &[&str] = &[
    "LOCAL_RANK",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
];
const PET_VARS: &[&str] = &[
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
];
const SLURM_VARS: &[&str] = &[
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_JOB_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
];
const GENERIC_VARS: &[&str] = &[
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
];
const NETWORK_VARS: &[&str] = &["GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"];

/// The variables this module reads, from the process environment. A value that is not UTF-8 is
/// refused, naming the variable.
pub fn from_process() -> Result<Vars, UsageError> {
    let mut vars = Vars::new();
    let names = TORCHRUN_MARKERS
        .iter()
        .chain(PET_VARS)
        .chain(SLURM_VARS)
        .chain(GENERIC_VARS)
        .chain(NETWORK_VARS);
    for name in names {
        match std::env::var(name) {
            Ok(v) => {
                vars.insert(name.to_string(), v);
            }
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(UsageError(format!(
                    "environment variable {name}={v:?} is not valid UTF-8"
                )));
            }
        }
    }
    Ok(vars)
}

/// Derives this process's place in the job. `world` is the experiment's number of devices.
///
/// Precedence: command-line flags, then torchrun's variables, then Kubeflow's `PET_*`, then
/// Slurm's `SLURM_*`. The innermost launcher wins because it is the one that started this
/// process: torchrun run by `srun` or inside a PyTorchJob sets RANK for each of its children
/// while the outer scheduler's variables, which describe nodes rather than processes, stay set.
/// `--master-addr`/`--master-port` override the rendezvous of any source; MASTER_ADDR and
/// MASTER_PORT override the one Slurm's variables imply.
pub fn derive(vars: &Vars, flags: &Flags, world: usize) -> Result<JobEnv, UsageError> {
    let restart_count = parse::<u32>(vars, "TORCHELASTIC_RESTART_COUNT")?;
    let gloo_interfaces = gloo_interfaces(vars)?;
    let mut found = Found::default();
    let scheduler = if flags.nnodes.is_some() || flags.node_rank.is_some() {
        Scheduler::Flags
    } else {
        pick(vars)?
    };
    let (plan, run_dir) = match scheduler {
        Scheduler::Local => (local(flags, &mut found), RunDirName::Fresh),
        Scheduler::Flags => (from_flags(flags, &mut found)?, RunDirName::Fresh),
        Scheduler::Torchrun => (
            torchrun(vars, flags, world, &mut found)?,
            RunDirName::ConfigHash,
        ),
        Scheduler::Kubeflow => kubeflow(vars, flags, world, &mut found)?,
        Scheduler::Slurm => slurm(vars, flags, world, &mut found)?,
    };
    Ok(JobEnv {
        plan,
        scheduler,
        unused: unused(vars, scheduler, &found),
        from: found.names,
        restart_count,
        gloo_interfaces,
        run_dir,
        job_ids: job_ids(vars),
    })
}

/// [`JobEnv::job_ids`]. torchrun's default run id is the literal "none", shared by every
/// unrelated job, so it is left out.
fn job_ids(vars: &Vars) -> Vec<String> {
    ["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"]
        .iter()
        .filter_map(|&name| {
            let v = vars.get(name)?;
            (!v.is_empty() && v != "none").then(|| format!("{name}={v}"))
        })
        .collect()
}

/// The variables of other sources than the chosen one: a variable of the chosen source that a
/// rule passed over (SLURM_NODELIST behind SLURM_STEP_NODELIST) is not news.
fn unused(vars: &Vars, scheduler: Scheduler, found: &Found) -> Vec<String> {
    let own: &[&[&str]] = match scheduler {
        Scheduler::Local | Scheduler::Flags => &[],
        Scheduler::Torchrun => &[GENERIC_VARS, TORCHRUN_MARKERS],
        Scheduler::Kubeflow => &[PET_VARS],
        Scheduler::Slurm => &[SLURM_VARS],
    };
    vars.keys()
        .filter(|k| !NETWORK_VARS.contains(&k.as_str()) && !found.names.contains(k))
        .filter(|k| k.as_str() != "TORCHELASTIC_RESTART_COUNT")
        .filter(|k| !own.iter().any(|names| names.contains(&k.as_str())))
        .cloned()
        .collect()
}

impl JobEnv {
    /// Where the place came from, for each rank's first log line: `from SLURM_PROCID, ...`.
    pub fn origin(&self) -> String {
        let what = match self.scheduler {
            Scheduler::Local => "this machine runs every device of the experiment",
            Scheduler::Flags => "the command line",
            Scheduler::Torchrun => "torchrun-style variables",
            Scheduler::Kubeflow => "Kubeflow; tandem spawns this pod's ranks",
            Scheduler::Slurm => match &self.plan {
                JobPlan::Rank(_) => "Slurm, one task per device",
                JobPlan::Spawn(l) if l.nnodes == 1 => {
                    "Slurm, a single task; tandem spawns every device here"
                }
                JobPlan::Spawn(_) => "Slurm, one task per node; tandem spawns its ranks",
            },
        };
        let mut text = if self.from.is_empty() {
            what.to_string()
        } else {
            format!("from {} ({what})", self.from.join(", "))
        };
        if let Some(n) = self.restart_count {
            text.push_str(&format!("; restart {n} (TORCHELASTIC_RESTART_COUNT)"));
        }
        if !self.gloo_interfaces.is_empty() {
            text.push_str(&format!(
                "; Gloo on interface(s) {} (GLOO_SOCKET_IFNAME)",
                self.gloo_interfaces.join(", ")
            ));
        }
        if !self.unused.is_empty() {
            text.push_str(&format!("; not used: {}", self.unused.join(", ")));
        }
        text
    }
}

/// The sentence a rank logs first: its place and where it came from.
pub fn describe_rank(
    rank: usize,
    world: usize,
    local: (usize, usize),
    master: (&str, u16),
    origin: &str,
) -> String {
    format!(
        "rank {rank} of {world} (local {} of {}), master {}:{} — {origin}",
        local.0, local.1, master.0, master.1
    )
}

/// The names read so far, in order.
#[derive(Default)]
struct Found {
    names: Vec<String>,
}

impl Found {
    fn get<T: FromStr>(&mut self, vars: &Vars, name: &str) -> Result<Option<T>, UsageError> {
        let value = parse(vars, name)?;
        if value.is_some() {
            self.note(name);
        }
        Ok(value)
    }

    fn need<T: FromStr>(&mut self, vars: &Vars, name: &str, why: &str) -> Result<T, UsageError> {
        self.get(vars, name)?
            .ok_or_else(|| UsageError(format!("{why}, but {name} is not set")))
    }

    fn note(&mut self, name: &str) {
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_string());
        }
    }
}

fn parse<T: FromStr>(vars: &Vars, name: &str) -> Result<Option<T>, UsageError> {
    match vars.get(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| invalid(name, v, "not a valid value (expected a whole number)")),
    }
}

fn invalid(name: &str, value: &str, why: &str) -> UsageError {
    UsageError(format!("environment variable {name}={value:?}: {why}"))
}

fn gloo_interfaces(vars: &Vars) -> Result<Vec<String>, UsageError> {
    let Some(value) = vars.get("GLOO_SOCKET_IFNAME") else {
        return Ok(Vec::new());
    };
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = value.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(invalid(
            "GLOO_SOCKET_IFNAME",
            value,
            "an empty interface name in the comma-separated list",
        ));
    }
    Ok(names)
}

fn has(vars: &Vars, names: &[&str]) -> bool {
    names.iter().any(|n| vars.contains_key(*n))
}

fn present(vars: &Vars, names: &[&str]) -> String {
    names
        .iter()
        .filter(|n| vars.contains_key(**n))
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

fn pick(vars: &Vars) -> Result<Scheduler, UsageError> {
    let torchrun = has(vars, TORCHRUN_MARKERS);
    let generic = has(vars, &["RANK", "WORLD_SIZE"]);
    let pet = has(vars, PET_VARS);
    let slurm = vars.contains_key("SLURM_PROCID");
    Ok(if torchrun || (generic && !pet) {
        Scheduler::Torchrun
    } else if pet && slurm {
        return Err(UsageError(format!(
            "both Kubeflow's ({}) and Slurm's ({}) variables are set, and nothing says which \
             describes this job; unset one set, or start tandem through torchrun",
            present(vars, PET_VARS),
            present(vars, &["SLURM_PROCID", "SLURM_NTASKS", "SLURM_NNODES"])
        )));
    } else if pet {
        Scheduler::Kubeflow
    } else if slurm {
        Scheduler::Slurm
    } else {
        Scheduler::Local
    })
}

/// The rendezvous address: the flag, else the value of `names` that are set (they must agree).
fn master_addr(
    vars: &Vars,
    flags: &Flags,
    names: &[&str],
    found: &mut Found,
) -> Result<Option<String>, UsageError> {
    let flag = flags.master_addr.clone().map(|a| ("--master-addr", a));
    agreed(vars, flag, names, "address", found, |name, raw| {
        let value = raw.trim();
        if value.is_empty() {
            return Err(invalid(name, raw, "an empty address"));
        }
        Ok(value.to_string())
    })
}

/// The rendezvous port, by the rules of [`master_addr`].
fn master_port(
    vars: &Vars,
    flags: &Flags,
    names: &[&str],
    found: &mut Found,
) -> Result<Option<u16>, UsageError> {
    let flag = flags.master_port.map(|p| ("--master-port", p));
    agreed(vars, flag, names, "port", found, |name, raw| {
        raw.trim()
            .parse()
            .ok()
            .filter(|p: &u16| *p > 0)
            .ok_or_else(|| invalid(name, raw, "not a TCP port (1-65535)"))
    })
}

/// One fact several variables may state: the flag's value when given, else the value every
/// set variable of `names` states (refused, naming both, when two differ).
fn agreed<T: PartialEq + std::fmt::Debug>(
    vars: &Vars,
    flag: Option<(&str, T)>,
    names: &[&str],
    what: &str,
    found: &mut Found,
    parse: impl Fn(&str, &str) -> Result<T, UsageError>,
) -> Result<Option<T>, UsageError> {
    if let Some((flag, value)) = flag {
        found.note(flag);
        return Ok(Some(value));
    }
    let mut chosen: Option<(&str, T)> = None;
    for name in names {
        let Some(raw) = vars.get(*name) else {
            continue;
        };
        let value = parse(name, raw)?;
        match &chosen {
            Some((first, v)) if *v != value => {
                return Err(UsageError(format!(
                    "{first}={v:?} and {name}={value:?} disagree about the rendezvous {what}; \
                     set one, or both alike"
                )));
            }
            Some(_) => {}
            None => chosen = Some((name, value)),
        }
        found.note(name);
    }
    Ok(chosen.map(|(_, v)| v))
}

fn check_world(name: &str, value: usize, world: usize, how: &str) -> Result<(), UsageError> {
    if value == world {
        return Ok(());
    }
    Err(UsageError(format!(
        "{name} gives a world of {value} process(es) ({how}), but the experiment lists {world} \
         device(s), one process each; change `devices` or the job's size"
    )))
}

fn check_below(name: &str, value: usize, of: &str, bound: usize) -> Result<(), UsageError> {
    if value < bound {
        return Ok(());
    }
    Err(UsageError(format!(
        "{name}={value} is outside {of}={bound} (valid: 0 to {})",
        bound.saturating_sub(1)
    )))
}

fn local(flags: &Flags, found: &mut Found) -> JobPlan {
    if flags.master_addr.is_some() {
        found.note("--master-addr");
    }
    if flags.master_port.is_some() {
        found.note("--master-port");
    }
    JobPlan::Spawn(JobLayout {
        nnodes: 1,
        node_rank: 0,
        master_addr: flags
            .master_addr
            .clone()
            .unwrap_or_else(|| "127.0.0.1".into()),
        master_port: flags.master_port,
    })
}

fn from_flags(flags: &Flags, found: &mut Found) -> Result<JobPlan, UsageError> {
    let nnodes = flags.nnodes.unwrap_or(1);
    if nnodes > 1 && (flags.node_rank.is_none() || flags.master_port.is_none()) {
        return Err(UsageError(
            "--nnodes > 1 needs --node-rank and --master-port (and --master-addr off node 0)"
                .into(),
        ));
    }
    found.note("--nnodes");
    if flags.node_rank.is_some() {
        found.note("--node-rank");
    }
    let JobPlan::Spawn(layout) = local(flags, found) else {
        unreachable!("local() always spawns")
    };
    Ok(JobPlan::Spawn(JobLayout {
        nnodes,
        node_rank: flags.node_rank.unwrap_or(0),
        ..layout
    }))
}

fn torchrun(
    vars: &Vars,
    flags: &Flags,
    world: usize,
    found: &mut Found,
) -> Result<JobPlan, UsageError> {
    let why = format!(
        "this process was started by torchrun or a launcher like it ({} set)",
        present(
            vars,
            &[&["RANK", "WORLD_SIZE"][..], TORCHRUN_MARKERS].concat()
        )
    );
    let rank: usize = found.need(vars, "RANK", &why)?;
    let size: usize = found.need(vars, "WORLD_SIZE", &why)?;
    check_world("WORLD_SIZE", size, world, "one process per rank")?;
    check_below("RANK", rank, "WORLD_SIZE", size)?;
    let local_rank = found.get(vars, "LOCAL_RANK")?.unwrap_or(0);
    let local_world = found.get(vars, "LOCAL_WORLD_SIZE")?.unwrap_or(1);
    check_below("LOCAL_RANK", local_rank, "LOCAL_WORLD_SIZE", local_world)?;
    let master_addr =
        master_addr(vars, flags, &["MASTER_ADDR"], found)?.unwrap_or_else(|| "127.0.0.1".into());
    let master_port = master_port(vars, flags, &["MASTER_PORT"], found)?
        .ok_or_else(|| UsageError(format!("{why}, but MASTER_PORT is not set")))?;
    Ok(JobPlan::Rank(OneRank {
        rank,
        world: size,
        local_rank,
        local_world,
        master_addr,
        master_port,
    }))
}

/// Kubeflow sets PET_* for torchrun, which would read them; tandem is that launcher here. Its
/// training operator also sets RANK to the pod's index (not a process rank: a pod runs
/// PET_NPROC_PER_NODE processes) and WORLD_SIZE to the number of processes, or of pods when it
/// does not know the per-pod count. So under PET_* without torchrun's own variables, RANK is
/// read as the node rank.
fn kubeflow(
    vars: &Vars,
    flags: &Flags,
    world: usize,
    found: &mut Found,
) -> Result<(JobPlan, RunDirName), UsageError> {
    let nnodes = pet_nnodes(vars, found)?;
    let per_pod = pet_procs_per_pod(vars, nnodes, world, found)?;
    check_world(
        "PET_NNODES × PET_NPROC_PER_NODE",
        nnodes * per_pod,
        world,
        &format!("{nnodes} pod(s) of {per_pod}"),
    )?;
    let node_rank = pod_index(vars, nnodes, found)?;
    if let Some(size) = parse::<usize>(vars, "WORLD_SIZE")? {
        if size != world && size != nnodes {
            return Err(UsageError(format!(
                "WORLD_SIZE={size} is neither the job's {world} process(es) nor its \
                 PET_NNODES={nnodes} pod(s)"
            )));
        }
        found.note("WORLD_SIZE");
    }
    let addr = master_addr(vars, flags, &["PET_MASTER_ADDR", "MASTER_ADDR"], found)?;
    let port = master_port(vars, flags, &["PET_MASTER_PORT", "MASTER_PORT"], found)?;
    if nnodes > 1 && (addr.is_none() || port.is_none()) {
        return Err(UsageError(format!(
            "PET_NNODES={nnodes} needs the rendezvous address and port: PET_MASTER_ADDR and \
             PET_MASTER_PORT (or MASTER_ADDR and MASTER_PORT) are not both set"
        )));
    }
    let layout = JobLayout {
        nnodes,
        node_rank,
        master_addr: addr.unwrap_or_else(|| "127.0.0.1".into()),
        master_port: port,
    };
    // A pod alone has nobody to agree with on a name.
    let name = if nnodes > 1 {
        RunDirName::ConfigHash
    } else {
        RunDirName::Fresh
    };
    Ok((JobPlan::Spawn(layout), name))
}

/// PET_NPROC_PER_NODE: a count, or `auto` (also when unset) for the experiment's devices over
/// the pods.
fn pet_procs_per_pod(
    vars: &Vars,
    nnodes: usize,
    world: usize,
    found: &mut Found,
) -> Result<usize, UsageError> {
    let name = "PET_NPROC_PER_NODE";
    let Some(raw) = vars.get(name).map(|v| v.trim()).filter(|v| *v != "auto") else {
        if vars.contains_key(name) {
            found.note(name);
        }
        if !world.is_multiple_of(nnodes) {
            return Err(UsageError(format!(
                "the experiment's {world} device(s) do not divide over PET_NNODES={nnodes} pods"
            )));
        }
        return Ok(world / nnodes);
    };
    found.note(name);
    match raw.parse() {
        Ok(0) => Err(invalid(name, raw, "a pod runs at least one process")),
        Ok(n) => Ok(n),
        Err(_) => Err(invalid(
            name,
            raw,
            "expected a whole number or `auto` (the experiment's devices over PET_NNODES); \
             tandem takes its devices from the experiment, not from `gpu` or `cpu`",
        )),
    }
}

fn pet_nnodes(vars: &Vars, found: &mut Found) -> Result<usize, UsageError> {
    let raw = vars.get("PET_NNODES").ok_or_else(|| {
        UsageError(format!(
            "Kubeflow variables are set ({}) but PET_NNODES is not",
            present(vars, PET_VARS)
        ))
    })?;
    found.note("PET_NNODES");
    let bad = || invalid("PET_NNODES", raw, "not a whole number of pods");
    let n: usize = match raw.trim().split_once(':') {
        None => raw.trim().parse().map_err(|_| bad())?,
        Some((lo, hi)) => {
            let (lo, hi): (usize, usize) = (
                lo.parse().map_err(|_| bad())?,
                hi.parse().map_err(|_| bad())?,
            );
            if lo != hi {
                return Err(invalid(
                    "PET_NNODES",
                    raw,
                    "an elastic range of pods; tandem's world is the experiment's devices, \
                     so give one number (min = max)",
                ));
            }
            lo
        }
    };
    if n == 0 {
        return Err(invalid("PET_NNODES", raw, "a job has at least one pod"));
    }
    Ok(n)
}

fn pod_index(vars: &Vars, nnodes: usize, found: &mut Found) -> Result<usize, UsageError> {
    let node_rank: Option<usize> = found.get(vars, "PET_NODE_RANK")?;
    let rank: Option<usize> = parse(vars, "RANK")?;
    let index = match (node_rank, rank) {
        (Some(n), Some(r)) if n != r => {
            return Err(UsageError(format!(
                "RANK={r} and PET_NODE_RANK={n} disagree: under Kubeflow (PET_* set, no \
                 torchrun LOCAL_RANK) RANK is the pod's index, the same as PET_NODE_RANK"
            )));
        }
        (Some(n), _) => n,
        (None, Some(r)) => r,
        (None, None) if nnodes == 1 => 0,
        (None, None) => {
            return Err(UsageError(format!(
                "PET_NNODES={nnodes} but neither PET_NODE_RANK nor RANK says which pod this is"
            )));
        }
    };
    if rank.is_some() {
        found.note("RANK");
    }
    let name = if node_rank.is_some() {
        "PET_NODE_RANK"
    } else {
        "RANK"
    };
    check_below(name, index, "PET_NNODES", nnodes)?;
    Ok(index)
}

/// Slurm: one task per device (SLURM_NTASKS is the world) makes this process that rank; one task
/// per node (SLURM_NTASKS = SLURM_NNODES, fewer than the devices) makes it node SLURM_NODEID's
/// launcher. The master is the first host of the step's node list, where task 0 runs under
/// Slurm's default block distribution.
fn slurm(
    vars: &Vars,
    flags: &Flags,
    world: usize,
    found: &mut Found,
) -> Result<(JobPlan, RunDirName), UsageError> {
    let why = "SLURM_PROCID is set (this is a task of a Slurm step)";
    let procid: usize = found.need(vars, "SLURM_PROCID", why)?;
    let ntasks: usize = found.need(vars, "SLURM_NTASKS", why)?;
    let nnodes: usize = found.need(vars, "SLURM_NNODES", why)?;
    check_below("SLURM_PROCID", procid, "SLURM_NTASKS", ntasks)?;
    if ntasks == 1 {
        // The whole job is this process: nobody to agree with, so it runs as on one machine
        // (loopback, a free port), and an interactive `srun --pty` shell can run several.
        let addr = master_addr(vars, flags, &["MASTER_ADDR"], found)?;
        let port = master_port(vars, flags, &["MASTER_PORT"], found)?;
        let layout = JobLayout {
            nnodes: 1,
            node_rank: 0,
            master_addr: addr.unwrap_or_else(|| "127.0.0.1".into()),
            master_port: port,
        };
        return Ok((JobPlan::Spawn(layout), RunDirName::Fresh));
    }
    let per_device = ntasks == world;
    if !per_device && ntasks != nnodes {
        return Err(UsageError(format!(
            "SLURM_NTASKS={ntasks} fits neither one task per device (the experiment lists \
             {world} device(s)) nor one task per node (SLURM_NNODES={nnodes}); start \
             {world} tasks, or one per node with a multiple of {nnodes} devices"
        )));
    }
    let (node_id, local) = if per_device {
        let node_id: usize = found.get(vars, "SLURM_NODEID")?.unwrap_or(0);
        let local_rank: usize = found.need(vars, "SLURM_LOCALID", why)?;
        let local_world = slurm_local_tasks(vars, nnodes, ntasks, node_id, found)?;
        check_below(
            "SLURM_LOCALID",
            local_rank,
            "tasks on this node",
            local_world,
        )?;
        (node_id, (local_rank, local_world))
    } else {
        (found.need(vars, "SLURM_NODEID", why)?, (0, 0))
    };
    check_below("SLURM_NODEID", node_id, "SLURM_NNODES", nnodes)?;
    let addr = match master_addr(vars, flags, &["MASTER_ADDR"], found)? {
        Some(a) => a,
        None => slurm_first_host(vars, found)?,
    };
    let job_id: Option<u64> = found.get(vars, "SLURM_JOB_ID")?;
    let port = match master_port(vars, flags, &["MASTER_PORT"], found)? {
        Some(p) => p,
        None => slurm_default_port(job_id.ok_or_else(|| {
            UsageError(
                "under Slurm the rendezvous port comes from SLURM_JOB_ID, which is not set; \
                 set MASTER_PORT"
                    .into(),
            )
        })?),
    };
    let plan = if per_device {
        JobPlan::Rank(OneRank {
            rank: procid,
            world,
            local_rank: local.0,
            local_world: local.1,
            master_addr: addr,
            master_port: port,
        })
    } else {
        if !world.is_multiple_of(nnodes) {
            return Err(UsageError(format!(
                "one Slurm task per node: the experiment's {world} device(s) do not divide over \
                 SLURM_NNODES={nnodes} nodes"
            )));
        }
        JobPlan::Spawn(JobLayout {
            nnodes,
            node_rank: node_id,
            master_addr: addr,
            master_port: Some(port),
        })
    };
    let name = match job_id {
        Some(id) => RunDirName::Job(format!("slurm-{id}")),
        None => RunDirName::ConfigHash,
    };
    Ok((plan, name))
}

/// How many tasks of the step run on node `node_id`.
fn slurm_local_tasks(
    vars: &Vars,
    nnodes: usize,
    ntasks: usize,
    node_id: usize,
    found: &mut Found,
) -> Result<usize, UsageError> {
    if let Some(n) = found.get::<usize>(vars, "SLURM_NTASKS_PER_NODE")? {
        return Ok(n);
    }
    for name in ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"] {
        let Some(raw) = vars.get(name) else { continue };
        found.note(name);
        let counts = tasks_per_node(raw).map_err(|why| invalid(name, raw, &why))?;
        return counts.get(node_id).copied().ok_or_else(|| {
            invalid(
                name,
                raw,
                &format!(
                    "lists {} node(s), but this is SLURM_NODEID={node_id}",
                    counts.len()
                ),
            )
        });
    }
    if nnodes == 1 {
        return Ok(ntasks);
    }
    Err(UsageError(format!(
        "SLURM_NNODES={nnodes}, but none of SLURM_NTASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE, \
         SLURM_TASKS_PER_NODE says how many tasks run on this node"
    )))
}

fn slurm_first_host(vars: &Vars, found: &mut Found) -> Result<String, UsageError> {
    for name in [
        "SLURM_STEP_NODELIST",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
    ] {
        let Some(raw) = vars.get(name) else { continue };
        found.note(name);
        return expand_hostlist(raw, 1)
            .map(|mut hosts| hosts.remove(0))
            .map_err(|why| invalid(name, raw, &why));
    }
    Err(UsageError(
        "under Slurm the master is the first host of SLURM_JOB_NODELIST, which is not set; \
         set MASTER_ADDR"
            .into(),
    ))
}

/// Slurm's tasks-per-node list: `2(x3),1` is 2, 2, 2, 1.
pub fn tasks_per_node(text: &str) -> Result<Vec<usize>, String> {
    let mut counts = Vec::new();
    for item in text.trim().split(',') {
        let (count, times) = match item.split_once("(x") {
            None => (item, "1"),
            Some((count, rest)) => (
                count,
                rest.strip_suffix(')')
                    .ok_or_else(|| format!("`{item}` lacks its closing `)`"))?,
            ),
        };
        let bad = || format!("`{item}` is not COUNT or COUNT(xREPEAT)");
        let count: usize = count.trim().parse().map_err(|_| bad())?;
        let times: usize = times.trim().parse().map_err(|_| bad())?;
        if counts.len().saturating_add(times) > 1_000_000 {
            return Err("more than a million nodes".into());
        }
        counts.extend(std::iter::repeat_n(count, times));
    }
    Ok(counts)
}

/// One piece of a hostlist item: literal text, or a bracket's numbers (low, high, digits).
enum Part {
    Text(String),
    Ranges(Vec<(u64, u64, usize)>),
}

/// The first `limit` hosts of a Slurm hostlist, in Slurm's order: `gpu[01-04,07]`,
/// `a1,b[2-3]`, `rack[1-2]-node[01-02]` (the last bracket varies fastest). A range whose low
/// bound has leading zeros pads to its width, as Slurm does.
pub fn expand_hostlist(list: &str, limit: usize) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for item in split_top_level(list.trim())? {
        let item = item.trim();
        if item.is_empty() {
            return Err("an empty host name (two commas in a row, or one at an end)".into());
        }
        let parts = parse_item(item)?;
        expand_parts(&parts, String::new(), limit, &mut hosts);
        if hosts.len() >= limit {
            break;
        }
    }
    if hosts.is_empty() {
        return Err("no hosts".into());
    }
    Ok(hosts)
}

fn split_top_level(list: &str) -> Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth > 0 => return Err("a `[` inside brackets".into()),
            '[' => depth = 1,
            ']' if depth == 0 => return Err("a `]` without its `[`".into()),
            ']' => depth = 0,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("a `[` that is never closed".into());
    }
    items.push(&list[start..]);
    Ok(items)
}

fn parse_item(item: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = open + rest[open..].find(']').expect("balanced (checked)");
        parts.push(Part::Text(rest[..open].to_string()));
        parts.push(Part::Ranges(parse_ranges(&rest[open + 1..close])?));
        rest = &rest[close + 1..];
    }
    parts.push(Part::Text(rest.to_string()));
    Ok(parts)
}

fn parse_ranges(inner: &str) -> Result<Vec<(u64, u64, usize)>, String> {
    let number = |s: &str| -> Result<u64, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("`{s}` in `[{inner}]` is not a number"));
        }
        s.parse()
            .map_err(|_| format!("`{s}` in `[{inner}]` is too large"))
    };
    let mut ranges = Vec::new();
    for piece in inner.split(',') {
        let (lo, hi) = piece.split_once('-').unwrap_or((piece, piece));
        let (low, high) = (number(lo)?, number(hi)?);
        if low > high {
            return Err(format!("the range `{piece}` in `[{inner}]` runs backwards"));
        }
        ranges.push((low, high, lo.len()));
    }
    Ok(ranges)
}

fn expand_parts(parts: &[Part], prefix: String, limit: usize, out: &mut Vec<String>) {
    let Some((first, rest)) = parts.split_first() else {
        out.push(prefix);
        return;
    };
    match first {
        Part::Text(text) => expand_parts(rest, prefix + text, limit, out),
        Part::Ranges(ranges) => {
            for &(low, high, width) in ranges {
                for n in low..=high {
                    if out.len() >= limit {
                        return;
                    }
                    expand_parts(rest, format!("{prefix}{n:0width$}"), limit, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

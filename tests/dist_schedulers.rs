//! `tandem train` under simulated schedulers: processes that see only Slurm's or Kubeflow's
//! variables (every other launcher variable removed) form one job over real c10d/Gloo on
//! loopback and train to the end; what they derive is in each rank's first log line; mistakes
//! in the variables are refused before anything starts.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::summary_number;

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");
const LIMIT: Duration = Duration::from_secs(180);

fn config() -> String {
    format!(
        "{}/tests/configs/ppo-cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-sched-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tandem train` on the test config with no launcher variable of any scheduler inherited (the
/// suite itself may run under Slurm or torchrun), plus `vars`.
fn tandem(devices: &str, vars: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(TANDEM);
    for (name, _) in std::env::vars() {
        let launcher = ["SLURM_", "PET_", "TORCHELASTIC_"]
            .iter()
            .any(|p| name.starts_with(p))
            || [
                "RANK",
                "WORLD_SIZE",
                "LOCAL_RANK",
                "LOCAL_WORLD_SIZE",
                "GROUP_RANK",
                "MASTER_ADDR",
                "MASTER_PORT",
                "GLOO_SOCKET_IFNAME",
                "NCCL_SOCKET_IFNAME",
            ]
            .contains(&name.as_str());
        if launcher {
            cmd.env_remove(name);
        }
    }
    cmd.env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .arg("train")
        .arg(config())
        .args(["--set", &format!("devices={devices}")])
        .args(["--set", "train.max-steps=2048", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn owned(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

fn with(
    mut vars: Vec<(&'static str, String)>,
    name: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    vars.retain(|(k, _)| *k != name);
    vars.push((name, value.to_string()));
    vars
}

/// Waits for every process and fails the test with their output unless all succeeded.
fn all_succeed(children: Vec<Child>) {
    for (i, child) in children.into_iter().enumerate() {
        let done = common::finish(child, LIMIT);
        assert!(done.success, "process {i} failed:\n{}", done.output);
    }
}

fn rank_log(dir: &Path, rank: usize) -> String {
    std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.log")))
        .unwrap_or_else(|e| panic!("no log of rank {rank} in {}: {e}", dir.display()))
}

/// A port in the Slurm default range (15000-24999) that nobody holds now, and the job id that
/// derives it.
fn slurm_job_id_with_a_free_port() -> (u64, u16) {
    let start = std::process::id() as u64 % 10_000;
    for i in 0..10_000 {
        let id = (start + i * 7) % 10_000;
        let port = tandem::launch::job_env::slurm_default_port(id);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return (id + 10_000, port);
        }
    }
    panic!("no free port in 15000-24999");
}

fn slurm_task(
    procid: usize,
    ntasks: usize,
    nnodes: usize,
    job_id: u64,
) -> Vec<(&'static str, String)> {
    let per_node = ntasks / nnodes;
    owned(&[
        ("SLURM_PROCID", &procid.to_string()),
        ("SLURM_LOCALID", &(procid % per_node).to_string()),
        ("SLURM_NODEID", &(procid / per_node).to_string()),
        ("SLURM_NTASKS", &ntasks.to_string()),
        ("SLURM_NNODES", &nnodes.to_string()),
        ("SLURM_TASKS_PER_NODE", &format!("{per_node}(x{nnodes})")),
        // The first host of the bracket list is the master: 127.0.0.1.
        ("SLURM_JOB_NODELIST", "127.0.0.[1-2]"),
        ("SLURM_JOB_ID", &job_id.to_string()),
    ])
}

#[test]
fn two_slurm_tasks_form_a_two_rank_job_from_slurm_variables_alone() {
    let cwd = fresh_dir("slurm-per-device");
    let (job_id, port) = slurm_job_id_with_a_free_port();
    // No --run-dir: every task names the job's directory alike, runs/<name>/slurm-<id>.
    let tasks: Vec<Child> = (0..2)
        .map(|procid| {
            tandem("cpu cpu", &slurm_task(procid, 2, 1, job_id))
                .current_dir(&cwd)
                .spawn()
                .unwrap()
        })
        .collect();
    all_succeed(tasks);
    let dir = cwd.join(format!("runs/ppo-cartpole/slurm-{job_id}"));
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    assert!(summary_number(&dir, "global_step").unwrap() >= 2048.0);
    for rank in 0..2 {
        let log = rank_log(&dir, rank);
        let expected = format!(
            "rank {rank} of 2 (local {rank} of 2), master 127.0.0.1:{port} — from SLURM_PROCID, \
             SLURM_NTASKS, SLURM_NNODES, SLURM_NODEID, SLURM_LOCALID, SLURM_TASKS_PER_NODE, \
             SLURM_JOB_NODELIST, SLURM_JOB_ID (Slurm, one task per device)"
        );
        assert!(log.contains(&expected), "rank {rank}:\n{log}");
        // Both tasks made the job's secret of the same scheduler facts.
        assert!(
            log.contains("job secret derived from SLURM_JOB_ID and the master address"),
            "rank {rank}:\n{log}"
        );
    }
}

#[test]
fn slurm_one_task_per_node_spawns_each_nodes_ranks() {
    let dir = fresh_dir("slurm-per-node");
    let (job_id, port) = slurm_job_id_with_a_free_port();
    let nodes: Vec<Child> = (0..2)
        .map(|node| {
            tandem("cpu cpu cpu cpu", &slurm_task(node, 2, 2, job_id))
                .arg("--run-dir")
                .arg(&dir)
                .spawn()
                .unwrap()
        })
        .collect();
    all_succeed(nodes);
    assert_eq!(summary_number(&dir, "world_size"), Some(4.0));
    for rank in 0..4 {
        let log = rank_log(&dir, rank);
        let expected = format!(
            "rank {rank} of 4 (local {} of 2), master 127.0.0.1:{port} — from SLURM_PROCID, \
             SLURM_NTASKS, SLURM_NNODES, SLURM_NODEID, SLURM_JOB_NODELIST, SLURM_JOB_ID (Slurm, \
             one task per node; tandem spawns its ranks)",
            rank % 2
        );
        assert!(log.contains(&expected), "rank {rank}:\n{log}");
    }
}

#[test]
fn two_kubeflow_pods_form_one_job_and_rank_is_read_as_the_pod_index() {
    let dir = fresh_dir("kubeflow-pods");
    let port = common::free_port().to_string();
    // What the training operator sets with one process per pod (RANK = pod index).
    let pods: Vec<Child> = (0..2)
        .map(|pod| {
            let pod = pod.to_string();
            let vars = owned(&[
                ("PET_NNODES", "2"),
                ("PET_NPROC_PER_NODE", "1"),
                ("PET_NODE_RANK", &pod),
                ("PET_MASTER_ADDR", "127.0.0.1"),
                ("PET_MASTER_PORT", &port),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", &port),
                ("RANK", &pod),
                ("WORLD_SIZE", "2"),
            ]);
            tandem("cpu cpu", &vars)
                .arg("--run-dir")
                .arg(&dir)
                .spawn()
                .unwrap()
        })
        .collect();
    all_succeed(pods);
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    let log = rank_log(&dir, 1);
    assert!(
        log.contains(&format!(
            "rank 1 of 2 (local 0 of 1), master 127.0.0.1:{port} — from PET_NNODES, \
             PET_NPROC_PER_NODE, PET_NODE_RANK, RANK, WORLD_SIZE, PET_MASTER_ADDR, MASTER_ADDR, \
             PET_MASTER_PORT, MASTER_PORT (Kubeflow"
        )),
        "{log}"
    );
}

/// One pod running both ranks, its Gloo on the interface GLOO_SOCKET_IFNAME names, and
/// NCCL_SOCKET_IFNAME reaching the workers untouched.
#[test]
fn one_kubeflow_pod_spawns_its_processes_on_the_named_interface() {
    let dir = fresh_dir("kubeflow-one-pod");
    let vars = owned(&[
        ("PET_NNODES", "1"),
        ("PET_NPROC_PER_NODE", "2"),
        ("GLOO_SOCKET_IFNAME", "lo"),
        ("NCCL_SOCKET_IFNAME", "lo"),
    ]);
    let pod = tandem("cpu cpu", &vars)
        .arg("--run-dir")
        .arg(&dir)
        .spawn()
        .unwrap();
    all_succeed(vec![pod]);
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    for rank in 0..2 {
        let log = rank_log(&dir, rank);
        assert!(
            log.contains(&format!("rank {rank} of 2 (local {rank} of 2)"))
                && log.contains("from PET_NNODES, PET_NPROC_PER_NODE (Kubeflow")
                && log.contains("Gloo on interface(s) lo (GLOO_SOCKET_IFNAME)")
                && log.contains("NCCL_SOCKET_IFNAME=lo (read by NCCL)"),
            "rank {rank}:\n{log}"
        );
    }
}

fn refused(name: &str, vars: &[(&str, String)], devices: &str) -> String {
    let dir = fresh_dir(name);
    let done = common::finish(
        tandem(devices, vars)
            .arg("--run-dir")
            .arg(&dir)
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert_eq!(done.status.code(), Some(2), "{}", done.output);
    assert!(
        !dir.join("resolved.kdl").exists(),
        "a refused job wrote its run directory"
    );
    done.output
}

#[test]
fn a_gloo_interface_this_machine_lacks_is_refused_by_name() {
    let out = refused(
        "no-interface",
        &owned(&[("GLOO_SOCKET_IFNAME", "nosuch0")]),
        "cpu cpu",
    );
    assert!(
        out.contains("GLOO_SOCKET_IFNAME names the network interface \"nosuch0\"")
            && out.contains("it has:")
            && out.contains("lo"),
        "{out}"
    );
}

#[test]
fn slurm_variables_that_fit_no_layout_are_refused_before_anything_starts() {
    let out = refused(
        "slurm-ntasks",
        &with(slurm_task(0, 2, 1, 10_001), "SLURM_NTASKS", "3"),
        "cpu cpu",
    );
    assert!(
        out.contains("SLURM_NTASKS=3 fits neither one task per device"),
        "{out}"
    );
    let vars = with(slurm_task(0, 2, 1, 10_001), "SLURM_JOB_NODELIST", "gpu[01-");
    let out = refused("slurm-nodelist", &vars, "cpu cpu");
    assert!(
        out.contains("SLURM_JOB_NODELIST=\"gpu[01-\"") && out.contains("never closed"),
        "{out}"
    );
}

/// The interfaces reach Gloo's device creation: one Gloo cannot find fails the group (the
/// launcher refuses such a name before, as above), and `lo` forms it.
#[test]
fn gloo_devices_are_made_for_the_named_interfaces() {
    let mut opts = common::options(0, 1, common::free_port(), Duration::from_secs(20));
    opts.gloo_interfaces = vec!["nosuch0".into()];
    let err = match tandem::dist::ProcessGroup::connect(&opts) {
        Ok(_) => panic!("a group formed on an interface that does not exist"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("nosuch0"), "{err}");
    let mut opts = common::options(0, 1, common::free_port(), Duration::from_secs(20));
    opts.gloo_interfaces = vec!["lo".into()];
    let pg = tandem::dist::ProcessGroup::connect(&opts).unwrap();
    assert_eq!(pg.world_size(), 1);
}

/// torchrun started by srun as one task on one node: torchrun's variables name the process;
/// Slurm's, which alone would make each process spawn both ranks, are passed over and named; the
/// elastic agent's restart count is carried into the first log line.
#[test]
fn torchrun_inside_slurm_wins_and_carries_its_restart_count() {
    let dir = fresh_dir("torchrun-in-slurm");
    let port = common::free_port().to_string();
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            let rank = rank.to_string();
            let mut vars = owned(&[
                ("RANK", &rank),
                ("WORLD_SIZE", "2"),
                ("LOCAL_RANK", &rank),
                ("LOCAL_WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", &port),
                ("TORCHELASTIC_RESTART_COUNT", "1"),
            ]);
            vars.extend(slurm_task(0, 1, 1, 10_002));
            tandem("cpu cpu", &vars)
                .arg("--run-dir")
                .arg(&dir)
                .spawn()
                .unwrap()
        })
        .collect();
    all_succeed(ranks);
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    for rank in 0..2 {
        let log = rank_log(&dir, rank);
        let expected = format!(
            "rank {rank} of 2 (local {rank} of 2), master 127.0.0.1:{port} — from RANK, \
             WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun-style \
             variables); restart 1 (TORCHELASTIC_RESTART_COUNT); not used: SLURM_JOB_ID, \
             SLURM_JOB_NODELIST, SLURM_LOCALID, SLURM_NNODES, SLURM_NODEID, SLURM_NTASKS, \
             SLURM_PROCID, SLURM_TASKS_PER_NODE"
        );
        assert!(log.contains(&expected), "rank {rank}:\n{log}");
    }
}

/// A lone RANK used to be ignored (the launcher then ran every device itself): now it is half a
/// torchrun environment, refused by name.
#[test]
fn a_rank_without_a_world_size_is_refused() {
    let out = refused("lone-rank", &owned(&[("RANK", "1")]), "cpu cpu");
    assert!(
        out.contains("(RANK set)") && out.contains("WORLD_SIZE is not set"),
        "{out}"
    );
}

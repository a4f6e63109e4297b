//! How the launcher places and starts ranks: pinned cores, the time slice and libgomp's spin,
//! torchrun-style ranks and two launchers forming one job with --nnodes 2.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::binary::*;
use common::summary_number;

#[test]
fn pinned_ranks_run_on_their_own_cores() {
    let dir = fresh_dir("pinned");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &[
            "devices=cpu cpu",
            "pin-cores=#true",
            "threads=\"auto\"",
            "train.max-steps=4096",
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    // Each rank logs the cores the kernel reports after pinning.
    let cores_of = |rank: usize| -> Vec<usize> {
        let log = std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.log"))).unwrap();
        let line = log
            .lines()
            .find(|l| l.contains("pinned to cores"))
            .unwrap_or_else(|| panic!("rank {rank} did not log its cores:\n{log}"));
        let list = &line[line.find('[').unwrap() + 1..line.find(']').unwrap()];
        list.split(", ").map(|c| c.parse().unwrap()).collect()
    };
    let (zero, one) = (cores_of(0), cores_of(1));
    assert!(!zero.is_empty() && !one.is_empty());
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    if machine >= 2 {
        assert!(
            zero.iter().all(|c| !one.contains(c)),
            "ranks share cores: {zero:?} and {one:?}"
        );
        // threads "auto" gives a pinned rank as many threads as it has cores.
        let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
        assert!(
            log.contains(&format!("({} thread(s))", zero.len())),
            "{log}"
        );
    }
}

#[test]
fn workers_log_their_time_slice_and_get_a_short_libgomp_spin_unless_the_user_sets_one() {
    // What the workers saw, from rank 0's log; `spin` is the launcher's environment.
    let worker_spin = |name: &str, spin: Option<&str>| -> String {
        let dir = fresh_dir(name);
        let mut cmd = tandem();
        cmd.env_remove("GOMP_SPINCOUNT")
            .env_remove("OMP_WAIT_POLICY");
        if let Some(spin) = spin {
            cmd.env("GOMP_SPINCOUNT", spin);
        }
        cmd.arg("train")
            .arg(config("ppo-cartpole.kdl"))
            .arg("--run-dir")
            .arg(&dir)
            .args(["--quiet", "--set", "train.max-steps=1024"]);
        let out = run(&mut cmd, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
        let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
        // The worker also says what time slice its communication threads got (dist::sched).
        assert!(
            log.contains("communication threads run with"),
            "no time slice in the worker's log:\n{log}"
        );
        let line = log
            .lines()
            .find(|l| l.contains("GOMP_SPINCOUNT="))
            .unwrap_or_else(|| panic!("no GOMP_SPINCOUNT in the worker's log:\n{log}"));
        // The value, then why it is there.
        line[line.find("GOMP_SPINCOUNT=").unwrap() + "GOMP_SPINCOUNT=".len()..]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        worker_spin("spin-default", None),
        tandem::launch::WORKER_GOMP_SPINCOUNT
    );
    assert_eq!(worker_spin("spin-user", Some("7")), "7");
}

/// Ranks an external launcher (torchrun and the like) starts, with RANK and WORLD_SIZE set, run
/// the same canonical text a spawned worker gets: rank 0 writes it to the run directory, and
/// every rank's config hash is that text's.
#[test]
fn torchrun_style_ranks_run_the_canonical_config_and_rank_0_records_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = fresh_dir("torchrun");
    let sets = ["devices=cpu cpu", "train.max-steps=4096"];
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            let mut cmd = tandem();
            cmd.arg("train")
                .arg(config("ppo-cartpole.kdl"))
                .arg("--run-dir")
                .arg(&dir)
                .arg("--quiet");
            for s in sets {
                cmd.args(["--set", s]);
            }
            as_external_rank(&mut cmd, rank, 2, port);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for child in ranks {
        let out = wait_with_limit(child, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
    }
    let mut resolve = tandem();
    resolve.arg("resolve").arg(config("ppo-cartpole.kdl"));
    for s in sets {
        resolve.args(["--set", s]);
    }
    let canonical = run(&mut resolve, Duration::from_secs(30));
    assert!(canonical.status.success(), "{}", text(&canonical));
    let recorded = std::fs::read_to_string(dir.join("resolved.kdl")).unwrap();
    assert_eq!(recorded, String::from_utf8(canonical.stdout).unwrap());
    let hash = std::fs::read_to_string(dir.join("resolved.sha256")).unwrap();
    for rank in 0..2 {
        let log = std::fs::read_to_string(dir.join(format!("logs/rank-{rank}.log"))).unwrap();
        assert!(
            log.contains(&format!("rank {rank}/2 on cpu")) && log.contains(&hash.trim()[..12]),
            "rank {rank}'s log does not name config {}:\n{log}",
            &hash[..12]
        );
    }
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
}

/// A torchrun-style job run again without `--run-dir` names the same directory on every rank
/// (`runs/<name>/job-<hash>`): every rank refuses the earlier run at once, rank 1 included,
/// instead of rank 1 waiting out the rendezvous for a rank 0 that refused.
#[test]
fn a_torchrun_style_job_run_again_is_refused_by_every_rank_at_once() {
    let cwd = fresh_dir("torchrun-again");
    std::fs::create_dir_all(&cwd).unwrap();
    let attempt = || -> Vec<std::process::Output> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ranks: Vec<Child> = (0..2)
            .map(|rank| {
                let mut cmd = tandem();
                cmd.current_dir(&cwd)
                    .arg("train")
                    .arg(config("ppo-cartpole.kdl"))
                    .args(["--quiet", "--set", "devices=cpu cpu"])
                    .args(["--set", "train.max-steps=2048"]);
                as_external_rank(&mut cmd, rank, 2, port);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        // A rank that waited out the rendezvous would be killed here, failing the test.
        ranks
            .into_iter()
            .map(|c| wait_with_limit(c, Duration::from_secs(60)))
            .collect()
    };
    for out in attempt() {
        assert!(out.status.success(), "{}", text(&out));
    }
    for (rank, out) in attempt().iter().enumerate() {
        let all = text(out);
        assert_eq!(out.status.code(), Some(2), "rank {rank}: {all}");
        assert!(all.contains("already holds a run"), "rank {rank}: {all}");
    }
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn two_launchers_with_nnodes_2_form_one_job() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = fresh_dir("nnodes");
    let nodes: Vec<Child> = (0..2)
        .map(|node| {
            let mut cmd = tandem();
            cmd.arg("train")
                .arg(config("ppo-cartpole.kdl"))
                .arg("--run-dir")
                .arg(&dir)
                .args([
                    "--set",
                    "devices=cpu cpu",
                    "--set",
                    "train.max-steps=8192",
                    "--quiet",
                ])
                .args(["--nnodes", "2", "--node-rank", &node.to_string()])
                .args([
                    "--master-addr",
                    "127.0.0.1",
                    "--master-port",
                    &port.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for child in nodes {
        let out = wait_with_limit(child, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
    }
    assert_eq!(summary_number(&dir, "world_size"), Some(2.0));
    assert!(summary_number(&dir, "global_step").unwrap() >= 8192.0);
}

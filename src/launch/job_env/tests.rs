use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vars {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn no_flags() -> Flags {
    Flags::default()
}

fn rank_of(job: &JobEnv) -> OneRank {
    match &job.plan {
        JobPlan::Rank(r) => r.clone(),
        JobPlan::Spawn(l) => panic!("expected one rank, got a launcher for {l:?}"),
    }
}

fn layout_of(job: &JobEnv) -> JobLayout {
    match &job.plan {
        JobPlan::Spawn(l) => l.clone(),
        JobPlan::Rank(r) => panic!("expected a launcher, got rank {r:?}"),
    }
}

fn refusal(v: &Vars, flags: &Flags, world: usize) -> String {
    match derive(v, flags, world) {
        Ok(job) => panic!("expected a refusal, derived {:?}", job.plan),
        Err(e) => e.0,
    }
}

#[test]
fn job_ids_are_the_schedulers_without_torchruns_default_none() {
    let ids = |pairs: &[(&str, &str)]| job_ids(&vars(pairs));
    assert!(ids(&[]).is_empty());
    assert!(ids(&[("TORCHELASTIC_RUN_ID", "none")]).is_empty());
    assert_eq!(
        ids(&[("TORCHELASTIC_RUN_ID", "abc"), ("SLURM_JOB_ID", "9")]),
        ["SLURM_JOB_ID=9", "TORCHELASTIC_RUN_ID=abc"]
    );
}

#[test]
fn hostlists_expand_ranges_padding_several_groups_and_suffixes() {
    let all = |s: &str| expand_hostlist(s, usize::MAX).unwrap();
    assert_eq!(
        all("gpu[01-04,07]"),
        ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
    );
    assert_eq!(all("a1,b[2-3]"), ["a1", "b2", "b3"]);
    assert_eq!(
        all("rack[1-2]-node[01-02]"),
        [
            "rack1-node01",
            "rack1-node02",
            "rack2-node01",
            "rack2-node02"
        ]
    );
    assert_eq!(all("n[8-11]-ib"), ["n8-ib", "n9-ib", "n10-ib", "n11-ib"]);
    assert_eq!(all("n[08-11]"), ["n08", "n09", "n10", "n11"]);
    assert_eq!(all("localhost"), ["localhost"]);
    assert_eq!(all("127.0.0.[1-2]"), ["127.0.0.1", "127.0.0.2"]);
    assert_eq!(all("x[7]"), ["x7"]);
    // Only as many as asked for: the master needs one, whatever the list's size.
    assert_eq!(expand_hostlist("big[0-99999999]", 1).unwrap(), ["big0"]);
    assert_eq!(
        expand_hostlist("gpu[003-100],cpu1", 2).unwrap(),
        ["gpu003", "gpu004"]
    );
}

#[test]
fn malformed_hostlists_say_what_is_wrong() {
    let why = |s: &str| expand_hostlist(s, usize::MAX).unwrap_err();
    assert!(
        why("gpu[01-04").contains("never closed"),
        "{}",
        why("gpu[01-04")
    );
    assert!(why("gpu01]").contains("without its"));
    assert!(why("gpu[[1]]").contains("inside brackets"));
    assert!(why("gpu[4-1]").contains("backwards"));
    assert!(why("gpu[a-b]").contains("not a number"));
    assert!(why("gpu[]").contains("not a number"));
    assert!(why("a,,b").contains("empty host"));
    assert!(why("").contains("empty host"));
}

#[test]
fn tasks_per_node_expands_repeats() {
    assert_eq!(tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
    assert_eq!(tasks_per_node("4").unwrap(), [4]);
    assert!(tasks_per_node("2(x3").unwrap_err().contains("closing"));
    assert!(tasks_per_node("two").unwrap_err().contains("COUNT"));
    let huge = format!("1(x{})", usize::MAX);
    assert!(tasks_per_node(&huge).unwrap_err().contains("million"));
}

#[test]
fn slurm_one_task_per_device_makes_this_process_that_rank() {
    let v = vars(&[
        ("SLURM_PROCID", "3"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_NNODES", "4"),
        ("SLURM_NODEID", "1"),
        ("SLURM_TASKS_PER_NODE", "2(x4)"),
        ("SLURM_JOB_NODELIST", "gpu[01-04]"),
        ("SLURM_JOB_ID", "123456"),
    ]);
    let job = derive(&v, &no_flags(), 8).unwrap();
    assert_eq!(job.scheduler, Scheduler::Slurm);
    assert_eq!(
        rank_of(&job),
        OneRank {
            rank: 3,
            world: 8,
            local_rank: 1,
            local_world: 2,
            master_addr: "gpu01".into(),
            master_port: 15_000 + 3456,
        }
    );
    assert_eq!(job.run_dir, RunDirName::Job("slurm-123456".into()));
    assert_eq!(job.job_ids, ["SLURM_JOB_ID=123456"]);
    let origin = job.origin();
    for name in [
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "SLURM_TASKS_PER_NODE",
        "SLURM_JOB_NODELIST",
        "SLURM_JOB_ID",
    ] {
        assert!(origin.contains(name), "{origin}");
    }
    assert!(!origin.contains("not used"), "{origin}");
}

#[test]
fn slurm_tasks_per_node_is_read_for_this_node() {
    let mut v = vars(&[
        ("SLURM_PROCID", "6"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "7"),
        ("SLURM_NNODES", "4"),
        ("SLURM_NODEID", "3"),
        ("SLURM_TASKS_PER_NODE", "2(x3),1"),
        ("SLURM_JOB_NODELIST", "rack[1-2]-node[01-02]"),
        ("SLURM_JOB_ID", "5"),
    ]);
    let r = rank_of(&derive(&v, &no_flags(), 7).unwrap());
    assert_eq!((r.local_rank, r.local_world), (0, 1));
    assert_eq!(r.master_addr, "rack1-node01");
    // The step's list wins over the job's (srun may run on a subset of the allocation).
    v.insert("SLURM_STEP_NODELIST".into(), "rack2-node[01-02]".into());
    assert_eq!(
        rank_of(&derive(&v, &no_flags(), 7).unwrap()).master_addr,
        "rack2-node01"
    );
    v.insert("SLURM_NTASKS_PER_NODE".into(), "2".into());
    v.insert("SLURM_NODEID".into(), "9".into());
    let why = refusal(&v, &no_flags(), 7);
    assert!(
        why.contains("SLURM_NODEID=9") && why.contains("SLURM_NNODES=4"),
        "{why}"
    );
}

#[test]
fn master_variables_override_what_slurm_implies() {
    let v = vars(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NNODES", "1"),
        ("SLURM_JOB_NODELIST", "gpu01"),
        ("SLURM_JOB_ID", "77"),
        ("MASTER_ADDR", "10.0.0.9"),
        ("MASTER_PORT", "29501"),
    ]);
    let job = derive(&v, &no_flags(), 2).unwrap();
    let r = rank_of(&job);
    assert_eq!((r.master_addr.as_str(), r.master_port), ("10.0.0.9", 29501));
    assert_eq!(r.local_world, 2, "one node: every task is local");
    assert!(job.origin().contains("MASTER_PORT"), "{}", job.origin());
    // The flags override both.
    let flags = Flags {
        master_port: Some(4000),
        ..Flags::default()
    };
    let job = derive(&v, &flags, 2).unwrap();
    assert_eq!(rank_of(&job).master_port, 4000);
    assert!(job.origin().contains("--master-port"), "{}", job.origin());
}

#[test]
fn slurm_one_task_per_node_spawns_the_nodes_share() {
    let v = vars(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NNODES", "2"),
        ("SLURM_NODEID", "1"),
        ("SLURM_JOB_NODELIST", "node[3-4]"),
        ("SLURM_JOB_ID", "20001"),
    ]);
    let job = derive(&v, &no_flags(), 8).unwrap();
    let l = layout_of(&job);
    assert_eq!((l.nnodes, l.node_rank), (2, 1));
    assert_eq!(l.master_addr, "node3");
    assert_eq!(l.master_port, Some(15_001));
    assert!(job.origin().contains("one task per node"));
}

#[test]
fn slurm_task_counts_that_fit_no_layout_are_refused() {
    let v = vars(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "3"),
        ("SLURM_NNODES", "2"),
        ("SLURM_NODEID", "0"),
        ("SLURM_JOB_NODELIST", "a[1-2]"),
        ("SLURM_JOB_ID", "1"),
    ]);
    let why = refusal(&v, &no_flags(), 4);
    assert!(
        why.contains("SLURM_NTASKS=3") && why.contains("SLURM_NNODES=2") && why.contains("4"),
        "{why}"
    );
    // One task per node whose devices do not divide.
    let mut per_node = v.clone();
    per_node.insert("SLURM_NTASKS".into(), "2".into());
    let why = refusal(&per_node, &no_flags(), 3);
    assert!(why.contains("do not divide"), "{why}");
}

#[test]
fn invalid_slurm_values_name_the_variable_and_value() {
    let base = [
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NNODES", "1"),
        ("SLURM_JOB_NODELIST", "gpu[01-02"),
        ("SLURM_JOB_ID", "1"),
    ];
    let why = refusal(&vars(&base), &no_flags(), 2);
    assert!(
        why.contains("SLURM_JOB_NODELIST=\"gpu[01-02\"") && why.contains("never closed"),
        "{why}"
    );
    let mut v = vars(&base);
    v.insert("SLURM_JOB_NODELIST".into(), "gpu01".into());
    v.insert("SLURM_PROCID".into(), "zero".into());
    let why = refusal(&v, &no_flags(), 2);
    assert!(why.contains("SLURM_PROCID=\"zero\""), "{why}");
    v.insert("SLURM_PROCID".into(), "0".into());
    v.remove("SLURM_JOB_ID");
    let why = refusal(&v, &no_flags(), 2);
    assert!(
        why.contains("SLURM_JOB_ID") && why.contains("MASTER_PORT"),
        "{why}"
    );
    v.insert("SLURM_JOB_ID".into(), "1".into());
    v.insert("MASTER_PORT".into(), "70000".into());
    let why = refusal(&v, &no_flags(), 2);
    assert!(why.contains("MASTER_PORT=\"70000\""), "{why}");
}

#[test]
fn slurm_default_ports_are_deterministic_and_unprivileged() {
    assert_eq!(slurm_default_port(0), 15_000);
    assert_eq!(slurm_default_port(123_456), 18_456);
    assert_eq!(
        slurm_default_port(u64::MAX),
        15_000 + (u64::MAX % 10_000) as u16
    );
    for id in [1u64, 9_999, 10_000, 4_294_967_295] {
        let p = slurm_default_port(id);
        assert!((15_000..25_000).contains(&p), "{id} -> {p}");
    }
}

#[test]
fn torchrun_variables_make_this_process_one_rank_and_carry_the_restart_count() {
    let v = vars(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RESTART_COUNT", "2"),
    ]);
    let job = derive(&v, &no_flags(), 2).unwrap();
    assert_eq!(job.scheduler, Scheduler::Torchrun);
    assert_eq!(job.restart_count, Some(2));
    assert_eq!(
        rank_of(&job),
        OneRank {
            rank: 1,
            world: 2,
            local_rank: 1,
            local_world: 2,
            master_addr: "127.0.0.1".into(),
            master_port: 29500,
        }
    );
    assert!(job.origin().contains("restart 2"), "{}", job.origin());
    let mut bad = v.clone();
    bad.insert("TORCHELASTIC_RESTART_COUNT".into(), "-1".into());
    assert!(refusal(&bad, &no_flags(), 2).contains("TORCHELASTIC_RESTART_COUNT=\"-1\""));
}

#[test]
fn torchrun_wins_over_the_scheduler_around_it_and_says_so() {
    // torchrun started by srun, one task per node: SLURM_PROCID is the node, RANK the process.
    let v = vars(&[
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("MASTER_ADDR", "gpu01"),
        ("MASTER_PORT", "29500"),
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NNODES", "2"),
        ("PET_NNODES", "2"),
    ]);
    let job = derive(&v, &no_flags(), 8).unwrap();
    assert_eq!(job.scheduler, Scheduler::Torchrun);
    assert_eq!(rank_of(&job).rank, 5);
    let origin = job.origin();
    assert!(
        origin.contains("not used: PET_NNODES, SLURM_NNODES, SLURM_NTASKS, SLURM_PROCID"),
        "{origin}"
    );
}

#[test]
fn half_a_torchrun_environment_is_refused() {
    let why = refusal(&vars(&[("RANK", "0")]), &no_flags(), 2);
    assert!(why.contains("WORLD_SIZE is not set"), "{why}");
    let why = refusal(&vars(&[("WORLD_SIZE", "2")]), &no_flags(), 2);
    assert!(why.contains("RANK is not set"), "{why}");
    let why = refusal(&vars(&[("RANK", "0"), ("WORLD_SIZE", "2")]), &no_flags(), 2);
    assert!(why.contains("MASTER_PORT is not set"), "{why}");
    let why = refusal(
        &vars(&[("RANK", "0"), ("WORLD_SIZE", "3"), ("MASTER_PORT", "1")]),
        &no_flags(),
        2,
    );
    assert!(
        why.contains("WORLD_SIZE") && why.contains("3") && why.contains("2 device"),
        "{why}"
    );
    let why = refusal(
        &vars(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]),
        &no_flags(),
        2,
    );
    assert!(why.contains("RANK=2 is outside WORLD_SIZE=2"), "{why}");
}

#[test]
fn kubeflow_pods_spawn_their_share_and_rank_is_the_pod_index() {
    // What the training operator sets for the second pod of two with two processes each.
    let v = vars(&[
        ("PET_NNODES", "2"),
        ("PET_NPROC_PER_NODE", "2"),
        ("PET_NODE_RANK", "1"),
        ("PET_MASTER_ADDR", "job-master-0"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "job-master-0"),
        ("MASTER_PORT", "23456"),
        ("RANK", "1"),
        ("WORLD_SIZE", "4"),
    ]);
    let job = derive(&v, &no_flags(), 4).unwrap();
    assert_eq!(job.scheduler, Scheduler::Kubeflow);
    let l = layout_of(&job);
    assert_eq!((l.nnodes, l.node_rank), (2, 1));
    assert_eq!(
        (l.master_addr.as_str(), l.master_port),
        ("job-master-0", Some(23456))
    );
    // A bare RANK (no PET_NODE_RANK) is the pod index too; WORLD_SIZE may count pods.
    let bare = vars(&[
        ("PET_NNODES", "2"),
        ("PET_NPROC_PER_NODE", "2"),
        ("PET_MASTER_ADDR", "m"),
        ("PET_MASTER_PORT", "1234"),
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
    ]);
    assert_eq!(
        layout_of(&derive(&bare, &no_flags(), 4).unwrap()).node_rank,
        1
    );
    // One pod: no master needed, the launcher picks a port as on one machine.
    let one = vars(&[("PET_NNODES", "1"), ("PET_NPROC_PER_NODE", "2")]);
    let l = layout_of(&derive(&one, &no_flags(), 2).unwrap());
    assert_eq!((l.nnodes, l.node_rank, l.master_port), (1, 0, None));
}

#[test]
fn ambiguous_or_inconsistent_kubeflow_variables_are_refused_by_name() {
    let base = [
        ("PET_NNODES", "2"),
        ("PET_NPROC_PER_NODE", "2"),
        ("PET_NODE_RANK", "0"),
        ("PET_MASTER_ADDR", "m"),
        ("PET_MASTER_PORT", "1234"),
    ];
    let with = |extra: &[(&str, &str)]| {
        let mut v = vars(&base);
        for (k, val) in extra {
            v.insert(k.to_string(), val.to_string());
        }
        v
    };
    let why = refusal(&with(&[("RANK", "1")]), &no_flags(), 4);
    assert!(
        why.contains("RANK=1") && why.contains("PET_NODE_RANK=0") && why.contains("pod"),
        "{why}"
    );
    let why = refusal(&with(&[("WORLD_SIZE", "3")]), &no_flags(), 4);
    assert!(why.contains("WORLD_SIZE=3"), "{why}");
    let why = refusal(&with(&[("MASTER_ADDR", "other")]), &no_flags(), 4);
    assert!(
        why.contains("PET_MASTER_ADDR=\"m\"") && why.contains("MASTER_ADDR=\"other\""),
        "{why}"
    );
    let why = refusal(&with(&[("MASTER_PORT", "999")]), &no_flags(), 4);
    assert!(why.contains("PET_MASTER_PORT=1234") && why.contains("MASTER_PORT=999"));
    let why = refusal(&with(&[]), &no_flags(), 6);
    assert!(
        why.contains("PET_NNODES × PET_NPROC_PER_NODE") && why.contains("6 device"),
        "{why}"
    );
    let why = refusal(&with(&[("PET_NNODES", "1:4")]), &no_flags(), 4);
    assert!(
        why.contains("PET_NNODES=\"1:4\"") && why.contains("elastic"),
        "{why}"
    );
    let why = refusal(&with(&[("PET_NPROC_PER_NODE", "gpu")]), &no_flags(), 4);
    assert!(why.contains("PET_NPROC_PER_NODE=\"gpu\""), "{why}");
    let mut no_pod = vars(&base);
    no_pod.remove("PET_NODE_RANK");
    let why = refusal(&no_pod, &no_flags(), 4);
    assert!(why.contains("PET_NODE_RANK nor RANK"), "{why}");
    let mut no_master = vars(&base);
    no_master.remove("PET_MASTER_PORT");
    let why = refusal(&no_master, &no_flags(), 4);
    assert!(why.contains("PET_MASTER_PORT"), "{why}");
    let why = refusal(&with(&[("SLURM_PROCID", "0")]), &no_flags(), 4);
    assert!(
        why.contains("Kubeflow") && why.contains("Slurm") && why.contains("SLURM_PROCID"),
        "{why}"
    );
}

#[test]
fn command_line_flags_win_and_the_variables_they_beat_are_named() {
    let v = vars(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NNODES", "1"),
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
    ]);
    let flags = Flags {
        nnodes: Some(2),
        node_rank: Some(1),
        master_addr: Some("node0".into()),
        master_port: Some(29500),
    };
    let job = derive(&v, &flags, 4).unwrap();
    assert_eq!(job.scheduler, Scheduler::Flags);
    let l = layout_of(&job);
    assert_eq!((l.nnodes, l.node_rank, l.master_port), (2, 1, Some(29500)));
    let origin = job.origin();
    assert!(origin.starts_with("from --nnodes, --node-rank, --master-addr, --master-port"));
    assert!(origin.contains("not used: RANK"), "{origin}");
    let why = refusal(
        &Vars::new(),
        &Flags {
            nnodes: Some(2),
            ..Flags::default()
        },
        2,
    );
    assert!(why.contains("--node-rank and --master-port"), "{why}");
}

#[test]
fn no_scheduler_runs_every_device_here() {
    let job = derive(&vars(&[("MASTER_PORT", "1")]), &no_flags(), 2).unwrap();
    assert_eq!(job.scheduler, Scheduler::Local);
    let l = layout_of(&job);
    assert_eq!((l.nnodes, l.master_port), (1, None));
    assert!(
        job.origin().contains("not used: MASTER_PORT"),
        "{}",
        job.origin()
    );
}

#[test]
fn gloo_interfaces_are_a_comma_separated_list() {
    let job = derive(
        &vars(&[("GLOO_SOCKET_IFNAME", "eth0,eth1")]),
        &no_flags(),
        1,
    )
    .unwrap();
    assert_eq!(job.gloo_interfaces, ["eth0", "eth1"]);
    assert!(job.origin().contains("eth0, eth1 (GLOO_SOCKET_IFNAME)"));
    let why = refusal(&vars(&[("GLOO_SOCKET_IFNAME", "eth0,")]), &no_flags(), 1);
    assert!(why.contains("GLOO_SOCKET_IFNAME=\"eth0,\""), "{why}");
}

#[test]
fn a_single_slurm_task_runs_every_device_as_on_one_machine() {
    // An interactive `srun --pty bash`, or a batch step of one task.
    let v = vars(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_NNODES", "1"),
        ("SLURM_NODEID", "0"),
        ("SLURM_JOB_NODELIST", "gpu07"),
        ("SLURM_JOB_ID", "42"),
    ]);
    let job = derive(&v, &no_flags(), 4).unwrap();
    let l = layout_of(&job);
    assert_eq!(
        (l.nnodes, l.master_addr.as_str(), l.master_port),
        (1, "127.0.0.1", None)
    );
    assert_eq!(job.run_dir, RunDirName::Fresh);
    assert!(job.origin().contains("a single task"), "{}", job.origin());
}

#[test]
fn an_unset_or_auto_process_count_shares_the_devices_over_the_pods() {
    let job = derive(
        &vars(&[("PET_NNODES", "1"), ("PET_NPROC_PER_NODE", "auto")]),
        &no_flags(),
        3,
    )
    .unwrap();
    assert_eq!(job.from, ["PET_NNODES", "PET_NPROC_PER_NODE"]);
    let job = derive(&vars(&[("PET_NNODES", "1")]), &no_flags(), 3).unwrap();
    assert_eq!(
        job.from,
        ["PET_NNODES"],
        "an unset variable is not a source"
    );
    let why = refusal(
        &vars(&[("PET_NNODES", "2"), ("PET_NODE_RANK", "0")]),
        &no_flags(),
        3,
    );
    assert!(why.contains("do not divide over PET_NNODES=2"), "{why}");
    let why = refusal(
        &vars(&[("PET_NNODES", "1"), ("PET_NPROC_PER_NODE", "0")]),
        &no_flags(),
        3,
    );
    assert!(why.contains("PET_NPROC_PER_NODE=\"0\""), "{why}");
}

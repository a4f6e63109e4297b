//! Real processes, real c10d: each test starts ranks as child processes (this same test binary,
//! re-run on one test with TANDEM_TEST_ROLE set) that rendezvous over loopback with Gloo.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{child_options, finish, free_port, options, role, spawn_rank};

use tandem::dist::group::ReducerBucket;
use tandem::dist::{DistError, ProcessGroup, ReduceOp, sched};
use tch::{Kind, Tensor};

fn floats(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()
}

#[test]
fn two_ranks_collectives_give_exact_results() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let r = pg.rank() as f32;

        let mut t = vec![Tensor::from_slice(&[r + 1.0, 10.0 * (r + 1.0), -r])];
        pg.all_reduce(&mut t, ReduceOp::Sum).unwrap();
        assert_eq!(floats(&t[0]), vec![3.0, 30.0, -1.0]);

        let mut t = vec![
            Tensor::from_slice(&[r + 1.0, 4.0 * r]),
            Tensor::from_slice(&[7.0 * r]),
        ];
        pg.all_reduce(&mut t, ReduceOp::Avg).unwrap();
        assert_eq!(floats(&t[0]), vec![1.5, 2.0]);
        assert_eq!(floats(&t[1]), vec![3.5]);

        let mut t = vec![Tensor::from_slice(&[r, 5.0 - r])];
        pg.all_reduce(&mut t, ReduceOp::Min).unwrap();
        assert_eq!(floats(&t[0]), vec![0.0, 4.0]);
        let mut t = vec![Tensor::from_slice(&[r, 5.0 - r])];
        pg.all_reduce(&mut t, ReduceOp::Max).unwrap();
        assert_eq!(floats(&t[0]), vec![1.0, 5.0]);

        let mut ints = vec![Tensor::from_slice(&[pg.rank() as i64 * 1_000_000_007, 3])];
        pg.all_reduce(&mut ints, ReduceOp::Sum).unwrap();
        assert_eq!(
            Vec::<i64>::try_from(&ints[0]).unwrap(),
            vec![1_000_000_007, 6]
        );

        let mut b =
            Tensor::arange(6, (Kind::Float, tch::Device::Cpu)).reshape([2, 3]) * (r as f64 + 1.0);
        pg.broadcast(&mut b, 1).unwrap();
        assert_eq!(floats(&b), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);

        let mine = Tensor::from_slice(&[r, r * r + 0.5]);
        let all = pg.all_gather(&mine).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(floats(&all[0]), vec![0.0, 0.5]);
        assert_eq!(floats(&all[1]), vec![1.0, 1.5]);

        let mut red = Tensor::from_slice(&[r + 2.0]);
        pg.reduce(&mut red, 0, ReduceOp::Sum).unwrap();
        if pg.rank() == 0 {
            assert_eq!(floats(&red), vec![5.0]);
        }

        pg.store()
            .set(&format!("note/{}", pg.rank()), b"hello")
            .unwrap();
        pg.barrier().unwrap();
        assert_eq!(
            pg.store().try_get("note/0").unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(
            pg.store().try_get("note/1").unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(pg.store().try_get("note/2").unwrap(), None);
        pg.barrier().unwrap();
        let rank = pg.rank();
        pg.shutdown(Duration::from_secs(20)).unwrap();
        println!("rank {rank} ok");
        return;
    }
    let port = free_port();
    let test = "two_ranks_collectives_give_exact_results";
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn_rank(test, r, 2, port, 20_000, &[]))
        .collect();
    let done: Vec<_> = ranks
        .into_iter()
        .map(|c| finish(c, Duration::from_secs(60)))
        .collect();
    let all: String = done
        .iter()
        .enumerate()
        .map(|(r, d)| format!("--- rank {r}:\n{}\n", d.output))
        .collect();
    for (r, d) in done.iter().enumerate() {
        assert!(d.success, "rank {r} failed:\n{all}");
        assert!(d.output.contains(&format!("rank {r} ok")), "{all}");
    }
}

#[test]
fn a_rank_that_never_joins_is_named_at_the_deadline() {
    let timeout = Duration::from_secs(2);
    let port = free_port();
    let start = Instant::now();
    let err = match ProcessGroup::connect(&options(0, 2, port, timeout)) {
        Ok(_) => panic!("rendezvous succeeded without rank 1"),
        Err(e) => e,
    };
    let elapsed = start.elapsed();
    let message = err.to_string();
    assert!(matches!(err, DistError::Timeout { .. }), "{message}");
    assert!(message.contains("missing: rank 1"), "{message}");
    assert!(!message.contains("rank 0"), "rank 0 is present: {message}");
    assert!(elapsed >= timeout, "gave up early: {elapsed:?}");
    assert!(
        elapsed < timeout + Duration::from_secs(3),
        "took {elapsed:?}"
    );
}

#[test]
fn ranks_with_different_config_hashes_are_refused() {
    if role().is_some() {
        let err = match ProcessGroup::connect(&child_options()) {
            Ok(_) => panic!("ranks with different hashes formed a group"),
            Err(e) => e,
        };
        println!("refused: {err}");
        return;
    }
    let port = free_port();
    let test = "ranks_with_different_config_hashes_are_refused";
    let r0 = spawn_rank(test, 0, 2, port, 20_000, &[("TEST_HASH", "aaaa")]);
    let r1 = spawn_rank(test, 1, 2, port, 20_000, &[("TEST_HASH", "bbbb")]);
    for child in [r0, r1] {
        let done = finish(child, Duration::from_secs(60));
        assert!(done.success, "{}", done.output);
        assert!(
            done.output
                .contains("refused: ranks disagree at rendezvous: config-hash differs"),
            "{}",
            done.output
        );
        assert!(
            done.output.contains("rank(s) [0] have aaaa"),
            "{}",
            done.output
        );
        assert!(
            done.output.contains("rank(s) [1] have bbbb"),
            "{}",
            done.output
        );
    }
}

#[test]
fn a_killed_peer_makes_the_survivor_fail_not_hang() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let mut t = vec![Tensor::ones([1024], (Kind::Float, tch::Device::Cpu))];
        let layout = pg.verify_layout(&[&t[0]]).unwrap();
        println!("rank {} joined", pg.rank());
        if pg.rank() == 1 {
            // Wait here to be killed.
            std::thread::sleep(Duration::from_secs(120));
            return;
        }
        loop {
            if let Err(e) = pg.all_reduce_verified(&layout, &mut t, ReduceOp::Sum) {
                println!("survivor error: {e}");
                std::process::exit(3);
            }
        }
    }
    let port = free_port();
    let test = "a_killed_peer_makes_the_survivor_fail_not_hang";
    let collective_ms = 10_000;
    let r0 = spawn_rank(test, 0, 2, port, collective_ms, &[]);
    let mut r1 = spawn_rank(test, 1, 2, port, collective_ms, &[]);
    // Wait for rank 1 to say it joined, then kill it.
    let mut out = r1.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains("joined") {
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "rank 1 ended before joining: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    r1.kill().unwrap();
    r1.wait().unwrap();
    let done = finish(
        r0,
        Duration::from_millis(collective_ms) + Duration::from_secs(10),
    );
    assert!(
        !done.success,
        "the survivor exited cleanly:\n{}",
        done.output
    );
    assert!(
        done.output.contains("survivor error: all-reduce failed"),
        "{}",
        done.output
    );
}

#[test]
fn hosting_on_a_port_held_by_another_program_fails_at_once() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let timeout = Duration::from_secs(3);
    let start = Instant::now();
    let err = match ProcessGroup::connect(&options(0, 2, port, timeout)) {
        Ok(_) => panic!("hosted the store on a port another program holds"),
        Err(e) => e,
    };
    let message = err.to_string();
    assert!(
        message.contains(&format!("hosting the rendezvous store on 127.0.0.1:{port}")),
        "{message}"
    );
    assert!(
        start.elapsed() < timeout + Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    drop(holder);
}

/// Strangers crowding the door (2,000 connections that never prove themselves, each a thread
/// and a descriptor of rank 0's while it waits) cannot keep a rank out: the door lets a few
/// dozen wait, closing the longest waiting to make room, and the rank gets in at once.
#[test]
fn a_crowd_of_idle_connections_cannot_keep_a_rank_out() {
    use std::io::Read;
    use tandem::dist::{JobSecret, Store};
    let limit = tandem::dist::raise_descriptor_limit() as usize;
    let crowd_size = 2_000.min(limit.saturating_sub(300));
    let secret = JobSecret::derive(&["crowd test"]);
    let timeout = Duration::from_secs(10);
    let store = Store::host("127.0.0.1", 0, &secret, timeout).expect("hosting");
    let port = store.port();
    let connect = |_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    // A first 200: the oldest of them is closed to make room at once (its greeting and nonce,
    // then the end), not after the 3 s a connection may take to prove itself.
    let opened = Instant::now();
    let mut crowd: Vec<std::net::TcpStream> = (0..200).map(connect).collect();
    let mut first = &crowd[0];
    first
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut heard = Vec::new();
    let end = first.read_to_end(&mut heard);
    assert!(
        end.is_ok() && opened.elapsed() < Duration::from_secs(2),
        "the oldest waiting connection was still open after {:?}: {end:?}",
        opened.elapsed()
    );
    assert_eq!(heard.len(), 15 + 32, "{heard:?}");
    crowd.extend((200..crowd_size).map(connect));
    let start = Instant::now();
    let rank = Store::connect("127.0.0.1", port, &secret, timeout).expect("the rank got in");
    rank.set("k", b"v").unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(store.try_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(crowd);
}

#[test]
fn connecting_to_a_foreign_program_on_the_port_ends_at_the_deadline() {
    // A program that accepts connections and never answers: c10d's client would wait forever.
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in holder.incoming().flatten() {
            held.push(stream);
        }
    });
    let timeout = Duration::from_secs(2);
    let start = Instant::now();
    let err = match ProcessGroup::connect(&options(1, 2, port, timeout)) {
        Ok(_) => panic!("formed a group with a program that is not a rank"),
        Err(e) => e,
    };
    let elapsed = start.elapsed();
    let message = err.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(
        elapsed < timeout + Duration::from_secs(3),
        "took {elapsed:?}: {message}"
    );
}

#[test]
fn mismatched_tensor_sizes_are_an_error_not_an_abort() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let n = 3 + pg.rank() as i64;
        let mut t = vec![Tensor::ones([n], (Kind::Float, tch::Device::Cpu))];
        let err = pg.all_reduce(&mut t, ReduceOp::Sum).unwrap_err();
        println!("mismatch: {err}");
        // The group is still usable after the refused collective.
        let mut ok = vec![Tensor::ones([2], (Kind::Float, tch::Device::Cpu))];
        pg.all_reduce(&mut ok, ReduceOp::Sum).unwrap();
        assert_eq!(floats(&ok[0]), vec![2.0, 2.0]);
        pg.shutdown(Duration::from_secs(20)).unwrap();
        println!("still usable");
        return;
    }
    let port = free_port();
    let test = "mismatched_tensor_sizes_are_an_error_not_an_abort";
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn_rank(test, r, 2, port, 20_000, &[]))
        .collect();
    for child in ranks {
        let done = finish(child, Duration::from_secs(60));
        assert!(done.success, "{}", done.output);
        assert!(
            done.output
                .contains("mismatch: rank(s) [1] hold tensors of another layout"),
            "{}",
            done.output
        );
        assert!(done.output.contains("still usable"), "{}", done.output);
    }
}

/// Gloo's threads wake for every message of a collective; with a short time slice they preempt a
/// busy compute thread at once instead of waiting out its slice (see `tandem::dist::sched`).
#[test]
fn gloos_threads_get_a_short_time_slice_and_the_caller_keeps_its_own() {
    if role().is_some() {
        let Some(before) = sched::time_slice(0) else {
            println!("this kernel reports no time slices (before 6.12): nothing to check");
            return;
        };
        let tasks = || -> Vec<i32> {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
                .collect()
        };
        let old = tasks();
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let new: Vec<(i32, Option<Duration>)> = tasks()
            .into_iter()
            .filter(|t| !old.contains(t))
            .map(|t| (t, sched::time_slice(t)))
            .collect();
        let short = new
            .iter()
            .filter(|(_, s)| *s == Some(sched::COMMUNICATION_SLICE))
            .count();
        assert!(
            short >= 2,
            "threads started by connect and their slices: {new:?}"
        );
        assert_eq!(
            sched::time_slice(0),
            Some(before),
            "the caller's slice changed"
        );
        assert_ne!(before, sched::COMMUNICATION_SLICE);
        let mut t = vec![Tensor::from_slice(&[1.0f32])];
        pg.all_reduce(&mut t, ReduceOp::Sum).unwrap();
        println!("rank 0 ok: {short} of {} new threads", new.len());
        return;
    }
    let port = free_port();
    let done = finish(
        spawn_rank(
            "gloos_threads_get_a_short_time_slice_and_the_caller_keeps_its_own",
            0,
            1,
            port,
            20_000,
            &[],
        ),
        Duration::from_secs(60),
    );
    assert!(done.success, "{}", done.output);
    assert!(
        done.output.contains("rank 0 ok") || done.output.contains("reports no time slices"),
        "{}",
        done.output
    );
}

/// The reducer's hooks run inside autograd. One that fails (here: a gradient of another shape
/// than its bucket slot, which libtorch refuses to copy in) must keep the failure and let the
/// sync report it with libtorch's message, instead of throwing into backward.
#[test]
fn a_failing_gradient_hook_is_reported_by_the_sync_with_libtorchs_message() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let p = Tensor::zeros([1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let flat = Tensor::zeros([1], (Kind::Float, tch::Device::Cpu));
        let bucket = ReducerBucket {
            params: vec![&p],
            slots: vec![flat.narrow(0, 0, 1)],
            flat: flat.shallow_clone(),
        };
        let mut reducer = pg.gradient_reducer(&[bucket], false).unwrap();
        // A [4] gradient for a [1] parameter: autograd accumulates into it (broadcasting), the
        // hook's copy into the [1] slot then throws.
        tandem::torch_ops::set_grad(&p, &Tensor::zeros([4], (Kind::Float, tch::Device::Cpu)))
            .unwrap();
        reducer.arm().unwrap();
        (&p * 3.0).sum(Kind::Float).backward();
        println!("backward returned");
        let err = reducer.finish(&[p.shallow_clone()]).unwrap_err();
        println!("sync: {err}");
        pg.shutdown(Duration::from_secs(20)).unwrap();
        return;
    }
    let port = free_port();
    let test = "a_failing_gradient_hook_is_reported_by_the_sync_with_libtorchs_message";
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn_rank(test, r, 2, port, 20_000, &[]))
        .collect();
    for child in ranks {
        let done = finish(child, Duration::from_secs(60));
        assert!(done.success, "{}", done.output);
        assert!(done.output.contains("backward returned"), "{}", done.output);
        assert!(
            done.output
                .contains("sync: gradient sync failed: gradient hook of parameter 0: "),
            "{}",
            done.output
        );
        // libtorch's own words for the refused copy.
        assert!(
            done.output
                .contains("output with shape [1] doesn't match the broadcast shape [4]"),
            "{}",
            done.output
        );
    }
}

/// The store admits only holders of the job's secret: a stray client speaking anything (here
/// c10d's VALIDATE bytes) is greeted, refused and closed; a rank with another secret is told so;
/// a rank with the secret reads and writes keys through the door.
#[test]
fn the_store_admits_only_ranks_that_hold_the_jobs_secret() {
    use std::io::Write;
    use tandem::dist::{JobSecret, Store};
    let secret = JobSecret::derive(&["door test"]);
    let timeout = Duration::from_secs(5);
    let store = Store::host("127.0.0.1", 0, &secret, timeout).expect("hosting");
    let port = store.port();

    let mut stray = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stray.set_read_timeout(Some(timeout)).unwrap();
    let mut bytes = vec![0u8];
    bytes.extend(0x3C85_F7CEu32.to_le_bytes());
    bytes.resize(40, 7);
    stray.write_all(&bytes).unwrap();
    let mut reply = Vec::new();
    let _ = stray.read_to_end(&mut reply);
    assert!(reply.starts_with(b"tandem-store-1\n"), "{reply:?}");
    assert_eq!(reply.len(), 15 + 32 + 1, "{reply:?}");
    assert_eq!(reply.last(), Some(&b'-'), "the stray was not refused");

    let wrong = JobSecret::derive(&["another job"]);
    let err = match Store::connect("127.0.0.1", port, &wrong, timeout) {
        Ok(_) => panic!("a rank with another secret was let in"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("rank 0 refused this rank: it holds another job secret"),
        "{err}"
    );

    let client =
        Store::connect("127.0.0.1", port, &secret, timeout).expect("the rank with the secret");
    client.set("k", b"v").unwrap();
    assert_eq!(store.try_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(client.add("n", 2).unwrap(), 2);
}

/// Four ranks in two subgroups of two (a population's members): each group's all-reduce sums
/// its own ranks' values only, the groups' collectives interleave with the job's without
/// waiting on each other, and each group's shutdown is its own.
#[test]
fn subgroups_reduce_only_inside_themselves() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let rank = pg.rank();
        let member = rank / 2;
        let group = pg
            .subgroup(
                &format!("member-{member}"),
                member * 2..member * 2 + 2,
                Duration::from_secs(20),
            )
            .expect("subgroup");
        assert_eq!((group.rank(), group.world_size()), (rank % 2, 2));
        // Values 1, 10, 100, 1000 by rank: member 0 sums 11, member 1 sums 1100; a value that
        // crossed into the other group would show in the sum.
        let value = 10f32.powi(rank as i32);
        let mut t = vec![Tensor::from_slice(&[value])];
        group.all_reduce(&mut t, ReduceOp::Sum).unwrap();
        let expected = if member == 0 { 11.0 } else { 1100.0 };
        assert_eq!(floats(&t[0]), vec![expected]);
        // The job's group still spans all four, between the members' collectives.
        let mut all = vec![Tensor::from_slice(&[value])];
        pg.all_reduce(&mut all, ReduceOp::Sum).unwrap();
        assert_eq!(floats(&all[0]), vec![1111.0]);
        // A broadcast from the group's first rank reaches its own ranks alone.
        let mut b = Tensor::from_slice(&[rank as f32]);
        group.broadcast(&mut b, 0).unwrap();
        assert_eq!(floats(&b), vec![(member * 2) as f32]);
        group.shutdown(Duration::from_secs(20)).unwrap();
        pg.shutdown(Duration::from_secs(20)).unwrap();
        return;
    }
    common::compute_on_one_thread();
    let port = free_port();
    let test = "subgroups_reduce_only_inside_themselves";
    let ranks: Vec<Child> = (0..4)
        .map(|r| spawn_rank(test, r, 4, port, 20_000, &[]))
        .collect();
    for (r, child) in ranks.into_iter().enumerate() {
        let done = finish(child, Duration::from_secs(90));
        assert!(done.success, "rank {r} failed:\n{}", done.output);
    }
}

/// A sum started without waiting (a population's stop votes) completes in order with the
/// group's other collectives: two started back to back, a blocking all-reduce between, each
/// gives its own sums; one dropped unwaited does not disturb the next.
#[test]
fn sums_started_without_waiting_complete_in_order() {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let r = pg.rank() as f64;
        let first = pg.start_sum(&[r, 1.0]).unwrap();
        let second = pg.start_sum(&[10.0 * r, 2.0]).unwrap();
        let mut t = vec![Tensor::from_slice(&[r + 1.0])];
        pg.all_reduce(&mut t, ReduceOp::Sum).unwrap();
        assert_eq!(Vec::<f64>::try_from(&t[0]).unwrap(), vec![3.0]);
        assert_eq!(second.wait().unwrap(), vec![10.0, 4.0]);
        assert_eq!(first.wait().unwrap(), vec![1.0, 2.0]);
        drop(pg.start_sum(&[5.0, 5.0]).unwrap());
        assert_eq!(
            pg.start_sum(&[r, r]).unwrap().wait().unwrap(),
            vec![1.0, 1.0]
        );
        pg.shutdown(Duration::from_secs(20)).unwrap();
        return;
    }
    common::run_two_ranks(
        "sums_started_without_waiting_complete_in_order",
        20_000,
        &[],
        Duration::from_secs(60),
    );
}

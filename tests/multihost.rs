//! Two hosts on one machine: two network namespaces joined by a veth pair, each with its own
//! address, and one `tandem train --nnodes 2` launcher in each, training over those addresses.
//! Faults between them (the link cut, all packets dropped, a launcher killed, a node that never
//! comes) must end both launchers within `collective-timeout` + 10 s, each naming what it lost;
//! and the rendezvous store must admit only the job's ranks.
//!
//! Needs root (CI runs as root). Where network namespaces cannot be made, every test fails
//! loudly, unless TANDEM_SKIP_NETNS=1 says to skip them. Each test prints a `MEASURED` line with
//! the seconds it measured (docs/distributed.md, "Faults between hosts").

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{alive, children_of, kill_job, send_signal, wait_for, wait_or_kill};

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");
const PORT: u16 = 29500;
/// The experiment's collective timeout; the bound every fault is held to is this + 10 s.
const COLLECTIVE_S: u64 = 5;
const RENDEZVOUS_S: u64 = 8;

/// Two namespaces `a` (10.231.0.1, node 0) and `b` (10.231.0.2, node 1) joined by a veth pair;
/// deleted on drop (which deletes the pair with them), also when the test panics. Addresses
/// repeat between tests: each pair is private to its two namespaces.
struct Net {
    a: String,
    b: String,
    veth_a: String,
}

const ADDR_A: &str = "10.231.0.1";
const ADDR_B: &str = "10.231.0.2";

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// The pair, or `None` when TANDEM_SKIP_NETNS=1 and namespaces cannot be made.
    fn new() -> Option<Net> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        let net = Net {
            a: format!("tandem-{tag}-a"),
            b: format!("tandem-{tag}-b"),
            veth_a: format!("tv{tag}a"),
        };
        let veth_b = format!("tv{tag}b");
        let made = (|| {
            ip(&["netns", "add", &net.a])?;
            ip(&["netns", "add", &net.b])?;
            ip(&[
                "link",
                "add",
                &net.veth_a,
                "netns",
                &net.a,
                "type",
                "veth",
                "peer",
                "name",
                &veth_b,
                "netns",
                &net.b,
            ])?;
            for (ns, dev, addr) in [(&net.a, &net.veth_a, ADDR_A), (&net.b, &veth_b, ADDR_B)] {
                ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
                ip(&["-n", ns, "link", "set", dev, "up"])?;
                ip(&["-n", ns, "link", "set", "lo", "up"])?;
            }
            Ok::<(), String>(())
        })();
        match made {
            Ok(()) => Some(net),
            Err(why) if std::env::var("TANDEM_SKIP_NETNS").is_ok_and(|v| v == "1") => {
                eprintln!("skipped (TANDEM_SKIP_NETNS=1): {why}");
                None
            }
            Err(why) => panic!(
                "cannot make network namespaces ({why}); these tests need root. \
                 Set TANDEM_SKIP_NETNS=1 to skip them knowingly"
            ),
        }
    }

    fn ns(&self, node: usize) -> &str {
        if node == 0 { &self.a } else { &self.b }
    }

    /// Cuts the link: node 0's end of the pair goes down (both ends lose carrier).
    fn link_down(&self) {
        ip(&["-n", &self.a, "link", "set", &self.veth_a, "down"]).unwrap();
    }

    /// Drops every packet between the two, both ways, with the link up: a blackhole route
    /// to the other side in each namespace (what a dead switch or a firewall looks like).
    fn drop_all(&self) {
        ip(&[
            "-n",
            &self.a,
            "route",
            "add",
            "blackhole",
            &format!("{ADDR_B}/32"),
        ])
        .unwrap();
        ip(&[
            "-n",
            &self.b,
            "route",
            "add",
            "blackhole",
            &format!("{ADDR_A}/32"),
        ])
        .unwrap();
    }

    /// Runs `f` on a thread that lives in namespace `node` (a thread's network namespace is
    /// its own), e.g. to connect from "another host".
    fn from<T: Send + 'static>(&self, node: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.ns(node));
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
            // SAFETY: setns(2) with an open namespace file of ours; it moves only this thread,
            // which was made for this and ends with `f`.
            let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// A test's launchers; any still running when it ends (a failed assertion included) are killed
/// with their workers, so nothing trains on in a deleted namespace.
struct Nodes(Vec<Child>);

impl std::ops::Deref for Nodes {
    type Target = Vec<Child>;
    fn deref(&self) -> &Vec<Child> {
        &self.0
    }
}

impl std::ops::DerefMut for Nodes {
    fn deref_mut(&mut self) -> &mut Vec<Child> {
        &mut self.0
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if child.try_wait().ok().flatten().is_none() {
                kill_job(child);
            }
        }
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-multihost-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Node `node`'s launcher, in its namespace, with its own run directory `dir/node-N` (as on a
/// host of its own) and its console in `dir/node-N.txt`.
fn launcher(net: &Net, node: usize, dir: &Path, sets: &[&str], env: &[(&str, &str)]) -> Child {
    launcher_command(net, node, dir, sets, env).spawn().unwrap()
}

/// The command [`launcher`] starts.
fn launcher_command(
    net: &Net,
    node: usize,
    dir: &Path,
    sets: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let run_dir = dir.join(format!("node-{node}"));
    let console = std::fs::File::create(dir.join(format!("node-{node}.txt"))).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", net.ns(node), TANDEM, "train"])
        .arg(format!(
            "{}/tests/configs/ppo-cartpole.kdl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["--nnodes", "2", "--node-rank", &node.to_string()])
        .args(["--master-addr", ADDR_A, "--master-port", &PORT.to_string()])
        .args([
            "--set",
            "devices=cpu cpu",
            "--set",
            &format!("sync.collective-timeout={COLLECTIVE_S}.0"),
            "--set",
            &format!("sync.rendezvous-timeout={RENDEZVOUS_S}.0"),
            "--set",
            "log.console=plain",
            "--set",
            "log.interval=1",
        ]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    cmd.env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("TANDEM_JOB_SECRET")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(console);
    cmd
}

fn long_run(net: &Net, node: usize, dir: &Path) -> Child {
    launcher(net, node, dir, &["train.total-steps=50_000_000"], &[])
}

fn console(dir: &Path, node: usize) -> String {
    std::fs::read_to_string(dir.join(format!("node-{node}.txt"))).unwrap_or_default()
}

fn rank_log(dir: &Path, node: usize, rank: usize) -> String {
    std::fs::read_to_string(dir.join(format!("node-{node}/logs/rank-{rank}.log")))
        .unwrap_or_default()
}

/// Waits until both nodes train (rank 0 logged an update), and returns their workers' pids.
fn training(launchers: &[Child], dir: &Path) -> Vec<u32> {
    for l in launchers {
        wait_for("a node's worker", Duration::from_secs(30), || {
            children_of(l.id()).len() == 1
        });
    }
    wait_for("training over the link", Duration::from_secs(60), || {
        rank_log(dir, 0, 0).contains("step ")
    });
    launchers.iter().flat_map(|l| children_of(l.id())).collect()
}

fn bound() -> Duration {
    Duration::from_secs(COLLECTIVE_S + 10)
}

/// Asserts that every launcher ends non-zero within the bound of the fault at `fault`, and
/// returns how long after it each ended.
fn all_fail_within_bound(nodes: &mut [Child], fault: Instant, dir: &Path) -> Vec<Duration> {
    let mut took = Vec::new();
    for (node, l) in nodes.iter_mut().enumerate() {
        let status = wait_or_kill(l, bound().saturating_sub(fault.elapsed()));
        took.push(fault.elapsed());
        assert!(
            status.is_some_and(|s| !s.success()),
            "node {node} did not fail within {:?} of the fault ({status:?}):\n{}",
            bound(),
            console(dir, node)
        );
    }
    took
}

/// Both launchers end non-zero within the bound after `cut`, node 0 naming rank 1 on node 1 and
/// node 1 naming rank 0 (and the store it hosts) on node 0.
fn cut_link_mid_training(name: &str, cut: impl FnOnce(&Net)) {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir(name);
    let mut nodes = Nodes(vec![long_run(&net, 0, &dir), long_run(&net, 1, &dir)]);
    let workers = training(&nodes, &dir);
    cut(&net);
    let cut_at = Instant::now();
    let took = all_fail_within_bound(&mut nodes, cut_at, &dir);
    let (c0, c1) = (console(&dir, 0), console(&dir, 1));
    assert!(
        c0.contains("rank 1 (node 1, ") && c0.contains(&format!("{ADDR_B}, pid ")),
        "node 0 does not name rank 1 at {ADDR_B}:\n{c0}"
    );
    assert!(c0.contains("stopped answering"), "{c0}");
    assert!(
        c1.contains(&format!(
            "which hosts the rendezvous store at {ADDR_A}:{PORT}, stopped answering"
        )) && c1.contains("rank 0 (node 0, "),
        "node 1 does not name rank 0 and its store at {ADDR_A}:\n{c1}"
    );
    for w in workers {
        wait_for("no worker left", Duration::from_secs(5), || !alive(w));
    }
    println!(
        "MEASURED {name}: node 0 exited {:.1} s and node 1 {:.1} s after the cut (collective-timeout {COLLECTIVE_S} s)",
        took[0].as_secs_f64(),
        took[1].as_secs_f64()
    );
}

#[test]
fn a_link_cut_mid_training_ends_both_nodes_each_naming_the_other() {
    cut_link_mid_training("link-down", Net::link_down);
}

#[test]
fn all_packets_dropped_mid_training_ends_both_nodes_each_naming_the_other() {
    cut_link_mid_training("packets-dropped", Net::drop_all);
}

/// `kill -9` of node `victim`'s launcher: its workers die with it, the other node ends within
/// the bound naming the rank it lost, and no worker of either node survives.
fn killed_launcher(victim: usize) {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir(&format!("kill-{victim}"));
    let mut nodes = Nodes(vec![long_run(&net, 0, &dir), long_run(&net, 1, &dir)]);
    let workers = training(&nodes, &dir);
    send_signal(nodes[victim].id(), libc::SIGKILL);
    let killed_at = Instant::now();
    let _ = nodes[victim].wait();
    let survivor = 1 - victim;
    let status = wait_or_kill(&mut nodes[survivor], bound());
    let took = killed_at.elapsed();
    let all = console(&dir, survivor);
    assert!(
        status.is_some_and(|s| !s.success()),
        "node {survivor} did not fail within {:?} ({status:?}):\n{all}",
        bound()
    );
    assert!(
        all.contains(&format!("rank {victim} (node {victim}, "))
            && all.contains("stopped answering"),
        "node {survivor} does not name rank {victim} on node {victim}:\n{all}"
    );
    for w in &workers {
        wait_for("no orphan worker", Duration::from_secs(5), || !alive(*w));
    }
    println!(
        "MEASURED kill-{victim}: node {survivor} exited {:.1} s after node {victim}'s launcher was killed",
        took.as_secs_f64()
    );
}

#[test]
fn killing_node_1s_launcher_ends_node_0_with_no_orphans() {
    killed_launcher(1);
}

#[test]
fn killing_node_0s_launcher_ends_node_1_with_no_orphans() {
    killed_launcher(0);
}

#[test]
fn a_node_that_never_arrives_is_named_at_the_rendezvous_timeout() {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir("never");
    let started = Instant::now();
    let mut node0 = Nodes(vec![long_run(&net, 0, &dir)]);
    let limit = Duration::from_secs(RENDEZVOUS_S + 10);
    let status = wait_or_kill(&mut node0[0], limit);
    let took = started.elapsed();
    let all = console(&dir, 0);
    assert!(
        status.is_some_and(|s| !s.success()),
        "node 0 did not fail within {limit:?} ({status:?}):\n{all}"
    );
    assert!(
        all.contains(&format!(
            "waiting for the rendezvous of all ranks at {ADDR_A}:{PORT}; missing: node 1 (ranks 1) never joined"
        )),
        "{all}"
    );
    assert!(
        took >= Duration::from_secs(RENDEZVOUS_S),
        "gave up early: {took:?}"
    );
    println!(
        "MEASURED never-arrives: node 0 exited {:.1} s after it started (rendezvous-timeout {RENDEZVOUS_S} s)",
        took.as_secs_f64()
    );
}

/// What c10d's client would send first and then to overwrite rank 1's rendezvous entry:
/// VALIDATE (query 0) with TCPStore's magic number, then SET (query 1) of a key and a value,
/// each a little-endian u64 length and the bytes.
fn c10d_set(key: &str, value: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend(0x3C85_F7CEu32.to_le_bytes());
    out.push(1);
    out.extend((key.len() as u64).to_le_bytes());
    out.extend(key.as_bytes());
    out.extend((value.len() as u64).to_le_bytes());
    out.extend(value);
    out
}

/// A stray client on node 1's host that speaks c10d to the store's port is refused (and rank 0
/// logs its address), the store is not reachable on loopback at all, and the job trains anyway.
#[test]
fn a_stray_client_is_refused_and_logged_and_the_job_still_trains() {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir("stray");
    let short = ["train.max-steps=4096"];
    let mut nodes = Nodes(vec![launcher(&net, 0, &dir, &short, &[])]);
    wait_for("rank 0 to host the store", Duration::from_secs(30), || {
        rank_log(&dir, 0, 0).contains("joining 2 rank(s)")
    });
    std::thread::sleep(Duration::from_millis(300));
    // On node 0's host the store is bound to the job's address only.
    let on_loopback = net.from(0, || TcpStream::connect(("127.0.0.1", PORT)).map(|_| ()));
    assert!(
        on_loopback.is_err(),
        "the store's port answers on loopback, not only on {ADDR_A}"
    );
    let reply = net.from(1, || {
        let mut s = TcpStream::connect((ADDR_A, PORT)).expect("the store's port");
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(&c10d_set(
            "tandem/rendezvous/rank/1",
            b"config-hash=forged\n",
        ))
        .unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        reply
    });
    // Greeting, a 32-byte nonce, the refusal, then the connection closed.
    assert!(reply.starts_with(b"tandem-store-1\n"), "{reply:?}");
    assert_eq!(reply.len(), 15 + 32 + 1, "{reply:?}");
    assert_eq!(reply.last(), Some(&b'-'));
    wait_for("rank 0 to log the refusal", Duration::from_secs(5), || {
        rank_log(&dir, 0, 0).contains(&format!(
            "refused a connection to the rendezvous store from {ADDR_B}:"
        ))
    });
    nodes.push(launcher(&net, 1, &dir, &short, &[]));
    all_succeed(&mut nodes, &dir);
}

/// Waits for every launcher (two minutes at most) and asserts that each exited 0, showing a
/// failed node's console.
fn all_succeed(nodes: &mut Nodes, dir: &Path) {
    for (node, l) in nodes.iter_mut().enumerate() {
        let status = wait_or_kill(l, Duration::from_secs(120));
        assert!(
            status.is_some_and(|s| s.success()),
            "node {node} ({status:?}):\n{}",
            console(dir, node)
        );
    }
}

/// `cmd` under `ulimit -n LIMIT`, soft and hard: what it starts cannot raise it.
fn with_descriptor_limit(mut cmd: Command, limit: u64) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and makes one raw syscall with a
    // struct on its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let both = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &both) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// A flood at the door from another host: 2,000 connections that never prove themselves,
/// opened from node 1's host while rank 0 waits for the rendezvous and held while node 1
/// joins, with both launchers under
/// `ulimit -n 1024` (soft and hard: a common default, which the launcher cannot raise). About
/// 1,000 such connections used to take every descriptor of rank 0, and node 1 failed at once.
/// Node 1 joins and the job trains to its end. Seen failing with the door as it was (10 s to
/// prove, no bound on the waiting, no retry): node 1 never joined.
#[test]
fn a_flood_of_connections_under_ulimit_1024_cannot_keep_node_1_out() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let Some(net) = Net::new() else { return };
    tandem::dist::raise_descriptor_limit();
    let dir = fresh_dir("flood");
    // Time for the whole flood to be open before node 1 comes (it opens about 150 a second).
    let sets = ["train.max-steps=4096", "sync.rendezvous-timeout=40.0"];
    let limited =
        |node| with_descriptor_limit(launcher_command(&net, node, &dir, &sets, &[]), 1024);
    let mut nodes = Nodes(vec![limited(0).spawn().unwrap()]);
    wait_for("rank 0 to host the store", Duration::from_secs(30), || {
        rank_log(&dir, 0, 0).contains("joining 2 rank(s)")
    });
    let (opened, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let flood = {
        let (opened, done) = (Arc::clone(&opened), Arc::clone(&done));
        let path = format!("/var/run/netns/{}", net.ns(1));
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: setns(2) with an open namespace file; it moves only this thread.
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            let door = std::net::SocketAddr::from(([10, 231, 0, 1], PORT));
            let mut held = Vec::new();
            while held.len() < 2_000 && !done.load(Ordering::SeqCst) {
                if let Ok(s) = TcpStream::connect_timeout(&door, Duration::from_secs(2)) {
                    held.push(s);
                    opened.fetch_add(1, Ordering::SeqCst);
                }
            }
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    wait_for("the flood's 2,000", Duration::from_secs(40), || {
        opened.load(Ordering::SeqCst) >= 2_000
    });
    nodes.push(limited(1).spawn().unwrap());
    all_succeed(&mut nodes, &dir);
    done.store(true, Ordering::SeqCst);
    flood.join().unwrap();
    println!(
        "MEASURED flood: {} connections opened from node 1's host; the job formed and trained",
        opened.load(Ordering::SeqCst)
    );
}

/// A node with another job secret is refused at the door, says so, and node 0 names it at the
/// rendezvous deadline; with the same TANDEM_JOB_SECRET the two form the job.
#[test]
fn a_node_with_another_job_secret_is_refused() {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir("secret");
    let short = ["train.max-steps=2048"];
    let mut nodes = Nodes(vec![
        launcher(&net, 0, &dir, &short, &[("TANDEM_JOB_SECRET", "ours")]),
        launcher(&net, 1, &dir, &short, &[("TANDEM_JOB_SECRET", "theirs")]),
    ]);
    let limit = Duration::from_secs(RENDEZVOUS_S + 10);
    let s1 = wait_or_kill(&mut nodes[1], limit);
    let s0 = wait_or_kill(&mut nodes[0], limit);
    let (c0, c1) = (console(&dir, 0), console(&dir, 1));
    assert!(s1.is_some_and(|s| !s.success()), "{s1:?}\n{c1}");
    assert!(
        c1.contains("rank 0 refused this rank: it holds another job secret"),
        "{c1}"
    );
    assert!(s0.is_some_and(|s| !s.success()), "{s0:?}\n{c0}");
    assert!(c0.contains("node 1 (ranks 1) never joined"), "{c0}");
    assert!(
        rank_log(&dir, 0, 0).contains(&format!(
            "refused a connection to the rendezvous store from {ADDR_B}:"
        )),
        "{}",
        rank_log(&dir, 0, 0)
    );

    let dir = fresh_dir("secret-same");
    let same = [("TANDEM_JOB_SECRET", "ours")];
    let mut nodes = Nodes(vec![
        launcher(&net, 0, &dir, &short, &same),
        launcher(&net, 1, &dir, &short, &same),
    ]);
    all_succeed(&mut nodes, &dir);
    assert!(rank_log(&dir, 1, 1).contains("job secret from TANDEM_JOB_SECRET"));
}

/// A rank stopped (SIGSTOP) on node 1: node 0 names it, from its heartbeats, and node 1's
/// launcher, which no peer's failure reaches, names it too once it has been stopped for the
/// collective timeout; both within the bound.
#[test]
fn a_stopped_rank_on_another_host_is_named_by_both_nodes() {
    let Some(net) = Net::new() else { return };
    let dir = fresh_dir("sigstop");
    let mut nodes = Nodes(vec![long_run(&net, 0, &dir), long_run(&net, 1, &dir)]);
    let workers = training(&nodes, &dir);
    let stopped = children_of(nodes[1].id())[0];
    send_signal(stopped, libc::SIGSTOP);
    let stopped_at = Instant::now();
    let took = all_fail_within_bound(&mut nodes, stopped_at, &dir);
    let (c0, c1) = (console(&dir, 0), console(&dir, 1));
    assert!(
        c0.contains("rank 1 (node 1, ")
            && c0.contains(&format!("{ADDR_B}, pid {stopped}) stopped answering")),
        "node 0 does not name the stopped rank 1:\n{c0}"
    );
    assert!(
        c1.contains(&format!(
            "tandem: rank 1 stopped answering: its process {stopped} has been stopped"
        )),
        "node 1 does not name its stopped rank 1:\n{c1}"
    );
    for w in workers {
        wait_for("no worker left", Duration::from_secs(5), || !alive(w));
    }
    println!(
        "MEASURED sigstop: node 0 exited {:.1} s and node 1 {:.1} s after rank 1 was stopped",
        took[0].as_secs_f64(),
        took[1].as_secs_f64()
    );
}

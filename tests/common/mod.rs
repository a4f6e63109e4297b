//! Helpers for tests that run ranks as real child processes: the test binary re-runs itself on
//! one test with TANDEM_TEST_ROLE set, and the parent supervises the children.
#![allow(dead_code)]

pub mod binary;
pub mod equivalence;
pub mod example_runs;
pub mod greedy;
pub mod tools;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tandem::dist::{Backend, GroupOptions};

pub const ROLE: &str = "TANDEM_TEST_ROLE";

/// Runs libtorch's kernels on one thread in this process. How a kernel splits a sum over
/// threads sets its rounding, and the thread count is the machine's: the GRU reference of
/// `dist_recurrent_ppo` summed its parameters to 33.754115693 at two threads and 33.754145402
/// at four (`OMP_NUM_THREADS=4`), the second failing CI by 1.3e-5 on a larger machine. The
/// parent of two child ranks ([`run_two_ranks`], which then computes the one-rank reference)
/// and every child ([`child_options`]) call it, so that each side of an equivalence test is a
/// fixed function of its inputs on any machine.
pub fn compute_on_one_thread() {
    tch::set_num_threads(1);
}

/// Seeds libtorch's generator and runs `draw` while holding one process-wide lock: the generator
/// is global and a test binary's tests run on parallel threads, so a seeded construction (a
/// model's initialisation, a random batch) must not interleave with another test's.
pub fn seeded<T>(seed: i64, draw: impl FnOnce() -> T) -> T {
    let _guard = torch_rng();
    tch::manual_seed(seed);
    draw()
}

/// The lock [`seeded`] holds, for a test that seeds and draws in several steps, or draws
/// unseeded while other tests of its binary draw seeded.
pub fn torch_rng() -> std::sync::MutexGuard<'static, ()> {
    static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TORCH_RNG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The config's default initialisation (orthogonal; gains sqrt(2) torso, 0.01 policy, 1.0
/// value), for tests that build networks directly.
pub fn orthogonal_init() -> tandem::nn::InitSpec {
    tandem::nn::InitSpec {
        scheme: tandem::nn::Init::Orthogonal,
        torso_gain: std::f64::consts::SQRT_2,
        policy_gain: 0.01,
        value_gain: 1.0,
    }
}

pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

pub fn env_usize(name: &str) -> usize {
    std::env::var(name).unwrap().parse().unwrap()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts rank `rank` of `world` as a child running the test `test` in child mode.
pub fn spawn_rank(
    test: &str,
    rank: usize,
    world: usize,
    port: u16,
    timeout_ms: u64,
    extra: &[(&str, &str)],
) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "rank")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_PORT", port.to_string())
        .env("TEST_TIMEOUT_MS", timeout_ms.to_string())
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Runs `test` in child mode as both ranks of a 2-rank world on a free port (collective
/// timeout `timeout_ms`, `extra` in each child's environment); fails the test unless both
/// succeed within `limit`, and returns their outputs in rank order.
pub fn run_two_ranks(
    test: &str,
    timeout_ms: u64,
    extra: &[(&str, &str)],
    limit: Duration,
) -> Vec<String> {
    compute_on_one_thread();
    let port = free_port();
    let ranks: Vec<Child> = (0..2)
        .map(|r| spawn_rank(test, r, 2, port, timeout_ms, extra))
        .collect();
    ranks
        .into_iter()
        .enumerate()
        .map(|(r, child)| {
            let done = finish(child, limit);
            assert!(done.success, "rank {r} failed:\n{}", done.output);
            done.output
        })
        .collect()
}

pub struct Finished {
    pub success: bool,
    pub status: std::process::ExitStatus,
    /// Standard output, then standard error.
    pub output: String,
}

/// Waits for a child at most `limit`; a child still running then is killed and the test fails.
/// Its output is drained while it runs, so a chatty child never blocks on a full pipe.
pub fn finish(mut child: Child, limit: Duration) -> Finished {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = out.join().unwrap() + &err.join().unwrap();
            return Finished {
                success: status.success(),
                status,
                output,
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let output = out.join().unwrap() + &err.join().unwrap();
            panic!("a process was still running after {limit:?}: it hung. Its output:\n{output}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn options(rank: usize, world: usize, port: u16, timeout: Duration) -> GroupOptions {
    GroupOptions {
        rank,
        world_size: world,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        rendezvous_timeout: timeout,
        collective_timeout: timeout,
        backend: Backend::Gloo,
        identity: vec![
            (
                "config-hash".into(),
                std::env::var("TEST_HASH").unwrap_or_else(|_| "abc".into()),
            ),
            ("version".into(), "test".into()),
        ],
        gloo_interfaces: Vec::new(),
        secret: tandem::dist::JobSecret::derive(&[
            &std::env::var("TEST_SECRET").unwrap_or_else(|_| "test".into())
        ]),
    }
}

pub fn child_options() -> GroupOptions {
    compute_on_one_thread();
    let timeout = Duration::from_millis(env_usize("TEST_TIMEOUT_MS") as u64);
    options(
        env_usize("RANK"),
        env_usize("WORLD_SIZE"),
        env_usize("MASTER_PORT") as u16,
        timeout,
    )
}

/// Prints a rank's parameters as exact f32 bits on one `PARAMS` line, for the parent to compare.
pub fn print_params(values: &[f32]) {
    print_values("PARAMS", values);
}

/// The parameters a rank printed with [`print_params`] (the test harness may have printed
/// "test name ... " on the same line first).
pub fn parse_params(output: &str) -> Vec<f32> {
    parse_values("PARAMS", output)
}

/// The PPO settings of CleanRL's `ppo.py` (classic control), spelled out: the values the
/// hand-computed expectations of the learner tests were worked out with.
#[allow(dead_code)]
pub fn cleanrl_ppo() -> tandem_config::Ppo {
    tandem_config::Ppo {
        lr: 2.5e-4,
        anneal_lr: true,
        adam_eps: 1e-5,
        gamma: 0.99,
        gae_lambda: 0.95,
        advantages: tandem_config::Advantages::Gae,
        vtrace_rho_clip: 1.0,
        vtrace_c_clip: 1.0,
        epochs: 4,
        minibatches: 4,
        micro_batches: 1,
        normalize_advantages: tandem_config::AdvantageNorm::Batch,
        clip: 0.2,
        value_clip: Some(0.2),
        entropy_coef: 0.01,
        value_coef: 0.5,
        max_grad_norm: Some(0.5),
        target_kl: None,
    }
}

/// Stable-Baselines3's A2C settings, spelled out (see [`cleanrl_ppo`]).
#[allow(dead_code)]
pub fn sb3_a2c() -> tandem_config::A2c {
    tandem_config::A2c {
        lr: 7e-4,
        anneal_lr: false,
        gamma: 0.99,
        gae_lambda: None,
        entropy_coef: 0.0,
        value_coef: 0.5,
        max_grad_norm: Some(0.5),
        normalize_advantages: false,
        optimizer: tandem_config::Optimizer::Rmsprop,
        rmsprop_alpha: 0.99,
        optimizer_eps: 1e-5,
    }
}

/// A [`tandem::algo::Collective`] that passes everything to `inner` and keeps a copy of the
/// gradients `sync_gradients` leaves behind, so a test can compare the synchronised gradients
/// themselves: parameters after Adam steps and a gradient clip hardly depend on the gradient's
/// scale, so a DDP that summed instead of averaging would pass a comparison of parameters alone.
pub struct RecordGradients<'a> {
    pub inner: &'a mut dyn tandem::algo::Collective,
    /// One flat copy per `sync_gradients`, parameters in the order given.
    pub synced: Vec<Vec<f32>>,
}

impl<'a> RecordGradients<'a> {
    pub fn new(inner: &'a mut dyn tandem::algo::Collective) -> Self {
        RecordGradients {
            inner,
            synced: Vec::new(),
        }
    }

    /// Every recorded gradient back to back, for [`print_values`].
    pub fn all(&self) -> Vec<f32> {
        self.synced.concat()
    }
}

impl tandem::algo::Collective for RecordGradients<'_> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world_size(&self) -> usize {
        self.inner.world_size()
    }
    fn before_backward(&mut self) {
        self.inner.before_backward();
    }
    fn select_part(&mut self, part: usize) -> anyhow::Result<()> {
        self.inner.select_part(part)
    }
    fn sync_gradients(&mut self, params: &[tch::Tensor]) -> anyhow::Result<()> {
        self.inner.sync_gradients(params)?;
        let flat = params
            .iter()
            .flat_map(|p| Vec::<f32>::try_from(p.grad().flatten(0, -1)).unwrap())
            .collect();
        self.synced.push(flat);
        Ok(())
    }
    fn all_reduce_sum(&mut self, values: &mut [f64]) -> anyhow::Result<()> {
        self.inner.all_reduce_sum(values)
    }
    fn decide(&mut self, mine: bool) -> anyhow::Result<bool> {
        self.inner.decide(mine)
    }
    fn steps_locally(&self) -> bool {
        self.inner.steps_locally()
    }
    fn after_step(&mut self, params: &[tch::Tensor]) -> anyhow::Result<()> {
        self.inner.after_step(params)
    }
    fn take_sync_time(&mut self) -> std::time::Duration {
        self.inner.take_sync_time()
    }
}

/// Prints `values` as exact f32 bits on one line tagged `tag`, for the parent to parse back.
pub fn print_values(tag: &str, values: &[f32]) {
    let hex: Vec<String> = values
        .iter()
        .map(|v| format!("{:08x}", v.to_bits()))
        .collect();
    println!("{tag} {}", hex.join(","));
}

/// The values a child printed with [`print_values`] under `tag`.
pub fn parse_values(tag: &str, output: &str) -> Vec<f32> {
    let marker = format!("{tag} ");
    let (_, rest) = output
        .split_once(&marker)
        .unwrap_or_else(|| panic!("no {tag} in:\n{output}"));
    rest.lines()
        .next()
        .unwrap()
        .split(',')
        .map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap()))
        .collect()
}

/// Asserts that the gradients 2 ranks synchronised, step by step, are those 1 rank computes on
/// the whole batch: each step's largest difference at most `rel` of that step's largest
/// gradient. A sum over 2 ranks instead of the average is off by 100% of it.
pub fn assert_same_gradients(two_ranks: &[f32], one_rank: &[Vec<f32>], rel: f32) {
    let per_step = one_rank[0].len();
    assert_eq!(
        two_ranks.len(),
        per_step * one_rank.len(),
        "2 ranks synchronised {} gradient values, 1 rank {} steps of {per_step}",
        two_ranks.len(),
        one_rank.len()
    );
    for (step, (two, one)) in two_ranks.chunks(per_step).zip(one_rank).enumerate() {
        let scale = one.iter().fold(0f32, |m, g| m.max(g.abs()));
        assert!(scale > 0.0, "step {step}: the gradient is zero");
        let (worst, at) = two
            .iter()
            .zip(one)
            .map(|(a, b)| (a - b).abs())
            .enumerate()
            .fold(
                (0f32, 0),
                |(m, i), (j, d)| if d > m { (d, j) } else { (m, i) },
            );
        assert!(
            worst <= rel * scale,
            "step {step}: the synchronised gradient differs from 1 rank's by {worst} at element \
             {at} (2 ranks {}, 1 rank {}; largest gradient {scale}, tolerance {rel} of it)",
            two[at],
            one[at]
        );
    }
}

/// Runs `work` on every job on two threads (the machine's cores), results in job order: the
/// tests that train many tiny runs through the binary share it.
pub fn on_two_threads<J: Sync, R: Send>(jobs: &[J], work: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let next = std::sync::Mutex::new(0usize);
    let results: std::sync::Mutex<Vec<Option<R>>> =
        std::sync::Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(job) = jobs.get(i) else { break };
                    let result = work(job);
                    results.lock().unwrap()[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// `(step, value)` of every line of the run's scalars.jsonl that holds `tag`.
pub fn jsonl_scalars(run_dir: &std::path::Path, tag: &str) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(run_dir.join("scalars.jsonl")).unwrap();
    text.lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            Some((v["step"].as_u64()?, v[tag].as_f64()?))
        })
        .collect()
}

/// A number from the run's summary.json.
pub fn summary_number(run_dir: &std::path::Path, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    let at = text
        .find(&format!("\"{key}\": "))
        .unwrap_or_else(|| panic!("{key} not in {text}"));
    let rest = &text[at + key.len() + 4..];
    let end = rest.find([',', '}']).unwrap();
    rest[..end].trim().parse().ok()
}

/// Every tensor of the newest checkpoint of `run_dir` as bytes, by name, without the run's
/// bookkeeping (`meta.*`: episode counts, times).
pub fn checkpoint_tensors(
    run_dir: &std::path::Path,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    let ckpt = tandem::train::checkpoint::locate(run_dir).unwrap();
    tch::Tensor::load_multi(&ckpt)
        .unwrap()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("meta."))
        .map(|(n, t)| {
            let t = t.contiguous();
            let mut buf = vec![0u8; t.numel() * t.kind().elt_size_in_bytes()];
            t.copy_data_u8(&mut buf, t.numel());
            (n, buf)
        })
        .collect()
}

/// Minibatch plans of `epochs` epochs for a global batch of `2 * half` units (rows, or the
/// environments of recurrent batches) split over two ranks: each rank's own order (rank-local
/// indices, from samplers seeded `10 + u` and `20 + u`) cut into `minibatches`, and the
/// one-rank plan whose minibatch k is the union of the ranks' minibatches k.
pub fn two_rank_plans(
    u: usize,
    half: usize,
    minibatches: usize,
    epochs: usize,
) -> ([Vec<Vec<tch::Tensor>>; 2], Vec<Vec<tch::Tensor>>) {
    use tandem::algo::MinibatchSampler;
    let size = half / minibatches;
    let mut samplers = [
        MinibatchSampler::new(10 + u as u64),
        MinibatchSampler::new(20 + u as u64),
    ];
    let mut per_rank = [Vec::new(), Vec::new()];
    let mut whole = Vec::new();
    for _ in 0..epochs {
        let orders: Vec<Vec<i64>> = samplers.iter_mut().map(|s| s.permutation(half)).collect();
        let mut epoch = [Vec::new(), Vec::new()];
        let mut global_epoch = Vec::new();
        for k in 0..minibatches {
            let local: Vec<&[i64]> = orders
                .iter()
                .map(|o| &o[k * size..(k + 1) * size])
                .collect();
            let mut global = local[0].to_vec();
            global.extend(local[1].iter().map(|i| i + half as i64));
            global_epoch.push(tch::Tensor::from_slice(&global));
            for r in 0..2 {
                epoch[r].push(tch::Tensor::from_slice(local[r]));
            }
        }
        let [e0, e1] = epoch;
        per_rank[0].push(e0);
        per_rank[1].push(e1);
        whole.push(global_epoch);
    }
    (per_rank, whole)
}

/// Pids of the launcher's children (the workers).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|s| s.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// Whether process `pid` runs (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Polls `cond` until it holds, failing the test after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to process `pid`.
pub fn send_signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pids are this
    // test's own launcher and the workers it started (an exited worker's pid is not reused
    // while its unreaped parent, the launcher, lives).
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Kills a launcher and its workers.
pub fn kill_job(launcher: &mut Child) {
    for w in children_of(launcher.id()) {
        send_signal(w, libc::SIGKILL);
    }
    let _ = launcher.kill();
    let _ = launcher.wait();
}

/// Waits at most `limit` for `child`; one still running then is killed (with its workers) and
/// `None` returned, so a hang fails the test instead of blocking it.
pub fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_job(child);
    None
}

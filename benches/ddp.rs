//! DDP benchmark (issue 5): for the Nature-CNN actor-critic at batch 256 per rank, the time of one
//! PPO update on 1 and on 2 ranks and the share spent synchronising; bucketed gradient all-reduce
//! against one raw c10d all-reduce of the same bytes; end-to-end training throughput on 1 and 2
//! ranks. Everything is reported as ratios measured in the same run.
//!
//!     cargo bench --bench ddp
//!
//! Ranks are real processes: this binary re-runs itself with TANDEM_BENCH_ROLE set.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tandem::dist::{Backend, Ddp, GroupOptions, ProcessGroup, ReduceOp, SyncPolicy};
use tandem::nn::trainable_parameters_in_order;
use tandem::train::update_bench::{nature_model, time_ppo_updates};
use tch::{Device, Kind, Tensor};

const BATCH: i64 = 256;
const WARMUP: usize = 2;
const UPDATES: usize = 12;
/// Rounds of the update benchmark (see `main`).
const ROUNDS: usize = 3;

fn env_usize(name: &str) -> usize {
    std::env::var(name).unwrap().parse().unwrap()
}

fn connect() -> ProcessGroup {
    ProcessGroup::connect(&GroupOptions {
        rank: env_usize("RANK"),
        world_size: env_usize("WORLD_SIZE"),
        master_addr: "127.0.0.1".into(),
        master_port: env_usize("MASTER_PORT") as u16,
        rendezvous_timeout: Duration::from_secs(60),
        collective_timeout: Duration::from_secs(120),
        backend: Backend::Gloo,
        identity: vec![("bench".into(), "ddp".into())],
        gloo_interfaces: Vec::new(),
        secret: tandem::dist::JobSecret::derive(&["bench ddp"]),
    })
    .expect("rendezvous")
}

/// One rank of the update benchmark: prints seconds per update and sync seconds per update.
fn rank_update() {
    if std::env::var_os("BENCH_PIN_CORES").is_some() {
        // What `pin-cores #true` does in a worker: this rank's slice of the cores, before any
        // thread exists.
        tandem::launch::worker::pin_to_core_slice(env_usize("RANK"), env_usize("WORLD_SIZE"))
            .expect("pin-cores");
    }
    tch::set_num_threads(1);
    let pg = connect();
    let (t, pg) = time_ppo_updates(pg, atari_ppo(), Device::Cpu, BATCH, WARMUP, UPDATES).unwrap();
    // On CPU the batch is not copied: copy_s is the few microseconds of building the batch.
    println!("UPDATE {} {}", t.copy_s + t.update_s, t.sync_s);
    let _ = pg.shutdown(Duration::from_secs(30));
}

/// One rank of the all-reduce benchmark: bucketed gradients vs one raw all-reduce of the bytes,
/// both averaging.
fn rank_allreduce() {
    tch::set_num_threads(1);
    let pg = connect();
    let (vs, _) = nature_model(Device::Cpu).unwrap();
    let params = trainable_parameters_in_order(&vs);
    // Give every parameter a gradient to reduce.
    let total = params
        .iter()
        .map(|p| p.sum(Kind::Float))
        .fold(Tensor::zeros([], (Kind::Float, Device::Cpu)), |a, b| a + b);
    total.backward();
    let numel: i64 = params.iter().map(|p| p.numel() as i64).sum();
    let mut ddp = Ddp::new(
        pg,
        &params,
        SyncPolicy::Allreduce {
            bucket_mb: 25.0,
            compression: tandem_config::Compression::None,
        },
    )
    .unwrap();
    let mut raw = [Tensor::randn([numel], (Kind::Float, Device::Cpu))];
    let layout = ddp.group().verify_layout(&[&raw[0]]).unwrap();
    // Alternating rounds, medians: the two are measured under the same (shared-machine) load.
    // Each is timed from a barrier to the end of a barrier after it. A rank's wait for a
    // collective ends when its own part is done, up to a millisecond before the other rank's;
    // timed without barriers, that tail would be charged to whatever is measured next (for
    // the buckets, the first bucket's tail is charged to the second). The closing barrier
    // charges both sides their own tail plus one barrier's latency.
    let rounds = 60;
    let (mut bucketed, mut single) = (Vec::new(), Vec::new());
    for round in 0..rounds + 2 {
        ddp.group().barrier().unwrap();
        let t = Instant::now();
        ddp.sync_gradients(&params).unwrap();
        ddp.group().barrier().unwrap();
        let b = t.elapsed().as_secs_f64();
        ddp.group().barrier().unwrap();
        let t = Instant::now();
        // Averaging, as the gradient sync does (Gloo has no average: a sum, then a division).
        ddp.group()
            .all_reduce_verified(&layout, &mut raw, ReduceOp::Avg)
            .unwrap();
        ddp.group().barrier().unwrap();
        let s = t.elapsed().as_secs_f64();
        if round >= 2 {
            bucketed.push(b);
            single.push(s);
        }
    }
    // The latency of one tiny all-reduce: what a collective costs whatever its size.
    let mut tiny = [Tensor::zeros([1], (Kind::Float, Device::Cpu))];
    let tiny_layout = ddp.group().verify_layout(&[&tiny[0]]).unwrap();
    let mut latency = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        ddp.group()
            .all_reduce_verified(&tiny_layout, &mut tiny, ReduceOp::Sum)
            .unwrap();
        latency.push(t.elapsed().as_secs_f64());
    }
    println!(
        "ALLREDUCE {} {} {} {}",
        numel * 4,
        median(&mut bucketed),
        median(&mut single),
        median(&mut latency)
    );
    let _ = ddp.into_group().shutdown(Duration::from_secs(30));
}

/// One run of the update benchmark: the slowest rank's seconds per update, and the seconds per
/// update that the ranks waiting longest and least spent in collectives. The longest wait includes
/// the other rank's lag (load imbalance); the least is roughly the communication that backward
/// could not hide.
struct UpdateTimes {
    update: f64,
    sync_max: f64,
    sync_min: f64,
    ranks: usize,
}

impl UpdateTimes {
    fn of(outputs: &[String]) -> UpdateTimes {
        let rows: Vec<Vec<f64>> = outputs.iter().map(|o| numbers("UPDATE", o)).collect();
        UpdateTimes {
            update: rows.iter().map(|v| v[0]).fold(0.0, f64::max),
            sync_max: rows.iter().map(|v| v[1]).fold(0.0, f64::max),
            sync_min: rows.iter().map(|v| v[1]).fold(f64::INFINITY, f64::min),
            ranks: rows.len(),
        }
    }

    /// Samples per second relative to `base`.
    fn speedup_over(&self, base: &UpdateTimes) -> f64 {
        (self.ranks as f64 / self.update) / (base.ranks as f64 / base.update)
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn run_ranks(mode: &str, world: usize, pin_cores: bool) -> Vec<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let children: Vec<_> = (0..world)
        .map(|r| {
            Command::new(std::env::current_exe().unwrap())
                .env("TANDEM_BENCH_ROLE", mode)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("MASTER_PORT", port.to_string())
                .env("TORCH_CPP_LOG_LEVEL", "ERROR")
                .envs(pin_cores.then_some(("BENCH_PIN_CORES", "1")))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a {mode} rank failed");
            String::from_utf8_lossy(&out.stdout).to_string()
        })
        .collect()
}

fn numbers(line_prefix: &str, out: &str) -> Vec<f64> {
    let line = out
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .expect("result line");
    line.split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect()
}

/// Global environment steps per second of a short training run of `config` on `world` CPU ranks,
/// scaled weakly: each rank keeps the 1-rank share of environments and steps, so the per-rank
/// work is the same and the ratio shows what a second device adds.
fn training_throughput(config: &str, world: usize, pin_cores: bool) -> f64 {
    let dir = std::env::temp_dir().join(format!("tandem-bench-{}-{world}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let devices = vec!["cpu"; world].join(" ");
    let out = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args([
            "train",
            config,
            "--quiet",
            "--set",
            &format!("devices={devices}"),
            "--set",
            "threads=1",
        ])
        .args(["--set", &format!("env.envs={}", 16 * world)])
        .args(["--set", &format!("pin-cores=#{pin_cores}")])
        .args(["--set", &format!("train.max-steps={}", 60_000 * world)])
        .arg("--run-dir")
        .arg(&dir)
        .env("TORCH_CPP_LOG_LEVEL", "ERROR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let at = summary.find("\"steps_per_second\": ").unwrap() + "\"steps_per_second\": ".len();
    let end = summary[at..].find([',', '}']).unwrap();
    let sps = summary[at..at + end].trim().parse().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    sps
}

fn main() {
    match std::env::var("TANDEM_BENCH_ROLE").as_deref() {
        Ok("update") => return rank_update(),
        Ok("allreduce") => return rank_allreduce(),
        _ => {}
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "DDP benchmark: Nature-CNN actor-critic, batch {BATCH} per rank, 1 libtorch thread per rank"
    );
    // Rounds of (1 rank, 2 ranks, 2 pinned ranks), each ratio taken within its round: the
    // machine's speed drifts by several percent between minutes, and a ratio of neighbours
    // cancels most of that. Medians over the rounds are reported.
    let mut rows: Vec<[UpdateTimes; 3]> = Vec::new();
    for _ in 0..ROUNDS {
        let one = UpdateTimes::of(&run_ranks("update", 1, false));
        let two = UpdateTimes::of(&run_ranks("update", 2, false));
        let pinned = UpdateTimes::of(&run_ranks("update", 2, true));
        rows.push([one, two, pinned]);
    }
    let t1 = median(&mut rows.iter().map(|r| r[0].update).collect::<Vec<_>>());
    println!(
        "  one update, 1 rank: {:.1} ms ({:.0} samples/s); medians of {ROUNDS} rounds",
        t1 * 1e3,
        BATCH as f64 / t1
    );
    for (column, label) in [(1, "2 ranks"), (2, "2 ranks, pin-cores")] {
        let pick = |f: &dyn Fn(&[UpdateTimes; 3]) -> f64| {
            median(&mut rows.iter().map(f).collect::<Vec<_>>())
        };
        let t2 = pick(&|r| r[column].update);
        let speedups: Vec<String> = rows
            .iter()
            .map(|r| format!("{:.2}", r[column].speedup_over(&r[0])))
            .collect();
        println!(
            "  one update, {label}: {:.1} ms ({:.0} samples/s), of which sync {:.1} ms (rank that waited least: {:.1} ms)",
            t2 * 1e3,
            2.0 * BATCH as f64 / t2,
            pick(&|r| r[column].sync_max) * 1e3,
            pick(&|r| r[column].sync_min) * 1e3,
        );
        println!(
            "    samples/s, {label} / 1 rank: {:.2}x (rounds: {}; target >= 1.9x); sync share {:.1}% (rank that waited least {:.1}%; target <= 5%)",
            pick(&|r| r[column].speedup_over(&r[0])),
            speedups.join(", "),
            100.0 * pick(&|r| r[column].sync_max / r[column].update),
            100.0 * pick(&|r| r[column].sync_min / r[column].update),
        );
    }

    let ar: Vec<Vec<f64>> = run_ranks("allreduce", 2, false)
        .iter()
        .map(|o| numbers("ALLREDUCE", o))
        .collect();
    let bytes = ar[0][0];
    let bucketed = ar.iter().map(|v| v[1]).fold(0.0, f64::max);
    let single = ar.iter().map(|v| v[2]).fold(0.0, f64::max);
    let latency = ar.iter().map(|v| v[3]).fold(0.0, f64::max);
    println!(
        "  averaging all-reduce of {:.1} MB of gradients: bucketed {:.0} MB/s, one raw all-reduce {:.0} MB/s: {:.0}% (target >= 90%)",
        bytes / 1e6,
        bytes / bucketed / 1e6,
        bytes / single / 1e6,
        100.0 * single / bucketed
    );
    println!(
        "  latency of one 4-byte all-reduce (median of 200): {:.3} ms",
        latency * 1e3
    );

    let config = format!(
        "{}/tests/configs/ppo-minatar-breakout.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    let e1 = training_throughput(&config, 1, false);
    let e2 = training_throughput(&config, 2, false);
    let e2_pinned = training_throughput(&config, 2, true);
    println!(
        "  training PPO MinAtar Breakout, 16 envs x 64 steps per rank: 1 rank {e1:.0} steps/s, 2 ranks {e2:.0} steps/s: {:.2}x; with pin-cores {e2_pinned:.0} steps/s: {:.2}x (target >= 1.9x)",
        e2 / e1,
        e2_pinned / e1
    );
}

/// The PPO settings of the Atari benchmark experiment (`scripts/bench/atari-breakout-ppo.kdl`).
fn atari_ppo() -> tandem_config::Ppo {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/bench/atari-breakout-ppo.kdl");
    let resolved = tandem_config::resolve(&tandem_config::Source::Path(path), &[])
        .unwrap_or_else(|d| panic!("{}", d.render(false)));
    match resolved.experiment.algorithm {
        tandem_config::Algorithm::Ppo(ppo) => ppo,
        other => panic!("the Atari benchmark trains {}, not ppo", other.name()),
    }
}

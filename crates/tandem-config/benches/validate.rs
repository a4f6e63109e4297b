//! How long `tandem validate` takes on a typical experiment (breakout.kdl with
//! its two includes), next to a baseline measured in the same run: parsing the
//! same three files' text with the `kdl` crate alone. Run with
//! `cargo bench -p tandem-config --bench validate`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tandem_config::{Source, canonical_kdl, config_hash, parse_canonical, resolve};

/// A named operation to time.
type Op<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// Median time per call of each operation. The operations take turns, batch by
/// batch, so a change in machine load (the cores are shared) hits all alike.
fn measure(ops: &mut [Op<'_>]) -> Vec<Duration> {
    for (_, op) in ops.iter_mut() {
        for _ in 0..20 {
            op();
        }
    }
    let per_batch = 50;
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); ops.len()];
    for _ in 0..15 {
        for (i, (_, op)) in ops.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..per_batch {
                op();
            }
            samples[i].push(start.elapsed() / per_batch);
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            s[s.len() / 2]
        })
        .collect()
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let main_file: PathBuf = dir.join("breakout.kdl");
    let texts: Vec<String> = [
        main_file.clone(),
        dir.join("include/deepmind-atari.kdl"),
        dir.join("include/cpu-logging.kdl"),
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).expect("example experiment"))
    .collect();
    let source = Source::Path(main_file);
    let resolved = resolve(&source, &[]).expect("breakout.kdl is valid");
    let canonical = canonical_kdl(&resolved.experiment);

    let mut ops: Vec<Op<'_>> = vec![
        (
            "kdl parse of the 3 files (baseline)",
            Box::new(|| {
                for text in &texts {
                    black_box(kdl::KdlDocument::parse(black_box(text)).expect("parses"));
                }
            }),
        ),
        (
            "validate = resolve(breakout.kdl), files read",
            Box::new(|| {
                black_box(resolve(black_box(&source), &[]).expect("valid"));
            }),
        ),
        (
            "canonical_kdl + config_hash",
            Box::new(|| {
                black_box(config_hash(black_box(&resolved.experiment)));
            }),
        ),
        (
            "parse_canonical (what a worker runs)",
            Box::new(|| {
                black_box(parse_canonical(black_box(&canonical)).expect("canonical"));
            }),
        ),
    ];
    let times = measure(&mut ops);
    let baseline = times[0];
    let rows: Vec<(&str, Duration)> = ops
        .iter()
        .map(|(n, _)| *n)
        .zip(times.iter().copied())
        .collect();
    println!(
        "{:<48} {:>12} {:>10}",
        "operation", "time/call", "x baseline"
    );
    for (name, time) in rows {
        println!(
            "{:<48} {:>9.1} µs {:>9.2}x",
            name,
            time.as_secs_f64() * 1e6,
            time.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}

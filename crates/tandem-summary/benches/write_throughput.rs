//! Costs of tandem-summary's choices, each as a ratio to a baseline measured
//! in the same run (absolute times depend on the machine):
//! - one `write` per logged scalar event vs. the same records through a
//!   64 KiB `BufWriter` (what buffering would have saved);
//! - all of a step's scalars in one event (`scalars`) vs. one event each;
//! - a histogram of a 1M-parameter tensor vs. one summing pass over it;
//! - a GIF of many-colour frames (quantised) vs. game-like frames (exact palette).
//!
//! Run: `cargo bench -p tandem-summary --bench write_throughput`

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use prost::Message;
use tandem_summary::proto::{Event, Summary, event, summary};
use tandem_summary::record::append_record;
use tandem_summary::{SummaryWriter, encode_gif};

const SCALAR_EVENTS: i64 = 20_000;
const TAGS_PER_STEP: usize = 20;
const PARAMETERS: usize = 1_000_000;
const GIF_FRAMES: usize = 40;

fn main() {
    let dir = std::env::temp_dir().join(format!("tandem-summary-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let per_write = seconds(|| {
        let mut writer = SummaryWriter::create(&dir.join("per-write")).unwrap();
        for step in 0..SCALAR_EVENTS {
            writer
                .scalar("loss/policy", step, step as f64 * 0.5)
                .unwrap();
        }
    });
    let buffered = seconds(|| buffered_scalars(&dir.join("buffered.tfevents")));
    report(
        "scalar events, one write each vs BufWriter",
        per_write,
        buffered,
        SCALAR_EVENTS,
    );

    let tags: Vec<String> = (0..TAGS_PER_STEP)
        .map(|i| format!("train/metric_{i}"))
        .collect();
    let steps = SCALAR_EVENTS / TAGS_PER_STEP as i64;
    let one_event_per_tag = seconds(|| {
        let mut writer = SummaryWriter::create(&dir.join("per-tag")).unwrap();
        for step in 0..steps {
            for tag in &tags {
                writer.scalar(tag, step, 1.0).unwrap();
            }
        }
    });
    let one_event_per_step = seconds(|| {
        let mut writer = SummaryWriter::create(&dir.join("per-step")).unwrap();
        for step in 0..steps {
            let values: Vec<(&str, f64)> = tags.iter().map(|t| (t.as_str(), 1.0)).collect();
            writer.scalars(step, &values).unwrap();
        }
    });
    report(
        "20 scalars per step, one event per tag vs one per step",
        one_event_per_tag,
        one_event_per_step,
        SCALAR_EVENTS,
    );

    let parameters: Vec<f32> = (0..PARAMETERS)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let mut writer = SummaryWriter::create(&dir.join("histogram")).unwrap();
    let histogram = seconds(|| writer.histogram("params/w", 1, &parameters).unwrap());
    let summing = seconds(|| {
        black_box(parameters.iter().map(|&v| f64::from(v)).sum::<f64>());
    });
    report(
        "histogram of 1M values vs one summing pass",
        histogram,
        summing,
        1,
    );

    let (width, height) = (160u16, 210u16);
    let pixels = usize::from(width) * usize::from(height);
    let game_like: Vec<Vec<u8>> = (0..GIF_FRAMES)
        .map(|f| (0..pixels).flat_map(|i| atari_like_colour(i, f)).collect())
        .collect();
    let many_colours: Vec<Vec<u8>> = (0..GIF_FRAMES)
        .map(|f| {
            (0..pixels)
                .flat_map(|i| [(i % 256) as u8, (i / 256 + f) as u8, (i / 97) as u8])
                .collect()
        })
        .collect();
    let quantised = seconds(|| {
        std::hint::black_box(encode_gif(width, height, &many_colours, 4).unwrap());
    });
    let exact = seconds(|| {
        std::hint::black_box(encode_gif(width, height, &game_like, 4).unwrap());
    });
    report(
        "GIF 160x210, quantised vs exact palette",
        quantised,
        exact,
        GIF_FRAMES as i64,
    );

    std::fs::remove_dir_all(&dir).unwrap();
}

/// At most 128 colours, like an Atari screen.
fn atari_like_colour(pixel: usize, frame: usize) -> [u8; 3] {
    let index = ((pixel / 8 + frame) % 128) as u8;
    [index.wrapping_mul(2), index.wrapping_mul(37), 255 - index]
}

fn buffered_scalars(path: &PathBuf) {
    let file = std::fs::File::create(path).unwrap();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
    let mut record = Vec::new();
    for step in 0..SCALAR_EVENTS {
        let event = Event {
            wall_time: 0.0,
            step,
            what: Some(event::What::Summary(Summary {
                value: vec![summary::Value {
                    tag: "loss/policy".into(),
                    metadata: None,
                    kind: Some(summary::value::Kind::SimpleValue(step as f32 * 0.5)),
                }],
            })),
        };
        record.clear();
        append_record(&mut record, &event.encode_to_vec());
        out.write_all(&record).unwrap();
    }
    out.flush().unwrap();
}

fn seconds(mut work: impl FnMut()) -> f64 {
    // One warm-up run so page cache and allocator state do not favour either side.
    work();
    let started = Instant::now();
    work();
    started.elapsed().as_secs_f64()
}

fn report(what: &str, measured: f64, baseline: f64, items: i64) {
    println!(
        "{what}: ratio {:.2} ({:.3} ms vs {:.3} ms; {:.2} us vs {:.2} us per item)",
        measured / baseline,
        measured * 1e3,
        baseline * 1e3,
        measured * 1e6 / items as f64,
        baseline * 1e6 / items as f64,
    );
}

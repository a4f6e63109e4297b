//! Event files written by SummaryWriter read back with the right tags, steps
//! and values: always by decoding them in Rust, and with TensorBoard's own
//! readers when the venv from scripts/tb-read-setup.sh exists.

mod common;

use std::io::ErrorKind;
use std::path::Path;

use common::{decode_hex, decode_png, only_event_file, scratch_dir, tensorboard_reading};
use serde_json::Value;
use tandem_summary::proto::{event, summary};
use tandem_summary::reader::{read_event_file, scalars};
use tandem_summary::{BUCKET_COUNT, FILE_VERSION, SummaryWriter};

const LOSSES: [(i64, f64); 4] = [(0, 1.5), (10, 0.1), (20, -3.25e-4), (30, 12345.678)];
const WEIGHTS_STEP_1: [f32; 8] = [-1.0, -0.5, 0.0, 0.25, 0.25, 0.5, 0.75, 2.0];
const CONFIG_TEXT: &str = "experiment \"breakout\" {\n  seed 7 // ünïcode ✓\n}";

/// A 3-high, 5-wide RGB image: non-square, so swapped dimensions would show.
fn rgb_image() -> Vec<u8> {
    (0..3 * 5)
        .flat_map(|i| [i as u8 * 10, 255 - i as u8, (i * i) as u8])
        .collect()
}

fn grey_image() -> Vec<u8> {
    (0..4 * 2).map(|i| i as u8 * 30).collect()
}

fn write_sample_run(log_dir: &Path) {
    let mut writer = SummaryWriter::create(log_dir).unwrap();
    writer.text("config", 0, CONFIG_TEXT).unwrap();
    for (step, value) in LOSSES {
        writer.scalar("loss/policy", step, value).unwrap();
    }
    writer
        .scalars(5, &[("perf/sps", 1200.0), ("perf/learn_s", 0.5)])
        .unwrap();
    writer.histogram("params/w", 1, &WEIGHTS_STEP_1).unwrap();
    writer.histogram("params/w", 2, &[3.0; 5]).unwrap();
    writer.image("frame/rgb", 7, 3, 5, 3, &rgb_image()).unwrap();
    writer
        .image("frame/grey", 7, 4, 2, 1, &grey_image())
        .unwrap();
    writer.close().unwrap();
}

#[test]
fn rust_decoder_reads_every_value_back() {
    let log_dir = scratch_dir("rust-decoder");
    write_sample_run(&log_dir);
    let path = only_event_file(&log_dir);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("events.out.tfevents."), "{name}");
    assert!(
        name.ends_with(&format!(".{}.tandem", std::process::id())),
        "{name}"
    );

    let file = read_event_file(&path).unwrap();
    assert_eq!(file.incomplete_tail, 0);
    assert_eq!(
        file.events[0].what,
        Some(event::What::FileVersion(FILE_VERSION.into()))
    );
    assert!(
        file.events[0].wall_time > 1.6e9,
        "wall time is epoch seconds"
    );

    let points = scalars(&file.events);
    let losses: Vec<(i64, f32)> = points
        .iter()
        .filter(|p| p.tag == "loss/policy")
        .map(|p| (p.step, p.value))
        .collect();
    let expected: Vec<(i64, f32)> = LOSSES.iter().map(|&(s, v)| (s, v as f32)).collect();
    assert_eq!(losses, expected);
    let perf: Vec<(&str, i64, f32)> = points
        .iter()
        .filter(|p| p.tag.starts_with("perf/"))
        .map(|p| (p.tag.as_str(), p.step, p.value))
        .collect();
    assert_eq!(
        perf,
        vec![("perf/sps", 5, 1200.0), ("perf/learn_s", 5, 0.5)]
    );

    let mut histograms = Vec::new();
    let mut images = Vec::new();
    let mut texts = Vec::new();
    for event in &file.events {
        let Some(event::What::Summary(summary)) = &event.what else {
            continue;
        };
        for value in &summary.value {
            match &value.kind {
                Some(summary::value::Kind::Histo(h)) => histograms.push((event.step, h.clone())),
                Some(summary::value::Kind::Image(i)) => {
                    images.push((value.tag.clone(), event.step, i.clone()))
                }
                Some(summary::value::Kind::Tensor(t)) => {
                    let plugin = &value
                        .metadata
                        .as_ref()
                        .unwrap()
                        .plugin_data
                        .as_ref()
                        .unwrap();
                    texts.push((
                        value.tag.clone(),
                        plugin.plugin_name.clone(),
                        t.string_val.clone(),
                    ))
                }
                _ => {}
            }
        }
    }

    assert_eq!(histograms.len(), 2);
    let (step, first) = &histograms[0];
    assert_eq!(*step, 1);
    assert_eq!((first.min, first.max, first.num), (-1.0, 2.0, 8.0));
    assert_eq!(first.sum, 2.25);
    assert_eq!(
        first.sum_squares,
        1.0 + 0.25 + 0.0 + 0.0625 * 2.0 + 0.25 + 0.5625 + 4.0
    );
    assert_eq!(first.bucket.len(), BUCKET_COUNT);
    assert_eq!(first.bucket.iter().sum::<f64>(), 8.0);
    assert_eq!(histograms[1].1.bucket, vec![5.0]);

    assert_eq!(images.len(), 2);
    let (tag, step, rgb) = &images[0];
    assert_eq!((tag.as_str(), *step), ("frame/rgb", 7));
    assert_eq!((rgb.height, rgb.width, rgb.colorspace), (3, 5, 3));
    assert_eq!(
        decode_png(&rgb.encoded_image_string),
        (5, 3, 3, rgb_image())
    );
    let (_, _, grey) = &images[1];
    assert_eq!((grey.height, grey.width, grey.colorspace), (4, 2, 1));
    assert_eq!(
        decode_png(&grey.encoded_image_string),
        (2, 4, 1, grey_image())
    );

    assert_eq!(
        texts,
        vec![(
            "config".to_string(),
            "text".to_string(),
            vec![CONFIG_TEXT.as_bytes().to_vec()]
        )]
    );
}

#[test]
fn tensorboard_reads_every_value_back() {
    let log_dir = scratch_dir("tensorboard-reader");
    write_sample_run(&log_dir);
    let Some(reading) = tensorboard_reading(&log_dir) else {
        return;
    };
    let raw = &reading["accumulator"];
    let shown = &reading["provider"];
    // EventAccumulator parses "brain.Event:2" into its version number.
    assert_eq!(raw["file_version"], 2.0);

    let expected_losses: Vec<(i64, f32)> = LOSSES.iter().map(|&(s, v)| (s, v as f32)).collect();
    for view in [&raw["scalars"], &shown["scalars"]] {
        assert_eq!(step_values(&view["loss/policy"]), expected_losses, "{view}");
        assert_eq!(step_values(&view["perf/sps"]), vec![(5, 1200.0)]);
        assert_eq!(step_values(&view["perf/learn_s"]), vec![(5, 0.5)]);
    }

    let histogram = &raw["histograms"]["params/w"][0];
    assert_eq!(histogram["step"], 1);
    assert_eq!(histogram["min"], -1.0);
    assert_eq!(histogram["max"], 2.0);
    assert_eq!(histogram["num"], 8.0);
    assert_eq!(histogram["sum"], 2.25);
    // What the histograms dashboard draws: [left, right, count] buckets that
    // tile [min, max] and hold every value.
    let buckets = shown["histograms"]["params/w"][0]["buckets"]
        .as_array()
        .unwrap();
    assert_eq!(shown["histograms"]["params/w"][0]["step"], 1);
    assert_eq!(buckets[0][0], -1.0);
    assert_eq!(buckets.last().unwrap()[1], 2.0);
    let counted: f64 = buckets.iter().map(|b| b[2].as_f64().unwrap()).sum();
    assert_eq!(counted, 8.0);
    for pair in buckets.windows(2) {
        assert_eq!(pair[0][1], pair[1][0], "buckets are contiguous");
    }
    let constant = &shown["histograms"]["params/w"][1];
    assert_eq!(constant["step"], 2);
    assert_eq!(constant["buckets"], serde_json::json!([[3.0, 3.0, 5.0]]));

    for view in [&raw["images"], &shown["images"]] {
        let rgb = &view["frame/rgb"][0];
        assert_eq!(
            (
                rgb["step"].as_i64(),
                rgb["width"].as_i64(),
                rgb["height"].as_i64()
            ),
            (Some(7), Some(5), Some(3))
        );
        let png = decode_hex(rgb["png_hex"].as_str().unwrap());
        assert_eq!(decode_png(&png), (5, 3, 3, rgb_image()));
        let grey = &view["frame/grey"][0];
        let png = decode_hex(grey["png_hex"].as_str().unwrap());
        assert_eq!(decode_png(&png), (2, 4, 1, grey_image()));
    }

    assert_eq!(raw["plugins"]["config"], "text");
    assert_eq!(
        raw["tensors"]["config"],
        serde_json::json!([[0, CONFIG_TEXT]])
    );
    assert_eq!(
        shown["text"]["config"],
        serde_json::json!([[0, CONFIG_TEXT]])
    );
}

#[test]
fn bad_input_is_an_error_and_leaves_the_file_readable() {
    let log_dir = scratch_dir("bad-input");
    let mut writer = SummaryWriter::create(&log_dir).unwrap();
    writer.scalar("before", 1, 1.0).unwrap();

    let invalid = |result: std::io::Result<()>| {
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        error.to_string()
    };
    assert!(invalid(writer.scalar("", 1, 1.0)).contains("empty tag"));
    assert!(invalid(writer.scalars(1, &[("ok", 1.0), ("", 2.0)])).contains("empty tag"));
    let message = invalid(writer.histogram("params/b", 3, &[0.0, f32::NAN]));
    assert!(
        message.contains("'params/b'") && message.contains("index 1 is NaN"),
        "{message}"
    );
    assert!(invalid(writer.histogram("params/b", 3, &[])).contains("no values"));
    let message = invalid(writer.image("frame", 4, 2, 2, 3, &[0; 11]));
    assert!(
        message.contains("'frame'") && message.contains("needs 12"),
        "{message}"
    );
    assert!(invalid(writer.image("frame", 4, 2, 2, 5, &[0; 20])).contains("5 channels"));
    assert!(invalid(writer.image("frame", 4, 0, 2, 1, &[])).contains("no pixels"));
    let message = invalid(writer.animation("video", 4, 2, 2, b"\x89PNG".to_vec()));
    assert!(
        message.contains("'video'") && message.contains("not a GIF"),
        "{message}"
    );
    assert!(invalid(writer.text("", 0, "x")).contains("empty tag"));

    writer.scalar("after", 2, 2.0).unwrap();
    let path = writer.path().to_path_buf();
    drop(writer);
    let file = read_event_file(&path).unwrap();
    assert_eq!(file.incomplete_tail, 0);
    let tags: Vec<String> = scalars(&file.events).into_iter().map(|p| p.tag).collect();
    assert_eq!(tags, ["before", "after"]);
}

#[test]
fn non_finite_scalars_are_kept_as_they_are() {
    let log_dir = scratch_dir("non-finite");
    let mut writer = SummaryWriter::create(&log_dir).unwrap();
    writer.scalar("loss", 1, f64::NAN).unwrap();
    writer.scalar("loss", 2, f64::INFINITY).unwrap();
    let file = read_event_file(writer.path()).unwrap();
    let values: Vec<f32> = scalars(&file.events).iter().map(|p| p.value).collect();
    assert!(values[0].is_nan());
    assert_eq!(values[1], f32::INFINITY);
}

#[test]
fn two_writers_in_one_directory_get_separate_files() {
    let log_dir = scratch_dir("two-writers");
    let mut first = SummaryWriter::create(&log_dir).unwrap();
    let mut second = SummaryWriter::create(&log_dir).unwrap();
    assert_ne!(first.path(), second.path());
    first.scalar("a", 1, 1.0).unwrap();
    second.scalar("b", 1, 2.0).unwrap();
    first.flush().unwrap();
    second.flush().unwrap();
    assert_eq!(
        scalars(&read_event_file(first.path()).unwrap().events)[0].tag,
        "a"
    );
    assert_eq!(
        scalars(&read_event_file(second.path()).unwrap().events)[0].tag,
        "b"
    );
}

#[test]
fn unwritable_log_dir_is_an_error_naming_it() {
    let log_dir = scratch_dir("unwritable");
    let blocker = log_dir.join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let error = SummaryWriter::create(&blocker.join("run"))
        .err()
        .expect("creation fails");
    assert!(error.to_string().contains("a-file"), "{error}");
}

fn step_values(series: &Value) -> Vec<(i64, f32)> {
    series
        .as_array()
        .unwrap_or_else(|| panic!("not a series: {series}"))
        .iter()
        .map(|point| {
            (
                point[0].as_i64().unwrap(),
                point[1].as_f64().unwrap() as f32,
            )
        })
        .collect()
}

#[test]
fn background_thread_syncs_without_further_writes() {
    let log_dir = scratch_dir("background-sync");
    let mut writer =
        SummaryWriter::create_with_sync_interval(&log_dir, std::time::Duration::from_millis(20))
            .unwrap();
    writer.scalar("only", 1, 1.0).unwrap();
    let file_len = std::fs::metadata(writer.path()).unwrap().len();
    // No more writes or flushes: only the background thread can sync now.
    // The deadline is generous; it only bounds a failing run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while writer.synced_len() < file_len && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(writer.synced_len(), file_len);
}

#[test]
fn flush_syncs_everything_written() {
    let log_dir = scratch_dir("flush");
    let mut writer =
        SummaryWriter::create_with_sync_interval(&log_dir, std::time::Duration::from_secs(3600))
            .unwrap();
    writer.scalar("x", 1, 1.0).unwrap();
    writer.flush().unwrap();
    assert_eq!(
        writer.synced_len(),
        std::fs::metadata(writer.path()).unwrap().len()
    );
}

#[test]
fn a_zero_sync_interval_is_rejected() {
    let log_dir = scratch_dir("zero-interval");
    let error = SummaryWriter::create_with_sync_interval(&log_dir, std::time::Duration::ZERO)
        .err()
        .expect("a zero interval is refused");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("sync interval"), "{error}");
}

/// An animation is stored as the image value TensorBoard's image plugin serves: the GIF's
/// bytes as they were given, with its size.
#[test]
fn an_animation_is_an_image_holding_the_gif() {
    let log_dir = scratch_dir("animation");
    let mut writer = SummaryWriter::create(&log_dir).unwrap();
    let frames = vec![vec![0u8; 5 * 3 * 3], vec![255u8; 5 * 3 * 3]];
    let gif = tandem_summary::encode_gif(5, 3, &frames, 4).unwrap();
    writer
        .animation("eval/video", 9, 3, 5, gif.clone())
        .unwrap();
    let path = writer.path().to_path_buf();
    drop(writer);
    let file = read_event_file(&path).unwrap();
    let images: Vec<(i64, summary::Image)> = file
        .events
        .iter()
        .filter_map(|e| match &e.what {
            Some(event::What::Summary(s)) => Some((e.step, s.value.first()?.kind.clone()?)),
            _ => None,
        })
        .filter_map(|(step, kind)| match kind {
            summary::value::Kind::Image(i) => Some((step, i)),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 1);
    let (step, image) = &images[0];
    assert_eq!((*step, image.height, image.width), (9, 3, 5));
    assert_eq!(image.encoded_image_string, gif);
}

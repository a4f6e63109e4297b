//! [`SummaryWriter`]: appends TensorBoard events to one event file.
//!
//! Durability model (why it is shaped this way):
//! - Every event is framed in memory and handed to the kernel with a single
//!   `write` on an `O_APPEND` descriptor as soon as it is logged. Nothing is
//!   held in user space, so a process that panics, calls `exit`, or is killed
//!   with SIGKILL loses no logged event, and TensorBoard sees each one at once.
//! - Because a record is written whole, the file always ends at a record
//!   boundary except while a `write` is in flight; if a write fails part way
//!   (disk full), the file is truncated back to the last whole record.
//! - `fsync` (which only matters if the machine itself goes down) runs on a
//!   small background thread at most every [`DEFAULT_SYNC_INTERVAL`] while
//!   there are unsynced events, so the trainer thread never waits on the disk
//!   and events are durable within a few seconds even when logging stops.
//!   [`SummaryWriter::flush`], [`SummaryWriter::close`] and `Drop` sync at once.
//! - Errors from the background sync are kept and returned by the next call,
//!   which then does nothing else.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use crate::histogram::histogram_of;
use crate::proto::{
    DT_STRING, DataClass, Event, PluginData, Summary, SummaryMetadata, TensorProto,
    TensorShapeProto, event, summary,
};
use crate::record::append_record;

/// How long events may sit in the page cache before the background thread
/// `fsync`s them.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(2);

/// The `file_version` TensorBoard expects in the first record.
pub const FILE_VERSION: &str = "brain.Event:2";

/// Writes one TensorBoard event file in a log directory. Only one process
/// (rank 0 in tandem) should write a given run's summaries.
pub struct SummaryWriter {
    shared: Arc<Shared>,
    path: PathBuf,
    /// File length after the last whole record, to cut back to on a failed write.
    committed_len: u64,
    /// Set if a partial record could not be cut off: records appended after
    /// it would be unreadable, so no more are written.
    partial_record_stuck: bool,
    syncer: Option<JoinHandle<()>>,
    record: Vec<u8>,
}

struct Shared {
    file: File,
    state: Mutex<SyncState>,
    wake: Condvar,
}

#[derive(Default)]
struct SyncState {
    /// File length after the last record written.
    written_len: u64,
    /// File length known to be on disk (covered by a completed sync).
    synced_len: u64,
    closing: bool,
    error: Option<io::Error>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, SyncState> {
        // The guarded data stays consistent even if a holder panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SummaryWriter {
    /// Creates `log_dir` if needed and a new event file in it named
    /// `events.out.tfevents.<secs>.<host>.<pid>.tandem` (with a `.N` suffix if
    /// that name is taken), whose first record is the file version.
    pub fn create(log_dir: &Path) -> io::Result<Self> {
        Self::create_with_sync_interval(log_dir, DEFAULT_SYNC_INTERVAL)
    }

    /// As [`create`](Self::create), with the background `fsync` at most every
    /// `sync_interval` instead of [`DEFAULT_SYNC_INTERVAL`]. A zero interval
    /// is an `InvalidInput` error (it would keep a core busy syncing).
    pub fn create_with_sync_interval(log_dir: &Path, sync_interval: Duration) -> io::Result<Self> {
        if sync_interval.is_zero() {
            return Err(invalid_input(
                "the event file sync interval must be longer than zero".into(),
            ));
        }
        std::fs::create_dir_all(log_dir).map_err(|error| {
            with_context(
                error,
                format!("creating log directory {}", log_dir.display()),
            )
        })?;
        let (file, path) = create_event_file(log_dir)?;
        // Make the new directory entry itself durable; a failure here only
        // weakens crash-of-the-machine guarantees, so it is not fatal.
        if let Ok(dir) = File::open(log_dir) {
            let _ = dir.sync_all();
        }
        let shared = Arc::new(Shared {
            file,
            state: Mutex::new(SyncState::default()),
            wake: Condvar::new(),
        });
        let syncer_shared = Arc::clone(&shared);
        let syncer = std::thread::Builder::new()
            .name("tandem-summary-sync".into())
            .spawn(move || sync_periodically(&syncer_shared, sync_interval))
            .map_err(|error| with_context(error, "starting the event file sync thread".into()))?;
        let mut writer = SummaryWriter {
            shared,
            path,
            committed_len: 0,
            partial_record_stuck: false,
            syncer: Some(syncer),
            record: Vec::new(),
        };
        writer.write_event(&Event {
            wall_time: now_seconds(),
            step: 0,
            what: Some(event::What::FileVersion(FILE_VERSION.into())),
        })?;
        Ok(writer)
    }

    /// The event file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Logs a scalar. TensorBoard stores scalars as `f32`, so `value` is
    /// rounded to `f32`; NaN and infinities are written as they are (TensorBoard
    /// shows them), since a diverging loss is worth seeing.
    pub fn scalar(&mut self, tag: &str, step: i64, value: f64) -> io::Result<()> {
        self.scalars(step, &[(tag, value)])
    }

    /// Logs several scalars at one step in a single event (one record, one
    /// write), as [`scalar`](Self::scalar) would each of them.
    pub fn scalars(&mut self, step: i64, values: &[(&str, f64)]) -> io::Result<()> {
        let mut summary_values = Vec::with_capacity(values.len());
        for &(tag, value) in values {
            check_tag(tag, "scalar")?;
            summary_values.push(summary::Value {
                tag: tag.into(),
                metadata: None,
                kind: Some(summary::value::Kind::SimpleValue(value as f32)),
            });
        }
        self.write_summary(step, summary_values)
    }

    /// Logs a histogram of `values` (30 equal-width buckets over their range,
    /// exact min/max/sum/sum of squares). Empty input or a NaN or infinite value
    /// is an `InvalidInput` error naming the tag and the offending index.
    pub fn histogram(&mut self, tag: &str, step: i64, values: &[f32]) -> io::Result<()> {
        check_tag(tag, "histogram")?;
        let histogram = histogram_of(values)
            .map_err(|error| invalid_input(format!("histogram '{tag}' at step {step}: {error}")))?;
        self.write_summary(
            step,
            vec![summary::Value {
                tag: tag.into(),
                metadata: None,
                kind: Some(summary::value::Kind::Histo(histogram)),
            }],
        )
    }

    /// Logs an image given as row-major 8-bit `pixels`, `channels` per pixel
    /// (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA), stored PNG-encoded.
    pub fn image(
        &mut self,
        tag: &str,
        step: i64,
        height: u32,
        width: u32,
        channels: u8,
        pixels: &[u8],
    ) -> io::Result<()> {
        check_tag(tag, "image")?;
        let encoded = encode_png(height, width, channels, pixels)
            .map_err(|message| invalid_input(format!("image '{tag}' at step {step}: {message}")))?;
        let image = summary::Image {
            // encode_png checked both fit in i32.
            height: height as i32,
            width: width as i32,
            colorspace: i32::from(channels),
            encoded_image_string: encoded,
        };
        self.write_summary(
            step,
            vec![summary::Value {
                tag: tag.into(),
                metadata: None,
                kind: Some(summary::value::Kind::Image(image)),
            }],
        )
    }

    /// Logs an animation already encoded as a GIF ([`crate::encode_gif`]) of `height` x
    /// `width` RGB frames, as an image: TensorBoard's image plugin serves the bytes as they
    /// are, and a browser plays them.
    pub fn animation(
        &mut self,
        tag: &str,
        step: i64,
        height: u32,
        width: u32,
        gif: Vec<u8>,
    ) -> io::Result<()> {
        check_tag(tag, "animation")?;
        if !gif.starts_with(b"GIF8") {
            return Err(invalid_input(format!(
                "animation '{tag}' at step {step}: the bytes are not a GIF"
            )));
        }
        let image = summary::Image {
            height: i32::try_from(height).map_err(|_| invalid_input("height".into()))?,
            width: i32::try_from(width).map_err(|_| invalid_input("width".into()))?,
            colorspace: 3,
            encoded_image_string: gif,
        };
        self.write_summary(
            step,
            vec![summary::Value {
                tag: tag.into(),
                metadata: None,
                kind: Some(summary::value::Kind::Image(image)),
            }],
        )
    }

    /// Logs `text` (rendered as Markdown) in the form TensorBoard's text
    /// plugin reads: a scalar string tensor tagged with the `text` plugin.
    pub fn text(&mut self, tag: &str, step: i64, text: &str) -> io::Result<()> {
        check_tag(tag, "text")?;
        let metadata = SummaryMetadata {
            plugin_data: Some(PluginData {
                plugin_name: "text".into(),
                // An empty TextPluginData message: version 0.
                content: Vec::new(),
            }),
            display_name: String::new(),
            summary_description: String::new(),
            data_class: DataClass::Tensor as i32,
        };
        let tensor = TensorProto {
            dtype: DT_STRING,
            tensor_shape: Some(TensorShapeProto {
                dim: Vec::new(),
                unknown_rank: false,
            }),
            string_val: vec![text.as_bytes().to_vec()],
        };
        self.write_summary(
            step,
            vec![summary::Value {
                tag: tag.into(),
                metadata: Some(metadata),
                kind: Some(summary::value::Kind::Tensor(tensor)),
            }],
        )
    }

    /// Makes every event logged so far durable (`fsync`) and reports any error
    /// the background sync met since the last call.
    pub fn flush(&mut self) -> io::Result<()> {
        self.take_background_error()?;
        self.shared
            .file
            .sync_data()
            .map_err(|error| with_context(error, format!("syncing {}", self.path.display())))?;
        let mut state = self.shared.state();
        state.synced_len = state.synced_len.max(self.committed_len);
        Ok(())
    }

    /// How many bytes of the file are known to be on disk: everything logged
    /// up to the last completed `fsync`, by the background thread or
    /// [`flush`](Self::flush).
    pub fn synced_len(&self) -> u64 {
        self.shared.state().synced_len
    }

    /// Stops the background sync, syncs, and reports any error; dropping the
    /// writer does the same but can only ignore errors.
    pub fn close(mut self) -> io::Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> io::Result<()> {
        let Some(syncer) = self.syncer.take() else {
            return Ok(());
        };
        self.shared.state().closing = true;
        self.shared.wake.notify_all();
        // The sync thread never panics; if it somehow did, the final sync
        // below still runs.
        let _ = syncer.join();
        self.flush()
    }

    fn take_background_error(&self) -> io::Result<()> {
        match self.shared.state().error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn write_summary(&mut self, step: i64, value: Vec<summary::Value>) -> io::Result<()> {
        self.write_event(&Event {
            wall_time: now_seconds(),
            step,
            what: Some(event::What::Summary(Summary { value })),
        })
    }

    fn write_event(&mut self, event: &Event) -> io::Result<()> {
        self.take_background_error()?;
        if self.partial_record_stuck {
            return Err(io::Error::other(format!(
                "event file {} ends in a partial record at byte {} that could not be \
                 removed; no further events are written to it",
                self.path.display(),
                self.committed_len
            )));
        }
        let payload = event.encode_to_vec();
        self.record.clear();
        append_record(&mut self.record, &payload);
        // One write for the whole record keeps the file at record boundaries;
        // `&File` writes do not need the lock the sync thread uses.
        if let Err(error) = (&self.shared.file).write_all(&self.record) {
            // Cut off any partial record so later records stay readable.
            self.partial_record_stuck = self.shared.file.set_len(self.committed_len).is_err();
            return Err(with_context(
                error,
                format!("writing an event to {}", self.path.display()),
            ));
        }
        self.committed_len += self.record.len() as u64;
        self.shared.state().written_len = self.committed_len;
        Ok(())
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

fn sync_periodically(shared: &Shared, interval: Duration) {
    let mut state = shared.state();
    loop {
        // Checked before waiting too: a close that came while this thread was
        // starting or syncing has already notified and will not notify again.
        if state.closing {
            return;
        }
        state = shared
            .wake
            .wait_timeout(state, interval)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        if state.closing {
            return;
        }
        if state.written_len > state.synced_len {
            let target = state.written_len;
            drop(state);
            let result = shared.file.sync_data();
            state = shared.state();
            match result {
                Ok(()) => state.synced_len = state.synced_len.max(target),
                Err(error) => {
                    state.error.get_or_insert(error);
                }
            }
        }
    }
}

fn create_event_file(log_dir: &Path) -> io::Result<(File, PathBuf)> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let base = format!(
        "events.out.tfevents.{seconds}.{}.{}.tandem",
        host_name(),
        std::process::id()
    );
    for attempt in 1u32.. {
        let name = if attempt == 1 {
            base.clone()
        } else {
            format!("{base}.{attempt}")
        };
        let path = log_dir.join(name);
        match OpenOptions::new().append(true).create_new(true).open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => {}
            Err(error) => {
                return Err(with_context(
                    error,
                    format!("creating event file {}", path.display()),
                ));
            }
        }
    }
    unreachable!("the loop returns by attempt 1000")
}

fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the pointer and length describe `buffer`, which outlives the call.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let length = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    let name: String = String::from_utf8_lossy(&buffer[..length])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if status != 0 || name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

fn encode_png(height: u32, width: u32, channels: u8, pixels: &[u8]) -> Result<Vec<u8>, String> {
    let color = match channels {
        1 => png::ColorType::Grayscale,
        2 => png::ColorType::GrayscaleAlpha,
        3 => png::ColorType::Rgb,
        4 => png::ColorType::Rgba,
        other => return Err(format!("{other} channels; expected 1, 2, 3 or 4")),
    };
    if height == 0 || width == 0 {
        return Err(format!("size {height}x{width} has no pixels"));
    }
    if height > i32::MAX as u32 || width > i32::MAX as u32 {
        return Err(format!(
            "size {height}x{width} exceeds the PNG limit of 2^31-1"
        ));
    }
    let expected = (height as u64) * (width as u64) * u64::from(channels);
    if pixels.len() as u64 != expected {
        return Err(format!(
            "{} bytes of pixels, but {height}x{width}x{channels} needs {expected}",
            pixels.len()
        ));
    }
    let mut encoded = Vec::new();
    let mut encoder = png::Encoder::new(&mut encoded, width, height);
    encoder.set_color(color);
    encoder.set_depth(png::BitDepth::Eight);
    let mut png_writer = encoder
        .write_header()
        .map_err(|e| format!("PNG encoding: {e}"))?;
    png_writer
        .write_image_data(pixels)
        .map_err(|e| format!("PNG encoding: {e}"))?;
    png_writer
        .finish()
        .map_err(|e| format!("PNG encoding: {e}"))?;
    Ok(encoded)
}

fn check_tag(tag: &str, kind: &str) -> io::Result<()> {
    if tag.is_empty() {
        return Err(invalid_input(format!("{kind} summary with an empty tag")));
    }
    Ok(())
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn with_context(error: io::Error, doing: String) -> io::Error {
    io::Error::new(error.kind(), format!("{doing}: {error}"))
}

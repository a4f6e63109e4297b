//! TensorBoard summaries and animated GIFs for tandem.
//!
//! [`SummaryWriter`] writes TensorBoard event files (scalars, histograms,
//! PNG images, text) with its own TFRecord framing ([`record`]) and
//! hand-derived protobuf messages ([`proto`]), built to survive a killed
//! process; [`reader`] reads them back; [`encode_gif`] encodes an episode as an
//! animated GIF.
//!
//! ```
//! use tandem_summary::SummaryWriter;
//!
//! let log_dir = std::env::temp_dir().join(format!("tandem-summary-doc-{}", std::process::id()));
//! let mut writer = SummaryWriter::create(&log_dir)?;
//! writer.text("config", 0, "resolved config, shown as Markdown")?;
//! writer.scalars(128, &[("loss/policy", 0.25), ("perf/steps_per_s", 5400.0)])?;
//! writer.histogram("params/policy.weight", 128, &[0.1, -0.2, 0.3])?;
//! // Every call above already reached the OS; close() syncs and reports
//! // errors, dropping the writer does the same silently.
//! writer.close()?;
//! # std::fs::remove_dir_all(&log_dir)?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod animation;
mod histogram;
pub mod proto;
pub mod reader;
pub mod record;
mod writer;

pub use animation::{FRAME_CENTIS, encode_gif};
pub use histogram::BUCKET_COUNT;
pub use writer::{DEFAULT_SYNC_INTERVAL, FILE_VERSION, SummaryWriter};

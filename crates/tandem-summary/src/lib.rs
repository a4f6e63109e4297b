//! TensorBoard summaries and animated GIFs for tandem.
//!
//! [`SummaryWriter`] writes TensorBoard event files (scalars, histograms,
//! PNG images, text) with its own TFRecord framing ([`record`]) and
//! hand-derived protobuf messages ([`proto`]), built to survive a killed
//! process; [`reader`] reads them back; [`write_gif`] writes an episode as an
//! animated GIF, atomically.

mod animation;
mod histogram;
pub mod proto;
pub mod reader;
pub mod record;
mod writer;

pub use animation::write_gif;
pub use histogram::BUCKET_COUNT;
pub use writer::{DEFAULT_SYNC_INTERVAL, FILE_VERSION, SummaryWriter};

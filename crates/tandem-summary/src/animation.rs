//! Animated GIFs of episodes (`tandem play --gif`), written atomically.
//!
//! When the whole animation uses at most 256 distinct colours (true of the
//! native games and Atari frames) it is stored with one exact global palette,
//! so it decodes to exactly the frames given. Otherwise each frame gets its
//! own palette: exact where that frame has at most 256 colours, else
//! quantised (NeuQuant, lossy).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static TEMPORARY_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Speed/quality trade-off of the NeuQuant quantiser (1 best .. 30 fastest).
/// Quantising is the rare path (game frames fit one palette), so quality wins:
/// on a 2048-colour gradient 1 halves the error of the suggested 10.
const QUANTIZER_SPEED: i32 = 1;

/// Writes `frames` (row-major RGB, `width * height * 3` bytes each) as a GIF
/// that loops forever, showing each frame for `delay_centis` hundredths of a
/// second (many viewers slow delays below 2 to 10).
///
/// The file appears at `path` complete or not at all: it is written to a
/// temporary file beside it, synced, then renamed over `path`.
/// Empty or mis-sized input is an `InvalidInput` error naming the frame.
pub fn write_gif(
    path: &Path,
    width: u16,
    height: u16,
    frames: &[Vec<u8>],
    delay_centis: u16,
) -> io::Result<()> {
    let invalid = |message: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("GIF {}: {message}", path.display()),
        )
    };
    if width == 0 || height == 0 {
        return Err(invalid(format!("size {width}x{height} has no pixels")));
    }
    if frames.is_empty() {
        return Err(invalid("no frames".into()));
    }
    let frame_len = usize::from(width) * usize::from(height) * 3;
    for (index, frame) in frames.iter().enumerate() {
        if frame.len() != frame_len {
            return Err(invalid(format!(
                "frame {index} has {} bytes, but {width}x{height} RGB needs {frame_len}",
                frame.len()
            )));
        }
    }

    let temporary = temporary_path(path)?;
    let result = write_to(&temporary, width, height, frames, delay_centis)
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(io::Error::new(
            error.kind(),
            format!("writing GIF {}: {error}", path.display()),
        ));
    }
    // Make the rename durable; failing that weakens only machine-crash safety.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(dir) = File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn write_to(
    temporary: &Path,
    width: u16,
    height: u16,
    frames: &[Vec<u8>],
    delay_centis: u16,
) -> io::Result<()> {
    let file = File::create_new(temporary)?;
    let global = exact_palette(frames);
    let palette_bytes: Vec<u8> = global
        .as_ref()
        .map(|(colours, _)| colours.iter().flatten().copied().collect())
        .unwrap_or_default();
    let mut encoder = gif::Encoder::new(BufWriter::new(file), width, height, &palette_bytes)
        .map_err(gif_error)?;
    encoder
        .set_repeat(gif::Repeat::Infinite)
        .map_err(gif_error)?;
    for frame_rgb in frames {
        let mut frame = match &global {
            Some((_, index_of)) => {
                let indices: Vec<u8> = frame_rgb
                    .chunks_exact(3)
                    .map(|pixel| index_of[&[pixel[0], pixel[1], pixel[2]]])
                    .collect();
                gif::Frame::from_indexed_pixels(width, height, indices, None)
            }
            // Sizes were checked by the caller, so this cannot hit the
            // constructor's length assertion.
            None => gif::Frame::from_rgb_speed(width, height, frame_rgb, QUANTIZER_SPEED),
        };
        frame.delay = delay_centis;
        encoder.write_frame(&frame).map_err(gif_error)?;
    }
    let mut writer = encoder.into_inner().map_err(gif_error)?;
    writer.flush()?;
    let file = writer.into_inner().map_err(|error| error.into_error())?;
    file.sync_all()
}

type Palette = (Vec<[u8; 3]>, HashMap<[u8; 3], u8>);

/// The distinct colours of all frames with each one's index, or `None` if
/// there are more than a GIF palette holds.
fn exact_palette(frames: &[Vec<u8>]) -> Option<Palette> {
    let mut colours = Vec::new();
    let mut index_of = HashMap::new();
    for frame in frames {
        for pixel in frame.chunks_exact(3) {
            let colour = [pixel[0], pixel[1], pixel[2]];
            if let Entry::Vacant(slot) = index_of.entry(colour) {
                slot.insert(u8::try_from(colours.len()).ok()?);
                colours.push(colour);
            }
        }
    }
    Some((colours, index_of))
}

fn temporary_path(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("GIF path {} names no file", path.display()),
        )
    })?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    // Process id and a per-process counter keep concurrent writers of the
    // same path (other processes or threads) off each other's temporary file.
    let sequence = TEMPORARY_SEQUENCE.fetch_add(1, Ordering::Relaxed);
    temporary_name.push(format!(".{}.{sequence}.tmp", std::process::id()));
    Ok(path.with_file_name(temporary_name))
}

fn gif_error(error: gif::EncodingError) -> io::Error {
    match error {
        gif::EncodingError::Io(error) => error,
        other => io::Error::other(other),
    }
}

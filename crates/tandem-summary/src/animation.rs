//! Animated GIFs of episodes (`tandem play --gif`), encoded in memory; the caller writes the
//! bytes (atomically: tandem's `atomic` module).
//!
//! When the whole animation uses at most 256 distinct colours (true of the
//! native games and Atari frames) it is stored with one exact global palette,
//! so it decodes to exactly the frames given. Otherwise each frame gets its
//! own palette: exact where that frame has at most 256 colours, else
//! quantised (NeuQuant, lossy).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;

/// Speed/quality trade-off of the NeuQuant quantiser (1 best .. 30 fastest).
/// Quantising is the rare path (game frames fit one palette), so quality wins:
/// on a 2048-colour gradient 1 halves the error of the suggested 10.
const QUANTIZER_SPEED: i32 = 1;

/// How long a GIF of a game shows one agent step, in hundredths of a second (`tandem play
/// --gif` and evaluation videos).
pub const FRAME_CENTIS: u16 = 4;

/// Encodes `frames` (row-major RGB, `width * height * 3` bytes each) as a GIF
/// that loops forever, showing each frame for `delay_centis` hundredths of a
/// second (many viewers slow delays below 2 to 10).
///
/// Empty or mis-sized input is an `InvalidInput` error naming the frame.
pub fn encode_gif(
    width: u16,
    height: u16,
    frames: &[Vec<u8>],
    delay_centis: u16,
) -> io::Result<Vec<u8>> {
    check_frames(width, height, frames)?;
    let global = exact_palette(frames);
    let palette_bytes: Vec<u8> = global
        .as_ref()
        .map(|(colours, _)| colours.iter().flatten().copied().collect())
        .unwrap_or_default();
    let mut encoder =
        gif::Encoder::new(Vec::new(), width, height, &palette_bytes).map_err(gif_error)?;
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
            // Sizes were checked above, so this cannot hit the constructor's
            // length assertion.
            None => gif::Frame::from_rgb_speed(width, height, frame_rgb, QUANTIZER_SPEED),
        };
        frame.delay = delay_centis;
        encoder.write_frame(&frame).map_err(gif_error)?;
    }
    encoder.into_inner().map_err(gif_error)
}

fn check_frames(width: u16, height: u16, frames: &[Vec<u8>]) -> io::Result<()> {
    let invalid =
        |message: String| io::Error::new(io::ErrorKind::InvalidInput, format!("GIF: {message}"));
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
    Ok(())
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

fn gif_error(error: gif::EncodingError) -> io::Error {
    match error {
        gif::EncodingError::Io(error) => error,
        other => io::Error::other(other),
    }
}

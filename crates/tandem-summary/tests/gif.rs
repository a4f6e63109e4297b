//! GIFs written by `write_gif` decode (with the `gif` crate) to the frames
//! given, and appear at their path whole or not at all.

mod common;

use std::fs::File;
use std::io::ErrorKind;
use std::path::Path;

use common::scratch_dir;
use tandem_summary::write_gif;

const WIDTH: u16 = 7;
const HEIGHT: u16 = 5;

/// Decoded frames as (delay, RGB pixels), plus the logical screen size.
fn decode(path: &Path) -> (u16, u16, Vec<(u16, Vec<u8>)>) {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(File::open(path).unwrap()).unwrap();
    let (width, height) = (decoder.width(), decoder.height());
    let mut frames = Vec::new();
    while let Some(frame) = decoder.read_next_frame().unwrap() {
        assert_eq!(
            (frame.left, frame.top, frame.width, frame.height),
            (0, 0, width, height)
        );
        let rgb = frame
            .buffer
            .chunks_exact(4)
            .flat_map(|rgba| [rgba[0], rgba[1], rgba[2]])
            .collect();
        frames.push((frame.delay, rgb));
    }
    (width, height, frames)
}

/// Frames drawn from a small colour set, like game screens.
fn few_colour_frames(count: usize) -> Vec<Vec<u8>> {
    let palette: Vec<[u8; 3]> = (0..40u8)
        .map(|i| [i * 6, 255 - i * 3, i.wrapping_mul(97)])
        .collect();
    (0..count)
        .map(|frame| {
            (0..usize::from(WIDTH) * usize::from(HEIGHT))
                .flat_map(|pixel| palette[(pixel * 3 + frame * 11) % palette.len()])
                .collect()
        })
        .collect()
}

#[test]
fn few_colour_frames_decode_exactly() {
    let dir = scratch_dir("gif-exact");
    let path = dir.join("episode.gif");
    let frames = few_colour_frames(6);
    write_gif(&path, WIDTH, HEIGHT, &frames, 4).unwrap();
    let (width, height, decoded) = decode(&path);
    assert_eq!((width, height), (WIDTH, HEIGHT));
    assert_eq!(decoded.len(), frames.len());
    for (index, ((delay, rgb), expected)) in decoded.iter().zip(&frames).enumerate() {
        assert_eq!(*delay, 4);
        assert_eq!(rgb, expected, "frame {index}");
    }
}

#[test]
fn a_single_colour_frame_decodes_exactly() {
    let dir = scratch_dir("gif-single-colour");
    let path = dir.join("flat.gif");
    let frame = [9u8, 8, 7].repeat(usize::from(WIDTH) * usize::from(HEIGHT));
    write_gif(&path, WIDTH, HEIGHT, std::slice::from_ref(&frame), 10).unwrap();
    assert_eq!(decode(&path).2, vec![(10, frame)]);
}

#[test]
fn many_colour_frames_are_quantised_closely() {
    let dir = scratch_dir("gif-quantised");
    let path = dir.join("gradient.gif");
    let (width, height) = (64u16, 32u16);
    // 2048 distinct colours: more than one palette holds.
    let frame: Vec<u8> = (0..usize::from(width) * usize::from(height))
        .flat_map(|i| [(i % 64 * 4) as u8, (i / 64 * 8) as u8, 128])
        .collect();
    write_gif(&path, width, height, &[frame.clone(), frame.clone()], 5).unwrap();
    let (_, _, decoded) = decode(&path);
    assert_eq!(decoded.len(), 2);
    for (_, rgb) in &decoded {
        let total_error: u64 = rgb
            .iter()
            .zip(&frame)
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        let mean_error = total_error as f64 / frame.len() as f64;
        assert!(mean_error < 6.0, "mean error per channel {mean_error}");
    }
}

#[test]
fn rewriting_replaces_the_file_and_leaves_no_temporary() {
    let dir = scratch_dir("gif-replace");
    let path = dir.join("episode.gif");
    let frames = few_colour_frames(3);
    write_gif(&path, WIDTH, HEIGHT, &frames[..1], 2).unwrap();
    write_gif(&path, WIDTH, HEIGHT, &frames, 2).unwrap();
    assert_eq!(decode(&path).2.len(), 3);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["episode.gif"]);
}

#[test]
fn bad_input_is_an_error_and_leaves_an_existing_file_untouched() {
    let dir = scratch_dir("gif-bad-input");
    let path = dir.join("episode.gif");
    let frames = few_colour_frames(2);
    write_gif(&path, WIDTH, HEIGHT, &frames, 3).unwrap();
    let before = std::fs::read(&path).unwrap();

    let mut short = frames.clone();
    short[1].pop();
    let error = write_gif(&path, WIDTH, HEIGHT, &short, 3).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("frame 1 has 104 bytes"),
        "{error}"
    );
    assert!(error.to_string().contains("needs 105"), "{error}");
    let error = write_gif(&path, WIDTH, HEIGHT, &[], 3).unwrap_err();
    assert!(error.to_string().contains("no frames"), "{error}");
    let error = write_gif(&path, 0, HEIGHT, &frames, 3).unwrap_err();
    assert!(error.to_string().contains("no pixels"), "{error}");

    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn missing_directory_is_an_error_naming_the_path() {
    let dir = scratch_dir("gif-missing-dir");
    let path = dir.join("no-such-dir/episode.gif");
    let error = write_gif(&path, WIDTH, HEIGHT, &few_colour_frames(1), 3).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert!(
        error.to_string().contains("no-such-dir/episode.gif"),
        "{error}"
    );
}

//! GIFs encoded by `encode_gif` decode (with the `gif` crate) to the frames
//! given; bad input is an error naming the frame.

use std::io::ErrorKind;

use tandem_summary::encode_gif;

const WIDTH: u16 = 7;
const HEIGHT: u16 = 5;

/// Decoded frames as (delay, RGB pixels), plus the logical screen size.
fn decode(bytes: &[u8]) -> (u16, u16, Vec<(u16, Vec<u8>)>) {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(bytes).unwrap();
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
    let frames = few_colour_frames(6);
    let bytes = encode_gif(WIDTH, HEIGHT, &frames, 4).unwrap();
    let (width, height, decoded) = decode(&bytes);
    assert_eq!((width, height), (WIDTH, HEIGHT));
    assert_eq!(decoded.len(), frames.len());
    for (index, ((delay, rgb), expected)) in decoded.iter().zip(&frames).enumerate() {
        assert_eq!(*delay, 4);
        assert_eq!(rgb, expected, "frame {index}");
    }
}

#[test]
fn a_single_colour_frame_decodes_exactly() {
    let frame = [9u8, 8, 7].repeat(usize::from(WIDTH) * usize::from(HEIGHT));
    let bytes = encode_gif(WIDTH, HEIGHT, std::slice::from_ref(&frame), 10).unwrap();
    assert_eq!(decode(&bytes).2, vec![(10, frame)]);
}

#[test]
fn many_colour_frames_are_quantised_closely() {
    let (width, height) = (64u16, 32u16);
    // 2048 distinct colours: more than one palette holds.
    let frame: Vec<u8> = (0..usize::from(width) * usize::from(height))
        .flat_map(|i| [(i % 64 * 4) as u8, (i / 64 * 8) as u8, 128])
        .collect();
    let bytes = encode_gif(width, height, &[frame.clone(), frame.clone()], 5).unwrap();
    let (_, _, decoded) = decode(&bytes);
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
fn bad_input_is_an_error_naming_the_frame() {
    let frames = few_colour_frames(2);
    let mut short = frames.clone();
    short[1].pop();
    let error = encode_gif(WIDTH, HEIGHT, &short, 3).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("frame 1 has 104 bytes"),
        "{error}"
    );
    assert!(error.to_string().contains("needs 105"), "{error}");
    let error = encode_gif(WIDTH, HEIGHT, &[], 3).unwrap_err();
    assert!(error.to_string().contains("no frames"), "{error}");
    let error = encode_gif(0, HEIGHT, &frames, 3).unwrap_err();
    assert!(error.to_string().contains("no pixels"), "{error}");
}

//! Resize (INTER_AREA) and grayscale (RGB2GRAY) against OpenCV reference outputs
//! written by scripts/parity/resize_fixtures.py; every byte must match.

use std::io::Read;

use flate2::read::GzDecoder;
use tandem_env::wrappers::image::{AreaResizer, rgb_to_gray};

/// The fixture script's input generator (see its docstring).
fn lcg_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

fn make_image(style: u8, seed: u64, h: usize, w: usize, c: usize) -> Vec<u8> {
    if style == 0 {
        return lcg_bytes(seed, h * w * c);
    }
    let palette = lcg_bytes(seed, 6 * c);
    let picks = lcg_bytes(seed ^ 0x5_DEEC_E66D, h * w);
    let mut img = vec![0u8; h * w * c];
    let mut k = 0;
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let run = 1 + usize::from(picks[k] % 8);
            let colour = &palette[usize::from((picks[k] >> 3) % 6) * c..][..c];
            for xx in x..(x + run).min(w) {
                img[(y * w + xx) * c..][..c].copy_from_slice(colour);
            }
            x += run;
            k += 1;
        }
    }
    img
}

struct Case {
    op: u8,
    style: u8,
    seed: u64,
    src: (usize, usize, usize),
    dst: (usize, usize),
    expected: Vec<u8>,
}

fn load_cases() -> Vec<Case> {
    let path = format!(
        "{}/tests/fixtures/opencv_resize_gray.bin.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut bytes = Vec::new();
    GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    assert_eq!(&bytes[..8], b"TRESIZE1");
    let count = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    let mut at = 12;
    let mut cases = Vec::new();
    let u16_at = |b: &[u8], i: usize| usize::from(u16::from_le_bytes([b[i], b[i + 1]]));
    for _ in 0..count {
        let b = &bytes[at..];
        let (op, style) = (b[0], b[1]);
        let seed = u64::from_le_bytes(b[2..10].try_into().unwrap());
        let src = (u16_at(b, 10), u16_at(b, 12), usize::from(b[14]));
        let dst = (u16_at(b, 15), u16_at(b, 17));
        let out_len = dst.0 * dst.1 * if op == 0 { src.2 } else { 1 };
        let expected = b[19..19 + out_len].to_vec();
        at += 19 + out_len;
        cases.push(Case {
            op,
            style,
            seed,
            src,
            dst,
            expected,
        });
    }
    assert_eq!(at, bytes.len());
    cases
}

#[test]
fn resize_and_grayscale_equal_opencv_byte_for_byte() {
    let cases = load_cases();
    assert_eq!(cases.iter().filter(|c| c.op == 0).count(), 24);
    let mut failures = Vec::new();
    for case in &cases {
        let (h, w, c) = case.src;
        let input = make_image(case.style, case.seed, h, w, c);
        let mut out = vec![0u8; case.expected.len()];
        let what = match case.op {
            0 => {
                AreaResizer::new((h, w), case.dst, c).resize(&input, &mut out);
                format!(
                    "resize {h}x{w}x{c} -> {}x{} (style {})",
                    case.dst.0, case.dst.1, case.style
                )
            }
            _ => {
                rgb_to_gray(&input, &mut out);
                format!("grayscale {h}x{w} (style {})", case.style)
            }
        };
        let mismatches = out
            .iter()
            .zip(&case.expected)
            .filter(|(a, b)| a != b)
            .count();
        if mismatches > 0 {
            failures.push(format!(
                "{what}: {mismatches} of {} bytes differ from OpenCV",
                out.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

//! u8 image wrappers that must agree bit for bit with OpenCV (which gymnasium and
//! most Python Atari pipelines use): grayscale (`cvtColor` RGB2GRAY) and resize
//! (`resize` with INTER_AREA, shrinking only).

use super::{forward_to_inner, observation_methods, wrapper_snapshot_methods};
use crate::env::{Env, Step};
use crate::space::{Action, ActionSpace, Dtype, Layout, ObsBuf, ObsShape, ObsSpace, ObsStore};

/// OpenCV's RGB2GRAY on u8: ITU-R 601 weights 0.299, 0.587, 0.114 in 15-bit fixed point
/// (9798, 19235, 3735, summing to 2^15), rounded half up. (OpenCV 4.12 was checked
/// on all 2^24 colours by scripts/parity/resize_fixtures.py.)
pub fn rgb_to_gray(rgb: &[u8], gray: &mut [u8]) {
    let (pixels, _) = rgb.as_chunks::<3>();
    for (g, &[r, gr, b]) in gray.iter_mut().zip(pixels) {
        let y = u32::from(r) * 9798 + u32::from(gr) * 19235 + u32::from(b) * 3735;
        *g = ((y + (1 << 14)) >> 15) as u8;
    }
}

/// One source pixel's weight in one destination pixel, along one axis.
#[derive(Debug, Clone, Copy, PartialEq)]
struct AreaWeight {
    dst: usize,
    src: usize,
    weight: f32,
}

/// The weights of each source index in each destination index along one axis, for a
/// non-integer shrink factor `scale = src_len / dst_len`: every destination cell
/// covers `scale` source cells, the partly covered ones at its ends by their covered
/// fraction, all divided by the cell width. Weights below 1e-3 are dropped, as
/// OpenCV does.
fn area_weights(src_len: usize, dst_len: usize, scale: f64) -> Vec<AreaWeight> {
    let mut weights = Vec::with_capacity(src_len * 2);
    for d in 0..dst_len {
        let start = d as f64 * scale;
        let end = start + scale;
        let cell = scale.min(src_len as f64 - start);
        let last_whole = (end.floor() as usize).min(src_len - 1);
        let first_whole = (start.ceil() as usize).min(last_whole);
        if first_whole as f64 - start > 1e-3 {
            weights.push(AreaWeight {
                dst: d,
                src: first_whole - 1,
                weight: ((first_whole as f64 - start) / cell) as f32,
            });
        }
        for s in first_whole..last_whole {
            weights.push(AreaWeight {
                dst: d,
                src: s,
                weight: (1.0 / cell) as f32,
            });
        }
        if end - last_whole as f64 > 1e-3 {
            let covered = (end - last_whole as f64).min(1.0).min(cell);
            weights.push(AreaWeight {
                dst: d,
                src: last_whole,
                weight: (covered / cell) as f32,
            });
        }
    }
    weights
}

/// OpenCV's saturate_cast<uchar>(float): round half to even, then clamp.
fn saturate_u8(v: f32) -> u8 {
    // Rounding is monotone and the bounds are integers, so clamping first is the same.
    // Adding and removing 2^23 rounds any value in [0, 2^23) to the nearest integer,
    // ties to even, in the default rounding mode (and inlines, unlike `rintf`).
    const SHIFT: f32 = 8_388_608.0;
    ((v.clamp(0.0, 255.0) + SHIFT) - SHIFT) as u8
}

/// [`area_weights`] as a band: destination `d` reads the `width` consecutive source
/// indices `start[d]..start[d] + width` with weights `weight[d * width..][..width]`,
/// in OpenCV's accumulation order. A destination with fewer entries gets weight 0 on
/// the extra indices (before or after its own, staying inside the source); adding
/// `x * 0.0 = +0.0` to a non-negative sum leaves it bit-identical, and `0.0 + p = p`,
/// so the padding changes no result while the loops get one fixed shape.
#[derive(Debug, Clone)]
struct Band {
    width: usize,
    start: Vec<usize>,
    weight: Vec<f32>,
}

impl Band {
    fn new(weights: &[AreaWeight], src_len: usize, dst_len: usize) -> Self {
        let mut groups: Vec<Vec<&AreaWeight>> = vec![Vec::new(); dst_len];
        for w in weights {
            groups[w.dst].push(w);
        }
        let width = groups.iter().map(Vec::len).max().unwrap_or(1).min(src_len);
        let mut start = Vec::with_capacity(dst_len);
        let mut weight = vec![0f32; dst_len * width];
        for (d, group) in groups.iter().enumerate() {
            let first = group.first().map_or(0, |w| w.src).min(src_len - width);
            start.push(first);
            for w in group {
                debug_assert!(
                    w.src >= first && w.src < first + width,
                    "area weights are consecutive"
                );
                weight[d * width + (w.src - first)] = w.weight;
            }
        }
        Band {
            width,
            start,
            weight,
        }
    }
}

/// The horizontal pass of one single-channel row for bands of width `K`.
fn band_sums<const K: usize>(line: &[f32], band: &Band, out: &mut [f32]) {
    for ((o, &start), weights) in out
        .iter_mut()
        .zip(&band.start)
        .zip(band.weight.as_chunks::<K>().0)
    {
        let window: &[f32; K] = line[start..start + K]
            .try_into()
            .expect("band inside the row");
        let mut acc = 0f32;
        for j in 0..K {
            acc += window[j] * weights[j];
        }
        *o = acc;
    }
}

/// A precomputed INTER_AREA shrink of `src` (h x w x c, interleaved) to `dst`.
#[derive(Debug, Clone)]
pub struct AreaResizer {
    src: (usize, usize),
    dst: (usize, usize),
    channels: usize,
    kind: ResizeKind,
}

#[derive(Debug, Clone)]
enum ResizeKind {
    Copy,
    /// Both factors are integers: plain block averages.
    Integer {
        fx: usize,
        fy: usize,
    },
    /// Separable weighted sums in f32, accumulated in OpenCV's order.
    General {
        xs: Band,
        ys: Band,
        /// Source rows some destination row uses.
        used_rows: Vec<bool>,
    },
}

impl AreaResizer {
    /// `src` and `dst` are (height, width); `dst` must not exceed `src` in either axis.
    pub fn new(src: (usize, usize), dst: (usize, usize), channels: usize) -> Self {
        assert!(
            dst.0 >= 1 && dst.1 >= 1 && dst.0 <= src.0 && dst.1 <= src.1,
            "INTER_AREA resize only shrinks"
        );
        // OpenCV derives the factors as 1 / (dst / src), in double precision.
        let scale_x = 1.0 / (dst.1 as f64 / src.1 as f64);
        let scale_y = 1.0 / (dst.0 as f64 / src.0 as f64);
        let integer = |s: f64| (s - s.round()).abs() < f64::EPSILON;
        let kind = if src == dst {
            ResizeKind::Copy
        } else if integer(scale_x) && integer(scale_y) {
            ResizeKind::Integer {
                fx: scale_x.round() as usize,
                fy: scale_y.round() as usize,
            }
        } else {
            let xs = area_weights(src.1, dst.1, scale_x);
            let ys = area_weights(src.0, dst.0, scale_y);
            let (xs, ys) = (Band::new(&xs, src.1, dst.1), Band::new(&ys, src.0, dst.0));
            let mut used_rows = vec![false; src.0];
            for &start in &ys.start {
                used_rows[start..start + ys.width].fill(true);
            }
            ResizeKind::General { xs, ys, used_rows }
        };
        AreaResizer {
            src,
            dst,
            channels,
            kind,
        }
    }

    pub fn resize(&self, src: &[u8], dst: &mut [u8]) {
        let c = self.channels;
        let (sh, sw) = self.src;
        let (dh, dw) = self.dst;
        debug_assert_eq!(src.len(), sh * sw * c);
        debug_assert_eq!(dst.len(), dh * dw * c);
        match &self.kind {
            ResizeKind::Copy => dst.copy_from_slice(src),
            ResizeKind::Integer { fx: 2, fy: 2 } if matches!(c, 1 | 3 | 4) => {
                // OpenCV's dedicated 2x2 path rounds half up in integers.
                let row = sw * c;
                for y in 0..dh {
                    let top = &src[2 * y * row..];
                    let bottom = &src[(2 * y + 1) * row..];
                    for x in 0..dw {
                        for k in 0..c {
                            let i = 2 * x * c + k;
                            let sum = u32::from(top[i])
                                + u32::from(top[i + c])
                                + u32::from(bottom[i])
                                + u32::from(bottom[i + c]);
                            dst[(y * dw + x) * c + k] = ((sum + 2) >> 2) as u8;
                        }
                    }
                }
            }
            &ResizeKind::Integer { fx, fy } => {
                let inv_area = 1.0f32 / (fx * fy) as f32;
                let row = sw * c;
                for y in 0..dh {
                    for x in 0..dw {
                        for k in 0..c {
                            let mut sum = 0i32;
                            for sy in 0..fy {
                                for sx in 0..fx {
                                    sum +=
                                        i32::from(src[(y * fy + sy) * row + (x * fx + sx) * c + k]);
                                }
                            }
                            dst[(y * dw + x) * c + k] = saturate_u8(sum as f32 * inv_area);
                        }
                    }
                }
            }
            ResizeKind::General { xs, ys, used_rows } => {
                // OpenCV sums each source row horizontally into f32 (entries of one
                // destination pixel in order, starting from 0), then each destination row
                // vertically (first entry times its weight, then adding weight times row).
                // Both orders are kept, so the f32 results are identical; a source row
                // shared by two destination rows is summed once here.
                let width = dw * c;
                let mut rows = vec![0f32; sh * width];
                let mut line = vec![0f32; sw * c];
                let k = xs.width;
                for (y, _) in used_rows.iter().enumerate().filter(|(_, used)| **used) {
                    for (l, &v) in line.iter_mut().zip(&src[y * sw * c..(y + 1) * sw * c]) {
                        *l = f32::from(v);
                    }
                    let out = &mut rows[y * width..(y + 1) * width];
                    match (c, k) {
                        (1, 2) => band_sums::<2>(&line, xs, out),
                        (1, 3) => band_sums::<3>(&line, xs, out),
                        (1, 4) => band_sums::<4>(&line, xs, out),
                        _ => {
                            for ((px, &start), weights) in out
                                .chunks_exact_mut(c)
                                .zip(&xs.start)
                                .zip(xs.weight.chunks_exact(k))
                            {
                                let window = &line[start * c..(start + k) * c];
                                for (ch, o) in px.iter_mut().enumerate() {
                                    let mut acc = 0f32;
                                    for (j, &w) in weights.iter().enumerate() {
                                        acc += window[j * c + ch] * w;
                                    }
                                    *o = acc;
                                }
                            }
                        }
                    }
                }
                for ((out, &start), weights) in dst
                    .chunks_exact_mut(width)
                    .zip(&ys.start)
                    .zip(ys.weight.chunks_exact(ys.width))
                {
                    let band = &rows[start * width..(start + ys.width) * width];
                    let mut acc: Vec<f32> = band[..width].iter().map(|r| weights[0] * r).collect();
                    for (row, &beta) in band.chunks_exact(width).zip(weights).skip(1) {
                        for (a, r) in acc.iter_mut().zip(row) {
                            *a += beta * r;
                        }
                    }
                    for (o, a) in out.iter_mut().zip(&acc) {
                        *o = saturate_u8(*a);
                    }
                }
            }
        }
    }
}

/// RGB to one luma channel, exactly as OpenCV's RGB2GRAY on u8.
pub struct Grayscale {
    inner: Box<dyn Env>,
    rgb: Vec<u8>,
    output: ObsSpace,
}

impl Grayscale {
    pub fn new(inner: Box<dyn Env>) -> Self {
        let input = inner.observation_space();
        let ObsShape::Image { height, width, .. } = input.shape else {
            unreachable!("checked by output_space")
        };
        Grayscale {
            inner,
            rgb: vec![0; input.len()],
            output: ObsSpace::image(height, width, 1, Layout::Chw, Dtype::U8),
        }
    }

    fn convert(&self, obs: &mut ObsBuf<'_>) {
        if let ObsBuf::U8(out) = obs {
            rgb_to_gray(&self.rgb, out);
        }
    }
}

impl Env for Grayscale {
    fn observation_space(&self) -> ObsSpace {
        self.output
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.inner
            .reset(seed, obs.scratch_if_wanted(ObsBuf::U8(&mut self.rgb)));
        self.convert(&mut obs);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        let step = self
            .inner
            .step(action, obs.scratch_if_wanted(ObsBuf::U8(&mut self.rgb)));
        self.convert(&mut obs);
        step
    }
    // Only a conversion scratch buffer, rewritten before every read.
    wrapper_snapshot_methods!("grayscale", params: [], state: []);
    forward_to_inner!(with_normalizers);
}

/// Shrinks u8 images exactly as OpenCV's `resize(..., INTER_AREA)`.
pub struct Resize {
    inner: Box<dyn Env>,
    input: ObsStore,
    resizer: AreaResizer,
    output: ObsSpace,
}

impl Resize {
    pub fn new(inner: Box<dyn Env>, height: usize, width: usize) -> Self {
        let input = inner.observation_space();
        let ObsShape::Image {
            height: h,
            width: w,
            channels,
            layout,
        } = input.shape
        else {
            unreachable!("checked by output_space")
        };
        Resize {
            inner,
            input: ObsStore::zeros(&input),
            resizer: AreaResizer::new((h, w), (height, width), channels),
            output: ObsSpace::image(height, width, channels, layout, Dtype::U8),
        }
    }

    fn convert(&self, obs: &mut ObsBuf<'_>) {
        if let (ObsBuf::U8(out), ObsStore::U8(input)) = (obs, &self.input) {
            self.resizer.resize(input, out);
        }
    }
}

impl Env for Resize {
    observation_methods!(convert);
    // Only a conversion scratch buffer, rewritten before every read.
    wrapper_snapshot_methods!("resize", params: [], state: []);
    forward_to_inner!(with_normalizers);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gray_weights_sum_to_one() {
        let mut g = [0u8; 3];
        rgb_to_gray(&[255, 255, 255, 0, 0, 0, 255, 0, 0], &mut g);
        assert_eq!(g, [255, 0, 76]);
    }

    #[test]
    fn area_weights_of_each_destination_sum_to_one() {
        for (src, dst) in [(210, 84), (160, 84), (10, 7), (5, 3)] {
            let scale = 1.0 / (dst as f64 / src as f64);
            let w = area_weights(src, dst, scale);
            for d in 0..dst {
                let total: f32 = w.iter().filter(|a| a.dst == d).map(|a| a.weight).sum();
                assert!((total - 1.0).abs() < 1e-4, "{src}->{dst} cell {d}: {total}");
            }
        }
    }

    #[test]
    fn constant_images_stay_constant() {
        for (src, dst) in [((210, 160), (84, 84)), ((8, 8), (4, 4)), ((9, 9), (3, 3))] {
            let r = AreaResizer::new(src, dst, 3);
            let input = vec![77u8; src.0 * src.1 * 3];
            let mut out = vec![0u8; dst.0 * dst.1 * 3];
            r.resize(&input, &mut out);
            assert!(out.iter().all(|&v| v == 77));
        }
    }
}

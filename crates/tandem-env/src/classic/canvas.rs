//! A small RGB canvas for the classic-control games' pictures ([`crate::Env::render_rgb`]):
//! plain pixels, thick line segments and discs in a world coordinate frame whose y axis
//! points up. Pictures for GIFs, not gymnasium's pygame renderings.

use crate::env::RgbFrame;

pub(crate) const BACKGROUND: [u8; 3] = [255, 255, 255];

pub(crate) struct Canvas {
    frame: RgbFrame,
    /// World x of the left edge, world y of the bottom edge, pixels per world unit.
    left: f64,
    bottom: f64,
    scale: f64,
}

impl Canvas {
    /// A `size` x `size` white canvas showing world x in `[left, left + span]` and
    /// world y in `[bottom, bottom + span]`.
    pub(crate) fn square(size: usize, left: f64, bottom: f64, span: f64) -> Self {
        Self::new(size, size, left, bottom, size as f64 / span)
    }

    pub(crate) fn new(width: usize, height: usize, left: f64, bottom: f64, scale: f64) -> Self {
        let pixels = BACKGROUND.repeat(width * height);
        Canvas {
            frame: RgbFrame {
                height,
                width,
                pixels,
            },
            left,
            bottom,
            scale,
        }
    }

    fn to_pixel(&self, x: f64, y: f64) -> (f64, f64) {
        let px = (x - self.left) * self.scale;
        let py = self.frame.height as f64 - (y - self.bottom) * self.scale;
        (px, py)
    }

    fn put(&mut self, px: i64, py: i64, rgb: [u8; 3]) {
        let (w, h) = (self.frame.width as i64, self.frame.height as i64);
        if (0..w).contains(&px) && (0..h).contains(&py) {
            let i = (py as usize * self.frame.width + px as usize) * 3;
            self.frame.pixels[i..i + 3].copy_from_slice(&rgb);
        }
    }

    /// A filled disc of world radius `radius` around world point `(x, y)`.
    pub(crate) fn disc(&mut self, x: f64, y: f64, radius: f64, rgb: [u8; 3]) {
        let (cx, cy) = self.to_pixel(x, y);
        // At least half a pixel's diagonal, so that a disc always covers the pixel
        // its centre lies in (a thin line's points can fall on pixel corners).
        let r = (radius * self.scale).max(0.75);
        for py in (cy - r).floor() as i64..=(cy + r).ceil() as i64 {
            for px in (cx - r).floor() as i64..=(cx + r).ceil() as i64 {
                let (dx, dy) = (px as f64 + 0.5 - cx, py as f64 + 0.5 - cy);
                if dx * dx + dy * dy <= r * r {
                    self.put(px, py, rgb);
                }
            }
        }
    }

    /// A segment of world width `width` from `from` to `to`, drawn as discs along it.
    pub(crate) fn line(&mut self, from: (f64, f64), to: (f64, f64), width: f64, rgb: [u8; 3]) {
        let length = ((to.0 - from.0).powi(2) + (to.1 - from.1).powi(2)).sqrt() * self.scale;
        let steps = (length.ceil() as usize).max(1);
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let (x, y) = (from.0 + t * (to.0 - from.0), from.1 + t * (to.1 - from.1));
            self.disc(x, y, width / 2.0, rgb);
        }
    }

    pub(crate) fn finish(self) -> RgbFrame {
        self.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dark_in_row(frame: &RgbFrame, row: usize) -> usize {
        let pixels = &frame.pixels[row * frame.width * 3..(row + 1) * frame.width * 3];
        pixels.chunks(3).filter(|p| *p != BACKGROUND).count()
    }

    #[test]
    fn a_thin_horizontal_line_lights_its_row_across_the_canvas() {
        let mut canvas = Canvas::square(250, -2.2, -2.2, 4.4);
        canvas.line((-2.2, 1.0), (2.2, 1.0), 0.02, [0, 0, 0]);
        let frame = canvas.finish();
        // World y 1.0 is 3.2 / 4.4 of the way up: pixel row 250 - 181.8.
        let lit = dark_in_row(&frame, 68);
        assert!(lit >= 240, "{lit} pixels lit in row 68");
        assert_eq!(dark_in_row(&frame, 60) + dark_in_row(&frame, 76), 0);
    }
}

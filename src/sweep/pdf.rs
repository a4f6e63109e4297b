//! A minimal PDF writer for the figures of `tandem plot`: a plotters drawing backend that writes
//! what a plot draws (lines, paths, rectangles, polygons, circles, text) as the operators of one
//! PDF page, in a file of five objects (catalogue, page tree, page, font, content stream) with
//! its cross-reference table. Text is set in Helvetica, one of the fonts every PDF reader has,
//! measured with its published widths so anchored text (centred titles, right-aligned ticks)
//! lands where plotters puts it; transparency (the shaded intervals) through graphics states.
//! No pure-Rust PDF crate draws plotters figures, and converting the SVG would take a renderer
//! and its font stack (see docs/sweeps.md).

use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, IntoDrawingArea};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontTransform,
};

/// What a page holds: its operators and the opacities they use (graphics state `/GS<i>` is
/// opacity `alphas[i]`).
#[derive(Debug, Default)]
pub struct Content {
    ops: String,
    alphas: Vec<u8>,
}

/// Draws into a [`Content`] of a `size` page (points, y down as plotters counts).
pub struct PdfBackend<'a> {
    size: (u32, u32),
    content: &'a mut Content,
}

/// The Helvetica widths (thousandths of the font size) of ASCII 32 to 126.
const HELVETICA: [u16; 95] = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, 556, 556, 556,
    556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556, 1015, 667, 667, 722, 722, 667,
    611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667,
    667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500,
    222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
];

/// Plotters' font sizes are pixel heights of the line box; SVG and PDF sizes are em sizes.
const EM: f64 = 1.24;

/// `text`'s width in Helvetica at `size` points (other characters as wide as a digit).
fn text_width(text: &str, size: f64) -> f64 {
    let units: u32 = text
        .chars()
        .map(|c| match c as u32 {
            code @ 32..=126 => u32::from(HELVETICA[(code - 32) as usize]),
            _ => 556,
        })
        .sum();
    f64::from(units) * size / 1000.0
}

/// A PDF string literal in WinAnsi encoding: `(`, `)` and `\` escaped, Latin-1 as octal, and
/// characters outside it as `?`.
fn literal(text: &str) -> String {
    let mut out = String::from("(");
    for c in text.chars() {
        match c {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            '\u{a0}'..='\u{ff}' => out.push_str(&format!("\\{:03o}", c as u32)),
            _ => out.push('?'),
        }
    }
    out.push(')');
    out
}

impl<'a> PdfBackend<'a> {
    pub fn new(content: &'a mut Content, size: (u32, u32)) -> PdfBackend<'a> {
        PdfBackend { size, content }
    }

    pub fn area(self) -> DrawingArea<PdfBackend<'a>, Shift> {
        self.into_drawing_area()
    }

    /// A point in page coordinates (y up).
    fn at(&self, (x, y): (f64, f64)) -> String {
        format!("{} {}", num(x), num(f64::from(self.size.1) - y))
    }

    /// The graphics state of `alpha`'s opacity.
    fn opacity(&mut self, alpha: f64) -> String {
        let key = (alpha.clamp(0.0, 1.0) * 255.0).round() as u8;
        let i = match self.content.alphas.iter().position(|&a| a == key) {
            Some(i) => i,
            None => {
                self.content.alphas.push(key);
                self.content.alphas.len() - 1
            }
        };
        format!("/GS{i} gs")
    }

    fn fill_colour(&mut self, colour: BackendColor) -> String {
        let (r, g, b) = colour.rgb;
        let gs = self.opacity(colour.alpha);
        format!("{gs} {} {} {} rg", unit(r), unit(g), unit(b))
    }

    fn stroke_colour(&mut self, colour: BackendColor, width: u32) -> String {
        let (r, g, b) = colour.rgb;
        let gs = self.opacity(colour.alpha);
        format!("{gs} {} {} {} RG {width} w", unit(r), unit(g), unit(b))
    }

    fn push(&mut self, op: String) {
        self.content.ops.push_str(&op);
        self.content.ops.push('\n');
    }

    fn path(&self, points: &[(f64, f64)]) -> String {
        let mut out = String::new();
        for (i, &p) in points.iter().enumerate() {
            out.push_str(&self.at(p));
            out.push_str(if i == 0 { " m " } else { " l " });
        }
        out
    }
}

fn unit(channel: u8) -> String {
    num(f64::from(channel) / 255.0)
}

/// A number as PDF writes it: at most three decimals, no exponent.
fn num(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

fn point(c: BackendCoord) -> (f64, f64) {
    (f64::from(c.0), f64::from(c.1))
}

impl DrawingBackend for PdfBackend<'_> {
    type ErrorType = std::io::Error;

    fn get_size(&self) -> (u32, u32) {
        self.size
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<std::io::Error>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<std::io::Error>> {
        Ok(())
    }

    fn draw_pixel(
        &mut self,
        at: BackendCoord,
        colour: BackendColor,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        self.draw_rect(at, (at.0 + 1, at.1 + 1), &colour, true)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        self.draw_path([from, to], style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let (x0, y0) = point(upper_left);
        let (x1, y1) = point(bottom_right);
        let corner = self.at((x0, y1));
        let (w, h) = (num(x1 - x0), num(y1 - y0));
        let op = if fill {
            format!("{} {corner} {w} {h} re f", self.fill_colour(style.color()))
        } else {
            let colour = self.stroke_colour(style.color(), style.stroke_width());
            format!("{colour} {corner} {w} {h} re S")
        };
        self.push(op);
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        let points: Vec<(f64, f64)> = path.into_iter().map(point).collect();
        if style.color().alpha == 0.0 || points.len() < 2 {
            return Ok(());
        }
        let colour = self.stroke_colour(style.color(), style.stroke_width());
        let op = format!("{colour} 1 j 1 J {}S", self.path(&points));
        self.push(op);
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        let (cx, cy) = point(center);
        let r = f64::from(radius);
        let points: Vec<(f64, f64)> = (0..=32)
            .map(|k| {
                let a = f64::from(k) * std::f64::consts::TAU / 32.0;
                (cx + r * a.cos(), cy + r * a.sin())
            })
            .collect();
        let colour = if fill {
            self.fill_colour(style.color())
        } else {
            self.stroke_colour(style.color(), style.stroke_width())
        };
        let op = format!(
            "{colour} {}h {}",
            self.path(&points),
            if fill { "f" } else { "S" }
        );
        self.push(op);
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        let points: Vec<(f64, f64)> = vertices.into_iter().map(point).collect();
        if style.color().alpha == 0.0 || points.len() < 3 {
            return Ok(());
        }
        let op = format!(
            "{} {}h f",
            self.fill_colour(style.color()),
            self.path(&points)
        );
        self.push(op);
        Ok(())
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<std::io::Error>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() / EM;
        let width = text_width(text, size);
        // Offsets along the text (u) and down from its anchor to the baseline (v), as the
        // SVG backend places them.
        let u = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let v = match style.anchor().v_pos {
            VPos::Top => 0.76 * size,
            VPos::Center => 0.26 * size,
            VPos::Bottom => -0.26 * size,
        };
        // The text's direction on the page (y up) and where its baseline starts (y down).
        let (x, y) = point(pos);
        let ((cos, sin), origin) = match style.transform() {
            FontTransform::None => ((1.0, 0.0), (x + u, y + v)),
            FontTransform::Rotate90 => ((0.0, -1.0), (x - v, y + u)),
            FontTransform::Rotate180 => ((-1.0, 0.0), (x - u, y - v)),
            FontTransform::Rotate270 => ((0.0, 1.0), (x + v, y - u)),
        };
        let op = format!(
            "{} BT /F1 {} Tf {} {} {} {} {} Tm {} Tj ET",
            self.fill_colour(style.color()),
            num(size),
            num(cos),
            num(sin),
            num(-sin),
            num(cos),
            self.at(origin),
            literal(text)
        );
        self.push(op);
        Ok(())
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<std::io::Error>> {
        let size = style.size() / EM;
        Ok((
            text_width(text, size).ceil() as u32,
            style.size().ceil() as u32,
        ))
    }
}

/// The PDF file of one `size` page holding `content`.
pub fn document(content: &Content, size: (u32, u32)) -> Vec<u8> {
    let states: String = (content.alphas.iter().enumerate())
        .map(|(i, &a)| {
            let a = num(f64::from(a) / 255.0);
            format!(" /GS{i} << /CA {a} /ca {a} >>")
        })
        .collect();
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {} {}] /Resources << /Font << /F1 4 0 R \
             >> /ExtGState <<{states} >> >> /Contents 5 0 R >>",
            size.0, size.1
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_string(),
        format!(
            "<< /Length {} >>\nstream\n{}endstream",
            content.ops.len(),
            content.ops
        ),
    ];
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for offset in offsets {
        table.push_str(&format!("{offset:010} 00000 n \n"));
    }
    table.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.extend_from_slice(table.as_bytes());
    out
}

/// Checks a file [`document`] wrote, as a reader would find its objects: the header, the
/// `startxref` offset at the table, each table entry at its object, the stream's stated length.
/// Returns the page's content stream.
pub fn parse(bytes: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(bytes);
    if !text.starts_with("%PDF-1.") {
        return Err("no %PDF header".into());
    }
    let tail = text.trim_end();
    let tail = tail.strip_suffix("%%EOF").ok_or("no %%EOF")?.trim_end();
    let start: usize = (tail.rsplit('\n').next().unwrap_or(""))
        .parse()
        .map_err(|_| "no startxref offset")?;
    let table = bytes.get(start..).ok_or("startxref past the end")?;
    let table = String::from_utf8_lossy(table);
    let mut lines = table.lines();
    if lines.next() != Some("xref") {
        return Err(format!("startxref {start} is not at the xref table"));
    }
    let count: usize = (lines.next().and_then(|l| l.split(' ').nth(1)))
        .and_then(|n| n.parse().ok())
        .ok_or("no xref count")?;
    let mut content = None;
    for (k, line) in lines.take(count).enumerate().skip(1) {
        let offset: usize = line[..10]
            .parse()
            .map_err(|_| format!("bad entry {line}"))?;
        let object = String::from_utf8_lossy(&bytes[offset..]);
        if !object.starts_with(&format!("{k} 0 obj\n")) {
            return Err(format!("object {k} is not at offset {offset}"));
        }
        if let Some(at) = object.find("/Length ") {
            let rest = &object[at + 8..];
            let length: usize = rest[..rest.find(' ').ok_or("no length")?]
                .parse()
                .map_err(|_| "bad length")?;
            let data = object.find("stream\n").ok_or("no stream")? + 7;
            if !object[data + length..].starts_with("endstream") {
                return Err(format!("object {k}'s stream is not {length} bytes"));
            }
            content = Some(object[data..data + length].to_string());
        }
    }
    content.ok_or_else(|| "no content stream".into())
}

#[cfg(test)]
mod tests {
    use super::{Content, PdfBackend, document, num, parse, text_width};
    use plotters::prelude::*;

    #[test]
    fn a_page_of_lines_polygons_and_text_is_a_pdf_a_reader_can_walk() {
        let mut content = Content::default();
        {
            let area = PdfBackend::new(&mut content, (200, 100)).area();
            area.fill(&WHITE).unwrap();
            area.draw(&PathElement::new(
                vec![(10, 10), (190, 90)],
                RED.stroke_width(2),
            ))
            .unwrap();
            area.draw(&Polygon::new(
                vec![(0, 0), (50, 0), (50, 50)],
                BLUE.mix(0.25).filled(),
            ))
            .unwrap();
            area.draw(&Text::new("lr (0.001) ±", (20, 20), ("sans-serif", 12)))
                .unwrap();
        }
        let pdf = document(&content, (200, 100));
        let ops = parse(&pdf).unwrap();
        assert!(
            ops.contains("1 0 0 RG 2 w 1 j 1 J 10 90 m 190 10 l S"),
            "{ops}"
        );
        assert!(
            ops.contains("0 0 1 rg 0 100 m 50 100 l 50 50 l h f"),
            "{ops}"
        );
        assert!(ops.contains("(lr \\(0.001\\) \\261) Tj"), "{ops}");
        let text = String::from_utf8_lossy(&pdf);
        assert!(text.contains("/GS1 << /CA 0.251 /ca 0.251 >>"), "{text}");
        assert!(text.contains("/MediaBox [0 0 200 100]"), "{text}");
        // A broken offset is found.
        let mut broken = pdf.clone();
        let at = pdf.windows(7).position(|w| w == b"2 0 obj").unwrap();
        broken[at] = b'7';
        assert!(parse(&broken).unwrap_err().contains("object 2"));
    }

    #[test]
    fn helvetica_widths() {
        assert!((text_width("10k", 10.0) - (5.56 + 5.56 + 5.0)).abs() < 1e-9);
        assert_eq!(num(-0.0001), "0");
        assert_eq!(num(12.5), "12.5");
    }
}

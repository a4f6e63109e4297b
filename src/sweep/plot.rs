//! The figure of `tandem sweep` and `tandem plot`: a metric (the game score unless `--metric`)
//! against environment steps or wall-clock time, one line per group (the mean over its seeds)
//! with its 95% interval shaded (clamped to the values the runs logged), drawn by plotters and
//! written as the output's extension says: PNG (a pixel buffer), SVG (plotters' SVG backend) or
//! PDF ([`super::pdf`], lines, polygons and text written as PDF operators). Text is set in
//! DejaVu Sans, embedded in the binary, so drawing needs no font installed (the PDF names
//! Helvetica, which every PDF reader has).

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::curves::{BandPoint, CurveOptions, Group, SCORE_TAG, XAxis, band, last_x, value_range};

/// The figure's size in pixels (PNG, SVG) or points (PDF).
pub const SIZE: (u32, u32) = (1000, 640);
const FONT: &str = "sans-serif";

/// Ticks on each axis, at most: plotters picks round values (20k, 40k; 100, 200).
const TICKS: usize = 6;

/// Distinct line colours, in group order (repeating past the eighth group).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // DejaVu Sans is a valid TrueType font; a failure here is a broken build of the crate.
        let _ = plotters::style::register_font(
            FONT,
            plotters::style::FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The figure formats, by the output file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
    Pdf,
}

impl Format {
    /// The format `path`'s extension names; any other is an error that says which there are.
    pub fn of(path: &Path) -> Result<Format> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            Some("pdf") => Ok(Format::Pdf),
            Some(other) => crate::usage::mistake!(
                "cannot write a figure as .{other} ({}): name a .png, .svg or .pdf file",
                path.display()
            ),
            None => crate::usage::mistake!(
                "{} has no extension: name a .png, .svg or .pdf file",
                path.display()
            ),
        }
    }
}

/// Draws `groups` under `title` and writes the figure to `path` (atomically) in the format its
/// extension names.
pub fn write(title: &str, groups: &[Group], options: &CurveOptions, path: &Path) -> Result<()> {
    let bytes = render(title, groups, options, Format::of(path)?)?;
    crate::atomic::write_atomic(path, &bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The figure's bytes in `format`.
pub fn render(
    title: &str,
    groups: &[Group],
    options: &CurveOptions,
    format: Format,
) -> Result<Vec<u8>> {
    register_font();
    let failed = |e: Box<dyn std::error::Error>| anyhow!("cannot draw the plot: {e}");
    match format {
        Format::Png => {
            let (w, h) = SIZE;
            let mut pixels = vec![255u8; (w * h * 3) as usize];
            draw(
                BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(),
                title,
                groups,
                options,
            )
            .map_err(failed)?;
            let mut bytes = Vec::new();
            {
                let mut encoder = png::Encoder::new(&mut bytes, w, h);
                encoder.set_color(png::ColorType::Rgb);
                encoder.set_depth(png::BitDepth::Eight);
                let mut writer = encoder.write_header()?;
                writer.write_image_data(&pixels)?;
            }
            Ok(bytes)
        }
        Format::Svg => {
            let mut text = String::new();
            draw(
                SVGBackend::with_string(&mut text, SIZE).into_drawing_area(),
                title,
                groups,
                options,
            )
            .map_err(failed)?;
            Ok(text.into_bytes())
        }
        Format::Pdf => {
            let mut content = super::pdf::Content::default();
            let page = super::pdf::PdfBackend::new(&mut content, SIZE).area();
            draw(page, title, groups, options).map_err(failed)?;
            Ok(super::pdf::document(&content, SIZE))
        }
    }
}

/// The axis titles for `options`.
fn descriptions(options: &CurveOptions) -> (String, String) {
    let x = match options.x {
        XAxis::Steps => "environment steps",
        XAxis::WallClock => "wall-clock time",
    };
    let what = if options.metric == SCORE_TAG {
        "score"
    } else {
        options.metric.as_str()
    };
    let smoothed = if options.smooth > 1 {
        format!(", trailing mean of {} points", options.smooth)
    } else {
        String::new()
    };
    (
        x.to_string(),
        format!("{what} (mean over seeds, 95% interval{smoothed})"),
    )
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    groups: &[Group],
    options: &CurveOptions,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let last = last_x(groups).max(1.0);
    let clamp = value_range(groups);
    let bands: Vec<Vec<BandPoint>> = groups
        .iter()
        .map(|g| band(g, last, options.smooth, clamp))
        .collect();
    let (low, high) = y_range(&bands);
    let (x_desc, y_desc) = descriptions(options);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..last, low..high)?;
    let x_label = |x: &f64| match options.x {
        XAxis::Steps => steps(*x),
        XAxis::WallClock => seconds(*x),
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(TICKS)
        .y_labels(TICKS)
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .x_label_formatter(&x_label)
        .y_label_formatter(&|y| number(*y))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, (group, band)) in groups.iter().zip(&bands).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let with_interval: Vec<&BandPoint> = band.iter().filter(|p| p.interval.is_some()).collect();
        if !with_interval.is_empty() {
            let upper = with_interval.iter().map(|p| (p.x, p.interval.unwrap().1));
            let lower = with_interval
                .iter()
                .rev()
                .map(|p| (p.x, p.interval.unwrap().0));
            chart.draw_series(std::iter::once(Polygon::new(
                upper.chain(lower).collect::<Vec<_>>(),
                colour.mix(0.18).filled(),
            )))?;
        }
        let seeds = group.runs.len();
        chart
            .draw_series(LineSeries::new(
                band.iter().map(|p| (p.x, p.mean)),
                colour.stroke_width(2),
            ))?
            .label(format!(
                "{} ({seeds} seed{})",
                group.label,
                if seeds == 1 { "" } else { "s" }
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The score axis: every mean and interval bound, with a margin (a flat line gets a unit one).
fn y_range(bands: &[Vec<BandPoint>]) -> (f64, f64) {
    let values = bands.iter().flatten().flat_map(|p| {
        let (lo, hi) = p.interval.unwrap_or((p.mean, p.mean));
        [p.mean, lo, hi]
    });
    let (low, high) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !low.is_finite() {
        return (0.0, 1.0);
    }
    let margin = ((high - low) * 0.05).max(0.5);
    (low - margin, high + margin)
}

/// Seconds as an axis label: 45s, 2.5min, 1.5h.
fn seconds(x: f64) -> String {
    match x.abs() {
        0.0 => "0".to_string(),
        v if v >= 3600.0 => format!("{}h", trim(x / 3600.0)),
        v if v >= 60.0 => format!("{}min", trim(x / 60.0)),
        _ => format!("{}s", trim(x)),
    }
}

/// A value as an axis label: no trailing zeros, thousands as k.
fn number(y: f64) -> String {
    if y.abs() >= 10_000.0 {
        steps(y)
    } else {
        trim(y)
    }
}

/// Steps as an axis label: 20k, 1.5M.
fn steps(x: f64) -> String {
    match x.abs() {
        v if v >= 1e6 => format!("{}M", trim(x / 1e6)),
        v if v >= 1e3 => format!("{}k", trim(x / 1e3)),
        _ => trim(x),
    }
}

fn trim(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::curves::Run;

    fn groups() -> Vec<Group> {
        let run = |seed, offset: f64| Run {
            name: format!("r{seed}"),
            seed,
            points: (1..=50)
                .map(|k| ((k * 100) as f64, k as f64 + offset))
                .collect(),
            last: None,
        };
        vec![
            Group {
                label: "lr 0.001".into(),
                runs: vec![run(1, 0.0), run(2, 4.0)],
            },
            Group {
                label: "lr 0.0003".into(),
                runs: vec![run(1, 20.0)],
            },
        ]
    }

    #[test]
    fn a_plot_is_a_png_of_the_stated_size_with_each_groups_colour() {
        let path = std::env::temp_dir().join(format!("tandem-plot-{}.png", std::process::id()));
        write("test", &groups(), &CurveOptions::default(), &path).unwrap();
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), SIZE);
        for colour in &COLOURS[..2] {
            let drawn = pixels
                .chunks(3)
                .filter(|p| p == &[colour.0, colour.1, colour.2])
                .count();
            assert!(drawn > 200, "{colour:?}: {drawn} pixels");
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_format_is_the_extensions() {
        assert_eq!(Format::of(Path::new("a/b.PNG")).unwrap(), Format::Png);
        assert_eq!(Format::of(Path::new("b.svg")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("b.pdf")).unwrap(), Format::Pdf);
        let err = Format::of(Path::new("b.jpg")).unwrap_err().to_string();
        assert!(
            err.contains(".jpg") && err.contains(".png, .svg or .pdf"),
            "{err}"
        );
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(steps(20_000.0), "20k");
        assert_eq!(steps(1_500_000.0), "1.5M");
        assert_eq!(steps(512.0), "512");
        assert_eq!(seconds(45.0), "45s");
        assert_eq!(seconds(150.0), "2.5min");
        assert_eq!(seconds(5400.0), "1.5h");
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(25_000.0), "25k");
    }
}

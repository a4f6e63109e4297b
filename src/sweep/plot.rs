//! The score plot of `tandem sweep` and `tandem plot`: score against environment steps, one
//! line per group (the mean over its seeds) with its 95% interval shaded, drawn by plotters into
//! a pixel buffer and written as a PNG. Text is set in DejaVu Sans, embedded in the binary, so
//! drawing needs no font installed.

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;

use super::curves::{BandPoint, Group, band, last_step};

const SIZE: (u32, u32) = (1000, 640);
const FONT: &str = "sans-serif";

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

/// Draws `groups` under `title` and writes the PNG to `path` (atomically).
pub fn write_png(title: &str, groups: &[Group], path: &Path) -> Result<()> {
    let (w, h) = SIZE;
    let mut pixels = vec![255u8; (w * h * 3) as usize];
    draw(title, groups, &mut pixels).map_err(|e| anyhow!("cannot draw the plot: {e}"))?;
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&pixels)?;
    }
    crate::atomic::write_atomic(path, &bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn draw(
    title: &str,
    groups: &[Group],
    pixels: &mut [u8],
) -> Result<(), Box<dyn std::error::Error>> {
    register_font();
    let root = BitMapBackend::with_buffer(pixels, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let last = last_step(groups).max(1);
    let bands: Vec<Vec<BandPoint>> = groups.iter().map(|g| band(g, last)).collect();
    let (low, high) = y_range(&bands);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..last as f64, low..high)?;
    chart
        .configure_mesh()
        .x_desc("environment steps")
        .y_desc("score (mean over seeds, 95% interval)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .x_label_formatter(&|x| steps(*x))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, (group, band)) in groups.iter().zip(&bands).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let with_interval: Vec<&BandPoint> = band.iter().filter(|p| p.interval.is_some()).collect();
        if !with_interval.is_empty() {
            let upper = with_interval
                .iter()
                .map(|p| (p.step as f64, p.interval.unwrap().1));
            let lower = with_interval
                .iter()
                .rev()
                .map(|p| (p.step as f64, p.interval.unwrap().0));
            chart.draw_series(std::iter::once(Polygon::new(
                upper.chain(lower).collect::<Vec<_>>(),
                colour.mix(0.18).filled(),
            )))?;
        }
        let seeds = group.runs.len();
        chart
            .draw_series(LineSeries::new(
                band.iter().map(|p| (p.step as f64, p.mean)),
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

    #[test]
    fn a_plot_is_a_png_of_the_stated_size_with_each_groups_colour() {
        let run = |seed, offset: f64| Run {
            name: format!("r{seed}"),
            seed,
            points: (1..=50).map(|k| (k * 100, k as f64 + offset)).collect(),
        };
        let groups = vec![
            Group {
                label: "lr 0.001".into(),
                runs: vec![run(1, 0.0), run(2, 4.0)],
            },
            Group {
                label: "lr 0.0003".into(),
                runs: vec![run(1, 20.0)],
            },
        ];
        let path = std::env::temp_dir().join(format!("tandem-plot-{}.png", std::process::id()));
        write_png("test", &groups, &path).unwrap();
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
    fn step_labels_are_short() {
        assert_eq!(steps(20_000.0), "20k");
        assert_eq!(steps(1_500_000.0), "1.5M");
        assert_eq!(steps(512.0), "512");
    }
}

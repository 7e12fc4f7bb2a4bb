//! One SVG line chart per curve (plotters, SVG backend only).

use std::path::Path;

use plotters::prelude::*;

/// A named line of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
        }
    }
}

/// How an axis is scaled.
#[derive(Clone, Copy)]
pub enum Axis {
    Linear,
    Log,
}

/// Where the legend goes: a corner the curves leave free.
#[derive(Clone, Copy)]
pub enum Legend {
    UpperLeft,
    UpperRight,
}

/// A chart: title, axis labels, scales and the legend's corner.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub legend: Legend,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The range covering every point (positive values only on a log axis), with a margin.
fn range(values: impl Iterator<Item = f64>, axis: Axis) -> (f64, f64) {
    let vals: Vec<f64> = values
        .filter(|v| v.is_finite() && (matches!(axis, Axis::Linear) || *v > 0.0))
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.1, 1.0);
    }
    match axis {
        Axis::Log => (lo / 1.5, hi * 1.5),
        Axis::Linear => {
            let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
            ((lo - pad).min(0.0), hi + pad)
        }
    }
}

/// Writes the chart to `path` (creating its directory). Errors are printed, not fatal:
/// the tables on stdout are the result, the plot is an aid.
pub fn write(path: &Path, chart: &Chart<'_>, series: &[Series]) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match draw(path, chart, series) {
        Ok(()) => eprintln!("plot written to {}", path.display()),
        Err(e) => eprintln!("cannot write the plot {}: {e}", path.display()),
    }
}

fn draw(
    path: &Path,
    chart: &Chart<'_>,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = range(all().map(|p| p.0), chart.x);
    let (y0, y1) = range(all().map(|p| p.1), chart.y);
    let root = SVGBackend::new(path, (820, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64);
    // Four combinations of linear and log axes, each its own coordinate type.
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_desc(chart.x_label)
                .y_desc(chart.y_label)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .draw()?;
            for (i, s) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                ctx.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
            ctx.configure_series_labels()
                .position(match chart.legend {
                    Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
                    Legend::UpperRight => SeriesLabelPosition::UpperRight,
                })
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()?;
        }};
    }
    match (chart.x, chart.y) {
        (Axis::Log, Axis::Log) => {
            body!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)
        }
        (Axis::Log, Axis::Linear) => {
            body!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?)
        }
        (Axis::Linear, Axis::Log) => {
            body!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?)
        }
        (Axis::Linear, Axis::Linear) => body!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
    }
    root.present()?;
    Ok(())
}

/// A short tick label: 10, 1.5k, 100k, 0.25.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(short(10.0), "10");
        assert_eq!(short(1500.0), "1.5k");
        assert_eq!(short(100_000.0), "100k");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(0.001), "0.001");
    }

    #[test]
    fn a_chart_is_written_as_svg() {
        let dir = std::env::temp_dir().join(format!("mck-plot-{}", std::process::id()));
        let path = dir.join("t.svg");
        let chart = Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            x: Axis::Log,
            y: Axis::Linear,
            legend: Legend::UpperLeft,
        };
        write(
            &path,
            &chart,
            &[Series::new("a", vec![(1.0, 2.0), (10.0, 3.0)])],
        );
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        let _ = std::fs::remove_dir_all(dir);
    }
}

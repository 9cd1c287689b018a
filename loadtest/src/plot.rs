//! Plots of a result: the latency percentile curve (a "nines" axis, as HdrHistogram plots
//! are read) and throughput and latency over time, each as PNG and SVG.

use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::Report;
use crate::stats::Summary;

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Draws `latency.{png,svg}` and `timeline.{png,svg}` into `dir`.
pub fn draw(report: &Report, dir: &Path) -> anyhow::Result<()> {
    register_font();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let series = named_series(report);
    if series.is_empty() {
        return Ok(());
    }
    // The chart functions are generic over the backend, so one macro draws each in both.
    macro_rules! both_formats {
        ($name:literal, $chart:ident) => {{
            let size = (1000, 600);
            let png = dir.join(concat!($name, ".png"));
            let root = BitMapBackend::new(&png, size).into_drawing_area();
            $chart(&root, &series)?;
            root.present().map_err(|e| anyhow!("{e}"))?;
            let svg = dir.join(concat!($name, ".svg"));
            let root = SVGBackend::new(&svg, size).into_drawing_area();
            $chart(&root, &series)?;
            root.present().map_err(|e| anyhow!("{e}"))?;
        }};
    }
    both_formats!("latency", latency);
    both_formats!("timeline", timeline);
    Ok(())
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

fn named_series(report: &Report) -> Vec<(&'static str, &Summary)> {
    let mut series = Vec::new();
    if let Some(s) = &report.produce {
        series.push(("produce", s));
    }
    if let Some(s) = &report.fetch {
        series.push(("fetch", s));
    }
    if let Some(s) = &report.end_to_end {
        series.push(("end to end", s));
    }
    if let Some(b) = &report.baselines {
        series.push(("no-storage server", &b.null_server));
        if let Some(durable) = &b.durable_server {
            series.push(("durable no-storage server", durable));
        }
        if let Some(group) = &b.group_server {
            series.push(("group-commit no-storage server", group));
        }
    }
    series
}

/// "90%", "99%", "99.9%": as many decimals as the nines need.
fn percentile_label(nines: f64) -> String {
    let decimals = (nines.ceil() as usize).saturating_sub(2);
    format!("{:.*}%", decimals, 100.0 * (1.0 - 10f64.powf(-nines)))
}

/// The quantile as "nines": 0 at the median's left edge, 2 at p99, 3 at p99.9.
fn nines(quantile: f64) -> f64 {
    (-(1.0 - quantile).max(1e-6).log10()).min(6.0)
}

fn latency<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[(&str, &Summary)],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let max_ms = series
        .iter()
        .flat_map(|(_, s)| s.percentile_curve.iter().map(|p| p.ms))
        .fold(0.01f64, f64::max);
    let max_nines = series
        .iter()
        .flat_map(|(_, s)| s.percentile_curve.iter().map(|p| nines(p.quantile)))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption("Latency by percentile", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..max_nines, (0.005f64..max_ms * 1.5).log_scale())
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ms)")
        .x_label_formatter(&|x| percentile_label(*x))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (name, summary)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                summary
                    .percentile_curve
                    .iter()
                    .map(|p| (nines(p.quantile), p.ms.max(0.005))),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[(&str, &Summary)],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (top, bottom) = root.split_vertically(300);
    let seconds = series
        .iter()
        .map(|(_, s)| s.per_second.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let max_rate = series
        .iter()
        .flat_map(|(_, s)| s.per_second.iter().map(|p| p.records as f64))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&top)
        .caption("Throughput and latency over time", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..seconds, 0f64..max_rate * 1.1)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .y_desc("records/s")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (name, summary)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                summary
                    .per_second
                    .iter()
                    .map(|p| (p.t as f64 + 0.5, p.records as f64)),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let max_ms = series
        .iter()
        .flat_map(|(_, s)| s.per_second.iter().map(|p| p.p99_ms))
        .fold(0.01f64, f64::max);
    let mut chart = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..seconds, 0f64..max_ms * 1.1)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("seconds into the measured window")
        .y_desc("p50 / p99 ms")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (_, summary)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                summary
                    .per_second
                    .iter()
                    .map(|p| (p.t as f64 + 0.5, p.p50_ms)),
                color.stroke_width(1),
            ))
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .draw_series(LineSeries::new(
                summary
                    .per_second
                    .iter()
                    .map(|p| (p.t as f64 + 0.5, p.p99_ms)),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_show_their_nines() {
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(5.0), "99.999%");
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
    }
}

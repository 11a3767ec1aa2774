//! One SVG per phase, drawn by the bench from its rows' numbers so a reader
//! sees a phase's shape at a glance: a panel per measured quantity
//! (throughput, p99, memory, …), a pair of horizontal bars per case — the
//! server's and, beside it, the limit's from the same run.

use super::report::{Point, Row};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

/// Width of the image and of the label column, in pixels.
const WIDTH: u32 = 900;
const LABEL_WIDTH: u32 = 330;
/// Height of one bar pair and of a panel's caption and axis.
const BAND: u32 = 34;
const PANEL_FRAME: u32 = 70;
/// Cases longer than this are cut in the labels (the table has them whole).
const LABEL_CHARS: usize = 48;

const SERVER: RGBColor = RGBColor(0x1f, 0x6f, 0xb4);
const LIMIT: RGBColor = RGBColor(0xb0, 0xb0, 0xb0);

/// One panel: the points of one quantity, each with its row's case.
struct Panel<'a> {
    what: &'static str,
    unit: &'static str,
    points: Vec<(&'a str, &'a Point)>,
}

/// The panels of `rows`, in the order their quantities first appear.
fn panels<'a>(rows: &[&'a Row]) -> Vec<Panel<'a>> {
    let mut out: Vec<Panel<'a>> = Vec::new();
    for row in rows {
        for p in &row.plot {
            if !p.server.is_finite() || p.limit.is_some_and(|l| !l.is_finite()) {
                continue;
            }
            match out
                .iter_mut()
                .find(|x| x.what == p.what && x.unit == p.unit)
            {
                Some(panel) => panel.points.push((&row.case, p)),
                None => out.push(Panel {
                    what: p.what,
                    unit: p.unit,
                    points: vec![(&row.case, p)],
                }),
            }
        }
    }
    out
}

/// The SVG of one phase, or `None` when its rows have no numbers to plot.
pub fn phase_svg(phase: &str, rows: &[&Row]) -> Option<String> {
    let panels = panels(rows);
    if panels.is_empty() {
        return None;
    }
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| PANEL_FRAME + BAND * p.points.len() as u32)
        .collect();
    let total = 40 + heights.iter().sum::<u32>();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, total)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let root = root
            .titled(
                &format!("phase {phase}: server (blue) beside its limit (grey), same run"),
                ("sans-serif", 18),
            )
            .ok()?;
        let mut rest = root;
        for (panel, height) in panels.iter().zip(&heights) {
            let (area, below) = rest.split_vertically(*height);
            draw_panel(&area, panel).ok()?;
            rest = below;
        }
        rest.present().ok()?;
    }
    Some(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_panel(area: &Area<'_>, panel: &Panel<'_>) -> Result<(), Box<dyn std::error::Error>> {
    let n = panel.points.len();
    let max = panel
        .points
        .iter()
        .flat_map(|(_, p)| std::iter::once(p.server).chain(p.limit))
        .fold(0.0f64, f64::max);
    let top = if max > 0.0 { max * 1.1 } else { 1.0 };
    let labels: Vec<String> = panel.points.iter().map(|(case, _)| short(case)).collect();
    // Two segments a case: the server's bar, then the limit's (reversed so
    // the first case is on top).
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} ({})", panel.what, panel.unit),
            ("sans-serif", 15),
        )
        .margin(6)
        .x_label_area_size(24)
        .y_label_area_size(LABEL_WIDTH)
        .build_cartesian_2d(0.0..top, (0..2 * n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(2 * n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if i % 2 == 1 => labels[n - 1 - i / 2].clone(),
            _ => String::new(),
        })
        .x_label_formatter(&|v| compact(*v))
        .label_style(("sans-serif", 12))
        .draw()?;
    let bar = |slot: usize, value: f64, color: RGBColor| {
        let mut r = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(slot)),
                (value, SegmentValue::Exact(slot + 1)),
            ],
            color.filled(),
        );
        r.set_margin(2, 2, 0, 0);
        r
    };
    let mut bars = Vec::new();
    for (i, (_, p)) in panel.points.iter().enumerate() {
        // Case i (from the top) owns slots 2(n-1-i) (limit) and +1 (server).
        let base = 2 * (n - 1 - i);
        bars.push(bar(base + 1, p.server, SERVER));
        if let Some(limit) = p.limit {
            bars.push(bar(base, limit, LIMIT));
        }
    }
    chart.draw_series(bars)?;
    Ok(())
}

/// A case cut to fit its label.
fn short(case: &str) -> String {
    if case.chars().count() <= LABEL_CHARS {
        return case.to_string();
    }
    let cut: String = case.chars().take(LABEL_CHARS - 1).collect();
    format!("{cut}…")
}

/// An axis number without needless digits (`12k`, `1.5`).
fn compact(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// `4 memory` → `4-memory`, a file name.
pub fn slug(phase: &str) -> String {
    phase
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, points: &[(&'static str, &'static str, f64, Option<f64>)]) -> Row {
        let mut r = Row::new("1 writes", case);
        for (what, unit, server, limit) in points {
            r.plot(what, unit, *server, *limit);
        }
        r
    }

    #[test]
    fn a_panel_per_quantity_and_a_bar_per_value() {
        let a = row(
            "create, c=1",
            &[
                ("throughput", "/s", 120.0, Some(300.0)),
                ("p99", "ms", 9.5, Some(4.0)),
            ],
        );
        let b = row("create, c=64", &[("throughput", "/s", 2400.0, None)]);
        let svg = phase_svg("1 writes", &[&a, &b]).expect("an svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in ["throughput (/s)", "p99 (ms)", "create, c=1", "create, c=64"] {
            assert!(svg.contains(text), "{text} missing");
        }
        // Three server bars and two limit bars.
        let server = svg.matches("fill=\"#1F6FB4\"").count();
        let limit = svg.matches("fill=\"#B0B0B0\"").count();
        assert_eq!((server, limit), (3, 2), "{svg}");
    }

    #[test]
    fn rows_without_numbers_draw_nothing() {
        let a = row("x", &[]);
        assert!(phase_svg("2 reads", &[&a]).is_none());
        let nan = row("y", &[("p99", "ms", f64::NAN, None)]);
        assert!(phase_svg("2 reads", &[&nan]).is_none());
    }

    #[test]
    fn labels_and_names() {
        assert_eq!(slug("10 overload"), "10-overload");
        assert_eq!(compact(25_000.0), "25k");
        assert_eq!(compact(1.50), "1.5");
        assert_eq!(short(&"a".repeat(60)).chars().count(), LABEL_CHARS);
    }
}

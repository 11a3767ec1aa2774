//! The one table: each figure, its limit measured in the same run, their
//! ratio and the issue's budget; and its place in BENCHMARKS.md, between two
//! markers so that the prose around it stays hand-written.

use super::load::LoadResult;
use super::plot;
use super::procs::Machine;
use super::Result;
use std::path::Path;
use std::time::Duration;

const BEGIN: &str = "<!-- apiserver-bench:begin (generated: edit around it, not inside) -->";
const END: &str = "<!-- apiserver-bench:end -->";
/// Where the phases' plots go, beside the markdown file (`/data` is the
/// server's own, ignored by git).
const PLOTS_DIR: &str = "tests/bench-plots";

/// Whether a figure reaches its budget.
pub enum Verdict {
    Met,
    /// Missed, and by how much.
    Missed(String),
}

pub struct Budget {
    /// What the issue asks, e.g. `≥ 0.90× etcd`.
    pub target: String,
    pub verdict: Verdict,
}

impl Budget {
    /// `value` must be at least `min` (`what` formats both).
    pub fn at_least(target: &str, value: f64, min: f64) -> Budget {
        let verdict = if value >= min {
            Verdict::Met
        } else {
            Verdict::Missed(format!(
                "{:.0}% short ({value:.2} of {min:.2})",
                (1.0 - value / min) * 100.0
            ))
        };
        Budget {
            target: target.into(),
            verdict,
        }
    }

    /// `value` must stay under `max`; `unit` follows the values (` ms`, `×`).
    pub fn under(target: &str, value: f64, max: f64, unit: &str) -> Budget {
        let verdict = if value < max {
            Verdict::Met
        } else {
            Verdict::Missed(format!(
                "{:.1}× over ({value:.1}{unit} vs {max:.1}{unit})",
                value / max
            ))
        };
        Budget {
            target: target.into(),
            verdict,
        }
    }

    /// Every one of `parts` must be met (`target` joins theirs with "and").
    pub fn all(parts: Vec<Budget>) -> Budget {
        let target = parts
            .iter()
            .map(|b| b.target.as_str())
            .collect::<Vec<_>>()
            .join(" and ");
        let missed: Vec<String> = parts
            .iter()
            .filter_map(|b| match &b.verdict {
                Verdict::Met => None,
                Verdict::Missed(by) => Some(format!("{}: {by}", b.target)),
            })
            .collect();
        Budget {
            target,
            verdict: if missed.is_empty() {
                Verdict::Met
            } else {
                Verdict::Missed(missed.join("; "))
            },
        }
    }

    /// A budget that cannot be judged from this run (e.g. the offered load
    /// did not reach the budget's).
    pub fn not_judged(target: &str, why: &str) -> Budget {
        Budget {
            target: target.into(),
            verdict: Verdict::Missed(format!("not reached: {why}")),
        }
    }

    fn cell(&self) -> String {
        match &self.verdict {
            Verdict::Met => format!("{}: met", self.target),
            Verdict::Missed(by) => format!("{}: **missed**, {by}", self.target),
        }
    }
}

/// One line of the table.
pub struct Row {
    pub phase: &'static str,
    pub case: String,
    pub server: String,
    pub limit: String,
    pub ratio: String,
    pub budget: Option<Budget>,
    /// Errors or missing numbers: the smoke run fails on any.
    pub problem: Option<String>,
    /// The numbers behind the cells, for the phase's plot.
    pub plot: Vec<Point>,
}

/// One plotted number: the quantity (a panel of the phase's plot), its
/// unit, the server's value and the limit's, when the row has one.
pub struct Point {
    pub what: &'static str,
    pub unit: &'static str,
    pub server: f64,
    pub limit: Option<f64>,
}

impl Row {
    pub fn new(phase: &'static str, case: impl Into<String>) -> Row {
        Row {
            phase,
            case: case.into(),
            server: String::new(),
            limit: "—".into(),
            ratio: "—".into(),
            budget: None,
            problem: None,
            plot: Vec::new(),
        }
    }

    /// Adds a number to the phase's plot.
    pub fn plot(
        &mut self,
        what: &'static str,
        unit: &'static str,
        server: f64,
        limit: Option<f64>,
    ) {
        self.plot.push(Point {
            what,
            unit,
            server,
            limit,
        });
    }

    /// Plots a load's throughput and p99 beside its limit's.
    pub fn plot_load(&mut self, server: &LoadResult, limit: Option<&LoadResult>) {
        self.plot(
            "throughput",
            "/s",
            server.rate(),
            limit.map(LoadResult::rate),
        );
        self.plot_p99(server.p99(), limit.map(LoadResult::p99));
    }

    /// Plots a p99 latency beside its limit's.
    pub fn plot_p99(&mut self, server: Duration, limit: Option<Duration>) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        self.plot("p99", "ms", ms(server), limit.map(ms));
    }

    /// A row for a measurement that could not be made.
    pub fn failed(phase: &'static str, case: impl Into<String>, why: String) -> Row {
        let mut row = Row::new(phase, case);
        row.problem = Some(why);
        row
    }
}

/// Everything written about one run.
pub struct Report {
    pub machine: Machine,
    pub command: String,
    pub sizes: String,
    pub settings: Vec<String>,
    pub rows: Vec<Row>,
    pub duration: Duration,
    pub date: String,
    pub revision: String,
    pub load_after: String,
}

fn cell(text: &str) -> String {
    let text = text.replace('|', "\\|").replace('\n', " ");
    if text.chars().count() > 240 {
        let cut: String = text.chars().take(237).collect();
        format!("{cut}...")
    } else {
        text
    }
}

impl Report {
    /// The markdown table.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| phase | case | server | limit (same run) | server/limit | budget |\n|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let server = match &r.problem {
                Some(p) if r.server.is_empty() => format!("**failed**: {p}"),
                Some(p) => format!("{} (**{p}**)", r.server),
                None => r.server.clone(),
            };
            let budget = r.budget.as_ref().map_or("—".to_string(), Budget::cell);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.phase,
                cell(&r.case),
                cell(&server),
                cell(&r.limit),
                cell(&r.ratio),
                cell(&budget)
            ));
        }
        out
    }

    /// Each phase's plot: the phase, its file name and the SVG, in the
    /// order the phases ran.
    pub fn plots(&self) -> Vec<(&'static str, String, String)> {
        let mut phases: Vec<&'static str> = Vec::new();
        for r in &self.rows {
            if !phases.contains(&r.phase) {
                phases.push(r.phase);
            }
        }
        phases
            .into_iter()
            .filter_map(|phase| {
                let rows: Vec<&Row> = self.rows.iter().filter(|r| r.phase == phase).collect();
                plot::phase_svg(phase, &rows)
                    .map(|svg| (phase, format!("{}.svg", plot::slug(phase)), svg))
            })
            .collect()
    }

    /// The missed budgets, one line each.
    pub fn missed(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter_map(|r| match &r.budget {
                Some(Budget {
                    target,
                    verdict: Verdict::Missed(by),
                }) => Some(format!("{} / {}: {target}, {by}", r.phase, r.case)),
                _ => None,
            })
            .collect()
    }

    /// The rows that did not produce clean numbers.
    pub fn problems(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter_map(|r| {
                r.problem
                    .as_ref()
                    .map(|p| format!("{} / {}: {p}", r.phase, r.case))
            })
            .collect()
    }

    /// The generated part of BENCHMARKS.md.
    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut out = format!(
            "Run of {date} on revision {rev}, {secs:.0} s end to end.\n\n\
             ```sh\n{cmd}\n```\n\n\
             - machine: {cpus} CPUs ({model}), {mem} RAM, Linux {kernel}; \
             load average {load_before} before the run, {load_after} after\n\
             - etcd {etcd}\n- sizes: {sizes}\n",
            date = self.date,
            rev = self.revision,
            secs = self.duration.as_secs_f64(),
            cmd = self.command,
            cpus = m.cpus,
            model = m.cpu_model,
            mem = m.memory,
            kernel = m.kernel,
            load_before = m.load_before,
            load_after = self.load_after,
            etcd = m.etcd_version,
            sizes = self.sizes,
        );
        for s in &self.settings {
            out.push_str(&format!("- {s}\n"));
        }
        out.push('\n');
        out.push_str(&self.table());
        let plots = self.plots();
        if !plots.is_empty() {
            out.push_str("\nOne plot per phase, drawn by the tool from this run's numbers:\n\n");
            for (phase, file, _) in &plots {
                out.push_str(&format!("![phase {phase}]({PLOTS_DIR}/{file})\n"));
            }
        }
        let missed = self.missed();
        if !missed.is_empty() {
            out.push_str("\nBudgets missed in this run:\n\n");
            for line in missed {
                out.push_str(&format!("- {line}\n"));
            }
        }
        let problems = self.problems();
        if !problems.is_empty() {
            out.push_str("\nMeasurements that failed or had errors:\n\n");
            for line in problems {
                out.push_str(&format!("- {line}\n"));
            }
        }
        out
    }

    /// Writes the generated part into `path` between the markers, keeping
    /// the rest; a file without markers gets them appended.
    pub fn write(&self, path: &Path) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new(".")).join(PLOTS_DIR);
        for (_, file, svg) in self.plots() {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join(file), svg)?;
        }
        let generated = format!("{BEGIN}\n{}{END}", self.markdown());
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let new = match (old.find(BEGIN), old.find(END)) {
            (Some(b), Some(e)) if b < e => {
                format!("{}{generated}{}", &old[..b], &old[e + END.len()..])
            }
            _ if old.is_empty() => format!("# Benchmarks\n\n{generated}\n"),
            _ => format!("{}\n\n{generated}\n", old.trim_end()),
        };
        std::fs::write(path, new)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_say_by_how_much() {
        let b = Budget::at_least("≥ 0.90× etcd", 0.45, 0.9);
        assert!(b.cell().contains("50% short"), "{}", b.cell());
        let b = Budget::under("p99 < 2 ms", 5.0, 2.0, " ms");
        assert!(b.cell().contains("2.5× over"), "{}", b.cell());
        assert!(Budget::under("x", 1.0, 2.0, " ms").cell().ends_with("met"));
        let both = Budget::all(vec![
            Budget::at_least("≥ 5× etcd", 6.0, 5.0),
            Budget::under("p99 < 5 ms", 7.0, 5.0, " ms"),
        ]);
        assert_eq!(
            both.cell(),
            "≥ 5× etcd and p99 < 5 ms: **missed**, p99 < 5 ms: 1.4× over (7.0 ms vs 5.0 ms)"
        );
        let met = Budget::all(vec![
            Budget::at_least("a", 1.0, 1.0),
            Budget::under("b", 1.0, 2.0, ""),
        ]);
        assert_eq!(met.cell(), "a and b: met");
    }

    #[test]
    fn cells_cannot_break_the_table() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}

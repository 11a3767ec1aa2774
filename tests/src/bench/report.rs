//! The one table: each figure, its limit measured in the same run, their
//! ratio and the issue's budget; and its place in BENCHMARKS.md, between two
//! markers so that the prose around it stays hand-written.

use super::procs::Machine;
use super::Result;
use std::path::Path;
use std::time::Duration;

const BEGIN: &str = "<!-- apiserver-bench:begin (generated: edit around it, not inside) -->";
const END: &str = "<!-- apiserver-bench:end -->";

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
        }
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

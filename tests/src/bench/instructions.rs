//! Phase 12, instructions per request: the server's whole instruction
//! count (background loops included, etcd apart) per RV=0 GET of a 2 KiB
//! ConfigMap and per create of one, counted by callgrind over requests sent
//! one at a time on one keep-alive connection (`tools/callgrind_requests.py`,
//! which starts its own etcd and the server under valgrind). Unlike the
//! CPU-time columns of phase 1, the count does not move with the machine's
//! load, so it is the figure that compares builds.
//!
//! Needs `valgrind` and `python3`; without them the rows say so and judge
//! nothing. Not part of the smoke run: a debug server under callgrind takes
//! minutes.

use super::report::{Budget, Row};
use super::stats::fmt_count;
use super::{Bench, Result};
use std::path::Path;

const PHASE: &str = "12 instructions";
/// Issue 31: an RV=0 GET in at most this many instructions.
const GET_BUDGET: f64 = 65_000.0;

/// The script, from this crate's directory.
fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/callgrind_requests.py")
}

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    // Background loops are counted too: fewer requests would spread them
    // over less (500 GETs count about 190k each where 2,000 count 120k).
    let (requests, warmup) = (2_000, 300);
    let mut rows = Vec::new();
    for kind in ["get", "create"] {
        let case = match kind {
            "get" => "GET of a 2 KiB ConfigMap, RV=0, one at a time",
            _ => "create of a 2 KiB ConfigMap, one at a time",
        };
        let mut row = Row::new(PHASE, format!("instructions per {case}"));
        match count(b, kind, requests, warmup).await {
            Ok(Some(n)) => {
                row.server = format!(
                    "{} instructions (callgrind, {} requests after {} of warm-up)",
                    fmt_count(n.round() as u64),
                    fmt_count(requests),
                    fmt_count(warmup)
                );
                row.plot("instructions per request", "instructions", n, None);
                if kind == "get" {
                    row.budget = Some(Budget::under("≤ 65,000 instructions", n, GET_BUDGET, ""));
                }
            }
            Ok(None) => {
                row.server = "not measured: valgrind is not installed".into();
                if kind == "get" {
                    row.budget = Some(Budget::not_judged(
                        "≤ 65,000 instructions",
                        "valgrind is not installed",
                    ));
                }
            }
            Err(e) => row.problem = Some(e),
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Runs the script for one kind of request; `Ok(None)` when valgrind is
/// missing.
async fn count(b: &Bench, kind: &str, requests: u64, warmup: u64) -> Result<Option<f64>, String> {
    let has_valgrind = tokio::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !has_valgrind {
        return Ok(None);
    }
    // The script starts `etcd` from PATH: put the run's first.
    let mut path = b
        .etcd_bin
        .parent()
        .map(|d| d.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    let out = tokio::process::Command::new("python3")
        .arg(script())
        .arg(&b.server_bin)
        .args(["--kind", kind])
        .args(["--requests", &requests.to_string()])
        .args(["--warmup", &warmup.to_string()])
        .env("PATH", path)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("python3 {}: {e}", script().display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "callgrind_requests.py --kind {kind} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse(&stdout, kind)
        .map(Some)
        .ok_or_else(|| format!("no `instructions per {kind}` line in: {stdout}"))
}

/// The count in the script's `instructions per get: 120,667` line.
fn parse(stdout: &str, kind: &str) -> Option<f64> {
    let prefix = format!("instructions per {kind}: ");
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|n| n.replace(',', "").parse().ok())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_the_scripts_line() {
        assert_eq!(
            parse("instructions per get: 120,667\n", "get"),
            Some(120_667.0)
        );
        assert_eq!(
            parse("x\ninstructions per create: 817,994\n/tmp/cg\n", "create"),
            Some(817_994.0)
        );
        assert_eq!(parse("instructions per get: 1\n", "create"), None);
        assert_eq!(parse("instructions per get: many\n", "get"), None);
    }

    #[test]
    fn the_script_is_where_the_phase_looks() {
        assert!(super::script().is_file());
    }
}

//! The process figures every kube component exports (the Prometheus Go
//! client's process collector: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...), read from `/proc/self` at each
//! scrape, and `go_goroutines`, which kube's dashboards chart: here the
//! tasks alive on the tokio runtime, this server's unit of concurrency as
//! the goroutine is Go's. Off Linux (no `/proc`) the process gauges stay
//! at zero.

use prometheus::{Counter, Gauge, IntGauge, Registry};
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) struct ProcessMetrics {
    cpu: Counter,
    resident: IntGauge,
    virtual_bytes: IntGauge,
    open_fds: IntGauge,
    max_fds: IntGauge,
    start_time: Gauge,
    tasks: IntGauge,
}

fn registered<C: prometheus::core::Collector + Clone + 'static>(
    r: &Registry,
    c: C,
) -> prometheus::Result<C> {
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

impl ProcessMetrics {
    pub(super) fn new(r: &Registry) -> prometheus::Result<ProcessMetrics> {
        let m = ProcessMetrics {
            cpu: registered(
                r,
                Counter::new(
                    "process_cpu_seconds_total",
                    "Total user and system CPU time spent in seconds.",
                )?,
            )?,
            resident: registered(
                r,
                IntGauge::new(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                )?,
            )?,
            virtual_bytes: registered(
                r,
                IntGauge::new(
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                )?,
            )?,
            open_fds: registered(
                r,
                IntGauge::new("process_open_fds", "Number of open file descriptors.")?,
            )?,
            max_fds: registered(
                r,
                IntGauge::new(
                    "process_max_fds",
                    "Maximum number of open file descriptors.",
                )?,
            )?,
            start_time: registered(
                r,
                Gauge::new(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                )?,
            )?,
            tasks: registered(
                r,
                IntGauge::new(
                    "go_goroutines",
                    "Number of goroutines that currently exist (here: tasks alive on the server's tokio runtime).",
                )?,
            )?,
        };
        if let Some(start) = start_time() {
            m.start_time.set(start);
        }
        Ok(m)
    }

    /// Reads the current figures (at a scrape).
    pub(super) fn refresh(&self) {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            self.tasks
                .set(i64::try_from(handle.metrics().num_alive_tasks()).unwrap_or(i64::MAX));
        }
        if let Some(stat) = read_stat() {
            let ticks = clock_ticks();
            #[allow(clippy::cast_precision_loss)] // CPU ticks stay far below 2^52
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            let delta = cpu - self.cpu.get();
            if delta > 0.0 {
                self.cpu.inc_by(delta);
            }
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            if let Some(kb) = status_kb(&status, "VmRSS:") {
                self.resident.set(kb.saturating_mul(1024));
            }
            if let Some(kb) = status_kb(&status, "VmSize:") {
                self.virtual_bytes.set(kb.saturating_mul(1024));
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds
                .set(i64::try_from(dir.count()).unwrap_or(i64::MAX));
        }
        if let Some(max) = max_open_files() {
            self.max_fds.set(max);
        }
    }
}

#[allow(clippy::cast_precision_loss)] // ticks per second: a small number
fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second().max(1) as f64
}

/// The fields of `/proc/self/stat` used here (in clock ticks).
struct Stat {
    utime: u64,
    stime: u64,
    /// Since boot.
    starttime: u64,
}

fn read_stat() -> Option<Stat> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// `pid (comm) state ppid ...`: the command may hold spaces and
/// parentheses, so the fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // After `)`: state is field 3 of proc(5); utime 14, stime 15,
    // starttime 22.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
    })
}

fn status_kb(status: &str, key: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

fn max_open_files() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    soft.parse().ok()
}

/// Seconds since the epoch at which this process started: boot time
/// (`btime` of `/proc/stat`) plus the process's start in ticks.
fn start_time() -> Option<f64> {
    let stat = read_stat()?;
    let system = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = system
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    #[allow(clippy::cast_precision_loss)] // seconds since the epoch: exact in f64
    let start = btime as f64 + stat.starttime as f64 / clock_ticks();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    (start <= now + 1.0).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command() {
        let line = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123456 1000 200 18446744073709551615";
        let s = parse_stat(line).expect("parsed");
        assert_eq!((s.utime, s.stime, s.starttime), (250, 75, 123456));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn status_and_live_figures() {
        assert_eq!(
            status_kb("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048)
        );
        assert_eq!(status_kb("Name:\tx\n", "VmRSS:"), None);
        let r = Registry::new();
        let m = ProcessMetrics::new(&r).expect("definitions");
        m.refresh();
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(m.resident.get() > 0);
            assert!(m.open_fds.get() > 0);
            assert!(m.start_time.get() > 1.0e9);
        }
    }
}

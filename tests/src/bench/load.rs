//! Load drivers: `run_workers` runs N workers until a deadline, each with its
//! own `Recorder`, and merges them. A worker asks its `Pace` for each turn:
//! closed loop (as fast as replies come back) or a fixed total rate shared by
//! all workers.

use super::stats::{fmt_duration, fmt_rate, Histogram};
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One worker's results.
#[derive(Default)]
pub struct Recorder {
    pub hist: Histogram,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Recorder {
    /// Records an operation that started at `started`: its latency if it
    /// succeeded, an error otherwise. Returns the success value.
    pub fn record<T, E: Display>(&mut self, started: Instant, result: Result<T, E>) -> Option<T> {
        match result {
            Ok(v) => {
                self.hist.record(started.elapsed());
                Some(v)
            }
            Err(e) => {
                self.error(e);
                None
            }
        }
    }

    pub fn error(&mut self, e: impl Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }

    fn merge(&mut self, other: Recorder) {
        self.hist.merge(&other.hist);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// The merged results of a run.
pub struct LoadResult {
    pub rec: Recorder,
    pub elapsed: Duration,
}

impl LoadResult {
    /// Successful operations per second.
    pub fn rate(&self) -> f64 {
        self.rec.hist.count() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn p50(&self) -> Duration {
        self.rec.hist.quantile(0.50)
    }

    pub fn p99(&self) -> Duration {
        self.rec.hist.quantile(0.99)
    }

    /// `1,234/s · p50 1.20 ms · p99 3.40 ms`.
    pub fn summary(&self) -> String {
        format!(
            "{}/s · p50 {} · p99 {}",
            fmt_rate(self.rate()),
            fmt_duration(self.p50()),
            fmt_duration(self.p99())
        )
    }

    /// `None` when the run produced numbers without errors, else why not.
    pub fn problem(&self) -> Option<String> {
        if self.rec.errors > 0 {
            return Some(format!(
                "{} errors, first: {}",
                self.rec.errors,
                self.rec.first_error.as_deref().unwrap_or("?")
            ));
        }
        if self.rec.hist.count() == 0 {
            return Some("no operation completed".into());
        }
        None
    }
}

/// When a worker may start its next operation.
pub struct Pace {
    start: Instant,
    deadline: Instant,
    /// Nanoseconds between operations of all workers together; 0: closed loop.
    interval_ns: u64,
    next: AtomicU64,
}

impl Pace {
    /// Workers go as fast as replies come back, until `duration` is over.
    pub fn closed(duration: Duration) -> Arc<Pace> {
        Self::new(duration, 0)
    }

    /// `per_sec` operations per second in total, spread over the workers.
    pub fn rate(duration: Duration, per_sec: f64) -> Arc<Pace> {
        Self::new(duration, (1e9 / per_sec.max(1e-3)) as u64)
    }

    fn new(duration: Duration, interval_ns: u64) -> Arc<Pace> {
        let start = Instant::now();
        Arc::new(Pace {
            start,
            deadline: start + duration,
            interval_ns,
            next: AtomicU64::new(0),
        })
    }

    /// Waits for this worker's next turn; false once the run is over.
    pub async fn turn(&self) -> bool {
        if self.interval_ns == 0 {
            return Instant::now() < self.deadline;
        }
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        let due = self.start + Duration::from_nanos(k.saturating_mul(self.interval_ns));
        if due >= self.deadline {
            return false;
        }
        tokio::time::sleep_until(due.into()).await;
        true
    }
}

/// Runs `workers` copies of `work(index)` at once and merges their
/// recorders. The elapsed time runs from the start to the last worker's end.
pub async fn run_workers<F, Fut>(workers: usize, work: F) -> LoadResult
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let start = Instant::now();
    let handles: Vec<_> = (0..workers).map(|i| tokio::spawn(work(i))).collect();
    let mut rec = Recorder::default();
    for h in handles {
        match h.await {
            Ok(r) => rec.merge(r),
            Err(e) => rec.error(format!("worker panicked: {e}")),
        }
    }
    LoadResult {
        rec,
        elapsed: start.elapsed(),
    }
}

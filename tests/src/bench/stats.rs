//! Latency histograms (microsecond resolution, at most 1/128 relative error)
//! and the formatting of the figures in the table.
//!
//! Two flavours share one bucket layout: `Histogram`, owned by one load
//! worker and merged at the end, and `SharedHistogram`, which thousands of
//! watchers record into at once with relaxed atomic adds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two: 2^7 = 128, so a bucket is at most 1/128 of
/// its value wide.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values are clamped to 2^40 µs (about 12 days).
const MAX_US: u64 = 1 << 40;
const BUCKETS: usize = bucket_of(MAX_US) + 1;

/// The bucket of a value in microseconds: exact below 256, then 128
/// sub-buckets per power of two.
const fn bucket_of(us: u64) -> usize {
    if us < 2 * SUB {
        return us as usize;
    }
    let exponent = 63 - us.leading_zeros();
    let shift = exponent - SUB_BITS;
    (shift as u64 * SUB + (us >> shift)) as usize
}

/// The smallest value of a bucket and its width.
fn bucket_range(index: usize) -> (u64, u64) {
    let i = index as u64;
    if i < 2 * SUB {
        return (i, 1);
    }
    let shift = i / SUB - 1;
    let mantissa = i - shift * SUB;
    (mantissa << shift, 1 << shift)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(MAX_US).min(MAX_US)
}

/// A latency histogram owned by one worker.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, latency: Duration) {
        self.counts[bucket_of(micros(latency))] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0..=1), as the middle of its bucket; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        quantile(&self.counts, self.total, q)
    }
}

/// A histogram many tasks record into concurrently.
pub struct SharedHistogram {
    counts: Vec<AtomicU64>,
}

impl Default for SharedHistogram {
    fn default() -> Self {
        SharedHistogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl SharedHistogram {
    pub fn record(&self, latency: Duration) {
        self.counts[bucket_of(micros(latency))].fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> Histogram {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total = counts.iter().sum();
        Histogram { counts, total }
    }
}

fn quantile(counts: &[u64], total: u64, q: f64) -> Duration {
    if total == 0 {
        return Duration::ZERO;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (low, width) = bucket_range(i);
            return Duration::from_micros(low + width / 2);
        }
    }
    Duration::from_micros(MAX_US)
}

/// `1.23 ms`, `456 µs`, `2.1 s`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 10_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A count with thousands separators: `12,345`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A rate per second, rounded to a readable precision.
pub fn fmt_rate(per_sec: f64) -> String {
    if per_sec >= 100.0 {
        fmt_count(per_sec.round() as u64)
    } else {
        format!("{per_sec:.1}")
    }
}

/// Bytes as MiB with one decimal.
pub fn fmt_mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A ratio: `0.93×`.
pub fn fmt_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.2}×")
    } else {
        "—".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 255, 256, 257, 511, 512, 1_000, 65_535, 1 << 30] {
            let b = bucket_of(us);
            assert!(b >= last, "bucket order at {us}");
            last = b;
            let (low, width) = bucket_range(b);
            assert!(
                low <= us && us < low + width,
                "{us} outside [{low}, +{width})"
            );
            assert!(width == 1 || width * SUB <= low, "bucket too wide at {us}");
        }
        for i in 0..BUCKETS - 1 {
            let (low, width) = bucket_range(i);
            assert_eq!(bucket_range(i + 1).0, low + width, "gap after bucket {i}");
        }
    }

    #[test]
    fn quantiles_of_a_uniform_sample() {
        let mut h = Histogram::default();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let p50 = h.quantile(0.5).as_secs_f64() * 1e3;
        let p99 = h.quantile(0.99).as_secs_f64() * 1e3;
        assert!((p50 - 50.0).abs() < 0.5, "p50 {p50}");
        assert!((p99 - 99.0).abs() < 1.0, "p99 {p99}");
        let shared = SharedHistogram::default();
        shared.record(Duration::from_millis(3));
        let mut merged = shared.snapshot();
        merged.merge(&h);
        assert_eq!(merged.count(), 101);
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(1_234_567), "1,234,567");
        assert_eq!(fmt_count(12), "12");
        assert_eq!(fmt_duration(Duration::from_micros(850)), "850 µs");
        assert_eq!(fmt_duration(Duration::from_micros(1_500)), "1.50 ms");
        assert_eq!(fmt_ratio(0.5), "0.50×");
    }
}

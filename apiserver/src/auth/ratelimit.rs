//! Failed-authentication limiting. kube-apiserver has none of its own (it
//! leaves brute force to the token's entropy and to front proxies); here
//! each client IP has a token bucket that only failed authentications drain
//! (`burst` failures at once, refilled at `per_second`). A client whose
//! bucket is empty gets 429 with Retry-After for requests that carry a
//! bearer token until it refills, so guessing tokens runs at `per_second`
//! at best. Requests with a verified client certificate are never held
//! back. Behind a TCP proxy (deploy/haproxy.cfg) all clients share the
//! proxy's address, so a token guesser there also delays other token
//! clients for a second at a time; certificate clients are unaffected.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Most addresses tracked; past it, full (idle) buckets are dropped.
const MAX_TRACKED: usize = 10_000;

pub struct FailureLimiter {
    burst: f64,
    per_second: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Default for FailureLimiter {
    fn default() -> Self {
        FailureLimiter::new(10, 1.0)
    }
}

impl FailureLimiter {
    pub fn new(burst: u32, per_second: f64) -> Self {
        FailureLimiter {
            burst: f64::from(burst.max(1)),
            per_second: per_second.max(0.001),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn level(&self, entry: (f64, Instant), now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(entry.1).as_secs_f64();
        (entry.0 + elapsed * self.per_second).min(self.burst)
    }

    /// `Some(seconds)` to wait when `ip` has no failures left.
    pub fn blocked(&self, ip: IpAddr, now: Instant) -> Option<u32> {
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let level = self.level(*buckets.get(&ip)?, now);
        (level < 1.0).then(|| ((1.0 - level) / self.per_second).ceil().max(1.0) as u32)
    }

    /// Records one failed authentication from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&ip) {
            let burst = self.burst;
            let per_second = self.per_second;
            buckets.retain(|_, e| {
                let elapsed = now.saturating_duration_since(e.1).as_secs_f64();
                e.0 + elapsed * per_second < burst
            });
            if buckets.len() >= MAX_TRACKED {
                return;
            }
        }
        let level = buckets
            .get(&ip)
            .map(|e| self.level(*e, now))
            .unwrap_or(self.burst);
        buckets.insert(ip, ((level - 1.0).max(0.0), now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn blocks_after_burst_and_refills() {
        let l = FailureLimiter::new(3, 1.0);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        assert_eq!(l.blocked(ip, t0), None);
        for _ in 0..3 {
            l.failed(ip, t0);
        }
        assert_eq!(l.blocked(ip, t0), Some(1));
        assert_eq!(l.blocked(other, t0), None);
        assert_eq!(l.blocked(ip, t0 + Duration::from_millis(1100)), None);
    }
}

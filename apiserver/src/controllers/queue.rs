//! The work queue of a controller: keys (a namespace name, `ns/name`),
//! deduplicated, bounded, with delayed and rate-limited re-adds.
//!
//! The semantics are client-go's workqueue: a key added while it waits is
//! not added twice; a key added while a worker holds it waits until the
//! worker is `done` with it, so one key is never reconciled by two workers
//! at once. New keys wait for room once `capacity` distinct keys are
//! queued (back-pressure on the watch that feeds it); re-adds of a key a
//! worker took (`add_after`, `add_rate_limited`) never wait, as that key
//! already had its place, so at most `capacity` + workers keys are held.

use crate::metrics::QueueMetrics;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Per-key exponential back-off: `base * 2^failures`, at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    /// client-go's per-item limiter starts at 5ms; its 1000s ceiling is
    /// far too long for a server's own loops, so this one stops at 30s.
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The delay before retry number `failures + 1`.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<String>,
    /// Keys waiting to be processed (in `queue`, or held by a worker and
    /// added again meanwhile), with when each was added (the queue
    /// latency metric).
    dirty: HashMap<String, Instant>,
    processing: HashSet<String>,
    /// Delayed adds by due time; `delayed_at` holds each key's entry.
    delayed: BTreeMap<(Instant, u64), String>,
    delayed_at: HashMap<String, (Instant, u64)>,
    seq: u64,
    failures: HashMap<String, u32>,
}

impl Inner {
    fn held(&self) -> usize {
        self.dirty.len() + self.delayed.len()
    }

    /// Marks `key` dirty and queues it unless a worker holds it; false when
    /// it already waited.
    fn insert(&mut self, key: String) -> bool {
        if self.dirty.contains_key(&key) {
            return false;
        }
        if let Some(at) = self.delayed_at.remove(&key) {
            self.delayed.remove(&at);
        }
        if !self.processing.contains(&key) {
            self.queue.push_back(key.clone());
        }
        self.dirty.insert(key, Instant::now());
        true
    }

    /// Moves the delayed keys that are due into the queue; the earliest
    /// one still waiting.
    fn promote(&mut self, now: Instant) -> Option<Instant> {
        while let Some((&(at, seq), _)) = self.delayed.first_key_value() {
            if at > now {
                return Some(at);
            }
            if let Some(key) = self.delayed.remove(&(at, seq)) {
                self.delayed_at.remove(&key);
                self.insert(key);
            }
        }
        None
    }
}

pub struct WorkQueue {
    inner: Mutex<Inner>,
    capacity: usize,
    backoff: Backoff,
    /// A key became ready (or a delayed one was scheduled).
    ready: Notify,
    /// Room was made.
    room: Notify,
    metrics: Option<QueueMetrics>,
}

impl WorkQueue {
    pub fn new(capacity: usize, backoff: Backoff, metrics: Option<QueueMetrics>) -> WorkQueue {
        WorkQueue {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            backoff,
            ready: Notify::new(),
            room: Notify::new(),
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn report(&self, inner: &Inner) {
        if let Some(m) = &self.metrics {
            m.depth
                .set(i64::try_from(inner.queue.len()).unwrap_or(i64::MAX));
        }
    }

    /// Keys waiting to be handed to a worker.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `key`, waiting for room when the queue is full and `key` is
    /// not in it yet.
    pub async fn add(&self, key: &str) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut inner = self.lock();
                if inner.dirty.contains_key(key) {
                    return;
                }
                if inner.held() < self.capacity {
                    self.insert(&mut inner, key.to_string());
                    return;
                }
            }
            room.await;
        }
    }

    /// Adds `key` now unless it waits already; false when the queue is
    /// full (the caller decides: drop it, or resync later).
    pub fn try_add(&self, key: &str) -> bool {
        let mut inner = self.lock();
        if inner.dirty.contains_key(key) {
            return true;
        }
        if inner.held() >= self.capacity {
            return false;
        }
        self.insert(&mut inner, key.to_string());
        true
    }

    fn insert(&self, inner: &mut Inner, key: String) {
        if inner.insert(key) {
            if let Some(m) = &self.metrics {
                m.adds.inc();
            }
            self.report(inner);
            self.ready.notify_one();
        }
    }

    /// Adds `key` once `delay` has passed (an earlier due time wins).
    pub fn add_after(&self, key: &str, delay: Duration) {
        if delay.is_zero() {
            let mut inner = self.lock();
            self.insert(&mut inner, key.to_string());
            return;
        }
        let at = Instant::now() + delay;
        let mut inner = self.lock();
        if inner.dirty.contains_key(key) {
            return;
        }
        if let Some(&(old, _)) = inner.delayed_at.get(key) {
            if old <= at {
                return;
            }
            if let Some(prev) = inner.delayed_at.remove(key) {
                inner.delayed.remove(&prev);
            }
        }
        inner.seq += 1;
        let slot = (at, inner.seq);
        inner.delayed.insert(slot, key.to_string());
        inner.delayed_at.insert(key.to_string(), slot);
        // A waiting worker re-arms its timer on the new due time.
        self.ready.notify_waiters();
    }

    /// Adds `key` after its back-off, which doubles with each failure.
    pub fn add_rate_limited(&self, key: &str) {
        let delay = {
            let mut inner = self.lock();
            let n = inner.failures.entry(key.to_string()).or_insert(0);
            let d = self.backoff.delay(*n);
            *n = n.saturating_add(1);
            d
        };
        if let Some(m) = &self.metrics {
            m.retries.inc();
        }
        self.add_after(key, delay);
    }

    /// How many times `key` was retried since it last succeeded.
    pub fn failures(&self, key: &str) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Resets `key`'s back-off (it succeeded).
    pub fn forget(&self, key: &str) {
        self.lock().failures.remove(key);
    }

    /// The next key to work on; the caller holds it until [`Self::done`].
    pub async fn get(&self) -> String {
        loop {
            let ready = self.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            let next_due = {
                let mut inner = self.lock();
                let due = inner.promote(Instant::now());
                if let Some(key) = inner.queue.pop_front() {
                    let added = inner.dirty.remove(&key);
                    if let (Some(m), Some(added)) = (&self.metrics, added) {
                        m.latency.observe(added.elapsed().as_secs_f64());
                    }
                    inner.processing.insert(key.clone());
                    self.report(&inner);
                    drop(inner);
                    self.room.notify_waiters();
                    return key;
                }
                due
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        _ = ready => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => ready.await,
            }
        }
    }

    /// The worker is done with `key`; if it was added meanwhile it is
    /// queued again.
    pub fn done(&self, key: &str) {
        let mut inner = self.lock();
        inner.processing.remove(key);
        if inner.dirty.contains_key(key) {
            inner.queue.push_back(key.to_string());
            self.report(&inner);
            self.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(capacity: usize) -> WorkQueue {
        WorkQueue::new(capacity, Backoff::default(), None)
    }

    #[tokio::test]
    async fn a_waiting_key_is_queued_once() {
        let q = queue(10);
        q.add("a").await;
        q.add("b").await;
        q.add("a").await;
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, "a");
        assert_eq!(q.get().await, "b");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_held_comes_back_after_done() {
        let q = queue(10);
        q.add("a").await;
        let a = q.get().await;
        q.add("a").await;
        q.add("a").await;
        // Not handed to a second worker while the first holds it.
        assert!(q.is_empty());
        q.done(&a);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, "a");
        q.done("a");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_full_queue_makes_new_keys_wait() {
        let q = std::sync::Arc::new(queue(2));
        q.add("a").await;
        q.add("b").await;
        // Already there: no wait.
        q.add("a").await;
        assert!(!q.try_add("c"));
        let q2 = std::sync::Arc::clone(&q);
        let waiting = tokio::spawn(async move { q2.add("c").await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        assert_eq!(q.len(), 2);
        let a = q.get().await;
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("room was made")
            .expect("join");
        q.done(&a);
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, "b");
        assert_eq!(q.get().await, "c");
    }

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let b = Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(0), Duration::from_millis(5));
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(3), Duration::from_millis(40));
        assert_eq!(b.delay(10), Duration::from_secs(1));
        assert_eq!(b.delay(200), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn retries_wait_their_backoff_and_forget_resets_it() {
        let q = WorkQueue::new(
            10,
            Backoff {
                base: Duration::from_millis(40),
                max: Duration::from_secs(10),
            },
            None,
        );
        q.add("a").await;
        let k = q.get().await;
        q.add_rate_limited(&k);
        q.done(&k);
        assert!(q.is_empty(), "not before its delay");
        let start = Instant::now();
        assert_eq!(q.get().await, "a");
        assert!(start.elapsed() >= Duration::from_millis(35));
        q.add_rate_limited("a");
        q.done("a");
        let start = Instant::now();
        assert_eq!(q.get().await, "a");
        assert!(start.elapsed() >= Duration::from_millis(75));
        assert_eq!(q.failures("a"), 2);
        q.forget("a");
        assert_eq!(q.failures("a"), 0);
        q.done("a");
        // A plain add overtakes a pending delayed one.
        q.add_after("a", Duration::from_secs(60));
        q.add("a").await;
        assert_eq!(q.len(), 1);
    }
}

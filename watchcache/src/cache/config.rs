//! The cache's settings and its statistics.

use super::state::{Phase, WindowLimits};
use crate::storage::Revision;
use std::time::Duration;

/// Settings of the cache. `Default` is the production setting.
#[derive(Debug, Clone)]
pub struct CacherConfig {
    /// The key range cached and watched: every key starting with it (ends
    /// with `/`). Consistent reads prove freshness only if nothing else
    /// writes to etcd outside it (otherwise they fall back to etcd).
    pub prefix: String,
    /// Changes younger than this stay in the event window (at least 75 s,
    /// as kube-apiserver keeps), unless a bound below is reached.
    pub window_retention: Duration,
    /// Upper bound on the number of changes in the window.
    pub window_max_events: usize,
    /// Upper bound on the encoded bytes of the objects the window refers to.
    pub window_max_bytes: usize,
    /// A snapshot of the map every this many changes, for exact reads.
    pub checkpoint_every: usize,
    /// How long a consistent read waits for the cache to reach etcd's
    /// current revision before asking etcd itself.
    pub consistent_read_wait: Duration,
    /// How long a `NotOlderThan(n)` read (or a start at `n`) waits for the
    /// cache to reach `n`.
    pub not_older_than_wait: Duration,
    /// A bookmark per watcher about this often when the watcher is idle.
    pub bookmark_interval: Duration,
    /// How often to ask etcd whether it compacted history the cache serves.
    pub compaction_check_interval: Duration,
    /// Bound on each etcd request of the cache.
    pub etcd_timeout: Duration,
    /// Keys per page of the (re)list: kube's cacher's 10,000. etcd 3.4
    /// walks every key of the range for each page to count them, so the
    /// list costs pages × keys: with 1,000 a page, 1,000,000 keys took 239 s.
    pub list_page_size: i64,
    /// After a (re)list at revision `X`, read etcd's history from
    /// `X - backfill_revisions` (not below its compaction) into the event
    /// window, so that clients resuming a watch with a resourceVersion from
    /// before this replica started get their events instead of a 410.
    /// 0 = none (the window starts at `X`, as kube-apiserver's does).
    pub backfill_revisions: i64,
}

impl Default for CacherConfig {
    fn default() -> Self {
        CacherConfig {
            prefix: "/registry/".into(),
            window_retention: Duration::from_secs(120),
            window_max_events: 100_000,
            window_max_bytes: 256 << 20,
            checkpoint_every: 64,
            consistent_read_wait: Duration::from_secs(3),
            not_older_than_wait: Duration::from_secs(3),
            bookmark_interval: Duration::from_secs(60),
            compaction_check_interval: Duration::from_secs(30),
            etcd_timeout: Duration::from_secs(10),
            list_page_size: 10_000,
            backfill_revisions: 10_000,
        }
    }
}

impl CacherConfig {
    pub(crate) fn limits(&self) -> WindowLimits {
        WindowLimits {
            retention: self.window_retention,
            max_events: self.window_max_events,
            max_bytes: self.window_max_bytes,
            checkpoint_every: self.checkpoint_every,
        }
    }
}

/// A point-in-time view of the cache, for metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStats {
    pub phase: Phase,
    /// The revision the cache has applied.
    pub revision: Revision,
    pub objects: usize,
    pub window_events: usize,
    pub window_bytes: usize,
    /// Watches may start after any revision not below this.
    pub window_floor: Revision,
    /// The highest etcd compaction revision the cache knows of.
    pub compacted: Revision,
    /// Watchers currently open on the cache.
    pub watchers: usize,
    /// Watchers ended because they fell behind the window.
    pub terminated_watchers: u64,
    /// Consistent reads that went to etcd because the cache did not catch up
    /// in time.
    pub consistent_fallbacks: u64,
    /// Reads and watches answered by etcd instead of memory (cache not
    /// serving, revisions not retained, fallbacks).
    pub etcd_reads: u64,
    /// Quorum reads of etcd's revision made for consistent reads (each
    /// serves every consistent read queued while the previous was in
    /// flight).
    pub revision_reads: u64,
}

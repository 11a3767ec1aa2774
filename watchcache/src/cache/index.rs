//! The watcher index: watchers of a key, or of a prefix that ends at a `/`
//! (a resource, a namespace of it, or the whole registry), are found from a
//! change's key without looking at any other watcher.
//!
//! One bucket per distinct watched key or prefix, kept in the cache state
//! and updated by `apply` under the same lock as the window: for each change
//! it records the change's sequence number in the bucket of every prefix of
//! the key that ends at a `/`, and of the key itself, and wakes only those
//! buckets' watchers. A woken watcher reads the sequence numbers of its
//! bucket after its cursor and takes just those changes from the window,
//! instead of examining every change of every resource. Watchers of any
//! other prefix examine every change, as before.
//!
//! A bucket remembers at most [`MAX_SEQS`] sequence numbers; when it drops
//! older ones it says from where it is complete, and a watcher behind that
//! point examines the window change by change, which is always correct. A
//! recorded sequence number older than the window is a change the watcher
//! can no longer get: it fell behind, as when it examines every change.

use crate::storage::Revision;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::watch as notify;

/// Sequence numbers a bucket keeps (a watcher further behind examines the
/// window itself).
pub(crate) const MAX_SEQS: usize = 1024;

/// Whether a watch of `key` (`is_prefix`: of every key under it) is served
/// by the index.
pub(crate) fn indexable(key: &str, is_prefix: bool) -> bool {
    !is_prefix || key.ends_with('/')
}

#[derive(Debug)]
struct Bucket {
    /// The applied revision, sent when a change of the bucket is applied
    /// (and when the cache relists or stops).
    wake: notify::Sender<Revision>,
    /// Sequence numbers of the bucket's changes, oldest first.
    seqs: VecDeque<u64>,
    /// Every change of the bucket from this sequence number on is in
    /// `seqs`.
    complete_from: u64,
    watchers: usize,
}

/// The buckets, by watched key or prefix.
#[derive(Debug, Default)]
pub(crate) struct WatchIndex {
    buckets: HashMap<Arc<str>, Bucket>,
}

/// Where a watcher's next changes are, as the index knows it.
pub(crate) enum Lookup {
    /// The sequence numbers of its changes from the cursor on (at most
    /// `max`), and whether that is all of them.
    Seqs(Vec<u64>, bool),
    /// The index cannot tell: examine the window from the cursor.
    Scan,
}

impl WatchIndex {
    /// Registers a watcher of `key`; `next_seq` is the window's next
    /// sequence number. Returns what wakes it.
    pub fn subscribe(
        &mut self,
        key: &Arc<str>,
        next_seq: u64,
        revision: Revision,
    ) -> notify::Receiver<Revision> {
        let bucket = self.buckets.entry(key.clone()).or_insert_with(|| Bucket {
            wake: notify::channel(revision).0,
            seqs: VecDeque::new(),
            complete_from: next_seq,
            watchers: 0,
        });
        bucket.watchers += 1;
        bucket.wake.subscribe()
    }

    /// A watcher of `key` is gone.
    pub fn unsubscribe(&mut self, key: &str) {
        if let Some(bucket) = self.buckets.get_mut(key) {
            bucket.watchers = bucket.watchers.saturating_sub(1);
            if bucket.watchers == 0 {
                self.buckets.remove(key);
            }
        }
    }

    /// Records the change `seq` of `key` (at `revision`) in every bucket
    /// that covers it, and wakes their watchers.
    pub fn record(&mut self, key: &str, seq: u64, revision: Revision) {
        if self.buckets.is_empty() {
            return;
        }
        let ends = key
            .match_indices('/')
            .map(|(i, _)| i + 1)
            .chain((!key.ends_with('/')).then_some(key.len()));
        for end in ends {
            if let Some(bucket) = self.buckets.get_mut(&key[..end]) {
                if bucket.seqs.len() == MAX_SEQS {
                    bucket.seqs.pop_front();
                    bucket.complete_from = bucket.seqs.front().copied().unwrap_or(seq);
                }
                bucket.seqs.push_back(seq);
                bucket.wake.send_replace(revision);
            }
        }
    }

    /// Wakes every indexed watcher (the cache relisted or stopped).
    pub fn wake_all(&self, revision: Revision) {
        for bucket in self.buckets.values() {
            bucket.wake.send_replace(revision);
        }
    }

    /// The changes of `key`'s bucket from sequence number `cursor` on.
    pub fn lookup(&self, key: &str, cursor: u64, max: usize) -> Lookup {
        let Some(bucket) = self.buckets.get(key) else {
            return Lookup::Scan;
        };
        if cursor < bucket.complete_from {
            return Lookup::Scan;
        }
        let start = bucket.seqs.partition_point(|&s| s < cursor);
        let seqs: Vec<u64> = bucket.seqs.range(start..).take(max).copied().collect();
        let all = bucket.seqs.len() - start <= max;
        Lookup::Seqs(seqs, all)
    }
}

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
//! A watcher whose label selector pins a label (`app=web`, `app in (web)`)
//! has a bucket of its key or prefix *and* that label: a change lands there
//! when the object has the label before or after the change (so a watcher
//! also learns of objects that stop matching). A selector pins nothing else
//! for the index; the watcher still checks its whole predicate.
//!
//! A bucket remembers at most [`MAX_SEQS`] sequence numbers; when it drops
//! older ones it says from where it is complete, and a watcher behind that
//! point examines the window change by change, which is always correct. A
//! recorded sequence number older than the window is a change the watcher
//! can no longer get: it fell behind, as when it examines every change.

use crate::storage::{Object, Revision};
use apimachinery::selector::{LabelSelector, Operator};
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

/// Which bucket a watcher is in: its key or prefix, and the label its
/// selector pins, if any.
#[derive(Debug, Clone)]
pub(crate) struct BucketId {
    pub key: Arc<str>,
    pub label: Option<(Box<str>, Box<str>)>,
}

impl BucketId {
    /// The bucket of a watcher of `key` with this label selector: the first
    /// requirement that pins one value (`=`, `==`, `in` of one).
    pub fn new(key: Arc<str>, selector: &LabelSelector) -> BucketId {
        let label = selector
            .requirements()
            .iter()
            .find_map(|r| match (r.operator(), r.values()) {
                (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => {
                    Some((Box::from(r.key()), Box::from(v.as_str())))
                }
                _ => None,
            });
        BucketId { key, label }
    }
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

/// Buckets by label key, then value.
type ByLabel = HashMap<Box<str>, HashMap<Box<str>, Bucket>>;

/// The buckets, by watched key or prefix (and label).
#[derive(Debug, Default)]
pub(crate) struct WatchIndex {
    buckets: HashMap<Arc<str>, Bucket>,
    labelled: HashMap<Arc<str>, ByLabel>,
}

/// Where a watcher's next changes are, as the index knows it.
pub(crate) enum Lookup {
    /// The sequence numbers of its changes from the cursor on (at most
    /// `max`), and whether that is all of them.
    Seqs(Vec<u64>, bool),
    /// The index cannot tell: examine the window from the cursor.
    Scan,
}

impl Bucket {
    fn new(next_seq: u64, revision: Revision) -> Bucket {
        Bucket {
            wake: notify::channel(revision).0,
            seqs: VecDeque::new(),
            complete_from: next_seq,
            watchers: 0,
        }
    }

    fn push(&mut self, seq: u64, revision: Revision) {
        if self.seqs.back() == Some(&seq) {
            // The same change, seen through its old and new labels.
            return;
        }
        if self.seqs.len() == MAX_SEQS {
            self.seqs.pop_front();
            self.complete_from = self.seqs.front().copied().unwrap_or(seq);
        }
        self.seqs.push_back(seq);
        self.wake.send_replace(revision);
    }
}

/// The labels of an object, as `(key, value)` (a compact object's are
/// read without decoding it).
fn labels(object: Option<&Object>) -> impl Iterator<Item = (&str, &str)> {
    object
        .and_then(Object::labels)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
}

impl WatchIndex {
    fn bucket_mut(&mut self, id: &BucketId) -> Option<&mut Bucket> {
        match &id.label {
            None => self.buckets.get_mut(&*id.key),
            Some((k, v)) => self.labelled.get_mut(&*id.key)?.get_mut(k)?.get_mut(v),
        }
    }

    fn bucket(&self, id: &BucketId) -> Option<&Bucket> {
        match &id.label {
            None => self.buckets.get(&*id.key),
            Some((k, v)) => self.labelled.get(&*id.key)?.get(k)?.get(v),
        }
    }

    /// Registers a watcher; `next_seq` is the window's next sequence
    /// number. Returns what wakes it.
    pub fn subscribe(
        &mut self,
        id: &BucketId,
        next_seq: u64,
        revision: Revision,
    ) -> notify::Receiver<Revision> {
        let bucket = match &id.label {
            None => self
                .buckets
                .entry(id.key.clone())
                .or_insert_with(|| Bucket::new(next_seq, revision)),
            Some((k, v)) => self
                .labelled
                .entry(id.key.clone())
                .or_default()
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_insert_with(|| Bucket::new(next_seq, revision)),
        };
        bucket.watchers += 1;
        bucket.wake.subscribe()
    }

    /// A watcher is gone.
    pub fn unsubscribe(&mut self, id: &BucketId) {
        let Some(bucket) = self.bucket_mut(id) else {
            return;
        };
        bucket.watchers = bucket.watchers.saturating_sub(1);
        if bucket.watchers > 0 {
            return;
        }
        match &id.label {
            None => {
                self.buckets.remove(&*id.key);
            }
            Some((k, v)) => {
                if let Some(by_label) = self.labelled.get_mut(&*id.key) {
                    if let Some(values) = by_label.get_mut(k) {
                        values.remove(v);
                        if values.is_empty() {
                            by_label.remove(k);
                        }
                    }
                    if by_label.is_empty() {
                        self.labelled.remove(&*id.key);
                    }
                }
            }
        }
    }

    /// Records the change `seq` of `key` (at `revision`; the object after
    /// and before it) in every bucket that covers it, and wakes their
    /// watchers.
    pub fn record(
        &mut self,
        key: &str,
        object: Option<&Object>,
        prev: Option<&Object>,
        seq: u64,
        revision: Revision,
    ) {
        if self.buckets.is_empty() && self.labelled.is_empty() {
            return;
        }
        let ends = key
            .match_indices('/')
            .map(|(i, _)| i + 1)
            .chain((!key.ends_with('/')).then_some(key.len()));
        for end in ends {
            let covering = &key[..end];
            if let Some(bucket) = self.buckets.get_mut(covering) {
                bucket.push(seq, revision);
            }
            let Some(by_label) = self.labelled.get_mut(covering) else {
                continue;
            };
            for (k, v) in labels(object).chain(labels(prev)) {
                if let Some(bucket) = by_label.get_mut(k).and_then(|values| values.get_mut(v)) {
                    bucket.push(seq, revision);
                }
            }
        }
    }

    /// Wakes every indexed watcher (the cache relisted or stopped).
    pub fn wake_all(&self, revision: Revision) {
        let labelled = self
            .labelled
            .values()
            .flat_map(|by_label| by_label.values())
            .flat_map(|values| values.values());
        for bucket in self.buckets.values().chain(labelled) {
            bucket.wake.send_replace(revision);
        }
    }

    /// The changes of a watcher's bucket from sequence number `cursor` on.
    pub fn lookup(&self, id: &BucketId, cursor: u64, max: usize) -> Lookup {
        let Some(bucket) = self.bucket(id) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(key: &str, selector: &str) -> BucketId {
        BucketId::new(Arc::from(key), &LabelSelector::parse(selector).unwrap())
    }

    fn labelled(app: &str) -> Object {
        Object::new(
            Arc::new(json!({"metadata": {"labels": {"app": app, "tier": "x"}}})),
            1,
        )
    }

    fn seqs(index: &WatchIndex, id: &BucketId, cursor: u64) -> Vec<u64> {
        match index.lookup(id, cursor, 100) {
            Lookup::Seqs(seqs, true) => seqs,
            Lookup::Seqs(_, false) => panic!("more than 100"),
            Lookup::Scan => panic!("scan"),
        }
    }

    #[test]
    fn a_change_reaches_the_buckets_of_its_prefixes_key_and_labels() {
        let mut index = WatchIndex::default();
        let ns = id("/r/cm/a/", "");
        let other_ns = id("/r/cm/b/", "");
        let resource = id("/r/cm/", "");
        let key = id("/r/cm/a/x", "");
        let web = id("/r/cm/a/", "app=web,tier!=y");
        let web_in = id("/r/cm/", "app in (web)");
        let set = id("/r/cm/a/", "app in (web,db)");
        assert!(set.label.is_none(), "an `in` of two pins nothing");
        for b in [&ns, &other_ns, &resource, &key, &web, &web_in] {
            index.subscribe(b, 10, 1);
        }
        let web_obj = labelled("web");
        let db_obj = labelled("db");
        index.record("/r/cm/a/x", Some(&web_obj), None, 10, 5);
        index.record("/r/cm/a/y", Some(&db_obj), None, 11, 6);
        // Relabelled from web to db: the web watchers learn it stopped
        // matching; recorded once although both labels are seen.
        index.record("/r/cm/a/x", Some(&db_obj), Some(&web_obj), 12, 7);
        index.record("/r/cm/b/z", None, Some(&web_obj), 13, 8);
        assert_eq!(seqs(&index, &ns, 10), [10, 11, 12]);
        assert_eq!(seqs(&index, &ns, 11), [11, 12]);
        assert_eq!(seqs(&index, &other_ns, 10), [13]);
        assert_eq!(seqs(&index, &resource, 10), [10, 11, 12, 13]);
        assert_eq!(seqs(&index, &key, 10), [10, 12]);
        assert_eq!(seqs(&index, &web, 10), [10, 12]);
        assert_eq!(seqs(&index, &web_in, 10), [10, 12, 13]);
        // Before the bucket's start the index cannot tell.
        assert!(matches!(index.lookup(&ns, 9, 100), Lookup::Scan));
    }

    #[test]
    fn buckets_are_bounded_and_removed_with_their_last_watcher() {
        let mut index = WatchIndex::default();
        let ns = id("/r/cm/a/", "app=web");
        index.subscribe(&ns, 0, 0);
        index.subscribe(&ns, 0, 0);
        let obj = labelled("web");
        let n = MAX_SEQS as u64 + 10;
        for seq in 0..n {
            index.record("/r/cm/a/x", Some(&obj), None, seq, seq as i64);
        }
        assert!(matches!(index.lookup(&ns, 5, 100), Lookup::Scan), "dropped");
        match index.lookup(&ns, n - 3, 2) {
            Lookup::Seqs(seqs, all) => {
                assert_eq!(seqs, [n - 3, n - 2]);
                assert!(!all);
            }
            Lookup::Scan => panic!("scan"),
        }
        index.unsubscribe(&ns);
        assert!(index.bucket(&ns).is_some());
        index.unsubscribe(&ns);
        assert!(index.bucket(&ns).is_none());
        assert!(index.labelled.is_empty() && index.buckets.is_empty());
    }
}

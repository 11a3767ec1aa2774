//! The cache's data, written only by the reflector task: the current objects
//! (a persistent ordered map keyed by etcd key), the window of recent
//! changes, and checkpoints of the map for reads at past revisions.
//!
//! Readers take the read lock only to clone what they need (an `OrdMap` clone
//! is O(1), a change is an `Arc`) and do their work after releasing it.

use super::index::WatchIndex;
use crate::storage::{Object, Revision};
use imbl::OrdMap;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// The objects of the cache, by etcd key.
pub(crate) type Objects = OrdMap<Arc<str>, Cached>;

/// Per-change bookkeeping counted against the window's byte budget, on top
/// of the encoded sizes of the objects it refers to.
const CHANGE_OVERHEAD: usize = 160;

/// One object as cached.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    pub object: Object,
    /// Size of the stored (encoded) value in etcd: what the window's byte
    /// budget counts.
    pub size: usize,
}

/// Where the cache is in its life.
///
/// ```text
///   Pending ──first list──▶ Ready ──etcd compacted past the cache──▶ Relisting
///                            ▲  │                                      │
///                            │  └─ watch broke: resume from the last   │
///                            │     applied revision, stays Ready       │
///                            └────────────── list done ────────────────┘
///   any ──Cacher dropped──▶ Stopped
/// ```
///
/// Only `Ready` serves reads and watches from memory; in the other phases
/// they go to etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No list has completed yet: the replica is not ready (`/readyz`).
    Pending,
    /// Serving from memory, following etcd's watch (or resuming it).
    Ready,
    /// etcd compacted past the last applied revision: listing again to
    /// rebuild; the watchers of the old generation are ended.
    Relisting,
    /// The cache was dropped; its watchers end.
    Stopped,
}

/// What the reflector decoded from one etcd event.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub key: Arc<str>,
    pub revision: Revision,
    /// `None` = the key was deleted (or its value no longer decodes).
    pub put: Option<Put>,
}

#[derive(Debug)]
pub(crate) struct Put {
    pub object: Object,
    pub size: usize,
    /// The key was created by this event (etcd create == mod revision).
    pub created: bool,
}

/// One applied change, shared by every watcher (never copied per watcher).
#[derive(Debug)]
pub(crate) struct Change {
    pub revision: Revision,
    pub key: Arc<str>,
    pub created: bool,
    /// The new state; `None` for a deletion.
    pub object: Option<Object>,
    /// The state before; `None` for a creation.
    pub prev: Option<Object>,
    /// `prev` carrying this change's revision (what `DELETED` sends), made
    /// once on first use.
    prev_at_revision: OnceLock<Object>,
    size: usize,
    applied_at: Instant,
}

impl Change {
    /// A change read back from etcd's history (with its previous value).
    pub fn from_history(
        revision: Revision,
        key: Arc<str>,
        put: Option<Put>,
        prev: Option<Cached>,
        applied_at: Instant,
    ) -> Change {
        let prev_size = prev.as_ref().map_or(0, |p| p.size);
        let (object, size, created) = match put {
            Some(put) => (Some(put.object), put.size, put.created),
            None => (None, 0, false),
        };
        Change {
            revision,
            key,
            created,
            object,
            prev: prev.map(|p| p.object),
            prev_at_revision: OnceLock::new(),
            size: size + prev_size + CHANGE_OVERHEAD,
            applied_at,
        }
    }

    /// The previous state with `resourceVersion` = this change's revision.
    pub fn prev_at_revision(&self) -> Option<&Object> {
        let prev = self.prev.as_ref()?;
        Some(
            self.prev_at_revision
                .get_or_init(|| prev.with_revision(self.revision)),
        )
    }
}

/// Bounds of the event window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowLimits {
    /// Changes younger than this are kept unless a hard bound is exceeded.
    pub retention: Duration,
    pub max_events: usize,
    pub max_bytes: usize,
    /// A checkpoint of the map every this many changes.
    pub checkpoint_every: usize,
}

/// The map as it was after every change before `next_seq`.
#[derive(Debug, Clone)]
struct Checkpoint {
    revision: Revision,
    next_seq: u64,
    objects: Objects,
}

/// The recent changes, in the order etcd produced them, numbered by a
/// sequence that never restarts (a watcher's cursor is a sequence number).
#[derive(Debug)]
pub(crate) struct Window {
    events: VecDeque<Arc<Change>>,
    /// Sequence number of `events[0]`.
    first_seq: u64,
    /// Every change after this revision was received (the list's revision,
    /// or the start of the backfilled history once it is complete).
    floor: Revision,
    /// The revision of the last change dropped from the front.
    evicted: Revision,
    bytes: usize,
    checkpoints: VecDeque<Checkpoint>,
    since_checkpoint: usize,
}

impl Window {
    fn new() -> Self {
        Window {
            events: VecDeque::new(),
            first_seq: 0,
            floor: 0,
            evicted: 0,
            bytes: 0,
            checkpoints: VecDeque::new(),
            since_checkpoint: 0,
        }
    }

    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// The sequence number the next change will get.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.events.len() as u64
    }

    /// Every change after this revision is retained: a watch may start at
    /// any revision not below it.
    pub fn floor(&self) -> Revision {
        self.floor.max(self.evicted)
    }

    /// The oldest revision whose full state can be rebuilt.
    pub fn exact_floor(&self) -> Option<Revision> {
        self.checkpoints.front().map(|c| c.revision)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The sequence number of the first change after `revision`.
    pub fn seq_after(&self, revision: Revision) -> u64 {
        self.first_seq + self.events.partition_point(|c| c.revision <= revision) as u64
    }

    /// The change numbered `seq`, if the window still holds it.
    pub fn get(&self, seq: u64) -> Option<&Arc<Change>> {
        self.events
            .get(usize::try_from(seq.checked_sub(self.first_seq)?).ok()?)
    }

    /// Up to `max` changes from sequence number `from` (which must not be
    /// older than `first_seq`).
    pub fn changes_from(&self, from: u64, max: usize) -> Vec<Arc<Change>> {
        let start = usize::try_from(from.saturating_sub(self.first_seq))
            .unwrap_or(usize::MAX)
            .min(self.events.len());
        self.events.range(start..).take(max).cloned().collect()
    }

    fn reset(&mut self, revision: Revision, objects: &Objects) {
        self.first_seq = self.next_seq();
        self.events.clear();
        self.floor = revision;
        self.evicted = 0;
        self.bytes = 0;
        self.checkpoints.clear();
        self.since_checkpoint = 0;
        self.checkpoint(revision, objects);
    }

    fn checkpoint(&mut self, revision: Revision, objects: &Objects) {
        self.checkpoints.push_back(Checkpoint {
            revision,
            next_seq: self.next_seq(),
            objects: objects.clone(),
        });
        self.since_checkpoint = 0;
    }

    fn push(&mut self, change: Change) {
        self.bytes += change.size;
        self.events.push_back(Arc::new(change));
        self.since_checkpoint += 1;
    }

    /// Drops the oldest changes while the window is over a bound or they are
    /// older than the retention, then the checkpoints that need them.
    fn evict(
        &mut self,
        now: Instant,
        limits: &WindowLimits,
        revision: Revision,
        objects: &Objects,
    ) {
        while let Some(front) = self.events.front() {
            let over = self.events.len() > limits.max_events || self.bytes > limits.max_bytes;
            let old = now.saturating_duration_since(front.applied_at) > limits.retention;
            if !over && !old {
                break;
            }
            self.evicted = front.revision;
            self.bytes = self.bytes.saturating_sub(front.size);
            self.events.pop_front();
            self.first_seq += 1;
        }
        while self
            .checkpoints
            .front()
            .is_some_and(|c| c.next_seq < self.first_seq)
        {
            self.checkpoints.pop_front();
        }
        if self.checkpoints.is_empty() {
            self.checkpoint(revision, objects);
        }
    }
}

/// Everything the reflector maintains, behind the cache's lock.
#[derive(Debug)]
pub(crate) struct CacheState {
    pub phase: Phase,
    /// Bumped by every (re)list: watchers of an older generation end.
    pub generation: u64,
    /// Every change up to this revision has been applied, none after it.
    pub revision: Revision,
    pub objects: Objects,
    pub window: Window,
    /// The highest etcd compaction revision known (0 = none known). Reads
    /// below it answer as etcd would (410), even when memory still has them.
    pub compacted: Revision,
    /// The watchers of keys and `/`-ended prefixes, by key or prefix.
    pub index: WatchIndex,
}

impl CacheState {
    pub fn new() -> Self {
        CacheState {
            phase: Phase::Pending,
            generation: 0,
            revision: 0,
            objects: Objects::new(),
            window: Window::new(),
            compacted: 0,
            index: WatchIndex::default(),
        }
    }

    /// Replaces the content with a fresh list read at `revision`.
    pub fn install(&mut self, objects: Objects, revision: Revision) {
        self.objects = objects;
        self.revision = revision;
        self.generation += 1;
        self.window.reset(revision, &self.objects);
        self.phase = Phase::Ready;
        // The watchers of the old generation must learn that they ended.
        self.index.wake_all(revision);
    }

    /// Applies the changes of one etcd watch response, in order. Changes at
    /// or below the applied revision (a resumed watch's overlap) are skipped.
    pub fn apply(&mut self, batch: Vec<Incoming>, now: Instant, limits: &WindowLimits) {
        let base = self.revision;
        for incoming in batch {
            if incoming.revision <= base {
                continue;
            }
            self.revision = self.revision.max(incoming.revision);
            let prev = self.objects.get(&*incoming.key).cloned();
            let prev_size = prev.as_ref().map_or(0, |p| p.size);
            let (object, size, created) = match incoming.put {
                Some(put) => {
                    self.objects.insert(
                        incoming.key.clone(),
                        Cached {
                            object: put.object.clone(),
                            size: put.size,
                        },
                    );
                    (Some(put.object), put.size, put.created)
                }
                None => {
                    if prev.is_none() {
                        // Nothing cached under this key: nobody can have
                        // seen it, so there is nothing to tell.
                        continue;
                    }
                    self.objects.remove(&*incoming.key);
                    (None, 0, false)
                }
            };
            let seq = self.window.next_seq();
            self.index.record(
                &incoming.key,
                object.as_ref(),
                prev.as_ref().map(|p| &p.object),
                seq,
                incoming.revision,
            );
            self.window.push(Change {
                revision: incoming.revision,
                key: incoming.key,
                created,
                object,
                prev: prev.map(|p| p.object),
                prev_at_revision: OnceLock::new(),
                size: size + prev_size + CHANGE_OVERHEAD,
                applied_at: now,
            });
        }
        if self.window.since_checkpoint >= limits.checkpoint_every.max(1) {
            self.window.checkpoint(self.revision, &self.objects);
        }
        self.evict(now, limits);
    }

    /// Applies the window's bounds (also called periodically, so an idle
    /// window shrinks with time).
    pub fn evict(&mut self, now: Instant, limits: &WindowLimits) {
        self.window.evict(now, limits, self.revision, &self.objects);
    }

    /// Appends changes from before the list's revision (history read back
    /// from etcd after a (re)list, see `CacherConfig::backfill_revisions`).
    /// They come in order and before any live change (one etcd watch
    /// delivers both), never touch the map, and become visible to watchers
    /// starting below the list's revision only once [`Self::backfilled`]
    /// lowers the floor.
    pub fn backfill(&mut self, changes: Vec<Change>, limits: &WindowLimits) {
        for change in changes {
            if change.revision > self.revision {
                continue;
            }
            let seq = self.window.next_seq();
            self.index.record(
                &change.key,
                change.object.as_ref(),
                change.prev.as_ref(),
                seq,
                change.revision,
            );
            self.window.push(change);
        }
        let now = Instant::now();
        self.evict(now, limits);
    }

    /// Every change after `from` up to the list's revision is in the window.
    pub fn backfilled(&mut self, from: Revision) {
        self.window.floor = self.window.floor.min(from);
    }

    /// What it takes to rebuild the state at `revision`: the newest
    /// checkpoint not after it and the changes from there up to `revision`
    /// (see [`replay`]). `None` when `revision` is outside
    /// `[exact_floor, revision]`.
    pub fn state_at(&self, revision: Revision) -> Option<(Objects, Vec<Arc<Change>>)> {
        if revision > self.revision {
            return None;
        }
        let checkpoint = self
            .window
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.revision <= revision)?;
        let skip = usize::try_from(checkpoint.next_seq.checked_sub(self.window.first_seq)?).ok()?;
        let changes = self
            .window
            .events
            .range(skip.min(self.window.events.len())..)
            // Backfilled history older than the checkpoint is in it already.
            .filter(|c| c.revision > checkpoint.revision)
            .take_while(|c| c.revision <= revision)
            .cloned()
            .collect();
        Some((checkpoint.objects.clone(), changes))
    }
}

/// Applies `changes` to `objects` (outside the lock).
pub(crate) fn replay(mut objects: Objects, changes: &[Arc<Change>]) -> Objects {
    for change in changes {
        match &change.object {
            Some(object) => {
                objects.insert(
                    change.key.clone(),
                    Cached {
                        object: object.clone(),
                        size: 0,
                    },
                );
            }
            None => {
                objects.remove(&*change.key);
            }
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> WindowLimits {
        WindowLimits {
            retention: Duration::from_secs(60),
            max_events: 1000,
            max_bytes: usize::MAX,
            checkpoint_every: 3,
        }
    }

    fn put(key: &str, revision: Revision, data: &str, created: bool) -> Incoming {
        let value = json!({"metadata": {"name": key}, "data": data});
        Incoming {
            key: Arc::from(key),
            revision,
            put: Some(Put {
                object: Object::at_revision(value, revision),
                size: 10,
                created,
            }),
        }
    }

    fn delete(key: &str, revision: Revision) -> Incoming {
        Incoming {
            key: Arc::from(key),
            revision,
            put: None,
        }
    }

    fn keys(objects: &Objects) -> Vec<(String, Revision)> {
        objects
            .iter()
            .map(|(k, v)| (k.to_string(), v.object.revision))
            .collect()
    }

    #[test]
    fn state_at_every_revision_is_rebuilt() {
        let now = Instant::now();
        let mut state = CacheState::new();
        state.install(Objects::new(), 10);
        let mut history = vec![(10, Vec::new())];
        let ops = [
            put("/a", 11, "1", true),
            put("/b", 12, "1", true),
            put("/a", 13, "2", false),
            delete("/b", 14),
            put("/c", 15, "1", true),
            put("/b", 16, "2", true),
            delete("/a", 17),
        ];
        for op in ops {
            state.apply(vec![op], now, &limits());
            history.push((state.revision, keys(&state.objects)));
        }
        for (revision, expected) in history {
            let Some((base, changes)) = state.state_at(revision) else {
                panic!("state at {revision} is retained");
            };
            assert_eq!(keys(&replay(base, &changes)), expected, "at {revision}");
        }
        assert!(state.state_at(18).is_none());
        assert_eq!(state.window.seq_after(13), state.window.first_seq() + 3);
    }

    #[test]
    fn window_is_bounded_and_keeps_a_checkpoint() {
        let now = Instant::now();
        let mut state = CacheState::new();
        state.install(Objects::new(), 1);
        let mut small = limits();
        small.max_events = 4;
        for revision in 2..20 {
            state.apply(vec![put("/a", revision, "x", revision == 2)], now, &small);
        }
        assert_eq!(state.window.len(), 4);
        assert_eq!(state.window.floor(), 15);
        let exact = state.window.exact_floor().unwrap_or(0);
        assert!(exact >= 15, "oldest checkpoint {exact}");
        assert!(state.state_at(exact).is_some());
        assert!(state.state_at(exact - 1).is_none());

        // Time alone shrinks an idle window.
        state.evict(now + Duration::from_secs(61), &small);
        assert_eq!(state.window.len(), 0);
        assert_eq!(state.window.floor(), 19);
        assert_eq!(state.window.exact_floor(), Some(19));
    }

    #[test]
    fn backfilled_history_is_served_once_complete() {
        let now = Instant::now();
        let mut state = CacheState::new();
        let mut listed = Objects::new();
        let a = put("/a", 12, "2", false);
        if let Some(p) = &a.put {
            listed.insert(
                Arc::from("/a"),
                Cached {
                    object: p.object.clone(),
                    size: 10,
                },
            );
        }
        state.install(listed, 12);
        let history = |incoming: Incoming, prev: Option<Incoming>| {
            let prev = prev.and_then(|p| p.put).map(|p| Cached {
                object: p.object,
                size: p.size,
            });
            Change::from_history(incoming.revision, incoming.key, incoming.put, prev, now)
        };
        state.backfill(
            vec![
                history(put("/a", 10, "1", true), None),
                history(put("/a", 12, "2", false), Some(put("/a", 10, "1", true))),
            ],
            &limits(),
        );
        // Not complete yet: watches may start at the list's revision only.
        assert_eq!(state.window.floor(), 12);
        state.backfilled(9);
        assert_eq!(state.window.floor(), 9);
        assert_eq!(state.window.seq_after(9), state.window.first_seq());
        // The map is untouched, and rebuilding the state at the list's
        // revision does not replay the history into it.
        state.apply(vec![put("/b", 13, "1", true)], now, &limits());
        let at = |revision| {
            state
                .state_at(revision)
                .map(|(base, changes)| keys(&replay(base, &changes)))
        };
        assert_eq!(at(12), Some(vec![("/a".to_string(), 12)]));
        assert_eq!(
            at(13),
            Some(vec![("/a".to_string(), 12), ("/b".to_string(), 13)])
        );
        assert_eq!(at(11), None, "older states are etcd's to answer");
    }

    #[test]
    fn deletes_carry_the_last_state_at_their_revision() {
        let now = Instant::now();
        let mut state = CacheState::new();
        state.install(Objects::new(), 1);
        state.apply(
            vec![put("/a", 2, "1", true), delete("/a", 3)],
            now,
            &limits(),
        );
        // A delete of a key never cached is not a change.
        state.apply(vec![delete("/zz", 4)], now, &limits());
        assert_eq!(state.revision, 4);
        let changes = state.window.changes_from(state.window.first_seq(), 10);
        assert_eq!(changes.len(), 2);
        let gone = changes[1]
            .prev_at_revision()
            .map(|o| (o.revision, o.value()["data"].clone()));
        assert_eq!(gone, Some((3, json!("1"))));
        assert_eq!(
            changes[1]
                .prev_at_revision()
                .map(|o| o.value()["metadata"]["resourceVersion"].clone()),
            Some(json!("3"))
        );
    }
}

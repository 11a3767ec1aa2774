//! One watcher: a stream over the shared window of changes.
//!
//! There is no per-watcher copy of the changes: the reflector appends each
//! change once to the window (the broadcast) and wakes the watchers; each
//! watcher keeps a cursor (a sequence number) into the window and, when
//! polled, takes at most [`BATCH`] changes (`Arc`s) under the read lock,
//! filters them outside it and yields the result. That batch is the
//! watcher's bounded queue. The stream is driven by the HTTP response body,
//! so a slow client simply stops polling; its cursor stays behind, and when
//! the window drops the changes it has not read the watcher is ended (the
//! stream closes without an error: the client watches again from the last
//! resourceVersion it received) and counted in `terminated_watchers`. A slow
//! watcher therefore costs a cursor, never memory that grows.
//!
//! Lifecycle:
//!
//! ```text
//!   InitialEvents ──snapshot sent──▶ (Bookmark at the snapshot revision) ──▶ Watching
//!   Watching ──window dropped unread changes──▶ Closing(None)  (counted)
//!   Watching ──cache relisted (new generation)──▶ Closing(Compacted)  (410)
//!   Watching ──cache stopped──▶ Closing(Unavailable)
//!   Closing ──▶ Done
//! ```

use super::index::{self, BucketId, Lookup};
use super::state::{Change, Objects, Phase};
use super::Shared;
use crate::storage::{EventType, Object, Result, Revision, StorageError, WatchEvent, WatchStream};
use apimachinery::read::Predicate;
use std::collections::VecDeque;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// Changes taken from the window at a time.
pub(crate) const BATCH: usize = 256;
/// Initial events prepared at a time (the snapshot is walked lazily, so
/// the initial state is sent with backpressure and never held twice).
const INITIAL_CHUNK: usize = 256;
/// Keys examined per step of the initial walk when a selector skips most.
const INITIAL_SCAN: usize = 4096;

/// What the watcher follows.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// A key, or a prefix when `is_prefix`.
    pub key: Arc<str>,
    pub is_prefix: bool,
    pub predicate: Predicate,
}

impl Target {
    fn covers(&self, key: &str) -> bool {
        if self.is_prefix {
            key.starts_with(&*self.key)
        } else {
            key == &*self.key
        }
    }
}

/// Where a new watcher starts.
pub(crate) enum Start {
    /// Send `snapshot` (the state at `revision`) as `Added`, then a bookmark
    /// at `revision`, then the changes from `cursor`.
    Initial {
        snapshot: Objects,
        revision: Revision,
        cursor: u64,
        generation: u64,
    },
    /// The changes after `after`, from `cursor`.
    Live {
        after: Revision,
        cursor: u64,
        generation: u64,
    },
}

enum Stage {
    InitialEvents {
        snapshot: Objects,
        revision: Revision,
        /// The last key examined.
        last: Option<Arc<str>>,
    },
    Watching,
    Closing(Option<StorageError>),
    Done,
}

/// Outcome of one look at the window.
enum Fill {
    /// Events are ready.
    Output,
    /// Changes were read, none for this watcher, more are waiting.
    Progress,
    /// Caught up with the window.
    Idle,
    End(Option<StorageError>),
}

struct Watcher {
    shared: Arc<Shared>,
    target: Target,
    /// Changes at or before this revision are not sent.
    after: Revision,
    stage: Stage,
    cursor: u64,
    generation: u64,
    /// Every change up to this revision has been examined (what a bookmark
    /// may claim).
    consumed: Revision,
    out: VecDeque<WatchEvent>,
    /// Woken by the index's bucket (only when a change of it is applied)
    /// when `bucket` is set, else by every applied change.
    wake: watch::Receiver<Revision>,
    bucket: Option<BucketId>,
    /// When the next bookmark is due; the timer is kept between waits
    /// (registering a new one on every wake-up costs more than the rest of
    /// an idle wake-up).
    bookmark_timer: Pin<Box<tokio::time::Sleep>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.watchers.fetch_sub(1, Ordering::Relaxed);
        if let Some(bucket) = &self.bucket {
            self.shared.write().index.unsubscribe(bucket);
        }
    }
}

/// A watch stream following the cache from `start`.
pub(crate) fn stream(shared: Arc<Shared>, target: Target, start: Start) -> WatchStream {
    shared.watchers.fetch_add(1, Ordering::Relaxed);
    let bucket = index::indexable(&target.key, target.is_prefix)
        .then(|| BucketId::new(target.key.clone(), &target.predicate.label));
    let wake = match &bucket {
        Some(bucket) => {
            let mut state = shared.write();
            let (next_seq, revision) = (state.window.next_seq(), state.revision);
            state.index.subscribe(bucket, next_seq, revision)
        }
        None => shared.applied.subscribe(),
    };
    let next_bookmark = Instant::now() + shared.config.bookmark_interval;
    let (stage, after, cursor, generation) = match start {
        Start::Initial {
            snapshot,
            revision,
            cursor,
            generation,
        } => (
            Stage::InitialEvents {
                snapshot,
                revision,
                last: None,
            },
            revision,
            cursor,
            generation,
        ),
        Start::Live {
            after,
            cursor,
            generation,
        } => (Stage::Watching, after, cursor, generation),
    };
    let watcher = Watcher {
        shared,
        target,
        after,
        stage,
        cursor,
        generation,
        consumed: after,
        out: VecDeque::new(),
        wake,
        bucket,
        bookmark_timer: Box::pin(tokio::time::sleep_until(next_bookmark)),
    };
    Box::pin(futures_util::stream::unfold(watcher, |mut w| async move {
        w.next().await.map(|item| (item, w))
    }))
}

/// A stream whose only item is `err` (a watch that cannot start).
pub(crate) fn error_stream(err: StorageError) -> WatchStream {
    Box::pin(futures_util::stream::iter([Err(err)]))
}

impl Watcher {
    async fn next(&mut self) -> Option<Result<WatchEvent>> {
        loop {
            if let Some(event) = self.out.pop_front() {
                return Some(Ok(event));
            }
            match &mut self.stage {
                Stage::Done => return None,
                Stage::Closing(err) => {
                    let err = err.take();
                    self.stage = Stage::Done;
                    return err.map(Err);
                }
                Stage::InitialEvents { .. } => self.fill_initial(),
                Stage::Watching => match self.fill_live() {
                    Fill::Output => {}
                    Fill::Progress => tokio::task::yield_now().await,
                    Fill::End(err) => self.stage = Stage::Closing(err),
                    Fill::Idle => self.idle().await,
                },
            }
        }
    }

    /// Nothing to send: a bookmark when one is due, else wait for a change
    /// or for the bookmark time.
    async fn idle(&mut self) {
        if Instant::now() >= self.bookmark_timer.deadline() {
            let next = Instant::now() + self.shared.config.bookmark_interval;
            self.bookmark_timer.as_mut().reset(next);
            self.out.push_back(WatchEvent {
                kind: EventType::Bookmark,
                object: Object::bookmark(self.consumed.max(self.after)),
            });
            return;
        }
        tokio::select! {
            changed = self.wake.changed() => {
                if changed.is_err() {
                    self.stage = Stage::Closing(Some(stopped()));
                }
            }
            _ = &mut self.bookmark_timer => {}
        }
    }

    /// Prepares the next chunk of the initial state; after the last one, the
    /// bookmark marking its end.
    fn fill_initial(&mut self) {
        let Stage::InitialEvents {
            snapshot,
            revision,
            last,
        } = &mut self.stage
        else {
            return;
        };
        let predicate = &self.target.predicate;
        let mut finished = true;
        if self.target.is_prefix {
            let lower = match last {
                Some(key) => Bound::Excluded(&**key),
                None => Bound::Included(&*self.target.key),
            };
            let mut examined = 0;
            let mut next_last = None;
            for (key, cached) in snapshot.range::<_, str>((lower, Bound::Unbounded)) {
                if !key.starts_with(&*self.target.key) {
                    break;
                }
                examined += 1;
                next_last = Some(key.clone());
                if cached.object.matches(predicate) {
                    self.out.push_back(added(cached.object.clone()));
                }
                if self.out.len() >= INITIAL_CHUNK || examined >= INITIAL_SCAN {
                    finished = false;
                    break;
                }
            }
            if next_last.is_some() {
                *last = next_last;
            }
        } else if let Some(cached) = snapshot.get(&*self.target.key) {
            if cached.object.matches(predicate) {
                self.out.push_back(added(cached.object.clone()));
            }
        }
        if finished {
            let revision = *revision;
            self.out.push_back(WatchEvent {
                kind: EventType::Bookmark,
                object: Object::bookmark(revision),
            });
            self.consumed = revision;
            self.stage = Stage::Watching;
        }
    }

    /// Reads the next changes from the window.
    fn fill_live(&mut self) -> Fill {
        // Mark the wake-up seen before looking, so a change appended after
        // the look wakes us again.
        self.wake.borrow_and_update();
        let (batch, next, at_head, head_revision) = {
            let state = self.shared.read();
            if state.phase == Phase::Stopped {
                return Fill::End(Some(stopped()));
            }
            if state.generation != self.generation {
                return Fill::End(Some(StorageError::Compacted {
                    requested: self.consumed,
                    compacted: state.window.floor(),
                }));
            }
            let head = state.window.next_seq();
            let found = match &self.bucket {
                Some(bucket) => state.index.lookup(bucket, self.cursor, BATCH),
                None => Lookup::Scan,
            };
            match found {
                Lookup::Seqs(seqs, all) => {
                    // Only this watcher's changes: the others are skipped
                    // without being looked at.
                    if seqs.first().is_some_and(|&s| s < state.window.first_seq()) {
                        return self.fell_behind();
                    }
                    let batch: Vec<Arc<Change>> = seqs
                        .iter()
                        .filter_map(|&s| state.window.get(s).cloned())
                        .collect();
                    let next = match (all, seqs.last()) {
                        (false, Some(&last)) => last + 1,
                        _ => head,
                    };
                    (batch, next, all, state.revision)
                }
                Lookup::Scan => {
                    if self.cursor < state.window.first_seq() {
                        return self.fell_behind();
                    }
                    let batch = state.window.changes_from(self.cursor, BATCH);
                    let next = self.cursor + batch.len() as u64;
                    (batch, next, next == head, state.revision)
                }
            }
        };
        self.cursor = next;
        for change in &batch {
            if let Some(event) = self.view(change) {
                self.out.push_back(event);
            }
        }
        if at_head {
            self.consumed = self.consumed.max(head_revision);
        }
        if !self.out.is_empty() {
            Fill::Output
        } else if at_head {
            Fill::Idle
        } else {
            Fill::Progress
        }
    }

    /// The window dropped changes this watcher had not read: it ends (the
    /// client resumes from the last revision it received) and is counted.
    fn fell_behind(&self) -> Fill {
        self.shared.terminated.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            key = %self.target.key,
            revision = self.consumed,
            "ending a watcher that fell behind the event window"
        );
        Fill::End(None)
    }

    /// What this watcher sees of `change`: an object that stops matching is
    /// `Deleted` (its last state at the change's revision), one that starts
    /// matching is `Added`.
    fn view(&self, change: &Change) -> Option<WatchEvent> {
        if change.revision <= self.after || !self.target.covers(&change.key) {
            return None;
        }
        let predicate = &self.target.predicate;
        let Some(object) = &change.object else {
            let prev = change.prev.as_ref()?;
            if !prev.matches(predicate) {
                return None;
            }
            return Some(deleted(change.prev_at_revision()?.clone()));
        };
        if predicate.is_everything() {
            let kind = if change.created {
                EventType::Added
            } else {
                EventType::Modified
            };
            return Some(WatchEvent {
                kind,
                object: object.clone(),
            });
        }
        let now = object.matches(predicate);
        if change.created {
            return now.then(|| added(object.clone()));
        }
        let before = change.prev.as_ref().is_some_and(|p| p.matches(predicate));
        match (before, now) {
            (true, true) => Some(WatchEvent {
                kind: EventType::Modified,
                object: object.clone(),
            }),
            (false, true) => Some(added(object.clone())),
            (true, false) => Some(deleted(change.prev_at_revision()?.clone())),
            (false, false) => None,
        }
    }
}

fn added(object: Object) -> WatchEvent {
    WatchEvent {
        kind: EventType::Added,
        object,
    }
}

fn deleted(object: Object) -> WatchEvent {
    WatchEvent {
        kind: EventType::Deleted,
        object,
    }
}

fn stopped() -> StorageError {
    StorageError::Unavailable("the watch cache stopped".into())
}

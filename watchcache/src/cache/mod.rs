//! The per-replica watch cache: a `Storage` that serves reads and watches
//! from memory and sends writes to the etcd store it wraps.
//!
//! # Design
//!
//! **One etcd watch per replica, one global map.** A reflector task lists
//! every key under the prefix (`/registry/`) at one revision, then follows a
//! single etcd watch over the whole prefix from the next revision. Every
//! change of every resource arrives on that one ordered stream, so the cache
//! always knows the exact revision it has applied (`revision`), with no
//! reliance on etcd progress notifications (unreliable on etcd 3.4.23).
//! The objects live in one persistent ordered map keyed by etcd key
//! (`imbl::OrdMap`): `list(prefix)` is a range scan, and a snapshot of the
//! whole cache is an O(1) clone. Per-resource partitions were rejected: a
//! key does not say where its resource ends (`/registry/apps/deployments/..`
//! and `/registry/pods/..` look alike without the registry), a watch prefix
//! may be any key range (one namespace, one object), and one map with one
//! sequence of changes makes "the state at revision N" a single notion.
//! Watchers are indexed by the key or `/`-ended prefix they follow
//! (`index`): a change wakes and reaches only the watchers of its key's
//! prefixes, not every watcher of every resource.
//!
//! **Freshness of consistent reads.** A consistent list asks etcd for its
//! current revision `X` with a quorum read *after* the request arrived, waits
//! (bounded, `consistent_read_wait`) until the cache has applied `X`, then
//! serves the cache's current state (revision `R >= X`). Proof: a write `W`
//! that completed before the read began has revision `<= X` (the quorum read
//! is linearizable and started after `W` was acknowledged); the etcd watch
//! delivers every change of the prefix in revision order without gaps from
//! the list's revision on, so the state at `R >= X` includes `W`. This holds
//! on every replica, whatever its neighbours do. If the cache does not reach
//! `X` in time (watch broken, or writes outside the prefix moved etcd's
//! revision: nothing is watched there, so the cache cannot prove it has seen
//! them), the read goes to etcd: slower, never stale. Consistent gets take
//! the same path. The quorum read of `X` is coalesced (`read_index`): one
//! read, sent after they all arrived, serves every consistent read queued
//! while the previous one was in flight, so N concurrent consistent reads
//! cost etcd about one round trip, not N.
//!
//! Reads with `NotOlderThan(n)` (and `"0"`, "any") are served from the
//! current state once it has reached `n` (and the last revision this replica
//! wrote: a client reads its own writes on the replica it wrote through).
//! After `not_older_than_wait`, a revision etcd has not reached either is
//! `TooLargeResourceVersion` (504 with Retry-After); otherwise etcd answers.
//! `Exact(n)` and continue tokens are served from the state at `n`, rebuilt
//! from the newest checkpoint (a map clone taken every `checkpoint_every`
//! changes) plus the changes after it, while `n` is retained; below the
//! known etcd compaction revision they are `Compacted` / `ContinueExpired`
//! as etcd would say; otherwise etcd answers.
//!
//! **Memory.** The map holds the current objects once (`Arc<Value>`, shared
//! with every list result and watch event). The event window holds recent
//! changes (with the previous object, for DELETED and selector transitions):
//! changes younger than `window_retention` are kept, and the window never
//! exceeds `window_max_events` changes nor `window_max_bytes` (the encoded
//! sizes of the object versions it references); it shrinks as changes age.
//! Checkpoints share structure with the map and cost the path copies of the
//! changes since (at most `window_max_events / checkpoint_every + 1` of
//! them). A watcher is a cursor into the window plus at most one batch of
//! events; a watcher too slow to keep inside the window is ended (clean end
//! of stream; the client resumes from its last resourceVersion) and counted
//! in [`Cacher::terminated_watchers`]. Nothing grows with slow clients.
//!
//! **History after a (re)list.** The watch after a list at `X` starts
//! `backfill_revisions` earlier (not below etcd's compaction) with previous
//! values; those older changes fill the window without touching the map,
//! and once the stream passes `X` watches may start anywhere in them. A
//! client resuming with a resourceVersion from before this replica started
//! (from another replica, or before a restart) gets its missed events
//! instead of a 410, so a rolling restart causes no relist storm.
//!
//! **Lifecycle.** See [`Phase`]: `Pending` until the first list completes
//! (reads go to etcd, `is_ready()` is false), then `Ready`. A broken etcd
//! watch resumes from the last applied revision (nobody notices but
//! consistent reads, which fall back to etcd meanwhile). When etcd has
//! compacted past the last applied revision the cache lists again
//! (`Relisting`, reads go to etcd) and rebuilds; its watchers cannot be
//! continued (the changes in between are gone) and end with `Compacted`,
//! which the HTTP layer sends as a 410 ERROR event.

mod config;
mod index;
mod ranges;
mod read;
mod read_index;
mod reflector;
mod state;
#[cfg(feature = "test-util")]
pub mod testing;
mod watcher;

pub use config::{CacheStats, CacherConfig};
pub use state::Phase;

use crate::etcd::EtcdStore;
use crate::storage::{
    Encoded, ListOptions, ListResult, Object, Result, Revision, Storage, StorageError,
    WatchOptions, WatchStream,
};
use apimachinery::continue_token;
use apimachinery::read::Freshness;
use async_trait::async_trait;
use read::Route;
use serde_json::Value;
use state::{replay, CacheState, Incoming, Objects, WindowLimits};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;
use tokio::sync::watch as notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use watcher::{error_stream, Start, Target};

/// What the reflector, the watchers and the `Cacher` share.
pub(crate) struct Shared {
    state: RwLock<CacheState>,
    /// The applied revision, sent after every change of the state: wakes the
    /// watchers and the readers waiting for a revision.
    applied: notify::Sender<Revision>,
    config: CacherConfig,
    limits: WindowLimits,
    terminated: AtomicU64,
    fallbacks: AtomicU64,
    delegated: AtomicU64,
    watchers: AtomicUsize,
    /// True while the history before the last list is being read back:
    /// watches that start in it wait (briefly) instead of a 410.
    backfilling: std::sync::atomic::AtomicBool,
    /// While true, the reflector keeps no etcd watch open (failure injection
    /// for tests: `Cacher::hold_etcd_watch`).
    hold: notify::Sender<bool>,
    /// The wrapped store's: the reflector's etcd requests are timed too.
    telemetry: crate::etcd::EtcdTelemetry,
    /// The etcd store's value transformers: raw etcd values are decoded
    /// (decrypted) through them before they enter the cache.
    transformers: crate::transform::Transformers,
    /// Keys whose current value the transformers cannot read (a
    /// decryption failure): reads covering them go to etcd, which reports
    /// the error, instead of silently leaving the object out.
    unreadable: std::sync::Mutex<std::collections::BTreeSet<Arc<str>>>,
    /// Whether `unreadable` has any key (spares the lock on the hot path).
    any_unreadable: std::sync::atomic::AtomicBool,
    /// What this replica's own writes stored, by key, until the reflector
    /// sees them come back: it takes the object from here instead of
    /// decoding the value again (the same value at the same revision).
    written: std::sync::Mutex<HashMap<Arc<str>, Object>>,
}

/// At most this many own writes wait for the reflector (it drains them as
/// it applies; the bound only matters while it does not).
const MAX_WRITTEN: usize = 4096;

impl Shared {
    /// Records whether the current value of `key` can be read.
    pub(crate) fn set_unreadable(&self, key: &Arc<str>, unreadable: bool) {
        use std::sync::atomic::Ordering;
        if !unreadable && !self.any_unreadable.load(Ordering::Acquire) {
            return;
        }
        let mut set = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        if unreadable {
            set.insert(Arc::clone(key));
        } else {
            set.remove(key);
        }
        self.any_unreadable
            .store(!set.is_empty(), Ordering::Release);
    }

    /// Forgets every unreadable key (before a relist records them anew).
    pub(crate) fn clear_unreadable(&self) {
        let mut set = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        set.clear();
        self.any_unreadable
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// Whether a key under `prefix` (or `prefix` itself) cannot be read.
    fn unreadable_under(&self, prefix: &str) -> bool {
        if !self
            .any_unreadable
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return false;
        }
        let set = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        set.range::<str, _>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ))
        .next()
        .is_some_and(|k| k.starts_with(prefix))
    }

    fn read(&self) -> RwLockReadGuard<'_, CacheState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, revision: Revision) {
        self.applied.send_replace(revision);
    }

    fn install(&self, objects: Objects, revision: Revision) {
        self.write().install(objects, revision);
        self.forget_written(revision);
        self.publish(revision);
    }

    fn apply(&self, batch: Vec<Incoming>) {
        let revision = {
            let mut state = self.write();
            state.apply(batch, Instant::now(), &self.limits);
            state.revision
        };
        self.forget_written(revision);
        self.publish(revision);
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Object>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers what a write of this replica stored at `key`.
    fn remember_written(&self, key: &str, object: &Object) {
        let mut written = self.written();
        if written.len() < MAX_WRITTEN {
            written.insert(Arc::from(key), object.clone());
        }
    }

    /// The object this replica wrote at `key` and `revision`, if it did.
    pub(crate) fn take_written(&self, key: &str, revision: Revision) -> Option<Object> {
        let mut written = self.written();
        let found = written.get(key).map(|o| o.revision)?;
        if found > revision {
            return None;
        }
        written.remove(key).filter(|o| o.revision == revision)
    }

    /// What this replica wrote at `key`, when the cache (at `applied`) has
    /// not applied it yet.
    fn own_write_after(&self, key: &str, applied: Revision) -> Option<Object> {
        let written = self.written();
        written.get(key).filter(|o| o.revision > applied).cloned()
    }

    /// Drops the own writes at or below `revision` (applied, or never coming).
    fn forget_written(&self, revision: Revision) {
        let mut written = self.written();
        if !written.is_empty() {
            written.retain(|_, o| o.revision > revision);
        }
    }

    fn evict(&self) {
        self.write().evict(Instant::now(), &self.limits);
    }

    fn backfill(&self, changes: Vec<state::Change>) {
        if !changes.is_empty() {
            self.write().backfill(changes, &self.limits);
        }
    }

    fn backfilled(&self, from: Revision) {
        let revision = {
            let mut state = self.write();
            state.backfilled(from);
            state.revision
        };
        self.set_backfilling(false);
        self.publish(revision);
    }

    pub(crate) fn set_backfilling(&self, on: bool) {
        self.backfilling.store(on, Ordering::Release);
    }

    /// While history is being read back, waits (up to `timeout`) until a
    /// watch starting after `n` can be served from the window.
    async fn wait_for_history(&self, n: Revision, timeout: Duration) {
        let mut applied = self.applied.subscribe();
        let deadline = Instant::now() + timeout;
        loop {
            if !self.backfilling.load(Ordering::Acquire) || n >= self.read().window.floor() {
                return;
            }
            if tokio::time::timeout_at(deadline, applied.changed())
                .await
                .map_or(true, |r| r.is_err())
            {
                return;
            }
        }
    }

    fn relisting(&self, compacted: Revision) {
        let revision = {
            let mut state = self.write();
            state.phase = Phase::Relisting;
            state.compacted = state.compacted.max(compacted);
            state.revision
        };
        self.publish(revision);
    }

    fn note_compacted(&self, compacted: Revision) -> Revision {
        let mut state = self.write();
        state.compacted = state.compacted.max(compacted);
        state.compacted
    }

    fn serving(&self) -> bool {
        self.read().phase == Phase::Ready
    }

    /// Waits until the cache serves at `revision` or later; false after
    /// `timeout` (or when it stops serving).
    async fn wait_applied(&self, revision: Revision, timeout: Duration) -> bool {
        let mut applied = self.applied.subscribe();
        let deadline = Instant::now() + timeout;
        loop {
            {
                let state = self.read();
                if state.phase == Phase::Ready && state.revision >= revision {
                    return true;
                }
                if state.phase == Phase::Stopped {
                    return false;
                }
            }
            match tokio::time::timeout_at(deadline, applied.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }
}

/// The watch cache. Cheap to clone; the reflector stops when the last clone
/// is dropped (and the open watchers end with `Unavailable`).
#[derive(Clone)]
pub struct Cacher {
    inner: Arc<Inner>,
}

struct Inner {
    store: EtcdStore,
    shared: Arc<Shared>,
    reflector: JoinHandle<()>,
    /// The highest revision written through this replica.
    last_write: AtomicI64,
    /// One progress mark in flight at a time (see `catch_up_with_etcd`).
    marking: tokio::sync::Mutex<()>,
    /// Coalesced quorum reads of etcd's revision for consistent reads.
    read_index: read_index::ReadIndex,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reflector.abort();
        let revision = {
            let mut state = self.shared.write();
            state.phase = Phase::Stopped;
            state.index.wake_all(state.revision);
            state.revision
        };
        self.shared.publish(revision);
    }
}

impl std::fmt::Debug for Cacher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cacher")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Cacher {
    /// Starts the cache over `store` (spawns its reflector on the current
    /// tokio runtime). Reads and watches go to etcd until the first list
    /// completes; see [`Cacher::is_ready`].
    pub fn new(store: EtcdStore, config: CacherConfig) -> Cacher {
        let (applied, _) = notify::channel(0);
        let shared = Arc::new(Shared {
            state: RwLock::new(CacheState::new()),
            applied,
            limits: config.limits(),
            config,
            terminated: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            delegated: AtomicU64::new(0),
            watchers: AtomicUsize::new(0),
            backfilling: std::sync::atomic::AtomicBool::new(false),
            hold: notify::channel(false).0,
            telemetry: store.telemetry().clone(),
            transformers: store.transformers().clone(),
            unreadable: std::sync::Mutex::default(),
            any_unreadable: std::sync::atomic::AtomicBool::new(false),
            written: Default::default(),
        });
        let reflector = tokio::spawn(reflector::run(shared.clone(), store.client()));
        Cacher {
            inner: Arc::new(Inner {
                shared,
                reflector,
                last_write: AtomicI64::new(0),
                marking: tokio::sync::Mutex::new(()),
                read_index: read_index::ReadIndex::start(store.clone()),
                store,
            }),
        }
    }

    /// The latest revision of the etcd cluster under the cache (a quorum
    /// read).
    pub async fn revision(&self) -> Result<Revision> {
        self.inner.store.revision().await
    }

    /// The wrapped etcd store.
    pub fn store(&self) -> &EtcdStore {
        &self.inner.store
    }

    /// True once the first list has completed (for `/readyz`). Stays true
    /// while relisting: reads are then served by etcd.
    pub fn is_ready(&self) -> bool {
        !matches!(self.phase(), Phase::Pending | Phase::Stopped)
    }

    pub fn phase(&self) -> Phase {
        self.shared().read().phase
    }

    /// Waits until the cache serves from memory; false after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        self.shared().wait_applied(0, timeout).await
    }

    /// Watchers ended because they fell behind the event window.
    pub fn terminated_watchers(&self) -> u64 {
        self.shared().terminated.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> CacheStats {
        let shared = self.shared();
        let state = shared.read();
        CacheStats {
            phase: state.phase,
            revision: state.revision,
            objects: state.objects.len(),
            window_events: state.window.len(),
            window_bytes: state.window.bytes(),
            window_floor: state.window.floor(),
            compacted: state.compacted,
            watchers: shared.watchers.load(Ordering::Relaxed),
            terminated_watchers: shared.terminated.load(Ordering::Relaxed),
            consistent_fallbacks: shared.fallbacks.load(Ordering::Relaxed),
            etcd_reads: shared.delegated.load(Ordering::Relaxed),
            revision_reads: self.inner.read_index.reads(),
        }
    }

    /// Asks etcd now whether it compacted history the cache serves (also
    /// done every `compaction_check_interval`); returns the compaction
    /// revision known afterwards.
    pub async fn check_compaction(&self) -> Result<Revision> {
        reflector::check_compaction(self.shared(), &self.inner.store.client()).await
    }

    /// Failure injection for tests: `true` drops the cache's etcd watch and
    /// keeps it closed (as a lost connection would), `false` lets the
    /// reflector resume from the last applied revision.
    #[cfg(feature = "test-util")]
    pub fn hold_etcd_watch(&self, hold: bool) {
        self.shared().hold.send_replace(hold);
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    fn config(&self) -> &CacherConfig {
        &self.shared().config
    }

    fn wrote(&self, revision: Revision) {
        self.inner.last_write.fetch_max(revision, Ordering::Relaxed);
    }

    /// The current state, if serving.
    fn current(&self) -> Option<(Objects, Revision)> {
        let state = self.shared().read();
        (state.phase == Phase::Ready).then(|| (state.objects.clone(), state.revision))
    }

    /// Waits for the cache to apply etcd's current revision (true), or gives
    /// up after `consistent_read_wait` (false, counted).
    ///
    /// etcd's revision is global: writes outside the prefix (another
    /// cluster sharing the etcd, or etcd's own users) move it although
    /// nothing arrives on this cache's watch. When the revision is not
    /// reached quickly, the cache writes a progress mark inside its own
    /// prefix (`<prefix>.progress`, under no resource, so no list sees it):
    /// its revision is above the target and comes back through the watch,
    /// which proves every change of the prefix up to the target has been
    /// applied. One mark is in flight at a time; readers that queue behind
    /// it usually find the cache caught up and write nothing. No etcd
    /// progress notification is involved (unreliable on etcd 3.4).
    async fn catch_up_with_etcd(&self) -> Result<Option<Revision>> {
        let target = self.inner.read_index.current_revision().await?;
        let wait = self.config().consistent_read_wait;
        let quick = wait.min(Duration::from_millis(50));
        if self.shared().wait_applied(target, quick).await {
            return Ok(Some(target));
        }
        let marked = {
            let _one = self.inner.marking.lock().await;
            if self.shared().read().revision >= target {
                Some(target)
            } else {
                // Boxed as the etcd fallbacks are (below).
                Box::pin(self.progress_mark()).await.ok()
            }
        };
        let wanted = marked.unwrap_or(target).max(target);
        if self.shared().wait_applied(wanted, wait).await {
            return Ok(Some(target));
        }
        self.shared().fallbacks.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// Writes the progress mark and returns its revision.
    async fn progress_mark(&self) -> Result<Revision> {
        let key = format!("{}.progress", self.config().prefix);
        let mut client = self.inner.store.client();
        let put = client.put(key.as_bytes(), "0", None);
        let put = async {
            match tokio::time::timeout(self.config().etcd_timeout, put).await {
                Ok(Ok(resp)) => Ok(resp.header().map(|h| h.revision()).unwrap_or(0)),
                Ok(Err(e)) => Err(StorageError::Unavailable(e.to_string())),
                Err(_) => Err(StorageError::Unavailable(
                    "etcd did not answer the progress mark in time".into(),
                )),
            }
        };
        self.shared()
            .telemetry
            .time("update", key.as_bytes(), put)
            .await
    }

    /// Waits for revision `n` (and this replica's own writes). `Ok(false)`
    /// when etcd should answer instead; `TooLargeResourceVersion` when etcd
    /// has not reached `n` either.
    async fn reach(&self, n: Revision) -> Result<bool> {
        let wanted = n.max(self.inner.last_write.load(Ordering::Relaxed));
        if self
            .shared()
            .wait_applied(wanted, self.config().not_older_than_wait)
            .await
        {
            return Ok(true);
        }
        // Boxed as the etcd fallbacks are (above).
        let current = Box::pin(self.inner.store.revision()).await?;
        if current < n {
            return Err(StorageError::TooLargeResourceVersion {
                requested: n,
                current,
            });
        }
        Ok(false)
    }

    /// The state at exactly `n`, when the cache retains it: `Ok(None)` when
    /// etcd should answer.
    async fn state_at(&self, n: Revision) -> Result<Option<Objects>> {
        if self.shared().read().revision < n
            && !self
                .shared()
                .wait_applied(n, self.config().not_older_than_wait)
                .await
        {
            return Ok(None);
        }
        let rebuilt = {
            let state = self.shared().read();
            if state.phase != Phase::Ready {
                return Ok(None);
            }
            if n < state.compacted {
                return Err(StorageError::Compacted {
                    requested: n,
                    compacted: state.compacted,
                });
            }
            state.state_at(n)
        };
        Ok(rebuilt.map(|(base, changes)| replay(base, &changes)))
    }

    async fn list_exact(
        &self,
        prefix: &str,
        opts: &ListOptions,
        n: Revision,
    ) -> Result<ListResult> {
        let start = opts.continue_from.as_ref().map(|c| c.start_key.as_str());
        match self.state_at(n).await {
            Ok(Some(objects)) => Ok(read::list_snapshot(
                &objects,
                n,
                prefix,
                start,
                opts.limit,
                &opts.predicate,
            )),
            Ok(None) => self.list_etcd(prefix, opts).await,
            Err(StorageError::Compacted { .. }) if start.is_some() => {
                Err(StorageError::ContinueExpired {
                    fresh_token: continue_token::encode(start.unwrap_or_default(), -1),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// A watch the cache cannot serve goes to etcd.
    async fn watch_etcd(&self, key: &str, opts: WatchOptions) -> Result<WatchStream> {
        self.delegated();
        self.inner.store.watch(key, opts).await
    }

    // The etcd fallbacks are boxed: an etcd request's future is several
    // KiB, and inline it would make the future of every cached read as
    // large, copied whole each time it moves (BENCHMARKS.md, "Instructions
    // per GET: logging and futures").
    fn get_etcd<'a>(
        &'a self,
        key: &'a str,
        freshness: Freshness,
    ) -> futures_util::future::BoxFuture<'a, Result<Option<Object>>> {
        self.delegated();
        Box::pin(self.inner.store.get(key, freshness))
    }

    fn list_etcd<'a>(
        &'a self,
        prefix: &'a str,
        opts: &'a ListOptions,
    ) -> futures_util::future::BoxFuture<'a, Result<ListResult>> {
        self.delegated();
        Box::pin(self.inner.store.list(prefix, opts))
    }

    /// A watch that starts with the initial events of a snapshot:
    /// - `MostRecent`: the current state once the cache has applied etcd's
    ///   revision read (quorum) after the request arrived;
    /// - `NotOlderThan(n)`: the current state once the cache has reached `n`
    ///   and this replica's own writes (no quorum read; `n = 0` serves at
    ///   once). Not reached within `not_older_than_wait` and beyond etcd's
    ///   revision too: a stream whose only item is `TooLargeResourceVersion`;
    /// - `Exact(n)`: the state at `n`, rebuilt from the window.
    ///
    /// Whatever the cache cannot serve goes to etcd.
    async fn watch_initial(
        &self,
        key_or_prefix: &str,
        target: Target,
        opts: WatchOptions,
    ) -> Result<WatchStream> {
        let start = match opts.initial_freshness {
            Freshness::MostRecent => match self.catch_up_with_etcd().await? {
                Some(_) => self.initial_from_current(),
                None => None,
            },
            Freshness::NotOlderThan(n) => match self.reach(n.max(0)).await {
                Ok(true) => self.initial_from_current(),
                Ok(false) => None,
                Err(e @ StorageError::TooLargeResourceVersion { .. }) => {
                    return Ok(error_stream(e))
                }
                Err(e) => return Err(e),
            },
            Freshness::Exact(n) if n > 0 => {
                let snapshot = match self.state_at(n).await {
                    Ok(Some(snapshot)) => snapshot,
                    Ok(None) => return self.watch_etcd(key_or_prefix, opts).await,
                    Err(e @ StorageError::Compacted { .. }) => return Ok(error_stream(e)),
                    Err(e) => return Err(e),
                };
                let state = self.shared().read();
                // The window may have moved on while the state was rebuilt.
                (state.phase == Phase::Ready && n >= state.window.floor()).then(|| Start::Initial {
                    snapshot,
                    revision: n,
                    cursor: state.window.seq_after(n),
                    generation: state.generation,
                })
            }
            Freshness::Exact(_) => None,
        };
        match start {
            Some(start) => Ok(watcher::stream(self.shared().clone(), target, start)),
            None => self.watch_etcd(key_or_prefix, opts).await,
        }
    }

    /// Initial events from the cache's current state, if serving.
    fn initial_from_current(&self) -> Option<Start> {
        let state = self.shared().read();
        (state.phase == Phase::Ready).then(|| Start::Initial {
            snapshot: state.objects.clone(),
            revision: state.revision,
            cursor: state.window.next_seq(),
            generation: state.generation,
        })
    }

    fn delegated(&self) {
        self.shared().delegated.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl Storage for Cacher {
    async fn get(&self, key: &str, freshness: Freshness) -> Result<Option<Object>> {
        if self.shared().unreadable_under(key) {
            return self.get_etcd(key, freshness).await;
        }
        match read::route_get(freshness, self.shared().serving()) {
            Route::Etcd => self.get_etcd(key, freshness).await,
            // Checked again once caught up: the catch-up may have applied a
            // value the cache could not read. A key the cache holds no
            // object for goes to etcd too: absent, or a value that does not
            // decode (cached as absent), which etcd reports as an error.
            Route::Consistent => match self.catch_up_with_etcd().await? {
                Some(_) if !self.shared().unreadable_under(key) => {
                    match self
                        .current()
                        .and_then(|(objects, _)| objects.get(key).map(|c| c.object.clone()))
                    {
                        Some(object) => Ok(Some(object)),
                        None => self.get_etcd(key, freshness).await,
                    }
                }
                _ => self.get_etcd(key, freshness).await,
            },
            Route::AtLeast(n) => {
                if !self.reach(n).await? {
                    return self.get_etcd(key, freshness).await;
                }
                match self.current() {
                    // This replica's own write the watch has not brought
                    // back yet is newer than anything cached: a
                    // read-modify-write after its own write (a client
                    // updating with the resourceVersion it was just given)
                    // then starts from it instead of a stale copy that
                    // costs a second etcd read.
                    Some((objects, revision)) => Ok(self
                        .shared()
                        .own_write_after(key, revision)
                        .or_else(|| objects.get(key).map(|c| c.object.clone()))),
                    None => self.get_etcd(key, freshness).await,
                }
            }
            Route::Exact(n) => match self.state_at(n).await? {
                Some(objects) => Ok(objects.get(key).map(|c| c.object.clone())),
                None => self.get_etcd(key, freshness).await,
            },
        }
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        if self.shared().unreadable_under(prefix) {
            // etcd reports the value no key decrypts (kube-apiserver fails
            // such a list too) rather than the cache leaving it out.
            return self.list_etcd(prefix, opts).await;
        }
        let start = opts.continue_from.as_ref().map(|c| c.start_key.as_str());
        let ready = match read::route_list(opts, self.shared().serving()) {
            Route::Etcd => false,
            Route::Consistent => self.catch_up_with_etcd().await?.is_some(),
            Route::AtLeast(n) => self.reach(n).await?,
            Route::Exact(n) => return self.list_exact(prefix, opts, n).await,
        };
        match self.current().filter(|_| ready) {
            Some((objects, revision)) => Ok(read::list_snapshot(
                &objects,
                revision,
                prefix,
                start,
                opts.limit,
                &opts.predicate,
            )),
            None => self.list_etcd(prefix, opts).await,
        }
    }

    async fn create(&self, key: &str, value: &Value) -> Result<Object> {
        let created = self.inner.store.create(key, value).await?;
        self.wrote(created.revision);
        self.shared().remember_written(key, &created);
        Ok(created)
    }

    async fn update(&self, key: &str, value: &Value, expected: Revision) -> Result<Object> {
        let updated = self.inner.store.update(key, value, expected).await?;
        self.wrote(updated.revision);
        self.shared().remember_written(key, &updated);
        Ok(updated)
    }

    async fn grant_lease(&self, key: &str, ttl_seconds: i64) -> Result<i64> {
        self.inner.store.grant_lease(key, ttl_seconds).await
    }

    async fn create_with_lease(&self, key: &str, value: &Value, lease: i64) -> Result<Object> {
        let created = self
            .inner
            .store
            .create_with_lease(key, value, lease)
            .await?;
        self.wrote(created.revision);
        self.shared().remember_written(key, &created);
        Ok(created)
    }

    async fn update_with_lease(
        &self,
        key: &str,
        value: &Value,
        expected: Revision,
        lease: i64,
    ) -> Result<Object> {
        let updated = self
            .inner
            .store
            .update_with_lease(key, value, expected, lease)
            .await?;
        self.wrote(updated.revision);
        self.shared().remember_written(key, &updated);
        Ok(updated)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Object> {
        let deleted = self.inner.store.delete(key, expected).await?;
        self.wrote(deleted.revision);
        Ok(deleted)
    }

    /// Same contract as the etcd store: `initial_events` sends a snapshot
    /// chosen by `initial_freshness` (see `Cacher::watch_initial`) as
    /// `Added`, then a `Bookmark` at its revision, then the changes after
    /// it; without, the changes after `after_revision` (0 = after etcd's
    /// current revision). A start older than the window or below etcd's
    /// compaction is a stream whose only item is `Err(Compacted)`. Idle
    /// watchers get a `Bookmark` every `bookmark_interval`.
    async fn watch(&self, key_or_prefix: &str, opts: WatchOptions) -> Result<WatchStream> {
        if !self.shared().serving() {
            return self.watch_etcd(key_or_prefix, opts).await;
        }
        let target = Target {
            key: Arc::from(key_or_prefix),
            is_prefix: key_or_prefix.ends_with('/'),
            predicate: opts.predicate.clone(),
        };
        if opts.initial_events {
            return self.watch_initial(key_or_prefix, target, opts).await;
        }
        let n = opts.after_revision;
        if n <= 0 {
            let Some(target_revision) = self.catch_up_with_etcd().await? else {
                return self.watch_etcd(key_or_prefix, opts).await;
            };
            let start = {
                let state = self.shared().read();
                (state.phase == Phase::Ready).then(|| {
                    let after = target_revision.max(state.window.floor());
                    Start::Live {
                        after,
                        cursor: state.window.seq_after(after),
                        generation: state.generation,
                    }
                })
            };
            return match start {
                Some(start) => Ok(watcher::stream(self.shared().clone(), target, start)),
                None => self.watch_etcd(key_or_prefix, opts).await,
            };
        }

        self.shared()
            .wait_for_history(n, self.config().not_older_than_wait)
            .await;
        let state = self.shared().read();
        if n.saturating_add(1) < state.compacted || n < state.window.floor() {
            return Ok(error_stream(StorageError::Compacted {
                requested: n,
                compacted: state.compacted.max(state.window.floor()),
            }));
        }
        let start = Start::Live {
            after: n,
            cursor: state.window.seq_after(n),
            generation: state.generation,
        };
        drop(state);
        Ok(watcher::stream(self.shared().clone(), target, start))
    }

    async fn current_revision(&self, _key_or_prefix: &str) -> Result<Revision> {
        self.inner.store.revision().await
    }

    async fn is_stale(&self, key: &str) -> Result<bool> {
        self.inner.store.is_stale(key).await
    }

    fn encode(&self, key: &str, value: &Value) -> Result<Encoded> {
        self.inner.store.encode(key, value)
    }

    async fn update_encoded(
        &self,
        key: &str,
        value: Encoded,
        expected: Revision,
        lease: Option<i64>,
    ) -> Result<Object> {
        let updated = self
            .inner
            .store
            .update_encoded(key, value, expected, lease)
            .await?;
        self.wrote(updated.revision);
        self.shared().remember_written(key, &updated);
        Ok(updated)
    }
}

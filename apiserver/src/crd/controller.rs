//! The CRD controller. On every replica it follows the CRD collection (a
//! watch on the store, so the watch cache feeds it) and keeps the registry's
//! run-time rows equal to what the established CRDs define. On the elected
//! leader it also writes CRD status ([`super::status`]) and deletes the
//! custom resources of a CRD being deleted, then its clean-up finalizer.
//!
//! It is level-triggered: after every change, leader change or tick it
//! recomputes from the whole set of CRDs it holds, so a restart or a change
//! of leader mid-work converges. The work per round is bounded by the number
//! of CRDs; status writes are compare-and-swap and a lost race is simply
//! redone on the next event.
//!
//! It reads and writes through the backend only, so it names nothing of
//! the server's state.

use super::{accepted_names, rows, status, CLEANUP_FINALIZER, GROUP, PLURAL};
use crate::backend::Backend;
use crate::object;
use crate::registry::{Shared, Str};
use apimachinery::read::{Freshness, Predicate};
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use watchcache::{EventType, ListOptions, StorageError, WatchOptions};

/// How often the leader revisits CRDs being deleted (their custom
/// resources may be waiting on finalizers of their own).
const CLEANUP_TICK: Duration = Duration::from_secs(1);
/// How many watch events one round takes at most.
const MAX_BATCH: usize = 1024;
/// How many status writes run at once.
const MAX_WRITES: usize = 16;
/// How many custom resources one clean-up round deletes at most.
const CLEANUP_BATCH: usize = 500;

/// Starts the controller over `state` (the backend: the store it
/// follows and writes, the registry it keeps); `leader` tells whether this replica
/// leads (`None`: it always does, e.g. a single in-process server).
pub fn start(
    state: Arc<Backend>,
    leader: Option<watch::Receiver<bool>>,
) -> tokio::task::AbortHandle {
    tokio::spawn(run(state, leader)).abort_handle()
}

async fn run(state: Arc<Backend>, leader: Option<watch::Receiver<bool>>) {
    let mut leader = leader.unwrap_or_else(|| watch::channel(true).1);
    let mut delay = Duration::from_millis(100);
    loop {
        match follow(&state, &mut leader).await {
            Ok(()) => delay = Duration::from_millis(100),
            Err(e) => {
                tracing::warn!(error = %e, "CRD watch ended; restarting");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

fn collection(state: &Backend) -> String {
    format!("{}/{GROUP}/{PLURAL}/", state.prefix)
}

fn name_of(v: &Value) -> String {
    object::meta_str(v, "name").unwrap_or("").to_string()
}

/// One CRD as the controller holds it: the stored object, its revision,
/// and the registry rows it defines (computed once per change).
struct Entry {
    crd: Arc<Value>,
    revision: i64,
    rows: Vec<crate::registry::Row>,
}

impl Entry {
    /// The entry; its rows are filled in by [`build_rows`].
    fn new(crd: Arc<Value>, revision: i64) -> Entry {
        // kube-apiserver stores CRDs as v1beta1.
        let crd = if crd.get("apiVersion").and_then(Value::as_str) == Some(super::v1beta1::V1BETA1)
        {
            Arc::new(super::v1beta1::to_v1(&crd))
        } else {
            crd
        };
        Entry {
            crd,
            revision,
            rows: Vec::new(),
        }
    }

    fn group(&self) -> &str {
        self.crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

type Crds = BTreeMap<String, Entry>;

async fn follow(
    state: &Arc<Backend>,
    leader: &mut watch::Receiver<bool>,
) -> Result<(), StorageError> {
    let opts = WatchOptions {
        initial_events: true,
        initial_freshness: Freshness::MostRecent,
        ..WatchOptions::default()
    };
    let mut stream = state.store.watch(&collection(state), opts).await?;
    let mut crds = Crds::new();
    let mut initial: Option<Crds> = Some(Crds::new());
    let mut tick = tokio::time::interval(CLEANUP_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ev = stream.next() => {
                let Some(ev) = ev else { return Ok(()) };
                // Everything the watch has already delivered joins this
                // round: one registry swap and one status pass per batch.
                let mut batch = vec![ev?];
                while batch.len() < MAX_BATCH {
                    match stream.next().now_or_never() {
                        Some(Some(ev)) => batch.push(ev?),
                        _ => break,
                    }
                }
                // The groups whose names and status may have changed (all
                // of them after the first snapshot: `None`).
                let mut touched: Option<BTreeSet<String>> = Some(BTreeSet::new());
                let mut changed: Vec<String> = Vec::new();
                for ev in batch {
                    let name = name_of(ev.object.value());
                    match (&mut initial, ev.kind) {
                        (Some(init), EventType::Added) => {
                            init.insert(name, Entry::new(ev.object.value_arc().clone(), ev.object.revision));
                        }
                        (Some(init), EventType::Bookmark) => {
                            crds = std::mem::take(init);
                            initial = None;
                            changed.extend(crds.keys().cloned());
                            touched = None;
                        }
                        (Some(_), _) | (None, EventType::Bookmark) => {}
                        (None, EventType::Added | EventType::Modified) => {
                            let e = Entry::new(ev.object.value_arc().clone(), ev.object.revision);
                            if let Some(t) = touched.as_mut() {
                                t.insert(e.group().to_string());
                            }
                            crds.insert(name.clone(), e);
                            changed.push(name);
                        }
                        (None, EventType::Deleted) => {
                            if let (Some(e), Some(t)) = (crds.remove(&name), touched.as_mut()) {
                                t.insert(e.group().to_string());
                            }
                        }
                    }
                }
                if initial.is_some() {
                    continue;
                }
                build_rows(&mut crds, &changed).await;
                install(state, &crds);
                if *leader.borrow() {
                    reconcile(state, &crds, touched.as_ref()).await;
                }
            }
            changed = leader.changed() => {
                if changed.is_err() {
                    // The election is gone (shutdown): serve, write nothing.
                    std::future::pending::<()>().await;
                }
                if initial.is_none() && *leader.borrow_and_update() {
                    reconcile(state, &crds, None).await;
                }
            }
            _ = tick.tick() => {
                if initial.is_none() && *leader.borrow() {
                    cleanup_all(state, &crds).await;
                }
            }
        }
    }
}

/// Fills in the registry rows of the `changed` CRDs that are established,
/// on the blocking pool, a share of the CRDs per core (building a large
/// schema's rows takes milliseconds; thousands of CRDs arrive at once after
/// a restart).
async fn build_rows(crds: &mut Crds, changed: &[String]) {
    let todo: Vec<(String, Arc<Value>)> = changed
        .iter()
        .filter_map(|n| crds.get(n).map(|e| (n.clone(), Arc::clone(&e.crd))))
        .filter(|(_, crd)| super::condition_true(crd, "Established"))
        .collect();
    if todo.is_empty() {
        return;
    }
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(todo.len());
    let per = todo.len().div_ceil(workers);
    let mut tasks = Vec::new();
    let mut todo = todo;
    while !todo.is_empty() {
        let chunk: Vec<_> = todo.drain(..per.min(todo.len())).collect();
        tasks.push(tokio::task::spawn_blocking(move || {
            chunk
                .into_iter()
                .map(|(n, crd)| (n, rows(&crd)))
                .collect::<Vec<_>>()
        }));
    }
    for t in tasks {
        let Ok(built) = t.await else { continue };
        for (name, rows) in built {
            if let Some(e) = crds.get_mut(&name) {
                e.rows = rows;
            }
        }
    }
}

/// Makes the registry serve exactly the established CRDs' versions.
fn install(state: &Backend, crds: &Crds) {
    let all: Vec<_> = crds.values().flat_map(|e| e.rows.iter().cloned()).collect();
    if state.registry.set_dynamic(all) {
        tracing::info!(
            generation = state.registry.generation(),
            crds = crds.len(),
            "custom resources changed"
        );
    }
}

/// The built-in names of `group` that no CRD may take.
fn builtin_names(state: &Backend, group: &str) -> Vec<(Str, Str, Shared<[Str]>, Str)> {
    state
        .registry
        .all()
        .iter()
        .filter(|r| r.custom.is_none() && r.group == group)
        .map(|r| {
            (
                r.plural.clone(),
                r.singular.clone(),
                r.short_names.clone(),
                r.kind.clone(),
            )
        })
        .collect()
}

/// Brings the status of every CRD of the `groups` (every CRD when `None`)
/// up to date, then runs the deletion clean-up. The status writes of one
/// pass run concurrently, at most [`MAX_WRITES`] at a time.
async fn reconcile(state: &Arc<Backend>, crds: &Crds, groups: Option<&BTreeSet<String>>) {
    let now = object::now();
    let mut by_group: BTreeMap<&str, Vec<(&String, &Entry)>> = BTreeMap::new();
    for (name, e) in crds {
        by_group.entry(e.group()).or_default().push((name, e));
    }
    let mut writes = Vec::new();
    for (g, members) in &by_group {
        if groups.is_some_and(|want| !want.contains(*g)) {
            continue;
        }
        let owned = builtin_names(state, g);
        let builtin: Vec<(&str, &str, Vec<&str>, &str)> = owned
            .iter()
            .map(|(p, s, short, k)| (&**p, &**s, short.iter().map(|x| &**x).collect(), &**k))
            .collect();
        let builtin: Vec<(&str, &str, &[&str], &str)> = builtin
            .iter()
            .map(|(p, s, short, k)| (*p, *s, short.as_slice(), *k))
            .collect();
        for (name, e) in members {
            let others = members
                .iter()
                .filter(|(n, _)| n != name)
                .map(|(_, o)| o.crd.as_ref());
            let acceptance = accepted_names(&e.crd, others, &builtin);
            if let Some(next) = status::desired(&e.crd, &acceptance, &now) {
                writes.push((name.as_str(), next, e.revision));
            }
        }
    }
    futures_util::stream::iter(writes)
        .for_each_concurrent(MAX_WRITES, |(name, next, revision)| async move {
            let key = format!("{}{name}", collection(state));
            match state.store.update(&key, &next, revision).await {
                Ok(_) => tracing::debug!(crd = %name, "CRD status updated"),
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
                Err(err) => tracing::warn!(crd = %name, error = %err, "CRD status write failed"),
            }
        })
        .await;
    cleanup_all(state, crds).await;
}

async fn cleanup_all(state: &Arc<Backend>, crds: &Crds) {
    for (name, e) in crds {
        let crd = &e.crd;
        if object::is_deleting(crd)
            && object::finalizers(crd)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
        {
            if let Err(err) = cleanup(state, name, crd, e.revision).await {
                tracing::warn!(crd = %name, error = %err, "CRD clean-up failed; retrying");
            }
        }
    }
}

/// One round of deleting a terminating CRD's custom resources; when none
/// are left, drops the clean-up finalizer (and the CRD with it when it was
/// the last one).
async fn cleanup(
    state: &Arc<Backend>,
    name: &str,
    crd: &Value,
    revision: i64,
) -> Result<(), StorageError> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/status/acceptedNames/plural")
        .or_else(|| crd.pointer("/spec/names/plural"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if group.is_empty() || plural.is_empty() {
        return Ok(());
    }
    let prefix = format!("{}/{group}/{plural}/", state.prefix);
    let listed = state
        .store
        .list(
            &prefix,
            &ListOptions {
                freshness: Freshness::MostRecent,
                limit: Some(CLEANUP_BATCH),
                continue_from: None,
                predicate: Predicate::everything(),
            },
        )
        .await?;
    for item in &listed.items {
        let v = item.value();
        let key = match object::meta_str(v, "namespace") {
            Some(ns) if !ns.is_empty() => format!("{prefix}{ns}/{}", name_of(v)),
            _ => format!("{prefix}{}", name_of(v)),
        };
        let r = crate::controllers::remove(state, &key, item)
            .await
            .map(drop);
        match r {
            Ok(()) | Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if !listed.items.is_empty() {
        return Ok(());
    }
    let key = format!("{}{name}", collection(state));
    let mut next = crd.clone();
    let left: Vec<Value> = object::finalizers(crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .map(Value::String)
        .collect();
    let r = if left.is_empty() {
        state.store.delete(&key, Some(revision)).await.map(drop)
    } else {
        object::meta_mut(&mut next).insert("finalizers".into(), Value::Array(left));
        state.store.update(&key, &next, revision).await.map(drop)
    };
    match r {
        Ok(()) => {
            tracing::info!(crd = %name, "CRD clean-up done");
            Ok(())
        }
        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

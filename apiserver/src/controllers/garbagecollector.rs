//! The garbage collector (kube-controller-manager's): objects whose owners
//! are gone are deleted, owners deleted in the foreground wait for their
//! blocking dependents, and orphaning owners release their dependents.
//!
//! **The graph.** For one term as leader, the collector follows every
//! collection the registry serves (custom resources included; collections
//! of CRDs established later are opened as the registry changes, and those
//! of deleted CRDs are stopped, dropping their rows) and keeps
//! a graph keyed by uid: each object's owner references, and for each owner
//! uid the uids of its dependents. The graph only finds work; every
//! decision is checked against storage before it is acted on:
//!
//! - an owner missing from the graph is looked up by a quorum read (its
//!   name in the dependent's namespace, or cluster-wide) and only counts as
//!   absent when that read finds nothing or another uid. Uids are never
//!   reused, so an owner found absent stays absent (an LRU remembers it);
//! - writes are preconditioned on the revision read, so a change meanwhile
//!   is a conflict and the key is retried.
//!
//! **Queue keys are uids.** What a key's reconcile does depends on the
//! object as it is now:
//!
//! - being deleted with the `orphan` finalizer: its dependents lose their
//!   reference to it, then the finalizer goes;
//! - being deleted with `foregroundDeletion`: once no dependent with
//!   `blockOwnerDeletion` is left the finalizer goes, until then those
//!   dependents are queued;
//! - otherwise, with owner references: kube's `attemptToDeleteItem`. Its
//!   owners are solid (exist), dangling (absent) or waiting (deleting in the
//!   foreground). With a solid owner, the other references are removed;
//!   with none, it is deleted: in the foreground when an owner waits and it
//!   has dependents of its own, else with the policy its own finalizers
//!   name (background by default).
//!
//! A cluster-scoped object naming a namespaced owner, and a namespaced one
//! naming an owner that lives in another namespace, get kube's
//! `OwnerRefInvalidNamespace` event. The first is never collected; the
//! second's reference counts as absent, as in kube.
//!
//! **Resync.** Each collection is watched with initial events; a watch
//! that fails is re-opened, and objects of that collection the new snapshot
//! no longer has are treated as deleted. Work found while the first
//! snapshots arrive is held until they are all in (or 30 s have passed), so
//! that a start does not look up owners whose collection simply came later.

use super::events::{self, Legacy};
use super::queue::WorkQueue;
use super::{Controller, Next};
use crate::handlers::delete::{delete_stored, Outcome};
use crate::object;
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::query::{DeleteParams, PropagationPolicy};
use apimachinery::read::Freshness;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use watchcache::{EventType, Object, StorageError, WatchOptions};

/// The queue's name in kube's workqueue metrics.
pub const NAME: &str = "garbage_collector_attempt_to_delete";

/// The component named in the events it records.
const COMPONENT: &str = "garbage-collector-controller";

/// How long a start waits for the first snapshots before working anyway.
const SYNC_WAIT: Duration = Duration::from_secs(30);

/// How often a start still waiting for the watch cache says so.
const CACHE_WAIT_LOG: Duration = Duration::from_secs(30);

/// Owner uids remembered as verified absent (kube keeps 500; a bigger
/// memory saves a quorum read per dependent of a large owner).
const ABSENT_CACHE: u64 = 100_000;

/// Dependents released or deleted at once by one reconcile.
const FAN_OUT: usize = 16;

type Uid = Arc<str>;

/// One owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    api_version: String,
    kind: String,
    name: String,
    uid: Uid,
    block: bool,
}

/// What the graph knows of one object.
#[derive(Debug, Clone)]
struct Node {
    res: Row,
    /// The collection's store prefix (shared by the collection's nodes).
    collection: Arc<str>,
    namespace: Option<Arc<str>>,
    name: Arc<str>,
    owners: Arc<[Owner]>,
    /// The revision the graph saw it at: reads wait for the store to be at
    /// least as new (a watch served by etcd while the cache fills can be
    /// ahead of the cache).
    revision: i64,
    deleting: bool,
    orphan: bool,
    foreground: bool,
}

impl Node {
    fn waits_for_dependents(&self) -> bool {
        self.deleting && self.foreground
    }

    fn key(&self, state: &AppState) -> String {
        state.key(&self.res, self.namespace.as_deref(), &self.name)
    }
}

fn owners_of(v: &Value) -> Vec<Owner> {
    let Some(refs) = v
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    refs.iter()
        .filter_map(|r| {
            let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("").to_string();
            let uid = r.get("uid").and_then(Value::as_str)?;
            Some(Owner {
                api_version: s("apiVersion"),
                kind: s("kind"),
                name: s("name"),
                uid: Arc::from(uid),
                block: r
                    .get("blockOwnerDeletion")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

fn node_of(res: Row, collection: &Arc<str>, v: &Value, revision: i64) -> Option<(Uid, Node)> {
    let uid = object::meta_str(v, "uid")?;
    let finalizers = object::finalizers(v);
    let node = Node {
        res,
        collection: Arc::clone(collection),
        namespace: object::meta_str(v, "namespace")
            .filter(|n| !n.is_empty())
            .map(Arc::from),
        name: Arc::from(object::meta_str(v, "name").unwrap_or("")),
        owners: owners_of(v).into(),
        revision,
        deleting: object::is_deleting(v),
        orphan: finalizers.iter().any(|f| f == object::FINALIZER_ORPHAN),
        foreground: finalizers.iter().any(|f| f == object::FINALIZER_FOREGROUND),
    };
    Some((Arc::from(uid), node))
}

/// The owner/dependent graph of one term.
#[derive(Default)]
struct Graph {
    nodes: HashMap<Uid, Node>,
    /// Owner uid → the uids of objects that name it (whether or not the
    /// owner exists).
    dependents: HashMap<Uid, HashSet<Uid>>,
}

impl Graph {
    fn link(&mut self, uid: &Uid, owners: &[Owner]) {
        for o in owners {
            self.dependents
                .entry(Arc::clone(&o.uid))
                .or_default()
                .insert(Arc::clone(uid));
        }
    }

    fn unlink(&mut self, uid: &Uid, owners: &[Owner]) {
        for o in owners {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
    }

    fn dependents_of(&self, uid: &str) -> Vec<Uid> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn has_dependents(&self, uid: &str) -> bool {
        self.dependents.get(uid).is_some_and(|d| !d.is_empty())
    }

    /// Whether `node`'s owners may call for work: one is not in the graph,
    /// waits for its dependents, or lives in another namespace.
    fn needs_attention(&self, node: &Node) -> bool {
        node.owners.iter().any(|o| match self.nodes.get(&o.uid) {
            None => true,
            Some(owner) => {
                owner.waits_for_dependents()
                    || (owner.res.namespaced && owner.namespace != node.namespace)
            }
        })
    }

    /// Applies one change; pushes the uids it gives work to.
    fn apply(&mut self, kind: EventType, uid: Uid, node: Node, work: &mut Vec<Uid>) {
        if kind == EventType::Deleted {
            self.remove(&uid, work);
            return;
        }
        let old = self.nodes.insert(Arc::clone(&uid), node.clone());
        let owners_changed = old.as_ref().is_none_or(|o| o.owners != node.owners);
        if owners_changed {
            if let Some(o) = &old {
                self.unlink(&uid, &o.owners);
                // An owner waiting for its dependents may wait no more.
                for r in o.owners.iter() {
                    if self
                        .nodes
                        .get(&r.uid)
                        .is_some_and(Node::waits_for_dependents)
                    {
                        work.push(Arc::clone(&r.uid));
                    }
                }
            }
            self.link(&uid, &node.owners);
            if !node.owners.is_empty() && self.needs_attention(&node) {
                work.push(Arc::clone(&uid));
            }
        }
        if node.deleting && (node.orphan || node.foreground) {
            work.push(Arc::clone(&uid));
        }
        let started_waiting =
            node.waits_for_dependents() && !old.as_ref().is_some_and(Node::waits_for_dependents);
        if started_waiting {
            work.extend(self.dependents_of(&uid));
        }
    }

    fn remove(&mut self, uid: &Uid, work: &mut Vec<Uid>) {
        if let Some(old) = self.nodes.remove(uid) {
            self.unlink(uid, &old.owners);
            for r in old.owners.iter() {
                if self
                    .nodes
                    .get(&r.uid)
                    .is_some_and(Node::waits_for_dependents)
                {
                    work.push(Arc::clone(&r.uid));
                }
            }
        }
        work.extend(self.dependents_of(uid));
    }

    /// Whether `uid` has work now (for the keys held back during a start).
    fn has_work(&self, uid: &str) -> bool {
        self.nodes.get(uid).is_some_and(|n| {
            (n.deleting && (n.orphan || n.foreground))
                || (!n.owners.is_empty() && self.needs_attention(n))
        })
    }
}

/// One term's state, shared by the feed and the workers.
struct Term {
    graph: Mutex<Graph>,
    queue: Arc<WorkQueue>,
    /// Owner uids a quorum read found absent.
    absent: moka::sync::Cache<Uid, ()>,
    /// (dependent, owner) pairs already reported as invalid.
    reported: Mutex<HashSet<(Uid, Uid)>>,
}

impl Term {
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn node(&self, uid: &str) -> Option<Node> {
        self.graph().nodes.get(uid).cloned()
    }
}

/// The collector: the current term, set by the feed when a term starts.
#[derive(Default)]
pub struct Collector {
    term: Mutex<Option<Arc<Term>>>,
}

impl Collector {
    fn term(&self) -> Option<Arc<Term>> {
        self.term.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub fn controller(_state: &AppState) -> Controller<AppState> {
    let gc = Arc::new(Collector::default());
    let feed_gc = Arc::clone(&gc);
    Controller {
        name: NAME,
        sources: Vec::new(),
        feed: Some(Arc::new(move |state, queue| {
            feed(Arc::clone(&feed_gc), state, queue).boxed()
        })),
        reconcile: Arc::new(move |state, uid| reconcile(Arc::clone(&gc), state, uid).boxed()),
        workers: 16,
        capacity: 200_000,
        backoff: super::queue::Backoff::default(),
        resync: None,
    }
}

/// What a collection's watcher tells the feed.
enum Update {
    /// A (re-)opened watch: its snapshot follows.
    Begin(Arc<str>),
    Event {
        res: Row,
        collection: Arc<str>,
        kind: EventType,
        /// The object's metadata alone (`Object::metadata_only`).
        value: Value,
        revision: i64,
    },
    /// The snapshot is complete.
    Synced(Arc<str>),
}

/// Every stored collection the registry serves now, one row each.
fn collections(state: &AppState) -> Vec<(Row, String)> {
    let mut seen = HashSet::new();
    state
        .registry
        .all()
        .iter()
        .filter(|r| r.virtual_create.is_none() && r.computed.is_none())
        .filter_map(|r| {
            let prefix = state.collection_prefix(&r, None);
            seen.insert(prefix.clone()).then_some((r, prefix))
        })
        .collect()
}

async fn follow(state: Arc<AppState>, res: Row, collection: Arc<str>, tx: mpsc::Sender<Update>) {
    let mut delay = Duration::from_millis(100);
    loop {
        if tx
            .send(Update::Begin(Arc::clone(&collection)))
            .await
            .is_err()
        {
            return;
        }
        let opts = WatchOptions {
            initial_events: true,
            ..WatchOptions::default()
        };
        match state.store.watch(&collection, opts).await {
            Ok(mut stream) => {
                let mut synced = false;
                while let Some(ev) = stream.next().await {
                    let update = match ev {
                        Ok(ev) if ev.kind == EventType::Bookmark => {
                            if synced {
                                continue;
                            }
                            synced = true;
                            Update::Synced(Arc::clone(&collection))
                        }
                        Ok(ev) => {
                            delay = Duration::from_millis(100);
                            Update::Event {
                                res: res.clone(),
                                collection: Arc::clone(&collection),
                                kind: ev.kind,
                                // The graph reads metadata alone.
                                value: ev.object.metadata_only(),
                                revision: ev.object.revision,
                            }
                        }
                        Err(e) => {
                            tracing::warn!(collection = %collection, error = %e, "garbage collector: watch failed; resyncing");
                            break;
                        }
                    };
                    if tx.send(update).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(collection = %collection, error = %e, "garbage collector: cannot watch; retrying");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// One term's feed: opens a watch per collection (and per collection
/// added later), keeps the graph, queues the uids with work.
async fn feed(gc: Arc<Collector>, state: Arc<AppState>, queue: Arc<WorkQueue>) {
    // Every collection is watched with its initial events. Opened before
    // the watch cache's first list is done, each would be served by etcd:
    // a second full list and decode of every object, beside the cache's,
    // which at start-up with 1,000,000 objects took as long as the cache's.
    // kube's collector also starts from informers that have synced.
    // Every cluster's cache (`--etcd-servers-overrides`) before starting.
    for cache in state.caches() {
        while !cache.wait_ready(CACHE_WAIT_LOG).await {
            if cache.phase() == watchcache::CachePhase::Stopped {
                return;
            }
            tracing::info!("garbage collector: waiting for the watch cache's first list");
        }
    }
    let term = Arc::new(Term {
        graph: Mutex::new(Graph::default()),
        queue: Arc::clone(&queue),
        absent: moka::sync::Cache::new(ABSENT_CACHE),
        reported: Mutex::new(HashSet::new()),
    });
    *gc.term.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&term));
    let (tx, mut rx) = mpsc::channel::<Update>(4096);
    let mut watchers = tokio::task::JoinSet::new();
    // The watcher of each collection, by prefix: one the registry no longer
    // serves (a deleted CRD's) is stopped, which lets its row go.
    let mut opened: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut changes = state.registry.changes();
    // Collections whose first snapshot is still coming, and the keys held
    // back until then.
    let mut starting: HashSet<Arc<str>> = HashSet::new();
    let mut held: Option<HashSet<Uid>> = Some(HashSet::new());
    let started = Instant::now();
    // Per collection being re-listed: the uids its new snapshot has.
    let mut relisting: HashMap<Arc<str>, HashSet<Uid>> = HashMap::new();
    let mut first = true;
    // The registry's collections are walked when it changes, not on every
    // event: at thousands of writes a second the walk was a fifth of the
    // server's instructions.
    let mut registry_changed = true;
    loop {
        if registry_changed {
            let current = collections(&state);
            let served: HashSet<&str> = current.iter().map(|(_, p)| p.as_str()).collect();
            opened.retain(|prefix, watcher| {
                let keep = served.contains(prefix.as_str());
                if !keep {
                    watcher.abort();
                    starting.remove(prefix.as_str());
                }
                keep
            });
            for (res, prefix) in current {
                if let std::collections::hash_map::Entry::Vacant(slot) = opened.entry(prefix) {
                    let collection: Arc<str> = Arc::from(slot.key().as_str());
                    if first {
                        starting.insert(Arc::clone(&collection));
                    }
                    slot.insert(watchers.spawn(follow(
                        Arc::clone(&state),
                        res,
                        collection,
                        tx.clone(),
                    )));
                }
            }
            // Stopped watchers are reaped here (a JoinSet keeps a finished
            // task until it is joined).
            while watchers.try_join_next().is_some() {}
            first = false;
            registry_changed = false;
        }
        let update = tokio::select! {
            r = changes.changed() => {
                if r.is_err() {
                    // The registry is gone: the server is stopping.
                    std::future::pending::<()>().await;
                }
                registry_changed = true;
                continue;
            }
            u = rx.recv() => match u {
                Some(u) => u,
                None => return,
            },
            () = tokio::time::sleep(Duration::from_secs(1)), if held.is_some() => {
                if started.elapsed() >= SYNC_WAIT {
                    tracing::warn!(waiting = starting.len(), "garbage collector: not every collection listed in time; working anyway");
                    starting.clear();
                }
                Update::Synced(Arc::from(""))
            }
        };
        let mut work = Vec::new();
        match update {
            Update::Begin(c) => {
                relisting.insert(c, HashSet::new());
            }
            Update::Event {
                res,
                collection,
                kind,
                value,
                revision,
            } => {
                if let Some((uid, node)) = node_of(res, &collection, &value, revision) {
                    if let Some(seen) = relisting.get_mut(&collection) {
                        seen.insert(Arc::clone(&uid));
                    }
                    term.graph().apply(kind, uid, node, &mut work);
                }
            }
            Update::Synced(c) => {
                if let Some(seen) = relisting.remove(&c) {
                    let mut g = term.graph();
                    let gone: Vec<Uid> = g
                        .nodes
                        .iter()
                        .filter(|(uid, n)| n.collection == c && !seen.contains(*uid))
                        .map(|(uid, _)| Arc::clone(uid))
                        .collect();
                    for uid in gone {
                        g.remove(&uid, &mut work);
                    }
                }
                starting.remove(&c);
            }
        }
        match &mut held {
            Some(h) => {
                h.extend(work);
                if starting.is_empty() {
                    let keys: Vec<Uid> = {
                        let g = term.graph();
                        h.drain().filter(|u| g.has_work(u)).collect()
                    };
                    held = None;
                    tracing::info!(
                        objects = term.graph().nodes.len(),
                        work = keys.len(),
                        "garbage collector: graph synced"
                    );
                    for k in keys {
                        queue.add(&k).await;
                    }
                }
            }
            None => {
                for k in work {
                    queue.add(&k).await;
                }
            }
        }
    }
}

/// The state of one owner reference.
enum OwnerState {
    /// The owner exists and is not waiting for its dependents.
    Solid,
    /// The owner does not exist (or has another uid).
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
}

async fn reconcile(gc: Arc<Collector>, state: Arc<AppState>, uid: String) -> Result<Next, String> {
    let Some(term) = gc.term() else {
        return Ok(Next::Done);
    };
    let Some(node) = term.node(&uid) else {
        return Ok(Next::Done);
    };
    let key = node.key(&state);
    let Some(current) = read(&state, &key, &uid, node.revision).await? else {
        return Ok(Next::Done);
    };
    let v = current.value();
    if object::is_deleting(v) {
        let finalizers = object::finalizers(v);
        if finalizers.iter().any(|f| f == object::FINALIZER_ORPHAN) {
            return orphan_dependents(&state, &term, &node, &key, &uid).await;
        }
        if finalizers.iter().any(|f| f == object::FINALIZER_FOREGROUND) {
            return deleting_dependents(&state, &term, &node, &key, &uid).await;
        }
        return Ok(Next::Done);
    }
    attempt_to_delete(&state, &term, &node, &key, &uid, current).await
}

/// The object at `key`, at least as new as `revision`, if it is still the
/// one with `uid`.
async fn read(
    state: &AppState,
    key: &str,
    uid: &str,
    revision: i64,
) -> Result<Option<Object>, String> {
    let got = state
        .store
        .get(key, Freshness::NotOlderThan(revision))
        .await
        .map_err(|e| e.to_string())?;
    Ok(got.filter(|o| object::meta_str(o.value(), "uid") == Some(uid)))
}

/// The registry row an owner reference's kind resolves to.
fn owner_resource(state: &AppState, o: &Owner) -> Option<Row> {
    let (group, version) = o
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", &o.api_version));
    state.registry.by_kind(group, version, &o.kind).or_else(|| {
        // An owner named in a version no longer served is still that
        // kind (kube's RESTMapper resolves the group and kind).
        state
            .registry
            .all()
            .filter(|r| r.group == group && r.kind == o.kind)
            .next()
    })
}

async fn report_invalid(state: &AppState, term: &Term, node: &Node, uid: &str, o: &Owner) {
    let first = term
        .reported
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((Arc::from(uid), Arc::clone(&o.uid)));
    if !first {
        return;
    }
    let ns = node.namespace.as_deref().unwrap_or("");
    let message = format!(
        "ownerRef [{}/{}, namespace: {ns}, name: {}, uid: {}] does not exist in namespace {}",
        o.api_version,
        o.kind,
        o.name,
        o.uid,
        object::quote(ns)
    );
    let mut regarding = serde_json::json!({
        "apiVersion": node.res.api_version(),
        "kind": node.res.kind,
        "metadata": {"name": &*node.name, "uid": uid},
    });
    if let Some(n) = &node.namespace {
        regarding["metadata"]["namespace"] = Value::from(&**n);
    }
    events::record_legacy(
        state,
        Legacy {
            regarding: &regarding,
            kind: events::WARNING,
            reason: "OwnerRefInvalidNamespace",
            message,
            component: COMPONENT,
        },
    )
    .await;
}

/// Classifies one owner reference of `node` (kube's `isDangling` and
/// `classifyReferences`); `None` for a reference that can never resolve (a
/// namespaced owner of a cluster-scoped object).
async fn owner_state(
    state: &AppState,
    term: &Term,
    node: &Node,
    uid: &str,
    o: &Owner,
) -> Result<Option<OwnerState>, String> {
    let Some(res) = owner_resource(state, o) else {
        return Err(format!(
            "cannot resolve the owner kind {}, {}",
            o.api_version, o.kind
        ));
    };
    if res.namespaced && node.namespace.is_none() {
        report_invalid(state, term, node, uid, o).await;
        return Ok(None);
    }
    let seen = term.node(&o.uid);
    if let Some(owner) = &seen {
        if res.namespaced && owner.namespace != node.namespace {
            // The owner exists, elsewhere: from here it is absent.
            report_invalid(state, term, node, uid, o).await;
        } else {
            return Ok(Some(if owner.waits_for_dependents() {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            }));
        }
    }
    if term.absent.contains_key(&o.uid) {
        return Ok(Some(OwnerState::Dangling));
    }
    let ns = if res.namespaced {
        node.namespace.as_deref()
    } else {
        None
    };
    let key = state.key(&res, ns, &o.name);
    let found = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    match found {
        Some(owner) if object::meta_str(owner.value(), "uid") == Some(&*o.uid) => {
            let v = owner.value();
            let waits = object::is_deleting(v)
                && object::finalizers(v)
                    .iter()
                    .any(|f| f == object::FINALIZER_FOREGROUND);
            Ok(Some(if waits {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            }))
        }
        _ => {
            term.absent.insert(Arc::clone(&o.uid), ());
            Ok(Some(OwnerState::Dangling))
        }
    }
}

/// kube's `attemptToDeleteItem` for an object not being deleted.
async fn attempt_to_delete(
    state: &AppState,
    term: &Term,
    node: &Node,
    key: &str,
    uid: &str,
    current: Object,
) -> Result<Next, String> {
    let owners = owners_of(current.value());
    if owners.is_empty() {
        return Ok(Next::Done);
    }
    let (mut solid, mut dangling, mut waiting) = (0, Vec::new(), Vec::new());
    for o in &owners {
        match owner_state(state, term, node, uid, o).await? {
            None => return Ok(Next::Done),
            Some(OwnerState::Solid) => solid += 1,
            Some(OwnerState::Dangling) => dangling.push(Arc::clone(&o.uid)),
            Some(OwnerState::Waiting) => waiting.push(Arc::clone(&o.uid)),
        }
    }
    if solid > 0 {
        if dangling.is_empty() && waiting.is_empty() {
            return Ok(Next::Done);
        }
        // Other owners hold it: only the references to the absent and the
        // waiting ones go.
        let drop: HashSet<Uid> = dangling.into_iter().chain(waiting).collect();
        let mut v = current.value().clone();
        retain_owners(&mut v, |r| !drop.contains(r));
        return write(state, key, &v, current.revision).await;
    }
    let policy = if !waiting.is_empty() && term.graph().has_dependents(uid) {
        // An owner waits on this object, which has dependents of its own:
        // it goes in the foreground too. A dependent that itself waits
        // would be a cycle: the object stops blocking its owners first.
        let cycle = {
            let g = term.graph();
            g.dependents_of(uid)
                .iter()
                .any(|d| g.nodes.get(d).is_some_and(Node::waits_for_dependents))
        };
        if cycle {
            let mut v = current.value().clone();
            unblock_owners(&mut v);
            return write(state, key, &v, current.revision).await;
        }
        PropagationPolicy::Foreground
    } else {
        let finalizers = object::finalizers(current.value());
        if finalizers.iter().any(|f| f == object::FINALIZER_ORPHAN) {
            PropagationPolicy::Orphan
        } else if finalizers.iter().any(|f| f == object::FINALIZER_FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        }
    };
    let params = DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    };
    match delete_stored(state, &node.res, key, &current, &params).await {
        Ok(Outcome::Deleted(_)) => {
            tracing::debug!(key, "garbage collector: deleted");
            Ok(Next::Done)
        }
        Ok(Outcome::Pending(_)) => Ok(Next::Done),
        Err(StorageError::NotFound { .. }) => Ok(Next::Done),
        Err(e) => Err(e.to_string()),
    }
}

fn retain_owners(v: &mut Value, mut keep: impl FnMut(&str) -> bool) {
    let meta = object::meta_mut(v);
    meta.remove("resourceVersion");
    if let Some(refs) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        refs.retain(|r| r.get("uid").and_then(Value::as_str).is_none_or(&mut keep));
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

fn unblock_owners(v: &mut Value) {
    let meta = object::meta_mut(v);
    meta.remove("resourceVersion");
    if let Some(refs) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for r in refs {
            if let Some(o) = r.as_object_mut() {
                if o.contains_key("blockOwnerDeletion") {
                    o.insert("blockOwnerDeletion".into(), Value::Bool(false));
                }
            }
        }
    }
}

/// Stores `v` over the revision it was read at.
async fn write(state: &AppState, key: &str, v: &Value, revision: i64) -> Result<Next, String> {
    match state.store.update(key, v, revision).await {
        Ok(_) | Err(StorageError::NotFound { .. }) => Ok(Next::Done),
        Err(e) => Err(e.to_string()),
    }
}

/// The owner is being deleted in the foreground: its finalizer goes once
/// no dependent blocks it; until then the blocking ones are queued (their
/// deletion queues the owner again).
async fn deleting_dependents(
    state: &AppState,
    term: &Term,
    node: &Node,
    key: &str,
    uid: &str,
) -> Result<Next, String> {
    let blocking: Vec<(Uid, bool)> = {
        let g = term.graph();
        g.dependents_of(uid)
            .into_iter()
            .filter_map(|d| {
                let dep = g.nodes.get(&d)?;
                dep.owners
                    .iter()
                    .any(|o| &*o.uid == uid && o.block)
                    .then(|| (Arc::clone(&d), dep.waits_for_dependents()))
            })
            .collect()
    };
    if blocking.is_empty() {
        return remove_finalizer(state, node, key, uid, object::FINALIZER_FOREGROUND).await;
    }
    for (dep, waits) in blocking {
        if !waits && !term.queue.try_add(&dep) {
            // The queue is full: look again later rather than wait on it
            // from inside a worker.
            return Ok(Next::After(Duration::from_secs(1)));
        }
    }
    Ok(Next::Done)
}

/// The owner is being deleted with orphan propagation: every dependent
/// loses its reference to it, then the `orphan` finalizer goes.
async fn orphan_dependents(
    state: &AppState,
    term: &Term,
    node: &Node,
    key: &str,
    uid: &str,
) -> Result<Next, String> {
    let deps: Vec<(Uid, Node)> = {
        let g = term.graph();
        g.dependents_of(uid)
            .into_iter()
            .filter_map(|d| g.nodes.get(&d).cloned().map(|n| (d, n)))
            .collect()
    };
    let failures: Vec<String> = futures_util::stream::iter(deps)
        .map(|(dep_uid, dep)| async move { release(state, &dep, &dep_uid, uid).await })
        .buffer_unordered(FAN_OUT)
        .filter_map(|r| async move { r.err() })
        .collect()
        .await;
    if !failures.is_empty() {
        return Err(format!(
            "orphaning {} dependents failed: {}",
            failures.len(),
            failures[0]
        ));
    }
    remove_finalizer(state, node, key, uid, object::FINALIZER_ORPHAN).await
}

/// Removes `dep`'s references to `owner`.
async fn release(state: &AppState, dep: &Node, dep_uid: &str, owner: &str) -> Result<(), String> {
    let key = dep.key(state);
    for _ in 0..8 {
        let Some(current) = read(state, &key, dep_uid, dep.revision).await? else {
            return Ok(());
        };
        if !owners_of(current.value()).iter().any(|o| &*o.uid == owner) {
            return Ok(());
        }
        let mut v = current.value().clone();
        retain_owners(&mut v, |r| r != owner);
        match state.store.update(&key, &v, current.revision).await {
            Ok(_) | Err(StorageError::NotFound { .. }) => return Ok(()),
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!("{key}: kept changing"))
}

/// Removes `finalizer` from the object at `key`; the last finalizer of an
/// object being deleted takes the object with it.
async fn remove_finalizer(
    state: &AppState,
    node: &Node,
    key: &str,
    uid: &str,
    finalizer: &str,
) -> Result<Next, String> {
    let (res, revision) = (node.res.clone(), node.revision);
    let Some(current) = read(state, key, uid, revision).await? else {
        return Ok(Next::Done);
    };
    let left: Vec<String> = object::finalizers(current.value())
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    if left.len() == object::finalizers(current.value()).len() {
        return Ok(Next::Done);
    }
    if left.is_empty() && object::is_deleting(current.value()) {
        return match state.store.delete(key, Some(current.revision)).await {
            Ok(gone) => {
                crate::handlers::write::after_delete(state, &res, gone.value()).await;
                Ok(Next::Done)
            }
            Err(StorageError::NotFound { .. }) => Ok(Next::Done),
            Err(e) => Err(e.to_string()),
        };
    }
    let mut v = current.value().clone();
    let meta = object::meta_mut(&mut v);
    meta.remove("resourceVersion");
    if left.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert(
            "finalizers".into(),
            Value::Array(left.into_iter().map(Value::String).collect()),
        );
    }
    write(state, key, &v, current.revision).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> Row {
        crate::registry::Registry::builtin()
            .lookup("", "v1", "configmaps")
            .unwrap()
    }

    fn obj(uid: &str, owners: &[(&str, bool)], finalizers: &[&str], deleting: bool) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(u, b)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("o-{u}"), "uid": u, "blockOwnerDeletion": b}))
            .collect();
        let mut v = json!({"metadata": {"name": format!("n-{uid}"), "namespace": "ns", "uid": uid, "ownerReferences": refs, "finalizers": finalizers}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        v
    }

    fn apply(g: &mut Graph, kind: EventType, v: &Value) -> Vec<String> {
        let c: Arc<str> = Arc::from("/c/");
        let (uid, node) = node_of(row(), &c, v, 1).unwrap();
        let mut work = Vec::new();
        g.apply(kind, uid, node, &mut work);
        let mut w: Vec<String> = work.iter().map(|u| u.to_string()).collect();
        w.sort();
        w
    }

    #[test]
    fn a_deleted_owner_queues_its_dependents() {
        let mut g = Graph::default();
        assert!(apply(&mut g, EventType::Added, &obj("o", &[], &[], false)).is_empty());
        assert!(apply(
            &mut g,
            EventType::Added,
            &obj("d1", &[("o", false)], &[], false)
        )
        .is_empty());
        assert!(apply(
            &mut g,
            EventType::Added,
            &obj("d2", &[("o", true)], &[], false)
        )
        .is_empty());
        let work = apply(&mut g, EventType::Deleted, &obj("o", &[], &[], false));
        assert_eq!(work, ["d1", "d2"]);
        assert!(!g.nodes.contains_key("o"));
    }

    #[test]
    fn a_dependent_of_an_unknown_owner_has_work() {
        let mut g = Graph::default();
        let work = apply(
            &mut g,
            EventType::Added,
            &obj("d", &[("ghost", false)], &[], false),
        );
        assert_eq!(work, ["d"]);
        assert!(g.has_work("d"));
    }

    #[test]
    fn foreground_deletion_queues_the_owner_and_every_dependent_once() {
        let mut g = Graph::default();
        apply(&mut g, EventType::Added, &obj("o", &[], &[], false));
        apply(
            &mut g,
            EventType::Added,
            &obj("d", &[("o", true)], &[], false),
        );
        let work = apply(
            &mut g,
            EventType::Modified,
            &obj("o", &[], &["foregroundDeletion"], true),
        );
        assert_eq!(work, ["d", "o"]);
        // A later change of the waiting owner does not fan out again.
        let work = apply(
            &mut g,
            EventType::Modified,
            &obj("o", &[], &["foregroundDeletion", "x"], true),
        );
        assert_eq!(work, ["o"]);
        // The blocking dependent's deletion wakes the owner.
        let work = apply(
            &mut g,
            EventType::Deleted,
            &obj("d", &[("o", true)], &[], false),
        );
        assert_eq!(work, ["o"]);
    }

    #[test]
    fn dropping_a_reference_wakes_a_waiting_owner() {
        let mut g = Graph::default();
        apply(
            &mut g,
            EventType::Added,
            &obj("o", &[], &["foregroundDeletion"], true),
        );
        apply(
            &mut g,
            EventType::Added,
            &obj("d", &[("o", true)], &[], false),
        );
        let work = apply(&mut g, EventType::Modified, &obj("d", &[], &[], false));
        assert_eq!(work, ["o"]);
        assert!(!g.has_dependents("o"));
    }

    #[test]
    fn an_orphaning_owner_has_work() {
        let mut g = Graph::default();
        let work = apply(&mut g, EventType::Added, &obj("o", &[], &["orphan"], true));
        assert_eq!(work, ["o"]);
    }

    #[test]
    fn references_are_filtered_by_uid() {
        let mut v = obj("d", &[("a", true), ("b", false)], &[], false);
        retain_owners(&mut v, |u| u != "a");
        let refs = v["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0]["uid"], "b");
        retain_owners(&mut v, |_| false);
        assert!(v["metadata"].get("ownerReferences").is_none());
        let mut v = obj("d", &[("a", true)], &[], false);
        unblock_owners(&mut v);
        assert_eq!(
            v["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            false
        );
    }
}

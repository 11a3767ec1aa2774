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
//! The leader's status writes leave the round ([`StatusWriter`]): the
//! round computes them and goes on to the next events while etcd takes
//! them, at most one per CRD and [`MAX_WRITES`] at a time. Waiting for them
//! in the round made every round as long as its slowest write, and events
//! queued behind it (BENCHMARKS.md, "The CRD served delay, profiled").
//!
//! It reads and writes through the backend only, so it names nothing of
//! the server's state.
//!
//! Between rounds it keeps per CRD a handle on the watch cache's bytes of
//! the object (the cache holds them anyway), the revision, a small tree of
//! the facts the rounds compare ([`facts`]: names, status, deletion) and
//! the rows. A CRD's whole tree (its schemas are tens of kilobytes of JSON
//! and several times that as a tree) is decoded only while it is needed:
//! to build its rows after a change, or to write its status or finalizers.

use super::{accepted_names, rows, status, CLEANUP_FINALIZER, GROUP, PLURAL};
use crate::backend::Backend;
use crate::object;
use crate::registry::{Shared, Str};
use apimachinery::read::{Freshness, Predicate};
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use watchcache::{EventType, ListOptions, Object, StorageError, WatchOptions};

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
    let writer = StatusWriter::default();
    loop {
        match follow(&state, &mut leader, &writer).await {
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

/// One CRD as the controller holds it between rounds.
struct Entry {
    /// The cached object: a handle on its compact bytes, decoded again
    /// ([`decode`]) only when the whole CRD is needed.
    object: Object,
    revision: i64,
    /// What names, status and clean-up read of the CRD ([`facts`]).
    facts: Value,
    /// The registry rows it defines (computed once per change).
    rows: Vec<crate::registry::Row>,
}

impl Entry {
    /// The entry of an event's object and its name; its rows are filled
    /// in by [`build_rows`].
    fn new(object: &Object) -> (String, Entry) {
        let (name, facts) = object.with_value(|v| {
            let facts = if is_v1beta1(v) {
                facts(&super::v1beta1::to_v1(v))
            } else {
                facts(v)
            };
            (name_of(v), facts)
        });
        let entry = Entry {
            // Bytes only, whatever the event's handle decoded.
            object: object.compacted(),
            revision: object.revision,
            facts,
            rows: Vec::new(),
        };
        (name, entry)
    }

    fn group(&self) -> &str {
        self.facts
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// kube-apiserver stores CRDs as v1beta1; the controller reads v1.
fn is_v1beta1(crd: &Value) -> bool {
    crd.get("apiVersion").and_then(Value::as_str) == Some(super::v1beta1::V1BETA1)
}

/// The whole CRD of a cached object in its v1 form, decoded now; the
/// caller's tree is the only one (the handle keeps none).
fn decode(object: &Object) -> Value {
    let crd = Arc::unwrap_or_clone(object.clone().into_value());
    if is_v1beta1(&crd) {
        super::v1beta1::to_v1(&crd)
    } else {
        crd
    }
}

/// The parts of a (v1) CRD that name acceptance ([`accepted_names`]),
/// status ([`status::desired`]) and the clean-up read: `metadata.name`,
/// `deletionTimestamp` and `finalizers`; `spec.group`, `names` and `scope`,
/// and each version's `name`, `served` and `storage`; the whole `status`.
/// A CRD with these facts and the rest of its spec left out gets the same
/// acceptance and the same status.
fn facts(crd: &Value) -> Value {
    fn pick(from: Option<&Value>, keys: &[&str]) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(from) = from.and_then(Value::as_object) {
            for k in keys {
                if let Some(v) = from.get(*k) {
                    out.insert((*k).to_string(), v.clone());
                }
            }
        }
        out
    }
    let mut spec = pick(crd.get("spec"), &["group", "names", "scope"]);
    if let Some(versions) = crd.pointer("/spec/versions").and_then(Value::as_array) {
        let versions = versions
            .iter()
            .map(|v| Value::Object(pick(Some(v), &["name", "served", "storage"])))
            .collect();
        spec.insert("versions".into(), Value::Array(versions));
    }
    let mut out = pick(Some(crd), &["apiVersion", "kind"]);
    out.insert(
        "metadata".into(),
        Value::Object(pick(
            crd.get("metadata"),
            &["name", "deletionTimestamp", "finalizers"],
        )),
    );
    out.insert("spec".into(), Value::Object(spec));
    if let Some(status) = crd.get("status") {
        out.insert("status".into(), status.clone());
    }
    Value::Object(out)
}

type Crds = BTreeMap<String, Entry>;

/// The leader's status writes, sent from the round to run on their own.
/// A CRD has at most one write in flight, keyed by the revision it was
/// computed from: a round that sees the same revision again (the write's
/// own event has not come back yet) does not send it twice. A write that
/// fails is redone by the next round that looks at its group, as when the
/// round waited for it.
#[derive(Clone)]
struct StatusWriter {
    in_flight: Arc<std::sync::Mutex<HashMap<String, i64>>>,
    permits: Arc<Semaphore>,
}

impl Default for StatusWriter {
    fn default() -> Self {
        StatusWriter {
            in_flight: Arc::default(),
            permits: Arc::new(Semaphore::new(MAX_WRITES)),
        }
    }
}

impl StatusWriter {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `name` at `revision` for a write; false when a write from
    /// that revision is already in flight.
    fn claim(&self, name: &str, revision: i64) -> bool {
        let mut m = self.lock();
        if m.get(name) == Some(&revision) {
            return false;
        }
        m.insert(name.to_string(), revision);
        true
    }

    /// The write from `revision` is done; a newer claim stays.
    fn release(&self, name: &str, revision: i64) {
        let mut m = self.lock();
        if m.get(name) == Some(&revision) {
            m.remove(name);
        }
    }

    /// Writes `status` into the CRD `name` as of `revision` (its cached
    /// object), on a task of its own; false when the same write is still
    /// in flight.
    fn send(
        &self,
        state: &Arc<Backend>,
        name: &str,
        status: Value,
        object: &Object,
        revision: i64,
    ) -> bool {
        if !self.claim(name, revision) {
            return false;
        }
        let (this, state, name, object) = (
            self.clone(),
            state.clone(),
            name.to_string(),
            object.clone(),
        );
        tokio::spawn(async move {
            // Closed only when the process ends.
            let Ok(_permit) = this.permits.acquire().await else {
                return;
            };
            let key = format!("{}{name}", collection(&state));
            let mut next = decode(&object);
            if let Some(m) = next.as_object_mut() {
                m.insert("status".into(), status);
            }
            match state.store.update(&key, &next, revision).await {
                Ok(_) => tracing::debug!(crd = %name, "CRD status updated"),
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
                Err(err) => tracing::warn!(crd = %name, error = %err, "CRD status write failed"),
            }
            this.release(&name, revision);
        });
        true
    }
}

async fn follow(
    state: &Arc<Backend>,
    leader: &mut watch::Receiver<bool>,
    writer: &StatusWriter,
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
    // When the last round ended: the wait for the next event is the time
    // the controller sat idle (a round that finds its events already
    // queued waited for the one before it).
    let mut idle_since = Instant::now();
    loop {
        tokio::select! {
            ev = stream.next() => {
                let Some(ev) = ev else { return Ok(()) };
                let started = Instant::now();
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
                // Whether a CRD that had rows lost them (deleted, or changed
                // and waiting for its rows to be built again).
                let mut dropped = false;
                for ev in batch {
                    match (&mut initial, ev.kind) {
                        (Some(init), EventType::Added) => {
                            let (name, e) = Entry::new(&ev.object);
                            init.insert(name, e);
                        }
                        (Some(init), EventType::Bookmark) => {
                            crds = std::mem::take(init);
                            initial = None;
                            changed.extend(crds.keys().cloned());
                            touched = None;
                        }
                        (Some(_), _) | (None, EventType::Bookmark) => {}
                        (None, EventType::Added | EventType::Modified) => {
                            let (name, e) = Entry::new(&ev.object);
                            if let Some(t) = touched.as_mut() {
                                t.insert(e.group().to_string());
                            }
                            if let Some(old) = crds.insert(name.clone(), e) {
                                dropped |= !old.rows.is_empty();
                            }
                            changed.push(name);
                        }
                        (None, EventType::Deleted) => {
                            let name = name_of(&ev.object.metadata_only());
                            if let Some(e) = crds.remove(&name) {
                                dropped |= !e.rows.is_empty();
                                if let Some(t) = touched.as_mut() {
                                    t.insert(e.group().to_string());
                                }
                            }
                        }
                    }
                }
                if initial.is_some() {
                    continue;
                }
                let events = changed.len();
                let built = build_rows(&mut crds, &changed).await;
                let rows_done = Instant::now();
                // The registry's rows change only when some were built or
                // dropped: a round of not-yet-established CRDs (the first
                // event of every create) leaves them as they are.
                if built > 0 || dropped {
                    install(state, &crds);
                }
                let installed = Instant::now();
                let writes = if *leader.borrow() {
                    reconcile(state, writer, &crds, touched.as_ref(), Some(&changed)).await
                } else {
                    0
                };
                let ended = Instant::now();
                // Per-stage times of the round, for profiling the delay
                // between a CRD's create and its being served.
                tracing::debug!(
                    crds = crds.len(),
                    events,
                    built,
                    writes,
                    idle_ms = ms(started - idle_since),
                    rows_ms = ms(rows_done - started),
                    install_ms = ms(installed - rows_done),
                    reconcile_ms = ms(ended - installed),
                    "CRD controller round"
                );
                idle_since = ended;
            }
            changed = leader.changed() => {
                if changed.is_err() {
                    // The election is gone (shutdown): serve, write nothing.
                    std::future::pending::<()>().await;
                }
                if initial.is_none() && *leader.borrow_and_update() {
                    reconcile(state, writer, &crds, None, None).await;
                }
            }
            _ = tick.tick() => {
                if initial.is_none() && *leader.borrow() {
                    cleanup_all(state, &crds, None).await;
                }
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Fills in the registry rows of the `changed` CRDs that are established,
/// on the blocking pool, a share of the CRDs per core (building a large
/// schema's rows takes milliseconds; thousands of CRDs arrive at once after
/// a restart). Returns how many CRDs it built rows for.
async fn build_rows(crds: &mut Crds, changed: &[String]) -> usize {
    let todo: Vec<(String, Object)> = changed
        .iter()
        .filter_map(|n| crds.get(n).map(|e| (n, e)))
        .filter(|(_, e)| super::condition_true(&e.facts, "Established"))
        .map(|(n, e)| (n.clone(), e.object.clone()))
        .collect();
    if todo.is_empty() {
        return 0;
    }
    let count = todo.len();
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
                .map(|(n, object)| (n, rows(&decode(&object))))
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
    count
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
/// up to date, then runs the deletion clean-up of the `changed` CRDs
/// (every one when `None`). The status writes go to `writer` and run
/// after the round. Returns how many it sent.
async fn reconcile(
    state: &Arc<Backend>,
    writer: &StatusWriter,
    crds: &Crds,
    groups: Option<&BTreeSet<String>>,
    changed: Option<&[String]>,
) -> usize {
    let now = object::now();
    let mut by_group: BTreeMap<&str, Vec<(&String, &Entry)>> = BTreeMap::new();
    for (name, e) in crds {
        by_group.entry(e.group()).or_default().push((name, e));
    }
    let mut sent = 0;
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
                .map(|(_, o)| &o.facts);
            let acceptance = accepted_names(&e.facts, others, &builtin);
            // The facts carry the whole status: the same answer as the
            // whole CRD's, which is decoded only to be written.
            let next = status::desired(&e.facts, &acceptance, &now)
                .and_then(|mut f| f.as_object_mut()?.remove("status"));
            if let Some(next) = next {
                sent += usize::from(writer.send(state, name, next, &e.object, e.revision));
            }
        }
    }
    cleanup_all(state, crds, changed).await;
    sent
}

/// Runs a clean-up round for every terminating CRD among `only` (every
/// one when `None`), at most [`MAX_WRITES`] at a time. A round of events
/// cleans up the CRDs it changed; the tick revisits all of them, so a
/// clean-up that could not finish (custom resources with finalizers of
/// their own, a lost race) is retried within a second. Cleaning every
/// terminating CRD one after the other in every round held the next
/// events back by seconds once a thousand CRDs were deleted at once.
async fn cleanup_all(state: &Arc<Backend>, crds: &Crds, only: Option<&[String]>) {
    let todo: Vec<(&String, &Entry)> = match only {
        None => crds.iter().collect(),
        Some(names) => names.iter().filter_map(|n| crds.get_key_value(n)).collect(),
    };
    futures_util::stream::iter(todo.into_iter().filter(|(_, e)| {
        object::is_deleting(&e.facts)
            && object::finalizers(&e.facts)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
    }))
    .for_each_concurrent(MAX_WRITES, |(name, e)| async move {
        if let Err(err) = cleanup(state, name, e).await {
            tracing::warn!(crd = %name, error = %err, "CRD clean-up failed; retrying");
        }
    })
    .await;
}

/// One round of deleting a terminating CRD's custom resources; when none
/// are left, drops the clean-up finalizer (and the CRD with it when it was
/// the last one).
async fn cleanup(state: &Arc<Backend>, name: &str, e: &Entry) -> Result<(), StorageError> {
    let (crd, revision) = (&e.facts, e.revision);
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
    let left: Vec<Value> = object::finalizers(crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .map(Value::String)
        .collect();
    let r = if left.is_empty() {
        state.store.delete(&key, Some(revision)).await.map(drop)
    } else {
        let mut next = decode(&e.object);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(group: &str, plural: &str, kind: &str) -> Value {
        let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}});
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}"), "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": plural, "kind": kind, "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": schema},
                    {"name": "v2", "served": false, "storage": false, "schema": schema}
                ]
            }
        })
    }

    /// The facts answer names and status as the whole CRD does, in every
    /// state the controller meets, and leave the schemas out.
    #[test]
    fn facts_decide_names_and_status_as_the_whole_crd() {
        let fresh = crd("example.com", "widgets", "Widget");
        let taken = {
            let mut t = crd("example.com", "gadgets", "Gadget");
            t["spec"]["names"]["shortNames"] = json!(["wd"]);
            let acc = accepted_names(&t, std::iter::empty(), &[]);
            status::desired(&t, &acc, "2026-01-01T00:00:00Z").unwrap()
        };
        let established = {
            let acc = accepted_names(&fresh, std::iter::empty(), &[]);
            status::desired(&fresh, &acc, "2026-01-01T00:00:00Z").unwrap()
        };
        let mut deleting = established.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-02T00:00:00Z");
        deleting["metadata"]["finalizers"] = json!([CLEANUP_FINALIZER]);
        let mut renamed = established.clone();
        renamed["spec"]["names"]["plural"] = json!("widgetz");
        renamed["spec"]["versions"][1]["storage"] = json!(true);
        renamed["spec"]["versions"][0]["storage"] = json!(false);
        let taken_facts = facts(&taken);
        for whole in [&fresh, &established, &deleting, &renamed] {
            let f = facts(whole);
            assert!(f.pointer("/spec/versions/0/schema").is_none());
            assert!(f.pointer("/metadata/managedFields").is_none());
            let by_whole = accepted_names(whole, std::iter::once(&taken), &[]);
            let by_facts = accepted_names(&f, std::iter::once(&taken_facts), &[]);
            assert_eq!(by_whole, by_facts);
            let now = "2026-01-03T00:00:00Z";
            let want = status::desired(whole, &by_whole, now).map(|c| c["status"].clone());
            let got = status::desired(&f, &by_facts, now).map(|c| c["status"].clone());
            assert_eq!(want, got, "{whole}");
            assert_eq!(object::is_deleting(whole), object::is_deleting(&f));
            assert_eq!(object::finalizers(whole), object::finalizers(&f));
        }
        // The short name another CRD holds is refused through the facts too.
        let r = accepted_names(&facts(&fresh), std::iter::once(&taken_facts), &[]);
        assert_eq!((r.accepted, r.reason), (false, "ShortNamesConflict"));
    }

    /// A CRD has one status write in flight per revision: the same
    /// revision is not sent twice, a newer one is, and the end of an older
    /// write leaves the newer claim in place.
    #[test]
    fn status_writes_are_claimed_once_per_revision() {
        let w = StatusWriter::default();
        assert!(w.claim("a.example.com", 5));
        assert!(!w.claim("a.example.com", 5));
        assert!(w.claim("b.example.com", 5));
        assert!(w.claim("a.example.com", 6));
        w.release("a.example.com", 5);
        assert!(!w.claim("a.example.com", 6));
        w.release("a.example.com", 6);
        assert!(w.claim("a.example.com", 6));
        w.release("b.example.com", 5);
        assert!(w.claim("b.example.com", 5));
    }

    /// An entry keeps the object's bytes, not its tree, and gives the
    /// whole CRD back (in its v1 form) when asked.
    #[test]
    fn an_entry_holds_bytes_and_decodes_the_whole_crd() {
        let whole = crd("example.com", "widgets", "Widget");
        let full = Object::new(Arc::new(whole.clone()), 7);
        let (name, e) = Entry::new(&full);
        assert_eq!(name, "widgets.example.com");
        assert!(e.object.is_compact());
        assert_eq!((e.revision, e.group()), (7, "example.com"));
        assert_eq!(decode(&e.object), whole);
        // A v1beta1 object reads as v1, from a handle that decoded it.
        let old = json!({
            "apiVersion": super::super::v1beta1::V1BETA1,
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com", "resourceVersion": "8"},
            "spec": {"group": "example.com", "version": "v1", "scope": "Namespaced",
                     "names": {"plural": "things", "kind": "Thing"},
                     "validation": {"openAPIV3Schema": {"type": "object"}}}
        });
        let compact = Object::new(Arc::new(old), 8).compacted();
        let _ = compact.value();
        let (_, e) = Entry::new(&compact);
        assert_eq!(e.facts["spec"]["versions"][0]["storage"], json!(true));
        let v1 = decode(&e.object);
        assert_eq!(v1["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(
            v1.pointer("/spec/versions/0/schema/openAPIV3Schema/type"),
            Some(&json!("object"))
        );
    }
}

//! kube's resource quota controller: keeps each ResourceQuota's
//! `status.hard` equal to `spec.hard` and recounts `status.used` from the
//! objects of its namespace (`quota_usage::usage_stats`, the same
//! evaluators quota admission charges with).
//!
//! Admission raises `status.used` before an object is stored; this loop
//! is what lowers it: when an object is deleted (or a pod ends), and when
//! a charged write failed after its charge. A namespace is recounted
//!
//! - when a quota is created, or its `spec.hard` no longer matches its
//!   `status.hard` (a quota without status is not enforced yet);
//! - when a pod, service, claim, config map, secret, replication
//!   controller or quota of the namespace is deleted, when a pod reaches
//!   `Succeeded` or `Failed` or is marked deleted, and when an object of a
//!   collection a `count/<resource>.<group>` quota names is deleted;
//! - every `--resource-quota-sync-period` (kube: 5 minutes), for all
//!   quotas.
//!
//! Admission's own writes of `status.used` do not wake it (they leave
//! `status.hard` as it is), as in kube. The queue key is the namespace.

use super::queue::WorkQueue;
use super::{Controller, Next};
use crate::admission::plugins::quota::{list_objects, unix_now};
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::kinds::core::quota_usage::{self, Evaluator, ResourceList};
use apimachinery::read::Freshness;
use futures_util::{FutureExt, StreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use watchcache::{EventType, StorageError, WatchOptions};

/// The collections whose deletions release usage without a quota naming
/// them by `count/...` (kube's evaluators and legacy aliases).
const RELEASED_BY: &[&str] = &[
    "pods",
    "services",
    "persistentvolumeclaims",
    "configmaps",
    "secrets",
    "replicationcontrollers",
];

pub fn controller(state: &AppState) -> Option<Controller<AppState>> {
    state.registry.lookup("", "v1", "resourcequotas")?;
    Some(Controller {
        name: "resourcequota",
        sources: Vec::new(),
        feed: Some(Arc::new(|state, queue| feed(state, queue).boxed())),
        reconcile: Arc::new(|state, ns| sync_namespace(state, ns).boxed()),
        workers: 2,
        capacity: 10_000,
        backoff: super::queue::Backoff::default(),
        resync: None,
    })
}

fn namespace_of(v: &Value) -> Option<String> {
    crate::object::meta_str(v, "namespace").map(str::to_string)
}

/// The served row of a collection, by group and plural.
fn collection(state: &AppState, group: &str, plural: &str) -> Option<Row> {
    state
        .registry
        .all()
        .iter()
        .find(|r| r.group == group && r.plural == plural)
}

/// Whether a changed quota needs a recount: its limits changed, or it has
/// no status yet.
fn needs_sync(q: &Value) -> bool {
    let hard = quota_usage::list_of(q.pointer("/spec/hard"));
    let status_hard = q.pointer("/status/hard");
    status_hard.is_none()
        || q.pointer("/status/used").is_none()
        || !quota_usage::equals(&hard, &quota_usage::list_of(status_hard))
}

/// One term's queue filling: the quotas (all of them on start and every
/// sync period), and deletions in the collections quotas count.
async fn feed(state: Arc<AppState>, queue: Arc<WorkQueue>) {
    let Some(quotas) = state.registry.lookup("", "v1", "resourcequotas") else {
        return;
    };
    let quotas = state.collection_prefix(&quotas, None);
    let mut followed: HashSet<String> = HashSet::new();
    let mut releases = tokio::task::JoinSet::new();
    for plural in RELEASED_BY {
        if let Some(res) = collection(&state, "", plural) {
            let prefix = state.collection_prefix(&res, None);
            followed.insert(prefix.clone());
            releases.spawn(follow_releases(
                Arc::clone(&state),
                Arc::clone(&queue),
                prefix,
                *plural == "pods",
            ));
        }
    }
    let mut delay = Duration::from_millis(100);
    loop {
        let opts = WatchOptions {
            initial_events: true,
            ..WatchOptions::default()
        };
        match state.store.watch(&quotas, opts).await {
            Ok(mut stream) => {
                let period = state.quota.sync_period.max(Duration::from_secs(1));
                let until = tokio::time::Instant::now() + period;
                loop {
                    let next = match tokio::time::timeout_at(until, stream.next()).await {
                        Ok(Some(Ok(ev))) => ev,
                        // The sync period is over (re-open: every quota
                        // again), or the watch broke.
                        Err(_) => {
                            delay = Duration::ZERO;
                            break;
                        }
                        Ok(Some(Err(e))) => {
                            tracing::warn!(controller = "resourcequota", error = %e, "watch failed; resyncing");
                            break;
                        }
                        Ok(None) => break,
                    };
                    delay = Duration::from_millis(100);
                    let v = next.object.value();
                    let wanted = match next.kind {
                        EventType::Added | EventType::Deleted => true,
                        EventType::Modified => needs_sync(v),
                        _ => false,
                    };
                    if !wanted {
                        continue;
                    }
                    // A quota counting another collection: follow its
                    // deletions too.
                    for name in v
                        .pointer("/spec/hard")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k)
                    {
                        let Some((g, p)) = quota_usage::counted(name) else {
                            continue;
                        };
                        let Some(res) = collection(&state, g, p) else {
                            continue;
                        };
                        let prefix = state.collection_prefix(&res, None);
                        if followed.insert(prefix.clone()) {
                            releases.spawn(follow_releases(
                                Arc::clone(&state),
                                Arc::clone(&queue),
                                prefix,
                                false,
                            ));
                        }
                    }
                    if let Some(ns) = namespace_of(v) {
                        queue.add(&ns).await;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(controller = "resourcequota", error = %e, "cannot watch quotas; retrying");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
    }
}

/// Queues the namespace of every object deleted from the collection at
/// `prefix` (and of pods that end or are marked deleted).
async fn follow_releases(state: Arc<AppState>, queue: Arc<WorkQueue>, prefix: String, pods: bool) {
    loop {
        match state.store.watch(&prefix, WatchOptions::default()).await {
            Ok(mut stream) => {
                while let Some(Ok(ev)) = stream.next().await {
                    let v = ev.object.value();
                    let released = match ev.kind {
                        EventType::Deleted => true,
                        EventType::Modified if pods => {
                            crate::object::is_deleting(v)
                                || matches!(
                                    v.pointer("/status/phase").and_then(Value::as_str),
                                    Some("Succeeded" | "Failed")
                                )
                        }
                        _ => false,
                    };
                    if released {
                        if let Some(ns) = namespace_of(v) {
                            queue.add(&ns).await;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::debug!(controller = "resourcequota", error = %e, "cannot watch; retrying");
            }
        }
        // What was missed meanwhile waits for the next full sync.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

type Lists = HashMap<(String, String), Option<Arc<Vec<Value>>>>;

/// The collections (group, plural) a quota's limits are counted on.
fn counted_on(quota: &Value) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for name in quota_usage::list_of(quota.pointer("/spec/hard")).keys() {
        if let Some((g, p)) = Evaluator::collection_of(name) {
            out.entry((g.to_string(), p.to_string()))
                .or_default()
                .push(name.clone());
        }
    }
    out
}

/// The status a quota should have (kube's `syncResourceQuota`): `hard`
/// from its spec, `used` recounted over `lists` (one namespace's
/// collections; `None`: not served, the old count stays).
pub fn desired_status(quota: &Value, lists: &Lists, now: i64) -> Value {
    let hard = quota_usage::list_of(quota.pointer("/spec/hard"));
    let mut used: ResourceList = quota_usage::list_of(quota.pointer("/status/used"));
    for (gp, names) in counted_on(quota) {
        let Some(ev) = Evaluator::for_resource(&gp.0, &gp.1) else {
            continue;
        };
        let matched = ev.matching_resources(&names);
        let Some(Some(items)) = lists.get(&gp) else {
            continue;
        };
        if !matched.is_empty() {
            used.extend(quota_usage::usage_stats(
                &ev,
                quota,
                &matched,
                items.iter(),
                now,
            ));
        }
    }
    let used = quota_usage::mask(&used, hard.keys());
    json!({
        "hard": quota_usage::list_json(&hard),
        "used": quota_usage::list_json(&used),
    })
}

/// Whether two statuses say the same (quantities compared by value).
fn same_status(have: Option<&Value>, want: &Value) -> bool {
    let Some(have) = have else {
        return false;
    };
    ["hard", "used"].iter().all(|k| {
        have.get(k).is_some()
            && quota_usage::equals(
                &quota_usage::list_of(have.get(k)),
                &quota_usage::list_of(want.get(k)),
            )
    })
}

async fn sync_namespace(state: Arc<AppState>, ns: String) -> Result<Next, String> {
    let res = state
        .registry
        .lookup("", "v1", "resourcequotas")
        .ok_or("resourcequotas missing from the registry")?;
    let quotas = list_objects(&state, &res, &ns, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    // Lists are shared between the namespace's quotas.
    let mut lists: Lists = HashMap::new();
    let now = unix_now();
    for q in quotas {
        for gp in counted_on(q.value()).into_keys() {
            if lists.contains_key(&gp) {
                continue;
            }
            let items = match collection(&state, &gp.0, &gp.1) {
                Some(r) => Some(Arc::new(
                    list_objects(&state, &r, &ns, Freshness::MostRecent)
                        .await
                        .map_err(|e| e.to_string())?
                        .into_iter()
                        .map(|o| o.value().clone())
                        .collect::<Vec<_>>(),
                )),
                None => None,
            };
            lists.insert(gp, items);
        }
        let status = desired_status(q.value(), &lists, now);
        if same_status(q.value().get("status"), &status) {
            continue;
        }
        let mut next = q.value().clone();
        crate::object::meta_mut(&mut next).remove("resourceVersion");
        if let Some(o) = next.as_object_mut() {
            o.insert("status".into(), status);
        }
        let name = crate::object::name(q.value()).unwrap_or("").to_string();
        match state
            .store
            .update(&state.key(&res, Some(&ns), &name), &next, q.revision)
            .await
        {
            Ok(_) | Err(StorageError::NotFound { .. }) => {}
            // Admission charged it meanwhile: count again.
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(Next::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_recounted_and_masked() {
        let quota = json!({"spec": {"hard": {"pods": "2", "count/widgets.example.com": "5",
                                             "configmaps": "1000m"}},
                           "status": {"used": {"pods": "7", "count/widgets.example.com": "3",
                                               "services": "1"}}});
        let mut lists: Lists = HashMap::new();
        lists.insert(
            ("".into(), "pods".into()),
            Some(Arc::new(vec![
                json!({"spec": {}}),
                json!({"spec": {}, "status": {"phase": "Failed"}}),
            ])),
        );
        lists.insert(("".into(), "configmaps".into()), Some(Arc::new(vec![])));
        lists.insert(("example.com".into(), "widgets".into()), None);
        let got = desired_status(&quota, &lists, 0);
        assert_eq!(
            got,
            json!({"hard": {"configmaps": "1", "count/widgets.example.com": "5", "pods": "2"},
                   "used": {"configmaps": "0", "count/widgets.example.com": "3", "pods": "1"}})
        );
        assert!(same_status(Some(&got), &got));
        assert!(!same_status(None, &got));
        assert!(needs_sync(&quota));
    }
}

//! Namespace deletion (kube's namespace controller). A DELETE of a
//! namespace only marks it (deletionTimestamp, phase Terminating); this
//! controller then, for each namespace being deleted that still carries the
//! `kubernetes` finalizer in `spec.finalizers`:
//!
//! 1. deletes every object in it, of every stored namespaced kind the
//!    registry serves at that moment (custom resources included), as a
//!    DELETE would: an object without finalizers goes, one with finalizers
//!    gets its deletionTimestamp and stays until they are removed;
//! 2. reports kube's deletion conditions in `status.conditions`;
//! 3. once nothing is left, drops `kubernetes` from `spec.finalizers` (what
//!    `namespaces/finalize` does) and, when no other finalizer holds it,
//!    removes the namespace.
//!
//! While content remains (objects waiting on their finalizers) the key is
//! looked at again after a short delay; failures back off per namespace.

use super::{name_key, Controller, Next, Source};
use crate::error::ApiError;
use crate::handlers::write::after_delete;
use crate::object;
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use watchcache::{ListOptions, StorageError};

/// The finalizer of `spec.finalizers` this controller owns.
pub const FINALIZER: &str = "kubernetes";

/// How soon a namespace waiting on its objects' finalizers is looked at
/// again (their removal is not among the controller's sources).
const FINALIZER_WAIT: Duration = Duration::from_secs(1);

pub fn controller(state: &AppState) -> Controller<AppState> {
    let prefix = state
        .registry
        .lookup("", "v1", "namespaces")
        .map(|r| state.collection_prefix(&r, None))
        .unwrap_or_else(|| format!("{}/namespaces/", state.prefix));
    Controller {
        name: "namespace",
        sources: vec![Source {
            prefix,
            key_of: name_key,
        }],
        feed: None,
        reconcile: Arc::new(|state, key| reconcile(state, key).boxed()),
        workers: 4,
        capacity: 10_000,
        backoff: super::queue::Backoff::default(),
        resync: None,
    }
}

fn namespaces(state: &AppState) -> Result<Row, String> {
    state
        .registry
        .lookup("", "v1", "namespaces")
        .ok_or_else(|| "namespaces missing from the registry".to_string())
}

fn spec_finalizers(ns: &Value) -> Vec<String> {
    object::strings(ns.pointer("/spec/finalizers"))
}

/// What one deletion round found.
#[derive(Debug, Default)]
pub struct Round {
    /// Objects still there after the round, by `resource.group`.
    pub remaining: BTreeMap<String, usize>,
    /// Objects waiting on finalizers, by finalizer.
    pub finalizers: BTreeMap<String, usize>,
    /// Failures to delete.
    pub errors: Vec<String>,
}

async fn reconcile(state: Arc<AppState>, name: String) -> Result<Next, String> {
    let res = namespaces(&state)?;
    let key = state.key(&res, None, &name);
    let Some(current) = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(Next::Done);
    };
    let ns = current.value();
    if !object::is_deleting(ns) {
        return Ok(Next::Done);
    }
    let ours = spec_finalizers(ns).iter().any(|f| f == FINALIZER);
    let round = if ours {
        Some(delete_content(&state, &name).await)
    } else {
        None
    };
    let mut next = ns.clone();
    let empty = round
        .as_ref()
        .is_none_or(|r| r.remaining.is_empty() && r.errors.is_empty());
    match &round {
        Some(r) => set_status(&mut next, r, &object::now()),
        None => set_phase(&mut next),
    }
    if empty {
        let left: Vec<Value> = spec_finalizers(ns)
            .into_iter()
            .filter(|f| f != FINALIZER)
            .map(Value::String)
            .collect();
        if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
            if left.is_empty() {
                spec.remove("finalizers");
            } else {
                spec.insert("finalizers".into(), Value::Array(left));
            }
        }
    }
    let finished = empty && spec_finalizers(&next).is_empty() && object::finalizers(ns).is_empty();
    let write = if finished {
        state
            .store
            .delete(&key, Some(current.revision))
            .await
            .map(drop)
    } else if next != *ns {
        object::meta_mut(&mut next).remove("resourceVersion");
        state
            .store
            .update(&key, &next, current.revision)
            .await
            .map(drop)
    } else {
        Ok(())
    };
    match write {
        Ok(()) => {
            if finished {
                tracing::info!(namespace = %name, "namespace deleted");
            }
        }
        Err(StorageError::NotFound { .. }) => return Ok(Next::Done),
        Err(StorageError::Conflict { .. }) => return Err("namespace changed meanwhile".into()),
        Err(e) => return Err(e.to_string()),
    }
    Ok(match round {
        Some(r) if !empty => {
            if !r.errors.is_empty() {
                return Err(r.errors.join("; "));
            }
            Next::After(wait_for(&r))
        }
        _ => Next::Done,
    })
}

/// How long to wait before the next round: objects being finalized by
/// others may take a while; a handful just deleted go at once.
fn wait_for(r: &Round) -> Duration {
    if r.finalizers.is_empty() {
        Duration::from_millis(200)
    } else {
        FINALIZER_WAIT
    }
}

/// The stored namespaced kinds, one row per collection (versions of one
/// kind share storage).
fn collections(state: &AppState, ns: &str) -> Vec<(Row, String)> {
    let mut seen = BTreeSet::new();
    state
        .registry
        .all()
        .iter()
        .filter(|r| r.namespaced && r.virtual_create.is_none() && r.computed.is_none())
        .filter_map(|r| {
            let prefix = state.collection_prefix(&r, Some(ns));
            seen.insert(prefix.clone()).then_some((r, prefix))
        })
        .collect()
}

/// One pass over every collection of `ns`.
pub async fn delete_content(state: &Arc<AppState>, ns: &str) -> Round {
    let mut round = Round::default();
    for (res, prefix) in collections(state, ns) {
        let opts = ListOptions {
            freshness: Freshness::MostRecent,
            limit: None,
            continue_from: None,
            predicate: Default::default(),
        };
        let gr = format!("{}.{}", res.plural, res.group);
        let listed = match state.store.list(&prefix, &opts).await {
            Ok(l) => l,
            Err(e) => {
                round.errors.push(failure(e, &res, ""));
                continue;
            }
        };
        let mut failed = false;
        for item in &listed.items {
            if failed {
                *round.remaining.entry(gr.clone()).or_default() += 1;
                continue;
            }
            let v = item.value();
            let name = object::meta_str(v, "name").unwrap_or("");
            let key = state.key(&res, Some(ns), name);
            let fins = object::finalizers(v);
            let r = match super::remove(state, &key, item).await {
                Ok(super::Removed::Gone(gone)) => {
                    after_delete(state, &res, gone.value()).await;
                    continue;
                }
                Ok(super::Removed::Finalizing) => Ok(()),
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => {
                    for f in fins {
                        *round.finalizers.entry(f).or_default() += 1;
                    }
                }
                // Gone meanwhile.
                Err(StorageError::NotFound { .. }) => continue,
                // Changed meanwhile: the next round sees it again.
                Err(StorageError::Conflict { .. }) => {}
                Err(e) => {
                    // As kube's deleter, the first failure ends the
                    // collection's round (its cluster may be down).
                    round.errors.push(failure(e, &res, name));
                    failed = true;
                }
            }
            *round.remaining.entry(gr.clone()).or_default() += 1;
        }
    }
    round
}

/// A failure as kube's controller reports it: the message of the Status a
/// client would get for it (`etcd is unavailable; please retry` while the
/// resource's etcd cluster is down).
fn failure(e: StorageError, res: &Row, name: &str) -> String {
    ApiError::storage(e, res, name).to_status().message
}

/// A condition as kube's namespace controller reports it.
fn condition(kind: &str, bad: Option<(&str, String)>, ok: (&str, &str), now: &str) -> Value {
    let (status, reason, message) = match bad {
        Some((reason, message)) => ("True", reason.to_string(), message),
        None => ("False", ok.0.to_string(), ok.1.to_string()),
    };
    json!({
        "type": kind,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

/// The deletion conditions of `round` (kube's types, reasons and
/// messages; discovery cannot fail here, as the registry is in process).
pub fn conditions(round: &Round, now: &str) -> Vec<Value> {
    let failure = (!round.errors.is_empty()).then(|| {
        // Sorted, as kube sorts them, so the message is stable.
        let mut errors: Vec<&str> = round.errors.iter().map(String::as_str).collect();
        errors.sort_unstable();
        (
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                errors.len(),
                errors.join(", ")
            ),
        )
    });
    let remaining = (!round.remaining.is_empty()).then(|| {
        let parts: Vec<String> = round
            .remaining
            .iter()
            .map(|(gr, n)| format!("{gr} has {n} resource instances"))
            .collect();
        (
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", parts.join(", ")),
        )
    });
    let finalizers = (!round.finalizers.is_empty()).then(|| {
        let parts: Vec<String> = round
            .finalizers
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        (
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                parts.join(", ")
            ),
        )
    });
    vec![
        condition(
            "NamespaceDeletionDiscoveryFailure",
            None,
            (
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            now,
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            None,
            (
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            now,
        ),
        condition(
            "NamespaceDeletionContentFailure",
            failure,
            (
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            now,
        ),
        condition(
            "NamespaceContentRemaining",
            remaining,
            ("ContentRemoved", "All content successfully removed"),
            now,
        ),
        condition(
            "NamespaceFinalizersRemaining",
            finalizers,
            (
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished",
            ),
            now,
        ),
    ]
}

/// Sets phase Terminating on `ns` (a namespace being deleted is
/// Terminating whoever holds it).
fn set_phase(ns: &mut Value) {
    let Some(obj) = ns.as_object_mut() else {
        return;
    };
    let status = obj
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    if let Some(s) = status.as_object_mut() {
        s.insert("phase".into(), Value::String("Terminating".into()));
    }
}

/// Sets phase Terminating and the deletion conditions on `ns`, keeping a
/// condition's lastTransitionTime while its status stays the same, and any
/// condition of another type.
fn set_status(ns: &mut Value, round: &Round, now: &str) {
    set_phase(ns);
    let Some(status) = ns.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let old: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut fresh = conditions(round, now);
    for c in &mut fresh {
        let prev = old.iter().find(|o| o.get("type") == c.get("type"));
        if let Some(prev) = prev.filter(|p| p.get("status") == c.get("status")) {
            if let Some(t) = prev.get("lastTransitionTime") {
                c["lastTransitionTime"] = t.clone();
            }
        }
    }
    let ours: BTreeSet<String> = fresh
        .iter()
        .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut all: Vec<Value> = old
        .into_iter()
        .filter(|o| {
            o.get("type")
                .and_then(Value::as_str)
                .is_none_or(|t| !ours.contains(t))
        })
        .collect();
    all.extend(fresh);
    status.insert("conditions".into(), Value::Array(all));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of<'a>(ns: &'a Value, t: &str) -> &'a Value {
        ns["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .unwrap_or_else(|| panic!("no {t} in {ns}"))
    }

    #[test]
    fn conditions_say_what_holds_the_namespace_and_keep_their_transition_time() {
        let mut ns = json!({
            "metadata": {"name": "x", "deletionTimestamp": "t0"},
            "status": {"phase": "Active", "conditions": [
                {"type": "SomethingElse", "status": "True"},
            ]},
        });
        let mut round = Round::default();
        round.remaining.insert("configmaps.".into(), 2);
        round.finalizers.insert("example.com/a".into(), 1);
        set_status(&mut ns, &round, "t1");
        assert_eq!(ns["status"]["phase"], "Terminating");
        let fin = of(&ns, "NamespaceFinalizersRemaining");
        assert_eq!(fin["status"], "True");
        assert_eq!(
            fin["message"],
            "Some content in the namespace has finalizers remaining: example.com/a in 1 resource instances"
        );
        assert_eq!(
            of(&ns, "NamespaceContentRemaining")["message"],
            "Some resources are remaining: configmaps. has 2 resource instances"
        );
        assert_eq!(
            of(&ns, "NamespaceDeletionContentFailure")["status"],
            "False"
        );
        // Another controller's condition stays.
        of(&ns, "SomethingElse");

        // Same status later: the transition time stays; a change moves it.
        round.remaining.clear();
        set_status(&mut ns, &round, "t2");
        let fin = of(&ns, "NamespaceFinalizersRemaining");
        assert_eq!(fin["lastTransitionTime"], "t1");
        let rem = of(&ns, "NamespaceContentRemaining");
        assert_eq!(rem["status"], "False");
        assert_eq!(rem["reason"], "ContentRemoved");
        assert_eq!(rem["lastTransitionTime"], "t2");
        assert_eq!(ns["status"]["conditions"].as_array().map(Vec::len), Some(6));
    }

    #[test]
    fn content_failures_are_counted_and_sorted_as_kube_reports_them() {
        let round = Round {
            errors: vec![
                "etcd is unavailable; please retry".into(),
                "bad things happened".into(),
            ],
            ..Round::default()
        };
        let cs = conditions(&round, "t");
        let failure = cs
            .iter()
            .find(|c| c["type"] == "NamespaceDeletionContentFailure")
            .expect("the content condition");
        assert_eq!(failure["status"], "True");
        assert_eq!(failure["reason"], "ContentDeletionFailed");
        assert_eq!(
            failure["message"],
            "Failed to delete all resource types, 2 remaining: bad things happened, etcd is unavailable; please retry"
        );
        // Discovery is the registry in process: it never fails.
        let discovery = cs
            .iter()
            .find(|c| c["type"] == "NamespaceDeletionDiscoveryFailure")
            .expect("the discovery condition");
        assert_eq!(discovery["status"], "False");
    }
}

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

use super::{accepted_names, rows, status, CLEANUP_FINALIZER, GROUP, PLURAL};
use crate::object;
use crate::server::AppState;
use apimachinery::read::{Freshness, Predicate};
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use watchcache::{EventType, ListOptions, StorageError, WatchOptions};

/// How often the leader revisits CRDs being deleted (their custom
/// resources may be waiting on finalizers of their own).
const CLEANUP_TICK: Duration = Duration::from_secs(1);
/// How many custom resources one clean-up round deletes at most.
const CLEANUP_BATCH: usize = 500;

/// Starts the controller for `state`; `leader` tells whether this replica
/// leads (`None`: it always does, e.g. a single in-process server).
pub fn start(
    state: Arc<AppState>,
    leader: Option<watch::Receiver<bool>>,
) -> tokio::task::AbortHandle {
    tokio::spawn(run(state, leader)).abort_handle()
}

async fn run(state: Arc<AppState>, leader: Option<watch::Receiver<bool>>) {
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

fn collection(state: &AppState) -> String {
    format!("{}/{GROUP}/{PLURAL}/", state.prefix)
}

fn name_of(v: &Value) -> String {
    object::meta_str(v, "name").unwrap_or("").to_string()
}

async fn follow(
    state: &Arc<AppState>,
    leader: &mut watch::Receiver<bool>,
) -> Result<(), StorageError> {
    let opts = WatchOptions {
        initial_events: true,
        initial_freshness: Freshness::MostRecent,
        ..WatchOptions::default()
    };
    let mut stream = state.store.watch(&collection(state), opts).await?;
    let mut crds: BTreeMap<String, (Arc<Value>, i64)> = BTreeMap::new();
    let mut initial: Option<BTreeMap<String, (Arc<Value>, i64)>> = Some(BTreeMap::new());
    let mut tick = tokio::time::interval(CLEANUP_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ev = stream.next() => {
                let Some(ev) = ev else { return Ok(()) };
                let ev = ev?;
                let name = name_of(&ev.object.value);
                match (&mut initial, ev.kind) {
                    (Some(init), EventType::Added) => {
                        init.insert(name, (ev.object.value, ev.object.revision));
                        continue;
                    }
                    (Some(init), EventType::Bookmark) => {
                        crds = std::mem::take(init);
                        initial = None;
                    }
                    (Some(_), _) | (None, EventType::Bookmark) => continue,
                    (None, EventType::Added | EventType::Modified) => {
                        crds.insert(name, (ev.object.value, ev.object.revision));
                    }
                    (None, EventType::Deleted) => {
                        crds.remove(&name);
                    }
                }
                install(state, &crds);
                if *leader.borrow() {
                    reconcile(state, &crds).await;
                }
            }
            changed = leader.changed() => {
                if changed.is_err() {
                    // The election is gone (shutdown): serve, write nothing.
                    std::future::pending::<()>().await;
                }
                if initial.is_none() && *leader.borrow_and_update() {
                    reconcile(state, &crds).await;
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

/// Makes the registry serve exactly the established CRDs' versions.
fn install(state: &AppState, crds: &BTreeMap<String, (Arc<Value>, i64)>) {
    let mut all = Vec::new();
    for (crd, _) in crds.values() {
        if super::condition_true(crd, "Established") {
            all.extend(rows(crd));
        }
    }
    if state.registry.set_dynamic(all) {
        tracing::info!(
            generation = state.registry.generation(),
            crds = crds.len(),
            "custom resources changed"
        );
    }
}

/// The built-in names of `group` that no CRD may take.
fn builtin_names(
    state: &AppState,
    group: &str,
) -> Vec<(
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static str,
)> {
    state
        .registry
        .all()
        .iter()
        .filter(|r| r.custom.is_none() && r.group == group)
        .map(|r| (r.plural, r.singular, r.short_names, r.kind))
        .collect()
}

async fn reconcile(state: &Arc<AppState>, crds: &BTreeMap<String, (Arc<Value>, i64)>) {
    let now = object::now();
    for (name, (crd, revision)) in crds {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let others = crds
            .iter()
            .filter(|(n, _)| *n != name)
            .map(|(_, (v, _))| v.as_ref());
        let acceptance = accepted_names(crd, others, &builtin_names(state, group));
        if let Some(next) = status::desired(crd, &acceptance, &now) {
            let key = format!("{}{name}", collection(state));
            match state.store.update(&key, &next, *revision).await {
                Ok(_) => tracing::info!(crd = %name, "CRD status updated"),
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
                Err(e) => tracing::warn!(crd = %name, error = %e, "CRD status write failed"),
            }
        }
    }
    cleanup_all(state, crds).await;
}

async fn cleanup_all(state: &Arc<AppState>, crds: &BTreeMap<String, (Arc<Value>, i64)>) {
    for (name, (crd, revision)) in crds {
        if object::is_deleting(crd)
            && object::finalizers(crd)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
        {
            if let Err(e) = cleanup(state, name, crd, *revision).await {
                tracing::warn!(crd = %name, error = %e, "CRD clean-up failed; retrying");
            }
        }
    }
}

/// One round of deleting a terminating CRD's custom resources; when none
/// are left, drops the clean-up finalizer (and the CRD with it when it was
/// the last one).
async fn cleanup(
    state: &Arc<AppState>,
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
        let v = item.value.as_ref();
        let key = match object::meta_str(v, "namespace") {
            Some(ns) if !ns.is_empty() => format!("{prefix}{ns}/{}", name_of(v)),
            _ => format!("{prefix}{}", name_of(v)),
        };
        let r = if object::finalizers(v).is_empty() {
            state
                .store
                .delete(&key, Some(item.revision))
                .await
                .map(drop)
        } else if object::is_deleting(v) {
            Ok(())
        } else {
            let mut marked = v.clone();
            let m = object::meta_mut(&mut marked);
            m.insert("deletionTimestamp".into(), Value::String(object::now()));
            m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
            m.remove("resourceVersion");
            state
                .store
                .update(&key, &marked, item.revision)
                .await
                .map(drop)
        };
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

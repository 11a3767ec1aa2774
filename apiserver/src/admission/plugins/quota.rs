//! kube's ResourceQuota admission: the last validating plugin. A write
//! that changes usage (a create of anything, a pod resize, a claim or
//! service update) is checked against every quota of its namespace that
//! tracks it (`apimachinery::kinds::core::quota_usage::check`, kube's
//! messages, 403); when it fits, the quotas' `status.used` is raised
//! *before* the object is stored, by a compare-and-swap on each quota's
//! resourceVersion through the backend's store. That makes the count exact
//! across replicas: two replicas admitting the last free slot at once both
//! read the same quota, one CAS wins, the other conflicts, re-reads and is
//! refused. A write that fails after its charge leaves usage over-counted
//! until the quota controller (`controllers::resourcequota`) recounts the
//! namespace, as in kube.
//!
//! Within a replica, requests on one namespace take turns (kube batches
//! them on a per-namespace queue for the same reason: fewer conflicts),
//! and the replica keeps the quotas it last wrote, since its watch cache
//! may not show its own write yet (kube's `updatedQuotas` cache). A
//! conflict is retried with the quota re-read until the request's 10 s
//! budget is spent (kube retries three times; with several replicas
//! writing one namespace that is not enough to be sure of an answer).
//! Dry runs are checked and never charged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;
use watchcache::{ListOptions, Object, StorageError};

use super::chain::Plugin;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::{forbidden, Context, Scope};
use crate::backend::Backend;
use crate::error::{ApiError, Result};
use crate::registry::{Resource, Row};
use apimachinery::kinds::core::quota_usage::{self, Evaluator, Request};
use apimachinery::read::Freshness;

/// How long one request may spend on quota (kube's evaluation timeout).
const BUDGET: Duration = Duration::from_secs(10);

/// A replica's quota admission state.
pub struct QuotaState {
    /// Per namespace: the turn to take, and the newest version of each
    /// quota this replica has seen written.
    namespaces: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Latest>>>>,
    /// How often the quota controller recounts every quota
    /// (`--resource-quota-sync-period`, kube's default 5 minutes).
    pub sync_period: Duration,
}

impl Default for QuotaState {
    fn default() -> Self {
        QuotaState {
            namespaces: Mutex::new(HashMap::new()),
            sync_period: Duration::from_secs(300),
        }
    }
}

/// The newest known version of each quota of a namespace, by name.
#[derive(Default)]
struct Latest(HashMap<String, Object>);

impl QuotaState {
    fn namespace(&self, ns: &str) -> Arc<tokio::sync::Mutex<Latest>> {
        let mut map = self.namespaces.lock().unwrap_or_else(|e| e.into_inner());
        // Namespaces come and go: drop the idle ones now and then.
        if map.len() > 4096 {
            map.retain(|_, v| Arc::strong_count(v) > 1);
        }
        Arc::clone(map.entry(ns.to_string()).or_default())
    }
}

/// Every object of one namespace of a collection, with its revision.
pub(crate) async fn list_objects(
    backend: &Backend,
    res: &Resource,
    ns: &str,
    freshness: Freshness,
) -> std::result::Result<Vec<Object>, StorageError> {
    let opts = ListOptions {
        freshness,
        limit: None,
        continue_from: None,
        predicate: Default::default(),
    };
    let listed = backend
        .store
        .list(&backend.collection_prefix(res, Some(ns)), &opts)
        .await?;
    Ok(listed.items)
}

/// Every object of one namespace of a collection, from the replica's
/// cache (as kube's plugins read their informers).
pub async fn list_namespaced(
    scope: &Scope<'_>,
    (group, version, plural): (&str, &str, &str),
    ns: &str,
) -> Result<Vec<Arc<Value>>> {
    let res = scope
        .backend
        .registry
        .lookup(group, version, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural}.{group} missing from the registry")))?;
    let items = list_objects(&scope.backend, &res, ns, Freshness::NotOlderThan(0))
        .await
        .map_err(|e| ApiError::storage(e, &res, ""))?;
    Ok(items.into_iter().map(|o| o.into_value()).collect())
}

/// Seconds since the epoch.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn quotas_res(backend: &Backend) -> Result<Row> {
    backend
        .registry
        .lookup("", "v1", "resourcequotas")
        .ok_or_else(|| ApiError::internal("resourcequotas missing from the registry"))
}

fn handles(a: &Attributes) -> bool {
    a.namespace.is_some()
        && Evaluator::handles_request(&a.res.group, &a.res.plural, a.operation, a.subresource)
}

fn admit<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        let (Some(ns), Some(obj)) = (a.namespace, a.object) else {
            return Ok(());
        };
        let Some(ev) = Evaluator::for_resource(&a.res.group, &a.res.plural) else {
            return Ok(());
        };
        let backend = scope.ctx.backend;
        let res = quotas_res(backend)?;
        let listed = list_objects(backend, &res, ns, Freshness::NotOlderThan(0))
            .await
            .map_err(|e| ApiError::storage(e, &res, ""))?;
        if listed.is_empty() {
            return Ok(());
        }
        let request = Request {
            operation: a.operation,
            subresource: a.subresource,
            object: obj,
            old: a.old,
            now: unix_now(),
        };
        let charged = charge(&scope.ctx, res, ns, listed, &ev, &request, a);
        match tokio::time::timeout(BUDGET, charged).await {
            Ok(r) => r,
            Err(_) => Err(ApiError::internal("resource quota evaluation timed out")),
        }
    }
    .boxed()
}

/// Checks `request` against `quotas` and raises their usage, retrying the
/// quotas whose write conflicted with their re-read versions.
async fn charge(
    ctx: &Context<'_>,
    res: Row,
    ns: &str,
    listed: Vec<Object>,
    ev: &Evaluator,
    request: &Request<'_>,
    a: &Attributes<'_>,
) -> Result<()> {
    let backend = ctx.backend;
    let turn = ctx.quota.namespace(ns);
    let mut latest = turn.lock().await;
    // The cache may not show this replica's last write yet.
    let mut quotas: Vec<Object> = listed
        .into_iter()
        .map(|o| {
            let name = crate::object::name(o.value()).unwrap_or("");
            match latest.0.get(name) {
                Some(mine) if mine.revision > o.revision => mine.clone(),
                _ => o,
            }
        })
        .collect();
    loop {
        let values: Vec<&Value> = quotas.iter().map(|o| o.value()).collect();
        let changes = quota_usage::check(ev, &values, request)
            .map_err(|m| ApiError::from(forbidden(a, &m)))?;
        if a.dry_run || changes.is_empty() {
            return Ok(());
        }
        let mut failed = Vec::new();
        for (i, used) in changes {
            let current = &quotas[i];
            let name = crate::object::name(current.value())
                .unwrap_or("")
                .to_string();
            let mut next = current.value().clone();
            crate::object::meta_mut(&mut next).remove("resourceVersion");
            if let Some(status) = next
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| serde_json::json!({})))
                .and_then(Value::as_object_mut)
            {
                status.insert("used".into(), quota_usage::list_json(&used));
            }
            let key = backend.key(&res, Some(ns), &name);
            match backend.store.update(&key, &next, current.revision).await {
                Ok(written) => {
                    latest.0.insert(name, written);
                }
                Err(StorageError::Conflict { .. }) => failed.push(key),
                // Deleted meanwhile: it limits nothing any more.
                Err(StorageError::NotFound { .. }) => {
                    latest.0.remove(&name);
                }
                Err(e) => return Err(ApiError::storage(e, &res, &name)),
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        // The quotas already charged stay charged; the others are checked
        // again as they are now.
        quotas.clear();
        for key in failed {
            let fresh = backend
                .store
                .get(&key, Freshness::MostRecent)
                .await
                .map_err(|e| ApiError::storage(e, &res, ""))?;
            if let Some(o) = fresh {
                let name = crate::object::name(o.value()).unwrap_or("").to_string();
                latest.0.insert(name, o.clone());
                quotas.push(o);
            }
        }
    }
}

pub const RESOURCE_QUOTA: Plugin = Plugin {
    name: "ResourceQuota",
    default_on: true,
    supported: true,
    handles,
    mutate: None,
    validate: Some(admit),
};

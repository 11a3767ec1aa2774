//! `pods/eviction` (kube's `EvictionREST`, what `kubectl drain` uses): the
//! Pod is deleted unless a PodDisruptionBudget covering it allows no
//! disruption, which is a 429 in kube's words. An eviction the budget
//! allows is charged to it (`disruptionsAllowed` down by one, the Pod in
//! `disruptedPods`) before the Pod goes.

use apimachinery::read::Freshness;
use apimachinery::status::{reason, StatusCause};
use apimachinery::Status;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Value};
use watchcache::StorageError;

use super::scope::Scope;
use crate::admission::CreateValidation;
use crate::error::{ApiError, Result};
use crate::object;

const MAX_ATTEMPTS: usize = 16;

/// The answer of `POST .../pods/{name}/eviction`.
pub fn evict<'a>(
    scope: &'a Scope,
    eviction: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    evict_pod(scope, eviction, validation).boxed()
}

fn too_many(causes: Vec<StatusCause>) -> ApiError {
    let mut s = Status::failure(
        429,
        reason::TOO_MANY_REQUESTS,
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    s.details = Some(apimachinery::status::StatusDetails {
        causes,
        ..Default::default()
    });
    s.into()
}

async fn evict_pod(
    scope: &Scope,
    eviction: Value,
    validation: CreateValidation<'_>,
) -> Result<Value> {
    let name = scope.name().to_string();
    if object::name(&eviction).is_some_and(|n| n != name) {
        return Err(
            Status::bad_request("name in URL does not match name in Eviction object").into(),
        );
    }
    validation.check(&eviction).await?;
    let ns = scope.namespace.clone().unwrap_or_default();
    let state = &scope.state;
    let pods = &scope.res;
    let pod_key = state.key(pods, Some(&ns), &name);
    let pod = state
        .store
        .get(&pod_key, Freshness::MostRecent)
        .await
        .map_err(|e| ApiError::storage(e, pods, &name))?
        .ok_or_else(|| Status::not_found(pods.group_resource(), &name))?;
    let phase = pod
        .value()
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Pods that are not running, or already going, need no budget.
    let budgeted =
        !matches!(phase, "Succeeded" | "Failed" | "Pending") && !object::is_deleting(pod.value());
    if budgeted {
        charge_budget(scope, &ns, &name, pod.value()).await?;
    }
    delete_pod(scope, &eviction).await?;
    Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
              "status": "Success", "code": 201}))
}

/// Finds the budget covering the Pod and takes one disruption from it.
async fn charge_budget(scope: &Scope, ns: &str, pod_name: &str, pod: &Value) -> Result<()> {
    let state = &scope.state;
    let Some(pdbs) = state
        .registry
        .lookup("policy", "v1", "poddisruptionbudgets")
    else {
        return Ok(());
    };
    let labels = pod.pointer("/metadata/labels");
    for _ in 0..MAX_ATTEMPTS {
        let opts = watchcache::ListOptions {
            freshness: Freshness::MostRecent,
            limit: None,
            continue_from: None,
            predicate: Default::default(),
        };
        let list = state
            .store
            .list(&state.collection_prefix(&pdbs, Some(ns)), &opts)
            .await
            .map_err(|e| ApiError::storage(e, &pdbs, ""))?;
        let covering: Vec<_> = list
            .items
            .into_iter()
            .filter(|b| {
                b.value().pointer("/spec/selector").is_some_and(|sel| {
                    !apimachinery::kinds::core::workload::selector_is_empty(sel)
                        && apimachinery::kinds::core::workload::selector_matches(sel, labels)
                })
            })
            .collect();
        let budget = match covering.as_slice() {
            [] => return Ok(()),
            [one] => one,
            _ => {
                return Err(Status::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
                .into())
            }
        };
        let b = budget.value();
        let bname = object::name(b).unwrap_or("").to_string();
        let int = |p: &str| b.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        if int("/status/observedGeneration") < int("/metadata/generation") {
            return Err(too_many(vec![StatusCause::new(
                "DisruptionBudget",
                format!("The disruption budget {bname} is still being processed by the server."),
                "",
            )]));
        }
        let allowed = int("/status/disruptionsAllowed");
        if allowed <= 0 {
            return Err(too_many(vec![StatusCause::new(
                "DisruptionBudget",
                format!(
                    "The disruption budget {bname} needs {} healthy pods and has {} currently",
                    int("/status/desiredHealthy"),
                    int("/status/currentHealthy")
                ),
                "",
            )]));
        }
        let mut next = b.clone();
        if let Some(st) = next.get_mut("status").and_then(Value::as_object_mut) {
            st.insert("disruptionsAllowed".into(), Value::from(allowed - 1));
            let disrupted = st.entry("disruptedPods").or_insert_with(|| json!({}));
            if let Some(d) = disrupted.as_object_mut() {
                d.insert(pod_name.to_string(), Value::from(object::now()));
            }
        }
        if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        let key = state.key(&pdbs, Some(ns), &bname);
        match state.store.update(&key, &next, budget.revision).await {
            Ok(_) => return Ok(()),
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::storage(e, &pdbs, &bname)),
        }
    }
    Err(Status::conflict(
        apimachinery::status::GroupResource {
            group: "policy",
            resource: "poddisruptionbudgets",
        },
        "",
        Status::CONFLICT_MODIFIED,
    )
    .into())
}

/// Deletes the Pod as a DELETE of it would, with the Eviction's
/// `deleteOptions`; the eviction was admitted, the delete is not again
/// (kube's eviction deletes with `rest.ValidateAllObjectFunc`).
async fn delete_pod(scope: &Scope, eviction: &Value) -> Result<()> {
    // The options are handed over as JSON, whatever the Eviction came in.
    let mut headers = scope.headers.clone();
    headers.remove(axum::http::header::CONTENT_TYPE);
    let pod_scope = Scope {
        state: scope.state.clone(),
        request: crate::scope::RequestScope {
            backend: scope.backend.clone(),
            res: scope.res.clone(),
            namespace: scope.namespace.clone(),
            name: scope.name.clone(),
            subresource: None,
            query: scope.query.clone(),
            out: scope.out,
            pretty: scope.pretty,
            headers,
            user: scope.user.clone(),
            warnings: Default::default(),
            audit: scope.audit.clone(),
        },
    };
    let options = eviction
        .get("deleteOptions")
        .filter(|o| !o.is_null())
        .map(|o| {
            let mut o = o.clone();
            if let Some(m) = o.as_object_mut() {
                m.entry("kind").or_insert_with(|| json!("DeleteOptions"));
                m.entry("apiVersion").or_insert_with(|| json!("v1"));
            }
            o.to_string()
        })
        .unwrap_or_default();
    super::delete::delete_admitted(&pod_scope, axum::body::Bytes::from(options)).await?;
    Ok(())
}

//! `pods/binding` and `bindings`: a scheduler assigns a Pod to a node
//! (kube's `BindingREST`). The Pod's `spec.nodeName` is set once, with the
//! Binding's annotations and the PodScheduled condition; a Pod already
//! bound, or being deleted, is a 409.

use apimachinery::read::Freshness;
use apimachinery::status::GroupResource;
use apimachinery::validation;
use apimachinery::Status;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Map, Value};
use watchcache::StorageError;

use super::scope::Scope;
use crate::admission::CreateValidation;
use crate::error::{ApiError, Result};
use crate::object;

/// How often a bind retries when the Pod changes under it.
const MAX_ATTEMPTS: usize = 16;

/// The answer of `POST .../pods/{name}/binding` and `POST .../bindings`.
pub fn bind<'a>(
    scope: &'a Scope,
    binding: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    bind_pod(scope, binding, validation).boxed()
}

fn binding_resource() -> GroupResource<'static> {
    GroupResource {
        group: "",
        resource: "pods/binding",
    }
}

async fn bind_pod(
    scope: &Scope,
    binding: Value,
    validation: CreateValidation<'_>,
) -> Result<Value> {
    let name = object::name(&binding).unwrap_or("").to_string();
    if scope.subresource.is_some() && name != scope.name() {
        return Err(
            Status::bad_request("name in URL does not match name in Binding object").into(),
        );
    }
    let mut causes = Vec::new();
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        causes.push(validation::not_supported(
            "target.kind",
            kind,
            &["Node", "<empty>"],
        ));
    }
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if node.is_empty() {
        causes.push(validation::required("target.name", ""));
    }
    if !causes.is_empty() {
        let gk = apimachinery::status::GroupKind {
            group: "",
            kind: "Binding",
        };
        return Err(Status::invalid(gk, &name, causes).into());
    }
    validation.check(&binding).await?;
    let pods = scope
        .state
        .registry
        .lookup("", "v1", "pods")
        .ok_or_else(|| ApiError::internal("pods missing from the registry"))?;
    let key = scope.state.key(&pods, scope.namespace.as_deref(), &name);
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for _ in 0..MAX_ATTEMPTS {
        let current = scope
            .state
            .store
            .get(&key, Freshness::MostRecent)
            .await
            .map_err(|e| ApiError::storage(e, &pods, &name))?
            .ok_or_else(|| Status::not_found(pods.group_resource(), &name))?;
        let mut pod = current.value().clone();
        let conflict =
            |why: String| -> ApiError { Status::conflict(binding_resource(), &name, &why).into() };
        if object::is_deleting(&pod) {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        let assigned = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !assigned.is_empty() {
            return Err(conflict(format!(
                "pod {name} is already assigned to node {}",
                validation::go_quote(assigned)
            )));
        }
        assign(&mut pod, &node, &annotations);
        if let Some(m) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        match scope.state.store.update(&key, &pod, current.revision).await {
            Ok(_) => {
                return Ok(json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                }))
            }
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::storage(e, &pods, &name)),
        }
    }
    Err(Status::conflict(binding_resource(), &name, Status::CONFLICT_MODIFIED).into())
}

/// Sets the node, the Binding's annotations and PodScheduled=True.
fn assign(pod: &mut Value, node: &str, annotations: &Map<String, Value>) {
    let Some(o) = pod.as_object_mut() else { return };
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("nodeName".into(), Value::from(node));
    }
    if !annotations.is_empty() {
        let m = o.entry("metadata").or_insert_with(|| json!({}));
        if let Some(m) = m.as_object_mut() {
            let a = m.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = a.as_object_mut() {
                for (k, v) in annotations {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let status = o.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    let scheduled = json!({"type": "PodScheduled", "status": "True",
        "lastProbeTime": null, "lastTransitionTime": object::now()});
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
    {
        Some(c) => *c = scheduled,
        None => conditions.push(scheduled),
    }
}

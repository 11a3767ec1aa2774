//! Type checking of ValidatingAdmissionPolicies, reported in
//! `status.typeChecking` as kube's policy status controller reports it.
//!
//! kube type-checks each expression against the schema of every kind the
//! policy's `matchConstraints` name exactly (no wildcards). The CEL engine
//! here has no type checker, so this checks what one finds most often:
//! every chain of field selections on `object` and `oldObject`
//! (`object.spec.replicas`, `has(object.metadata.labels)`,
//! `object.spec.containers[0].image`) is walked through the kind's schema,
//! and a field the schema does not have is kube's `undefined field` error,
//! with cel-go's position and snippet. Expressions over maps of unknown
//! shape, comprehension variables, params and variables are not checked.
//!
//! A leader-elected controller writes `status.observedGeneration` and
//! `status.typeChecking` whenever a policy's generation moves.

use apimachinery::read::Freshness;
use apimachinery::schema::{Shape, TypeRef};
use futures_util::FutureExt;
use k8s_cel::references::{field_references, Step};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::backend::Backend;
use crate::controllers::{Context, Controller, Next, Source};
use crate::registry::{Registry, Row};

/// The kinds a policy's `matchConstraints` name exactly: (group/version,
/// kind, schema).
/// The kinds a policy matches, by group-version, with their rows (whose
/// schemas the expressions are checked against).
fn kinds(policy: &Value, registry: &Registry) -> Vec<(String, Row)> {
    let mut out = Vec::new();
    let rules = policy
        .pointer("/spec/matchConstraints/resourceRules")
        .and_then(Value::as_array);
    for rule in rules.into_iter().flatten() {
        let list = |k: &str| -> Vec<&str> {
            rule.get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect()
        };
        let (groups, versions, resources) =
            (list("apiGroups"), list("apiVersions"), list("resources"));
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    if [*g, *v, *r].contains(&"*") || r.contains('/') {
                        continue;
                    }
                    let Some(res) = registry.lookup(g, v, r) else {
                        continue;
                    };
                    if res.schema().is_none() {
                        continue;
                    }
                    let gv = format!("{g}/{v}");
                    if !out
                        .iter()
                        .any(|(o, k): &(String, Row)| *o == gv && k.kind == res.kind)
                    {
                        out.push((gv, res));
                    }
                }
            }
        }
    }
    out
}

/// cel-go's rendering of one error: message, then the source line and a
/// caret under the column.
fn issue(source: &str, line: u32, column: u32, message: &str) -> String {
    let text = source.lines().nth(line as usize - 1).unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^",
        ".".repeat(column.saturating_sub(1) as usize)
    )
}

/// The errors of one expression against one kind's schema.
fn check_against(source: &str, schema: TypeRef<'_>) -> Vec<String> {
    let mut errors = Vec::new();
    for r in field_references(source) {
        if r.root != "object" && r.root != "oldObject" {
            continue;
        }
        let mut cur = schema;
        for step in &r.steps {
            let next = match (step, cur.shape()) {
                (Step::Field { name, line, column }, Shape::Object) => match cur.child(name) {
                    Some(t) => t,
                    None => {
                        // `apiVersion`, `kind` and `metadata` are on every
                        // object, whatever the schema lists.
                        if !matches!(name.as_str(), "apiVersion" | "kind") {
                            errors.push(issue(
                                source,
                                *line,
                                *column,
                                &format!("undefined field '{name}'"),
                            ));
                        }
                        break;
                    }
                },
                (Step::Field { .. }, Shape::Map) | (Step::Index, Shape::Map) => {
                    match cur.values() {
                        Some(t) => t,
                        None => break,
                    }
                }
                (Step::Index, Shape::Array) => match cur.items() {
                    Some(t) => t,
                    None => break,
                },
                _ => break,
            };
            cur = next;
        }
    }
    errors
}

/// The expressions of a policy kube checks, with their field paths.
fn expressions(policy: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let spec = policy.get("spec");
    let list = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
    };
    for (i, v) in list("validations") {
        for field in ["expression", "messageExpression"] {
            if let Some(e) = v.get(field).and_then(Value::as_str) {
                out.push((format!("spec.validations[{i}].{field}"), e));
            }
        }
    }
    for (i, v) in list("auditAnnotations") {
        if let Some(e) = v.get("valueExpression").and_then(Value::as_str) {
            out.push((format!("spec.auditAnnotations[{i}].valueExpression"), e));
        }
    }
    out
}

/// `status.typeChecking.expressionWarnings` for a policy.
pub fn warnings(policy: &Value, registry: &Registry) -> Vec<Value> {
    let kinds = kinds(policy, registry);
    let mut out = Vec::new();
    for (field_ref, source) in expressions(policy) {
        let per_kind: Vec<String> = kinds
            .iter()
            .filter_map(|(gv, res)| {
                let errors = check_against(source, res.schema()?);
                let kind = &res.kind;
                (!errors.is_empty()).then(|| format!("{gv}, Kind={kind}: {}", errors.join("\n")))
            })
            .collect();
        if !per_kind.is_empty() {
            out.push(json!({"fieldRef": field_ref, "warning": per_kind.join("\n")}));
        }
    }
    out
}

async fn reconcile(backend: &Backend, name: String) -> Result<Next, String> {
    let res = backend
        .registry
        .lookup(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
        )
        .ok_or("validatingadmissionpolicies missing from the registry")?;
    let key = backend.key(&res, None, &name);
    let Some(current) = backend
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(Next::Done);
    };
    let policy = current.value();
    let generation = policy
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(0));
    let status = json!({
        "observedGeneration": generation,
        "typeChecking": {"expressionWarnings": warnings(policy, &backend.registry)},
    });
    let mut want = status.clone();
    if want["typeChecking"]["expressionWarnings"]
        .as_array()
        .is_some_and(Vec::is_empty)
    {
        want["typeChecking"] = json!({});
    }
    let have = policy.get("status");
    let same = have.and_then(|s| s.get("observedGeneration")) == want.get("observedGeneration")
        && have.and_then(|s| s.get("typeChecking")) == want.get("typeChecking");
    if same {
        return Ok(Next::Done);
    }
    let mut updated = policy.clone();
    let conditions = have.and_then(|s| s.get("conditions")).cloned();
    updated["status"] = want;
    if let Some(c) = conditions {
        updated["status"]["conditions"] = c;
    }
    if let Some(m) = updated.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    match backend.store.update(&key, &updated, current.revision).await {
        Ok(_) => Ok(Next::Done),
        // Changed under us: the event brings it back.
        Err(watchcache::StorageError::Conflict { .. }) => Ok(Next::Done),
        Err(e) => Err(e.to_string()),
    }
}

/// The leader's loop that keeps every policy's type-checking status in
/// `backend`; it runs on any context (it reads only the backend).
pub fn controller<C: Context>(backend: &Backend) -> Option<Controller<C>> {
    let res = backend.registry.lookup(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
    )?;
    Some(Controller {
        name: "validatingadmissionpolicy_status",
        sources: vec![Source {
            prefix: backend.collection_prefix(&res, None),
            key_of: crate::controllers::name_key,
        }],
        feed: None,
        reconcile: Arc::new(|ctx: Arc<C>, key| {
            async move { reconcile(ctx.backend(), key).await }.boxed()
        }),
        workers: 1,
        capacity: 10_000,
        backoff: crate::controllers::queue::Backoff::default(),
        resync: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_fields_are_found_with_cel_gos_snippet() {
        let schema = apimachinery::schema::builtin()
            .by_gvk("apps", "v1", "Deployment")
            .unwrap();
        assert!(check_against(
            "object.spec.replicas > 1 && has(object.metadata.labels)",
            schema
        )
        .is_empty());
        assert!(check_against(
            "object.spec.template.spec.containers[0].image != ''",
            schema
        )
        .is_empty());
        assert!(check_against("object.metadata.labels['x'] == 'y'", schema).is_empty());
        assert_eq!(
            check_against("object.spec.replicaz > 1", schema),
            vec!["ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^"]
        );
    }
}

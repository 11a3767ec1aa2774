//! The `/scale` subresource: an autoscaling/v1 Scale view of a workload's
//! replicas, readable and writable through get, update and patch.

use super::{patch, scope::Scope, update, write};
use crate::error::Result;
use crate::registry::Subresource;
use crate::response;
use apimachinery::fieldvalidation::Decoded;
use apimachinery::read::Freshness;
use apimachinery::selector::LabelSelector;
use apimachinery::Status;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value};

struct Pointers<'a> {
    spec: &'a str,
    status: &'a str,
    selector: &'a str,
    selector_is_map: bool,
}

fn pointers(scope: &Scope) -> Result<Pointers<'_>> {
    match scope.subresource.as_ref() {
        Some(Subresource::Scale {
            spec_replicas,
            status_replicas,
            selector,
            selector_is_map,
        }) => Ok(Pointers {
            spec: spec_replicas,
            status: status_replicas,
            selector,
            selector_is_map: *selector_is_map,
        }),
        _ => Err(Status::path_not_found().into()),
    }
}

fn selector_string(p: &Pointers, obj: &Value) -> String {
    let Some(sel) = obj.pointer(p.selector) else {
        return String::new();
    };
    if p.selector_is_map {
        let mut pairs: Vec<String> = sel
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        pairs.join(",")
    } else {
        LabelSelector::from_label_selector(sel)
            .map(|s| s.to_string())
            .unwrap_or_default()
    }
}

/// The Scale view of a workload object.
fn to_scale(p: &Pointers, obj: &Value) -> Value {
    let mut meta = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{f}")) {
            meta.insert(f.into(), v.clone());
        }
    }
    let mut status = Map::new();
    status.insert(
        "replicas".into(),
        obj.pointer(p.status).cloned().unwrap_or(json!(0)),
    );
    let sel = selector_string(p, obj);
    if !sel.is_empty() {
        status.insert("selector".into(), Value::String(sel));
    }
    let mut spec = Map::new();
    if let Some(r) = obj.pointer(p.spec) {
        spec.insert("replicas".into(), r.clone());
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    })
}

/// Writes the Scale's replicas (and its resourceVersion as precondition)
/// into the workload object.
fn from_scale(p: &Pointers, current: &Value, scale: &Value) -> Result<Value> {
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    if replicas.as_i64().is_none_or(|r| r < 0) {
        return Err(Status::invalid(
            apimachinery::status::GroupKind {
                group: "autoscaling",
                kind: "Scale",
            },
            scale
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(""),
            vec![apimachinery::StatusCause::new(
                apimachinery::status::cause::FIELD_VALUE_INVALID,
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                "spec.replicas",
            )],
        )
        .into());
    }
    let mut new = current.clone();
    set_pointer(&mut new, p.spec, replicas);
    let m = crate::object::meta_mut(&mut new);
    match scale.pointer("/metadata/resourceVersion") {
        Some(rv) if rv.as_str().is_some_and(|s| !s.is_empty()) => {
            m.insert("resourceVersion".into(), rv.clone());
        }
        _ => {
            m.remove("resourceVersion");
        }
    }
    Ok(new)
}

fn set_pointer(v: &mut Value, ptr: &str, val: Value) {
    let mut cur = v;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("object ensured above");
        if i + 1 == parts.len() {
            map.insert((*part).to_string(), val);
            return;
        }
        cur = map
            .entry((*part).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

pub async fn get(scope: &Scope) -> Result<Response> {
    let p = pointers(scope)?;
    let obj = scope
        .state
        .store
        .get(&scope.key(), Freshness::MostRecent)
        .await
        .map_err(|e| scope.storage_err(e))?
        .ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
    Ok(response::object(
        scope,
        StatusCode::OK,
        &to_scale(&p, obj.value()),
    ))
}

pub async fn update(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let p = pointers(scope)?;
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Update)?;
    let (mut scale, warnings) = write::decode_object(scope, &body, &params)?;
    update::check_name(scope, &mut scale)?;
    let manager = write::manager(scope, &params);
    let updated = write::guaranteed_update(scope, &params, &manager, |current| {
        let current =
            current.ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
        from_scale(&p, current.value(), &scale)
    })
    .await?;
    let resp = response::object(scope, StatusCode::OK, &to_scale(&p, &updated.object));
    Ok(response::with_warnings(resp, &warnings))
}

pub async fn patch(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    if super::write::is_apply(scope) {
        return super::apply::patch(scope, body).await;
    }
    let p = pointers(scope)?;
    let (format, decoded) = patch::decode_patch(scope, &body)?;
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Patch(format))?;
    let manager = write::manager(scope, &params);
    let scale_ty = apimachinery::schema::builtin().by_gvk("autoscaling", "v1", "Scale");
    let mut warnings = Vec::new();
    let updated = write::guaranteed_update(scope, &params, &manager, |current| {
        let current =
            current.ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
        let scale = to_scale(&p, current.value());
        let patched = patch::apply(format, &scale, &decoded.value, scale_ty)?;
        let check = Decoded {
            value: patched,
            duplicates: decoded.duplicates.clone(),
        };
        warnings = apimachinery::fieldvalidation::check(params.field_validation, scale_ty, &check)?;
        write::check_types(scope, &check.value)?;
        from_scale(&p, current.value(), &check.value)
    })
    .await?;
    let resp = response::object(scope, StatusCode::OK, &to_scale(&p, &updated.object));
    Ok(response::with_warnings(resp, &warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_setting_creates_parents() {
        let mut v = json!({});
        set_pointer(&mut v, "/spec/replicas", json!(3));
        assert_eq!(v, json!({"spec": {"replicas": 3}}));
    }

    #[test]
    fn rc_selector_is_sorted_pairs() {
        let p = Pointers {
            spec: "/spec/replicas",
            status: "/status/replicas",
            selector: "/spec/selector",
            selector_is_map: true,
        };
        let obj = json!({"spec": {"selector": {"b": "2", "a": "1"}}});
        assert_eq!(selector_string(&p, &obj), "a=1,b=2");
        let s = to_scale(&p, &obj);
        assert_eq!(s["status"]["replicas"], 0);
    }
}

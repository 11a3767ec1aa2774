//! The `/scale` subresource: an autoscaling/v1 Scale view of a workload's
//! replicas, readable and writable through get, update and patch.

use super::scale_view::{
    pointers, set_replicas, spec_empty_error, spec_missing_error, to_scale, Pointers,
    UNSET_REPLICAS,
};
use super::{patch, scope::Scope, update, write};
use crate::error::Result;
use crate::response;
use apimachinery::fieldvalidation::Decoded;
use apimachinery::read::Freshness;
use apimachinery::Status;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

/// Writes the Scale's replicas (and its resourceVersion as precondition)
/// into the workload object.
fn from_scale(p: &Pointers, current: &Value, scale: &Value) -> Result<Value> {
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    let name = scale
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut new = current.clone();
    set_replicas(p, &mut new, &replicas, name)?;
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

pub async fn get(scope: &Scope) -> Result<Response> {
    let p = pointers(scope)?;
    let obj = scope
        .state
        .store
        .get(&scope.key(), Freshness::MostRecent)
        .await
        .map_err(|e| scope.storage_err(e))?
        .ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
    let scale = to_scale(&p, obj.value())?;
    if p.spec_missing(obj.value()) {
        return Err(spec_missing_error(&p).into());
    }
    Ok(response::object(scope, StatusCode::OK, &scale))
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
    let resp = response::object(scope, StatusCode::OK, &to_scale(&p, &updated.object)?);
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
        let mut scale = to_scale(&p, current.value())?;
        let unset = p.spec_missing(current.value());
        if unset {
            scale["spec"]["replicas"] = json!(UNSET_REPLICAS);
        }
        let patched = patch::apply(format, &scale, &decoded.value, scale_ty)?;
        let check = Decoded {
            value: patched,
            duplicates: decoded.duplicates.clone(),
        };
        warnings = apimachinery::fieldvalidation::check(params.field_validation, scale_ty, &check)?;
        write::check_types(scope, &check.value)?;
        if unset && check.value.pointer("/spec/replicas") == Some(&json!(UNSET_REPLICAS)) {
            return Err(spec_empty_error(&p).into());
        }
        from_scale(&p, current.value(), &check.value)
    })
    .await?;
    let resp = response::object(scope, StatusCode::OK, &to_scale(&p, &updated.object)?);
    Ok(response::with_warnings(resp, &warnings))
}

#[cfg(test)]
mod tests {
    use super::super::scale_view::set_pointer;
    use super::*;
    use crate::registry::ScaleSelector;

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
            selector_form: ScaleSelector::Map,
        };
        let obj = json!({"spec": {"selector": {"b": "2", "a": "1"}}});
        let s = to_scale(&p, &obj).unwrap();
        assert_eq!(s["status"]["selector"], "a=1,b=2");
        assert_eq!(s["status"]["replicas"], 0);
    }

    #[test]
    fn label_selector_objects_become_strings() {
        let p = Pointers {
            spec: "/spec/replicas",
            status: "/status/replicas",
            selector: "/spec/selector",
            selector_form: ScaleSelector::LabelSelector,
        };
        let obj = json!({"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}});
        let s = to_scale(&p, &obj).unwrap();
        assert_eq!(s["status"]["selector"], "app=web");
        assert_eq!(s["spec"]["replicas"], 2);
    }

    /// A CRD's `labelSelectorPath` holds the string form (kube's
    /// `scaleFromCustomResource` reads it with `NestedString`).
    #[test]
    fn custom_resource_selector_is_the_string_at_its_path() {
        let p = Pointers {
            spec: "/spec/replicas",
            status: "/status/replicas",
            selector: "/status/selector",
            selector_form: ScaleSelector::String,
        };
        let obj = json!({"spec": {"replicas": 3}, "status": {"replicas": 1, "selector": "app=web,tier!=db"}});
        let s = to_scale(&p, &obj).unwrap();
        assert_eq!(s["status"]["selector"], "app=web,tier!=db");
        assert_eq!(s["status"]["replicas"], 1);
        // Missing (or under a null): no selector, as kube.
        for obj in [json!({"spec": {"replicas": 3}}), json!({"status": null})] {
            let s = to_scale(&p, &obj).unwrap();
            assert!(s["status"].get("selector").is_none(), "{s}");
        }
        // No path in the CRD: no selector.
        let none = Pointers { selector: "", ..p };
        let obj = json!({"status": {"selector": "a=b"}});
        assert!(to_scale(&none, &obj).unwrap()["status"]
            .get("selector")
            .is_none());
    }

    /// Another type at the path is kube's accessor error, in Go's words.
    #[test]
    fn a_selector_of_another_type_is_kubes_accessor_error() {
        let p = Pointers {
            spec: "/spec/replicas",
            status: "/status/replicas",
            selector: "/status/selector",
            selector_form: ScaleSelector::String,
        };
        let cases = [
            (json!({"status": {"selector": {"matchLabels": {"a": "b"}}}}),
             ".status.selector accessor error: map[matchLabels:map[a:b]] is of the type map[string]interface {}, expected string"),
            (json!({"status": {"selector": 5}}),
             ".status.selector accessor error: 5 is of the type int64, expected string"),
            (json!({"status": {"selector": ["a", true, 1.5]}}),
             ".status.selector accessor error: [a true 1.5] is of the type []interface {}, expected string"),
            (json!({"status": "x"}),
             ".status.selector accessor error: x is of the type string, expected map[string]interface{}"),
        ];
        for (obj, want) in cases {
            let err = to_scale(&p, &obj).unwrap_err();
            let status = err.to_status();
            assert_eq!(status.code, 500, "{obj}");
            assert_eq!(status.reason, "");
            assert_eq!(status.message, want);
        }
    }

    /// kube's `scaleFromCustomResource`: a custom resource without
    /// replicas at `specReplicasPath` has no Scale to show.
    #[test]
    fn a_custom_resource_without_spec_replicas() {
        let p = Pointers {
            spec: "/spec/replicas",
            status: "/status/replicas",
            selector: "",
            selector_form: ScaleSelector::String,
        };
        for obj in [json!({}), json!({"spec": null}), json!({"spec": {}})] {
            assert!(p.spec_missing(&obj), "{obj}");
        }
        assert!(!p.spec_missing(&json!({"spec": {"replicas": 0}})));
        let s = spec_missing_error(&p);
        assert_eq!(s.code, 500);
        assert_eq!(s.reason, "InternalError");
        assert_eq!(
            s.message,
            "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist"
        );
        let s = spec_empty_error(&Pointers {
            spec: "/spec/size/count",
            ..p
        });
        assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            s.message,
            "the spec replicas field \".spec.size.count\" cannot be empty"
        );
        // Built-in workloads are not held to it.
        let deployment = Pointers {
            selector_form: ScaleSelector::LabelSelector,
            ..p
        };
        assert!(!deployment.spec_missing(&json!({})));
    }

    #[test]
    fn go_float_formatting() {
        for (f, want) in [
            (1.5, "1.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
        ] {
            assert_eq!(super::super::scale_view::go_float(f), want);
        }
    }
}

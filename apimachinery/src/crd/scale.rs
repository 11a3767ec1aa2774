//! The scale subresource's reading of a custom resource.

use serde_json::Value;

use super::{go_number, invalid, invalid_str};
use crate::StatusCause;

/// The scale subresource's view of a custom resource (kube's
/// `ValidateScaleSpec` and `ValidateScaleStatus`): the replicas at
/// `specReplicasPath` and `statusReplicasPath` are non-negative int32s, the
/// label selector at `labelSelectorPath` a string. `scale` is the CRD
/// version's `subresources.scale`. Errors are reported at the JSON path as
/// written (`.spec.replicas`).
pub fn validate_scale(scale: &Value, obj: &Value) -> Vec<StatusCause> {
    let mut out = Vec::new();
    for k in ["specReplicasPath", "statusReplicasPath"] {
        let Some(p) = scale.get(k).and_then(Value::as_str) else {
            continue;
        };
        match nested(obj, p) {
            None => {}
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {
                let v = n.as_i64().unwrap_or(i64::MAX);
                if v < 0 {
                    out.push(invalid(
                        p,
                        &Value::from(v),
                        "should be a non-negative integer",
                    ));
                } else if v > i64::from(i32::MAX) {
                    out.push(invalid(
                        p,
                        &Value::from(v),
                        &format!("should be less than or equal to {}", i32::MAX),
                    ));
                }
            }
            Some(other) => out.push(invalid(
                p,
                &Value::from(0),
                &accessor_error(p, other, "int64"),
            )),
        }
    }
    if let Some(p) = scale.get("labelSelectorPath").and_then(Value::as_str) {
        match nested(obj, p) {
            None | Some(Value::String(_)) => {}
            Some(other) => out.push(invalid_str(p, "", &accessor_error(p, other, "string"))),
        }
    }
    out
}

/// The value at a simple JSON path (`.spec.replicas`); `None` when a step is
/// missing (kube's `NestedFieldNoCopy` "not found").
fn nested<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut v = obj;
    for step in path.trim_start_matches('.').split('.') {
        v = v.as_object()?.get(step)?;
    }
    Some(v)
}

/// unstructured's `%v accessor error: %v is of the type %T, expected %s`.
fn accessor_error(path: &str, v: &Value, expected: &str) -> String {
    let (shown, ty) = match v {
        Value::Null => ("<nil>".to_string(), "<nil>"),
        Value::Bool(b) => (b.to_string(), "bool"),
        Value::Number(n) => (go_number(n), "float64"),
        Value::String(s) => (s.clone(), "string"),
        Value::Array(_) => (go_print(v), "[]interface {}"),
        Value::Object(_) => (go_print(v), "map[string]interface {}"),
    };
    let dotted = if path.starts_with('.') {
        path.to_string()
    } else {
        format!(".{path}")
    };
    format!("{dotted} accessor error: {shown} is of the type {ty}, expected {expected}")
}

/// Go's `%v` of a map or slice: `map[a:1 b:x]`, `[1 x]`.
fn go_print(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_print).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_print(&m[k.as_str()])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

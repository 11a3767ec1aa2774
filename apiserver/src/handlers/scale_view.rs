//! The autoscaling/v1 Scale view of a workload object: what `/scale`'s
//! get, update and patch (`scale`) and its server-side apply (`apply`)
//! show, from the pointers the registry row names.

use super::scope::Scope;
use crate::error::Result;
use crate::registry::{ScaleSelector, Subresource};
use apimachinery::selector::LabelSelector;
use apimachinery::Status;
use serde_json::{json, Map, Value};

/// Where a workload keeps what its Scale shows.
pub(super) struct Pointers<'a> {
    pub spec: &'a str,
    pub status: &'a str,
    pub selector: &'a str,
    pub selector_form: ScaleSelector,
}

impl Pointers<'_> {
    /// Whether this is a custom resource's Scale (kube's
    /// `scaleFromCustomResource`: the CRD's `labelSelectorPath` holds the
    /// selector's string form, and `specReplicasPath` must be there).
    pub fn custom(&self) -> bool {
        self.selector_form == ScaleSelector::String
    }

    /// The object has no replicas at `specReplicasPath`: a custom
    /// resource's Scale cannot be shown (kube's 500 on GET).
    pub fn spec_missing(&self, obj: &Value) -> bool {
        self.custom() && obj.pointer(self.spec).is_none()
    }

    /// `specReplicasPath` as the CRD spells it (`.spec.replicas`), quoted
    /// as Go's `%q`.
    pub fn spec_path(&self) -> String {
        let path: String = self
            .spec
            .split('/')
            .skip(1)
            .map(|f| format!(".{}", f.replace("~1", "/").replace("~0", "~")))
            .collect();
        format!("{path:?}")
    }
}

/// GET of a custom resource's Scale whose object has no spec replicas:
/// kube's `ScaleREST.Get` answers an internal error.
pub(super) fn spec_missing_error(p: &Pointers) -> Status {
    Status::internal(format!(
        "the spec replicas field {} does not exist",
        p.spec_path()
    ))
}

/// A patch of a custom resource's Scale that left unset replicas unset:
/// kube's `scaleUpdatedObjectInfo` answers 400.
pub(super) fn spec_empty_error(p: &Pointers) -> Status {
    Status::bad_request(format!(
        "the spec replicas field {} cannot be empty",
        p.spec_path()
    ))
}

/// What kube puts in the Scale's `spec.replicas` when the custom resource
/// has none, for a patch to overwrite (`invalidSpecReplicas`).
pub(super) const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// The request's `/scale` pointers; 404 for a kind without `/scale`.
pub(super) fn pointers(scope: &Scope) -> Result<Pointers<'_>> {
    match scope.subresource.as_ref() {
        Some(Subresource::Scale {
            spec_replicas,
            status_replicas,
            selector,
            selector_form,
        }) => Ok(Pointers {
            spec: spec_replicas,
            status: status_replicas,
            selector,
            selector_form: *selector_form,
        }),
        _ => Err(Status::path_not_found().into()),
    }
}

/// `status.selector` of the Scale: the selector in its string form, empty
/// when the object has none. A custom resource's `labelSelectorPath` must
/// hold a string; anything else is kube's accessor error (a 500 without
/// a reason, as kube answers errors its scale store does not type).
fn selector_string(p: &Pointers, obj: &Value) -> Result<String> {
    if p.selector.is_empty() {
        return Ok(String::new());
    }
    match p.selector_form {
        ScaleSelector::Map => {
            let mut pairs: Vec<String> = obj
                .pointer(p.selector)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            pairs.sort();
            Ok(pairs.join(","))
        }
        ScaleSelector::LabelSelector => Ok(obj
            .pointer(p.selector)
            .and_then(|sel| LabelSelector::from_label_selector(sel).ok())
            .map(|s| s.to_string())
            .unwrap_or_default()),
        ScaleSelector::String => {
            nested_string(obj, p.selector).map_err(|e| Status::failure(500, "", e).into())
        }
    }
}

/// The string at `pointer`, as kube's `unstructured.NestedString` reads
/// it: missing (or under a null) is empty; a value of another type, or a
/// parent that is not an object, is its error text.
fn nested_string(obj: &Value, pointer: &str) -> std::result::Result<String, String> {
    let fields: Vec<String> = pointer
        .trim_start_matches('/')
        .split('/')
        .map(|f| f.replace("~1", "/").replace("~0", "~"))
        .collect();
    let path = |n: usize| format!(".{}", fields[..n].join("."));
    let mut val = obj;
    for (i, field) in fields.iter().enumerate() {
        match val {
            Value::Null => return Ok(String::new()),
            Value::Object(m) => match m.get(field) {
                Some(v) => val = v,
                None => return Ok(String::new()),
            },
            other => {
                return Err(format!(
                    "{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    path(i + 1),
                    go_value(other),
                    go_type(other)
                ))
            }
        }
    }
    match val {
        Value::String(s) => Ok(s.clone()),
        other => Err(format!(
            "{} accessor error: {} is of the type {}, expected string",
            path(fields.len()),
            go_value(other),
            go_type(other)
        )),
    }
}

/// Go's `%T` of a decoded JSON value (unstructured content).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a decoded JSON value: maps with sorted keys, slices
/// space-separated, floats as `%g` with the shortest digits.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => go_float(f),
            None => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_value(&m[k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// Go's `%v` of a float64 (`%g` with the shortest digits): exponent form
/// when the decimal exponent is below -4 or at least 6, else plain.
pub(super) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Rust's `{:e}` has the shortest round-trip digits: `d.ddde<exp>`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{f}")
}

/// The Scale view of a workload object.
pub(super) fn to_scale(p: &Pointers, obj: &Value) -> Result<Value> {
    let mut meta = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.get("metadata").and_then(|m| m.get(f)) {
            meta.insert(f.into(), v.clone());
        }
    }
    let mut status = Map::new();
    status.insert(
        "replicas".into(),
        obj.pointer(p.status).cloned().unwrap_or(json!(0)),
    );
    let sel = selector_string(p, obj)?;
    if !sel.is_empty() {
        status.insert("selector".into(), Value::String(sel));
    }
    let mut spec = Map::new();
    if let Some(r) = obj.pointer(p.spec) {
        spec.insert("replicas".into(), r.clone());
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": apimachinery::managedfields::SCALE_API_VERSION,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }))
}

/// Writes a Scale's `spec.replicas` into the workload object at the row's
/// pointer. A count that is not an integer of at least 0 is kube's 422 on
/// the Scale (`name` is the Scale's).
pub(super) fn set_replicas(
    p: &Pointers,
    parent: &mut Value,
    replicas: &Value,
    name: &str,
) -> Result<()> {
    if replicas.as_i64().is_none_or(|r| r < 0) {
        return Err(Status::invalid(
            apimachinery::status::GroupKind {
                group: "autoscaling",
                kind: "Scale",
            },
            name,
            vec![apimachinery::StatusCause::new(
                apimachinery::status::cause::FIELD_VALUE_INVALID,
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                "spec.replicas",
            )],
        )
        .into());
    }
    set_pointer(parent, p.spec, replicas.clone());
    Ok(())
}

/// Sets the value at a JSON pointer, making the objects on its way (and
/// replacing what on its way is not an object).
pub(super) fn set_pointer(v: &mut Value, ptr: &str, val: Value) {
    let mut cur = v;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        cur = map
            .entry((*part).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert((*last).to_string(), val);
    }
}

//! Validation of a custom resource against its schema, as kube-apiserver's
//! CRD handler does it on create and update:
//!
//! 1. the OpenAPI value validation of kube-openapi (`validate.SchemaValidator`)
//!    with its error messages (`spec.replicas in body must be of type
//!    integer: "string"`), converted to field errors the way
//!    apiextensions-apiserver does (`kubeOpenAPIResultToFieldErrors`): the
//!    field path is kube-openapi's dotted path (`spec.ports.0.name`);
//! 2. the list-type checks (`x-kubernetes-list-type: set|map`, duplicates
//!    reported at `spec.list[1]`);
//! 3. the metadata of embedded resources (`x-kubernetes-embedded-resource`).

use regex::Regex;
use serde_json::{Map, Value};

use super::listtype::list_types;
use super::objectmeta::embedded_meta;
use super::types::{JSONSchemaProps, SchemaOrArray, SchemaOrBool, Structural};
use super::{
    child, formats, go_float, invalid, invalid_str, not_supported, required, too_long, too_many,
    type_invalid,
};
use crate::validation::go_quote;
use crate::StatusCause;

/// Validates `value` (a whole custom resource, or any value at the root of
/// `schema`) and returns kube's field errors. Converts the schema on every
/// call; [`SchemaValidator`] keeps the converted form.
pub fn validate(schema: &Structural, value: &Value) -> Vec<StatusCause> {
    validate_with(schema, &schema.to_props(), value, None)
}

/// [`validate`] on update, with kube's validation ratcheting: values equal
/// to those of `old` pass the OpenAPI validation whatever they are (list
/// types and embedded metadata are still checked).
pub fn validate_update(schema: &Structural, value: &Value, old: &Value) -> Vec<StatusCause> {
    validate_with(schema, &schema.to_props(), value, Some(old))
}

fn validate_with(
    schema: &Structural,
    props: &JSONSchemaProps,
    value: &Value,
    old: Option<&Value>,
) -> Vec<StatusCause> {
    let mut out = validate_props_update(props, value, old);
    list_types(schema, value, "", &mut out);
    embedded_meta(schema, value, "", true, &mut out);
    out
}

/// A structural schema ready to validate many objects (what [`validate`]
/// does, without converting the schema each time).
#[derive(Debug, Clone)]
pub struct SchemaValidator {
    schema: Structural,
    props: JSONSchemaProps,
}

impl SchemaValidator {
    pub fn new(schema: Structural) -> SchemaValidator {
        let props = schema.to_props();
        SchemaValidator { schema, props }
    }

    pub fn schema(&self) -> &Structural {
        &self.schema
    }

    pub fn validate(&self, value: &Value) -> Vec<StatusCause> {
        validate_with(&self.schema, &self.props, value, None)
    }

    /// [`validate_update`] with this schema.
    pub fn validate_update(&self, value: &Value, old: &Value) -> Vec<StatusCause> {
        validate_with(&self.schema, &self.props, value, Some(old))
    }
}

/// Only the OpenAPI value validation, against the schema as written.
pub fn validate_props(schema: &JSONSchemaProps, value: &Value) -> Vec<StatusCause> {
    validate_props_update(schema, value, None)
}

/// [`validate_props`] on update: values equal to their counterpart in `old`
/// are not validated (kube's validation ratcheting), so an object that was
/// stored before a schema change can still be updated. Map keys and the
/// items of `x-kubernetes-list-type: map` lists (by key) are correlated;
/// other list items are not.
pub fn validate_props_update(
    schema: &JSONSchemaProps,
    value: &Value,
    old: Option<&Value>,
) -> Vec<StatusCause> {
    let mut out = Vec::new();
    node(schema, "", value, old, &mut out);
    // kube-openapi names root map values `.key`; kube drops the dot from the
    // field path (not from the message).
    for c in &mut out {
        if let Some(f) = c.field.strip_prefix('.') {
            c.field = f.to_string();
        }
    }
    out
}

/// Validates a value found at `base` (a schema's `...default`), as kube's
/// `ValidateDefaults` does: the metadata of embedded resources first, then
/// (if that is fine) the OpenAPI validation with errors under `base`, then
/// the list types.
pub(crate) fn validate_at(schema: &Structural, value: &Value, base: &str) -> Vec<StatusCause> {
    let mut out = Vec::new();
    // kube validates the node itself as a resource when it is embedded.
    embedded_meta(schema, value, base, false, &mut out);
    if !out.is_empty() {
        return out;
    }
    let props = schema.to_props();
    out = validate_props(&props, value);
    for c in &mut out {
        c.field = if c.field.is_empty() || c.field == NIL_PATH {
            base.to_string()
        } else {
            child(base, &c.field)
        };
    }
    if out.is_empty() {
        list_types(schema, value, base, &mut out);
    }
    out
}

// ---------------------------------------------------------------------------
// OpenAPI value validation.

/// The name kube-openapi puts in front of `in body` (empty at the root).
fn shown(path: &str) -> &str {
    path
}

fn schema_types(s: &JSONSchemaProps) -> Vec<&str> {
    if s.x_int_or_string {
        vec!["integer", "string"]
    } else if s.type_.is_empty() {
        Vec::new()
    } else {
        vec![s.type_.as_str()]
    }
}

/// kube-openapi's type validator, formats included: kube keeps only the
/// formats it supports, and a format relaxes or changes the type check.
fn check_type(s: &JSONSchemaProps, path: &str, v: &Value, out: &mut Vec<StatusCause>) {
    let types = schema_types(s);
    let format = formats::effective(s);
    if types.is_empty() && format.is_empty() {
        return;
    }
    let fail = |expected: &str, actual: &str, out: &mut Vec<StatusCause>| {
        let msg = format!(
            "{} in body must be of type {expected}: {}",
            shown(path),
            go_quote(actual)
        );
        out.push(type_invalid(path, &Value::String(actual.into()), &msg));
    };
    if v.is_null() {
        if !types.is_empty() && !s.nullable {
            fail(&types.join(","), "null", out);
        }
        return;
    }
    let (sch_type, data_format) = match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
        Value::Number(_) => ("number", "double"),
        other => (crate::validation::json_type_name(other), ""),
    };
    let contains = |t: &str| types.contains(&t);
    let is_float_int =
        sch_type == "number" && v.as_f64().is_some_and(is_json_integer) && contains("integer");
    let is_int_float = sch_type == "integer" && contains("number");
    let string_or_slice = v.is_string() || v.is_array();
    let type_or_format_ok =
        contains(sch_type) || data_format == format || is_float_int || is_int_float;
    if !(string_or_slice || format.is_empty() || type_or_format_ok) {
        fail(format, data_format, out);
        return;
    }
    let numeric = contains("number") || contains("integer");
    if string_or_slice && !numeric && !format.is_empty() {
        return;
    }
    if !(contains(sch_type) || is_float_int || is_int_float) {
        fail(&types.join(","), sch_type, out);
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn check_enum(s: &JSONSchemaProps, path: &str, v: &Value, out: &mut Vec<StatusCause>) {
    if s.enum_.is_empty() || s.enum_.iter().any(|e| json_equal(e, v)) {
        return;
    }
    let values: Vec<String> = s
        .enum_
        .iter()
        .map(|e| match e {
            Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    out.push(not_supported(path, v, &values));
}

/// A compiled pattern, cached: the same few patterns are checked against
/// every object. Patterns are RE2 in kube; the regex crate reads the same
/// syntax.
fn compiled(pattern: &str) -> Option<Regex> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let Ok(mut map) = cache.lock() else {
        return Regex::new(pattern).ok();
    };
    if let Some(r) = map.get(pattern) {
        return r.clone();
    }
    if map.len() >= 1024 {
        map.clear();
    }
    let r = Regex::new(pattern).ok();
    map.insert(pattern.to_string(), r.clone());
    r
}

fn check_string(s: &JSONSchemaProps, path: &str, v: &str, out: &mut Vec<StatusCause>) {
    let len = v.chars().count() as i64;
    if let Some(max) = s.max_length {
        if len > max {
            out.push(too_long(path, max));
        }
    }
    if let Some(min) = s.min_length {
        if len < min {
            let msg = format!(
                "{} in body should be at least {min} chars long",
                shown(path)
            );
            out.push(invalid_str(path, v, &msg));
        }
    }
    if !s.pattern.is_empty() {
        if let Some(re) = compiled(&s.pattern) {
            if !re.is_match(v) {
                let msg = format!("{} in body should match '{}'", shown(path), s.pattern);
                out.push(invalid_str(path, v, &msg));
            }
        }
    }
    let format = formats::effective(s);
    if !format.is_empty() && !formats::check(format, v) {
        let msg = format!(
            "{} in body must be of type {}: {}",
            shown(path),
            s.format,
            go_quote(v)
        );
        out.push(type_invalid(path, &Value::String(v.into()), &msg));
    }
}

/// A bound as kube-openapi prints it: as an integer when the value checked
/// is an integer and the bound is integral, else as a Go float.
fn bound(b: f64, int_data: bool) -> String {
    if int_data && b.fract() == 0.0 && b.abs() < 9.0e18 {
        (b as i64).to_string()
    } else {
        go_float(b)
    }
}

/// go-openapi's `IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() {
        return false;
    }
    let g = f.round();
    g == f || (f - g).abs() / (f.abs() + g.abs()) < 1e-9
}

fn check_number(s: &JSONSchemaProps, path: &str, v: &Value, n: f64, out: &mut Vec<StatusCause>) {
    let int_data = v.as_i64().is_some() || v.as_u64().is_some();
    if let Some(m) = s.multiple_of {
        if m > 0.0 {
            let ok = match (v.as_i64(), m.fract() == 0.0 && m.abs() < 9.0e18) {
                (Some(i), true) => i % (m as i64) == 0,
                _ => is_json_integer(n / m),
            };
            if !ok {
                let msg = format!(
                    "{} in body should be a multiple of {}",
                    shown(path),
                    bound(m, int_data)
                );
                out.push(invalid(path, v, &msg));
            }
        }
    }
    if let Some(max) = s.maximum {
        let (bad, word) = if s.exclusive_maximum {
            (n >= max, "less than")
        } else {
            (n > max, "less than or equal to")
        };
        if bad {
            let msg = format!(
                "{} in body should be {word} {}",
                shown(path),
                bound(max, int_data)
            );
            out.push(invalid(path, v, &msg));
        }
    }
    if let Some(min) = s.minimum {
        let (bad, word) = if s.exclusive_minimum {
            (n <= min, "greater than")
        } else {
            (n < min, "greater than or equal to")
        };
        if bad {
            let msg = format!(
                "{} in body should be {word} {}",
                shown(path),
                bound(min, int_data)
            );
            out.push(invalid(path, v, &msg));
        }
    }
}

/// The item of the old list a new item corresponds to: only map lists
/// correlate, by their key fields.
fn correlated_item<'a>(
    s: &JSONSchemaProps,
    item: &Value,
    old: Option<&'a Value>,
) -> Option<&'a Value> {
    if s.x_list_type.as_deref() != Some("map") || s.x_list_map_keys.is_empty() {
        return None;
    }
    let key_of = |x: &Value| -> Vec<Option<Value>> {
        s.x_list_map_keys
            .iter()
            .map(|k| x.get(k).cloned())
            .collect()
    };
    let want = key_of(item);
    old?.as_array()?.iter().find(|o| key_of(o) == want)
}

fn check_array(
    s: &JSONSchemaProps,
    path: &str,
    a: &[Value],
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    if let Some(SchemaOrArray::Schema(items)) = s.items.as_ref() {
        for (i, x) in a.iter().enumerate() {
            let old_item = correlated_item(s, x, old);
            node(items, &format!("{path}.{i}"), x, old_item, out);
        }
    }
    let size = a.len() as i64;
    if let Some(min) = s.min_items {
        if size < min {
            let msg = format!("{} in body should have at least {min} items", shown(path));
            out.push(invalid(path, &Value::from(size), &msg));
        }
    }
    if let Some(max) = s.max_items {
        if size > max {
            out.push(too_many(path, size, max));
        }
    }
    if s.unique_items {
        let dup = a
            .iter()
            .enumerate()
            .any(|(i, x)| a[..i].iter().any(|y| json_equal(x, y)));
        if dup {
            let msg = format!("{} in body shouldn't contain duplicates", shown(path));
            out.push(invalid_str(path, "", &msg));
        }
    }
}

fn check_object(
    s: &JSONSchemaProps,
    path: &str,
    m: &Map<String, Value>,
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    let old_of = |k: &str| old.and_then(|o| o.get(k));
    // A wrong number of properties is the only error reported for the object.
    let size = m.len() as i64;
    if let Some(min) = s.min_properties {
        if size < min {
            let msg = format!(
                "{} in body should have at least {min} properties",
                shown(path)
            );
            out.push(invalid(path, &Value::from(size), &msg));
            return;
        }
    }
    if let Some(max) = s.max_properties {
        if size > max {
            out.push(too_many(path, size, max));
            return;
        }
    }
    match s.additional_properties.as_ref() {
        Some(SchemaOrBool::Bool(false)) => {
            for k in m.keys() {
                if !s.properties.contains_key(k) {
                    let msg = format!("{path}.{k} in body is a forbidden property");
                    out.push(invalid_str(path, k, &msg));
                }
            }
        }
        Some(SchemaOrBool::Schema(ap)) => {
            for (k, x) in m {
                if !s.properties.contains_key(k) {
                    // kube-openapi names these `path.key` even at the root.
                    node(ap, &format!("{path}.{k}"), x, old_of(k), out);
                }
            }
        }
        _ => {}
    }
    for (k, ps) in &s.properties {
        if let Some(x) = m.get(k) {
            node(ps, &child(path, k), x, old_of(k), out);
        }
    }
    for r in &s.required {
        if !m.contains_key(r) {
            out.push(required(&child(path, r), ""));
        }
    }
}

/// kube-openapi's composite errors carry no field; kube reports them at the
/// validation's base path, which is nil (`<nil>`) for a whole resource.
pub(crate) const NIL_PATH: &str = "<nil>";

fn composite(msg: String) -> StatusCause {
    invalid_str(NIL_PATH, "", &msg)
}

fn check_junctors(
    s: &JSONSchemaProps,
    path: &str,
    v: &Value,
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    let quoted = go_quote(path);
    if !s.any_of.is_empty() {
        let mut any_valid = false;
        let mut best: Option<Vec<StatusCause>> = None;
        for sub in &s.any_of {
            let mut r = Vec::new();
            node(sub, path, v, old, &mut r);
            if r.is_empty() {
                any_valid = true;
                break;
            } else if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if !any_valid {
            out.push(composite(format!(
                "{quoted} must validate at least one schema (anyOf)"
            )));
            out.extend(best.unwrap_or_default());
        }
    }
    if !s.one_of.is_empty() {
        let mut valid = 0;
        let mut best: Option<Vec<StatusCause>> = None;
        for sub in &s.one_of {
            let mut r = Vec::new();
            node(sub, path, v, old, &mut r);
            if r.is_empty() {
                valid += 1;
            } else if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if valid != 1 {
            let extra = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            out.push(composite(format!(
                "{quoted} must validate one and only one schema (oneOf). {extra}"
            )));
            if valid == 0 {
                out.extend(best.unwrap_or_default());
            }
        }
    }
    if !s.all_of.is_empty() {
        let mut valid = 0;
        for sub in &s.all_of {
            let mut r = Vec::new();
            node(sub, path, v, old, &mut r);
            if r.is_empty() {
                valid += 1;
            }
            out.extend(r);
        }
        if valid != s.all_of.len() {
            let extra = if valid == 0 { ". None validated" } else { "" };
            out.push(composite(format!(
                "{quoted} must validate all the schemas (allOf){extra}"
            )));
        }
    }
    if let Some(not) = &s.not {
        let mut r = Vec::new();
        node(not, path, v, old, &mut r);
        if r.is_empty() {
            out.push(composite(format!(
                "{quoted} must not validate the schema (not)"
            )));
        }
    }
}

/// One schema node against one value (kube-openapi's validator order: type,
/// junctors, string, format, number, array, enum, object).
fn node(
    s: &JSONSchemaProps,
    path: &str,
    v: &Value,
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    if old.is_some_and(|o| json_equal(o, v)) {
        return;
    }
    if v.is_null() {
        check_type(s, path, v, out);
        check_enum(s, path, v, out);
        return;
    }
    check_type(s, path, v, out);
    check_junctors(s, path, v, old, out);
    match v {
        Value::String(x) => check_string(s, path, x, out),
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                check_number(s, path, v, f, out);
            }
        }
        Value::Array(a) => check_array(s, path, a, old, out),
        _ => {}
    }
    check_enum(s, path, v, out);
    if let Value::Object(m) = v {
        check_object(s, path, m, old, out);
    }
}

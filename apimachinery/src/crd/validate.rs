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
use super::types::{
    AdditionalProperties, JSONSchemaProps, NestedValueValidation, SchemaOrArray, SchemaOrBool,
    Structural, ValueValidation,
};
use super::{
    child, formats, go_float, invalid, invalid_str, not_supported, required, too_long, too_many,
    type_invalid,
};
use crate::validation::go_quote;
use crate::StatusCause;
use std::collections::BTreeMap;

/// Validates `value` (a whole custom resource, or any value at the root of
/// `schema`) and returns kube's field errors. kube converts the structural
/// schema back to OpenAPI (`ToKubeOpenAPI`) to validate; this walks the
/// structural form itself, which reads the same, so no second copy of the
/// schema is made.
pub fn validate(schema: &Structural, value: &Value) -> Vec<StatusCause> {
    validate_with(schema, value, None)
}

/// [`validate`] on update, with kube's validation ratcheting: values equal
/// to those of `old` pass the OpenAPI validation whatever they are (list
/// types and embedded metadata are still checked).
pub fn validate_update(schema: &Structural, value: &Value, old: &Value) -> Vec<StatusCause> {
    validate_with(schema, value, Some(old))
}

fn validate_with(schema: &Structural, value: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = openapi_errors(schema, value, old);
    list_types(schema, value, "", &mut out);
    embedded_meta(schema, value, "", true, &mut out);
    out
}

/// A structural schema ready to validate many objects (what [`validate`]
/// does); the one form of the schema it keeps.
#[derive(Debug, Clone)]
pub struct SchemaValidator {
    schema: Structural,
}

impl SchemaValidator {
    pub fn new(schema: Structural) -> SchemaValidator {
        SchemaValidator { schema }
    }

    pub fn schema(&self) -> &Structural {
        &self.schema
    }

    pub fn validate(&self, value: &Value) -> Vec<StatusCause> {
        validate_with(&self.schema, value, None)
    }

    /// [`validate_update`] with this schema.
    pub fn validate_update(&self, value: &Value, old: &Value) -> Vec<StatusCause> {
        validate_with(&self.schema, value, Some(old))
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
    openapi_errors(schema, value, old)
}

/// The OpenAPI value validation from either form of a schema.
fn openapi_errors<N: Node>(schema: &N, value: &Value, old: Option<&Value>) -> Vec<StatusCause> {
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
    out = openapi_errors(schema, value, None);
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

/// The junctor subschemas of a node: as written in both forms (a
/// structural node keeps each junctor's original node).
#[derive(Clone, Copy)]
enum Subs<'a> {
    Props(&'a [JSONSchemaProps]),
    Nested(&'a [NestedValueValidation]),
}

impl<'a> Subs<'a> {
    fn is_empty(self) -> bool {
        self.len() == 0
    }

    fn len(self) -> usize {
        match self {
            Subs::Props(p) => p.len(),
            Subs::Nested(n) => n.len(),
        }
    }

    fn iter(self) -> impl Iterator<Item = &'a JSONSchemaProps> {
        let (p, n) = match self {
            Subs::Props(p) => (p, &[][..]),
            Subs::Nested(n) => (&[][..], n),
        };
        p.iter().chain(n.iter().map(|n| &*n.props))
    }
}

/// `additionalProperties` of a node, in either form.
enum Additional<'a, N> {
    Absent,
    Forbidden,
    Schema(&'a N),
}

/// One schema node the value validation walks: a structural node (what a
/// custom resource's row keeps) or a node as written (under a junctor, and
/// [`validate_props`]). Both answer the same, so the errors are the same.
trait Node: Sized {
    fn type_(&self) -> &str;
    fn int_or_string(&self) -> bool;
    fn nullable(&self) -> bool;
    fn format(&self) -> &str;
    fn enum_(&self) -> &[Value];
    fn max_length(&self) -> Option<i64>;
    fn min_length(&self) -> Option<i64>;
    fn pattern(&self) -> &str;
    fn multiple_of(&self) -> Option<f64>;
    fn maximum(&self) -> (Option<f64>, bool);
    fn minimum(&self) -> (Option<f64>, bool);
    fn max_items(&self) -> Option<i64>;
    fn min_items(&self) -> Option<i64>;
    fn unique_items(&self) -> bool;
    fn max_properties(&self) -> Option<i64>;
    fn min_properties(&self) -> Option<i64>;
    fn required(&self) -> &[String];
    fn list_type(&self) -> Option<&str>;
    fn list_map_keys(&self) -> &[String];
    fn items(&self) -> Option<&Self>;
    fn properties(&self) -> &BTreeMap<String, Self>;
    fn additional(&self) -> Additional<'_, Self>;
    fn any_of(&self) -> Subs<'_>;
    fn one_of(&self) -> Subs<'_>;
    fn all_of(&self) -> Subs<'_>;
    fn not(&self) -> Option<&JSONSchemaProps>;
}

impl Node for JSONSchemaProps {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn int_or_string(&self) -> bool {
        self.x_int_or_string
    }
    fn nullable(&self) -> bool {
        self.nullable
    }
    fn format(&self) -> &str {
        &self.format
    }
    fn enum_(&self) -> &[Value] {
        &self.enum_
    }
    fn max_length(&self) -> Option<i64> {
        self.max_length
    }
    fn min_length(&self) -> Option<i64> {
        self.min_length
    }
    fn pattern(&self) -> &str {
        &self.pattern
    }
    fn multiple_of(&self) -> Option<f64> {
        self.multiple_of
    }
    fn maximum(&self) -> (Option<f64>, bool) {
        (self.maximum, self.exclusive_maximum)
    }
    fn minimum(&self) -> (Option<f64>, bool) {
        (self.minimum, self.exclusive_minimum)
    }
    fn max_items(&self) -> Option<i64> {
        self.max_items
    }
    fn min_items(&self) -> Option<i64> {
        self.min_items
    }
    fn unique_items(&self) -> bool {
        self.unique_items
    }
    fn max_properties(&self) -> Option<i64> {
        self.max_properties
    }
    fn min_properties(&self) -> Option<i64> {
        self.min_properties
    }
    fn required(&self) -> &[String] {
        &self.required
    }
    fn list_type(&self) -> Option<&str> {
        self.x_list_type.as_deref()
    }
    fn list_map_keys(&self) -> &[String] {
        &self.x_list_map_keys
    }
    fn items(&self) -> Option<&Self> {
        match self.items.as_ref() {
            Some(SchemaOrArray::Schema(s)) => Some(s),
            _ => None,
        }
    }
    fn properties(&self) -> &BTreeMap<String, Self> {
        &self.properties
    }
    fn additional(&self) -> Additional<'_, Self> {
        match self.additional_properties.as_ref() {
            Some(SchemaOrBool::Bool(false)) => Additional::Forbidden,
            Some(SchemaOrBool::Schema(s)) => Additional::Schema(s),
            _ => Additional::Absent,
        }
    }
    fn any_of(&self) -> Subs<'_> {
        Subs::Props(&self.any_of)
    }
    fn one_of(&self) -> Subs<'_> {
        Subs::Props(&self.one_of)
    }
    fn all_of(&self) -> Subs<'_> {
        Subs::Props(&self.all_of)
    }
    fn not(&self) -> Option<&JSONSchemaProps> {
        self.not.as_deref()
    }
}

/// The value validations of a structural node that has none.
static NO_LIMITS: ValueValidation = ValueValidation {
    format: String::new(),
    maximum: None,
    exclusive_maximum: false,
    minimum: None,
    exclusive_minimum: false,
    max_length: None,
    min_length: None,
    pattern: String::new(),
    max_items: None,
    min_items: None,
    unique_items: false,
    multiple_of: None,
    enum_: Vec::new(),
    max_properties: None,
    min_properties: None,
    required: Vec::new(),
    all_of: Vec::new(),
    one_of: Vec::new(),
    any_of: Vec::new(),
    not: None,
};

/// A structural node reads as kube's `ToKubeOpenAPI` would write it.
impl Node for Structural {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn int_or_string(&self) -> bool {
        self.extensions.int_or_string
    }
    fn nullable(&self) -> bool {
        self.nullable
    }
    fn format(&self) -> &str {
        &vv(self).format
    }
    fn enum_(&self) -> &[Value] {
        &vv(self).enum_
    }
    fn max_length(&self) -> Option<i64> {
        vv(self).max_length
    }
    fn min_length(&self) -> Option<i64> {
        vv(self).min_length
    }
    fn pattern(&self) -> &str {
        &vv(self).pattern
    }
    fn multiple_of(&self) -> Option<f64> {
        vv(self).multiple_of
    }
    fn maximum(&self) -> (Option<f64>, bool) {
        (vv(self).maximum, vv(self).exclusive_maximum)
    }
    fn minimum(&self) -> (Option<f64>, bool) {
        (vv(self).minimum, vv(self).exclusive_minimum)
    }
    fn max_items(&self) -> Option<i64> {
        vv(self).max_items
    }
    fn min_items(&self) -> Option<i64> {
        vv(self).min_items
    }
    fn unique_items(&self) -> bool {
        vv(self).unique_items
    }
    fn max_properties(&self) -> Option<i64> {
        vv(self).max_properties
    }
    fn min_properties(&self) -> Option<i64> {
        vv(self).min_properties
    }
    fn required(&self) -> &[String] {
        &vv(self).required
    }
    fn list_type(&self) -> Option<&str> {
        self.extensions.list_type.as_deref()
    }
    fn list_map_keys(&self) -> &[String] {
        &self.extensions.list_map_keys
    }
    fn items(&self) -> Option<&Self> {
        self.items.as_deref()
    }
    fn properties(&self) -> &BTreeMap<String, Self> {
        &self.properties
    }
    fn additional(&self) -> Additional<'_, Self> {
        match self.additional_properties.as_ref() {
            Some(AdditionalProperties::Bool(false)) => Additional::Forbidden,
            Some(AdditionalProperties::Schema(s)) => Additional::Schema(s),
            _ => Additional::Absent,
        }
    }
    fn any_of(&self) -> Subs<'_> {
        Subs::Nested(&vv(self).any_of)
    }
    fn one_of(&self) -> Subs<'_> {
        Subs::Nested(&vv(self).one_of)
    }
    fn all_of(&self) -> Subs<'_> {
        Subs::Nested(&vv(self).all_of)
    }
    fn not(&self) -> Option<&JSONSchemaProps> {
        vv(self).not.as_deref().map(|n| &*n.props)
    }
}

fn vv(s: &Structural) -> &ValueValidation {
    s.value_validation.as_ref().unwrap_or(&NO_LIMITS)
}

/// The name kube-openapi puts in front of `in body` (empty at the root).
fn shown(path: &str) -> &str {
    path
}

fn schema_types<N: Node>(s: &N) -> Vec<&str> {
    if s.int_or_string() {
        vec!["integer", "string"]
    } else if s.type_().is_empty() {
        Vec::new()
    } else {
        vec![s.type_()]
    }
}

fn effective_format<N: Node>(s: &N) -> &str {
    formats::effective_of(s.type_(), s.format(), s.int_or_string())
}

/// kube-openapi's type validator, formats included: kube keeps only the
/// formats it supports, and a format relaxes or changes the type check.
fn check_type<N: Node>(s: &N, path: &str, v: &Value, out: &mut Vec<StatusCause>) {
    let types = schema_types(s);
    let format = effective_format(s);
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
        if !types.is_empty() && !s.nullable() {
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

fn check_enum<N: Node>(s: &N, path: &str, v: &Value, out: &mut Vec<StatusCause>) {
    let enum_ = s.enum_();
    if enum_.is_empty() || enum_.iter().any(|e| json_equal(e, v)) {
        return;
    }
    let values: Vec<String> = enum_
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

fn check_string<N: Node>(s: &N, path: &str, v: &str, out: &mut Vec<StatusCause>) {
    let len = v.chars().count() as i64;
    if let Some(max) = s.max_length() {
        if len > max {
            out.push(too_long(path, max));
        }
    }
    if let Some(min) = s.min_length() {
        if len < min {
            let msg = format!(
                "{} in body should be at least {min} chars long",
                shown(path)
            );
            out.push(invalid_str(path, v, &msg));
        }
    }
    let pattern = s.pattern();
    if !pattern.is_empty() {
        if let Some(re) = compiled(pattern) {
            if !re.is_match(v) {
                let msg = format!("{} in body should match '{}'", shown(path), pattern);
                out.push(invalid_str(path, v, &msg));
            }
        }
    }
    let format = effective_format(s);
    if !format.is_empty() && !formats::check(format, v) {
        let msg = format!(
            "{} in body must be of type {}: {}",
            shown(path),
            s.format(),
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

fn check_number<N: Node>(s: &N, path: &str, v: &Value, n: f64, out: &mut Vec<StatusCause>) {
    let int_data = v.as_i64().is_some() || v.as_u64().is_some();
    if let Some(m) = s.multiple_of() {
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
    if let (Some(max), exclusive) = s.maximum() {
        let (bad, word) = if exclusive {
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
    if let (Some(min), exclusive) = s.minimum() {
        let (bad, word) = if exclusive {
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
fn correlated_item<'a, N: Node>(s: &N, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    if s.list_type() != Some("map") || s.list_map_keys().is_empty() {
        return None;
    }
    let key_of = |x: &Value| -> Vec<Option<Value>> {
        s.list_map_keys()
            .iter()
            .map(|k| x.get(k).cloned())
            .collect()
    };
    let want = key_of(item);
    old?.as_array()?.iter().find(|o| key_of(o) == want)
}

fn check_array<N: Node>(
    s: &N,
    path: &str,
    a: &[Value],
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    if let Some(items) = s.items() {
        for (i, x) in a.iter().enumerate() {
            let old_item = correlated_item(s, x, old);
            node(items, &format!("{path}.{i}"), x, old_item, out);
        }
    }
    let size = a.len() as i64;
    if let Some(min) = s.min_items() {
        if size < min {
            let msg = format!("{} in body should have at least {min} items", shown(path));
            out.push(invalid(path, &Value::from(size), &msg));
        }
    }
    if let Some(max) = s.max_items() {
        if size > max {
            out.push(too_many(path, size, max));
        }
    }
    if s.unique_items() {
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

fn check_object<N: Node>(
    s: &N,
    path: &str,
    m: &Map<String, Value>,
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    let old_of = |k: &str| old.and_then(|o| o.get(k));
    // A wrong number of properties is the only error reported for the object.
    let size = m.len() as i64;
    if let Some(min) = s.min_properties() {
        if size < min {
            let msg = format!(
                "{} in body should have at least {min} properties",
                shown(path)
            );
            out.push(invalid(path, &Value::from(size), &msg));
            return;
        }
    }
    if let Some(max) = s.max_properties() {
        if size > max {
            out.push(too_many(path, size, max));
            return;
        }
    }
    let properties = s.properties();
    match s.additional() {
        Additional::Forbidden => {
            for k in m.keys() {
                if !properties.contains_key(k) {
                    let msg = format!("{path}.{k} in body is a forbidden property");
                    out.push(invalid_str(path, k, &msg));
                }
            }
        }
        Additional::Schema(ap) => {
            for (k, x) in m {
                if !properties.contains_key(k) {
                    // kube-openapi names these `path.key` even at the root.
                    node(ap, &format!("{path}.{k}"), x, old_of(k), out);
                }
            }
        }
        Additional::Absent => {}
    }
    for (k, ps) in properties {
        if let Some(x) = m.get(k) {
            node(ps, &child(path, k), x, old_of(k), out);
        }
    }
    for r in s.required() {
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

fn check_junctors<N: Node>(
    s: &N,
    path: &str,
    v: &Value,
    old: Option<&Value>,
    out: &mut Vec<StatusCause>,
) {
    let quoted = go_quote(path);
    if !s.any_of().is_empty() {
        let mut any_valid = false;
        let mut best: Option<Vec<StatusCause>> = None;
        for sub in s.any_of().iter() {
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
    if !s.one_of().is_empty() {
        let mut valid = 0;
        let mut best: Option<Vec<StatusCause>> = None;
        for sub in s.one_of().iter() {
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
    if !s.all_of().is_empty() {
        let mut valid = 0;
        for sub in s.all_of().iter() {
            let mut r = Vec::new();
            node(sub, path, v, old, &mut r);
            if r.is_empty() {
                valid += 1;
            }
            out.extend(r);
        }
        if valid != s.all_of().len() {
            let extra = if valid == 0 { ". None validated" } else { "" };
            out.push(composite(format!(
                "{quoted} must validate all the schemas (allOf){extra}"
            )));
        }
    }
    if let Some(not) = s.not() {
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
fn node<N: Node>(s: &N, path: &str, v: &Value, old: Option<&Value>, out: &mut Vec<StatusCause>) {
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

//! Field validation of request bodies: decoding JSON and YAML with duplicate
//! detection, unknown fields and wrong types against the schema, and the
//! `fieldValidation` policy (`Ignore`, `Warn`, `Strict`).
//!
//! # What kube-apiserver does, and what we reproduce
//!
//! A create or update body goes through the serializer's `Decode`:
//!
//! 1. YAML is converted to JSON (`sigs.k8s.io/yaml`, goyaml v2 with YAML 1.1
//!    scalars: `yes`/`no`/`on`/`off` are booleans, `0755` is octal, maps are
//!    re-marshalled with sorted keys). Syntax errors read
//!    `yaml: line 3: mapping values are not allowed in this context`.
//! 2. The `apiVersion` and `kind` are read with `encoding/json`
//!    (`SimpleMetaFactory.Interpret`); malformed JSON reads
//!    `couldn't get version/kind; json parse error: invalid character 'x'
//!    looking for beginning of value`. A body that is not an object fails
//!    there too. A missing kind or version is defaulted from the endpoint.
//! 3. The body is decoded into the Go type. A value of the wrong type is an
//!    `UnmarshalTypeError` (`json: cannot unmarshal string into Go struct
//!    field DeploymentSpec.spec.replicas of type int32`), which fails the
//!    request whatever the validation level.
//! 4. With `Warn` or `Strict` the decoding is strict: unknown fields
//!    (`unknown field "spec.foo"`) and duplicate fields
//!    (`duplicate field "metadata.name"`; for YAML goyaml's
//!    `line 5: key "name" already set in map`) are collected. `Warn` turns
//!    each into a `Warning` header; `Strict` fails with
//!    `strict decoding error: unknown field "spec.foo", duplicate field "x"`.
//!
//! Any failure of the decode becomes a 400 `BadRequest` through the
//! handlers' `transformDecodeError`: `Deployment in version "v1" cannot be
//! handled as a Deployment: <error>` once the kind is known, else
//! `the object provided is unrecognized (must be of type Deployment):
//! <error> (<first 30 bytes of the body>)`.
//!
//! This module gives the pieces: [`decode_json`] and [`decode_yaml`] (steps
//! 1 and 2, recording duplicates), [`type_errors`] (step 3),
//! [`unknown_fields`] and [`check`] (step 4 and the policy).
//!
//! # Differences from kube-apiserver (documented, deliberate)
//!
//! * Nesting deeper than 128 objects/arrays is refused (serde_json's and
//!   serde_yaml_ng's limit, which keeps every recursive walk of the value
//!   safe); Go allows 10000.
//! * Repeated keys: the last value wins whole (like decoding into a map). Go
//!   merges a repeated object-valued key of a struct field into the earlier
//!   one.
//! * Go type names in type errors come from the OpenAPI definition
//!   (`v1.Container`); named Go types of scalars (`v1.PullPolicy`) show as
//!   their underlying type (`string`).
//! * YAML: a key overriding a merged (`<<`) one is a duplicate, as in
//!   goyaml's strict mode, but keys the merge itself overrides are not; at most
//!   [`MAX_DUPLICATES`] duplicates are recorded, and line numbers are looked
//!   up for a bounded amount of work (past it a duplicate reads
//!   `key "x" already set in map` without its line).

// `Status` is the error type of the API (as in `query` and `media`); the
// handlers turn it into their own error with `?`.
#![allow(clippy::result_large_err)]

mod formats;
pub(crate) mod gofmt;
mod json;
mod strict;
mod types;
mod yaml;

#[cfg(test)]
mod tests;

use crate::schema::TypeRef;
use crate::Status;
use serde_json::Value;

pub use crate::query::FieldValidation as FieldValidationLevel;
pub use gofmt::summarize_body;
pub use strict::{strict_errors, strict_errors_unstructured, unknown_fields, warnings_from};
pub use types::{first_type_error, type_error_message, type_errors, TypeError};

/// At most this many duplicates are recorded per body (kube stops
/// collecting strict errors at 100).
pub const MAX_DUPLICATES: usize = 100;

/// A decoded request body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// The body as JSON. Always an object (a `null` body decodes as `{}`,
    /// as Go decodes `null` into an empty object).
    pub value: Value,
    /// Duplicated fields, in document order, each once, as kube reports
    /// them:
    ///
    /// * JSON bodies: the field path, e.g. `metadata.name` or
    ///   `spec.containers[0].image` (reported as `duplicate field "..."`);
    /// * YAML bodies: goyaml's message, e.g.
    ///   `line 5: key "name" already set in map` (see [`is_yaml_duplicate`]).
    pub duplicates: Vec<String>,
}

/// Whether an entry of [`Decoded::duplicates`] is a YAML duplicate (worded by
/// goyaml) rather than a JSON field path.
pub fn is_yaml_duplicate(entry: &str) -> bool {
    entry.ends_with(" already set in map")
        && (entry.starts_with("line ") || entry.starts_with("key "))
}

/// Decodes a JSON request body, recording duplicate keys (the last value
/// wins, as in kube's non-strict decoding).
pub fn decode_json(body: &[u8]) -> Result<Decoded, DecodeError> {
    json::decode(body)
}

/// Decodes a YAML request body (its first document) into JSON the way
/// `sigs.k8s.io/yaml` does, recording duplicate keys with their line.
pub fn decode_yaml(body: &[u8]) -> Result<Decoded, DecodeError> {
    yaml::decode(body)
}

/// A body that cannot be decoded. `Display` is the error kube's decoder
/// gives (e.g. `couldn't get version/kind; json parse error: unexpected end
/// of JSON input`); [`DecodeError::to_status`] wraps it the way the
/// handlers do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    message: String,
}

impl DecodeError {
    /// A JSON syntax error, as reported by `Interpret`.
    fn parse(go_message: String) -> Self {
        DecodeError {
            message: format!("couldn't get version/kind; json parse error: {go_message}"),
        }
    }

    /// An error reported as is (YAML conversion, group-version parsing).
    fn unrecognized(message: String) -> Self {
        DecodeError { message }
    }

    /// The message, as kube's decoder words it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The 400 kube-apiserver answers: `the object provided is unrecognized
    /// (must be of type <kind>): <error> (<summary of the body>)`, where
    /// `kind` is the kind the endpoint serves.
    pub fn to_status(&self, kind: &str, body: &[u8]) -> Status {
        Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {} ({})",
            self.message,
            summarize_body(body)
        ))
    }
}

/// `Object 'Kind' is missing in '<body>'` (`runtime.NewMissingKindErr`), for
/// decoders that have no kind to default to.
pub fn missing_kind_message(body: &[u8]) -> String {
    format!(
        "Object 'Kind' is missing in '{}'",
        String::from_utf8_lossy(body)
    )
}

/// `Object 'apiVersion' is missing in '<body>'` (`runtime.NewMissingVersionErr`).
pub fn missing_version_message(body: &[u8]) -> String {
    format!(
        "Object 'apiVersion' is missing in '{}'",
        String::from_utf8_lossy(body)
    )
}

/// A group, version and kind, as read from a body or an endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    /// The `apiVersion` and `kind` of a decoded body, read the way
    /// `encoding/json` fills `TypeMeta` (keys match case-insensitively; the
    /// last one wins). Empty when absent.
    pub fn of(value: &Value) -> Self {
        let (api_version, kind) = type_meta(value);
        let (group, version) = parse_group_version(&api_version).unwrap_or_default();
        GroupVersionKind {
            group,
            version,
            kind,
        }
    }

    /// kube's `gvkWithDefaults`: a missing kind comes from `defaults`; a
    /// missing version too, with the group when that is missing as well.
    pub fn with_defaults(mut self, defaults: &GroupVersionKind) -> Self {
        if self.kind.is_empty() {
            self.kind = defaults.kind.clone();
        }
        if self.version.is_empty() && self.group.is_empty() {
            self.group = defaults.group.clone();
            self.version = defaults.version.clone();
        }
        if self.version.is_empty() && self.group == defaults.group {
            self.version = defaults.version.clone();
        }
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// `schema.ParseGroupVersion`: `""` and `"/"` are empty, `v1` is the core
/// group, `apps/v1` a named one; more slashes are an error worded like
/// kube's.
pub fn parse_group_version(api_version: &str) -> Result<(String, String), String> {
    if api_version.is_empty() || api_version == "/" {
        return Ok((String::new(), String::new()));
    }
    match api_version.matches('/').count() {
        0 => Ok((String::new(), api_version.to_string())),
        1 => {
            let (g, v) = api_version.split_once('/').unwrap_or_default();
            Ok((g.to_string(), v.to_string()))
        }
        _ => Err(format!("unexpected GroupVersion string: {api_version}")),
    }
}

/// The Go type of the struct `Interpret` decodes into, as `reflect` prints it.
const FIND_KIND_TYPE: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// What `encoding/json` calls a JSON value in an `UnmarshalTypeError`.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `apiVersion` and `kind` as `encoding/json` fills `TypeMeta`.
fn type_meta(value: &Value) -> (String, String) {
    let mut api_version = String::new();
    let mut kind = String::new();
    if let Some(obj) = value.as_object() {
        for (k, v) in obj {
            let slot = if k.eq_ignore_ascii_case("apiVersion") {
                &mut api_version
            } else if k.eq_ignore_ascii_case("kind") {
                &mut kind
            } else {
                continue;
            };
            if let Some(s) = v.as_str() {
                *slot = s.to_string();
            }
        }
    }
    (api_version, kind)
}

/// Step 2 of the decode: the body must be an object (or `null`) whose
/// `apiVersion` and `kind`, when present, are strings, and whose
/// `apiVersion` parses.
fn interpret(value: Value) -> Result<Value, DecodeError> {
    let obj = match value {
        Value::Null => return Ok(Value::Object(serde_json::Map::new())),
        Value::Object(obj) => obj,
        other => {
            return Err(DecodeError::parse(format!(
                "json: cannot unmarshal {} into Go value of type {FIND_KIND_TYPE}",
                json_kind(&other)
            )))
        }
    };
    for (k, v) in &obj {
        let field = if k.eq_ignore_ascii_case("apiVersion") {
            "apiVersion"
        } else if k.eq_ignore_ascii_case("kind") {
            "kind"
        } else {
            continue;
        };
        if !matches!(v, Value::String(_) | Value::Null) {
            return Err(DecodeError::parse(format!(
                "json: cannot unmarshal {} into Go struct field .{field} of type string",
                json_kind(v)
            )));
        }
    }
    let value = Value::Object(obj);
    let (api_version, _) = type_meta(&value);
    parse_group_version(&api_version).map_err(DecodeError::unrecognized)?;
    Ok(value)
}

/// The group-version-kind kube reports a decode failure under: the body's,
/// defaulted from the schema type's. `None` when neither names a kind.
fn reported_gvk(ty: Option<TypeRef<'_>>, value: &Value) -> Option<(GroupVersionKind, String)> {
    let declared = ty
        .and_then(|t| t.group_version_kinds().first().copied())
        .map(|(group, version, kind)| GroupVersionKind {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        })
        .unwrap_or_default();
    let gvk = GroupVersionKind::of(value).with_defaults(&declared);
    if gvk.kind.is_empty() {
        return None;
    }
    let target = if declared.kind.is_empty() {
        gvk.kind.clone()
    } else {
        declared.kind
    };
    Some((gvk, target))
}

/// kube's 400 for a body whose kind is known but which cannot be decoded:
/// `<kind> in version "<version>" cannot be handled as a <target>: <error>`.
pub fn cannot_be_handled(kind: &str, version: &str, target_kind: &str, error: &str) -> Status {
    Status::bad_request(format!(
        "{kind} in version {} cannot be handled as a {target_kind}: {error}",
        gofmt::quote(version)
    ))
}

fn decode_failure(ty: Option<TypeRef<'_>>, value: &Value, error: &str) -> Status {
    match reported_gvk(ty, value) {
        Some((gvk, target)) => cannot_be_handled(&gvk.kind, &gvk.version, &target, error),
        None => Status::bad_request(error.to_string()),
    }
}

/// `strict decoding error: <item>, <item>` (`runtime.NewStrictDecodingError`).
pub fn strict_decoding_error(items: &[String]) -> String {
    format!("strict decoding error: {}", items.join(", "))
}

/// Applies the field validation level to a create or update body of a
/// built-in (typed) kind, as kube-apiserver's create and update handlers do:
///
/// * values of the wrong type fail the request whatever the level (400,
///   `Deployment in version "v1" cannot be handled as a Deployment: json:
///   cannot unmarshal ...`), as the Go decoder reports them before any
///   strict error;
/// * `Ignore`: nothing else is checked;
/// * `Warn` (the default): one warning per unknown or duplicate field, in
///   kube's words (`unknown field "spec.foo"`, `duplicate field
///   "metadata.name"`, `line 5: key "name" already set in map`);
/// * `Strict`: a 400 listing them all (`... cannot be handled as a
///   Deployment: strict decoding error: unknown field "spec.foo", ...`).
///
/// `ty` is the schema of the kind; without one only duplicates are
/// reported. For custom resources and patches use [`check_unstructured`].
pub fn check(
    level: FieldValidationLevel,
    ty: Option<TypeRef<'_>>,
    decoded: &Decoded,
) -> Result<Vec<String>, Status> {
    if let Some(t) = ty {
        if let Some(err) = first_type_error(t, &decoded.value) {
            return Err(decode_failure(ty, &decoded.value, &err.message));
        }
    }
    if level == FieldValidationLevel::Ignore {
        return Ok(Vec::new());
    }
    apply_level(level, ty, decoded, strict_errors(ty, decoded))
}

/// [`check`] for bodies kube decodes into a map before checking them against
/// a schema: custom resources, and the patched object of a JSON or merge
/// patch (with the duplicates of the patch document). Every duplicate is
/// reported, even of an unknown field, before the unknown fields, which come
/// in sorted order. No Go type check is made: a custom resource's types are
/// checked by its schema validation (422), and a patched built-in object
/// should go through [`type_errors`].
pub fn check_unstructured(
    level: FieldValidationLevel,
    ty: Option<TypeRef<'_>>,
    decoded: &Decoded,
) -> Result<Vec<String>, Status> {
    if level == FieldValidationLevel::Ignore {
        return Ok(Vec::new());
    }
    apply_level(level, ty, decoded, strict_errors_unstructured(ty, decoded))
}

fn apply_level(
    level: FieldValidationLevel,
    ty: Option<TypeRef<'_>>,
    decoded: &Decoded,
    items: Vec<String>,
) -> Result<Vec<String>, Status> {
    match level {
        FieldValidationLevel::Ignore => Ok(Vec::new()),
        FieldValidationLevel::Warn => Ok(warnings_from(&items)),
        FieldValidationLevel::Strict if items.is_empty() => Ok(Vec::new()),
        FieldValidationLevel::Strict => Err(decode_failure(
            ty,
            &decoded.value,
            &strict_decoding_error(&items),
        )),
    }
}

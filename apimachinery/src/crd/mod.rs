//! `apiextensions.k8s.io/v1` CustomResourceDefinitions without I/O: the schema
//! types, the structural form, CRD validation, and what the server does with
//! a custom resource's schema (validation, pruning, defaulting), worded as
//! kube-apiserver words it.
//!
//! * [`types`]: `JSONSchemaProps` (serde) and [`Structural`].
//! * [`validate_crd`]: a CRD object on create/update (names, versions,
//!   schemas, structural rules, subresources, printer columns, selectable
//!   fields, conversion, stored versions).
//! * [`validate`]: a custom resource against its schema (OpenAPI value
//!   validation, list types, embedded resources).
//! * [`validate_update`]: the same on update, with kube's validation
//!   ratcheting (unchanged values pass).
//! * [`validate_scale`]: the replicas and selector a scale subresource
//!   reads from a custom resource.
//! * [`prune`]: drops unknown fields, returning their paths as kube reports
//!   them to `fieldValidation=Warn/Strict` (`unknown field "spec.foo"`).
//! * [`default`]: applies `default`s ([`prune_nulls`] first drops the
//!   non-nullable `null`s that have no default; [`prune_defaults`] prunes
//!   the defaults of a schema before it is used).
//! * [`validation_rules`]: the nodes carrying `x-kubernetes-validations`,
//!   for a CEL engine to evaluate.
//!
//! Errors are [`StatusCause`]s: `field` is kube's field path, `message` is
//! the body of the `field.Error` (`Invalid value: ...`, `Required value`...).
//!
//! # Differences from kube-apiserver (documented, deliberate)
//!
//! * Bad values that are Go structs in kube (a whole `spec.versions` list)
//!   are shown as JSON; maps and lists of a custom resource are shown as
//!   Go's `%#v` would print them.
//! * Formats: kube's set (with `quantity`, `k8s-short-name`,
//!   `k8s-long-name`); numeric formats are not range checked (kube does not
//!   either). `email` and `hostname` are checked with patterns, not Go's
//!   parsers.
//! * CEL rules are not compiled or evaluated here; their cost is not
//!   estimated, and their use of `oldSelf` is read from the rule text.
//! * Conversion webhooks: URL and service are checked as kube does, the
//!   `caBundle` is not parsed.

mod defaulting;
mod definition;
mod formats;
mod listtype;
mod objectmeta;
mod prune;
mod scale;
mod structural;
pub mod types;
mod validate;
mod walk;

#[cfg(test)]
mod tests;

pub use defaulting::{default, prune_defaults, prune_nulls};
pub use definition::{schema_field_path, validate_crd};
pub use prune::{prune, unknown_field_message};
pub use scale::validate_scale;
pub use structural::validate_structural;
pub use types::{JSONSchemaProps, Structural, ValidationRule};
pub use validate::{
    validate, validate_props, validate_props_update, validate_update, SchemaValidator,
};
pub use walk::{for_each_rule_value, valid_field_path, validation_rules, RuleNode};

use crate::status::cause;
use crate::validation::go_quote;
use crate::StatusCause;
use serde_json::Value;

// ---------------------------------------------------------------------------
// Field paths, built like kube's `field.Path`.

/// `Child`: `a.b` (or `b` at the root).
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `Key`: `a[k]`.
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// `Index`: `a[3]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

// ---------------------------------------------------------------------------
// Go formatting of bad values.

/// Go's `%v` of a float64: the field validation's formatter.
pub(crate) use crate::fieldvalidation::gofmt::format_float_g as go_float;

/// A JSON number as Go prints the decoded value (`int64` or `float64`).
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `%#v` of an unstructured value.
fn go_syntax(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("interface {}(nil)"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => out.push_str(&go_quote(s)),
        Value::Array(a) => {
            out.push_str("[]interface {}{");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                go_syntax(x, out);
            }
            out.push('}');
        }
        Value::Object(m) => {
            out.push_str("map[string]interface {}{");
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&go_quote(k));
                out.push(':');
                go_syntax(&m[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// How a `field.Error` prints its bad value.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        other => {
            let mut s = String::new();
            go_syntax(other, &mut s);
            s
        }
    }
}

// ---------------------------------------------------------------------------
// Causes (kube's `field.*` constructors).

fn body(prefix: &str, value: &Value, detail: &str) -> String {
    let mut s = format!("{prefix}: {}", go_value(value));
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

pub(crate) fn invalid(field: &str, value: &Value, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_INVALID,
        body("Invalid value", value, detail),
        field,
    )
}

pub(crate) fn invalid_str(field: &str, value: &str, detail: &str) -> StatusCause {
    invalid(field, &Value::String(value.to_string()), detail)
}

pub(crate) fn type_invalid(field: &str, value: &Value, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_TYPE_INVALID,
        body("Invalid value", value, detail),
        field,
    )
}

pub(crate) fn required(field: &str, detail: &str) -> StatusCause {
    crate::validation::required(field, detail)
}

pub(crate) fn forbidden(field: &str, detail: &str) -> StatusCause {
    crate::validation::forbidden(field, detail)
}

pub(crate) fn duplicate(field: &str, value: &Value) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_DUPLICATE,
        format!("Duplicate value: {}", go_value(value)),
        field,
    )
}

pub(crate) fn not_supported(field: &str, value: &Value, valid: &[String]) -> StatusCause {
    let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
    let detail = if valid.is_empty() {
        String::new()
    } else {
        format!("supported values: {}", quoted.join(", "))
    };
    StatusCause::new(
        cause::FIELD_VALUE_NOT_SUPPORTED,
        body("Unsupported value", value, &detail),
        field,
    )
}

pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> StatusCause {
    // kube pluralizes only above one ("at most 0 item").
    let unit = if max > 1 { "items" } else { "item" };
    StatusCause::new(
        "FieldValueTooMany",
        format!("Too many: {actual}: must have at most {max} {unit}"),
        field,
    )
}

pub(crate) fn too_long(field: &str, max: i64) -> StatusCause {
    crate::validation::too_long(field, usize::try_from(max).unwrap_or(0))
}

#[cfg(test)]
mod fmt_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go() {
        for (f, s) in [
            (1.5, "1.5"),
            (100.0, "100"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.25, "-2.25"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(go_float(f), s, "{f}");
        }
    }

    #[test]
    fn values_print_like_field_errors() {
        assert_eq!(go_value(&json!("a")), "\"a\"");
        assert_eq!(go_value(&json!(3)), "3");
        assert_eq!(go_value(&Value::Null), "null");
        assert_eq!(
            go_value(&json!({"b": 1, "a": "x"})),
            "map[string]interface {}{\"a\":\"x\", \"b\":1}"
        );
        assert_eq!(go_value(&json!([1, "a"])), "[]interface {}{1, \"a\"}");
    }
}

//! Values of the wrong type, found and worded the way Go's typed JSON decoding
//! in kube-apiserver finds and words them.

use super::formats::{check_base64, parse_quantity, parse_time, QUANTITY_FORMAT};
use super::gofmt::quote;
use crate::schema::{Shape, TypeRef};
use serde_json::{Number, Value};
use std::fmt::{self, Write as _};

/// At most this many errors are collected.
const MAX_ERRORS: usize = 100;
/// Walks stop descending this deep.
const MAX_DEPTH: usize = 512;

/// A value the Go type of its field cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// Where, in strict-decoding notation: `spec.replicas`,
    /// `spec.template.spec.containers[0].image`.
    pub path: String,
    /// The error as Go's decoder words it, e.g. `json: cannot unmarshal
    /// string into Go struct field DeploymentSpec.spec.replicas of type
    /// int32` (Go names the innermost struct and the struct fields from the
    /// root, without indices or map keys), `illegal base64 data at input
    /// byte 4`, `parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot
    /// parse "x" as "2006"`, or a quantity parse error.
    pub message: String,
    /// Whether Go's decoder stops here: errors of types with their own
    /// unmarshaller (`IntOrString`, `Time`, `Quantity`) end the decoding at
    /// once; the others are remembered and the decoding goes on, the first
    /// one being reported at the end.
    pub fatal: bool,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every value of `value` whose JSON type (or format) does not fit the
/// schema, as Go's typed decoding of a built-in kind meets them. The first
/// element is the one kube-apiserver reports: the first fatal error if
/// there is one (Go stops there, so nothing after it is looked at), else
/// the first error in document order. `null` is accepted anywhere (it means
/// unset); untyped subtrees accept anything; fields unknown to the schema
/// are not looked into.
///
/// Custom resources are decoded into maps, so they have no such errors;
/// their types are checked by schema validation.
pub fn type_errors(ty: TypeRef<'_>, value: &Value) -> Vec<TypeError> {
    let mut walker = TypeWalker::default();
    walker.walk(ty, value, 0);
    let mut errors = walker.errors;
    if let Some(fatal) = walker.fatal {
        errors.insert(0, fatal);
    }
    errors
}

/// The error kube-apiserver reports for `value`, if any (see
/// [`type_errors`]).
pub fn first_type_error(ty: TypeRef<'_>, value: &Value) -> Option<TypeError> {
    type_errors(ty, value).into_iter().next()
}

/// `<kind> in version "<version>" cannot be handled as a <kind>: <error>`,
/// the message of kube's 400 for a body that does not decode into its type.
pub fn type_error_message(kind: &str, version: &str, err: &TypeError) -> String {
    format!(
        "{kind} in version {} cannot be handled as a {kind}: {}",
        quote(version),
        err.message
    )
}

#[derive(Default)]
struct TypeWalker {
    /// The strict-decoding path.
    path: String,
    /// Go's error context: the innermost struct and the struct fields from
    /// the root.
    go_struct: Option<String>,
    go_fields: Vec<String>,
    errors: Vec<TypeError>,
    fatal: Option<TypeError>,
}

/// The Go package-qualified name of a definition: `v1.Container`.
fn go_named(ty: TypeRef<'_>) -> Option<String> {
    let name = ty.name()?;
    let mut parts = name.rsplit('.');
    let last = parts.next()?;
    Some(match parts.next() {
        Some(pkg) => format!("{pkg}.{last}"),
        None => last.to_string(),
    })
}

/// The Go type name of a struct (`reflect.Type.Name()`): `DeploymentSpec`.
fn go_struct_name(ty: TypeRef<'_>) -> String {
    ty.name()
        .and_then(|n| n.rsplit('.').next())
        .unwrap_or_default()
        .to_string()
}

fn is_float_format(ty: TypeRef<'_>) -> bool {
    ty.format() == Some("float")
}

/// The Go type of a schema node, as `reflect` prints it.
fn go_type(ty: TypeRef<'_>, depth: usize) -> String {
    if depth > 16 {
        return "interface {}".into();
    }
    match ty.shape() {
        Shape::Object => go_named(ty).unwrap_or_else(|| "struct {}".into()),
        Shape::Map => format!(
            "map[string]{}",
            ty.values()
                .map_or_else(|| "interface {}".into(), |v| go_type(v, depth + 1))
        ),
        Shape::Array => format!(
            "[]{}",
            ty.items()
                .map_or_else(|| "interface {}".into(), |v| go_type(v, depth + 1))
        ),
        Shape::String if ty.format() == Some("byte") => "[]uint8".into(),
        Shape::String => go_named(ty)
            .filter(|_| ty.format() == Some("date-time"))
            .unwrap_or_else(|| "string".into()),
        Shape::Integer => int_type(ty).into(),
        Shape::Number if is_float_format(ty) => "float32".into(),
        Shape::Number => "float64".into(),
        Shape::Boolean => "bool".into(),
        Shape::IntOrString => "intstr.IntOrString".into(),
        Shape::Quantity => "resource.Quantity".into(),
        Shape::Untyped => go_named(ty).unwrap_or_else(|| "interface {}".into()),
    }
}

fn int_type(ty: TypeRef<'_>) -> &'static str {
    match ty.format() {
        Some("int32") => "int32",
        _ => "int64",
    }
}

/// What `encoding/json` calls a value in `cannot unmarshal <value>`: numbers
/// carry their literal when the target is numeric.
fn describe(value: &Value, numeric_target: bool) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if numeric_target => format!("number {}", literal(n)),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

fn literal(n: &Number) -> String {
    n.to_string()
}

fn fits_int(n: &Number, int32: bool) -> bool {
    match n.as_i64() {
        Some(i) if int32 => i32::try_from(i).is_ok(),
        Some(_) => true,
        None => false,
    }
}

impl TypeWalker {
    fn done(&self) -> bool {
        self.fatal.is_some()
    }

    fn record(&mut self, message: String, fatal: bool) {
        let err = TypeError {
            path: self.path.clone(),
            message,
            fatal,
        };
        if fatal {
            if self.fatal.is_none() {
                self.fatal = Some(err);
            }
        } else if self.errors.len() < MAX_ERRORS {
            self.errors.push(err);
        }
    }

    /// An `UnmarshalTypeError`, with the error context Go adds.
    fn mismatch(&mut self, value_desc: String, go_type: &str, fatal: bool) {
        if !fatal && self.errors.len() >= MAX_ERRORS {
            return;
        }
        let message = match &self.go_struct {
            Some(s) => format!(
                "json: cannot unmarshal {value_desc} into Go struct field {s}.{} of type {go_type}",
                self.go_fields.join(".")
            ),
            None => format!("json: cannot unmarshal {value_desc} into Go value of type {go_type}"),
        };
        self.record(message, fatal);
    }

    fn walk(&mut self, ty: TypeRef<'_>, value: &Value, depth: usize) {
        if value.is_null() || depth > MAX_DEPTH || self.done() {
            return;
        }
        match ty.shape() {
            Shape::Object => match value {
                Value::Object(obj) => {
                    let name = go_struct_name(ty);
                    for (key, child) in obj {
                        if self.done() {
                            return;
                        }
                        let Some(field) = ty.field(key) else {
                            continue;
                        };
                        let mark = self.push_key(key);
                        let outer = self.go_struct.replace(name.clone());
                        self.go_fields.push(key.clone());
                        self.walk(field.ty, child, depth + 1);
                        self.go_fields.pop();
                        self.go_struct = outer;
                        self.path.truncate(mark);
                    }
                }
                other => self.mismatch(describe(other, false), &go_type(ty, 0), false),
            },
            Shape::Map => match value {
                Value::Object(obj) => {
                    let Some(vt) = ty.values() else {
                        return;
                    };
                    for (key, child) in obj {
                        if self.done() {
                            return;
                        }
                        let mark = self.push_key(key);
                        self.walk(vt, child, depth + 1);
                        self.path.truncate(mark);
                    }
                }
                other => self.mismatch(describe(other, false), &go_type(ty, 0), false),
            },
            Shape::Array => match value {
                Value::Array(items) => {
                    let Some(it) = ty.items() else {
                        return;
                    };
                    for (i, child) in items.iter().enumerate() {
                        if self.done() {
                            return;
                        }
                        let mark = self.path.len();
                        let _ = write!(self.path, "[{i}]");
                        self.walk(it, child, depth + 1);
                        self.path.truncate(mark);
                    }
                }
                other => self.mismatch(describe(other, false), &go_type(ty, 0), false),
            },
            Shape::String => self.string(ty, value),
            Shape::Integer => match value {
                Value::Number(n) if fits_int(n, int_type(ty) == "int32") => {}
                other => self.mismatch(describe(other, true), int_type(ty), false),
            },
            Shape::Number => match value {
                Value::Number(n)
                    if !is_float_format(ty)
                        || n.as_f64().is_some_and(|f| f.abs() <= f64::from(f32::MAX)) => {}
                other => self.mismatch(describe(other, true), &go_type(ty, 0), false),
            },
            Shape::Boolean => {
                if !value.is_boolean() {
                    self.mismatch(describe(value, false), "bool", false);
                }
            }
            Shape::IntOrString => match value {
                Value::String(_) => {}
                Value::Number(n) if fits_int(n, true) => {}
                // `IntOrString.UnmarshalJSON` decodes anything but a string
                // into its int32 and returns the error.
                other => self.mismatch(describe(other, true), "int32", true),
            },
            Shape::Quantity => {
                // `Quantity.UnmarshalJSON` parses the raw text (quotes
                // stripped) and returns the parse error as is.
                let result = match value {
                    Value::String(s) => parse_quantity(s.trim()),
                    Value::Number(n) => parse_quantity(&literal(n)),
                    _ => Err(QUANTITY_FORMAT),
                };
                if let Err(msg) = result {
                    self.record(msg.to_string(), true);
                }
            }
            Shape::Untyped => {}
        }
    }

    fn string(&mut self, ty: TypeRef<'_>, value: &Value) {
        match (ty.format(), value) {
            (Some("byte"), Value::String(s)) => {
                if let Err(at) = check_base64(s.as_bytes()) {
                    self.record(format!("illegal base64 data at input byte {at}"), false);
                }
            }
            (Some("date-time"), Value::String(s)) => {
                let micro = ty.name().is_some_and(|n| n.ends_with(".MicroTime"));
                if let Err(msg) = parse_time(s, micro) {
                    self.record(msg, true);
                }
            }
            // `Time.UnmarshalJSON` first decodes into a string.
            (Some("date-time"), other) => self.mismatch(describe(other, false), "string", true),
            (_, Value::String(_)) => {}
            (_, other) => self.mismatch(describe(other, false), &go_type(ty, 0), false),
        }
    }

    fn push_key(&mut self, key: &str) -> usize {
        let mark = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        mark
    }
}

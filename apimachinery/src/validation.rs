//! Name, label and annotation validation with the exact wording of
//! kube-apiserver.
//!
//! The `is_*` functions return the list of problems with a value (empty when
//! it is valid), worded as `k8s.io/apimachinery/pkg/util/validation` words
//! them. The `validate_*` functions turn those into `StatusCause`s the way
//! kube's `field.ErrorList` is rendered into a 422 `Invalid` Status: the cause
//! `field` is the field path, `message` is the error body, e.g.
//! `Invalid value: "Foo_bar": a lowercase RFC 1123 subdomain must ...`.
//!
//! All character classes involved are ASCII, so the checks work on bytes;
//! lengths are byte lengths, as in Go.

use crate::status::cause;
use crate::StatusCause;
use serde_json::Value;

/// Maximum length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Maximum length of a DNS-1123 (or DNS-1035) label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Maximum length of the name part of a qualified name.
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// Maximum length of a label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Maximum total size of an object's annotations (keys plus values), bytes.
pub const TOTAL_ANNOTATION_SIZE_LIMIT_B: usize = 256 * 1024;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

// ---------------------------------------------------------------------------
// Message helpers (kube's MaxLenError, RegexError, EmptyError).

/// `must be no more than N characters`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// kube's `RegexError`: the message, the examples and the pattern used.
pub fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
    } else {
        out.push_str(" (e.g. ");
        for (i, example) in examples.iter().enumerate() {
            if i > 0 {
                out.push_str(" or ");
            }
            out.push('\'');
            out.push_str(example);
            out.push_str("', ");
        }
        out.push_str("regex used for validation is '");
    }
    out.push_str(pattern);
    out.push_str("')");
    out
}

/// `must be non-empty`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

// ---------------------------------------------------------------------------
// Hand-written matchers for the patterns above.

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &[u8]) -> bool {
    match (s.first(), s.last()) {
        (Some(&first), Some(&last)) => {
            is_lower_alnum(first)
                && is_lower_alnum(last)
                && s.iter().all(|&b| is_lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1035_label(s: &[u8]) -> bool {
    matches!(s.first(), Some(b) if b.is_ascii_lowercase()) && matches_dns1123_label(s)
}

/// Labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
fn matches_dns1123_subdomain(s: &[u8]) -> bool {
    s.split(|&b| b == b'.').all(matches_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &[u8]) -> bool {
    match (s.first(), s.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && s.iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// The `Is*` checks.

fn dns1123_subdomain_bytes(value: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn dns1123_label_bytes(value: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            // A valid subdomain but not a label: the only difference is dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

fn dns1035_label_bytes(value: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1035_label(value) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// A lowercase RFC 1123 subdomain of at most 253 characters (kube's
/// `IsDNS1123Subdomain`), the rule for most object names.
pub fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    dns1123_subdomain_bytes(s.as_bytes())
}

/// A lowercase RFC 1123 label of at most 63 characters (kube's
/// `IsDNS1123Label`), the rule for namespace names.
pub fn is_dns1123_label(s: &str) -> Vec<String> {
    dns1123_label_bytes(s.as_bytes())
}

/// An RFC 1035 label of at most 63 characters (kube's `IsDNS1035Label`), the
/// rule for service names.
pub fn is_dns1035_label(s: &str) -> Vec<String> {
    dns1035_label_bytes(s.as_bytes())
}

/// A name usable as one URL path segment (kube's `IsPathSegmentName`): not
/// `.` or `..`, without `/` or `%`. Empty and long names are not checked here.
pub fn is_path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    is_path_segment_prefix(s)
}

/// The part of `is_path_segment_name` that applies to a `generateName` prefix.
pub fn is_path_segment_prefix(s: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|bad| s.contains(*bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// A qualified name (kube's `IsQualifiedName`): the form of label keys,
/// annotation keys and finalizers, `[prefix/]name` with a DNS-1123 subdomain
/// prefix and a name of at most 63 characters.
pub fn is_qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&[u8]> = s.as_bytes().split(|&b| b == b'/').collect();
    let name: &[u8] = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    dns1123_subdomain_bytes(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// A label value (kube's `IsValidLabelValue`): empty, or at most 63
/// characters of the qualified-name alphabet.
pub fn is_valid_label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !s.is_empty() && !matches_qualified_name_part(s.as_bytes()) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

// ---------------------------------------------------------------------------
// Name functions (kube's ValidateNameFunc family): `prefix` is true when the
// value is a `generateName`, to which random characters will be appended, so a
// trailing dash is acceptable.

/// How a kind validates `metadata.name` (or, with `prefix`, `generateName`).
pub type NameFn = fn(&str, bool) -> Vec<String>;

/// kube's `maskTrailingDash`: a trailing `-` of a generateName is replaced so
/// that the prefix can be checked with the rule for full names. Like kube it
/// drops the last two bytes and appends `a`.
fn mask_trailing_dash(name: &[u8]) -> Vec<u8> {
    if name.len() > 1 && name.last() == Some(&b'-') {
        let mut out = name[..name.len() - 2].to_vec();
        out.push(b'a');
        out
    } else {
        name.to_vec()
    }
}

/// `NameIsDNSSubdomain`.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        dns1123_subdomain_bytes(&mask_trailing_dash(name.as_bytes()))
    } else {
        is_dns1123_subdomain(name)
    }
}

/// `NameIsDNSLabel` (also kube's `ValidateNamespaceName`).
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        dns1123_label_bytes(&mask_trailing_dash(name.as_bytes()))
    } else {
        is_dns1123_label(name)
    }
}

/// `NameIsDNS1035Label` (service names).
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        dns1035_label_bytes(&mask_trailing_dash(name.as_bytes()))
    } else {
        is_dns1035_label(name)
    }
}

/// `ValidatePathSegmentName`: only the path-segment rule (RBAC kinds...).
pub fn name_is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_path_segment_prefix(name)
    } else {
        is_path_segment_name(name)
    }
}

// ---------------------------------------------------------------------------
// Field errors, rendered like kube's `field.Error` (`ErrorBody` is the cause
// message, the path is the cause field).

/// Go's `strconv.Quote` (what `%q` prints): double quotes, `\"` and `\\`,
/// C escapes for control characters, `\u`/`\U` for other unprintable
/// characters. Printability beyond ASCII is approximated.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !is_go_printable(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: everything but controls,
/// spaces other than U+0020, and the common format characters.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF
        | 0xF0000..=0x10FFFF)
}

/// Go's `json.Marshal` of a value used as a bad value in a field error
/// (`<`, `>`, `&`, U+2028 and U+2029 are escaped as Go does).
pub fn go_json(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

fn with_detail(mut body: String, detail: &str) -> String {
    if !detail.is_empty() {
        body.push_str(": ");
        body.push_str(detail);
    }
    body
}

/// The error body of an `Invalid` error about a string value.
pub fn invalid_message(value: &str, detail: &str) -> String {
    with_detail(format!("Invalid value: {}", go_quote(value)), detail)
}

/// The error body of an `Invalid` error about any JSON value: strings are
/// quoted, numbers and booleans printed plainly, the rest as JSON.
pub fn invalid_json_message(value: &Value, detail: &str) -> String {
    let shown = match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => go_json(other),
    };
    with_detail(format!("Invalid value: {shown}"), detail)
}

/// `field.Invalid(field, value, detail)`.
pub fn invalid(field: &str, value: &str, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_INVALID,
        invalid_message(value, detail),
        field,
    )
}

/// `field.Invalid` with a non-string bad value.
pub fn invalid_json(field: &str, value: &Value, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_INVALID,
        invalid_json_message(value, detail),
        field,
    )
}

/// `field.Required(field, detail)`: `Required value[: detail]`.
pub fn required(field: &str, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_REQUIRED,
        with_detail("Required value".into(), detail),
        field,
    )
}

/// `field.Forbidden(field, detail)`: `Forbidden[: detail]`.
pub fn forbidden(field: &str, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_FORBIDDEN,
        with_detail("Forbidden".into(), detail),
        field,
    )
}

/// `field.TooLong(field, _, max)`: `Too long: may not be more than N bytes`.
pub fn too_long(field: &str, max: usize) -> StatusCause {
    let unit = if max == 1 { "byte" } else { "bytes" };
    StatusCause::new(
        cause::FIELD_VALUE_TOO_LONG,
        format!("Too long: may not be more than {max} {unit}"),
        field,
    )
}

/// `field.NotSupported(field, value, valid)`:
/// `Unsupported value: "x": supported values: "a", "b"`.
pub fn not_supported(field: &str, value: &str, valid: &[&str]) -> StatusCause {
    let detail = if valid.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    StatusCause::new(
        cause::FIELD_VALUE_NOT_SUPPORTED,
        with_detail(format!("Unsupported value: {}", go_quote(value)), &detail),
        field,
    )
}

/// `field.Duplicate(field, value)`: `Duplicate value: "x"`.
pub fn duplicate(field: &str, value: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_DUPLICATE,
        format!("Duplicate value: {}", go_quote(value)),
        field,
    )
}

/// `field.NotFound(field, value)`: `Not found: "x"`.
pub fn not_found(field: &str, value: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_NOT_FOUND,
        format!("Not found: {}", go_quote(value)),
        field,
    )
}

/// kube's `InclusiveRangeError`: `must be between 1 and 65535, inclusive`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// kube's `ValidateNonnegativeField` on an integer at `field` (absent or
/// not an integer: nothing).
pub fn nonnegative(field: &str, value: Option<&Value>, out: &mut Vec<StatusCause>) {
    if let Some(n) = value.and_then(Value::as_i64) {
        if n < 0 {
            out.push(invalid_json(
                field,
                &Value::from(n),
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// A `map[string]string` as kube's field errors print a bad value:
/// `json.Marshal` of it, keys sorted (`{"a":"1"}`), `null` for none.
pub fn go_string_map(map: Option<&Value>) -> String {
    match map.and_then(Value::as_object) {
        None => "null".to_string(),
        Some(m) => {
            let sorted: std::collections::BTreeMap<&String, &Value> = m.iter().collect();
            go_json(&serde_json::json!(sorted))
        }
    }
}

/// `field.Invalid` whose bad value is already rendered the Go way (a `%#v`
/// dump of a struct or map).
pub fn invalid_rendered(field: &str, rendered: &str, detail: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_INVALID,
        with_detail(format!("Invalid value: {rendered}"), detail),
        field,
    )
}

/// `field.NotSupported` whose bad value is already rendered the Go way.
pub fn not_supported_rendered(field: &str, rendered: &str, valid: &[&str]) -> StatusCause {
    let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
    StatusCause::new(
        cause::FIELD_VALUE_NOT_SUPPORTED,
        with_detail(
            format!("Unsupported value: {rendered}"),
            &format!("supported values: {}", quoted.join(", ")),
        ),
        field,
    )
}

/// A JSON value of the wrong type, worded like the OpenAPI schema validation
/// of kube-apiserver: `Invalid value: "integer": <field> in body must be of
/// type string: "integer"`.
pub fn type_invalid(field: &str, value: &Value, expected: &str) -> StatusCause {
    let actual = json_type_name(value);
    StatusCause::new(
        cause::FIELD_VALUE_TYPE_INVALID,
        format!(
            "Invalid value: {q}: {field} in body must be of type {expected}: {q}",
            q = go_quote(actual)
        ),
        field,
    )
}

/// The OpenAPI type name of a JSON value.
pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `field: body`, the string form of one field error (`field.Error.Error()`).
pub fn cause_to_string(c: &StatusCause) -> String {
    format!("{}: {}", c.field, c.message)
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

// ---------------------------------------------------------------------------
// Object metadata.

/// `metadata.labels`: every key a qualified name, every value a valid label
/// value (kube's `ValidateLabels`). Errors carry `field_path` (e.g.
/// `metadata.labels`) and the offending key or value. `null` or absent labels
/// are fine; a value of the wrong JSON type gets a `FieldValueTypeInvalid`
/// cause.
pub fn validate_labels(labels: &Value, field_path: &str) -> Vec<StatusCause> {
    let map = match labels {
        Value::Null => return Vec::new(),
        Value::Object(map) => map,
        other => return vec![type_invalid(field_path, other, "object")],
    };
    let mut causes = Vec::new();
    for (k, v) in map {
        for msg in is_qualified_name(k) {
            causes.push(invalid(field_path, k, &msg));
        }
        match v {
            Value::String(v) => {
                for msg in is_valid_label_value(v) {
                    causes.push(invalid(field_path, v, &msg));
                }
            }
            other => causes.push(type_invalid(&child(field_path, k), other, "string")),
        }
    }
    causes
}

/// `metadata.annotations`: keys are qualified names once lowercased, values
/// strings, and keys plus values at most 256 KiB in total (kube's
/// `ValidateAnnotations`).
pub fn validate_annotations(annotations: &Value, field_path: &str) -> Vec<StatusCause> {
    let map = match annotations {
        Value::Null => return Vec::new(),
        Value::Object(map) => map,
        other => return vec![type_invalid(field_path, other, "object")],
    };
    let mut causes = Vec::new();
    let mut total = 0usize;
    for (k, v) in map {
        for msg in is_qualified_name(&k.to_lowercase()) {
            causes.push(invalid(field_path, k, &msg));
        }
        total = total.saturating_add(k.len());
        match v {
            Value::String(v) => total = total.saturating_add(v.len()),
            other => causes.push(type_invalid(&child(field_path, k), other, "string")),
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_B {
        causes.push(too_long(field_path, TOTAL_ANNOTATION_SIZE_LIMIT_B));
    }
    causes
}

/// `metadata.finalizers` entries are qualified names (kube's
/// `ValidateFinalizerName`); `field_path` is e.g. `metadata.finalizers`.
pub fn validate_finalizer_name(name: &str, field_path: &str) -> Vec<StatusCause> {
    is_qualified_name(name)
        .into_iter()
        .map(|msg| invalid(field_path, name, &msg))
        .collect()
}

/// `metadata.generateName` alone: the prefix rule of `name_fn` (empty is
/// fine). `field_path` is the metadata path, e.g. `metadata`.
pub fn validate_generate_name(
    generate_name: &str,
    name_fn: NameFn,
    field_path: &str,
) -> Vec<StatusCause> {
    if generate_name.is_empty() {
        return Vec::new();
    }
    let field = child(field_path, "generateName");
    name_fn(generate_name, true)
        .into_iter()
        .map(|msg| invalid(&field, generate_name, &msg))
        .collect()
}

/// `metadata.name` and `metadata.generateName` on create, as kube's
/// `ValidateObjectMetaAccessor` checks them (name generation has already
/// happened): a bad generateName, a missing name (`Required value: name or
/// generateName is required`), a bad name. `field_path` is e.g. `metadata`.
pub fn validate_object_name(
    name: &str,
    generate_name: &str,
    name_fn: NameFn,
    field_path: &str,
) -> Vec<StatusCause> {
    let mut causes = validate_generate_name(generate_name, name_fn, field_path);
    let field = child(field_path, "name");
    if name.is_empty() {
        causes.push(required(&field, "name or generateName is required"));
    } else {
        causes.extend(
            name_fn(name, false)
                .into_iter()
                .map(|msg| invalid(&field, name, &msg)),
        );
    }
    causes
}

// ---------------------------------------------------------------------------
// Field checks of the built-in kinds (`pkg/apis/*/validation`).

/// `field.Duplicate(field, value)`; `shown` is the value as kube prints it.
pub fn duplicate_shown(field: &str, shown: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_DUPLICATE,
        format!("Duplicate value: {shown}"),
        field,
    )
}

/// A string slice as kube's field errors print a bad value
/// (`json.Marshal`: `["a","b"]`; `null` for none). `_ty` names the Go
/// type, which the JSON form does not show.
pub fn go_slice<'a>(_ty: &str, items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<&str> = items.into_iter().collect();
    go_json(&serde_json::json!(items))
}

/// kube's `IsValidPortNum`.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// kube's `IsValidPortName` (an IANA service name).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = port.as_bytes();
    if b.len() > 15 {
        errs.push(max_len_error(15));
    }
    if b.is_empty() || !b.iter().all(|&c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if b.first() == Some(&b'-') || b.last() == Some(&b'-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// The message of kube's `IsValidIP`.
pub const IP_ERROR: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// Whether `s` is an IP address (IPv4 dotted quad or IPv6).
pub fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// Whether `s` is an IPv6 address.
pub fn is_ipv6(s: &str) -> bool {
    s.parse::<std::net::Ipv6Addr>().is_ok()
}

/// kube's `IsValidIP` as field errors.
pub fn validate_ip(field: &str, s: &str) -> Vec<StatusCause> {
    if is_ip(s) {
        Vec::new()
    } else {
        vec![invalid(field, s, IP_ERROR)]
    }
}

/// kube's `IsValidCIDR` as field errors.
pub fn validate_cidr(field: &str, s: &str) -> Vec<StatusCause> {
    let ok = s.split_once('/').is_some_and(|(ip, bits)| {
        let max = if is_ipv6(ip) { 128 } else { 32 };
        is_ip(ip)
            && !bits.is_empty()
            && bits.bytes().all(|b| b.is_ascii_digit())
            && bits.parse::<u32>().is_ok_and(|n| n <= max)
    });
    if ok {
        Vec::new()
    } else {
        vec![invalid(
            field,
            s,
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        )]
    }
}

/// kube's `IsConfigMapKey` (keys of ConfigMap and Secret data).
pub fn is_config_map_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let b = key.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn subdomain() {
        for ok in [
            "a",
            "ab",
            "a-b",
            "a.b",
            "0",
            "1.2.3.4",
            "example.com",
            "a--b",
        ] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", ".a", "a.", "a..b", "a_b", "a b", "é"] {
            assert_eq!(
                is_dns1123_subdomain(bad),
                vec![SUBDOMAIN_MSG.to_string()],
                "{bad}"
            );
        }
        let long = "a".repeat(254);
        assert_eq!(
            is_dns1123_subdomain(&long),
            vec!["must be no more than 253 characters".to_string()]
        );
        assert!(is_dns1123_subdomain(&"a".repeat(253)).is_empty());
    }

    #[test]
    fn label() {
        assert!(is_dns1123_label("abc-1").is_empty());
        assert_eq!(
            is_dns1123_label("a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert_eq!(
            is_dns1123_label("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert!(is_dns1035_label("abc").is_empty());
        assert_eq!(is_dns1035_label("1abc").len(), 1);
    }

    #[test]
    fn path_segment() {
        assert!(is_path_segment_name("a:b@c").is_empty());
        assert!(is_path_segment_name("").is_empty());
        assert_eq!(
            is_path_segment_name(".."),
            vec!["may not be '..'".to_string()]
        );
        assert_eq!(
            is_path_segment_name("."),
            vec!["may not be '.'".to_string()]
        );
        assert_eq!(
            is_path_segment_name("a/b%"),
            vec![
                "may not contain '/'".to_string(),
                "may not contain '%'".to_string()
            ]
        );
    }

    #[test]
    fn qualified_name() {
        for ok in ["a", "A_b.c-D", "example.com/MyName", "1/2", "a.b/c"] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(is_qualified_name("a b"), vec![NAME_PART_MSG.to_string()]);
        assert_eq!(
            is_qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                NAME_PART_MSG.to_string()
            ]
        );
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            is_qualified_name("Example.com/a"),
            vec![format!("prefix part {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(
            is_qualified_name("a/b/c"),
            vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()]
        );
    }

    #[test]
    fn label_value() {
        for ok in ["", "a", "My_value-1.2", "12345"] {
            assert!(is_valid_label_value(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            is_valid_label_value("a b"),
            vec![LABEL_VALUE_MSG.to_string()]
        );
        assert_eq!(is_valid_label_value("-a").len(), 1);
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn generate_name_masks_trailing_dash() {
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert_eq!(name_is_dns_subdomain("web-", false).len(), 1);
        assert_eq!(name_is_dns_subdomain("-", true).len(), 1);
        assert!(name_is_dns_label("a-", true).is_empty());
        assert_eq!(name_is_dns_subdomain("é-", true).len(), 1);
        assert!(name_is_path_segment("..", true).is_empty());
        assert_eq!(name_is_path_segment("..", false).len(), 1);
    }

    #[test]
    fn object_name_causes() {
        let c = validate_object_name("Foo_bar", "", name_is_dns_subdomain, "metadata");
        assert_eq!(
            c,
            vec![StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                format!("Invalid value: \"Foo_bar\": {SUBDOMAIN_MSG}"),
                "metadata.name"
            )]
        );
        let c = validate_object_name("", "", name_is_dns_subdomain, "metadata");
        assert_eq!(
            c[0].message,
            "Required value: name or generateName is required"
        );
        assert_eq!(c[0].reason, "FieldValueRequired");
        assert_eq!(c[0].field, "metadata.name");
        let c = validate_object_name("ok", "Bad-", name_is_dns_subdomain, "metadata");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "metadata.generateName");
    }

    #[test]
    fn labels_causes() {
        let c = validate_labels(&json!({"a b": "x", "ok": "a b", "n": 1}), "metadata.labels");
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].field, "metadata.labels");
        assert_eq!(c[0].reason, "FieldValueInvalid");
        assert_eq!(
            c[0].message,
            format!("Invalid value: \"a b\": {NAME_PART_MSG}")
        );
        assert_eq!(
            c[1].message,
            format!("Invalid value: \"a b\": {LABEL_VALUE_MSG}")
        );
        assert_eq!(c[2].reason, "FieldValueTypeInvalid");
        assert_eq!(c[2].field, "metadata.labels.n");
        assert_eq!(
            c[2].message,
            "Invalid value: \"integer\": metadata.labels.n in body must be of type string: \"integer\""
        );
        assert!(validate_labels(&json!({"app": "web", "x/y": ""}), "metadata.labels").is_empty());
        assert!(validate_labels(&Value::Null, "metadata.labels").is_empty());
        assert_eq!(validate_labels(&json!([]), "metadata.labels").len(), 1);
    }

    #[test]
    fn annotations_causes() {
        assert!(validate_annotations(
            &json!({"UpperCase/X": "any value at all"}),
            "metadata.annotations"
        )
        .is_empty());
        let c = validate_annotations(&json!({"a b": "v"}), "metadata.annotations");
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].message,
            format!("Invalid value: \"a b\": {NAME_PART_MSG}")
        );
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B);
        let c = validate_annotations(&json!({ "k": big }), "metadata.annotations");
        assert_eq!(
            c,
            vec![StatusCause::new(
                "FieldValueTooLong",
                "Too long: may not be more than 262144 bytes",
                "metadata.annotations"
            )]
        );
        let fits = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B - 1);
        assert!(validate_annotations(&json!({ "k": fits }), "metadata.annotations").is_empty());
    }

    #[test]
    fn quoting_like_go() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\n\t\u{0}\u{7f}"), r#""\n\t\x00\x7f""#);
        assert_eq!(go_quote("é\u{a0}\u{200b}"), r#""é\u00a0\u200b""#);
        assert_eq!(go_json(&json!(["<a>"])), r#"["\u003ca\u003e"]"#);
        assert_eq!(
            invalid_json_message(&json!(3), "bad"),
            "Invalid value: 3: bad"
        );
        assert_eq!(required("f", "").message, "Required value");
        assert_eq!(
            too_long("f", 1).message,
            "Too long: may not be more than 1 byte"
        );
        assert_eq!(
            not_supported("f", "x", &["a", "b"]).message,
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(forbidden("f", "nope").message, "Forbidden: nope");
    }

    proptest! {
        #[test]
        fn validators_never_panic(s in any::<String>()) {
            let _ = is_dns1123_subdomain(&s);
            let _ = is_dns1123_label(&s);
            let _ = is_dns1035_label(&s);
            let _ = is_path_segment_name(&s);
            let _ = is_qualified_name(&s);
            let _ = is_valid_label_value(&s);
            let _ = name_is_dns_subdomain(&s, true);
            let _ = name_is_dns_label(&s, true);
            let _ = go_quote(&s);
        }

        #[test]
        fn generated_subdomains_are_valid(s in "[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?){0,3}") {
            prop_assert!(is_dns1123_subdomain(&s).is_empty());
        }

        #[test]
        fn generated_qualified_names_are_valid(s in "([a-z0-9]{1,8}(\\.[a-z0-9]{1,8})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?") {
            prop_assert!(is_qualified_name(&s).is_empty());
            prop_assert!(is_valid_label_value(s.rsplit('/').next().unwrap_or("")).is_empty());
        }
    }
}

//! Conversions between JSON (`serde_json::Value`) and CEL values.
//!
//! JSON → CEL: `null`, booleans and strings map directly; a number that is an
//! integer fitting `i64` becomes `int`, every other number `double` (so
//! `1` is an int and `1.0` written in JSON as `1.0` is a double); arrays
//! become lists and objects maps with string keys.
//!
//! CEL → JSON: the reverse, plus `uint` (a number), `bytes` (a base64
//! string, as Kubernetes serialises `[]byte`), `duration` (Go's
//! `time.Duration` string, e.g. `1h2m3s`), `timestamp` (RFC 3339),
//! `optional` (its value, or `null` when empty) and the Kubernetes library
//! types (their string form: a quantity `"100Mi"`, an IP, a CIDR, a URL, a
//! semver). Map keys that are not strings are written as strings. A `NaN` or
//! infinite double, a function or a type has no JSON form and is an error.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cel::objects::{Key, Map, OptionalValue};
use cel::Value;

/// Converts a JSON document to a CEL value.
pub fn json_to_cel(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => {
            Value::List(Arc::new(items.iter().map(json_to_cel).collect()))
        }
        serde_json::Value::Object(fields) => {
            let map: HashMap<Key, Value> = fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// Why a CEL value has no JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToJsonError(pub String);

impl fmt::Display for ToJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToJsonError {}

/// Converts a CEL value to JSON. Map entries are written sorted by key so the
/// output does not depend on hash order.
pub fn cel_to_json(value: &Value) -> Result<serde_json::Value, ToJsonError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::UInt(u) => serde_json::Value::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| ToJsonError(format!("double {f} has no JSON representation")))?,
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::Bytes(b) => serde_json::Value::String(base64(b)),
        Value::List(items) => {
            serde_json::Value::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        Value::Map(m) => {
            let mut entries: Vec<(String, &Value)> =
                m.map.iter().map(|(k, v)| (key_string(k), v)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = serde_json::Map::with_capacity(entries.len());
            for (k, v) in entries {
                out.insert(k, cel_to_json(v)?);
            }
            serde_json::Value::Object(out)
        }
        Value::Duration(d) => serde_json::Value::String(go_duration(d)),
        Value::Timestamp(t) => {
            serde_json::Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        }
        Value::Opaque(o) => {
            if let Some(opt) = o.downcast_ref::<OptionalValue>() {
                match opt.value() {
                    Some(v) => cel_to_json(v)?,
                    None => serde_json::Value::Null,
                }
            } else if let Some(s) = crate::library::opaque_to_string(o.as_ref()) {
                serde_json::Value::String(s)
            } else {
                return Err(ToJsonError(format!(
                    "value of type {} has no JSON representation",
                    o.runtime_type_name()
                )));
            }
        }
        other => {
            return Err(ToJsonError(format!(
                "value of type {} has no JSON representation",
                other.type_of()
            )))
        }
    })
}

fn key_string(k: &Key) -> String {
    match k {
        Key::String(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A duration as Go's `time.Duration.String()` writes it: `1h2m3.5s`,
/// `150ms`, `0s`.
fn go_duration(d: &chrono::Duration) -> String {
    let nanos = d
        .num_nanoseconds()
        .map(i128::from)
        .unwrap_or_else(|| i128::from(d.num_seconds()) * 1_000_000_000);
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = if n < 1_000 {
            ("ns", 1u128)
        } else if n < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", trim_fraction(n, div));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let secs = trim_fraction(n % 60_000_000_000, 1_000_000_000);
    let mut out = String::from(sign);
    if hours > 0 {
        out.push_str(&format!("{hours}h{minutes}m"));
    } else if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{secs}s"));
    out
}

/// `n / div` as a decimal without trailing zeros.
fn trim_fraction(n: u128, div: u128) -> String {
    let whole = n / div;
    let frac = n % div;
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_keep_int_and_double_apart() {
        assert_eq!(json_to_cel(&json!(3)), Value::Int(3));
        assert!(matches!(json_to_cel(&json!(3.5)), Value::Float(f) if f == 3.5));
        assert!(matches!(json_to_cel(&json!(u64::MAX)), Value::Float(_)));
    }

    #[test]
    fn round_trip_nested() {
        let doc = json!({"a": [1, 2.5, "x", null, true], "b": {"c": {}}, "d": []});
        assert_eq!(cel_to_json(&json_to_cel(&doc)).unwrap(), doc);
    }

    #[test]
    fn special_values() {
        assert_eq!(
            cel_to_json(&Value::Bytes(Arc::new(b"hello".to_vec()))).unwrap(),
            json!("aGVsbG8=")
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"ab"), "YWI=");
        assert!(cel_to_json(&Value::Float(f64::NAN)).is_err());
        assert_eq!(go_duration(&chrono::Duration::seconds(3723)), "1h2m3s");
        assert_eq!(go_duration(&chrono::Duration::milliseconds(1500)), "1.5s");
        assert_eq!(go_duration(&chrono::Duration::milliseconds(150)), "150ms");
        assert_eq!(go_duration(&chrono::Duration::seconds(-90)), "-1m30s");
        assert_eq!(go_duration(&chrono::Duration::zero()), "0s");
    }
}

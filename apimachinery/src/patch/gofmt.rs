//! Rendering of JSON values the way Go's `fmt` prints the `interface{}`
//! values kube-apiserver decodes JSON into, so that error messages read like
//! kube's (`map[image:nginx]`, `[a b]`, `1e+06`).

use std::fmt::Write;

use serde_json::{Map, Number, Value};

/// `fmt.Sprintf("%v", v)`.
pub(crate) fn v(value: &Value) -> String {
    let mut out = String::new();
    write_v(&mut out, value);
    out
}

/// `fmt.Sprintf("%v", m)` for a map.
pub(crate) fn v_map(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(&mut out, map);
    out
}

/// `fmt.Sprintf("%v", list)` for a slice.
pub(crate) fn v_list(list: &[Value]) -> String {
    let mut out = String::new();
    write_list(&mut out, list);
    out
}

/// `fmt.Sprintf("%s", v)`: strings as they are, anything else with Go's
/// bad-verb marker.
pub(crate) fn s(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "%!s(<nil>)".to_string(),
        Value::Bool(b) => format!("%!s(bool={b})"),
        Value::Number(n) => format!("%!s({}={})", number_type(n), number(n)),
        Value::Array(_) | Value::Object(_) => v(value),
    }
}

/// The Go type name `reflect.TypeOf` reports for a decoded JSON value.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) => number_type(n),
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn number_type(n: &Number) -> &'static str {
    if n.is_i64() {
        "int64"
    } else {
        "float64"
    }
}

fn write_v(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => write_list(out, a),
        Value::Object(m) => write_map(out, m),
    }
}

fn write_list(out: &mut String, list: &[Value]) {
    out.push('[');
    for (i, item) in list.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_v(out, item);
    }
    out.push(']');
}

fn write_map(out: &mut String, map: &Map<String, Value>) {
    // Go prints map keys sorted.
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push_str("map[");
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(key);
        out.push(':');
        if let Some(value) = map.get(key.as_str()) {
            write_v(out, value);
        }
    }
    out.push(']');
}

/// Integers print in decimal; other numbers as Go's `%v` of a float64
/// (`strconv.FormatFloat(f, 'g', -1, 64)`: shortest digits, exponent form
/// below 1e-4 and from 1e6 up).
fn number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    match n.as_f64() {
        Some(f) => float(f),
        None => n.to_string(),
    }
}

fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. `1.5e6`.
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prints_like_go() {
        assert_eq!(
            v(&json!({"image": "nginx", "b": [1, "x", null], "a": {"z": true}})),
            "map[a:map[z:true] b:[1 x <nil>] image:nginx]"
        );
        assert_eq!(v(&json!(1.5)), "1.5");
        assert_eq!(v(&json!(1.0e21)), "1e+21");
        assert_eq!(v(&json!(1.0e6)), "1e+06");
        assert_eq!(v(&json!(123456.5)), "123456.5");
        assert_eq!(v(&json!(123456789.5)), "1.234567895e+08");
        assert_eq!(v(&json!(0.00001)), "1e-05");
        assert_eq!(v(&json!(-7)), "-7");
        assert_eq!(s(&json!("merge")), "merge");
        assert_eq!(s(&json!(1)), "%!s(int64=1)");
        assert_eq!(type_name(&json!([])), "[]interface {}");
        assert_eq!(type_name(&json!({})), "map[string]interface {}");
    }
}

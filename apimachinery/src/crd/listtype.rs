//! `x-kubernetes-list-type: set|map` uniqueness (kube's
//! `listtype.ValidateListSetsAndMaps`).

use serde_json::{Map, Value};

use super::types::Structural;
use super::{child, duplicate, index, invalid, key};
use crate::StatusCause;

/// Duplicate set elements and map-list keys anywhere in `v`.
pub(crate) fn list_types(s: &Structural, v: &Value, path: &str, out: &mut Vec<StatusCause>) {
    match v {
        Value::Object(m) => {
            if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
                for (k, x) in m {
                    if !s.properties.contains_key(k) {
                        list_types(ap, x, &key(path, k), out);
                    }
                }
            }
            for (k, x) in m {
                if let Some(ps) = s.properties.get(k) {
                    list_types(ps, x, &child(path, k), out);
                }
            }
        }
        Value::Array(a) => {
            match s.extensions.list_type.as_deref() {
                Some("set") => {
                    let keys: Vec<String> = a.iter().map(set_key).collect();
                    for i in non_unique(&keys) {
                        out.push(duplicate(&index(path, i), &a[i]));
                    }
                }
                Some("map") => list_map(s, a, path, out),
                _ => {}
            }
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    list_types(items, x, &index(path, i), out);
                }
            }
        }
        _ => {}
    }
}

/// How kube tells set elements apart: scalars by Go value (an `int64` is not
/// a `float64`), objects and arrays by their JSON encoding (sorted keys).
fn set_key(v: &Value) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if !(n.is_i64() || n.is_u64()) && f.fract() == 0.0 && f.abs() < 1e15 => {
                    out.push_str(&(f as i64).to_string())
                }
                _ => out.push_str(&n.to_string()),
            },
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    canonical(&m[k.as_str()], out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => out.push_str("i:"),
        Value::Number(_) => out.push_str("f:"),
        Value::Array(_) | Value::Object(_) => out.push_str("c:"),
        _ => out.push_str("s:"),
    }
    canonical(v, &mut out);
    out
}

/// The index of each value's second occurrence (kube's `validateListSet`).
fn non_unique(keys: &[String]) -> Vec<usize> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let times = seen.entry(k.as_str()).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

fn list_map(s: &Structural, a: &[Value], path: &str, out: &mut Vec<StatusCause>) {
    for (i, x) in a.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            out.push(invalid(
                &index(path, i),
                x,
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if a.len() <= 1 {
        return;
    }
    // An element's key: its key fields that are set (a null element has none).
    let keys: Vec<Value> = a
        .iter()
        .map(|x| {
            let mut k = Map::new();
            for f in &s.extensions.list_map_keys {
                if let Some(v) = x.get(f) {
                    k.insert(f.clone(), v.clone());
                }
            }
            Value::Object(k)
        })
        .collect();
    let encoded: Vec<String> = if s.extensions.list_map_keys.len() == 1 {
        // One key field: keys compare as set elements (unset is its own key).
        let f = &s.extensions.list_map_keys[0];
        keys.iter()
            .map(|k| k.get(f).map_or_else(|| "unset".to_string(), set_key))
            .collect()
    } else {
        keys.iter().map(set_key).collect()
    };
    for i in non_unique(&encoded) {
        out.push(duplicate(&index(path, i), &keys[i]));
    }
}

//! Small helpers shared by the kinds' rules: defaulting a field only when
//! the client left it out, and walking optional parts of an object.

use serde_json::{Map, Value};

/// Sets `key` to `value` when it is absent or null (kube's defaulters only
/// fill zero-valued pointer fields, never a value the client set).
pub fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(key.to_string(), value);
        }
    }
}

/// The object under `key`, created empty when absent or null. `None` when
/// `key` holds something other than an object (validation reports that).
pub fn object_mut<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    // Looked up first so that an object already there costs no key copy.
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), Value::Object(Map::new()));
    }
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The object under `key` when it is present and an object.
pub fn existing_mut<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Each object of the array under `key` (absent or not an array: none).
pub fn each_mut<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// [`default_field`] for a string value, allocated only when it is set.
pub fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_only_missing_values() {
        let mut m = json!({"a": 1, "b": null}).as_object().unwrap().clone();
        default_field(&mut m, "a", json!(2));
        default_field(&mut m, "b", json!(3));
        default_field(&mut m, "c", json!(4));
        assert_eq!(Value::Object(m), json!({"a": 1, "b": 3, "c": 4}));
    }
}

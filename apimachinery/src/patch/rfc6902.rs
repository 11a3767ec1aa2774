//! RFC 6902 JSON Patch with the behaviour of the library behind
//! kube-apiserver (evanphx/json-patch v4): operations apply one after the
//! other, `value` may be omitted (meaning `null`), negative array indices
//! count from the end, the whole document cannot be the target of a
//! change, and `test` of `null` succeeds on a missing member.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{json_type_word, PatchError, PatchErrorKind, MAX_JSON_PATCH_OPERATIONS};

/// Applies an RFC 6902 JSON patch.
///
/// Mirrors kube-apiserver: a body that is not an array of objects is a 400,
/// more than [`MAX_JSON_PATCH_OPERATIONS`] operations a 413, and an operation
/// that does not apply (unknown `op`, missing path, failed `test`, ...) a 422
/// with the generic message; the reason is kept in [`PatchError::detail`]. A
/// `null` body is an empty patch. The result may be any JSON value; the
/// caller decodes it into an object.
pub fn apply_json_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = match patch {
        Value::Null => return Ok(original.clone()),
        Value::Array(ops) => ops,
        other => {
            return Err(PatchError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                json_type_word(other)
            )))
        }
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(PatchError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_type_word(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::new(
            PatchErrorKind::RequestEntityTooLarge,
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {}, got {}",
                MAX_JSON_PATCH_OPERATIONS,
                ops.len()
            ),
        ));
    }
    let mut doc = original.clone();
    for op in ops {
        apply_operation(&mut doc, op).map_err(PatchError::unprocessable)?;
    }
    Ok(doc)
}

fn apply_operation(doc: &mut Value, op: &Value) -> Result<(), String> {
    let empty = Map::new();
    let fields = op.as_object().unwrap_or(&empty);
    let kind = fields
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if !matches!(
        kind,
        "add" | "remove" | "replace" | "move" | "copy" | "test"
    ) {
        return Err(format!("Unexpected kind: {kind}"));
    }
    let path = string_member(fields, "path")?;

    if kind == "test" {
        let path = resolve_negative_indices(doc, path, false);
        let expected = fields.get("value").unwrap_or(&Value::Null);
        return test(doc, &path, expected);
    }

    if path.is_empty() {
        return Err(format!(
            "{kind} operation does not apply: doc is missing path: \"\""
        ));
    }
    let mut normalized = Map::new();
    normalized.insert("op".to_string(), Value::String(kind.to_string()));
    let path = resolve_negative_indices(doc, path, kind == "add");
    if matches!(kind, "move" | "copy") {
        let from = string_member(fields, "from")?;
        if from.is_empty() {
            return Err(format!(
                "{kind} operation does not apply: doc is missing from path: \"\""
            ));
        }
        let from = resolve_negative_indices(doc, from, false);
        normalized.insert("from".to_string(), Value::String(from.into_owned()));
    }
    normalized.insert("path".to_string(), Value::String(path.into_owned()));
    if matches!(kind, "add" | "replace") {
        let value = fields.get("value").cloned().unwrap_or(Value::Null);
        normalized.insert("value".to_string(), value);
    }
    let operation: json_patch::PatchOperation =
        serde_json::from_value(Value::Object(normalized)).map_err(|e| e.to_string())?;
    // The caller drops the document on failure, so nothing needs reverting.
    json_patch::patch_unsafe(doc, std::slice::from_ref(&operation)).map_err(|e| e.to_string())
}

fn string_member<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    fields
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("operation missing {name} field"))
}

/// `test`: a `null` value matches a missing member of an existing parent.
fn test(doc: &Value, path: &str, expected: &Value) -> Result<(), String> {
    let failed = || Err(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        return if doc == expected { Ok(()) } else { failed() };
    }
    let parent = match path.rfind('/') {
        Some(i) => &path[..i],
        None => {
            return Err(format!(
                "test operation does not apply: is missing path: {path}"
            ))
        }
    };
    let Some(parent) = doc.pointer(parent) else {
        return Err(format!(
            "test operation does not apply: is missing path: {path}"
        ));
    };
    match doc.pointer(path) {
        Some(Value::Null) | None if parent.is_object() => {
            if expected.is_null() {
                Ok(())
            } else {
                failed()
            }
        }
        Some(actual) if actual == expected => Ok(()),
        _ => failed(),
    }
}

/// Rewrites negative array indices (`-1` is the last element; for an
/// insertion, the position after it) into the positive ones RFC 6901 knows.
fn resolve_negative_indices<'p>(doc: &Value, path: &'p str, inserting: bool) -> Cow<'p, str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Cow::Borrowed(path);
    };
    if !rest.contains("/-") && !rest.starts_with('-') {
        return Cow::Borrowed(path);
    }
    let tokens: Vec<&str> = rest.split('/').collect();
    let mut out: Vec<Cow<'p, str>> = Vec::with_capacity(tokens.len());
    let mut cur = Some(doc);
    for (i, &token) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        let mut resolved = Cow::Borrowed(token);
        if let Some(Value::Array(items)) = cur {
            if let Ok(n) = token.parse::<i64>() {
                let len = items.len() as i64 + i64::from(last && inserting);
                if n < 0 && n >= -len {
                    resolved = Cow::Owned((len + n).to_string());
                }
            }
        }
        cur = match cur {
            Some(Value::Object(m)) => m.get(unescape(token).as_ref()),
            Some(Value::Array(a)) => resolved.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        out.push(resolved);
    }
    Cow::Owned(format!("/{}", out.join("/")))
}

fn unescape(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn negative_indices_count_from_the_end() {
        let doc = json!({"a": [1, 2, 3], "b": {"c~/d": [[1], [2]]}});
        let out = apply_json_patch(
            &doc,
            &json!([
                {"op": "remove", "path": "/a/-1"},
                {"op": "add", "path": "/a/-1", "value": 9},
                {"op": "replace", "path": "/b/c~0~1d/-2/0", "value": 0},
                {"op": "test", "path": "/a/-3", "value": 1}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": [1, 2, 9], "b": {"c~/d": [[0], [2]]}}));
        assert!(apply_json_patch(&doc, &json!([{"op": "remove", "path": "/a/-4"}])).is_err());
    }

    #[test]
    fn the_root_cannot_be_changed() {
        let doc = json!({"a": 1});
        for op in ["add", "replace", "remove"] {
            let err =
                apply_json_patch(&doc, &json!([{"op": op, "path": "", "value": 1}])).unwrap_err();
            assert_eq!(err.code(), 422, "{op}");
        }
        let err =
            apply_json_patch(&doc, &json!([{"op": "copy", "from": "", "path": "/b"}])).unwrap_err();
        assert_eq!(err.code(), 422);
        // ...but it can be tested.
        assert!(apply_json_patch(
            &doc,
            &json!([{"op": "test", "path": "", "value": {"a": 1}}])
        )
        .is_ok());
    }

    #[test]
    fn test_of_null_matches_missing_members() {
        let doc = json!({"a": {"b": null}});
        for path in ["/a/b", "/a/missing"] {
            assert!(
                apply_json_patch(&doc, &json!([{"op": "test", "path": path, "value": null}]))
                    .is_ok(),
                "{path}"
            );
            assert!(apply_json_patch(&doc, &json!([{"op": "test", "path": path}])).is_ok());
        }
        for path in ["/x/y", "/a/b"] {
            assert!(
                apply_json_patch(&doc, &json!([{"op": "test", "path": path, "value": 1}])).is_err(),
                "{path}"
            );
        }
        // Numbers compare by their JSON form: 1 is not 1.0.
        assert!(apply_json_patch(
            &json!({"n": 1}),
            &json!([{"op": "test", "path": "/n", "value": 1.0}])
        )
        .is_err());
    }
}

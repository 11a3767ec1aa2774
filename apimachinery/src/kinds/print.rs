//! Table printer columns (kube's `pkg/printers/internalversion`): each
//! column is data, a definition plus a function computing its cell from the
//! object.

use serde_json::{json, Value};

/// What a cell function gets besides the object.
#[derive(Debug, Clone, Copy)]
pub struct PrintContext {
    /// The server's clock, in seconds since the Unix epoch (ages are
    /// computed against it, as kube computes them when it prints).
    pub now: i64,
}

/// One column of a kind's Table.
#[derive(Debug)]
pub struct Column {
    pub name: &'static str,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean`,
    /// `date`.
    pub type_: &'static str,
    /// `name` for the Name column, else usually empty.
    pub format: &'static str,
    pub description: &'static str,
    /// 0: always shown; 1: only with `-o wide`.
    pub priority: u8,
    pub cell: fn(&Value, &PrintContext) -> Value,
}

impl Column {
    /// The column's `TableColumnDefinition`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// kube's description of the Name column (ObjectMeta's `name` doc).
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// kube's description of the Age column (ObjectMeta's `creationTimestamp`
/// doc).
pub const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The Name column every printer starts with.
pub const NAME: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    description: NAME_DESCRIPTION,
    priority: 0,
    cell: name_cell,
};

/// The Age column (`translateTimestampSince(creationTimestamp)`).
pub const AGE: Column = Column {
    name: "Age",
    type_: "string",
    format: "",
    description: AGE_DESCRIPTION,
    priority: 0,
    cell: age_cell,
};

fn name_cell(obj: &Value, _: &PrintContext) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null)
}

fn age_cell(obj: &Value, ctx: &PrintContext) -> Value {
    Value::String(since(obj.pointer("/metadata/creationTimestamp"), ctx))
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp.
pub fn parse_time(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp())
}

/// kube's `translateTimestampSince`: `<unknown>` for a missing time, else
/// the human duration since it.
pub fn since(time: Option<&Value>, ctx: &PrintContext) -> String {
    match time.and_then(Value::as_str) {
        None | Some("") => "<unknown>".to_string(),
        Some(s) => match parse_time(s) {
            Some(t) => crate::duration::human(ctx.now - t),
            None => "<unknown>".to_string(),
        },
    }
}

/// kube's `translateTimestampUntil`.
pub fn until(time: Option<&Value>, ctx: &PrintContext) -> String {
    match time.and_then(Value::as_str).and_then(parse_time) {
        None => "<unknown>".to_string(),
        Some(t) => crate::duration::human(t - ctx.now),
    }
}

/// A string at `pointer`, or `default`.
pub fn str_at<'a>(obj: &'a Value, pointer: &str, default: &'a str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or(default)
}

/// An integer at `pointer`, or 0 (Go's zero value).
pub fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The number of entries of the array or map at `pointer`.
pub fn count_at(obj: &Value, pointer: &str) -> i64 {
    match obj.pointer(pointer) {
        Some(Value::Array(a)) => a.len() as i64,
        Some(Value::Object(m)) => m.len() as i64,
        _ => 0,
    }
}

/// kube's `formatLabelSelector` of a `LabelSelector` object: `<none>` when
/// empty, else `k=v,k in (a,b),...`.
pub fn label_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return "<none>".to_string();
    };
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort();
        for k in keys {
            parts.push(format!("{k}={}", m[k].as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            parts.push(match op {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                _ => format!("{key} {op} ({})", values.join(",")),
            });
        }
    }
    if parts.is_empty() {
        "<none>".to_string()
    } else {
        parts.join(",")
    }
}

/// kube's `labels.FormatLabels` of a plain map: `<none>` when empty, else
/// `k=v,...` sorted by key.
pub fn label_map(map: Option<&Value>) -> String {
    let Some(m) = map.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_string();
    };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys.iter()
        .map(|k| format!("{k}={}", m[*k].as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A column other than Name: `priority` 1 is a `-o wide` column.
pub const fn column(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: u8,
    cell: fn(&Value, &PrintContext) -> Value,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority,
        cell,
    }
}

/// The strings of the array at `pointer` (absent: none).
pub fn strs_at<'a>(obj: &'a Value, pointer: &str) -> impl Iterator<Item = &'a str> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_selectors() {
        let ctx = PrintContext { now: 1_700_000_300 };
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": t.to_rfc3339()}});
        assert_eq!((AGE.cell)(&obj, &ctx), json!("5m"));
        assert_eq!((NAME.cell)(&obj, &ctx), json!("a"));
        assert_eq!(since(None, &ctx), "<unknown>");
        let sel = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]},
                                 {"key": "u", "operator": "DoesNotExist"}]});
        assert_eq!(label_selector(Some(&sel)), "a=1,b=2,t in (x,y),!u");
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        assert_eq!(label_map(Some(&json!({"z": "1", "a": "2"}))), "a=2,z=1");
    }
}

//! The nodes of a schema that carry `x-kubernetes-validations`, for a CEL
//! engine to compile (per schema node) and evaluate (per value node). Rules
//! are not interpreted here.

use serde_json::Value;

use super::types::{Structural, ValidationRule};
use super::{child, index, key};

/// A schema node with `x-kubernetes-validations`.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleNode<'a> {
    /// Where the node applies in an object, kube-style, with `[*]` for every
    /// array item and map value: `spec.ports[*]`, `spec.labels[*]`; empty at
    /// the root.
    pub path: String,
    /// Where the node is in the schema, relative to `openAPIV3Schema`:
    /// `properties[spec].properties[ports].items`; empty at the root.
    pub schema_path: String,
    pub schema: &'a Structural,
    pub rules: &'a [ValidationRule],
}

/// Every node of `schema` with rules, parents before children, properties
/// in name order.
pub fn validation_rules(schema: &Structural) -> Vec<RuleNode<'_>> {
    let mut out = Vec::new();
    walk_schema(schema, String::new(), String::new(), &mut out);
    out
}

fn walk_schema<'a>(s: &'a Structural, path: String, spath: String, out: &mut Vec<RuleNode<'a>>) {
    if !s.extensions.validations.is_empty() {
        out.push(RuleNode {
            path: path.clone(),
            schema_path: spath.clone(),
            schema: s,
            rules: &s.extensions.validations,
        });
    }
    for (k, ps) in &s.properties {
        walk_schema(
            ps,
            child(&path, k),
            key(&child(&spath, "properties"), k),
            out,
        );
    }
    if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
        walk_schema(
            ap,
            format!("{path}[*]"),
            child(&spath, "additionalProperties"),
            out,
        );
    }
    if let Some(items) = &s.items {
        walk_schema(items, format!("{path}[*]"), child(&spath, "items"), out);
    }
}

/// Calls `f(path, schema, value)` for every value of `value` whose schema
/// node has rules, with the concrete path (`spec.ports[1]`,
/// `spec.labels[app]`), parents before children.
pub fn for_each_rule_value<'a, F>(schema: &'a Structural, value: &'a Value, mut f: F)
where
    F: FnMut(&str, &'a Structural, &'a Value),
{
    walk_value(schema, value, String::new(), &mut f);
}

fn walk_value<'a, F>(s: &'a Structural, v: &'a Value, path: String, f: &mut F)
where
    F: FnMut(&str, &'a Structural, &'a Value),
{
    if !s.extensions.validations.is_empty() {
        f(&path, s, v);
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let Some(ps) = s.properties.get(k) {
                    walk_value(ps, x, child(&path, k), f);
                } else if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
                    walk_value(ap, x, key(&path, k), f);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    walk_value(items, x, index(&path, i), f);
                }
            }
        }
        _ => {}
    }
}

/// kube's `cel.ValidFieldPath`: a JSON path of field (`.a`) and map-key
/// (`['a.b']`) steps that exists in `schema`. Returns the field path it
/// names (`spec.labels[a.b]`) and the schema there, or kube's reason.
/// Array indexes are never accepted; `allow_array_notation` permits the
/// bracket form at all (selectable fields forbid it).
pub fn valid_field_path<'a>(
    json_path: &str,
    schema: &'a Structural,
    allow_array_notation: bool,
) -> Result<(String, &'a Structural), String> {
    let tokens = tokenize(json_path);
    let mut it = tokens.iter();
    let mut node = schema;
    let mut path = String::new();
    let step = |node: &mut &'a Structural, name: &str, path: &mut String| -> Result<(), String> {
        if !node.properties.is_empty() {
            *node = node
                .properties
                .get(name)
                .ok_or_else(|| "does not refer to a valid field".to_string())?;
            *path = child(path, name);
        } else if let Some(ap) = &node.additional_properties {
            *node = ap
                .schema()
                .ok_or_else(|| "does not refer to a valid field".to_string())?;
            *path = key(path, name);
        } else {
            return Err("does not refer to a valid field".into());
        }
        Ok(())
    };
    while let Some(tok) = it.next() {
        match tok.as_str() {
            "[" => {
                if !allow_array_notation {
                    return Err("array notation is not allowed".into());
                }
                let tok = it.next().ok_or("unexpected end of JSON path")?;
                let quoted = tok.len() >= 2 && tok.starts_with('\'') && tok.ends_with('\'');
                if !quoted {
                    return Err(format!("expected single quoted string but got {tok}"));
                }
                let name = unescape(&tok[1..tok.len() - 1])
                    .map_err(|e| format!("invalid string literal: {e}"))?;
                step(&mut node, &name, &mut path)?;
                let tok = it.next().ok_or("unexpected end of JSON path")?;
                if tok != "]" {
                    return Err(format!("expected ] but got {tok}"));
                }
            }
            "." => {
                let tok = it.next().ok_or("unexpected end of JSON path")?;
                step(&mut node, tok, &mut path)?;
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((path, node))
}

/// Splits at `.`, `[` and `]` (each its own token); a token starting with
/// `'` runs to the next unescaped `'`.
fn tokenize(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            let mut j = i + 1;
            while j < b.len() && !(b[j] == b'\'' && b[j - 1] != b'\\') {
                j += 1;
            }
            let end = (j + 1).min(b.len());
            out.push(String::from_utf8_lossy(&b[i..end]).into_owned());
            i = end;
        } else if matches!(b[i], b'.' | b'[' | b']') {
            out.push((b[i] as char).to_string());
            i += 1;
        } else {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b'.' | b'[' | b']') {
                j += 1;
            }
            out.push(String::from_utf8_lossy(&b[i..j]).into_owned());
            i = j;
        }
    }
    out
}

/// The escapes of a single-quoted CEL string.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().unwrap_or('\\');
        out.push(match e {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(format!("invalid escape char \\{other}")),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_like_kube() {
        let s = Structural::from_json(&json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "a": {"type": "string"},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                "l": {"type": "array", "items": {"type": "string"}}}}}}))
        .unwrap();
        let ok = |p: &str| valid_field_path(p, &s, true).map(|(path, n)| (path, n.type_.clone()));
        assert_eq!(ok(".spec.a"), Ok(("spec.a".into(), "string".into())));
        assert_eq!(
            ok(".spec.m['x.y']"),
            Ok(("spec.m[x.y]".into(), "integer".into()))
        );
        assert_eq!(ok("['spec'].a"), Ok(("spec.a".into(), "string".into())));
        assert_eq!(ok(".spec.b"), Err("does not refer to a valid field".into()));
        assert_eq!(
            ok(".spec.l[0]"),
            Err("expected single quoted string but got 0".into())
        );
        assert_eq!(ok(".spec."), Err("unexpected end of JSON path".into()));
        assert_eq!(ok("spec"), Err("expected [ or . but got: spec".into()));
        assert_eq!(
            ok(".spec.m['\\q']"),
            Err("invalid string literal: invalid escape char \\q".into())
        );
        assert_eq!(
            valid_field_path(".spec.m['x']", &s, false).map(|(p, _)| p),
            Err("array notation is not allowed".into())
        );
    }

    #[test]
    fn finds_rules_and_values() {
        let s = Structural::from_json(&json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "has(self.spec)"}],
            "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "items": {"type": "object",
                    "x-kubernetes-validations": [{"rule": "self.port > 0", "message": "bad port",
                                                  "reason": "FieldValueInvalid", "fieldPath": ".port"}],
                    "properties": {"port": {"type": "integer"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self != ''", "optionalOldSelf": true}]}}
            }}}
        }))
        .unwrap();
        let nodes = validation_rules(&s);
        let got: Vec<(&str, &str, &str)> = nodes
            .iter()
            .map(|n| {
                (
                    n.path.as_str(),
                    n.schema_path.as_str(),
                    n.rules[0].rule.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("", "", "has(self.spec)"),
                (
                    "spec.labels[*]",
                    "properties[spec].properties[labels].additionalProperties",
                    "self != ''"
                ),
                (
                    "spec.ports[*]",
                    "properties[spec].properties[ports].items",
                    "self.port > 0"
                ),
            ]
        );
        assert_eq!(nodes[2].rules[0].field_path, ".port");
        assert_eq!(nodes[1].rules[0].optional_old_self, Some(true));

        let v = json!({"spec": {"ports": [{"port": 1}, {"port": 2}], "labels": {"a": "b"}}});
        let mut seen = Vec::new();
        for_each_rule_value(&s, &v, |p, _, x| seen.push((p.to_string(), x.clone())));
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[1], ("spec.ports[0]".to_string(), json!({"port": 1})));
        assert_eq!(seen[3], ("spec.labels[a]".to_string(), json!("b")));
    }
}

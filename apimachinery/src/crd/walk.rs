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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

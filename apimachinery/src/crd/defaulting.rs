//! Defaulting (kube's `structuraldefaulting.Default`), applied to request
//! bodies on create and update and to objects read from storage.
//!
//! A property's `default` is set when the property is absent, or when it is
//! `null` and the property is not `nullable` (a nullable `null` stays). The
//! defaulted value is then defaulted further by its own schema. Items of
//! arrays and values of maps (`additionalProperties`) that are non-nullable
//! `null`s take the default of their schema.
//!
//! [`prune_defaults`] is what the server does to a CRD's schema before using
//! it: every default is pruned by the schema of its node, so that defaults
//! never bring unknown fields in.

use serde_json::Value;

use super::prune::prune_value;
use super::types::{AdditionalProperties, Structural};

fn non_nullable_null(v: &Value, s: Option<&Structural>) -> bool {
    v.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies the defaults of `schema` to `value`.
pub fn default(schema: &Structural, value: &mut Value) {
    match value {
        Value::Object(m) => {
            for (k, ps) in &schema.properties {
                let Some(d) = &ps.default else { continue };
                let absent_or_null = match m.get(k) {
                    None => true,
                    Some(v) => non_nullable_null(v, Some(ps)),
                };
                if absent_or_null {
                    m.insert(k.clone(), d.clone());
                }
            }
            let ap = schema
                .additional_properties
                .as_ref()
                .and_then(|a| a.schema());
            for (k, v) in m.iter_mut() {
                if let Some(ps) = schema.properties.get(k) {
                    default(ps, v);
                } else if let Some(ap) = ap {
                    if non_nullable_null(v, Some(ap)) {
                        if let Some(d) = &ap.default {
                            *v = d.clone();
                        }
                    }
                    default(ap, v);
                }
            }
        }
        Value::Array(a) => {
            let Some(items) = schema.items.as_deref() else {
                return;
            };
            for v in a.iter_mut() {
                if non_nullable_null(v, Some(items)) {
                    if let Some(d) = &items.default {
                        *v = d.clone();
                    }
                }
                default(items, v);
            }
        }
        _ => {}
    }
}

/// Removes `null`s that are neither nullable nor defaulted (kube's
/// `PruneNonNullableNullsWithoutDefaults`, run on request bodies before
/// [`default`]); non-nullable `null`s with a default are left for
/// [`default`] to replace.
pub fn prune_nulls(schema: &Structural, value: &mut Value) {
    prune_nulls_at(Some(schema), value);
}

fn field_schema<'a>(s: Option<&'a Structural>, k: &str) -> Option<&'a Structural> {
    let s = s?;
    s.properties
        .get(k)
        .or_else(|| s.additional_properties.as_ref().and_then(|a| a.schema()))
}

fn prune_nulls_at(s: Option<&Structural>, value: &mut Value) {
    match value {
        Value::Object(m) => {
            m.retain(|k, v| {
                let fs = field_schema(s, k);
                !(v.is_null() && fs.is_some_and(|fs| !fs.nullable && fs.default.is_none()))
            });
            for (k, v) in m.iter_mut() {
                prune_nulls_at(field_schema(s, k), v);
            }
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for v in a.iter_mut() {
                prune_nulls_at(items, v);
            }
        }
        _ => {}
    }
}

/// Prunes every `default` in `schema` by the schema of its node (kube's
/// `PruneDefaults`); returns whether anything changed.
pub fn prune_defaults(schema: &mut Structural) -> bool {
    let mut changed = false;
    if let Some(mut d) = schema.default.take() {
        let before = d.clone();
        prune_value(schema, &mut d, schema.extensions.embedded_resource);
        changed |= d != before;
        schema.default = Some(d);
    }
    for ps in schema.properties.values_mut() {
        changed |= prune_defaults(ps);
    }
    if let Some(items) = schema.items.as_deref_mut() {
        changed |= prune_defaults(items);
    }
    if let Some(AdditionalProperties::Schema(ap)) = schema.additional_properties.as_mut() {
        changed |= prune_defaults(ap);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Structural {
        Structural::from_json(&v).unwrap()
    }

    #[test]
    fn absent_and_non_nullable_null_fields_are_defaulted() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "note": {"type": "string", "nullable": true, "default": "n"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}}
            }}
        }}));
        let mut v = json!({"apiVersion": "a/v1", "kind": "K"});
        default(&s, &mut v);
        assert_eq!(
            v["spec"],
            json!({"replicas": 1, "mode": "fast", "note": "n"})
        );
        let mut v = json!({"spec": {"replicas": null, "mode": "slow", "note": null,
                                     "ports": [{}, {"protocol": "UDP"}], "labels": {"a": null}}});
        default(&s, &mut v);
        assert_eq!(
            v["spec"],
            json!({"replicas": 1, "mode": "slow", "note": null,
                   "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}], "labels": {"a": "x"}})
        );
    }

    #[test]
    fn defaults_are_defaulted_further_once_pruned() {
        let mut s = schema(json!({"type": "object", "properties": {"spec": {
        "type": "object", "default": {"replicas": 3, "junk": 1},
        "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "x"}
        }}}}));
        prune_defaults(&mut s);
        let mut v = json!({});
        default(&s, &mut v);
        assert_eq!(v, json!({"spec": {"replicas": 3, "mode": "x"}}));
    }

    #[test]
    fn non_nullable_nulls_without_defaults_are_dropped() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "nullable": true},
            "c": {"type": "string", "default": "x"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "l": {"type": "array", "items": {"type": "object", "properties": {"z": {"type": "integer"}}}}
        }}));
        let mut v = json!({"a": null, "b": null, "c": null, "m": {"k": null}, "l": [{"z": null}, null], "u": null});
        prune_nulls(&s, &mut v);
        assert_eq!(
            v,
            json!({"b": null, "c": null, "m": {}, "l": [{}, null], "u": null})
        );
        default(&s, &mut v);
        assert_eq!(v["c"], json!("x"));
    }

    #[test]
    fn defaults_are_pruned_by_their_schema() {
        let mut s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {"a": 1, "junk": true},
                     "properties": {"a": {"type": "integer"}}}
        }}));
        assert!(prune_defaults(&mut s));
        assert_eq!(s.properties["spec"].default, Some(json!({"a": 1})));
        assert!(!prune_defaults(&mut s));
    }
}

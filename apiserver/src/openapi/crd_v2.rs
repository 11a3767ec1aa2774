//! A custom resource's definition as OpenAPI v2 publishes it. kube builds
//! v2 from the CRD's structural schema with changes made for kubectl,
//! whose client-side validation (used for the items of a `List`, and for
//! kinds the server does not validate) reads v2 and calls every field
//! outside `properties` unknown (apiextensions-apiserver
//! pkg/controller/openapi: `builder.buildKubeNative` with `V2`, and
//! `v2.ToStructuralOpenAPIV2`):
//! - a schema that keeps unknown fields at its root is published as a
//!   bare `object` (with its group-version-kind), nothing else;
//! - elsewhere, a node that keeps unknown fields loses `properties` and
//!   `items` (and `type: object`); a nullable node loses its type,
//!   `properties` and `items`; an array left without items loses its
//!   type; `allOf`, `anyOf`, `oneOf` and `not` go (v2 has no use for
//!   them); a nullable property is no longer `required`, nor is anything
//!   when `additionalProperties` is nullable.
//!
//! v3 publishes the schema as written.

use serde_json::{Map, Value};

const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
const GVK: &str = "x-kubernetes-group-version-kind";

fn flag(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_bool) == Some(true)
}

/// The v2 form of a custom kind's definition (`def`: its v3 form, with
/// `metadata`, `apiVersion` and `kind` among its properties).
#[cfg(test)]
pub(super) fn definition(def: &Value) -> Value {
    match def {
        Value::Object(root) => definition_of(root),
        other => other.clone(),
    }
}

/// [`definition`] of a definition's object, as the v2 document is written
/// (one kind at a time, dropped once written).
pub(super) fn definition_of(root: &Map<String, Value>) -> Value {
    if flag(root, PRESERVE) {
        let mut bare = Map::new();
        bare.insert("type".into(), Value::String("object".into()));
        if let Some(gvk) = root.get(GVK) {
            bare.insert(GVK.into(), gvk.clone());
        }
        return Value::Object(bare);
    }
    let mut out = Value::Object(root.clone());
    node(&mut out);
    out
}

/// One node and, after it, its children (kube's visitor order: a parent
/// reads its children's `nullable` before they drop it).
fn node(v: &mut Value) {
    let Value::Object(m) = v else { return };
    for junctor in ["allOf", "anyOf", "oneOf", "not"] {
        m.remove(junctor);
    }
    if flag(m, "nullable") {
        m.remove("type");
        m.remove("nullable");
        m.remove("items");
        m.remove("properties");
    }
    let preserve = flag(m, PRESERVE);
    if preserve {
        m.remove("items");
        m.remove("properties");
    }
    let is_type =
        |m: &Map<String, Value>, t: &str| m.get("type").and_then(Value::as_str) == Some(t);
    if !m.contains_key("items") && is_type(m, "array") {
        m.remove("type");
    }
    if preserve && is_type(m, "object") {
        m.remove("type");
    }
    let nullable_props: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.as_object().is_some_and(|s| flag(s, "nullable")))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if !nullable_props.is_empty() {
        if let Some(Value::Array(req)) = m.get_mut("required") {
            req.retain(|r| {
                r.as_str()
                    .is_none_or(|r| !nullable_props.iter().any(|n| n == r))
            });
            if req.is_empty() {
                m.remove("required");
            }
        }
    }
    if m.get("additionalProperties")
        .and_then(Value::as_object)
        .is_some_and(|a| flag(a, "nullable"))
    {
        m.remove("required");
    }
    if let Some(items) = m.get_mut("items") {
        node(items);
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(node);
    }
    if let Some(ap @ Value::Object(_)) = m.get_mut("additionalProperties") {
        node(ap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gvk() -> Value {
        json!([{"group": "example.com", "version": "v1", "kind": "Thing"}])
    }

    #[test]
    fn a_root_that_keeps_unknown_fields_is_a_bare_object() {
        let def = json!({
            "type": "object", "description": "d",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"spec": {"type": "object"},
                           "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}},
            "x-kubernetes-group-version-kind": gvk(),
        });
        assert_eq!(
            definition(&def),
            json!({"type": "object", "x-kubernetes-group-version-kind": gvk()})
        );
    }

    #[test]
    fn nested_nodes_follow_kubes_v2_conversion() {
        let def = json!({
            "type": "object",
            "required": ["spec", "opt"],
            "properties": {
                "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "description": "kept",
                         "properties": {"a": {"type": "string"}}},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                         "items": {"type": "string"}},
                "opt": {"type": "object", "nullable": true,
                        "properties": {"b": {"type": "integer"}}},
                "port": {"x-kubernetes-int-or-string": true,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "kept": {"type": "array", "items": {"type": "object",
                         "properties": {"c": {"type": "string", "oneOf": [{"minLength": 1}]}}}},
                "dict": {"type": "object", "required": ["x"],
                         "additionalProperties": {"type": "string", "nullable": true}},
            },
            "x-kubernetes-group-version-kind": gvk(),
        });
        assert_eq!(
            definition(&def),
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                    "spec": {"x-kubernetes-preserve-unknown-fields": true, "description": "kept"},
                    "list": {"x-kubernetes-preserve-unknown-fields": true},
                    "opt": {},
                    "port": {"x-kubernetes-int-or-string": true},
                    "kept": {"type": "array", "items": {"type": "object",
                             "properties": {"c": {"type": "string"}}}},
                    "dict": {"type": "object", "additionalProperties": {}},
                },
                "x-kubernetes-group-version-kind": gvk(),
            })
        );
    }

    #[test]
    fn a_schema_without_any_of_it_is_unchanged() {
        let def = json!({"type": "object", "properties": {"spec": {"type": "object",
                         "properties": {"n": {"type": "integer", "minimum": 1}}}}});
        assert_eq!(definition(&def), def);
    }
}

//! CustomResourceDefinitions as kube-apiserver stores them:
//! `apiextensions.k8s.io/v1beta1` JSON (its apiextensions server encodes
//! CRDs in v1beta1 for storage, the more compact form), with a schema,
//! subresources and printer columns shared by every version hoisted to
//! `spec.validation`, `spec.subresources` and
//! `spec.additionalPrinterColumns`. This server serves v1 only: a stored
//! v1beta1 CRD is read as the v1 object kube would serve for it. What this
//! server writes is v1, which kube-apiserver reads too.
//!
//! Model floor (the CRD kind's built-in row names [`STORED_V1BETA1`]):
//! imports nothing of this crate.

use apimachinery::kinds::Conversion;
use serde_json::{Map, Value};

pub const V1: &str = "apiextensions.k8s.io/v1";
pub const V1BETA1: &str = "apiextensions.k8s.io/v1beta1";

/// Stored CRDs of either version, served as v1.
pub static STORED_V1BETA1: Conversion = Conversion {
    storage_version: V1,
    convert,
};

fn convert(obj: &Value, to: &str) -> Value {
    if to != V1 || obj.get("apiVersion").and_then(Value::as_str) != Some(V1BETA1) {
        return obj.clone();
    }
    to_v1(obj)
}

/// A v1beta1 CRD as v1 (kube's v1beta1 → internal → v1 conversion).
pub fn to_v1(obj: &Value) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = Value::String(V1.into());
    let Some(Value::Object(spec)) = out.get_mut("spec") else {
        return out;
    };
    let version = spec.shift_remove("version");
    let validation = spec.shift_remove("validation");
    let subresources = spec.shift_remove("subresources");
    let columns = spec.shift_remove("additionalPrinterColumns");
    let no_versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .is_none_or(|v| v.is_empty());
    if no_versions {
        if let Some(Value::String(name)) = version {
            let mut v = Map::new();
            v.insert("name".into(), Value::String(name));
            v.insert("served".into(), Value::Bool(true));
            v.insert("storage".into(), Value::Bool(true));
            spec.insert("versions".into(), Value::Array(vec![Value::Object(v)]));
        }
    }
    if let Some(Value::Array(versions)) = spec.get_mut("versions") {
        for v in versions.iter_mut() {
            let Value::Object(v) = v else { continue };
            if let Some(schema) = &validation {
                v.entry("schema").or_insert_with(|| schema.clone());
            }
            if let Some(sub) = &subresources {
                v.entry("subresources").or_insert_with(|| sub.clone());
            }
            if let Some(cols) = &columns {
                v.entry("additionalPrinterColumns")
                    .or_insert_with(|| cols.clone());
            }
            if let Some(Value::Array(cols)) = v.get_mut("additionalPrinterColumns") {
                for c in cols.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(path) = c.shift_remove("JSONPath") {
                        c.insert("jsonPath".into(), path);
                    }
                }
            }
        }
    }
    // v1beta1's default (kube's SetDefaults_CustomResourceDefinitionSpec).
    spec.entry("preserveUnknownFields")
        .or_insert(Value::Bool(true));
    if let Some(Value::Object(conv)) = spec.get_mut("conversion") {
        let client = conv.shift_remove("webhookClientConfig");
        let reviews = conv.shift_remove("conversionReviewVersions");
        if client.is_some() {
            let mut hook = Map::new();
            hook.insert("clientConfig".into(), client.unwrap_or_default());
            hook.insert(
                "conversionReviewVersions".into(),
                reviews.unwrap_or_else(|| Value::Array(vec![Value::String("v1beta1".into())])),
            );
            conv.insert("webhook".into(), Value::Object(hook));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hoisted_fields_go_back_to_each_version() {
        let stored = json!({
            "apiVersion": V1BETA1, "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "version": "v1",
                "names": {"plural": "widgets", "kind": "Widget"},
                "scope": "Namespaced",
                "validation": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}],
                "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v2", "served": true, "storage": false}],
                "conversion": {"strategy": "Webhook", "webhookClientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]},
                "preserveUnknownFields": false
            }
        });
        let v1 = convert(&stored, V1);
        assert_eq!(v1["apiVersion"], V1);
        let spec = &v1["spec"];
        assert!(spec.get("version").is_none() && spec.get("validation").is_none());
        for v in spec["versions"].as_array().unwrap() {
            assert_eq!(v["schema"]["openAPIV3Schema"]["type"], "object");
            assert_eq!(v["subresources"], json!({"status": {}}));
            assert_eq!(v["additionalPrinterColumns"][0]["jsonPath"], ".spec.size");
        }
        assert_eq!(
            spec["conversion"]["webhook"]["clientConfig"]["url"],
            "https://x"
        );
        assert_eq!(spec["preserveUnknownFields"], false);
        // v1 objects pass through.
        assert_eq!(convert(&v1, V1), v1);
    }

    #[test]
    fn a_single_version_names_its_version() {
        let stored = json!({"apiVersion": V1BETA1, "spec": {"version": "v1alpha1"}});
        let v1 = convert(&stored, V1);
        assert_eq!(
            v1["spec"]["versions"],
            json!([{"name": "v1alpha1", "served": true, "storage": true}])
        );
        assert_eq!(v1["spec"]["preserveUnknownFields"], true);
    }
}

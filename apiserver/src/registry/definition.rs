//! The CustomResourceDefinition kind itself, as its built-in row serves it:
//! its group and plural, the clean-up finalizer, its defaults and
//! validation ([`DEFINITION_RULES`]) and how a stored v1beta1 CRD reads as
//! v1 ([`v1beta1`]). What a CRD defines (rows of its own) is built in
//! `crate::crd`, above the registry.
//!
//! Model floor, under the registry: imports only [`super::cel`] (a CRD's
//! CEL rules must compile), nothing of `crd`, `conversion`, `error` or
//! `object`.

pub mod v1beta1;

use super::cel;
use apimachinery::crd::Structural;
use apimachinery::status::StatusCause;
use serde_json::{json, Value};

/// Held by a CRD being deleted until every custom resource it defined is gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CRD API's group and plural.
pub const GROUP: &str = "apiextensions.k8s.io";
pub const PLURAL: &str = "customresourcedefinitions";

/// What a CustomResourceDefinition does beyond its schema.
pub static DEFINITION_RULES: apimachinery::kinds::KindRules = apimachinery::kinds::KindRules {
    defaults: Some(default_definition),
    validate: Some(validate_definition),
    validate_status: Some(validate_definition),
    ..apimachinery::kinds::KindRules::NONE
};

/// The CRD kind's defaults (kube's v1 SetDefaults): the singular name and
/// list kind from the kind, conversion strategy `None`, port 443 for a
/// conversion webhook's service.
pub fn default_definition(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if empty(names.get("singular")) {
            names.insert("singular".into(), Value::String(kind.to_lowercase()));
        }
        if empty(names.get("listKind")) && !kind.is_empty() {
            names.insert("listKind".into(), Value::String(format!("{kind}List")));
        }
    }
    let conversion = spec
        .entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    if let Some(port) = conversion.pointer_mut("/webhook/clientConfig/service") {
        if let Some(svc) = port.as_object_mut() {
            svc.entry("port").or_insert(json!(443));
        }
    }
}

/// The schema `crd` has for the version of the same name as `version`.
fn version_schema<'a>(crd: &'a Value, version: &Value) -> Option<&'a Value> {
    let name = version.get("name")?;
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name") == Some(name))?
        .pointer("/schema/openAPIV3Schema")
}

/// The CRD kind's validation (its registry row's rule): kube's CRD rules,
/// then each version's CEL rules must compile and fit the cost limit.
pub fn validate_definition(crd: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut causes = apimachinery::crd::validate_crd(crd, old);
    if !causes.is_empty() {
        return causes;
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // kube's ratcheting: expressions the CRD already had are compiled
    // again, not type-checked again.
    let preexisting = old.map(cel::preexisting_expressions).unwrap_or_default();
    for (i, v) in versions.iter().enumerate() {
        let Some(schema) = v.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        if let Ok(st) = Structural::from_json(schema) {
            // Where kube reports this version's schema (`spec.validation`
            // when every version has the same one).
            let base = apimachinery::crd::schema_field_path(crd, i);
            // kube lifts the per-expression cost limit on an update that
            // leaves this version's schema as it was.
            let unchanged = old.is_some_and(|o| version_schema(o, v) == Some(schema));
            causes.extend(cel::definition_errors(&base, &st, &preexisting, unchanged));
        }
    }
    causes
}

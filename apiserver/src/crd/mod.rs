//! CustomResourceDefinitions: how a CRD becomes rows of the registry.
//!
//! A CRD is stored like any built-in object. Every replica follows the CRD
//! collection from its watch cache ([`controller`]) and, for each CRD whose
//! `Established` condition is true, installs one registry row per served
//! version ([`rows`]). From then on every generic path (routing, storage
//! keys `<prefix>/<group>/<plural>/...`, the watch cache, discovery,
//! OpenAPI, field selectors, RBAC, audit) serves it unchanged. The elected
//! leader alone writes CRD status (names accepted, established, stored
//! versions) and runs the deletion clean-up.
//!
//! Rows own their data and are reference counted ([`Row`]): a row, its
//! schemas, validators and compiled CEL programs are freed once the
//! registry has dropped it and no request, watch or controller still holds
//! it. While any holder lives, the same CRD definition yields the same
//! rows ([`rows`] keeps a weak reference to what it built), so an
//! unchanged CRD does not move the registry's generation.

pub mod controller;
pub mod conversion;
pub mod names;
pub mod rules;
pub mod status;
pub mod v1beta1;

use crate::object::strings;
use crate::registry::{NameRule, Resource, Row, Shared, Str, Subresource};
use apimachinery::crd::{SchemaValidator, Structural};
use apimachinery::jsonpath;
use apimachinery::read::FieldAttr;
use apimachinery::status::StatusCause;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub(crate) use apimachinery::version::compare_versions as version_order;
pub use names::accepted_names;

/// Held by a CRD being deleted until every custom resource it defined is gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CRD API's group and plural.
pub const GROUP: &str = "apiextensions.k8s.io";
pub const PLURAL: &str = "customresourcedefinitions";

/// One `additionalPrinterColumns` entry, its path parsed.
#[derive(Debug)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub path: jsonpath::Path,
}

/// How many [`CustomInfo`]s (one per served version of a CRD, with its
/// schema, validators and CEL programs) are alive in this process: the
/// registry's, and those still held by requests, watches and controllers
/// after the registry dropped them (`apiserver_custom_resource_rows`).
static LIVE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The number of custom resource rows alive (see [`LIVE`]).
pub fn live_rows() -> i64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

impl Drop for CustomInfo {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What a CRD says of one served version.
#[derive(Debug)]
pub struct CustomInfo {
    /// The CRD's name (`<plural>.<group>`).
    pub crd: String,
    /// The version objects are stored in.
    pub storage_version: String,
    /// `deprecationWarning` (or kube's default text) when the version is
    /// deprecated.
    pub deprecation: Option<String>,
    pub columns: Vec<PrinterColumn>,
    /// The version's schema as a one-kind definitions set (the CR kind plus
    /// the ObjectMeta family it refers to).
    schema: apimachinery::schema::Schema,
    definition: String,
    /// Its structural form (`None` if it is not structural: only a CRD
    /// stored before validation could have that), defaults pruned.
    /// Boxed: the compiled rules know schema nodes by address, so the
    /// schema must not move once they are compiled.
    structural: Option<Box<SchemaValidator>>,
    /// Its `x-kubernetes-validations`, compiled.
    rules: rules::Rules,
    /// The conversion webhook (strategy `Webhook`; `Err`: unusable
    /// configuration); `None` for strategy `None`.
    conversion: Option<Result<crate::webhook::Webhook, String>>,
    /// Whether the CRD is being deleted: its resources may be read and
    /// deleted, not created.
    pub terminating: bool,
    /// Whether the schema has any `default`.
    has_defaults: bool,
}

fn has_defaults(s: &Structural) -> bool {
    s.default.is_some()
        || s.properties.values().any(has_defaults)
        || s.items.as_deref().is_some_and(has_defaults)
        || s.additional_properties
            .as_ref()
            .and_then(|a| a.schema())
            .is_some_and(has_defaults)
}

/// Whether `apimachinery::crd::default` would change `v` (the same walk,
/// reading only, so that reads copy an object only when they must).
fn would_default(s: &Structural, v: &Value) -> bool {
    let null_defaulted =
        |v: &Value, s: &Structural| v.is_null() && !s.nullable && s.default.is_some();
    match v {
        Value::Object(m) => {
            for (k, ps) in &s.properties {
                if ps.default.is_some() && m.get(k).is_none_or(|x| x.is_null() && !ps.nullable) {
                    return true;
                }
            }
            let ap = s.additional_properties.as_ref().and_then(|a| a.schema());
            m.iter().any(|(k, x)| match (s.properties.get(k), ap) {
                (Some(ps), _) => would_default(ps, x),
                (None, Some(ap)) => null_defaulted(x, ap) || would_default(ap, x),
                (None, None) => false,
            })
        }
        Value::Array(a) => s.items.as_deref().is_some_and(|it| {
            a.iter()
                .any(|x| null_defaulted(x, it) || would_default(it, x))
        }),
        _ => false,
    }
}

impl CustomInfo {
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'_>> {
        self.schema.by_name(&self.definition)
    }

    /// Whether the schema has any `default` at all.
    pub fn has_defaults(&self) -> bool {
        self.has_defaults
    }

    /// Whether applying the schema's defaults would change `obj`.
    pub fn would_default(&self, obj: &Value) -> bool {
        self.has_defaults
            && self
                .structural
                .as_ref()
                .is_some_and(|s| would_default(s.schema(), obj))
    }

    /// `obj` with the schema's defaults applied.
    pub fn apply_defaults(&self, obj: &mut Value) {
        if let Some(s) = &self.structural {
            apimachinery::crd::default(s.schema(), obj);
        }
    }

    /// What kube does to a custom resource on its way in: nulls where the
    /// schema does not allow them and unknown fields pruned, then defaults
    /// applied.
    pub fn prepare(&self, obj: &mut Value) {
        if let Some(v) = &self.structural {
            let s = v.schema();
            apimachinery::crd::prune_nulls(s, obj);
            apimachinery::crd::prune(s, obj);
            apimachinery::crd::default(s, obj);
        }
    }

    /// The schema's value validations, then (when those pass) its CEL
    /// rules; `old` is the stored object on update.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
        let Some(v) = &self.structural else {
            return Vec::new();
        };
        // On update, values that did not change are not held to rules
        // they already broke (kube's ratcheting). The validator converts
        // the schema once, not per write.
        let mut errs = match old {
            Some(old) => v.validate_update(obj, old),
            None => v.validate(obj),
        };
        if self.rules.is_empty() {
            return errs;
        }
        // As kube: type errors block the rules (they would see values of
        // the wrong type); other schema errors do not.
        if errs
            .iter()
            .any(|c| c.reason == apimachinery::status::cause::FIELD_VALUE_TYPE_INVALID)
        {
            errs.push(StatusCause::new(
                apimachinery::status::cause::FIELD_VALUE_INVALID,
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                "<nil>",
            ));
            return errs;
        }
        errs.extend(self.rules.evaluate(v.schema(), obj, old));
        errs
    }
}

/// The CRD kind's defaults (kube's v1 SetDefaults): the singular name and
/// list kind from the kind, conversion strategy `None`, port 443 for a
/// conversion webhook's service.
/// What a CustomResourceDefinition does beyond its schema.
pub static DEFINITION_RULES: apimachinery::kinds::KindRules = apimachinery::kinds::KindRules {
    defaults: Some(default_definition),
    validate: Some(validate_definition),
    validate_status: Some(validate_definition),
    ..apimachinery::kinds::KindRules::NONE
};

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
    for (i, v) in versions.iter().enumerate() {
        let Some(schema) = v.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        if let Ok(st) = Structural::from_json(schema) {
            // Where kube reports this version's schema (`spec.validation`
            // when every version has the same one).
            let base = apimachinery::crd::schema_field_path(crd, i);
            causes.extend(rules::definition_errors(&base, &st));
        }
    }
    causes
}

fn name_list(v: &[String]) -> Shared<[Str]> {
    Shared::owned_slice(v.iter().map(|s| Str::owned(s)).collect())
}

/// Whether a CRD's `status.conditions` has `type` with status True.
pub fn condition_true(crd: &Value, type_: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The definitions every CR schema refers to (ObjectMeta and what it uses),
/// copied from the built-in schema once.
fn meta_definitions() -> &'static Map<String, Value> {
    static META: OnceLock<Map<String, Value>> = OnceLock::new();
    META.get_or_init(|| {
        let defs = apimachinery::schema::builtin().definitions();
        let mut out = Map::new();
        let mut todo = vec!["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".to_string()];
        while let Some(name) = todo.pop() {
            if out.contains_key(&name) {
                continue;
            }
            let Some(def) = defs.get(&name) else { continue };
            collect_refs(def, &mut todo);
            out.insert(name, def.clone());
        }
        out
    })
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                if let Some(n) = r.strip_prefix("#/definitions/") {
                    out.push(n.to_string());
                }
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// kube's OpenAPI definition name of a custom kind: the group reversed,
/// then version and kind (`com.example.v1.Widget`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

fn version_schema(
    group: &str,
    version: &str,
    kind: &str,
    openapi: &Value,
) -> (String, Map<String, Value>) {
    let mut root = openapi.as_object().cloned().unwrap_or_default();
    root.entry("type").or_insert_with(|| json!("object"));
    let props = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut props = props;
    props.insert(
        "metadata".into(),
        json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}),
    );
    props
        .entry("apiVersion")
        .or_insert_with(|| json!({"type": "string"}));
    props
        .entry("kind")
        .or_insert_with(|| json!({"type": "string"}));
    root.insert("properties".into(), Value::Object(props));
    root.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "version": version, "kind": kind}]),
    );
    let name = definition_name(group, version, kind);
    let mut defs = meta_definitions().clone();
    defs.insert(name.clone(), Value::Object(root));
    (name, defs)
}

fn columns(v: &Value) -> Vec<PrinterColumn> {
    let list = v
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    let Some(list) = list else {
        // kube's columns for a version that declares none.
        return vec![PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
            priority: 0,
            path: jsonpath::Path::parse(".metadata.creationTimestamp").expect("static path"),
        }];
    };
    list.iter()
        .filter_map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let text = c.get("jsonPath")?.as_str()?;
            let path = jsonpath::Path::parse(text).ok()?;
            let description = match s("description") {
                d if d.is_empty() => {
                    format!("Custom resource definition column (in JSONPath format): {text}")
                }
                d => d,
            };
            Some(PrinterColumn {
                name: s("name"),
                type_: s("type"),
                format: s("format"),
                description,
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path,
            })
        })
        .collect()
}

fn pointer_of(path: Option<&Value>) -> Option<Str> {
    let p = jsonpath::Path::parse(path?.as_str()?).ok()?.pointer()?;
    Some(Str::owned(&p))
}

fn subresources(v: &Value) -> Shared<[Subresource]> {
    let Some(sub) = v.get("subresources") else {
        return Shared::default();
    };
    let mut out = Vec::new();
    if sub.get("status").is_some() {
        out.push(Subresource::Status);
    }
    if let Some(scale) = sub.get("scale") {
        if let (Some(spec), Some(status)) = (
            pointer_of(scale.get("specReplicasPath")),
            pointer_of(scale.get("statusReplicasPath")),
        ) {
            out.push(Subresource::Scale {
                spec_replicas: spec,
                status_replicas: status,
                selector: pointer_of(scale.get("labelSelectorPath")).unwrap_or(Shared::Static("")),
                // A CR's selector path holds the string form.
                selector_is_map: false,
            });
        }
    }
    Shared::owned_slice(out)
}

fn field_attrs(v: &Value) -> Shared<[FieldAttr]> {
    let attrs: Vec<FieldAttr> = v
        .get("selectableFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    let path = f.get("jsonPath")?.as_str()?;
                    let pointer = jsonpath::Path::parse(path).ok()?.pointer()?;
                    Some(FieldAttr {
                        name: Str::owned(path.trim_start_matches('.')),
                        pointer: Str::owned(&pointer),
                        default: Shared::Static(""),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Shared::owned_slice(attrs)
}

fn drop_descriptions(s: &mut Structural) {
    s.description = String::new();
    s.properties.values_mut().for_each(drop_descriptions);
    if let Some(items) = s.items.as_deref_mut() {
        drop_descriptions(items);
    }
    if let Some(apimachinery::crd::types::AdditionalProperties::Schema(ap)) =
        s.additional_properties.as_mut()
    {
        drop_descriptions(ap);
    }
}

/// The registry rows of a CRD: one per served version, in kube's version
/// priority order. While the rows built for the same spec and accepted
/// names are alive, the same rows are returned.
pub fn rows(crd: &Value) -> Vec<Row> {
    // Keyed by a 128-bit hash of what defines the rows (a CRD's spec can
    // be hundreds of kilobytes; the table keeps no copy of it). Values are
    // weak: the table never keeps rows alive, and dead entries are swept
    // as the table grows.
    static BUILT: OnceLock<Mutex<HashMap<String, Vec<Weak<Resource>>>>> = OnceLock::new();
    let null = Value::Null;
    let spec = crd.get("spec").unwrap_or(&null);
    let names = crd
        .pointer("/status/acceptedNames")
        .filter(|n| n.get("kind").is_some())
        .or_else(|| crd.pointer("/spec/names"))
        .unwrap_or(&null);
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let bytes = serde_json::to_vec(&(name, spec, names, terminating)).unwrap_or_default();
    let key = apimachinery::version::content_hash(&bytes);
    let table = BUILT.get_or_init(Default::default);
    let alive = |weak: &[Weak<Resource>]| -> Option<Vec<Row>> {
        weak.iter()
            .map(|w| w.upgrade().map(Shared::Owned))
            .collect()
    };
    if let Some(rows) = table
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .and_then(|w| alive(w))
    {
        return rows;
    }
    // Built without the lock (rows of many CRDs are built in parallel); of
    // two racing builds of one definition the first stays.
    let built = build_rows(name, spec, names, terminating);
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rows) = table.get(&key).and_then(|w| alive(w)) {
        return rows;
    }
    // Sweep the dead entries once the table has doubled since the last
    // sweep: amortised O(1) per insert, and the table stays within twice
    // the live definitions.
    static SWEPT_AT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if table.len() >= 2 * SWEPT_AT.load(std::sync::atomic::Ordering::Relaxed).max(16) {
        table.retain(|_, w| w.iter().all(|w| w.strong_count() > 0));
        SWEPT_AT.store(table.len(), std::sync::atomic::Ordering::Relaxed);
    }
    let weak = built
        .iter()
        .map(|r| match r {
            Shared::Owned(a) => Arc::downgrade(a),
            Shared::Static(_) => Weak::new(),
        })
        .collect();
    table.insert(key, weak);
    built
}

fn build_rows(crd_name: &str, spec: &Value, names: &Value, terminating: bool) -> Vec<Row> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let group = s(spec, "group");
    let kind = s(names, "kind");
    let plural = s(names, "plural");
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return Vec::new();
    }
    let singular = match s(names, "singular") {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let namespaced = s(spec, "scope") != "Cluster";
    let versions: Vec<&Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| s(v, "name"))
        .unwrap_or_default();
    let (group_s, kind_s, plural_s, singular_s) = (
        Str::owned(&group),
        Str::owned(&kind),
        Str::owned(&plural),
        Str::owned(&singular),
    );
    let short = name_list(&strings(names.get("shortNames")));
    let categories = name_list(&strings(names.get("categories")));
    let mut served: Vec<&Value> = versions
        .into_iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .collect();
    served.sort_by(|a, b| version_order(&s(a, "name"), &s(b, "name")));
    served
        .into_iter()
        .map(|v| {
            let version = s(v, "name");
            let openapi = v
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .unwrap_or_else(
                    || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                );
            let (definition, defs) = version_schema(&group, &version, &kind, &openapi);
            let structural = Structural::from_json(&openapi).ok().map(|mut st| {
                apimachinery::crd::prune_defaults(&mut st);
                // Validation never reads descriptions; OpenAPI has them.
                drop_descriptions(&mut st);
                Box::new(SchemaValidator::new(st))
            });
            // Compiled against the boxed schema, whose nodes stay put.
            let rules = structural
                .as_ref()
                .map(|v| rules::Rules::compile(v.schema()))
                .unwrap_or_default();
            let defaults = structural
                .as_ref()
                .is_some_and(|v| has_defaults(v.schema()));
            let deprecation =
                (v.get("deprecated").and_then(Value::as_bool) == Some(true)).then(|| {
                    match v.get("deprecationWarning").and_then(Value::as_str) {
                        Some(w) => w.to_string(),
                        None => format!("{group}/{version} {kind} is deprecated"),
                    }
                });
            LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let info = Arc::new(CustomInfo {
                crd: crd_name.to_string(),
                storage_version: storage_version.clone(),
                deprecation,
                columns: columns(v),
                schema: apimachinery::schema::Schema::new(defs),
                definition,
                structural,
                rules,
                conversion: conversion::webhook_of(spec),
                terminating,
                has_defaults: defaults,
            });
            Shared::Owned(Arc::new(Resource {
                group: group_s.clone(),
                version: Str::owned(&version),
                kind: kind_s.clone(),
                plural: plural_s.clone(),
                singular: singular_s.clone(),
                short_names: short.clone(),
                categories: categories.clone(),
                namespaced,
                subresources: subresources(v),
                field_attrs: field_attrs(v),
                name_rule: NameRule::Subdomain,
                immutable: &[],
                generation: true,
                create_on_update: false,
                delete_returns_object: true,
                virtual_create: None,
                computed: None,
                delete_finalizer: None,
                rules: &apimachinery::kinds::KindRules::NONE,
                hooks: None,
                ttl_lease: false,
                delete: crate::registry::DeleteRules::DEFAULT,
                keep_status_on_create: false,
                custom: Some(info),
                conversion: None,
                gc_policy: crate::registry::GcPolicy::Background,
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests;

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
//!
//! Model floor, above the registry, `object` and `error`: row building
//! ([`rows`]), names ([`names`]), status ([`status`]) and the webhook half
//! of conversion ([`conversion`]) import nothing above them. The
//! [`controller`] alone runs on the top floor (it follows and writes CRDs
//! through the backend).

pub mod controller;
pub mod conversion;
pub mod names;
pub mod status;

use crate::object::strings;
use crate::registry::custom::{CustomInfo, VersionSchema};
use crate::registry::{NameRule, Resource, Row, ScaleSelector, Shared, Str, Subresource};
use apimachinery::jsonpath;
use apimachinery::read::FieldAttr;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub(crate) use apimachinery::version::compare_versions as version_order;
pub use names::accepted_names;
// The CRD kind's own row (its finalizer, rules and stored v1beta1 form)
// and what a CRD says of a version live in the registry, below this
// module; named here too for the controller, the metrics and the table
// writer (one step: they may name the registry directly).
pub use crate::registry::custom::{definition_name, live_rows, PrinterColumn};
pub use crate::registry::definition::{v1beta1, CLEANUP_FINALIZER, GROUP, PLURAL};

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
fn meta_definitions() -> &'static Arc<Map<String, Value>> {
    static META: OnceLock<Arc<Map<String, Value>>> = OnceLock::new();
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
        Arc::new(out)
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
                selector_form: ScaleSelector::String,
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
            let openapi = v.pointer("/schema/openAPIV3Schema");
            let deprecation =
                (v.get("deprecated").and_then(Value::as_bool) == Some(true)).then(|| {
                    match v.get("deprecationWarning").and_then(Value::as_str) {
                        Some(w) => w.to_string(),
                        None => format!("{group}/{version} {kind} is deprecated"),
                    }
                });
            let info = Arc::new(CustomInfo {
                crd: crd_name.to_string(),
                storage_version: storage_version.clone(),
                deprecation,
                columns: columns(v),
                compiled: VersionSchema::new(
                    &group,
                    &version,
                    &kind,
                    meta_definitions().clone(),
                    openapi,
                ),
                conversion: conversion::webhook_of(spec),
                terminating,
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
                // kube's custom resource store leaves ReturnDeletedObject
                // unset: an immediate DELETE answers a Success Status
                // (apiextensions-apiserver pkg/registry/customresource).
                delete_returns_object: false,
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

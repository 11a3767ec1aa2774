//! The type and object metadata of embedded resources
//! (`x-kubernetes-embedded-resource`, kube's `objectmeta.Validate`).

use serde_json::{Map, Value};

use super::types::Structural;
use super::{child, index, invalid, invalid_str, key, required};
use crate::fieldvalidation::parse_group_version;
use crate::validation;
use crate::StatusCause;

/// Embedded resources anywhere in `v` (the node itself too unless `root`).
pub(crate) fn embedded_meta(
    s: &Structural,
    v: &Value,
    path: &str,
    root: bool,
    out: &mut Vec<StatusCause>,
) {
    match v {
        Value::Object(m) => {
            if s.extensions.embedded_resource && !root {
                embedded_resource(m, path, out);
            }
            for (k, x) in m {
                if let Some(ps) = s.properties.get(k) {
                    embedded_meta(ps, x, &child(path, k), false, out);
                } else if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
                    embedded_meta(ap, x, &key(path, k), false, out);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    embedded_meta(items, x, &index(path, i), false, out);
                }
            }
        }
        _ => {}
    }
}

fn embedded_resource(m: &Map<String, Value>, path: &str, out: &mut Vec<StatusCause>) {
    let api_version_path = child(path, "apiVersion");
    let kind_path = child(path, "kind");
    if !m.contains_key("apiVersion") {
        out.push(required(&api_version_path, ""));
    }
    if !m.contains_key("kind") {
        out.push(required(&kind_path, ""));
    }
    if let Some(v) = m.get("apiVersion") {
        match v {
            Value::String(s) if s.is_empty() => out.push(required(&api_version_path, "")),
            Value::String(s) => {
                if let Err(e) = parse_group_version(s) {
                    out.push(invalid_str(&api_version_path, s, &e));
                }
            }
            other => out.push(invalid(&api_version_path, other, "must be a string")),
        }
    }
    if let Some(v) = m.get("kind") {
        match v {
            Value::String(s) if s.is_empty() => out.push(required(&kind_path, "")),
            Value::String(s) => {
                let errs = validation::is_dns1035_label(&s.to_lowercase());
                if !errs.is_empty() {
                    out.push(invalid_str(
                        &kind_path,
                        s,
                        &format!(
                            "may have mixed case, but should otherwise match: {}",
                            errs.join(",")
                        ),
                    ));
                }
            }
            other => out.push(invalid(&kind_path, other, "must be a string")),
        }
    }
    if let Some(meta) = m.get("metadata") {
        let meta_path = child(path, "metadata");
        let Value::Object(meta) = meta else {
            out.push(invalid(&meta_path, meta, "must be an object"));
            return;
        };
        let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
        let name = if s("name").is_empty() {
            "fakename"
        } else {
            s("name")
        };
        out.extend(validation::validate_object_name(
            name,
            s("generateName"),
            validation::name_is_path_segment,
            &meta_path,
        ));
        let ns = s("namespace");
        if !ns.is_empty() {
            for msg in validation::is_dns1123_label(ns) {
                out.push(invalid_str(&child(&meta_path, "namespace"), ns, &msg));
            }
        }
        if let Some(l) = meta.get("labels") {
            out.extend(validation::validate_labels(l, &child(&meta_path, "labels")));
        }
        if let Some(a) = meta.get("annotations") {
            out.extend(validation::validate_annotations(
                a,
                &child(&meta_path, "annotations"),
            ));
        }
        if let Some(Value::Array(f)) = meta.get("finalizers") {
            for x in f.iter().filter_map(Value::as_str) {
                out.extend(validation::validate_finalizer_name(
                    x,
                    &child(&meta_path, "finalizers"),
                ));
            }
        }
    }
}

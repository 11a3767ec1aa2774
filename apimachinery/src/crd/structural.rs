//! Whether a schema is structural (kube's `schema.ValidateStructural`):
//!
//! * every node specifies a `type` (except under
//!   `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`),
//!   `object` at the root, `items` for arrays;
//! * `allOf`/`anyOf`/`oneOf`/`not` only restrict values: no `type`,
//!   `default`, `nullable`, `description`, `title`, `additionalProperties`
//!   or extensions under them, and every field they mention is also
//!   specified outside of them;
//! * `metadata` at the root may only restrict `name` and `generateName`;
//! * embedded resources are objects and preserve unknown fields or specify
//!   properties.
//!
//! Errors are sorted by their string form, as kube sorts them.

use regex::Regex;
use serde_json::Value;

use super::types::{AdditionalProperties, NestedValueValidation, Structural, ValueValidation};
use super::{child, forbidden, index, invalid, invalid_str, key, required};
use crate::validation::cause_to_string;
use crate::StatusCause;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The structural errors of `s`, whose path is `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`).
pub fn validate_structural(path: &str, s: &Structural) -> Vec<StatusCause> {
    let mut out = Vec::new();
    invariants(s, Level::Root, path, &mut out);
    if let Some(vv) = &s.value_validation {
        completeness_vv(vv, s, path, path, &mut out);
    }
    out.sort_by_key(cause_to_string);
    out
}

fn is_int_or_string_any_of(v: &[NestedValueValidation]) -> bool {
    let bare = |n: &NestedValueValidation, t: &str| {
        n.forbidden_generics.type_ == t
            && n.value_validation == ValueValidation::default()
            && n.items.is_none()
            && n.properties.is_empty()
            && n.additional_properties.is_none()
            && n.forbidden_generics.title.is_empty()
            && n.forbidden_generics.description.is_empty()
            && !n.forbidden_generics.nullable
            && n.forbidden_generics.default.is_none()
            && !n.forbidden_generics.additional_properties
            && n.forbidden_extensions == Default::default()
    };
    v.len() == 2 && bare(&v[0], "integer") && bare(&v[1], "string")
}

fn invariants(s: &Structural, lvl: Level, path: &str, out: &mut Vec<StatusCause>) {
    if s.type_ == "array" && s.items.is_none() {
        out.push(required(&child(path, "items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(path, "items"), out);
    }
    for (k, ps) in &s.properties {
        invariants(ps, Level::Field, &key(&child(path, "properties"), k), out);
    }
    // validateGeneric
    if let Some(ap) = &s.additional_properties {
        if lvl == Level::Root {
            out.push(forbidden(
                &child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let AdditionalProperties::Schema(aps) = ap {
            invariants(aps, Level::Field, &child(path, "additionalProperties"), out);
        }
    }
    // validateExtensions
    let x = &s.extensions;
    if x.int_or_string && x.preserve_unknown_fields {
        out.push(invalid(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if x.int_or_string && x.embedded_resource {
        out.push(invalid(
            &child(path, "x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if let Some(vv) = &s.value_validation {
        let skip_any_of = is_int_or_string_any_of(&vv.any_of);
        let skip_first_all_of_any_of = vv
            .all_of
            .first()
            .is_some_and(|a| is_int_or_string_any_of(&a.value_validation.any_of));
        value_validation(vv, skip_any_of, skip_first_all_of_any_of, path, out);
    }

    let check_metadata = lvl == Level::Root || x.embedded_resource;
    if x.embedded_resource && s.type_ != "object" {
        if s.type_.is_empty() {
            out.push(required(
                &child(path, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            out.push(invalid_str(
                &child(path, "type"),
                &s.type_,
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if s.type_.is_empty() && !x.int_or_string && !x.preserve_unknown_fields {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(required(&child(path, "type"), detail));
    }
    if x.embedded_resource && s.additional_properties.is_some() {
        out.push(forbidden(
            &child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !s.type_.is_empty() && s.type_ != "object" {
        out.push(invalid_str(
            &child(path, "type"),
            &s.type_,
            "must be object at the root",
        ));
    }
    let props = child(path, "properties");
    if check_metadata {
        for (name, want) in [
            ("kind", "string"),
            ("apiVersion", "string"),
            ("metadata", "object"),
        ] {
            if let Some(p) = s.properties.get(name) {
                if p.type_ != want {
                    out.push(invalid_str(
                        &child(&key(&props, name), "type"),
                        &p.type_,
                        &format!("must be {want}"),
                    ));
                }
            }
        }
    }
    if lvl == Level::Root {
        if let Some(meta) = s.properties.get("metadata") {
            let mut m = meta.clone();
            let has_name = m.properties.contains_key("name");
            let has_generate_name = m.properties.contains_key("generateName");
            if (has_name && has_generate_name && m.properties.len() == 2)
                || ((has_name || has_generate_name) && m.properties.len() == 1)
            {
                m.properties.clear();
            }
            m.type_.clear();
            m.default = None;
            if m.value_validation.is_none() {
                m.value_validation = Some(ValueValidation::default());
            }
            let bare = Structural {
                value_validation: Some(ValueValidation::default()),
                ..Default::default()
            };
            if m != bare {
                out.push(forbidden(
                    &key(&props, "metadata"),
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if x.embedded_resource && !x.preserve_unknown_fields && s.properties.is_empty() {
        out.push(required(
            &props,
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn value_validation(
    v: &ValueValidation,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            nested(n, false, &index(&child(path, "anyOf"), i), out);
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(n, skip, &index(&child(path, "allOf"), i), out);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested(n, false, &index(&child(path, "oneOf"), i), out);
    }
    if let Some(n) = &v.not {
        nested(n, false, &child(path, "not"), out);
    }
    if !v.pattern.is_empty() {
        if let Err(e) = Regex::new(&v.pattern) {
            out.push(invalid_str(
                &child(path, "pattern"),
                &v.pattern,
                &format!(
                    "must be a valid regular expression, but isn't: {}",
                    regex_error(&v.pattern, &e)
                ),
            ));
        }
    }
}

/// A regex syntax error worded like Go's `regexp.Compile` for the common
/// cases (`error parsing regexp: missing closing ): `(a``), else the regex
/// crate's own description.
fn regex_error(pattern: &str, e: &regex::Error) -> String {
    let s = e.to_string();
    let what = s
        .lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .map(|l| l.trim_start_matches("error:").trim().to_string())
        .unwrap_or_else(|| s.clone());
    let go = |code: &str, expr: &str| format!("error parsing regexp: {code}: `{expr}`");
    match what.as_str() {
        "unclosed group" => go("missing closing )", pattern),
        "unopened group" => go("unexpected )", pattern),
        "unclosed character class" => {
            let from = pattern.rfind('[').unwrap_or(0);
            go("missing closing ]", &pattern[from..])
        }
        "repetition operator missing expression" => {
            let op = pattern
                .chars()
                .find(|c| matches!(c, '*' | '+' | '?'))
                .map(String::from)
                .unwrap_or_default();
            go("missing argument to repetition operator", &op)
        }
        _ => what,
    }
}

fn nested(v: &NestedValueValidation, skip_any_of: bool, path: &str, out: &mut Vec<StatusCause>) {
    value_validation(&v.value_validation, skip_any_of, false, path, out);
    if let Some(items) = &v.items {
        nested(items, false, &child(path, "items"), out);
    }
    for (k, p) in &v.properties {
        nested(p, false, &key(&child(path, "properties"), k), out);
    }
    let g = &v.forbidden_generics;
    if !g.type_.is_empty() {
        out.push(forbidden(
            &child(path, "type"),
            "must be empty to be structural",
        ));
    }
    if g.additional_properties {
        out.push(forbidden(
            &child(path, "additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if g.default.is_some() {
        out.push(forbidden(
            &child(path, "default"),
            "must be undefined to be structural",
        ));
    }
    if !g.title.is_empty() {
        out.push(forbidden(
            &child(path, "title"),
            "must be empty to be structural",
        ));
    }
    if !g.description.is_empty() {
        out.push(forbidden(
            &child(path, "description"),
            "must be empty to be structural",
        ));
    }
    if g.nullable {
        out.push(forbidden(
            &child(path, "nullable"),
            "must be false to be structural",
        ));
    }
    let x = &v.forbidden_extensions;
    if x.preserve_unknown_fields {
        out.push(forbidden(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ));
    }
    if x.embedded_resource {
        out.push(forbidden(
            &child(path, "x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ));
    }
    if x.int_or_string {
        out.push(forbidden(
            &child(path, "x-kubernetes-int-or-string"),
            "must be false to be structural",
        ));
    }
    if !x.list_map_keys.is_empty() {
        out.push(forbidden(
            &child(path, "x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    if x.list_type.is_some() {
        out.push(forbidden(
            &child(path, "x-kubernetes-list-type"),
            "must be undefined to be structural",
        ));
    }
    if v.properties.contains_key("metadata") {
        out.push(forbidden(
            &key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

// ---------------------------------------------------------------------------
// Completeness: what value validations mention must be specified.

fn completeness_vv(
    v: &ValueValidation,
    s: &Structural,
    spath: &str,
    vpath: &str,
    out: &mut Vec<StatusCause>,
) {
    if let Some(n) = &v.not {
        completeness_nested(n, Some(s), spath, &child(vpath, "not"), out);
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            completeness_nested(n, Some(s), spath, &index(&child(vpath, name), i), out);
        }
    }
}

fn completeness_nested(
    v: &NestedValueValidation,
    s: Option<&Structural>,
    spath: &str,
    vpath: &str,
    out: &mut Vec<StatusCause>,
) {
    let Some(s) = s else {
        out.push(required(
            spath,
            &format!("because it is defined in {vpath}"),
        ));
        return;
    };
    completeness_vv(&v.value_validation, s, spath, vpath, out);
    if let Some(items) = &v.items {
        completeness_nested(
            items,
            s.items.as_deref(),
            &child(spath, "items"),
            &child(vpath, "items"),
            out,
        );
    }
    for (k, p) in &v.properties {
        let sp = key(&child(spath, "properties"), k);
        let vp = key(&child(vpath, "properties"), k);
        match s.properties.get(k) {
            Some(sf) => completeness_nested(p, Some(sf), &sp, &vp, out),
            None => out.push(required(&sp, &format!("because it is defined in {vp}"))),
        }
    }
}

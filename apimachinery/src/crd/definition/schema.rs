//! The schema of a CRD version: kube's OpenAPI schema checks, structural
//! rules, defaults and `x-kubernetes-*` extensions.

use serde_json::Value;

use super::super::prune::prune_value;
use super::super::structural::validate_structural;
use super::super::types::{JSONSchemaProps, SchemaOrArray, SchemaOrBool, Structural};
use super::super::validate::validate_at;
use super::super::walk::valid_field_path;
use super::super::{child, forbidden, index, invalid, invalid_str, key, not_supported, required};
use super::{get, go_strings, Opts};
use crate::StatusCause;

pub(super) fn validate_validation(
    opts: Opts,
    block: Option<&Value>,
    status_enabled: bool,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    let Some(raw) = block.and_then(|b| get(b, "openAPIV3Schema")) else {
        return;
    };
    let spath = child(path, "openAPIV3Schema");
    let props: JSONSchemaProps = match serde_json::from_value(raw.clone()) {
        Ok(p) => p,
        Err(e) => {
            out.push(invalid_str(&spath, "", &e.to_string()));
            return;
        }
    };
    let mut errs = Vec::new();
    if status_enabled {
        root_with_status(&props, raw, &spath, &mut errs);
    }
    if props.nullable {
        errs.push(forbidden(
            &child(&spath, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut init_errs = Vec::new();
    // kube looks at the rules themselves only for a valid structural schema.
    let mut rules_checked = false;
    match Structural::new(&props) {
        _ if !opts.require_structural_schema => {}
        Err(e) => init_errs.push(invalid_str(&spath, "", &e)),
        Ok(ss) => {
            let st = validate_structural(&spath, &ss);
            if st.is_empty() {
                let before = errs.len();
                validate_defaults(&ss, &spath, false, true, opts, &mut errs);
                rules_checked = errs.len() == before;
            } else {
                errs.extend(st);
            }
        }
    }
    let ctx = Ctx {
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_meta: false,
        opts,
        uncorrelatable: None,
        rules_checked,
    };
    openapi_schema(&props, &spath, &ctx, true, &mut errs);
    if errs.is_empty() {
        errs = init_errs;
    }
    out.extend(errs);
}

/// With the status subresource only some fields may be set at the root.
fn root_with_status(p: &JSONSchemaProps, raw: &Value, path: &str, out: &mut Vec<StatusCause>) {
    // JSONSchemaProps' fields in declaration order, and whether each may be
    // set at the root; kube reports the first offending one only.
    const FIELDS: &[(&str, bool)] = &[
        ("id", false),
        ("$schema", false),
        ("$ref", false),
        ("description", true),
        ("type", true),
        ("format", true),
        ("title", true),
        ("default", false),
        ("maximum", true),
        ("exclusiveMaximum", true),
        ("minimum", true),
        ("exclusiveMinimum", true),
        ("maxLength", true),
        ("minLength", true),
        ("pattern", true),
        ("maxItems", true),
        ("minItems", true),
        ("uniqueItems", true),
        ("multipleOf", true),
        ("enum", false),
        ("maxProperties", false),
        ("minProperties", false),
        ("required", true),
        ("items", true),
        ("allOf", false),
        ("oneOf", false),
        ("anyOf", false),
        ("not", false),
        ("properties", true),
        ("additionalProperties", false),
        ("patternProperties", false),
        ("dependencies", false),
        ("additionalItems", false),
        ("definitions", false),
        ("externalDocs", true),
        ("example", true),
        ("nullable", false),
        ("x-kubernetes-preserve-unknown-fields", true),
        ("x-kubernetes-embedded-resource", false),
        ("x-kubernetes-int-or-string", false),
        ("x-kubernetes-list-map-keys", false),
        ("x-kubernetes-list-type", false),
        ("x-kubernetes-map-type", false),
        ("x-kubernetes-validations", true),
    ];
    let Some(m) = raw.as_object() else { return };
    let zero = |v: &Value| match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        // Numbers are pointers in Go: present means set.
        Value::Number(_) => false,
    };
    for (name, allowed) in FIELDS {
        let Some(v) = m.get(*name) else { continue };
        if zero(v) {
            continue;
        }
        if *name == "type" {
            if p.type_ != "object" {
                out.push(invalid_str(
                    &child(path, "type"),
                    &p.type_,
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                ));
                return;
            }
            continue;
        }
        if !allowed {
            out.push(invalid(path, raw, "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"));
            return;
        }
    }
}

/// kube's `ValidateDefaults`: each default is valid for its node and pruned.
fn validate_defaults(
    s: &Structural,
    path: &str,
    inside_meta: bool,
    root: bool,
    opts: Opts,
    out: &mut Vec<StatusCause>,
) {
    if let Some(d) = &s.default {
        let dpath = child(path, "default");
        if !inside_meta && opts.require_pruned_defaults {
            let mut pruned = d.clone();
            prune_value(s, &mut pruned, s.extensions.embedded_resource);
            if &pruned != d {
                out.push(invalid(&dpath, d, "must not have unknown fields"));
            }
        }
        out.extend(validate_at(s, d, &dpath));
    }
    if let Some(items) = &s.items {
        validate_defaults(items, &child(path, "items"), inside_meta, false, opts, out);
    }
    for (k, ps) in &s.properties {
        let meta = (root || s.extensions.embedded_resource)
            && matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
        validate_defaults(
            ps,
            &key(&child(path, "properties"), k),
            inside_meta || meta,
            false,
            opts,
            out,
        );
    }
}

/// What the nodes below may carry (kube's `specStandardValidatorV3`).
#[derive(Clone)]
struct Ctx {
    allow_defaults: bool,
    disallow_reason: String,
    inside_meta: bool,
    opts: Opts,
    /// The highest node below which old and new values cannot be paired
    /// (items of non-map lists, values of maps of an unknown map type), so
    /// rules there may not use `oldSelf`.
    uncorrelatable: Option<String>,
    /// Whether the schema compiled (structural, valid defaults), the
    /// condition for kube to look at the rules' use of `oldSelf`.
    rules_checked: bool,
}

impl Ctx {
    fn forbid_defaults(&self, reason: &str) -> Ctx {
        Ctx {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            ..self.clone()
        }
    }
    fn meta(&self) -> Ctx {
        Ctx {
            inside_meta: true,
            ..self.clone()
        }
    }
    fn forbid_old_self(&self, path: &str) -> Ctx {
        Ctx {
            uncorrelatable: self
                .uncorrelatable
                .clone()
                .or_else(|| Some(path.to_string())),
            ..self.clone()
        }
    }
}

pub(super) const OPENAPI_V3_TYPES: [&str; 6] =
    ["array", "boolean", "integer", "number", "object", "string"];

/// The per-node checks of `ValidateCustomResourceDefinitionOpenAPISchema`.
fn openapi_schema(
    p: &JSONSchemaProps,
    path: &str,
    ctx: &Ctx,
    is_root: bool,
    out: &mut Vec<StatusCause>,
) {
    let before = out.len();
    // specStandardValidatorV3
    if ctx.opts.require_valid_property_type
        && !p.type_.is_empty()
        && !OPENAPI_V3_TYPES.contains(&p.type_.as_str())
    {
        let valid: Vec<String> = OPENAPI_V3_TYPES.iter().map(|x| x.to_string()).collect();
        out.push(not_supported(
            &child(path, "type"),
            &Value::String(p.type_.clone()),
            &valid,
        ));
    }
    if p.default.is_some() && !ctx.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ctx.disallow_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&ctx.disallow_reason);
        }
        out.push(forbidden(&child(path, "default"), &detail));
    }
    for (present, k) in [
        (p.id.is_some(), "id"),
        (p.additional_items.is_some(), "additionalItems"),
        (!p.pattern_properties.is_empty(), "patternProperties"),
        (!p.definitions.is_empty(), "definitions"),
        (p.dependencies.is_some(), "dependencies"),
        (p.ref_.is_some(), "$ref"),
    ] {
        if present {
            out.push(forbidden(&child(path, k), &format!("{k} is not supported")));
        }
    }
    if p.type_ == "null" {
        out.push(forbidden(
            &child(path, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if let Some(SchemaOrArray::Array(_)) = p.items.as_ref() {
        out.push(forbidden(
            &child(path, "items"),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_meta && p.x_embedded_resource {
        out.push(forbidden(
            &child(path, "x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }

    if p.unique_items {
        out.push(forbidden(
            &child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = p.additional_properties.as_ref() {
        if !p.properties.is_empty() && !matches!(ap, SchemaOrBool::Bool(true)) {
            out.push(forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let SchemaOrBool::Schema(aps) = ap {
            let sub = if ctx.inside_meta {
                ctx.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                ctx.clone()
            };
            openapi_schema(aps, &child(path, "additionalProperties"), &sub, false, out);
        }
    }
    for (k, ps) in &p.properties {
        // kube's MapIsCorrelatable: granular and atomic maps pair by key.
        let mut sub = match p.x_map_type.as_deref() {
            None | Some("granular") | Some("atomic") => ctx.clone(),
            Some(_) => ctx.forbid_old_self(path),
        };
        if (is_root || p.x_embedded_resource)
            && matches!(k.as_str(), "metadata" | "kind" | "apiVersion")
        {
            sub = sub.meta();
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {k}"));
            }
        }
        openapi_schema(ps, &key(&child(path, "properties"), k), &sub, false, out);
    }
    if let Some(n) = &p.not {
        openapi_schema(n, &child(path, "not"), ctx, false, out);
    }
    for (name, list) in [
        ("allOf", &p.all_of),
        ("oneOf", &p.one_of),
        ("anyOf", &p.any_of),
    ] {
        for (i, x) in list.iter().enumerate() {
            openapi_schema(x, &index(&child(path, name), i), ctx, false, out);
        }
    }
    for (k, x) in &p.definitions {
        openapi_schema(x, &key(&child(path, "definitions"), k), ctx, false, out);
    }
    match p.items.as_ref() {
        Some(SchemaOrArray::Schema(x)) => {
            // Only map lists pair old and new items.
            let sub = if p.x_list_type.as_deref() == Some("map") {
                ctx.clone()
            } else {
                ctx.forbid_old_self(path)
            };
            openapi_schema(x, &child(path, "items"), &sub, false, out)
        }
        Some(SchemaOrArray::Array(xs)) => {
            for (i, x) in xs.iter().enumerate() {
                openapi_schema(x, &index(&child(path, "items"), i), ctx, false, out);
            }
        }
        None => {}
    }

    extensions(p, path, ctx.opts, out);
    if ctx.rules_checked && out.len() == before {
        old_self_rules(p, path, ctx.uncorrelatable.as_deref(), out);
    }
}

/// Whether a CEL expression refers to `oldSelf` (outside string literals).
fn uses_old_self(rule: &str) -> bool {
    let b = rule.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let preceded_by_dot = start > 0 && b[start - 1] == b'.';
                if &rule[start..i] == "oldSelf" && !preceded_by_dot {
                    return true;
                }
            }
            _ => i += 1,
        }
    }
    false
}

/// kube's checks of `oldSelf` use once a rule compiles: not below an
/// uncorrelatable node, and `optionalOldSelf` only with `oldSelf`.
fn old_self_rules(
    p: &JSONSchemaProps,
    path: &str,
    uncorrelatable: Option<&str>,
    out: &mut Vec<StatusCause>,
) {
    for (i, r) in p.x_validations.iter().enumerate() {
        let rp = index(&child(path, "x-kubernetes-validations"), i);
        if r.rule.trim().is_empty() {
            continue;
        }
        if uses_old_self(&r.rule) {
            if let Some(u) = uncorrelatable {
                out.push(invalid_str(
                    &child(&rp, "rule"),
                    &r.rule,
                    &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {u}"),
                ));
            }
        } else if let Some(o) = r.optional_old_self {
            out.push(invalid(
                &child(&rp, "optionalOldSelf"),
                &Value::Bool(o),
                "may not be set if oldSelf is not used in rule",
            ));
        }
    }
}

pub(super) fn items_schema(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match p.items.as_ref() {
        Some(SchemaOrArray::Schema(x)) => Some(x),
        _ => None,
    }
}

fn extensions(p: &JSONSchemaProps, path: &str, opts: Opts, out: &mut Vec<StatusCause>) {
    if p.x_preserve_unknown_fields == Some(false) {
        out.push(invalid(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    let tpath = child(path, "type");
    let type_must_be = |t: &str, ext: &str, out: &mut Vec<StatusCause>| {
        let detail = format!("must be {t} if x-kubernetes-{ext} is specified");
        if p.type_.is_empty() {
            out.push(required(&tpath, &detail));
        } else {
            out.push(invalid_str(&tpath, &p.type_, &detail));
        }
    };
    if let Some(mt) = &p.x_map_type {
        if p.type_ != "object" {
            type_must_be("object", "map-type", out);
        }
        if mt != "atomic" && mt != "granular" {
            out.push(not_supported(
                &child(path, "x-kubernetes-map-type"),
                &Value::String(mt.clone()),
                &["atomic".into(), "granular".into()],
            ));
        }
    }
    if let Some(lt) = &p.x_list_type {
        if p.type_ != "array" {
            type_must_be("array", "list-type", out);
        } else if lt == "set" && opts.require_atomic_set_type {
            if let Some(is) = items_schema(p) {
                let lt_value = |x: &Option<String>| x.clone().map_or(Value::Null, Value::String);
                match is.type_.as_str() {
                    "array" if is.x_list_type.as_deref().is_some_and(|t| t != "atomic") => {
                        out.push(invalid(
                            &child(&child(path, "items"), "x-kubernetes-list-type"),
                            &lt_value(&is.x_list_type),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                    "object" if is.x_map_type.as_deref() != Some("atomic") => {
                        out.push(invalid(
                            &child(&child(path, "items"), "x-kubernetes-map-type"),
                            &lt_value(&is.x_list_type),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                    _ => {}
                }
            }
        }
        if !matches!(lt.as_str(), "atomic" | "set" | "map") {
            out.push(not_supported(
                &child(path, "x-kubernetes-list-type"),
                &Value::String(lt.clone()),
                &["atomic".into(), "set".into(), "map".into()],
            ));
        }
    }
    if !p.x_list_map_keys.is_empty() {
        match p.x_list_type.as_deref() {
            None => out.push(required(
                &child(path, "x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => out.push(invalid_str(
                &child(path, "x-kubernetes-list-type"),
                other,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    let keys_path = child(path, "x-kubernetes-list-map-keys");
    let keys_invalid = |detail: &str| {
        StatusCause::new(
            crate::status::cause::FIELD_VALUE_INVALID,
            format!(
                "Invalid value: {}: {detail}",
                go_strings(&p.x_list_map_keys)
            ),
            keys_path.clone(),
        )
    };
    if p.x_list_type.as_deref() == Some("map") {
        if p.x_list_map_keys.is_empty() {
            out.push(required(
                &keys_path,
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match p.items.as_ref() {
            None => out.push(required(
                &child(path, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(SchemaOrArray::Array(a)) => out.push(invalid(
                &child(path, "items"),
                &serde_json::to_value(a).unwrap_or_default(),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(SchemaOrArray::Schema(is)) if is.type_ != "object" => out.push(invalid_str(
                &child(&child(path, "items"), "type"),
                &is.type_,
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(SchemaOrArray::Schema(is)) => {
                let mut seen: Vec<&str> = Vec::new();
                for k in &p.x_list_map_keys {
                    match is.properties.get(k) {
                        Some(ks) if ks.type_ == "array" || ks.type_ == "object" => {
                            out.push(invalid_str(
                                &child(&key(&child(&child(path, "items"), "properties"), k), "type"),
                                &is.type_,
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => {
                            out.push(keys_invalid("entries must all be names of item properties"))
                        }
                    }
                    if seen.contains(&k.as_str()) {
                        out.push(keys_invalid("must not contain duplicate entries"));
                    }
                    seen.push(k);
                }
            }
        }
    }
    if opts.require_map_list_keys_map_set {
        map_list_keys_map_set(p, path, out);
    }
    validation_rules(p, path, out);
}

/// kube's `validateMapListKeysMapSet`.
pub(super) fn map_list_keys_map_set(p: &JSONSchemaProps, path: &str, out: &mut Vec<StatusCause>) {
    if let (Some(lt), Some(is)) = (p.x_list_type.as_deref(), items_schema(p)) {
        if lt == "set" || lt == "map" {
            if is.nullable {
                out.push(forbidden(
                    &child(&child(path, "items"), "nullable"),
                    &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
                ));
            }
            if lt == "map" {
                for k in &p.x_list_map_keys {
                    let Some(ks) = is.properties.get(k) else {
                        continue;
                    };
                    let kp = key(&child(&child(path, "items"), "properties"), k);
                    if !is.required.contains(k) && ks.default.is_none() {
                        out.push(required(&child(&kp, "default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"));
                    }
                    if ks.nullable {
                        out.push(forbidden(&child(&kp, "nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"));
                    }
                }
            }
        }
    }
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn has_newlines(s: &str) -> bool {
    s.contains('\n') || s.contains('\r')
}

fn validation_rules(p: &JSONSchemaProps, path: &str, out: &mut Vec<StatusCause>) {
    let structural = Structural::new(p).ok();
    for (i, r) in p.x_validations.iter().enumerate() {
        let rp = index(&child(path, "x-kubernetes-validations"), i);
        let rule = r.rule.trim();
        let msg = r.message.trim();
        if rule.is_empty() {
            out.push(required(&child(&rp, "rule"), "rule is not specified"));
        } else if !r.message.is_empty() && msg.is_empty() {
            out.push(invalid_str(
                &child(&rp, "message"),
                &r.message,
                "must be non-empty if specified",
            ));
        } else if has_newlines(msg) {
            out.push(invalid_str(
                &child(&rp, "message"),
                &r.message,
                "must not contain line breaks",
            ));
        } else if has_newlines(rule) && msg.is_empty() {
            out.push(required(
                &child(&rp, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !r.message_expression.is_empty() && r.message_expression.trim().is_empty() {
            out.push(required(
                &child(&rp, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = &r.reason {
            if !REASONS.contains(&reason.as_str()) {
                let valid: Vec<String> = REASONS.iter().map(|x| x.to_string()).collect();
                out.push(not_supported(
                    &child(&rp, "reason"),
                    &Value::String(reason.clone()),
                    &valid,
                ));
            }
        }
        let fp = &r.field_path;
        if !fp.is_empty() && fp.trim().is_empty() {
            out.push(invalid_str(
                &child(&rp, "fieldPath"),
                fp,
                "must be non-empty if specified",
            ));
        }
        if has_newlines(fp) {
            out.push(invalid_str(
                &child(&rp, "fieldPath"),
                fp,
                "must not contain line breaks",
            ));
        }
        if !fp.is_empty() {
            if let Some(st) = &structural {
                if !rule_field_path_valid(st, fp) {
                    out.push(invalid_str(
                        &child(&rp, "fieldPath"),
                        fp,
                        "must be a valid path",
                    ));
                }
            }
        }
    }
}

/// A `fieldPath` of a rule must exist in the node's schema (kube's
/// `pathValid`, array notation allowed).
fn rule_field_path_valid(root: &Structural, p: &str) -> bool {
    valid_field_path(p, root, true).is_ok()
}

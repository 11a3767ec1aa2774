//! Validation of a `CustomResourceDefinition` (`apiextensions.k8s.io/v1`) on
//! create and update, as kube-apiserver's `ValidateCustomResourceDefinition`
//! and `ValidateCustomResourceDefinitionUpdate` do it.
//!
//! Like kube, the v1 object is first read the way its conversion to the
//! internal version reads it: when every version has the same schema
//! (subresources, printer columns, selectable fields), that value moves to
//! the top level and is validated once, reported under `spec.validation`
//! (`spec.subresources`, `spec.additionalPrinterColumns`,
//! `spec.selectableFields`). Per-version values are reported under
//! `spec.versions[i]`.
//!
//! Not covered: CEL compilation and cost of `x-kubernetes-validations`
//! (rules are only checked for presence and shape), conversion webhook URL
//! and service details, the ratcheting of checks for CRDs that were stored
//! before a check existed (every check applies on update too).

use serde_json::Value;

use super::prune::prune_value;
use super::structural::validate_structural;
use super::types::{JSONSchemaProps, SchemaOrArray, SchemaOrBool, Structural};
use super::validate::validate_at;
use super::{
    child, duplicate, forbidden, index, invalid, invalid_str, key, not_supported, required,
    too_many,
};
use crate::validation::{self, go_quote};
use crate::StatusCause;

/// kube's `MaxSelectableFields`.
const MAX_SELECTABLE_FIELDS: i64 = 8;

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn b(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn strings(v: &Value, k: &str) -> Vec<String> {
    arr(v, k)
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

/// A present, non-null member.
fn get<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    v.get(k).filter(|x| !x.is_null())
}

/// Go's `%#v` of a `[]string`.
fn go_strings(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|x| go_quote(x)).collect();
    format!("[]string{{{}}}", q.join(", "))
}

fn dns1035(v: &str) -> String {
    validation::is_dns1035_label(v).join(",")
}

/// What is left per version after hoisting: schema, subresources,
/// printer columns, selectable fields.
type PerVersion<'a> = (
    Option<&'a Value>,
    Option<&'a Value>,
    &'a [Value],
    &'a [Value],
);

/// The effective (hoisted) view of the spec.
struct Spec<'a> {
    validation: Option<&'a Value>,
    subresources: Option<&'a Value>,
    columns: &'a [Value],
    selectable: &'a [Value],
    /// Per version: schema, subresources, columns, selectable fields left
    /// after hoisting.
    per_version: Vec<PerVersion<'a>>,
}

fn hoist(versions: &[Value]) -> Spec<'_> {
    let field = |v: &'_ Value, k: &str| -> Option<Value> { get(v, k).cloned() };
    let identical = |k: &str| {
        let first = versions.first().and_then(|v| field(v, k));
        versions.iter().all(|v| field(v, k) == first)
    };
    let list_identical = |k: &str| {
        let first = versions.first().map(|v| arr(v, k));
        versions.iter().all(|v| Some(arr(v, k)) == first)
    };
    let (hs, hsub, hcol, hsel) = if versions.is_empty() {
        (false, false, false, false)
    } else {
        (
            identical("schema"),
            identical("subresources"),
            list_identical("additionalPrinterColumns"),
            list_identical("selectableFields"),
        )
    };
    let first = versions.first();
    Spec {
        validation: if hs {
            first.and_then(|v| get(v, "schema"))
        } else {
            None
        },
        subresources: if hsub {
            first.and_then(|v| get(v, "subresources"))
        } else {
            None
        },
        columns: if hcol {
            first
                .map(|v| arr(v, "additionalPrinterColumns"))
                .unwrap_or(&[])
        } else {
            &[]
        },
        selectable: if hsel {
            first.map(|v| arr(v, "selectableFields")).unwrap_or(&[])
        } else {
            &[]
        },
        per_version: versions
            .iter()
            .map(|v| {
                (
                    if hs { None } else { get(v, "schema") },
                    if hsub { None } else { get(v, "subresources") },
                    if hcol {
                        &[][..]
                    } else {
                        arr(v, "additionalPrinterColumns")
                    },
                    if hsel {
                        &[][..]
                    } else {
                        arr(v, "selectableFields")
                    },
                )
            })
            .collect(),
    }
}

fn status_enabled(sub: Option<&Value>) -> bool {
    sub.and_then(|s| get(s, "status")).is_some()
}

/// Which checks apply. On create all do; on update a check is relaxed when
/// the stored CRD already violates it (kube does not tighten validation on
/// persisted data).
#[derive(Clone, Copy)]
struct Opts {
    require_open_api_schema: bool,
    require_valid_property_type: bool,
    require_pruned_defaults: bool,
    require_atomic_set_type: bool,
    require_map_list_keys_map_set: bool,
    require_recognized_conversion_review_version: bool,
    /// Whether schemas must be structural (relaxed only for a stored CRD
    /// that preserves unknown fields and already has a non-structural one).
    require_structural_schema: bool,
}

/// Every node of a schema, depth first (kube's `SchemaHas`).
fn any_node(p: &JSONSchemaProps, pred: &dyn Fn(&JSONSchemaProps) -> bool) -> bool {
    if pred(p) {
        return true;
    }
    let sub = |x: &SchemaOrBool| matches!(x, SchemaOrBool::Schema(s) if any_node(s, pred));
    match p.items.as_ref() {
        Some(SchemaOrArray::Schema(x)) if any_node(x, pred) => return true,
        Some(SchemaOrArray::Array(xs)) if xs.iter().any(|x| any_node(x, pred)) => return true,
        _ => {}
    }
    p.all_of.iter().any(|x| any_node(x, pred))
        || p.any_of.iter().any(|x| any_node(x, pred))
        || p.one_of.iter().any(|x| any_node(x, pred))
        || p.not.as_deref().is_some_and(|x| any_node(x, pred))
        || p.properties.values().any(|x| any_node(x, pred))
        || p.additional_properties.as_ref().is_some_and(sub)
        || p.pattern_properties.values().any(|x| any_node(x, pred))
        || p.additional_items.as_ref().is_some_and(sub)
        || p.definitions.values().any(|x| any_node(x, pred))
}

fn schemas_of(spec: &Value) -> Vec<JSONSchemaProps> {
    arr(spec, "versions")
        .iter()
        .filter_map(|v| get(v, "schema").and_then(|s| get(s, "openAPIV3Schema")))
        .filter_map(|raw| serde_json::from_value(raw.clone()).ok())
        .collect()
}

fn has_unpruned_defaults(p: &JSONSchemaProps) -> bool {
    let Ok(ss) = Structural::new(p) else {
        return false;
    };
    if !validate_structural("", &ss).is_empty() {
        return false;
    }
    let mut pruned = ss.clone();
    super::defaulting::prune_defaults(&mut pruned)
}

impl Opts {
    fn new(old: Option<&Value>) -> Opts {
        let Some(old) = old else {
            return Opts {
                require_open_api_schema: true,
                require_valid_property_type: true,
                require_pruned_defaults: true,
                require_atomic_set_type: true,
                require_map_list_keys_map_set: true,
                require_recognized_conversion_review_version: true,
                require_structural_schema: true,
            };
        };
        let null = Value::Null;
        let spec = old.get("spec").unwrap_or(&null);
        let schemas = schemas_of(spec);
        let has =
            |pred: &dyn Fn(&JSONSchemaProps) -> bool| schemas.iter().any(|p| any_node(p, pred));
        let review = get(spec, "conversion")
            .and_then(|c| get(c, "webhook"))
            .map(|w| strings(w, "conversionReviewVersions"))
            .unwrap_or_default();
        Opts {
            require_open_api_schema: arr(spec, "versions").iter().all(|v| {
                get(v, "schema")
                    .and_then(|s| get(s, "openAPIV3Schema"))
                    .is_some()
            }),
            require_valid_property_type: !has(&|p| {
                !p.type_.is_empty() && !OPENAPI_V3_TYPES.contains(&p.type_.as_str())
            }),
            require_pruned_defaults: !schemas.iter().any(has_unpruned_defaults),
            require_atomic_set_type: !has(&|p| {
                p.x_list_type.as_deref() == Some("set")
                    && items_schema(p).is_some_and(|is| match is.type_.as_str() {
                        "array" => is.x_list_type.as_deref().is_some_and(|t| t != "atomic"),
                        "object" => is.x_map_type.as_deref() != Some("atomic"),
                        _ => false,
                    })
            }),
            require_map_list_keys_map_set: !has(&|p| {
                let mut e = Vec::new();
                map_list_keys_map_set(p, "", &mut e);
                !e.is_empty()
            }),
            require_recognized_conversion_review_version: review.is_empty()
                || review.iter().any(|v| v == "v1" || v == "v1beta1"),
            require_structural_schema: !schemas.iter().any(|p| match Structural::new(p) {
                Ok(ss) => !validate_structural("", &ss).is_empty(),
                Err(_) => true,
            }),
        }
    }
}

/// Validates a CRD on create (`old` is `None`) or update.
pub fn validate_crd(crd: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let null = Value::Null;
    let meta = crd.get("metadata").unwrap_or(&null);
    let spec = crd.get("spec").unwrap_or(&null);
    let names = spec.get("names").unwrap_or(&null);
    let group = s(spec, "group");

    // metadata
    let name = s(meta, "name");
    let wanted = format!("{}.{}", s(names, "plural"), group);
    let name_errs = |n: &str, prefix: bool| {
        let mut e = validation::name_is_dns_subdomain(n, prefix);
        if n != wanted {
            e.push("must be spec.names.plural+\".\"+spec.group".to_string());
        }
        e
    };
    let generate_name = s(meta, "generateName");
    if !generate_name.is_empty() {
        for m in name_errs(generate_name, true) {
            out.push(invalid_str("metadata.generateName", generate_name, &m));
        }
    }
    if name.is_empty() {
        out.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in name_errs(name, false) {
            out.push(invalid_str("metadata.name", name, &m));
        }
    }
    if let Some(l) = meta.get("labels") {
        out.extend(validation::validate_labels(l, "metadata.labels"));
    }
    if let Some(a) = meta.get("annotations") {
        out.extend(validation::validate_annotations(a, "metadata.annotations"));
    }

    let mut opts = Opts::new(old);
    // Pruning, defaults and the x-kubernetes extensions need structural schemas.
    let has_extensions = schemas_of(spec).iter().any(|p| {
        any_node(p, &|n| {
            n.default.is_some()
                || n.x_embedded_resource
                || n.x_preserve_unknown_fields.is_some()
                || n.x_int_or_string
                || !n.x_list_map_keys.is_empty()
                || n.x_list_type.is_some()
                || !n.x_validations.is_empty()
        })
    });
    if !b(spec, "preserveUnknownFields") || has_extensions {
        opts.require_structural_schema = true;
    }
    validate_spec(spec, opts, &mut out);
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&null);
        let old_names = old_spec.get("names").unwrap_or(&null);
        let established = arr(old.get("status").unwrap_or(&null), "conditions")
            .iter()
            .any(|c| s(c, "type") == "Established" && s(c, "status") == "True");
        let mut immutable = |path: &str, new: &str, old: &str| {
            if new != old {
                out.push(invalid_str(path, new, "field is immutable"));
            }
        };
        if established {
            immutable("spec.scope", s(spec, "scope"), s(old_spec, "scope"));
            immutable("spec.names.kind", s(names, "kind"), s(old_names, "kind"));
        }
        immutable("spec.group", group, s(old_spec, "group"));
        immutable(
            "spec.names.plural",
            s(names, "plural"),
            s(old_names, "plural"),
        );
    }

    // status
    let status = crd.get("status").unwrap_or(&null);
    if let Some(accepted) = status.get("acceptedNames") {
        validate_names(accepted, "status.acceptedNames", &mut out);
    }
    let stored: Option<Vec<String>> = match get(status, "storedVersions") {
        Some(_) => Some(strings(status, "storedVersions")),
        None => old.and_then(|o| {
            o.get("status")
                .and_then(|st| get(st, "storedVersions"))
                .map(|_| strings(&o["status"], "storedVersions"))
        }),
    };
    if let Some(stored) = stored {
        validate_stored_versions(&stored, arr(spec, "versions"), &mut out);
    }
    out.extend(api_approval(crd, old));
    if b(spec, "preserveUnknownFields") {
        let was_true = old.is_some_and(|o| b(&o["spec"], "preserveUnknownFields"));
        if !was_true {
            out.push(invalid(
                "spec.preserveUnknownFields",
                &Value::Bool(true),
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
            ));
        }
    }

    out
}

const APPROVAL: &str = "api-approved.kubernetes.io";

#[derive(PartialEq, Eq, Clone, Copy)]
enum Approval {
    Missing,
    Invalid,
    Approved,
    Bypassed,
}

/// kube's `GetAPIApprovalState`.
fn approval_state(crd: &Value) -> (Approval, String) {
    let Some(v) = crd
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(APPROVAL))
        .and_then(Value::as_str)
    else {
        return (
            Approval::Missing,
            format!("protected groups must have approval annotation {APPROVAL:?}, see https://github.com/kubernetes/enhancements/pull/1111"),
        );
    };
    if v.starts_with("unapproved") {
        return (Approval::Bypassed, String::new());
    }
    let url_ok = ["http://", "https://"].iter().any(|p| {
        v.strip_prefix(p)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    });
    if url_ok {
        (Approval::Approved, String::new())
    } else {
        (
            Approval::Invalid,
            format!("protected groups must have approval annotation {APPROVAL:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
        )
    }
}

/// Groups under `k8s.io` and `kubernetes.io` need an approved API review.
fn api_approval(crd: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let group = crd.get("spec").map_or("", |sp| s(sp, "group"));
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|d| group == *d || group.ends_with(&format!(".{d}")));
    if !protected {
        return Vec::new();
    }
    let (state, reason) = approval_state(crd);
    if old.is_some_and(|o| approval_state(o).0 == state) {
        return Vec::new();
    }
    let path = key("metadata.annotations", APPROVAL);
    let value = crd["metadata"]["annotations"][APPROVAL]
        .as_str()
        .unwrap_or("");
    match state {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![required(&path, &reason)],
        Approval::Invalid => vec![invalid_str(&path, value, &reason)],
    }
}

fn validate_spec(spec: &Value, opts: Opts, out: &mut Vec<StatusCause>) {
    let null = Value::Null;
    let group = s(spec, "group");
    if group.is_empty() {
        out.push(required("spec.group", ""));
    } else {
        let errs = validation::is_dns1123_subdomain(group);
        if !errs.is_empty() {
            out.push(invalid_str("spec.group", group, &errs.join(",")));
        } else if group.split('.').count() < 2 {
            out.push(invalid_str(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    let scope = s(spec, "scope");
    let scopes = ["Cluster".to_string(), "Namespaced".to_string()];
    if scope.is_empty() {
        out.push(required("spec.scope", ""));
    } else if !scopes.iter().any(|x| x == scope) {
        out.push(not_supported(
            "spec.scope",
            &Value::String(scope.into()),
            &scopes,
        ));
    }

    let versions = arr(spec, "versions");
    let h = hoist(versions);
    if h.validation
        .and_then(|v| get(v, "openAPIV3Schema"))
        .is_none()
    {
        for (i, v) in versions.iter().enumerate() {
            if get(v, "schema")
                .and_then(|x| get(x, "openAPIV3Schema"))
                .is_none()
            {
                let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
                if opts.require_open_api_schema {
                    out.push(required(&path, ""));
                } else if b(v, "served") && !b(spec, "preserveUnknownFields") {
                    out.push(required(&path, "because otherwise all fields are pruned"));
                }
            }
        }
    }
    let has_defaults = schemas_of(spec)
        .iter()
        .any(|p| any_node(p, &|n| n.default.is_some()));
    if has_defaults && b(spec, "preserveUnknownFields") {
        out.push(invalid(
            "spec.preserveUnknownFields",
            &Value::Bool(true),
            "must be false in order to use defaults in the schema",
        ));
    }

    let any_status = status_enabled(h.subresources)
        || h.per_version
            .iter()
            .any(|(_, sub, _, _)| status_enabled(*sub));
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in versions.iter().enumerate() {
        let vpath = format!("spec.versions[{i}]");
        if b(v, "storage") {
            storage += 1;
        }
        let vname = s(v, "name");
        if seen.contains(&vname) {
            unique = false;
        } else {
            seen.push(vname);
        }
        let e = dns1035(vname);
        if !e.is_empty() {
            out.push(invalid_str(&child(&vpath, "name"), vname, &e));
        }
        // deprecationWarning
        let dw = v.get("deprecationWarning").and_then(Value::as_str);
        for m in deprecation_warning(b(v, "deprecated"), dw) {
            out.push(invalid(
                &child(&vpath, "deprecationWarning"),
                &dw.map_or(Value::Null, |x| Value::String(x.into())),
                &m,
            ));
        }
        let (schema, sub, cols, sel) = h.per_version[i];
        let sub_eff = if sub.is_some() { sub } else { h.subresources };
        validate_validation(
            opts,
            schema,
            status_enabled(sub_eff),
            &child(&vpath, "schema"),
            out,
        );
        validate_subresources(sub, &child(&vpath, "subresources"), out);
        for (j, c) in cols.iter().enumerate() {
            validate_column(
                c,
                &index(&child(&vpath, "additionalPrinterColumns"), j),
                out,
            );
        }
        if !sel.is_empty() {
            let sp = child(&vpath, "selectableFields");
            match schema.and_then(|x| get(x, "openAPIV3Schema")) {
                None => out.push(invalid_str(
                    &sp,
                    "",
                    "may only be set when `version.schema.openAPIV3Schema` is not included",
                )),
                Some(root) => validate_selectable(sel, root, &sp, out),
            }
        }
    }
    if !unique {
        out.push(invalid(
            "spec.versions",
            &Value::Array(versions.to_vec()),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        out.push(invalid(
            "spec.versions",
            &Value::Array(versions.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }

    let names = spec.get("names").unwrap_or(&null);
    for (k, p) in [
        ("plural", "spec.names.plural"),
        ("singular", "spec.names.singular"),
        ("kind", "spec.names.kind"),
        ("listKind", "spec.names.listKind"),
    ] {
        if s(names, k).is_empty() {
            out.push(required(p, ""));
        }
    }
    validate_names(names, "spec.names", out);

    validate_validation(opts, h.validation, any_status, "spec.validation", out);
    validate_subresources(h.subresources, "spec.subresources", out);
    for (j, c) in h.columns.iter().enumerate() {
        validate_column(c, &index("spec.additionalPrinterColumns", j), out);
    }
    if !h.selectable.is_empty() {
        match h.validation.and_then(|x| get(x, "openAPIV3Schema")) {
            None => out.push(invalid_str(
                "spec.selectableFields",
                "",
                "may only be set when validations.schema is included",
            )),
            Some(root) => validate_selectable(h.selectable, root, "spec.selectableFields", out),
        }
    }

    if let Some(conv) = get(spec, "conversion") {
        let strategy = s(conv, "strategy");
        if !strategy.is_empty() && strategy != "None" && b(spec, "preserveUnknownFields") {
            out.push(invalid_str(
                "spec.conversion.strategy",
                strategy,
                "must be None if spec.preserveUnknownFields is true",
            ));
        }
        validate_conversion(conv, opts, out);
    }
}

fn deprecation_warning(deprecated: bool, w: Option<&str>) -> Vec<String> {
    let Some(w) = w else { return Vec::new() };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut e = Vec::new();
    if w.len() > 256 {
        e.push("must be <= 256 characters long".into());
    }
    if w.is_empty() {
        e.push("must not be an empty string".into());
    }
    for (i, c) in w.char_indices() {
        if c.is_control() {
            e.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
    }
    e
}

fn validate_names(names: &Value, path: &str, out: &mut Vec<StatusCause>) {
    for k in ["plural", "singular"] {
        let v = s(names, k);
        let e = dns1035(v);
        if !v.is_empty() && !e.is_empty() {
            out.push(invalid_str(&child(path, k), v, &e));
        }
    }
    for k in ["kind", "listKind"] {
        let v = s(names, k);
        let e = dns1035(&v.to_lowercase());
        if !v.is_empty() && !e.is_empty() {
            out.push(invalid_str(
                &child(path, k),
                v,
                &format!("may have mixed case, but should otherwise match: {e}"),
            ));
        }
    }
    for (i, v) in strings(names, "shortNames").iter().enumerate() {
        let e = dns1035(v);
        if !e.is_empty() {
            out.push(invalid_str(&index(&child(path, "shortNames"), i), v, &e));
        }
    }
    let kind = s(names, "kind");
    if !kind.is_empty() && kind == s(names, "listKind") {
        out.push(invalid_str(
            &child(path, "listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, v) in strings(names, "categories").iter().enumerate() {
        let e = dns1035(v);
        if !e.is_empty() {
            out.push(invalid_str(&index(&child(path, "categories"), i), v, &e));
        }
    }
}

fn validate_stored_versions(stored: &[String], versions: &[Value], out: &mut Vec<StatusCause>) {
    let path = "status.storedVersions";
    let invalid_list = |detail: &str| {
        StatusCause::new(
            crate::status::cause::FIELD_VALUE_INVALID,
            format!("Invalid value: {}: {detail}", go_strings(stored)),
            path,
        )
    };
    if stored.is_empty() {
        out.push(invalid_list("must have at least one stored version"));
        return;
    }
    let mut remaining: Vec<(usize, &String)> = stored.iter().enumerate().collect();
    for v in versions {
        let name = s(v, "name");
        let found = stored.iter().any(|x| x == name);
        if b(v, "storage") && !found {
            out.push(invalid_list(&format!(
                "must have the storage version {name}"
            )));
        }
        remaining.retain(|(_, x)| x.as_str() != name);
    }
    for (i, v) in remaining {
        out.push(invalid_str(
            &index(path, i),
            v,
            &format!("missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"),
        ));
    }
}

// ---------------------------------------------------------------------------
// Subresources, printer columns, selectable fields, conversion.

fn simple_json_path(p: &str, path: &str, out: &mut Vec<StatusCause>) -> bool {
    if p.is_empty() {
        out.push(invalid_str(path, p, "must not be empty"));
        false
    } else if !p.starts_with('.') {
        out.push(invalid_str(
            path,
            p,
            "must be a simple json path starting with .",
        ));
        false
    } else {
        true
    }
}

fn validate_subresources(sub: Option<&Value>, path: &str, out: &mut Vec<StatusCause>) {
    let Some(scale) = sub.and_then(|x| get(x, "scale")) else {
        return;
    };
    for (k, prefix, under) in [
        ("specReplicasPath", ".spec.", ".spec"),
        ("statusReplicasPath", ".status.", ".status"),
    ] {
        let fp = child(path, &format!("scale.{k}"));
        let v = s(scale, k);
        if v.is_empty() {
            out.push(required(&fp, ""));
        } else if simple_json_path(v, &fp, out) && !v.starts_with(prefix) {
            out.push(invalid_str(
                &fp,
                v,
                &format!("should be a json path under {under}"),
            ));
        }
    }
    let lsp = s(scale, "labelSelectorPath");
    if !lsp.is_empty() {
        let fp = child(path, "scale.labelSelectorPath");
        if simple_json_path(lsp, &fp, out)
            && !lsp.starts_with(".spec.")
            && !lsp.starts_with(".status.")
        {
            out.push(invalid_str(
                &fp,
                lsp,
                "should be a json path under either .spec or .status",
            ));
        }
    }
}

fn validate_column(c: &Value, path: &str, out: &mut Vec<StatusCause>) {
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    if s(c, "name").is_empty() {
        out.push(required(&child(path, "name"), ""));
    }
    let t = s(c, "type");
    if t.is_empty() {
        out.push(required(
            &child(path, "type"),
            &format!("must be one of {TYPES}"),
        ));
    } else if !TYPES.split(',').any(|x| x == t) {
        out.push(invalid_str(
            &child(path, "type"),
            t,
            &format!("must be one of {TYPES}"),
        ));
    }
    let f = s(c, "format");
    if !f.is_empty() && !FORMATS.split(',').any(|x| x == f) {
        out.push(invalid_str(
            &child(path, "format"),
            f,
            &format!("must be one of {FORMATS}"),
        ));
    }
    let jp = s(c, "jsonPath");
    let jpath = child(path, "JSONPath");
    if jp.is_empty() {
        out.push(required(&jpath, ""));
    } else {
        simple_json_path(jp, &jpath, out);
    }
}

fn validate_selectable(sel: &[Value], root: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let Ok(schema) = Structural::from_json(root) else {
        return;
    };
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in sel.iter().enumerate() {
        let jp_path = child(&index(path, i), "jsonPath");
        let jp = s(f, "jsonPath");
        if jp.is_empty() {
            out.push(required(&jp_path, ""));
            continue;
        }
        let (fpath, node) = match super::walk::valid_field_path(jp, &schema, false) {
            Ok(r) => r,
            Err(e) => {
                out.push(invalid_str(
                    &jp_path,
                    jp,
                    &format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if fpath.split(['.', '[']).next() == Some("metadata") {
            out.push(invalid_str(
                &jp_path,
                jp,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(node.type_.as_str(), "string" | "boolean" | "integer") {
            out.push(invalid_str(&jp_path, jp, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."));
        }
        if unique.contains(&fpath) {
            out.push(duplicate(&jp_path, &Value::String(jp.into())));
        } else {
            unique.push(fpath);
        }
    }
    if unique.len() as i64 > MAX_SELECTABLE_FIELDS {
        out.push(too_many(path, unique.len() as i64, MAX_SELECTABLE_FIELDS));
    }
}

/// The conversion, reported with the internal version's field names
/// (`webhookClientConfig`, `conversionReviewVersions` directly under
/// `spec.conversion`), as kube reports them.
fn validate_conversion(conv: &Value, opts: Opts, out: &mut Vec<StatusCause>) {
    let path = "spec.conversion";
    let strategy = s(conv, "strategy");
    let strategies = ["None".to_string(), "Webhook".to_string()];
    if strategy.is_empty() {
        out.push(required(&child(path, "strategy"), ""));
    } else if !strategies.iter().any(|x| x == strategy) {
        out.push(not_supported(
            &child(path, "strategy"),
            &Value::String(strategy.into()),
            &strategies,
        ));
    }
    let webhook = get(conv, "webhook");
    let client_config = webhook.and_then(|w| get(w, "clientConfig"));
    let review: Vec<String> = webhook
        .map(|w| strings(w, "conversionReviewVersions"))
        .unwrap_or_default();
    let cpath = child(path, "webhookClientConfig");
    let rpath = child(path, "conversionReviewVersions");
    if strategy == "Webhook" {
        match client_config {
            None => out.push(required(&cpath, "required when strategy is set to Webhook")),
            Some(cc) => match (get(cc, "url"), get(cc, "service")) {
                (Some(url), None) => {
                    webhook_url(url.as_str().unwrap_or(""), &child(&cpath, "url"), out)
                }
                (None, Some(svc)) => webhook_service(svc, &child(&cpath, "service"), out),
                _ => out.push(required(
                    &cpath,
                    "exactly one of url or service is required",
                )),
            },
        }
        if review.is_empty() {
            out.push(required(&rpath, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let mut accepted = false;
            for (i, v) in review.iter().enumerate() {
                if seen.contains(&v.as_str()) {
                    out.push(invalid_str(&index(&rpath, i), v, "duplicate version"));
                    continue;
                }
                seen.push(v);
                for m in validation::is_dns1035_label(v) {
                    out.push(invalid_str(&index(&rpath, i), v, &m));
                }
                accepted |= v == "v1" || v == "v1beta1";
            }
            if opts.require_recognized_conversion_review_version && !accepted {
                out.push(StatusCause::new(
                    crate::status::cause::FIELD_VALUE_INVALID,
                    format!(
                        "Invalid value: {}: must include at least one of v1, v1beta1",
                        go_strings(&review)
                    ),
                    rpath,
                ));
            }
        }
    } else {
        if client_config.is_some() {
            out.push(forbidden(
                &cpath,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review.is_empty() {
            out.push(forbidden(
                &rpath,
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
}

/// kube's `ValidateWebhookURL` (https only), on a light reading of the URL.
fn webhook_url(url: &str, path: &str, out: &mut Vec<StatusCause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = match url.split_once("://") {
        Some((sc, rest)) if !sc.is_empty() => (sc, rest),
        _ => ("", ""),
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.split('/').next().unwrap_or("");
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        out.push(invalid_str(
            path,
            scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        out.push(invalid_str(
            path,
            host,
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        out.push(invalid_str(
            path,
            u,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        out.push(invalid_str(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        out.push(invalid_str(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// kube's `ValidateWebhookService`.
fn webhook_service(svc: &Value, path: &str, out: &mut Vec<StatusCause>) {
    if s(svc, "name").is_empty() {
        out.push(required(&child(path, "name"), "service name is required"));
    }
    if s(svc, "namespace").is_empty() {
        out.push(required(
            &child(path, "namespace"),
            "service namespace is required",
        ));
    }
    // v1 defaults the port to 443.
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        out.push(invalid(
            &child(path, "port"),
            &Value::from(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = svc.get("path").and_then(Value::as_str) else {
        return;
    };
    let ppath = child(path, "path");
    if url_path == "/" || url_path.is_empty() {
        return;
    }
    if url_path == "//" {
        out.push(invalid_str(&ppath, url_path, "segment[0] may not be empty"));
        return;
    }
    if !url_path.starts_with('/') {
        out.push(invalid_str(&ppath, url_path, "must start with a '/'"));
    }
    let trimmed = url_path.strip_prefix('/').unwrap_or(url_path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (i, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            out.push(invalid_str(
                &ppath,
                url_path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in validation::is_dns1123_subdomain(step) {
            out.push(invalid_str(&ppath, url_path, &format!("segment[{i}]: {m}")));
        }
    }
}

// ---------------------------------------------------------------------------
// Schemas.

fn validate_validation(
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
    match Structural::new(&props) {
        _ if !opts.require_structural_schema => {}
        Err(e) => init_errs.push(invalid_str(&spath, "", &e)),
        Ok(ss) => {
            let st = validate_structural(&spath, &ss);
            if st.is_empty() {
                validate_defaults(&ss, &spath, false, true, opts, &mut errs);
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

struct Ctx {
    allow_defaults: bool,
    disallow_reason: String,
    inside_meta: bool,
    opts: Opts,
}

impl Ctx {
    fn forbid_defaults(&self, reason: &str) -> Ctx {
        Ctx {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            inside_meta: self.inside_meta,
            opts: self.opts,
        }
    }
    fn meta(&self) -> Ctx {
        Ctx {
            allow_defaults: self.allow_defaults,
            disallow_reason: self.disallow_reason.clone(),
            inside_meta: true,
            opts: self.opts,
        }
    }
}

const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// The per-node checks of `ValidateCustomResourceDefinitionOpenAPISchema`.
fn openapi_schema(
    p: &JSONSchemaProps,
    path: &str,
    ctx: &Ctx,
    is_root: bool,
    out: &mut Vec<StatusCause>,
) {
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
                ctx.forbid_defaults_keep()
            };
            openapi_schema(aps, &child(path, "additionalProperties"), &sub, false, out);
        }
    }
    for (k, ps) in &p.properties {
        let mut sub = ctx.forbid_defaults_keep();
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
        Some(SchemaOrArray::Schema(x)) => openapi_schema(x, &child(path, "items"), ctx, false, out),
        Some(SchemaOrArray::Array(xs)) => {
            for (i, x) in xs.iter().enumerate() {
                openapi_schema(x, &index(&child(path, "items"), i), ctx, false, out);
            }
        }
        None => {}
    }

    extensions(p, path, ctx.opts, out);
}

impl Ctx {
    fn forbid_defaults_keep(&self) -> Ctx {
        Ctx {
            allow_defaults: self.allow_defaults,
            disallow_reason: self.disallow_reason.clone(),
            inside_meta: self.inside_meta,
            opts: self.opts,
        }
    }
}

fn items_schema(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
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
fn map_list_keys_map_set(p: &JSONSchemaProps, path: &str, out: &mut Vec<StatusCause>) {
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
    super::walk::valid_field_path(p, root, true).is_ok()
}

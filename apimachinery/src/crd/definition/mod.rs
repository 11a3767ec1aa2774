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
//! The per-part checks live in [`subresources`] and [`schema`].
//!
//! On update, checks that a stored CRD already fails are relaxed as kube
//! relaxes them (schema presence, property types, pruned defaults, atomic
//! set items, list-map keys, structural schemas with preserveUnknownFields,
//! conversion review versions, API approval).
//!
//! Not covered: CEL compilation and cost of `x-kubernetes-validations`
//! (rules are checked for shape; whether a rule uses `oldSelf` is read from
//! its text, outside string literals), the conversion webhook `caBundle`,
//! metadata of the CRD beyond name, labels and annotations (left to the
//! generic object-meta validation).

use serde_json::Value;

use super::structural::validate_structural;
use super::types::{JSONSchemaProps, SchemaOrArray, SchemaOrBool, Structural};
use super::{child, index, invalid, invalid_str, key, not_supported, required};
use crate::validation::{self, go_quote};
use crate::StatusCause;

mod schema;
mod subresources;

use schema::{items_schema, map_list_keys_map_set, validate_validation, OPENAPI_V3_TYPES};
use subresources::{
    validate_column, validate_conversion, validate_selectable, validate_subresources,
};

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

/// Where kube reports the schema of version `i` of a v1 CRD: under
/// `spec.validation.openAPIV3Schema` when every version has the same schema
/// (the conversion to the internal version moves it there), else under
/// `spec.versions[i].schema.openAPIV3Schema`. Errors about a version's
/// rules (CEL compilation, cost) belong there too.
pub fn schema_field_path(crd: &Value, i: usize) -> String {
    let versions = crd.get("spec").map_or(&[][..], |sp| arr(sp, "versions"));
    if hoist(versions).validation.is_some() {
        "spec.validation.openAPIV3Schema".to_string()
    } else {
        format!("spec.versions[{i}].schema.openAPIV3Schema")
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

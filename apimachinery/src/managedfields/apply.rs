//! Server-side apply: merging an applied configuration into the live object
//! and recording who owns what, as kube-apiserver's field manager does with
//! structured-merge-diff.
//!
//! [`apply`] runs the steps of kube's apply, in its order:
//!
//! 1. the configuration is checked: no `metadata.managedFields`, the
//!    request's `apiVersion`, only fields the schema declares;
//! 2. an existing object without managed fields first gets them: every field
//!    it has is given to an `Update` entry of `before-first-apply`;
//! 3. the configuration is merged into the live object by the schema
//!    ([`merge`]); the applier's new field set is the configuration's;
//! 4. fields the applier applied last time and omits now are removed unless
//!    another applier owns them (or they belong to nobody's last apply);
//! 5. fields whose value changes and that other managers own are conflicts:
//!    an error unless `force`, which takes them from those managers; removed
//!    fields leave every entry, and entries left empty go;
//! 6. the applier's `Apply` entry gets the new set, and `time` when the
//!    object changed; a no-op apply returns the live object as it was.
//!
//! Around that, the upgrade from client-side apply: when the `kubectl`
//! manager's apply conflicts only on fields whose live values still match
//! the `kubectl.kubernetes.io/last-applied-configuration` annotation, the
//! apply is forced; and a `kubectl` apply keeps that annotation (when the
//! object has one) equal to the applied configuration.
//!
//! Differences from kube: removed fields are deleted, never reset to a
//! default (there is no defaulting here); the only defaults known are the
//! `protocol` keys of container and service ports.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::entry::{decode_managed_fields, identifier, to_managed, Managed};
use super::fieldset::{values_equal, FieldSet, Path, PathElement};
use super::merge::{fill_defaulted_keys, keyed_field_set, merge, remove_fields, schema_errors};
use super::typed::compare_detailed;
use super::{
    cap_update_managers, default_reset_fields, remove_managed_fields, stripped,
    update_managed_fields_with_reset, write_managed_fields, ManagedFieldsEntry, FIELDS_V1,
    MAX_UPDATE_MANAGERS, OPERATION_APPLY, OPERATION_UPDATE,
};
use crate::schema::TypeRef;
use crate::status::{cause, reason, StatusDetails};
use crate::{Status, StatusCause};

/// kubectl's client-side apply annotation.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager whose applies take over from client-side apply.
pub const KUBECTL_MANAGER: &str = "kubectl";

/// The manager given the fields of an untracked object on its first apply.
pub const BEFORE_FIRST_APPLY_MANAGER: &str = "before-first-apply";

/// The most bytes all annotations of an object may hold together; a
/// last-applied annotation that would pass it is dropped instead.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// One field an apply would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    /// Its operation (`Apply` or `Update`).
    pub operation: String,
    /// Its API version.
    pub api_version: String,
    /// Its subresource, if any.
    pub subresource: Option<String>,
    /// The field.
    pub path: Path,
}

impl Conflict {
    /// The manager as kube names it in conflict messages: `"kubectl"`,
    /// `"kube-controller-manager" using apps/v1`, `"m" with subresource
    /// "status" using v1`.
    pub fn manager_description(&self) -> String {
        let mut out = crate::validation::go_quote(&self.manager);
        if let Some(sub) = self.subresource.as_deref().filter(|s| !s.is_empty()) {
            out.push_str(" with subresource ");
            out.push_str(&crate::validation::go_quote(sub));
        }
        if self.operation == OPERATION_UPDATE {
            out.push_str(" using ");
            out.push_str(&self.api_version);
        }
        out
    }

    /// The field as kube prints it: `.spec.replicas`,
    /// `.spec.template.spec.containers[name="nginx"].image`.
    pub fn field(&self) -> String {
        display_path(&self.path)
    }

    fn identifier(&self) -> String {
        identifier(
            &self.manager,
            &self.operation,
            &self.api_version,
            self.subresource.as_deref(),
        )
    }
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change (409).
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The configuration is not acceptable (400), in kube's words.
    #[error("{0}")]
    BadRequest(String),
    /// The stored object cannot be handled (its managed fields do not
    /// decode); kube answers 500.
    #[error("{0}")]
    Internal(String),
}

impl ApplyError {
    /// The `Status` kube answers with: for conflicts a 409 with one
    /// `FieldManagerConflict` cause per field.
    pub fn to_status(&self) -> Status {
        match self {
            ApplyError::Conflicts(conflicts) => {
                let mut s = Status::failure(409, reason::CONFLICT, conflicts_message(conflicts));
                s.details = Some(StatusDetails {
                    causes: conflicts
                        .iter()
                        .map(|c| {
                            StatusCause::new(
                                cause::FIELD_MANAGER_CONFLICT,
                                format!("conflict with {}", c.manager_description()),
                                c.field(),
                            )
                        })
                        .collect(),
                    ..Default::default()
                });
                s
            }
            ApplyError::BadRequest(msg) => Status::bad_request(msg.clone()),
            ApplyError::Internal(msg) => Status::internal(msg.clone()),
        }
    }
}

/// kube's message for apply conflicts: one conflict on one line, several
/// grouped by manager (managers in identifier order).
fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description(),
            only.field()
        );
    }
    let mut by_manager: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for c in conflicts {
        by_manager
            .entry(c.identifier())
            .or_insert_with(|| (c.manager_description(), Vec::new()))
            .1
            .push(c.field());
    }
    let mut lines = Vec::new();
    for (description, fields) in by_manager.into_values() {
        lines.push(format!("conflicts with {description}:"));
        lines.extend(fields.into_iter().map(|f| format!("- {f}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// What an apply needs besides the objects.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// The `fieldManager` (required for apply).
    pub manager: &'a str,
    /// The group-version of the request (`apps/v1`, `v1`); the applied
    /// configuration must carry it.
    pub api_version: &'a str,
    /// `Some("status")` or `Some("scale")` for subresource applies.
    pub subresource: Option<&'a str>,
    /// `force=true`: take conflicting fields instead of failing.
    pub force: bool,
    /// The time to record, RFC 3339 seconds.
    pub now: &'a str,
    /// Fields this write may not change (kube's reset fields); `None` for
    /// [`default_reset_fields`].
    pub reset: Option<&'a FieldSet>,
}

/// Applies `applied` to `live` (`None`: the object does not exist yet) and
/// returns the new object with its `metadata.managedFields`.
///
/// See the module documentation for the steps; [`apply_with`] takes the
/// reset fields explicitly.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    ty: Option<TypeRef<'_>>,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply_with(
        ty,
        live,
        applied,
        &ApplyOptions {
            manager,
            api_version,
            subresource,
            force,
            now,
            reset: None,
        },
    )
}

/// [`apply`] with all options.
pub fn apply_with(
    ty: Option<TypeRef<'_>>,
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions<'_>,
) -> Result<Value, ApplyError> {
    check_configuration(ty, applied, opts.api_version)?;
    let mut result = match apply_once(ty, live, applied, opts, opts.force) {
        Err(ApplyError::Conflicts(conflicts)) if opts.manager == KUBECTL_MANAGER => {
            // The upgrade from client-side apply: conflicts on fields the
            // last-applied annotation still describes are not conflicts.
            let allowed = live.and_then(|l| allowed_by_last_applied(ty, l, opts.api_version));
            let rest: Vec<Conflict> = match &allowed {
                Some(allowed) => conflicts
                    .iter()
                    .filter(|c| !allowed.has(&c.path))
                    .cloned()
                    .collect(),
                None => conflicts,
            };
            if !rest.is_empty() {
                return Err(ApplyError::Conflicts(rest));
            }
            apply_once(ty, live, applied, opts, true)?
        }
        other => other?,
    };
    if opts.manager == KUBECTL_MANAGER {
        update_last_applied(&mut result, applied);
    }
    Ok(result)
}

/// The checks kube makes on a configuration before merging it.
fn check_configuration(
    ty: Option<TypeRef<'_>>,
    applied: &Value,
    api_version: &str,
) -> Result<(), ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::BadRequest(
            "the apply configuration must be an object".to_string(),
        ));
    }
    let managed = applied.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null()) {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    let version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if version != api_version {
        return Err(ApplyError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: {api_version}"
        )));
    }
    let errors = schema_errors(ty, applied);
    if !errors.is_empty() {
        let text = if let [one] = errors.as_slice() {
            one.clone()
        } else {
            let mut lines = vec!["errors:".to_string()];
            lines.extend(errors.iter().map(|e| format!("  {e}")));
            lines.join("\n")
        };
        return Err(ApplyError::BadRequest(format!(
            "failed to create typed patch object ({}): {text}",
            object_gvknn(applied)
        )));
    }
    Ok(())
}

/// `namespace/name; group/version, Kind=Kind`, as kube names an object in
/// field manager errors.
fn object_gvknn(obj: &Value) -> String {
    let meta = |f: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    format!(
        "{}/{}; {group}/{version}, Kind={kind}",
        meta("namespace"),
        meta("name")
    )
}

/// One apply, without the client-side-apply handling.
fn apply_once(
    ty: Option<TypeRef<'_>>,
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions<'_>,
    force: bool,
) -> Result<Value, ApplyError> {
    let subresource = opts.subresource.filter(|s| !s.is_empty());
    let default_reset;
    let reset = match opts.reset {
        Some(r) => r,
        None => {
            default_reset = default_reset_fields(subresource, live, applied);
            &default_reset
        }
    };

    // The live object without its managed fields, and the entries.
    let mut original = live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let entries = decode_managed_fields(&original)
        .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
    remove_managed_fields(&mut original);
    let mut managed: Managed = if entries.is_empty() && live.is_some() {
        before_first_apply(ty, &original, opts, reset)?
    } else {
        to_managed(entries)
    };

    // Both sides with defaulted list keys filled in; the configuration
    // without the fields this write may not change.
    let mut live_obj = original.clone();
    fill_defaulted_keys(ty, &mut live_obj);
    let mut config = remove_fields(ty, applied, reset);
    drop_null_creation_timestamp(&mut config);
    let applied_set = keyed_field_set(ty, &config).recursive_difference(reset);
    fill_defaulted_keys(ty, &mut config);

    let applier = identifier(opts.manager, OPERATION_APPLY, opts.api_version, subresource);
    let previous = managed.get(&applier).cloned();
    let last_set = previous
        .as_ref()
        .map(|e| e.fields_v1.clone())
        .unwrap_or_default();

    // Merge, then remove what the applier gave up.
    let merged = merge(ty, &live_obj, &config);
    let mut appliers = applied_set.clone();
    for (id, e) in &managed {
        if *id != applier && e.operation == OPERATION_APPLY {
            appliers = appliers.union(&e.fields_v1);
        }
    }
    let new_obj = prune(ty, &merged, &last_set, &appliers);

    // Ownership: changed fields conflict with (or, forced, move from) every
    // other manager; removed fields leave everyone.
    let change = compare_detailed(ty, &live_obj, &new_obj).exclude(reset);
    let changed = change.added.union(&change.modified);
    let mut conflicts = Vec::new();
    for (id, e) in &managed {
        if *id == applier {
            continue;
        }
        for path in e.fields_v1.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                operation: e.operation.clone(),
                api_version: e.api_version.clone(),
                subresource: e.subresource.clone(),
                path,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    for (id, e) in managed.iter_mut() {
        if *id != applier {
            e.fields_v1 = e.fields_v1.difference(&changed).difference(&change.removed);
        }
    }
    managed.retain(|_, e| !e.fields_v1.is_empty());

    // The applier's entry.
    let noop = values_equal(&new_obj, &original);
    let time = if noop {
        previous.and_then(|p| p.time)
    } else {
        Some(opts.now.to_string())
    };
    let fields = applied_set.difference(stripped());
    if fields.is_empty() {
        managed.remove(&applier);
    } else {
        managed.insert(
            applier,
            ManagedFieldsEntry {
                manager: opts.manager.to_string(),
                operation: OPERATION_APPLY.to_string(),
                api_version: opts.api_version.to_string(),
                time,
                fields_type: FIELDS_V1.to_string(),
                fields_v1: fields,
                subresource: subresource.map(str::to_string),
            },
        );
    }
    cap_update_managers(&mut managed, MAX_UPDATE_MANAGERS);

    let mut out = if noop { original } else { new_obj };
    write_managed_fields(&mut out, managed.into_values().collect());
    Ok(out)
}

/// `metadata.creationTimestamp: null`, which manifests written by
/// `kubectl create --dry-run -o yaml` carry, is no statement about a field
/// the server sets: without this every apply of such a manifest would
/// "change" the timestamp (the update then puts it back).
fn drop_null_creation_timestamp(config: &mut Value) {
    if let Some(meta) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        if meta.get("creationTimestamp").is_some_and(Value::is_null) {
            meta.shift_remove("creationTimestamp");
        }
    }
}

/// The entries of an object that has none, before its first apply: its
/// fields (compared with the empty object) go to `before-first-apply`.
fn before_first_apply(
    ty: Option<TypeRef<'_>>,
    live: &Value,
    opts: &ApplyOptions<'_>,
    reset: &FieldSet,
) -> Result<Managed, ApplyError> {
    let mut tracked = live.clone();
    update_managed_fields_with_reset(
        ty,
        None,
        &mut tracked,
        BEFORE_FIRST_APPLY_MANAGER,
        opts.api_version,
        opts.subresource,
        opts.now,
        reset,
    )
    .map_err(ApplyError::Internal)?;
    let entries = decode_managed_fields(&tracked)
        .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
    Ok(to_managed(entries))
}

/// Removes the fields the applier applied last time (`last`) and no longer
/// applies, unless an applier (`appliers`: every `Apply` entry, with the
/// applier's new set) owns them; fields outside `last` always stay.
fn prune(ty: Option<TypeRef<'_>>, merged: &Value, last: &FieldSet, appliers: &FieldSet) -> Value {
    if last.is_empty() {
        return merged.clone();
    }
    let merged_set = keyed_field_set(ty, merged);
    // Everything the applier had applied goes, then whatever an applier
    // owns comes back...
    let without_last = remove_fields(ty, merged, last);
    let keep = keyed_field_set(ty, &without_last).union(appliers);
    let owned_back = remove_fields(ty, merged, &merged_set.difference(&keep));
    // ...and only fields of the last apply may end up removed.
    let gone = merged_set
        .difference(&keyed_field_set(ty, &owned_back))
        .intersection(last);
    remove_fields(ty, merged, &gone)
}

// ---------------------------------------------------------------------------
// Client-side apply

/// The fields of the live object's last-applied annotation whose values the
/// live object still has, or `None` without a usable annotation.
fn allowed_by_last_applied(
    ty: Option<TypeRef<'_>>,
    live: &Value,
    api_version: &str,
) -> Option<FieldSet> {
    let text = live
        .get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()
        .filter(|s| !s.is_empty())?;
    let mut last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() || last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let mut live = live.clone();
    remove_managed_fields(&mut live);
    fill_defaulted_keys(ty, &mut live);
    let set = keyed_field_set(ty, &last);
    fill_defaulted_keys(ty, &mut last);
    let c = compare_detailed(ty, &last, &live);
    Some(
        set.difference(&c.modified)
            .difference(&c.added)
            .difference(&c.removed),
    )
}

/// Sets the last-applied annotation of `obj`, when it has one, to the
/// applied configuration, as kube does after a `kubectl` apply.
fn update_last_applied(obj: &mut Value, applied: &Value) {
    let has = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !has {
        return;
    }
    let mut config = applied.clone();
    if let Some(annotations) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.shift_remove(LAST_APPLIED_ANNOTATION);
    }
    let mut text = go_json(&config);
    text.push('\n');
    let Some(annotations) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(LAST_APPLIED_ANNOTATION.to_string(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        annotations.shift_remove(LAST_APPLIED_ANNOTATION);
    }
}

/// JSON as Go's encoder writes a decoded object: keys sorted, compact, and
/// `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k.as_str()])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let text = sorted(v).to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Paths as kube prints them

/// A field path as structured-merge-diff prints it:
/// `.spec.template.spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"]`.
pub fn display_path(path: &[PathElement]) -> String {
    path.iter().map(display_element).collect()
}

/// One path element as structured-merge-diff prints it.
pub fn display_element(pe: &PathElement) -> String {
    match pe {
        PathElement::Field(name) => format!(".{name}"),
        PathElement::Key(fields) => {
            let parts: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}={}", go_value(v)))
                .collect();
            format!("[{}]", parts.join(","))
        }
        PathElement::Value(v) => format!("[={}]", go_value(v)),
        PathElement::Index(i) => format!("[{i}]"),
    }
}

/// structured-merge-diff's `value.ToString`: strings quoted as Go's `%q`,
/// numbers as Go's `%v`.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => crate::validation::go_quote(s),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(u)) => u.to_string(),
            _ => go_float(n.as_f64().unwrap_or(0.0)),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.into_iter()
                .map(|k| format!("{k}={}", go_value(&m[k.as_str()])))
                .collect()
        }
    }
}

/// Go's `%v` of a float64: the shortest representation, in exponent form
/// when the exponent is below -4 or at least 6 (`1e+06`).
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_string()
        } else if f > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
    }
    if f == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

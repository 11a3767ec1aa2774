//! Field management: `metadata.managedFields`.
//!
//! This module holds the field-set machinery of server-side apply, modelled
//! on structured-merge-diff (SMD) and kube-apiserver's field manager:
//!
//! - [`FieldSet`] and [`PathElement`]: sets of field paths with union,
//!   difference, intersection, and the exact `FieldsV1` encoding kube stores
//!   (`{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`);
//! - [`field_set`] and [`compare`]: the schema-aware field set of an object
//!   and the difference of two objects (SMD's `ToFieldSet` and `Compare`);
//! - [`ManagedFieldsEntry`], [`decode_managed_fields`],
//!   [`encode_managed_fields`]: the `metadata.managedFields` list;
//! - [`update_managed_fields`]: what kube's field manager does on create,
//!   update and non-apply patch, giving changed fields to the writer;
//! - [`apply`]: server-side apply (merge, conflicts, removal of fields the
//!   applier gave up, the client-side apply upgrade), with the schema walks
//!   it needs in `merge` and the `/scale` entry mapping in `scale`.
//!
//! Known differences from kube are listed on [`update_managed_fields`] and
//! [`empty_object`].

mod apply;
mod entry;
mod fieldset;
mod merge;
mod scale;
mod typed;

#[cfg(test)]
mod apply_tests;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use crate::schema::TypeRef;

pub use entry::{
    decode_managed_fields, encode_managed_fields, sort_entries, ManagedFieldsEntry, FIELDS_V1,
    OPERATION_APPLY, OPERATION_UPDATE,
};
pub use fieldset::{path_to_string, FieldSet, Path, PathElement};
pub use typed::{compare, compare_detailed, empty_object, field_set, Comparison};

pub use apply::{
    apply, apply_with, display_element, display_path, ApplyError, ApplyOptions, Conflict,
    BEFORE_FIRST_APPLY_MANAGER, KUBECTL_MANAGER, LAST_APPLIED_ANNOTATION,
};
pub use merge::{fill_defaulted_keys, merge, remove_fields, schema_errors};
pub use scale::{scale_entries_to_parent, scale_entries_to_subresource, SCALE_API_VERSION};

use entry::{identifier, is_reset, to_managed, Managed};

/// The longest field manager name kube accepts, in bytes.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The manager name kube records when a writer has none.
pub const UNKNOWN_MANAGER: &str = "unknown";

/// How many `Update` entries kube keeps before merging the oldest into
/// `ancient-changes` buckets.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager of the merged oldest `Update` entries.
pub const ANCIENT_CHANGES_MANAGER: &str = "ancient-changes";

/// The field manager kube derives from a `User-Agent` when a request has no
/// `fieldManager`: the text before the first `/`, without non-printable
/// characters, cut to 128 bytes (`kubectl/v1.31.0 (linux/amd64) ...` →
/// `kubectl`).
///
/// An empty result (no or an empty User-Agent) is what kube passes on too;
/// [`update_managed_fields`] records it as [`UNKNOWN_MANAGER`].
pub fn manager_from_user_agent(ua: &str) -> String {
    let prefix = ua.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars() {
        if !is_go_printable(c) {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the
/// ASCII space; not control, format, separator (other than U+0020),
/// private-use or non-characters.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format_chars = matches!(
        u,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_or_nonchar = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF | 0xFDD0..=0xFDEF)
        || (u & 0xFFFE) == 0xFFFE;
    !format_chars && !private_or_nonchar
}

/// The paths kube never records as managed (its strip-meta manager):
/// `apiVersion`, `kind`, `metadata` itself and the system-set metadata
/// fields.
pub fn stripped_fields() -> FieldSet {
    let f = |s: &str| PathElement::Field(s.to_string());
    let mut set = FieldSet::new();
    set.insert(&[f("apiVersion")]);
    set.insert(&[f("kind")]);
    set.insert(&[f("metadata")]);
    for name in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        set.insert(&[f("metadata"), f(name)]);
    }
    set
}

/// [`stripped_fields`], built once.
pub(crate) fn stripped() -> &'static FieldSet {
    static STRIPPED: std::sync::OnceLock<FieldSet> = std::sync::OnceLock::new();
    STRIPPED.get_or_init(stripped_fields)
}

/// The fields a write to the main resource or a subresource may not change
/// (kube's "reset fields"), as [`update_managed_fields`] uses them:
///
/// - the main resource: `status`;
/// - `status`: every top-level field of `old` or `new` but `status`;
/// - other subresources: none.
///
/// Resources whose strategies reset other fields (or, for custom resources
/// without a status subresource, nothing) should call
/// [`update_managed_fields_with_reset`].
pub fn default_reset_fields(
    subresource: Option<&str>,
    old: Option<&Value>,
    new: &Value,
) -> FieldSet {
    let mut set = FieldSet::new();
    match subresource {
        None => set.insert(&[PathElement::Field("status".to_string())]),
        Some("status") => {
            let keys = old
                .and_then(Value::as_object)
                .into_iter()
                .chain(new.as_object())
                .flat_map(|m| m.keys());
            for k in keys {
                if k != "status" {
                    set.insert(&[PathElement::Field(k.clone())]);
                }
            }
        }
        Some(_) => {}
    }
    set
}

/// Updates `new.metadata.managedFields` for a create, update or non-apply
/// patch, as kube-apiserver's field manager does.
///
/// - `ty`: the object's schema (`None` for objects without one: every map key
///   is a field, lists are atomic).
/// - `old`: the stored object, or `None` for a create.
/// - `new`: the object about to be stored; its `metadata.managedFields` is
///   read (a client may set it) and replaced.
/// - `manager`: the `fieldManager` parameter, else
///   [`manager_from_user_agent`]; empty is recorded as `unknown`.
/// - `api_version`: the group-version of the request (`apps/v1`, `v1`).
/// - `subresource`: `Some("status")` for `/status` writes.
/// - `now`: the time to record, RFC 3339 seconds (`2026-11-21T20:00:00Z`).
///
/// The rules, in kube's order:
///
/// 1. The starting entries are the client's `managedFields` when it sent a
///    valid, non-empty list (main resource only); `[]` or `[{}]` resets them
///    to none; otherwise (absent, invalid, or a subresource write) they are
///    `old`'s.
/// 2. An update of an object without managed fields stays untracked (kube
///    only starts tracking on create or apply).
/// 3. The fields changed between `old` (the type's empty object on create)
///    and `new`, less the reset fields, are taken from every other entry;
///    fields that disappeared leave every entry; entries left empty go.
/// 4. The changed fields, less [`stripped_fields`], join the writer's entry
///    (manager, `Update`, API version, subresource) with `time` = `now`. A
///    write that changes nothing leaves the writer's entry (and time) alone.
/// 5. More than ten `Update` entries: the oldest merge into `ancient-changes`.
///
/// Differences from kube: managers recorded under another API version are
/// compared on the same objects (kube converts the objects to their
/// version); a schema change between atomic and granular is not reconciled;
/// values are compared as stored JSON (kube compares Go objects, which drop
/// `omitempty` zero values); the empty object of a create is approximated
/// (see [`empty_object`]).
///
/// Fails only when `new` is not a JSON object.
pub fn update_managed_fields(
    ty: Option<TypeRef<'_>>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
) -> Result<(), String> {
    let reset = default_reset_fields(subresource, old, new);
    update_managed_fields_with_reset(ty, old, new, manager, api_version, subresource, now, &reset)
}

/// [`update_managed_fields`] with explicit reset fields.
#[allow(clippy::too_many_arguments)]
pub fn update_managed_fields_with_reset(
    ty: Option<TypeRef<'_>>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
    reset: &FieldSet,
) -> Result<(), String> {
    if !new.is_object() {
        return Err("the object is not a JSON object".to_string());
    }
    let subresource = subresource.filter(|s| !s.is_empty());

    // 1. Starting entries.
    let live: Managed = old
        .and_then(|o| decode_managed_fields(o).ok())
        .map(to_managed)
        .unwrap_or_default();
    let mut managed = if subresource.is_some() {
        live
    } else if is_reset(new) {
        Managed::new()
    } else {
        match decode_managed_fields(new) {
            Ok(entries) if !entries.is_empty() => to_managed(entries),
            _ => live,
        }
    };
    remove_managed_fields(new);

    // 2. Untracked objects stay untracked, except on create.
    let is_create = old.is_none_or(|o| {
        o.get("metadata")
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    });
    if managed.is_empty() && !is_create {
        return Ok(());
    }

    // 3. The change, and what it takes from everyone.
    let mut old_obj = match old {
        Some(o) => o.clone(),
        None => empty_object(ty),
    };
    remove_managed_fields(&mut old_obj);
    let change = compare_detailed(ty, &old_obj, new).exclude(reset);
    let changed = change.added.union(&change.modified);
    take_fields(&mut managed, &changed, &change.removed);

    // 4. The writer's entry.
    let taken = changed
        .difference(&change.removed)
        .recursive_difference(reset)
        .difference(stripped());
    if !taken.is_empty() {
        let manager = if manager.is_empty() {
            UNKNOWN_MANAGER
        } else {
            manager
        };
        let id = identifier(manager, OPERATION_UPDATE, api_version, subresource);
        let fields = match managed.get(&id) {
            Some(previous) => taken.union(&previous.fields_v1),
            None => taken,
        };
        managed.insert(
            id,
            ManagedFieldsEntry {
                manager: manager.to_string(),
                operation: OPERATION_UPDATE.to_string(),
                api_version: api_version.to_string(),
                time: Some(now.to_string()),
                fields_type: FIELDS_V1.to_string(),
                fields_v1: fields,
                subresource: subresource.map(str::to_string),
            },
        );
    }

    // 5. Cap the number of update entries.
    cap_update_managers(&mut managed, MAX_UPDATE_MANAGERS);

    write_managed_fields(new, managed.into_values().collect());
    Ok(())
}

/// Takes the changed fields from every entry, drops the removed ones, and
/// forgets entries left empty.
fn take_fields(managed: &mut Managed, changed: &FieldSet, removed: &FieldSet) {
    for entry in managed.values_mut() {
        let conflicts = entry.fields_v1.intersection(changed);
        entry.fields_v1 = entry.fields_v1.difference(&conflicts).difference(removed);
    }
    managed.retain(|_, e| !e.fields_v1.is_empty());
}

fn remove_managed_fields(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// Writes the entries (sorted) into `obj.metadata.managedFields`, or removes
/// the field when there are none.
fn write_managed_fields(obj: &mut Value, entries: Vec<ManagedFieldsEntry>) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        if let Some(meta) = root.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        return;
    }
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("managedFields".to_string(), encode_managed_fields(&entries));
    }
}

/// Merges the oldest `Update` entries into one `ancient-changes` entry per
/// API version until at most `max` `Update` entries remain (kube's
/// cap-managers step, including its choice of which entries merge).
fn cap_update_managers(managed: &mut Managed, max: usize) {
    let mut updaters: Vec<(i64, String)> = managed
        .iter()
        .filter(|(_, e)| e.operation != OPERATION_APPLY)
        .map(|(id, e)| (e.unix_seconds(), id.clone()))
        .collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort();
    let mut first_by_version: std::collections::HashMap<String, String> =
        std::collections::HashMap::new();
    let mut length = updaters.len();
    for (_, id) in &updaters {
        if length <= max {
            break;
        }
        let Some(entry) = managed.get(id).cloned() else {
            continue;
        };
        let version = entry.api_version.clone();
        let bucket = identifier(ANCIENT_CHANGES_MANAGER, OPERATION_UPDATE, &version, None);
        match first_by_version.get(&version) {
            Some(first) => {
                if !managed.contains_key(&bucket) {
                    if let Some(mut moved) = managed.remove(first) {
                        moved.manager = ANCIENT_CHANGES_MANAGER.to_string();
                        moved.operation = OPERATION_UPDATE.to_string();
                        moved.subresource = None;
                        managed.insert(bucket.clone(), moved);
                    }
                }
                let merged = match managed.get(&bucket) {
                    Some(b) => entry.fields_v1.union(&b.fields_v1),
                    None => entry.fields_v1.clone(),
                };
                managed.insert(
                    bucket.clone(),
                    ManagedFieldsEntry {
                        manager: ANCIENT_CHANGES_MANAGER.to_string(),
                        operation: OPERATION_UPDATE.to_string(),
                        api_version: version.clone(),
                        time: entry.time.clone(),
                        fields_type: FIELDS_V1.to_string(),
                        fields_v1: merged,
                        subresource: None,
                    },
                );
                managed.remove(id);
                length -= 1;
            }
            None => {
                first_by_version.insert(version, id.clone());
            }
        }
    }
}

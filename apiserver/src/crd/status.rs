//! The status the leader keeps on each CRD: accepted names, the
//! `NamesAccepted`, `Established` and `Terminating` conditions, and
//! `storedVersions`. Pure: the controller reads the CRDs, calls
//! [`desired`], and writes what changed.

use super::names::Acceptance;
use serde_json::{json, Map, Value};

/// Sets condition `type_` in `conds`, keeping `lastTransitionTime` when its
/// status does not change.
fn set_condition(
    conds: &mut Vec<Value>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let pos = conds
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(type_));
    let since = pos
        .and_then(|i| {
            let c = &conds[i];
            (c.get("status").and_then(Value::as_str) == Some(status))
                .then(|| c.get("lastTransitionTime").cloned())
                .flatten()
        })
        .unwrap_or_else(|| Value::String(now.to_string()));
    let c = json!({
        "type": type_,
        "status": status,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    });
    match pos {
        Some(i) => conds[i] = c,
        None => conds.push(c),
    }
}

fn ordered_names(n: &Value) -> Value {
    let mut m = Map::new();
    for k in [
        "plural",
        "singular",
        "shortNames",
        "kind",
        "listKind",
        "categories",
    ] {
        if let Some(v) = n.get(k) {
            if !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()) {
                m.insert(k.into(), v.clone());
            }
        }
    }
    Value::Object(m)
}

/// The CRD with the status it should have, or `None` when it has it.
/// `acceptance` comes from [`super::accepted_names`]; `now` is an RFC 3339
/// timestamp for conditions that change.
pub fn desired(crd: &Value, acceptance: &Acceptance, now: &str) -> Option<Value> {
    let mut status = crd
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut conds: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names_status = if acceptance.accepted { "True" } else { "False" };
    set_condition(
        &mut conds,
        "NamesAccepted",
        names_status,
        acceptance.reason,
        &acceptance.message,
        now,
    );
    let established = super::condition_true(crd, "Established");
    if acceptance.accepted || established {
        set_condition(
            &mut conds,
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        );
    } else {
        set_condition(
            &mut conds,
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
            now,
        );
    }
    if crd.pointer("/metadata/deletionTimestamp").is_some() {
        set_condition(
            &mut conds,
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            now,
        );
    }
    let mut stored: Vec<Value> = status
        .get("storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned();
    if let Some(s) = storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    // kube's field order: conditions, acceptedNames, storedVersions.
    let mut out = Map::new();
    out.insert("conditions".into(), Value::Array(conds));
    out.insert("acceptedNames".into(), ordered_names(&acceptance.names));
    out.insert("storedVersions".into(), Value::Array(stored));
    for (k, v) in std::mem::take(&mut status) {
        out.entry(k).or_insert(v);
    }
    let new_status = Value::Object(out);
    if crd.get("status") == Some(&new_status) {
        return None;
    }
    let mut next = crd.clone();
    if let Some(m) = next.as_object_mut() {
        m.insert("status".into(), new_status);
    }
    Some(next)
}

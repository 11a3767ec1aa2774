//! Managed fields across the `/scale` subresource.
//!
//! A write to `/scale` works on an autoscaling/v1 `Scale` built from the
//! workload, so its field management sees `Scale` entries: before the write
//! the workload's entries that own the replica count become entries owning
//! the Scale's `.spec.replicas` ([`scale_entries_to_subresource`]); after it
//! they are mapped back ([`scale_entries_to_parent`]). This is kube's scale
//! handler, with entries matched by manager, operation and subresource (the
//! API version is the one thing the mapping changes) and each entry keeping
//! the time the Scale write gave it.

use super::fieldset::{FieldSet, PathElement};
use super::ManagedFieldsEntry;

/// The group-version of `Scale`.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

fn scale_replicas() -> [PathElement; 2] {
    [
        PathElement::Field("spec".to_string()),
        PathElement::Field("replicas".to_string()),
    ]
}

/// The entries of a Scale view: one per workload entry that owns the
/// replica count (at `replicas`), owning the Scale's `.spec.replicas`.
pub fn scale_entries_to_subresource(
    parent: &[ManagedFieldsEntry],
    replicas: &[PathElement],
) -> Vec<ManagedFieldsEntry> {
    parent
        .iter()
        .filter(|e| e.fields_v1.has(replicas))
        .map(|e| ManagedFieldsEntry {
            api_version: SCALE_API_VERSION.to_string(),
            fields_v1: FieldSet::from_paths([scale_replicas()]),
            ..e.clone()
        })
        .collect()
}

/// The workload's entries after a Scale write that left the Scale with
/// `scale` entries: workload entries whose manager no longer owns the
/// Scale's replicas lose the replica count (and go when nothing is left),
/// and Scale entries that own it now become workload entries owning
/// `replicas` at `parent_api_version`.
pub fn scale_entries_to_parent(
    parent: &[ManagedFieldsEntry],
    scale: &[ManagedFieldsEntry],
    replicas: &[PathElement],
    parent_api_version: &str,
) -> Vec<ManagedFieldsEntry> {
    let key = |e: &ManagedFieldsEntry| {
        (
            e.manager.clone(),
            e.operation.clone(),
            e.subresource.clone().unwrap_or_default(),
        )
    };
    let owns = |e: &ManagedFieldsEntry| e.fields_v1.has(&scale_replicas());
    let mut pending: Vec<&ManagedFieldsEntry> = scale.iter().collect();
    let mut out = Vec::with_capacity(parent.len() + scale.len());
    for p in parent {
        let matching = pending.iter().position(|s| key(s) == key(p));
        let still_owned = matching.is_some_and(|i| owns(pending[i]));
        let time = matching.and_then(|i| pending[i].time.clone());
        if let Some(i) = matching {
            pending.remove(i);
        }
        if !p.fields_v1.has(replicas) {
            let mut kept = p.clone();
            if still_owned {
                kept.fields_v1 = kept.fields_v1.union(&FieldSet::from_paths([replicas]));
                kept.time = time.or_else(|| p.time.clone());
            }
            out.push(kept);
        } else if still_owned {
            out.push(ManagedFieldsEntry {
                time: time.or_else(|| p.time.clone()),
                ..p.clone()
            });
        } else {
            let rest = p.fields_v1.difference(&FieldSet::from_paths([replicas]));
            if !rest.is_empty() {
                out.push(ManagedFieldsEntry {
                    fields_v1: rest,
                    ..p.clone()
                });
            }
        }
    }
    for s in pending.into_iter().filter(|s| owns(s)) {
        out.push(ManagedFieldsEntry {
            api_version: parent_api_version.to_string(),
            fields_v1: FieldSet::from_paths([replicas]),
            ..s.clone()
        });
    }
    out
}

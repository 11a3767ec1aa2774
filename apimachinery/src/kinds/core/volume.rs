//! PersistentVolumes and PersistentVolumeClaims: kube's defaults (reclaim
//! policy, volume mode, phase Pending), the main checks of
//! `ValidatePersistentVolume(Claim)` and the printers.

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_str, object_mut};
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static PERSISTENT_VOLUME: KindRules = KindRules {
    defaults: Some(pv_defaults),
    validate: Some(validate_pv),
    columns: PV_COLUMNS,
    ..KindRules::NONE
};

pub static PERSISTENT_VOLUME_CLAIM: KindRules = KindRules {
    defaults: Some(pvc_defaults),
    validate: Some(validate_pvc),
    columns: PVC_COLUMNS,
    ..KindRules::NONE
};

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const RECLAIM: &[&str] = &["Delete", "Recycle", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
/// The volume sources a PersistentVolume may name (exactly one).
const SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

fn phase_pending(o: &mut Map<String, Value>) {
    if let Some(status) = object_mut(o, "status") {
        let empty = status
            .get("phase")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if empty {
            status.insert("phase".into(), json!("Pending"));
        }
    }
}

fn pv_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    phase_pending(o);
    if let Some(spec) = object_mut(o, "spec") {
        let empty = spec
            .get("persistentVolumeReclaimPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if empty {
            spec.insert("persistentVolumeReclaimPolicy".into(), json!("Retain"));
        }
        default_str(spec, "volumeMode", "Filesystem");
    }
}

fn pvc_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    phase_pending(o);
    if let Some(spec) = object_mut(o, "spec") {
        default_str(spec, "volumeMode", "Filesystem");
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The sign of a quantity string: `Some(true)` when it is above zero,
/// `Some(false)` when zero or negative, `None` when it does not parse
/// (schema validation reports that).
fn quantity_positive(q: &str) -> Option<bool> {
    let (neg, rest) = match q.as_bytes().first() {
        Some(b'-') => (true, &q[1..]),
        Some(b'+') => (false, &q[1..]),
        _ => (false, q),
    };
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if digits.is_empty() {
        return None;
    }
    let nonzero = digits.chars().any(|c| c.is_ascii_digit() && c != '0');
    Some(nonzero && !neg)
}

fn access_modes(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>, required_detail: &str) {
    let modes: Vec<&str> = spec
        .get("accessModes")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|m| m.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    if modes.is_empty() {
        errs.push(v::required("spec.accessModes", required_detail));
    }
    for m in &modes {
        if !ACCESS_MODES.contains(m) {
            errs.push(v::not_supported("spec.accessModes", m, ACCESS_MODES));
        }
    }
    if modes.contains(&"ReadWriteOncePod") && modes.len() > 1 {
        errs.push(v::forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

fn common_spec(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>) {
    if let Some(class) = spec.get("storageClassName").and_then(Value::as_str) {
        if !class.is_empty() {
            for msg in v::name_is_dns_subdomain(class, false) {
                errs.push(v::invalid("spec.storageClassName", class, &msg));
            }
        }
    }
    if let Some(mode) = spec.get("volumeMode").and_then(Value::as_str) {
        if !VOLUME_MODES.contains(&mode) {
            errs.push(v::not_supported("spec.volumeMode", mode, VOLUME_MODES));
        }
    }
}

fn immutable_volume_mode(
    spec: &Map<String, Value>,
    old: Option<&Value>,
    errs: &mut Vec<StatusCause>,
) {
    let Some(old_mode) = old.and_then(|o| o.pointer("/spec/volumeMode")) else {
        return;
    };
    let new_mode = spec.get("volumeMode").unwrap_or(&Value::Null);
    if new_mode != old_mode {
        errs.push(v::invalid_json(
            "spec.volumeMode",
            new_mode,
            "field is immutable",
        ));
    }
}

fn validate_pv(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    access_modes(spec, &mut errs, "");
    let capacity = spec.get("capacity").and_then(Value::as_object);
    if capacity.is_none_or(Map::is_empty) {
        errs.push(v::required("spec.capacity", ""));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        // kube prints the Go map (`%#v`); its quantities are shown as given.
        let shown = match capacity {
            None => "core.ResourceList(nil)".to_string(),
            Some(c) => {
                let entries: Vec<String> = c
                    .iter()
                    .map(|(k, q)| {
                        format!(
                            "{}:{}",
                            v::go_quote(k),
                            v::go_quote(q.as_str().unwrap_or(""))
                        )
                    })
                    .collect();
                format!("core.ResourceList{{{}}}", entries.join(", "))
            }
        };
        errs.push(StatusCause::new(
            crate::status::cause::FIELD_VALUE_NOT_SUPPORTED,
            format!("Unsupported value: {shown}: supported values: \"storage\""),
            "spec.capacity",
        ));
    }
    for (r, q) in capacity.into_iter().flatten() {
        let q = q.as_str().unwrap_or("");
        if quantity_positive(q) == Some(false) {
            errs.push(v::invalid(
                &format!("spec.capacity[{r}]"),
                q,
                "must be greater than zero",
            ));
        }
    }
    let policy = str_of(spec, "persistentVolumeReclaimPolicy");
    if !policy.is_empty() && !RECLAIM.contains(&policy) {
        errs.push(v::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            policy,
            RECLAIM,
        ));
    }
    let given: Vec<&str> = SOURCES
        .iter()
        .copied()
        .filter(|s| spec.get(*s).is_some_and(|x| !x.is_null()))
        .collect();
    if given.is_empty() {
        errs.push(v::required("spec", "must specify a volume type"));
    }
    for extra in given.iter().skip(1) {
        errs.push(v::forbidden(
            &format!("spec.{extra}"),
            "may not specify more than 1 volume type",
        ));
    }
    common_spec(spec, &mut errs);
    immutable_volume_mode(spec, old, &mut errs);
    errs
}

fn validate_pvc(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    access_modes(spec, &mut errs, "at least 1 access mode is required");
    let storage = spec
        .get("resources")
        .and_then(|r| r.get("requests"))
        .and_then(|r| r.get("storage"));
    let data_source = ["dataSource", "dataSourceRef"]
        .iter()
        .any(|k| spec.get(*k).is_some_and(|d| !d.is_null()));
    match storage.and_then(Value::as_str) {
        None if data_source => {}
        None => errs.push(v::required("spec.resources[storage]", "")),
        Some(q) => {
            if quantity_positive(q) == Some(false) {
                errs.push(v::invalid(
                    "spec.resources[storage]",
                    q,
                    "must be greater than zero",
                ));
            }
        }
    }
    common_spec(spec, &mut errs);
    if let Some(old) = old {
        pvc_update(obj, spec, old, &mut errs);
    }
    immutable_volume_mode(spec, old, &mut errs);
    errs
}

fn sub<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Map<String, Value>> {
    m.get(k).and_then(Value::as_object)
}

/// Whether two objects are equal but for the keys `skip` accepts.
fn same_except(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    skip: impl Fn(&str) -> bool,
) -> bool {
    let shown = |m: &Map<String, Value>| m.iter().filter(|(k, v)| !skip(k) && !v.is_null()).count();
    shown(a) == shown(b)
        && a.iter()
            .filter(|(k, v)| !skip(k) && !v.is_null())
            .all(|(k, v)| b.get(k) == Some(v))
}

fn opt_same_except(
    a: Option<&Map<String, Value>>,
    b: Option<&Map<String, Value>>,
    skip: impl Fn(&str) -> bool,
) -> bool {
    let empty = Map::new();
    same_except(a.unwrap_or(&empty), b.unwrap_or(&empty), skip)
}

/// kube's `ValidatePersistentVolumeClaimUpdate`: the spec is fixed but for
/// the volume name (set once), the storage request of a bound claim (which
/// may only grow) and the volume attributes class.
fn pvc_update(obj: &Value, spec: &Map<String, Value>, old: &Value, errs: &mut Vec<StatusCause>) {
    let empty = Map::new();
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let bound = print::str_at(obj, "/status/phase", "") == "Bound";
    fn storage(s: &Map<String, Value>) -> Option<&str> {
        s.get("resources")
            .and_then(|r| r.get("requests"))
            .and_then(|r| r.get("storage"))
            .and_then(Value::as_str)
    }
    let skip_name = str_of(old_spec, "volumeName").is_empty();
    let skip = |k: &str| k == "volumeAttributesClassName" || (k == "volumeName" && skip_name);
    let mut same = same_except(spec, old_spec, |k| skip(k) || (bound && k == "resources"));
    if same && bound {
        // A bound claim may change its storage request only.
        let (new_res, old_res) = (sub(spec, "resources"), sub(old_spec, "resources"));
        same = opt_same_except(new_res, old_res, |k| k == "requests")
            && opt_same_except(
                new_res.and_then(|r| sub(r, "requests")),
                old_res.and_then(|r| sub(r, "requests")),
                |k| k == "storage",
            );
    }
    if !same {
        errs.push(v::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let size = |s: &Map<String, Value>| storage(s).and_then(super::quota::quantity_value);
    if let (Some(new), Some(before)) = (size(spec), size(old_spec)) {
        if new < before {
            errs.push(v::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// Printers.

const PV_COLUMNS: &[Column] = &[
    NAME,
    column("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity.", 0, |o, _| json!(print::str_at(o, "/spec/capacity/storage", "0"))),
    column("Access Modes", "string", "accessModes contains all ways the volume can be mounted.", 0, |o, _| modes(o.pointer("/spec/accessModes"))),
    column("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.", 0, |o, _| json!(print::str_at(o, "/spec/persistentVolumeReclaimPolicy", ""))),
    column("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim.", 0, phase),
    column("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.", 0, claim),
    column("StorageClass", "string", "StorageClass of the pv", 0, storage_class),
    column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv", 0, attributes_class),
    column("Reason", "string", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.", 0, |o, _| json!(print::str_at(o, "/status/reason", ""))),
    AGE,
    column("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.", 1, volume_mode),
];

const PVC_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "phase represents the current phase of PersistentVolumeClaim.",
        0,
        phase,
    ),
    column(
        "Volume",
        "string",
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
        0,
        |o, _| json!(print::str_at(o, "/spec/volumeName", "")),
    ),
    column(
        "Capacity",
        "string",
        "capacity represents the actual resources of the underlying volume.",
        0,
        |o, _| {
            bound(o, |o| {
                json!(print::str_at(o, "/status/capacity/storage", "0"))
            })
        },
    ),
    column(
        "Access Modes",
        "string",
        "accessModes contains the actual access modes the volume backing the PVC has.",
        0,
        |o, _| bound(o, |o| modes(o.pointer("/status/accessModes"))),
    ),
    column(
        "StorageClass",
        "string",
        "StorageClass of the pvc",
        0,
        storage_class,
    ),
    column(
        "VolumeAttributesClass",
        "string",
        "VolumeAttributesClass of the pvc",
        0,
        attributes_class,
    ),
    AGE,
    column(
        "VolumeMode",
        "string",
        "volumeMode defines what type of volume is required by the claim.",
        1,
        volume_mode,
    ),
];

/// A claim's capacity and modes are shown once it is bound.
fn bound(obj: &Value, f: fn(&Value) -> Value) -> Value {
    if print::str_at(obj, "/spec/volumeName", "").is_empty() {
        json!("")
    } else {
        f(obj)
    }
}

/// kube's `GetAccessModesAsString`.
fn modes(list: Option<&Value>) -> Value {
    let given: Vec<&str> = list
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let short: Vec<&str> = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| given.contains(m))
    .map(|(_, s)| *s)
    .collect();
    Value::String(short.join(","))
}

fn phase(obj: &Value, _: &PrintContext) -> Value {
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return json!("Terminating");
    }
    json!(print::str_at(obj, "/status/phase", ""))
}

fn claim(obj: &Value, _: &PrintContext) -> Value {
    match obj.pointer("/spec/claimRef").filter(|c| c.is_object()) {
        Some(c) => {
            let ns = c.get("namespace").and_then(Value::as_str).unwrap_or("");
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            Value::String(format!("{ns}/{name}"))
        }
        None => json!(""),
    }
}

fn storage_class(obj: &Value, _: &PrintContext) -> Value {
    let beta = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .and_then(Value::as_str);
    match beta {
        Some(c) => json!(c),
        None => json!(print::str_at(obj, "/spec/storageClassName", "")),
    }
}

fn attributes_class(obj: &Value, _: &PrintContext) -> Value {
    json!(print::str_at(
        obj,
        "/spec/volumeAttributesClassName",
        "<unset>"
    ))
}

fn volume_mode(obj: &Value, _: &PrintContext) -> Value {
    json!(print::str_at(obj, "/spec/volumeMode", "<unset>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<StatusCause>) -> Vec<String> {
        errs.iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn defaults() {
        let mut pv = json!({"spec": {"persistentVolumeReclaimPolicy": "Delete"}});
        pv_defaults(&mut pv);
        assert_eq!(
            pv,
            json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}})
        );
        let mut pvc = json!({"spec": {"volumeMode": "Block"}, "status": {"phase": "Bound"}});
        let before = pvc.clone();
        pvc_defaults(&mut pvc);
        assert_eq!(pvc, before);
    }

    #[test]
    fn validation() {
        let pv = json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "hostPath": {"path": "/x"}}});
        assert!(validate_pv(&pv, None).is_empty());
        assert_eq!(
            msgs(validate_pv(&json!({"spec": {"accessModes": ["Bad"]}}), None)),
            vec![
                "spec.accessModes: Unsupported value: \"Bad\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.capacity: Required value",
                "spec.capacity: Unsupported value: core.ResourceList(nil): supported values: \"storage\"",
                "spec: Required value: must specify a volume type",
            ]
        );
        assert_eq!(
            msgs(validate_pvc(&json!({"spec": {}}), None)),
            vec![
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
            ]
        );
        let pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}});
        assert_eq!(
            msgs(validate_pvc(&pvc, None)),
            vec!["spec.resources[storage]: Invalid value: \"0\": must be greater than zero"]
        );
    }

    #[test]
    fn pvc_updates() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}});
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        grown["spec"]["volumeName"] = json!("pv1");
        assert!(validate_pvc(&grown, Some(&old)).is_empty());
        let mut shrunk = old.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("500Mi");
        assert_eq!(msgs(validate_pvc(&shrunk, Some(&old))), vec![
            "spec.resources.requests.storage: Forbidden: field can not be less than previous value"]);
        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(msgs(validate_pvc(&modes, Some(&old))), vec![
            "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"]);
    }

    #[test]
    fn columns() {
        let ctx = PrintContext { now: 0 };
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "a", "name": "c"},
            "storageClassName": "fast", "volumeMode": "Filesystem"}, "status": {"phase": "Bound"}});
        let cells: Vec<Value> = PV_COLUMNS
            .iter()
            .filter(|c| c.name != "Age" && c.name != "Name")
            .map(|c| (c.cell)(&pv, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("Retain"),
                json!("Bound"),
                json!("a/c"),
                json!("fast"),
                json!("<unset>"),
                json!(""),
                json!("Filesystem")
            ]
        );
        let pvc = json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}});
        assert_eq!((PVC_COLUMNS[3].cell)(&pvc, &ctx), json!(""));
    }
}

//! The key order kube-apiserver writes JSON objects in.
//!
//! kube encodes a built-in object from its Go struct with `encoding/json`:
//! the embedded `TypeMeta` first (`kind`, then `apiVersion`), then every
//! field in Go declaration order, and the keys of Go maps (`labels`,
//! `annotations`, `data`, `nodeSelector`, ...) sorted. A custom resource is
//! an `unstructured.Unstructured`, a Go `map[string]interface{}` at every
//! level, so kube writes every one of its objects with sorted keys
//! (`{"apiVersion":...,"kind":...,"metadata":{"annotations":...`).
//!
//! The declaration order comes from the message table generated from the
//! upstream IDL: `go-to-protobuf` declares the fields of each message in
//! the order of the Go struct (field numbers do not follow it where fields
//! were added in the middle, e.g. `OwnerReference.apiVersion` is field 5
//! and comes first), and marks embedded structs (`Volume.volumeSource`,
//! `Probe.handler`) whose fields JSON inlines.
//!
//! Keys the table does not know (fields kube would drop, newer fields) keep
//! their relative order after the known ones. Values whose JSON is not a
//! message (`RawExtension`, `FieldsV1`, quantities, times) are left as they
//! are: kube copies their bytes.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::table::{table, Kind, Special, Table, Ty};
use crate::MAX_DEPTH;

/// Groups served by kube-apiserver from Go types that the IDL table does
/// not cover (apiextensions, the aggregator): typed, not unstructured.
const TYPED_GROUPS_WITHOUT_IDL: &[&str] = &["apiextensions.k8s.io", "apiregistration.k8s.io"];

/// `ObjectMeta`'s fields in Go struct order; used where no message applies
/// (kinds outside the table) and to place `resourceVersion`.
pub const OBJECT_META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// How one JSON key of a message is written: its rank and its value's kind.
#[derive(Clone, Copy)]
struct Slot {
    name: &'static str,
    kind: Kind,
}

/// One message's JSON keys in write order, embedded structs inlined, and
/// their indexes sorted by name for lookup.
struct Layout {
    slots: Vec<Slot>,
    by_name: Vec<(&'static str, usize)>,
}

impl Layout {
    fn find(&self, key: &str) -> Option<usize> {
        self.by_name
            .binary_search_by(|(n, _)| (*n).cmp(key))
            .ok()
            .map(|i| self.by_name[i].1)
    }
}

/// Every message's layout.
struct Layouts {
    by_message: Vec<Layout>,
    object_meta: Option<usize>,
}

fn layouts() -> Option<&'static Layouts> {
    static L: OnceLock<Option<Layouts>> = OnceLock::new();
    L.get_or_init(|| {
        let t = table().ok()?;
        let by_message = (0..t.messages.len())
            .map(|i| {
                let mut slots = Vec::new();
                flatten(t, i, &mut slots, 0);
                let mut by_name: Vec<(&'static str, usize)> =
                    slots.iter().enumerate().map(|(i, s)| (s.name, i)).collect();
                by_name.sort_by_key(|e| e.0);
                Layout { slots, by_name }
            })
            .collect();
        Some(Layouts {
            by_message,
            object_meta: t.index("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        })
    })
    .as_ref()
}

fn flatten(t: &'static Table, msg: usize, out: &mut Vec<Slot>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    for f in &t.message(msg).fields {
        match (f.inline, f.kind) {
            (true, Kind::Single(Ty::Message(inner))) => flatten(t, inner, out, depth + 1),
            _ => out.push(Slot {
                name: f.name.as_str(),
                kind: f.kind,
            }),
        }
    }
}

/// How an object without a message of its own is ordered.
enum Untyped {
    /// A kind served from Go types outside the table: `kind`, `apiVersion`,
    /// `metadata` in `ObjectMeta` order, then the rest as stored.
    Typed,
    /// A custom resource: every key of every object sorted.
    Sorted,
}

/// Reorders `obj` (a whole object with `kind` and `apiVersion`) into the
/// order kube-apiserver writes it in. Objects of built-in kinds follow the
/// IDL; custom resources are sorted; an object without `apiVersion` gets
/// `kind`, `apiVersion` and `metadata` first and is otherwise kept.
pub fn order_object(obj: &mut Value) {
    let Value::Object(m) = obj else { return };
    let api_version = m.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = m.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = crate::split_api_version(api_version);
    if let Some(msg) = crate::message_for(group, version, kind) {
        let (Ok(t), Some(l)) = (table(), layouts()) else {
            return;
        };
        if let Some(i) = t.index(msg) {
            order_message(t, l, i, m, true, 0);
            return;
        }
    }
    let untyped = match table() {
        Ok(t)
            if !api_version.is_empty()
                && !t.groups.contains_key(group)
                && !TYPED_GROUPS_WITHOUT_IDL.contains(&group) =>
        {
            Untyped::Sorted
        }
        _ => Untyped::Typed,
    };
    match untyped {
        Untyped::Sorted => sort_keys(obj, 0),
        Untyped::Typed => order_typed_without_idl(m),
    }
}

/// Reorders `obj` as the given built-in kind (`None` when the kind is not
/// in the table). `kind`/`apiVersion` keys, when present, come first.
pub fn order_as(group: &str, version: &str, kind: &str, obj: &mut Value) -> Option<()> {
    let msg = crate::message_for(group, version, kind)?;
    let (t, l) = (table().ok()?, layouts()?);
    let i = t.index(msg)?;
    if let Value::Object(m) = obj {
        order_message(t, l, i, m, true, 0);
    }
    Some(())
}

fn order_typed_without_idl(m: &mut Map<String, Value>) {
    let rank = |k: &str| match k {
        "kind" => 0,
        "apiVersion" => 1,
        "metadata" => 2,
        _ => 3,
    };
    if !in_order(m, rank) {
        rebuild(m, rank);
    }
    if let (Some(Value::Object(meta)), Ok(t), Some(l)) = (m.get_mut("metadata"), table(), layouts())
    {
        if let Some(i) = l.object_meta {
            order_message(t, l, i, meta, false, 1);
        }
    }
}

/// Stable-sorts the entries of `m` by `rank`.
fn rebuild(m: &mut Map<String, Value>, rank: impl Fn(&str) -> usize) {
    let mut entries: Vec<(usize, (String, Value))> = std::mem::take(m)
        .into_iter()
        .map(|(k, v)| (rank(&k), (k, v)))
        .collect();
    entries.sort_by_key(|e| e.0);
    m.extend(entries.into_iter().map(|(_, kv)| kv));
}

/// Whether `rank` is non-decreasing over the keys of `m`.
fn in_order(m: &Map<String, Value>, rank: impl Fn(&str) -> usize) -> bool {
    let mut last = 0;
    m.keys().all(|k| {
        let r = rank(k);
        let ok = r >= last;
        last = r;
        ok
    })
}

fn order_message(
    t: &'static Table,
    l: &Layouts,
    msg: usize,
    m: &mut Map<String, Value>,
    top: bool,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(layout) = l.by_message.get(msg) else {
        return;
    };
    // kind and apiVersion (TypeMeta) before the message's own fields;
    // unknown keys after them.
    let offset = if top { 2 } else { 0 };
    let rank = |k: &str| match (top, k) {
        (true, "kind") => 0,
        (true, "apiVersion") => 1,
        _ => layout.find(k).map_or(usize::MAX, |i| i + offset),
    };
    // One pass orders the values and checks the keys; the map itself is
    // rebuilt only when its keys are out of order (a PUT of what a GET
    // returned is not).
    let mut last = 0;
    let mut sorted = true;
    for (k, v) in m.iter_mut() {
        let r = rank(k);
        sorted &= r >= last;
        last = r;
        if let Some(slot) = r.checked_sub(offset).and_then(|i| layout.slots.get(i)) {
            order_value(t, l, slot.kind, v, depth + 1);
        }
    }
    if !sorted {
        rebuild(m, rank);
    }
}

fn order_value(t: &'static Table, l: &Layouts, kind: Kind, v: &mut Value, depth: usize) {
    match (kind, v) {
        (Kind::Single(Ty::Message(i)), Value::Object(m)) => order_nested(t, l, i, m, depth),
        (Kind::Repeated(Ty::Message(i)), Value::Array(items)) => {
            for item in items {
                if let Value::Object(m) = item {
                    order_nested(t, l, i, m, depth);
                }
            }
        }
        (Kind::Map(_, ty), Value::Object(m)) => {
            // Go's encoding/json writes map keys sorted.
            if !m.keys().zip(m.keys().skip(1)).all(|(a, b)| a <= b) {
                m.sort_keys();
            }
            if let Ty::Message(i) = ty {
                for item in m.values_mut() {
                    if let Value::Object(m) = item {
                        order_nested(t, l, i, m, depth);
                    }
                }
            }
        }
        _ => {}
    }
}

fn order_nested(
    t: &'static Table,
    l: &Layouts,
    msg: usize,
    m: &mut Map<String, Value>,
    depth: usize,
) {
    // Messages written as something else than their fields keep their
    // bytes (an embedded object, managed fields, a quantity, a time).
    if t.message(msg).special == Special::None {
        order_message(t, l, msg, m, false, depth);
    }
}

fn sort_keys(v: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(m) => {
            if !m.keys().zip(m.keys().skip(1)).all(|(a, b)| a <= b) {
                m.sort_keys();
            }
            for item in m.values_mut() {
                sort_keys(item, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                sort_keys(item, depth + 1);
            }
        }
        _ => {}
    }
}

/// Sets `metadata.resourceVersion` where kube writes it: after `uid` in
/// `ObjectMeta` order, or in sorted position when the metadata is sorted
/// (a custom resource's: it starts with a key other than `name`,
/// `generateName` or `namespace`, since a stored object always has a
/// `creationTimestamp`, which sorts before them).
pub fn set_resource_version(meta: &mut Map<String, Value>, rv: String) {
    const KEY: &str = "resourceVersion";
    if let Some(v) = meta.get_mut(KEY) {
        *v = Value::String(rv);
        return;
    }
    let typed = matches!(
        meta.keys().next().map(String::as_str),
        Some("name" | "generateName" | "namespace")
    );
    let at = if typed {
        // Before the first key ranked after resourceVersion (or unknown).
        let rv_rank = 5;
        meta.keys()
            .position(|k| {
                OBJECT_META_ORDER
                    .iter()
                    .position(|o| *o == k)
                    .is_none_or(|r| r > rv_rank)
            })
            .unwrap_or(meta.len())
    } else {
        meta.keys()
            .position(|k| k.as_str() > KEY)
            .unwrap_or(meta.len())
    };
    meta.shift_insert(at, KEY.to_string(), Value::String(rv));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    fn compact(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn pod_in_kube_order() {
        let mut pod = json!({
            "status": {"phase": "Pending"},
            "spec": {
                "restartPolicy": "Always",
                "containers": [{
                    "resources": {"limits": {"memory": "1Gi", "cpu": "1"}},
                    "image": "nginx",
                    "name": "web",
                    "ports": [{"protocol": "TCP", "containerPort": 80}],
                    "livenessProbe": {"periodSeconds": 5, "httpGet": {"port": 80, "path": "/"}, "initialDelaySeconds": 1},
                }],
                "volumes": [{"configMap": {"name": "c"}, "name": "v"}],
            },
            "metadata": {
                "managedFields": [{"time": "2026-01-01T00:00:00Z", "manager": "m", "fieldsV1": {"f:z": {}, "f:a": {}}, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"}],
                "labels": {"b": "2", "a": "1"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "uid": "u",
                "namespace": "default",
                "name": "p",
                "ownerReferences": [{"uid": "o", "name": "rs", "kind": "ReplicaSet", "apiVersion": "apps/v1", "controller": true}],
            },
            "apiVersion": "v1",
            "kind": "Pod",
        });
        order_object(&mut pod);
        assert_eq!(
            keys(&pod),
            ["kind", "apiVersion", "metadata", "spec", "status"]
        );
        assert_eq!(
            keys(&pod["metadata"]),
            [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "labels",
                "ownerReferences",
                "managedFields"
            ]
        );
        assert_eq!(compact(&pod["metadata"]["labels"]), r#"{"a":"1","b":"2"}"#);
        assert_eq!(
            keys(&pod["metadata"]["ownerReferences"][0]),
            ["apiVersion", "kind", "name", "uid", "controller"]
        );
        assert_eq!(
            keys(&pod["metadata"]["managedFields"][0]),
            [
                "manager",
                "operation",
                "apiVersion",
                "time",
                "fieldsType",
                "fieldsV1"
            ]
        );
        // FieldsV1 is copied as it is, not reordered.
        assert_eq!(
            compact(&pod["metadata"]["managedFields"][0]["fieldsV1"]),
            r#"{"f:z":{},"f:a":{}}"#
        );
        assert_eq!(
            keys(&pod["spec"]),
            ["volumes", "containers", "restartPolicy"]
        );
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            keys(c),
            ["name", "image", "ports", "resources", "livenessProbe"]
        );
        assert_eq!(
            compact(&c["ports"][0]),
            r#"{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(
            compact(&c["resources"]),
            r#"{"limits":{"cpu":"1","memory":"1Gi"}}"#
        );
        // The embedded ProbeHandler's fields come where it is declared.
        assert_eq!(
            keys(&c["livenessProbe"]),
            ["httpGet", "initialDelaySeconds", "periodSeconds"]
        );
        assert_eq!(keys(&c["livenessProbe"]["httpGet"]), ["path", "port"]);
        // Volume inlines VolumeSource after its name.
        assert_eq!(keys(&pod["spec"]["volumes"][0]), ["name", "configMap"]);
    }

    #[test]
    fn deployment_in_kube_order() {
        let mut d = json!({
            "spec": {
                "template": {"spec": {"containers": [{"image": "i", "name": "c"}]}, "metadata": {"labels": {"app": "x"}}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                "selector": {"matchLabels": {"app": "x"}},
                "replicas": 3,
                "revisionHistoryLimit": 10,
            },
            "kind": "Deployment",
            "metadata": {"generation": 1, "name": "d"},
            "apiVersion": "apps/v1",
        });
        order_object(&mut d);
        assert_eq!(keys(&d), ["kind", "apiVersion", "metadata", "spec"]);
        assert_eq!(keys(&d["metadata"]), ["name", "generation"]);
        assert_eq!(
            keys(&d["spec"]),
            [
                "replicas",
                "selector",
                "template",
                "strategy",
                "revisionHistoryLimit"
            ]
        );
        assert_eq!(keys(&d["spec"]["template"]), ["metadata", "spec"]);
        assert_eq!(
            keys(&d["spec"]["template"]["spec"]["containers"][0]),
            ["name", "image"]
        );
        assert_eq!(keys(&d["spec"]["strategy"]), ["type", "rollingUpdate"]);
    }

    #[test]
    fn configmap_data_sorted_and_unknown_fields_last() {
        let mut cm = json!({
            "zeta": 1,
            "data": {"b": "2", "a": "1", "C": "3"},
            "metadata": {"annotations": {"y": "", "x": ""}, "name": "c"},
            "alpha": 2,
            "apiVersion": "v1",
            "binaryData": {"k": "AA=="},
            "kind": "ConfigMap",
            "immutable": false,
        });
        order_object(&mut cm);
        assert_eq!(
            compact(&cm),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","annotations":{"x":"","y":""}},"immutable":false,"data":{"C":"3","a":"1","b":"2"},"binaryData":{"k":"AA=="},"zeta":1,"alpha":2}"#
        );
    }

    #[test]
    fn custom_resource_sorted_everywhere() {
        let mut cr = json!({
            "kind": "CronTab",
            "apiVersion": "stable.example.com/v1",
            "metadata": {"name": "x", "creationTimestamp": "t", "uid": "u", "generation": 1},
            "spec": {"image": "i", "cronSpec": "*", "nested": [{"z": 1, "a": 2}]},
        });
        order_object(&mut cr);
        assert_eq!(
            compact(&cr),
            r#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"creationTimestamp":"t","generation":1,"name":"x","uid":"u"},"spec":{"cronSpec":"*","image":"i","nested":[{"a":2,"z":1}]}}"#
        );
    }

    #[test]
    fn typed_kind_outside_the_table() {
        let mut crd = json!({
            "spec": {"names": {"plural": "x"}, "group": "g"},
            "metadata": {"uid": "u", "name": "x.g"},
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
        });
        order_object(&mut crd);
        assert_eq!(
            compact(&crd),
            r#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{"name":"x.g","uid":"u"},"spec":{"names":{"plural":"x"},"group":"g"}}"#
        );
    }

    #[test]
    fn status_envelope() {
        let mut s = json!({"code": 404, "reason": "NotFound", "message": "m", "status": "Failure", "metadata": {}, "apiVersion": "v1", "kind": "Status"});
        order_object(&mut s);
        assert_eq!(
            keys(&s),
            [
                "kind",
                "apiVersion",
                "metadata",
                "status",
                "message",
                "reason",
                "code"
            ]
        );
    }

    #[test]
    fn resource_version_placement() {
        let mut m =
            json!({"name": "a", "namespace": "n", "uid": "u", "generation": 2, "labels": {}});
        set_resource_version(m.as_object_mut().unwrap(), "7".into());
        assert_eq!(
            keys(&m),
            [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "labels"
            ]
        );
        let mut m = json!({"creationTimestamp": "t", "name": "a", "uid": "u"});
        set_resource_version(m.as_object_mut().unwrap(), "7".into());
        assert_eq!(
            keys(&m),
            ["creationTimestamp", "name", "resourceVersion", "uid"]
        );
        let mut m = json!({"name": "a", "resourceVersion": "1", "uid": "u"});
        set_resource_version(m.as_object_mut().unwrap(), "9".into());
        assert_eq!(keys(&m), ["name", "resourceVersion", "uid"]);
        assert_eq!(m["resourceVersion"], "9");
        let mut m = json!({});
        set_resource_version(m.as_object_mut().unwrap(), "3".into());
        assert_eq!(compact(&m), r#"{"resourceVersion":"3"}"#);
    }
}

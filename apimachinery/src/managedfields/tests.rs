use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::schema::{builtin, TypeRef};

fn deployment_type() -> TypeRef<'static> {
    builtin()
        .by_gvk("apps", "v1", "Deployment")
        .expect("Deployment")
}

fn configmap_type() -> TypeRef<'static> {
    builtin().by_gvk("", "v1", "ConfigMap").expect("ConfigMap")
}

fn f(name: &str) -> PathElement {
    PathElement::Field(name.to_string())
}

/// A Deployment as kube stores it after `kubectl create deployment nginx
/// --image=nginx --port=80` (defaults applied), plus an env var.
fn created_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "nginx",
            "namespace": "default",
            "uid": "6b9f2a51-0000-4000-8000-000000000001",
            "resourceVersion": "100",
            "generation": 1,
            "creationTimestamp": "2026-11-21T20:00:00Z",
            "labels": {"app": "nginx"}
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"app": "nginx"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "FOO", "value": "bar"}],
                        "resources": {},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "Always"
                    }],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "securityContext": {},
                    "schedulerName": "default-scheduler"
                }
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600
        },
        "status": {}
    })
}

/// The fieldsV1 kube records for [`created_deployment`].
const CREATED_DEPLOYMENT_FIELDS: &str = concat!(
    r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"#,
    r#""f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"#,
    r#""f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"#,
    r#""f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"#,
    r#""f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"#,
    r#""f:env":{".":{},"k:{\"name\":\"FOO\"}":{".":{},"f:name":{},"f:value":{}}},"#,
    r#""f:image":{},"f:imagePullPolicy":{},"f:name":{},"#,
    r#""f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"#,
    r#""f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"#,
    r#""f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}"#
);

const T1: &str = "2026-11-21T20:00:00Z";
const T2: &str = "2026-11-21T20:05:00Z";
const T3: &str = "2026-11-21T20:10:00Z";

fn create(ty: Option<TypeRef<'_>>, obj: &Value, manager: &str, api_version: &str) -> Value {
    let mut new = obj.clone();
    update_managed_fields(ty, None, &mut new, manager, api_version, None, T1).expect("create");
    new
}

fn managed(obj: &Value) -> Vec<ManagedFieldsEntry> {
    decode_managed_fields(&obj["metadata"]).expect("decodes")
}

fn entry_json(obj: &Value, i: usize) -> &Value {
    &obj["metadata"]["managedFields"][i]
}

#[test]
fn created_deployment_matches_kube() {
    let obj = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mf = &obj["metadata"]["managedFields"];
    assert_eq!(mf.as_array().map(Vec::len), Some(1));
    let e = &mf[0];
    assert_eq!(e["manager"], "kubectl-create");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], T1);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e.get("subresource").is_none());
    assert_eq!(e["fieldsV1"].to_string(), CREATED_DEPLOYMENT_FIELDS);
    // The entry's keys are in kube's order.
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "manager",
            "operation",
            "apiVersion",
            "time",
            "fieldsType",
            "fieldsV1"
        ]
    );
}

#[test]
fn second_manager_takes_over_a_field() {
    let created = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(3);
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut scaled,
        "kubectl-scale",
        "apps/v1",
        None,
        T2,
    )
    .unwrap();
    let entries = managed(&scaled);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].manager, "kubectl-create");
    assert_eq!(entries[0].time.as_deref(), Some(T1));
    assert!(!entries[0].fields_v1.has(&[f("spec"), f("replicas")]));
    assert!(entries[0]
        .fields_v1
        .has(&[f("spec"), f("revisionHistoryLimit")]));
    assert_eq!(entries[1].manager, "kubectl-scale");
    assert_eq!(entries[1].time.as_deref(), Some(T2));
    assert_eq!(
        entry_json(&scaled, 1)["fieldsV1"].to_string(),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );

    // The first manager changing the field again takes it back, and the
    // second manager's entry, now empty, goes away.
    let mut back = scaled.clone();
    back["spec"]["replicas"] = json!(1);
    update_managed_fields(
        Some(deployment_type()),
        Some(&scaled),
        &mut back,
        "kubectl-create",
        "apps/v1",
        None,
        T3,
    )
    .unwrap();
    let entries = managed(&back);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager, "kubectl-create");
    assert_eq!(entries[0].time.as_deref(), Some(T3));
    assert_eq!(
        entries[0].fields_v1.to_json_string(),
        CREATED_DEPLOYMENT_FIELDS
    );
}

#[test]
fn removed_field_leaves_its_owner() {
    let created = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mut edited = created.clone();
    edited["spec"]
        .as_object_mut()
        .unwrap()
        .remove("revisionHistoryLimit");
    edited["metadata"].as_object_mut().unwrap().remove("labels");
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut edited,
        "kubectl-edit",
        "apps/v1",
        None,
        T2,
    )
    .unwrap();
    let entries = managed(&edited);
    // Only removals: the editor gets no entry, and the owner's time stays.
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager, "kubectl-create");
    assert_eq!(entries[0].time.as_deref(), Some(T1));
    let fields = &entries[0].fields_v1;
    assert!(!fields.has(&[f("spec"), f("revisionHistoryLimit")]));
    assert!(!fields.has(&[f("metadata"), f("labels")]));
    assert!(!fields.has(&[f("metadata"), f("labels"), f("app")]));
    assert!(fields.has(&[f("spec"), f("replicas")]));
    assert!(fields.to_fields_v1().get("f:metadata").is_none());
}

#[test]
fn no_change_keeps_entries_and_times() {
    let created = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mut same = created.clone();
    // System fields changing is not a change of managed fields.
    same["metadata"]["resourceVersion"] = json!("101");
    same["metadata"]["generation"] = json!(2);
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut same,
        "someone",
        "apps/v1",
        None,
        T2,
    )
    .unwrap();
    assert_eq!(
        same["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
}

#[test]
fn emptied_entry_disappears() {
    let ty = Some(configmap_type());
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "data": {"a": "1", "b": "2"}
    });
    let created = create(ty, &cm, "creator", "v1");
    let mut a_changed = created.clone();
    a_changed["data"]["a"] = json!("changed");
    update_managed_fields(ty, Some(&created), &mut a_changed, "alice", "v1", None, T2).unwrap();
    let mut b_changed = a_changed.clone();
    b_changed["data"]["b"] = json!("changed");
    update_managed_fields(ty, Some(&a_changed), &mut b_changed, "bob", "v1", None, T3).unwrap();
    let entries = managed(&b_changed);
    let names: Vec<&str> = entries.iter().map(|e| e.manager.as_str()).collect();
    // creator still owns `data` itself; alice owns data.a, bob data.b.
    assert_eq!(names, ["creator", "alice", "bob"]);
    assert_eq!(entries[0].fields_v1.to_json_string(), r#"{"f:data":{}}"#);

    // Alice's only field is taken by carol: alice's entry disappears.
    let mut c = b_changed.clone();
    c["data"]["a"] = json!("carol");
    update_managed_fields(ty, Some(&b_changed), &mut c, "carol", "v1", None, T3).unwrap();
    let names: Vec<String> = managed(&c).into_iter().map(|e| e.manager).collect();
    assert_eq!(names, ["creator", "bob", "carol"]);
}

#[test]
fn configmap_data_keys_are_granular() {
    let ty = Some(configmap_type());
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "labels": {"team": "x"}},
        "data": {"key": "value", "other": "v"},
        "binaryData": {"bin": "AAEC"}
    });
    let created = create(ty, &cm, "kubectl-create", "v1");
    assert_eq!(
        entry_json(&created, 0)["fieldsV1"].to_string(),
        concat!(
            r#"{"f:binaryData":{".":{},"f:bin":{}},"f:data":{".":{},"f:key":{},"f:other":{}},"#,
            r#""f:metadata":{"f:labels":{".":{},"f:team":{}}}}"#
        )
    );
    // The applied field set of the same object has no "." on maps.
    let applied = field_set(
        ty,
        &json!({"data": {"key": "value"}, "metadata": {"labels": {"team": "x"}}}),
    );
    assert_eq!(
        applied.to_json_string(),
        r#"{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:team":{}}}}"#
    );
}

#[test]
fn status_writes_are_recorded_with_the_subresource() {
    let created = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mut with_status = created.clone();
    with_status["status"] = json!({"replicas": 1, "observedGeneration": 1});
    // A main-resource write does not own status.
    let mut main = with_status.clone();
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut main,
        "client",
        "apps/v1",
        None,
        T2,
    )
    .unwrap();
    assert_eq!(managed(&main).len(), 1);
    // A /status write owns only status.
    let mut status = with_status.clone();
    status["spec"]["replicas"] = json!(9);
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut status,
        "kube-controller-manager",
        "apps/v1",
        Some("status"),
        T2,
    )
    .unwrap();
    let entries = managed(&status);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].subresource.as_deref(), Some("status"));
    assert_eq!(
        entries[1].fields_v1.to_json_string(),
        r#"{"f:status":{"f:observedGeneration":{},"f:replicas":{}}}"#
    );
    assert_eq!(entry_json(&status, 1)["subresource"], "status");
    // The reset spec change is not taken from the creator.
    assert!(entries[0].fields_v1.has(&[f("spec"), f("replicas")]));
}

#[test]
fn client_managed_fields_rules() {
    let ty = Some(configmap_type());
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "data": {"a": "1"}
    });
    let created = create(ty, &cm, "creator", "v1");

    // Absent managedFields: the stored ones are kept and updated.
    let mut absent = created.clone();
    absent["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    absent["data"]["b"] = json!("2");
    update_managed_fields(ty, Some(&created), &mut absent, "writer", "v1", None, T2).unwrap();
    assert_eq!(managed(&absent).len(), 2);

    // `[]` resets: the object stops being tracked, even when the write
    // changes fields (kube only starts tracking on create or apply).
    let mut reset = created.clone();
    reset["metadata"]["managedFields"] = json!([]);
    reset["data"]["b"] = json!("2");
    update_managed_fields(ty, Some(&created), &mut reset, "writer", "v1", None, T2).unwrap();
    assert!(reset["metadata"].get("managedFields").is_none());
    // ... and a later update of the untracked object stays untracked.
    let mut later = reset.clone();
    later["data"]["z"] = json!("1");
    update_managed_fields(ty, Some(&reset), &mut later, "w", "v1", None, T3).unwrap();
    assert!(later["metadata"].get("managedFields").is_none());

    // `[{}]` resets too.
    let mut reset_one = created.clone();
    reset_one["metadata"]["managedFields"] = json!([{}]);
    update_managed_fields(ty, Some(&created), &mut reset_one, "writer", "v1", None, T2).unwrap();
    assert!(reset_one["metadata"].get("managedFields").is_none());

    // On create, a reset list still lets the create be recorded.
    let mut create_reset = cm.clone();
    create_reset["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("uid");
    create_reset["metadata"]["managedFields"] = json!([]);
    update_managed_fields(ty, None, &mut create_reset, "creator", "v1", None, T1).unwrap();
    assert_eq!(managed(&create_reset).len(), 1);

    // A valid client list replaces the stored one.
    let mut replaced = created.clone();
    replaced["metadata"]["managedFields"] = json!([{
        "manager": "someone-else", "operation": "Apply", "apiVersion": "v1",
        "time": "2020-01-01T00:00:00.5+01:00", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}}}
    }]);
    update_managed_fields(ty, Some(&created), &mut replaced, "writer", "v1", None, T2).unwrap();
    let entries = managed(&replaced);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager, "someone-else");
    assert_eq!(entries[0].operation, "Apply");
    assert_eq!(entries[0].time.as_deref(), Some("2019-12-31T23:00:00Z"));
    assert!(entry_json(&replaced, 0).get("apiVersion").is_some());

    // An invalid client list falls back to the stored one.
    let mut invalid = created.clone();
    invalid["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Bad"}]);
    update_managed_fields(ty, Some(&created), &mut invalid, "writer", "v1", None, T2).unwrap();
    assert_eq!(
        invalid["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );

    // On create, a valid client list is kept and updated.
    let mut with_list = cm.clone();
    with_list["metadata"]["managedFields"] = json!([{
        "manager": "pre", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}, "f:gone": {}}}
    }]);
    update_managed_fields(ty, None, &mut with_list, "creator", "v1", None, T1).unwrap();
    let entries = managed(&with_list);
    let names: Vec<&str> = entries.iter().map(|e| e.manager.as_str()).collect();
    // `pre` lost data.a (changed by this create); it keeps the unknown path.
    assert_eq!(names, ["pre", "creator"]);
    assert_eq!(
        entries[0].fields_v1.to_json_string(),
        r#"{"f:data":{"f:gone":{}}}"#
    );
}

#[test]
fn subresource_writes_ignore_client_managed_fields() {
    let created = create(
        Some(deployment_type()),
        &created_deployment(),
        "kubectl-create",
        "apps/v1",
    );
    let mut status = created.clone();
    status["metadata"]["managedFields"] = json!([]);
    status["status"] = json!({"replicas": 1});
    update_managed_fields(
        Some(deployment_type()),
        Some(&created),
        &mut status,
        "kcm",
        "apps/v1",
        Some("status"),
        T2,
    )
    .unwrap();
    assert_eq!(managed(&status).len(), 2);
}

#[test]
fn empty_manager_is_unknown() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    let obj = create(Some(configmap_type()), &cm, "", "v1");
    assert_eq!(entry_json(&obj, 0)["manager"], "unknown");
}

#[test]
fn manager_from_user_agent_like_kube() {
    assert_eq!(
        manager_from_user_agent("kubectl/v1.31.0 (linux/amd64) kubernetes/abc"),
        "kubectl"
    );
    assert_eq!(
        manager_from_user_agent("Go-http-client/1.1"),
        "Go-http-client"
    );
    assert_eq!(manager_from_user_agent(""), "");
    assert_eq!(manager_from_user_agent("/x"), "");
    assert_eq!(manager_from_user_agent("a\u{7}b\tc d"), "abc d");
    let long = "é".repeat(100);
    let m = manager_from_user_agent(&long);
    assert_eq!(m.len(), 128);
    assert_eq!(m, "é".repeat(64));
    assert_eq!(manager_from_user_agent(&"x".repeat(200)).len(), 128);
}

#[test]
fn custom_resources_without_schema() {
    let cr = json!({
        "apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"list": [1, 2], "nested": {"k": "v"}, "empty": {}}
    });
    let obj = create(None, &cr, "kubectl-create", "example.com/v1");
    assert_eq!(
        entry_json(&obj, 0)["fieldsV1"].to_string(),
        concat!(
            r#"{"f:metadata":{"f:labels":{".":{},"f:x":{}}},"#,
            r#""f:spec":{".":{},"f:empty":{},"f:list":{},"f:nested":{".":{},"f:k":{}}}}"#
        )
    );
    assert_eq!(
        field_set(None, &cr["spec"]).to_json_string(),
        r#"{"f:empty":{},"f:list":{},"f:nested":{".":{},"f:k":{}}}"#
    );
}

#[test]
fn sets_and_keyed_lists() {
    let ty = Some(deployment_type());
    let old = json!({"metadata": {"finalizers": ["a", "b"]}});
    let new = json!({"metadata": {"finalizers": ["b", "c"]}});
    let c = compare_detailed(ty, &old, &new);
    assert_eq!(
        c.added.to_json_string(),
        r#"{"f:metadata":{"f:finalizers":{"v:\"c\"":{}}}}"#
    );
    assert_eq!(
        c.removed.to_json_string(),
        r#"{"f:metadata":{"f:finalizers":{"v:\"a\"":{}}}}"#
    );
    assert!(c.modified.is_empty());

    // Reordering a keyed list is no change; changing an item is.
    let spec =
        |containers: Value| json!({"spec": {"template": {"spec": {"containers": containers}}}});
    let a = spec(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]));
    let b = spec(json!([{"name": "b", "image": "1"}, {"name": "a", "image": "1"}]));
    assert!(compare_detailed(ty, &a, &b).is_same());
    let c = spec(json!([{"name": "b", "image": "2"}, {"name": "a", "image": "1"}]));
    let (changed, removed) = compare(ty, &a, &c);
    assert!(removed.is_empty());
    assert_eq!(
        changed.to_json_string(),
        r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"b\"}":{"f:image":{}}}}}}}"#
    );

    // Atomic lists are one field.
    let a = spec(json!([{"name": "a", "args": ["x"]}]));
    let b = spec(json!([{"name": "a", "args": ["y", "z"]}]));
    let (changed, _) = compare(ty, &a, &b);
    assert_eq!(
        changed.to_json_string(),
        r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{"f:args":{}}}}}}}"#
    );

    // Duplicated keys make the items one opaque field.
    let dup = spec(json!([{"name": "a", "image": "1"}, {"name": "a", "image": "2"}]));
    assert_eq!(
        field_set(ty, &dup).to_json_string(),
        r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{}}}}}}"#
    );
}

#[test]
fn merge_strategy_lists_without_list_type_are_keyed() {
    // An OpenAPI schema whose list only has the patch strategy.
    let defs = json!({
        "x.Thing": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "x", "version": "v1", "kind": "Thing"}],
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"$ref": "#/definitions/x.Item"},
                    "x-kubernetes-patch-strategy": "merge",
                    "x-kubernetes-patch-merge-key": "id"
                },
                "tags": {"type": "array", "items": {"type": "string"},
                         "x-kubernetes-patch-strategy": "merge"},
                "plain": {"type": "array", "items": {"type": "string"}}
            }
        },
        "x.Item": {"type": "object", "properties": {"id": {"type": "integer"}, "v": {"type": "string"}}}
    });
    let Value::Object(defs) = defs else {
        unreachable!()
    };
    let schema = crate::schema::Schema::new(defs);
    let ty = schema.by_gvk("x", "v1", "Thing");
    let v = json!({"items": [{"id": 1, "v": "a"}], "tags": ["t"], "plain": ["p"]});
    assert_eq!(
        field_set(ty, &v).to_json_string(),
        r#"{"f:items":{"k:{\"id\":1}":{".":{},"f:id":{},"f:v":{}}},"f:plain":{},"f:tags":{"v:\"t\"":{}}}"#
    );
    // A custom schema starts from an empty object on create.
    assert_eq!(empty_object(ty), json!({}));
}

#[test]
fn empty_object_of_builtins() {
    let d = empty_object(Some(deployment_type()));
    assert_eq!(d["metadata"], json!({"creationTimestamp": null}));
    assert_eq!(d["spec"]["template"]["spec"]["containers"], Value::Null);
    assert_eq!(d["spec"]["strategy"], json!({}));
    assert!(d["spec"].get("replicas").is_none());
    assert_eq!(d["status"], json!({}));
    assert_eq!(empty_object(None), json!({}));
}

#[test]
fn compare_null_empty_and_kind_changes() {
    // Empty and null maps are leaves.
    let (c, r) = compare(None, &json!({"a": {}}), &json!({"a": null}));
    assert_eq!(c.to_json_string(), r#"{"f:a":{}}"#);
    assert!(r.is_empty());
    // A map turning into a scalar: modified, with its old children removed.
    let d = compare_detailed(None, &json!({"a": {"b": 1}}), &json!({"a": "x"}));
    assert_eq!(d.modified.to_json_string(), r#"{"f:a":{}}"#);
    assert_eq!(d.removed.to_json_string(), r#"{"f:a":{"f:b":{}}}"#);
    assert!(d.added.is_empty());
    // Ints and floats compare numerically.
    assert!(compare_detailed(None, &json!({"a": 1}), &json!({"a": 1.0})).is_same());
    // A removed subtree lists the node and its leaves.
    let d = compare_detailed(None, &json!({"a": {"b": {"c": 1}}}), &json!({}));
    assert_eq!(
        d.removed.to_json_string(),
        r#"{"f:a":{".":{},"f:b":{".":{},"f:c":{}}}}"#
    );
}

#[test]
fn fields_v1_ordering_and_escaping() {
    let mut s = FieldSet::new();
    s.insert(&[f("z")]);
    s.insert(&[f("a"), f("b")]);
    s.insert(&[f("a")]);
    s.insert(&[f("l"), PathElement::Index(10)]);
    s.insert(&[f("l"), PathElement::Index(2)]);
    s.insert(&[f("s"), PathElement::Value(json!(null))]);
    s.insert(&[f("s"), PathElement::Value(json!(true))]);
    s.insert(&[f("s"), PathElement::Value(json!("x<y"))]);
    s.insert(&[f("s"), PathElement::Value(json!(2.5))]);
    s.insert(&[f("s"), PathElement::Value(json!(10))]);
    s.insert(&[f("s"), PathElement::Value(json!(1e21))]);
    s.insert(&[
        f("k"),
        PathElement::key(vec![
            ("protocol".to_string(), json!("TCP")),
            ("containerPort".to_string(), json!(8080)),
        ]),
    ]);
    s.insert(&[f("k"), PathElement::key(vec![("a".to_string(), json!(1))])]);
    let text = s.to_json_string();
    assert_eq!(
        text,
        concat!(
            r#"{"f:a":{".":{},"f:b":{}},"#,
            r#""f:k":{"k:{\"a\":1}":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{}},"#,
            r#""f:l":{"i:2":{},"i:10":{}},"#,
            r#""f:s":{"v:2.5":{},"v:10":{},"v:1e+21":{},"v:\"x\\u003cy\"":{},"v:true":{},"v:null":{}},"#,
            r#""f:z":{}}"#
        )
    );
    let back = FieldSet::from_fields_v1(&serde_json::from_str(&text).unwrap()).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.to_json_string(), text);
}

#[test]
fn fields_v1_parsing_rules() {
    // Unknown element types are dropped; "." marks membership; null is {}.
    let v = json!({"f:a": {".": {}, "x:future": {}}, "f:b": null, "q:c": {"f:d": {}}});
    let s = FieldSet::from_fields_v1(&v).unwrap();
    assert_eq!(s.to_json_string(), r#"{"f:a":{},"f:b":{}}"#);
    // Malformed keys are errors.
    assert!(FieldSet::from_fields_v1(&json!({"f": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"fx:a": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"k:[1]": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"i:x": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    assert!(FieldSet::from_fields_v1(&json!([])).is_err());
    assert_eq!(
        FieldSet::from_fields_v1(&Value::Null).unwrap(),
        FieldSet::new()
    );
    // Keys are re-sorted on read.
    let s = FieldSet::from_fields_v1(&json!({"k:{\"b\":1,\"a\":2}": {}})).unwrap();
    assert_eq!(s.to_json_string(), r#"{"k:{\"a\":2,\"b\":1}":{}}"#);
}

#[test]
fn set_operations() {
    let p = |names: &[&str]| names.iter().map(|n| f(n)).collect::<Vec<_>>();
    let a = FieldSet::from_paths([p(&["a"]), p(&["a", "b"]), p(&["c", "d"])]);
    let b = FieldSet::from_paths([p(&["a"]), p(&["c", "e"])]);
    assert_eq!(a.union(&b).len(), 4);
    assert_eq!(a.intersection(&b), FieldSet::from_paths([p(&["a"])]));
    // Difference removes exact paths only.
    assert_eq!(
        a.difference(&b),
        FieldSet::from_paths([p(&["a", "b"]), p(&["c", "d"])])
    );
    // Recursive difference removes children too.
    assert_eq!(
        a.recursive_difference(&b),
        FieldSet::from_paths([p(&["c", "d"])])
    );
    assert!(a.difference(&a).is_empty());
    assert_eq!(
        a.leaves(),
        FieldSet::from_paths([p(&["a", "b"]), p(&["c", "d"])])
    );
    assert_eq!(a.to_string(), ".a\n.a.b\n.c.d");
}

#[test]
fn decode_errors_use_kube_messages() {
    let meta = |entry: Value| json!({"managedFields": [entry]});
    let base = json!({"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}});
    assert!(decode_managed_fields(&meta(base.clone())).is_ok());
    let with = |k: &str, v: Value| {
        let mut e = base.clone();
        e[k] = v;
        meta(e)
    };
    assert_eq!(
        decode_managed_fields(&with("operation", json!("Patch"))).unwrap_err(),
        "operation must be `Apply` or `Update`"
    );
    assert_eq!(
        decode_managed_fields(&with("apiVersion", json!(""))).unwrap_err(),
        "apiVersion must not be empty"
    );
    assert_eq!(
        decode_managed_fields(&with("fieldsType", json!(""))).unwrap_err(),
        "missing fieldsType in managed fields entry 0"
    );
    assert_eq!(
        decode_managed_fields(&with("fieldsType", json!("FieldsV2"))).unwrap_err(),
        "invalid fieldsType \"FieldsV2\" in managed fields entry 0"
    );
    assert!(decode_managed_fields(&with("fieldsV1", json!({"bad": {}})))
        .unwrap_err()
        .starts_with("error decoding versioned set from"));
    assert!(decode_managed_fields(&json!({"managedFields": {}})).is_err());
    assert!(decode_managed_fields(&json!({})).unwrap().is_empty());
    // A whole object is accepted too.
    let obj = json!({"metadata": meta(base.clone())});
    assert_eq!(decode_managed_fields(&obj).unwrap().len(), 1);
}

#[test]
fn entry_serde_round_trip() {
    let e = ManagedFieldsEntry {
        manager: "m".into(),
        operation: "Update".into(),
        api_version: "apps/v1".into(),
        time: Some(T1.into()),
        fields_type: "FieldsV1".into(),
        fields_v1: FieldSet::from_paths([vec![f("spec"), f("replicas")]]),
        subresource: Some("status".into()),
    };
    let text = serde_json::to_string(&e).unwrap();
    assert_eq!(
        text,
        r#"{"manager":"m","operation":"Update","apiVersion":"apps/v1","time":"2026-11-21T20:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"subresource":"status"}"#
    );
    let back: ManagedFieldsEntry = serde_json::from_str(&text).unwrap();
    assert_eq!(back, e);
    assert_eq!(
        encode_managed_fields(std::slice::from_ref(&e)),
        json!([e.to_json()])
    );
}

#[test]
fn encode_sorts_like_kube() {
    let entry = |m: &str, op: &str, t: Option<&str>| ManagedFieldsEntry {
        manager: m.into(),
        operation: op.into(),
        api_version: "v1".into(),
        time: t.map(str::to_string),
        fields_type: "FieldsV1".into(),
        fields_v1: FieldSet::from_paths([vec![f("x")]]),
        subresource: None,
    };
    let v = encode_managed_fields(&[
        entry("b", "Update", Some(T1)),
        entry("a", "Update", Some(T2)),
        entry("z", "Apply", Some(T3)),
        entry("c", "Update", None),
    ]);
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["z", "c", "b", "a"]);
}

#[test]
fn update_managers_are_capped() {
    let ty = Some(configmap_type());
    let mut obj = create(
        ty,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "uid": "u"}, "data": {}}),
        "m00",
        "v1",
    );
    for i in 1..=11 {
        let mut next = obj.clone();
        next["data"][format!("k{i}")] = json!("v");
        let t = format!("2026-11-21T20:{i:02}:00Z");
        update_managed_fields(
            ty,
            Some(&obj),
            &mut next,
            &format!("m{i:02}"),
            "v1",
            None,
            &t,
        )
        .unwrap();
        obj = next;
    }
    let entries = managed(&obj);
    assert_eq!(entries.len(), MAX_UPDATE_MANAGERS);
    let bucket = entries
        .iter()
        .find(|e| e.manager == ANCIENT_CHANGES_MANAGER)
        .expect("bucket");
    // The two oldest (m00 and m01) were merged.
    assert!(bucket.fields_v1.has(&[f("data"), f("k1")]));
    assert!(!entries
        .iter()
        .any(|e| e.manager == "m00" || e.manager == "m01"));
}

#[test]
fn time_parsing() {
    assert_eq!(entry::parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(
        entry::parse_rfc3339("2026-11-21T20:00:00Z").map(entry::format_rfc3339),
        Some(T1.to_string())
    );
    assert_eq!(
        entry::parse_rfc3339("2026-11-21T21:00:00.123+01:00").map(entry::format_rfc3339),
        Some(T1.to_string())
    );
    assert_eq!(entry::parse_rfc3339("2026-02-30T00:00:00Z"), None);
    assert_eq!(entry::parse_rfc3339("2026-11-21 20:00:00Z"), None);
    assert_eq!(entry::parse_rfc3339("2026-11-21T20:00:00"), None);
    assert_eq!(
        entry::parse_rfc3339("0001-01-01T00:00:00Z"),
        Some(-62_135_596_800)
    );
}

#[test]
fn go_float_formatting() {
    use super::fieldset::go_float;
    assert_eq!(go_float(80.0), "80");
    assert_eq!(go_float(0.5), "0.5");
    assert_eq!(go_float(1e21), "1e+21");
    assert_eq!(go_float(1.5e-7), "1.5e-07");
    assert_eq!(go_float(123456789.0), "123456789");
    assert_eq!(go_float(0.0), "0");
}

// ---------------------------------------------------------------------------
// Properties

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z<&\"\\\\]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let keys = prop_oneof![
            Just("name".to_string()),
            Just("spec".to_string()),
            Just("metadata".to_string()),
            Just("containers".to_string()),
            Just("template".to_string()),
            Just("labels".to_string()),
            Just("ports".to_string()),
            Just("containerPort".to_string()),
            Just("finalizers".to_string()),
            "[a-z]{1,5}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_scalar() -> impl Strategy<Value = Value> {
    // Floats with few digits: serde_json's default float parser is not
    // exact for long mantissas, which would break text round trips.
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<i16>().prop_map(|m| Value::from(f64::from(m) / 4.0)),
        Just(Value::from(1.5e-7)),
        Just(Value::from(1e21)),
        Just(Value::from(-0.0)),
        "\\PC{0,6}".prop_map(Value::String),
    ]
}

fn arb_element() -> impl Strategy<Value = PathElement> {
    prop_oneof![
        "\\PC{0,8}".prop_map(PathElement::Field),
        prop::collection::btree_map("[a-zA-Z<\"]{1,4}", arb_scalar(), 1..3)
            .prop_map(|m| PathElement::key(m.into_iter().collect())),
        arb_scalar().prop_map(PathElement::Value),
        any::<i64>().prop_map(PathElement::Index),
    ]
}

fn arb_set() -> impl Strategy<Value = FieldSet> {
    prop::collection::vec(prop::collection::vec(arb_element(), 1..4), 0..12)
        .prop_map(FieldSet::from_paths)
}

proptest! {
    #[test]
    fn field_set_and_compare_never_panic(a in arb_json(), b in arb_json()) {
        let tys = [None, Some(deployment_type()), Some(configmap_type())];
        for ty in tys {
            let s = field_set(ty, &a);
            let back = FieldSet::from_fields_v1(&s.to_fields_v1()).unwrap();
            prop_assert_eq!(&back, &s);
            let c = compare_detailed(ty, &a, &b);
            // Comparing a value with itself finds nothing.
            prop_assert!(compare_detailed(ty, &a, &a).is_same());
            let _ = c.added.union(&c.modified).difference(&c.removed);
        }
    }

    #[test]
    fn update_never_panics(a in arb_json(), b in arb_json()) {
        let mut new = json!({"metadata": {"name": "x", "uid": "u"}, "spec": b.clone()});
        let old = json!({"metadata": {"name": "x", "uid": "u"}, "spec": a.clone()});
        let mut created = old.clone();
        update_managed_fields(Some(deployment_type()), None, &mut created, "c", "apps/v1", None, T1).unwrap();
        update_managed_fields(Some(deployment_type()), Some(&created), &mut new, "u", "apps/v1", None, T2).unwrap();
        prop_assert!(decode_managed_fields(&new["metadata"]).is_ok());
        let mut raw = a.clone();
        let _ = update_managed_fields(None, Some(&b), &mut raw, "u", "v1", Some("status"), T2);
    }

    #[test]
    fn fields_v1_round_trips(s in arb_set()) {
        let v = s.to_fields_v1();
        let back = FieldSet::from_fields_v1(&v).unwrap();
        prop_assert_eq!(&back, &s);
        // Through text too, and the encoding is stable.
        let text = s.to_json_string();
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        let back2 = FieldSet::from_fields_v1(&reparsed).unwrap();
        prop_assert_eq!(back2.to_json_string(), text);
    }

    #[test]
    fn set_algebra(a in arb_set(), b in arb_set()) {
        let u = a.union(&b);
        let i = a.intersection(&b);
        let d = a.difference(&b);
        for p in a.paths() {
            prop_assert!(u.has(&p));
            prop_assert_eq!(i.has(&p), b.has(&p));
            prop_assert_eq!(d.has(&p), !b.has(&p));
        }
        prop_assert_eq!(u.len(), a.len() + b.len() - i.len());
        prop_assert!(a.difference(&a).is_empty());
        prop_assert!(a.recursive_difference(&a).is_empty());
    }

    #[test]
    fn parsing_arbitrary_fields_v1_never_panics(v in arb_json()) {
        let _ = FieldSet::from_fields_v1(&v);
        let _ = decode_managed_fields(&json!({"managedFields": [{"operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": v}]}));
    }
}

//! Tests of server-side apply: field sets of applied configurations against
//! the FieldsV1 kube records, merging, conflicts and force, removal, shared
//! ownership, the client-side apply upgrade, subresources.

use serde_json::{json, Value};

use super::*;
use crate::schema::{builtin, TypeRef};

const T1: &str = "2026-11-21T20:00:00Z";
const T2: &str = "2026-11-21T20:05:00Z";
const T3: &str = "2026-11-21T20:10:00Z";

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

/// The nginx Deployment of the spec's example, with a port, an env var and
/// a toleration.
fn nginx(replicas: Option<i64>) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.14.2",
                        "ports": [{"containerPort": 80}],
                        "env": [{"name": "A", "value": "1"}]
                    }],
                    "tolerations": [{"key": "k", "operator": "Exists"}]
                }
            }
        }
    });
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

/// What kube records for an apply of [`nginx`] with replicas.
const NGINX_APPLIED_FIELDS: &str = concat!(
    r#"{"f:metadata":{"f:labels":{"f:app":{}}},"#,
    r#""f:spec":{"f:replicas":{},"f:selector":{},"#,
    r#""f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"#,
    r#""f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"#,
    r#""f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}}},"#,
    r#""f:image":{},"f:name":{},"#,
    r#""f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}},"#,
    r#""f:tolerations":{}}}}}"#
);

fn dep_apply(
    live: Option<&Value>,
    cfg: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply(
        Some(deployment_type()),
        live,
        cfg,
        manager,
        "apps/v1",
        None,
        force,
        now,
    )
}

fn ok(r: Result<Value, ApplyError>) -> Value {
    match r {
        Ok(v) => v,
        Err(e) => panic!("apply failed: {e}"),
    }
}

/// The stored form of a created object: what the server adds on create.
fn stored(mut v: Value) -> Value {
    let m = v["metadata"].as_object_mut().expect("metadata");
    m.insert("namespace".into(), json!("default"));
    m.insert("uid".into(), json!("6b9f2a51-0000-4000-8000-000000000001"));
    m.insert("resourceVersion".into(), json!("7"));
    m.insert("creationTimestamp".into(), json!(T1));
    v
}

fn entries(obj: &Value) -> Vec<ManagedFieldsEntry> {
    decode_managed_fields(obj).expect("managed fields decode")
}

fn entry(obj: &Value, manager: &str, operation: &str) -> Option<ManagedFieldsEntry> {
    entries(obj)
        .into_iter()
        .find(|e| e.manager == manager && e.operation == operation)
}

fn fields_of(obj: &Value, manager: &str, operation: &str) -> String {
    entry(obj, manager, operation)
        .map(|e| e.fields_v1.to_json_string())
        .unwrap_or_default()
}

fn replicas_path() -> Vec<PathElement> {
    vec![f("spec"), f("replicas")]
}

// ---------------------------------------------------------------------------
// Field sets and creation

#[test]
fn applied_deployment_fields_match_kube() {
    let out = ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1));
    let mf = out["metadata"]["managedFields"].as_array().expect("list");
    assert_eq!(mf.len(), 1);
    let e = &mf[0];
    assert_eq!(e["manager"], "kubectl");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], T1);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["fieldsV1"].to_string(), NGINX_APPLIED_FIELDS);
    // The object is the configuration, with the defaulted port key.
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "k", "operator": "Exists"}])
    );
}

#[test]
fn service_ports_are_keyed_by_port_and_defaulted_protocol() {
    let ty = builtin().by_gvk("", "v1", "Service").expect("Service");
    let cfg = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 53, "protocol": "UDP"}]}
    });
    let out = ok(apply(Some(ty), None, &cfg, "m", "v1", None, false, T1));
    assert_eq!(
        out["metadata"]["managedFields"][0]["fieldsV1"].to_string(),
        concat!(
            r#"{"f:spec":{"f:ports":{"#,
            r#""k:{\"port\":53,\"protocol\":\"UDP\"}":{".":{},"f:port":{},"f:protocol":{}},"#,
            r#""k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{},"f:targetPort":{}}}}}"#
        )
    );
}

#[test]
fn configmap_without_schema_is_deduced() {
    let cfg = json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"list": [1, 2], "nested": {"a": "b"}}
    });
    let out = ok(apply(
        None,
        None,
        &cfg,
        "m",
        "example.com/v1",
        None,
        false,
        T1,
    ));
    assert_eq!(
        out["metadata"]["managedFields"][0]["fieldsV1"].to_string(),
        r#"{"f:spec":{".":{},"f:list":{},"f:nested":{".":{},"f:a":{}}}}"#
    );
}

#[test]
fn apply_of_nothing_records_no_entry() {
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let out = ok(apply(
        Some(configmap_type()),
        None,
        &cfg,
        "m",
        "v1",
        None,
        false,
        T1,
    ));
    assert!(out["metadata"].get("managedFields").is_none(), "{out}");
}

// ---------------------------------------------------------------------------
// Re-apply, conflicts, force, shared ownership

#[test]
fn reapply_with_a_change_updates_value_and_time() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let mut cfg = nginx(Some(3));
    cfg["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.16.1");
    let out = ok(dep_apply(Some(&live), &cfg, "kubectl", false, T2));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.16.1"
    );
    let e = entry(&out, "kubectl", "Apply").expect("entry");
    assert_eq!(e.time.as_deref(), Some(T2));
    assert_eq!(e.fields_v1.to_json_string(), NGINX_APPLIED_FIELDS);
    // System fields are the live object's.
    assert_eq!(out["metadata"]["uid"], live["metadata"]["uid"]);
}

#[test]
fn noop_apply_returns_the_live_object() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let out = ok(dep_apply(
        Some(&live),
        &nginx(Some(3)),
        "kubectl",
        false,
        T2,
    ));
    assert_eq!(out, live);
}

#[test]
fn null_creation_timestamp_in_a_manifest_is_no_change() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let mut cfg = nginx(Some(3));
    cfg["metadata"]["creationTimestamp"] = Value::Null;
    let out = ok(dep_apply(Some(&live), &cfg, "kubectl", false, T2));
    assert_eq!(out, live);
}

#[test]
fn conflicting_apply_fails_with_kube_message() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 5}
    });
    let err = dep_apply(Some(&live), &cfg, "other", false, T2).expect_err("conflict");
    let ApplyError::Conflicts(conflicts) = &err else {
        panic!("not a conflict: {err}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "kubectl");
    assert_eq!(conflicts[0].path, replicas_path());
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    let status = err.to_status();
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    let details = status.details.expect("details");
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].reason, "FieldManagerConflict");
    assert_eq!(details.causes[0].message, r#"conflict with "kubectl""#);
    assert_eq!(details.causes[0].field, ".spec.replicas");
    assert!(details.name.is_empty() && details.kind.is_empty());
}

#[test]
fn conflict_with_an_update_manager_names_its_version() {
    let mut created = nginx(Some(3));
    update_managed_fields(
        Some(deployment_type()),
        None,
        &mut created,
        "kubectl-client-side-apply",
        "apps/v1",
        None,
        T1,
    )
    .expect("create");
    let live = stored(created);
    let mut cfg = nginx(Some(5));
    cfg["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let err = dep_apply(Some(&live), &cfg, "ssa", false, T2).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        concat!(
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n",
            "- .spec.replicas\n",
            "- .spec.template.spec.containers[name=\"nginx\"].image"
        )
    );
    let status = err.to_status();
    let causes = status.details.expect("details").causes;
    assert_eq!(
        causes[0].message,
        r#"conflict with "kubectl-client-side-apply" using apps/v1"#
    );
    assert_eq!(
        causes[1].field,
        r#".spec.template.spec.containers[name="nginx"].image"#
    );
}

#[test]
fn conflicts_from_several_managers_are_grouped_in_order() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "b-manager", false, T1)));
    let label = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"tier": "web"}}
    });
    let live = stored(ok(dep_apply(Some(&live), &label, "a-manager", false, T2)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"tier": "db", "app": "x"}}
    });
    let err = dep_apply(Some(&live), &cfg, "c", false, T3).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        concat!(
            "Apply failed with 2 conflicts: conflicts with \"a-manager\":\n",
            "- .metadata.labels.tier\n",
            "conflicts with \"b-manager\":\n",
            "- .metadata.labels.app"
        )
    );
}

#[test]
fn force_takes_the_field_from_the_other_manager() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 5}
    });
    let out = ok(dep_apply(Some(&live), &cfg, "other", true, T2));
    assert_eq!(out["spec"]["replicas"], 5);
    assert_eq!(
        fields_of(&out, "other", "Apply"),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
    let kubectl = entry(&out, "kubectl", "Apply").expect("kubectl keeps the rest");
    assert!(!kubectl.fields_v1.has(&replicas_path()));
    assert!(kubectl.fields_v1.has(&[f("spec"), f("selector")]));
    // Apply entries come first, oldest first.
    let order: Vec<String> = entries(&out).into_iter().map(|e| e.manager).collect();
    assert_eq!(order, ["kubectl", "other"]);
}

#[test]
fn equal_values_share_ownership_without_conflict() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 3}
    });
    let out = ok(dep_apply(Some(&live), &cfg, "handover", false, T2));
    assert!(entry(&out, "kubectl", "Apply")
        .expect("kubectl")
        .fields_v1
        .has(&replicas_path()));
    assert!(entry(&out, "handover", "Apply")
        .expect("handover")
        .fields_v1
        .has(&replicas_path()));
    // Sharing changes no value: the new entry carries no time.
    assert_eq!(entry(&out, "handover", "Apply").and_then(|e| e.time), None);
    // A shared field changed by either applier conflicts with the other.
    let mut bump = cfg.clone();
    bump["spec"]["replicas"] = json!(4);
    let err = dep_apply(Some(&out), &bump, "handover", false, T3).expect_err("conflict");
    assert!(err
        .to_string()
        .contains(r#"conflict with "kubectl": .spec.replicas"#));
}

// ---------------------------------------------------------------------------
// Removal

#[test]
fn omitted_fields_are_removed_including_list_items_and_map_keys() {
    let mut first = nginx(Some(3));
    first["metadata"]["labels"]["tier"] = json!("web");
    first["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let live = stored(ok(dep_apply(None, &first, "kubectl", false, T1)));
    let out = ok(dep_apply(Some(&live), &nginx(None), "kubectl", false, T2));
    assert!(out["spec"].get("replicas").is_none(), "{out}");
    assert_eq!(out["metadata"]["labels"], json!({"app": "nginx"}));
    let containers = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "nginx");
    let e = entry(&out, "kubectl", "Apply").expect("entry");
    assert!(!e.fields_v1.has(&replicas_path()));
}

#[test]
fn omitted_fields_owned_by_another_applier_stay() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let replicas_only = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 3}
    });
    let live = ok(dep_apply(
        Some(&live),
        &replicas_only,
        "handover-to-hpa",
        false,
        T2,
    ));
    let out = ok(dep_apply(Some(&live), &nginx(None), "kubectl", false, T3));
    assert_eq!(out["spec"]["replicas"], 3);
    assert!(!entry(&out, "kubectl", "Apply")
        .expect("kubectl")
        .fields_v1
        .has(&replicas_path()));
    assert_eq!(
        fields_of(&out, "handover-to-hpa", "Apply"),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
}

#[test]
fn replicas_handover_from_the_spec() {
    // user → handover-to-hpa → controller, as in the spec's example.
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let replicas_only = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 3}
    });
    let live = ok(dep_apply(
        Some(&live),
        &replicas_only,
        "handover-to-hpa",
        false,
        T2,
    ));
    let live = ok(dep_apply(Some(&live), &nginx(None), "kubectl", false, T2));
    assert_eq!(live["spec"]["replicas"], 3);
    // The autoscaler writes replicas with an update.
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(7);
    update_managed_fields(
        Some(deployment_type()),
        Some(&live),
        &mut scaled,
        "kube-controller-manager",
        "apps/v1",
        None,
        T3,
    )
    .expect("update");
    assert!(
        entry(&scaled, "handover-to-hpa", "Apply").is_none(),
        "{scaled}"
    );
    assert_eq!(
        fields_of(&scaled, "kube-controller-manager", "Update"),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
    // The user's next apply (without replicas) leaves the count alone.
    let out = ok(dep_apply(Some(&scaled), &nginx(None), "kubectl", false, T3));
    assert_eq!(out["spec"]["replicas"], 7);
}

#[test]
fn removed_map_key_owned_only_by_an_updater_goes() {
    // An updater's ownership does not keep a field the applier gives up
    // (only appliers do), as in structured-merge-diff.
    let ty = configmap_type();
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let live = stored(ok(apply(Some(ty), None, &cfg, "m", "v1", None, false, T1)));
    let less = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let out = ok(apply(
        Some(ty),
        Some(&live),
        &less,
        "m",
        "v1",
        None,
        false,
        T2,
    ));
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(fields_of(&out, "m", "Apply"), r#"{"f:data":{"f:a":{}}}"#);
}

#[test]
fn fields_never_applied_are_not_removed() {
    let ty = configmap_type();
    let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "created"}});
    update_managed_fields(
        Some(ty),
        None,
        &mut created,
        "kubectl-create",
        "v1",
        None,
        T1,
    )
    .expect("create");
    let live = stored(created);
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let live = ok(apply(
        Some(ty),
        Some(&live),
        &cfg,
        "m",
        "v1",
        None,
        false,
        T2,
    ));
    let none = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let out = ok(apply(
        Some(ty),
        Some(&live),
        &none,
        "m",
        "v1",
        None,
        false,
        T3,
    ));
    assert_eq!(out["data"], json!({"x": "created"}));
    assert!(
        entry(&out, "m", "Apply").is_none(),
        "an empty entry is dropped"
    );
}

// ---------------------------------------------------------------------------
// Merge

#[test]
fn merge_follows_list_semantics() {
    let ty = Some(deployment_type());
    let live = json!({"spec": {"template": {"spec": {
        "containers": [
            {"name": "a", "image": "a:1", "imagePullPolicy": "Always"},
            {"name": "b", "image": "b:1"},
            {"name": "c", "image": "c:1"}
        ],
        "tolerations": [{"key": "x"}, {"key": "y"}]
    }}}});
    let cfg = json!({"spec": {"template": {"spec": {
        "containers": [
            {"name": "c", "image": "c:2"},
            {"name": "new", "image": "n"},
            {"name": "a", "image": "a:2"}
        ],
        "tolerations": [{"key": "z"}]
    }}}});
    let out = merge(ty, &live, &cfg);
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("list")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect();
    // Shared items in the configuration's order; live-only items stay
    // before the next shared one; new items where the configuration has them.
    assert_eq!(names, ["b", "c", "new", "a"]);
    let a = &out["spec"]["template"]["spec"]["containers"][3];
    assert_eq!(
        a,
        &json!({"name": "a", "image": "a:2", "imagePullPolicy": "Always"})
    );
    // Atomic lists are replaced.
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "z"}])
    );
}

#[test]
fn merge_keeps_unidentifiable_live_items_in_place() {
    let ty = Some(deployment_type());
    let live = json!({"spec": {"template": {"spec": {"containers": [
        {"image": "no-name"},
        {"name": "a", "image": "a:1"}
    ]}}}});
    let cfg = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "b:1"},
        {"name": "a", "image": "a:2"}
    ]}}}});
    let out = merge(ty, &live, &cfg);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"image": "no-name"}, {"name": "b", "image": "b:1"}, {"name": "a", "image": "a:2"}])
    );
}

#[test]
fn merge_keeps_empty_and_null_apart_and_maps_granular() {
    let ty = Some(configmap_type());
    let live = json!({"data": {"a": "1"}, "metadata": {"labels": {"x": "1"}}});
    let cfg = json!({"data": {"b": "2"}, "metadata": {"labels": null, "annotations": {}}});
    let out = merge(ty, &live, &cfg);
    assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(out["metadata"]["labels"], json!({"x": "1"}));
    assert_eq!(out["metadata"]["annotations"], json!({}));
}

#[test]
fn remove_fields_drops_emptied_containers() {
    let ty = Some(deployment_type());
    let obj = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1, "paused": true}});
    let set = FieldSet::from_paths([
        vec![f("metadata"), f("labels"), f("a")],
        vec![f("spec"), f("replicas")],
    ]);
    assert_eq!(
        remove_fields(ty, &obj, &set),
        json!({"spec": {"paused": true}})
    );
}

// ---------------------------------------------------------------------------
// Checks of the configuration

#[test]
fn managed_fields_in_the_configuration_are_rejected() {
    let mut cfg = nginx(Some(1));
    cfg["metadata"]["managedFields"] = json!([]);
    let err = dep_apply(None, &cfg, "m", false, T1).expect_err("rejected");
    assert_eq!(
        err,
        ApplyError::BadRequest("metadata.managedFields must be nil".into())
    );
    assert_eq!(err.to_status().code, 400);
    // An explicit null is no managed fields.
    cfg["metadata"]["managedFields"] = Value::Null;
    assert!(dep_apply(None, &cfg, "m", false, T1).is_ok());
}

#[test]
fn wrong_version_and_undeclared_fields_are_rejected() {
    let mut cfg = nginx(Some(1));
    cfg["apiVersion"] = json!("apps/v1beta1");
    assert_eq!(
        dep_apply(None, &cfg, "m", false, T1).expect_err("version").to_string(),
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    let mut cfg = nginx(Some(1));
    cfg["metadata"]["namespace"] = json!("default");
    cfg["spec"]["replica"] = json!(2);
    assert_eq!(
        dep_apply(None, &cfg, "m", false, T1).expect_err("unknown").to_string(),
        "failed to create typed patch object (default/nginx-deployment; apps/v1, Kind=Deployment): .spec.replica: field not declared in schema"
    );
    let mut cfg = nginx(Some(1));
    cfg["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "nginx"}));
    cfg["spec"]["template"]["spec"]["containers"][0]["env"] = json!([{"value": "x"}]);
    assert_eq!(
        dep_apply(None, &cfg, "m", false, T1).expect_err("keys").to_string(),
        concat!(
            "failed to create typed patch object (/nginx-deployment; apps/v1, Kind=Deployment): errors:\n",
            "  .spec.template.spec.containers[name=\"nginx\"].env: element 0: associative list with keys has an element that omits key field \"name\"\n",
            "  .spec.template.spec.containers: duplicate entries for key [name=\"nginx\"]"
        )
    );
}

// ---------------------------------------------------------------------------
// Untracked objects and client-side apply

#[test]
fn first_apply_to_an_untracked_object_conflicts_with_before_first_apply() {
    let live = stored(nginx(Some(3)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 5}
    });
    let err = dep_apply(Some(&live), &cfg, "m", false, T2).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
    let out = ok(dep_apply(Some(&live), &cfg, "m", true, T2));
    let before = entry(&out, BEFORE_FIRST_APPLY_MANAGER, "Update").expect("before");
    assert!(before.fields_v1.has(&[f("spec"), f("selector")]));
    assert!(!before.fields_v1.has(&replicas_path()));
}

/// A Deployment created by `kubectl apply` (client-side) from `cfg`.
fn client_side_applied(cfg: &Value) -> Value {
    let mut obj = cfg.clone();
    let annotation = format!("{}\n", cfg);
    obj["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: annotation});
    update_managed_fields(
        Some(deployment_type()),
        None,
        &mut obj,
        "kubectl-client-side-apply",
        "apps/v1",
        None,
        T1,
    )
    .expect("create");
    stored(obj)
}

#[test]
fn kubectl_takes_over_from_client_side_apply_without_conflicts() {
    let live = client_side_applied(&nginx(Some(2)));
    let out = ok(dep_apply(
        Some(&live),
        &nginx(Some(3)),
        "kubectl",
        false,
        T2,
    ));
    assert_eq!(out["spec"]["replicas"], 3);
    assert!(entry(&out, "kubectl", "Apply")
        .expect("kubectl")
        .fields_v1
        .has(&replicas_path()));
    let csa = entry(&out, "kubectl-client-side-apply", "Update").expect("csa keeps the rest");
    assert!(!csa.fields_v1.has(&replicas_path()));
    // The annotation now holds the applied configuration, as Go encodes it.
    let annotation = out["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
        .as_str()
        .expect("annotation");
    assert!(annotation.ends_with("}\n"), "{annotation}");
    assert!(annotation.starts_with(r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"nginx"},"name":"nginx-deployment"},"spec":{"replicas":3,"#), "{annotation}");
    let parsed: Value = serde_json::from_str(annotation).expect("json");
    assert_eq!(parsed, nginx(Some(3)));
}

#[test]
fn other_managers_get_the_client_side_apply_conflicts() {
    let live = client_side_applied(&nginx(Some(2)));
    let err =
        dep_apply(Some(&live), &nginx(Some(3)), "my-manager", false, T2).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn fields_changed_since_the_client_side_apply_still_conflict() {
    let live = client_side_applied(&nginx(Some(2)));
    // `kubectl scale` changed replicas since.
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(4);
    update_managed_fields(
        Some(deployment_type()),
        Some(&live),
        &mut scaled,
        "kubectl",
        "apps/v1",
        Some("scale"),
        T2,
    )
    .expect("scale");
    let mut cfg = nginx(Some(3));
    cfg["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let err = dep_apply(Some(&scaled), &cfg, "kubectl", false, T3).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas"#
    );
}

// ---------------------------------------------------------------------------
// Subresources

#[test]
fn status_apply_owns_status_only() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let cfg = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"ignored": "yes"}},
        "spec": {"replicas": 9},
        "status": {"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]}
    });
    let out = ok(apply(
        Some(deployment_type()),
        Some(&live),
        &cfg,
        "controller",
        "apps/v1",
        Some("status"),
        false,
        T2,
    ));
    assert_eq!(out["status"]["replicas"], 3);
    assert_eq!(
        out["spec"]["replicas"], 3,
        "spec is not the status writer's"
    );
    assert!(out["metadata"]["labels"].get("ignored").is_none());
    let e = entry(&out, "controller", "Apply").expect("entry");
    assert_eq!(e.subresource.as_deref(), Some("status"));
    assert_eq!(
        e.fields_v1.to_json_string(),
        r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}},"f:replicas":{}}}"#
    );
}

#[test]
fn main_resource_apply_ignores_status() {
    let mut cfg = nginx(Some(3));
    cfg["status"] = json!({"replicas": 3});
    let out = ok(dep_apply(None, &cfg, "kubectl", false, T1));
    assert!(out.get("status").is_none());
    assert_eq!(fields_of(&out, "kubectl", "Apply"), NGINX_APPLIED_FIELDS);
}

#[test]
fn scale_entries_round_trip() {
    let live = stored(ok(dep_apply(None, &nginx(Some(3)), "kubectl", false, T1)));
    let parent = entries(&live);
    let scale = scale_entries_to_subresource(&parent, &replicas_path());
    assert_eq!(scale.len(), 1);
    assert_eq!(scale[0].api_version, "autoscaling/v1");
    assert_eq!(
        scale[0].fields_v1.to_json_string(),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );

    // A forced apply on the Scale by another manager.
    let scale_ty = builtin().by_gvk("autoscaling", "v1", "Scale");
    let mut scale_live = json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "nginx-deployment", "namespace": "default", "uid": "u"},
        "spec": {"replicas": 3}, "status": {"replicas": 0}
    });
    scale_live["metadata"]["managedFields"] = encode_managed_fields(&scale);
    let cfg = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "nginx-deployment"}, "spec": {"replicas": 6}});
    let reset = FieldSet::from_paths([[f("status")]]);
    let opts = ApplyOptions {
        manager: "hpa",
        api_version: "autoscaling/v1",
        subresource: Some("scale"),
        force: false,
        now: T2,
        reset: Some(&reset),
    };
    let err = apply_with(scale_ty, Some(&scale_live), &cfg, &opts).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    let forced = ApplyOptions {
        force: true,
        ..opts
    };
    let new_scale = apply_with(scale_ty, Some(&scale_live), &cfg, &forced).expect("forced");
    let back = scale_entries_to_parent(&parent, &entries(&new_scale), &replicas_path(), "apps/v1");
    let kubectl = back
        .iter()
        .find(|e| e.manager == "kubectl")
        .expect("kubectl");
    assert!(!kubectl.fields_v1.has(&replicas_path()));
    assert!(kubectl.fields_v1.has(&[f("spec"), f("selector")]));
    let hpa = back.iter().find(|e| e.manager == "hpa").expect("hpa");
    assert_eq!(hpa.api_version, "apps/v1");
    assert_eq!(hpa.subresource.as_deref(), Some("scale"));
    assert_eq!(hpa.operation, "Apply");
    assert_eq!(hpa.time.as_deref(), Some(T2));
    assert_eq!(
        hpa.fields_v1.to_json_string(),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
}

// ---------------------------------------------------------------------------
// Printing

#[test]
fn paths_print_as_structured_merge_diff_does() {
    let path = vec![
        f("spec"),
        PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]),
        PathElement::Value(json!("a\"b")),
        PathElement::Value(json!(1.5)),
        PathElement::Value(json!(1e6)),
        PathElement::Index(2),
    ];
    assert_eq!(
        display_path(&path),
        r#".spec[containerPort=80,protocol="TCP"][="a\"b"][=1.5][=1e+06][2]"#
    );
}

// ---------------------------------------------------------------------------
// Properties

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Objects shaped like workload specs: known field names (so schemas
    /// apply) mixed with others, any value types.
    fn arb_spec() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..4).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 48, 5, |inner| {
            let key = prop_oneof![
                Just("name".to_string()),
                Just("containers".to_string()),
                Just("template".to_string()),
                Just("spec".to_string()),
                Just("ports".to_string()),
                Just("containerPort".to_string()),
                Just("env".to_string()),
                Just("replicas".to_string()),
                "[a-c]{1,2}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn config(kind_api: (&str, &str), spec: Value) -> Value {
        json!({
            "apiVersion": kind_api.1, "kind": kind_api.0,
            "metadata": {"name": "x"},
            "spec": spec
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever the configuration, apply answers (never panics), and
        /// applying the same configuration again changes nothing.
        #[test]
        fn apply_is_idempotent(a in arb_spec(), b in arb_spec()) {
            let cases = [
                (None, ("Thing", "example.com/v1")),
                (Some(deployment_type()), ("Deployment", "apps/v1")),
            ];
            for (ty, kind_api) in cases {
                let first = config(kind_api, a.clone());
                let Ok(created) = apply(ty, None, &first, "m", kind_api.1, None, false, T1) else {
                    continue;
                };
                let created = stored(created);
                let again = apply(ty, Some(&created), &first, "m", kind_api.1, None, false, T2);
                prop_assert_eq!(again.as_ref().ok(), Some(&created));
                // A second manager applying something else: an answer, and
                // with force always a result whose entries decode.
                let second = config(kind_api, b.clone());
                let _ = apply(ty, Some(&created), &second, "n", kind_api.1, None, false, T2);
                if let Ok(forced) = apply(ty, Some(&created), &second, "n", kind_api.1, None, true, T2) {
                    prop_assert!(decode_managed_fields(&forced).is_ok());
                    // The first manager giving up everything leaves an
                    // object whose entries still decode.
                    let empty = json!({"apiVersion": kind_api.1, "kind": kind_api.0, "metadata": {"name": "x"}});
                    let left = apply(ty, Some(&forced), &empty, "m", kind_api.1, None, false, T3);
                    prop_assert!(left.is_ok());
                }
            }
        }

        #[test]
        fn merge_and_remove_never_panic(a in arb_spec(), b in arb_spec()) {
            let ty = Some(deployment_type());
            let m = merge(ty, &json!({"spec": a.clone()}), &json!({"spec": b.clone()}));
            let set = field_set(ty, &m);
            prop_assert_eq!(remove_fields(ty, &m, &FieldSet::new()), m.clone());
            let _ = remove_fields(ty, &m, &set);
            let _ = schema_errors(ty, &m);
        }
    }
}

//! The garbage collector end to end, through kubectl and the Python
//! client: background, foreground and orphan propagation; dependents whose
//! owner is absent or has another uid; objects with several owners; custom
//! resources as owners and dependents; kube's default policies (a batch/v1
//! Job orphans its pods unless told otherwise); kube's event for invalid
//! references; and two replicas, where one collects what the other was
//! told to delete.

use e2e::{eventually, unique_prefix, Server};
use serde_json::Value;
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(20);

fn uid(s: &Server, args: &[&str]) -> String {
    s.get_json(args)["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string()
}

/// An ownerReferences entry.
fn owner(api_version: &str, kind: &str, name: &str, uid: &str, block: bool) -> String {
    format!(
        "{{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}, blockOwnerDeletion: {block}}}"
    )
}

/// Creates a ConfigMap `name` in `ns` owned by `owners`, with `extra`
/// metadata lines.
fn dependent(s: &Server, ns: &str, name: &str, owners: &[String], extra: &str) {
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  ownerReferences: [{}]\n{extra}",
            owners.join(", ")
        ),
    );
}

fn owner_uids(v: &Value) -> Vec<String> {
    v["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn background_deletion_collects_dependents_and_keeps_those_with_another_owner() {
    // Two replicas: the owner is deleted through one, whichever leads
    // collects.
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_ok(&["create", "configmap", "owner"]);
    a.kubectl_ok(&["create", "configmap", "other"]);
    let o = uid(&a, &["configmap", "owner"]);
    let other = uid(&a, &["configmap", "other"]);
    let by_owner = owner("v1", "ConfigMap", "owner", &o, false);
    for i in 0..5 {
        dependent(
            &a,
            "default",
            &format!("d{i}"),
            std::slice::from_ref(&by_owner),
            "",
        );
    }
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  ownerReferences: [{by_owner}]\n"
        ),
    );
    dependent(
        &a,
        "default",
        "shared",
        &[
            by_owner.clone(),
            owner("v1", "ConfigMap", "other", &other, false),
        ],
        "",
    );
    // Nothing is collected while the owner lives.
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.kubectl_ok(&["get", "configmap", "d0"]);

    b.kubectl_ok(&["delete", "configmap", "owner"]);
    for i in 0..5 {
        a.wait_gone(
            SETTLE,
            "a dependent to be collected",
            &["get", "configmap", &format!("d{i}")],
        )
        .await;
    }
    b.wait_gone(
        SETTLE,
        "the secret to be collected",
        &["get", "secret", "s"],
    )
    .await;
    // The object with another owner stays, without the dead reference.
    eventually("the dead reference to go", SETTLE, || {
        (owner_uids(&a.get_json(&["configmap", "shared"])) == [other.clone()]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "configmap", "owner"]);
    let o = uid(&s, &["configmap", "owner"]);
    // A blocking dependent held by its own finalizer, a non-blocking one,
    // and a blocking one with a dependent of its own (it goes in the
    // foreground too).
    dependent(
        &s,
        "default",
        "held",
        &[owner("v1", "ConfigMap", "owner", &o, true)],
        "  finalizers: [example.com/hold]\n",
    );
    dependent(
        &s,
        "default",
        "loose",
        &[owner("v1", "ConfigMap", "owner", &o, false)],
        "",
    );
    dependent(
        &s,
        "default",
        "middle",
        &[owner("v1", "ConfigMap", "owner", &o, true)],
        "",
    );
    let m = uid(&s, &["configmap", "middle"]);
    dependent(
        &s,
        "default",
        "leaf",
        &[owner("v1", "ConfigMap", "middle", &m, true)],
        "",
    );

    s.kubectl_ok(&[
        "delete",
        "configmap",
        "owner",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let v = s.get_json(&["configmap", "owner"]);
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    assert_eq!(
        v["metadata"]["finalizers"],
        serde_json::json!(["foregroundDeletion"])
    );

    s.wait_gone(
        SETTLE,
        "the loose dependent",
        &["get", "configmap", "loose"],
    )
    .await;
    s.wait_gone(SETTLE, "the leaf", &["get", "configmap", "leaf"])
        .await;
    s.wait_gone(SETTLE, "the middle", &["get", "configmap", "middle"])
        .await;
    eventually("the held dependent to be deleting", SETTLE, || {
        s.get_json(&["configmap", "held"])["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(())
    })
    .await;
    // The owner waits for the held one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.kubectl_ok(&["get", "configmap", "owner"]);

    s.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    s.wait_gone(SETTLE, "the held dependent", &["get", "configmap", "held"])
        .await;
    s.wait_gone(SETTLE, "the owner", &["get", "configmap", "owner"])
        .await;
}

#[tokio::test]
async fn orphan_deletion_releases_dependents() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "configmap", "owner"]);
    s.kubectl_ok(&["create", "configmap", "keeper"]);
    let o = uid(&s, &["configmap", "owner"]);
    let k = uid(&s, &["configmap", "keeper"]);
    dependent(
        &s,
        "default",
        "d",
        &[owner("v1", "ConfigMap", "owner", &o, true)],
        "",
    );
    dependent(
        &s,
        "default",
        "two",
        &[
            owner("v1", "ConfigMap", "owner", &o, false),
            owner("v1", "ConfigMap", "keeper", &k, false),
        ],
        "",
    );
    s.kubectl_ok(&["delete", "configmap", "owner", "--cascade=orphan"]);
    s.wait_gone(SETTLE, "the owner", &["get", "configmap", "owner"])
        .await;
    let d = s.get_json(&["configmap", "d"]);
    assert!(d["metadata"].get("ownerReferences").is_none(), "{d}");
    assert_eq!(owner_uids(&s.get_json(&["configmap", "two"])), [k]);
    // And they stay.
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.kubectl_ok(&["get", "configmap", "d"]);
}

#[tokio::test]
async fn dependents_of_absent_owners_or_of_another_uid_are_collected() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "configmap", "real"]);
    dependent(
        &s,
        "default",
        "ghostly",
        &[owner(
            "v1",
            "ConfigMap",
            "ghost",
            "00000000-0000-0000-0000-000000000001",
            false,
        )],
        "",
    );
    dependent(
        &s,
        "default",
        "stale",
        &[owner(
            "v1",
            "ConfigMap",
            "real",
            "00000000-0000-0000-0000-000000000002",
            false,
        )],
        "",
    );
    s.wait_gone(
        SETTLE,
        "the dependent of an absent owner",
        &["get", "configmap", "ghostly"],
    )
    .await;
    s.wait_gone(
        SETTLE,
        "the dependent of another uid",
        &["get", "configmap", "stale"],
    )
    .await;
    s.kubectl_ok(&["get", "configmap", "real"]);
}

#[tokio::test]
async fn invalid_references_get_kubes_event() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "a"]);
    s.kubectl_ok(&["create", "namespace", "b"]);
    s.kubectl_ok(&["create", "configmap", "owner", "-n", "a"]);
    let o = uid(&s, &["configmap", "owner", "-n", "a"]);
    // A cluster-scoped object owned by a namespaced kind: never collected.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: owned-by-a-configmap\n  ownerReferences: [{}]\nrules: []\n",
            owner("v1", "ConfigMap", "owner", &o, false)
        ),
    );
    // A namespaced object owned by an object of another namespace: the
    // owner counts as absent there.
    dependent(
        &s,
        "b",
        "elsewhere",
        &[owner("v1", "ConfigMap", "owner", &o, false)],
        "",
    );
    s.wait_gone(
        SETTLE,
        "the cross-namespace dependent",
        &["get", "configmap", "elsewhere", "-n", "b"],
    )
    .await;
    let events = |ns: &str| {
        s.get_json(&[
            "events",
            "-n",
            ns,
            "--field-selector=reason=OwnerRefInvalidNamespace",
        ])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let cluster = eventually("the cluster-scoped dependent's event", SETTLE, || {
        events("default").into_iter().next()
    })
    .await;
    assert_eq!(cluster["type"], "Warning");
    assert_eq!(cluster["involvedObject"]["kind"], "ClusterRole");
    assert_eq!(cluster["involvedObject"]["name"], "owned-by-a-configmap");
    assert_eq!(
        cluster["source"]["component"],
        "garbage-collector-controller"
    );
    assert_eq!(
        cluster["message"],
        format!(
            "ownerRef [v1/ConfigMap, namespace: , name: owner, uid: {o}] does not exist in namespace \"\""
        )
    );
    let cross = eventually("the cross-namespace event", SETTLE, || {
        events("b").into_iter().next()
    })
    .await;
    assert_eq!(cross["involvedObject"]["name"], "elsewhere");
    assert_eq!(
        cross["message"],
        format!(
            "ownerRef [v1/ConfigMap, namespace: b, name: owner, uid: {o}] does not exist in namespace \"b\""
        )
    );
    s.kubectl_ok(&["get", "clusterrole", "owned-by-a-configmap"]);
}

#[tokio::test]
async fn custom_resources_own_and_are_owned() {
    let s = Server::start().await;
    s.install_gadgets().await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: top\n",
    );
    let g = uid(&s, &["gadget", "top"]);
    dependent(
        &s,
        "default",
        "under-gadget",
        &[owner("example.com/v1", "Gadget", "top", &g, true)],
        "",
    );
    let c = uid(&s, &["configmap", "under-gadget"]);
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: bottom\n  ownerReferences: [{}]\n",
            owner("v1", "ConfigMap", "under-gadget", &c, true)
        ),
    );
    s.kubectl_ok(&[
        "delete",
        "gadget",
        "top",
        "--cascade=foreground",
        "--wait=false",
    ]);
    s.wait_gone(
        SETTLE,
        "the gadget's dependents, in the foreground",
        &["get", "gadget", "bottom"],
    )
    .await;
    s.wait_gone(
        SETTLE,
        "the config map",
        &["get", "configmap", "under-gadget"],
    )
    .await;
    s.wait_gone(SETTLE, "the owner gadget", &["get", "gadget", "top"])
        .await;
}

#[tokio::test]
async fn python_client_sees_kubes_default_policies() {
    let s = Server::start().await;
    e2e::run_python_client(&s, "gc_python.py");
}

//! The controllers under faults (issue #14's list):
//!
//! - the leader is killed in the middle of a namespace deletion of 1,000
//!   objects: the other replica takes over and nothing is left behind;
//! - etcd stops while the garbage collector and the namespace controller
//!   are at work: both finish once it returns.
//!
//! (A killed replica leaving the `kubernetes` endpoints is in
//! `kubernetes_endpoints.rs`.)

use e2e::cluster::EtcdCluster;
use e2e::{eventually, eventually_async, http_request, unique_prefix, Server};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::testing::TestEtcd;

/// Creates ConfigMaps `{prefix}{0..n}` in `ns` through `addr`, 16 at a
/// time, each with `meta` merged into its metadata.
async fn create_many(addr: &str, ns: &str, prefix: &str, n: usize, meta: Value) {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    futures_util::stream::iter(0..n)
        .map(|i| {
            let mut body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{prefix}{i}")}, "data": {"i": i.to_string()}});
            if let (Some(m), Some(extra)) = (body["metadata"].as_object_mut(), meta.as_object()) {
                m.extend(extra.clone());
            }
            let path = path.clone();
            async move {
                let bytes = serde_json::to_vec(&body).expect("json");
                let r = http_request(
                    addr,
                    "POST",
                    &path,
                    &[("Content-Type", "application/json")],
                    &bytes,
                )
                .await
                .expect("create");
                assert_eq!(r.status, 201, "{}", r.text());
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// The ConfigMaps of `ns` (a consistent LIST), or `None` when the server
/// cannot answer.
async fn count(addr: &str, ns: &str) -> Option<usize> {
    let r = http_request(
        addr,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &[],
        b"",
    )
    .await
    .ok()?;
    if r.status != 200 {
        return None;
    }
    let v: Value = serde_json::from_slice(&r.body).ok()?;
    Some(
        v["items"]
            .as_array()?
            .iter()
            .filter(|i| i["metadata"]["name"] != "kube-root-ca.crt")
            .count(),
    )
}

async fn leads(s: &Server) -> bool {
    e2e::http_get(s.addr(), "/metrics").await.is_ok_and(|m| {
        m.lines()
            .any(|l| l.starts_with("workqueue_adds_total{name=\"namespace\"}"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_finishes_a_namespace_deletion_of_1000_objects() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_ok(&["create", "namespace", "big"]);
    create_many(a.addr(), "big", "c", 1000, json!({})).await;
    // One object held by a finalizer: the deletion cannot finish before
    // the leader is killed.
    create_many(
        a.addr(),
        "big",
        "held",
        1,
        json!({"finalizers": ["example.com/hold"]}),
    )
    .await;
    assert_eq!(count(a.addr(), "big").await, Some(1001));

    a.kubectl_ok(&["delete", "namespace", "big", "--wait=false"]);
    let (mut leader, survivor) = if leads(&a).await { (a, b) } else { (b, a) };
    // Kill the leader as soon as it has started on the content.
    let seen = eventually_async("the deletion to start", Duration::from_secs(30), || async {
        count(survivor.addr(), "big").await.filter(|n| *n < 1001)
    })
    .await;
    leader.kill();
    eprintln!("leader killed with {seen} of 1,001 objects left");

    survivor.kubectl_ok(&[
        "patch",
        "configmap",
        "held0",
        "-n",
        "big",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    // The lease (15 s) lapses, then the survivor leads and finishes.
    eventually(
        "the survivor to finish the deletion",
        Duration::from_secs(90),
        || survivor.gone(&["get", "namespace", "big"]).then_some(()),
    )
    .await;
    assert_eq!(count(survivor.addr(), "big").await, Some(0));
    assert!(leads(&survivor).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_finish_their_work_when_etcd_returns() {
    let mut etcd = EtcdCluster::start(1).await;
    let s = Server::start_on(&etcd.endpoint(0), &["--etcd-request-timeout=2"]).await;
    s.kubectl_ok(&["create", "namespace", "gc"]);
    s.kubectl_ok(&["create", "namespace", "doomed"]);
    s.kubectl_ok(&["create", "configmap", "owner", "-n", "gc"]);
    let uid = s.get_json(&["configmap", "owner", "-n", "gc"])["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    create_many(
        s.addr(),
        "gc",
        "d",
        500,
        json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}),
    )
    .await;
    create_many(s.addr(), "doomed", "c", 200, json!({})).await;

    // Both controllers get work, and etcd goes away under them.
    s.kubectl_ok(&["delete", "configmap", "owner", "-n", "gc"]);
    s.kubectl_ok(&["delete", "namespace", "doomed", "--wait=false"]);
    etcd.stop(0);
    let left = count(s.addr(), "gc").await;
    assert_eq!(left, None, "no answer without etcd");
    tokio::time::sleep(Duration::from_secs(5)).await;
    etcd.spawn(0);
    etcd.wait_healthy(0).await;

    eventually_async(
        "the dependents to be collected",
        Duration::from_secs(60),
        || async { (count(s.addr(), "gc").await? == 0).then_some(()) },
    )
    .await;
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(60),
        || s.gone(&["get", "namespace", "doomed"]).then_some(()),
    )
    .await;
    // And they keep working.
    s.kubectl_ok(&["create", "configmap", "owner2", "-n", "gc"]);
    let uid = s.get_json(&["configmap", "owner2", "-n", "gc"])["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    create_many(
        s.addr(),
        "gc",
        "e",
        3,
        json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": uid}]}),
    )
    .await;
    s.kubectl_ok(&["delete", "configmap", "owner2", "-n", "gc"]);
    eventually_async(
        "the new dependents to be collected",
        Duration::from_secs(20),
        || async { (count(s.addr(), "gc").await? == 0).then_some(()) },
    )
    .await;
}

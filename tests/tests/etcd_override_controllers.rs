//! Controllers whose work spans `--etcd-servers-overrides` clusters, and
//! the per-cluster metrics. Events live on a cluster of their own; while
//! it is down, a namespace being deleted stays Terminating with kube's
//! `NamespaceDeletionContentFailure` condition, the garbage collector's
//! dependents on that cluster wait (an owner deleted in the foreground
//! keeps its finalizer), and the collector goes on working for the main
//! cluster. Once the cluster is back, both finish by themselves and
//! nothing is left behind. `/metrics` has one `apiserver_storage_size_bytes`
//! series per cluster that answers (kube's `storage_cluster_id`), and
//! the down cluster's resources count -1 in `apiserver_storage_objects`.

use e2e::cluster::{etcd_keys, EtcdCluster};
use e2e::{eventually_async, HttpResponse, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// How long a controller may take to finish once its cluster is back
/// (its retries back off to at most 30 s).
const SETTLE: Duration = Duration::from_secs(90);

async fn send(s: &Server, method: &str, path: &str, body: &Value) -> HttpResponse {
    s.request(
        method,
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
}

async fn create(s: &Server, path: &str, body: &Value) -> Value {
    let r = send(s, "POST", path, body).await;
    assert_eq!(r.status, 201, "POST {path}: {}", r.text());
    serde_json::from_slice(&r.body).expect("json")
}

async fn status_of(s: &Server, path: &str) -> u16 {
    s.request("GET", path, &[], b"").await.status
}

fn configmap(name: &str, ns: &str, owner: Option<&Value>) -> Value {
    let mut cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"k": "v"},
    });
    if let Some(o) = owner {
        cm["metadata"]["ownerReferences"] = json!([owner_ref(o)]);
    }
    cm
}

fn owner_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": true,
    })
}

/// An Event, owned by `owner` when given (the collector honours any
/// object's ownerReferences, Events' too).
fn event(name: &str, ns: &str, owner: Option<&Value>) -> Value {
    let mut ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": ns},
        "reason": "Tested", "message": "hello", "type": "Normal",
    });
    if let Some(o) = owner {
        ev["metadata"]["ownerReferences"] = json!([owner_ref(o)]);
    }
    ev
}

/// The `/metrics` lines of `family` (without its HELP and TYPE lines).
async fn metric_lines(s: &Server, family: &str) -> Vec<String> {
    let r = s.request("GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .map(str::to_string)
        .collect()
}

fn value_of(lines: &[String], labels: &str) -> Option<f64> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(labels))
        .and_then(|v| v.trim().parse().ok())
}

const CM: &str = "/api/v1/namespaces/default/configmaps";
const EV: &str = "/api/v1/namespaces/default/events";

#[tokio::test]
async fn controllers_wait_for_a_down_cluster_and_finish_when_it_is_back() {
    let main = EtcdCluster::start(1).await;
    let mut events = EtcdCluster::start(1).await;
    let ev = events.endpoint(0);
    let prefix = e2e::unique_prefix();
    let flag = format!("--etcd-servers-overrides=/events#{ev}");
    let s = Server::start_with_prefix(&main.endpoint(0), &prefix, &[&flag]).await;

    // One storage size per cluster: the main one is etcd-0, the override
    // etcd-1.
    let sizes = metric_lines(&s, "apiserver_storage_size_bytes").await;
    for id in ["etcd-0", "etcd-1"] {
        let size = value_of(
            &sizes,
            &format!("apiserver_storage_size_bytes{{storage_cluster_id=\"{id}\"}}"),
        );
        assert!(size.is_some_and(|b| b > 0.0), "{id}: {sizes:?}");
    }
    assert_eq!(sizes.len(), 2, "{sizes:?}");

    // A namespace with content on both clusters.
    s.kubectl_ok(&["create", "namespace", "doomed"]);
    create(
        &s,
        "/api/v1/namespaces/doomed/configmaps",
        &configmap("cm", "doomed", None),
    )
    .await;
    create(
        &s,
        "/api/v1/namespaces/doomed/events",
        &event("e1", "doomed", None),
    )
    .await;
    // Owners on the main cluster with dependents on the events cluster,
    // and a pair on the main cluster alone.
    let bg = create(&s, CM, &configmap("owner-bg", "default", None)).await;
    let fg = create(&s, CM, &configmap("owner-fg", "default", None)).await;
    let local = create(&s, CM, &configmap("owner-local", "default", None)).await;
    create(&s, EV, &event("dep-bg", "default", Some(&bg))).await;
    create(&s, EV, &event("dep-fg", "default", Some(&fg))).await;
    create(&s, CM, &configmap("dep-local", "default", Some(&local))).await;

    // The events cluster goes down.
    events.kill(0);
    let ready = s.request("GET", "/readyz?verbose", &[], b"").await;
    assert!(
        ready.text().contains("[-]etcd-override-0 failed"),
        "{}",
        ready.text()
    );
    // Its size is missing (kube leaves out a cluster that does not
    // answer) and its resources count -1 (kube's fetching error).
    let sizes = metric_lines(&s, "apiserver_storage_size_bytes").await;
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert!(
        sizes[0].contains("storage_cluster_id=\"etcd-0\""),
        "{sizes:?}"
    );
    let objects = metric_lines(&s, "apiserver_storage_objects").await;
    assert_eq!(
        value_of(&objects, "apiserver_storage_objects{resource=\"events\"}"),
        Some(-1.0),
        "{objects:?}"
    );
    assert!(
        value_of(
            &objects,
            "apiserver_storage_objects{resource=\"configmaps\"}"
        )
        .is_some_and(|n| n >= 5.0),
        "{objects:?}"
    );

    // Deletions that need the down cluster.
    s.kubectl_ok(&["delete", "namespace", "doomed", "--wait=false"]);
    let bg_path = format!("{CM}/owner-bg");
    let r = send(
        &s,
        "DELETE",
        &bg_path,
        &json!({"propagationPolicy": "Background"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let fg_path = format!("{CM}/owner-fg");
    let r = send(
        &s,
        "DELETE",
        &fg_path,
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = send(&s, "DELETE", &format!("{CM}/owner-local"), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());

    // The collector keeps working for the main cluster meanwhile.
    eventually_async("dep-local to be collected", SETTLE, || async {
        (status_of(&s, &format!("{CM}/dep-local")).await == 404).then_some(())
    })
    .await;
    // The namespace controller deletes what it can reach, and reports
    // what it cannot as kube's condition.
    eventually_async("doomed's configmap to go", SETTLE, || async {
        (status_of(&s, "/api/v1/namespaces/doomed/configmaps/cm").await == 404).then_some(())
    })
    .await;
    let failure = eventually_async("the content failure condition", SETTLE, || async {
        let ns = s.get_json(&["namespace", "doomed"]);
        ns["status"]["conditions"]
            .as_array()
            .and_then(|cs| {
                cs.iter().find(|c| {
                    c["type"] == "NamespaceDeletionContentFailure" && c["status"] == "True"
                })
            })
            .cloned()
    })
    .await;
    assert_eq!(failure["reason"], "ContentDeletionFailed", "{failure}");
    assert_eq!(
        failure["message"],
        "Failed to delete all resource types, 1 remaining: etcd is unavailable; please retry",
        "{failure}"
    );
    let ns = s.get_json(&["namespace", "doomed"]);
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    let discovery = ns["status"]["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "NamespaceDeletionDiscoveryFailure")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(discovery["status"], "False", "{ns}");
    // The foreground owner waits for its dependent on the down cluster.
    let owner = s.get_json(&["configmap", "owner-fg"]);
    assert!(
        owner["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion")),
        "{owner}"
    );
    assert_eq!(status_of(&s, &bg_path).await, 404);
    // Still waiting a while later: nothing finishes without the cluster.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(status_of(&s, "/api/v1/namespaces/doomed").await, 200);
    assert_eq!(status_of(&s, &fg_path).await, 200);

    // Back: everything finishes by itself, nothing is left behind.
    events.spawn(0);
    events.wait_healthy(0).await;
    eventually_async("the namespace to be deleted", SETTLE, || async {
        (status_of(&s, "/api/v1/namespaces/doomed").await == 404).then_some(())
    })
    .await;
    for path in [
        format!("{EV}/dep-bg"),
        format!("{EV}/dep-fg"),
        fg_path.clone(),
    ] {
        eventually_async(&format!("{path} to be collected"), SETTLE, || async {
            (status_of(&s, &path).await == 404).then_some(())
        })
        .await;
    }
    let left = etcd_keys(&ev, &format!("{prefix}/events/"));
    assert!(
        !left
            .iter()
            .any(|k| k.contains("/doomed/") || k.ends_with("/dep-bg") || k.ends_with("/dep-fg")),
        "{left:?}"
    );
    let sizes = metric_lines(&s, "apiserver_storage_size_bytes").await;
    assert_eq!(sizes.len(), 2, "{sizes:?}");
}

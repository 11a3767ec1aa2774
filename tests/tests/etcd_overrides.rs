//! `--etcd-servers-overrides`: three etcd clusters (main, events, leases)
//! behind one API. Keys land in the cluster of their resource, each
//! resource's resourceVersions are its cluster's revisions, /readyz checks
//! each cluster under kube's names, and an override cluster that is down
//! fails its own resources (503) while the others keep serving; once it is
//! back, a watch opened before the outage goes on without a relist.

use e2e::cluster::{etcd_keys, EtcdCluster};
use e2e::watch::{self, Line};
use e2e::{eventually_async, server_binary, HttpResponse, Server};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// The mod revision of `key` and the cluster's current revision, read with
/// etcdctl.
fn etcd_revisions(endpoint: &str, key: &str) -> (i64, i64) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "get", "-w", "json", key])
        .output()
        .expect("etcdctl runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
    let modified = v["kvs"][0]["mod_revision"].as_i64().unwrap_or(-1);
    (
        modified,
        v["header"]["revision"].as_i64().expect("revision"),
    )
}

fn event(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": "default"},
        "reason": "Tested", "message": "hello", "type": "Normal",
    })
}

fn lease(name: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": "e2e", "leaseDurationSeconds": 30},
    })
}

fn configmap(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"k": "v"},
    })
}

async fn post(s: &Server, path: &str, body: &Value) -> HttpResponse {
    s.request(
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
}

fn rv_of(v: &Value) -> i64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {v}"))
}

async fn get_json(s: &Server, path: &str) -> Value {
    let r = s.request("GET", path, &[], b"").await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    serde_json::from_slice(&r.body).expect("json")
}

/// The next ADDED of `name` on `rx`, failing on an ERROR event or the end
/// of the stream (a relist would start with one of those).
async fn added(rx: &mut UnboundedReceiver<Line>, name: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Line::Event(e))) if e.kind == "ADDED" && e.name == name => return e.revision,
            Ok(Some(Line::Event(_) | Line::Bookmark(_))) => {}
            Ok(Some(Line::Error(status))) => panic!("watch ended with an error: {status}"),
            Ok(None) => panic!("watch stream closed before {name} arrived"),
            Err(_) => panic!("{name} did not arrive on the watch"),
        }
    }
}

const EVENTS: &str = "/api/v1/namespaces/default/events";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn resources_on_their_own_etcd_clusters() {
    let main = EtcdCluster::start(1).await;
    let mut events = EtcdCluster::start(1).await;
    let leases = EtcdCluster::start(1).await;
    let (ev, le) = (events.endpoint(0), leases.endpoint(0));
    let prefix = e2e::unique_prefix();
    // Widgets (a custom resource) share the leases cluster: one cluster,
    // one check.
    let flag = format!(
        "--etcd-servers-overrides=/events#{ev},coordination.k8s.io/leases#{le},e2e.example.com/widgets#{le}"
    );
    let s = Server::start_with_prefix(&main.endpoint(0), &prefix, &[&flag]).await;

    // One check per override cluster, named as kube names them, after etcd.
    let ready = s.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    let at = |line: &str| {
        ready
            .find(line)
            .unwrap_or_else(|| panic!("no {line:?} in:\n{ready}"))
    };
    assert!(at("[+]etcd ok") < at("[+]etcd-override-0 ok"));
    assert!(at("[+]etcd-override-0 ok") < at("[+]etcd-override-1 ok"));
    assert!(!ready.contains("etcd-override-2"), "{ready}");
    let one = s.request("GET", "/readyz/etcd-override-1", &[], b"").await;
    assert_eq!((one.status, one.text()), (200, "ok".to_string()));
    let live = s.kubectl_ok(&["get", "--raw", "/livez?verbose"]);
    assert!(!live.contains("etcd"), "livez never checks etcd:\n{live}");

    // Writes through kubectl and raw HTTP, one API.
    s.kubectl_ok(&["create", "configmap", "cm1", "--from-literal=a=b"]);
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &event("ev1").to_string());
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &lease("l1").to_string());
    let ev2 = post(&s, "/apis/events.k8s.io/v1/namespaces/default/events", &json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "ev2", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "e2e",
        "reportingInstance": "e2e-1", "action": "Test", "reason": "Tested", "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "namespace": "default"},
    }))
    .await;
    assert_eq!(ev2.status, 201, "{}", ev2.text());
    let got = s.get_json(&["events", "ev1"]);
    assert_eq!(got["message"], "hello");
    assert_eq!(
        s.get_json(&["leases", "l1"])["spec"]["holderIdentity"],
        "e2e"
    );
    assert_eq!(s.get_json(&["configmap", "cm1"])["data"]["a"], "b");

    // A custom resource's keys go to its cluster once its CRD exists.
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.e2e.example.com"},
        "spec": {
            "group": "e2e.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }).to_string());
    let widgets = "/apis/e2e.example.com/v1/namespaces/default/widgets";
    let widget = json!({"apiVersion": "e2e.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3}});
    let created = eventually_async("widgets to be served", Duration::from_secs(30), || async {
        let r = post(&s, widgets, &widget).await;
        (r.status == 201).then(|| serde_json::from_slice::<Value>(&r.body).expect("json"))
    })
    .await;
    let widget_key = format!("{prefix}/e2e.example.com/widgets/default/w1");
    assert_eq!(rv_of(&created), etcd_revisions(&le, &widget_key).0);
    assert_eq!(s.get_json(&["widgets", "w1"])["spec"]["size"], 3);

    // Keys land in their cluster, and nowhere else.
    let root = format!("{prefix}/");
    let main_keys = etcd_keys(&main.endpoint(0), &root);
    let event_keys = etcd_keys(&ev, &root);
    let lease_keys = etcd_keys(&le, &root);
    assert!(main_keys.contains(&format!("{prefix}/configmaps/default/cm1")));
    assert!(
        !main_keys
            .iter()
            .any(|k| k.starts_with(&format!("{prefix}/events/"))
                || k.starts_with(&format!("{prefix}/leases/"))),
        "main etcd holds no event or lease: {main_keys:?}"
    );
    for name in ["ev1", "ev2"] {
        assert!(event_keys.contains(&format!("{prefix}/events/default/{name}")));
    }
    assert!(
        event_keys
            .iter()
            .all(|k| k.starts_with(&format!("{prefix}/events/"))),
        "{event_keys:?}"
    );
    assert!(lease_keys.contains(&format!("{prefix}/leases/default/l1")));
    assert!(lease_keys.contains(&widget_key));
    assert!(!main_keys.contains(&widget_key));
    assert!(
        lease_keys
            .iter()
            .all(|k| k.starts_with(&format!("{prefix}/leases/"))
                || k.starts_with(&format!("{prefix}/e2e.example.com/widgets/"))),
        "{lease_keys:?}"
    );

    // resourceVersions are the owning cluster's revisions.
    let (modified, _) = etcd_revisions(&ev, &format!("{prefix}/events/default/ev1"));
    assert_eq!(rv_of(&got), modified);
    let (modified, _) = etcd_revisions(&le, &format!("{prefix}/leases/default/l1"));
    assert_eq!(rv_of(&s.get_json(&["leases", "l1"])), modified);

    // A consistent list of each resource is at its own cluster's revision
    // (main's is far ahead: bootstrap wrote hundreds of objects there).
    let mut watches = Vec::new();
    for (path, endpoint) in [
        (EVENTS, ev.clone()),
        (LEASES, le.clone()),
        (CONFIGMAPS, main.endpoint(0)),
    ] {
        let list = get_json(&s, path).await;
        let list_rv = rv_of(&list);
        let (_, current) = etcd_revisions(&endpoint, "/");
        assert!(
            list_rv <= current && !list["items"].as_array().unwrap().is_empty(),
            "{path}: list at {list_rv}, its cluster at {current}"
        );
        let rx = watch::open(
            s.addr(),
            &format!("{path}?watch=1&resourceVersion={list_rv}"),
        )
        .await
        .unwrap_or_else(|e| panic!("watch {path}: {e}"));
        watches.push(rx);
    }
    let (main_rev, events_rev) = (
        etcd_revisions(&main.endpoint(0), "/").1,
        etcd_revisions(&ev, "/").1,
    );
    assert!(
        events_rev < main_rev,
        "events {events_rev}, main {main_rev}"
    );

    // A watch on each resource sees its new object.
    let [ev_watch, lease_watch, cm_watch] = &mut watches[..] else {
        unreachable!()
    };
    assert_eq!(post(&s, EVENTS, &event("ev3")).await.status, 201);
    assert_eq!(post(&s, LEASES, &lease("l2")).await.status, 201);
    assert_eq!(post(&s, CONFIGMAPS, &configmap("cm2")).await.status, 201);
    let ev3 = added(ev_watch, "ev3").await;
    assert_eq!(
        ev3,
        etcd_revisions(&ev, &format!("{prefix}/events/default/ev3")).0
    );
    added(lease_watch, "l2").await;
    added(cm_watch, "cm2").await;

    // The events cluster goes down: event writes fail promptly with 503,
    // everything else keeps serving at its usual pace.
    events.kill(0);
    let started = Instant::now();
    let refused = post(&s, EVENTS, &event("ev4")).await;
    let took = started.elapsed();
    assert_eq!(refused.status, 503, "{}", refused.text());
    let status: Value = serde_json::from_slice(&refused.body).expect("a Status");
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    assert!(took < Duration::from_secs(5), "the 503 took {took:?}");
    for i in 0..5 {
        let started = Instant::now();
        let r = post(&s, CONFIGMAPS, &configmap(&format!("during-{i}"))).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let r = post(&s, LEASES, &lease(&format!("during-{i}"))).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let list = s.request("GET", CONFIGMAPS, &[], b"").await;
        assert_eq!(list.status, 200, "{}", list.text());
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "three requests took {took:?}"
        );
    }
    added(cm_watch, "during-0").await;
    let ready = s.request("GET", "/readyz?verbose", &[], b"").await;
    assert_eq!(ready.status, 500, "{}", ready.text());
    assert!(
        ready.text().contains("[-]etcd-override-0 failed"),
        "{}",
        ready.text()
    );
    assert!(
        ready.text().contains("[+]etcd-override-1 ok"),
        "{}",
        ready.text()
    );

    // Back: the event writes succeed again, and the watch opened before the
    // outage carries on (no ERROR, no end of stream, no relist).
    events.spawn(0);
    events.wait_healthy(0).await;
    eventually_async(
        "event writes to succeed again",
        Duration::from_secs(30),
        || async { (post(&s, EVENTS, &event("ev5")).await.status == 201).then_some(()) },
    )
    .await;
    let ev5 = added(ev_watch, "ev5").await;
    assert!(ev5 > ev3);
    let ready = s.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(ready.contains("[+]etcd-override-0 ok"), "{ready}");
}

/// An override cluster that hangs (SIGSTOP: connections open, no answers)
/// costs its resources one timeout, then their requests fail at once until
/// it answers again; the main cluster's resources never wait.
#[tokio::test]
async fn a_hung_override_cluster_fails_fast() {
    let main = EtcdCluster::start(1).await;
    let events = EtcdCluster::start(1).await;
    let flag = format!("--etcd-servers-overrides=/events#{}", events.endpoint(0));
    let s = Server::start_on(&main.endpoint(0), &[&flag, "--etcd-request-timeout=2"]).await;
    assert_eq!(post(&s, EVENTS, &event("before")).await.status, 201);
    let pid = events.pid(0).expect("etcd runs").to_string();
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill runs");
        assert!(ok.success());
    };
    signal("-STOP");
    // The first request finds out, within the request timeout.
    let started = Instant::now();
    let first = post(&s, EVENTS, &event("first")).await;
    assert_eq!(first.status, 503, "{}", first.text());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // From then on: at once, while ConfigMaps go on as usual.
    for i in 0..5 {
        let started = Instant::now();
        let r = post(&s, EVENTS, &event(&format!("fast-{i}"))).await;
        assert_eq!(r.status, 503, "{}", r.text());
        let r = s.request("GET", EVENTS, &[], b"").await;
        assert_eq!(r.status, 503, "{}", r.text());
        let r = post(&s, CONFIGMAPS, &configmap(&format!("cm-{i}"))).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let took = started.elapsed();
        assert!(took < Duration::from_millis(500), "round {i} took {took:?}");
    }
    signal("-CONT");
    eventually_async(
        "event writes to succeed again",
        Duration::from_secs(20),
        || async { (post(&s, EVENTS, &event("after")).await.status == 201).then_some(()) },
    )
    .await;
}

/// kube's syntax errors stop the start with kube's message; one key range
/// on two clusters is refused as well.
#[tokio::test]
async fn malformed_overrides_stop_the_start() {
    for (flag, message) in [
        (
            "--etcd-servers-overrides=events#http://127.0.0.1:1",
            "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated",
        ),
        (
            "--etcd-servers-overrides=/events#http://127.0.0.1:1;",
            "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated",
        ),
        (
            "--etcd-servers-overrides=/events#http://127.0.0.1:1,events.k8s.io/events#http://127.0.0.1:2",
            "/events and events.k8s.io/events are stored under the same keys (events) but name different servers",
        ),
    ] {
        let out = Command::new(server_binary())
            .args([flag, "--etcd-servers=http://127.0.0.1:1", "--secure-listen=off"])
            .output()
            .expect("the server runs");
        let err = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{flag} started");
        assert!(err.contains(message), "{flag}:\n{err}");
    }
}

// ---- The Python client over the three clusters (issue #32's tests).

/// The Python `kubernetes` package sees one API across the clusters:
/// creates, reads and lists ConfigMaps, Events and Leases, watches events,
/// and the resourceVersions it gets are the owning cluster's revisions
/// (tests/clients/overrides_python.py).
#[tokio::test]
async fn the_python_client_sees_one_api() {
    let main = EtcdCluster::start(1).await;
    let events = EtcdCluster::start(1).await;
    let leases = EtcdCluster::start(1).await;
    let (ev, le) = (events.endpoint(0), leases.endpoint(0));
    let prefix = e2e::unique_prefix();
    let flag = format!("--etcd-servers-overrides=/events#{ev},coordination.k8s.io/leases#{le}");
    let s = Server::start_with_prefix(&main.endpoint(0), &prefix, &[&flag]).await;
    e2e::run_python_client_with(&s, "overrides_python.py", &[&ev, &le, &prefix]);
}

//! kube's ResourceQuota admission and quota controller end to end:
//!
//! - through kubectl, a quota refuses the pod over its limit with kube's
//!   exact message (403), keeps `status.used`, and a deleted pod frees its
//!   slot (the controller recounts); a dry run is checked but not charged;
//!   a quota on `requests.cpu` wants every container to name it and adds
//!   the requests up; `count/<resource>.<group>` counts any collection;
//! - two replicas on one etcd admitting 40 concurrent pod creates against
//!   `pods: 10` (half through each) end with exactly 10 pods, and the
//!   quota says 10;
//! - the Python client sees the same (`tests/clients/quota_python.py`).

use e2e::{eventually, eventually_async, http_request, unique_prefix, Server};
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(30);

fn quota_yaml(ns: &str, name: &str, hard: &[(&str, &str)]) -> String {
    let hard: Vec<String> = hard
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\""))
        .collect();
    format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  hard:\n{}\n",
        hard.join("\n")
    )
}

fn pod_yaml(ns: &str, name: &str, cpu: Option<&str>) -> String {
    let resources = match cpu {
        Some(c) => format!("\n    resources:\n      requests:\n        cpu: {c}"),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: nginx{resources}\n"
    )
}

/// `kubectl create -f -` that must fail: its stderr.
fn create_fails(s: &Server, yaml: &str) -> String {
    let out = s.kubectl_stdin(&["create", "-f", "-"], yaml);
    assert!(!out.status.success(), "created: {}", e2e::stdout(&out));
    e2e::stderr(&out)
}

/// The quota's `status.used[resource]`, once the controller has filled it.
fn used(s: &Server, ns: &str, quota: &str, resource: &str) -> Option<String> {
    let q = s.get_json(&["resourcequota", quota, "-n", ns]);
    q["status"]["used"][resource].as_str().map(str::to_string)
}

async fn wait_used(s: &Server, ns: &str, quota: &str, resource: &str, want: &str) {
    eventually(
        &format!("{quota} to count {resource}={want}"),
        SETTLE,
        || (used(s, ns, quota, resource).as_deref() == Some(want)).then_some(()),
    )
    .await;
}

/// A namespace whose `default` ServiceAccount exists (pods need it).
async fn namespace(s: &Server, ns: &str) {
    s.kubectl_ok(&["create", "namespace", ns]);
    eventually("the default service account", SETTLE, || {
        s.kubectl(&["get", "serviceaccount", "default", "-n", ns])
            .status
            .success()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn quota_counts_refuses_and_releases_pods() {
    let s = Server::start().await;
    namespace(&s, "q").await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &quota_yaml("q", "objects", &[("pods", "2"), ("services", "1")]),
    );
    // The controller fills the status: hard from the spec, used counted.
    wait_used(&s, "q", "objects", "pods", "0").await;
    let q = s.get_json(&["resourcequota", "objects", "-n", "q"]);
    assert_eq!(q["status"]["hard"], json!({"pods": "2", "services": "1"}));
    assert_eq!(q["status"]["used"], json!({"pods": "0", "services": "0"}));

    s.kubectl_ok(&["run", "p1", "-n", "q", "--image=nginx"]);
    s.kubectl_ok(&["run", "p2", "-n", "q", "--image=nginx"]);
    assert_eq!(used(&s, "q", "objects", "pods").as_deref(), Some("2"));
    let (_, err) = s.kubectl_err(&["run", "p3", "-n", "q", "--image=nginx"]);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): pods "p3" is forbidden: exceeded quota: objects, requested: pods=1, used: pods=2, limited: pods=2"#
    );
    // The refusal is a 403 with kube's Status.
    let resp = http_request(
        s.addr(),
        "POST",
        "/api/v1/namespaces/q/pods",
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p3"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status, 403, "{}", resp.text());
    let status: Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["details"], json!({"name": "p3", "kind": "pods"}));

    // Deleting a pod releases its slot (the controller recounts).
    s.kubectl_ok(&["delete", "pod", "p1", "-n", "q", "--wait=false"]);
    s.wait_gone(SETTLE, "pod p1 to go", &["get", "pod", "p1", "-n", "q"])
        .await;
    wait_used(&s, "q", "objects", "pods", "1").await;

    // A dry run is checked, never charged.
    s.kubectl_ok(&["run", "p3", "-n", "q", "--image=nginx", "--dry-run=server"]);
    assert_eq!(used(&s, "q", "objects", "pods").as_deref(), Some("1"));
    s.kubectl_ok(&["run", "p3", "-n", "q", "--image=nginx"]);
    assert_eq!(used(&s, "q", "objects", "pods").as_deref(), Some("2"));
    let (_, err) = s.kubectl_err(&["run", "p4", "-n", "q", "--image=nginx", "--dry-run=server"]);
    assert!(err.contains("exceeded quota: objects"), "{err}");

    // Services are counted on their own.
    s.kubectl_ok(&[
        "create",
        "service",
        "clusterip",
        "a",
        "-n",
        "q",
        "--tcp=80:80",
    ]);
    let (_, err) = s.kubectl_err(&[
        "create",
        "service",
        "clusterip",
        "b",
        "-n",
        "q",
        "--tcp=80:80",
    ]);
    assert!(
        err.contains(r#"services "b" is forbidden: exceeded quota: objects, requested: services=1, used: services=1, limited: services=1"#),
        "{err}"
    );

    // Raising the limit is picked up by the controller.
    s.kubectl_ok(&[
        "patch",
        "resourcequota",
        "objects",
        "-n",
        "q",
        "--type=merge",
        "-p",
        r#"{"spec":{"hard":{"pods":"3"}}}"#,
    ]);
    eventually("status.hard to follow the spec", SETTLE, || {
        let q = s.get_json(&["resourcequota", "objects", "-n", "q"]);
        (q["status"]["hard"]["pods"] == "3").then_some(())
    })
    .await;
    s.kubectl_ok(&["run", "p4", "-n", "q", "--image=nginx"]);
    let table = s.kubectl_ok(&["get", "quota", "-n", "q"]);
    assert!(table.contains("pods: 3/3, services: 1/1"), "{table}");
    let described = s.kubectl_ok(&["describe", "quota", "objects", "-n", "q"]);
    let rows: Vec<Vec<&str>> = described
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.contains(&vec!["pods", "3", "3"]), "{described}");
    assert!(rows.contains(&vec!["services", "1", "1"]), "{described}");
}

#[tokio::test]
async fn compute_quota_needs_requests_and_adds_them_up() {
    let s = Server::start().await;
    namespace(&s, "cq").await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &quota_yaml(
            "cq",
            "compute",
            &[("requests.cpu", "1"), ("count/deployments.apps", "1")],
        ),
    );
    wait_used(&s, "cq", "compute", "requests.cpu", "0").await;
    let err = create_fails(&s, &pod_yaml("cq", "bare", None));
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): error when creating "STDIN": pods "bare" is forbidden: failed quota: compute: must specify requests.cpu for: c"#
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &pod_yaml("cq", "a", Some("600m")));
    assert_eq!(
        used(&s, "cq", "compute", "requests.cpu").as_deref(),
        Some("600m")
    );
    let err = create_fails(&s, &pod_yaml("cq", "b", Some("0.5")));
    assert!(
        err.contains(r#"pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"#),
        "{err}"
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &pod_yaml("cq", "b", Some("400m")));
    assert_eq!(
        used(&s, "cq", "compute", "requests.cpu").as_deref(),
        Some("1")
    );

    // Any collection is counted by `count/<resource>.<group>`.
    s.kubectl_ok(&["create", "deployment", "web", "-n", "cq", "--image=nginx"]);
    let (_, err) = s.kubectl_err(&["create", "deployment", "web2", "-n", "cq", "--image=nginx"]);
    assert!(
        err.contains(r#"deployments.apps "web2" is forbidden: exceeded quota: compute, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1"#),
        "{err}"
    );
    s.kubectl_ok(&["delete", "deployment", "web", "-n", "cq"]);
    wait_used(&s, "cq", "compute", "count/deployments.apps", "0").await;
}

/// Two replicas, one etcd: 40 concurrent creates against `pods: 10`, half
/// through each replica, admit exactly 10.
#[tokio::test]
async fn concurrent_creates_on_two_replicas_stop_at_the_limit() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    namespace(&a, "race").await;
    a.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &quota_yaml("race", "ten", &[("pods", "10")]),
    );
    // Both replicas see the counted quota before the race starts.
    for s in [&a, &b] {
        wait_used(s, "race", "ten", "pods", "0").await;
    }
    let addrs = [a.addr().to_string(), b.addr().to_string()];
    let mut tasks = Vec::new();
    for i in 0..40 {
        let addr = addrs[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let body = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
            let resp = http_request(
                &addr,
                "POST",
                "/api/v1/namespaces/race/pods",
                &[("Content-Type", "application/json")],
                &serde_json::to_vec(&body).unwrap(),
            )
            .await
            .expect("request");
            (resp.status, resp.text())
        }));
    }
    let mut created = 0;
    let mut refused = 0;
    for t in tasks {
        let (code, text) = t.await.unwrap();
        match code {
            201 => created += 1,
            403 => {
                assert!(
                    text.contains(
                        "exceeded quota: ten, requested: pods=1, used: pods=10, limited: pods=10"
                    ),
                    "{text}"
                );
                refused += 1;
            }
            other => panic!("unexpected {other}: {text}"),
        }
    }
    assert_eq!((created, refused), (10, 30));
    let pods = a.get_json(&["pods", "-n", "race"]);
    assert_eq!(pods["items"].as_array().unwrap().len(), 10);
    assert_eq!(used(&b, "race", "ten", "pods").as_deref(), Some("10"));
    // The controller's recount agrees (a pod deleted through B is
    // released, whichever replica leads).
    b.kubectl_ok(&[
        "delete",
        "pod",
        "p0",
        "p1",
        "p2",
        "p3",
        "p4",
        "p5",
        "p6",
        "p7",
        "p8",
        "p9",
        "p10",
        "p11",
        "-n",
        "race",
        "--ignore-not-found",
        "--wait=false",
    ]);
    let left = eventually_async("the deletes to land", SETTLE, || async {
        let n = a.get_json(&["pods", "-n", "race"])["items"]
            .as_array()
            .map_or(0, Vec::len);
        (n < 10).then_some(n)
    })
    .await;
    let _ = left;
    eventually("the quota to follow the deletes", SETTLE, || {
        let n = a.get_json(&["pods", "-n", "race"])["items"]
            .as_array()
            .map_or(0, Vec::len);
        (used(&a, "race", "ten", "pods") == Some(n.to_string())).then_some(())
    })
    .await;
}

/// The Python `kubernetes` client sees the same: status kept, 403 with
/// kube's message, LimitRange defaults counted, usage released.
#[tokio::test]
async fn python_client_sees_quota_and_limit_range() {
    let s = Server::start().await;
    e2e::run_python_client(&s, "quota_python.py");
}

//! kube's LimitRanger admission end to end, through kubectl: a
//! LimitRange's container defaults appear on a created pod (with kube's
//! `kubernetes.io/limit-ranger` annotation), its max refuses a pod over it
//! with kube's message, claims are held to the `PersistentVolumeClaim`
//! item, and the defaults are what a compute quota then counts.

use e2e::{eventually, Server};
use serde_json::json;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(30);

const RANGE: &str = "apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: lr}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: 100m}
    max: {cpu: \"1\"}
  - type: PersistentVolumeClaim
    max: {storage: 2Gi}
";

fn create_fails(s: &Server, yaml: &str) -> String {
    let out = s.kubectl_stdin(&["create", "-f", "-"], yaml);
    assert!(!out.status.success(), "created: {}", e2e::stdout(&out));
    e2e::stderr(&out)
}

#[tokio::test]
async fn limit_range_defaults_and_limits_pods_and_claims() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "lr"]);
    eventually("the default service account", SETTLE, || {
        s.kubectl(&["get", "serviceaccount", "default", "-n", "lr"])
            .status
            .success()
            .then_some(())
    })
    .await;
    s.kubectl_stdin_ok(&["apply", "-f", "-"], RANGE);
    // A compute quota: the defaults are what make pods acceptable to it.
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: compute, namespace: lr}\nspec:\n  hard: {requests.cpu: \"1\", limits.memory: 1Gi}\n",
    );
    eventually("the quota's status", SETTLE, || {
        let q = s.get_json(&["resourcequota", "compute", "-n", "lr"]);
        q["status"]["used"].get("requests.cpu").map(|_| ())
    })
    .await;

    s.kubectl_ok(&["run", "web", "-n", "lr", "--image=nginx"]);
    let pod = s.get_json(&["pod", "web", "-n", "lr"]);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"},
               "requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
    );
    let q = s.get_json(&["resourcequota", "compute", "-n", "lr"]);
    assert_eq!(
        q["status"]["used"],
        json!({"requests.cpu": "100m", "limits.memory": "256Mi"})
    );

    let big = "apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: lr}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      limits: {cpu: \"2\"}\n";
    let err = create_fails(&s, big);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): error when creating "STDIN": pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#
    );

    let claim = |size: &str| {
        format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: lr}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {{storage: {size}}}\n")
    };
    let err = create_fails(&s, &claim("5Gi"));
    assert!(
        err.contains(r#"persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"#),
        "{err}"
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &claim("1Gi"));
}

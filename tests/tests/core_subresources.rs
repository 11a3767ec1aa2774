//! The core subresources that write one part of an object:
//! `pods/ephemeralcontainers` (`kubectl debug`), `pods/resize` and
//! `namespaces/finalize`, through kubectl and HTTP.

use e2e::{HttpResponse, Server};
use serde_json::{json, Value};

/// One request with a JSON body.
async fn send_json(s: &Server, method: &str, path: &str, body: &Value) -> HttpResponse {
    s.http(
        method,
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn kubectl_debug_adds_an_ephemeral_container() {
    let s = Server::start().await;
    s.kubectl_ok(&["run", "web", "--image=nginx:1.27"]);
    let out = s.kubectl(&[
        "debug",
        "web",
        "--image=busybox:1.36",
        "--target=web",
        "-c",
        "dbg",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod = s.get_json(&["pod", "web"]);
    let eph = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(eph["name"], "dbg", "{pod}");
    assert_eq!(eph["image"], "busybox:1.36");
    assert_eq!(eph["targetContainerName"], "web");
    assert_eq!(
        eph["terminationMessagePolicy"], "File",
        "defaults apply: {eph}"
    );

    // Changing it afterwards is refused with kube's words.
    let mut changed = pod.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
    let r = send_json(
        &s,
        "PUT",
        "/api/v1/namespaces/default/pods/web/ephemeralcontainers",
        &changed,
    )
    .await;
    let st: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 422, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed"),
        "{st}"
    );
    // The main resource may not add one (pod updates keep the spec).
    let r = s
        .http(
            "DELETE",
            "/api/v1/namespaces/default/pods/web/ephemeralcontainers",
            &[],
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 405, "{}", r.text());
}

#[tokio::test]
async fn resize_changes_resources_only() {
    let s = Server::start().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r"},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "100m"}}}]}});
    s.kubectl_stdin_ok(&["create", "-f", "-"], &pod.to_string());
    let out = s.kubectl_ok(&[
        "patch",
        "pod",
        "r",
        "--subresource=resize",
        "--type=merge",
        "-p",
        r#"{"spec":{"containers":[{"name":"app","image":"ignored","resources":{"requests":{"cpu":"200m"}}}]}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let p = s.get_json(&["pod", "r"]);
    let c = &p["spec"]["containers"][0];
    assert_eq!(c["resources"]["requests"]["cpu"], "200m", "{p}");
    assert_eq!(c["image"], "nginx", "only resources change: {p}");
    assert_eq!(p["status"]["qosClass"], "Burstable");
}

#[tokio::test]
async fn namespace_finalize_sets_only_the_finalizers() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "fin"]);
    let mut ns = s.get_json(&["namespace", "fin"]);
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]), "{ns}");
    ns["spec"]["finalizers"] = json!([]);
    ns["metadata"]["labels"]["sneaky"] = json!("yes");
    let r = send_json(&s, "PUT", "/api/v1/namespaces/fin/finalize", &ns).await;
    let out: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{out}");
    assert!(
        out["spec"]
            .get("finalizers")
            .is_none_or(|f| f == &json!([])),
        "{out}"
    );
    assert!(out["metadata"]["labels"].get("sneaky").is_none(), "{out}");
    // A bad finalizer name is 422; GET on /finalize is 405 (PUT only).
    let mut ns = out.clone();
    ns["spec"]["finalizers"] = json!(["not a name"]);
    let r = send_json(&s, "PUT", "/api/v1/namespaces/fin/finalize", &ns).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let r = s
        .http("GET", "/api/v1/namespaces/fin/finalize", &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 405, "{}", r.text());
}

/// Tokens are issued without the secure port too (the key is made under
/// --data-dir), and a TokenReview accepts them.
#[tokio::test]
async fn kubectl_create_token_on_the_plain_port() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "serviceaccount", "bot"]);
    let token = s.kubectl_ok(&["create", "token", "bot"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "not a JWT: {token}");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}});
    let r = send_json(
        &s,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &review,
    )
    .await;
    let out: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 201, "{out}");
    assert_eq!(out["status"]["authenticated"], true, "{out}");
    assert_eq!(
        out["status"]["user"]["username"],
        "system:serviceaccount:default:bot"
    );
}

/// A scheduler binds a Pod once, through `pods/binding` or `bindings`.
#[tokio::test]
async fn pods_are_bound_once() {
    let s = Server::start().await;
    s.kubectl_ok(&["run", "a", "--image=nginx"]);
    s.kubectl_ok(&["run", "b", "--image=nginx"]);
    let binding = |pod: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": pod, "annotations": {"scheduled-by": "test"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        .to_string()
    };
    let post = |path: &'static str, body: String| {
        let s = &s;
        async move {
            let r = s
                .http(
                    "POST",
                    path,
                    &[("Content-Type", "application/json")],
                    body.as_bytes(),
                )
                .await
                .unwrap();
            (r.status, serde_json::from_slice::<Value>(&r.body).unwrap())
        }
    };
    let (code, st) = post(
        "/api/v1/namespaces/default/pods/a/binding",
        binding("a", "node-1"),
    )
    .await;
    assert_eq!(code, 201, "{st}");
    assert_eq!(st["status"], "Success", "{st}");
    let pod = s.get_json(&["pod", "a"]);
    assert_eq!(pod["spec"]["nodeName"], "node-1", "{pod}");
    assert_eq!(pod["metadata"]["annotations"]["scheduled-by"], "test");
    let cond = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap_or_default();
    assert_eq!(cond["status"], "True", "{pod}");

    // A second binding is a conflict, in kube's words.
    let (code, st) = post(
        "/api/v1/namespaces/default/pods/a/binding",
        binding("a", "node-2"),
    )
    .await;
    assert_eq!(code, 409, "{st}");
    assert_eq!(
        st["message"],
        "Operation cannot be fulfilled on pods/binding \"a\": pod a is already assigned to node \"node-1\""
    );
    // The collection form binds by the Binding's name; a bad target is 422.
    let (code, st) = post("/api/v1/namespaces/default/bindings", binding("b", "")).await;
    assert_eq!(code, 422, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("target.name: Required value"),
        "{st}"
    );
    let (code, st) = post(
        "/api/v1/namespaces/default/bindings",
        binding("b", "node-2"),
    )
    .await;
    assert_eq!(code, 201, "{st}");
    let wide = s.kubectl_ok(&["get", "pod", "b", "-o", "wide"]);
    assert!(
        wide.lines().nth(1).unwrap_or("").contains("node-2"),
        "{wide}"
    );
    // Binding a Pod that does not exist is a 404.
    let (code, _) = post(
        "/api/v1/namespaces/default/bindings",
        binding("ghost", "node-1"),
    )
    .await;
    assert_eq!(code, 404);
}

/// `pods/eviction` honours PodDisruptionBudgets, and `kubectl drain`
/// evicts what a budget allows.
#[tokio::test]
async fn eviction_honours_disruption_budgets() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n",
    );
    for (pod, app) in [("free", "free"), ("guarded", "guarded")] {
        s.kubectl_ok(&["run", pod, "--image=nginx", &format!("--labels=app={app}")]);
        let bind = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"kind": "Node", "name": "node-1"}});
        let r = send_json(
            &s,
            "POST",
            &format!("/api/v1/namespaces/default/pods/{pod}/binding"),
            &bind,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text());
        s.kubectl_ok(&[
            "patch",
            "pod",
            pod,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ]);
    }
    s.kubectl_ok(&[
        "create",
        "pdb",
        "guard",
        "--selector=app=guarded",
        "--min-available=1",
    ]);
    let budget_status = |allowed: i64| {
        json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})
        .to_string()
    };
    s.kubectl_ok(&[
        "patch",
        "pdb",
        "guard",
        "--subresource=status",
        "--type=merge",
        "-p",
        &budget_status(0),
    ]);
    let evict = |pod: &'static str| {
        let s = &s;
        async move {
            let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod}, "deleteOptions": {"gracePeriodSeconds": 0}});
            let r = send_json(
                s,
                "POST",
                &format!("/api/v1/namespaces/default/pods/{pod}/eviction"),
                &body,
            )
            .await;
            (r.status, serde_json::from_slice::<Value>(&r.body).unwrap())
        }
    };
    let (code, st) = evict("guarded").await;
    assert_eq!(code, 429, "{st}");
    assert_eq!(st["reason"], "TooManyRequests");
    assert_eq!(
        st["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        st["details"]["causes"][0],
        json!({"reason": "DisruptionBudget",
               "message": "The disruption budget guard needs 1 healthy pods and has 1 currently"})
    );
    s.get_json(&["pod", "guarded"]);

    // Once the budget allows one disruption, the eviction is charged to it.
    s.kubectl_ok(&[
        "patch",
        "pdb",
        "guard",
        "--subresource=status",
        "--type=merge",
        "-p",
        &budget_status(1),
    ]);
    let (code, st) = evict("guarded").await;
    assert_eq!(code, 201, "{st}");
    let (code, _) = s.kubectl_err(&["get", "pod", "guarded"]);
    assert_eq!(code, 1, "the evicted pod is gone");
    let pdb = s.get_json(&["pdb", "guard"]);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    assert!(
        pdb["status"]["disruptedPods"].get("guarded").is_some(),
        "{pdb}"
    );

    // kubectl drain cordons the node and evicts the rest.
    let out = s.kubectl_ok(&[
        "drain",
        "node-1",
        "--force",
        "--grace-period=0",
        "--ignore-daemonsets",
        "--timeout=60s",
    ]);
    assert!(out.contains("node/node-1 drained"), "{out}");
    let node = s.get_json(&["node", "node-1"]);
    assert_eq!(node["spec"]["unschedulable"], true, "{node}");
    let (code, _) = s.kubectl_err(&["get", "pod", "free"]);
    assert_eq!(code, 1);
}

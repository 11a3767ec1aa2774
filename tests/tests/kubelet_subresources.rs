//! What kube serves by connecting to kubelets and cluster networks
//! (`pods/log`, `exec`, `attach`, `portforward`, `proxy`, `nodes/proxy`,
//! `services/proxy`), and the computed `componentstatuses`, through
//! kubectl and HTTP. This server has no kubelets: kube's checks come
//! first with kube's words, then a 503 that says why nothing connects.

use e2e::{HttpResponse, Server};
use serde_json::{json, Value};

async fn send(s: &Server, method: &str, path: &str, body: Option<&Value>) -> HttpResponse {
    let body = body.map(Value::to_string).unwrap_or_default();
    s.http(
        method,
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .await
    .unwrap()
}

/// The Status of an answer, checked for its code.
async fn status(s: &Server, method: &str, path: &str, code: u16) -> Value {
    let r = send(s, method, path, None).await;
    let st: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| panic!("{method} {path}: {} {}", r.status, r.text()));
    assert_eq!(r.status, code, "{method} {path}: {st}");
    assert_eq!(st["kind"], "Status", "{st}");
    assert_eq!(st["code"], code, "{st}");
    st
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn component_statuses_report_etcd() {
    let s = Server::start().await;
    let out = s.kubectl(&["get", "componentstatuses"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("etcd-0"))
        .unwrap_or_else(|| panic!("no etcd-0 row: {text}"))
        .split_whitespace()
        .collect();
    assert_eq!(row, ["etcd-0", "Healthy", "ok"], "{text}");
    // No scheduler runs beside this server: kube lists it unhealthy, with
    // the connection error.
    assert!(
        text.lines().any(|l| l.starts_with("scheduler")
            && l.contains("Unhealthy")
            && l.contains("127.0.0.1:10259")),
        "{text}"
    );
    assert!(
        stderr(&out).contains("v1 ComponentStatus is deprecated in v1.19+"),
        "{}",
        stderr(&out)
    );

    let r = send(&s, "GET", "/api/v1/componentstatuses", None).await;
    assert_eq!(r.status, 200);
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(list["kind"], "ComponentStatusList");
    assert_eq!(list["metadata"], json!({}), "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
    assert_eq!(
        list["items"][2],
        json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": "etcd-0"},
               "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
    );
    let cs = s.get_json(&["cs", "etcd-0"]);
    assert_eq!(cs["conditions"][0]["status"], "True", "{cs}");
    let cs = s.get_json(&["cs", "scheduler"]);
    assert_eq!(cs["conditions"][0]["status"], "False", "{cs}");
    // A field selector filters, as kube's predicate does.
    let r = send(
        &s,
        "GET",
        "/api/v1/componentstatuses?fieldSelector=metadata.name%3Detcd-9",
        None,
    )
    .await;
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(list["items"], json!([]), "{list}");

    // kube's plain error for a name it does not probe is a 500.
    let st = status(&s, "GET", "/api/v1/componentstatuses/etcd-1", 500).await;
    assert_eq!(st["message"], "Component not found: etcd-1");
    status(&s, "POST", "/api/v1/componentstatuses", 405).await;
    status(&s, "DELETE", "/api/v1/componentstatuses/etcd-0", 405).await;
    let st = status(&s, "GET", "/api/v1/componentstatuses?watch=true", 405).await;
    assert_eq!(
        st["message"],
        "watch is not supported on resources of kind \"componentstatuses\""
    );
}

#[tokio::test]
async fn pod_connections_check_what_kube_checks() {
    let s = Server::start().await;
    s.kubectl_ok(&["run", "web", "--image=nginx:1.27"]);

    // Not scheduled: no log yet (kube's 204), and exec/attach/port-forward
    // are refused in kube's words.
    let out = s.kubectl(&["logs", "web"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let r = send(&s, "GET", "/api/v1/namespaces/default/pods/web/log", None).await;
    assert_eq!(r.status, 204, "{}", r.text());
    let out = s.kubectl(&["exec", "web", "--", "ls"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("pod web does not have a host assigned"),
        "{}",
        stderr(&out)
    );
    for sub in ["exec?command=ls", "attach", "portforward?ports=80"] {
        let path = format!("/api/v1/namespaces/default/pods/web/{sub}");
        let st = status(&s, "POST", &path, 400).await;
        assert_eq!(st["message"], "pod web does not have a host assigned");
    }

    // Bad options and containers, before anything else.
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?tailLines=-1&limitBytes=0",
        422,
    )
    .await;
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(
        st["message"],
        "PodLogOptions \"web\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]"
    );
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?tailLines=x",
        400,
    )
    .await;
    assert_eq!(
        st["message"],
        "strconv.ParseInt: parsing \"x\": invalid syntax"
    );
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?container=db",
        400,
    )
    .await;
    assert_eq!(st["message"], "container db is not valid for pod web");
    let st = status(&s, "GET", "/api/v1/namespaces/default/pods/nope/exec", 404).await;
    assert_eq!(st["message"], "pods \"nope\" not found");
    status(&s, "PUT", "/api/v1/namespaces/default/pods/web/exec", 405).await;
    status(&s, "POST", "/api/v1/namespaces/default/pods/web/log", 405).await;
    // Only proxies take a trailing path.
    status(&s, "GET", "/api/v1/namespaces/default/pods/web/exec/x", 404).await;

    // Bound to a node that is not there: kube's node lookup fails first.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
        "target": {"kind": "Node", "name": "n1"}});
    let r = send(
        &s,
        "POST",
        "/api/v1/namespaces/default/pods/web/binding",
        Some(&binding),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let st = status(&s, "GET", "/api/v1/namespaces/default/pods/web/log", 404).await;
    assert_eq!(st["message"], "nodes \"n1\" not found");

    // With the node: the kubelet connection is what this server lacks.
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let r = send(&s, "POST", "/api/v1/nodes", Some(&node)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let out = s.kubectl(&["logs", "web"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("ServiceUnavailable") && err.contains("runs without kubelets"),
        "{err}"
    );
    let out = s.kubectl(&["exec", "web", "--", "ls"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("runs without kubelets"),
        "{}",
        stderr(&out)
    );
    let st = status(
        &s,
        "POST",
        "/api/v1/namespaces/default/pods/web/attach",
        503,
    )
    .await;
    assert_eq!(st["reason"], "ServiceUnavailable");
    assert_eq!(
        st["message"],
        "cannot attach to container \"web\" in pod \"web\" on node \"n1\": this API server runs without kubelets and has no route into the cluster network"
    );
}

#[tokio::test]
async fn proxies_check_their_targets() {
    let s = Server::start().await;
    s.kubectl_ok(&["run", "web", "--image=nginx:1.27", "--port=8080"]);
    // No pod IP yet: kube will not proxy to it.
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/web/proxy/healthz",
        400,
    )
    .await;
    assert_eq!(st["message"], "address not allowed");
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/ftp:web:21/proxy",
        400,
    )
    .await;
    assert_eq!(st["message"], "invalid pod request \"ftp:web:21\"");
    let mut pod = s.get_json(&["pod", "web"]);
    pod["status"]["podIP"] = json!("10.244.0.7");
    pod["status"]["podIPs"] = json!([{"ip": "10.244.0.7"}]);
    let r = send(
        &s,
        "PUT",
        "/api/v1/namespaces/default/pods/web/status",
        Some(&pod),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let st = status(
            &s,
            method,
            "/api/v1/namespaces/default/pods/web/proxy/a/b",
            503,
        )
        .await;
        assert_eq!(
            st["message"],
            "cannot proxy to pod \"web\" at 10.244.0.7:8080: this API server runs without kubelets and has no route into the cluster network"
        );
    }
    let out = s.kubectl(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods/web:9090/proxy/",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("10.244.0.7:9090"), "{}", stderr(&out));

    // Nodes: the node must exist; then its kubelet is out of reach.
    let st = status(&s, "GET", "/api/v1/nodes/n1/proxy/stats/summary", 404).await;
    assert_eq!(st["message"], "nodes \"n1\" not found");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    send(&s, "POST", "/api/v1/nodes", Some(&node)).await;
    let st = status(&s, "GET", "/api/v1/nodes/n1/proxy/configz", 503).await;
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot proxy to the kubelet of node \"n1\""),
        "{st}"
    );

    // Services: kube's port and endpoint checks, then the same 503.
    s.kubectl_ok(&["create", "service", "clusterip", "api", "--tcp=80:8080"]);
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/services/api:81/proxy/",
        503,
    )
    .await;
    assert_eq!(
        st["message"],
        "no service port 81 found for service \"api\""
    );
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/services/api/proxy/",
        404,
    )
    .await;
    assert_eq!(st["message"], "endpoints \"api\" not found");
    let eps = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "api"}});
    send(
        &s,
        "POST",
        "/api/v1/namespaces/default/endpoints",
        Some(&eps),
    )
    .await;
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/services/api/proxy/",
        503,
    )
    .await;
    assert_eq!(st["message"], "no endpoints available for service \"api\"");
    let eps = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "api"},
        "subsets": [{"addresses": [{"ip": "10.244.0.9"}],
                     "ports": [{"name": "80-8080", "port": 8080, "protocol": "TCP"}]}]});
    let r = send(
        &s,
        "PUT",
        "/api/v1/namespaces/default/endpoints/api",
        Some(&eps),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let st = status(
        &s,
        "GET",
        "/api/v1/namespaces/default/services/api:80/proxy/x",
        503,
    )
    .await;
    assert_eq!(
        st["message"],
        "cannot proxy to service \"api\" at endpoint 10.244.0.9:8080: this API server runs without kubelets and has no route into the cluster network"
    );
}

//! Built-in kinds behave like kube's (issue 12): defaults, the strategies'
//! status, semantic validation with kube's messages, and kube's Table
//! columns, seen through kubectl, raw HTTP and the Python client.

use e2e::{stdout, Server};
use serde_json::{json, Value};

/// The header and rows of `kubectl get` output, split on runs of spaces
/// (kube's column names contain single spaces: `NOMINATED NODE`).
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn kubectl_sees_kube_defaults_and_columns() {
    let s = Server::start().await;

    s.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
    let d = s.get_json(&["deployment", "web"]);
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1, "{d}");
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always", "{pod}");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["securityContext"], json!({}));
    let c = &pod["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log", "{c}");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["imagePullPolicy"], "Always", "no tag means :latest");

    let described = s.kubectl_ok(&["describe", "deployment", "web"]);
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("StrategyType:") && l.trim_end().ends_with("RollingUpdate")),
        "{described}"
    );
    assert!(
        described.contains("RollingUpdateStrategy:  25% max unavailable, 25% max surge"),
        "{described}"
    );

    let t = table(&s.kubectl_ok(&["get", "deployments"]));
    assert_eq!(
        t[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{t:?}"
    );
    assert_eq!(t[1][..4], ["web", "0/1", "0", "0"], "{t:?}");

    // A Pod: Pending with its QoS class, the default service account, and
    // kube's pod columns.
    s.kubectl_ok(&["run", "one", "--image=nginx:1.27"]);
    let p = s.get_json(&["pod", "one"]);
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    assert_eq!(p["status"]["qosClass"], "BestEffort");
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    assert_eq!(
        p["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let t = table(&s.kubectl_ok(&["get", "pods"]));
    assert_eq!(
        t[0],
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{t:?}"
    );
    assert_eq!(t[1][..4], ["one", "0/1", "Pending", "0"], "{t:?}");
    let t = table(&s.kubectl_ok(&["get", "pods", "-o", "wide"]));
    assert_eq!(
        t[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ],
        "{t:?}"
    );

    // kubectl expose: a Service with an allocated ClusterIP, kube's columns.
    s.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
    ]);
    let svc = s.get_json(&["service", "web"]);
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .expect("clusterIP")
        .to_string();
    assert_eq!(svc["spec"]["sessionAffinity"], "None", "{svc}");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["internalTrafficPolicy"], "Cluster");
    assert_eq!(svc["status"], json!({"loadBalancer": {}}));
    let t = table(&s.kubectl_ok(&["get", "service", "web"]));
    assert_eq!(
        t[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{t:?}"
    );
    assert_eq!(
        t[1][..5],
        ["web", "ClusterIP", ip.as_str(), "<none>", "80/TCP"],
        "{t:?}"
    );

    let t = table(&s.kubectl_ok(&["get", "namespace", "default"]));
    assert_eq!(t[0], ["NAME", "STATUS", "AGE"], "{t:?}");
    assert_eq!(t[1][..2], ["default", "Active"]);
    s.kubectl_ok(&[
        "create",
        "configmap",
        "two",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let t = table(&s.kubectl_ok(&["get", "configmap", "two"]));
    assert_eq!(t[0], ["NAME", "DATA", "AGE"], "{t:?}");
    assert_eq!(t[1][..2], ["two", "2"]);
    s.kubectl_ok(&["create", "secret", "generic", "s", "--from-literal=a=1"]);
    let t = table(&s.kubectl_ok(&["get", "secret", "s"]));
    assert_eq!(t[0], ["NAME", "TYPE", "DATA", "AGE"], "{t:?}");
    assert_eq!(t[1][..3], ["s", "Opaque", "1"]);
}

#[tokio::test]
async fn defaults_never_override_what_the_client_set() {
    let s = Server::start().await;
    let manifest = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: custom}
spec:
  replicas: 0
  revisionHistoryLimit: 3
  strategy: {type: Recreate}
  selector: {matchLabels: {app: custom}}
  template:
    metadata: {labels: {app: custom}}
    spec:
      restartPolicy: Always
      dnsPolicy: Default
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: nginx:latest
        imagePullPolicy: Never
"#;
    s.kubectl_stdin_ok(&["apply", "--server-side", "-f", "-"], manifest);
    let d = s.get_json(&["deployment", "custom"]);
    assert_eq!(d["spec"]["replicas"], 0, "{d}");
    assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["dnsPolicy"], "Default");
    assert_eq!(pod["terminationGracePeriodSeconds"], 5);
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "Never");
    // Applying the same manifest again changes nothing: the defaults are
    // stable, so a GitOps loop sees no drift.
    let before = d["metadata"]["resourceVersion"].clone();
    s.kubectl_stdin_ok(&["apply", "--server-side", "-f", "-"], manifest);
    let again = s.get_json(&["deployment", "custom"]);
    assert_eq!(again["metadata"]["resourceVersion"], before, "{again}");
}

#[tokio::test]
async fn invalid_objects_are_refused_with_kube_messages() {
    let s = Server::start().await;

    // A Deployment whose selector does not match its template.
    let bad_deploy = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: b}}
    spec:
      containers: [{name: c, image: nginx}]
"#;
    let out = s.kubectl_stdin(&["create", "-f", "-"], bad_deploy);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"The Deployment "bad" is invalid: spec.template.metadata.labels: Invalid value: {"app":"b"}: `selector` does not match template `labels`"#),
        "{err}"
    );

    // A Pod with a bad container name and no image: 422, one cause each.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "Bad Name"}]}});
    let r = s
        .http(
            "POST",
            "/api/v1/namespaces/default/pods",
            &[("Content-Type", "application/json")],
            pod.to_string().as_bytes(),
        )
        .await
        .unwrap();
    let st: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    let causes = st["details"]["causes"].as_array().expect("causes");
    let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    assert!(fields.contains(&"spec.containers[0].name"), "{st}");
    assert!(fields.contains(&"spec.containers[0].image"), "{st}");
    let msg = st["message"].as_str().unwrap();
    assert!(msg.contains(r#"spec.containers[0].name: Invalid value: "Bad Name": a lowercase RFC 1123 label must consist of"#), "{msg}");
    assert!(
        msg.contains("spec.containers[0].image: Required value"),
        "{msg}"
    );

    // A Service on port 70000.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "big"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 70000}]}});
    let r = s
        .http(
            "POST",
            "/api/v1/namespaces/default/services",
            &[("Content-Type", "application/json")],
            svc.to_string().as_bytes(),
        )
        .await
        .unwrap();
    let st: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 422, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains(
            "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
        ),
        "{st}"
    );

    // Nothing refused was stored.
    for (kind, name) in [("deployment", "bad"), ("pod", "p"), ("service", "big")] {
        let (code, err) = s.kubectl_err(&["get", kind, name]);
        assert_eq!(code, 1, "{kind}/{name}: {err}");
    }

    // A Deployment's selector cannot change.
    s.kubectl_ok(&["create", "deployment", "fixed", "--image=nginx"]);
    let out = s.kubectl(&[
        "patch",
        "deployment",
        "fixed",
        "--type=merge",
        "-p",
        r#"{"spec":{"selector":{"matchLabels":{"app":"other"}},"template":{"metadata":{"labels":{"app":"other"}}}}}"#,
    ]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.selector: Invalid value:"), "{err}");
    assert!(err.contains("field is immutable"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_sees_defaults_and_422s() {
    let server = Server::start().await;
    e2e::run_python_client(&server, "builtin_python.py");
}

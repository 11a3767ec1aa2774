//! kubectl's write paths against the real server: create (manifests and
//! imperative), apply, replace, patch (json, merge, strategic), label,
//! annotate, scale, delete (plain, with a finalizer), server-side dry run and
//! field validation. Every outcome is read back with `get -o json`.

use e2e::{eventually, stderr, stdout, Server};
use serde_json::{json, Value};
use std::time::Duration;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports:
        - containerPort: 80
"#;

/// A ConfigMap manifest in the default namespace.
fn configmap(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata: {data}\n")
}

/// The error kubectl prints when the object does not exist (after a delete).
fn assert_gone(s: &Server, args: &[&str], what: &str) {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    let (code, err) = s.kubectl_err(&a);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("(NotFound): {what} not found")),
        "{err}"
    );
}

#[tokio::test]
async fn create_from_manifests() {
    let s = Server::start().await;

    let out = s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &configmap("settings", "{color: blue, size: \"3\"}"),
    );
    assert_eq!(out.trim(), "configmap/settings created");
    let cm = s.get_json(&["configmap", "settings"]);
    assert_eq!(cm["data"], json!({"color": "blue", "size": "3"}), "{cm}");
    assert_eq!(cm["metadata"]["namespace"], "default");

    let out = s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);
    assert_eq!(out.trim(), "deployment.apps/web created");
    let d = s.get_json(&["deployment", "web"]);
    assert_eq!(d["apiVersion"], "apps/v1", "{d}");
    assert_eq!(d["kind"], "Deployment");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    assert_eq!(d["metadata"]["generation"], 1, "{d}");

    let out = s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels: {owner: me}\n",
    );
    assert_eq!(out.trim(), "namespace/team-a created");
    let ns = s.get_json(&["namespace", "team-a"]);
    assert_eq!(ns["metadata"]["labels"]["owner"], "me", "{ns}");
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    assert!(ns["metadata"].get("namespace").is_none(), "{ns}");

    // Objects go into the new namespace.
    let out = s.kubectl_stdin_ok(
        &["create", "-n", "team-a", "-f", "-"],
        &configmap("inside", "{a: b}"),
    );
    assert_eq!(out.trim(), "configmap/inside created");
    let cm = s.get_json(&["configmap", "inside", "-n", "team-a"]);
    assert_eq!(cm["metadata"]["namespace"], "team-a");

    // A second create of the same name conflicts.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &configmap("settings", "{color: red}"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"Error from server (AlreadyExists): error when creating "STDIN": configmaps "settings" already exists"#
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        s.get_json(&["configmap", "settings"])["data"]["color"],
        "blue"
    );
}

// kubectl's typed clients send protobuf bodies.
#[tokio::test]
async fn create_imperative_configmap() {
    let s = Server::start().await;
    let out = s.kubectl(&[
        "create",
        "configmap",
        "lit",
        "--from-literal=a=1",
        "--from-literal=b=two",
    ]);
    assert!(out.status.success(), "{}\nlog:\n{}", stderr(&out), s.log());
    assert_eq!(stdout(&out).trim(), "configmap/lit created");
    let cm = s.get_json(&["configmap", "lit"]);
    assert_eq!(cm["data"], json!({"a": "1", "b": "two"}), "{cm}");
}

// kubectl's typed clients send protobuf bodies.
#[tokio::test]
async fn create_imperative_deployment() {
    let s = Server::start().await;
    let out = s.kubectl(&[
        "create",
        "deployment",
        "dep",
        "--image=nginx:1.25",
        "--replicas=2",
    ]);
    assert!(out.status.success(), "{}\nlog:\n{}", stderr(&out), s.log());
    assert_eq!(stdout(&out).trim(), "deployment.apps/dep created");
    let d = s.get_json(&["deployment", "dep"]);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"], json!({"app": "dep"}));
    assert_eq!(d["metadata"]["labels"], json!({"app": "dep"}));
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1), "{d}");
    assert_eq!(containers[0]["image"], "nginx:1.25");
    assert_eq!(containers[0]["name"], "nginx");
}

#[tokio::test]
async fn apply_twice_then_unchanged() {
    let s = Server::start().await;
    let out = s.kubectl_stdin_ok(&["apply", "-f", "-"], DEPLOYMENT);
    assert_eq!(out.trim(), "deployment.apps/web created");
    let first = s.get_json(&["deployment", "web"]);
    let last_applied = |d: &Value| -> Value {
        let text = d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_else(|| panic!("no last-applied annotation: {d}"))
            .to_string();
        serde_json::from_str(&text).expect("last-applied is JSON")
    };
    assert_eq!(last_applied(&first)["spec"]["replicas"], 1);

    let changed = DEPLOYMENT
        .replace("replicas: 1", "replicas: 3")
        .replace("nginx:1.25", "nginx:1.27");
    let out = s.kubectl_stdin_ok(&["apply", "-f", "-"], &changed);
    assert_eq!(out.trim(), "deployment.apps/web configured");
    let d = s.get_json(&["deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(containers.len(), 1, "{d}");
    assert_eq!(containers[0]["image"], "nginx:1.27");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    let applied = last_applied(&d);
    assert_eq!(applied["spec"]["replicas"], 3, "{applied}");
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(d["metadata"]["generation"], 2, "{d}");
    assert_eq!(d["metadata"]["uid"], first["metadata"]["uid"]);

    let out = s.kubectl_stdin_ok(&["apply", "-f", "-"], &changed);
    assert_eq!(out.trim(), "deployment.apps/web unchanged");

    // Removing a field from the manifest removes it from the object.
    let without_ports = changed.replace("        ports:\n        - containerPort: 80\n", "");
    let out = s.kubectl_stdin_ok(&["apply", "-f", "-"], &without_ports);
    assert_eq!(out.trim(), "deployment.apps/web configured");
    let d = s.get_json(&["deployment", "web"]);
    assert!(
        d["spec"]["template"]["spec"]["containers"][0]
            .get("ports")
            .is_none(),
        "{d}"
    );
}

#[tokio::test]
async fn replace_with_stale_resource_version_conflicts() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("cfg", "{v: \"1\"}"));
    let stale = s.get_json(&["configmap", "cfg"]);

    // A fresh replace works and bumps the resourceVersion.
    let mut fresh = stale.clone();
    fresh["data"]["v"] = json!("2");
    let out = s.kubectl_stdin_ok(&["replace", "-f", "-"], &fresh.to_string());
    assert_eq!(out.trim(), "configmap/cfg replaced");
    let now = s.get_json(&["configmap", "cfg"]);
    assert_eq!(now["data"]["v"], "2");
    assert_ne!(
        now["metadata"]["resourceVersion"],
        stale["metadata"]["resourceVersion"]
    );

    // Replaying the old resourceVersion is a conflict.
    let mut old = stale.clone();
    old["data"]["v"] = json!("3");
    let out = s.kubectl_stdin(&["replace", "-f", "-"], &old.to_string());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stderr(&out).trim(),
        r#"Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on configmaps "cfg": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_eq!(s.get_json(&["configmap", "cfg"])["data"]["v"], "2");
}

#[tokio::test]
async fn patch_json() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("p", "{k1: v1}"));
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "p",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/k2","value":"v2"},{"op":"remove","path":"/data/k1"}]"#,
    ]);
    assert_eq!(out.trim(), "configmap/p patched");
    let cm = s.get_json(&["configmap", "p"]);
    assert_eq!(cm["data"], json!({"k2": "v2"}), "{cm}");

    // Paths reach into metadata too.
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "p",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"replace","path":"/data/k2","value":"v3"}]"#,
    ]);
    assert_eq!(out.trim(), "configmap/p patched");
    let cm = s.get_json(&["configmap", "p"]);
    assert_eq!(cm["metadata"]["labels"], json!({"a": "b"}), "{cm}");
    assert_eq!(cm["data"], json!({"k2": "v3"}), "{cm}");
}

/// A JSON patch whose `test` operation fails is rejected whole: 422 Invalid,
/// with the patch library's error as the cause kubectl prints.
#[tokio::test]
async fn patch_json_failed_test_op() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("p", "{k2: v2}"));
    let (code, err) = s.kubectl_err(&[
        "patch",
        "configmap",
        "p",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/data/k2","value":"other"},{"op":"remove","path":"/data/k2"}]"#,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("The request is invalid"), "{err}");
    assert_eq!(s.get_json(&["configmap", "p"])["data"], json!({"k2": "v2"}));
    // kube-apiserver: details.causes = [{reason: UnexpectedServerResponse,
    // message: "testing value /data/k2 failed: test failed"}].
    assert!(err.contains("test failed"), "{err}");
}

#[tokio::test]
async fn patch_merge() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("p", "{k2: v2}"));
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "p",
        "--type=merge",
        "-p",
        r#"{"data":{"k3":"v3","k2":null}}"#,
    ]);
    assert_eq!(out.trim(), "configmap/p patched");
    assert_eq!(s.get_json(&["configmap", "p"])["data"], json!({"k3": "v3"}));

    // A patch that changes nothing says so (the object comes back as it
    // was, resourceVersion included).
    let before = s.get_json(&["configmap", "p"]);
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "p",
        "--type=merge",
        "-p",
        r#"{"data":{"k3":"v3"}}"#,
    ]);
    assert_eq!(out.trim(), "configmap/p patched (no change)");
    assert_eq!(s.get_json(&["configmap", "p"]), before);

    // A merge patch replaces lists whole.
    s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);
    let out = s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"busybox:1.36"}]}}}}"#,
    ]);
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let d = s.get_json(&["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"],
        json!([{"name": "only", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}]),
        "{d}"
    );
    assert_eq!(d["metadata"]["generation"], 2, "{d}");
}

#[tokio::test]
async fn patch_strategic() {
    let s = Server::start().await;
    // Containers merge by name instead of being replaced.
    s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);
    let out = s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}"#,
    ]);
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let d = s.get_json(&["deployment", "web"]);
    let containers = d["spec"]["template"]["spec"]["containers"].clone();
    let names: Vec<&str> = containers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // Without $setElementOrder, kube-apiserver puts the patch's new items
    // before the items only the server had.
    assert_eq!(names, ["sidecar", "web"], "{d}");
    assert_eq!(containers[1]["image"], "nginx:1.25");
    assert_eq!(containers[1]["ports"][0]["containerPort"], 80);
    assert_eq!(d["metadata"]["generation"], 2, "{d}");

    // Strategic merge is the default type; $patch: delete removes one entry.
    let out = s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}"#,
    ]);
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let d = s.get_json(&["deployment", "web"]);
    let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["web"], "{d}");
}

#[tokio::test]
async fn label_annotate_and_scale() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("meta", "{a: b}"));

    let out = s.kubectl_ok(&["label", "configmap", "meta", "tier=backend", "env=prod"]);
    assert_eq!(out.trim(), "configmap/meta labeled");
    let cm = s.get_json(&["configmap", "meta"]);
    assert_eq!(
        cm["metadata"]["labels"],
        json!({"tier": "backend", "env": "prod"}),
        "{cm}"
    );
    let selected = s.kubectl_ok(&["get", "cm", "-l", "tier=backend", "-o", "name"]);
    assert_eq!(selected.trim(), "configmap/meta");

    let out = s.kubectl_ok(&["label", "configmap", "meta", "tier=frontend", "--overwrite"]);
    assert_eq!(out.trim(), "configmap/meta labeled");
    let out = s.kubectl_ok(&["label", "configmap", "meta", "env-"]);
    assert_eq!(out.trim(), "configmap/meta unlabeled");
    let cm = s.get_json(&["configmap", "meta"]);
    assert_eq!(
        cm["metadata"]["labels"],
        json!({"tier": "frontend"}),
        "{cm}"
    );

    let out = s.kubectl_ok(&["annotate", "configmap", "meta", "note=hello world"]);
    assert_eq!(out.trim(), "configmap/meta annotated");
    let cm = s.get_json(&["configmap", "meta"]);
    assert_eq!(cm["metadata"]["annotations"]["note"], "hello world", "{cm}");
    let out = s.kubectl_ok(&["annotate", "configmap", "meta", "note-"]);
    assert_eq!(out.trim(), "configmap/meta annotated");
    let cm = s.get_json(&["configmap", "meta"]);
    assert!(
        cm["metadata"]
            .get("annotations")
            .and_then(|a| a.get("note"))
            .is_none(),
        "{cm}"
    );

    s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);
    let out = s.kubectl_ok(&["scale", "deployment", "web", "--replicas=4"]);
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let d = s.get_json(&["deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 4, "{d}");
    let scale: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
    ]))
    .expect("scale json");
    assert_eq!(scale["kind"], "Scale", "{scale}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1", "{scale}");
    assert_eq!(scale["spec"]["replicas"], 4, "{scale}");

    // --current-replicas is a precondition.
    let (code, err) = s.kubectl_err(&[
        "scale",
        "deployment",
        "web",
        "--current-replicas=2",
        "--replicas=5",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Expected replicas to be 2, was 4"), "{err}");
    assert_eq!(s.get_json(&["deployment", "web"])["spec"]["replicas"], 4);
}

#[tokio::test]
async fn delete_and_finalizers() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("gone", "{a: b}"));
    let out = s.kubectl_ok(&["delete", "configmap", "gone"]);
    assert_eq!(out.trim(), r#"configmap "gone" deleted"#);
    assert_gone(&s, &["configmap", "gone"], r#"configmaps "gone""#);
    let (code, err) = s.kubectl_err(&["delete", "configmap", "gone"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(r#"Error from server (NotFound): configmaps "gone" not found"#),
        "{err}"
    );

    // An object with a finalizer stays, marked for deletion.
    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\ndata: {a: b}\n";
    s.kubectl_stdin_ok(&["create", "-f", "-"], held);
    let out = s.kubectl_ok(&["delete", "configmap", "held", "--wait=false"]);
    assert_eq!(out.trim(), r#"configmap "held" deleted"#);
    let cm = s.get_json(&["configmap", "held"]);
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm}");
    assert_eq!(cm["metadata"]["deletionGracePeriodSeconds"], 0, "{cm}");
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["example.com/hold"]),
        "{cm}"
    );
    // Deleting again keeps the first deletionTimestamp.
    s.kubectl_ok(&["delete", "configmap", "held", "--wait=false"]);
    let again = s.get_json(&["configmap", "held"]);
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        cm["metadata"]["deletionTimestamp"]
    );

    // Removing the last finalizer completes the deletion.
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert_eq!(out.trim(), "configmap/held patched");
    eventually(
        "held to be gone after its finalizer was removed",
        Duration::from_secs(10),
        || {
            let out = s.kubectl(&["get", "configmap", "held"]);
            (!out.status.success() && stderr(&out).contains("NotFound")).then_some(())
        },
    )
    .await;

    // Deleting a namespace removes what it holds.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: doomed\n",
    );
    s.kubectl_stdin_ok(
        &["create", "-n", "doomed", "-f", "-"],
        &configmap("inside", "{a: b}"),
    );
    let out = s.kubectl_ok(&["delete", "namespace", "doomed"]);
    assert_eq!(out.trim(), r#"namespace "doomed" deleted"#);
    assert_gone(&s, &["namespace", "doomed"], r#"namespaces "doomed""#);
    // (kubectl reports the missing namespace for a get inside it, so list.)
    let all = s.get_json(&["configmaps", "--all-namespaces"]);
    let left: Vec<&Value> = all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["metadata"]["namespace"] == "doomed")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn server_dry_run_changes_nothing() {
    let s = Server::start().await;
    let out = s.kubectl_stdin_ok(
        &["create", "--dry-run=server", "-f", "-"],
        &configmap("dry", "{a: b}"),
    );
    assert_eq!(out.trim(), "configmap/dry created (server dry run)");
    assert_gone(&s, &["configmap", "dry"], r#"configmaps "dry""#);

    // The dry-run answer is the object as it would be stored.
    let out = s.kubectl_stdin_ok(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        &configmap("dry", "{a: b}"),
    );
    let would: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(would["data"]["a"], "b", "{would}");
    assert!(would["metadata"]["uid"].is_string(), "{would}");
    assert!(
        would["metadata"]["creationTimestamp"].is_string(),
        "{would}"
    );
    assert_gone(&s, &["configmap", "dry"], r#"configmaps "dry""#);

    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("kept", "{a: b}"));
    let before = s.get_json(&["configmap", "kept"]);
    let out = s.kubectl_ok(&["delete", "configmap", "kept", "--dry-run=server"]);
    assert_eq!(out.trim(), r#"configmap "kept" deleted (server dry run)"#);
    let after = s.get_json(&["configmap", "kept"]);
    assert_eq!(after, before);

    // Dry-run patch and label leave the object alone too.
    s.kubectl_ok(&["label", "configmap", "kept", "x=y", "--dry-run=server"]);
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "kept",
        "--dry-run=server",
        "-p",
        r#"{"data":{"a":"changed"}}"#,
    ]);
    assert_eq!(s.get_json(&["configmap", "kept"]), before);
}

const UNKNOWN_FIELD: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\ndata: {a: b}\nbogusField: 1\n";

#[tokio::test]
async fn validate_strict_rejects_unknown_fields() {
    let s = Server::start().await;
    let out = s.kubectl_stdin(&["create", "--validate=strict", "-f", "-"], UNKNOWN_FIELD);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    // kube-apiserver: BadRequest ... strict decoding error: unknown field "bogusField"
    assert!(err.contains(r#"unknown field "bogusField""#), "{err}");
    assert!(err.contains("strict decoding error"), "{err}");
    assert!(err.contains("Error from server (BadRequest)"), "{err}");
    assert_gone(&s, &["configmap", "strict"], r#"configmaps "strict""#);

    // Nested unknown fields are named by their path.
    let nested = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\n  bogusMeta: x\n";
    let out = s.kubectl_stdin(&["create", "--validate=strict", "-f", "-"], nested);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(r#"unknown field "metadata.bogusMeta""#),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn validate_warn_creates_with_a_warning() {
    let s = Server::start().await;
    let out = s.kubectl_stdin(&["create", "--validate=warn", "-f", "-"], UNKNOWN_FIELD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "configmap/strict created");
    assert!(
        stderr(&out).contains(r#"Warning: unknown field "bogusField""#),
        "{}",
        stderr(&out)
    );
    let cm = s.get_json(&["configmap", "strict"]);
    assert_eq!(cm["data"]["a"], "b");
    assert!(cm.get("bogusField").is_none(), "{cm}");

    // --validate=false (Ignore): no warning, created.
    let other = UNKNOWN_FIELD.replace("name: strict", "name: ignored");
    let out = s.kubectl_stdin(&["create", "--validate=false", "-f", "-"], &other);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
    assert!(s
        .get_json(&["configmap", "ignored"])
        .get("bogusField")
        .is_none());
}

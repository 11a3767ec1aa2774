//! Server-side apply end to end: `kubectl apply --server-side` creating,
//! changing and pruning an object, conflicts between field managers and
//! `--force-conflicts`, the replicas hand-over of the spec, the upgrade from
//! client-side apply, applies to `/status`, and the HTTP answers (201 on
//! create, 409 with one cause per field, 400s) read as raw responses.

use e2e::{stderr, stdout, Server};
use serde_json::{json, Value};

/// The spec's nginx Deployment, with a label, an env var and a port.
fn deployment(replicas: Option<u32>, image: &str, extra_label: bool) -> String {
    let replicas = replicas
        .map(|r| format!("  replicas: {r}\n"))
        .unwrap_or_default();
    let tier = if extra_label { "\n    tier: web" } else { "" };
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx{tier}
spec:
{replicas}  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: {image}
        ports:
        - containerPort: 80
        env:
        - name: MODE
          value: fast
"#
    )
}

const REPLICAS_ONLY: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
spec:
  replicas: 3
"#;

fn get_deploy(s: &Server) -> Value {
    s.get_json(&["deployment", "nginx-deployment", "--show-managed-fields"])
}

/// The managedFields entry of `manager` with `operation`.
fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn owns_replicas(obj: &Value, manager: &str, operation: &str) -> bool {
    entry(obj, manager, operation)
        .is_some_and(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
}

fn apply_ok(s: &Server, extra: &[&str], manifest: &str) -> String {
    let mut args = vec!["apply", "--server-side", "-f", "-"];
    args.extend_from_slice(extra);
    s.kubectl_stdin_ok(&args, manifest)
}

#[tokio::test]
async fn apply_creates_changes_and_prunes() {
    let s = Server::start().await;

    let out = apply_ok(&s, &[], &deployment(Some(2), "nginx:1.14.2", true));
    assert_eq!(
        out.trim(),
        "deployment.apps/nginx-deployment serverside-applied"
    );
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 2);
    let e = entry(&d, "kubectl", "Apply").expect("kubectl entry");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].is_string(), "{e}");
    let container =
        &e["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"];
    assert_eq!(
        container["f:ports"],
        json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}),
        "{e}"
    );
    assert_eq!(
        container["f:env"],
        json!({"k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}}})
    );
    assert_eq!(
        d["metadata"]["managedFields"].as_array().map(Vec::len),
        Some(1)
    );
    let rv1 = d["metadata"]["resourceVersion"].clone();

    // The same configuration again changes nothing, not even the version.
    let out = apply_ok(&s, &[], &deployment(Some(2), "nginx:1.14.2", true));
    assert_eq!(
        out.trim(),
        "deployment.apps/nginx-deployment serverside-applied"
    );
    assert_eq!(get_deploy(&s)["metadata"]["resourceVersion"], rv1);

    // A change.
    apply_ok(&s, &[], &deployment(Some(2), "nginx:1.16.1", true));
    let d = get_deploy(&s);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.16.1"
    );
    assert_ne!(d["metadata"]["resourceVersion"], rv1);
    assert_eq!(d["metadata"]["generation"], 2);

    // Fields left out of the configuration go: a label, and replicas
    // (which kube's defaulting then sets back to 1, as it does there).
    apply_ok(&s, &[], &deployment(None, "nginx:1.16.1", false));
    let d = get_deploy(&s);
    assert_eq!(d["metadata"]["labels"], json!({"app": "nginx"}), "{d}");
    assert_eq!(d["spec"]["replicas"], 1, "{d}");
    assert!(!owns_replicas(&d, "kubectl", "Apply"));
}

#[tokio::test]
async fn conflicting_managers_and_force() {
    let s = Server::start().await;
    apply_ok(&s, &[], &deployment(Some(2), "nginx:1.14.2", false));

    let other = REPLICAS_ONLY.replace("replicas: 3", "replicas: 5");
    let out = s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        &other,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{err}"
    );
    assert_eq!(get_deploy(&s)["spec"]["replicas"], 2);

    apply_ok(&s, &["--field-manager=other", "--force-conflicts"], &other);
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 5);
    assert!(owns_replicas(&d, "other", "Apply"));
    assert!(!owns_replicas(&d, "kubectl", "Apply"));
    assert!(
        entry(&d, "kubectl", "Apply").is_some(),
        "kubectl keeps its other fields"
    );

    // The same value from a second applier is shared, not a conflict.
    let same = REPLICAS_ONLY.replace("replicas: 3", "replicas: 5");
    apply_ok(&s, &["--field-manager=third"], &same);
    let d = get_deploy(&s);
    assert!(owns_replicas(&d, "other", "Apply") && owns_replicas(&d, "third", "Apply"));
}

#[tokio::test]
async fn replicas_handover_from_the_spec() {
    let s = Server::start().await;
    // The user creates the Deployment with replicas.
    apply_ok(&s, &[], &deployment(Some(3), "nginx:1.14.2", false));
    // A private manager takes shared ownership of replicas.
    apply_ok(
        &s,
        &["--field-manager=handover-to-hpa", "--validate=false"],
        REPLICAS_ONLY,
    );
    let d = get_deploy(&s);
    assert!(owns_replicas(&d, "kubectl", "Apply") && owns_replicas(&d, "handover-to-hpa", "Apply"));
    // The user drops replicas from the manifest: the value stays.
    apply_ok(&s, &[], &deployment(None, "nginx:1.14.2", false));
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 3);
    assert!(!owns_replicas(&d, "kubectl", "Apply"));
    // The controller sets replicas: the hand-over manager is gone.
    s.kubectl_ok(&["scale", "deployment/nginx-deployment", "--replicas=7"]);
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 7);
    assert!(entry(&d, "handover-to-hpa", "Apply").is_none(), "{d}");
    // And the user's next apply does not touch it.
    apply_ok(&s, &[], &deployment(None, "nginx:1.14.2", false));
    assert_eq!(get_deploy(&s)["spec"]["replicas"], 7);
}

#[tokio::test]
async fn server_side_apply_after_client_side_apply() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &deployment(Some(2), "nginx:1.14.2", false),
    );
    let d = get_deploy(&s);
    assert!(
        entry(&d, "kubectl-client-side-apply", "Update").is_some(),
        "{d}"
    );

    // A changed manifest applied server-side: no conflict with the
    // client-side apply manager.
    apply_ok(&s, &[], &deployment(Some(3), "nginx:1.16.1", false));
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 3);
    assert!(owns_replicas(&d, "kubectl", "Apply"));
    assert!(!owns_replicas(&d, "kubectl-client-side-apply", "Update"));
    // The last-applied annotation follows the applied configuration.
    let last: Value = serde_json::from_str(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("annotation"),
    )
    .expect("json");
    assert_eq!(last["spec"]["replicas"], 3);

    // Another manager does not get that pass.
    let other = REPLICAS_ONLY.replace("replicas: 3", "replicas: 4");
    let out = s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=mine", "-f", "-"],
        &other,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"conflict with "kubectl": .spec.replicas"#),
        "{err}"
    );
}

const APPLY: (&str, &str) = ("Content-Type", "application/apply-patch+yaml");
const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/default/deployments/web";

fn json_body(r: &e2e::HttpResponse) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

#[tokio::test]
async fn apply_over_http() {
    let s = Server::start().await;
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    })
    .to_string();

    // fieldManager is required.
    let r = s
        .http("PATCH", DEPLOY_PATH, &[APPLY], body.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(
        r.text()
            .contains("fieldManager: Required value: is required for apply patch"),
        "{}",
        r.text()
    );

    // Dry run creates nothing.
    let path = format!("{DEPLOY_PATH}?fieldManager=tool&dryRun=All");
    let r = s
        .http("PATCH", &path, &[APPLY], body.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        s.kubectl(&["get", "deployment", "web"]).status.code(),
        Some(1)
    );

    // Create: 201; again: 200.
    let path = format!("{DEPLOY_PATH}?fieldManager=tool");
    let r = s
        .http("PATCH", &path, &[APPLY], body.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 201, "{}", r.text());
    let created = json_body(&r);
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "tool");
    assert_eq!(
        created["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    let r = s
        .http("PATCH", &path, &[APPLY], body.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        json_body(&r)["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // A conflict: 409 with one cause per field.
    let change = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4}}).to_string();
    let path = format!("{DEPLOY_PATH}?fieldManager=other");
    let r = s
        .http("PATCH", &path, &[APPLY], change.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 409, "{}", r.text());
    let st = json_body(&r);
    assert_eq!(st["reason"], "Conflict");
    assert_eq!(
        st["message"],
        r#"Apply failed with 1 conflict: conflict with "tool": .spec.replicas"#
    );
    assert_eq!(
        st["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"tool\"", "field": ".spec.replicas"}])
    );
    let path = format!("{DEPLOY_PATH}?fieldManager=other&force=true");
    let r = s
        .http("PATCH", &path, &[APPLY], change.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json_body(&r)["spec"]["replicas"], 4);

    // managedFields in the configuration.
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": [{"manager": "x"}]}}).to_string();
    let r = s
        .http("PATCH", &path, &[APPLY], bad.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        json_body(&r)["message"],
        "metadata.managedFields must be nil"
    );

    // The configuration must be of the endpoint's version and kind.
    let bad =
        json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "web"}})
            .to_string();
    let r = s
        .http("PATCH", &path, &[APPLY], bad.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        json_body(&r)["message"],
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    let bad = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}})
        .to_string();
    let r = s
        .http("PATCH", &path, &[APPLY], bad.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 400, "{}", r.text());

    // A field the schema does not declare.
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replica": 2}}).to_string();
    let r = s
        .http("PATCH", &path, &[APPLY], bad.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        json_body(&r)["message"],
        "failed to create typed patch object (/web; apps/v1, Kind=Deployment): .spec.replica: field not declared in schema"
    );

    // Status: the status writer owns status fields only.
    let status = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "status": {"observedGeneration": 1, "replicas": 4}
    })
    .to_string();
    let path = format!("{DEPLOY_PATH}/status?fieldManager=controller");
    let r = s
        .http("PATCH", &path, &[APPLY], status.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 200, "{}", r.text());
    let d = s.get_json(&["deployment", "web", "--show-managed-fields"]);
    assert_eq!(d["status"]["replicas"], 4);
    let e = entry(&d, "controller", "Apply").expect("status entry");
    assert_eq!(e["subresource"], "status");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}})
    );

    // A YAML body with a duplicate key under Strict validation.
    let dup = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  name: web\n";
    let path = format!("{DEPLOY_PATH}?fieldManager=tool&fieldValidation=Strict");
    let r = s
        .http("PATCH", &path, &[APPLY], dup.as_bytes())
        .await
        .expect("http");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        json_body(&r)["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("error strict decoding YAML: "),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn apply_to_scale() {
    let s = Server::start().await;
    apply_ok(&s, &[], &deployment(Some(2), "nginx:1.14.2", false));
    let path = "/apis/apps/v1/namespaces/default/deployments/nginx-deployment/scale";
    let scale = json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"replicas": 6}
    })
    .to_string();

    // kubectl owns replicas: a conflict, reported against the workload's
    // entry.
    let r = s
        .http(
            "PATCH",
            &format!("{path}?fieldManager=hpa"),
            &[APPLY],
            scale.as_bytes(),
        )
        .await
        .expect("http");
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(
        json_body(&r)["message"],
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );

    let r = s
        .http(
            "PATCH",
            &format!("{path}?fieldManager=hpa&force=true"),
            &[APPLY],
            scale.as_bytes(),
        )
        .await
        .expect("http");
    assert_eq!(r.status, 200, "{}", r.text());
    let body = json_body(&r);
    assert_eq!(body["kind"], "Scale");
    assert_eq!(body["spec"]["replicas"], 6);
    let d = get_deploy(&s);
    assert_eq!(d["spec"]["replicas"], 6);
    let hpa = entry(&d, "hpa", "Apply").expect("hpa entry");
    assert_eq!(hpa["subresource"], "scale");
    assert_eq!(hpa["apiVersion"], "apps/v1");
    assert_eq!(hpa["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(!owns_replicas(&d, "kubectl", "Apply"));
    assert!(entry(&d, "kubectl", "Apply").is_some());
}

#[tokio::test]
async fn reset_managed_fields_then_apply() {
    let s = Server::start().await;
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n";
    apply_ok(&s, &["--field-manager=tool"], cm);
    // Every write but apply may reset managedFields with `[{}]`.
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "settings",
        "--type=merge",
        "-p",
        r#"{"metadata":{"managedFields":[{}]}}"#,
    ]);
    let c = s.get_json(&["configmap", "settings", "--show-managed-fields"]);
    assert!(c["metadata"].get("managedFields").is_none(), "{c}");

    // The next apply finds the fields owned by `before-first-apply`.
    let changed = cm.replace("blue", "red");
    let out = s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=tool", "-f", "-"],
        &changed,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(r#"conflict with "before-first-apply" using v1: .data.color"#),
        "{}",
        stderr(&out)
    );
    apply_ok(&s, &["--field-manager=tool"], cm);
    let c = s.get_json(&["configmap", "settings", "--show-managed-fields"]);
    assert!(entry(&c, "before-first-apply", "Update").is_some(), "{c}");
    assert!(entry(&c, "tool", "Apply").is_some(), "{c}");
}

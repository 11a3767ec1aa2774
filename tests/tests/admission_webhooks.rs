//! Admission webhooks end to end: HTTPS servers started by the test,
//! configured by URL and by Service (through its EndpointSlice), driven by
//! kubectl and raw HTTP: the AdmissionReview kube sends, denials and
//! warnings in kube's words, JSONPatch mutations, failurePolicy and dry
//! run.

use base64::Engine;
use e2e::webhook::{Answer, WebhookServer};
use e2e::{eventually, http_request, stderr, Server};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(20);

fn allow(req: &Value, extra: Value) -> Answer {
    let mut response = json!({"uid": req["request"]["uid"], "allowed": true});
    if let (Some(r), Some(e)) = (response.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    Answer::Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(v).expect("json"))
}

async fn post_cm(s: &Server, query: &str, cm: Value) -> (u16, Value) {
    let body = serde_json::to_vec(&cm).expect("json");
    let r = http_request(
        s.addr(),
        "POST",
        &format!("/api/v1/namespaces/default/configmaps{query}"),
        &[("Content-Type", "application/json")],
        &body,
    )
    .await
    .expect("request");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_validate_and_mutate_with_kubes_review_and_errors() {
    let s = Server::start().await;
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = Arc::clone(&seen);
    // Validating: denies config maps with `bad` data (403), warns on `odd`.
    let validator = WebhookServer::start(move |req| {
        record.lock().unwrap().push(req.clone());
        let obj = &req["request"]["object"];
        if obj["data"].get("bad").is_some() {
            return Answer::Json(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": req["request"]["uid"], "allowed": false,
                             "status": {"code": 403, "message": "bad data"}}}),
            );
        }
        let warnings = if obj["data"].get("odd").is_some() {
            json!({"warnings": ["odd data"]})
        } else {
            json!({})
        };
        allow(&req, warnings)
    })
    .await;
    // Mutating, reached through a Service: labels what it sees. An
    // EndpointSlice may not name a loopback address: the webhook listens on
    // this machine's own address.
    let ip = e2e::webhook::local_address()
        .expect("a non-loopback address of this machine, for the Service's endpoint");
    let mutator = WebhookServer::start_on(ip, |req| {
        let patch = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]);
        allow(
            &req,
            json!({"patchType": "JSONPatch", "patch": b64(&patch)}),
        )
    })
    .await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: webhook, namespace: default}}
spec:
  ports: [{{port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: webhook-1
  namespace: default
  labels: {{kubernetes.io/service-name: webhook}}
addressType: IPv4
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
ports: [{{port: {port}, protocol: TCP}}]
"#,
            port = mutator.addr.port()
        ),
    );
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: checks}}
webhooks:
- name: deny.example.com
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{checked: "yes"}}}}
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: labels}}
webhooks:
- name: label.example.com
  clientConfig:
    service: {{name: webhook, namespace: default, path: /mutate}}
    caBundle: {mca}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{mutate: "yes"}}}}
  sideEffects: NoneOnDryRun
  reinvocationPolicy: IfNeeded
  admissionReviewVersions: [v1]
"#,
            url = validator.url("/validate"),
            ca = validator.ca_bundle(),
            mca = mutator.ca_bundle(),
        ),
    );

    // A denial, once the replica has loaded the configuration.
    let cm = |name: &str, data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"checked": "yes"}}, "data": data})
    };
    let status = eventually("the webhook to deny", SETTLE, || {
        let out = s.kubectl_stdin(
            &["create", "-f", "-"],
            &serde_json::to_string(&cm("probe", json!({"bad": "1"}))).expect("json"),
        );
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(
        status.contains("admission webhook \"deny.example.com\" denied the request: bad data"),
        "{status}"
    );
    let (code, v) = post_cm(&s, "", cm("raw", json!({"bad": "1"}))).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "admission webhook \"deny.example.com\" denied the request: bad data"
    );
    // kube's metrics count the rejection.
    let metrics = e2e::http_get(s.addr(), "/metrics").await.expect("metrics");
    assert!(
        metrics.lines().any(
            |l| l.starts_with("apiserver_admission_webhook_rejection_count{")
                && l.contains("name=\"deny.example.com\"")
                && l.contains("error_type=\"no_error\"")
                && l.contains("rejection_code=\"403\"")
                && l.contains("type=\"validating\"")
        ),
        "{metrics}"
    );
    assert!(metrics.contains("apiserver_admission_webhook_admission_duration_seconds_bucket{"));
    // The review carried what kube sends.
    let review = seen.lock().unwrap().last().cloned().expect("a review");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["name"], "raw");
    assert_eq!(req["object"]["metadata"]["name"], "raw");
    assert!(req["oldObject"].is_null());
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["options"]["kind"], "CreateOptions");
    assert!(req["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(req["userInfo"].is_object());

    // Warnings reach kubectl.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &serde_json::to_string(&cm("odd", json!({"odd": "1"}))).expect("json"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: odd data"),
        "{}",
        stderr(&out)
    );
    // kubectl's create options reach the webhook as kube sends them.
    let review = seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|r| r["request"]["name"] == "odd")
        .cloned()
        .expect("the review of odd");
    assert_eq!(
        review["request"]["options"],
        json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
               "fieldManager": "kubectl-create", "fieldValidation": "Strict"})
    );

    // The mutating webhook, through its Service, labels what it matches.
    eventually("the mutation", SETTLE, || {
        let name = format!("m{}", rand_suffix());
        s.kubectl_stdin_ok(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {{mutate: \"yes\"}}\n"),
        );
        let v = s.get_json(&["configmap", &name]);
        (v["metadata"]["labels"]["mutated"] == "yes").then_some(())
    })
    .await;

    // failurePolicy: an unreachable webhook fails the request (500) under
    // Fail, and is skipped under Ignore.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: down}
webhooks:
- name: down.example.com
  clientConfig: {url: "https://127.0.0.1:1/down"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}]
  sideEffects: None
  failurePolicy: Fail
  admissionReviewVersions: [v1]
- name: down-ignored.example.com
  clientConfig: {url: "https://127.0.0.1:1/down"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [serviceaccounts]}]
  sideEffects: None
  failurePolicy: Ignore
  admissionReviewVersions: [v1]
"#,
    );
    let failed = eventually("the failing webhook", SETTLE, || {
        let out = s.kubectl(&["create", "secret", "generic", "x"]);
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(
        failed.contains("failed calling webhook \"down.example.com\""),
        "{failed}"
    );
    s.kubectl_ok(&["create", "serviceaccount", "fine"]);
    // A configuration whose CEL does not compile, or that names no
    // side-effect class, is refused at create.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: broken}
webhooks:
- name: broken.example.com
  clientConfig: {url: "https://127.0.0.1:1/"}
  sideEffects: Some
  admissionReviewVersions: [v1]
  matchConditions: [{name: c, expression: "object.metadata.name =="}]
"#,
    );
    assert!(!out.status.success());
    let out = stderr(&out);
    assert!(
        out.contains("webhooks[0].sideEffects: Unsupported value: \"Some\""),
        "{out}"
    );
    assert!(
        out.contains("webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name ==\": compilation failed"),
        "{out}"
    );
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

/// A webhook serving a self-signed certificate made by `openssl req -x509`
/// (so `CA:TRUE`) that is itself the caBundle works, as it does with
/// kube-apiserver; a caBundle of another self-signed certificate for the
/// same names still fails the call (issue #34).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_openssl_certificate_as_its_own_ca_bundle() {
    const CERT: &str = include_str!("../../apiserver/src/webhook/testdata/selfsigned.pem");
    const KEY: &str = include_str!("../../apiserver/src/webhook/testdata/selfsigned-key.pem");
    const OTHER: &str = include_str!("../../apiserver/src/webhook/testdata/other-selfsigned.pem");
    let s = Server::start().await;
    let webhook = WebhookServer::start_with_identity(CERT, KEY, |req| {
        if req["request"]["object"]["data"].get("bad").is_some() {
            return Answer::Json(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": req["request"]["uid"], "allowed": false,
                             "status": {"code": 403, "message": "openssl webhook says no"}}}),
            );
        }
        allow(&req, json!({}))
    })
    .await;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: openssl}}
webhooks:
- name: openssl.example.com
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{hook: openssl}}}}
  sideEffects: None
  failurePolicy: Fail
  admissionReviewVersions: [v1]
- name: other.example.com
  clientConfig: {{url: "{url}", caBundle: {other}}}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{hook: other}}}}
  sideEffects: None
  failurePolicy: Fail
  admissionReviewVersions: [v1]
"#,
            url = webhook.url("/validate"),
            ca = b64(CERT),
            other = b64(OTHER),
        ),
    );
    let cm = |label: &str, data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{generateName: cm-, labels: {{hook: {label}}}}}\ndata: {{{data}: x}}\n"
        )
    };
    // The webhook is reached over TLS and its denial comes back.
    let denied = eventually("the openssl webhook's denial", SETTLE, || {
        let out = s.kubectl_stdin(&["create", "-f", "-"], &cm("openssl", "bad"));
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(denied.contains("openssl webhook says no"), "{denied}");
    s.kubectl_stdin_ok(&["create", "-f", "-"], &cm("openssl", "good"));
    // Trusting another self-signed certificate: the call fails.
    let failed = eventually("the untrusted webhook's failure", SETTLE, || {
        let out = s.kubectl_stdin(&["create", "-f", "-"], &cm("other", "good"));
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(
        failed.contains("failed calling webhook \"other.example.com\""),
        "{failed}"
    );
    assert!(failed.contains("tls: invalid peer certificate"), "{failed}");
}

//! Admission is one chain on every mutating path, not only on creates,
//! updates and single deletes: a collection DELETE (each object as it
//! goes, with the collection's empty name and the object as `oldObject`),
//! the create-only subresources (`pods/binding`, `pods/eviction`,
//! `serviceaccounts/token`) and the legacy `bindings` collection, and the
//! connect subresources (`CONNECT`; `pods/log` is a read and is not
//! admitted). Each door is shut by a validating webhook and by a
//! ValidatingAdmissionPolicy in the namespace `shut`, through kubectl and
//! raw HTTP, with kube's messages and nothing changed; in `open` every door
//! still works. The webhooks record the AdmissionReviews kube would send.

use e2e::webhook::{Answer, WebhookServer};
use e2e::{eventually, http_request, stderr, Server};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(20);

const DENIED: &str = "admission webhook \"doors.example.com\" denied the request: door closed";

/// The resources each configuration below matches, with kube's rules.
const RULES: &str = r#"
  - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [configmaps, pods]}
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [bindings, pods/binding, pods/eviction, serviceaccounts/token]}
  - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: ["pods/*"]}"#;

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: nginx}}]\n"
    )
}

/// Two namespaces with the same objects: config maps `a` and `b`, a
/// service account `bot`, unbound pods `p`, `q` and `r`.
async fn furnish(s: &Server) {
    for ns in ["shut", "open"] {
        s.kubectl_ok(&["create", "namespace", ns]);
        eventually("the default service account", SETTLE, || {
            s.kubectl(&["get", "serviceaccount", "default", "-n", ns])
                .status
                .success()
                .then_some(())
        })
        .await;
        for cm in ["a", "b"] {
            s.kubectl_ok(&["create", "configmap", cm, "-n", ns, "--from-literal=k=v"]);
        }
        s.kubectl_ok(&["create", "serviceaccount", "bot", "-n", ns]);
        for p in ["p", "q", "r"] {
            s.kubectl_stdin_ok(&["create", "-n", ns, "-f", "-"], &pod(p));
        }
    }
}

async fn send(s: &Server, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let r = http_request(
        s.addr(),
        method,
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .await
    .expect("request");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or_else(|_| json!({"raw": r.text()})),
    )
}

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
           "target": {"kind": "Node", "name": node}})
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
}

fn token_request() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
}

fn exec_path(ns: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods/{pod}/exec?command=ls&container=c&stdout=true")
}

/// A refused request: kube's Status, its code and message.
fn assert_refused(what: &str, (code, status): &(u16, Value), want_code: u16, message: &str) {
    assert_eq!(*code, want_code, "{what}: {status}");
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], want_code, "{what}: {status}");
    assert_eq!(status["message"], message, "{what}: {status}");
}

/// kubectl failed and said `message`.
fn assert_kubectl_refused(s: &Server, args: &[&str], stdin: Option<&str>, message: &str) {
    let out = match stdin {
        Some(input) => s.kubectl_stdin(args, input),
        None => s.kubectl(args),
    };
    assert!(!out.status.success(), "kubectl {args:?} succeeded");
    assert!(
        stderr(&out).contains(message),
        "kubectl {args:?}: {}",
        stderr(&out)
    );
}

/// Nothing a refused door guards has changed in `shut`.
fn assert_shut_untouched(s: &Server) {
    for cm in ["a", "b"] {
        s.kubectl_ok(&["get", "configmap", cm, "-n", "shut"]);
    }
    for p in ["p", "q", "r"] {
        let pod = s.get_json(&["pod", p, "-n", "shut"]);
        assert_eq!(pod["spec"]["nodeName"].as_str().unwrap_or(""), "", "{pod}");
        assert!(pod["metadata"].get("deletionTimestamp").is_none(), "{pod}");
    }
}

/// The last recorded review request that `pick` accepts.
fn review(seen: &Mutex<Vec<Value>>, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let seen = seen.lock().unwrap();
    seen.iter()
        .rev()
        .map(|r| &r["request"])
        .find(|r| pick(r))
        .cloned()
        .unwrap_or_else(|| panic!("no review of {what} among {} recorded", seen.len()))
}

fn is(r: &Value, ns: &str, operation: &str, resource: &str, sub: Option<&str>) -> bool {
    r["namespace"] == ns
        && r["operation"] == operation
        && r["resource"]["resource"] == resource
        && r["subResource"].as_str() == sub
}

fn kind(group: &str, kind: &str) -> Value {
    json!({"group": group, "version": "v1", "kind": kind})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_see_and_shut_every_door() {
    let s = Server::start().await;
    furnish(&s).await;
    let validated: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = Arc::clone(&validated);
    let validator = WebhookServer::start(move |req| {
        record.lock().unwrap().push(req.clone());
        let uid = &req["request"]["uid"];
        let response = if req["request"]["namespace"] == "shut" {
            json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "door closed"}})
        } else {
            json!({"uid": uid, "allowed": true})
        };
        Answer::Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        )
    })
    .await;
    let mutated: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = Arc::clone(&mutated);
    let mutator = WebhookServer::start(move |req| {
        record.lock().unwrap().push(req.clone());
        Answer::Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": req["request"]["uid"], "allowed": true}}),
        )
    })
    .await;
    // The mutating configuration first: once the validating one is loaded,
    // so is it (one controller lists both).
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: doors}}\nwebhooks:\n- name: doors-mutating.example.com\n  clientConfig: {{url: \"{url}\", caBundle: {ca}}}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  rules:{RULES}\n",
            url = mutator.url("/mutate"),
            ca = mutator.ca_bundle(),
        ),
    );
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: doors}}\nwebhooks:\n- name: doors.example.com\n  clientConfig: {{url: \"{url}\", caBundle: {ca}}}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  rules:{RULES}\n",
            url = validator.url("/validate"),
            ca = validator.ca_bundle(),
        ),
    );
    // A token request changes nothing: the probe for the configuration.
    let err = eventually("the webhook to shut the token door", SETTLE, || {
        let out = s.kubectl(&["create", "token", "bot", "-n", "shut"]);
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(err.contains(DENIED), "{err}");

    // serviceaccounts/token, through the generic create path.
    let path = "/api/v1/namespaces/shut/serviceaccounts/bot/token";
    let refused = send(&s, "POST", path, Some(&token_request())).await;
    assert_refused("token", &refused, 403, DENIED);
    let r = review(&validated, "the token request", |r| {
        is(r, "shut", "CREATE", "serviceaccounts", Some("token"))
    });
    assert_eq!(r["name"], "bot");
    assert_eq!(r["kind"], kind("authentication.k8s.io", "TokenRequest"));
    assert_eq!(
        r["requestKind"],
        kind("authentication.k8s.io", "TokenRequest")
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "serviceaccounts"})
    );
    assert_eq!(r["object"]["kind"], "TokenRequest");
    // As kube's TokenREST admits it: named, audiences defaulted.
    assert_eq!(r["object"]["metadata"]["name"], "bot");
    assert!(
        r["object"]["spec"]["audiences"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{r}"
    );
    assert!(r["oldObject"].is_null());
    assert_eq!(r["options"]["kind"], "CreateOptions");
    // Bad input is still answered before admission: a missing account is
    // a 404, a short expiration a 422.
    let (code, _) = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/serviceaccounts/nobody/token",
        Some(&token_request()),
    )
    .await;
    assert_eq!(code, 404);
    let short = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": 60}});
    let (code, _) = send(&s, "POST", path, Some(&short)).await;
    assert_eq!(code, 422);

    // A collection DELETE: refused with the first object, nothing deleted.
    let refused = send(&s, "DELETE", "/api/v1/namespaces/shut/configmaps", None).await;
    assert_refused("deletecollection", &refused, 403, DENIED);
    assert_kubectl_refused(
        &s,
        &["delete", "--raw", "/api/v1/namespaces/shut/configmaps"],
        None,
        DENIED,
    );
    // kubectl deletes `--all` one by one: each refused.
    assert_kubectl_refused(
        &s,
        &["delete", "configmaps", "--all", "-n", "shut"],
        None,
        DENIED,
    );
    let r = review(&validated, "a collection's object", |r| {
        is(r, "shut", "DELETE", "configmaps", None) && r["name"].as_str().unwrap_or("").is_empty()
    });
    assert!(r["object"].is_null(), "{r}");
    assert_eq!(r["oldObject"]["metadata"]["namespace"], "shut", "{r}");
    assert_eq!(r["oldObject"]["kind"], "ConfigMap", "{r}");
    assert_eq!(r["kind"], kind("", "ConfigMap"));
    // The options as the client sent them: the raw DELETE sent none,
    // kubectl deletes each object in the background (a DeleteOptions body).
    assert_eq!(
        r["options"],
        json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"})
    );
    let one = review(&validated, "kubectl's DELETE of one object", |r| {
        is(r, "shut", "DELETE", "configmaps", None) && !r["name"].as_str().unwrap_or("").is_empty()
    });
    assert_eq!(
        one["options"],
        json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "propagationPolicy": "Background"})
    );

    // pods/binding and the legacy bindings collection.
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/pods/q/binding",
        Some(&binding("q", "n1")),
    )
    .await;
    assert_refused("pods/binding", &refused, 403, DENIED);
    let r = review(&validated, "the pod binding", |r| {
        is(r, "shut", "CREATE", "pods", Some("binding"))
    });
    assert_eq!(r["name"], "q");
    assert_eq!(r["kind"], kind("", "Binding"));
    assert_eq!(r["object"]["kind"], "Binding");
    assert_eq!(r["object"]["target"]["name"], "n1");
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/bindings",
        Some(&binding("r", "n1")),
    )
    .await;
    assert_refused("bindings", &refused, 403, DENIED);
    assert_kubectl_refused(
        &s,
        &["create", "-n", "shut", "-f", "-"],
        Some(&binding("r", "n1").to_string()),
        DENIED,
    );
    let r = review(&validated, "the legacy binding", |r| {
        is(r, "shut", "CREATE", "bindings", None)
    });
    assert_eq!(r["name"], "r");
    assert_eq!(r["kind"], kind("", "Binding"));
    // A Binding with no target is still kube's 422, before admission.
    let (code, v) = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/pods/q/binding",
        Some(&json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "q"}, "target": {}})),
    )
    .await;
    assert_eq!(code, 422, "{v}");

    // pods/eviction.
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/pods/p/eviction",
        Some(&eviction("p")),
    )
    .await;
    assert_refused("pods/eviction", &refused, 403, DENIED);
    assert_kubectl_refused(
        &s,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/shut/pods/p/eviction",
            "-f",
            "-",
        ],
        Some(&eviction("p").to_string()),
        "door closed",
    );
    let r = review(&validated, "the eviction", |r| {
        is(r, "shut", "CREATE", "pods", Some("eviction"))
    });
    assert_eq!(r["name"], "p");
    assert_eq!(r["kind"], kind("policy", "Eviction"));
    assert_eq!(r["object"]["kind"], "Eviction");
    assert_eq!(r["options"]["kind"], "CreateOptions");

    // A connection (CONNECT, the options as the object); the log is a read.
    let refused = send(&s, "POST", &exec_path("shut", "p"), None).await;
    assert_refused("pods/exec", &refused, 403, DENIED);
    assert_kubectl_refused(&s, &["exec", "p", "-n", "shut", "--", "ls"], None, DENIED);
    let r = review(&validated, "the exec", |r| {
        is(r, "shut", "CONNECT", "pods", Some("exec"))
    });
    assert_eq!(r["name"], "p");
    assert_eq!(r["kind"], kind("", "PodExecOptions"));
    assert_eq!(r["object"]["kind"], "PodExecOptions");
    assert_eq!(r["object"]["command"], json!(["ls"]));
    assert!(r["options"].is_null(), "{r}");
    let (code, _) = send(&s, "GET", "/api/v1/namespaces/shut/pods/p/log", None).await;
    assert_eq!(code, 204);
    assert!(
        !validated
            .lock()
            .unwrap()
            .iter()
            .any(|r| r["request"]["subResource"] == "log"),
        "the log was admitted"
    );
    // And a plain pod delete.
    assert_kubectl_refused(&s, &["delete", "pod", "p", "-n", "shut"], None, DENIED);
    assert_shut_untouched(&s);

    // The mutating half ran on every door before the validating one.
    for (op, resource, sub) in [
        ("DELETE", "configmaps", None),
        ("CREATE", "pods", Some("binding")),
        ("CREATE", "bindings", None),
        ("CREATE", "pods", Some("eviction")),
        ("CREATE", "serviceaccounts", Some("token")),
        ("CONNECT", "pods", Some("exec")),
    ] {
        review(
            &mutated,
            &format!("{op} {resource} {sub:?} (mutating)"),
            |r| is(r, "shut", op, resource, sub),
        );
    }

    // In `open` every door works, admitted.
    let out = s.kubectl_ok(&["create", "token", "bot", "-n", "open"]);
    assert!(out.trim().starts_with("ey"), "{out}");
    let (code, v) = send(&s, "DELETE", "/api/v1/namespaces/open/configmaps", None).await;
    assert_eq!(code, 200, "{v}");
    for cm in ["a", "b"] {
        assert!(
            s.gone(&["get", "configmap", cm, "-n", "open"]),
            "{cm} not deleted"
        );
        // Each object was admitted as it went: kube's empty name, the
        // object as oldObject.
        let r = review(&validated, &format!("the delete of {cm}"), |r| {
            is(r, "open", "DELETE", "configmaps", None) && r["oldObject"]["metadata"]["name"] == cm
        });
        assert_eq!(r["name"].as_str().unwrap_or(""), "", "{r}");
        assert!(r["object"].is_null(), "{r}");
        review(&mutated, &format!("the delete of {cm} (mutating)"), |r| {
            is(r, "open", "DELETE", "configmaps", None) && r["oldObject"]["metadata"]["name"] == cm
        });
    }
    let (code, v) = send(
        &s,
        "POST",
        "/api/v1/namespaces/open/pods/q/binding",
        Some(&binding("q", "n1")),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    s.kubectl_stdin_ok(
        &["create", "-n", "open", "-f", "-"],
        &binding("r", "n2").to_string(),
    );
    for (p, node) in [("q", "n1"), ("r", "n2")] {
        let pod = s.get_json(&["pod", p, "-n", "open"]);
        assert_eq!(pod["spec"]["nodeName"], node, "{pod}");
    }
    let out = s.kubectl(&["exec", "p", "-n", "open", "--", "ls"]);
    assert!(
        stderr(&out).contains("pod p does not have a host assigned"),
        "{}",
        stderr(&out)
    );
    let (code, v) = send(
        &s,
        "POST",
        "/api/v1/namespaces/open/pods/p/eviction",
        Some(&eviction("p")),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    assert!(s.gone(&["get", "pod", "p", "-n", "open"]), "p not evicted");
    // The eviction was admitted; the delete it made was not again
    // (kube's eviction deletes without DELETE admission).
    review(&validated, "the open eviction", |r| {
        is(r, "open", "CREATE", "pods", Some("eviction"))
    });
    assert!(
        !validated.lock().unwrap().iter().any(|r| is(
            &r["request"],
            "open",
            "DELETE",
            "pods",
            None
        )),
        "the evicted pod's delete was admitted as a DELETE"
    );
}

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: doors}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [configmaps]}
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [bindings, pods/binding, pods/eviction, serviceaccounts/token]}
    - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: ["pods/*"]}
  validations:
  - expression: "request.namespace != 'shut'"
    messageExpression: "'door closed: ' + request.operation + ' ' + request.kind.kind + ' ' + request.name + (request.operation == 'DELETE' ? ' was ' + oldObject.metadata.name : ' with ' + object.kind)"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: doors-shut}
spec: {policyName: doors, validationActions: [Deny]}
"#;

/// kube's Status message for a policy denial of `resource` `name`.
fn policy_denial(resource: &str, name: &str, why: &str) -> String {
    format!(
        "{resource} \"{name}\" is forbidden: ValidatingAdmissionPolicy 'doors' with binding 'doors-shut' denied request: door closed: {why}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_shuts_every_door() {
    let s = Server::start().await;
    furnish(&s).await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], POLICY);
    let token = policy_denial(
        "serviceaccounts",
        "bot",
        "CREATE TokenRequest bot with TokenRequest",
    );
    let err = eventually("the policy to shut the token door", SETTLE, || {
        let out = s.kubectl(&["create", "token", "bot", "-n", "shut"]);
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(err.contains(&token), "{err}");
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/serviceaccounts/bot/token",
        Some(&token_request()),
    )
    .await;
    assert_refused("token", &refused, 403, &token);
    assert_eq!(refused.1["reason"], "Forbidden");

    // A collection DELETE: the first object refuses it, under kube's name
    // for a request without one ("Unknown"); nothing is deleted.
    let collection = policy_denial("configmaps", "Unknown", "DELETE ConfigMap  was a");
    let refused = send(&s, "DELETE", "/api/v1/namespaces/shut/configmaps", None).await;
    assert_refused("deletecollection", &refused, 403, &collection);
    assert_kubectl_refused(
        &s,
        &["delete", "--raw", "/api/v1/namespaces/shut/configmaps"],
        None,
        &collection,
    );
    assert_kubectl_refused(
        &s,
        &["delete", "configmaps", "--all", "-n", "shut"],
        None,
        &policy_denial("configmaps", "a", "DELETE ConfigMap a was a"),
    );

    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/pods/q/binding",
        Some(&binding("q", "n1")),
    )
    .await;
    assert_refused(
        "pods/binding",
        &refused,
        403,
        &policy_denial("pods", "q", "CREATE Binding q with Binding"),
    );
    let legacy = policy_denial("bindings", "r", "CREATE Binding r with Binding");
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/bindings",
        Some(&binding("r", "n1")),
    )
    .await;
    assert_refused("bindings", &refused, 403, &legacy);
    assert_kubectl_refused(
        &s,
        &["create", "-n", "shut", "-f", "-"],
        Some(&binding("r", "n1").to_string()),
        &legacy,
    );

    let evict = policy_denial("pods", "p", "CREATE Eviction p with Eviction");
    let refused = send(
        &s,
        "POST",
        "/api/v1/namespaces/shut/pods/p/eviction",
        Some(&eviction("p")),
    )
    .await;
    assert_refused("pods/eviction", &refused, 403, &evict);
    assert_kubectl_refused(
        &s,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/shut/pods/p/eviction",
            "-f",
            "-",
        ],
        Some(&eviction("p").to_string()),
        "CREATE Eviction p with Eviction",
    );

    let exec = policy_denial("pods", "p", "CONNECT PodExecOptions p with PodExecOptions");
    let refused = send(&s, "POST", &exec_path("shut", "p"), None).await;
    assert_refused("pods/exec", &refused, 403, &exec);
    assert_kubectl_refused(&s, &["exec", "p", "-n", "shut", "--", "ls"], None, &exec);
    assert_shut_untouched(&s);

    // In `open`, every door works.
    let out = s.kubectl_ok(&["create", "token", "bot", "-n", "open"]);
    assert!(out.trim().starts_with("ey"), "{out}");
    s.kubectl_ok(&["delete", "--raw", "/api/v1/namespaces/open/configmaps"]);
    for cm in ["a", "b"] {
        assert!(
            s.gone(&["get", "configmap", cm, "-n", "open"]),
            "{cm} not deleted"
        );
    }
    let (code, v) = send(
        &s,
        "POST",
        "/api/v1/namespaces/open/pods/q/binding",
        Some(&binding("q", "n1")),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    s.kubectl_stdin_ok(
        &["create", "-n", "open", "-f", "-"],
        &binding("r", "n2").to_string(),
    );
    assert_eq!(
        s.get_json(&["pod", "r", "-n", "open"])["spec"]["nodeName"],
        "n2"
    );
    s.kubectl_stdin_ok(
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/open/pods/p/eviction",
            "-f",
            "-",
        ],
        &eviction("p").to_string(),
    );
    assert!(s.gone(&["get", "pod", "p", "-n", "open"]), "p not evicted");
    let out = s.kubectl(&["exec", "q", "-n", "open", "--", "ls"]);
    assert!(
        stderr(&out).contains("runs without kubelets")
            || stderr(&out).contains("nodes \"n1\" not found"),
        "{}",
        stderr(&out)
    );
}

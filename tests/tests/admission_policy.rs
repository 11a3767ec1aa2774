//! ValidatingAdmissionPolicy end to end, through kubectl, raw HTTP and the
//! Python client: Deny with kube's Status, Warn as a `Warning` header,
//! namespace selectors, params (a ConfigMap and a custom resource),
//! messageExpression and reason, DELETE, and a policy loaded by every
//! replica.

use e2e::{eventually, http_request, stderr, unique_prefix, Server};
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(20);

const REPLICA_LIMIT: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-test
spec:
  policyName: replica-limit
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {env: test}
"#;

fn deployment(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: c\n        image: nginx\n"
    )
}

fn body(name: &str, replicas: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .expect("json")
}

async fn post(s: &Server, path: &str, body: &[u8]) -> (u16, Value) {
    let r = http_request(
        s.addr(),
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body,
    )
    .await
    .expect("request");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

/// Waits until creating `name` with `replicas` in `ns` is refused (the
/// replicas load policies from their watch).
async fn until_denied(s: &Server, ns: &str, name: &str, replicas: u32) -> Value {
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let (code, v) = post(s, &path, &body(name, replicas)).await;
        if code != 201 {
            return v;
        }
        // Allowed before the policy was loaded: take it back, try again.
        let _ = http_request(s.addr(), "DELETE", &format!("{path}/{name}"), &[], b"").await;
        assert!(std::time::Instant::now() < deadline, "never denied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_policy_denies_with_kubes_status_where_its_binding_matches() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_ok(&["create", "namespace", "t"]);
    a.kubectl_ok(&["label", "namespace", "t", "env=test"]);
    a.kubectl_ok(&["create", "namespace", "free"]);
    a.kubectl_stdin_ok(&["create", "-f", "-"], REPLICA_LIMIT);

    // Both replicas enforce it, with kube's Status.
    for s in [&a, &b] {
        let status = until_denied(s, "t", "big", 6).await;
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        let cause = "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test' denied request: failed expression: object.spec.replicas <= 5";
        assert_eq!(
            status["message"],
            format!("deployments.apps \"big\" is forbidden: {cause}")
        );
        assert_eq!(
            status["details"],
            json!({"name": "big", "group": "apps", "kind": "deployments", "causes": [{"message": cause}]})
        );
    }
    // kubectl shows it; a small one passes; another namespace is free.
    let out = a.kubectl_stdin(&["apply", "-f", "-"], &deployment("t", "k", 9));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("denied request: failed expression: object.spec.replicas <= 5"),
        "{}",
        stderr(&out)
    );
    a.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment("t", "small", 2));
    a.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment("free", "big", 9));
    // Updates are checked too (a rule for `deployments` does not cover
    // `deployments/scale`, as in kube).
    let (code, out) = a.kubectl_err(&[
        "patch",
        "deployment",
        "small",
        "-n",
        "t",
        "-p",
        r#"{"spec":{"replicas":7}}"#,
    ]);
    assert_ne!(code, 0);
    assert!(out.contains("replica-limit"), "{out}");
    // A policy whose CEL does not compile is refused at create.
    let out = a.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: broken\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}]\n  validations:\n  - expression: \"object.spec ==\"\n",
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "spec.validations[0].expression: Invalid value: \"object.spec ==\": compilation failed"
        ),
        "{}",
        stderr(&out)
    );
    // Written expressions are type-checked as kube's admission compiler
    // checks them: `request` has kube's type, a validation must be a bool.
    let out = a.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: mistyped\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}]\n  validations:\n  - expression: \"request.nosuch == 'x'\"\n  - expression: \"object.spec.replicas\"\n",
    );
    assert!(!out.status.success());
    for cause in [
        "spec.validations[0].expression: Invalid value: \"request.nosuch == 'x'\": compilation failed: ERROR: <input>:1:8: undefined field 'nosuch'",
        "spec.validations[1].expression: Invalid value: \"object.spec.replicas\": must evaluate to bool but got dyn",
    ] {
        assert!(stderr(&out).contains(cause), "{}", stderr(&out));
    }
    assert!(
        a.kubectl(&["get", "validatingadmissionpolicy", "mistyped"])
            .status
            .code()
            != Some(0)
    );
    // Removing the binding lifts it.
    a.kubectl_ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "replica-limit-test",
    ]);
    eventually("the policy to be lifted", SETTLE, || {
        a.kubectl_stdin(&["apply", "-f", "-"], &deployment("t", "big", 6))
            .status
            .success()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn warn_params_message_expressions_reasons_and_deletes() {
    let s = Server::start().await;
    s.install_gadgets().await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: limits\n  namespace: default\nspec:\n  max: 3\n",
    );
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: from-params
spec:
  paramKind: {apiVersion: example.com/v1, kind: Gadget}
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  variables:
  - name: max
    expression: "params.spec.max"
  validations:
  - expression: "object.spec.replicas <= variables.max"
    messageExpression: "'at most ' + string(variables.max) + ' replicas, not ' + string(object.spec.replicas)"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: from-params
spec:
  policyName: from-params
  validationActions: [Deny]
  paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: labelled
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "DELETE"]
      resources: ["configmaps"]
  validations:
  - expression: "request.operation != 'CREATE' || has(object.metadata.labels)"
    message: "config maps need labels"
  - expression: "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || !('protected' in oldObject.metadata.labels)"
    message: "protected"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: labelled-warn
spec:
  policyName: labelled
  validationActions: [Warn]
  matchResources:
    objectSelector:
      matchExpressions: [{key: strict, operator: DoesNotExist}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: labelled-deny
spec:
  policyName: labelled
  validationActions: [Deny]
  matchResources:
    objectSelector:
      matchLabels: {strict: "yes"}
"#,
    );
    // Params from a custom resource; messageExpression; reason → 403.
    let status = until_denied(&s, "default", "four", 4).await;
    assert_eq!(status["code"], 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("denied request: at most 3 replicas, not 4"),
        "{status}"
    );
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment("default", "three", 3));

    // Warn: the object is created, kubectl prints kube's warning.
    let out = s.kubectl(&["create", "configmap", "plain"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled-warn': config maps need labels"),
        "{}",
        stderr(&out)
    );
    // DELETE sees oldObject; the strict binding denies.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  labels: {protected: \"1\", strict: \"yes\"}\n",
    );
    let (code, out) = s.kubectl_err(&["delete", "configmap", "keep"]);
    assert_ne!(code, 0);
    assert!(
        out.contains("ValidatingAdmissionPolicy 'labelled' with binding 'labelled-deny' denied request: protected"),
        "{out}"
    );
    s.kubectl_ok(&["get", "configmap", "keep"]);

    // Without its param the binding denies everything it matches.
    s.kubectl_ok(&["delete", "gadget", "limits"]);
    let status = until_denied(&s, "default", "one", 1).await;
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{status}"
    );
    e2e::run_python_client(&s, "admission_policy_python.py");
}

/// `/scale` is admitted as kube admits it: a rule on `deployments/scale`
/// sees the autoscaling/v1 Scale (the request's kind and its object), not
/// the Deployment, through `kubectl scale`, a merge patch of the Scale and
/// a raw PUT; a rule on `deployments` does not cover it.
#[tokio::test]
async fn scale_writes_are_admitted_as_scales() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "sc"]);
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment("sc", "web", 1));
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: scale-limit
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["UPDATE"]
      resources: ["deployments/scale"]
  validations:
  - expression: "request.kind.kind == 'Scale' && request.kind.group == 'autoscaling' && object.kind == 'Scale' && oldObject.kind == 'Scale'"
    message: "not a Scale"
  - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: scale-limit
spec:
  policyName: scale-limit
  validationActions: [Deny]
"#,
    );
    let denied = "ValidatingAdmissionPolicy 'scale-limit' with binding 'scale-limit' denied request: failed expression: object.spec.replicas <= 5";
    let err = eventually("the scale policy in effect", SETTLE, || {
        let out = s.kubectl(&["scale", "deployment", "web", "-n", "sc", "--replicas=9"]);
        (!out.status.success()).then(|| stderr(&out))
    })
    .await;
    assert!(err.contains(denied), "{err}");
    // Within the limit, kubectl scale passes (the first rule held).
    s.kubectl_ok(&["scale", "deployment", "web", "-n", "sc", "--replicas=3"]);
    // A merge patch of the Scale and a PUT of it: the same.
    let (code, out) = s.kubectl_err(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "sc",
        "--subresource=scale",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":8}}"#,
    ]);
    assert_ne!(code, 0);
    assert!(out.contains(denied), "{out}");
    let path = "/apis/apps/v1/namespaces/sc/deployments/web/scale";
    let scale: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "--raw", path])).expect("Scale JSON");
    let mut bigger = scale.clone();
    bigger["spec"]["replicas"] = json!(7);
    let r = http_request(
        s.addr(),
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&bigger).expect("json"),
    )
    .await
    .expect("PUT");
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let status: Value = serde_json::from_slice(&r.body).expect("Status");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains(denied)),
        "{status}"
    );
    // The Deployment itself is not under the rule.
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "sc",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ]);
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "deployment",
            "web",
            "-n",
            "sc",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "9"
    );
}

/// `status.typeChecking` with kube's declarations (kube 1.35's
/// `typechecking.go`): `request` is kube's AdmissionRequest type,
/// `params` the paramKind's type, `authorizer.requestResource` is not
/// declared there. And `request.requestResource` is the request's own
/// field when the policy runs.
#[tokio::test]
async fn type_checking_knows_request_and_params_and_request_resource_runs() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typed-request}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "request.name == object.spec.replicas"
  - expression: "params.data.max == 3"
  - expression: "authorizer.requestResource.check('create').allowed()"
  - expression: "request.userInfo.username != '' && (!has(namespaceObject.metadata.labels) || namespaceObject.status.phase == 'Active')"
    messageExpression: "'user ' + request.userInfo.username + ' in ' + request.namespace"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: request-resource}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "request.requestResource.resource != 'deployments' || object.metadata.name != 'blocked'"
    message: blocked by its name
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: request-resource}
spec: {policyName: request-resource, validationActions: [Deny]}
"#,
    );
    let status = eventually("the type-checking status", SETTLE, || {
        let p = s.get_json(&["validatingadmissionpolicy", "typed-request"]);
        (p["status"]["observedGeneration"] == 1).then(|| p["status"].clone())
    })
    .await;
    let gvk = "apps/v1, Kind=Deployment";
    assert_eq!(
        status["typeChecking"]["expressionWarnings"],
        json!([{
            "fieldRef": "spec.validations[0].expression",
            "warning": format!("{gvk}: ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(string, int)'\n | request.name == object.spec.replicas\n | .............^\n")
        }, {
            "fieldRef": "spec.validations[1].expression",
            "warning": format!("{gvk}: ERROR: <input>:1:17: found no matching overload for '_==_' applied to '(string, int)'\n | params.data.max == 3\n | ................^\n")
        }, {
            "fieldRef": "spec.validations[2].expression",
            "warning": format!("{gvk}: ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'\n | authorizer.requestResource.check('create').allowed()\n | ..........^\n")
        }])
    );
    // The same through raw HTTP.
    let r = s
        .request(
            "GET",
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/typed-request",
            &[],
            b"",
        )
        .await;
    assert_eq!(r.status, 200);
    let raw: Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(raw["status"]["typeChecking"], status["typeChecking"]);
    let status = eventually("the second policy's status", SETTLE, || {
        let p = s.get_json(&["validatingadmissionpolicy", "request-resource"]);
        (p["status"]["observedGeneration"] == 1).then(|| p["status"].clone())
    })
    .await;
    assert_eq!(status["typeChecking"], json!({}));

    let denied = until_denied(&s, "default", "blocked", 1).await;
    assert_eq!(
        denied["message"],
        "deployments.apps \"blocked\" is forbidden: ValidatingAdmissionPolicy 'request-resource' with binding 'request-resource' denied request: blocked by its name"
    );
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &deployment("default", "free", 1));
}

//! `kubectl create -f` with validation on (kubectl's default, `strict`) for
//! every built-in kind discovery lists as creatable, at once. kubectl asks OpenAPI v3 whether the server
//! validates a kind's fields itself (a PATCH operation with
//! `fieldValidation`); where it does not say so (the review kinds, which
//! are create-only) kubectl validates client-side against `/openapi/v2` in
//! protobuf. Both paths are exercised, and both must still refuse an
//! unknown field.

use e2e::{eventually, stderr, Server};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/builtin_kinds.yaml")
}

#[tokio::test]
async fn create_builtin_kinds_with_validation() {
    let s = Server::start().await;
    let path = manifest();
    let text = std::fs::read_to_string(&path).unwrap();
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .collect();
    for must in [
        "SubjectAccessReview",
        "SelfSubjectAccessReview",
        "TokenReview",
        "Deployment",
        "CustomResourceDefinition",
        "Service",
    ] {
        assert!(kinds.contains(&must), "{must} in the manifest");
    }

    // Every kind discovery lists as creatable has an object here.
    for root in ["/api", "/apis"] {
        let r = s
            .http(
                "GET",
                root,
                &[(
                    "Accept",
                    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                )],
                b"",
            )
            .await
            .unwrap();
        let doc: Value = serde_json::from_slice(&r.body).unwrap();
        for group in doc["items"].as_array().unwrap() {
            for version in group["versions"].as_array().unwrap() {
                for r in version["resources"].as_array().unwrap() {
                    let creatable = r["verbs"].as_array().unwrap().contains(&json!("create"));
                    let kind = r["responseKind"]["kind"].as_str().unwrap();
                    assert!(
                        !creatable || kinds.contains(&kind),
                        "no {kind} in {}",
                        path.display()
                    );
                }
            }
        }
    }

    let out = s.kubectl(&["create", "-f", path.to_str().unwrap()]);
    let created = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl create failed:\n{}\n{created}",
        stderr(&out)
    );
    let lines: Vec<&str> = created.lines().collect();
    assert_eq!(lines.len(), kinds.len(), "{created}");
    assert!(lines.iter().all(|l| l.ends_with(" created")), "{created}");
    assert!(created.contains("subjectaccessreview.authorization.k8s.io/<unknown> created"));
    assert!(created.contains("tokenreview.authentication.k8s.io/<unknown> created"));
    // A Binding is answered with a Status.
    assert!(created.contains("status/<unknown> created"));
    let pod = s.get_json(&["pod", "p1"]);
    assert_eq!(pod["spec"]["nodeName"], "node-1", "{pod}");

    // A created object's status is kube's zero status: `{}` with the
    // fields Go writes without omitempty (required in the schema).
    let svc = s.get_json(&["service", "web"]);
    assert_eq!(svc["status"], json!({"loadBalancer": {}}), "{svc}");
    let d = s.get_json(&["deployment", "web"]);
    assert_eq!(d["status"], json!({}), "{d}");
    let rs = s.get_json(&["replicaset", "rs"]);
    assert_eq!(rs["status"], json!({"replicas": 0}), "{rs}");
    let ds = s.get_json(&["daemonset", "agent"]);
    assert_eq!(
        ds["status"],
        json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
            "desiredNumberScheduled": 0, "numberReady": 0}),
        "{ds}"
    );

    // A custom resource of the new CRD, with a status, once it is served.
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3, color: red}\nstatus: {ready: true}\n";
    eventually(
        "the Widget CRD to be served",
        Duration::from_secs(20),
        || {
            s.kubectl(&["get", "widgets"])
                .status
                .success()
                .then_some(())
        },
    )
    .await;
    let out = s.kubectl_stdin_ok(&["create", "-f", "-"], widget);
    assert_eq!(out.trim(), "widget.example.com/w1 created");
    // A custom resource with a status subresource starts without one.
    let w = s.get_json(&["widget", "w1"]);
    assert!(w.get("status").is_none(), "{w}");

    // Client-side validation (from /openapi/v2 in protobuf) refuses an
    // unknown field in a review kind, before anything is sent.
    let bad_review =
        "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec: {token: x, bogus: 1}\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], bad_review);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("ValidationError(TokenReview.spec): unknown field \"bogus\""),
        "{err}"
    );

    // Server-side validation (fieldValidation=Strict) refuses one in a
    // Deployment.
    let bad_deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  bogus: 1\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: x}]}\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], bad_deployment);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{err}"
    );
}

/// `kubectl apply` of an APIService, a FlowSchema and a
/// PriorityLevelConfiguration kube refuses: 422 with kube's causes, and
/// nothing stored (issue #34).
#[tokio::test]
async fn apply_refuses_what_kube_refuses_for_apiservices_and_apf() {
    let s = Server::start().await;
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "apiservices",
            "wrong.metrics.example.com",
            r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: wrong.metrics.example.com}
spec:
  group: metrics.example.com
  version: v1beta1
  groupPriorityMinimum: 0
  versionPriority: 100
  caBundle: AAAA
  insecureSkipTLSVerify: true
  service: {namespace: default, name: metrics}
"#,
            &[
                "The APIService \"wrong.metrics.example.com\" is invalid",
                "metadata.name: Invalid value: \"wrong.metrics.example.com\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.example.com\"",
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ],
        ),
        (
            "prioritylevelconfigurations",
            "too-wide",
            r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: too-wide}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    lendablePercent: 150
    borrowingLimitPercent: -1
    limitResponse:
      type: Queue
      queuing: {queues: 4, handSize: 8, queueLengthLimit: 50}
"#,
            &[
                "The PriorityLevelConfiguration \"too-wide\" is invalid",
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (4)",
                "spec.limited.lendablePercent: Invalid value: 150: must be between 0 and 100, inclusive",
                "spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer",
            ],
        ),
        (
            "flowschemas",
            "first",
            r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: first}
spec:
  priorityLevelConfiguration: {name: global-default}
  matchingPrecedence: 1
  rules:
  - subjects: [{kind: Robot}]
    nonResourceRules: [{verbs: [get], nonResourceURLs: [healthz]}]
"#,
            &[
                "The FlowSchema \"first\" is invalid",
                "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
                "spec.rules[0].subjects[0].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\"",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash",
            ],
        ),
    ];
    for (plural, name, manifest, want) in cases {
        let (_, err) = s.kubectl_stdin_err(&["apply", "-f", "-"], manifest);
        for w in *want {
            assert!(err.contains(w), "{plural}: {w}\n{err}");
        }
        let (_, missing) = s.kubectl_err(&["get", plural, name]);
        assert!(missing.contains("NotFound"), "{plural}: {missing}");
        // The same object as a plain POST: 422 Invalid.
        let obj: Value = serde_yaml_ng::from_str(manifest).unwrap();
        let group_version = obj["apiVersion"].as_str().unwrap();
        let r = e2e::http_request(
            s.addr(),
            "POST",
            &format!("/apis/{group_version}/{plural}"),
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(&obj).unwrap(),
        )
        .await
        .unwrap();
        let status: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(r.status, 422, "{plural}: {status}");
        assert_eq!(status["reason"], "Invalid", "{status}");
    }
    // A mandatory object keeps its fixed spec.
    let (_, err) = s.kubectl_err(&[
        "patch",
        "prioritylevelconfiguration",
        "catch-all",
        "--type=merge",
        "-p",
        r#"{"spec":{"limited":{"nominalConcurrencyShares":50}}}"#,
    ]);
    assert!(
        err.contains("spec of 'catch-all' must equal the fixed value"),
        "{err}"
    );
}

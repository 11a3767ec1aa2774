//! CertificateSigningRequests through kubectl: create, `kubectl certificate
//! approve`/`deny` (the `/approval` subresource), issuing through
//! `/status`, kube's columns, and the `approve` verb on the signer.

use e2e::Server;
use serde_json::{json, Value};

/// A P-256 PKCS#10 request made with openssl, base64 of its PEM.
const REQUEST: &str = include_str!("../../apimachinery/src/kinds/certificates/testdata-csr.b64");
/// A self-signed certificate made with openssl, base64 of its PEM.
const CERTIFICATE: &str =
    include_str!("../../apimachinery/src/kinds/certificates/testdata-cert.b64");

fn manifest(name: &str, signer: &str) -> String {
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: {signer}\n  expirationSeconds: 86400\n  usages: [client auth]\n  username: mallory\n  groups: [forged]\n",
        REQUEST.trim()
    )
}

fn columns(out: &str, row: usize) -> Vec<String> {
    out.lines()
        .nth(row)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn kubectl_certificate_approve_deny_and_issue() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &manifest("one", "example.com/signer"),
    );
    let out = s.kubectl_ok(&["get", "csr", "one"]);
    assert_eq!(
        columns(&out, 0),
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{out}"
    );
    let row = columns(&out, 1);
    assert_eq!(row[0], "one", "{out}");
    assert_eq!(row[2], "example.com/signer");
    assert_eq!(row.last().unwrap(), "Pending");
    // The request records who made it, whatever the client wrote there.
    let me = s.kubectl_ok(&["auth", "whoami", "-o", "json"]);
    let me: serde_json::Value = serde_json::from_str(&me).unwrap();
    let me = &me["status"]["userInfo"];
    assert_eq!(row[3], me["username"].as_str().unwrap(), "{out}");
    let spec = &s.get_json(&["csr", "one"])["spec"];
    assert_eq!(spec["username"], me["username"], "{spec}");
    assert_eq!(spec["groups"], me["groups"], "{spec}");

    let out = s.kubectl_ok(&["certificate", "approve", "one"]);
    assert_eq!(
        out.trim(),
        "certificatesigningrequest.certificates.k8s.io/one approved"
    );
    let csr = s.get_json(&["csr", "one"]);
    let cond = &csr["status"]["conditions"][0];
    assert_eq!(cond["type"], "Approved", "{csr}");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "KubectlApprove");
    assert_eq!(
        columns(&s.kubectl_ok(&["get", "csr", "one"]), 1)
            .last()
            .unwrap(),
        "Approved"
    );

    // A signer issues through /status; the condition column says so.
    let r = s
        .http(
            "PATCH",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/one/status",
            &[("Content-Type", "application/merge-patch+json")],
            json!({"status": {"certificate": CERTIFICATE.trim()}})
                .to_string()
                .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        columns(&s.kubectl_ok(&["get", "csr", "one"]), 1)
            .last()
            .unwrap(),
        "Approved,Issued"
    );

    // /status may not approve; /approval may not issue or un-approve.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &manifest("two", "example.com/signer"),
    );
    let r = s
        .http(
            "PATCH",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/two/status",
            &[("Content-Type", "application/merge-patch+json")],
            br#"{"status": {"conditions": [{"type": "Approved", "status": "True"}]}}"#,
        )
        .await
        .unwrap();
    let st: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 422, "{st}");
    assert_eq!(
        st["message"],
        "CertificateSigningRequest.certificates.k8s.io \"two\" is invalid: status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
    );
    let out = s.kubectl_ok(&["certificate", "deny", "two"]);
    assert_eq!(
        out.trim(),
        "certificatesigningrequest.certificates.k8s.io/two denied"
    );
    assert_eq!(
        columns(&s.kubectl_ok(&["get", "csr", "two"]), 1)
            .last()
            .unwrap(),
        "Denied"
    );
    // Approving a denied request (kubectl refuses to; raw HTTP does not):
    // Approved and Denied exclude each other.
    let mut two = s.get_json(&["csr", "two"]);
    two["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Approved", "status": "True"}));
    let r = s
        .http(
            "PUT",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/two/approval",
            &[("Content-Type", "application/json")],
            two.to_string().as_bytes(),
        )
        .await
        .unwrap();
    let st: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 422, "{st}");
    assert!(
        st["message"].as_str().unwrap().ends_with(
            "status.conditions[1].type: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"
        ),
        "{st}"
    );

    // The spec cannot be changed through the object.
    let r = s
        .http(
            "PATCH",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/one",
            &[("Content-Type", "application/merge-patch+json")],
            br#"{"metadata": {"labels": {"a": "b"}}, "spec": {"signerName": "other.io/x"}}"#,
        )
        .await
        .unwrap();
    let patched: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"], json!({"a": "b"}));
    assert_eq!(patched["spec"]["signerName"], "example.com/signer");
}

#[tokio::test]
async fn bad_requests_and_approval_without_the_approve_verb() {
    let s = Server::start().await;
    let out = s.kubectl_stdin(&["create", "-f", "-"], &manifest("bad", "no-slash"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.signerName: Invalid value: \"no-slash\": must be a fully qualified domain and path of the form 'example.com/signer-name'"),
        "{err}"
    );
    let garbage =
        manifest("garbage", "example.com/signer").replace(REQUEST.trim(), "aW52YWxpZCBkYXRh");
    let out = s.kubectl_stdin(&["create", "-f", "-"], &garbage);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.request: Invalid value: \"aW52YWxpZCBkYXRh\": PEM block type must be CERTIFICATE REQUEST"),
        "{err}"
    );

    // jane (impersonated, no RBAC rules) may read CSRs once granted, but
    // approving also takes `approve` on the signer.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &manifest("mine", "example.com/signer"),
    );
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "csr-approver",
        "--verb=get,list,update",
        "--resource=certificatesigningrequests,certificatesigningrequests/approval",
    ]);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "jane-csr",
        "--clusterrole=csr-approver",
        "--user=jane",
    ]);
    let out = s.kubectl(&["certificate", "approve", "mine", "--as=jane"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("certificatesigningrequests.certificates.k8s.io \"mine\" is forbidden: user not permitted to approve requests with signerName \"example.com/signer\""),
        "{err}"
    );
    // With `approve` on the signer's domain it works.
    let signer_role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: signer-approver}\nrules:\n- apiGroups: [certificates.k8s.io]\n  resources: [signers]\n  resourceNames: [\"example.com/*\"]\n  verbs: [approve]\n";
    s.kubectl_stdin_ok(&["create", "-f", "-"], signer_role);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "jane-signer",
        "--clusterrole=signer-approver",
        "--user=jane",
    ]);
    let out = s.kubectl_ok(&["certificate", "approve", "mine", "--as=jane"]);
    assert!(out.contains("approved"), "{out}");
}

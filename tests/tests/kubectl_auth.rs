//! kubectl's authorization commands against the real server on the plain
//! port (where every request runs as the loopback admin, a member of
//! system:masters, under the default `--authorization-mode=RBAC`):
//! `auth can-i` (SelfSubjectAccessReview), `auth can-i --list`
//! (SelfSubjectRulesReview), `auth whoami` (SelfSubjectReview), and
//! SubjectAccessReviews about other users created with `kubectl create -f`,
//! answered from the RBAC objects kubectl created.
//!
//! Not covered: `kubectl auth can-i --as=...` needs impersonation, which
//! this branch does not have.

use e2e::{eventually, stdout, Server};
use std::time::Duration;

#[tokio::test]
async fn can_i_as_admin() {
    let s = Server::start().await;
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "create", "pods"]).trim(),
        "yes"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "auth",
            "can-i",
            "delete",
            "deployments.apps",
            "-n",
            "kube-system"
        ])
        .trim(),
        "yes"
    );
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "get", "/metrics"]).trim(),
        "yes"
    );
}

#[tokio::test]
async fn can_i_list() {
    let s = Server::start().await;
    let out = s.kubectl_ok(&["auth", "can-i", "--list"]);
    let header = out.lines().next().unwrap_or("");
    for col in ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"] {
        assert!(header.contains(col), "{out}");
    }
    // The privileged group's and cluster-admin's everything, and the
    // rules of system:basic-user and system:discovery.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.iter().any(|r| r == &["*.*", "[]", "[]", "[*]"]),
        "{out}"
    );
    assert!(rows.iter().any(|r| r == &["[*]", "[]", "[*]"]), "{out}");
    assert!(
        rows.iter()
            .any(|r| r.first() == Some(&"selfsubjectaccessreviews.authorization.k8s.io")),
        "{out}"
    );
    assert!(rows.iter().any(|r| r.first() == Some(&"[/api/*]")), "{out}");
}

#[tokio::test]
async fn whoami() {
    let s = Server::start().await;
    let out = s.kubectl_ok(&["auth", "whoami"]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["Username", "system:apiserver"]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["Groups", "[system:masters", "system:authenticated]"]),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&s.kubectl_ok(&["auth", "whoami", "-o", "json"])).unwrap();
    assert_eq!(json["kind"], "SelfSubjectReview");
    assert_eq!(json["status"]["userInfo"]["username"], "system:apiserver");
}

const POLICY: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: secret-reader, namespace: team}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-secrets, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: secret-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;

fn sar(user: &str, verb: &str, namespace: &str) -> String {
    format!(
        r#"
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: {user}
  resourceAttributes: {{namespace: {namespace}, verb: {verb}, resource: secrets}}
"#
    )
}

#[tokio::test]
async fn subject_access_review_for_other_users() {
    let s = Server::start().await;
    let out = s.kubectl_stdin_ok(&["create", "-f", "-"], POLICY);
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io/alice-reads-secrets created"),
        "{out}"
    );
    let review = |user: &str, verb: &str, ns: &str| -> serde_json::Value {
        // `--validate=false`: kubectl validates kinds without a PATCH
        // operation (create-only kinds) on the client, from /openapi/v2 as
        // protobuf, which this server does not serve yet (406).
        let out = s.kubectl_stdin(
            &["create", "-f", "-", "-o", "json", "--validate=false"],
            &sar(user, verb, ns),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout(&out)).expect("json")
    };
    // The binding reaches the authorizer through its watch.
    let allowed = eventually("alice's binding", Duration::from_secs(20), || {
        let r = review("alice", "list", "team");
        (r["status"]["allowed"] == true).then_some(r)
    })
    .await;
    assert_eq!(allowed["kind"], "SubjectAccessReview");
    assert_eq!(
        allowed["status"]["reason"],
        "RBAC: allowed by RoleBinding \"team/alice-reads-secrets\" of Role \"secret-reader\" to User \"alice\""
    );
    for (user, verb, ns) in [
        ("alice", "delete", "team"),
        ("alice", "list", "default"),
        ("bob", "list", "team"),
    ] {
        let r = review(user, verb, ns);
        assert_eq!(
            r["status"],
            serde_json::json!({"allowed": false}),
            "{user} {verb} in {ns}"
        );
    }
    // Revoked: the binding's deletion reaches the authorizer too.
    s.kubectl_ok(&["delete", "rolebinding", "alice-reads-secrets", "-n", "team"]);
    eventually("alice's binding revoked", Duration::from_secs(20), || {
        (review("alice", "list", "team")["status"]["allowed"] == false).then_some(())
    })
    .await;
    // The default roles are there, view aggregated from its parts.
    let view = s.get_json(&["clusterrole", "view"]);
    assert!(view["aggregationRule"].is_object());
    eventually("view aggregated", Duration::from_secs(20), || {
        let v = s.get_json(&["clusterrole", "view"]);
        (v["rules"].as_array().is_some_and(|r| !r.is_empty())).then_some(())
    })
    .await;
    let crb = s.get_json(&["clusterrolebinding", "cluster-admin"]);
    assert_eq!(crb["subjects"][0]["name"], "system:masters");
}

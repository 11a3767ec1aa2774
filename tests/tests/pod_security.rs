//! kube's PodSecurity admission end to end, through kubectl, raw HTTP, the
//! Python client and a second replica: the enforce label refuses with
//! kube's 403, the warn label gives kube's `Warning`, the audit label an
//! audit annotation, pod templates only warn, a stricter enforce label
//! warns about the pods already there, bad labels are refused, and
//! namespaces without labels stay privileged.

use e2e::{eventually, http_request, stderr, unique_prefix, Server};
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(20);

const PRIVILEGED_DETAIL: &str =
    "privileged (container \"c\" must not set securityContext.privileged=true)";
const RESTRICTED_DETAIL: &str = "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

fn namespace(name: &str, labels: &[(&str, &str)]) -> String {
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("\n    pod-security.kubernetes.io/{k}: {v}"))
        .collect();
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    test: psa{labels}\n")
}

fn privileged_pod(ns: &str, name: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    securityContext:\n      privileged: true\n")
}

fn bare_pod(ns: &str, name: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: busybox\n")
}

fn restricted_pod(ns: &str, name: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  securityContext:\n    runAsNonRoot: true\n    seccompProfile: {{type: RuntimeDefault}}\n  containers:\n  - name: c\n    image: busybox\n    securityContext:\n      allowPrivilegeEscalation: false\n      capabilities: {{drop: [ALL]}}\n")
}

fn deployment(ns: &str, name: &str) -> String {
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: c\n        image: busybox\n        securityContext:\n          privileged: true\n")
}

/// Waits until creating `yaml` through `s` is refused (the replica reads
/// the namespace's labels from its watch cache); returns kubectl's stderr.
async fn until_refused(s: &Server, yaml: &str, name: &str, ns: &str) -> String {
    eventually("the pod to be refused", SETTLE, || {
        let out = s.kubectl_stdin(&["create", "-f", "-"], yaml);
        if stderr(&out).contains("violates PodSecurity") {
            return Some(stderr(&out));
        }
        // Allowed before the labels reached the cache: take it back.
        s.kubectl(&["delete", "pod", name, "-n", ns, "--ignore-not-found"]);
        None
    })
    .await
}

#[tokio::test]
async fn enforce_refuses_warn_warns_audit_annotates_on_every_replica() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .expect("audit policy");
    let log = dir.path().join("audit.log");
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(
        &etcd.endpoint(),
        &prefix,
        &[
            &format!("--audit-policy-file={}", policy.display()),
            &format!("--audit-log-path={}", log.display()),
        ],
    )
    .await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;

    // Unlabelled: privileged, no warning (the default is privileged).
    a.kubectl_stdin_ok(&["create", "-f", "-"], &namespace("open", &[]));
    let out = a.kubectl_stdin(&["create", "-f", "-"], &privileged_pod("open", "priv"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("PodSecurity"), "{}", stderr(&out));

    // enforce=restricted: kube's 403, on both replicas.
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &namespace("strict", &[("enforce", "restricted")]),
    );
    let refused = until_refused(&a, &privileged_pod("strict", "priv"), "priv", "strict").await;
    let message = format!(
        "pods \"priv\" is forbidden: violates PodSecurity \"restricted:latest\": {PRIVILEGED_DETAIL}, {RESTRICTED_DETAIL}"
    );
    assert!(refused.contains(&message), "{refused}");
    let refused = until_refused(&b, &privileged_pod("strict", "priv"), "priv", "strict").await;
    assert!(refused.contains(&message), "{refused}");
    let body = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "raw"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let r = http_request(
        b.addr(),
        "POST",
        "/api/v1/namespaces/strict/pods",
        &[("Content-Type", "application/json")],
        &body,
    )
    .await
    .expect("request");
    let status: Value = serde_json::from_slice(&r.body).expect("status");
    assert_eq!(r.status, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        format!("pods \"raw\" is forbidden: violates PodSecurity \"restricted:latest\": {RESTRICTED_DETAIL}")
    );
    assert_eq!(status["details"], json!({"name": "raw", "kind": "pods"}));
    a.kubectl_stdin_ok(&["create", "-f", "-"], &restricted_pod("strict", "fine"));
    // Adding an ephemeral container is an update that is checked.
    let mut pod = a.get_json(&["pod", "fine", "-n", "strict"]);
    pod["spec"]["ephemeralContainers"] = json!([{
        "name": "dbg", "image": "busybox", "securityContext": {"privileged": true}
    }]);
    let r = http_request(
        a.addr(),
        "PUT",
        "/api/v1/namespaces/strict/pods/fine/ephemeralcontainers",
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&pod).unwrap(),
    )
    .await
    .expect("request");
    let status: Value = serde_json::from_slice(&r.body).expect("status");
    assert_eq!(r.status, 403, "{status}");
    assert_eq!(
        status["message"],
        "pods \"fine\" is forbidden: violates PodSecurity \"restricted:latest\": \
         privileged (container \"dbg\" must not set securityContext.privileged=true), \
         allowPrivilegeEscalation != false (container \"dbg\" must set securityContext.allowPrivilegeEscalation=false), \
         unrestricted capabilities (container \"dbg\" must set securityContext.capabilities.drop=[\"ALL\"])"
    );
    e2e::run_python_client_with(&a, "pod_security_python.py", &["strict"]);

    // A workload's template is never enforced: allowed, with the warning
    // (warn follows the stricter enforce level).
    let out = a.kubectl_stdin(&["create", "-f", "-"], &deployment("strict", "web"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "Warning: would violate PodSecurity \"restricted:latest\": {PRIVILEGED_DETAIL}, {RESTRICTED_DETAIL}"
        )),
        "{}",
        stderr(&out)
    );

    // warn=baseline, audit=restricted: allowed, kube's warning, and the
    // audit annotation.
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &namespace("warned", &[("warn", "baseline"), ("audit", "restricted")]),
    );
    let warning =
        format!("Warning: would violate PodSecurity \"baseline:latest\": {PRIVILEGED_DETAIL}");
    let out = eventually("the warning", SETTLE, || {
        let out = a.kubectl_stdin(&["create", "-f", "-"], &privileged_pod("warned", "priv"));
        if out.status.success() && stderr(&out).contains(&warning) {
            return Some(out);
        }
        a.kubectl(&[
            "delete",
            "pod",
            "priv",
            "-n",
            "warned",
            "--ignore-not-found",
        ]);
        None
    })
    .await;
    assert!(stderr(&out).contains(&warning), "{}", stderr(&out));
    let audited = format!(
        "would violate PodSecurity \"restricted:latest\": {PRIVILEGED_DETAIL}, {RESTRICTED_DETAIL}"
    );
    let event = eventually("the audit event", SETTLE, || {
        let text = std::fs::read_to_string(&log).ok()?;
        // The last create: an earlier one may have been taken back.
        text.lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["namespace"] == "warned"
                    && e["objectRef"]["resource"] == "pods"
                    && e["stage"] == "ResponseComplete"
                    && e["responseStatus"]["code"] == 201
            })
    })
    .await;
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/audit-violations"],
        audited.as_str(),
        "{event}"
    );
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/enforce-policy"], "privileged:latest",
        "{event}"
    );

    // enforce=baseline allows what restricted refuses, not a privileged pod.
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &namespace("base", &[("enforce", "baseline")]),
    );
    let refused = until_refused(&a, &privileged_pod("base", "priv"), "priv", "base").await;
    assert!(
        refused.contains(&format!(
            "pods \"priv\" is forbidden: violates PodSecurity \"baseline:latest\": {PRIVILEGED_DETAIL}"
        )),
        "{refused}"
    );
    let out = a.kubectl_stdin(&["create", "-f", "-"], &bare_pod("base", "bare"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("PodSecurity"), "{}", stderr(&out));

    // A stricter enforce label warns about the pods already there; the
    // label is set.
    let out = a.kubectl(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Warning: existing pods in namespace \"open\" violate the new PodSecurity enforce level \"restricted:latest\""),
        "{err}"
    );
    assert!(
        err.contains("Warning: priv: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"),
        "{err}"
    );
    // A metadata-only update of the violating pod is not checked.
    a.kubectl_ok(&["label", "pod", "priv", "-n", "open", "touched=yes"]);
    // Relaxing it warns about nothing.
    let out = a.kubectl(&[
        "label",
        "namespace",
        "open",
        "--overwrite",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("existing pods"), "{}", stderr(&out));

    // Bad label values are refused, as kube's 422.
    let (_, err) = a.kubectl_err(&[
        "label",
        "namespace",
        "open",
        "--overwrite",
        "pod-security.kubernetes.io/enforce=bogus",
    ]);
    assert!(
        err.contains("Namespace \"open\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted"),
        "{err}"
    );
    let out = a.kubectl_stdin(
        &["create", "-f", "-"],
        &namespace("badver", &[("warn-version", "v2.0")]),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"v2.0\": must be \"latest\" or \"v1.x\""),
        "{}",
        stderr(&out)
    );
}

/// A restricted pod that runs as root: refused by restricted from v1.23.
fn root_pod(ns: &str, name: &str) -> String {
    restricted_pod(ns, name).replace(
        "      allowPrivilegeEscalation: false\n",
        "      allowPrivilegeEscalation: false\n      runAsUser: 0\n",
    )
}

#[tokio::test]
async fn version_labels_pin_the_checks() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        &namespace(
            "pinned",
            &[("enforce", "restricted"), ("enforce-version", "v1.22")],
        ),
    );
    // runAsUser=0 is checked from v1.23 on.
    let out = s.kubectl_stdin(&["create", "-f", "-"], &root_pod("pinned", "root"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("PodSecurity"), "{}", stderr(&out));
    // Moving to latest warns about it, by name.
    let out = s.kubectl(&[
        "label",
        "namespace",
        "pinned",
        "--overwrite",
        "pod-security.kubernetes.io/enforce-version=latest",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Warning: existing pods in namespace \"pinned\" violate the new PodSecurity enforce level \"restricted:latest\""),
        "{err}"
    );
    assert!(err.contains("Warning: root: runAsUser=0"), "{err}");
    let refused = until_refused(&s, &root_pod("pinned", "root2"), "root2", "pinned").await;
    assert!(
        refused.contains(
            "pods \"root2\" is forbidden: violates PodSecurity \"restricted:latest\": runAsUser=0 (container \"c\" must not set runAsUser=0)"
        ),
        "{refused}"
    );
}

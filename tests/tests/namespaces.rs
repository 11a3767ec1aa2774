//! The server's controllers end to end, through kubectl: a namespace's
//! deletion empties it (custom resources included) and then removes it,
//! waiting on its objects' finalizers with kube's conditions; the
//! namespaces kube keeps cannot be deleted; every namespace gets the
//! `default` ServiceAccount and, when the server has a CA, the
//! `kube-root-ca.crt` ConfigMap; with two replicas only the leader works,
//! and a new leader finishes a deletion the old one left mid-way.

use e2e::{eventually, eventually_async, free_port, stderr, unique_prefix, Server};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(20);

fn items_in(s: &Server, kind: &str, ns: &str) -> Vec<Value> {
    let all = s.get_json(&[kind, "--all-namespaces"]);
    all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["metadata"]["namespace"] == ns)
        .cloned()
        .collect()
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_content_then_the_namespace() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "x"]);
    s.kubectl_ok(&["create", "configmap", "c", "-n", "x", "--from-literal=a=b"]);
    s.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "x",
        "--from-literal=a=b",
    ]);
    s.kubectl_ok(&["create", "deployment", "web", "-n", "x", "--image=nginx"]);
    s.kubectl_stdin_ok(&["apply", "-f", "-"], e2e::GADGETS_CRD);
    s.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.example.com",
        "--timeout=30s",
    ]);
    eventually("gadgets to be served", SETTLE, || {
        s.kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: x}\n",
        )
        .status
        .success()
        .then_some(())
    })
    .await;

    let out = s.kubectl_ok(&["delete", "namespace", "x", "--wait=false"]);
    assert_eq!(out.trim(), r#"namespace "x" deleted"#);
    s.wait_gone(SETTLE, "namespace x to go", &["get", "namespace", "x"])
        .await;
    for kind in [
        "configmaps",
        "secrets",
        "deployments",
        "gadgets",
        "serviceaccounts",
    ] {
        let left = items_in(&s, kind, "x");
        assert!(left.is_empty(), "{kind} left in x: {left:?}");
    }
    // The name is free again, and the new namespace starts empty.
    s.kubectl_ok(&["create", "namespace", "x"]);
    assert!(items_in(&s, "configmaps", "x").is_empty());
}

#[tokio::test]
async fn a_finalizer_keeps_the_namespace_terminating_until_it_is_removed() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "held"]);
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  namespace: held\n  finalizers: [example.com/hold]\n",
    );
    s.kubectl_ok(&["create", "configmap", "plain", "-n", "held"]);
    s.kubectl_ok(&["delete", "namespace", "held", "--wait=false"]);

    let ns = eventually("the finalizer condition", SETTLE, || {
        let ns = s.get_json(&["namespace", "held"]);
        let conds = ns["status"]["conditions"].as_array().cloned()?;
        conds
            .iter()
            .any(|c| c["type"] == "NamespaceFinalizersRemaining" && c["status"] == "True")
            .then_some(ns)
    })
    .await;
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    let conds = ns["status"]["conditions"].as_array().expect("conditions");
    let of = |t: &str| {
        conds
            .iter()
            .find(|c| c["type"] == t)
            .unwrap_or_else(|| panic!("no {t} in {ns}"))
    };
    let fin = of("NamespaceFinalizersRemaining");
    assert_eq!(fin["reason"], "SomeFinalizersRemain");
    assert_eq!(
        fin["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let rem = of("NamespaceContentRemaining");
    assert_eq!(rem["status"], "True");
    assert_eq!(rem["reason"], "SomeResourcesRemain");
    assert_eq!(
        rem["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    let disc = of("NamespaceDeletionDiscoveryFailure");
    assert_eq!(disc["status"], "False");
    assert_eq!(disc["reason"], "ResourcesDiscovered");
    assert_eq!(
        of("NamespaceDeletionContentFailure")["reason"],
        "ContentDeleted"
    );
    assert_eq!(ns["spec"]["finalizers"], serde_json::json!(["kubernetes"]));

    // The object without finalizers went; the held one is marked.
    assert!(s.gone(&["get", "configmap", "plain", "-n", "held"]));
    let keep = s.get_json(&["configmap", "keep", "-n", "held"]);
    assert!(keep["metadata"]["deletionTimestamp"].is_string(), "{keep}");
    // Creating in a terminating namespace stays forbidden.
    let out = s.kubectl(&["create", "configmap", "late", "-n", "held"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("because it is being terminated"),
        "{}",
        stderr(&out)
    );

    s.kubectl_ok(&[
        "patch",
        "configmap",
        "keep",
        "-n",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    s.wait_gone(
        SETTLE,
        "namespace held to go",
        &["get", "namespace", "held"],
    )
    .await;
}

#[tokio::test]
async fn the_namespaces_kube_keeps_cannot_be_deleted() {
    let s = Server::start().await;
    for ns in ["default", "kube-system", "kube-public"] {
        let out = s.kubectl(&["delete", "namespace", ns]);
        assert!(!out.status.success(), "{ns}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                r#"namespaces "{ns}" is forbidden: this namespace may not be deleted"#
            )),
            "{err}"
        );
    }
    let r = s
        .http("DELETE", "/api/v1/namespaces/default", &[], b"")
        .await
        .expect("delete");
    assert_eq!(r.status, 403, "{}", r.text());
    let ns = s.get_json(&["namespace", "default"]);
    assert!(ns["metadata"].get("deletionTimestamp").is_none(), "{ns}");
}

#[tokio::test]
async fn every_namespace_gets_the_default_service_account_back() {
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "team"]);
    let first = eventually("the default service account", SETTLE, || {
        let out = s.kubectl(&[
            "get",
            "serviceaccount",
            "default",
            "-n",
            "team",
            "-o",
            "json",
        ]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).expect("json"))
    })
    .await;
    let uid = first["metadata"]["uid"].as_str().expect("uid").to_string();
    // The existing namespaces have one too.
    eventually("default/default", SETTLE, || {
        s.kubectl(&["get", "serviceaccount", "default", "-n", "default"])
            .status
            .success()
            .then_some(())
    })
    .await;
    s.kubectl_ok(&["delete", "serviceaccount", "default", "-n", "team"]);
    eventually("the default service account to come back", SETTLE, || {
        let out = s.kubectl(&[
            "get",
            "serviceaccount",
            "default",
            "-n",
            "team",
            "-o",
            "json",
        ]);
        if !out.status.success() {
            return None;
        }
        let sa: Value = serde_json::from_slice(&out.stdout).expect("json");
        (sa["metadata"]["uid"] != uid.as_str()).then_some(())
    })
    .await;
    // Without a CA (plain HTTP only) nothing claims to be the cluster's.
    assert!(s.gone(&["get", "configmap", "kube-root-ca.crt", "-n", "team"]));
}

/// A server with the secure port on, so that it makes a CA under `data`.
async fn start_secure(data: &Path, prefix: &str) -> Server {
    let etcd = TestEtcd::shared().await;
    for _ in 0..4 {
        let flags = [
            format!("--secure-listen=127.0.0.1:{}", free_port()),
            format!("--data-dir={}", data.display()),
        ];
        let args: Vec<&str> = flags.iter().map(String::as_str).collect();
        match Server::try_start_with_prefix(&etcd.endpoint(), prefix, &args).await {
            Ok(s) => return s,
            Err(e2e::StartError::PortTaken(_)) => continue,
            Err(e2e::StartError::Exited(log)) => panic!("server exited:\n{log}"),
        }
    }
    panic!("no free port for the secure server")
}

#[tokio::test]
async fn every_namespace_gets_the_root_ca_and_it_is_kept_in_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = start_secure(&data, &unique_prefix()).await;
    let ca = std::fs::read_to_string(data.join("pki/ca.crt")).expect("the CA");
    s.kubectl_ok(&["create", "namespace", "apps"]);
    let published = |s: &Server| {
        let out = s.kubectl(&[
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            "apps",
            "-o",
            "json",
        ]);
        if !out.status.success() {
            return None;
        }
        let cm: Value = serde_json::from_slice(&out.stdout).expect("json");
        (cm["data"]["ca.crt"] == ca.as_str()).then_some(cm)
    };
    let cm = eventually("kube-root-ca.crt", SETTLE, || published(&s)).await;
    assert!(
        cm["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .is_some_and(|d| d.contains("kube-apiserver")),
        "{cm}"
    );
    // An edit is undone.
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "apps",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"tampered","extra":"x"}}"#,
    ]);
    eventually("the CA to be restored", SETTLE, || {
        published(&s).filter(|cm| cm["data"].get("extra").is_none())
    })
    .await;
    // A deletion too.
    s.kubectl_ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "apps"]);
    eventually("the CA to come back", SETTLE, || published(&s)).await;
}

fn series(metrics: &str, name: &str, controller: &str) -> Option<f64> {
    let want = format!("{name}{{name=\"{controller}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn with_two_replicas_only_the_leader_works_and_both_converge() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_ok(&["create", "namespace", "pair"]);
    for s in [&a, &b] {
        eventually("the default service account", SETTLE, || {
            s.kubectl(&["get", "serviceaccount", "default", "-n", "pair"])
                .status
                .success()
                .then_some(())
        })
        .await;
    }
    b.kubectl_ok(&["create", "configmap", "c", "-n", "pair"]);
    b.kubectl_ok(&["delete", "namespace", "pair", "--wait=false"]);
    for s in [&a, &b] {
        s.wait_gone(
            SETTLE,
            "namespace pair to go",
            &["get", "namespace", "pair"],
        )
        .await;
    }
    // Exactly one replica ran the controllers' queues.
    let scrape = |s: &Server| {
        let s = s.addr().to_string();
        async move {
            e2e::http_get(&s, "/metrics")
                .await
                .ok()
                .map(|m| series(&m, "workqueue_adds_total", "serviceaccount").is_some())
        }
    };
    let busy = eventually_async("metrics", SETTLE, || async {
        Some(vec![scrape(&a).await?, scrape(&b).await?])
    })
    .await;
    assert_eq!(
        busy.iter().filter(|b| **b).count(),
        1,
        "one replica leads: {busy:?}"
    );
}

/// Whether `s` runs the controllers (only the leader has their queues).
async fn leads(s: &Server) -> bool {
    e2e::http_get(s.addr(), "/metrics")
        .await
        .is_ok_and(|m| series(&m, "workqueue_adds_total", "namespace").is_some())
}

#[tokio::test]
async fn a_new_leader_finishes_a_deletion_the_old_one_started() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_ok(&["create", "namespace", "handover"]);
    a.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  namespace: handover\n  finalizers: [example.com/hold]\n",
    );
    for i in 0..20 {
        a.kubectl_ok(&["create", "configmap", &format!("c{i}"), "-n", "handover"]);
    }
    a.kubectl_ok(&["delete", "namespace", "handover", "--wait=false"]);
    eventually("the deletion to be under way", SETTLE, || {
        let ns = a.get_json(&["namespace", "handover"]);
        ns["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "NamespaceFinalizersRemaining" && c["status"] == "True")
            .then_some(())
    })
    .await;
    // Stop the leader mid-work; the other replica takes over.
    let (mut leader, survivor) = if leads(&a).await { (a, b) } else { (b, a) };
    leader.kill();
    survivor.kubectl_ok(&[
        "patch",
        "configmap",
        "keep",
        "-n",
        "handover",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    // The lease (15s) must lapse before the survivor leads.
    eventually(
        "the survivor to finish the deletion",
        Duration::from_secs(60),
        || {
            survivor
                .gone(&["get", "namespace", "handover"])
                .then_some(())
        },
    )
    .await;
    assert!(items_in(&survivor, "configmaps", "handover").is_empty());
    assert!(leads(&survivor).await);
}

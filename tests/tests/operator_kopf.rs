//! A kopf operator (tests/clients/kopf_operator.py, Python, kopf pinned in
//! tools/install-test-deps.sh) against two replicas behind HAProxy
//! (issue 33): `kopf run --peering` as a subprocess with a kubeconfig at
//! the load balancer.
//!
//! - A Widget gets its owned ConfigMap, its status (through the status
//!   subresource), an Event and kopf's finalizer.
//! - Peering on kopf's own CRDs works: the operator registers in its
//!   KopfPeering, pauses while `kopf freeze` announces a peer of higher
//!   priority (a Widget created then is not handled) and resumes after
//!   `kopf resume`.
//! - Each replica restarted in place in turn: the operator goes on (a new
//!   Widget is handled after each) without a relist storm.
//! - Deleting a Widget runs the delete handler behind kopf's finalizer,
//!   and the garbage collector removes the owned ConfigMap.
//!
//! Every outcome is read with kubectl.

use e2e::cluster::Cluster;
use e2e::operator::{
    assert_no_relist_storm, delete_with_cleanup, get_json, lb_kubeconfig, wait_watched,
    ListCounter, Process,
};
use e2e::{eventually, Server};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const NS: &str = "ops-kopf";
const SETTLE: Duration = Duration::from_secs(30);
/// kopf's own finalizer.
const FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";

/// The Widget CRD (with a status subresource, which kopf patches), kopf's
/// peering CRDs as kopf's documentation describes them (status free-form:
/// kopf keeps one entry per operator there), the namespace and the
/// peering object the operators of `--peering=e2e` meet in.
const MANIFESTS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.ops.example.com}
spec:
  group: ops.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: kopfpeerings.kopf.dev}
spec:
  group: kopf.dev
  scope: Namespaced
  names: {plural: kopfpeerings, singular: kopfpeering, kind: KopfPeering}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterkopfpeerings.kopf.dev}
spec:
  group: kopf.dev
  scope: Cluster
  names: {plural: clusterkopfpeerings, singular: clusterkopfpeering, kind: ClusterKopfPeering}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
---
apiVersion: v1
kind: Namespace
metadata: {name: ops-kopf}
"#;

const PEERING: &str = r#"
apiVersion: kopf.dev/v1
kind: KopfPeering
metadata: {name: e2e, namespace: ops-kopf}
"#;

fn widget(name: &str, size: u32) -> String {
    format!(
        "apiVersion: ops.example.com/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{size: {size}}}\n"
    )
}

/// kopf at the pinned version, or a failure that says how to get it.
fn require_kopf() {
    let out = Command::new("python3")
        .args(["-c", "import kopf"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "kopf is not installed: run tools/install-test-deps.sh (make test does)\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `python3 -m kopf <args>` against the load balancer.
fn kopf(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg("-m")
        .arg("kopf")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST");
    cmd
}

/// A one-shot kopf command (freeze, resume) that must succeed.
fn kopf_ok(kubeconfig: &Path, args: &[&str]) {
    let out = kopf(kubeconfig, args).output().expect("kopf runs");
    assert!(
        out.status.success(),
        "kopf {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubectl get -o json` of one named object, if it exists.
fn get(k: &Server, args: &[&str]) -> Option<Value> {
    get_json(k, NS, args)
}

/// Waits until Widget `name` is handled: its ConfigMap exists, owned by
/// it, and its status says so. Returns the ConfigMap.
async fn handled(k: &Server, op: &Process, name: &str) -> Value {
    let widget = eventually(&format!("widget {name} to exist"), SETTLE, || {
        get(k, &["widget", name])
    })
    .await;
    let uid = widget["metadata"]["uid"].as_str().expect("uid").to_string();
    let cm_name = format!("{name}-data");
    let cm = eventually(
        &format!("ConfigMap {cm_name}; operator log:\n{}", op.log()),
        SETTLE,
        || get(k, &["configmap", &cm_name]),
    )
    .await;
    let owner = &cm["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], uid.as_str(), "{cm}");
    assert_eq!(owner["kind"], "Widget", "{cm}");
    assert_eq!(owner["controller"], true, "{cm}");
    assert_eq!(cm["data"]["owner"], name, "{cm}");
    let status = eventually(&format!("status of widget {name}"), SETTLE, || {
        let w = get(k, &["widget", name])?;
        (w["status"]["phase"] == "Ready").then_some(w)
    })
    .await;
    assert_eq!(status["status"]["configMap"], cm_name.as_str(), "{status}");
    cm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_operator_reconciles_peers_and_survives_a_replica_restart() {
    require_kopf();
    let mut c = Cluster::start(2, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = lb_kubeconfig(&c, dir.path());
    let script = format!("{}/clients/kopf_operator.py", env!("CARGO_MANIFEST_DIR"));
    {
        let k = &c.replicas[1];
        k.kubectl_stdin_ok(&["apply", "-f", "-"], MANIFESTS);
        eventually("the CRDs to be served", SETTLE, || {
            (k.kubectl(&["get", "widgets", "-n", NS]).status.success()
                && k.kubectl(&["get", "kopfpeerings", "-n", NS])
                    .status
                    .success())
            .then_some(())
        })
        .await;
        k.kubectl_stdin_ok(&["apply", "-f", "-"], PEERING);
    }

    let mut op = Process::spawn(
        kopf(
            &kubeconfig,
            &["run", "--verbose", "--peering=e2e", "-n", NS, &script],
        ),
        &dir.path().join("kopf.log"),
    );

    // Reconcile: owned ConfigMap, status, Event, finalizer.
    c.replicas[1].kubectl_stdin_ok(&["apply", "-f", "-"], &widget("w1", 3));
    let cm = handled(&c.replicas[1], &op, "w1").await;
    assert_eq!(cm["data"]["size"], "3", "{cm}");
    {
        let k = &c.replicas[1];
        let w1 = get(k, &["widget", "w1"]).expect("w1");
        let finalizers = w1["metadata"]["finalizers"].as_array().cloned();
        assert!(
            finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == FINALIZER),
            "kopf's finalizer on {w1}"
        );
        // kopf keeps the handler's result in the status too.
        assert_eq!(w1["status"]["reconcile"]["size"], 3, "{w1}");
        let selector = "involvedObject.kind=Widget,involvedObject.name=w1";
        let what = format!(
            "the Event on w1; events: {}\noperator log:\n{}",
            k.kubectl_ok(&["get", "events", "-n", NS, "-o", "json"]),
            op.log()
        );
        let events = eventually(&what, SETTLE, || {
            let e = get(k, &["events", "--field-selector", selector])?;
            let items = e["items"].as_array()?.clone();
            items
                .into_iter()
                .find(|i| i["reason"] == "ConfigMapCreated")
        })
        .await;
        assert_eq!(events["message"], "created w1-data", "{events}");
        assert_eq!(events["involvedObject"]["uid"], w1["metadata"]["uid"]);

        // Peering: the operator keeps its entry (priority 0) in the
        // KopfPeering's status.
        let peering = eventually("the operator in the peering", SETTLE, || {
            let p = get(k, &["kopfpeering", "e2e"])?;
            let status = p["status"].as_object()?;
            (status.len() == 1).then(|| p.clone())
        })
        .await;
        let (_, me) = peering["status"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(me["priority"], 0, "{peering}");
        assert!(me["lastseen"].is_string(), "{peering}");
    }

    // A peer of higher priority pauses the operator: a Widget created
    // meanwhile waits until the peer is gone.
    kopf_ok(
        &kubeconfig,
        &[
            "freeze",
            "--id=freezer",
            "--lifetime=60",
            "--peering=e2e",
            "-n",
            NS,
        ],
    );
    eventually("the operator to pause", SETTLE, || {
        op.log()
            .contains("Pausing operations in favour of")
            .then_some(())
    })
    .await;
    c.replicas[1].kubectl_stdin_ok(&["apply", "-f", "-"], &widget("w2", 5));
    // A negative check needs a window: two seconds is many times what
    // handling w1 took, and the resume below proves the operator alive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        get(&c.replicas[1], &["configmap", "w2-data"]).is_none(),
        "a paused operator handled w2; log:\n{}",
        op.log()
    );
    kopf_ok(
        &kubeconfig,
        &["resume", "--id=freezer", "--peering=e2e", "-n", NS],
    );
    handled(&c.replicas[1], &op, "w2").await;

    // Each replica restarted in place in turn under the operator (so
    // whichever replica its watches were on drops them): it goes on, and
    // resumes its watches without a relist storm.
    let resources = ["widgets", "kopfpeerings"];
    let lists = ListCounter::snapshot(&c.replicas, &resources).await;
    for (i, name) in [(0, "w3"), (1, "w4")] {
        c.replicas[i].restart().await;
        c.replicas[1 - i].kubectl_stdin_ok(&["apply", "-f", "-"], &widget(name, 7));
        handled(&c.replicas[1 - i], &op, name).await;
    }
    for resource in resources {
        wait_watched(&c.replicas, resource, 1, SETTLE).await;
    }
    let lists = lists.since(&c.replicas, &[0, 1]).await;
    assert_no_relist_storm(&lists, || format!("; operator log:\n{}", op.log()));

    // Deletion: kopf's finalizer holds w1 until the delete handler ran,
    // then the garbage collector removes the owned ConfigMap.
    let k = &c.replicas[1];
    delete_with_cleanup(k, NS, ("widget", "w1", "widget"), "w2", SETTLE).await;
    assert!(!op.exited(), "kopf exited; log:\n{}", op.log());
    drop(op);
    drop(c);
}

//! An operator on @kubernetes/client-node (tests/clients/node/operator.mjs,
//! the version its package-lock.json pins, installed by
//! tools/install-test-deps.sh) against two replicas behind HAProxy
//! (issue 33): two processes, each with an informer (list, then watch with
//! bookmarks) on labelled ConfigMaps and a loop elected on a Lease; the
//! leader annotates each ConfigMap with its identity.
//!
//! - One leader at a time: the first process takes the Lease, the second
//!   follows, and only the leader's identity lands on the ConfigMaps.
//! - Each replica restarted in place in turn: the informers watch again
//!   without a relist storm, and the leader goes on handling ConfigMaps.
//! - The leader killed (no release): the follower takes the Lease once it
//!   expires and handles what comes next.
//!
//! Every outcome is read with kubectl.

use e2e::cluster::Cluster;
use e2e::operator::{lb_kubeconfig, wait_watched, ListCounter, Process};
use e2e::Server;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const NS: &str = "ops-node";
const LEASE: &str = "node-operator";
const ANNOTATION: &str = "ops.example.com/handled-by";
const SETTLE: Duration = Duration::from_secs(30);

fn node_dir() -> String {
    format!("{}/clients/node", env!("CARGO_MANIFEST_DIR"))
}

/// The client installed from the lock file, or a failure that says how.
fn require_client() {
    let installed =
        Path::new(&node_dir()).join("node_modules/@kubernetes/client-node/package.json");
    assert!(
        installed.exists(),
        "@kubernetes/client-node is not installed in {}: run tools/install-test-deps.sh (make test does)",
        node_dir()
    );
}

fn start_operator(kubeconfig: &Path, identity: &str, dir: &Path) -> Process {
    let mut cmd = Command::new("node");
    cmd.current_dir(node_dir())
        .arg("operator.mjs")
        .arg(identity)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST");
    Process::spawn(cmd, &dir.join(format!("{identity}.log")))
}

fn input(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {NS}, labels: {{ops.example.com/input: \"true\"}}}}\ndata: {{k: v}}\n"
    )
}

/// `kubectl get -o json` of one named object in `NS`, if it exists.
fn get(k: &Server, args: &[&str]) -> Option<Value> {
    e2e::operator::get_json(k, NS, args)
}

fn holder(k: &Server) -> Option<String> {
    let lease = get(k, &["lease", LEASE])?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}

/// `eventually` that shows the operators' logs when it times out.
async fn until<T>(ops: &[&Process], what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = ops.iter().map(|p| p.log()).collect();
            panic!(
                "timed out after {SETTLE:?} waiting for {what}; operator logs:\n{}",
                logs.join("\n---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until ConfigMap `name` carries the annotation, and returns who
/// handled it.
async fn handled_by(k: &Server, name: &str, ops: &[&Process]) -> String {
    until(ops, &format!("{name} to be handled"), || {
        let cm = get(k, &["configmap", name])?;
        cm["metadata"]["annotations"][ANNOTATION]
            .as_str()
            .map(str::to_string)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_informer_and_lease_election_through_replica_restarts() {
    require_client();
    let mut c = Cluster::start(2, &[]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = lb_kubeconfig(&c, dir.path());
    c.replicas[1].kubectl_ok(&["create", "namespace", NS]);

    let a = start_operator(&kubeconfig, "a", dir.path());
    until(&[&a], "a to take the lease", || {
        (holder(&c.replicas[1]).as_deref() == Some("a")).then_some(())
    })
    .await;
    let b = start_operator(&kubeconfig, "b", dir.path());
    until(&[&b], "b to list", || {
        b.log().contains("listed").then_some(())
    })
    .await;

    c.replicas[1].kubectl_stdin_ok(&["apply", "-f", "-"], &input("in1"));
    assert_eq!(handled_by(&c.replicas[1], "in1", &[&a, &b]).await, "a");
    assert!(!b.log().contains("leading"), "b led beside a:\n{}", b.log());

    // Each replica restarted in place in turn under both processes.
    let lists = ListCounter::snapshot(&c.replicas, &["configmaps"]).await;
    for (i, name) in [(0, "in2"), (1, "in3")] {
        c.replicas[i].restart().await;
        let k = &c.replicas[1 - i];
        k.kubectl_stdin_ok(&["apply", "-f", "-"], &input(name));
        let by = handled_by(k, name, &[&a, &b]).await;
        assert!(by == "a" || by == "b", "{name} handled by {by}");
    }
    wait_watched(&c.replicas, "configmaps", 2, SETTLE).await;
    for (resource, n) in lists.since(&c.replicas, &[0, 1]).await {
        eprintln!("{n} LISTs of {resource} across the restarts (two informers)");
        assert!(
            n <= 4,
            "{n} LISTs of {resource} after the restarts (a relist storm); logs:\n{}\n---\n{}",
            a.log(),
            b.log()
        );
    }

    // The leader dies without releasing the lease: the follower takes it
    // once it expires, and handles what comes next.
    let k = &c.replicas[1];
    let before = get(k, &["lease", LEASE]).expect("lease");
    let leader = before["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut dying, survivor) = if leader == "a" { (a, b) } else { (b, a) };
    let next = if leader == "a" { "b" } else { "a" };
    dying.kill();
    until(&[&survivor], &format!("{next} to take the lease"), || {
        (holder(k).as_deref() == Some(next)).then_some(())
    })
    .await;
    let after = get(k, &["lease", LEASE]).expect("lease");
    assert_eq!(
        after["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
        before["spec"]["leaseTransitions"].as_i64().unwrap_or(0) + 1,
        "{after}"
    );
    k.kubectl_stdin_ok(&["apply", "-f", "-"], &input("in4"));
    assert_eq!(handled_by(k, "in4", &[&survivor]).await, next);
    // What was handled before keeps its first handler.
    assert_eq!(handled_by(k, "in1", &[&survivor]).await, "a");
}

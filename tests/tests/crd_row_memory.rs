//! Registry rows of custom resources own their data: a CRD that is
//! created, changed and deleted leaves nothing behind. The server's RSS
//! after 1,000 CRDs have each been created, updated (a new schema, so new
//! rows, validators and CEL programs) and deleted returns to within 10% of
//! where it was before them (`CRD_MEMORY_CRDS` sets the count: CI runs
//! 300, `make crd-memory` the full 1,000).
//!
//! Two checks. Every row built for the CRDs is freed
//! (`apiserver_custom_resource_rows` returns to 0: nothing still holds a
//! deleted CRD's schema, validators or CEL programs). And the process's
//! RSS returns to within 10% of its baseline.
//!
//! The baseline is read after a warm-up round of the same size: what a
//! process makes once (the OpenAPI documents of the built-in kinds, the CEL
//! environment) and the allocator's high-water mark for 1,000 CRDs alive
//! at once (mimalloc keeps the pages of a peak it may reuse; measured, a
//! second round of the same size moved RSS by -1% to +8%, a round larger than the
//! warm-up adds its own larger peak) are not leaks. A server that keeps
//! what each definition built grows with every round (this one did: the
//! rows were leaked, the garbage collector kept watching deleted CRDs'
//! collections, and OpenAPI kept the documents of the last CRDs after the
//! last was deleted) and fails both checks.

use e2e::{eventually_async, Server};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CONCURRENCY: usize = 8;
/// CRDs per round: 1,000 (the figure, `make crd-memory`, about
/// four minutes in a debug build); CI's `make test` runs a short version
/// (`CRD_MEMORY_CRDS=300`).
fn crds() -> usize {
    std::env::var("CRD_MEMORY_CRDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}
const SETTLE: Duration = Duration::from_secs(5);

fn group(round: &str, i: usize) -> String {
    format!("g{i:04}.{round}.rows.example.com")
}

/// A CRD with a schema of a few dozen properties and two CEL rules;
/// `revision` changes the schema (a new property and rule message).
fn crd(round: &str, i: usize, revision: u32) -> Value {
    let mut props = serde_json::Map::new();
    for p in 0..40 {
        props.insert(
            format!("field{p:02}"),
            json!({"type": "string", "maxLength": 64, "description": format!("field {p} of revision {revision}")}),
        );
    }
    props.insert(
        format!("added{revision}"),
        json!({"type": "integer", "minimum": 0}),
    );
    props.insert("replicas".into(), json!({"type": "integer", "minimum": 0}));
    let group = group(round, i);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {
                        "type": "object",
                        "properties": props,
                        "x-kubernetes-validations": [
                            {"rule": "!has(self.replicas) || self.replicas <= 100", "message": format!("at most 100 (revision {revision})")},
                            {"rule": "!has(self.field00) || self.field00 != 'forbidden'"}
                        ]
                    }
                }}}
            }]
        }
    })
}

/// How many groups of `round` discovery lists.
async fn served_groups(server: &Server, round: &str) -> usize {
    let r = server.request("GET", "/apis", &[], b"").await;
    let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    let suffix = format!(".{round}.rows.example.com");
    v["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter(|g| g["name"].as_str().is_some_and(|n| n.ends_with(&suffix)))
                .count()
        })
        .unwrap_or(0)
}

async fn each(n: usize, f: impl Fn(usize) -> futures_util::future::BoxFuture<'static, ()>) {
    stream::iter(0..n)
        .map(f)
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
}

/// Creates `n` CRDs, waits until all are served, updates each and waits
/// until the new schema is published, deletes each and waits until none
/// is served.
async fn round(server: &Server, round: &'static str, n: usize) {
    let addr = server.addr().to_string();
    each(n, |i| {
        let addr = addr.clone();
        Box::pin(async move {
            let body = crd(round, i, 1).to_string();
            let r = e2e::http_request(
                &addr,
                "POST",
                CRD_PATH,
                &[("content-type", "application/json")],
                body.as_bytes(),
            )
            .await
            .expect("create");
            assert_eq!(r.status, 201, "create {i}: {}", r.text());
        })
    })
    .await;
    eventually_async("every CRD served", Duration::from_secs(300), || async {
        (served_groups(server, round).await == n).then_some(())
    })
    .await;
    each(n, |i| {
        let addr = addr.clone();
        Box::pin(async move {
            let name = format!("gadgets.{}", group(round, i));
            let path = format!("{CRD_PATH}/{name}");
            let patch = json!({"spec": crd(round, i, 2)["spec"]}).to_string();
            let r = e2e::http_request(
                &addr,
                "PATCH",
                &path,
                &[("content-type", "application/merge-patch+json")],
                patch.as_bytes(),
            )
            .await
            .expect("update");
            assert_eq!(r.status, 200, "update {i}: {}", r.text());
        })
    })
    .await;
    // The new rows are installed: each version's OpenAPI shows the new field.
    for i in (0..n).step_by(n / 10) {
        let path = format!("/openapi/v3/apis/{}/v1", group(round, i));
        eventually_async(
            "the updated schema published",
            Duration::from_secs(120),
            || {
                let path = path.clone();
                async move {
                    let r = server.request("GET", &path, &[], b"").await;
                    (r.status == 200 && r.text().contains("added2")).then_some(())
                }
            },
        )
        .await;
    }
    each(n, |i| {
        let addr = addr.clone();
        Box::pin(async move {
            let path = format!("{CRD_PATH}/gadgets.{}", group(round, i));
            let r = e2e::http_request(&addr, "DELETE", &path, &[], b"")
                .await
                .expect("delete");
            assert_eq!(r.status, 200, "delete {i}: {}", r.text());
        })
    })
    .await;
    eventually_async(
        "no CRD of the round served",
        Duration::from_secs(300),
        || async { (served_groups(server, round).await == 0).then_some(()) },
    )
    .await;
    // Every reader of the rows has moved on: discovery and OpenAPI rebuilt
    // without them.
    let r = server.request("GET", "/openapi/v3", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(!r.text().contains(&format!(".{round}.rows.example.com")));
    let r = server.request("GET", "/openapi/v2", &[], b"").await;
    assert_eq!(r.status, 200);
}

/// A gauge of the server's `/metrics`.
async fn metric(server: &Server, name: &str) -> f64 {
    let r = server.request("GET", "/metrics", &[], b"").await;
    r.text()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
}

/// Every custom resource row built is freed: nothing holds a deleted
/// CRD's rows.
async fn rows_freed(server: &Server) {
    eventually_async(
        "every row of a deleted CRD freed",
        Duration::from_secs(60),
        || async { (metric(server, "apiserver_custom_resource_rows").await == 0.0).then_some(()) },
    )
    .await;
}

async fn report(server: &Server, when: &str) {
    let mut line = format!("{when}: RSS {} KiB", rss_kib(server.pid()));
    for m in [
        "apiserver_custom_resource_rows",
        "apiserver_watch_cache_window_bytes",
        "apiserver_watch_cache_objects",
        "apiserver_registered_watchers",
    ] {
        line += &format!(", {m} {}", metric(server, m).await);
    }
    eprintln!("{line}");
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_returns_after_a_thousand_crds_come_and_go() {
    // The watch cache's window keeps every change for two minutes (up to
    // 256 MiB); bounded here to 4 MiB so that what it holds of the CRDs'
    // own changes stays out of the figure.
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let server = Server::start_on(&etcd.endpoint(), &["--watch-cache-max-bytes=4194304"]).await;
    report(&server, "start").await;
    let n = crds();
    round(&server, "warm", n).await;
    rows_freed(&server).await;
    tokio::time::sleep(SETTLE).await;
    report(&server, "after the warm-up").await;
    let before = rss_kib(server.pid());
    round(&server, "main", n).await;
    rows_freed(&server).await;
    tokio::time::sleep(SETTLE).await;
    report(&server, "after the round").await;
    let after = rss_kib(server.pid());
    eprintln!(
        "RSS before {n} CRDs: {before} KiB; after they came and went: {after} KiB ({:+.1}%)",
        (after as f64 - before as f64) * 100.0 / before as f64
    );
    assert!(
        after as f64 <= before as f64 * 1.10,
        "RSS grew from {before} KiB to {after} KiB over {n} CRDs created, updated and deleted"
    );
}

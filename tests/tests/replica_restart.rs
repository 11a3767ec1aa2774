//! Replicas of one cluster (two servers on the same etcd and the same
//! `--etcd-prefix`) and watches that outlive a replica.
//!
//! - A client watching on replica A when A is killed (SIGKILL) resumes on
//!   replica B from the last resourceVersion it saw, while writes go on;
//!   what it received from both equals etcd's history of the watched
//!   prefix: no gap, no duplicate, no 410.
//! - A replica started after the writes serves a watch from a
//!   resourceVersion older than its own start (its cache backfills the
//!   event window from etcd's history).
//!
//! The watches are raw HTTP (`?watch=1&resourceVersion=N&
//! allowWatchBookmarks=true`) read line by line as they arrive.

use e2e::watch::{self, Line, Seen};
use e2e::{http_request, unique_prefix, Server};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;
use watchcache::testing::TestEtcd;

const NAMESPACE: &str = "replicas";
/// Names the writer cycles through.
const NAMES: u64 = 12;
/// How long a watch may take to deliver what the test waits for.
const DELIVERY: Duration = Duration::from_secs(30);

/// Opens a watch on `server` and forwards each complete line as it
/// arrives; the channel closes when the connection does (a killed server
/// leaves at most a partial line, which is dropped).
async fn open_watch(server: &Server, query: &str) -> mpsc::UnboundedReceiver<Line> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps?{query}");
    watch::open(server.addr(), &path)
        .await
        .unwrap_or_else(|e| panic!("watch {path}: {e}"))
}

/// What a client collected from one or more watch streams.
#[derive(Debug, Default)]
struct Collected {
    events: Vec<Seen>,
    /// The newest resourceVersion received (event or bookmark).
    last: i64,
    errors: Vec<Value>,
}

impl Collected {
    fn take(&mut self, line: Line) {
        match line {
            Line::Event(seen) => {
                self.last = self.last.max(seen.revision);
                self.events.push(seen);
            }
            Line::Bookmark(revision) => self.last = self.last.max(revision),
            Line::Error(status) => self.errors.push(status),
        }
    }

    /// Takes lines until `done(self)` holds; fails after `DELIVERY`.
    async fn until(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<Line>,
        what: &str,
        done: impl Fn(&Collected) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + DELIVERY;
        while !done(self) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(line)) => self.take(line),
                Ok(None) => panic!("the watch ended before {what}: {self:?}"),
                Err(_) => panic!("timed out waiting for {what}: {self:?}"),
            }
        }
    }

    /// Takes every line until the stream ends (the server died).
    async fn drain(&mut self, rx: &mut mpsc::UnboundedReceiver<Line>) {
        let deadline = tokio::time::Instant::now() + DELIVERY;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(line)) => self.take(line),
                Ok(None) => return,
                Err(_) => panic!("the watch of a killed server did not end"),
            }
        }
    }
}

async fn request(addr: &str, method: &str, path: &str, body: &Value) -> Value {
    let body = serde_json::to_vec(body).expect("body");
    let headers = [("Content-Type", "application/json")];
    let resp = http_request(addr, method, path, &headers, &body)
        .await
        .expect("request");
    assert!(
        (200..300).contains(&resp.status),
        "{method} {path}: {} {}",
        resp.status,
        resp.text()
    );
    serde_json::from_slice(&resp.body).expect("JSON response")
}

fn revision_of(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

async fn create_namespace(server: &Server) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    request(server.addr(), "POST", "/api/v1/namespaces", &ns).await;
}

/// The resourceVersion of a consistent list of the watched collection.
async fn list_revision(server: &Server) -> i64 {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let resp = server.http("GET", &path, &[], b"").await.expect("list");
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list: Value = serde_json::from_slice(&resp.body).expect("list JSON");
    revision_of(&list)
}

/// Creates, updates and deletes ConfigMaps through the server at `addr`:
/// write `i` of `from..to` picks its name and operation from `i` (each name
/// is created, updated twice and deleted, again and again). Returns the
/// revision of the last write, which must not be a delete (a delete
/// answers a Status without one).
async fn write(addr: &str, from: u64, to: u64) -> i64 {
    let collection = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let round = |i: u64| (i / NAMES) % 4;
    assert_ne!(round(to - 1), 3, "write ranges end with a create or update");
    let mut last = 0;
    for i in from..to {
        let name = format!("cm-{}", i % NAMES);
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {"write": i.to_string()},
        });
        let item = format!("{collection}/{name}");
        last = match round(i) {
            0 => revision_of(&request(addr, "POST", &collection, &object).await),
            1 | 2 => revision_of(&request(addr, "PUT", &item, &object).await),
            _ => {
                request(addr, "DELETE", &item, &json!({})).await;
                last
            }
        };
    }
    last
}

/// etcd's history of the watched collection after `after` up to `until`
/// (inclusive), as a watcher must see it.
async fn etcd_history(etcd: &TestEtcd, prefix: &str, after: i64, until: i64) -> Vec<Seen> {
    let key = format!("{prefix}/configmaps/{NAMESPACE}/");
    watch::etcd_history(&[etcd.endpoint()], &key, after, until, DELIVERY).await
}

fn watch_query(from: i64) -> String {
    format!("watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=120")
}

#[tokio::test]
async fn a_watch_resumes_on_another_replica_after_a_crash() {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let mut a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    create_namespace(&b).await;
    let start = list_revision(&b).await;

    // Watch on A; the writes go through B (A learns them from etcd).
    let mut on_a = open_watch(&a, &watch_query(start)).await;
    let mut seen = Collected::default();
    write(b.addr(), 0, 60).await;
    seen.until(&mut on_a, "the first writes on A", |c| c.events.len() >= 60)
        .await;

    // Writes go on while A dies mid-stream.
    let writer = {
        let b = b.addr().to_string();
        tokio::spawn(async move { write(&b, 60, 228).await })
    };
    seen.until(&mut on_a, "some concurrent writes on A", |c| {
        c.events.len() >= 80
    })
    .await;
    a.kill();
    seen.drain(&mut on_a).await;
    assert!(seen.errors.is_empty(), "errors on A: {:?}", seen.errors);
    let resumed_from = seen.last;
    let on_a_count = seen.events.len();

    // Resume on B from the last resourceVersion the client saw.
    let mut on_b = open_watch(&b, &watch_query(resumed_from)).await;
    let last_write = writer.await.expect("writer");
    seen.until(&mut on_b, "every write on B", |c| {
        !c.errors.is_empty() || c.last >= last_write
    })
    .await;
    assert!(
        seen.errors.is_empty(),
        "resuming on B from {resumed_from} failed: {:?}",
        seen.errors
    );

    let history = etcd_history(etcd, &prefix, start, last_write).await;
    assert_eq!(history.len(), 228, "etcd history: {history:?}");
    assert_eq!(
        seen.events, history,
        "A sent {on_a_count} events up to {resumed_from}, then B the rest"
    );
}

/// Starts a replica after 120 writes and watches on it from before them.
/// With `live_write`, one more write follows the replica's start (what a
/// live cluster always has: leases, events) and the watch waits until the
/// replica has applied it.
async fn history_on_a_late_replica(live_write: bool) {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    create_namespace(&a).await;
    let start = list_revision(&a).await;
    let mut last_write = write(a.addr(), 0, 120).await;

    let late = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    if live_write {
        last_write = write(a.addr(), 120, 121).await;
        // A NotOlderThan list waits until the replica has applied it.
        let path = format!(
            "/api/v1/namespaces/{NAMESPACE}/configmaps?resourceVersion={last_write}&resourceVersionMatch=NotOlderThan"
        );
        let resp = late.http("GET", &path, &[], b"").await.expect("list");
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    let mut watch = open_watch(&late, &watch_query(start)).await;
    let mut seen = Collected::default();
    seen.until(&mut watch, "the history on the late replica", |c| {
        !c.errors.is_empty() || c.last >= last_write
    })
    .await;
    assert!(
        seen.errors.is_empty(),
        "a watch from {start} on a replica started after {last_write}: {:?}",
        seen.errors
    );
    let history = etcd_history(etcd, &prefix, start, last_write).await;
    assert_eq!(history.len(), 120 + usize::from(live_write));
    assert_eq!(seen.events, history);
}

#[tokio::test]
async fn a_replica_started_later_serves_history_from_before_its_start() {
    history_on_a_late_replica(true).await;
}

/// The same on an idle collection: no change follows the replica's start.
#[tokio::test]
async fn an_idle_replica_started_later_serves_history_from_before_its_start() {
    history_on_a_late_replica(false).await;
}

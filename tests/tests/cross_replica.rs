//! Cross-replica correctness: three replicas of one cluster (one etcd, one
//! `--etcd-prefix`), each with its own watch cache that learns other
//! replicas' writes from etcd a little later.
//!
//! - A write through replica A is visible at once to a consistent get and
//!   a consistent list through replica B.
//! - A list on A followed by a watch on B from the list's resourceVersion
//!   misses nothing (and repeats nothing) while writes go on.
//! - A NotOlderThan read on B with A's resourceVersion waits for it
//!   instead of serving older data.

use e2e::watch::{self, Line, Seen};
use e2e::{http_request, unique_prefix, HttpResponse, Server};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchcache::testing::TestEtcd;

const NAMESPACE: &str = "cross";
/// How long a watch may take to deliver what the test waits for.
const DELIVERY: Duration = Duration::from_secs(30);

fn collection() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps")
}

async fn send(addr: &str, method: &str, path: &str, body: Option<&Value>) -> HttpResponse {
    let bytes = body.map(|b| serde_json::to_vec(b).expect("body"));
    let headers: &[(&str, &str)] = if bytes.is_some() {
        &[("Content-Type", "application/json")]
    } else {
        &[]
    };
    let call = http_request(addr, method, path, headers, bytes.as_deref().unwrap_or(b""));
    tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{method} {path} hung"))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A request that must answer `code`; returns the JSON body.
async fn expect(addr: &str, code: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let resp = send(addr, method, path, body).await;
    assert_eq!(resp.status, code, "{method} {path}: {}", resp.text());
    serde_json::from_slice(&resp.body).expect("JSON body")
}

fn revision_of(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

fn config_map(name: &str, write: u64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {"write": write.to_string()},
    })
}

/// Three replicas of one new cluster on the shared etcd, and the namespace.
async fn replicas() -> (Vec<Server>, String) {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await);
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    expect(
        servers[0].addr(),
        201,
        "POST",
        "/api/v1/namespaces",
        Some(&ns),
    )
    .await;
    (servers, prefix)
}

/// The item named `name` in a list, if there.
fn item<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["metadata"]["name"] == name)
}

/// How a replica is asked for what another just wrote.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Consistent get and list (no resourceVersion).
    Consistent,
    /// Get and list with the write's resourceVersion, NotOlderThan.
    NotOlderThan,
}

/// Rounds of concurrent writers, each writing its own ConfigMap through
/// one replica and reading it back at once through the next. The objects
/// are large and written in bursts so that the reading replica's watch
/// cache is still applying the burst when the read arrives: a replica that
/// served its cache without waiting would answer older data.
async fn write_here_read_there(read: Read) {
    const WRITERS: usize = 12;
    const ROUNDS: usize = 6;
    let (servers, _) = replicas().await;
    let addrs: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let pad = "x".repeat(48 << 10);
    for round in 0..ROUNDS {
        let mut tasks = Vec::new();
        for k in 0..WRITERS {
            let a = addrs[(k + round) % 3].clone();
            let b = addrs[(k + round + 1) % 3].clone();
            let pad = pad.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("cm-{k}");
                let path = format!("{}/{name}", collection());
                let write = (round * WRITERS + k) as u64;
                let mut body = config_map(&name, write);
                body["data"]["pad"] = json!(pad);
                let written = if round == 0 {
                    expect(&a, 201, "POST", &collection(), Some(&body)).await
                } else {
                    expect(&a, 200, "PUT", &path, Some(&body)).await
                };
                let rv = revision_of(&written);
                let what = format!("{read:?} read of {name} on {b} after its write at {rv} on {a}");

                let query = match read {
                    Read::Consistent => String::new(),
                    Read::NotOlderThan => format!("resourceVersion={rv}"),
                };
                let got = expect(&b, 200, "GET", &format!("{path}?{query}"), None).await;
                assert_eq!(revision_of(&got), rv, "get: {what}");
                assert_eq!(got["data"]["write"], write.to_string(), "get: {what}");

                let query = match read {
                    Read::Consistent => String::new(),
                    Read::NotOlderThan => {
                        format!("&resourceVersion={rv}&resourceVersionMatch=NotOlderThan")
                    }
                };
                let list_path = format!(
                    "{}?fieldSelector=metadata.name%3D{name}{query}",
                    collection()
                );
                let list = expect(&b, 200, "GET", &list_path, None).await;
                assert!(
                    revision_of(&list) >= rv,
                    "list older than the write: {what}"
                );
                let listed = item(&list, &name).unwrap_or_else(|| panic!("not listed: {what}"));
                assert_eq!(revision_of(listed), rv, "list: {what}");
            }));
        }
        for task in tasks {
            task.await.expect("writer");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_reads_on_one_replica_see_writes_made_on_another_at_once() {
    write_here_read_there(Read::Consistent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_older_than_on_one_replica_waits_for_a_revision_from_another() {
    write_here_read_there(Read::NotOlderThan).await;
}

/// Writes `from..to` through `server`: name `cm-(i % 8)`, created, updated,
/// deleted in turn. Returns the revision of the last write (not a delete).
async fn write(server: &str, from: u64, to: u64, progress: &AtomicU64) -> i64 {
    let round = |i: u64| (i / 8) % 3;
    assert_ne!(round(to - 1), 2, "write ranges end with a create or update");
    let mut last = 0;
    for i in from..to {
        let name = format!("cm-{}", i % 8);
        let path = format!("{}/{name}", collection());
        let body = config_map(&name, i);
        last = match round(i) {
            0 => revision_of(&expect(server, 201, "POST", &collection(), Some(&body)).await),
            1 => revision_of(&expect(server, 200, "PUT", &path, Some(&body)).await),
            _ => {
                expect(server, 200, "DELETE", &path, None).await;
                last
            }
        };
        progress.store(i + 1, Ordering::Release);
    }
    last
}

/// The names and revisions a list shows.
fn listed(list: &Value) -> BTreeMap<String, i64> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            let name = i["metadata"]["name"].as_str().expect("name").to_string();
            (name, revision_of(i))
        })
        .collect()
}

/// The state of etcd's `key_prefix` at `revision`, as names and revisions.
async fn etcd_state(key_prefix: &str, revision: i64) -> BTreeMap<String, i64> {
    let etcd = TestEtcd::shared().await;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("etcd");
    let options = etcd_client::GetOptions::new()
        .with_prefix()
        .with_revision(revision);
    let resp = client
        .get(key_prefix, Some(options))
        .await
        .expect("etcd get");
    resp.kvs()
        .iter()
        .map(|kv| {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            (
                key.trim_start_matches(key_prefix).to_string(),
                kv.mod_revision(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_list_on_one_replica_then_a_watch_on_another_misses_nothing() {
    let (servers, prefix) = replicas().await;
    let [a, b, c] = [servers[0].addr(), servers[1].addr(), servers[2].addr()];
    let progress = Arc::new(AtomicU64::new(0));
    write(c, 0, 16, &progress).await;
    // Lists on A and watches on B from their revisions while C writes.
    let writer = {
        let c = c.to_string();
        let progress = Arc::clone(&progress);
        tokio::spawn(async move { write(&c, 16, 160, &progress).await })
    };
    let mut watches = Vec::new();
    while !writer.is_finished() || watches.is_empty() {
        let list = expect(a, 200, "GET", &collection(), None).await;
        let from = revision_of(&list);
        let path = format!(
            "{}?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=120",
            collection()
        );
        let rx = tokio::time::timeout(DELIVERY, watch::open(b, &path))
            .await
            .unwrap_or_else(|_| panic!("watch on B from {from} did not answer"))
            .unwrap_or_else(|e| panic!("watch on B from {from}: {e}"));
        watches.push((list, from, rx));
        // The next list a dozen writes later.
        let next = 16 + 12 * watches.len() as u64;
        e2e::eventually("more writes", DELIVERY, || {
            (writer.is_finished() || progress.load(Ordering::Acquire) >= next).then_some(())
        })
        .await;
    }
    let last = writer.await.expect("writer");
    assert!(watches.len() >= 3, "the writer finished before the lists");
    let key_prefix = format!("{prefix}/configmaps/{NAMESPACE}/");
    let etcd = TestEtcd::shared().await.endpoint();
    for (list, from, mut rx) in watches {
        // The list on A is the state at its revision.
        assert_eq!(listed(&list), etcd_state(&key_prefix, from).await);
        // The watch on B carries every change after it, once.
        let mut events: Vec<Seen> = Vec::new();
        let mut seen = from;
        let deadline = tokio::time::Instant::now() + DELIVERY;
        while seen < last {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Line::Event(e))) => {
                    seen = e.revision;
                    events.push(e);
                }
                Ok(Some(Line::Bookmark(rv))) => seen = seen.max(rv),
                Ok(Some(Line::Error(status))) => panic!("watch from {from}: {status}"),
                Ok(None) => panic!("watch from {from} ended at {seen}"),
                Err(_) => panic!("watch from {from} stalled at {seen} before {last}"),
            }
        }
        let history = watch::etcd_history(
            std::slice::from_ref(&etcd),
            &key_prefix,
            from,
            last,
            DELIVERY,
        )
        .await;
        assert_eq!(events, history, "watch on B from A's list at {from}");
    }
}

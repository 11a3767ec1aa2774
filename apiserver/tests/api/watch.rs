//! Watches: events after a resourceVersion as JSON lines, the initial state,
//! selectors on events, `timeoutSeconds` and the final bookmark before it,
//! and streaming lists (`sendInitialEvents=true`) not older than a
//! resourceVersion.

use crate::common::{configmap, labelled_configmap, read_lines, rv, Api};
use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use watchcache::Storage;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WAIT: Duration = Duration::from_secs(10);

fn summary(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn watch_from_a_resource_version() {
    let api = Api::new("watchrv").await;
    let a = api.create(CMS, &configmap("a", &[])).await;
    let start = rv(&a);
    api.create(CMS, &configmap("b", &[])).await;
    let a2 = api
        .patch(
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            &json!({"data": {"x": "y"}}),
        )
        .await
        .body;
    api.delete(&format!("{CMS}/b")).await;

    let resp = api
        .send(
            "GET",
            &format!("{CMS}?watch=1&resourceVersion={start}"),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let (events, _) = read_lines(resp, 3, WAIT).await;
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")])
    );
    assert_eq!(events[1]["object"], a2);
    let revs: Vec<i64> = events
        .iter()
        .map(|e| rv(&e["object"]).parse().unwrap_or(0))
        .collect();
    assert!(revs.windows(2).all(|w| w[0] < w[1]), "{revs:?}");
    assert!(revs[0] > start.parse().unwrap_or(i64::MAX));
}

#[tokio::test]
async fn watch_sees_live_changes_and_filters_by_label() {
    let api = Api::new("watchlive").await;
    let list = api.must_get(CMS).await;
    let resp = api
        .send(
            "GET",
            &format!(
                "{CMS}?watch=true&resourceVersion={}&labelSelector=app%3Dweb",
                rv(&list)
            ),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    api.create(CMS, &labelled_configmap("other", &[("app", "db")]))
        .await;
    api.create(CMS, &labelled_configmap("web", &[("app", "web")]))
        .await;
    // Stops matching: sent as DELETED.
    api.patch(
        &format!("{CMS}/web"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    let (events, _) = read_lines(resp, 2, WAIT).await;
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "web"), ("DELETED", "web")])
    );
}

#[tokio::test]
async fn watch_without_resource_version_starts_with_the_state() {
    let api = Api::new("watchinit").await;
    api.create(CMS, &configmap("a", &[])).await;
    api.create(CMS, &configmap("b", &[])).await;
    let resp = api
        .send("GET", &format!("{CMS}?watch=1"), &[], Body::empty())
        .await;
    let (events, _) = read_lines(resp, 2, WAIT).await;
    assert_eq!(summary(&events), pairs(&[("ADDED", "a"), ("ADDED", "b")]));

    // One object through a name field selector.
    let resp = api
        .send(
            "GET",
            &format!("{CMS}?watch=1&fieldSelector=metadata.name%3Db"),
            &[],
            Body::empty(),
        )
        .await;
    let (events, _) = read_lines(resp, 1, WAIT).await;
    assert_eq!(summary(&events), pairs(&[("ADDED", "b")]));
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let api = Api::new("watchtimeout").await;
    let a = api.create(CMS, &configmap("a", &[])).await;
    let started = Instant::now();
    let resp = api
        .send(
            "GET",
            &format!("{CMS}?watch=1&resourceVersion={}&timeoutSeconds=1", rv(&a)),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let (events, ended) = read_lines(resp, usize::MAX, WAIT).await;
    assert!(ended, "the stream ended");
    assert!(events.is_empty(), "{events:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test]
async fn watch_bad_parameters() {
    let api = Api::new("watchbad").await;
    let r = api.get(&format!("{CMS}?watch=1&resourceVersion=abc")).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api
        .call(
            "GET",
            &format!("{CMS}?watch=1"),
            &[("accept", "application/yaml")],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api
        .get(&format!("{CMS}?watch=1&fieldSelector=data.x%3Dy"))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
}

/// A streaming list (`sendInitialEvents=true`) of configmaps in `default`
/// not older than `rv` ("" = unset), with bookmarks.
fn streaming_list(rv: &str) -> String {
    let mut path = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    if !rv.is_empty() {
        path.push_str(&format!("&resourceVersion={rv}"));
    }
    path
}

fn revision(v: &Value) -> i64 {
    rv(v).parse().unwrap_or(0)
}

/// The bookmark that ends the initial state of a streaming list.
fn assert_initial_end(event: &Value) {
    assert_eq!(event["type"], "BOOKMARK", "{event}");
    assert_eq!(
        event["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{event}"
    );
    assert_eq!(event["object"]["kind"], "ConfigMap", "{event}");
    assert_eq!(event["object"]["apiVersion"], "v1", "{event}");
}

/// With bookmarks allowed, a watch that reaches its timeout ends with a
/// BOOKMARK at the newest revision it has reached, so the client resumes
/// from there; without, it just ends.
#[tokio::test]
async fn watch_ends_with_a_bookmark_at_its_timeout() {
    let api = Api::new("watchfinal").await;
    let a = api.create(CMS, &configmap("a", &[])).await;
    let b = api.create(CMS, &configmap("b", &[])).await;
    let from_a = format!(
        "{CMS}?watch=1&resourceVersion={}&timeoutSeconds=1&allowWatchBookmarks=true",
        rv(&a)
    );
    let resp = api.send("GET", &from_a, &[], Body::empty()).await;
    let (events, ended) = read_lines(resp, usize::MAX, WAIT).await;
    assert!(ended, "the stream ended");
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "b"), ("BOOKMARK", "")]),
        "{events:?}"
    );
    assert_eq!(rv(&events[1]["object"]), rv(&b));
    assert_eq!(events[1]["object"]["kind"], "ConfigMap");
    assert!(events[1]["object"]["metadata"]["annotations"].is_null());

    // Nothing matched: the bookmark carries where the watch started.
    let resp = api
        .send(
            "GET",
            &format!("{from_a}&labelSelector=app%3Dnone"),
            &[],
            Body::empty(),
        )
        .await;
    let (events, ended) = read_lines(resp, usize::MAX, WAIT).await;
    assert!(ended);
    assert_eq!(summary(&events), pairs(&[("BOOKMARK", "")]));
    assert!(revision(&events[0]["object"]) >= revision(&a), "{events:?}");

    // A streaming list: the initial state, its end, then the final bookmark.
    let resp = api
        .send(
            "GET",
            &format!("{}&timeoutSeconds=1", streaming_list("")),
            &[],
            Body::empty(),
        )
        .await;
    let (events, ended) = read_lines(resp, usize::MAX, WAIT).await;
    assert!(ended);
    assert_eq!(
        summary(&events),
        pairs(&[
            ("ADDED", "a"),
            ("ADDED", "b"),
            ("BOOKMARK", ""),
            ("BOOKMARK", "")
        ])
    );
    assert_initial_end(&events[2]);
    assert_eq!(rv(&events[3]["object"]), rv(&events[2]["object"]));
}

/// Streaming lists from the watch cache: rv="0" is the cache's state as it
/// is (no quorum read, no wait); rv=N a state not older than N (the cache
/// waits for N, then etcd answers); beyond etcd's revision an ERROR event
/// with the 504 "Too large resource version" Status.
#[tokio::test]
async fn streaming_list_not_older_than_a_resource_version() {
    let api = Api::new("watchlist").await;
    let cache = api.state.cache.clone().expect("watch cache");
    let a = api.create(CMS, &configmap("a", &[])).await;
    let resp = api
        .send("GET", &streaming_list(""), &[], Body::empty())
        .await;
    let (events, _) = read_lines(resp, 2, WAIT).await;
    assert_eq!(summary(&events), pairs(&[("ADDED", "a"), ("BOOKMARK", "")]));
    assert_initial_end(&events[1]);

    // The cache stops following etcd; b is written behind its back.
    cache.hold_etcd_watch(true);
    let mut b = configmap("b", &[]);
    b["metadata"]["namespace"] = json!("default");
    let key = format!("{}/configmaps/default/b", api.state.prefix);
    let b = cache.store().create(&key, &b).await.expect("create b");

    // rv="0": served at once from the cache's state, which has a, not b.
    let before = cache.stats();
    let resp = api
        .send("GET", &streaming_list("0"), &[], Body::empty())
        .await;
    let (events, _) = read_lines(resp, 2, WAIT).await;
    assert_eq!(summary(&events), pairs(&[("ADDED", "a"), ("BOOKMARK", "")]));
    assert_initial_end(&events[1]);
    let at = revision(&events[1]["object"]);
    assert!(at >= revision(&a) && at < b.revision, "{at}");
    let after = cache.stats();
    assert_eq!(after.etcd_reads, before.etcd_reads, "served from memory");
    assert_eq!(after.consistent_fallbacks, before.consistent_fallbacks);

    // rv=b: the cache cannot reach it; etcd serves a state not older.
    let resp = api
        .send(
            "GET",
            &streaming_list(&b.revision.to_string()),
            &[],
            Body::empty(),
        )
        .await;
    let (events, _) = read_lines(resp, 3, WAIT).await;
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", "")])
    );
    assert_initial_end(&events[2]);
    assert!(revision(&events[2]["object"]) >= b.revision);
    assert!(cache.stats().etcd_reads > after.etcd_reads);

    // A resourceVersion etcd has not reached either.
    let far = b.revision + 1_000_000;
    let resp = api
        .send("GET", &streaming_list(&far.to_string()), &[], Body::empty())
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let (events, ended) = read_lines(resp, usize::MAX, WAIT).await;
    assert!(ended, "the stream ends after the error");
    assert_eq!(events.len(), 1, "{events:?}");
    let status = &events[0]["object"];
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(status["code"], 504, "{status}");
    assert_eq!(status["reason"], "Timeout", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{status}"
    );

    // Following etcd again, the cache serves rv=b itself.
    cache.hold_etcd_watch(false);
    let reads = cache.stats().etcd_reads;
    let resp = api
        .send(
            "GET",
            &streaming_list(&b.revision.to_string()),
            &[],
            Body::empty(),
        )
        .await;
    let (events, _) = read_lines(resp, 3, WAIT).await;
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", "")])
    );
    assert!(revision(&events[2]["object"]) >= b.revision);
    assert_eq!(cache.stats().etcd_reads, reads, "served from memory");
}

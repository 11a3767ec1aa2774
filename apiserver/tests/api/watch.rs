//! Watches: events after a resourceVersion as JSON lines, the initial state,
//! selectors on events, and `timeoutSeconds`.

use crate::common::{configmap, labelled_configmap, read_lines, rv, Api};
use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

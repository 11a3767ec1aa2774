//! Overload protection through the router: past the in-flight limits 429
//! with Retry-After, watches not counted; past the request timeout 504.

mod common;

use apiserver::limits::{Limits, TIMED_OUT, TOO_MANY_REQUESTS};
use apiserver::server::{router, AppState};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use watchcache::testing::TestEtcd;
use watchcache::{Cacher, CacherConfig};

async fn server(name: &str, limits: Limits) -> Router {
    let store = TestEtcd::shared().await.store().await;
    let prefix = common::unique_prefix(name);
    let cache = Cacher::new(
        store.clone(),
        CacherConfig {
            prefix: format!("{prefix}/"),
            ..CacherConfig::default()
        },
    );
    let state = Arc::new(
        AppState::new(Arc::new(store), &prefix)
            .with_cache(cache)
            .with_limits(limits),
    );
    apiserver::bootstrap::run(Arc::clone(&state)).await;
    router(state)
}

async fn send(router: &Router, method: &str, path: &str, body: Body) -> Response {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .expect("request");
    match router.clone().oneshot(req).await {
        Ok(r) => r,
        Err(e) => match e {},
    }
}

/// A request body that does not arrive: its handler waits (holding its
/// slot) until the returned sender is dropped, when the body fails as it
/// does when a client goes away.
fn hanging_body() -> (Body, tokio::sync::oneshot::Sender<()>) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let stream = futures_util::stream::once(async move {
        let _ = rx.await;
        Err::<Bytes, _>(std::io::Error::other("the client went away"))
    });
    (Body::from_stream(stream), tx)
}

async fn json(resp: Response) -> Value {
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// Sends a request that holds a slot, in the background, and gives it time
/// to be admitted.
async fn hold(
    router: &Router,
    method: &'static str,
    path: &'static str,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let r = router.clone();
    let (body, client) = hanging_body();
    let task = tokio::spawn(async move {
        let _ = send(&r, method, path, body).await;
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    (task, client)
}

fn assert_429(code: StatusCode, retry: Option<&str>, body: &Value) {
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(retry, Some("1"));
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["message"], TOO_MANY_REQUESTS);
    assert_eq!(body["code"], 429);
}

#[tokio::test]
async fn mutating_requests_over_the_limit_get_429() {
    let router = server("limit-mut", Limits::new(10, 1, Duration::from_secs(60))).await;
    let held = hold(&router, "POST", "/api/v1/namespaces/default/configmaps").await;
    let cm = serde_json::to_vec(&common::configmap("x", &[("a", "b")])).expect("json");
    let r = send(
        &router,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Body::from(cm.clone()),
    )
    .await;
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let code = r.status();
    assert_429(code, retry.as_deref(), &json(r).await);
    // Reads have their own budget.
    let r = send(
        &router,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Body::empty(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    // Once the slot is free, writes pass again.
    let (task, client) = held;
    drop(client);
    let _ = task.await;
    let mut code = StatusCode::TOO_MANY_REQUESTS;
    for _ in 0..100 {
        code = send(
            &router,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Body::from(cm.clone()),
        )
        .await
        .status();
        if code != StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(code, StatusCode::CREATED);
}

#[tokio::test]
async fn read_only_requests_over_the_limit_get_429_but_watches_pass() {
    let router = server("limit-ro", Limits::new(1, 10, Duration::from_secs(60))).await;
    // GET handlers do not read bodies: hold the read-only slot with a
    // NotOlderThan read of a future revision instead (it waits for it).
    let r = router.clone();
    let held = tokio::spawn(async move {
        let _ = send(
            &r,
            "GET",
            "/api/v1/configmaps?resourceVersion=999999999",
            Body::empty(),
        )
        .await;
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = send(&router, "GET", "/api/v1/namespaces", Body::empty()).await;
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let code = r.status();
    assert_429(code, retry.as_deref(), &json(r).await);
    // Watches are not counted.
    let w = send(
        &router,
        "GET",
        "/api/v1/configmaps?watch=true",
        Body::empty(),
    )
    .await;
    assert_eq!(w.status(), StatusCode::OK);
    // Writes are not affected.
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "limit-ro"}});
    let r = send(
        &router,
        "POST",
        "/api/v1/namespaces",
        Body::from(ns.to_string()),
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    held.abort();
}

#[tokio::test]
async fn requests_past_the_timeout_get_504() {
    let router = server("timeout", Limits::new(10, 10, Duration::from_millis(300))).await;
    let r = send(
        &router,
        "GET",
        "/api/v1/configmaps?resourceVersion=999999999",
        Body::empty(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT);
    let body = json(r).await;
    assert_eq!(body["reason"], "Timeout", "{body}");
    assert_eq!(body["message"], TIMED_OUT);
    assert_eq!(body["code"], 504);
    let (body, _client) = hanging_body();
    let r = send(
        &router,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        body,
    )
    .await;
    assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT);
    // Watches are long-running: no timeout.
    let w = send(
        &router,
        "GET",
        "/api/v1/configmaps?watch=true",
        Body::empty(),
    )
    .await;
    assert_eq!(w.status(), StatusCode::OK);
    let mut body = w.into_body();
    let next = tokio::time::timeout(Duration::from_millis(800), body.frame()).await;
    // No frame and no end within the timeout: the stream is still open.
    assert!(
        next.is_err() || matches!(next, Ok(Some(Ok(_)))),
        "watch ended early"
    );
}

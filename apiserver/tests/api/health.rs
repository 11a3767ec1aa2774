//! Health endpoints and /version.

use crate::common::Api;
use axum::body::Body;
use axum::http::StatusCode;

#[tokio::test]
async fn readyz_and_livez() {
    let api = Api::new("health").await;
    let r = api.get("/readyz").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.text(), "ok");

    let r = api.get("/readyz?verbose").await;
    assert_eq!(r.code, StatusCode::OK);
    let text = r.text();
    for line in [
        "[+]ping ok",
        "[+]log ok",
        "[+]etcd ok",
        "[+]shutdown ok",
        "[+]poststarthook/bootstrap ok",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
    assert!(text.ends_with("readyz check passed\n"), "{text}");

    let r = api.get("/readyz/etcd").await;
    assert_eq!((r.code, r.text().as_str()), (StatusCode::OK, "ok"));
    let r = api.get("/readyz/nope").await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);

    let r = api.get("/livez?exclude=ping").await;
    assert_eq!((r.code, r.text().as_str()), (StatusCode::OK, "ok"));
    let r = api.get("/livez?exclude=ping&verbose").await;
    let text = r.text();
    assert!(text.contains("[+]ping excluded: ok\n"), "{text}");
    assert!(text.contains("[+]log ok\n"), "{text}");
    assert!(!text.contains("etcd"), "livez never checks etcd: {text}");
    assert!(text.ends_with("livez check passed\n"), "{text}");

    let r = api.get("/healthz").await;
    assert_eq!((r.code, r.text().as_str()), (StatusCode::OK, "ok"));
}

#[tokio::test]
async fn readyz_fails_while_shutting_down() {
    let api = Api::new("shutdown").await;
    api.state
        .shutting_down
        .store(true, std::sync::atomic::Ordering::Release);
    let r = api.get("/readyz?verbose").await;
    assert_eq!(r.code, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.text().contains("[-]shutdown failed"), "{}", r.text());
    let r = api.get("/livez").await;
    assert_eq!(r.code, StatusCode::OK);
}

#[tokio::test]
async fn version() {
    let api = Api::new("version").await;
    let r = api.call("GET", "/version", &[], Body::empty()).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["major"], "1");
    assert_eq!(r.body["minor"], "35");
    assert_eq!(r.body["gitVersion"], "v1.35.0");
    assert!(r.body["platform"].as_str().is_some_and(|p| p.contains('/')));
}

//! The served API surface against the GA endpoints of the upstream OpenAPI
//! document (`tests/data/ga_surface.txt`, made by `tools/gen_surface.py`):
//! every GA resource and subresource must appear in discovery (113 of
//! 113, issue 13).

use e2e::Server;
use serde_json::Value;
use std::collections::BTreeSet;

async fn get(s: &Server, path: &str) -> Value {
    let r = s.http("GET", path, &[], b"").await.expect("request");
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    serde_json::from_slice(&r.body).expect("JSON")
}

#[tokio::test]
async fn discovery_serves_every_ga_endpoint() {
    let s = Server::start().await;
    let mut versions = vec!["api/v1".to_string()];
    let groups = get(&s, "/apis").await;
    for g in groups["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            versions.push(format!("apis/{}", v["groupVersion"].as_str().unwrap()));
        }
    }
    let mut served = BTreeSet::new();
    for gv in &versions {
        let list = get(&s, &format!("/{gv}")).await;
        for r in list["resources"].as_array().unwrap() {
            served.insert(format!("{gv} {}", r["name"].as_str().unwrap()));
        }
    }
    let wanted: Vec<String> = include_str!("../data/ga_surface.txt")
        .lines()
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = wanted.iter().filter(|w| !served.contains(*w)).collect();
    let served_count = wanted.len() - missing.len();
    println!(
        "apiserver-surface: {served_count}/{} GA endpoints served",
        wanted.len()
    );
    assert!(
        missing.is_empty(),
        "GA endpoints missing from discovery: {missing:#?}"
    );
    assert_eq!(served_count, 113, "the upstream document's GA endpoints");
}

/// Paths that are not plain segments answer as kube-apiserver answers
/// them: kube splits the decoded path (an encoded slash separates
/// segments), drops one trailing slash, and its storage key functions
/// refuse a name that is `.`, `..` or holds `%` or `/` with 400 before
/// anything is read or written.
#[tokio::test]
async fn dot_names_encoded_slashes_and_trailing_slashes_answer_as_kube() {
    let s = Server::start().await;
    let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}"#;
    let base = "/api/v1/namespaces/default/configmaps";
    let r = s
        .request("POST", base, &[("Content-Type", "application/json")], cm)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());

    // One trailing slash is the same path.
    let r = s.request("GET", &format!("{base}/a/"), &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // %2F is a slash: `a%2F` is `a/`, and `a%2Fdata` names a
    // subresource `data` that configmaps do not have.
    let r = s.request("GET", &format!("{base}/a%2F"), &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s
        .request("GET", &format!("{base}/a%2Fdata"), &[], b"")
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    // An empty segment is no API path.
    let r = s.request("GET", "/api//v1/namespaces", &[], b"").await;
    assert_eq!(r.status, 404, "{}", r.text());

    for (method, path, name, why) in [
        ("GET", format!("{base}/.."), "..", "may not be '..'"),
        ("GET", format!("{base}/."), ".", "may not be '.'"),
        ("DELETE", format!("{base}/.."), "..", "may not be '..'"),
        ("GET", format!("{base}/a%25b"), "a%b", "may not contain '%'"),
        ("PUT", format!("{base}/a%25"), "a%", "may not contain '%'"),
        (
            "GET",
            "/api/v1/namespaces/..".to_string(),
            "..",
            "may not be '..'",
        ),
    ] {
        let r = s
            .request(method, &path, &[("Content-Type", "application/json")], cm)
            .await;
        assert_eq!(r.status, 400, "{method} {path}: {}", r.text());
        let st: Value = serde_json::from_slice(&r.body).expect("a Status");
        assert_eq!(st["kind"], "Status", "{method} {path}");
        assert_eq!(st["reason"], "BadRequest", "{method} {path}");
        assert_eq!(
            st["message"],
            format!("Name parameter invalid: {name:?}: {why}"),
            "{method} {path}"
        );
    }
    // Nothing changed: the one ConfigMap is still there, unchanged.
    let r = s.request("GET", &format!("{base}/a"), &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let got: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(got["data"]["k"], "v");
}

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

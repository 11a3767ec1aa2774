//! The served API surface against the GA endpoints of the upstream OpenAPI
//! document (`tests/data/ga_surface.txt`, made by `tools/gen_surface.py`):
//! every GA resource and subresource must appear in discovery. Endpoints
//! not served yet are listed in `NOT_YET`, and the test also fails when one
//! of those starts being served, so the list stays true.

use e2e::Server;
use serde_json::Value;
use std::collections::BTreeSet;

/// GA endpoints this server does not serve yet (issue 13).
const NOT_YET: &[&str] = &[
    "api/v1 componentstatuses",
    "api/v1 nodes/proxy",
    "api/v1 pods/attach",
    "api/v1 pods/exec",
    "api/v1 pods/log",
    "api/v1 pods/portforward",
    "api/v1 pods/proxy",
    "api/v1 services/proxy",
];

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
    let unexpected: Vec<&&String> = missing
        .iter()
        .filter(|m| !NOT_YET.contains(&m.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "GA endpoints missing from discovery: {unexpected:#?}"
    );
    let stale: Vec<&&str> = NOT_YET.iter().filter(|n| served.contains(**n)).collect();
    assert!(
        stale.is_empty(),
        "served now, remove from NOT_YET: {stale:#?}"
    );
}

//! A custom group-version's `/openapi/v3` document is built when its CRD
//! becomes served, before anyone asks for OpenAPI (as kube's CRD OpenAPI
//! controller does), so that the first read after many CRDs were created
//! only assembles the root. Seen through the server's debug log: the
//! warmer says how many documents each round built, and no OpenAPI
//! request is made until all of them were. Then the root lists each
//! group-version under the hash its document is served with.

use e2e::Server;
use serde_json::{json, Value};
use std::time::Duration;

const GROUPS: [&str; 3] = [
    "a.warm.example.com",
    "b.warm.example.com",
    "c.warm.example.com",
];

fn crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}
            }]
        }
    })
}

/// The documents the warmer's rounds built so far, from its log lines.
fn built_ahead(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("built ahead of a request"))
        .filter_map(|l| {
            let at = l.find("built=")? + "built=".len();
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<usize>().ok()
        })
        .sum()
}

#[tokio::test]
async fn custom_group_version_documents_are_built_before_the_first_read() {
    // The only test of this binary: the server inherits the variable.
    std::env::set_var("RUST_LOG", "info,apiserver::openapi=debug");
    let s = Server::start().await;
    assert_eq!(built_ahead(&s.log()), 0, "{}", s.log());
    for group in GROUPS {
        let body = serde_json::to_vec(&crd(group)).unwrap();
        let r = s
            .http(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                &[("Content-Type", "application/json")],
                &body,
            )
            .await
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while built_ahead(&s.log()) < GROUPS.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "the three group-versions' documents were not built without a request; log:\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(built_ahead(&s.log()), GROUPS.len(), "{}", s.log());

    let root = s.http("GET", "/openapi/v3", &[], b"").await.unwrap();
    assert_eq!(root.status, 200);
    let root: Value = serde_json::from_slice(&root.body).unwrap();
    for group in GROUPS {
        let url = root["paths"][format!("apis/{group}/v1")]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{group} missing from {root}"));
        let hash = url.split("?hash=").nth(1).expect("a hash");
        let doc = s.http("GET", url, &[], b"").await.unwrap();
        assert_eq!(doc.status, 200, "{url}");
        let etag = doc
            .headers
            .iter()
            .find(|(n, _)| n == "etag")
            .map(|(_, v)| v.as_str());
        assert_eq!(etag, Some(format!("\"{hash}\"").as_str()), "{url}");
        let doc: Value = serde_json::from_slice(&doc.body).unwrap();
        let kind = format!(
            "{}.v1.Thing",
            group.split('.').rev().collect::<Vec<_>>().join(".")
        );
        assert!(
            doc["components"]["schemas"].get(&kind).is_some(),
            "{kind} missing from {url}"
        );
    }
    // Reading them built nothing more in the background.
    assert_eq!(built_ahead(&s.log()), GROUPS.len(), "{}", s.log());
}

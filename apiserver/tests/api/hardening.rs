//! Hostile input: deeply nested and huge-number bodies (JSON and YAML) are
//! 400s naming the problem, forged continue tokens cannot reach keys
//! outside their list, and error Statuses carry no internals.

use crate::common::{configmap, Api};
use base64::Engine;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn nested(depth: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep","annotations":{{"a":"b"}}}},"x":{}1{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

#[tokio::test]
async fn deeply_nested_json_is_a_400() {
    let api = Api::new("deepjson").await;
    for depth in [200, 100_000] {
        let r = api
            .call(
                "POST",
                CMS,
                &[("content-type", "application/json")],
                nested(depth),
            )
            .await;
        let (code, reason, message) = r.status();
        assert_eq!((code, reason), (400, "BadRequest"), "{depth}: {}", r.text());
        assert!(message.contains("max depth"), "{depth}: {message}");
        assert_eq!(r.body["kind"], "Status");
    }
    // Patches too.
    api.create(CMS, &configmap("p", &[])).await;
    let r = api
        .call(
            "PATCH",
            &format!("{CMS}/p"),
            &[("content-type", "application/merge-patch+json")],
            nested(10_000),
        )
        .await;
    assert_eq!(r.status().0, 400, "{}", r.text());
}

#[tokio::test]
async fn deeply_nested_yaml_is_a_400() {
    let api = Api::new("deepyaml").await;
    let body = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nx: {}1{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let r = api
        .call("POST", CMS, &[("content-type", "application/yaml")], body)
        .await;
    let (code, reason, message) = r.status();
    assert_eq!((code, reason), (400, "BadRequest"), "{}", r.text());
    assert!(
        message.contains("recursion limit") || message.contains("max depth"),
        "{message}"
    );
}

#[tokio::test]
async fn huge_numbers_are_a_400() {
    let api = Api::new("hugenum").await;
    for (ctype, body) in [
        (
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"x":1e400}"#
                .to_string(),
        ),
        (
            "application/yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\nx: 1e400\n".to_string(),
        ),
    ] {
        let r = api
            .call("POST", CMS, &[("content-type", ctype)], body)
            .await;
        let (code, _, message) = r.status();
        assert_eq!(code, 400, "{ctype}: {}", r.text());
        assert!(!message.is_empty(), "{ctype}");
    }
}

fn token(start: &str, rv: i64) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

#[tokio::test]
async fn forged_continue_tokens_cannot_leave_their_list() {
    let api = Api::new("forgedcont").await;
    api.create(CMS, &configmap("a", &[])).await;
    api.create(CMS, &configmap("z", &[])).await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    api.create("/api/v1/namespaces/default/secrets", &secret)
        .await;
    let rv: i64 = api.must_get(CMS).await["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("list resourceVersion");
    for start in [
        "../secrets/default/x",
        "default/../../secrets/default/x",
        "/../secrets/default/x",
        "a//b",
        "./a",
        "a/.",
    ] {
        for path in [CMS.to_string(), "/api/v1/configmaps".to_string()] {
            let r = api
                .get(&format!("{path}?limit=1&continue={}", token(start, rv)))
                .await;
            let (code, reason, message) = r.status();
            assert_eq!((code, reason), (400, "BadRequest"), "{start}: {}", r.text());
            assert!(
                message.contains("continue key is not valid"),
                "{start}: {message}"
            );
        }
    }
    // A canonical absolute key is valid (kube-apiserver accepts it too) but
    // is read under the list's own prefix: never another resource's keys.
    for path in [CMS.to_string(), "/api/v1/configmaps".to_string()] {
        let r = api
            .get(&format!(
                "{path}?limit=10&continue={}",
                token("/secrets/default/x", rv)
            ))
            .await;
        assert_eq!(r.code, 200, "{}", r.text());
        if path == CMS {
            // Continues after `secrets/default/x` among the configmaps.
            assert_eq!(crate::common::names(&r.body), ["z"], "{}", r.text());
        }
        for item in r.body["items"].as_array().into_iter().flatten() {
            assert_eq!(item["kind"], "ConfigMap", "{item}");
        }
    }
}

#[tokio::test]
async fn error_statuses_carry_no_internals() {
    let api = Api::new("nointernals").await;
    // A value that does not decode, written behind the server's back.
    let key = format!("{}/configmaps/default/broken", api.state.prefix);
    let mut kv = watchcache::testing::TestEtcd::shared()
        .await
        .store()
        .await
        .client()
        .kv_client();
    kv.put(key.as_str(), "not json", None).await.expect("put");
    let r = api.get(&format!("{CMS}/broken")).await;
    let (code, _, message) = r.status();
    assert_eq!(code, 500, "{}", r.text());
    assert!(!message.contains(&api.state.prefix), "{message}");
    assert!(!message.contains("expected"), "no parser detail: {message}");
    assert!(!r.text().contains(".rs"), "{}", r.text());
}

/// The status line the server answers `head` (a request without body)
/// with, over a real connection served as `run` serves.
async fn status_line(api: &Api, head: String) -> String {
    use std::future::IntoFuture;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(axum::serve(listener, api.router()).into_future());
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // The server may answer and close before it has read everything.
    let _ = conn.write_all(head.as_bytes()).await;
    let mut buf = vec![0u8; 256];
    let n = tokio::time::timeout(crate::common::DEADLINE, conn.read(&mut buf))
        .await
        .expect("an answer in time")
        .unwrap_or(0);
    server.abort();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn oversized_headers_are_refused_with_431() {
    let api = Api::new("headers").await;
    let ok = status_line(
        &api,
        format!(
            "GET /version HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
            "a".repeat(16 << 10)
        ),
    )
    .await;
    assert_eq!(ok, "HTTP/1.1 200 OK");
    let big = status_line(
        &api,
        format!(
            "GET /version HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
            "a".repeat(2 << 20)
        ),
    )
    .await;
    assert!(big.starts_with("HTTP/1.1 431"), "{big:?}");
    let many: String = (0..200).map(|i| format!("x-h{i}: v\r\n")).collect();
    let many = status_line(
        &api,
        format!("GET /version HTTP/1.1\r\nhost: x\r\n{many}\r\n"),
    )
    .await;
    assert!(many.starts_with("HTTP/1.1 431"), "{many:?}");
}

//! Resource bounds: every oversized or pathological request gets an answer
//! (a Status where the API server answers, hyper's 431 for headers past
//! the buffer) quickly, and the server stays up: bodies over 3 MiB (JSON
//! and YAML), JSON nested past the decoder's depth, YAML alias bombs,
//! huge headers, and more open watches for one user than
//! `--max-watches-per-user` (a bound only when set, as kube has none).

use e2e::{eventually_async, Server};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn status_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "not a Status ({e}): {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    })
}

async fn post(s: &Server, content_type: &str, body: &[u8]) -> (u16, Value, Duration) {
    let started = Instant::now();
    let r = s
        .request("POST", CONFIGMAPS, &[("Content-Type", content_type)], body)
        .await;
    (r.status, status_of(&r.body), started.elapsed())
}

async fn still_serving(s: &Server) {
    let r = s
        .request("GET", "/api/v1/namespaces/default", &[], b"")
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn bodies_past_3_mib_are_refused() {
    let s = Server::start().await;
    let big = "x".repeat(3 * 1024 * 1024);
    let json = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"a":"{big}"}}}}"#
    );
    let yaml =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: {big}\n");
    for (ct, body) in [("application/json", &json), ("application/yaml", &yaml)] {
        let (code, st, _) = post(&s, ct, body.as_bytes()).await;
        assert_eq!(code, 413, "{ct}: {st}");
        assert_eq!(st["reason"], "RequestEntityTooLarge", "{ct}: {st}");
    }
    still_serving(&s).await;
}

#[tokio::test]
async fn deep_json_is_a_bad_request() {
    let s = Server::start().await;
    for depth in [1_000, 500_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"data":{{"a":{nested}}}}}"#
        );
        let (code, st, took) = post(&s, "application/json", body.as_bytes()).await;
        eprintln!("depth {depth}: {code} in {took:?}: {}", st["message"]);
        assert_eq!(code, 400, "depth {depth}: {st}");
        assert_eq!(st["reason"], "BadRequest", "{st}");
        assert!(took < Duration::from_secs(5), "depth {depth} took {took:?}");
    }
    still_serving(&s).await;
}

#[tokio::test]
async fn yaml_alias_bombs_are_a_bad_request() {
    let s = Server::start().await;
    // Nine levels of nine aliases each: 9^9 (387 million) strings once
    // expanded.
    let mut yaml = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\nx0: &x0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let p = format!("*x{}", i - 1);
        let refs = [p.as_str(); 9].join(",");
        yaml.push_str(&format!("x{i}: &x{i} [{refs}]\n"));
    }
    let (code, st, took) = post(&s, "application/yaml", yaml.as_bytes()).await;
    eprintln!("alias bomb: {code} in {took:?}: {}", st["message"]);
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest", "{st}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    still_serving(&s).await;
}

#[tokio::test]
async fn huge_headers_are_refused_by_size() {
    let s = Server::start().await;
    let fine = "a".repeat(64 * 1024);
    let r = s
        .request(
            "GET",
            "/api/v1/namespaces/default",
            &[("X-Fine", &fine)],
            b"",
        )
        .await;
    assert_eq!(r.status, 200);
    let huge = "a".repeat(2 * 1024 * 1024);
    let r = s
        .http(
            "GET",
            "/api/v1/namespaces/default",
            &[("X-Huge", &huge)],
            b"",
        )
        .await;
    // hyper answers 431 (Request Header Fields Too Large) and closes; a
    // reset while the client still writes is as good: nothing was served.
    eprintln!("2 MiB header: {:?}", r.as_ref().map(|r| r.status));
    if let Ok(r) = r {
        assert_eq!(r.status, 431);
    }
    still_serving(&s).await;
}

/// Opens a watch as `user` and keeps it open: returns once the response
/// headers are in (the status code, and the open stream).
async fn open_watch(s: &Server, user: &str) -> (u16, tokio::net::TcpStream) {
    let mut tcp = tokio::net::TcpStream::connect(s.addr())
        .await
        .expect("connect");
    let req = format!(
        "GET {CONFIGMAPS}?watch=true HTTP/1.1\r\nHost: {}\r\nImpersonate-User: {user}\r\n\r\n",
        s.addr()
    );
    tcp.write_all(req.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tcp.read(&mut byte).await.expect("read");
        assert!(n > 0, "closed before the headers");
        head.push(byte[0]);
    }
    let code = String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, tcp)
}

#[tokio::test]
async fn watches_per_user_are_bounded() {
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let s = Server::start_on(&etcd.endpoint(), &["--max-watches-per-user=3"]).await;
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "w",
        "--clusterrole=view",
        "--user=alice",
    ]);
    eventually_async("alice may watch", Duration::from_secs(20), || async {
        let path = format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1");
        let r = s
            .request("GET", &path, &[("Impersonate-User", "alice")], b"")
            .await;
        (r.status == 200).then_some(())
    })
    .await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let (code, tcp) = open_watch(&s, "alice").await;
        assert_eq!(code, 200);
        open.push(tcp);
    }
    let path = format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1");
    let r = s
        .request("GET", &path, &[("Impersonate-User", "alice")], b"")
        .await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    let st = status_of(&r.body);
    assert_eq!(st["reason"], "TooManyRequests");
    assert!(
        st["message"].as_str().unwrap_or("").contains("alice"),
        "{st}"
    );
    // Another user is not affected, and neither are alice's other requests.
    assert_eq!(s.request("GET", &path, &[], b"").await.status, 200);
    let r = s
        .request("GET", CONFIGMAPS, &[("Impersonate-User", "alice")], b"")
        .await;
    assert_eq!(r.status, 200);
    // A closed watch gives its place back.
    drop(open.pop());
    eventually_async("a place freed", Duration::from_secs(20), || async {
        let r = s
            .request("GET", &path, &[("Impersonate-User", "alice")], b"")
            .await;
        (r.status == 200).then_some(())
    })
    .await;
}

/// Without `--max-watches-per-user` there is no bound, as in kube: one
/// user holds more watches at once than the old default (2,000) allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_per_user_are_unbounded_by_default() {
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let s = std::sync::Arc::new(Server::start_on(&etcd.endpoint(), &[]).await);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "w",
        "--clusterrole=view",
        "--user=informers",
    ]);
    eventually_async("the user may watch", Duration::from_secs(20), || async {
        let path = format!("{CONFIGMAPS}?watch=true&timeoutSeconds=1");
        let r = s
            .request("GET", &path, &[("Impersonate-User", "informers")], b"")
            .await;
        (r.status == 200).then_some(())
    })
    .await;
    let started = Instant::now();
    let mut open = Vec::new();
    for _ in 0..21 {
        let batch: Vec<_> = (0..100)
            .map(|_| {
                let s = std::sync::Arc::clone(&s);
                tokio::spawn(async move { open_watch(&s, "informers").await })
            })
            .collect();
        for w in batch {
            let (code, tcp) = w.await.expect("watch task");
            assert_eq!(code, 200, "watch {} refused", open.len() + 1);
            open.push(tcp);
        }
    }
    eprintln!("{} watches open in {:?}", open.len(), started.elapsed());
    still_serving(&s).await;
}

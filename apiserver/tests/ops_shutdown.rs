//! Graceful shutdown of the real binary: on SIGTERM /readyz fails at once,
//! /livez stays green, requests are still served during the shutdown delay,
//! then open watch streams end cleanly and the process exits 0.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use watchcache::testing::TestEtcd;

const DEADLINE: Duration = Duration::from_secs(30);

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// Kills the server if the test fails before it exits.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection; `(status, whole response)`.
async fn request(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text))
}

async fn wait_for(addr: SocketAddr, path: &str, code: u16) {
    let start = Instant::now();
    loop {
        if request(addr, path).await.map(|r| r.0) == Some(code) {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "{path} never answered {code}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn sigterm_drains_then_exits_zero() {
    let etcd = TestEtcd::shared().await;
    let addr = free_addr();
    let prefix = format!("/t-shutdown-{}", std::process::id());
    let child = Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--etcd-servers", &etcd.endpoint()])
        .args(["--etcd-prefix", &prefix])
        .args(["--listen", &addr.to_string()])
        .args(["--secure-listen", "off"])
        .args(["--shutdown-delay-duration", "2s"])
        .args(["--etcd-compaction-interval", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the apiserver binary");
    let mut server = Server(child);
    wait_for(addr, "/readyz", 200).await;

    // A watch that stays open until the server stops.
    let mut watch = TcpStream::connect(addr).await.expect("connect");
    let req = "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: test\r\n\r\n";
    watch.write_all(req.as_bytes()).await.expect("send watch");
    let mut head = vec![0u8; 1024];
    let n = tokio::time::timeout(DEADLINE, watch.read(&mut head))
        .await
        .expect("watch headers in time")
        .expect("read");
    let head = String::from_utf8_lossy(&head[..n]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());

    // During the delay: readyz fails, livez passes, requests are served.
    wait_for(addr, "/readyz", 500).await;
    let (code, body) = request(addr, "/readyz?verbose").await.expect("readyz");
    assert_eq!(code, 500);
    assert!(body.contains("[-]shutdown failed"), "{body}");
    assert_eq!(request(addr, "/livez").await.map(|r| r.0), Some(200));
    assert_eq!(
        request(addr, "/api/v1/namespaces/default")
            .await
            .map(|r| r.0),
        Some(200)
    );
    assert!(sent.elapsed() < Duration::from_secs(2), "too slow to check");

    // After the delay the watch ends cleanly: the chunked body's last chunk,
    // then the connection closes.
    let mut rest = Vec::new();
    tokio::time::timeout(DEADLINE, watch.read_to_end(&mut rest))
        .await
        .expect("the watch ended in time")
        .expect("the watch ended without an error");
    let rest = String::from_utf8_lossy(&rest).into_owned();
    assert!(rest.ends_with("0\r\n\r\n"), "not a clean end: {rest:?}");
    assert!(
        sent.elapsed() >= Duration::from_secs(2),
        "ended before the delay"
    );

    // The process exits 0.
    let start = Instant::now();
    let exit = loop {
        if let Some(s) = server.0.try_wait().expect("wait") {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "the server did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
}

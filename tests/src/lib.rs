//! End-to-end harness: a real etcd (shared per test binary, one key prefix
//! per test), the real `apiserver` binary on a free port, and kubectl with a
//! private HOME, kubeconfig and discovery cache.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use watchcache::testing::TestEtcd;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The `apiserver` binary next to this test binary (`make test` builds it
/// first; `cargo build --bin apiserver` does too).
pub fn server_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/e2e-xxxx -> target/<profile>/apiserver
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let bin = dir.join("apiserver");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --bin apiserver` (make test does)",
        bin.display()
    );
    bin
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// One server process on the shared test etcd, under its own key prefix.
pub struct Server {
    child: Child,
    pub url: String,
    pub etcd_endpoint: String,
    pub prefix: String,
    home: tempfile::TempDir,
}

impl Server {
    /// Starts etcd (once per test binary) and a fresh server; waits for
    /// /readyz.
    pub async fn start() -> Server {
        let etcd = TestEtcd::shared().await;
        Self::start_on(&etcd.endpoint(), &[]).await
    }

    /// Starts a server on `etcd` with extra flags.
    pub async fn start_on(etcd: &str, extra: &[&str]) -> Server {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("/e2e-{}-{n}", std::process::id());
        let port = free_port();
        let home = tempfile::tempdir().expect("tempdir");
        let log = std::fs::File::create(home.path().join("apiserver.log")).expect("log file");
        let child = Command::new(server_binary())
            .arg(format!("--etcd-servers={etcd}"))
            .arg(format!("--etcd-prefix={prefix}"))
            .arg(format!("--listen=127.0.0.1:{port}"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start apiserver");
        let url = format!("http://127.0.0.1:{port}");
        let server = Server {
            child,
            url,
            etcd_endpoint: etcd.to_string(),
            prefix,
            home,
        };
        server.write_kubeconfig();
        server.wait_ready().await;
        server
    }

    fn write_kubeconfig(&self) {
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n    namespace: default\nusers:\n- name: e2e\n  user: {{}}\ncurrent-context: e2e\n",
            self.url
        );
        std::fs::write(self.home.path().join("kubeconfig"), cfg).expect("kubeconfig");
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = self.url.trim_start_matches("http://").to_string();
        loop {
            if let Ok(body) = http_get(&addr, "/readyz").await {
                if body.ends_with("ok") {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "server did not become ready; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("apiserver.log")).unwrap_or_default()
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("HOME", self.home.path())
            .env("KUBECONFIG", self.home.path().join("kubeconfig"))
            .env("KUBECACHEDIR", self.home.path().join("cache"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd(args).output().expect("run kubectl")
    }

    /// Runs kubectl with `input` on stdin (for `-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .kubectl_cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("kubectl output")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl get -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.kubectl_ok(&a)).expect("kubectl json")
    }

    /// Stops the server with SIGTERM and waits for it to exit.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 GET over a raw socket, for readiness polling (no
/// client library needed for that).
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(text.split("\r\n\r\n").nth(1).unwrap_or("").trim().to_string())
}

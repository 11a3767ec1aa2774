//! End-to-end harness: a real etcd (shared per test binary, one key prefix
//! per test), the real `apiserver` binary on a free port, and kubectl with a
//! private HOME, kubeconfig and discovery cache. `cluster` starts a whole
//! deployment (3 etcd members, replicas, HAProxy) for fault tests; `watch`
//! is a raw watch client and etcd's history to check it against.

pub mod chaos;
pub mod cluster;
pub mod operator;
pub mod watch;
pub mod webhook;

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

/// Why a server process ended before it was ready (its log).
#[derive(Debug)]
pub enum StartError {
    /// A port it was given was taken meanwhile.
    PortTaken(String),
    Exited(String),
}

/// One server process on the shared test etcd, under its own key prefix.
pub struct Server {
    child: Child,
    pub url: String,
    pub etcd_endpoint: String,
    pub prefix: String,
    /// The command line it runs with (for `restart`).
    args: Vec<String>,
    home: tempfile::TempDir,
}

/// Runs the server binary with `args`, its output to `home/apiserver.log`
/// (appended to when `append`: a restarted server keeps its earlier log).
fn spawn_server(home: &Path, args: &[String], append: bool) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(home.join("apiserver.log"))
        .expect("log file");
    Command::new(server_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start apiserver")
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
        Self::start_with_prefix(etcd, &unique_prefix(), extra).await
    }

    /// Starts a server on `etcd` under `prefix` (several servers on one
    /// prefix are replicas of one cluster) with extra flags.
    pub async fn start_with_prefix(etcd: &str, prefix: &str, extra: &[&str]) -> Server {
        // A free port can be taken by another test between being found and
        // being bound: start again on a new one then.
        for _ in 0..4 {
            match Self::try_start_with_prefix(etcd, prefix, extra).await {
                Ok(server) => return server,
                Err(StartError::PortTaken(_)) => continue,
                Err(StartError::Exited(log)) => {
                    panic!("server exited before it was ready; log:\n{log}")
                }
            }
        }
        panic!("no free port found for the server in 4 attempts")
    }

    /// Starts a server, or says why it exited before it was ready; a
    /// caller that chose ports in `extra` retries on
    /// [`StartError::PortTaken`] with new ones.
    pub async fn try_start_with_prefix(
        etcd: &str,
        prefix: &str,
        extra: &[&str],
    ) -> Result<Server, StartError> {
        let prefix = prefix.to_string();
        let port = free_port();
        let home = tempfile::tempdir().expect("tempdir");
        let mut args = vec![
            format!("--etcd-servers={etcd}"),
            format!("--etcd-prefix={prefix}"),
            format!("--listen=127.0.0.1:{port}"),
        ];
        // Many servers run at once: the secure port is opt-in here
        // (tests/tests/secure.rs passes its own).
        if !extra.iter().any(|a| a.starts_with("--secure-listen")) {
            args.push("--secure-listen=off".to_string());
        }
        // Keys (service-account signing, PKI) live with the server.
        if !extra.iter().any(|a| a.starts_with("--data-dir")) {
            args.push(format!("--data-dir={}", home.path().join("data").display()));
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let child = spawn_server(home.path(), &args, false);
        let url = format!("http://127.0.0.1:{port}");
        let mut server = Server {
            child,
            url,
            etcd_endpoint: etcd.to_string(),
            prefix,
            args,
            home,
        };
        server.write_kubeconfig();
        server.wait_ready().await?;
        Ok(server)
    }

    fn write_kubeconfig(&self) {
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n    namespace: default\nusers:\n- name: e2e\n  user: {{}}\ncurrent-context: e2e\n",
            self.url
        );
        std::fs::write(self.home.path().join("kubeconfig"), cfg).expect("kubeconfig");
    }

    async fn wait_ready(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = self.addr().to_string();
        loop {
            if let Ok(body) = http_get(&addr, "/readyz").await {
                if body.ends_with("ok") {
                    return Ok(());
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = format!("({status})\n{}", self.log());
                return Err(if log.contains("Address already in use") {
                    StartError::PortTaken(log)
                } else {
                    StartError::Exited(log)
                });
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

    /// A kubectl command against this server (private HOME, kubeconfig and
    /// discovery cache), stdin closed. For long-running children such as
    /// `get -w`; `kubectl()` and friends run it to completion.
    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("HOME", self.home.path())
            .env("KUBECONFIG", self.home.path().join("kubeconfig"))
            .env("KUBECACHEDIR", self.home.path().join("cache"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl against this server. A kubectl that has not finished
    /// within `KUBECTL_TIMEOUT` is killed and fails the test.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        run_bounded(self.kubectl_cmd(args), None, args)
    }

    /// Runs kubectl with `input` on stdin (for `-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        run_bounded(self.kubectl_cmd(args), Some(input), args)
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            stderr(&out),
            stdout(&out)
        );
        stdout(&out)
    }

    /// kubectl with `input` on stdin that must succeed; returns stdout.
    pub fn kubectl_stdin_ok(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_stdin(args, input);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            stderr(&out),
            stdout(&out)
        );
        stdout(&out)
    }

    /// Whether `kubectl args` fails with NotFound (the object is gone).
    pub fn gone(&self, args: &[&str]) -> bool {
        let out = self.kubectl(args);
        !out.status.success() && stderr(&out).contains("NotFound")
    }

    /// Waits until `kubectl args` answers NotFound.
    pub async fn wait_gone(&self, timeout: Duration, what: &str, args: &[&str]) {
        eventually(what, timeout, || self.gone(args).then_some(())).await;
    }

    /// Creates the [`GADGETS_CRD`] and waits until it is served.
    pub async fn install_gadgets(&self) {
        self.kubectl_stdin_ok(&["create", "-f", "-"], GADGETS_CRD);
        eventually(
            "the Gadget CRD to be served",
            Duration::from_secs(20),
            || {
                self.kubectl(&["get", "gadgets"])
                    .status
                    .success()
                    .then_some(())
            },
        )
        .await;
    }

    /// kubectl that must fail; returns (exit code, stderr).
    pub fn kubectl_err(&self, args: &[&str]) -> (i32, String) {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded but should have failed: {}",
            stdout(&out)
        );
        (out.status.code().unwrap_or(-1), stderr(&out))
    }

    /// kubectl with `input` on stdin that must fail; returns (exit code,
    /// stderr).
    pub fn kubectl_stdin_err(&self, args: &[&str], input: &str) -> (i32, String) {
        let out = self.kubectl_stdin(args, input);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded but should have failed: {}",
            stdout(&out)
        );
        (out.status.code().unwrap_or(-1), stderr(&out))
    }

    /// `kubectl get -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        let text = self.kubectl_ok(&a);
        match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => panic!("kubectl {a:?} printed invalid JSON ({e}):\n{text}"),
        }
    }

    /// One raw HTTP request to this server: (status code, headers, body).
    pub async fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        http_request(self.addr(), method, path, headers, body).await
    }

    /// One raw HTTP request that must be answered (any status).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        self.http(method, path, headers, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// `host:port` of this server.
    pub fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// The server process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server with SIGKILL (a crash: no graceful shutdown) and
    /// waits for it to exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Restarts the server in place: kills it (SIGKILL, a crash), starts it
    /// again with the same command line (same port, data directory and
    /// etcd prefix, so a load balancer's backend list stays right) and
    /// waits for /readyz. The log goes on in the same file.
    pub async fn restart(&mut self) {
        self.kill();
        // The port is free again once the process is gone; a listener in
        // TIME_WAIT does not stop a bind (SO_REUSEADDR), but another test
        // may take the port meanwhile, which fails this one loudly.
        self.child = spawn_server(self.home.path(), &self.args, true);
        if let Err(e) = self.wait_ready().await {
            panic!("server did not come back after a restart: {e:?}");
        }
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

/// A key prefix no other server of this test process uses.
pub fn unique_prefix() -> String {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    format!("/e2e-{}-{n}", std::process::id())
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 50 ms until it returns `Some`, or fails the test
/// with `what` after `timeout` (for conditions that settle asynchronously;
/// never a fixed sleep).
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs a client script of `tests/clients` (the Python `kubernetes`
/// package) against `server`, its URL as the only argument; fails the test
/// with the script's output and the server's log when the script fails.
pub fn run_python_client(server: &Server, script: &str) {
    run_python_client_with(server, script, &[]);
}

/// [`run_python_client`] with more arguments after the URL (what the
/// script should find).
pub fn run_python_client_with(server: &Server, script: &str, args: &[&str]) {
    let path = format!("{}/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(&path)
        .arg(&server.url)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

/// `eventually` for an asynchronous check (an HTTP or etcd request).
pub async fn eventually_async<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long one kubectl run may take before the test fails.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// stdout of a finished command, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr of a finished command, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `cmd` to completion with `input` on stdin (if any), killing it and
/// failing the test when it outlives `KUBECTL_TIMEOUT`.
fn run_bounded(mut cmd: Command, input: Option<&str>, args: &[&str]) -> Output {
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
        // A child that exits without reading its input closes the pipe:
        // the write error is not the test's concern, its output is.
        let _ = pipe.write_all(input.as_bytes());
    }
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(KUBECTL_TIMEOUT) {
        Ok(out) => out.expect("kubectl output"),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            let partial = rx
                .recv_timeout(Duration::from_secs(5))
                .ok()
                .and_then(Result::ok)
                .map(|o| format!("{}\n{}", stdout(&o), stderr(&o)))
                .unwrap_or_default();
            panic!("kubectl {args:?} did not finish within {KUBECTL_TIMEOUT:?}; output:\n{partial}")
        }
    }
}

/// An HTTP response read by `http_request`.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 request over a raw socket (`Connection: close`,
/// chunked responses decoded), for checks kubectl cannot express.
pub async fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await?;
    s.write_all(body).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    parse_response(&buf)
}

fn parse_response(buf: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let raw = &buf[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(raw).ok_or_else(|| bad("bad chunked body"))?
    } else {
        raw.to_vec()
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&raw[..eol]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// GET `path` and return the body, trimmed (for readiness polling).
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    let resp = http_request(addr, "GET", path, &[], b"").await?;
    Ok(resp.text().trim().to_string())
}

/// A namespaced CRD (`gadgets.example.com`, kind `Gadget`, any fields),
/// for tests that need custom resources of some kind.
pub const GADGETS_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

/// The upstream protobuf IDL shared with the project (`../shared/k8s-api/proto`).
pub fn idl() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/k8s-api/proto")
}

/// `protoc` and the shared IDL, or why a test that decodes with them cannot
/// run: without the IDL it is skipped (said on stderr), without `protoc`
/// (tools/install-deps.sh installs protobuf-compiler) it fails.
pub fn protoc_available() -> bool {
    if !idl().join("k8s.io/api/core/v1/generated.proto").exists() {
        eprintln!("skipped: the shared IDL is not at {}", idl().display());
        return false;
    }
    if Command::new("protoc").arg("--version").output().is_err() {
        panic!("protoc is not installed; run tools/install-deps.sh");
    }
    true
}

/// `protoc <mode> envelope.proto` (`--encode=M` or `--decode=M`) with the
/// shared IDL and `dir` (which holds `envelope.proto`) on the import path,
/// `input` on stdin: the tests' independent protobuf codec.
pub fn protoc_envelope(dir: &Path, mode: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("protoc")
        .arg(format!("-I{}", idl().display()))
        .arg(format!("-I{}", dir.display()))
        .arg(mode)
        .arg("envelope.proto")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "protoc {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let plain =
            b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\r\n{\"code\":404}";
        let r = parse_response(plain).expect("plain");
        assert_eq!(r.status, 404);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.text(), "{\"code\":404}");

        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3;x=y\r\n!!!\r\n0\r\n\r\n";
        let r = parse_response(chunked).expect("chunked");
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "ok!!!");
    }

    #[test]
    fn rejects_truncated_responses() {
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
        assert!(parse_response(cut).is_err());
    }
}

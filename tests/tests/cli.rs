//! The `apiserver` binary's command line and process lifecycle: an
//! unreachable etcd, a missing etcd binary, the embedded etcd it starts
//! and stops itself, and plain-text logs when stderr is not a terminal.

use e2e::{free_port, http_get, server_binary};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// An apiserver child, killed when dropped (so a failing assertion leaves
/// nothing behind), with its stderr in a file.
struct Proc {
    child: Child,
    stderr_path: std::path::PathBuf,
    /// The embedded etcd's pid, once known: killed too on drop.
    etcd_pid: Option<u32>,
}

impl Proc {
    fn spawn(args: &[String], path_env: Option<&Path>, dir: &Path) -> Proc {
        let stderr_path = dir.join("stderr.log");
        let err = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(server_binary());
        if !args.iter().any(|a| a.starts_with("--secure-listen")) {
            cmd.arg("--secure-listen=off");
        }
        cmd.args(args)
            .env_remove("APISERVER_ETCD_SERVERS")
            .env_remove("RUST_LOG")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        if let Some(p) = path_env {
            cmd.env("PATH", p);
        }
        Proc {
            child: cmd.spawn().expect("start apiserver"),
            stderr_path,
            etcd_pid: None,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits for the exit, failing the test after `limit`.
    async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "apiserver still running after {limit:?}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(pid) = self.etcd_pid {
            if process_alive(pid) {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        }
    }
}

/// The stderr lines that carry text.
fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// True while `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ..." — the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Children of `parent` named `name`, from /proc.
fn children_named(parent: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let comm = head.split_once('(').map(|(_, c)| c).unwrap_or_default();
            let ppid = rest
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            comm == name && ppid == Some(parent)
        })
        .collect()
}

/// The etcd client port from the `--listen-client-urls=` argument of `pid`.
fn etcd_client_port(pid: u32) -> Option<u16> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--listen-client-urls="))
        .and_then(|url| url.rsplit(':').next())
        .and_then(|p| p.trim_end_matches('/').parse().ok())
}

#[tokio::test]
async fn unreachable_etcd_exits_with_one_error_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = free_port();
    let mut p = Proc::spawn(
        &[
            format!("--etcd-servers=http://127.0.0.1:{closed}"),
            format!("--listen=127.0.0.1:{}", free_port()),
        ],
        None,
        dir.path(),
    );
    let status = p.exit_within(Duration::from_secs(8)).await;
    let err = p.stderr();
    assert!(!status.success(), "{status}; stderr:\n{err}");
    let l = lines(&err);
    assert_eq!(l.len(), 1, "want one error line, got:\n{err}");
    assert!(l[0].contains("etcd"), "{err}");
    assert!(l[0].contains(&closed.to_string()), "{err}");
}

#[tokio::test]
async fn non_loopback_plain_listen_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = Proc::spawn(
        &[
            "--etcd-servers=http://127.0.0.1:1".to_string(),
            format!("--listen=0.0.0.0:{}", free_port()),
        ],
        None,
        dir.path(),
    );
    let status = p.exit_within(Duration::from_secs(8)).await;
    let err = p.stderr();
    assert!(!status.success(), "{status}; stderr:\n{err}");
    let l = lines(&err);
    assert_eq!(l.len(), 1, "want one error line, got:\n{err}");
    assert!(l[0].contains("is not a loopback address"), "{err}");
    assert!(l[0].contains("--secure-listen"), "{err}");
}

#[tokio::test]
async fn missing_etcd_binary_exits_naming_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("empty PATH dir");
    let data = dir.path().join("data");
    let mut p = Proc::spawn(
        &[
            format!("--data-dir={}", data.display()),
            format!("--listen=127.0.0.1:{}", free_port()),
        ],
        Some(empty.path()),
        dir.path(),
    );
    let status = p.exit_within(Duration::from_secs(8)).await;
    let err = p.stderr();
    assert!(!status.success(), "{status}; stderr:\n{err}");
    let l = lines(&err);
    assert_eq!(l.len(), 1, "want one error line, got:\n{err}");
    assert!(l[0].contains("`etcd`"), "{err}");
    assert!(l[0].contains("not found on PATH"), "{err}");
    assert!(l[0].contains("--etcd-servers"), "{err}");
}

#[tokio::test]
async fn embedded_etcd_starts_and_stops_with_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut p = Proc::spawn(
        &[
            format!("--data-dir={}", data.display()),
            format!("--listen={addr}"),
        ],
        None,
        dir.path(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(body) = http_get(&addr, "/readyz").await {
            if body == "ok" {
                break;
            }
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("apiserver exited ({status}); stderr:\n{}", p.stderr());
        }
        assert!(
            Instant::now() < deadline,
            "not ready after 30s; stderr:\n{}",
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let etcds = children_named(p.child.id(), "etcd");
    assert_eq!(etcds.len(), 1, "one etcd child expected: {etcds:?}");
    let etcd = etcds[0];
    p.etcd_pid = Some(etcd);
    let etcd_port = etcd_client_port(etcd).expect("etcd client port");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", etcd_port)).is_ok(),
        "etcd port {etcd_port} closed while serving"
    );
    assert!(
        data.join("etcd").join("member").is_dir(),
        "no etcd data under {}",
        data.display()
    );
    // It serves the API, not just /readyz.
    let ns = http_get(&addr, "/api/v1/namespaces/default")
        .await
        .expect("GET namespace");
    assert!(ns.contains(r#""kind":"Namespace""#), "{ns}");

    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(p.child.id().to_string())
        .status()
        .expect("kill -TERM");
    assert!(killed.success());
    let status = p.exit_within(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "stderr:\n{}", p.stderr());

    let deadline = Instant::now() + Duration::from_secs(5);
    while process_alive(etcd) || std::net::TcpStream::connect(("127.0.0.1", etcd_port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "etcd (pid {etcd}, port {etcd_port}) still running after the server exited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        http_get(&addr, "/readyz").await.is_err(),
        "server port still open"
    );
}

#[tokio::test]
async fn unknown_authorization_mode_exits_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = Proc::spawn(
        &[
            "--authorization-mode=RBAC,Webhook".to_string(),
            format!("--listen=127.0.0.1:{}", free_port()),
        ],
        None,
        dir.path(),
    );
    let status = p.exit_within(Duration::from_secs(8)).await;
    let err = p.stderr();
    assert!(!status.success(), "{status}; stderr:\n{err}");
    let l = lines(&err);
    assert_eq!(l.len(), 1, "want one error line, got:\n{err}");
    assert!(
        l[0].contains("authorization-mode \"Webhook\" is not a valid mode"),
        "{err}"
    );
}

/// Logs to a file (as to a pipe or journald) are plain text: no ANSI
/// colour codes, which only a terminal renders.
#[tokio::test]
async fn logs_to_a_file_are_plain_text() {
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut p = Proc::spawn(
        &[
            format!("--etcd-servers={}", etcd.endpoint()),
            format!("--etcd-prefix=/cli-logs-{port}"),
            format!("--listen={addr}"),
        ],
        None,
        dir.path(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(&addr, "/readyz").await.ok().as_deref() != Some("ok") {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("apiserver exited ({status}); stderr:\n{}", p.stderr());
        }
        assert!(
            Instant::now() < deadline,
            "not ready; stderr:\n{}",
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(p.child.id().to_string())
        .status()
        .expect("kill -TERM");
    assert!(killed.success());
    p.exit_within(Duration::from_secs(20)).await;
    let err = p.stderr();
    // Something was logged at info (startup, shutdown), and none of it
    // carries an escape sequence.
    assert!(lines(&err).iter().any(|l| l.contains("INFO")), "{err}");
    assert!(
        !err.contains('\x1b'),
        "ANSI escapes in a log file:\n{}",
        err.escape_debug()
    );
}

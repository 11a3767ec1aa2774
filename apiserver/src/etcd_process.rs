//! The embedded default: with no `--etcd-servers`, the server starts its own
//! etcd child process, waits for it, and stops it on exit.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum EtcdProcessError {
    #[error("cannot start etcd: the `etcd` binary was not found on PATH (install Debian's etcd-server package, or pass --etcd-servers)")]
    NotFound,
    #[error("cannot start etcd: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("cannot prepare etcd data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("etcd exited during startup ({0}); see {1}")]
    Exited(std::process::ExitStatus, PathBuf),
    #[error("etcd did not become reachable within {0:?}; see {1}")]
    Timeout(Duration, PathBuf),
}

/// A running etcd child; killed when dropped.
pub struct EtcdProcess {
    child: Child,
    endpoint: String,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EtcdProcess {
    /// Starts etcd with its data under `data_dir/etcd` on free loopback ports.
    pub async fn start(data_dir: &Path) -> Result<Self, EtcdProcessError> {
        let dir = data_dir.join("etcd");
        std::fs::create_dir_all(&dir).map_err(|source| EtcdProcessError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let client = free_port().map_err(EtcdProcessError::Spawn)?;
        let peer = free_port().map_err(EtcdProcessError::Spawn)?;
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log_path = data_dir.join("etcd.log");
        let log = std::fs::File::create(&log_path).map_err(|source| EtcdProcessError::DataDir {
            path: log_path.clone(),
            source,
        })?;
        let log_err = log.try_clone().map_err(EtcdProcessError::Spawn)?;
        let mut cmd = Command::new("etcd");
        cmd.arg("--name=apiserver-embedded")
            .arg(format!("--data-dir={}", dir.display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=apiserver-embedded={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => EtcdProcessError::NotFound,
            _ => EtcdProcessError::Spawn(e),
        })?;
        let deadline = Duration::from_secs(30);
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().map_err(EtcdProcessError::Spawn)? {
                return Err(EtcdProcessError::Exited(status, log_path));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", client))
                .await
                .is_ok()
            {
                break;
            }
            if start.elapsed() > deadline {
                return Err(EtcdProcessError::Timeout(deadline, log_path));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(EtcdProcess { child, endpoint })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Stops etcd and waits for it to exit.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

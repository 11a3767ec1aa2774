//! Test support (feature `test-util`): a real etcd started on free ports in a
//! temporary directory, and the storage conformance suite (`conformance`)
//! that every `Storage` implementation must pass.
//!
//! The etcd process runs under a small `sh` supervisor whose standard input is
//! a pipe held by this process: when the pipe closes (on `stop`, on drop, or
//! when the test binary exits, even through a crash), the supervisor stops
//! etcd and removes its data directory. That is what makes the per-binary
//! shared instance (`TestEtcd::shared`) safe to leave in a static.

pub mod conformance;

use crate::etcd::EtcdStore;
use crate::storage::{Revision, StorageError};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd may take to become healthy.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Request timeout of the stores handed to tests.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at starting etcd (a free port may be taken before etcd binds it).
const START_ATTEMPTS: usize = 3;

/// Stops etcd when its standard input closes, then removes the data dir.
/// Arguments: the directory to remove, then the etcd command line. A
/// non-interactive shell runs a background job with stdin from /dev/null, so
/// etcd never holds the pipe.
const SUPERVISOR: &str = r#"dir=$1; shift
"$@" &
pid=$!
read -r _ || true
kill "$pid" 2>/dev/null
wait "$pid"
rm -rf "$dir""#;

static SHARED: tokio::sync::OnceCell<TestEtcd> = tokio::sync::OnceCell::const_new();

/// A single-member etcd for tests, on 127.0.0.1.
#[derive(Debug)]
pub struct TestEtcd {
    supervisor: Option<Child>,
    endpoint: String,
    dir: PathBuf,
}

impl TestEtcd {
    /// Starts an etcd of its own, healthy when this returns.
    pub async fn start() -> Result<Self, String> {
        let mut errors = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start().await {
                Ok(etcd) => return Ok(etcd),
                Err(e) => errors.push(e),
            }
        }
        Err(format!("cannot start etcd: {}", errors.join("; ")))
    }

    /// The instance shared by every test of this test binary (started on
    /// first use). Tests sharing it must use their own key prefixes and must
    /// not compact it.
    pub async fn shared() -> &'static TestEtcd {
        SHARED
            .get_or_init(|| async {
                match Self::start().await {
                    Ok(etcd) => etcd,
                    Err(e) => panic!("{e}"),
                }
            })
            .await
    }

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// A new store on this etcd. Each test (each tokio runtime) needs its
    /// own: the client's connection lives on the runtime that made it.
    pub async fn store(&self) -> EtcdStore {
        match EtcdStore::connect(&[self.endpoint()], STORE_TIMEOUT).await {
            Ok(store) => store,
            Err(e) => panic!("cannot connect to test etcd at {}: {e}", self.endpoint),
        }
    }

    /// Compacts the history up to `revision`, waiting until it is applied.
    pub async fn compact(&self, revision: Revision) -> Result<(), StorageError> {
        let store = EtcdStore::connect(&[self.endpoint()], STORE_TIMEOUT).await?;
        let mut client = store.client();
        let options = etcd_client::CompactionOptions::new().with_physical();
        match tokio::time::timeout(STORE_TIMEOUT, client.compact(revision, Some(options))).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(StorageError::Internal(format!("compaction failed: {e}"))),
            Err(_) => Err(StorageError::Unavailable("compaction timed out".into())),
        }
    }

    /// Stops etcd and removes its data. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.supervisor.take() {
            // Closing stdin tells the supervisor to stop etcd and clean up.
            drop(child.stdin.take());
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    async fn try_start() -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("test-etcd-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?
            .keep();
        let log_path = dir.join("etcd.log");
        let (client_port, peer_port) = match free_ports() {
            Ok(ports) => ports,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("cannot find free ports: {e}"));
            }
        };
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let spawned = std::fs::File::create(&log_path)
            .and_then(|log| Ok((log.try_clone()?, log)))
            .and_then(|(out, err)| {
                Command::new("sh")
                    .arg("-c")
                    .arg(SUPERVISOR)
                    .arg("test-etcd")
                    .arg(&dir)
                    .arg(etcd_binary())
                    .arg("--name=test")
                    .arg(format!("--data-dir={}", dir.join("data").display()))
                    .arg(format!("--listen-client-urls={client_url}"))
                    .arg(format!("--advertise-client-urls={client_url}"))
                    .arg(format!("--listen-peer-urls={peer_url}"))
                    .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                    .arg(format!("--initial-cluster=test={peer_url}"))
                    .arg("--unsafe-no-fsync")
                    .arg("--logger=zap")
                    .arg("--log-level=warn")
                    .stdin(Stdio::piped())
                    .stdout(out)
                    .stderr(err)
                    .spawn()
            });
        let supervisor = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("cannot run etcd: {e}"));
            }
        };
        let mut etcd = TestEtcd {
            supervisor: Some(supervisor),
            endpoint: client_url,
            dir,
        };
        match etcd.wait_healthy(&log_path).await {
            Ok(()) => Ok(etcd),
            Err(e) => {
                etcd.stop();
                Err(e)
            }
        }
    }

    /// Polls etcd until it answers a quorum read, fails, or the deadline.
    async fn wait_healthy(&mut self, log_path: &Path) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        let store = EtcdStore::connect(&[self.endpoint()], Duration::from_millis(500))
            .await
            .map_err(|e| e.to_string())?;
        loop {
            if store.health().await.is_ok() {
                return Ok(());
            }
            let log = std::fs::read_to_string(log_path).unwrap_or_default();
            if log.contains(r#""level":"fatal""#) || log.contains(r#""level":"panic""#) {
                return Err(format!("etcd failed: {}", log.trim()));
            }
            if let Some(child) = self.supervisor.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("etcd supervisor exited ({status}): {}", log.trim()));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "etcd not healthy after {START_DEADLINE:?}: {}",
                    log.trim()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `$TEST_ETCD_BIN`, else `/usr/bin/etcd` when present, else `etcd` on PATH.
fn etcd_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("TEST_ETCD_BIN") {
        return PathBuf::from(bin);
    }
    let debian = Path::new("/usr/bin/etcd");
    if debian.exists() {
        return debian.to_path_buf();
    }
    PathBuf::from("etcd")
}

/// Two distinct free ports on 127.0.0.1 (both listeners are held until both
/// ports are known, so they differ).
fn free_ports() -> std::io::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

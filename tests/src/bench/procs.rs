//! The processes under test and the machine they run on: a real etcd with
//! its default durability (fsync on every commit, unlike the test harness's
//! `--unsafe-no-fsync`), the server binary, their resident memory.

use super::client::Http;
use super::{Error, Result};
use etcd_client::{Client, ConnectOptions, KvClient};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd and the server may take to become ready: long enough for
/// a server to list 1,000,000 objects at start-up on a busy 2-core machine
/// (the memory phase's `--full` case).
const READY_DEADLINE: Duration = Duration::from_secs(300);
/// etcd's backend quota: the full run writes a few GiB of history.
const ETCD_QUOTA_BYTES: u64 = 8 << 30;
/// The largest etcd reply the raw-etcd limits read (a range of 100,000
/// objects of 2 KiB is about 250 MiB).
const MAX_REPLY_BYTES: usize = 1 << 30;

/// Two distinct free loopback ports (both held until both are known).
fn free_ports() -> Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// A child process killed when dropped.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One single-member etcd in a temporary directory.
pub struct Etcd {
    _child: Owned,
    pub endpoint: String,
    /// The flags it runs with, for the report.
    pub settings: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    pub async fn start(bin: &Path, parent: &Path) -> Result<Etcd> {
        let dir = tempfile::Builder::new()
            .prefix("bench-etcd-")
            .tempdir_in(parent)?;
        let (client_port, peer_port) = free_ports()?;
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.path().join("etcd.log"))?;
        let flags = [
            format!("--quota-backend-bytes={ETCD_QUOTA_BYTES}"),
            "--log-level=warn".to_string(),
        ];
        let child = Command::new(bin)
            .arg("--name=bench")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=bench={peer_url}"))
            .args(&flags)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| Error::Setup(format!("cannot run {}: {e}", bin.display())))?;
        let fs = filesystem_of(dir.path());
        let etcd = Etcd {
            _child: Owned(child),
            endpoint: client_url,
            settings: format!(
                "one member on loopback, fsync on (etcd's default), data dir on {fs}, {}",
                flags.join(" ")
            ),
            _dir: dir,
        };
        etcd.wait_healthy().await?;
        Ok(etcd)
    }

    pub fn pid(&self) -> u32 {
        self._child.0.id()
    }

    /// A client for the raw-etcd limits.
    pub async fn client(&self) -> Result<Client> {
        let opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(5));
        Ok(Client::connect([self.endpoint.as_str()], Some(opts)).await?)
    }

    /// A KV client whose replies may be large (whole-range reads).
    pub async fn kv(&self) -> Result<KvClient> {
        Ok(self
            .client()
            .await?
            .kv_client()
            .max_decoding_message_size(MAX_REPLY_BYTES))
    }

    async fn wait_healthy(&self) -> Result<()> {
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Ok(mut c) = self.client().await {
                if c.get("health", None).await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::Setup("etcd did not become healthy".into()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One server process.
pub struct Server {
    child: Owned,
    pub http: Http,
    /// From spawn to the first `/readyz` that said ok.
    pub startup: Duration,
}

impl Server {
    /// Starts `bin` on `etcd` under `prefix` with `extra` flags, logging to
    /// `log`, and waits for `/readyz` (polled every 5 ms).
    pub async fn start(
        bin: &Path,
        extra: &[String],
        etcd: &str,
        prefix: &str,
        log: &Path,
    ) -> Result<Server> {
        let (port, _) = free_ports()?;
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(log)?;
        let started = Instant::now();
        // Every watcher of the fan-out phase is the one bench user: builds
        // before the per-user watch bound became opt-in (as kube has none)
        // bounded it at 2,000 by default, which would refuse most of 10,000.
        let watch_bound = (!extra
            .iter()
            .any(|a| a.starts_with("--max-watches-per-user")))
        .then_some("--max-watches-per-user=0");
        let child = Command::new(bin)
            .arg(format!("--etcd-servers={etcd}"))
            .arg(format!("--etcd-prefix={prefix}"))
            .arg(format!("--listen={addr}"))
            .arg("--secure-listen=off")
            .args(watch_bound)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| Error::Setup(format!("cannot run {}: {e}", bin.display())))?;
        let mut server = Server {
            child: Owned(child),
            http: Http::new(&addr),
            startup: Duration::ZERO,
        };
        let deadline = started + READY_DEADLINE;
        loop {
            if let Ok(reply) = server.http.get("/readyz").await {
                if reply.body.trim_ascii().ends_with(b"ok") {
                    server.startup = started.elapsed();
                    return Ok(server);
                }
            }
            if let Ok(Some(status)) = server.child.0.try_wait() {
                return Err(Error::Setup(format!("server exited early: {status}")));
            }
            if Instant::now() > deadline {
                return Err(Error::Setup("server did not become ready".into()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub fn rss(&self) -> Result<u64> {
        rss_of(self.child.0.id())
    }

    /// Peak RSS since the last [`Server::reset_peak_rss`].
    pub fn peak_rss(&self) -> Result<u64> {
        peak_rss_of(self.child.0.id())
    }

    pub fn reset_peak_rss(&self) -> Result<()> {
        reset_peak_rss(self.child.0.id())
    }

    /// The process id (of the wrapper script when one starts the server
    /// under a profiler: its CPU time then says nothing).
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Stops the server (SIGKILL: nothing of its shutdown is measured).
    pub fn stop(self) {
        drop(self.child);
    }

    /// Stops the server cleanly (SIGTERM: it resigns its leadership) and
    /// waits for it to exit.
    pub fn terminate(mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.child.0.id().to_string())
            .status();
        let _ = self.child.0.wait();
    }
}

/// User plus system CPU time a process has used so far, in seconds
/// (`utime` and `stime` of /proc/PID/stat, in the kernel's fixed 100 Hz
/// USER_HZ ticks).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name is in parentheses and may hold spaces: fields are
    // counted after its closing one (state is field 3, utime 14, stime 15).
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| Error::Setup(format!("unreadable /proc/{pid}/stat")))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .map(|t| t as f64 / 100.0)
            .ok_or_else(|| Error::Setup(format!("unreadable /proc/{pid}/stat")))
    };
    // After ')': state is index 0, so utime (field 14) is index 11.
    Ok(ticks(11)? + ticks(12)?)
}

/// CPU used by the server, etcd and this tool over a stretch of a phase.
pub struct CpuShare {
    server: Option<f64>,
    etcd: Option<f64>,
    tool: Option<f64>,
    start: std::time::Instant,
    pids: (u32, u32),
}

impl CpuShare {
    pub fn start(server: u32, etcd: u32) -> CpuShare {
        CpuShare {
            server: cpu_seconds(server).ok(),
            etcd: cpu_seconds(etcd).ok(),
            tool: cpu_seconds(std::process::id()).ok(),
            start: std::time::Instant::now(),
            pids: (server, etcd),
        }
    }

    /// `CPU over 12.0 s: server 9.1 s, etcd 2.0 s, load generator 8.5 s`.
    pub fn summary(&self) -> String {
        let used = |before: Option<f64>, pid: u32| match (before, cpu_seconds(pid)) {
            (Some(a), Ok(b)) => format!("{:.1} s", (b - a).max(0.0)),
            _ => "?".to_string(),
        };
        format!(
            "CPU over {:.1} s: server {}, etcd {}, load generator {}",
            self.start.elapsed().as_secs_f64(),
            used(self.server, self.pids.0),
            used(self.etcd, self.pids.1),
            used(self.tool, std::process::id()),
        )
    }
}

/// Resident memory of a process in bytes (`VmRSS` of /proc/PID/status).
pub fn rss_of(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS:").map(|kb| kb * 1024)
}

/// The peak resident memory of a process in bytes since its start or the
/// last [`reset_peak_rss`] (`VmHWM`).
pub fn peak_rss_of(pid: u32) -> Result<u64> {
    status_kib(pid, "VmHWM:").map(|kb| kb * 1024)
}

/// Starts a new peak-RSS measurement for a process: writing 5 to
/// /proc/PID/clear_refs sets its `VmHWM` to its current RSS.
pub fn reset_peak_rss(pid: u32) -> Result<()> {
    Ok(std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?)
}

fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| Error::Setup(format!("no {field} for pid {pid}")))
}

/// The filesystem type of the mount holding `path` (longest mount prefix).
fn filesystem_of(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, mount, fs) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(mount)
                .then(|| (mount.len(), fs.to_string()))
        })
        .max()
        .map(|(_, fs)| fs)
        .unwrap_or_else(|| "an unknown filesystem".into())
}

/// What the numbers were measured on.
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory: String,
    pub kernel: String,
    pub etcd_version: String,
    pub load_before: String,
}

impl Machine {
    pub fn describe(etcd_bin: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0)))
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let etcd_version = Command::new(etcd_bin)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(|l| l.trim_start_matches("etcd Version:").trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            memory,
            kernel,
            etcd_version,
            load_before: load_average(),
        }
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `$dir/name` next to the running executable: the server binary of the
/// same build profile and target dir.
pub fn sibling_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_of_self_grows_with_work() {
        let me = std::process::id();
        let before = cpu_seconds(me).expect("own /proc/PID/stat");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(100) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        assert!(cpu_seconds(me).expect("again") > before);
        assert!(cpu_seconds(0).is_err(), "no such process");
    }
}

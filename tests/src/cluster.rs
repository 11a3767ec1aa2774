//! A whole deployment on loopback for fault tests: a static 3-member etcd
//! cluster, apiserver replicas pointed at every member, and HAProxy in
//! front of the replicas health-checking `/readyz`.
//!
//! Every etcd member and HAProxy runs under a small `sh` supervisor whose
//! standard input is a pipe held by the test: writing a signal name to it
//! stops the process with that signal (`stop`, `kill`), and when the pipe
//! closes (drop, or the test binary dying in any way) the supervisor stops
//! the process too, so no etcd outlives its test. Members keep their data
//! directory across stop and start, as a real member restarted in place.
//! Replicas are `Server`s (killed on drop).

use crate::{free_port, Server};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a process of the cluster may take to come up.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Attempts at starting etcd or HAProxy on free ports.
const START_ATTEMPTS: usize = 3;

/// Runs its arguments as a child and exits with it; a reader of the
/// standard input (kept on fd 3: a background job's own stdin is
/// /dev/null) stops the child with the signal named there, or TERM when
/// stdin closes. The reader is ended with the child, so it never signals a
/// recycled pid.
const SUPERVISOR: &str = r#"exec 3<&0
"$@" &
pid=$!
( sig=TERM; read -r sig <&3 || true; kill -s "${sig:-TERM}" "$pid" 2>/dev/null ) &
reader=$!
wait "$pid"
status=$?
kill "$reader" 2>/dev/null
exit "$status""#;

/// A process under the supervisor.
struct Supervised {
    child: Child,
}

impl Supervised {
    fn spawn(program: &Path, args: &[String], log: &Path) -> Supervised {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let child = Command::new("sh")
            .arg("-c")
            .arg(SUPERVISOR)
            .arg("supervisor")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        Supervised { child }
    }

    /// Stops the process with `signal` (`TERM`, `KILL`) and waits for it.
    fn signal(mut self, signal: &str) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = writeln!(stdin, "{signal}");
        }
        let _ = self.child.wait();
    }

    /// The supervised program's own process id (the supervisor's child of
    /// that name), while it runs.
    fn program_pid(&self, name: &str) -> Option<u32> {
        let sup = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{sup}/task/{sup}/children")).ok()?;
        children.split_whitespace().find_map(|c| {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).ok()?;
            (comm.trim() == name).then(|| c.parse().ok()).flatten()
        })
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = writeln!(stdin, "KILL");
        }
        let _ = self.child.wait();
    }
}

/// The keys under `prefix` in the etcd at `endpoint`, read with etcdctl
/// (but the watch cache's own progress mark, which each cluster has).
pub fn etcd_keys(endpoint: &str, prefix: &str) -> Vec<String> {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint, "get", "--prefix", "--keys-only"])
        .arg(prefix)
        .output()
        .expect("etcdctl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.ends_with("/.progress"))
        .map(str::to_string)
        .collect()
}

/// `n` distinct free ports on 127.0.0.1 (all held until all are known).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("port").port())
        .collect()
}

struct Member {
    name: String,
    client_url: String,
    peer_url: String,
    process: Option<Supervised>,
}

/// A static etcd cluster on 127.0.0.1, each member with its own ports and
/// data directory under one temporary directory.
pub struct EtcdCluster {
    // Members before the directory: processes stop before it is removed.
    members: Vec<Member>,
    initial_cluster: String,
    dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one answers a quorum read
    /// (again on new ports when a member could not start: a free port may
    /// be taken before etcd binds it).
    pub async fn start(n: usize) -> EtcdCluster {
        let mut errors = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(n).await {
                Ok(cluster) => return cluster,
                Err(e) => errors.push(e),
            }
        }
        panic!("cannot start an etcd cluster:\n{}", errors.join("\n"));
    }

    async fn try_start(n: usize) -> Result<EtcdCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("etcd-cluster-")
            .tempdir()
            .expect("tempdir");
        let ports = free_ports(2 * n);
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client_url: format!("http://127.0.0.1:{}", ports[2 * i]),
                peer_url: format!("http://127.0.0.1:{}", ports[2 * i + 1]),
                process: None,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            members,
            initial_cluster,
            dir,
        };
        for i in 0..n {
            cluster.spawn(i);
        }
        for i in 0..n {
            cluster.healthy(i).await?;
        }
        Ok(cluster)
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// Client URL of member `i`.
    pub fn endpoint(&self, i: usize) -> String {
        self.members[i].client_url.clone()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    /// The log of member `i`.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    /// Starts member `i` (again) on its data directory without waiting:
    /// a member alone cannot answer until a quorum runs.
    pub fn spawn(&mut self, i: usize) {
        assert!(self.members[i].process.is_none(), "member {i} is running");
        let m = &self.members[i];
        let args = vec![
            format!("--name={}", m.name),
            format!(
                "--data-dir={}",
                self.dir.path().join(format!("{}.etcd", m.name)).display()
            ),
            format!("--listen-client-urls={}", m.client_url),
            format!("--advertise-client-urls={}", m.client_url),
            format!("--listen-peer-urls={}", m.peer_url),
            format!("--initial-advertise-peer-urls={}", m.peer_url),
            format!("--initial-cluster={}", self.initial_cluster),
            "--initial-cluster-state=new".to_string(),
            "--initial-cluster-token=e2e-faults".to_string(),
            // Quick failure detection on loopback.
            "--heartbeat-interval=50".to_string(),
            "--election-timeout=500".to_string(),
            "--unsafe-no-fsync".to_string(),
            "--logger=zap".to_string(),
            "--log-level=warn".to_string(),
        ];
        let process = Supervised::spawn(&etcd_binary(), &args, &self.log_path(i));
        self.members[i].process = Some(process);
    }

    /// Stops member `i` cleanly (SIGTERM) and waits for it to exit.
    pub fn stop(&mut self, i: usize) {
        if let Some(p) = self.members[i].process.take() {
            p.signal("TERM");
        }
    }

    /// Kills member `i` (SIGKILL: a crash) and waits for it to exit.
    pub fn kill(&mut self, i: usize) {
        if let Some(p) = self.members[i].process.take() {
            p.signal("KILL");
        }
    }

    /// The pid of member `i`'s etcd process, while it runs (for SIGSTOP
    /// and SIGCONT).
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.as_ref()?.program_pid("etcd")
    }

    /// Waits until member `i` answers a linearizable read (which needs a
    /// leader, so a quorum of members).
    pub async fn wait_healthy(&mut self, i: usize) {
        if let Err(e) = self.healthy(i).await {
            panic!("{e}");
        }
    }

    async fn healthy(&mut self, i: usize) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        let endpoint = self.members[i].client_url.clone();
        loop {
            if linearizable_read(&endpoint).await.is_some() {
                return Ok(());
            }
            let exited = self.members[i]
                .process
                .as_mut()
                .is_none_or(Supervised::exited);
            if exited {
                return Err(format!(
                    "etcd member {i} is not running; log:\n{}",
                    self.log(i)
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "etcd member {i} not healthy after {START_DEADLINE:?}; log:\n{}",
                    self.log(i)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The index of the current leader, as the running members report it.
    pub async fn leader(&self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leader = None;
        for m in &self.members {
            let status = match (&m.process, connect(&m.client_url).await) {
                (Some(_), Ok(mut client)) => {
                    tokio::time::timeout(Duration::from_secs(1), client.status()).await
                }
                _ => {
                    ids.push(None);
                    continue;
                }
            };
            match status {
                Ok(Ok(s)) => {
                    ids.push(s.header().map(|h| h.member_id()));
                    if s.leader() != 0 {
                        leader = Some(s.leader());
                    }
                }
                _ => ids.push(None),
            }
        }
        let leader = leader?;
        ids.iter().position(|id| *id == Some(leader))
    }
}

async fn connect(endpoint: &str) -> Result<etcd_client::Client, etcd_client::Error> {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_timeout(Duration::from_secs(1));
    etcd_client::Client::connect([endpoint], Some(options)).await
}

/// The revision of a linearizable read on `endpoint`, if it answers within
/// a second.
pub async fn linearizable_read(endpoint: &str) -> Option<i64> {
    let mut client = connect(endpoint).await.ok()?;
    let resp = tokio::time::timeout(Duration::from_secs(1), client.get("\0", None))
        .await
        .ok()?
        .ok()?;
    resp.header().map(|h| h.revision())
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

/// `$HAPROXY_BIN`, else `haproxy` on PATH, else Debian's `/usr/sbin/haproxy`
/// (not on a normal user's PATH).
fn haproxy_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("HAPROXY_BIN") {
        return PathBuf::from(bin);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("haproxy").exists()))
        .unwrap_or(false);
    if on_path {
        return PathBuf::from("haproxy");
    }
    PathBuf::from("/usr/sbin/haproxy")
}

/// HAProxy on a free loopback port in front of `backends`, sending traffic
/// only to those whose `GET /readyz` answers 200 (checked every 200 ms, two
/// failures take a backend out, one success puts it back); a request
/// refused by a dead backend is redispatched to another.
///
/// A backend marked down keeps its sessions (no `on-marked-down
/// shutdown-sessions`): a request already sent to a replica that turns
/// unready (an etcd outage) gets the replica's own complete answer, a 503
/// Status, where HAProxy would otherwise cut it and answer 502 itself. The
/// replicas run on this host, so a killed replica's connections are closed
/// by the kernel and its watch clients re-watch elsewhere at once anyway.
pub struct HaProxy {
    process: Option<Supervised>,
    dir: tempfile::TempDir,
    pub addr: String,
}

impl HaProxy {
    /// Starts HAProxy (again on another port when it could not bind) and
    /// waits until it routes `/readyz` to a backend.
    pub async fn start(backends: &[&str]) -> HaProxy {
        let mut errors = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(backends).await {
                Ok(proxy) => return proxy,
                Err(e) => errors.push(e),
            }
        }
        panic!("cannot start haproxy:\n{}", errors.join("\n"));
    }

    async fn try_start(backends: &[&str]) -> Result<HaProxy, String> {
        let dir = tempfile::Builder::new()
            .prefix("haproxy-")
            .tempdir()
            .expect("tempdir");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, b)| format!("    server r{i} {b} check\n"))
            .collect();
        let config = format!(
            "global
    maxconn 2000

defaults
    mode http
    option redispatch
    retries 3
    timeout connect 1s
    timeout client 5m
    timeout server 5m
    timeout http-request 10s
    timeout http-keep-alive 5s
    timeout tunnel 5m
    # A /readyz slowed by a busy machine is not a failed check.
    timeout check 1s

frontend apiserver
    bind {addr}
    default_backend apiservers

backend apiservers
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server inter 200ms fastinter 100ms downinter 200ms fall 2 rise 1
{servers}"
        );
        let cfg_path = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg_path, config).expect("haproxy config");
        let args = vec![
            "-db".to_string(),
            "-f".to_string(),
            cfg_path.display().to_string(),
        ];
        let process = Supervised::spawn(&haproxy_binary(), &args, &dir.path().join("haproxy.log"));
        let mut proxy = HaProxy {
            process: Some(process),
            dir,
            addr,
        };
        proxy.wait_serving().await?;
        Ok(proxy)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// Waits until a `/readyz` through the proxy answers `ok`.
    async fn wait_serving(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Ok(body) = crate::http_get(&self.addr, "/readyz").await {
                if body == "ok" {
                    return Ok(());
                }
            }
            if self.process.as_mut().is_none_or(Supervised::exited) {
                return Err(format!("haproxy exited; log:\n{}", self.log()));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "haproxy not serving after {START_DEADLINE:?}; log:\n{}",
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// 3 etcd members, `replicas` apiservers on one prefix pointed at every
/// member, HAProxy in front.
pub struct Cluster {
    pub etcd: EtcdCluster,
    pub replicas: Vec<Server>,
    pub lb: HaProxy,
    pub prefix: String,
}

impl Cluster {
    /// Starts the cluster; `flags` go to every replica.
    pub async fn start(replicas: usize, flags: &[&str]) -> Cluster {
        let etcd = EtcdCluster::start(3).await;
        let prefix = crate::unique_prefix();
        let endpoints = etcd.endpoints().join(",");
        let mut servers = Vec::new();
        for _ in 0..replicas {
            servers.push(Server::start_with_prefix(&endpoints, &prefix, flags).await);
        }
        let backends: Vec<&str> = servers.iter().map(Server::addr).collect();
        let lb = HaProxy::start(&backends).await;
        Cluster {
            etcd,
            replicas: servers,
            lb,
            prefix,
        }
    }

    /// `host:port` of the load balancer.
    pub fn addr(&self) -> &str {
        &self.lb.addr
    }

    /// Every log of the cluster, for a failing assertion.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, r) in self.replicas.iter().enumerate() {
            out.push_str(&format!("--- replica {i}\n{}\n", r.log()));
        }
        for i in 0..self.etcd.len() {
            out.push_str(&format!("--- etcd {i}\n{}\n", self.etcd.log(i)));
        }
        out.push_str(&format!("--- haproxy\n{}\n", self.lb.log()));
        out
    }
}

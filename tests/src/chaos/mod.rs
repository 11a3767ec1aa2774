//! The chaos suite: a seeded, randomized schedule of client operations and
//! faults against several replicas on a 3-member etcd, recorded as a
//! [`History`] and judged by [`checker::check`].
//!
//! - **Operations** (each client, from its own seeded generator): creates,
//!   updates and deletes with resourceVersion preconditions, consistent and
//!   `NotOlderThan` gets, consistent and `NotOlderThan` lists, paginated
//!   lists; watchers resume each stream on another replica, from the last
//!   revision they saw.
//! - **Faults** (one at a time, each healed before the next): SIGKILL and
//!   restart of a replica, SIGSTOP/SIGCONT of a replica, SIGKILL and
//!   restart of an etcd member, SIGSTOP of one member or of two (quorum
//!   lost), compaction, and network partitions between a replica and all of
//!   etcd or between every replica and one member (each replica reaches
//!   each member through a [`proxy::Proxy`]).
//! - **The truth** is etcd's own change log of the objects, read by a watch
//!   on etcd itself that the schedule never compacts past.
//!
//! A seed fixes every choice of the schedule (operations, keys, replicas,
//! faults and their lengths); timing is the machine's, so a failing seed is
//! rerun with `CHAOS_SEED=<seed>` to reproduce the same schedule.

pub mod checker;
pub mod history;
pub mod proxy;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use etcd_client::{EventType, WatchOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::cluster::EtcdCluster;
use crate::Server;
use history::{Change, ChangeKind, History, Op, Outcome, Request, Seen, Segment, WatchEvent};

/// The namespace the run writes in.
const NAMESPACE: &str = "chaos";
/// Objects under test are named `chaos-<n>` (other objects of the
/// namespace, such as `kube-root-ca.crt`, are not the run's).
const NAME_PREFIX: &str = "chaos-";
/// How long a client waits for any answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub duration: Duration,
    pub replicas: usize,
    pub clients: usize,
    pub watchers: usize,
    /// Distinct objects: fewer means more contention.
    pub keys: usize,
    pub faults: bool,
}

/// What a run did and found.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub elapsed: Duration,
    pub ops: BTreeMap<&'static str, usize>,
    pub faults: BTreeMap<&'static str, usize>,
    pub checked: checker::Checked,
    pub anomalies: Vec<checker::Anomaly>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: usize = self.ops.values().sum();
        let faults: usize = self.faults.values().sum();
        writeln!(f, "seed {} ran {:.0?}", self.seed, self.elapsed)?;
        writeln!(f, "operations: {total} {:?}", self.ops)?;
        writeln!(f, "faults: {faults} {:?}", self.faults)?;
        writeln!(f, "checked: {:?}", self.checked)?;
        write!(f, "anomalies: {}", self.anomalies.len())?;
        for a in self.anomalies.iter().take(20) {
            write!(f, "\n  {a}")?;
        }
        Ok(())
    }
}

/// The monotonic clock of a run, in nanoseconds since its start.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The replicas' current addresses (a restarted replica has a new port).
type Addrs = Arc<RwLock<Vec<String>>>;

/// Runs `cfg` and checks what it recorded.
pub async fn run(cfg: Config) -> Report {
    let started = Instant::now();
    let mut etcd = EtcdCluster::start(3).await;
    let endpoints = etcd.endpoints();
    let prefix = crate::unique_prefix();

    // Each replica reaches each member through its own proxy.
    let mut proxies = Vec::new();
    for _ in 0..cfg.replicas {
        let mut row = Vec::new();
        for e in &endpoints {
            let upstream: SocketAddr = e
                .trim_start_matches("http://")
                .parse()
                .expect("member address");
            row.push(proxy::Proxy::start(upstream).await);
        }
        proxies.push(row);
    }
    let replica_endpoints: Vec<String> = proxies
        .iter()
        .map(|row| {
            row.iter()
                .map(|p| format!("http://{}", p.addr))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let flags = ["--etcd-compaction-interval=0"];
    let mut servers = Vec::new();
    for eps in &replica_endpoints {
        servers.push(Server::start_with_prefix(eps, &prefix, &flags).await);
    }
    let addrs: Addrs = Arc::new(RwLock::new(
        servers.iter().map(|s| s.addr().to_string()).collect(),
    ));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let resp = servers[0]
        .request(
            "POST",
            "/api/v1/namespaces",
            &[("Content-Type", "application/json")],
            ns.to_string().as_bytes(),
        )
        .await;
    assert_eq!(resp.status, 201, "namespace: {}", resp.text());

    // The truth: etcd's own log of the prefix, from now on.
    let mut client = etcd_client::Client::connect(&endpoints, None)
        .await
        .expect("etcd client");
    let start_revision = client
        .get("\0", None)
        .await
        .expect("etcd revision")
        .header()
        .map_or(0, |h| h.revision());
    let recorded = Arc::new(AtomicI64::new(start_revision));
    let changes = Arc::new(Mutex::new(Vec::new()));
    let recorder = tokio::spawn(record(
        endpoints.clone(),
        format!("{prefix}/"),
        start_revision,
        recorded.clone(),
        changes.clone(),
    ));

    let clock = Clock(Instant::now());
    let deadline = tokio::time::Instant::now() + cfg.duration;
    let ops = Arc::new(Mutex::new(Vec::new()));
    let segments = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..cfg.clients {
        let rng = StdRng::seed_from_u64(cfg.seed.wrapping_mul(1000).wrapping_add(c as u64));
        tasks.push(tokio::spawn(client_loop(
            c,
            rng,
            cfg.keys,
            addrs.clone(),
            clock,
            deadline,
            ops.clone(),
        )));
    }
    for w in 0..cfg.watchers {
        let rng = StdRng::seed_from_u64(cfg.seed.wrapping_mul(1000).wrapping_add(500 + w as u64));
        tasks.push(tokio::spawn(watch_loop(
            w,
            cfg.clients + w,
            rng,
            addrs.clone(),
            clock,
            deadline,
            ops.clone(),
            segments.clone(),
        )));
    }

    let mut faults = BTreeMap::new();
    if cfg.faults {
        let mut rng = StdRng::seed_from_u64(cfg.seed.wrapping_mul(1000).wrapping_add(999));
        let mut world = World {
            etcd: &mut etcd,
            servers: &mut servers,
            proxies: &proxies,
            replica_endpoints: &replica_endpoints,
            prefix: &prefix,
            flags: &flags,
            addrs: &addrs,
            client: &mut client,
            recorded: &recorded,
        };
        while tokio::time::Instant::now() + Duration::from_secs(3) < deadline {
            tokio::time::sleep(Duration::from_millis(rng.random_range(300..1500))).await;
            let name = world.fault(&mut rng).await;
            *faults.entry(name).or_insert(0) += 1;
        }
    }
    for t in tasks {
        t.await.expect("client task");
    }

    // Everything has settled: mark the end of the log and wait for it.
    // (The run's client may hold a connection to a member the schedule
    // restarted: retry on a fresh one.)
    let mut marker = None;
    for _ in 0..40 {
        match client
            .put(format!("{prefix}/chaos-end-marker"), "end", None)
            .await
        {
            Ok(resp) => {
                marker = resp.header().map(|h| h.revision());
                break;
            }
            Err(e) => {
                eprintln!("end marker: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(250)).await;
                if let Ok(c) = etcd_client::Client::connect(&endpoints, None).await {
                    client = c;
                }
            }
        }
    }
    let marker = marker.expect("etcd took the end marker");
    let wait = tokio::time::Instant::now() + Duration::from_secs(60);
    while recorded.load(Ordering::SeqCst) < marker {
        assert!(
            tokio::time::Instant::now() < wait,
            "etcd's history did not reach {marker}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    recorder.abort();

    let history = History {
        changes: changes.lock().unwrap().clone(),
        start_revision,
        ops: ops.lock().unwrap().clone(),
        segments: segments.lock().unwrap().clone(),
    };
    let mut op_counts = BTreeMap::new();
    for op in &history.ops {
        *op_counts.entry(op_kind(&op.request)).or_insert(0) += 1;
    }
    let (checked, anomalies) = checker::check(&history);
    if !anomalies.is_empty() {
        for (i, s) in servers.iter().enumerate() {
            eprintln!("--- replica {i} log (tail)\n{}", tail(&s.log(), 40));
        }
    }
    Report {
        seed: cfg.seed,
        elapsed: started.elapsed(),
        ops: op_counts,
        faults,
        checked,
        anomalies,
    }
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn op_kind(r: &Request) -> &'static str {
    match r {
        Request::Create { .. } => "create",
        Request::Update { .. } => "update",
        Request::Delete { .. } => "delete",
        Request::Get {
            not_older_than: None,
            ..
        } => "get",
        Request::Get { .. } => "get-not-older-than",
        Request::List { paged: true, .. } => "list-paged",
        Request::List {
            not_older_than: None,
            ..
        } => "list",
        Request::List { .. } => "list-not-older-than",
    }
}

/// The write id in a stored or served value: `wid:<id>;` anywhere in it
/// (so JSON and protobuf values read alike).
fn wid_in(bytes: &[u8]) -> Option<String> {
    let at = bytes.windows(4).position(|w| w == b"wid:")? + 4;
    let end = bytes[at..].iter().position(|&b| b == b';')? + at;
    Some(String::from_utf8_lossy(&bytes[at..end]).into_owned())
}

/// Records etcd's changes to the objects under test, resuming after any
/// error from the revision after the last one it saw.
async fn record(
    endpoints: Vec<String>,
    prefix: String,
    start: i64,
    recorded: Arc<AtomicI64>,
    changes: Arc<Mutex<Vec<Change>>>,
) {
    let infix = format!("/configmaps/{NAMESPACE}/");
    let mut next = start + 1;
    loop {
        let Ok(mut client) = etcd_client::Client::connect(&endpoints, None).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let opts = WatchOptions::new().with_prefix().with_start_revision(next);
        let Ok(mut stream) = client.watch(prefix.as_str(), Some(opts)).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while let Ok(Some(resp)) = stream.message().await {
            assert!(
                resp.compact_revision() == 0,
                "the history watch was compacted at {} (wanted {next})",
                resp.compact_revision()
            );
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                if let Some((_, name)) = key.split_once(infix.as_str()) {
                    if name.starts_with(NAME_PREFIX) {
                        let kind = match event.event_type() {
                            EventType::Delete => ChangeKind::Deleted,
                            EventType::Put if kv.create_revision() == kv.mod_revision() => {
                                ChangeKind::Added
                            }
                            EventType::Put => ChangeKind::Modified,
                        };
                        changes.lock().unwrap().push(Change {
                            revision: kv.mod_revision(),
                            name: name.to_string(),
                            kind,
                            wid: (kind != ChangeKind::Deleted)
                                .then(|| wid_in(kv.value()))
                                .flatten(),
                        });
                    }
                }
                next = kv.mod_revision() + 1;
                recorded.store(kv.mod_revision(), Ordering::SeqCst);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An answer, or `None` for no answer in time.
async fn send(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Option<crate::HttpResponse> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[]
    } else {
        &[("Content-Type", "application/json")]
    };
    tokio::time::timeout(
        REQUEST_TIMEOUT,
        crate::http_request(addr, method, path, headers, body.as_bytes()),
    )
    .await
    .ok()?
    .ok()
}

fn seen_of(v: &Value) -> Option<Seen> {
    Some(Seen {
        name: v["metadata"]["name"].as_str()?.to_string(),
        revision: v["metadata"]["resourceVersion"].as_str()?.parse().ok()?,
        wid: v["data"]["w"].as_str().and_then(|w| wid_in(w.as_bytes())),
    })
}

/// A write's outcome from its answer.
fn write_outcome(resp: Option<crate::HttpResponse>) -> Outcome {
    let Some(resp) = resp else {
        return Outcome::Unknown;
    };
    match resp.status {
        200..=299 => serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .and_then(|v| seen_of(&v))
            .map_or(Outcome::Unknown, |s| Outcome::Written {
                revision: s.revision,
            }),
        429 => Outcome::Unknown,
        code @ 400..=499 => Outcome::Refused { code },
        _ => Outcome::Unknown,
    }
}

fn path_of(name: &str) -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")
}

fn list_path() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps")
}

struct Recorder {
    client: usize,
    clock: Clock,
    ops: Arc<Mutex<Vec<Op>>>,
    /// The newest revision this client has seen.
    seen: i64,
}

impl Recorder {
    fn push(&mut self, replica: usize, request: Request, outcome: Outcome, start: u64) -> Outcome {
        match &outcome {
            Outcome::Written { revision } | Outcome::Listed { revision, .. } => {
                self.seen = self.seen.max(*revision)
            }
            Outcome::Found(s) => self.seen = self.seen.max(s.revision),
            _ => {}
        }
        self.ops.lock().unwrap().push(Op {
            client: self.client,
            replica,
            request,
            outcome: outcome.clone(),
            start,
            end: self.clock.now(),
        });
        outcome
    }

    async fn get(
        &mut self,
        addr: &str,
        replica: usize,
        name: &str,
        not_older_than: Option<i64>,
    ) -> Outcome {
        let start = self.clock.now();
        let path = match not_older_than {
            Some(rv) => format!("{}?resourceVersion={rv}", path_of(name)),
            None => path_of(name),
        };
        let outcome = match send(addr, "GET", &path, None).await {
            Some(r) if r.status == 200 => serde_json::from_slice::<Value>(&r.body)
                .ok()
                .and_then(|v| seen_of(&v))
                .map_or(Outcome::Unknown, Outcome::Found),
            Some(r) if r.status == 404 => Outcome::NotFound,
            Some(r) if (400..500).contains(&r.status) && r.status != 429 => {
                Outcome::Refused { code: r.status }
            }
            _ => Outcome::Unknown,
        };
        let request = Request::Get {
            name: name.to_string(),
            not_older_than,
        };
        self.push(replica, request, outcome, start)
    }

    async fn list(
        &mut self,
        addr: &str,
        replica: usize,
        not_older_than: Option<i64>,
        paged: bool,
    ) -> Outcome {
        let start = self.clock.now();
        let mut items = Vec::new();
        let mut pages = Vec::new();
        let mut cont: Option<String> = None;
        let outcome = loop {
            let mut q = Vec::new();
            if paged {
                q.push("limit=3".to_string());
            }
            match (&cont, not_older_than) {
                (Some(c), _) => q.push(format!("continue={c}")),
                (None, Some(rv)) => q.push(format!(
                    "resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
                )),
                (None, None) => {}
            }
            let path = format!("{}?{}", list_path(), q.join("&"));
            let Some(r) = send(addr, "GET", &path, None).await else {
                break Outcome::Unknown;
            };
            if r.status != 200 {
                break Outcome::Unknown;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&r.body) else {
                break Outcome::Unknown;
            };
            let Some(rv) = v["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
            else {
                break Outcome::Unknown;
            };
            pages.push(rv);
            for item in v["items"].as_array().into_iter().flatten() {
                if let Some(s) = seen_of(item).filter(|s| s.name.starts_with(NAME_PREFIX)) {
                    items.push(s);
                }
            }
            match v["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
                Some(c) => cont = Some(c.to_string()),
                None => {
                    break Outcome::Listed {
                        revision: pages[0],
                        items: std::mem::take(&mut items),
                        pages: std::mem::take(&mut pages),
                    }
                }
            }
        };
        self.push(
            replica,
            Request::List {
                not_older_than,
                paged,
            },
            outcome,
            start,
        )
    }
}

fn pick(rng: &mut StdRng, addrs: &Addrs) -> (usize, String) {
    let addrs = addrs.read().unwrap();
    let i = rng.random_range(0..addrs.len());
    (i, addrs[i].clone())
}

async fn client_loop(
    client: usize,
    mut rng: StdRng,
    keys: usize,
    addrs: Addrs,
    clock: Clock,
    deadline: tokio::time::Instant,
    ops: Arc<Mutex<Vec<Op>>>,
) {
    let mut rec = Recorder {
        client,
        clock,
        ops,
        seen: 0,
    };
    let mut writes = 0u64;
    while tokio::time::Instant::now() < deadline {
        let name = format!("{NAME_PREFIX}{}", rng.random_range(0..keys));
        let (replica, addr) = pick(&mut rng, &addrs);
        let mut wid = || {
            writes += 1;
            format!("c{client}w{writes}")
        };
        match rng.random_range(0..100) {
            0..20 => {
                let wid = wid();
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "data": {"w": format!("wid:{wid};")}});
                let start = clock.now();
                let outcome = write_outcome(send(&addr, "POST", &list_path(), Some(&body)).await);
                rec.push(replica, Request::Create { name, wid }, outcome, start);
            }
            20..45 => {
                let Outcome::Found(current) = rec.get(&addr, replica, &name, None).await else {
                    continue;
                };
                let wid = wid();
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": NAMESPACE,
                                 "resourceVersion": current.revision.to_string()},
                    "data": {"w": format!("wid:{wid};")}});
                let (replica, addr) = pick(&mut rng, &addrs);
                let start = clock.now();
                let outcome = write_outcome(send(&addr, "PUT", &path_of(&name), Some(&body)).await);
                let request = Request::Update {
                    name,
                    precondition: current.revision,
                    wid,
                };
                rec.push(replica, request, outcome, start);
            }
            45..55 => {
                let Outcome::Found(current) = rec.get(&addr, replica, &name, None).await else {
                    continue;
                };
                let body = json!({"apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": current.revision.to_string()}});
                let (replica, addr) = pick(&mut rng, &addrs);
                let start = clock.now();
                let outcome =
                    write_outcome(send(&addr, "DELETE", &path_of(&name), Some(&body)).await);
                let request = Request::Delete {
                    name,
                    precondition: current.revision,
                };
                rec.push(replica, request, outcome, start);
            }
            55..72 => {
                rec.get(&addr, replica, &name, None).await;
            }
            72..82 => {
                let rv = rec.seen.max(1);
                rec.get(&addr, replica, &name, Some(rv)).await;
            }
            82..92 => {
                let paged = rng.random_bool(0.5);
                rec.list(&addr, replica, None, paged).await;
            }
            _ => {
                let rv = rec.seen.max(1);
                rec.list(&addr, replica, Some(rv), false).await;
            }
        }
    }
}

/// One watcher: lists for a start, then watches on a random replica for a
/// random while, and resumes on another from the last revision it saw;
/// after 410 Gone it lists again.
#[allow(clippy::too_many_arguments)]
async fn watch_loop(
    watcher: usize,
    client: usize,
    mut rng: StdRng,
    addrs: Addrs,
    clock: Clock,
    deadline: tokio::time::Instant,
    ops: Arc<Mutex<Vec<Op>>>,
    segments: Arc<Mutex<Vec<Segment>>>,
) {
    let mut rec = Recorder {
        client,
        clock,
        ops,
        seen: 0,
    };
    let mut from: Option<i64> = None;
    while tokio::time::Instant::now() < deadline {
        let (replica, addr) = pick(&mut rng, &addrs);
        let Some(start) = from else {
            if let Outcome::Listed { revision, .. } = rec.list(&addr, replica, None, false).await {
                from = Some(revision);
            }
            continue;
        };
        let path = format!(
            "{}?watch=1&resourceVersion={start}&allowWatchBookmarks=true",
            list_path()
        );
        let lifetime = Duration::from_millis(rng.random_range(500..4000));
        let Ok(Ok(mut lines)) =
            tokio::time::timeout(Duration::from_secs(2), crate::watch::open_raw(&addr, &path))
                .await
        else {
            continue;
        };
        let mut seg = Segment {
            watcher,
            replica,
            from: start,
            events: Vec::new(),
            bookmarks: Vec::new(),
            expired: false,
        };
        let end = (tokio::time::Instant::now() + lifetime).min(deadline);
        let mut last = start;
        while let Ok(Some(line)) = tokio::time::timeout_at(end, lines.recv()).await {
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                break;
            };
            let object = &v["object"];
            match v["type"].as_str() {
                Some("ERROR") => {
                    seg.expired = object["code"].as_i64() == Some(410);
                    break;
                }
                Some("BOOKMARK") => {
                    if let Some(rv) = object["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                    {
                        seg.bookmarks.push((seg.events.len(), rv));
                        last = last.max(rv);
                    }
                }
                Some(t) => {
                    let Some(s) = seen_of(object) else { break };
                    last = last.max(s.revision);
                    if s.name.starts_with(NAME_PREFIX) {
                        seg.events.push(WatchEvent {
                            event_type: t.to_string(),
                            object: s,
                        });
                    }
                }
                None => break,
            }
        }
        from = if seg.expired { None } else { Some(last) };
        segments.lock().unwrap().push(seg);
    }
}

/// What the fault schedule acts on.
struct World<'a> {
    etcd: &'a mut EtcdCluster,
    servers: &'a mut Vec<Server>,
    proxies: &'a [Vec<proxy::Proxy>],
    replica_endpoints: &'a [String],
    prefix: &'a str,
    flags: &'a [&'a str],
    addrs: &'a Addrs,
    client: &'a mut etcd_client::Client,
    recorded: &'a AtomicI64,
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl World<'_> {
    /// Injects one fault, waits, heals it; returns its name.
    async fn fault(&mut self, rng: &mut StdRng) -> &'static str {
        let pause =
            |rng: &mut StdRng, lo: u64, hi: u64| Duration::from_millis(rng.random_range(lo..hi));
        match rng.random_range(0..8) {
            0 => {
                let i = rng.random_range(0..self.servers.len());
                self.servers[i].kill();
                tokio::time::sleep(pause(rng, 200, 1500)).await;
                let server =
                    Server::start_with_prefix(&self.replica_endpoints[i], self.prefix, self.flags)
                        .await;
                self.addrs.write().unwrap()[i] = server.addr().to_string();
                self.servers[i] = server;
                "kill-replica"
            }
            1 => {
                let i = rng.random_range(0..self.servers.len());
                let pid = self.servers[i].pid();
                signal(pid, "STOP");
                tokio::time::sleep(pause(rng, 500, 3000)).await;
                signal(pid, "CONT");
                "pause-replica"
            }
            2 => {
                let j = rng.random_range(0..self.etcd.len());
                self.etcd.kill(j);
                tokio::time::sleep(pause(rng, 300, 2000)).await;
                self.etcd.spawn(j);
                self.etcd.wait_healthy(j).await;
                "kill-etcd-member"
            }
            3 => {
                let j = rng.random_range(0..self.etcd.len());
                let pid = self.etcd.pid(j).expect("etcd pid");
                signal(pid, "STOP");
                tokio::time::sleep(pause(rng, 500, 2500)).await;
                signal(pid, "CONT");
                "pause-etcd-member"
            }
            4 => {
                let j = rng.random_range(0..self.etcd.len());
                let pids: Vec<u32> = (0..self.etcd.len())
                    .filter(|&k| k != j)
                    .map(|k| self.etcd.pid(k).expect("etcd pid"))
                    .collect();
                for &p in &pids {
                    signal(p, "STOP");
                }
                tokio::time::sleep(pause(rng, 1000, 3000)).await;
                for &p in &pids {
                    signal(p, "CONT");
                }
                for k in 0..self.etcd.len() {
                    self.etcd.wait_healthy(k).await;
                }
                "quorum-loss"
            }
            5 => {
                // Never past what the history watch has read.
                let current = self
                    .client
                    .get("\0", None)
                    .await
                    .ok()
                    .and_then(|r| r.header().map(|h| h.revision()))
                    .unwrap_or(0);
                let safe = current.min(self.recorded.load(Ordering::SeqCst));
                let at = safe - rng.random_range(0..5);
                if at > 1 {
                    let _ = self.client.compact(at, None).await;
                }
                "compaction"
            }
            6 => {
                let i = rng.random_range(0..self.servers.len());
                for p in &self.proxies[i] {
                    p.partition(true);
                }
                tokio::time::sleep(pause(rng, 1000, 4000)).await;
                for p in &self.proxies[i] {
                    p.partition(false);
                }
                "partition-replica-from-etcd"
            }
            _ => {
                let j = rng.random_range(0..self.etcd.len());
                for row in self.proxies {
                    row[j].partition(true);
                }
                tokio::time::sleep(pause(rng, 1000, 4000)).await;
                for row in self.proxies {
                    row[j].partition(false);
                }
                "partition-etcd-member"
            }
        }
    }
}

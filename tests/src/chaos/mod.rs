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
//! [`outage`] is a second scenario on the same parts: resources on three
//! etcd clusters (`--etcd-servers-overrides`), the events cluster killed
//! under load, one [`Truth`] and one checked history per cluster.
//!
//! A seed fixes every choice of the schedule (operations, keys, replicas,
//! faults and their lengths); timing is the machine's, so a failing seed is
//! rerun with `CHAOS_SEED=<seed>` to reproduce the same schedule.

pub mod checker;
pub mod history;
pub mod outage;
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
/// How long a client waits before its next request after one that got no
/// definite answer (a client backs off from a failing server).
const BACKOFF: Duration = Duration::from_millis(50);
/// The annotation a write's id travels in (`wid:<id>;`), for every kind.
const WID_ANNOTATION: &str = "e2e.chaos/w";

/// A kind of object the clients write, in the run's namespace.
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// The API path of its group version (`/api/v1`, `/apis/<g>/<v>`).
    pub group_version_path: &'static str,
    /// Its plural, which is also its segment of the etcd keys.
    pub plural: &'static str,
    /// The fields an object named so needs besides its metadata.
    pub fields: fn(&str) -> Value,
}

pub const CONFIGMAPS: Resource = Resource {
    api_version: "v1",
    kind: "ConfigMap",
    group_version_path: "/api/v1",
    plural: "configmaps",
    fields: |_| json!({}),
};

pub const EVENTS: Resource = Resource {
    api_version: "v1",
    kind: "Event",
    group_version_path: "/api/v1",
    plural: "events",
    fields: |name| {
        json!({
            "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                               "namespace": NAMESPACE},
            "reason": "Chaos", "message": "chaos", "type": "Normal",
        })
    },
};

pub const LEASES: Resource = Resource {
    api_version: "coordination.k8s.io/v1",
    kind: "Lease",
    group_version_path: "/apis/coordination.k8s.io/v1",
    plural: "leases",
    fields: |_| json!({"spec": {"holderIdentity": "chaos", "leaseDurationSeconds": 30}}),
};

impl Resource {
    fn list_path(self) -> String {
        format!(
            "{}/namespaces/{NAMESPACE}/{}",
            self.group_version_path, self.plural
        )
    }

    fn path_of(self, name: &str) -> String {
        format!("{}/{name}", self.list_path())
    }

    /// What lies between the server's prefix and an object's name in its
    /// etcd keys.
    pub fn key_infix(self) -> String {
        format!("/{}/{NAMESPACE}/", self.plural)
    }

    /// The object `name` carrying write `wid` (with `resourceVersion` for
    /// an update).
    fn object(self, name: &str, wid: &str, resource_version: Option<i64>) -> Value {
        let mut v = (self.fields)(name);
        v["apiVersion"] = self.api_version.into();
        v["kind"] = self.kind.into();
        v["metadata"] = json!({"name": name, "namespace": NAMESPACE,
            "annotations": {WID_ANNOTATION: format!("wid:{wid};")}});
        if let Some(rv) = resource_version {
            v["metadata"]["resourceVersion"] = rv.to_string().into();
        }
        v
    }
}

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

/// The replicas' addresses for the clients, once the scenario's namespace
/// exists (created through the first replica).
async fn serve(servers: &[Server]) -> Addrs {
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
    Arc::new(RwLock::new(
        servers.iter().map(|s| s.addr().to_string()).collect(),
    ))
}

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
    let addrs = serve(&servers).await;

    // The truth: etcd's own log of the objects, from now on.
    let truth = Truth::start(&endpoints, &prefix, CONFIGMAPS).await;
    let mut client = etcd_client::Client::connect(&endpoints, None)
        .await
        .expect("etcd client");

    let clock = Clock(Instant::now());
    let deadline = tokio::time::Instant::now() + cfg.duration;
    let ops = Arc::new(Mutex::new(Vec::new()));
    let segments = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..cfg.clients {
        let rng = StdRng::seed_from_u64(cfg.seed.wrapping_mul(1000).wrapping_add(c as u64));
        tasks.push(tokio::spawn(client_loop(
            c,
            CONFIGMAPS,
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
            CONFIGMAPS,
            false,
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
            recorded: &truth.recorded,
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

    let (start_revision, changes) = truth.finish().await;
    let history = History {
        changes,
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

/// etcd's own log of one resource's objects on one cluster, recorded from
/// the moment it starts by a watch on that cluster: the truth a run's
/// history is judged by (one per cluster when resources live on several).
pub struct Truth {
    endpoints: Vec<String>,
    prefix: String,
    start_revision: i64,
    /// The newest revision the watch has read.
    recorded: Arc<AtomicI64>,
    changes: Arc<Mutex<Vec<Change>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Truth {
    /// Starts recording the changes to `resource`'s objects under the
    /// server prefix `prefix` on the cluster at `endpoints`.
    pub async fn start(endpoints: &[String], prefix: &str, resource: Resource) -> Truth {
        let mut client = etcd_client::Client::connect(endpoints, None)
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
        let task = tokio::spawn(record(
            endpoints.to_vec(),
            format!("{prefix}/"),
            resource.key_infix(),
            start_revision,
            recorded.clone(),
            changes.clone(),
        ));
        Truth {
            endpoints: endpoints.to_vec(),
            prefix: prefix.to_string(),
            start_revision,
            recorded,
            changes,
            task,
        }
    }

    /// Once everything has settled: marks the end of the log, waits for
    /// the watch to read it, and returns the revision the log starts after
    /// and its changes. (A member may have been restarted: the marker is
    /// retried on fresh connections.)
    pub async fn finish(self) -> (i64, Vec<Change>) {
        let mut marker = None;
        for _ in 0..40 {
            let put = match etcd_client::Client::connect(&self.endpoints, None).await {
                Ok(mut c) => c
                    .put(format!("{}/chaos-end-marker", self.prefix), "end", None)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match put {
                Ok(resp) => {
                    marker = resp.header().map(|h| h.revision());
                    break;
                }
                Err(e) => {
                    eprintln!("end marker: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        let marker = marker.expect("etcd took the end marker");
        let wait = tokio::time::Instant::now() + Duration::from_secs(60);
        while self.recorded.load(Ordering::SeqCst) < marker {
            assert!(
                tokio::time::Instant::now() < wait,
                "etcd's history did not reach {marker}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.task.abort();
        let changes = self.changes.lock().unwrap().clone();
        (self.start_revision, changes)
    }
}

/// Records etcd's changes to the objects under test, resuming after any
/// error from the revision after the last one it saw.
async fn record(
    endpoints: Vec<String>,
    prefix: String,
    infix: String,
    start: i64,
    recorded: Arc<AtomicI64>,
    changes: Arc<Mutex<Vec<Change>>>,
) {
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
        wid: v["metadata"]["annotations"][WID_ANNOTATION]
            .as_str()
            .and_then(|w| wid_in(w.as_bytes())),
    })
}

/// A write's outcome from its answer.
fn write_outcome(resp: Option<&crate::HttpResponse>) -> Outcome {
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

/// A 200 carrying a Status of `Success`.
fn is_success_status(resp: &crate::HttpResponse) -> bool {
    resp.status == 200
        && serde_json::from_slice::<Value>(&resp.body)
            .is_ok_and(|v| v["kind"] == "Status" && v["status"] == "Success")
}

/// The status code of an answer (0: none in time) and, for an error, its
/// Status's reason.
fn answer_of(resp: Option<&crate::HttpResponse>) -> (u16, Option<String>) {
    let Some(resp) = resp else {
        return (0, None);
    };
    let reason = (resp.status >= 300)
        .then(|| serde_json::from_slice::<Value>(&resp.body).ok())
        .flatten()
        .and_then(|v| v["reason"].as_str().map(str::to_string));
    (resp.status, reason)
}

struct Recorder {
    client: usize,
    resource: Resource,
    clock: Clock,
    ops: Arc<Mutex<Vec<Op>>>,
    /// The newest revision this client has seen.
    seen: i64,
}

impl Recorder {
    fn push(
        &mut self,
        replica: usize,
        request: Request,
        outcome: Outcome,
        answer: Option<&crate::HttpResponse>,
        start: u64,
    ) -> Outcome {
        match &outcome {
            Outcome::Written { revision } | Outcome::Listed { revision, .. } => {
                self.seen = self.seen.max(*revision)
            }
            Outcome::Found(s) => self.seen = self.seen.max(s.revision),
            _ => {}
        }
        let (code, reason) = answer_of(answer);
        self.ops.lock().unwrap().push(Op {
            client: self.client,
            replica,
            request,
            outcome: outcome.clone(),
            code,
            reason,
            start,
            end: self.clock.now(),
        });
        outcome
    }

    /// Sends a write of `request` with `body`, and records it.
    async fn write(
        &mut self,
        addr: &str,
        replica: usize,
        method: &str,
        request: Request,
        body: &Value,
    ) -> Outcome {
        let path = match &request {
            Request::Create { .. } => self.resource.list_path(),
            Request::Update { name, .. } | Request::Delete { name, .. } => {
                self.resource.path_of(name)
            }
            _ => unreachable!("not a write: {request:?}"),
        };
        let start = self.clock.now();
        let resp = send(addr, method, &path, Some(body)).await;
        let outcome = match (&request, write_outcome(resp.as_ref())) {
            // Most kinds answer a delete with a Success Status, which names
            // no revision: the precondition is the one it acknowledged.
            (Request::Delete { precondition, .. }, Outcome::Unknown)
                if resp.as_ref().is_some_and(is_success_status) =>
            {
                Outcome::Written {
                    revision: *precondition,
                }
            }
            (_, outcome) => outcome,
        };
        let outcome = self.push(replica, request, outcome, resp.as_ref(), start);
        backoff(outcome).await
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
            Some(rv) => format!("{}?resourceVersion={rv}", self.resource.path_of(name)),
            None => self.resource.path_of(name),
        };
        let resp = send(addr, "GET", &path, None).await;
        let outcome = match &resp {
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
        let outcome = self.push(replica, request, outcome, resp.as_ref(), start);
        backoff(outcome).await
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
        let mut last;
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
            let path = format!("{}?{}", self.resource.list_path(), q.join("&"));
            last = send(addr, "GET", &path, None).await;
            let Some(r) = &last else {
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
        let request = Request::List {
            not_older_than,
            paged,
        };
        let outcome = self.push(replica, request, outcome, last.as_ref(), start);
        backoff(outcome).await
    }
}

/// Returns `outcome`, after a pause when it was no definite answer.
async fn backoff(outcome: Outcome) -> Outcome {
    if outcome == Outcome::Unknown {
        tokio::time::sleep(BACKOFF).await;
    }
    outcome
}

fn pick(rng: &mut StdRng, addrs: &Addrs) -> (usize, String) {
    let addrs = addrs.read().unwrap();
    let i = rng.random_range(0..addrs.len());
    (i, addrs[i].clone())
}

/// One client: random creates, updates, deletes (with preconditions),
/// gets and lists of `resource`'s objects on random replicas.
#[allow(clippy::too_many_arguments)]
async fn client_loop(
    client: usize,
    resource: Resource,
    mut rng: StdRng,
    keys: usize,
    addrs: Addrs,
    clock: Clock,
    deadline: tokio::time::Instant,
    ops: Arc<Mutex<Vec<Op>>>,
) {
    let mut rec = Recorder {
        client,
        resource,
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
        // Each arm records its operations (and backs off after no answer).
        match rng.random_range(0..100) {
            0..20 => {
                let wid = wid();
                let body = resource.object(&name, &wid, None);
                let request = Request::Create { name, wid };
                rec.write(&addr, replica, "POST", request, &body).await
            }
            20..45 => {
                let Outcome::Found(current) = rec.get(&addr, replica, &name, None).await else {
                    continue;
                };
                let wid = wid();
                let body = resource.object(&name, &wid, Some(current.revision));
                let (replica, addr) = pick(&mut rng, &addrs);
                let request = Request::Update {
                    name,
                    precondition: current.revision,
                    wid,
                };
                rec.write(&addr, replica, "PUT", request, &body).await
            }
            45..55 => {
                let Outcome::Found(current) = rec.get(&addr, replica, &name, None).await else {
                    continue;
                };
                let body = json!({"apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": current.revision.to_string()}});
                let (replica, addr) = pick(&mut rng, &addrs);
                let request = Request::Delete {
                    name,
                    precondition: current.revision,
                };
                rec.write(&addr, replica, "DELETE", request, &body).await
            }
            55..72 => rec.get(&addr, replica, &name, None).await,
            72..82 => {
                let rv = rec.seen.max(1);
                rec.get(&addr, replica, &name, Some(rv)).await
            }
            82..92 => {
                let paged = rng.random_bool(0.5);
                rec.list(&addr, replica, None, paged).await
            }
            _ => {
                let rv = rec.seen.max(1);
                rec.list(&addr, replica, Some(rv), false).await
            }
        };
    }
}

/// One watcher of `resource`: lists for a start, then watches on a random
/// replica for a random while, and resumes on another from the last
/// revision it saw; after 410 Gone it lists again. A watcher that `hold`s
/// keeps one stream on one replica (`watcher` modulo their number) until
/// the deadline, resuming it there only if it breaks.
#[allow(clippy::too_many_arguments)]
async fn watch_loop(
    watcher: usize,
    client: usize,
    resource: Resource,
    hold: bool,
    mut rng: StdRng,
    addrs: Addrs,
    clock: Clock,
    deadline: tokio::time::Instant,
    ops: Arc<Mutex<Vec<Op>>>,
    segments: Arc<Mutex<Vec<Segment>>>,
) {
    let mut rec = Recorder {
        client,
        resource,
        clock,
        ops,
        seen: 0,
    };
    let mut from: Option<i64> = None;
    while tokio::time::Instant::now() < deadline {
        let (replica, addr) = if hold {
            let addrs = addrs.read().unwrap();
            let i = watcher % addrs.len();
            (i, addrs[i].clone())
        } else {
            pick(&mut rng, &addrs)
        };
        let Some(start) = from else {
            if let Outcome::Listed { revision, .. } = rec.list(&addr, replica, None, false).await {
                from = Some(revision);
            }
            continue;
        };
        let path = format!(
            "{}?watch=1&resourceVersion={start}&allowWatchBookmarks=true",
            resource.list_path()
        );
        let lifetime = if hold {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        } else {
            Duration::from_millis(rng.random_range(500..4000))
        };
        let Ok(Ok(mut lines)) =
            tokio::time::timeout(Duration::from_secs(2), crate::watch::open_raw(&addr, &path))
                .await
        else {
            tokio::time::sleep(BACKOFF).await;
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

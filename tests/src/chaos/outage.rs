//! The override-cluster outage scenario (issue #32): resources on three
//! etcd clusters behind `--etcd-servers-overrides` (ConfigMaps on the main
//! cluster, Events on an events cluster, Leases on a leases cluster) and
//! several replicas; clients write all three under load while the events
//! cluster is taken down and brought back ([`Outage`]: killed and
//! restarted, or hung with SIGSTOP and resumed), and the run checks that
//!
//! - no acknowledged write on any cluster is lost: each cluster's recorded
//!   history (its clients' operations and watch streams) is judged by
//!   [`checker::check`] against that cluster's own etcd log ([`Truth`]);
//! - writes to the other clusters are neither refused nor slowed by the
//!   outage: every one gets a definite answer, and their p99 latency while
//!   the events cluster is down stays within [`latency_bound`] of their p99
//!   in the normal window before the first outage;
//! - event writes during the outage answer 503 with a ServiceUnavailable
//!   Status within [`PROMPT`] (or, on a machine so busy that the other
//!   writes' [`latency_bound`] is longer, within that; a hung cluster may
//!   first cost the requests sent before the server found it out one
//!   [`HUNG_REQUEST_TIMEOUT`]); once the cluster is back, they succeed
//!   again within [`RECOVERY`];
//! - watches on events outlive the outage: a watch held on each replica
//!   from the start is one stream to the end (no ERROR, no 410, no end)
//!   that carries events written after the recovery, and no event watcher
//!   has to relist (which the checker's gap-free, duplicate-free rule
//!   would also catch as an ADDED replay).
//!
//! The run is split into `outages` equal cycles; in each the events
//! cluster is up for the first 35%, down until 65%, then up again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::checker::{self, Anomaly, Checked};
use super::history::{History, Op, Outcome, Request, Segment};
use super::{client_loop, watch_loop, Clock, Resource, Truth, CONFIGMAPS, EVENTS, LEASES};
use crate::cluster::EtcdCluster;
use crate::Server;

/// How soon an event write must be refused while its cluster is down (a
/// dead cluster refuses connections at once; this is the slack of a busy
/// machine), unless [`latency_bound`] of the normal writes is longer.
pub const PROMPT: Duration = Duration::from_secs(1);
/// How soon after the events cluster answers again an event write must
/// succeed.
pub const RECOVERY: Duration = Duration::from_secs(10);
/// The servers' `--etcd-request-timeout` (seconds) when outages hang the
/// cluster (the default, 10 s, would spend a short run's outage on the
/// first timeout).
pub const HUNG_REQUEST_TIMEOUT: u64 = 2;
/// The start of the run not measured (connections and caches warming up).
const WARM_UP: Duration = Duration::from_secs(1);

/// The most the p99 of other clusters' writes may reach during an outage,
/// given their normal p99: twice the normal p99, and never less than it
/// plus 100 ms. One p99 of a few hundred requests on a shared 2-core
/// machine moves by tens of milliseconds between windows for no reason of
/// ours; an outage that made those writes wait on the dead cluster (a
/// shared lock, a shared connection, a retry loop) would cost them
/// seconds, far past either margin.
pub fn latency_bound(normal_p99: Duration) -> Duration {
    (normal_p99 * 2).max(normal_p99 + Duration::from_millis(100))
}

/// What to run.
#[derive(Debug, Clone)]
pub struct OutageConfig {
    pub seed: u64,
    pub duration: Duration,
    pub replicas: usize,
    /// Writing clients per resource.
    pub clients: usize,
    /// Distinct objects per resource.
    pub keys: usize,
    /// Members of each etcd cluster.
    pub members: usize,
    /// Outages of the events cluster, one per cycle of the run.
    pub outages: usize,
    /// How each takes the cluster down.
    pub outage: Outage,
}

/// How the events cluster goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// SIGKILL of every member, restarted on its data: connections are
    /// refused meanwhile.
    Kill,
    /// SIGSTOP of every member, then SIGCONT: connections stay open and
    /// nothing answers.
    Pause,
    /// Kill and pause in turns, kill first.
    Both,
}

impl Outage {
    /// Whether outage `i` of a run hangs the cluster (else kills it).
    fn hangs(self, i: usize) -> bool {
        match self {
            Outage::Kill => false,
            Outage::Pause => true,
            Outage::Both => i % 2 == 1,
        }
    }
}

impl std::str::FromStr for Outage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kill" => Ok(Outage::Kill),
            "pause" => Ok(Outage::Pause),
            "both" => Ok(Outage::Both),
            _ => Err(format!("{s}: not kill, pause or both")),
        }
    }
}

/// The checker's verdict on one cluster's history.
#[derive(Debug)]
pub struct ClusterCheck {
    pub cluster: &'static str,
    pub resource: &'static str,
    pub checked: Checked,
    pub anomalies: Vec<Anomaly>,
}

/// What a run did and found.
#[derive(Debug)]
pub struct OutageReport {
    pub seed: u64,
    pub elapsed: Duration,
    pub clusters: Vec<ClusterCheck>,
    pub verdict: Verdict,
}

/// What the scenario measured and judged beyond the checker.
#[derive(Debug, Default)]
pub struct Verdict {
    /// p99 of acknowledged writes to the main and leases clusters, before
    /// the first outage and during the outages, and the bound of the
    /// latter.
    pub normal_p99: Duration,
    pub outage_p99: Duration,
    pub bound: Duration,
    /// Acknowledged writes to the main and leases clusters in each window.
    pub normal_writes: usize,
    pub outage_writes: usize,
    /// Event writes refused with 503 during the outages, and the slowest.
    pub refused_events: usize,
    pub slowest_refusal: Duration,
    /// For each outage, from the events cluster answering again to the
    /// first event write acknowledged after it.
    pub recoveries: Vec<Duration>,
    /// Expectations that failed (besides the checker's anomalies).
    pub findings: Vec<String>,
}

impl OutageReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.verdict.findings.is_empty() && self.clusters.iter().all(|c| c.anomalies.is_empty())
    }
}

impl std::fmt::Display for OutageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = &self.verdict;
        writeln!(f, "seed {} ran {:.0?}", self.seed, self.elapsed)?;
        writeln!(
            f,
            "other clusters' writes: normal p99 {:.0?} ({} writes), during outages p99 {:.0?} ({} writes), bound {:.0?}",
            v.normal_p99, v.normal_writes, v.outage_p99, v.outage_writes, v.bound
        )?;
        writeln!(
            f,
            "event writes refused with 503: {} (slowest {:.0?}); recoveries {:.0?}",
            v.refused_events, v.slowest_refusal, v.recoveries
        )?;
        for c in &self.clusters {
            writeln!(
                f,
                "{} cluster ({}): {:?}, anomalies {}",
                c.cluster,
                c.resource,
                c.checked,
                c.anomalies.len()
            )?;
            for a in c.anomalies.iter().take(10) {
                writeln!(f, "  {a}")?;
            }
        }
        write!(f, "findings: {}", v.findings.len())?;
        for x in v.findings.iter().take(20) {
            write!(f, "\n  {x}")?;
        }
        Ok(())
    }
}

/// One outage on the run's clock (nanoseconds): the events cluster went
/// down at `down`, was started or resumed at `restarted`, and answered at
/// `up`; `detect` is how long a request sent at `down` may wait before the
/// server finds the cluster gone (0 when it refuses connections).
#[derive(Debug, Clone, Copy)]
struct Window {
    down: u64,
    restarted: u64,
    up: u64,
    detect: u64,
}

/// What one resource's clients recorded.
struct Recorded {
    resource: Resource,
    cluster: &'static str,
    ops: Arc<Mutex<Vec<Op>>>,
    segments: Arc<Mutex<Vec<Segment>>>,
    /// Client ids of its watchers: hopping ones, then held ones.
    hopping: Vec<usize>,
    held: Vec<usize>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn p99(mut latencies: Vec<u64>) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    latencies.sort_unstable();
    let i = (latencies.len() * 99).div_ceil(100) - 1;
    Duration::from_nanos(latencies[i])
}

/// Runs `cfg` and checks what it recorded.
pub async fn run(cfg: OutageConfig) -> OutageReport {
    let started = Instant::now();
    let main = EtcdCluster::start(cfg.members).await;
    let mut events = EtcdCluster::start(cfg.members).await;
    let leases = EtcdCluster::start(cfg.members).await;
    let prefix = crate::unique_prefix();
    let flag = format!(
        "--etcd-servers-overrides=/events#{},coordination.k8s.io/leases#{}",
        events.endpoints().join(";"),
        leases.endpoints().join(";")
    );
    let mut flags = vec![flag.as_str(), "--etcd-compaction-interval=0"];
    let timeout = format!("--etcd-request-timeout={HUNG_REQUEST_TIMEOUT}");
    if (0..cfg.outages).any(|i| cfg.outage.hangs(i)) {
        flags.push(&timeout);
    }
    let mut servers = Vec::new();
    for _ in 0..cfg.replicas {
        servers.push(Server::start_with_prefix(&main.endpoints().join(","), &prefix, &flags).await);
    }
    let addrs = super::serve(&servers).await;

    // The truth of each cluster, from its own etcd.
    let truths = [
        Truth::start(&main.endpoints(), &prefix, CONFIGMAPS).await,
        Truth::start(&events.endpoints(), &prefix, EVENTS).await,
        Truth::start(&leases.endpoints(), &prefix, LEASES).await,
    ];

    let clock = Clock(Instant::now());
    let begin = tokio::time::Instant::now();
    let deadline = begin + cfg.duration;
    let mut tasks = Vec::new();
    let mut recorded = Vec::new();
    for (r, (resource, cluster)) in [(CONFIGMAPS, "main"), (EVENTS, "events"), (LEASES, "leases")]
        .into_iter()
        .enumerate()
    {
        let ops = Arc::new(Mutex::new(Vec::new()));
        let segments = Arc::new(Mutex::new(Vec::new()));
        let seed = |n: usize| {
            cfg.seed
                .wrapping_mul(1000)
                .wrapping_add((100 * r + n) as u64)
        };
        for c in 0..cfg.clients {
            tasks.push(tokio::spawn(client_loop(
                c,
                resource,
                StdRng::seed_from_u64(seed(c)),
                cfg.keys,
                addrs.clone(),
                clock,
                deadline,
                ops.clone(),
            )));
        }
        // One hopping watcher per resource; on events also one held
        // watch per replica.
        let held = if resource.plural == EVENTS.plural {
            cfg.replicas
        } else {
            0
        };
        let mut rec = Recorded {
            resource,
            cluster,
            ops: ops.clone(),
            segments: segments.clone(),
            hopping: Vec::new(),
            held: Vec::new(),
        };
        for w in 0..1 + held {
            let client = cfg.clients + w;
            let hold = w > 0;
            if hold {
                rec.held.push(client);
            } else {
                rec.hopping.push(client);
            }
            tasks.push(tokio::spawn(watch_loop(
                w,
                client,
                resource,
                hold,
                StdRng::seed_from_u64(seed(50 + w)),
                addrs.clone(),
                clock,
                deadline,
                ops.clone(),
                segments.clone(),
            )));
        }
        recorded.push(rec);
    }

    // The outages: kill every member of the events cluster, then start
    // them again on their data; or stop them all, then resume them.
    let cycle = cfg.duration / u32::try_from(cfg.outages.max(1)).unwrap_or(1);
    let mut windows = Vec::new();
    for i in 0..cfg.outages {
        let at = begin + cycle * u32::try_from(i).unwrap_or(0);
        tokio::time::sleep_until(at + cycle * 35 / 100).await;
        let hangs = cfg.outage.hangs(i);
        let pids: Vec<u32> = (0..events.len())
            .map(|j| events.pid(j).expect("etcd pid"))
            .collect();
        let down = clock.now();
        for (j, &pid) in pids.iter().enumerate() {
            if hangs {
                super::signal(pid, "STOP");
            } else {
                events.kill(j);
            }
        }
        tokio::time::sleep_until(at + cycle * 65 / 100).await;
        let restarted = clock.now();
        for (j, &pid) in pids.iter().enumerate() {
            if hangs {
                super::signal(pid, "CONT");
            } else {
                events.spawn(j);
            }
        }
        for j in 0..events.len() {
            events.wait_healthy(j).await;
        }
        windows.push(Window {
            down,
            restarted,
            up: clock.now(),
            detect: if hangs {
                nanos(Duration::from_secs(HUNG_REQUEST_TIMEOUT))
            } else {
                0
            },
        });
    }
    for t in tasks {
        t.await.expect("client task");
    }

    let mut clusters = Vec::new();
    let mut verdict = Verdict::default();
    let mut others = Vec::new();
    let mut events_history = None;
    for (truth, rec) in truths.into_iter().zip(&recorded) {
        let (start_revision, changes) = truth.finish().await;
        let history = History {
            changes,
            start_revision,
            ops: rec.ops.lock().unwrap().clone(),
            segments: rec.segments.lock().unwrap().clone(),
        };
        let (checked, anomalies) = checker::check(&history);
        if rec.resource.plural == EVENTS.plural {
            let watchers: Vec<usize> = rec.hopping.iter().chain(&rec.held).copied().collect();
            events_history = Some((history, watchers, rec.held.len()));
        } else {
            others.push((rec.resource.plural, history.ops));
        }
        clusters.push(ClusterCheck {
            cluster: rec.cluster,
            resource: rec.resource.plural,
            checked,
            anomalies,
        });
    }
    // The other clusters first: their normal latency bounds a refusal's.
    judge_others(&others, &windows, &mut verdict);
    if let Some((history, watchers, held)) = events_history {
        judge_events(&history, &watchers, held, &windows, &mut verdict);
    }
    if !verdict.findings.is_empty() || clusters.iter().any(|c| !c.anomalies.is_empty()) {
        for (i, s) in servers.iter().enumerate() {
            eprintln!("--- replica {i} log (tail)\n{}", super::tail(&s.log(), 40));
        }
    }
    OutageReport {
        seed: cfg.seed,
        elapsed: started.elapsed(),
        clusters,
        verdict,
    }
}

/// The other clusters' writes (`(resource, its ops)`): every one answered
/// (no timeout, 429 or 5xx), and those acknowledged during the outages
/// within [`latency_bound`] of those before.
fn judge_others(others: &[(&str, Vec<Op>)], windows: &[Window], v: &mut Verdict) {
    let first_down = windows.first().map_or(u64::MAX, |w| w.down);
    let in_outage = |t: u64| windows.iter().any(|w| w.down <= t && t < w.up);
    let (mut normal, mut outage) = (Vec::new(), Vec::new());
    for (resource, ops) in others {
        for op in ops.iter().filter(|op| op.is_write()) {
            if op.code == 0 || op.code == 429 || op.code >= 500 {
                v.findings.push(format!(
                    "a {resource} write got no definite answer: {} {:?} after {:.0?}: {:?}",
                    op.code,
                    op.reason,
                    Duration::from_nanos(op.latency()),
                    op.request
                ));
            }
            if !matches!(op.outcome, Outcome::Written { .. }) {
                continue;
            }
            if op.start >= nanos(WARM_UP) && op.end < first_down {
                normal.push(op.latency());
            } else if in_outage(op.start) {
                outage.push(op.latency());
            }
        }
    }
    (v.normal_writes, v.outage_writes) = (normal.len(), outage.len());
    (v.normal_p99, v.outage_p99) = (p99(normal), p99(outage));
    v.bound = latency_bound(v.normal_p99);
    if v.normal_writes < 20 || v.outage_writes < 20 {
        v.findings.push(format!(
            "too few writes to measure: {} normal, {} during outages",
            v.normal_writes, v.outage_writes
        ));
    }
    if v.outage_p99 > v.bound {
        v.findings.push(format!(
            "writes to the other clusters slowed by the outage: p99 {:.0?} > {:.0?} (normal {:.0?})",
            v.outage_p99, v.bound, v.normal_p99
        ));
    }
}

/// The events cluster's own expectations: writes refused at once during
/// each outage and accepted soon after it, and watches (`watchers`: their
/// client ids; the first `held` watcher indexes after 0 hold one stream)
/// that outlive it.
fn judge_events(h: &History, watchers: &[usize], held: usize, windows: &[Window], v: &mut Verdict) {
    let prompt = PROMPT.max(v.bound);
    let findings = &mut v.findings;
    for (i, w) in windows.iter().enumerate() {
        // Writes sent while it was down (but in the last `prompt` before it
        // was started again) are refused at once, with kube's Status.
        let restarted = w.restarted.saturating_sub(nanos(prompt));
        let during: Vec<&Op> = h
            .ops
            .iter()
            .filter(|op| op.is_write() && w.down <= op.start && op.start < restarted)
            .collect();
        if during.is_empty() {
            findings.push(format!("no event write was sent during outage {i}"));
        }
        for op in during {
            let took = Duration::from_nanos(op.latency());
            // Sent before the replica could know (one request timeout after
            // the first request that met the hung cluster, which this load
            // sends within PROMPT): it may wait its whole timeout.
            let prompt = if w.detect > 0 && op.start < w.down + w.detect + nanos(PROMPT) {
                prompt + Duration::from_nanos(w.detect)
            } else {
                prompt
            };
            v.slowest_refusal = v.slowest_refusal.max(took);
            if op.code == 503 {
                v.refused_events += 1;
            }
            if op.code != 503 || op.reason.as_deref() != Some("ServiceUnavailable") || took > prompt
            {
                findings.push(format!(
                    "event write during outage {i}: {} {:?} after {took:.0?} (wanted 503 ServiceUnavailable within {prompt:?}): {:?}",
                    op.code, op.reason, op.request
                ));
            }
        }
    }
    // Accepted again soon after it answers.
    for (i, w) in windows.iter().enumerate() {
        let recovery = h
            .ops
            .iter()
            .filter(|op| {
                op.is_write()
                    && op.start >= w.restarted
                    && matches!(op.outcome, Outcome::Written { .. })
            })
            .map(|op| Duration::from_nanos(op.end.saturating_sub(w.up)))
            .min()
            .unwrap_or(Duration::MAX);
        if recovery > RECOVERY {
            findings.push(format!(
                "event writes did not recover within {RECOVERY:?} of outage {i} ending: {recovery:.0?}"
            ));
        }
        v.recoveries.push(recovery);
    }
    // No watcher relisted after the first outage began, and no stream
    // expired.
    let first_down = windows.first().map_or(u64::MAX, |w| w.down);
    for op in &h.ops {
        if matches!(op.request, Request::List { .. })
            && watchers.contains(&op.client)
            && op.start >= first_down
        {
            findings.push(format!(
                "event watcher {} relisted at {:.1?}",
                op.client,
                Duration::from_nanos(op.start)
            ));
        }
    }
    for seg in h.segments.iter().filter(|s| s.expired) {
        findings.push(format!(
            "an event watch from {} on replica {} ended with 410 Gone",
            seg.from, seg.replica
        ));
    }
    // A held watch is one stream from before the first outage to the end,
    // carrying an event written after the last recovery.
    let Some(last_up) = windows.last().map(|w| w.up) else {
        return;
    };
    let late: Vec<&str> = h
        .ops
        .iter()
        .filter(|op| op.start >= last_up)
        .filter_map(|op| match (&op.request, &op.outcome) {
            (
                Request::Create { wid, .. } | Request::Update { wid, .. },
                Outcome::Written { .. },
            ) => Some(wid.as_str()),
            _ => None,
        })
        .collect();
    for w in 1..=held {
        let streams: Vec<&Segment> = h.segments.iter().filter(|s| s.watcher == w).collect();
        if streams.len() != 1 {
            findings.push(format!(
                "held event watch {w} was {} streams, not one",
                streams.len()
            ));
        }
        let carried_on = streams.iter().any(|s| {
            s.events.iter().any(|e| {
                e.object
                    .wid
                    .as_deref()
                    .is_some_and(|wid| late.contains(&wid))
            })
        });
        if !carried_on {
            findings.push(format!(
                "held event watch {w} saw no event written after the last recovery"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::{Seen, WatchEvent};
    use super::*;

    const MS: u64 = 1_000_000;
    /// Down at 10 s, started again at 20 s, answering at 20.5 s.
    const WINDOW: Window = Window {
        down: 10_000 * MS,
        restarted: 20_000 * MS,
        up: 20_500 * MS,
        detect: 0,
    };

    fn create(client: usize, wid: &str, code: u16, start_ms: u64, took_ms: u64) -> Op {
        Op {
            client,
            replica: 0,
            request: Request::Create {
                name: "chaos-0".into(),
                wid: wid.into(),
            },
            outcome: match code {
                201 => Outcome::Written { revision: 5 },
                409 => Outcome::Refused { code },
                _ => Outcome::Unknown,
            },
            code,
            reason: (code == 503).then(|| "ServiceUnavailable".to_string()),
            start: start_ms * MS,
            end: (start_ms + took_ms) * MS,
        }
    }

    /// Writes every 100 ms from 1 s to 30 s taking `normal_ms`, and
    /// `outage_ms` while the events cluster is down.
    fn others(normal_ms: u64, outage_ms: u64) -> Vec<(&'static str, Vec<Op>)> {
        let ops = (10..300)
            .map(|i| {
                let start = i * 100;
                let down = (10_000..20_500).contains(&start);
                create(
                    0,
                    &format!("w{i}"),
                    201,
                    start,
                    if down { outage_ms } else { normal_ms },
                )
            })
            .collect();
        vec![("configmaps", ops)]
    }

    fn judged_others(others: &[(&str, Vec<Op>)]) -> Verdict {
        let mut v = Verdict::default();
        judge_others(others, &[WINDOW], &mut v);
        v
    }

    #[test]
    fn the_latency_bound_has_a_floor() {
        assert_eq!(
            latency_bound(Duration::from_millis(20)),
            Duration::from_millis(120)
        );
        assert_eq!(
            latency_bound(Duration::from_millis(300)),
            Duration::from_millis(600)
        );
    }

    #[test]
    fn slow_or_unanswered_writes_elsewhere_are_found() {
        let v = judged_others(&others(20, 30));
        assert!(v.findings.is_empty(), "{:?}", v.findings);
        assert_eq!(v.normal_p99, Duration::from_millis(20));
        assert_eq!(v.outage_p99, Duration::from_millis(30));

        let v = judged_others(&others(20, 500));
        assert!(
            v.findings[0].contains("slowed by the outage"),
            "{:?}",
            v.findings
        );

        let mut o = others(20, 30);
        o[0].1.push(create(1, "x", 503, 12_000, 5));
        o[0].1.push(create(1, "y", 0, 13_000, 5000));
        let v = judged_others(&o);
        assert_eq!(v.findings.len(), 2, "{:?}", v.findings);
        assert!(
            v.findings[0].contains("no definite answer"),
            "{:?}",
            v.findings
        );
    }

    /// Event writes refused during the outage, accepted after it; watcher
    /// 1 (client 11) held one stream carrying a late write, watcher 0
    /// (client 10) hopped.
    fn events() -> History {
        let mut ops = vec![
            create(0, "e1", 201, 5_000, 10),
            create(0, "e2", 503, 11_000, 5),
            create(0, "e3", 503, 15_000, 5),
            create(0, "e4", 201, 21_000, 10),
            create(10, "", 0, 0, 0),
        ];
        ops[4].request = Request::List {
            not_older_than: None,
            paged: false,
        };
        let event = |wid: &str| WatchEvent {
            event_type: "ADDED".into(),
            object: Seen {
                name: "chaos-0".into(),
                revision: 5,
                wid: Some(wid.into()),
            },
        };
        let segment = |watcher, events| Segment {
            watcher,
            replica: 0,
            from: 1,
            events,
            bookmarks: vec![],
            expired: false,
        };
        History {
            ops,
            segments: vec![
                segment(0, vec![event("e1")]),
                segment(1, vec![event("e1"), event("e4")]),
            ],
            ..History::default()
        }
    }

    fn judged_events(h: &History) -> Vec<String> {
        let mut v = Verdict::default();
        judge_events(h, &[10, 11], 1, &[WINDOW], &mut v);
        v.findings
    }

    #[test]
    fn a_sound_outage_passes() {
        let h = events();
        let mut v = Verdict::default();
        judge_events(&h, &[10, 11], 1, &[WINDOW], &mut v);
        assert!(v.findings.is_empty(), "{:?}", v.findings);
        assert_eq!(v.refused_events, 2);
        assert_eq!(v.recoveries, vec![Duration::from_millis(510)]);
    }

    #[test]
    fn a_hung_cluster_may_cost_one_timeout_first() {
        let hung = Window {
            detect: 2_000 * MS,
            ..WINDOW
        };
        let mut h = events();
        h.ops[1].end = h.ops[1].start + 2_100 * MS;
        let mut v = Verdict::default();
        judge_events(&h, &[10, 11], 1, &[hung], &mut v);
        assert!(v.findings.is_empty(), "{:?}", v.findings);
        // Later ones are refused at once.
        h.ops[2].end = h.ops[2].start + 2_100 * MS;
        let mut v = Verdict::default();
        judge_events(&h, &[10, 11], 1, &[hung], &mut v);
        assert_eq!(v.findings.len(), 1, "{:?}", v.findings);
    }

    #[test]
    fn outage_misbehaviour_is_found() {
        let mut slow = events();
        slow.ops[1].end = slow.ops[1].start + 3000 * MS;
        let mut wrong = events();
        wrong.ops[2].code = 500;
        let mut never_back = events();
        never_back.ops[3].outcome = Outcome::Unknown;
        let mut relisted = events();
        relisted.ops[4].start = 16_000 * MS;
        let mut expired = events();
        expired.segments[0].expired = true;
        let mut broken = events();
        broken.segments.push(broken.segments[1].clone());
        let mut stale = events();
        stale.segments[1].events.pop();
        for (h, what) in [
            (slow, "event write during outage"),
            (wrong, "event write during outage"),
            (never_back, "did not recover"),
            (relisted, "relisted"),
            (expired, "410 Gone"),
            (broken, "2 streams"),
            (stale, "no event written after the last recovery"),
        ] {
            let findings = judged_events(&h);
            assert!(
                findings.iter().any(|f| f.contains(what)),
                "{what}: {findings:?}"
            );
        }
    }
}

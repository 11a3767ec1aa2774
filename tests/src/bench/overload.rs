//! Phase 10, overload (issue 17): ConfigMap creates offered open loop at
//! 1×, 2×, 3× and 5× the rate the server sustains, as a user API Priority
//! and Fairness does not exempt (`system:masters` is exempt, as in kube:
//! the plain port's admin impersonates `bench-overload`, whom a RoleBinding
//! lets create ConfigMaps in the phase's namespace).
//!
//! The sustainable rate is measured first, closed loop at 64 in flight as
//! the same user. Each level then runs on a fresh server (its own prefix),
//! so that each starts from the same memory and the RSS peaks compare: the
//! objects a level admits stay in the cache, and at about the same admitted
//! rate every level stores about as many. Open loop: a request leaves at
//! its time whether or not earlier ones were answered (at most
//! `MAX_IN_FLIGHT` in flight; past that the client counts it as not sent).
//!
//! The user has a priority level of its own, as an operator gives a bulk
//! writer: kube's `global-default` shares (20), but one queue of 32 where
//! `global-default` deals each flow 6 of 128 queues of 50. A queue is what
//! an admitted request may wait in, so its length bounds the admitted
//! latency: with `global-default`'s 300 places for one user, requests
//! admitted at 2× and more waited 300 / throughput (0.4–2 s measured on
//! this machine, 6–12× the 1× level's p99), as they would in kube.
//!
//! Verdict, as kube-apiserver behaves under APF: the excess is answered 429
//! with Retry-After (a 429 without one is a problem), admitted requests at
//! 5× keep a p99 within 2× of the 1× level's, and the RSS peak at 5× stays
//! within 1.5× of the 1× level's. That bound holds when nothing grows with
//! the offered load: APF's queues are bounded (queues × queueLengthLimit
//! per level) and a rejected request is dropped at once, so what the excess
//! adds is at most the bounded queues and the client's connections.

use super::client::{find_str_field, Http};
use super::fixture::{self, configmap};
use super::procs::{cpu_seconds, Server};
use super::report::{Budget, Row, Verdict};
use super::stats::{fmt_duration, fmt_mib, fmt_rate, SharedHistogram};
use super::writes::server_creates;
use super::{Bench, Error, Result};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PHASE: &str = "10 overload";
const PREFIX: &str = "/bench-overload";
const NS: &str = "bench-overload";
const USER: &str = "bench-overload";
/// Offered load, in multiples of the sustainable rate.
const MULTIPLES: [f64; 4] = [1.0, 2.0, 3.0, 5.0];
/// In flight for the sustainable-rate measurement (the writes budget's).
const CONCURRENCY: usize = 64;
/// The client's own bound on requests in flight.
const MAX_IN_FLIGHT: u64 = 4096;
/// Admitted p99 at 5× over the 1× level's.
const P99_BOUND: f64 = 2.0;
/// RSS peak at 5× over the 1× level's.
const RSS_BOUND: f64 = 1.5;

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let d = b.plan.duration;
    let server = start(b, "base").await?;
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");
    let closed = server_creates_as_user(&server.http, collection.clone(), d).await;
    drop(server);
    let sustainable = closed.0;
    let mut rows = Vec::new();
    let mut base = Row::new(
        PHASE,
        format!("sustainable: closed loop, {CONCURRENCY} in flight as {USER}"),
    );
    base.server = format!(
        "{}/s · p50 {} · p99 {}",
        fmt_rate(sustainable),
        fmt_duration(closed.1),
        fmt_duration(closed.2)
    );
    base.problem = closed.3;
    base.plot("admitted", "/s", sustainable, None);
    base.plot_p99(closed.2, None);
    let failed = base.problem.is_some() || sustainable <= 0.0;
    rows.push(base);
    if failed {
        return Ok(rows);
    }
    let mut first: Option<Level> = None;
    for (i, m) in MULTIPLES.iter().enumerate() {
        let server = start(b, &format!("x{i}")).await?;
        let offered = sustainable * m;
        let level = offer(&server, &collection, offered, d).await;
        drop(server);
        let mut row = Row::new(
            PHASE,
            format!("offered {m}× ({}/s), open loop", fmt_rate(offered)),
        );
        row.server = level.summary();
        row.problem = level.problem();
        let admitted = level.admitted as f64 / level.elapsed.as_secs_f64().max(1e-9);
        row.plot("admitted", "/s", admitted, None);
        row.plot_p99(level.p99, first.as_ref().map(|one| one.p99));
        if let Some(one) = &first {
            let p99 = level.p99.as_secs_f64() / one.p99.as_secs_f64().max(1e-6);
            let rss = level.rss_peak as f64 / one.rss_peak.max(1) as f64;
            row.limit = format!(
                "1× level: p99 {}, RSS peak {}",
                fmt_duration(one.p99),
                fmt_mib(one.rss_peak)
            );
            row.ratio = format!("p99 {p99:.2}×, RSS {rss:.2}×");
            if (*m - 5.0).abs() < f64::EPSILON && row.problem.is_none() {
                row.budget = Some(verdict(&level, p99, rss));
            }
        }
        if first.is_none() {
            first = Some(level);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The 5× level against the 1× level's p99 (`p99` times it) and RSS peak
/// (`rss` times it).
fn verdict(level: &Level, p99: f64, rss: f64) -> Budget {
    let mut misses = Vec::new();
    if level.rejected == 0 {
        misses.push("no 429 at 5×: the server took everything".to_string());
    }
    if p99 >= P99_BOUND {
        misses.push(format!("admitted p99 {p99:.2}× the 1× level's"));
    }
    if rss >= RSS_BOUND {
        misses.push(format!("RSS peak {rss:.2}× the 1× level's"));
    }
    Budget {
        target: format!(
            "excess gets 429, admitted p99 < {P99_BOUND}× and RSS peak < {RSS_BOUND}× the 1× level's"
        ),
        verdict: if misses.is_empty() {
            Verdict::Met
        } else {
            Verdict::Missed(misses.join("; "))
        },
    }
}

/// The user's priority level: kube's `global-default` shares, one queue
/// of 32 (see the module's note). What the excess gets is
/// APF's own answer: 429 once the queue is full.
const LEVEL: &str = r#"{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration",
  "metadata":{"name":"bench-overload"},
  "spec":{"type":"Limited","limited":{"nominalConcurrencyShares":20,"lendablePercent":0,"borrowingLimitPercent":0,
    "limitResponse":{"type":"Queue","queuing":{"queues":1,"handSize":1,"queueLengthLimit":32}}}}}"#;

/// Puts every request of the user into `LEVEL`.
const SCHEMA: &str = r#"{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema",
  "metadata":{"name":"bench-overload"},
  "spec":{"priorityLevelConfiguration":{"name":"bench-overload"},"matchingPrecedence":500,
    "distinguisherMethod":{"type":"ByUser"},
    "rules":[{"subjects":[{"kind":"User","user":{"name":"bench-overload"}}],
      "resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"namespaces":["*"],"clusterScope":true}]}]}}"#;

/// A fresh server with the namespace, the user's RoleBinding and its
/// priority level in place, once a create as the user is allowed and
/// classified into that level.
async fn start(b: &Bench, name: &str) -> Result<Server> {
    let server = b
        .start_server(&format!("{PREFIX}-{name}"), &format!("overload-{name}"))
        .await?;
    let http = &server.http;
    fixture::namespace(http, NS).await?;
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}");
    let role = r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"creator"},
            "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["create"]}]}"#;
    http.post(&format!("{rbac}/roles"), Bytes::from(role))
        .await?;
    let binding = format!(
        r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{{"name":"creator"}},
            "roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"creator"}},
            "subjects":[{{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"{USER}"}}]}}"#
    );
    http.post(&format!("{rbac}/rolebindings"), Bytes::from(binding))
        .await?;
    let flowcontrol = "/apis/flowcontrol.apiserver.k8s.io/v1";
    let level = http
        .post(
            &format!("{flowcontrol}/prioritylevelconfigurations"),
            Bytes::from(LEVEL),
        )
        .await?;
    let level_uid = find_str_field(&level.body, "uid")
        .ok_or_else(|| Error::Setup("a PriorityLevelConfiguration without a uid".into()))?
        .to_string();
    http.post(&format!("{flowcontrol}/flowschemas"), Bytes::from(SCHEMA))
        .await?;
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seq = 0;
    loop {
        seq += 1;
        let probe = configmap(NS, &format!("probe-{seq}"), seq, None);
        let answer = http.post_as_user(&path, probe, USER).await?;
        let in_level = answer.priority_level.as_deref() == Some(level_uid.as_str());
        match answer.status {
            201 if in_level => return Ok(server),
            201 | 403 if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            s => {
                return Err(Error::Setup(format!(
                    "a create as {USER} answered {s} (in the bench's priority level: {in_level}): \
                     the RoleBinding or the FlowSchema did not take"
                )))
            }
        }
    }
}

/// Closed-loop creates as the user: rate, p50, p99 and a problem if any.
async fn server_creates_as_user(
    http: &Http,
    collection: String,
    d: Duration,
) -> (f64, Duration, Duration, Option<String>) {
    let http = http.clone().with_user(USER);
    let r = server_creates(&http, NS, collection, CONCURRENCY, d, body).await;
    (r.rate(), r.p50(), r.p99(), r.problem())
}

fn body(ns: &str, name: &str, seq: u64) -> Bytes {
    configmap(ns, name, seq, None)
}

/// What one offered level gave.
struct Level {
    offered: f64,
    elapsed: Duration,
    admitted: u64,
    rejected: u64,
    /// 429s without a Retry-After header.
    no_retry_after: u64,
    /// Neither 201 nor 429 (or no answer at all), with the first.
    other: u64,
    first_other: Option<String>,
    /// Requests the client did not send (its own in-flight bound).
    unsent: u64,
    p50: Duration,
    p99: Duration,
    rss_peak: u64,
    /// CPU seconds of the server and of this client over the level.
    cpu: Option<(f64, f64)>,
}

impl Level {
    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn summary(&self) -> String {
        format!(
            "offered {}/s · admitted {}/s, p50 {} · p99 {} · 429 {}/s ({} of them with Retry-After) · RSS peak {}{}{}",
            fmt_rate(self.offered),
            fmt_rate(self.per_sec(self.admitted)),
            fmt_duration(self.p50),
            fmt_duration(self.p99),
            fmt_rate(self.per_sec(self.rejected)),
            if self.no_retry_after == 0 { "all" } else { "not all" },
            fmt_mib(self.rss_peak),
            match self.cpu {
                Some((server, client)) => format!(
                    " · CPU: server {:.0}%, client {:.0}%",
                    server * 100.0 / self.elapsed.as_secs_f64(),
                    client * 100.0 / self.elapsed.as_secs_f64()
                ),
                None => String::new(),
            },
            if self.unsent > 0 {
                format!(" · {} not sent (client bound)", self.unsent)
            } else {
                String::new()
            }
        )
    }

    fn problem(&self) -> Option<String> {
        if self.admitted == 0 {
            return Some("no create admitted".into());
        }
        if self.no_retry_after > 0 {
            return Some(format!("{} 429s without Retry-After", self.no_retry_after));
        }
        if self.other > 0 {
            return Some(format!(
                "{} answers neither 201 nor 429, first: {}",
                self.other,
                self.first_other.as_deref().unwrap_or("?")
            ));
        }
        None
    }
}

#[derive(Default)]
struct Counts {
    admitted: AtomicU64,
    rejected: AtomicU64,
    no_retry_after: AtomicU64,
    other: AtomicU64,
    unsent: AtomicU64,
    in_flight: AtomicU64,
    first_other: std::sync::Mutex<Option<String>>,
}

/// Offers `rate` creates a second for `d`, open loop, and samples the
/// server's RSS meanwhile.
async fn offer(server: &Server, collection: &str, rate: f64, d: Duration) -> Level {
    let counts = Arc::new(Counts::default());
    let hist = Arc::new(SharedHistogram::default());
    let cpu = || {
        Some((
            cpu_seconds(server.pid()).ok()?,
            cpu_seconds(std::process::id()).ok()?,
        ))
    };
    let cpu_before = cpu();
    let path: Arc<str> = collection.into();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1e-3));
    let start = Instant::now();
    let mut rss_peak = server.rss().unwrap_or(0);
    let mut next_rss = start;
    let mut tasks = Vec::new();
    let mut k: u64 = 0;
    loop {
        let due = start + interval.mul_f64(k as f64);
        if due >= start + d {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        if Instant::now() >= next_rss {
            rss_peak = rss_peak.max(server.rss().unwrap_or(0));
            next_rss += Duration::from_millis(100);
        }
        k += 1;
        if counts.in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT {
            counts.unsent.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        counts.in_flight.fetch_add(1, Ordering::Relaxed);
        let (http, path, counts, hist) = (
            server.http.clone(),
            path.clone(),
            counts.clone(),
            hist.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let body = configmap(NS, &format!("o-{k:09}"), k, None);
            let t = Instant::now();
            let answer = http.post_as_user(&path, body, USER).await;
            match answer {
                Ok(a) if a.status == 201 => {
                    hist.record(t.elapsed());
                    counts.admitted.fetch_add(1, Ordering::Relaxed);
                }
                Ok(a) if a.status == 429 => {
                    counts.rejected.fetch_add(1, Ordering::Relaxed);
                    if a.retry_after.is_none() {
                        counts.no_retry_after.fetch_add(1, Ordering::Relaxed);
                    }
                }
                other => {
                    counts.other.fetch_add(1, Ordering::Relaxed);
                    let what = match other {
                        Ok(a) => format!("HTTP {}", a.status),
                        Err(e) => e.to_string(),
                    };
                    let mut first = counts.first_other.lock().unwrap_or_else(|e| e.into_inner());
                    first.get_or_insert(what);
                }
            }
            counts.in_flight.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    // The stragglers are answered (or time out) after the offering ends:
    // the RSS is sampled until they are.
    for t in tasks {
        while !t.is_finished() {
            rss_peak = rss_peak.max(server.rss().unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = t.await;
    }
    rss_peak = rss_peak.max(server.rss().unwrap_or(0));
    let elapsed = start.elapsed();
    let cpu = cpu_before
        .zip(cpu())
        .map(|((s0, c0), (s1, c1))| (s1 - s0, c1 - c0));
    let hist = hist.snapshot();
    let first_other = counts
        .first_other
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    Level {
        offered: rate,
        elapsed,
        admitted: counts.admitted.load(Ordering::Relaxed),
        rejected: counts.rejected.load(Ordering::Relaxed),
        no_retry_after: counts.no_retry_after.load(Ordering::Relaxed),
        other: counts.other.load(Ordering::Relaxed),
        first_other,
        unsent: counts.unsent.load(Ordering::Relaxed),
        p50: hist.quantile(0.50),
        p99: hist.quantile(0.99),
        rss_peak,
        cpu,
    }
}

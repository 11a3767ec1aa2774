//! Phase 1, writes: creates and updates of 2 KiB ConfigMaps (and, at the
//! highest concurrency, creates of 2 KiB Deployments) through the
//! server at each concurrency, each next to the same operation done on etcd
//! directly with the server's own transaction (put-if-absent for a create,
//! compare-mod-revision put for an update), the server's stored bytes as the
//! value and keys of the same length. Limit and server alternate per
//! concurrency so that drift on a busy machine hits both. The raw keys are
//! under a prefix of the same length the server does not watch, so that
//! its cache does not decode them (and etcd does not stream them to it)
//! while the limit is measured. Each row also
//! gives the CPU time per write of etcd and of the server (utime+stime of
//! /proc/PID/stat over the measurement, divided by the writes): on a
//! CPU-bound machine that, not wall-clock, says where a write's cost is.

use super::client::{find_str_field, Http};
use super::fixture::{self, configmap, Template};
use super::load::{run_workers, LoadResult, Pace, Recorder};
use super::procs::cpu_seconds;
use super::report::{Budget, Row};
use super::stats::fmt_ratio;
use super::{Bench, Error, Result};
use bytes::Bytes;
use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PHASE: &str = "1 writes";
/// The concurrency the budget is set at.
const BUDGET_CONCURRENCY: usize = 64;
/// Server throughput over raw etcd throughput the issue asks for.
const BUDGET_RATIO: f64 = 0.9;
/// Issue 31: the server's CPU per ConfigMap create or update at c=64, and
/// per Deployment create, in µs.
const CPU_BUDGET_US: f64 = 200.0;
const DEPLOYMENT_CPU_BUDGET_US: f64 = 450.0;

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let http = &b.server.http;
    let mut kv = b.etcd.kv().await?;
    fixture::namespace(http, "bench-tmpl").await?;
    let template = Template::create(http, &mut kv, &b.prefix, "bench-tmpl", "t000-0000000").await?;
    let value = Bytes::copy_from_slice(template.bytes());
    let d = b.plan.duration;
    let mut rows = Vec::new();
    for &c in &b.plan.concurrency {
        let srv_ns = format!("bw-s-c{c:03}");
        let raw_ns = format!("bw-r-c{c:03}");
        fixture::namespace(http, &srv_ns).await?;
        let raw = Cpu::over(
            b,
            raw_creates(
                &kv,
                &unwatched(&b.prefix),
                &raw_ns,
                &value,
                c,
                d,
                fixture::key,
            ),
        )
        .await;
        let collection = format!("/api/v1/namespaces/{srv_ns}/configmaps");
        let srv = Cpu::over(
            b,
            server_creates(http, &srv_ns, collection, c, d, configmap_body),
        )
        .await;
        rows.push(row(
            format!("create, c={c}"),
            "etcd txn put-if-absent",
            c,
            &srv,
            &raw,
        ));
        let raw = Cpu::over(
            b,
            raw_updates(&kv, &unwatched(&b.prefix), &raw_ns, &value, c, d),
        )
        .await;
        let raw = (raw.0?, raw.1);
        let srv = Cpu::over(b, server_updates(http, &srv_ns, c, d)).await;
        let srv = (srv.0?, srv.1);
        rows.push(row(
            format!("update, c={c}"),
            "etcd txn put-if-mod-revision",
            c,
            &srv,
            &raw,
        ));
    }
    if let Some(&c) = b.plan.concurrency.iter().max() {
        rows.push(deployment_creates(b, &mut kv, c, d).await?);
    }
    Ok(rows)
}

fn configmap_body(ns: &str, name: &str, seq: u64) -> Bytes {
    configmap(ns, name, seq, None)
}

/// Creates of Deployments (kube's defaults and validation of a pod
/// template run on each), next to etcd taking the stored bytes of one.
async fn deployment_creates(b: &Bench, kv: &mut KvClient, c: usize, d: Duration) -> Result<Row> {
    let http = &b.server.http;
    let (srv_ns, raw_ns) = (format!("bd-s-c{c:03}"), format!("bd-r-c{c:03}"));
    fixture::namespace(http, &srv_ns).await?;
    let sample = "t000-0000000";
    let collection = format!("/apis/apps/v1/namespaces/{srv_ns}/deployments");
    http.post(&collection, fixture::deployment(&srv_ns, sample, 0))
        .await?;
    let key = fixture::deployment_key(&b.prefix, &srv_ns, sample);
    let stored = kv.get(key.as_str(), None).await?;
    let value = stored
        .kvs()
        .first()
        .map(|kv| Bytes::copy_from_slice(kv.value()))
        .ok_or_else(|| Error::Setup(format!("no etcd key {key}: the key layout changed")))?;
    let raw = Cpu::over(
        b,
        raw_creates(
            kv,
            &unwatched(&b.prefix),
            &raw_ns,
            &value,
            c,
            d,
            fixture::deployment_key,
        ),
    )
    .await;
    let collection = format!("/apis/apps/v1/namespaces/{srv_ns}/deployments");
    let srv = Cpu::over(
        b,
        server_creates(http, &srv_ns, collection, c, d, fixture::deployment),
    )
    .await;
    let mut row = row(
        format!("create Deployment, c={c}"),
        "etcd txn put-if-absent",
        c,
        &srv,
        &raw,
    );
    // Issue 17's throughput budget is the ConfigMap rows'; this row shows
    // what kube's per-kind rules cost next to them, judged by issue 31's
    // CPU budget.
    row.budget = cpu_budget(&srv.0, srv.1, DEPLOYMENT_CPU_BUDGET_US)
        .filter(|_| c == BUDGET_CONCURRENCY && row.problem.is_none());
    Ok(row)
}

/// CPU seconds etcd and the server used over one measurement (`None`
/// when /proc could not be read).
#[derive(Clone, Copy)]
pub(crate) struct Cpu {
    etcd: f64,
    server: f64,
}

impl Cpu {
    /// Runs `load`, and the CPU time both processes spent meanwhile.
    pub(crate) async fn over<T>(
        b: &Bench,
        load: impl std::future::Future<Output = T>,
    ) -> (T, Option<Cpu>) {
        let sample = || -> Option<Cpu> {
            Some(Cpu {
                etcd: cpu_seconds(b.etcd.pid()).ok()?,
                server: cpu_seconds(b.server.pid()).ok()?,
            })
        };
        let before = sample();
        let out = load.await;
        let spent = before.zip(sample()).map(|(a, z)| Cpu {
            etcd: z.etcd - a.etcd,
            server: z.server - a.server,
        });
        (out, spent)
    }

    /// `CPU/write: etcd 140 µs + server 210 µs`, over `n` writes.
    fn per_write(cpu: Option<Cpu>, n: u64) -> String {
        match cpu.filter(|_| n > 0) {
            Some(c) => {
                let us = |s: f64| s * 1e6 / n as f64;
                format!(
                    " · CPU/write: etcd {:.0} µs + server {:.0} µs",
                    us(c.etcd),
                    us(c.server)
                )
            }
            None => String::new(),
        }
    }
}

fn row(
    case: String,
    what: &str,
    c: usize,
    (srv, srv_cpu): &(LoadResult, Option<Cpu>),
    (raw, raw_cpu): &(LoadResult, Option<Cpu>),
) -> Row {
    let mut row = Row::new(PHASE, case);
    row.server = format!(
        "{}{}",
        srv.summary(),
        Cpu::per_write(*srv_cpu, srv.rec.hist.count())
    );
    // The raw writes are outside the server's prefix: its share in this
    // column is what it spends idle.
    row.limit = format!(
        "{what}: {}{}",
        raw.summary(),
        Cpu::per_write(*raw_cpu, raw.rec.hist.count())
    );
    let ratio = srv.rate() / raw.rate();
    row.ratio = format!("{} throughput", fmt_ratio(ratio));
    row.plot_load(srv, Some(raw));
    row.problem = srv
        .problem()
        .or_else(|| raw.problem().map(|p| format!("raw etcd: {p}")));
    if c == BUDGET_CONCURRENCY && row.problem.is_none() {
        let etcd = Budget::at_least("≥ 0.90× etcd", ratio, BUDGET_RATIO);
        row.budget = Some(match cpu_budget(srv, *srv_cpu, CPU_BUDGET_US) {
            Some(cpu) => Budget::all(vec![etcd, cpu]),
            None => etcd,
        });
    }
    row
}

/// Issue 31's budget on the server's CPU per write (`None` when /proc
/// could not be read).
fn cpu_budget(srv: &LoadResult, cpu: Option<Cpu>, max_us: f64) -> Option<Budget> {
    let n = srv.rec.hist.count();
    let cpu = cpu.filter(|_| n > 0)?;
    Some(Budget::under(
        &format!("server CPU ≤ {max_us:.0} µs/write"),
        cpu.server * 1e6 / n as f64,
        max_us,
        " µs",
    ))
}

/// A prefix as long as `prefix` that no key under `prefix` starts with
/// (`/registry` → `/registrz`).
fn unwatched(prefix: &str) -> String {
    let mut other = prefix.to_string();
    match other.pop() {
        Some(last) => other.push(if last == 'z' { 'y' } else { 'z' }),
        None => other.push('z'),
    }
    other
}

/// Worker `w`'s name for its `seq`th object: 12 characters, like the
/// template's.
fn name(w: usize, seq: u64) -> String {
    format!("w{w:03}-{seq:07}")
}

async fn raw_creates(
    kv: &KvClient,
    prefix: &str,
    ns: &str,
    value: &Bytes,
    c: usize,
    d: Duration,
    key_of: fn(&str, &str, &str) -> String,
) -> LoadResult {
    let pace = Pace::closed(d);
    run_workers(c, |w| {
        let (mut kv, pace, value) = (kv.clone(), pace.clone(), value.clone());
        let (prefix, ns) = (prefix.to_string(), ns.to_string());
        async move {
            let mut rec = Recorder::default();
            let mut seq = 0;
            while pace.turn().await {
                let key = key_of(&prefix, &ns, &name(w, seq));
                seq += 1;
                let txn = Txn::new()
                    .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key, value.to_vec(), None)]);
                let t = Instant::now();
                let r = kv.txn(txn).await;
                match rec.record(t, r) {
                    Some(resp) if !resp.succeeded() => rec.error("key existed"),
                    _ => {}
                }
            }
            rec
        }
    })
    .await
}

/// Creates through the server: `body_of(ns, name, seq)` POSTed to
/// `collection` (the path of `ns`'s collection).
pub(crate) async fn server_creates(
    http: &Http,
    ns: &str,
    collection: String,
    c: usize,
    d: Duration,
    body_of: fn(&str, &str, u64) -> Bytes,
) -> LoadResult {
    let pace = Pace::closed(d);
    let path: Arc<str> = collection.into();
    run_workers(c, |w| {
        let (http, pace, path, ns) = (http.clone(), pace.clone(), path.clone(), ns.to_string());
        async move {
            let mut rec = Recorder::default();
            let mut seq = 0;
            while pace.turn().await {
                let body = body_of(&ns, &name(w, seq), seq);
                seq += 1;
                let t = Instant::now();
                let r = http.post(&path, body).await;
                rec.record(t, r);
            }
            rec
        }
    })
    .await
}

/// Each worker updates one key of its own, so no two writers conflict.
async fn raw_updates(
    kv: &KvClient,
    prefix: &str,
    ns: &str,
    value: &Bytes,
    c: usize,
    d: Duration,
) -> Result<LoadResult> {
    let mut setup = kv.clone();
    let mut revisions = Vec::new();
    for w in 0..c {
        let key = fixture::key(prefix, ns, &format!("u{w:03}-0000000"));
        let resp = setup.put(key, value.to_vec(), None).await?;
        revisions.push(resp.header().map_or(0, |h| h.revision()));
    }
    let pace = Pace::closed(d);
    Ok(run_workers(c, |w| {
        let (mut kv, pace, value) = (kv.clone(), pace.clone(), value.clone());
        let key = fixture::key(prefix, ns, &format!("u{w:03}-0000000"));
        let mut revision = revisions[w];
        async move {
            let mut rec = Recorder::default();
            while pace.turn().await {
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        key.as_str(),
                        CompareOp::Equal,
                        revision,
                    )])
                    .and_then([TxnOp::put(key.as_str(), value.to_vec(), None)]);
                let t = Instant::now();
                let r = kv.txn(txn).await;
                match rec.record(t, r) {
                    Some(resp) if resp.succeeded() => {
                        revision = resp.header().map_or(revision, |h| h.revision());
                    }
                    Some(_) => {
                        rec.error("mod revision moved");
                        break;
                    }
                    None => {}
                }
            }
            rec
        }
    })
    .await)
}

/// Each worker replaces one object of its own, sending the resourceVersion
/// it last saw (as kubectl replace does).
async fn server_updates(http: &Http, ns: &str, c: usize, d: Duration) -> Result<LoadResult> {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut versions = Vec::new();
    for w in 0..c {
        let reply = http
            .post(&path, configmap(ns, &format!("u{w:03}-0000000"), 0, None))
            .await?;
        versions.push(resource_version(&reply.body)?);
    }
    let pace = Pace::closed(d);
    Ok(run_workers(c, |w| {
        let (http, pace, ns) = (http.clone(), pace.clone(), ns.to_string());
        let name = format!("u{w:03}-0000000");
        let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
        let mut rv = versions[w].clone();
        async move {
            let mut rec = Recorder::default();
            let mut seq = 1;
            while pace.turn().await {
                let body = configmap(&ns, &name, seq, Some(&rv));
                seq += 1;
                let t = Instant::now();
                let r = http.put(&path, body).await;
                if let Some(reply) = rec.record(t, r) {
                    match resource_version(&reply.body) {
                        Ok(next) => rv = next,
                        Err(e) => {
                            rec.error(e);
                            break;
                        }
                    }
                }
            }
            rec
        }
    })
    .await)
}

fn resource_version(body: &[u8]) -> Result<String> {
    find_str_field(body, "resourceVersion")
        .map(str::to_string)
        .ok_or_else(|| Error::Setup("reply without metadata.resourceVersion".into()))
}

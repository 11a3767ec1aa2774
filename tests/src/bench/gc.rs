//! Phase 7, garbage collection, on a server of its own under a prefix of
//! its own:
//!
//! 1. a graph of N objects is put into etcd (the server's stored form,
//!    copied): D dependents of owner `bg`, D of owner `fg` (blocking their
//!    owner's deletion), and the rest owned by a third owner that stays,
//!    each owner with its dependents in a namespace of its own;
//! 2. a new server starts on it and builds its collector's graph from the
//!    watch cache; a dependent of an absent owner, created then, is
//!    collected once the collector works;
//! 3. `bg` is deleted with background propagation: the time until its last
//!    dependent is gone from etcd;
//! 4. `fg` is deleted in the foreground: the time until `fg` itself is gone
//!    (after all its dependents);
//! 5. the limit: D keys of the same size deleted straight from etcd, as
//!    many at once as the collector's workers.

use super::fixture::{self, configmap, Template};
use super::report::{Budget, Row};
use super::stats::{fmt_count, fmt_duration, fmt_ratio};
use super::{Bench, Error, Result};
use bytes::Bytes;
use etcd_client::{GetOptions, KvClient};
use hyper::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PHASE: &str = "7 gc";
const PREFIX: &str = "/bench-gc";
const NS: &str = "bench-gc";
const BG: &str = "bench-gc-bg";
const FG: &str = "bench-gc-fg";
const RAW: &str = "bench-gc-raw";
/// The collector's workers (`controllers::garbagecollector`).
const WORKERS: usize = 16;
/// The longest a collection may take before the phase gives up.
const DEADLINE: Duration = Duration::from_secs(120);
/// Budget: an owner of 10,000 dependents is collected in seconds.
const SECONDS_BUDGET: f64 = 10.0;

/// A 2 KiB ConfigMap body owned by `owner` (`uid`).
fn dependent_body(ns: &str, name: &str, owner: &str, uid: &str, block: bool) -> Bytes {
    let mut v: Value = serde_json::from_slice(&configmap(ns, name, 0, None)).unwrap_or_default();
    v["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
        "blockOwnerDeletion": block,
    }]);
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

async fn create_owner(http: &super::client::Http, ns: &str, name: &str) -> Result<String> {
    let reply = http
        .post(
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            configmap(ns, name, 0, None),
        )
        .await?;
    let v: Value = serde_json::from_slice(&reply.body)
        .map_err(|e| Error::Setup(format!("owner {name}: {e}")))?;
    v["metadata"]["uid"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::Setup(format!("owner {name} has no uid")))
}

/// The dependents (`d-*`) left in `ns`.
async fn count(kv: &mut KvClient, ns: &str) -> Result<i64> {
    let dir = format!("{PREFIX}/configmaps/{ns}/d-");
    let resp = kv
        .get(dir, Some(GetOptions::new().with_prefix().with_count_only()))
        .await?;
    Ok(resp.count())
}

async fn exists(kv: &mut KvClient, ns: &str, name: &str) -> Result<bool> {
    let resp = kv.get(fixture::key(PREFIX, ns, name), None).await?;
    Ok(!resp.kvs().is_empty())
}

/// Polls until `done`, returning the time since `start`.
async fn until<F, Fut>(start: Instant, mut done: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    loop {
        if done().await? {
            return Ok(start.elapsed());
        }
        if start.elapsed() > DEADLINE {
            return Err(Error::Setup(format!(
                "not collected within {}",
                fmt_duration(DEADLINE)
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `e`, with the end of the server's log.
fn with_log(b: &Bench, what: &str, e: Error) -> Error {
    let log = std::fs::read_to_string(b.logs.join("apiserver-gc.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    Error::Setup(format!(
        "{what}: {e}; server log (last lines first): {}",
        tail.join(" / ")
    ))
}

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let n = b.plan.gc_objects;
    let d = b.plan.gc_dependents.min(n / 3).max(1);
    let mut kv = b.etcd.kv().await?;

    // 1. The graph, written while no server runs.
    let seed = b.start_server(PREFIX, "gc-seed").await?;
    for ns in [NS, BG, FG, RAW] {
        fixture::namespace(&seed.http, ns).await?;
    }
    let bg = create_owner(&seed.http, BG, "bg").await?;
    let fg = create_owner(&seed.http, FG, "fg").await?;
    let stay = create_owner(&seed.http, NS, "stay").await?;
    let name = |i: u64| format!("d-{i:07}");
    let make = |ns: &'static str, owner: &'static str, uid: String, block: bool| {
        let (http, mut kv) = (&seed.http, kv.clone());
        async move {
            let body = dependent_body(ns, "d-0000000", owner, &uid, block);
            Template::create_from(http, &mut kv, PREFIX, ns, "d-0000000", body).await
        }
    };
    let t_bg = make(BG, "bg", bg, false).await?;
    let t_fg = make(FG, "fg", fg, true).await?;
    let t_stay = make(NS, "stay", stay, false).await?;
    let t_raw = Template::create(&seed.http, &mut kv, PREFIX, RAW, "d-0000000").await?;
    // Cleanly, so that the next server leads at once.
    seed.terminate();
    fixture::load(&kv, PREFIX, BG, &t_bg, d, name).await?;
    fixture::load(&kv, PREFIX, FG, &t_fg, d, name).await?;
    fixture::load(&kv, PREFIX, NS, &t_stay, n - 2 * d, name).await?;
    fixture::load(&kv, PREFIX, RAW, &t_raw, d, name).await?;

    // 2. A server builds its graph; a dependent of an absent owner shows
    // when the collector works.
    let server = b.start_server(PREFIX, "gc").await?;
    let t = Instant::now();
    let probe = dependent_body(
        NS,
        "probe",
        "absent",
        "00000000-0000-4000-8000-00000000beef",
        false,
    );
    server
        .http
        .post(&format!("/api/v1/namespaces/{NS}/configmaps"), probe)
        .await?;
    let working = until(t, || {
        let mut kv = kv.clone();
        async move {
            let kv = &mut kv;
            Ok(!exists(kv, NS, "probe").await?)
        }
    })
    .await
    .map_err(|e| with_log(b, "the probe", e))?;

    // 3. Background.
    let t = Instant::now();
    server
        .http
        .call(
            Method::DELETE,
            &format!("/api/v1/namespaces/{BG}/configmaps/bg?propagationPolicy=Background"),
            None,
        )
        .await?;
    let background = until(t, || {
        let mut kv = kv.clone();
        async move {
            let kv = &mut kv;
            Ok(count(kv, BG).await? == 0)
        }
    })
    .await
    .map_err(|e| with_log(b, "background", e))?;

    // 4. Foreground.
    let t = Instant::now();
    server
        .http
        .call(
            Method::DELETE,
            &format!("/api/v1/namespaces/{FG}/configmaps/fg?propagationPolicy=Foreground"),
            None,
        )
        .await?;
    let foreground = until(t, || {
        let mut kv = kv.clone();
        async move {
            let kv = &mut kv;
            Ok(!exists(kv, FG, "fg").await?)
        }
    })
    .await
    .map_err(|e| with_log(b, "foreground", e))?;
    let left = count(&mut kv, FG).await?;
    server.stop();

    // 5. The limit: the same number of keys deleted straight from etcd.
    let t = Instant::now();
    let mut lanes = Vec::new();
    for lane in 0..WORKERS as u64 {
        let mut kv = kv.clone();
        lanes.push(tokio::spawn(async move {
            let mut i = lane;
            while i < d {
                kv.delete(fixture::key(PREFIX, RAW, &format!("d-{i:07}")), None)
                    .await?;
                i += WORKERS as u64;
            }
            Ok::<(), Error>(())
        }));
    }
    for l in lanes {
        l.await.map_err(|e| Error::Setup(e.to_string()))??;
    }
    let raw = t.elapsed();

    let graph = format!("graph of {} objects", fmt_count(n));
    let limit = format!(
        "etcd: {} single-key deletes, {WORKERS} at a time: {}",
        fmt_count(d),
        fmt_duration(raw)
    );
    let mut rows = Vec::new();
    let mut row = Row::new(
        PHASE,
        format!(
            "a dependent of an absent owner, created as the server starts → collected ({graph})"
        ),
    );
    row.server = fmt_duration(working);
    row.plot("time", "s", working.as_secs_f64(), None);
    rows.push(row);
    for (case, took) in [
        ("background delete of an owner", background),
        (
            "foreground delete of an owner (until the owner is gone)",
            foreground,
        ),
    ] {
        let mut row = Row::new(
            PHASE,
            format!("{case} of {} dependents, {graph}", fmt_count(d)),
        );
        row.server = fmt_duration(took);
        row.plot("time", "s", took.as_secs_f64(), Some(raw.as_secs_f64()));
        row.limit = limit.clone();
        row.ratio = format!(
            "{} time of etcd",
            fmt_ratio(took.as_secs_f64() / raw.as_secs_f64())
        );
        if d >= 10_000 {
            row.budget = Some(Budget::under(
                "10,000 dependents in seconds (< 10 s)",
                took.as_secs_f64(),
                SECONDS_BUDGET,
                " s",
            ));
        }
        rows.push(row);
    }
    if left != 0 {
        rows[2].problem = Some(format!("{left} dependents left behind"));
    }
    Ok(rows)
}

//! Phases 4 and 5, memory and startup, on servers of their own under a
//! prefix of their own (the objects of the other phases are not counted):
//!
//! 1. a server on the empty prefix: its start time and RSS are the baseline;
//! 2. K objects are put into etcd (the server's stored form, copied);
//! 3. a new server: start to `/readyz` with K objects in etcd (next to a raw
//!    etcd range of all of them); its RSS once ready, then after one paged
//!    LIST of everything (so that every object has been read, whether the
//!    cache fills at start or on first use); the growth over the empty
//!    server, over the objects' raw bytes, is what the budget judges;
//! 4. N idle watchers on that server: RSS growth per 1,000.

use super::client::Http;
use super::fixture::{self, Template};
use super::procs::Server;
use super::report::{Budget, Row};
use super::stats::{fmt_count, fmt_duration, fmt_mib, fmt_ratio};
use super::{query_escape, Bench, Error, Result};
use std::time::{Duration, Instant};

const PREFIX: &str = "/bench-mem";
const NS: &str = "bench-mem";
const IDLE_NS: &str = "bench-idle";
/// Time for a server to settle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(2);
/// Budgets: cache RSS under 2× the raw bytes; under 16 KiB per idle watcher.
const CACHE_RATIO_BUDGET: f64 = 2.0;
const WATCHER_KIB_BUDGET: f64 = 16.0;

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let k = b.plan.objects;
    let mut kv = b.etcd.kv().await?;

    let empty = b.start_server(PREFIX, "empty").await?;
    tokio::time::sleep(SETTLE).await;
    let empty_rss = empty.rss()?;
    fixture::namespace(&empty.http, NS).await?;
    fixture::namespace(&empty.http, IDLE_NS).await?;
    let template = Template::create(&empty.http, &mut kv, PREFIX, NS, "m-0000000").await?;
    let empty_startup = empty.startup;
    empty.stop();

    fixture::load(&kv, PREFIX, NS, &template, k, |i| format!("m-{i:07}")).await?;
    let t = Instant::now();
    let (count, raw_bytes) = fixture::stored(&mut kv, PREFIX, NS).await?;
    let etcd_range = t.elapsed();
    if count != k {
        return Err(Error::Setup(format!("loaded {count} objects, wanted {k}")));
    }

    let server = b.start_server(PREFIX, "loaded").await?;
    let mut startup = Row::new(
        "5 startup",
        format!("start → /readyz, {} objects in etcd", fmt_count(k)),
    );
    startup.server = fmt_duration(server.startup);
    startup.limit = format!(
        "etcd range of all {}: {}; server start on an empty prefix: {}",
        fmt_count(k),
        fmt_duration(etcd_range),
        fmt_duration(empty_startup)
    );
    startup.ratio = format!(
        "{} time of the etcd range",
        fmt_ratio(server.startup.as_secs_f64() / etcd_range.as_secs_f64())
    );

    tokio::time::sleep(SETTLE).await;
    let started_rss = server.rss()?;
    let listed = list_all(&server.http, &format!("/api/v1/namespaces/{NS}/configmaps")).await;
    tokio::time::sleep(SETTLE).await;
    let rss = server.rss()?;
    let mut row = Row::new(
        "4 memory",
        format!(
            "RSS with {} objects of 2 KiB, each listed once",
            fmt_count(k)
        ),
    );
    let growth = rss.saturating_sub(empty_rss);
    let ratio = growth as f64 / raw_bytes as f64;
    row.server = format!(
        "RSS {} ({} over the empty server's {}; {} over it when ready, before the LIST)",
        fmt_mib(rss),
        fmt_mib(growth),
        fmt_mib(empty_rss),
        fmt_mib(started_rss.saturating_sub(empty_rss)),
    );
    row.limit = format!(
        "raw bytes: {} (the values as stored in etcd)",
        fmt_mib(raw_bytes)
    );
    row.ratio = format!(
        "{} raw (total RSS {})",
        fmt_ratio(ratio),
        fmt_ratio(rss as f64 / raw_bytes as f64)
    );
    match listed {
        Ok(n) if n == k => {
            row.budget = Some(Budget::under(
                "growth < 2× raw bytes",
                ratio,
                CACHE_RATIO_BUDGET,
                "×",
            ))
        }
        Ok(n) => row.problem = Some(format!("LIST returned {n} of {k} objects")),
        Err(e) => row.problem = Some(format!("LIST failed: {e}")),
    }
    let idle = idle_watchers(b, &server).await;
    server.stop();
    Ok(vec![row, idle, startup])
}

/// Every object of `path`, in pages of 500.
async fn list_all(http: &Http, path: &str) -> Result<u64> {
    let mut count = 0;
    let mut token: Option<String> = None;
    loop {
        let url = match &token {
            None => format!("{path}?limit=500"),
            Some(t) => format!("{path}?limit=500&continue={}", query_escape(t)),
        };
        let reply = http.get(&url).await?;
        let v: serde_json::Value = serde_json::from_slice(&reply.body)
            .map_err(|e| Error::Setup(format!("list reply is not JSON: {e}")))?;
        count += v["items"].as_array().map_or(0, |a| a.len() as u64);
        match v["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(count),
        }
    }
}

/// RSS growth of `server` while N watchers of an empty namespace are open.
async fn idle_watchers(b: &Bench, server: &Server) -> Row {
    let n = b.plan.idle_watchers;
    let case = format!("RSS per 1,000 idle watchers ({} open)", fmt_count(n as u64));
    let before = match server.rss() {
        Ok(r) => r,
        Err(e) => return Row::failed("4 memory", case, e.to_string()),
    };
    let path = format!("/api/v1/namespaces/{IDLE_NS}/configmaps?watch=1&timeoutSeconds=3600");
    let mut open = Vec::with_capacity(n);
    let mut failed = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let batch: Vec<_> = chunk
            .iter()
            .map(|_| {
                let (http, path) = (server.http.clone(), path.clone());
                tokio::spawn(async move { http.stream(&path).await })
            })
            .collect();
        for h in batch {
            match h.await {
                Ok(Ok(body)) => open.push(body),
                _ => failed += 1,
            }
        }
    }
    tokio::time::sleep(SETTLE).await;
    let after = server.rss();
    drop(open);
    let mut row = Row::new("4 memory", case);
    let after = match after {
        Ok(a) => a,
        Err(e) => return Row::failed("4 memory", row.case, e.to_string()),
    };
    let opened = (n - failed).max(1) as f64;
    let per_watcher = after.saturating_sub(before) as f64 / opened;
    row.server = format!(
        "{} per 1,000 ({:.1} KiB each; RSS {} → {})",
        fmt_mib((per_watcher * 1000.0) as u64),
        per_watcher / 1024.0,
        fmt_mib(before),
        fmt_mib(after)
    );
    if failed > 0 {
        row.problem = Some(format!("{failed} watchers failed to start"));
    } else {
        row.budget = Some(Budget::under(
            "< 16 KiB per watcher",
            per_watcher / 1024.0,
            WATCHER_KIB_BUDGET,
            " KiB",
        ));
    }
    row
}

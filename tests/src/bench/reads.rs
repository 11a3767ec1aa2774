//! Phase 2, reads. GET of one object at saturation and at the fixed rate the
//! budget names, RV=0 and consistent, next to a raw etcd get of the same key
//! (serializable for RV=0, linearizable for consistent). LIST of N objects,
//! RV=0, consistent and paged by 500, next to raw etcd ranges of the same
//! keys read the same way; and the RV=0 LIST in protobuf and in CBOR next
//! to the same LIST in JSON (protobuf must not be slower; CBOR has no
//! budget).

use super::client::{find, find_str_field, Http};
use super::fixture::{self, Template};
use super::load::{run_workers, LoadResult, Pace, Recorder};
use super::report::{Budget, Row};
use super::stats::{fmt_count, fmt_duration, fmt_rate, fmt_ratio, Histogram};
use super::{query_escape, Bench, Error, Result};
use etcd_client::{GetOptions, KvClient};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PHASE: &str = "2 reads";
/// The GET budget: p99 under this at `Plan::get_rate`.
const GET_P99_BUDGET: Duration = Duration::from_millis(2);
/// The GET rate the budget names.
const BUDGET_RATE: f64 = 5_000.0;
/// Consistent GET in flight (issue 17): at least this many times etcd's
/// linearizable GET throughput, with p99 under `CONSISTENT_GET_P99`.
const CONSISTENT_GET_RATIO: f64 = 5.0;
const CONSISTENT_GET_P99: Duration = Duration::from_millis(5);
/// Issue 31: consistent GET throughput over the RV=0 GET's, same run.
const CONSISTENT_OVER_ANY: f64 = 0.9;
/// The rate a paced run must sustain to be judged at all.
const SUSTAINED: f64 = 0.95;
/// The LIST budget, for 10,000 objects (RV=0 or consistent), on the median.
const LIST_BUDGET: Duration = Duration::from_millis(40);
const LIST_BUDGET_OBJECTS: u64 = 10_000;
/// Page size of the paged LIST.
const PAGE: usize = 500;

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let mut rows = gets(b).await?;
    for &n in &b.plan.list_objects {
        match lists(b, n).await {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => rows.push(Row::failed(
                PHASE,
                format!("LIST of {}", fmt_count(n)),
                e.to_string(),
            )),
        }
    }
    Ok(rows)
}

/// How a read is served: any recent state (RV=0) or the latest (quorum).
#[derive(Clone, Copy)]
enum Read {
    Any,
    Consistent,
}

impl Read {
    fn label(self) -> &'static str {
        match self {
            Read::Any => "RV=0",
            Read::Consistent => "consistent",
        }
    }

    fn query(self) -> &'static str {
        match self {
            Read::Any => "resourceVersion=0",
            Read::Consistent => "",
        }
    }

    fn etcd(self) -> &'static str {
        match self {
            Read::Any => "etcd serializable",
            Read::Consistent => "etcd linearizable",
        }
    }

    fn options(self) -> GetOptions {
        match self {
            Read::Any => GetOptions::new().with_serializable(),
            Read::Consistent => GetOptions::new(),
        }
    }
}

async fn gets(b: &Bench) -> Result<Vec<Row>> {
    let http = &b.server.http;
    let ns = "bench-read";
    let name = "g-0000000";
    fixture::namespace(http, ns).await?;
    http.post(
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        fixture::configmap(ns, name, 0, None),
    )
    .await?;
    let kv = b.etcd.kv().await?;
    let key = fixture::key(&b.prefix, ns, name);
    let (c, d, rate) = (b.plan.read_concurrency, b.plan.duration, b.plan.get_rate);
    let mut rows = Vec::new();
    let mut any_rate = None;
    for read in [Read::Any, Read::Consistent] {
        let path = match read.query() {
            "" => format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            q => format!("/api/v1/namespaces/{ns}/configmaps/{name}?{q}"),
        };
        let raw = etcd_gets(&kv, &key, read, c, Pace::closed(d)).await;
        let srv = server_gets(http, &path, c, Pace::closed(d)).await;
        let mut row = Row::new(PHASE, format!("GET {}, {c} in flight", read.label()));
        row.server = srv.summary();
        row.limit = format!("{} get: {}", read.etcd(), raw.summary());
        row.ratio = format!("{} throughput", fmt_ratio(srv.rate() / raw.rate()));
        row.plot_load(&srv, Some(&raw));
        row.problem = problem(&srv, &raw);
        if let Read::Any = read {
            any_rate = Some(srv.rate());
        }
        if let Read::Consistent = read {
            // Issue 17: consistent GETs served from memory, at least as
            // new as a quorum read started on arrival; issue 31: at
            // least 0.9× the RV=0 GET of the same run.
            let mut parts = vec![Budget::at_least(
                &format!("≥ {CONSISTENT_GET_RATIO:.0}× etcd"),
                srv.rate() / raw.rate(),
                CONSISTENT_GET_RATIO,
            )];
            if let Some(any) = any_rate.filter(|r| *r > 0.0) {
                parts.push(Budget::at_least(
                    &format!("≥ {CONSISTENT_OVER_ANY:.2}× the RV=0 GET"),
                    srv.rate() / any,
                    CONSISTENT_OVER_ANY,
                ));
            }
            parts.push(Budget::under(
                "p99 < 5 ms",
                srv.p99().as_secs_f64() * 1e3,
                CONSISTENT_GET_P99.as_secs_f64() * 1e3,
                " ms",
            ));
            row.budget = Some(Budget::all(parts));
        }
        rows.push(row);

        let raw = etcd_gets(&kv, &key, read, c, Pace::rate(d, rate)).await;
        let srv = server_gets(http, &path, c, Pace::rate(d, rate)).await;
        let mut row = Row::new(
            PHASE,
            format!("GET {} at {}/s offered", read.label(), fmt_rate(rate)),
        );
        row.server = srv.summary();
        row.limit = format!("{} get: {}", read.etcd(), raw.summary());
        row.ratio = format!(
            "{} p99",
            fmt_ratio(srv.p99().as_secs_f64() / raw.p99().as_secs_f64())
        );
        row.plot_p99(srv.p99(), Some(raw.p99()));
        row.problem = problem(&srv, &raw);
        let target = if rate < BUDGET_RATE {
            format!(
                "p99 < 2 ms (budget rate 5,000/s; here {}/s)",
                fmt_rate(rate)
            )
        } else {
            format!("p99 < 2 ms at {}/s", fmt_rate(rate))
        };
        row.budget = Some(if srv.rate() < SUSTAINED * rate {
            Budget::not_judged(
                &target,
                &format!("sustained only {}/s", fmt_rate(srv.rate())),
            )
        } else {
            Budget::under(
                &target,
                srv.p99().as_secs_f64() * 1e3,
                GET_P99_BUDGET.as_secs_f64() * 1e3,
                " ms",
            )
        });
        rows.push(row);
    }
    Ok(rows)
}

fn problem(srv: &LoadResult, raw: &LoadResult) -> Option<String> {
    srv.problem()
        .or_else(|| raw.problem().map(|p| format!("raw etcd: {p}")))
}

async fn server_gets(http: &Http, path: &str, c: usize, pace: Arc<Pace>) -> LoadResult {
    let path: Arc<str> = path.into();
    run_workers(c, |_| {
        let (http, pace, path) = (http.clone(), pace.clone(), path.clone());
        async move {
            let mut rec = Recorder::default();
            while pace.turn().await {
                let t = Instant::now();
                let r = http.get(&path).await;
                rec.record(t, r);
            }
            rec
        }
    })
    .await
}

async fn etcd_gets(kv: &KvClient, key: &str, read: Read, c: usize, pace: Arc<Pace>) -> LoadResult {
    let key: Arc<str> = key.into();
    run_workers(c, |_| {
        let (mut kv, pace, key) = (kv.clone(), pace.clone(), key.clone());
        async move {
            let mut rec = Recorder::default();
            while pace.turn().await {
                let t = Instant::now();
                let r = kv.get(key.as_bytes(), Some(read.options())).await;
                match rec.record(t, r) {
                    Some(resp) if resp.kvs().is_empty() => rec.error("key missing"),
                    _ => {}
                }
            }
            rec
        }
    })
    .await
}

/// The timings of one kind of LIST.
#[derive(Default)]
struct Lists {
    hist: Histogram,
    bytes: u64,
    problem: Option<String>,
}

impl Lists {
    fn p50(&self) -> Duration {
        self.hist.quantile(0.5)
    }

    fn summary(&self) -> String {
        let mbs = self.bytes as f64 / 1e6 / self.p50().as_secs_f64().max(1e-9);
        format!(
            "p50 {} · p99 {} · {:.0} MB/s",
            fmt_duration(self.p50()),
            fmt_duration(self.hist.quantile(0.99)),
            mbs
        )
    }
}

/// Runs `list` `repeats` times; each returns (bytes, items). Stops at the
/// first error or wrong count.
async fn repeat<F, Fut>(repeats: usize, expect: u64, mut list: F) -> Lists
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(u64, u64)>>,
{
    let mut out = Lists::default();
    for _ in 0..repeats {
        let t = Instant::now();
        match list().await {
            Ok((bytes, items)) if items == expect => {
                out.hist.record(t.elapsed());
                out.bytes = bytes;
            }
            Ok((_, items)) => {
                out.problem = Some(format!("{items} items, expected {expect}"));
                break;
            }
            Err(e) => {
                out.problem = Some(e.to_string());
                break;
            }
        }
    }
    out
}

async fn lists(b: &Bench, n: u64) -> Result<Vec<Row>> {
    let http = &b.server.http;
    let mut kv = b.etcd.kv().await?;
    let ns = format!("bl-{n:07}");
    fixture::namespace(http, &ns).await?;
    let template = Template::create(http, &mut kv, &b.prefix, &ns, "o-0000000").await?;
    fixture::load(&kv, &b.prefix, &ns, &template, n, |i| format!("o-{i:07}")).await?;
    let (count, _) = fixture::stored(&mut kv, &b.prefix, &ns).await?;
    if count != n {
        return Err(Error::Setup(format!("loaded {count} objects, wanted {n}")));
    }
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let dir = format!("{}/configmaps/{ns}/", b.prefix);
    // The objects went into etcd behind the server's back, and an RV=0 LIST
    // may answer from a cache still applying them (a slow debug build does).
    // One untimed consistent LIST waits until the cache has them all.
    server_list(http, &path).await?;
    let r = b.plan.list_repeats;
    let mut rows = Vec::new();
    for read in [Read::Any, Read::Consistent] {
        let url = match read.query() {
            "" => path.clone(),
            q => format!("{path}?{q}"),
        };
        let raw = repeat(r, n, || etcd_range(kv.clone(), &dir, read)).await;
        let srv = repeat(r, n, || server_list(http, &url)).await;
        let case = format!("LIST {} × 2 KiB, {}", fmt_count(n), read.label());
        let mut row = list_row(case, &srv, &raw, &format!("{} range", read.etcd()));
        if n == LIST_BUDGET_OBJECTS && row.problem.is_none() {
            row.budget = Some(Budget::under(
                "p50 < 40 ms",
                srv.p50().as_secs_f64() * 1e3,
                LIST_BUDGET.as_secs_f64() * 1e3,
                " ms",
            ));
        }
        rows.push(row);
        if let Read::Any = read {
            let pb = repeat(r, n, || server_list_protobuf(http, &url)).await;
            let case = format!("LIST {} × 2 KiB, {}, protobuf", fmt_count(n), read.label());
            let mut row = list_row(case, &pb, &srv, "the same LIST in JSON");
            if row.problem.is_none() && pb.hist.count() > 0 && srv.hist.count() > 0 {
                row.budget = Some(Budget::under(
                    "p50 ≤ JSON's",
                    pb.p50().as_secs_f64() * 1e3,
                    srv.p50().as_secs_f64() * 1e3 * 1.0001,
                    " ms",
                ));
            }
            rows.push(row);
            let cbor = repeat(r, n, || server_list_cbor(http, &url)).await;
            let case = format!("LIST {} × 2 KiB, {}, CBOR", fmt_count(n), read.label());
            rows.push(list_row(case, &cbor, &srv, "the same LIST in JSON"));
        }
    }
    let raw = repeat(r, n, || etcd_paged(kv.clone(), &dir)).await;
    let srv = repeat(r, n, || server_paged(http, &path)).await;
    let case = format!("LIST {} × 2 KiB, paged limit={PAGE}", fmt_count(n));
    rows.push(list_row(
        case,
        &srv,
        &raw,
        &format!("etcd ranges of {PAGE} at one revision"),
    ));
    Ok(rows)
}

fn list_row(case: String, srv: &Lists, raw: &Lists, what: &str) -> Row {
    let mut row = Row::new(PHASE, case);
    row.server = srv.summary();
    row.limit = format!("{what}: {}", raw.summary());
    row.ratio = format!(
        "{} time",
        fmt_ratio(srv.p50().as_secs_f64() / raw.p50().as_secs_f64())
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    row.plot("LIST p50", "ms", ms(srv.p50()), Some(ms(raw.p50())));
    row.problem = srv
        .problem
        .clone()
        .or_else(|| raw.problem.clone().map(|p| format!("raw etcd: {p}")));
    if srv.hist.count() == 0 {
        row.server.clear();
    }
    row
}

/// Items in a list reply: one `uid` each (the list's own metadata has none).
fn items(body: &[u8]) -> u64 {
    let mut n = 0;
    let mut rest = body;
    while let Some(i) = find(rest, b"\"uid\":\"") {
        n += 1;
        rest = &rest[i + 7..];
    }
    n
}

async fn server_list(http: &Http, path: &str) -> Result<(u64, u64)> {
    let reply = http.get(path).await?;
    Ok((reply.body.len() as u64, items(&reply.body)))
}

async fn server_list_protobuf(http: &Http, path: &str) -> Result<(u64, u64)> {
    let reply = http
        .call_as(
            hyper::Method::GET,
            path,
            "application/vnd.kubernetes.protobuf",
            None,
        )
        .await?;
    let items = protobuf_items(&reply.body)
        .ok_or_else(|| Error::Http("a malformed protobuf list".into()))?;
    Ok((reply.body.len() as u64, items))
}

async fn server_list_cbor(http: &Http, path: &str) -> Result<(u64, u64)> {
    let reply = http
        .call_as(hyper::Method::GET, path, "application/cbor", None)
        .await?;
    let items =
        cbor_items(&reply.body).ok_or_else(|| Error::Http("a malformed CBOR list".into()))?;
    Ok((reply.body.len() as u64, items))
}

/// Items in a CBOR list reply (self-described): one `uid` key each, a byte
/// string as kube writes keys (the list's own metadata has none).
fn cbor_items(body: &[u8]) -> Option<u64> {
    let mut rest = body.strip_prefix(&[0xd9, 0xd9, 0xf7])?;
    let mut n = 0;
    while let Some(i) = find(rest, b"\x43uid") {
        n += 1;
        rest = &rest[i + 4..];
    }
    Some(n)
}

/// Items in a protobuf list reply: the `k8s\0` envelope's `raw` (field 2)
/// is the list message, whose `items` are field 2.
fn protobuf_items(body: &[u8]) -> Option<u64> {
    let list = protobuf_fields(body.strip_prefix(b"k8s\0")?)?
        .into_iter()
        .find(|(n, _)| *n == 2)?
        .1;
    Some(
        protobuf_fields(list)?
            .into_iter()
            .filter(|(n, _)| *n == 2)
            .count() as u64,
    )
}

/// The length-delimited fields of a message (others skipped), or `None`
/// when it is malformed.
fn protobuf_fields(mut msg: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !msg.is_empty() {
        let tag = varint(&mut msg)?;
        match tag & 7 {
            0 => {
                varint(&mut msg)?;
            }
            2 => {
                let len = usize::try_from(varint(&mut msg)?).ok()?;
                if len > msg.len() {
                    return None;
                }
                let (value, rest) = msg.split_at(len);
                out.push((tag >> 3, value));
                msg = rest;
            }
            _ => return None,
        }
    }
    Some(out)
}

async fn server_paged(http: &Http, path: &str) -> Result<(u64, u64)> {
    let (mut bytes, mut count) = (0, 0);
    let mut token: Option<String> = None;
    loop {
        let url = match &token {
            None => format!("{path}?limit={PAGE}"),
            Some(t) => format!("{path}?limit={PAGE}&continue={}", query_escape(t)),
        };
        let reply = http.get(&url).await?;
        bytes += reply.body.len() as u64;
        count += items(&reply.body);
        // The list's metadata comes before its items.
        let head = &reply.body[..reply.body.len().min(1024)];
        match find_str_field(head, "continue") {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok((bytes, count)),
        }
    }
}

async fn etcd_range(mut kv: KvClient, dir: &str, read: Read) -> Result<(u64, u64)> {
    let resp = kv.get(dir, Some(read.options().with_prefix())).await?;
    Ok(kv_size(resp.kvs()))
}

fn kv_size(kvs: &[etcd_client::KeyValue]) -> (u64, u64) {
    let bytes = kvs
        .iter()
        .map(|kv| (kv.key().len() + kv.value().len()) as u64)
        .sum();
    (bytes, kvs.len() as u64)
}

/// Pages of `PAGE` keys: the first linearizable, the rest at its revision,
/// each starting after the last key read (as the server pages etcd).
async fn etcd_paged(mut kv: KvClient, dir: &str) -> Result<(u64, u64)> {
    let end = prefix_end(dir.as_bytes());
    let (mut bytes, mut count) = (0, 0);
    let mut start = dir.as_bytes().to_vec();
    let mut revision = 0;
    loop {
        let mut opts = GetOptions::new()
            .with_range(end.clone())
            .with_limit(PAGE as i64);
        if revision > 0 {
            opts = opts.with_revision(revision);
        }
        let resp = kv.get(start.clone(), Some(opts)).await?;
        if revision == 0 {
            revision = resp.header().map_or(0, |h| h.revision());
        }
        let (b, c) = kv_size(resp.kvs());
        bytes += b;
        count += c;
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                start = last.key().to_vec();
                start.push(0);
            }
            _ => return Ok((bytes, count)),
        }
    }
}

/// The end of the key range of everything under `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_protobuf_items() {
        // k8s\0, Unknown { raw (2): List { metadata (1): {}, items (2) × 2 } }
        let list = [0x0a, 0x00, 0x12, 0x01, 0x41, 0x12, 0x00];
        let mut body = b"k8s\0".to_vec();
        body.extend([0x12, list.len() as u8]);
        body.extend(list);
        assert_eq!(protobuf_items(&body), Some(2));
        assert_eq!(protobuf_items(b"k8s\0\x12\x05"), None);
        assert_eq!(protobuf_items(b"{}"), None);
    }

    #[test]
    fn counts_cbor_items() {
        // 55799({h'items': [{h'uid': h'a'}, {h'uid': h'b'}]})
        let body = b"\xd9\xd9\xf7\xa1\x45items\x82\xa1\x43uid\x41a\xa1\x43uid\x41b";
        assert_eq!(cbor_items(body), Some(2));
        assert_eq!(cbor_items(b"{}"), None);
    }

    #[test]
    fn counts_items_and_ends_prefixes() {
        let body = br#"{"metadata":{"continue":"x"},"items":[{"metadata":{"uid":"a"}},{"metadata":{"uid":"b"}}]}"#;
        assert_eq!(items(body), 2);
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
    }
}

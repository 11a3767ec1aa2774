//! Phase 9, storage media type: the same Deployments and ConfigMaps
//! created through two fresh servers, one with
//! `--storage-media-type=application/vnd.kubernetes.protobuf` (kube's
//! default and this server's) and one with `application/json`, each under
//! its own prefix; then the etcd bytes per object (value length, read back
//! with a range over each server's keys) and the create throughput of
//! each, side by side. Protobuf's "limit" column is the JSON server.

use super::client::Http;
use super::fixture;
use super::load::LoadResult;
use super::report::Row;
use super::stats::fmt_ratio;
use super::writes::server_creates;
use super::{Bench, Result};
use etcd_client::GetOptions;

const PHASE: &str = "9 storage";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const JSON: &str = "application/json";
/// Creates in flight per server.
const CONCURRENCY: usize = 16;

/// What one media type measured.
struct Measured {
    deployments: LoadResult,
    deployment_bytes: f64,
    configmaps: LoadResult,
    configmap_bytes: f64,
}

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let mut by_type = Vec::new();
    for media in [PROTOBUF, JSON] {
        let tag = if media == JSON { "json" } else { "pb" };
        let prefix = format!("/bench-storage-{tag}");
        let flag = format!("--storage-media-type={media}");
        let server = b
            .start_server_with(&prefix, &format!("storage-{tag}"), &[&flag])
            .await?;
        let measured = measure(b, &server.http, &prefix).await;
        server.stop();
        by_type.push(measured?);
    }
    let (pb, json) = (&by_type[0], &by_type[1]);
    let mut rows = Vec::new();
    for (case, p, j) in [
        (
            "etcd bytes per Deployment",
            pb.deployment_bytes,
            json.deployment_bytes,
        ),
        (
            "etcd bytes per 2 KiB ConfigMap",
            pb.configmap_bytes,
            json.configmap_bytes,
        ),
    ] {
        let mut row = Row::new(PHASE, case);
        row.server = format!("protobuf: {p:.0} B");
        row.limit = format!("JSON: {j:.0} B");
        row.ratio = format!("{} size", fmt_ratio(p / j));
        row.plot("etcd bytes per object (JSON as the limit)", "B", p, Some(j));
        if p == 0.0 || j == 0.0 {
            row.problem = Some("no objects stored".into());
        }
        rows.push(row);
    }
    for (case, p, j) in [
        (
            format!("create Deployment, c={CONCURRENCY}"),
            &pb.deployments,
            &json.deployments,
        ),
        (
            format!("create ConfigMap, c={CONCURRENCY}"),
            &pb.configmaps,
            &json.configmaps,
        ),
    ] {
        let mut row = Row::new(PHASE, case);
        row.server = format!("protobuf: {}", p.summary());
        row.limit = format!("JSON: {}", j.summary());
        row.ratio = format!("{} throughput", fmt_ratio(p.rate() / j.rate()));
        row.plot_load(p, Some(j));
        row.problem = p
            .problem()
            .or_else(|| j.problem().map(|e| format!("JSON: {e}")));
        rows.push(row);
    }
    Ok(rows)
}

async fn measure(b: &Bench, http: &Http, prefix: &str) -> Result<Measured> {
    let d = b.plan.duration;
    let ns = "bench-storage";
    fixture::namespace(http, ns).await?;
    let deployments = server_creates(
        http,
        ns,
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        CONCURRENCY,
        d,
        fixture::deployment,
    )
    .await;
    let configmaps = server_creates(
        http,
        ns,
        format!("/api/v1/namespaces/{ns}/configmaps"),
        CONCURRENCY,
        d,
        |ns, name, seq| fixture::configmap(ns, name, seq, None),
    )
    .await;
    let mut kv = b.etcd.kv().await?;
    let deployment_bytes = mean_value(&mut kv, format!("{prefix}/deployments/{ns}/")).await?;
    let configmap_bytes = mean_value(&mut kv, format!("{prefix}/configmaps/{ns}/")).await?;
    Ok(Measured {
        deployments,
        deployment_bytes,
        configmaps,
        configmap_bytes,
    })
}

/// The mean value length of the keys under `dir` (0 when there are none).
async fn mean_value(kv: &mut etcd_client::KvClient, dir: String) -> Result<f64> {
    let resp = kv.get(dir, Some(GetOptions::new().with_prefix())).await?;
    let n = resp.kvs().len();
    if n == 0 {
        return Ok(0.0);
    }
    Ok(resp
        .kvs()
        .iter()
        .map(|kv| kv.value().len() as f64)
        .sum::<f64>()
        / n as f64)
}

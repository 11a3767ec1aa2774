//! `/metrics`: after some requests the counters carry kube-apiserver's names
//! and labels, and the gauges follow watches and the cache.

mod common;

use axum::body::Body;
use axum::http::StatusCode;
use common::{configmap, Api};
use std::time::{Duration, Instant};

/// The value of the first sample of `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name).then_some((rest, value))
        })
        .find(|(rest, _)| {
            labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|(_, v)| v.parse().ok())
}

async fn scrape(api: &Api) -> String {
    let r = api.get("/metrics").await;
    assert_eq!(r.code, StatusCode::OK);
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("text/plain"),
        "{:?}",
        r.headers
    );
    r.text()
}

#[tokio::test]
async fn request_counters_carry_kube_labels() {
    let api = Api::new("metrics").await;
    let ns = api.namespace("metrics-a").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    api.create(&cms, &configmap("one", &[("a", "1")])).await;
    api.create(&cms, &configmap("two", &[("a", "1")])).await;
    api.must_get(&format!("{cms}/one")).await;
    assert_eq!(api.get(&cms).await.code, StatusCode::OK);
    assert_eq!(
        api.get(&format!("{cms}/missing")).await.code,
        StatusCode::NOT_FOUND
    );
    api.delete(&format!("{cms}/two")).await;

    let text = scrape(&api).await;
    let base = [
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("component", "apiserver"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut l = base.to_vec();
        l.extend_from_slice(extra);
        l
    };
    let total = "apiserver_request_total";
    let creates = with(&[("verb", "POST"), ("scope", "resource"), ("code", "201")]);
    assert_eq!(sample(&text, total, &creates), Some(2.0), "{text}");
    let gets = with(&[("verb", "GET"), ("scope", "resource"), ("code", "200")]);
    assert_eq!(sample(&text, total, &gets), Some(1.0));
    let missing = with(&[("verb", "GET"), ("scope", "resource"), ("code", "404")]);
    assert_eq!(sample(&text, total, &missing), Some(1.0));
    let lists = with(&[("verb", "LIST"), ("scope", "namespace"), ("code", "200")]);
    assert_eq!(sample(&text, total, &lists), Some(1.0));
    let deletes = with(&[("verb", "DELETE"), ("scope", "resource"), ("code", "200")]);
    assert_eq!(sample(&text, total, &deletes), Some(1.0));
    // Durations and sizes have the same labels without the code.
    let list_labels = with(&[("verb", "LIST"), ("scope", "namespace")]);
    assert_eq!(
        sample(
            &text,
            "apiserver_request_duration_seconds_count",
            &list_labels
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "apiserver_response_sizes_count", &list_labels),
        Some(1.0)
    );
    // Namespaces: cluster-scoped create.
    assert_eq!(
        sample(
            &text,
            total,
            &[
                ("verb", "POST"),
                ("resource", "namespaces"),
                ("code", "201")
            ]
        ),
        Some(1.0)
    );
    // Non-resource requests: empty resource labels.
    api.get("/readyz").await;
    let text = scrape(&api).await;
    assert!(
        sample(
            &text,
            total,
            &[("verb", "GET"), ("resource", ""), ("scope", "")]
        )
        .is_some(),
        "{text}"
    );
    // Storage and cache metrics.
    assert!(
        sample(
            &text,
            "apiserver_storage_objects",
            &[("resource", "configmaps")]
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // One etcd cluster: one database size, kube's first cluster id.
    assert!(
        sample(
            &text,
            "apiserver_storage_size_bytes",
            &[("storage_cluster_id", "etcd-0")]
        )
        .is_some_and(|n| n > 0.0),
        "{text}"
    );
    assert_eq!(
        text.matches("apiserver_storage_size_bytes{").count(),
        1,
        "{text}"
    );
    assert!(sample(&text, "apiserver_watch_cache_resource_version", &[]).is_some_and(|n| n > 0.0));
    assert!(sample(&text, "apiserver_terminated_watchers_total", &[]).is_some());
    assert_eq!(
        sample(
            &text,
            "apiserver_current_inflight_requests",
            &[("request_kind", "mutating")]
        ),
        Some(0.0)
    );
}

#[tokio::test]
async fn watches_are_long_running_until_their_stream_ends() {
    let api = Api::new("metrics-watch").await;
    let ns = api.namespace("metrics-w").await;
    let path = format!("/api/v1/namespaces/{ns}/configmaps?watch=true");
    let watch = api.send("GET", &path, &[], Body::empty()).await;
    assert_eq!(watch.status(), StatusCode::OK);
    let labels = [
        ("verb", "WATCH"),
        ("resource", "configmaps"),
        ("scope", "namespace"),
    ];
    let text = scrape(&api).await;
    assert_eq!(
        sample(&text, "apiserver_longrunning_requests", &labels),
        Some(1.0),
        "{text}"
    );
    drop(watch);
    let start = Instant::now();
    loop {
        let text = scrape(&api).await;
        if sample(&text, "apiserver_longrunning_requests", &labels) == Some(0.0) {
            break;
        }
        assert!(start.elapsed() < common::DEADLINE, "{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        sample(
            &scrape(&api).await,
            "apiserver_request_total",
            &[("verb", "WATCH"), ("code", "200")]
        ),
        Some(1.0)
    );
}

/// `apiserver_watch_events_total` counts every line a watch sends, with the
/// watched resource's group, version and plural (kube's labels).
#[tokio::test]
async fn watch_events_are_counted_per_resource() {
    let api = Api::new("metrics-events").await;
    let ns = api.namespace("metrics-e").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let labels = [("group", ""), ("version", "v1"), ("resource", "configmaps")];
    let before =
        sample(&scrape(&api).await, "apiserver_watch_events_total", &labels).unwrap_or(0.0);
    let watch = api
        .send("GET", &format!("{cms}?watch=true"), &[], Body::empty())
        .await;
    assert_eq!(watch.status(), StatusCode::OK);
    api.create(&cms, &configmap("one", &[("a", "1")])).await;
    api.create(&cms, &configmap("two", &[("a", "1")])).await;
    let (lines, _) = common::read_lines(watch, 2, common::DEADLINE).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let text = scrape(&api).await;
    let after = sample(&text, "apiserver_watch_events_total", &labels);
    // Other tests of this binary watch configmaps too: at least ours.
    assert!(after.is_some_and(|n| n >= before + 2.0), "{text}");
    assert!(
        sample(&text, "apiserver_watch_events_sizes_count", &labels)
            .is_some_and(|n| n >= before + 2.0),
        "{text}"
    );
}

/// `etcd_request_duration_seconds` (and the request and error counters) has
/// a sample for each kind of etcd request the server made, labelled with
/// kube's operation names and the resource of the key.
#[tokio::test]
async fn etcd_requests_are_timed_per_operation_and_resource() {
    let api = Api::new("metrics-etcd").await;
    let ns = api.namespace("metrics-etcd").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    api.create(&cms, &configmap("one", &[("a", "1")])).await;
    let mut cm = api.must_get(&format!("{cms}/one")).await;
    cm["data"]["a"] = serde_json::json!("2");
    let r = api.put(&format!("{cms}/one"), &cm).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(
        api.post(&cms, &configmap("one", &[])).await.code,
        StatusCode::CONFLICT
    );
    api.delete(&format!("{cms}/one")).await;
    let text = scrape(&api).await;
    let duration = "etcd_request_duration_seconds_count";
    for op in ["create", "update", "delete"] {
        let labels = [("operation", op), ("group", ""), ("resource", "configmaps")];
        assert!(
            sample(&text, duration, &labels).is_some_and(|n| n >= 1.0),
            "no {op}: {text}"
        );
        assert!(
            sample(&text, "etcd_requests_total", &labels).is_some_and(|n| n >= 1.0),
            "{text}"
        );
    }
    // The namespace was created in its own resource's key space.
    let ns_create = [("operation", "create"), ("resource", "namespaces")];
    assert!(sample(&text, duration, &ns_create).is_some(), "{text}");
    // The watch cache's list of the whole prefix belongs to no resource.
    let whole = [("operation", "list"), ("group", ""), ("resource", "")];
    assert!(sample(&text, duration, &whole).is_some(), "{text}");
    // Per-resource object counts (scrape time) are kube's listWithCount.
    let counts = [("operation", "listWithCount"), ("resource", "configmaps")];
    assert!(sample(&text, duration, &counts).is_some(), "{text}");
    // An existing name is an answer, not an etcd error.
    assert_eq!(
        sample(
            &text,
            "etcd_request_errors_total",
            &[("operation", "create"), ("resource", "configmaps")]
        ),
        None,
        "{text}"
    );
}

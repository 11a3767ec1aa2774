//! The server's metrics, with kube-apiserver's metric names and labels,
//! rendered for `/metrics` in the Prometheus text format. Requests are
//! classified here (kube's verb and labels) and recorded by the outermost
//! filter, `limits::instrument`, which also applies the in-flight limits
//! and the request timeout.
//!
//! Floor: below the backend, which holds the metrics: this module imports
//! only the model (registry, storage layout, CRD rows) and `telemetry`,
//! never the backend, a filter or the server's state. What a scrape reads
//! from the rest of the server (the watch cache, the stored object counts,
//! the audit log's totals) the `/metrics` handler (`filters.rs`, top
//! floor) gathers and hands over through the `record_*` methods.
//!
//! Built on the `prometheus` crate rather than the opentelemetry SDK: the
//! opentelemetry Prometheus exporter is unmaintained upstream and pulls a
//! much larger dependency tree, while `prometheus` gives kube's exact names,
//! label sets and histogram buckets with no translation (OpenTelemetry
//! collectors scrape this format as is).
//!
//! Watch events (`apiserver_watch_events_total`, `_sizes`) are recorded by
//! the watch handler through a [`WatchEventRecorder`]; etcd requests
//! (`etcd_request_duration_seconds`, `etcd_requests_total`,
//! `etcd_request_errors_total`) by an [`EtcdMetrics`] observer that the etcd
//! store calls around every request (`watchcache::etcd::EtcdObserver`), so
//! the storage crate stays free of any metrics library.
//! Request durations of watches are taken when the response starts, not when
//! the stream ends.
//!
//! `apiserver_request_sli_duration_seconds` is the same duration less the
//! time the request spent in admission webhooks and in a priority-and-
//! fairness queue (kube's SLI, which kube-prometheus's burn-rate and
//! availability rules read): the request's task carries a [`SliTracker`]
//! that the webhook phases and APF's queue add their time to
//! ([`exclude_from_sli`]). The process figures (`process_*`, and
//! `go_goroutines` as the runtime's live tasks) are read at each scrape
//! (`process.rs`); the health checks' results are served apart, at
//! `/metrics/slis`, as kube serves them ([`Metrics::render_slis`]).

mod process;

use crate::registry::Registry as Resources;
use apimachinery::request::ApiPath;
use axum::http::{Method, StatusCode};
use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchcache::etcd::EtcdObserver;

/// kube-apiserver's `component` label value.
const COMPONENT: &str = "apiserver";
const REQUEST_LABELS: &[&str] = &[
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];
/// kube-apiserver's request duration buckets.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
/// kube-apiserver's buckets of `apiserver_request_sli_duration_seconds`
/// (the SLO thresholds of kube-prometheus's rules, 1, 5 and 30 s, among
/// them).
const SLI_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];
/// kube's labels of the request metrics that also carry the code.
const CODE_LABELS: &[&str] = &[
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
    "code",
];
/// kube-apiserver's labels of the watch event metrics.
const WATCH_LABELS: &[&str] = &["group", "version", "resource"];
/// kube-apiserver's labels of the etcd request metrics.
const ETCD_LABELS: &[&str] = &["operation", "group", "resource"];

/// Which in-flight budget a request draws on (`limits`), kube's
/// `request_kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    ReadOnly,
    Mutating,
}

impl RequestKind {
    pub fn label(self) -> &'static str {
        match self {
            RequestKind::ReadOnly => "readOnly",
            RequestKind::Mutating => "mutating",
        }
    }
}

/// What a request is, in kube-apiserver's metric labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// kube's reported verb: GET, LIST, WATCH, POST, PUT, PATCH, APPLY,
    /// DELETE, DELETECOLLECTION (the HTTP method for non-resource paths).
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    /// `resource` (names one object, or creates), `namespace`, `cluster`,
    /// or empty for non-resource paths.
    pub scope: &'static str,
    pub long_running: bool,
    pub kind: RequestKind,
    /// `?dryRun=` was given: kube leaves such requests out of the SLI.
    pub dry_run: bool,
}

impl RequestInfo {
    /// Classifies a request from its method, path, query and content type.
    pub fn classify(
        resources: &Resources,
        method: &Method,
        route: Option<&ApiPath>,
        query: Option<&str>,
        content_type: Option<&str>,
    ) -> RequestInfo {
        let kind = match *method {
            Method::GET | Method::HEAD | Method::OPTIONS => RequestKind::ReadOnly,
            _ => RequestKind::Mutating,
        };
        let mut info = RequestInfo {
            verb: method.as_str().to_ascii_uppercase(),
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            scope: "",
            long_running: false,
            kind,
            dry_run: query_has(query, "dryRun", |v| !v.is_empty()),
        };
        let Some(ApiPath::Resource(r)) = route else {
            return info;
        };
        // Unknown resources keep empty labels: bounded cardinality.
        if resources
            .lookup(&r.group, &r.version, &r.resource)
            .is_none()
        {
            return info;
        }
        let watching = *method == Method::GET && (r.watch_prefix || wants_watch(query));
        info.verb = match *method {
            Method::GET if watching => "WATCH",
            Method::GET if r.name.is_none() => "LIST",
            Method::GET => "GET",
            Method::POST => "POST",
            Method::PUT => "PUT",
            Method::PATCH
                if content_type.is_some_and(|c| c.starts_with("application/apply-patch")) =>
            {
                "APPLY"
            }
            Method::PATCH => "PATCH",
            Method::DELETE if r.name.is_none() => "DELETECOLLECTION",
            Method::DELETE => "DELETE",
            _ => method.as_str(),
        }
        .to_string();
        info.scope = if r.name.is_some() || *method == Method::POST {
            "resource"
        } else if r.namespace.is_some() {
            "namespace"
        } else {
            "cluster"
        };
        info.long_running = watching;
        info.group = r.group.clone();
        info.version = r.version.clone();
        info.resource = r.resource.clone();
        info.subresource = r.subresource.clone().unwrap_or_default();
        info
    }

    fn labels(&self) -> [&str; 7] {
        [
            &self.verb,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            COMPONENT,
        ]
    }
}

fn wants_watch(query: Option<&str>) -> bool {
    query_has(query, "watch", |v| v != "false" && v != "0")
}

/// Whether the query has `key` with a value `wanted` accepts.
fn query_has(query: Option<&str>, key: &str, wanted: impl Fn(&str) -> bool) -> bool {
    query.unwrap_or("").split('&').any(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k == key && wanted(v)
    })
}

tokio::task_local! {
    static SLI_EXCLUDED: SliTracker;
}

/// The time one request spent where kube's SLI does not count it
/// (admission webhooks, APF queue), in nanoseconds; shared by the
/// request's task and whoever records into it.
#[derive(Debug, Clone, Default)]
pub struct SliTracker(Arc<AtomicU64>);

impl SliTracker {
    /// Runs `fut` with this tracker as the current task's.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        SLI_EXCLUDED.scope(self.clone(), fut)
    }

    /// The time excluded so far.
    pub fn excluded(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// Leaves `d` out of the current request's SLI duration (no-op outside a
/// request).
pub fn exclude_from_sli(d: Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let _ = SLI_EXCLUDED.try_with(|t| t.0.fetch_add(nanos, Ordering::Relaxed));
}

/// Runs `fut` and leaves the time it took out of the current request's
/// SLI duration (kube's webhook latency trackers).
pub async fn excluded_from_sli<F: Future>(fut: F) -> F::Output {
    let started = std::time::Instant::now();
    let out = fut.await;
    exclude_from_sli(started.elapsed());
    out
}

/// One controller's work queue metrics.
#[derive(Clone)]
pub struct QueueMetrics {
    pub depth: IntGauge,
    pub adds: IntCounter,
    pub retries: IntCounter,
    /// Seconds a key waited in the queue before a worker took it.
    pub latency: Histogram,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    durations: HistogramVec,
    sli_durations: HistogramVec,
    terminations: IntCounterVec,
    sizes: HistogramVec,
    inflight: IntGaugeVec,
    longrunning: IntGaugeVec,
    storage_objects: IntGaugeVec,
    storage_size: IntGaugeVec,
    terminated_watchers: IntCounter,
    registered_watchers: IntGauge,
    cache_revision: IntGauge,
    cache_capacity: IntGauge,
    cache_window_bytes: IntGauge,
    cache_objects: IntGauge,
    custom_rows: IntGauge,
    cache_fallbacks: IntCounter,
    watch_events: IntCounterVec,
    watch_event_sizes: HistogramVec,
    etcd: EtcdRequestMetrics,
    audit_events: IntCounter,
    audit_errors: IntCounterVec,
    workqueue_depth: IntGaugeVec,
    workqueue_adds: IntCounterVec,
    workqueue_retries: IntCounterVec,
    workqueue_latency: HistogramVec,
    auth_attempts: IntCounterVec,
    auth_durations: HistogramVec,
    auth_users: IntCounterVec,
    process: process::ProcessMetrics,
    /// `/metrics/slis`: the health checks' results, a registry of its own.
    slis: Registry,
    healthcheck: IntGaugeVec,
    healthchecks: IntCounterVec,
    webhook_durations: HistogramVec,
    webhook_requests: IntCounterVec,
    webhook_rejections: IntCounterVec,
    policy_checks: IntCounterVec,
    policy_check_durations: HistogramVec,
    /// Serializes scrape-time counter updates (never held across `.await`).
    refresh: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

type Built<T> = Result<T, prometheus::Error>;

fn register<C: Collector + Clone + 'static>(r: &Registry, c: C) -> Built<C> {
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> Built<IntCounterVec> {
    register(r, IntCounterVec::new(Opts::new(name, help), labels)?)
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> Built<IntGaugeVec> {
    register(r, IntGaugeVec::new(Opts::new(name, help), labels)?)
}

fn histogram_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> Built<HistogramVec> {
    register(
        r,
        HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)?,
    )
}

fn gauge(r: &Registry, name: &str, help: &str) -> Built<IntGauge> {
    register(r, IntGauge::new(name, help)?)
}

fn counter(r: &Registry, name: &str, help: &str) -> Built<IntCounter> {
    register(r, IntCounter::new(name, help)?)
}

impl Metrics {
    /// Defines every metric (fails only on an invalid definition, which
    /// the unit tests rule out).
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let r = Registry::new();
        let with_code: Vec<&str> = REQUEST_LABELS.iter().copied().chain(["code"]).collect();
        let slis = Registry::new();
        Ok(Metrics {
            requests: counter_vec(
                &r,
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
                &with_code,
            )?,
            durations: histogram_vec(
                &r,
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
                REQUEST_LABELS,
                DURATION_BUCKETS.to_vec(),
            )?,
            sli_durations: histogram_vec(
                &r,
                "apiserver_request_sli_duration_seconds",
                "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
                REQUEST_LABELS,
                SLI_BUCKETS.to_vec(),
            )?,
            terminations: counter_vec(
                &r,
                "apiserver_request_terminations_total",
                "Number of requests which apiserver terminated in self-defense.",
                CODE_LABELS,
            )?,
            sizes: histogram_vec(
                &r,
                "apiserver_response_sizes",
                "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
                REQUEST_LABELS,
                prometheus::exponential_buckets(1000.0, 10.0, 7)?,
            )?,
            inflight: gauge_vec(
                &r,
                "apiserver_current_inflight_requests",
                "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
                &["request_kind"],
            )?,
            longrunning: gauge_vec(
                &r,
                "apiserver_longrunning_requests",
                "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component.",
                REQUEST_LABELS,
            )?,
            storage_objects: gauge_vec(
                &r,
                "apiserver_storage_objects",
                "Number of stored objects at the time of last check split by kind.",
                &["resource"],
            )?,
            storage_size: gauge_vec(
                &r,
                "apiserver_storage_size_bytes",
                "Size of the storage database file physically allocated in bytes.",
                &["storage_cluster_id"],
            )?,
            terminated_watchers: counter(
                &r,
                "apiserver_terminated_watchers_total",
                "Counter of watchers closed due to unresponsiveness.",
            )?,
            registered_watchers: gauge(
                &r,
                "apiserver_registered_watchers",
                "Number of currently registered watchers.",
            )?,
            cache_revision: gauge(
                &r,
                "apiserver_watch_cache_resource_version",
                "Current resource version of watch cache.",
            )?,
            cache_capacity: gauge(
                &r,
                "apiserver_watch_cache_capacity",
                "Number of changes the watch cache window holds.",
            )?,
            cache_window_bytes: gauge(
                &r,
                "apiserver_watch_cache_window_bytes",
                "Bytes of the objects the watch cache window refers to.",
            )?,
            cache_objects: gauge(
                &r,
                "apiserver_watch_cache_objects",
                "Number of objects held by the watch cache.",
            )?,
            custom_rows: gauge(
                &r,
                "apiserver_custom_resource_rows",
                "Registry rows of custom resources alive in this process (one per served version of a CRD), including those dropped from the registry but still held by a request, watch or controller.",
            )?,
            cache_fallbacks: counter(
                &r,
                "apiserver_watch_cache_consistent_read_fallbacks_total",
                "Consistent reads served by etcd because the watch cache did not catch up in time.",
            )?,
            watch_events: counter_vec(
                &r,
                "apiserver_watch_events_total",
                "Number of events sent in watch clients",
                WATCH_LABELS,
            )?,
            watch_event_sizes: histogram_vec(
                &r,
                "apiserver_watch_events_sizes",
                "Watch event size distribution in bytes",
                WATCH_LABELS,
                prometheus::exponential_buckets(1024.0, 2.0, 8)?,
            )?,
            etcd: EtcdRequestMetrics {
                durations: histogram_vec(
                    &r,
                    "etcd_request_duration_seconds",
                    "Etcd request latency in seconds for each operation and object type.",
                    ETCD_LABELS,
                    DURATION_BUCKETS.to_vec(),
                )?,
                requests: counter_vec(
                    &r,
                    "etcd_requests_total",
                    "Etcd request counts for each operation and object type.",
                    ETCD_LABELS,
                )?,
                errors: counter_vec(
                    &r,
                    "etcd_request_errors_total",
                    "Etcd failed request counts for each operation and object type.",
                    ETCD_LABELS,
                )?,
            },
            audit_events: counter(
                &r,
                "apiserver_audit_event_total",
                "Counter of audit events generated and sent to the audit backend.",
            )?,
            audit_errors: counter_vec(
                &r,
                "apiserver_audit_error_total",
                "Counter of audit events that failed to be audited properly (plugin: \"buffered\" for a full queue, \"log\" for write errors).",
                &["plugin"],
            )?,
            workqueue_depth: gauge_vec(
                &r,
                "workqueue_depth",
                "Keys waiting in a controller's work queue.",
                &["name"],
            )?,
            workqueue_adds: counter_vec(
                &r,
                "workqueue_adds_total",
                "Keys added to a controller's work queue.",
                &["name"],
            )?,
            workqueue_retries: counter_vec(
                &r,
                "workqueue_retries_total",
                "Keys a controller's work queue took back for a rate-limited retry.",
                &["name"],
            )?,
            workqueue_latency: histogram_vec(
                &r,
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested.",
                &["name"],
                prometheus::exponential_buckets(10e-9, 10.0, 10)?,
            )?,
            auth_attempts: counter_vec(
                &r,
                "authentication_attempts",
                "Counter of authenticated attempts.",
                &["result"],
            )?,
            auth_durations: histogram_vec(
                &r,
                "authentication_duration_seconds",
                "Authentication duration in seconds broken out by result.",
                &["result"],
                prometheus::exponential_buckets(0.001, 2.0, 15)?,
            )?,
            auth_users: counter_vec(
                &r,
                "authenticated_user_requests",
                "Counter of authenticated requests broken out by username.",
                &["username"],
            )?,
            process: process::ProcessMetrics::new(&r)?,
            healthcheck: gauge_vec(
                &slis,
                "kubernetes_healthcheck",
                "This metric records the result of a single healthcheck.",
                &["name", "type"],
            )?,
            healthchecks: counter_vec(
                &slis,
                "kubernetes_healthchecks_total",
                "This metric records the results of all healthcheck.",
                &["name", "status", "type"],
            )?,
            slis,
            webhook_durations: histogram_vec(
                &r,
                "apiserver_admission_webhook_admission_duration_seconds",
                "Admission webhook latency in seconds, by webhook name, type (validating or admit), operation and whether it rejected.",
                &["name", "type", "operation", "rejected"],
                vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0],
            )?,
            webhook_requests: counter_vec(
                &r,
                "apiserver_admission_webhook_request_total",
                "Admission webhook requests, by webhook name, type, operation, HTTP code (0 when no answer came) and whether it rejected.",
                &["name", "type", "operation", "code", "rejected"],
            )?,
            webhook_rejections: counter_vec(
                &r,
                "apiserver_admission_webhook_rejection_count",
                "Admission webhook rejections, by webhook name, type, operation, error type (calling_webhook_error or no_error) and rejection code.",
                &["name", "type", "operation", "error_type", "rejection_code"],
            )?,
            policy_checks: counter_vec(
                &r,
                "apiserver_validating_admission_policy_check_total",
                "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.",
                &["policy", "policy_binding", "error_type", "enforcement_action"],
            )?,
            policy_check_durations: histogram_vec(
                &r,
                "apiserver_validating_admission_policy_check_duration_seconds",
                "Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken.",
                &["policy", "policy_binding", "error_type", "enforcement_action"],
                vec![0.0000005, 0.001, 0.01, 0.1, 1.0],
            )?,
            registry: r,
            refresh: std::sync::Mutex::new(()),
        })
    }

    /// The work queue metrics of the controller `name` (kube's
    /// `workqueue_*` with label `name`).
    /// Records one admission webhook call (kube's
    /// `apiserver_admission_webhook_*`): `kind` is `validating` or
    /// `admit`; `answered` whether the webhook answered; `rejection`, the
    /// code of the refusal it caused, if any.
    pub fn webhook_call(
        &self,
        name: &str,
        kind: &str,
        operation: &str,
        answered: bool,
        rejection: Option<u16>,
        elapsed: std::time::Duration,
    ) {
        let rejected = if rejection.is_some() { "true" } else { "false" };
        self.webhook_durations
            .with_label_values(&[name, kind, operation, rejected])
            .observe(elapsed.as_secs_f64());
        let code = if answered { "200" } else { "0" };
        self.webhook_requests
            .with_label_values(&[name, kind, operation, code, rejected])
            .inc();
        if let Some(c) = rejection {
            let error_type = if answered {
                "no_error"
            } else {
                "calling_webhook_error"
            };
            self.webhook_rejections
                .with_label_values(&[name, kind, operation, error_type, &c.to_string()])
                .inc();
        }
    }

    /// Records one ValidatingAdmissionPolicy check (kube's
    /// `apiserver_validating_admission_policy_check_*`): `action` is
    /// `allow`, `deny`, `warn` or `audit`; `error_type` `no_error`,
    /// `invalid_error`, `compile_error` or `out_of_budget`.
    pub fn policy_check(
        &self,
        policy: &str,
        binding: &str,
        error_type: &str,
        action: &str,
        elapsed: std::time::Duration,
    ) {
        let labels = [policy, binding, error_type, action];
        self.policy_checks.with_label_values(&labels).inc();
        self.policy_check_durations
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
    }

    pub fn queue(&self, name: &str) -> QueueMetrics {
        QueueMetrics {
            depth: self.workqueue_depth.with_label_values(&[name]),
            adds: self.workqueue_adds.with_label_values(&[name]),
            retries: self.workqueue_retries.with_label_values(&[name]),
            latency: self.workqueue_latency.with_label_values(&[name]),
        }
    }

    /// One authentication attempt (kube's `authentication_attempts`,
    /// `authentication_duration_seconds`): `user` is who the request
    /// turned out to be (`None`: the credentials were refused, or there
    /// were none and anonymous requests are not allowed there).
    pub fn authentication(&self, user: Option<&str>, elapsed: Duration) {
        let result = if user.is_some() { "success" } else { "failure" };
        self.auth_attempts.with_label_values(&[result]).inc();
        self.auth_durations
            .with_label_values(&[result])
            .observe(elapsed.as_secs_f64());
        if let Some(user) = user {
            self.auth_users
                .with_label_values(&[compress_username(user)])
                .inc();
        }
    }

    /// The result of one health check run by `/livez`, `/readyz` or
    /// `/healthz` (`kind`), for `/metrics/slis`.
    pub fn healthcheck(&self, name: &str, kind: &str, ok: bool) {
        let status = if ok { "success" } else { "error" };
        self.healthcheck
            .with_label_values(&[name, kind])
            .set(i64::from(ok));
        self.healthchecks
            .with_label_values(&[name, status, kind])
            .inc();
    }

    /// `/metrics/slis` in the text format.
    pub fn render_slis(&self) -> String {
        encode(&self.slis)
    }

    /// A request the server ended in self-defense (in-flight limit,
    /// timeout) with `code`.
    pub fn terminated(&self, info: &RequestInfo, code: StatusCode) {
        let code = code.as_u16().to_string();
        let mut labels = info.labels().to_vec();
        labels.push(&code);
        self.terminations.with_label_values(&labels).inc();
    }

    /// Counts the events one watch response sends (kube's labels: the
    /// watched resource's group, version and plural).
    pub fn watch_recorder(&self, group: &str, version: &str, resource: &str) -> WatchEventRecorder {
        let labels = [group, version, resource];
        WatchEventRecorder {
            count: self.watch_events.with_label_values(&labels),
            size: self.watch_event_sizes.with_label_values(&labels),
        }
    }

    /// The observer that records the etcd requests of a store whose keys
    /// live under `prefix`, labelled with the resource each key belongs to.
    pub fn etcd_observer(&self, resources: &Resources, prefix: &str) -> EtcdMetrics {
        // Rows sharing storage (versions of one kind, events.k8s.io Events
        // in core's) are labelled by the first, the storage row.
        let mut seen = std::collections::HashSet::new();
        let segments = resources
            .all()
            .iter()
            .filter(|r| seen.insert(crate::storage_format::segment(r)))
            .map(|r| {
                (
                    crate::storage_format::segment(&r),
                    (r.group.to_string(), r.plural.to_string()),
                )
            })
            .collect();
        EtcdMetrics {
            metrics: self.etcd.clone(),
            prefix: format!("{}/", prefix.trim_end_matches('/')),
            segments,
        }
    }

    /// Brings the watch cache's metrics up to date (at a scrape).
    pub fn record_cache(&self, stats: &watchcache::CacheStats) {
        {
            let _serial = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
            bump(&self.terminated_watchers, stats.terminated_watchers);
            bump(&self.cache_fallbacks, stats.consistent_fallbacks);
        }
        self.registered_watchers.set(to_i64(stats.watchers));
        self.cache_revision.set(stats.revision);
        self.cache_capacity.set(to_i64(stats.window_events));
        self.cache_window_bytes.set(to_i64(stats.window_bytes));
        self.cache_objects.set(to_i64(stats.objects));
    }

    /// `apiserver_storage_objects`: stored objects per resource (`plural`
    /// or `plural.group`), as counted at a scrape (-1: not counted).
    pub fn record_stored_objects(&self, counts: impl IntoIterator<Item = (String, i64)>) {
        for (label, count) in counts {
            self.storage_objects.with_label_values(&[&label]).set(count);
        }
    }

    /// `apiserver_storage_size_bytes`: the database size of each cluster
    /// that answered at this scrape (`etcd-0`, `etcd-1`, …); a cluster
    /// that did not has no series, as in kube.
    pub fn record_storage_sizes(&self, sizes: impl IntoIterator<Item = (String, i64)>) {
        let _serial = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
        self.storage_size.reset();
        for (id, bytes) in sizes {
            self.storage_size.with_label_values(&[&id]).set(bytes);
        }
    }

    /// The audit log's totals (at a scrape): events handed to the writer,
    /// dropped because its queue was full, lost to write errors.
    pub fn record_audit(&self, events: u64, dropped: u64, errors: u64) {
        let _serial = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
        bump(&self.audit_events, events);
        bump(&self.audit_errors.with_label_values(&["buffered"]), dropped);
        bump(&self.audit_errors.with_label_values(&["log"]), errors);
    }

    /// Renders every metric in the text format (the scrape-time ones
    /// recorded first through `record_*`).
    pub fn render(&self) -> String {
        self.custom_rows.set(crate::crd::live_rows());
        self.process.refresh();
        encode(&self.registry)
    }

    /// The registry, for metrics defined elsewhere (flow control).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The gauge of the long-running requests of `info`'s labels.
    pub fn longrunning(&self, info: &RequestInfo) -> IntGauge {
        self.longrunning.with_label_values(&info.labels())
    }

    /// The gauge of the requests in flight of `kind`.
    pub fn inflight(&self, kind: RequestKind) -> IntGauge {
        self.inflight.with_label_values(&[kind.label()])
    }

    /// Records one finished request; `excluded` is its time in webhooks
    /// and APF's queue, which its SLI duration leaves out.
    pub fn observe(
        &self,
        info: &RequestInfo,
        code: StatusCode,
        elapsed: Duration,
        excluded: Duration,
        size: Option<u64>,
    ) {
        let labels = info.labels();
        let code = code.as_u16().to_string();
        let mut with_code = labels.to_vec();
        with_code.push(&code);
        self.requests.with_label_values(&with_code).inc();
        self.durations
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
        if !info.dry_run {
            self.sli_durations
                .with_label_values(&labels)
                .observe(elapsed.saturating_sub(excluded).as_secs_f64());
        }
        if let Some(size) = size {
            // Sizes are far below 2^52: exact as f64.
            #[allow(clippy::cast_precision_loss)]
            self.sizes.with_label_values(&labels).observe(size as f64);
        }
    }
}

/// Records the events of one watch response.
#[derive(Clone)]
pub struct WatchEventRecorder {
    count: IntCounter,
    size: Histogram,
}

impl WatchEventRecorder {
    /// One event of `bytes` bytes was sent.
    pub fn sent(&self, bytes: usize) {
        self.count.inc();
        // Event sizes are far below 2^52: exact as f64.
        #[allow(clippy::cast_precision_loss)]
        self.size.observe(bytes as f64);
    }
}

/// kube-apiserver's etcd request metrics.
#[derive(Clone)]
struct EtcdRequestMetrics {
    durations: HistogramVec,
    requests: IntCounterVec,
    errors: IntCounterVec,
}

/// Records every etcd request of a store (`etcd_request_duration_seconds`,
/// `etcd_requests_total`, `etcd_request_errors_total`, labelled `operation`,
/// `group`, `resource` as kube-apiserver does) and puts the request's
/// audit id on the etcd span.
pub struct EtcdMetrics {
    metrics: EtcdRequestMetrics,
    /// The etcd prefix with a trailing slash.
    prefix: String,
    /// Storage segment (`configmaps`, `apps/deployments`) → group, resource.
    segments: HashMap<String, (String, String)>,
}

impl EtcdMetrics {
    /// The group and resource a key (or prefix) belongs to; empty for keys
    /// outside every resource (the whole prefix, coordination keys), which
    /// keeps the label set bounded.
    fn resource_of(&self, key: &[u8]) -> (&str, &str) {
        let key = String::from_utf8_lossy(key);
        let Some(rest) = key.strip_prefix(self.prefix.as_str()) else {
            return ("", "");
        };
        let mut parts = rest.split('/');
        let first = parts.next().unwrap_or("");
        let second = parts.next().unwrap_or("");
        self.segments
            .get(&format!("{first}/{second}"))
            .or_else(|| self.segments.get(first))
            .map_or(("", ""), |(g, r)| (g.as_str(), r.as_str()))
    }
}

impl EtcdObserver for EtcdMetrics {
    fn started(&self, span: &tracing::Span) {
        if let Some(id) = crate::telemetry::RequestId::current() {
            span.record("audit_id", id.as_str());
        }
    }

    fn finished(&self, operation: &'static str, key: &[u8], elapsed: Duration, ok: bool) {
        let (group, resource) = self.resource_of(key);
        let labels = [operation, group, resource];
        let m = &self.metrics;
        m.durations
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
        m.requests.with_label_values(&labels).inc();
        if !ok {
            m.errors.with_label_values(&labels).inc();
        }
    }
}

fn encode(registry: &Registry) -> String {
    TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot encode metrics");
            String::new()
        })
}

/// kube's few categories of user names for `authenticated_user_requests`
/// (bounded cardinality, no real names in the metrics).
fn compress_username(name: &str) -> &str {
    match name {
        "admin"
        | "client"
        | "kube_proxy"
        | "kubelet"
        | "system:serviceaccount:kube-system:default" => name,
        n if n.contains('@') => "email_id",
        _ => "other",
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Raises a counter to a cumulative value kept elsewhere.
fn bump(c: &IntCounter, total: u64) {
    let d = total.saturating_sub(c.get());
    if d > 0 {
        c.inc_by(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verb(method: Method, path: &str, query: Option<&str>) -> RequestInfo {
        let route = crate::request::parse(path);
        RequestInfo::classify(&Resources::builtin(), &method, route.as_ref(), query, None)
    }

    #[test]
    fn verbs_and_scopes() {
        let one = verb(Method::GET, "/api/v1/namespaces/a/configmaps/x", None);
        assert_eq!((one.verb.as_str(), one.scope), ("GET", "resource"));
        let list = verb(Method::GET, "/api/v1/namespaces/a/configmaps", None);
        assert_eq!((list.verb.as_str(), list.scope), ("LIST", "namespace"));
        let all = verb(Method::GET, "/api/v1/configmaps", None);
        assert_eq!((all.verb.as_str(), all.scope), ("LIST", "cluster"));
        let w = verb(Method::GET, "/api/v1/configmaps", Some("watch=true"));
        assert_eq!(w.verb, "WATCH");
        assert!(w.long_running);
        assert_eq!(
            verb(Method::GET, "/api/v1/configmaps", Some("watch=false")).verb,
            "LIST"
        );
        let create = verb(Method::POST, "/apis/apps/v1/namespaces/a/deployments", None);
        assert_eq!(
            (create.verb.as_str(), create.scope, create.group.as_str()),
            ("POST", "resource", "apps")
        );
        assert_eq!(create.kind, RequestKind::Mutating);
        let dc = verb(Method::DELETE, "/api/v1/namespaces/a/configmaps", None);
        assert_eq!(dc.verb, "DELETECOLLECTION");
        let scale = verb(
            Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/d/scale",
            None,
        );
        assert_eq!(scale.subresource, "scale");
        let apply = RequestInfo::classify(
            &Resources::builtin(),
            &Method::PATCH,
            crate::request::parse("/api/v1/namespaces/a/configmaps/x").as_ref(),
            None,
            Some("application/apply-patch+yaml"),
        );
        assert_eq!(apply.verb, "APPLY");
        let health = verb(Method::GET, "/readyz", None);
        assert!(Metrics::new().is_ok());
        assert_eq!((health.verb.as_str(), health.scope), ("GET", ""));
        let unknown = verb(Method::GET, "/api/v1/nonsense", None);
        assert_eq!(unknown.resource, "");
    }

    #[tokio::test]
    async fn the_sli_leaves_out_webhooks_and_queue_waits_and_dry_runs() {
        let m = Metrics::new().expect("metric definitions");
        let sli = SliTracker::default();
        exclude_from_sli(Duration::from_secs(9)); // outside a request: no-op
        sli.scope(async {
            exclude_from_sli(Duration::from_millis(700));
            excluded_from_sli(async {}).await;
        })
        .await;
        assert!(sli.excluded() >= Duration::from_millis(700));
        assert!(sli.excluded() < Duration::from_secs(1));
        let info = verb(Method::GET, "/api/v1/namespaces/a/configmaps/x", None);
        m.observe(
            &info,
            StatusCode::OK,
            Duration::from_millis(800),
            sli.excluded(),
            None,
        );
        let dry = verb(
            Method::POST,
            "/api/v1/namespaces/a/configmaps",
            Some("dryRun=All"),
        );
        assert!(dry.dry_run);
        m.observe(
            &dry,
            StatusCode::CREATED,
            Duration::from_millis(10),
            Duration::ZERO,
            None,
        );
        let text = m.render();
        // 0.8 s in all, 0.1 s of it the server's own: under the 0.2 bucket.
        assert!(text.contains(
            "apiserver_request_sli_duration_seconds_bucket{component=\"apiserver\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\",le=\"0.2\"} 1"
        ), "{text}");
        assert!(!text.contains("apiserver_request_sli_duration_seconds_count{component=\"apiserver\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"POST\""));
        assert!(text.contains("verb=\"POST\",version=\"v1\",le=\"0.025\"} 1"));
        assert!(text.contains("process_resident_memory_bytes"));
        assert!(text.contains("go_goroutines"));
    }

    #[test]
    fn etcd_keys_map_to_their_resource() {
        let metrics = Metrics::new().expect("metric definitions");
        let o = metrics.etcd_observer(&Resources::builtin(), "/registry/");
        let of = |key: &str| o.resource_of(key.as_bytes());
        assert_eq!(of("/registry/configmaps/ns/a"), ("", "configmaps"));
        assert_eq!(of("/registry/configmaps/"), ("", "configmaps"));
        assert_eq!(of("/registry/namespaces/apps"), ("", "namespaces"));
        assert_eq!(of("/registry/deployments/ns/d"), ("apps", "deployments"));
        assert_eq!(of("/registry/services/specs/ns/s"), ("", "services"));
        assert_eq!(of("/registry/services/endpoints/ns/s"), ("", "endpoints"));
        assert_eq!(of("/registry/events/ns/e"), ("", "events"));
        // Rows sharing storage count once, as the storage row: the two
        // HPA versions, and events.k8s.io Events (stored with core's).
        assert_eq!(
            of("/registry/horizontalpodautoscalers/ns/h"),
            ("autoscaling", "horizontalpodautoscalers")
        );
        assert_eq!(of("/registry/events.k8s.io/events/ns/e"), ("", ""));
        // The whole prefix, coordination keys, probes: no resource.
        assert_eq!(of("/registry/"), ("", ""));
        assert_eq!(of("/registry/compact_rev_key"), ("", ""));
        assert_eq!(of("\0"), ("", ""));
        assert_eq!(of("/other/configmaps/a"), ("", ""));
    }
}

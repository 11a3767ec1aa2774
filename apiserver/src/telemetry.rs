//! Request ids, request spans, and the process's logging and tracing setup.
//!
//! Every request gets an id, as kube-apiserver's audit id: the incoming
//! `Audit-ID` header when it carries a usable one, else a fresh UUID. The
//! id is put in the request's extensions ([`RequestId`], for later layers
//! such as audit), sent back on every response as `Audit-Id`, and recorded
//! as `audit_id` on the `request` span that wraps the whole request, so
//! every log line written while serving it carries the id. etcd requests
//! made for it get their own `etcd` spans, children of the request's, with
//! the same `audit_id` (see `metrics::EtcdMetrics`).
//!
//! Logs go to stderr as text or JSON (`--log-format`), filtered by
//! `RUST_LOG` (default `info`). With `--tracing-endpoint` the spans are also
//! exported over OTLP/gRPC (service name `apiserver`, W3C `traceparent`
//! honoured); without it there is no exporter, no propagator and no
//! OpenTelemetry layer at all.
//!
//! Floor: with the backend, below the filters: it imports no other module
//! of the crate (`init` takes the flags it reads, not the configuration,
//! which itself names [`LogFormat`]).

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The request and response header carrying the request id (kube's name).
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");
/// Longest incoming id taken as is (longer ones are replaced).
const MAX_ID_LEN: usize = 128;
/// Service name of the exported spans.
const SERVICE_NAME: &str = "apiserver";

/// Set once spans are exported: only then are incoming trace contexts read.
static EXPORTING: AtomicBool = AtomicBool::new(false);

tokio::task_local! {
    static CURRENT: RequestId;
}

/// The id of one request (kube's audit id), in the request's extensions
/// and, while it is served, in the serving task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// A fresh id (a UUID, as kube-apiserver makes them).
    pub fn generate() -> RequestId {
        RequestId(uuid::Uuid::new_v4().to_string().into())
    }

    /// The id a client sent, when it is printable ASCII of a sane length.
    pub fn from_header(value: &HeaderValue) -> Option<RequestId> {
        let s = value.to_str().ok()?.trim();
        let usable =
            !s.is_empty() && s.len() <= MAX_ID_LEN && s.bytes().all(|b| b.is_ascii_graphic());
        usable.then(|| RequestId(s.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of the request the current task serves, if any.
    pub fn current() -> Option<RequestId> {
        CURRENT.try_with(RequestId::clone).ok()
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `fut` (about to be spawned as a task of its own) in the current
/// request's span and with its id.
pub fn in_request<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let fut = fut.instrument(tracing::Span::current());
    match RequestId::current() {
        Some(id) => futures_util::future::Either::Left(CURRENT.scope(id, fut)),
        None => futures_util::future::Either::Right(fut),
    }
}

/// The outermost middleware: assigns the request id, opens the request
/// span, and answers with `Audit-Id` whatever the response is.
pub async fn middleware(mut req: Request, next: Next) -> Response {
    let start = Instant::now();
    let id = req
        .headers()
        .get(&AUDIT_ID)
        .and_then(RequestId::from_header)
        .unwrap_or_else(RequestId::generate);
    req.extensions_mut().insert(id.clone());
    let exporting = EXPORTING.load(Ordering::Relaxed);
    // The `served` line's own fields (reference-counted copies). Not
    // behind `tracing::enabled!`: with per-layer filters that call leaves
    // its filter state to the next span, and the request span then missed
    // the exporter.
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let span = if exporting {
        let user_agent = req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let span = tracing::info_span!(
            "request",
            otel.name = "KubernetesAPI",
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            audit_id = id.as_str(),
            method = %req.method(),
            path = req.uri().path(),
            user_agent,
            status = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
        );
        adopt_remote_parent(&span, req.headers());
        span
    } else {
        // For the logs only the id, which ties a line to the request and
        // to its audit event (where method, path and user agent are): the
        // log layer formats every field of every span when it opens, which
        // for the full set cost about 15k instructions per request, an
        // eighth of a cached GET (BENCHMARKS.md, "Instructions per GET:
        // logging and futures").
        tracing::info_span!("request", audit_id = %id.as_str())
    };
    let mut response = CURRENT
        .scope(id.clone(), next.run(req))
        .instrument(span.clone())
        .await;
    let status = response.status();
    let latency = start.elapsed();
    if exporting {
        // As i64: exporters keep that as an integer (u64 may become a string).
        span.record("status", i64::from(status.as_u16()));
        span.record("latency_ms", latency_ms(latency));
        if status.is_server_error() {
            span.record("otel.status_code", "error");
        }
    }
    tracing::debug!(parent: &span, %method, path = uri.path(), status = status.as_u16(), latency_ms = latency_ms(latency), "served");
    if let Ok(v) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(AUDIT_ID, v);
    }
    response
}

fn latency_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Makes `span` a child of the trace the client sent (`traceparent`).
fn adopt_remote_parent(span: &tracing::Span, headers: &HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    if let Err(e) = span.set_parent(parent) {
        tracing::debug!(error = %e, "cannot adopt the incoming trace context");
    }
}

/// Request headers as an OpenTelemetry propagation carrier.
struct Headers<'a>(&'a HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, with the span fields (`audit_id`, ...) in front.
    #[default]
    Text,
    /// One JSON object per line, span fields under `span` and `spans`.
    Json,
}

/// Why logging or tracing could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot build the OTLP exporter for {endpoint}: {source}")]
    Exporter {
        endpoint: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("cannot install the log subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// The installed tracing pipeline; [`Telemetry::shutdown`] flushes it.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans not sent yet and stops the exporter (no-op without
    /// `--tracing-endpoint`). Call it while the runtime still runs: the
    /// gRPC connection lives on it.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("apiserver: flushing traces failed: {e}"),
            Err(e) => eprintln!("apiserver: flushing traces failed: {e}"),
        }
    }
}

/// Installs the global log subscriber (format from `--log-format`, filter
/// from `RUST_LOG`) and, with `--tracing-endpoint`, the OTLP exporter.
/// Must run inside the tokio runtime (the gRPC channel is spawned on it).
/// `tracing_sampling_rate_per_million` is `--tracing-sampling-rate-per-million`.
pub fn init(
    log_format: LogFormat,
    tracing_endpoint: Option<&str>,
    tracing_sampling_rate_per_million: u32,
) -> Result<Telemetry, TelemetryError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a terminal: a file, a pipe or journald gets plain
    // text, as kube's logs are.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let logs = match log_format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    };
    let provider = match tracing_endpoint {
        Some(endpoint) => Some(tracer_provider(
            endpoint,
            tracing_sampling_rate_per_million,
        )?),
        None => None,
    };
    // Spans are exported whatever the log filter keeps (info and above).
    let export = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(SERVICE_NAME))
            .with_threads(false)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(export)
        .try_init()?;
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        EXPORTING.store(true, Ordering::Relaxed);
        watchcache::etcd::export_spans(true);
    }
    Ok(Telemetry { provider })
}

/// The OTLP/gRPC pipeline: batched export, kube's sampling (a fraction of
/// new traces, and every trace whose caller sampled it).
fn tracer_provider(
    endpoint: &str,
    rate_per_million: u32,
) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|source| TelemetryError::Exporter {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let ratio = f64::from(rate_per_million.min(1_000_000)) / 1_000_000.0;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(SERVICE_NAME)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_resource(resource)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incoming_ids() {
        let ok = HeaderValue::from_static("abc-123");
        assert_eq!(
            RequestId::from_header(&ok).map(|i| i.to_string()),
            Some("abc-123".into())
        );
        assert!(RequestId::from_header(&HeaderValue::from_static("")).is_none());
        assert!(RequestId::from_header(&HeaderValue::from_static("a b")).is_none());
        let long = HeaderValue::from_str(&"x".repeat(MAX_ID_LEN + 1)).unwrap_or(ok);
        assert!(RequestId::from_header(&long).is_none());
        let fresh = RequestId::generate();
        assert_eq!(fresh.as_str().len(), 36);
        assert_ne!(fresh, RequestId::generate());
    }

    #[tokio::test]
    async fn current_id_follows_the_request_into_spawned_tasks() {
        assert_eq!(RequestId::current(), None);
        let id = RequestId::generate();
        let seen = CURRENT
            .scope(id.clone(), async {
                tokio::spawn(in_request(async { RequestId::current() })).await
            })
            .await;
        assert_eq!(seen.ok().flatten(), Some(id));
    }
}

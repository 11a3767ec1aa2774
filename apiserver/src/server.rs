//! The HTTP server: shared state, the router, and the non-resource endpoints
//! (/version, health). Resource paths go to `handlers::dispatch`.

use crate::registry::{Registry, Resource};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::CompressionLayer;
use watchcache::Storage;

/// Kubernetes version this server reports and implements.
pub const KUBE_MAJOR: &str = "1";
pub const KUBE_MINOR: &str = "35";

/// Everything a request handler needs; one per server, shared by `Arc`.
pub struct AppState {
    pub store: Arc<dyn Storage>,
    pub registry: Registry,
    /// etcd key prefix, without trailing slash (e.g. `/registry`).
    pub prefix: String,
    /// Set once the default namespaces and objects exist.
    pub bootstrapped: AtomicBool,
    /// Set on shutdown: readyz fails from then on.
    pub shutting_down: AtomicBool,
    pub discovery: crate::discovery::Discovery,
    /// The watch cache behind `store`, when enabled (for readiness).
    pub cache: Option<watchcache::Cacher>,
    /// Request metrics (`None` only if their definitions were rejected).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// In-flight limits and the request timeout.
    pub limits: crate::limits::Limits,
    /// API Priority and Fairness (off until configured by `run`).
    pub apf: crate::flowcontrol::Apf,
    /// Open watches per user (`--max-watches-per-user`).
    pub watch_budget: Arc<crate::limits::WatchBudget>,
    /// Set to `true` when the server stops accepting: open watch streams
    /// end then.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// Authenticates requests on the secure port (`None`: no credentials
    /// are accepted there).
    pub authenticator: Option<Arc<dyn crate::auth::Authenticator>>,
    /// Requests without credentials run as `system:anonymous` (else 401).
    pub anonymous_auth: bool,
    /// Decides what each user may do.
    pub authorizer: Arc<dyn crate::auth::Authorizer>,
    /// The RBAC policy index, when RBAC is an authorization mode (the
    /// escalation checks and SelfSubjectRulesReview read it).
    pub rbac: Option<Arc<crate::rbac::Rbac>>,
    /// Issues and checks service-account tokens (secure port on).
    pub service_accounts: Option<Arc<crate::auth::serviceaccount::ServiceAccounts>>,
    /// Failed authentications per client address.
    pub auth_failures: crate::auth::ratelimit::FailureLimiter,
    /// The audit policy and log (`None`: auditing off).
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// The Service network: ClusterIP range and NodePort range.
    pub services: crate::allocator::ServiceNetwork,
    /// Event lifetime (`--event-ttl`), through shared etcd leases.
    pub event_ttl: crate::event_ttl::EventLeases,
    /// The etcd members this server talks to (`componentstatuses` probes
    /// each one).
    pub etcd_endpoints: Vec<String>,
    /// The cluster CA (PEM) that in-cluster clients verify this server
    /// with, when the server made its own (published in every namespace
    /// as `kube-root-ca.crt`).
    pub root_ca: Option<String>,
    /// Where this replica is published in the `default/kubernetes`
    /// endpoints (the advertise address and the secure port); `None`: it
    /// is not (no secure port, or `--endpoint-reconciler-type=none`).
    pub advertise: Option<std::net::SocketAddr>,
    /// TTL of this replica's endpoint lease.
    pub endpoint_lease_ttl: Duration,
    /// Period of the allocation repair loops' full passes.
    pub repair_interval: Duration,
    /// This replica's compiled ValidatingAdmissionPolicies and bindings.
    pub policies: crate::admission::policy::Policies,
    /// This replica's compiled admission webhooks.
    pub webhooks: crate::admission::webhooks::Webhooks,
    /// This replica's compiled MutatingAdmissionPolicies and bindings.
    pub mutating_policies: crate::admission::mutating_policy::MutatingPolicies,
    /// The enabled admission plugins, in kube's order.
    pub admission: crate::admission::plugins::Chain,
    /// Quota admission's per-namespace turns and newest quota versions.
    pub quota: crate::admission::plugins::quota::QuotaState,
    /// The client certificate the aggregator proxies with, and the
    /// request-header settings published for extension servers.
    pub proxy_identity: Option<Arc<crate::aggregator::ProxyIdentity>>,
}

impl AppState {
    pub fn new(store: Arc<dyn Storage>, prefix: &str) -> Self {
        Self::with_address(store, prefix, "127.0.0.1:8080")
    }

    /// `address` is what `/api` advertises in serverAddressByClientCIDRs.
    pub fn with_address(store: Arc<dyn Storage>, prefix: &str, address: &str) -> Self {
        let registry = Registry::builtin();
        AppState {
            store,
            registry: registry.clone(),
            prefix: prefix.trim_end_matches('/').to_string(),
            bootstrapped: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            discovery: crate::discovery::Discovery::new(registry).with_server_address(address),
            cache: None,
            metrics: crate::metrics::Metrics::new()
                .map_err(|e| tracing::error!(error = %e, "metrics disabled"))
                .ok()
                .map(Arc::new),
            limits: crate::limits::Limits::default(),
            apf: Default::default(),
            watch_budget: Default::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            authenticator: None,
            anonymous_auth: false,
            authorizer: Arc::new(crate::auth::AlwaysAllow),
            rbac: None,
            service_accounts: None,
            auth_failures: Default::default(),
            audit: None,
            services: Default::default(),
            event_ttl: Default::default(),
            etcd_endpoints: Vec::new(),
            root_ca: None,
            advertise: None,
            endpoint_lease_ttl: Duration::from_secs(15),
            repair_interval: Duration::from_secs(180),
            policies: Default::default(),
            webhooks: Default::default(),
            admission: Default::default(),
            mutating_policies: Default::default(),
            quota: Default::default(),
            proxy_identity: None,
        }
    }

    /// Replaces the default in-flight limits and request timeout.
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Ends open watch streams (cleanly) and marks the server as stopping.
    pub fn stop_streams(&self) {
        self.stopping.send_replace(true);
    }

    /// Serves reads and watches through `cache` (which wraps the etcd store).
    pub fn with_cache(mut self, cache: watchcache::Cacher) -> Self {
        self.store = Arc::new(cache.clone());
        self.cache = Some(cache);
        self
    }

    /// Records the etcd requests of `store` (and of a watch cache over it)
    /// in this state's metrics, and puts request ids on their spans.
    pub fn observe_etcd(&self, store: &watchcache::etcd::EtcdStore) {
        if let Some(m) = &self.metrics {
            let observer = m.etcd_observer(&self.registry, &self.prefix);
            store.telemetry().observe_with(Arc::new(observer));
        }
    }

    /// The etcd key of one object.
    pub fn key(&self, res: &Resource, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if res.namespaced => {
                format!(
                    "{}/{}/{}/{}",
                    self.prefix,
                    crate::storage_format::segment(res),
                    ns,
                    name
                )
            }
            _ => format!(
                "{}/{}/{}",
                self.prefix,
                crate::storage_format::segment(res),
                name
            ),
        }
    }

    /// The EndpointSlices of `namespace` as the cache holds them now (any
    /// recent state: a Service's backends for webhooks and APIServices).
    /// `Err` names why they cannot be read.
    pub async fn endpoint_slices(&self, namespace: &str) -> Result<watchcache::ListResult, String> {
        let res = self
            .registry
            .lookup("discovery.k8s.io", "v1", "endpointslices")
            .ok_or("endpointslices are not served")?;
        let opts = watchcache::ListOptions {
            freshness: apimachinery::read::Freshness::NotOlderThan(0),
            limit: None,
            continue_from: None,
            predicate: Default::default(),
        };
        self.store
            .list(&self.collection_prefix(&res, Some(namespace)), &opts)
            .await
            .map_err(|e| e.to_string())
    }

    /// The etcd key prefix of a collection (all namespaces when `None`).
    pub fn collection_prefix(&self, res: &Resource, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if res.namespaced => {
                format!(
                    "{}/{}/{}/",
                    self.prefix,
                    crate::storage_format::segment(res),
                    ns
                )
            }
            _ => format!("{}/{}/", self.prefix, crate::storage_format::segment(res)),
        }
    }
}

/// A response extension that keeps a response out of gzip (watch streams
/// must reach the client event by event).
#[derive(Debug, Clone, Copy)]
pub struct NoCompression;

#[derive(Clone, Copy)]
struct CompressUnlessStreaming;

impl Predicate for CompressUnlessStreaming {
    fn should_compress<B>(&self, response: &axum::http::Response<B>) -> bool
    where
        B: axum::body::HttpBody,
    {
        response.extensions().get::<NoCompression>().is_none()
            && DefaultPredicate::new().should_compress(response)
    }
}

/// The router of the plain-HTTP port (local development and tests): every
/// request runs as the loopback admin. Tests drive it in-process with
/// `oneshot`.
pub fn router(state: Arc<AppState>) -> Router {
    filtered(state).layer(axum::middleware::from_fn(crate::auth::loopback_identity))
}

/// The router of the secure port: requests are authenticated from their
/// credentials.
pub fn secure_router(state: Arc<AppState>) -> Router {
    filtered(state)
}

/// The routes behind the filter chain (see `auth`): outermost first,
/// request id → metrics → (failed-authentication audit) → authenticate →
/// audit → impersonate → watches per user → priority and fairness →
/// authorize → compression → handler.
///
/// The chain wraps the router as one service, not each route (which
/// `Router::layer` does). Each `from_fn` layer clones the service below it
/// for every request; with a route's box between every two layers that
/// was a box allocation per layer below, per layer: about 45 of them per
/// request. Now a request clones plain structs (BENCHMARKS.md, "The
/// filter chain as one service").
fn filtered(state: Arc<AppState>) -> Router {
    use axum::middleware::{from_fn, from_fn_with_state};
    let chain = tower::ServiceBuilder::new()
        // Outermost: every response, even a 401, 429 or 504, carries Audit-Id.
        .layer(from_fn(crate::telemetry::middleware))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::metrics::instrument,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::audit::audit_failed_authentication,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::auth::authenticate,
        ))
        .layer(from_fn_with_state(Arc::clone(&state), crate::audit::audit))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::auth::impersonate,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::limits::watchers,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::flowcontrol::filter,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            crate::auth::authorize,
        ))
        .layer(CompressionLayer::new().compress_when(CompressUnlessStreaming))
        .service(routes().with_state(state));
    Router::new().fallback_service(chain)
}

fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(crate::health::healthz))
        .route("/healthz/{*check}", get(crate::health::healthz_check))
        .route("/livez", get(crate::health::livez))
        .route("/livez/{*check}", get(crate::health::livez_check))
        .route("/readyz", get(crate::health::readyz))
        .route("/readyz/{*check}", get(crate::health::readyz_check))
        .route("/metrics", get(crate::metrics::serve))
        .route(
            "/debug/api_priority_and_fairness/dump_priority_levels",
            get(crate::flowcontrol::dump_priority_levels),
        )
        .route(
            "/debug/api_priority_and_fairness/dump_queues",
            get(crate::flowcontrol::dump_queues),
        )
        .route(
            "/debug/api_priority_and_fairness/dump_requests",
            get(crate::flowcontrol::dump_requests),
        )
        .route("/openapi/v2", get(crate::openapi::v2))
        .route("/openapi/v3", get(crate::openapi::v3_root))
        .route("/openapi/v3/{*path}", get(crate::openapi::v3_doc))
        .fallback(api)
}

async fn api(State(state): State<Arc<AppState>>, req: Request<Body>) -> Response {
    // A remote APIService's group-version goes to its extension server.
    if let Some(remote) = crate::aggregator::proxy::route(&state, req.uri().path()) {
        return crate::aggregator::proxy::forward(state, remote, req).await;
    }
    crate::handlers::dispatch(state, req).await
}

async fn version() -> Response {
    let body = serde_json::json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": KUBE_MAJOR,
        "minCompatibilityMinor": "34",
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": concat!("rust (apiserver ", env!("CARGO_PKG_VERSION"), ")"),
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    });
    json_response(StatusCode::OK, &body)
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A small JSON response (discovery, version): not for objects, which go
/// through `response`.
pub fn json_response(code: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = (code, bytes).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Waits until etcd answers, for readiness checks.
pub async fn etcd_ok(state: &AppState) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(2), state.store.current_revision()).await,
        Ok(Ok(_))
    )
}

pub fn is_ready_flag(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Acquire)
}

//! The HTTP server: the router, its filter chain, and the non-resource
//! endpoints (/version, health). Resource paths go to `handlers::dispatch`.
//! The top floor with the composition root (`lib.rs`): it may name every
//! module, and none names it.

pub use crate::state::AppState;
use crate::version::{KUBE_MAJOR, KUBE_MINOR};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::CompressionLayer;

#[derive(Clone, Copy)]
struct CompressUnlessStreaming;

impl Predicate for CompressUnlessStreaming {
    fn should_compress<B>(&self, response: &axum::http::Response<B>) -> bool
    where
        B: axum::body::HttpBody,
    {
        response
            .extensions()
            .get::<crate::response::NoCompression>()
            .is_none()
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
/// request id → metrics, in-flight limits and timeout → (failed-
/// authentication audit) → authenticate → audit → impersonate → watches
/// per user → priority and fairness → authorize → compression → handler.
/// Each filter gets the part of the state it reads (the authorizer, the
/// auditor, the watch budget); those that read several go through
/// `filters`.
///
/// The chain wraps the router as one service, not each route (which
/// `Router::layer` does). Each `from_fn` layer clones the service below it
/// for every request; with a route's box between every two layers that
/// was a box allocation per layer below, per layer: about 45 of them per
/// request. Now a request clones plain structs (BENCHMARKS.md, "The
/// filter chain as one service").
fn filtered(state: Arc<AppState>) -> Router {
    use crate::filters;
    use axum::middleware::{from_fn, from_fn_with_state};
    let chain = tower::ServiceBuilder::new()
        // Outermost: every response, even a 401, 429 or 504, carries Audit-Id.
        .layer(from_fn(crate::telemetry::middleware))
        .layer(from_fn_with_state(Arc::clone(&state), filters::instrument))
        .layer(from_fn_with_state(
            state.audit.clone(),
            crate::audit::audit_failed_authentication,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            filters::authenticate,
        ))
        .layer(from_fn_with_state(state.audit.clone(), crate::audit::audit))
        .layer(from_fn_with_state(
            Arc::clone(&state.authorizer),
            crate::auth::impersonate::impersonate,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state.watch_budget),
            crate::limits::watchers,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state),
            filters::priority_and_fairness,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&state.authorizer),
            crate::auth::authorize,
        ))
        .layer(CompressionLayer::new().compress_when(CompressUnlessStreaming))
        .service(routes(&state).with_state(state));
    Router::new().fallback_service(chain)
}

fn routes(state: &AppState) -> Router<Arc<AppState>> {
    let apf = &state.apf;
    let openapi = Arc::clone(&state.openapi);
    Router::new()
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(crate::health::healthz))
        .route("/healthz/{*check}", get(crate::health::healthz_check))
        .route("/livez", get(crate::health::livez))
        .route("/livez/{*check}", get(crate::health::livez_check))
        .route("/readyz", get(crate::health::readyz))
        .route("/readyz/{*check}", get(crate::health::readyz_check))
        .route("/metrics", get(crate::filters::metrics))
        .route("/metrics/slis", get(crate::filters::metrics_slis))
        .route(
            "/debug/api_priority_and_fairness/dump_priority_levels",
            get(crate::flowcontrol::dump_priority_levels).with_state(Arc::clone(apf)),
        )
        .route(
            "/debug/api_priority_and_fairness/dump_queues",
            get(crate::flowcontrol::dump_queues).with_state(Arc::clone(apf)),
        )
        .route(
            "/debug/api_priority_and_fairness/dump_requests",
            get(crate::flowcontrol::dump_requests).with_state(Arc::clone(apf)),
        )
        .route(
            "/openapi/v2",
            get(crate::openapi::v2).with_state(Arc::clone(&openapi)),
        )
        .route(
            "/openapi/v3",
            get(crate::openapi::v3_root).with_state(Arc::clone(&openapi)),
        )
        .route(
            "/openapi/v3/{*path}",
            get(crate::openapi::v3_doc).with_state(openapi),
        )
        .fallback(api)
}

async fn api(State(state): State<Arc<AppState>>, req: Request<Body>) -> Response {
    // A remote APIService's group-version goes to its extension server.
    if let Some(remote) =
        crate::aggregator::proxy::route(state.discovery.remotes(), req.uri().path())
    {
        // Boxed: the proxy's HTTP client future is large, and inline it
        // would set the size of every request's future.
        return Box::pin(crate::aggregator::proxy::forward(&state, remote, req)).await;
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

//! The router's glue to the filters that read more than one part of the
//! server's state, and to `/metrics`, which reads the whole of it. The
//! filters themselves (`auth`, `audit`, `limits`, `flowcontrol`) sit below
//! the state and take what they use; the router hands a filter that needs
//! only one part that part (`server::filtered`), and goes through here for
//! the others.
//!
//! Top floor, beside `server.rs`, the only module that names it.

use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Classifies, admits (in-flight limits), times out and records every
/// request: `limits::instrument` with the registry, the metrics, the
/// limits and the stopping signal.
pub async fn instrument(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    crate::limits::instrument(
        &state.registry,
        state.metrics.as_deref(),
        &state.limits,
        &state.stopping,
        req,
        next,
    )
    .await
}

/// `auth::authenticate` with the configured authenticator, the anonymous
/// setting and the failure limiter.
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    crate::auth::authenticate(
        state.authenticator.as_deref(),
        state.anonymous_auth,
        &state.auth_failures,
        state.metrics.as_deref(),
        req,
        next,
    )
    .await
}

/// `flowcontrol::filter` with the APF state and the request timeout.
pub async fn priority_and_fairness(
    State(state): State<Arc<AppState>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    crate::flowcontrol::filter(&state.apf, state.limits.request_timeout, req, next).await
}

/// `GET /metrics`: brings the scrape-time metrics up to date (watch cache,
/// stored objects, storage sizes, audit log) and renders them all.
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let Some(metrics) = &state.metrics else {
        return (StatusCode::NOT_FOUND, "metrics are not available\n").into_response();
    };
    if let Some(cache) = &state.cache {
        metrics.record_cache(&cache.stats());
        let (counts, sizes) = tokio::join!(
            state.backend.stored_object_metrics(),
            state.backend.storage_sizes()
        );
        metrics.record_stored_objects(counts);
        metrics.record_storage_sizes(sizes);
    }
    if let Some(audit) = &state.audit {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &audit.sink.counters;
        metrics.record_audit(
            c.events.load(Relaxed),
            c.dropped.load(Relaxed),
            c.errors.load(Relaxed),
        );
    }
    exposition(metrics.render())
}

/// `GET /metrics/slis`: the health checks' results (kube's
/// `kubernetes_healthcheck`, `kubernetes_healthchecks_total`), recorded
/// each time `/livez`, `/readyz` or `/healthz` runs them.
pub async fn metrics_slis(State(state): State<Arc<AppState>>) -> Response {
    match &state.metrics {
        Some(metrics) => exposition(metrics.render_slis()),
        None => (StatusCode::NOT_FOUND, "metrics are not available\n").into_response(),
    }
}

fn exposition(text: String) -> Response {
    let mut r = (StatusCode::OK, text).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

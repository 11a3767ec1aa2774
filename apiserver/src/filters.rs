//! The router's glue to the filters that read more than one part of the
//! server's state. The filters themselves (`auth`, `audit`, `flowcontrol`)
//! sit below the state and take what they use; the router hands a filter
//! that needs only one part that part (`server::filtered`), and goes
//! through here for the others.
//!
//! Top floor, beside `server.rs`, the only module that names it.

use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

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

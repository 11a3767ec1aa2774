//! The filter chain in front of the handlers, in kube-apiserver's order:
//! authenticate → audit → impersonate → authorize → (admission in the
//! handlers) → handler. `server::router` composes the layers; each one is a
//! middleware here or in its own module.
//!
//! - The plain-HTTP port (local development and tests) marks each request
//!   with the loopback admin identity before `authenticate` runs, so it
//!   needs no credentials.
//! - On the secure port the configured [`Authenticator`] decides; the
//!   authenticated user travels on in the request's extensions as
//!   [`Identity`].
//! - `authorize` resolves the request's attributes
//!   ([`apimachinery::auth::request_info`]) and asks the configured
//!   [`Authorizer`]; members of `system:masters` are always allowed, as
//!   kube-apiserver's privileged-group authorizer allows them.
//!
//! Floor: the filters, below the server's state. Each middleware here takes
//! what it uses (the authenticator, the authorizer, the failure limiter),
//! never `AppState`; `filters.rs` and `server.rs` hand them over. Nothing
//! here imports `state`, `server`, `handlers`, `admission`, the
//! aggregator or `audit` (the layers report to the audit layer through
//! `audit::slot`, which imports nothing of the chain).

pub mod der;
pub mod impersonate;
pub mod jwt;
pub mod pki;
pub mod ratelimit;
pub mod secure;
pub mod serviceaccount;
pub mod tls;
pub mod token_file;

use crate::audit::slot::AuditSlot;
use crate::error::status_response;
use apimachinery::auth::{self as info, RequestInfo, UserInfo, SYSTEM_MASTERS};
use apimachinery::Status;
use async_trait::async_trait;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The user a request runs as (after impersonation, when there is one).
#[derive(Debug, Clone)]
pub struct Identity(pub Arc<UserInfo>);

/// The request's attributes, resolved once per request (audit and
/// authorize both read them).
#[derive(Debug, Clone)]
struct Resolved(Arc<Result<Arc<RequestInfo>, String>>);

/// The attributes of `req` (kube's RequestInfo), or why its path names no
/// kind; computed on first use and kept in the request's extensions.
pub fn resolve(req: &mut Request<Body>) -> Arc<Result<Arc<RequestInfo>, String>> {
    if let Some(Resolved(r)) = req.extensions().get::<Resolved>() {
        return Arc::clone(r);
    }
    let r = Arc::new(
        info::request_info(req.method().as_str(), req.uri().path(), req.uri().query())
            .map(Arc::new),
    );
    req.extensions_mut().insert(Resolved(Arc::clone(&r)));
    r
}

/// What an authenticator made of a request's credentials.
#[derive(Debug)]
pub enum Authentication {
    /// The credentials name this user.
    User(UserInfo),
    /// The request carries no credentials this authenticator reads.
    NoCredentials,
    /// Credentials were present and are not valid (why, for the log only:
    /// clients see a bare 401).
    Invalid(String),
}

/// Turns a request's credentials into a user.
#[async_trait]
pub trait Authenticator: Send + Sync {
    async fn authenticate(&self, request: &Parts) -> Authentication;
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(request: &Parts) -> Option<&str> {
    let value = request
        .headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Several authenticators as one, as kube-apiserver unions them: the first
/// that names a user wins; otherwise a rejected credential is a 401, and
/// no credentials at all is `NoCredentials`.
pub struct Union(pub Vec<Arc<dyn Authenticator>>);

#[async_trait]
impl Authenticator for Union {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let mut invalid: Vec<String> = Vec::new();
        for a in &self.0 {
            match a.authenticate(request).await {
                Authentication::User(u) => return Authentication::User(u),
                Authentication::Invalid(why) => invalid.push(why),
                Authentication::NoCredentials => {}
            }
        }
        if invalid.is_empty() {
            Authentication::NoCredentials
        } else {
            Authentication::Invalid(invalid.join("; "))
        }
    }
}

/// Paths an anonymous request may reach when anonymous authentication is
/// on: health, version and discovery (every other path is a 401).
pub fn anonymous_path(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.first().copied().unwrap_or("") {
        "healthz" | "livez" | "readyz" | "openapi" => true,
        "version" => segs.len() == 1,
        "api" => segs.len() <= 2,
        "apis" => segs.len() <= 3,
        _ => false,
    }
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Explicitly denied, with the reason for the 403 message.
    Deny(String),
    /// This authorizer has nothing to say (denied unless another allows);
    /// the reason, if any, ends the 403 message.
    NoOpinion(String),
}

/// Decides whether a user may do what a request asks.
#[async_trait]
pub trait Authorizer: Send + Sync {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision;
}

/// `--authorization-mode=AlwaysAllow`.
pub struct AlwaysAllow;

#[async_trait]
impl Authorizer for AlwaysAllow {
    async fn authorize(&self, _: &UserInfo, _: &RequestInfo) -> Decision {
        Decision::Allow
    }
}

/// Authorization as the chain runs it: the privileged group first, then
/// the configured authorizer.
pub async fn decide(
    authorizer: &dyn Authorizer,
    user: &UserInfo,
    request: &RequestInfo,
) -> Decision {
    if user.in_group(SYSTEM_MASTERS) {
        return Decision::Allow;
    }
    authorizer.authorize(user, request).await
}

/// Outermost layer of the plain-HTTP router: every request there runs as
/// the loopback admin.
pub async fn loopback_identity(mut req: Request<Body>, next: Next) -> Response {
    // One user for every request (it was five allocations a request).
    static ADMIN: std::sync::LazyLock<Arc<UserInfo>> =
        std::sync::LazyLock::new(|| Arc::new(UserInfo::loopback_admin()));
    req.extensions_mut().insert(Identity(Arc::clone(&ADMIN)));
    next.run(req).await
}

/// Authentication: keeps an identity the listener set, otherwise asks the
/// configured authenticator. No credentials: the anonymous user when
/// anonymous authentication is on, else 401; bad credentials: 401.
/// `authenticator` is `None` when no credentials are accepted (the secure
/// port off); `failures` limits failed attempts per client address.
pub async fn authenticate(
    authenticator: Option<&dyn Authenticator>,
    anonymous_auth: bool,
    failures: &ratelimit::FailureLimiter,
    metrics: Option<&crate::metrics::Metrics>,
    req: Request<Body>,
    next: Next,
) -> Response {
    if req.extensions().get::<Identity>().is_some() {
        return next.run(req).await;
    }
    let started = std::time::Instant::now();
    let record = |user: Option<&str>| {
        if let Some(m) = metrics {
            m.authentication(user, started.elapsed());
        }
    };
    let (mut parts, body) = req.into_parts();
    let client = parts.extensions.get::<tls::ClientAddr>().map(|a| a.0.ip());
    let presents_credentials = parts
        .headers
        .contains_key(axum::http::header::AUTHORIZATION)
        || parts.extensions.get::<tls::PeerCertificates>().is_some();
    if let (Some(ip), true) = (client, presents_credentials) {
        if let Some(wait) = failures.blocked(ip, std::time::Instant::now()) {
            return status_response(&Status::too_many_requests(
                "too many failed authentication attempts from this address, please try again later",
                wait,
            ));
        }
    }
    let outcome = match authenticator {
        Some(a) => a.authenticate(&parts).await,
        None => Authentication::NoCredentials,
    };
    let user = match outcome {
        Authentication::User(user) => user.with_authenticated_group(),
        Authentication::NoCredentials if anonymous_auth && anonymous_path(parts.uri.path()) => {
            UserInfo::anonymous()
        }
        Authentication::NoCredentials => {
            record(None);
            return status_response(&Status::unauthorized());
        }
        Authentication::Invalid(why) => {
            record(None);
            tracing::info!(reason = %why, path = parts.uri.path(), "authentication failed");
            if let Some(ip) = client {
                failures.failed(ip, std::time::Instant::now());
            }
            return status_response(&Status::unauthorized());
        }
    };
    record(Some(&user.username));
    parts.extensions.insert(Identity(Arc::new(user)));
    next.run(Request::from_parts(parts, body)).await
}

/// Authorization: 403 unless the authorizer allows the request.
pub async fn authorize(
    State(authorizer): State<Arc<dyn Authorizer>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let Some(Identity(user)) = req.extensions().get::<Identity>().cloned() else {
        // The chain always authenticates first; a request without an
        // identity here is a wiring bug, refused rather than served.
        tracing::error!("request reached authorization without an identity");
        return status_response(&Status::unauthorized());
    };
    let request = match &*resolve(&mut req) {
        Ok(r) => Arc::clone(r),
        Err(why) => return status_response(&Status::bad_request(why.clone())),
    };
    let decision = decide(&*authorizer, &user, &request).await;
    if let Some(slot) = req.extensions().get::<AuditSlot>() {
        match &decision {
            Decision::Allow => slot.record_decision(true, ""),
            Decision::Deny(why) | Decision::NoOpinion(why) => slot.record_decision(false, why),
        }
    }
    match decision {
        Decision::Allow => next.run(req).await,
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            status_response(&info::forbidden(&user, &request, &reason))
        }
    }
}

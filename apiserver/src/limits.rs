//! Overload protection as kube-apiserver's max-in-flight and timeout
//! filters do it: at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests at once (long-running
//! requests such as watches are not counted), the excess answered 429 with
//! `Retry-After: 1` at once rather than queued (so memory stays bounded);
//! and non-long-running requests answered 504 after `--request-timeout`.
//! With API Priority and Fairness on (the default), `flowcontrol` takes
//! the place of the two budgets (they are then unlimited here).
//!
//! Also the optional bound on open watches per user
//! (`--max-watches-per-user`, none by default as in kube): when set, one
//! more is answered 429 at once, so a client that leaks watches cannot
//! hold the server's memory.
//!
//! [`instrument`], the outermost filter after the request id, applies the
//! budgets and the timeout and records every request in the metrics.
//!
//! Floor: the filters, below the server's state: the filters take the
//! budgets, the metrics and the registry they use, never `AppState`
//! (`filters.rs` hands them over); `metrics` is below, and imports nothing
//! of this module.

use crate::error::status_response;
use crate::metrics::{Metrics, RequestInfo};
use crate::registry::Registry;
use apimachinery::status::Status;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use prometheus::IntGauge;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which in-flight budget a request draws on (defined with the metrics,
/// whose `request_kind` label it is).
pub use crate::metrics::RequestKind;

/// kube-apiserver's message for a request over the in-flight limit.
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";
/// kube-apiserver's message for a request past its timeout.
pub const TIMED_OUT: &str =
    "Timeout: request did not complete within requested timeout - context deadline exceeded";

/// The in-flight budgets and the request timeout of one server.
#[derive(Debug)]
pub struct Limits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    pub request_timeout: Duration,
}

impl Default for Limits {
    /// kube-apiserver's defaults: 400 read-only, 200 mutating, 60 s.
    fn default() -> Self {
        Limits::new(400, 200, Duration::from_secs(60))
    }
}

impl Limits {
    /// A limit of `0` means unlimited, as in kube-apiserver.
    pub fn new(read_only: usize, mutating: usize, request_timeout: Duration) -> Self {
        let budget = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Limits {
            read_only: budget(read_only),
            mutating: budget(mutating),
            request_timeout,
        }
    }

    /// A slot for one request of `kind`, held until dropped; `None` when the
    /// budget is spent. Unlimited budgets hand out an empty slot.
    pub fn try_acquire(&self, kind: RequestKind) -> Option<Slot> {
        let sem = match kind {
            RequestKind::ReadOnly => &self.read_only,
            RequestKind::Mutating => &self.mutating,
        };
        match sem {
            None => Some(Slot(None)),
            Some(sem) => Arc::clone(sem)
                .try_acquire_owned()
                .ok()
                .map(|p| Slot(Some(p))),
        }
    }
}

/// One request's place in an in-flight budget.
#[derive(Debug)]
pub struct Slot(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// The 429 answer, as a Status with `Retry-After: 1`.
pub fn too_many_requests() -> Response {
    status_response(&Status::too_many_requests(TOO_MANY_REQUESTS, 1))
}

/// The 504 answer of a request past its timeout.
pub fn timed_out() -> Response {
    status_response(&Status::timeout(TIMED_OUT))
}

/// Open watches per user, at most `max` each (`0`: no bound).
#[derive(Debug, Default)]
pub struct WatchBudget {
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

impl WatchBudget {
    pub fn new(max: usize) -> Self {
        WatchBudget {
            max,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more watch of `user`, held until dropped.
    pub fn try_open(self: &Arc<Self>, user: &str) -> Option<WatchSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(user.to_string()).or_insert(0);
        if self.max > 0 && *n >= self.max {
            return None;
        }
        *n += 1;
        Some(WatchSlot {
            budget: Arc::clone(self),
            user: user.to_string(),
        })
    }

    pub fn open(&self, user: &str) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(user).copied().unwrap_or(0)
    }
}

/// One open watch of a user.
#[derive(Debug)]
pub struct WatchSlot {
    budget: Arc<WatchBudget>,
    user: String,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.budget.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

/// The filter bounding open watches per user (after authentication and
/// impersonation: the user a watch runs as). The slot lives as long as
/// the response body, i.e. the watch stream. Without a bound (the
/// default) nothing is counted.
pub async fn watchers(
    State(budget): State<Arc<WatchBudget>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    if budget.max == 0 {
        return next.run(req).await;
    }
    let watching = matches!(&*crate::auth::resolve(&mut req), Ok(ri) if ri.verb == "watch");
    let user = req
        .extensions()
        .get::<crate::auth::Identity>()
        .map(|i| i.0.username.clone());
    let (true, Some(user)) = (watching, user) else {
        return next.run(req).await;
    };
    let Some(slot) = budget.try_open(&user) else {
        let message = format!(
            "Too many watches: user {user:?} has {} open, the most allowed (--max-watches-per-user), please try again later.",
            budget.max
        );
        return status_response(&Status::too_many_requests(message, 1));
    };
    let (parts, body) = next.run(req).await.into_parts();
    let stream = body.into_data_stream().map(move |frame| {
        let _held = &slot;
        frame
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Lent to a request (an extension) that runs as its own task: resolves
/// when the client is gone, that is when the connection's future that
/// waited for the answer was dropped (the client closed its connection or
/// reset its stream), or when the request timed out. Go's server cancels
/// the request's context then; the few places that wait for the client's
/// sake (a request queued by flow control) give up.
#[derive(Clone, Debug)]
pub struct ClientGone(tokio::sync::watch::Receiver<()>);

impl ClientGone {
    /// A pair: the sender (held by whoever waits for the answer) and the
    /// receiver for the request.
    pub fn pair() -> (tokio::sync::watch::Sender<()>, Self) {
        let (tx, rx) = tokio::sync::watch::channel(());
        (tx, ClientGone(rx))
    }

    /// Resolves once the sender is dropped.
    pub async fn wait(mut self) {
        // Nothing is ever sent: `changed` ends only when the sender goes.
        while self.0.changed().await.is_ok() {}
    }
}

/// The middleware around the whole router: classify, admit (in-flight
/// limits), run under the request timeout, record. Long-running requests
/// (watches) skip the limits and the timeout; their streams end when the
/// server shuts down. `resources` names the kinds the labels may carry;
/// `stopping` turns `true` when the server stops (long-running responses
/// end then).
pub async fn instrument(
    resources: &Registry,
    metrics: Option<&Metrics>,
    limits: &Limits,
    stopping: &tokio::sync::watch::Sender<bool>,
    mut req: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let resolved = crate::auth::resolve(&mut req);
    let route = resolved
        .as_ref()
        .as_ref()
        .ok()
        .and_then(|ri| ri.route.as_ref());
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let info = RequestInfo::classify(
        resources,
        req.method(),
        route,
        req.uri().query(),
        content_type,
    );
    let sli = crate::metrics::SliTracker::default();
    let response = if info.long_running {
        let guard = GaugeGuard::new(metrics.map(|m| m.longrunning(&info)));
        let response = sli.scope(next.run(req)).await;
        let stopping = stopping.subscribe();
        end_with(response, guard, stopping)
    } else {
        match limits.try_acquire(info.kind) {
            None => {
                if let Some(m) = metrics {
                    m.terminated(&info, StatusCode::TOO_MANY_REQUESTS);
                }
                too_many_requests()
            }
            Some(slot) => {
                let guard = GaugeGuard::new(metrics.map(|m| m.inflight(info.kind)));
                // Dropped with this future (the client went away) or when
                // it ends (answered, or timed out).
                let (_client, gone) = ClientGone::pair();
                req.extensions_mut().insert(gone);
                // The handler runs on as its own task past the timeout (as
                // kube's timeout filter lets it), still holding its slot,
                // so a timed-out request keeps counting against the limit
                // until it really ends.
                let handler = tokio::spawn(crate::telemetry::in_request(sli.scope(async move {
                    let r = next.run(req).await;
                    drop((slot, guard));
                    r
                })));
                match tokio::time::timeout(limits.request_timeout, handler).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "request handler failed");
                        status_response(&Status::internal(
                            "the request handler failed; see the server log",
                        ))
                    }
                    Err(_) => {
                        if let Some(m) = metrics {
                            m.terminated(&info, StatusCode::GATEWAY_TIMEOUT);
                        }
                        timed_out()
                    }
                }
            }
        }
    };
    let size = response.body().size_hint().exact();
    if let Some(m) = metrics {
        m.observe(
            &info,
            response.status(),
            start.elapsed(),
            sli.excluded(),
            size,
        );
    }
    response
}

/// Ties `guard` to the response body (released when the stream ends or the
/// client goes away) and ends the body cleanly once the server stops.
fn end_with(
    response: Response,
    guard: GaugeGuard,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> Response {
    let (parts, body) = response.into_parts();
    let stop = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    let stream = body
        .into_data_stream()
        .take_until(Box::pin(stop))
        .map(move |frame| {
            let _held = &guard;
            frame
        });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Decrements a gauge when dropped (the request, or its stream, ended).
struct GaugeGuard(Option<IntGauge>);

impl GaugeGuard {
    fn new(g: Option<IntGauge>) -> Self {
        if let Some(g) = &g {
            g.inc();
        }
        GaugeGuard(g)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        let l = Limits::new(1, 0, Duration::from_secs(1));
        let a = l.try_acquire(RequestKind::ReadOnly);
        assert!(a.is_some());
        assert!(l.try_acquire(RequestKind::ReadOnly).is_none());
        drop(a);
        assert!(l.try_acquire(RequestKind::ReadOnly).is_some());
        // 0 = unlimited.
        let held: Vec<_> = (0..1000)
            .filter_map(|_| l.try_acquire(RequestKind::Mutating))
            .collect();
        assert_eq!(held.len(), 1000);
    }

    #[test]
    fn watch_budget_per_user() {
        let b = Arc::new(WatchBudget::new(2));
        let a1 = b.try_open("a");
        let a2 = b.try_open("a");
        assert!(a1.is_some() && a2.is_some());
        assert!(b.try_open("a").is_none());
        assert!(b.try_open("b").is_some());
        drop(a1);
        assert_eq!(b.open("a"), 1);
        assert!(b.try_open("a").is_some());
        drop(a2);
        // 0: unbounded.
        let free = Arc::new(WatchBudget::new(0));
        let held: Vec<_> = (0..100).filter_map(|_| free.try_open("x")).collect();
        assert_eq!(held.len(), 100);
    }

    #[test]
    fn answers() {
        let r = too_many_requests();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(r.headers()["retry-after"], "1");
        assert_eq!(timed_out().status().as_u16(), 504);
    }
}

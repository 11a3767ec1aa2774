//! Overload protection as kube-apiserver's max-in-flight and timeout
//! filters do it: at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests at once (long-running
//! requests such as watches are not counted), the excess answered 429 with
//! `Retry-After: 1` at once rather than queued (so memory stays bounded);
//! and non-long-running requests answered 504 after `--request-timeout`.

use crate::error::status_response;
use apimachinery::status::Status;
use axum::response::Response;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// kube-apiserver's message for a request over the in-flight limit.
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";
/// kube-apiserver's message for a request past its timeout.
pub const TIMED_OUT: &str =
    "Timeout: request did not complete within requested timeout - context deadline exceeded";

/// Which in-flight budget a request draws on (kube's `request_kind` label).
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
    fn answers() {
        let r = too_many_requests();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(r.headers()["retry-after"], "1");
        assert_eq!(timed_out().status().as_u16(), 504);
    }
}

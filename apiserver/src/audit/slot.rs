//! The audit layer's slot in a request: the layers after it (authorize,
//! impersonation) report through it what the request's events record (the
//! authorizer's decision, the impersonated user). Its own module, importing
//! nothing of the chain, so that `auth` can report to `audit` while `audit`
//! reads `auth`'s identity without a circle.

use apimachinery::auth::UserInfo;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// Filled in by the layers after `audit` (authorize, impersonation) for the
/// request's events.
#[derive(Debug, Clone, Default)]
pub struct AuditSlot(Arc<Mutex<SlotData>>);

#[derive(Debug, Default)]
pub(super) struct SlotData {
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) impersonated_user: Option<UserInfo>,
}

impl AuditSlot {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut SlotData) -> T) -> T {
        let mut data = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut data)
    }

    pub fn annotate(&self, key: &str, value: &str) {
        self.with(|d| d.annotations.insert(key.to_string(), value.to_string()));
    }

    /// The authorizer's answer: `allow` or `forbid`, and why.
    pub fn record_decision(&self, allowed: bool, reason: &str) {
        self.annotate(
            DECISION_ANNOTATION,
            if allowed { "allow" } else { "forbid" },
        );
        self.annotate(REASON_ANNOTATION, reason);
    }

    pub fn set_impersonated_user(&self, user: UserInfo) {
        self.with(|d| d.impersonated_user = Some(user));
    }
}

//! The `authorizer` variable of admission policies: CEL asks, this
//! server's authorizer answers.
//!
//! Deciding is asynchronous here and CEL evaluation is not, so an
//! evaluation runs against an [`Oracle`] of the answers known so far; a
//! check without one fails that evaluation as pending and is recorded,
//! [`Oracle::resolve`] decides the recorded checks, and the caller
//! evaluates again (at most [`ROUNDS`] times: each round answers every
//! check the previous one reached).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apimachinery::auth::{RequestInfo, UserInfo};
use k8s_cel::{AuthzCheck, AuthzDecision, AuthzOracle};

use super::attributes::Attributes;
use crate::auth::Authorizer;

/// Evaluations of one expression set before a pending check is an error.
pub const ROUNDS: usize = 4;

#[derive(Default)]
pub struct Oracle {
    known: Mutex<HashMap<AuthzCheck, AuthzDecision>>,
    pending: Mutex<Vec<AuthzCheck>>,
}

impl AuthzOracle for Oracle {
    fn decide(&self, check: &AuthzCheck) -> Option<AuthzDecision> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match known.get(check) {
            Some(d) => Some(d.clone()),
            None => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(check.clone());
                None
            }
        }
    }
}

impl Oracle {
    /// Decides the checks the last evaluation could not answer, as `user`
    /// (or the service account a check names), by `authorizer`; `false`
    /// when none were pending (the evaluation's result stands).
    pub async fn resolve(&self, authorizer: &dyn Authorizer, user: &UserInfo) -> bool {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if pending.is_empty() {
            return false;
        }
        for check in pending {
            let subject = match &check.service_account {
                Some((ns, name)) => UserInfo::new(
                    format!("system:serviceaccount:{ns}:{name}"),
                    vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{ns}"),
                        "system:authenticated".into(),
                    ],
                ),
                None => user.clone(),
            };
            let request = match &check.path {
                Some(path) => RequestInfo {
                    resource_request: false,
                    path: path.clone(),
                    verb: check.verb.clone(),
                    ..Default::default()
                },
                None => RequestInfo {
                    resource_request: true,
                    verb: check.verb.clone(),
                    api_group: check.group.clone(),
                    api_version: "*".into(),
                    namespace: check.namespace.clone(),
                    resource: check.resource.clone(),
                    subresource: check.subresource.clone(),
                    name: check.name.clone(),
                    label_selector: check.label_selector.clone(),
                    field_selector: check.field_selector.clone(),
                    ..Default::default()
                },
            };
            let decision = match crate::auth::decide(authorizer, &subject, &request).await {
                crate::auth::Decision::Allow => AuthzDecision::Allowed(String::new()),
                crate::auth::Decision::Deny(r) | crate::auth::Decision::NoOpinion(r) => {
                    AuthzDecision::Denied(r)
                }
            };
            self.known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(check, decision);
        }
        true
    }
}

/// The `authorizer` variable for a request, answered by `oracle`.
pub fn variable(oracle: &Arc<Oracle>, a: &Attributes<'_>) -> k8s_cel::Value {
    let request = AuthzCheck {
        group: a.res.group.to_string(),
        resource: a.res.plural.to_string(),
        subresource: a.subresource.to_string(),
        namespace: a.namespace.unwrap_or("").to_string(),
        name: a.name.to_string(),
        ..AuthzCheck::default()
    };
    let oracle: Arc<dyn AuthzOracle> = Arc::clone(oracle) as Arc<dyn AuthzOracle>;
    k8s_cel::authorizer(oracle, request)
}

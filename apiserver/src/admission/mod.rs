//! Validating admission, run in the write path after validation and before
//! storage (see ARCHITECTURE.md): kube's built-in plugins (each decides
//! from the request's resource whether it applies), then
//! ValidatingAdmissionPolicies ([`policy`]). Webhooks and mutating
//! admission (issue 15) will join them here.

pub mod policy;
pub mod webhooks;

use apimachinery::auth::{RequestInfo, UserInfo};
use apimachinery::status::StatusCause;
use apimachinery::Status;
use serde_json::Value;

use crate::controllers::{Controller, Next, Source};
use crate::error::Result;
use crate::handlers::Scope;
use crate::registry::Resource;
use crate::server::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use std::sync::Arc;
use watchcache::ListOptions;

/// A controller that keeps a replica's compiled admission configuration:
/// it follows two `admissionregistration.k8s.io/v1` collections and, on any
/// change, lists both and hands them to `install`. Every replica runs it
/// (not leader-gated: each one enforces). The lists are consistent reads:
/// the event that woke it may come from a watch ahead of the cache (served
/// by etcd while the cache fills).
pub(crate) fn config_controller(
    state: &AppState,
    name: &'static str,
    plurals: [&str; 2],
    install: fn(&AppState, &[Value], &[Value]),
) -> Option<Controller> {
    let mut prefixes = Vec::with_capacity(2);
    for plural in plurals {
        let res = state
            .registry
            .lookup("admissionregistration.k8s.io", "v1", plural)?;
        prefixes.push(state.collection_prefix(res, None));
    }
    let sources = prefixes
        .iter()
        .map(|prefix| Source {
            prefix: prefix.clone(),
            key_of: |_| Some("configuration".into()),
        })
        .collect();
    let prefixes = Arc::new(prefixes);
    Some(Controller {
        name,
        feed: None,
        sources,
        reconcile: Arc::new(move |state, _| {
            let prefixes = Arc::clone(&prefixes);
            async move {
                let opts = ListOptions {
                    freshness: Freshness::MostRecent,
                    limit: None,
                    continue_from: None,
                    predicate: Default::default(),
                };
                let mut lists = Vec::with_capacity(2);
                for prefix in prefixes.iter() {
                    let listed = state
                        .store
                        .list(prefix, &opts)
                        .await
                        .map_err(|e| e.to_string())?;
                    lists.push(
                        listed
                            .items
                            .iter()
                            .map(|o| (*o.value).clone())
                            .collect::<Vec<Value>>(),
                    );
                }
                install(&state, &lists[0], &lists[1]);
                Ok(Next::Done)
            }
            .boxed()
        }),
        workers: 1,
        capacity: 4,
        backoff: crate::controllers::queue::Backoff::default(),
        resync: None,
    })
}

/// What admission sees of a request (kube's `admission.Attributes`).
#[derive(Clone, Copy)]
pub struct Attributes<'a> {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'static str,
    pub res: &'static Resource,
    /// `""` for the resource itself.
    pub subresource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// The object as it would be stored (`None` for a delete).
    pub object: Option<&'a Value>,
    /// The stored object (`None` for a create).
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

impl<'a> Attributes<'a> {
    /// The attributes of a write through `scope`.
    pub fn of(
        scope: &'a Scope,
        operation: &'static str,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
        dry_run: bool,
    ) -> Attributes<'a> {
        let name = scope
            .name
            .as_deref()
            .or_else(|| object.and_then(crate::object::name))
            .unwrap_or("");
        Attributes {
            operation,
            res: scope.res,
            subresource: scope.subresource_name().unwrap_or(""),
            namespace: scope.namespace.as_deref(),
            name,
            object,
            old,
            user: &scope.user,
            dry_run,
        }
    }
}

/// One validating decision against a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Refuse, with this message and Status reason.
    Deny { message: String, reason: String },
    /// Allow, with this warning.
    Warn(String),
}

/// kube's `reasonToCode` for policy denials.
fn reason_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// Runs the validating admission of this server on a write: the
/// policies, then the validating webhooks. A policy's denial fails it with
/// kube's Status (`admission.NewForbidden`'s message, the policy's reason
/// and code, the denial as a cause); warnings are added to the response.
pub async fn validating(scope: &Scope, a: &Attributes<'_>) -> Result<()> {
    policies(scope, a).await?;
    webhooks::validating(scope, a).await
}

/// Runs the mutating admission of this server on the object of a create
/// or update, before it is validated: the mutating webhooks (nothing is
/// copied when there are none).
pub async fn mutating(
    scope: &Scope,
    operation: &'static str,
    old: Option<&Value>,
    dry_run: bool,
    obj: &mut Value,
) -> Result<()> {
    if !scope.state.webhooks.has_mutating() {
        return Ok(());
    }
    // The attributes hold the object as it came; the webhooks change `obj`.
    let seen = obj.clone();
    let a = Attributes::of(scope, operation, Some(&seen), old, dry_run);
    webhooks::mutating(scope, &a, obj).await
}

async fn policies(scope: &Scope, a: &Attributes<'_>) -> Result<()> {
    let decisions = policy::validate(&scope.state, a).await;
    let mut denial = None;
    for d in decisions {
        match d {
            Decision::Warn(w) => scope.warn(w),
            Decision::Deny { message, reason } => {
                denial.get_or_insert((message, reason));
            }
        }
    }
    let Some((message, reason)) = denial else {
        return Ok(());
    };
    let gr = a.res.group_resource();
    let name = if a.name.is_empty() {
        a.object
            .and_then(|o| crate::object::meta_str(o, "generateName"))
            .filter(|g| !g.is_empty())
            .unwrap_or("Unknown")
    } else {
        a.name
    };
    let mut s = Status::forbidden(format!("{gr} {name:?} is forbidden: {message}")).with_details(
        name,
        a.res.group,
        a.res.plural,
    );
    s.reason = reason.clone();
    s.code = reason_code(&reason);
    if let Some(d) = s.details.as_mut() {
        d.causes.push(StatusCause {
            reason: String::new(),
            message,
            field: String::new(),
        });
    }
    Err(s.into())
}

/// kube's `CertificateApproval`: approving or denying a
/// CertificateSigningRequest takes the `approve` verb on its signer
/// (`signers` in `certificates.k8s.io`, named by the signerName or by
/// `<domain>/*`).
pub async fn certificate_approval(scope: &Scope, csr: &Value) -> Result<()> {
    if scope.res.group != "certificates.k8s.io"
        || scope.res.plural != "certificatesigningrequests"
        || scope.subresource_name() != Some("approval")
    {
        return Ok(());
    }
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut names = vec![signer.to_string()];
    if let Some((domain, _)) = signer.split_once('/') {
        names.push(format!("{domain}/*"));
    }
    for name in names {
        let request = RequestInfo {
            resource_request: true,
            verb: "approve".into(),
            api_group: "certificates.k8s.io".into(),
            api_version: "*".into(),
            resource: "signers".into(),
            name,
            ..Default::default()
        };
        if crate::auth::decide(&scope.state, &scope.user, &request).await
            == crate::auth::Decision::Allow
        {
            return Ok(());
        }
    }
    let name = scope.name();
    let gr = scope.res.group_resource();
    Err(Status::forbidden(format!(
        "{gr} {name:?} is forbidden: user not permitted to approve requests with signerName {signer:?}"
    ))
    .with_details(name, scope.res.group, scope.res.plural)
    .into())
}

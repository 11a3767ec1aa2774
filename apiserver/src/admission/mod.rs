//! Admission: what runs on every write between decoding and storage (see
//! ARCHITECTURE.md). The chain is kube's ([`plugins`]): the mutating
//! halves of the enabled plugins (built-in ones, then
//! MutatingAdmissionPolicies, then mutating webhooks ([`webhooks`])) change
//! the object, the write path validates it, then the validating halves
//! (built-in ones, then ValidatingAdmissionPolicies ([`policy`]), then
//! validating webhooks, then quota) may refuse it.
//!
//! Floor: above the scope (`crate::scope`), below the server's state.
//! Admission reads what it needs of this replica through a [`Context`]
//! (the backend, the compiled configuration, the plugin chain, quota's
//! turns, the authorizer) and a request through a [`Scope`]; its
//! controllers run on the backend. It must not import `state`, `server`,
//! `handlers` or a specific controller: the handlers lend it their state
//! (`From<&handlers::Scope> for Scope`), the composition root starts its
//! controllers.

pub mod authz;
pub mod mutating_policy;
pub mod plugins;
pub mod policy;
pub mod typecheck;
pub mod webhooks;

use apimachinery::auth::UserInfo;
use apimachinery::status::StatusCause;
use apimachinery::Status;
use serde_json::Value;

use crate::backend::Backend;
use crate::controllers::{Controller, Next, Source};
use crate::error::Result;
use crate::registry::{Resource, Subresource};
use crate::scope::RequestScope;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use std::sync::Arc;
use watchcache::ListOptions;

/// What admission reads of this replica, lent by the server's state for
/// one request (a few references: the handlers make one per admission
/// call).
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The store, registry and key layout (lookups of namespaces, params,
    /// Services; quota's writes) and the metrics.
    pub backend: &'a Backend,
    /// The enabled plugins, in kube's order.
    pub chain: &'a plugins::Chain,
    /// The compiled ValidatingAdmissionPolicies and bindings.
    pub policies: &'a policy::Policies,
    /// The compiled admission webhooks.
    pub webhooks: &'a webhooks::Webhooks,
    /// The compiled MutatingAdmissionPolicies and bindings.
    pub mutating_policies: &'a mutating_policy::MutatingPolicies,
    /// Quota admission's per-namespace turns.
    pub quota: &'a plugins::quota::QuotaState,
    /// The server's authorizer: the policies' `authorizer` variable and
    /// the CSR plugins ask it.
    pub authorizer: &'a dyn crate::auth::Authorizer,
}

/// A request as admission sees it: what it is about (derefs to the
/// [`RequestScope`]) and this replica's admission [`Context`].
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub request: &'a RequestScope,
    pub ctx: Context<'a>,
}

impl std::ops::Deref for Scope<'_> {
    type Target = RequestScope;

    fn deref(&self) -> &RequestScope {
        self.request
    }
}

/// A controller that keeps a replica's compiled configuration (admission,
/// flow control): it follows two `v1` collections of `group` in the
/// backend of `ctx` (the context it runs on) and, on any change, lists
/// both and hands them to `install` with that context. Every replica runs
/// it (not leader-gated: each one enforces). The lists are consistent
/// reads: the event that woke it may come from a watch ahead of the cache
/// (served by etcd while the cache fills).
pub(crate) fn config_controller<C: crate::controllers::Context>(
    ctx: &C,
    name: &'static str,
    group: &str,
    plurals: [&str; 2],
    install: impl Fn(&Arc<C>, &[Value], &[Value]) + Send + Sync + 'static,
) -> Option<Controller<C>> {
    let backend = ctx.backend();
    let mut prefixes = Vec::with_capacity(2);
    for plural in plurals {
        let res = backend.registry.lookup(group, "v1", plural)?;
        prefixes.push(backend.collection_prefix(&res, None));
    }
    let install = Arc::new(install);
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
        reconcile: Arc::new(move |ctx: Arc<C>, _| {
            let prefixes = Arc::clone(&prefixes);
            let install = Arc::clone(&install);
            async move {
                let opts = ListOptions {
                    freshness: Freshness::MostRecent,
                    limit: None,
                    continue_from: None,
                    predicate: Default::default(),
                };
                let mut lists = Vec::with_capacity(2);
                for prefix in prefixes.iter() {
                    let listed = ctx
                        .backend()
                        .store
                        .list(prefix, &opts)
                        .await
                        .map_err(|e| e.to_string())?;
                    lists.push(
                        listed
                            .items
                            .iter()
                            .map(|o| o.value().clone())
                            .collect::<Vec<Value>>(),
                    );
                }
                install(&ctx, &lists[0], &lists[1]);
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

/// A replica's compiled admission configuration (policies, webhooks),
/// swapped in whole by its controller; a request takes an `Arc` of the
/// current one and never holds the lock longer than that. A clone is a
/// handle on the same configuration (the controller keeps one).
pub struct Compiled<T>(Arc<std::sync::RwLock<Arc<T>>>);

impl<T: Default> Default for Compiled<T> {
    fn default() -> Self {
        Compiled(Arc::new(std::sync::RwLock::new(Arc::new(T::default()))))
    }
}

impl<T> Clone for Compiled<T> {
    fn clone(&self) -> Self {
        Compiled(Arc::clone(&self.0))
    }
}

impl<T> Compiled<T> {
    pub fn current(&self) -> Arc<T> {
        Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn replace(&self, set: T) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
    }
}

/// The kind of the object a request carries (kube's `Attributes.GetKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

impl<'a> Kind<'a> {
    /// The kind of a request on `res` (and `sub`): the resource's own, a
    /// create-only subresource's (`pods/eviction`: policy/v1 Eviction;
    /// `serviceaccounts/token`: TokenRequest), a connection's options
    /// (`pods/exec`: PodExecOptions), as kube's installer takes it from
    /// the subresource's storage. `/scale` keeps the resource's kind: its
    /// writes are admitted on the parent object here.
    pub fn of(res: &'a Resource, sub: Option<&'a Subresource>) -> Kind<'a> {
        match sub {
            Some(Subresource::Create {
                group,
                version,
                kind,
                ..
            }) => Kind {
                group,
                version,
                kind,
            },
            Some(Subresource::Connect(c)) => Kind {
                group: "",
                version: "v1",
                kind: c.kind,
            },
            _ => Kind {
                group: &res.group,
                version: &res.version,
                kind: &res.kind,
            },
        }
    }
}

/// What admission sees of a request (kube's `admission.Attributes`).
#[derive(Clone, Copy)]
pub struct Attributes<'a> {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'static str,
    pub res: &'a Resource,
    /// The kind of `object` (see [`Kind::of`]).
    pub kind: Kind<'a>,
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
    /// The schema of the request's object: the resource's (a custom
    /// resource's own), or the built-in kind a subresource carries.
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'a>> {
        if self.kind == Kind::of(self.res, None) {
            self.res.schema()
        } else {
            apimachinery::schema::builtin().by_gvk(
                self.kind.group,
                self.kind.version,
                self.kind.kind,
            )
        }
    }

    /// The attributes of a write through `scope`.
    pub fn of(
        scope: &'a RequestScope,
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
            res: &scope.res,
            kind: Kind::of(&scope.res, scope.subresource.as_ref()),
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
    /// An audit annotation (`<policy>/<key>`) with its value.
    Annotate { key: String, value: String },
    /// A failed validation under the `Audit` action: one item of the
    /// `validation.policy.admission.k8s.io/validation_failure` annotation.
    AuditFailure(Value),
}

/// kube's `admission.NewForbidden`: `<resource> "<name>" is forbidden:
/// <message>`, named by the request's name, else by the object's name or
/// generateName, else `Unknown`.
pub fn forbidden(a: &Attributes<'_>, message: &str) -> Status {
    let gr = a.res.group_resource();
    let name = if a.name.is_empty() {
        a.object
            .and_then(|o| {
                crate::object::name(o)
                    .filter(|n| !n.is_empty())
                    .or_else(|| crate::object::meta_str(o, "generateName"))
            })
            .filter(|g| !g.is_empty())
            .unwrap_or("Unknown")
    } else {
        a.name
    };
    Status::forbidden(format!("{gr} {name:?} is forbidden: {message}")).with_details(
        name,
        &a.res.group,
        &a.res.plural,
    )
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

/// Runs the validating half of the admission chain on a request: the
/// enabled plugins in kube's order ([`plugins::PLUGINS`]): built-in
/// plugins, ValidatingAdmissionPolicies, validating webhooks, quota.
pub async fn validating<'a>(scope: impl Into<Scope<'a>>, a: &Attributes<'_>) -> Result<()> {
    let scope = scope.into();
    scope.ctx.chain.validate(&scope, a).await
}

/// Runs the mutating half of the admission chain on the object of a
/// create or update, before it is validated: built-in plugins, then
/// MutatingAdmissionPolicies, then mutating webhooks.
pub async fn mutating<'a>(
    scope: impl Into<Scope<'a>>,
    operation: &'static str,
    old: Option<&Value>,
    dry_run: bool,
    obj: &mut Value,
) -> Result<()> {
    let scope = scope.into();
    let name;
    let a = Attributes {
        name: match scope.name.as_deref() {
            Some(n) => n,
            None => {
                name = crate::object::name(obj).unwrap_or("").to_string();
                &name
            }
        },
        object: None,
        ..Attributes::of(scope.request, operation, None, old, dry_run)
    };
    scope.ctx.chain.mutate(&scope, &a, obj).await
}

/// Runs both halves of the chain on a request that stores no object of
/// its own: a DELETE (no object; the stored one as `a.old`), as kube's
/// `AdmissionToValidateObjectDeleteFunc` runs them on every object a
/// delete or a collection delete removes, and a CONNECT (its options as
/// `a.object`), as kube's connect handler does. What the mutating half
/// would change lands nowhere: a DELETE has nothing to change (a webhook
/// that patches fails it) and a connection reads its options from its
/// query.
pub async fn unstored<'a>(scope: impl Into<Scope<'a>>, a: &Attributes<'_>) -> Result<()> {
    let scope = scope.into();
    let mut scratch = a.object.cloned().unwrap_or(Value::Null);
    let view = Attributes { object: None, ..*a };
    scope.ctx.chain.mutate(&scope, &view, &mut scratch).await?;
    validating(scope, a).await
}

/// The validating half of the chain for a create that the kind's own code
/// answers (the virtual kinds, `pods/binding`, `pods/eviction`,
/// `serviceaccounts/token`): kube's create handler runs the mutating half
/// and hands the validating half to the storage's `Create` as
/// `createValidation`, which calls it once its own checks pass (a bad
/// Binding is still a 422, a missing service account a 404), on the
/// object as it will act on it, before it acts. The generic create path
/// makes one per request and refuses, as a bug, an answer that never
/// called it.
pub struct CreateValidation<'a> {
    scope: Scope<'a>,
    dry_run: bool,
    ran: &'a std::sync::atomic::AtomicBool,
}

impl<'a> CreateValidation<'a> {
    pub(crate) fn new(
        scope: impl Into<Scope<'a>>,
        dry_run: bool,
        ran: &'a std::sync::atomic::AtomicBool,
    ) -> Self {
        CreateValidation {
            scope: scope.into(),
            dry_run,
            ran,
        }
    }

    /// Runs the validating half on `obj` (operation CREATE, the request's
    /// subresource and name).
    pub async fn check(&self, obj: &Value) -> Result<()> {
        let a = Attributes::of(self.scope.request, "CREATE", Some(obj), None, self.dry_run);
        validating(self.scope, &a).await?;
        self.ran.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

async fn policies(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    let decisions = policy::validate(&scope.ctx, a).await;
    let mut denial = None;
    // Annotations of the same key from several bindings: kube keeps the
    // distinct values, comma-separated.
    let mut annotations: Vec<(String, Vec<String>)> = Vec::new();
    let mut failures = Vec::new();
    for d in decisions {
        match d {
            Decision::Warn(w) => scope.warn(w),
            Decision::Deny { message, reason } => {
                denial.get_or_insert((message, reason));
            }
            Decision::Annotate { key, value } => {
                match annotations.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, values)) if values.contains(&value) => {}
                    Some((_, values)) => values.push(value),
                    None => annotations.push((key, vec![value])),
                }
            }
            Decision::AuditFailure(v) => failures.push(v),
        }
    }
    for (key, values) in annotations {
        scope.audit_annotate(&key, &values.join(", "));
    }
    if !failures.is_empty() {
        // kube keeps the first 50.
        failures.truncate(50);
        scope.audit_annotate(
            "validation.policy.admission.k8s.io/validation_failure",
            &Value::Array(failures).to_string(),
        );
    }
    let Some((message, reason)) = denial else {
        return Ok(());
    };
    let mut s = forbidden(a, &message);
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

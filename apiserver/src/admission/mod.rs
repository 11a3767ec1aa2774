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

mod attributes;
pub mod authz;
pub mod mutating_policy;
pub mod plugins;
pub mod policy;
pub mod typecheck;
pub mod webhooks;

use serde_json::Value;

use crate::error::Result;

pub use attributes::{forbidden, Attributes, Compiled, Context, Decision, Kind, Options, Scope};

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

//! What every part of admission shares: the [`Context`] a replica lends a
//! request, the [`Scope`] a plugin sees, the [`Attributes`] of the request
//! under admission, kube's refusal (`forbidden`), compiled configuration
//! (`Compiled`) and the controller that keeps it. The chain (`admission`
//! itself), the plugins, the policies and the webhooks import this file,
//! never the chain: that keeps admission's own imports one way.

use apimachinery::auth::UserInfo;
use apimachinery::Status;
use serde_json::Value;

use crate::backend::Backend;
use crate::registry::{Resource, Subresource};
use crate::scope::RequestScope;
use std::sync::Arc;

/// What admission reads of this replica, lent by the server's state for
/// one request (a few references: the handlers make one per admission
/// call).
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The store, registry and key layout (lookups of namespaces, params,
    /// Services; quota's writes) and the metrics.
    pub backend: &'a Backend,
    /// The enabled plugins, in kube's order.
    pub chain: &'a super::plugins::chain::Chain,
    /// The compiled ValidatingAdmissionPolicies and bindings.
    pub policies: &'a super::policy::Policies,
    /// The compiled admission webhooks.
    pub webhooks: &'a super::webhooks::Webhooks,
    /// The compiled MutatingAdmissionPolicies and bindings.
    pub mutating_policies: &'a super::mutating_policy::MutatingPolicies,
    /// Quota admission's per-namespace turns.
    pub quota: &'a super::plugins::quota::QuotaState,
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
    /// (`pods/exec`: PodExecOptions), `/scale`'s autoscaling/v1 Scale, as
    /// kube's installer takes it from the subresource's storage.
    pub fn of(res: &'a Resource, sub: Option<&'a Subresource>) -> Kind<'a> {
        match sub {
            Some(Subresource::Scale { .. }) => Kind {
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
            },
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

/// How the request asked for its change to be made (kube's
/// `Attributes.GetOperationOptions`), which an `AdmissionReview` carries
/// as `request.options`.
#[derive(Clone, Copy)]
pub enum Options<'a> {
    /// A create or update (also a patch, as kube turns PatchOptions into
    /// CreateOptions or UpdateOptions): `dryRun`, `fieldManager` and
    /// `fieldValidation` of the request's query.
    Query(&'a apimachinery::query::Query),
    /// A delete (of one object or of each of a collection's): its
    /// DeleteOptions as decoded from the body or the query.
    Delete(&'a apimachinery::query::DeleteParams),
    /// A connection: kube sends none.
    None,
}

impl Options<'_> {
    /// The options object kube sends with `operation`:
    /// `meta.k8s.io/v1` CreateOptions, UpdateOptions or DeleteOptions with
    /// the fields the request set, in kube's field order; `null` for a
    /// connection.
    pub fn to_value(self, operation: &str) -> Value {
        let kind = match (operation, self) {
            (_, Options::None) | ("CONNECT", _) => return Value::Null,
            (_, Options::Delete(_)) | ("DELETE", _) => "DeleteOptions",
            ("CREATE", _) => "CreateOptions",
            _ => "UpdateOptions",
        };
        let mut o = serde_json::Map::new();
        o.insert("kind".into(), kind.into());
        o.insert("apiVersion".into(), "meta.k8s.io/v1".into());
        match self {
            Options::Query(q) => {
                let dry_run: Vec<&str> = q.get_all("dryRun").collect();
                if !dry_run.is_empty() && kind != "DeleteOptions" {
                    o.insert("dryRun".into(), dry_run.into());
                }
                if kind != "DeleteOptions" {
                    for field in ["fieldManager", "fieldValidation"] {
                        if let Some(v) = q.get(field).filter(|v| !v.is_empty()) {
                            o.insert(field.into(), v.into());
                        }
                    }
                }
            }
            Options::Delete(d) => {
                if let Some(g) = d.grace_period_seconds {
                    o.insert("gracePeriodSeconds".into(), g.into());
                }
                let mut pre = serde_json::Map::new();
                if let Some(uid) = &d.preconditions_uid {
                    pre.insert("uid".into(), uid.as_str().into());
                }
                if let Some(rv) = &d.preconditions_resource_version {
                    pre.insert("resourceVersion".into(), rv.as_str().into());
                }
                if !pre.is_empty() {
                    o.insert("preconditions".into(), pre.into());
                }
                if let Some(orphan) = d.orphan_dependents {
                    o.insert("orphanDependents".into(), orphan.into());
                }
                if let Some(p) = d.propagation_policy {
                    o.insert("propagationPolicy".into(), p.as_str().into());
                }
                if d.dry_run {
                    o.insert("dryRun".into(), vec!["All"].into());
                }
            }
            Options::None => {}
        }
        Value::Object(o)
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
    /// How the request asked for the change (`request.options`).
    pub options: Options<'a>,
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
            options: if operation == "CONNECT" {
                Options::None
            } else {
                Options::Query(&scope.query)
            },
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

#[cfg(test)]
mod tests {
    use super::Options;
    use apimachinery::query::{DeleteParams, PropagationPolicy};
    use serde_json::json;

    #[test]
    fn options_are_what_kube_sends_for_each_operation() {
        let q = apimachinery::query::parse(Some(
            "dryRun=All&fieldManager=kubectl-edit&fieldValidation=Strict&force=true",
        ))
        .expect("query");
        let text = |v: serde_json::Value| v.to_string();
        assert_eq!(
            text(Options::Query(&q).to_value("UPDATE")),
            r#"{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"],"fieldManager":"kubectl-edit","fieldValidation":"Strict"}"#
        );
        let bare = apimachinery::query::parse(None).expect("empty query");
        assert_eq!(
            Options::Query(&bare).to_value("CREATE"),
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
        );
        let d = DeleteParams {
            dry_run: true,
            grace_period_seconds: Some(0),
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions_uid: Some("u".into()),
            preconditions_resource_version: None,
            orphan_dependents: None,
        };
        assert_eq!(
            text(Options::Delete(&d).to_value("DELETE")),
            r#"{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","gracePeriodSeconds":0,"preconditions":{"uid":"u"},"propagationPolicy":"Foreground","dryRun":["All"]}"#
        );
        assert!(Options::Query(&q).to_value("CONNECT").is_null());
        assert!(Options::None.to_value("CREATE").is_null());
    }
}

//! kube's NamespaceLifecycle: nothing is created in a namespace that does
//! not exist or is being deleted, nothing is updated in one that does not
//! exist, and `default`, `kube-system` and `kube-public` are never deleted.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;

use super::chain::Plugin;
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;
use crate::object;
use apimachinery::status::StatusCause;
use apimachinery::Status;

/// Namespaces that may not be deleted.
const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

fn is_namespace(a: &Attributes) -> bool {
    a.res.group.is_empty() && a.res.plural == "namespaces"
}

fn handles(a: &Attributes) -> bool {
    if is_namespace(a) {
        return a.operation == "DELETE" && IMMORTAL.contains(&a.name);
    }
    // Deletes always go through; access reviews say nothing about the
    // namespace they name.
    a.namespace.is_some()
        && a.operation != "DELETE"
        && !(a.res.group == "authorization.k8s.io" && a.res.plural == "localsubjectaccessreviews")
}

fn admit<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        if is_namespace(a) {
            let gr = a.res.group_resource();
            return Err(Status::forbidden(format!(
                "{gr} {:?} is forbidden: this namespace may not be deleted",
                a.name
            ))
            .with_details(a.name, gr.group, gr.resource)
            .into());
        }
        let Some(ns) = a.namespace else {
            return Ok(());
        };
        // The replica's cached copy, else a quorum read (it may have been
        // created through another replica a moment ago), as kube's plugin
        // falls back to a live lookup.
        let found = super::chain::lookup(scope, ("", "v1", "namespaces"), None, ns).await?;
        match found {
            None => Err(Status::not_found(
                apimachinery::status::GroupResource {
                    group: "",
                    resource: "namespaces",
                },
                ns,
            )
            .into()),
            Some(o) if a.operation == "CREATE" && object::is_deleting(&o) => {
                let mut s = forbidden(
                    a,
                    &format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                );
                if let Some(d) = s.details.as_mut() {
                    d.causes.push(StatusCause::new(
                        "NamespaceTerminating",
                        format!("namespace {ns} is being terminated"),
                        "metadata.namespace",
                    ));
                }
                Err(s.into())
            }
            Some(_) => Ok(()),
        }
    }
    .boxed()
}

pub const LIFECYCLE: Plugin = Plugin {
    name: "NamespaceLifecycle",
    default_on: true,
    supported: true,
    handles,
    mutate: None,
    validate: Some(admit),
};

//! kube's LimitRanger: pods and claims against the LimitRanges of their
//! namespace. The mutating half fills containers' missing requests and
//! limits from each range's `Container` defaults (and says so in the
//! `kubernetes.io/limit-ranger` annotation); the validating half refuses
//! what breaks a `min`, `max` or `maxLimitRequestRatio` (403, kube's
//! messages). The rules are `apimachinery::kinds::core::limit_ranger`.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use super::chain::{on, Plugin};
use super::quota::list_namespaced;
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;
use apimachinery::kinds::core::limit_ranger;

const LIMIT_RANGES: (&str, &str, &str) = ("", "v1", "limitranges");

/// kube's `SupportsAttributes`: pod creates and resizes, claim creates and
/// updates.
fn handles(a: &Attributes) -> bool {
    let pods = a.res.group.is_empty() && a.res.plural == "pods";
    (on(a, "", "pods") && a.operation == "CREATE")
        || (pods && a.subresource == "resize" && a.operation == "UPDATE")
        || (on(a, "", "persistentvolumeclaims") && matches!(a.operation, "CREATE" | "UPDATE"))
}

/// The namespace's ranges, unless the stored object is being deleted
/// (kube leaves those alone).
async fn ranges(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<Vec<std::sync::Arc<Value>>> {
    if a.old.is_some_and(crate::object::is_deleting) {
        return Ok(Vec::new());
    }
    let Some(ns) = a.namespace else {
        return Ok(Vec::new());
    };
    list_namespaced(scope, LIMIT_RANGES, ns).await
}

fn default_limits<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    obj: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        if a.res.plural != "pods" {
            return Ok(());
        }
        for lr in ranges(scope, a).await? {
            limit_ranger::default_pod(&lr, obj);
        }
        Ok(())
    }
    .boxed()
}

fn enforce_limits<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        let Some(obj) = a.object else {
            return Ok(());
        };
        for lr in ranges(scope, a).await? {
            let checked = if a.res.plural == "pods" {
                limit_ranger::validate_pod(&lr, obj)
            } else {
                limit_ranger::validate_claim(&lr, obj)
            };
            if let Err(message) = checked {
                return Err(forbidden(a, &message).into());
            }
        }
        Ok(())
    }
    .boxed()
}

pub const LIMIT_RANGER: Plugin = Plugin {
    name: "LimitRanger",
    default_on: true,
    supported: true,
    handles,
    mutate: Some(default_limits),
    validate: Some(enforce_limits),
};

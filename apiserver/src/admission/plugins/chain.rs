//! What a plugin is (its name, defaults, which requests it handles, its
//! two rule functions), the helpers the plugins share, and the [`Chain`]
//! of enabled plugins that runs them. The plugin modules and the admission
//! context import this file; the table of plugins (`plugins/mod.rs`)
//! imports them, so the arrows run one way.

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Scope};
use crate::error::{ApiError, Result};
use apimachinery::read::Freshness;

/// The mutating half of a plugin: may change the object of a create or
/// update (`a.object` is `None`: the object is `obj`). A DELETE has no
/// object (`obj` is `null`, the stored one is `a.old`); a CONNECT's `obj`
/// is its options.
pub type MutateFn =
    for<'a> fn(&'a Scope<'a>, &'a Attributes<'a>, &'a mut Value) -> BoxFuture<'a, Result<()>>;
/// The validating half of a plugin: may refuse the request.
pub type ValidateFn = for<'a> fn(&'a Scope<'a>, &'a Attributes<'a>) -> BoxFuture<'a, Result<()>>;

/// One of kube's admission plugins.
pub struct Plugin {
    /// kube's name, as the flags spell it.
    pub name: &'static str,
    /// In kube's default set (`DefaultOffAdmissionPlugins` leaves it out).
    pub default_on: bool,
    /// Implemented here; an unsupported plugin may not be enabled.
    pub supported: bool,
    /// Whether the plugin looks at this request at all (cheap: checked
    /// before any future is made).
    pub handles: fn(&Attributes) -> bool,
    pub mutate: Option<MutateFn>,
    pub validate: Option<ValidateFn>,
}

impl Plugin {
    /// A plugin kube has and this server does not implement.
    pub(super) const fn unsupported(name: &'static str, default_on: bool) -> Plugin {
        Plugin {
            name,
            default_on,
            supported: false,
            handles: |_| false,
            mutate: None,
            validate: None,
        }
    }
}

/// Whether the request is on `group`/`plural` itself (not a subresource).
pub fn on(a: &Attributes, group: &str, plural: &str) -> bool {
    a.res.group == group && a.res.plural == plural && a.subresource.is_empty()
}

/// Whether the request is a create or update of the object itself.
pub fn writes(a: &Attributes, group: &str, plural: &str) -> bool {
    on(a, group, plural) && matches!(a.operation, "CREATE" | "UPDATE")
}

/// Reads one object the way kube's plugins read their informers: the
/// replica's cached copy, else a quorum read (it may have been written
/// through another replica a moment ago).
pub async fn lookup(
    scope: &Scope<'_>,
    (group, version, plural): (&str, &str, &str),
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<std::sync::Arc<Value>>> {
    let backend = &scope.backend;
    let res = backend
        .registry
        .lookup(group, version, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural}.{group} missing from the registry")))?;
    let key = backend.key(&res, namespace, name);
    for freshness in [Freshness::NotOlderThan(0), Freshness::MostRecent] {
        let found = backend
            .store
            .get(&key, freshness)
            .await
            .map_err(|e| ApiError::storage(e, &res, name))?;
        if let Some(o) = found {
            return Ok(Some(o.into_value()));
        }
    }
    Ok(None)
}

/// Every object of a cluster-scoped collection, from the replica's cache.
pub async fn list_all(
    scope: &Scope<'_>,
    (group, version, plural): (&str, &str, &str),
) -> Result<Vec<std::sync::Arc<Value>>> {
    let backend = &scope.backend;
    let res = backend
        .registry
        .lookup(group, version, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural}.{group} missing from the registry")))?;
    let opts = watchcache::ListOptions {
        freshness: Freshness::NotOlderThan(0),
        limit: None,
        continue_from: None,
        predicate: Default::default(),
    };
    let listed = backend
        .store
        .list(&backend.collection_prefix(&res, None), &opts)
        .await
        .map_err(|e| ApiError::storage(e, &res, ""))?;
    Ok(listed.items.into_iter().map(|o| o.into_value()).collect())
}

/// The enabled plugins, in kube's order.
pub struct Chain {
    pub(super) mutating: Vec<&'static Plugin>,
    pub(super) validating: Vec<&'static Plugin>,
}

impl Chain {
    /// The names of the enabled plugins with a mutating and a validating
    /// half, in order (for the start-up log, as kube logs them).
    pub fn names(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        (
            self.mutating.iter().map(|p| p.name).collect(),
            self.validating.iter().map(|p| p.name).collect(),
        )
    }

    /// Whether `name` is enabled.
    pub fn enabled(&self, name: &str) -> bool {
        self.mutating
            .iter()
            .chain(&self.validating)
            .any(|p| p.name == name)
    }

    /// Runs the mutating halves in order on `obj`.
    pub async fn mutate(
        &self,
        scope: &Scope<'_>,
        a: &Attributes<'_>,
        obj: &mut Value,
    ) -> Result<()> {
        for p in &self.mutating {
            if (p.handles)(a) {
                if let Some(m) = p.mutate {
                    m(scope, a, obj).await?;
                }
            }
        }
        Ok(())
    }

    /// Runs the validating halves in order; the first refusal wins.
    pub async fn validate(&self, scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
        for p in &self.validating {
            if (p.handles)(a) {
                if let Some(v) = p.validate {
                    v(scope, a).await?;
                }
            }
        }
        Ok(())
    }
}

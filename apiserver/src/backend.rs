//! The storage backend: the floor every request, controller and admission
//! plugin reads and writes through. It holds the store (the watch cache
//! over etcd when it is on), the resource registry, the etcd key layout and
//! the metrics the store reports to, and nothing of the request pipeline:
//! it imports no filter, handler, controller or admission module, so all of
//! them can name it without closing a circle.

use crate::registry::{Registry, Resource};
use std::sync::Arc;
use std::time::Duration;
use watchcache::Storage;

/// The store, the registry and the key layout, shared by `Arc`.
#[derive(Clone)]
pub struct Backend {
    pub store: Arc<dyn Storage>,
    pub registry: Registry,
    /// etcd key prefix, without trailing slash (e.g. `/registry`).
    pub prefix: String,
    /// The watch cache behind `store`, when enabled (for readiness).
    pub cache: Option<watchcache::Cacher>,
    /// Request metrics (`None` only if their definitions were rejected).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl Backend {
    /// A backend over `store` with the built-in resources.
    pub fn new(store: Arc<dyn Storage>, prefix: &str) -> Self {
        Backend {
            store,
            registry: Registry::builtin(),
            prefix: prefix.trim_end_matches('/').to_string(),
            cache: None,
            metrics: crate::metrics::Metrics::new()
                .map_err(|e| tracing::error!(error = %e, "metrics disabled"))
                .ok()
                .map(Arc::new),
        }
    }

    /// The etcd key of one object.
    pub fn key(&self, res: &Resource, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if res.namespaced => {
                format!(
                    "{}/{}/{}/{}",
                    self.prefix,
                    crate::storage_format::segment(res),
                    ns,
                    name
                )
            }
            _ => format!(
                "{}/{}/{}",
                self.prefix,
                crate::storage_format::segment(res),
                name
            ),
        }
    }

    /// The etcd key prefix of a collection (all namespaces when `None`).
    pub fn collection_prefix(&self, res: &Resource, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if res.namespaced => {
                format!(
                    "{}/{}/{}/",
                    self.prefix,
                    crate::storage_format::segment(res),
                    ns
                )
            }
            _ => format!("{}/{}/", self.prefix, crate::storage_format::segment(res)),
        }
    }

    /// The EndpointSlices of `namespace` as the cache holds them now (any
    /// recent state: a Service's backends for webhooks and APIServices).
    /// `Err` names why they cannot be read.
    pub async fn endpoint_slices(&self, namespace: &str) -> Result<watchcache::ListResult, String> {
        let res = self
            .registry
            .lookup("discovery.k8s.io", "v1", "endpointslices")
            .ok_or("endpointslices are not served")?;
        let opts = watchcache::ListOptions {
            freshness: apimachinery::read::Freshness::NotOlderThan(0),
            limit: None,
            continue_from: None,
            predicate: Default::default(),
        };
        self.store
            .list(&self.collection_prefix(&res, Some(namespace)), &opts)
            .await
            .map_err(|e| e.to_string())
    }

    /// Whether etcd answers within 2 s (readiness checks).
    pub async fn etcd_ok(&self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(2), self.store.current_revision()).await,
            Ok(Ok(_))
        )
    }
}

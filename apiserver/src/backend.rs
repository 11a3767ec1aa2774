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
    /// The `--etcd-servers-overrides` clusters (`store` routes their key
    /// ranges to them); empty without overrides.
    pub clusters: Arc<[crate::clusters::Cluster]>,
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
            clusters: Arc::new([]),
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

    /// Whether the main etcd cluster answers within 2 s (readiness
    /// checks).
    pub async fn etcd_ok(&self) -> bool {
        let prefix = format!("{}/", self.prefix);
        matches!(
            tokio::time::timeout(Duration::from_secs(2), self.store.current_revision(&prefix))
                .await,
            Ok(Ok(_))
        )
    }

    /// Whether the override cluster `name` (`etcd-override-N`) answers
    /// within 2 s; `None` when there is no such cluster.
    pub async fn cluster_ok(&self, name: &str) -> Option<bool> {
        let cluster = self.clusters.iter().find(|c| c.name == name)?;
        let answered = tokio::time::timeout(Duration::from_secs(2), cluster.etcd.revision()).await;
        Some(matches!(answered, Ok(Ok(_))))
    }

    /// Every watch cache: the main cluster's, then each override's.
    pub fn caches(&self) -> impl Iterator<Item = &watchcache::Cacher> {
        self.cache
            .iter()
            .chain(self.clusters.iter().filter_map(|c| c.cache.as_ref()))
    }

    /// Stored objects per resource (`plural` or `plural.group`), a count-only
    /// etcd read each (`None` without a watch cache over etcd, or when etcd
    /// does not answer in time): APF's LIST estimates. A resource whose
    /// cluster does not answer is left out.
    pub async fn stored_counts(&self) -> Option<std::collections::HashMap<String, i64>> {
        let results = self.count_stored().await?;
        if results.iter().all(|(_, n)| n.is_none()) {
            tracing::debug!("counting stored objects: etcd did not answer");
            return None;
        }
        Some(
            results
                .into_iter()
                .filter_map(|(label, n)| Some((label, n?)))
                .collect(),
        )
    }

    /// `apiserver_storage_objects` at a scrape: every resource's count, -1
    /// for one whose cluster did not answer (kube's value for a fetching
    /// error); empty without a watch cache over etcd.
    pub async fn stored_object_metrics(&self) -> Vec<(String, i64)> {
        self.count_stored()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|(label, n)| (label, n.unwrap_or(-1)))
            .collect()
    }

    /// One count round: each resource counted on the cluster that holds
    /// it, waiting at most 2 s (`None`: no answer in time).
    async fn count_stored(&self) -> Option<Vec<(String, Option<i64>)>> {
        let main = self.cache.as_ref()?.store();
        let mut seen = std::collections::HashSet::new();
        let all = self.registry.all();
        let counts = all
            .iter()
            .filter(|res| seen.insert(crate::storage_format::segment(res)))
            .map(|res| {
                let prefix = self.collection_prefix(&res, None);
                // Each resource is counted on the cluster that holds it.
                let store = self
                    .clusters
                    .iter()
                    .find(|c| c.owns(&prefix))
                    .map_or(main, |c| &c.etcd);
                let (mut client, telemetry) = (store.client(), store.telemetry().clone());
                let label = if res.group.is_empty() {
                    res.plural.to_string()
                } else {
                    format!("{}.{}", res.plural, res.group)
                };
                async move {
                    let opts = etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only();
                    let get = client.get(prefix.as_bytes(), Some(opts));
                    let resp = telemetry.time("listWithCount", prefix.as_bytes(), get);
                    // Each count waits on its own: a cluster that does not
                    // answer costs only its resources' counts.
                    let resp = tokio::time::timeout(Duration::from_secs(2), resp).await;
                    let count = resp.ok().and_then(Result::ok).map(|r| r.count());
                    (label, count)
                }
            });
        Some(futures_util::future::join_all(counts).await)
    }

    /// `apiserver_storage_size_bytes` at a scrape: each etcd cluster's
    /// database size (a Status call to one member), labelled as kube labels
    /// it: `etcd-0` the main cluster, then the override clusters in order
    /// (`etcd-override-N` is `etcd-N+1`). A cluster that does not answer
    /// within 1 s is left out, as kube leaves it out; empty without a watch
    /// cache over etcd.
    pub async fn storage_sizes(&self) -> Vec<(String, i64)> {
        let Some(main) = self.cache.as_ref().map(watchcache::Cacher::store) else {
            return Vec::new();
        };
        let stores = std::iter::once(main).chain(self.clusters.iter().map(|c| &c.etcd));
        let sizes = stores.enumerate().map(|(i, store)| {
            let mut client = store.client();
            async move {
                let status = tokio::time::timeout(Duration::from_secs(1), client.status()).await;
                match status {
                    Ok(Ok(s)) => Some((format!("etcd-{i}"), s.db_size())),
                    Ok(Err(e)) => {
                        tracing::info!(storage_cluster_id = %format!("etcd-{i}"), error = %e, "failed to get storage metrics");
                        None
                    }
                    Err(_) => {
                        tracing::info!(storage_cluster_id = %format!("etcd-{i}"), "failed to get storage metrics: timed out");
                        None
                    }
                }
            }
        });
        futures_util::future::join_all(sizes)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

//! A store over several etcd clusters (kube's `--etcd-servers-overrides`):
//! each key goes to the store that owns the longest route prefix it starts
//! with, every other key to the main store.
//!
//! A route prefix is a resource's whole key range (`/registry/events/`),
//! so every key of one resource lives in one cluster: a list, a continue
//! token (the revision of one cluster) or a watch never spans two
//! clusters, and each store below (an etcd store, or a watch cache over
//! one) keeps its own revisions, consistent reads, compaction and
//! failures. A request for a key of a cluster that is down fails there
//! alone; the other stores do not wait for it.
//!
//! A list or watch of a prefix above a route (the whole `/registry/`)
//! goes to the main store and so sees only its keys: the server never
//! asks for one (every collection is one resource or below).

use crate::storage::{
    Encoded, ListOptions, ListResult, Object, Result, Revision, Storage, WatchOptions, WatchStream,
};
use apimachinery::read::Freshness;
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

/// One override: the key range a store owns.
#[derive(Clone)]
pub struct Route {
    /// Full key prefix, ending in `/` (`/registry/events/`).
    pub prefix: String,
    pub store: Arc<dyn Storage>,
}

/// A [`Storage`] that sends each key to the store owning it.
#[derive(Clone)]
pub struct Routed {
    main: Arc<dyn Storage>,
    /// Longest prefix first, so the first match is the owner.
    routes: Arc<[Route]>,
}

impl Routed {
    /// `main` holds every key no route owns. A route's prefix must end in
    /// `/` (one is added otherwise).
    pub fn new(main: Arc<dyn Storage>, routes: impl IntoIterator<Item = Route>) -> Routed {
        let mut routes: Vec<Route> = routes
            .into_iter()
            .map(|mut r| {
                if !r.prefix.ends_with('/') {
                    r.prefix.push('/');
                }
                r
            })
            .collect();
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        Routed {
            main,
            routes: routes.into(),
        }
    }

    /// The store that holds `key_or_prefix`.
    pub fn store_for(&self, key_or_prefix: &str) -> &dyn Storage {
        self.route_of(key_or_prefix)
            .map_or(&*self.main, |r| &*self.routes[r].store)
    }

    /// The index of the route owning `key_or_prefix` (`None`: the main
    /// store).
    pub fn route_of(&self, key_or_prefix: &str) -> Option<usize> {
        self.routes
            .iter()
            .position(|r| key_or_prefix.starts_with(r.prefix.as_str()))
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

#[async_trait]
impl Storage for Routed {
    async fn get(&self, key: &str, freshness: Freshness) -> Result<Option<Object>> {
        self.store_for(key).get(key, freshness).await
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        self.store_for(prefix).list(prefix, opts).await
    }

    async fn create(&self, key: &str, value: &Value) -> Result<Object> {
        self.store_for(key).create(key, value).await
    }

    async fn update(&self, key: &str, value: &Value, expected: Revision) -> Result<Object> {
        self.store_for(key).update(key, value, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Object> {
        self.store_for(key).delete(key, expected).await
    }

    async fn watch(&self, key_or_prefix: &str, opts: WatchOptions) -> Result<WatchStream> {
        self.store_for(key_or_prefix)
            .watch(key_or_prefix, opts)
            .await
    }

    async fn current_revision(&self, key_or_prefix: &str) -> Result<Revision> {
        self.store_for(key_or_prefix)
            .current_revision(key_or_prefix)
            .await
    }

    async fn grant_lease(&self, key: &str, ttl_seconds: i64) -> Result<i64> {
        self.store_for(key).grant_lease(key, ttl_seconds).await
    }

    async fn create_with_lease(&self, key: &str, value: &Value, lease: i64) -> Result<Object> {
        self.store_for(key)
            .create_with_lease(key, value, lease)
            .await
    }

    async fn update_with_lease(
        &self,
        key: &str,
        value: &Value,
        expected: Revision,
        lease: i64,
    ) -> Result<Object> {
        self.store_for(key)
            .update_with_lease(key, value, expected, lease)
            .await
    }

    async fn is_stale(&self, key: &str) -> Result<bool> {
        self.store_for(key).is_stale(key).await
    }

    fn encode(&self, key: &str, value: &Value) -> Result<Encoded> {
        self.store_for(key).encode(key, value)
    }

    async fn update_encoded(
        &self,
        key: &str,
        value: Encoded,
        expected: Revision,
        lease: Option<i64>,
    ) -> Result<Object> {
        self.store_for(key)
            .update_encoded(key, value, expected, lease)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageError;

    /// A store that only says who it is (through its error).
    struct Named(&'static str);

    #[async_trait]
    impl Storage for Named {
        async fn get(&self, _: &str, _: Freshness) -> Result<Option<Object>> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn list(&self, _: &str, _: &ListOptions) -> Result<ListResult> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn create(&self, _: &str, _: &Value) -> Result<Object> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn update(&self, _: &str, _: &Value, _: Revision) -> Result<Object> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn delete(&self, _: &str, _: Option<Revision>) -> Result<Object> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn watch(&self, _: &str, _: WatchOptions) -> Result<WatchStream> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn current_revision(&self, _: &str) -> Result<Revision> {
            Err(StorageError::Internal(self.0.into()))
        }
        fn encode(&self, _: &str, _: &Value) -> Result<Encoded> {
            Err(StorageError::Internal(self.0.into()))
        }
        async fn update_encoded(
            &self,
            _: &str,
            _: Encoded,
            _: Revision,
            _: Option<i64>,
        ) -> Result<Object> {
            Err(StorageError::Internal(self.0.into()))
        }
    }

    fn routed() -> Routed {
        Routed::new(
            Arc::new(Named("main")),
            [
                Route {
                    prefix: "/registry/events".into(),
                    store: Arc::new(Named("events")),
                },
                Route {
                    prefix: "/registry/services/specs/".into(),
                    store: Arc::new(Named("services")),
                },
                Route {
                    prefix: "/registry/services/".into(),
                    store: Arc::new(Named("all-services")),
                },
            ],
        )
    }

    async fn owner(r: &Routed, key: &str) -> String {
        match r.current_revision(key).await {
            Err(StorageError::Internal(name)) => name,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn each_key_goes_to_the_longest_route_it_starts_with() {
        let r = routed();
        for (key, want) in [
            ("/registry/events/ns/e1", "events"),
            ("/registry/events/", "events"),
            ("/registry/eventsx/ns/a", "main"),
            ("/registry/configmaps/ns/a", "main"),
            ("/registry/services/specs/ns/s", "services"),
            ("/registry/services/endpoints/ns/s", "all-services"),
            // A prefix above every route is the main store's.
            ("/registry/", "main"),
        ] {
            assert_eq!(owner(&r, key).await, want, "{key}");
        }
        assert_eq!(r.route_of("/registry/events/ns/e1"), Some(2));
        assert_eq!(r.routes()[0].prefix, "/registry/services/specs/");
    }
}

/// Test support (feature `test-util`): the conformance suite's keys
/// (`/registry/conformance/`) routed to a watch cache over a real etcd,
/// every other key to a main store whose etcd does not exist, so a key
/// sent to the wrong store fails the test.
#[cfg(feature = "test-util")]
pub mod testing {
    use super::{Route, Routed};
    use crate::cache::testing::CacheHarness;
    use crate::storage::{Revision, Storage};
    use crate::testing::conformance::Harness;
    use async_trait::async_trait;
    use std::sync::Arc;
    use std::time::Duration;

    pub struct RoutedHarness {
        routed: Routed,
        inner: CacheHarness,
    }

    impl RoutedHarness {
        async fn over(inner: CacheHarness) -> Self {
            // Nothing listens on port 1: connecting is lazy, every request
            // fails (at once: refused).
            let nowhere = ["http://127.0.0.1:1".to_string()];
            let main = match crate::etcd::EtcdStore::connect(&nowhere, Duration::from_secs(1)).await
            {
                Ok(store) => store,
                Err(e) => panic!("a store for the missing main etcd: {e}"),
            };
            let route = Route {
                prefix: "/registry/conformance/".into(),
                store: Arc::new(inner.cacher().clone()),
            };
            RoutedHarness {
                routed: Routed::new(Arc::new(main), [route]),
                inner,
            }
        }

        pub async fn shared() -> Self {
            Self::over(CacheHarness::shared().await).await
        }

        pub async fn isolated() -> Self {
            Self::over(CacheHarness::isolated().await).await
        }
    }

    #[async_trait]
    impl Harness for RoutedHarness {
        fn storage(&self) -> &dyn Storage {
            &self.routed
        }

        async fn compact(&self, revision: Revision) {
            self.inner.compact(revision).await
        }
    }
}

//! The server's state: the backend, and every filter's, admission's and
//! controller's own part, built once by the composition root (`lib.rs`) and
//! shared by `Arc`. Handlers and the composition root name it; the floors
//! below (backend, filters, admission, allocator, aggregator) never do.

use crate::backend::Backend;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchcache::Storage;

/// Everything a request handler needs; one per server, shared by `Arc`.
pub struct AppState {
    /// The store, registry and key layout (`state.store` reads through
    /// `Deref`).
    pub backend: Arc<Backend>,
    /// Set once the default namespaces and objects exist.
    pub bootstrapped: AtomicBool,
    /// Set on shutdown: readyz fails from then on.
    pub shutting_down: AtomicBool,
    pub discovery: crate::discovery::Discovery,
    /// The OpenAPI documents, with the remote APIServices' (those
    /// discovery lists) merged in.
    pub openapi: Arc<crate::openapi::OpenApi>,
    /// In-flight limits and the request timeout.
    pub limits: crate::limits::Limits,
    /// API Priority and Fairness (off until configured by `run`).
    pub apf: Arc<crate::flowcontrol::Apf>,
    /// Open watches per user (`--max-watches-per-user`).
    pub watch_budget: Arc<crate::limits::WatchBudget>,
    /// Set to `true` when the server stops accepting: open watch streams
    /// end then.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// Authenticates requests on the secure port (`None`: no credentials
    /// are accepted there).
    pub authenticator: Option<Arc<dyn crate::auth::Authenticator>>,
    /// Requests without credentials run as `system:anonymous` (else 401).
    pub anonymous_auth: bool,
    /// Decides what each user may do.
    pub authorizer: Arc<dyn crate::auth::Authorizer>,
    /// The RBAC policy index, when RBAC is an authorization mode (the
    /// escalation checks and SelfSubjectRulesReview read it).
    pub rbac: Option<Arc<crate::rbac::Rbac>>,
    /// Issues and checks service-account tokens (secure port on).
    pub service_accounts: Option<Arc<crate::auth::serviceaccount::ServiceAccounts>>,
    /// Failed authentications per client address.
    pub auth_failures: crate::auth::ratelimit::FailureLimiter,
    /// The audit policy and log (`None`: auditing off).
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// The Service network: ClusterIP range and NodePort range.
    pub services: crate::allocator::ServiceNetwork,
    /// Event lifetime (`--event-ttl`), through shared etcd leases.
    pub event_ttl: crate::event_ttl::EventLeases,
    /// The etcd members this server talks to (`componentstatuses` probes
    /// each one).
    pub etcd_endpoints: Vec<String>,
    /// The cluster CA (PEM) that in-cluster clients verify this server
    /// with, when the server made its own (published in every namespace
    /// as `kube-root-ca.crt`).
    pub root_ca: Option<String>,
    /// Where this replica is published in the `default/kubernetes`
    /// endpoints (the advertise address and the secure port); `None`: it
    /// is not (no secure port, or `--endpoint-reconciler-type=none`).
    pub advertise: Option<std::net::SocketAddr>,
    /// TTL of this replica's endpoint lease.
    pub endpoint_lease_ttl: Duration,
    /// Period of the allocation repair loops' full passes.
    pub repair_interval: Duration,
    /// This replica's compiled ValidatingAdmissionPolicies and bindings.
    pub policies: crate::admission::policy::Policies,
    /// This replica's compiled admission webhooks.
    pub webhooks: crate::admission::webhooks::Webhooks,
    /// This replica's compiled MutatingAdmissionPolicies and bindings.
    pub mutating_policies: crate::admission::mutating_policy::MutatingPolicies,
    /// The enabled admission plugins, in kube's order.
    pub admission: crate::admission::plugins::Chain,
    /// Quota admission's per-namespace turns and newest quota versions.
    pub quota: crate::admission::plugins::quota::QuotaState,
    /// The client certificate the aggregator proxies with, and the
    /// request-header settings published for extension servers.
    pub proxy_identity: Option<Arc<crate::aggregator::ProxyIdentity>>,
}

impl AppState {
    pub fn new(store: Arc<dyn Storage>, prefix: &str) -> Self {
        Self::with_address(store, prefix, "127.0.0.1:8080")
    }

    /// `address` is what `/api` advertises in serverAddressByClientCIDRs.
    pub fn with_address(store: Arc<dyn Storage>, prefix: &str, address: &str) -> Self {
        let backend = Backend::new(store, prefix);
        let registry = backend.registry.clone();
        let discovery =
            crate::discovery::Discovery::new(registry.clone()).with_server_address(address);
        let openapi = crate::openapi::OpenApi::new(registry, Arc::clone(discovery.remotes()));
        AppState {
            backend: Arc::new(backend),
            bootstrapped: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            discovery,
            openapi: Arc::new(openapi),
            limits: crate::limits::Limits::default(),
            apf: Default::default(),
            watch_budget: Default::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            authenticator: None,
            anonymous_auth: false,
            authorizer: Arc::new(crate::auth::AlwaysAllow),
            rbac: None,
            service_accounts: None,
            auth_failures: Default::default(),
            audit: None,
            services: Default::default(),
            event_ttl: Default::default(),
            etcd_endpoints: Vec::new(),
            root_ca: None,
            advertise: None,
            endpoint_lease_ttl: Duration::from_secs(15),
            repair_interval: Duration::from_secs(180),
            policies: Default::default(),
            webhooks: Default::default(),
            admission: Default::default(),
            mutating_policies: Default::default(),
            quota: Default::default(),
            proxy_identity: None,
        }
    }

    /// What admission reads of this replica, lent for one request.
    pub fn admission_context(&self) -> crate::admission::Context<'_> {
        crate::admission::Context {
            backend: &self.backend,
            chain: &self.admission,
            policies: &self.policies,
            webhooks: &self.webhooks,
            mutating_policies: &self.mutating_policies,
            quota: &self.quota,
            authorizer: &*self.authorizer,
        }
    }

    /// Replaces the default in-flight limits and request timeout.
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Ends open watch streams (cleanly) and marks the server as stopping.
    pub fn stop_streams(&self) {
        self.stopping.send_replace(true);
    }

    /// Serves reads and watches through `cache` (which wraps the etcd store).
    pub fn with_cache(mut self, cache: watchcache::Cacher) -> Self {
        let backend = Arc::make_mut(&mut self.backend);
        backend.store = Arc::new(cache.clone());
        backend.cache = Some(cache);
        self
    }

    /// Sends the key ranges of the `--etcd-servers-overrides` clusters to
    /// them (through each one's watch cache when it has one); every other
    /// key stays with the store set so far. Call after [`Self::with_cache`].
    pub fn with_clusters(mut self, clusters: Vec<crate::clusters::Cluster>) -> Self {
        if clusters.is_empty() {
            return self;
        }
        let backend = Arc::make_mut(&mut self.backend);
        let mut routes = Vec::new();
        for c in &clusters {
            let store: Arc<dyn Storage> = match &c.cache {
                Some(cache) => Arc::new(cache.clone()),
                None => Arc::new(c.etcd.clone()),
            };
            routes.extend(c.prefixes.iter().map(|p| watchcache::Route {
                prefix: p.clone(),
                store: Arc::clone(&store),
            }));
        }
        backend.store = Arc::new(watchcache::Routed::new(Arc::clone(&backend.store), routes));
        backend.clusters = clusters.into();
        self
    }

    /// Records the etcd requests of `store` (and of a watch cache over it)
    /// in this state's metrics, and puts request ids on their spans.
    pub fn observe_etcd(&self, store: &watchcache::etcd::EtcdStore) {
        if let Some(m) = &self.metrics {
            let observer = m.etcd_observer(&self.registry, &self.prefix);
            store.telemetry().observe_with(Arc::new(observer));
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Backend;

    /// The handlers' floor reads the backend's fields through the state
    /// (`state.store`, `state.key(..)`).
    fn deref(&self) -> &Backend {
        &self.backend
    }
}

/// The server's own controllers (namespace deletion, garbage collection,
/// ...) read the whole state.
impl crate::controllers::Context for AppState {
    fn backend(&self) -> &Backend {
        &self.backend
    }
}

/// Whether a readiness flag is set.
pub fn is_ready_flag(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Acquire)
}

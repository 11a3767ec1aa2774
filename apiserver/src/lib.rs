//! A Kubernetes-compatible API server on etcd.
//!
//! Request path: `server::router` → `handlers::dispatch` (path and verb
//! resolution through `request` and `registry`) → one verb module under
//! `handlers` → the `watchcache::Storage` trait (the etcd store today, the
//! watch cache next) → `response` for encoding, `error` for every failure.
//! See ARCHITECTURE.md.

pub mod admission;
pub mod aggregator;
pub mod allocator;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod bootstrap;
pub mod clusters;
pub mod compaction;
pub mod componentstatus;
pub mod config;
pub mod controllers;
pub mod conversion;
pub mod crd;
pub mod discovery;
pub mod encryption;
pub mod error;
pub mod etcd_process;
pub mod event_ttl;
mod filters;
pub mod flowcontrol;
pub mod flowcontrol_bootstrap;
pub mod handlers;
pub mod health;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod object;
pub mod openapi;
pub mod rbac;
pub mod registry;
/// Request paths, parsed without I/O (lives in `apimachinery` so it can be fuzzed).
pub use apimachinery::request;
pub mod response;
pub mod scope;
pub mod server;
pub mod state;
pub mod storage_format;
pub mod storage_migration;
pub mod telemetry;
pub mod version;
pub mod webhook;

use config::Config;
use etcd_process::{EtcdProcess, EtcdProcessError};
use server::AppState;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use watchcache::etcd::EtcdStore;
use watchcache::{Cacher, CacherConfig, Storage};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    EtcdProcess(#[from] EtcdProcessError),
    #[error("cannot reach etcd at {endpoints}: {source}")]
    EtcdUnreachable {
        endpoints: String,
        #[source]
        source: watchcache::StorageError,
    },
    #[error("cannot move objects to kube's key layout: {0}")]
    Migration(#[source] etcd_client::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Encryption(#[from] encryption::ConfigError),
    #[error(transparent)]
    Overrides(#[from] clusters::PlanError),
    #[error(transparent)]
    AuditPolicy(#[from] audit::policy::PolicyError),
    #[error("cannot open the audit log {path}: {source}")]
    AuditLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("admission plugins: {0}")]
    Admission(String),
    #[error("server error: {0}")]
    Serve(#[source] std::io::Error),
    #[error("--listen={0} is not a loopback address: the plain-HTTP port serves every request as a cluster admin; use --secure-listen for other addresses")]
    InsecureListen(std::net::SocketAddr),
    #[error("secure serving: {0}")]
    Secure(String),
    #[error("invalid --authorization-mode: {0}")]
    AuthorizationMode(String),
}

/// Starts every controller of this server on `state` (the composition
/// root wires them: `controllers` holds their shared shape and the
/// built-in ones, admission and the aggregator their own); `leader`
/// tells whether this replica leads (`None`: it always does).
fn start_controllers(
    state: &Arc<AppState>,
    leader: Option<tokio::sync::watch::Receiver<bool>>,
) -> Vec<tokio::task::AbortHandle> {
    let mut all = vec![
        controllers::namespace::controller(state),
        controllers::garbagecollector::controller(state),
    ];
    all.extend(controllers::serviceaccount::controllers(state));
    all.extend(controllers::repair_ip::controller(state));
    all.extend(controllers::repair_ports::controller(state));
    all.extend(crate::admission::typecheck::controller(state));
    all.extend(controllers::resourcequota::controller(state));
    let (availability, crd_apiservices) = crate::aggregator::available::controllers(state);
    all.extend(crd_apiservices);
    let mut handles: Vec<_> = all
        .into_iter()
        .map(|c| controllers::start(Arc::clone(state), leader.clone(), c))
        .collect();
    // Every replica writes the kubernetes endpoints (see its module doc),
    // and enforces the admission policies.
    handles.extend(
        controllers::kubernetes_endpoints::controller(state)
            .map(|c| controllers::start(Arc::clone(state), None, c)),
    );
    handles.extend(
        crate::admission::policy::controller(state, &state.policies)
            .map(|c| controllers::start(Arc::clone(&state.backend), None, c)),
    );
    handles.extend(
        crate::admission::webhooks::controller(state, &state.webhooks)
            .map(|c| controllers::start(Arc::clone(&state.backend), None, c)),
    );
    // Every replica routes by its own view of the APIServices' availability.
    handles.extend(availability.map(|c| controllers::start(Arc::clone(state), None, c)));
    handles.extend(
        crate::admission::mutating_policy::controller(state, &state.mutating_policies)
            .map(|c| controllers::start(Arc::clone(&state.backend), None, c)),
    );
    handles
}

/// The chain's authorizer for `--authorization-mode` (already validated),
/// and the RBAC index when RBAC is one of the modes.
pub fn authorizer(
    modes: &[String],
    store: Arc<dyn Storage>,
    prefix: &str,
) -> (Arc<dyn auth::Authorizer>, Option<Arc<rbac::Rbac>>) {
    let mut index = None;
    let mut chain: Vec<Arc<dyn auth::Authorizer>> = Vec::new();
    for mode in modes {
        match mode.as_str() {
            "RBAC" => {
                let r = rbac::Rbac::start(Arc::clone(&store), prefix);
                index = Some(Arc::clone(&r));
                chain.push(r);
            }
            _ => chain.push(Arc::new(auth::AlwaysAllow)),
        }
    }
    let authorizer: Arc<dyn auth::Authorizer> = if chain.len() == 1 {
        chain.remove(0)
    } else {
        Arc::new(rbac::Union(chain))
    };
    (authorizer, index)
}

/// Connects to etcd and proves it answers, within `timeout`.
pub async fn connect_store(
    endpoints: &[String],
    timeout: Duration,
) -> Result<EtcdStore, StartError> {
    let unreachable = |source| StartError::EtcdUnreachable {
        endpoints: endpoints.join(","),
        source,
    };
    let store = EtcdStore::connect(endpoints, timeout)
        .await
        .map_err(unreachable)?;
    store.revision().await.map_err(unreachable)?;
    Ok(store)
}

/// The audit policy and log of `--audit-policy-file` and `--audit-log-*`
/// (auditing is on when both a policy and a log path are given, as in
/// kube-apiserver).
fn audit_from(cfg: &Config) -> Result<Option<Arc<audit::Auditor>>, StartError> {
    let (Some(policy), Some(path)) = (&cfg.audit_policy_file, &cfg.audit_log_path) else {
        if cfg.audit_policy_file.is_some() != cfg.audit_log_path.is_some() {
            tracing::warn!(
                "auditing needs both --audit-policy-file and --audit-log-path; it is off"
            );
        }
        return Ok(None);
    };
    let policy = audit::policy::Policy::load(policy)?;
    let sink = audit::Sink::start(audit::LogConfig {
        path: path.clone(),
        max_bytes: cfg.audit_log_maxsize.saturating_mul(1 << 20),
        max_backups: cfg.audit_log_maxbackup,
    })
    .map_err(|source| StartError::AuditLog {
        path: path.clone(),
        source,
    })?;
    Ok(Some(Arc::new(audit::Auditor { policy, sink })))
}

/// Runs the server until SIGINT/SIGTERM.
pub async fn run(cfg: Config) -> Result<(), StartError> {
    rbac::validate_modes(&cfg.authorization_mode).map_err(StartError::AuthorizationMode)?;
    if !cfg.listen.ip().is_loopback() {
        return Err(StartError::InsecureListen(cfg.listen));
    }
    // Configuration errors end the process before anything starts.
    let encryption = cfg
        .encryption_provider_config
        .as_deref()
        .map(encryption::EncryptionConfig::load)
        .transpose()?;
    let planned = clusters::plan(&cfg.etcd_servers_overrides, &registry::RESOURCES)?;
    let auditor = audit_from(&cfg)?;
    let admission_chain = admission::plugins::Chain::new(
        &cfg.enable_admission_plugins,
        &cfg.disable_admission_plugins,
    )
    .map_err(StartError::Admission)?;
    let mut embedded = None;
    let endpoints = if cfg.etcd_servers.is_empty() {
        let p = EtcdProcess::start(&cfg.data_dir).await?;
        tracing::info!(endpoint = p.endpoint(), "started embedded etcd");
        let eps = vec![p.endpoint().to_string()];
        embedded = Some(p);
        eps
    } else {
        cfg.etcd_servers.clone()
    };
    let timeout = Duration::from_secs(cfg.etcd_request_timeout.max(1));
    let mut store = connect_store(&endpoints, timeout).await?;
    let transformers = match &encryption {
        Some(enc) => {
            let t = enc.transformers(&cfg.etcd_prefix, registry::Registry::builtin());
            tracing::info!(prefixes = ?t, "encryption at rest configured");
            t
        }
        None => watchcache::transform::Transformers::none(),
    };
    let transformers = transformers.with_protobuf(storage_format::protobuf_prefixes(
        &cfg.etcd_prefix,
        cfg.storage_media_type,
    ));
    store = store.with_transformers(transformers.clone());
    let etcd_client = store.client();
    if cfg.migrate_storage_layout {
        storage_migration::migrate(
            &etcd_client,
            store.transformers(),
            &cfg.etcd_prefix,
            &registry::RESOURCES,
        )
        .await
        .map_err(StartError::Migration)?;
    }
    // Each override cluster: its own client, the same value transformers
    // (encryption at rest and the storage media type go by key).
    let mut override_stores = Vec::with_capacity(planned.len());
    for p in &planned {
        // A cluster that hangs must cost only its own resources' requests
        // a timeout each, not every one of them: they fail fast while it
        // does not answer.
        let cluster = connect_store(&p.servers, timeout)
            .await?
            .with_transformers(transformers.clone())
            .with_fail_fast();
        if cfg.migrate_storage_layout {
            storage_migration::migrate(
                &cluster.client(),
                cluster.transformers(),
                &cfg.etcd_prefix,
                &registry::RESOURCES,
            )
            .await
            .map_err(StartError::Migration)?;
        }
        tracing::info!(cluster = %p.name, servers = %p.servers.join(";"), segments = ?p.segments, "etcd servers override");
        override_stores.push(cluster);
    }
    let etcd_telemetry = store.telemetry().clone();
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: cfg.listen,
            source,
        })?;
    let mut state = AppState::with_address(
        Arc::new(store.clone()),
        &cfg.etcd_prefix,
        &cfg.listen.to_string(),
    );
    state.observe_etcd(&store);
    for cluster in &override_stores {
        state.observe_etcd(cluster);
    }
    state.etcd_endpoints = endpoints.clone();
    state.services = allocator::ServiceNetwork {
        cidr: cfg.service_cluster_ip_range.trunc(),
        node_ports: cfg.service_node_port_range.clone(),
    };
    state.event_ttl = event_ttl::EventLeases::new(cfg.event_ttl);
    state.endpoint_lease_ttl = cfg.endpoint_reconciler_lease_ttl;
    state.repair_interval = cfg.allocation_repair_interval;
    state.quota.sync_period = cfg.resource_quota_sync_period;
    state.admission = admission_chain;
    let (mutating, validating) = state.admission.names();
    tracing::info!(
        "Loaded {} mutating admission controller(s) successfully in the following order: {}.",
        mutating.len(),
        mutating.join(",")
    );
    tracing::info!(
        "Loaded {} validating admission controller(s) successfully in the following order: {}.",
        validating.len(),
        validating.join(",")
    );
    let cache_config = CacherConfig {
        prefix: format!("{}/", cfg.etcd_prefix.trim_end_matches('/')),
        window_retention: Duration::from_secs(cfg.watch_cache_window_seconds),
        window_max_events: cfg.watch_cache_max_events,
        window_max_bytes: cfg.watch_cache_max_bytes,
        ..CacherConfig::default()
    };
    if cfg.watch_cache {
        state = state.with_cache(Cacher::new(store, cache_config.clone()));
    }
    // Every override cluster gets a watch cache of its own (its revisions,
    // its consistent reads, its failures), and the backend routes its key
    // ranges to it.
    let clusters: Vec<clusters::Cluster> = planned
        .into_iter()
        .zip(override_stores)
        .map(|(p, etcd)| clusters::Cluster {
            prefixes: p
                .segments
                .iter()
                .map(|s| format!("{}/{s}/", cfg.etcd_prefix.trim_end_matches('/')))
                .collect(),
            cache: cfg
                .watch_cache
                .then(|| Cacher::new(etcd.clone(), cache_config.clone())),
            name: p.name,
            servers: p.servers,
            etcd,
        })
        .collect();
    state = state.with_clusters(clusters);
    let (authorizer, rbac_index) = authorizer(
        &cfg.authorization_mode,
        Arc::clone(&state.store),
        &cfg.etcd_prefix,
    );
    state.authorizer = authorizer;
    state.rbac = rbac_index;
    // Work that must run once per cluster follows the elected leader.
    let leadership = leader::Leadership::spawn(
        etcd_client.clone(),
        leader::ElectionConfig {
            key: leader::election_key(&cfg.etcd_prefix),
            identity: format!(
                "{}-{}-{}",
                cfg.listen,
                std::process::id(),
                uuid::Uuid::new_v4()
            ),
            ttl_seconds: 15,
            retry: Duration::from_secs(2),
            timeout,
        },
    );
    let compactor = (!cfg.etcd_compaction_interval.is_zero()).then(|| {
        let mut c = compaction::Compactor::new(etcd_client, cfg.etcd_compaction_interval, timeout)
            .with_leader(leadership.subscribe())
            .with_telemetry(etcd_telemetry);
        if let Some(cache) = &state.cache {
            c = c.with_cache(cache.clone());
        }
        let mut all = vec![tokio::spawn(c.run())];
        // Each override cluster is compacted too, by the same leader, each
        // through its own coordination key (kube runs one compactor per
        // storage backend).
        for cluster in state.clusters.iter() {
            let mut c = compaction::Compactor::new(
                cluster.etcd.client(),
                cfg.etcd_compaction_interval,
                timeout,
            )
            .with_leader(leadership.subscribe())
            .with_telemetry(cluster.etcd.telemetry().clone());
            if let Some(cache) = &cluster.cache {
                c = c.with_cache(cache.clone());
            }
            all.push(tokio::spawn(c.run()));
        }
        all
    });
    let secure = match cfg.secure_listen.0 {
        None => None,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Listen { addr, source })?;
            let bound = listener.local_addr().unwrap_or(addr);
            // File I/O, key generation and maybe a wait on another
            // replica's PKI lock: off the async workers.
            let (setup_cfg, store) = (cfg.clone(), Arc::clone(&state.store));
            let s =
                tokio::task::spawn_blocking(move || auth::secure::setup(&setup_cfg, bound, store))
                    .await
                    .map_err(|e| StartError::Secure(e.to_string()))?
                    .map_err(StartError::Secure)?;
            state.authenticator = Some(Arc::clone(&s.authenticator));
            state.anonymous_auth = cfg.anonymous_auth;
            state.service_accounts = Some(Arc::clone(&s.service_accounts));
            state.root_ca = s.ca_pem.clone();
            if let Some(k) = &s.admin_kubeconfig {
                tracing::info!(kubeconfig = %k.display(), "wrote the admin kubeconfig");
            }
            tracing::info!(secure_listen = %bound, "serving TLS");
            if cfg.endpoint_reconciler_type == config::EndpointReconcilerType::Lease {
                let ip = controllers::kubernetes_endpoints::advertise_address(
                    cfg.advertise_address,
                    bound,
                    controllers::kubernetes_endpoints::default_route_address,
                );
                tracing::info!(advertise = %ip, "publishing this replica in the kubernetes endpoints");
                state.advertise = Some(std::net::SocketAddr::new(ip, bound.port()));
            }
            Some((listener, s.tls))
        }
    };
    if state.service_accounts.is_none() {
        // Without the secure port, tokens are still issued (kubectl create
        // token, TokenRequest) from the key under --data-dir.
        let (setup_cfg, store) = (cfg.clone(), Arc::clone(&state.store));
        let sa =
            tokio::task::spawn_blocking(move || auth::secure::service_accounts(&setup_cfg, store))
                .await
                .map_err(|e| StartError::Secure(e.to_string()))?
                .map_err(StartError::Secure)?;
        state.service_accounts = Some(sa);
    }
    state.audit = auditor;
    // The aggregator's front-proxy client certificate (made under
    // --data-dir unless given).
    let proxy_cfg = cfg.clone();
    let identity = tokio::task::spawn_blocking(move || proxy_cfg.proxy_identity())
        .await
        .map_err(|e| StartError::Secure(e.to_string()))?
        .map_err(StartError::Secure)?;
    state.proxy_identity = Some(Arc::new(identity));
    state.watch_budget = Arc::new(limits::WatchBudget::new(cfg.max_watches_per_user));
    // With APF on, its seats (the two limits together) replace the
    // max-inflight budgets, as in kube.
    state.apf = Arc::new(flowcontrol::Apf::new(
        cfg.enable_priority_and_fairness,
        cfg.max_requests_inflight + cfg.max_mutating_requests_inflight,
        state.metrics.as_ref().map(|m| m.registry()),
    ));
    let state = Arc::new(state.with_limits(if cfg.enable_priority_and_fairness {
        limits::Limits::new(0, 0, cfg.request_timeout)
    } else {
        limits::Limits::new(
            cfg.max_requests_inflight,
            cfg.max_mutating_requests_inflight,
            cfg.request_timeout,
        )
    }));
    let registry = state.registry.clone();
    tokio::task::spawn_blocking(move || openapi::warm_up(registry));
    openapi::spawn_warmer(state.registry.clone());
    tokio::spawn(bootstrap::run(Arc::clone(&state)));
    let crds = crd::controller::start(Arc::clone(&state.backend), Some(leadership.subscribe()));
    let mut controllers = start_controllers(&state, Some(leadership.subscribe()));
    if state.apf.enabled {
        let apf = Arc::new(flowcontrol::Configuration {
            backend: Arc::clone(&state.backend),
            apf: Arc::clone(&state.apf),
        });
        controllers.extend(
            flowcontrol::controller(&apf).map(|c| controllers::start(Arc::clone(&apf), None, c)),
        );
        controllers.push(flowcontrol::spawn_maintenance(
            Arc::clone(&state.apf),
            Arc::clone(&state.backend),
        ));
    }
    let endpoint_lease =
        controllers::kubernetes_endpoints::EndpointLease::spawn(Arc::clone(&state)).map(Arc::new);
    tracing::info!(listen = %cfg.listen, "serving");
    let app = server::router(Arc::clone(&state));
    let secure = secure.map(|(l, tls)| (l, tls, server::secure_router(Arc::clone(&state))));
    let served = serve_until_stopped(
        listener,
        app,
        secure,
        Arc::clone(&state),
        endpoint_lease,
        &cfg,
    )
    .await;
    for c in compactor.into_iter().flatten() {
        c.abort();
    }
    crds.abort();
    for c in controllers {
        c.abort();
    }
    // Hand leadership over at once rather than after the lease's TTL (but
    // never hold the exit up for an unreachable etcd).
    let _ = tokio::time::timeout(Duration::from_secs(2), leadership.resign()).await;
    if let Some(p) = embedded {
        p.stop().await;
    }
    served.map_err(StartError::Serve)
}

/// Serves until SIGTERM/SIGINT, then shuts down as kube-apiserver does:
/// `/readyz` fails at once (load balancers drain the replica) while the
/// server keeps serving for `shutdown_delay_duration`; then it stops
/// accepting connections, ends open watch streams cleanly, and waits for
/// in-flight requests up to `shutdown_timeout`. `/livez` stays green.
/// The secure port, when on, follows the same steps.
async fn serve_until_stopped(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    secure: Option<(
        tokio::net::TcpListener,
        Arc<rustls::ServerConfig>,
        axum::Router,
    )>,
    state: Arc<AppState>,
    endpoint_lease: Option<Arc<controllers::kubernetes_endpoints::EndpointLease>>,
    cfg: &Config,
) -> std::io::Result<()> {
    use std::future::IntoFuture;
    let delay = cfg.shutdown_delay_duration;
    let deadline = cfg.shutdown_timeout;
    let (stop_accepting, accepting_stopped) = tokio::sync::oneshot::channel::<()>();
    let (secure_stop, secure_stopped) = tokio::sync::watch::channel(false);
    let lifecycle = Arc::clone(&state);
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        lifecycle.shutting_down.store(true, Ordering::Release);
        tracing::info!(
            ?delay,
            "shutting down: /readyz fails, serving on for the delay"
        );
        // Leave the kubernetes endpoints first (kube's pre-shutdown hook),
        // so in-cluster clients move away while this replica still serves.
        let left = tokio::time::Instant::now();
        if let Some(lease) = endpoint_lease {
            lease.release(Duration::from_secs(2)).await;
        }
        tokio::time::sleep(delay.saturating_sub(left.elapsed())).await;
        let _ = stop_accepting.send(());
    });
    let streams = Arc::clone(&state);
    // The peer address reaches the audit log (`sourceIPs`). One service
    // for every connection (the route table is shared, not rebuilt per
    // connection: about 4 KiB each open watch connection would keep; see
    // BENCHMARKS.md).
    let serve = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        if accepting_stopped.await.is_err() {
            // The signal task is gone: never stop on our own.
            std::future::pending::<()>().await;
        }
        tracing::info!("stopped accepting; ending watch streams");
        secure_stop.send_replace(true);
        streams.stop_streams();
    })
    .into_future();
    let secure_serve = async move {
        match secure {
            Some((l, tls, router)) => auth::tls::serve(l, tls, router, secure_stopped).await,
            None => Ok(()),
        }
    };
    // Both listeners run until they have drained; the plain one's end
    // (after graceful shutdown) is what the select below waits on, with the
    // secure one joined to it.
    let serve = async move {
        let (plain, secure) = tokio::join!(serve, secure_serve);
        plain.and(secure)
    };
    let mut stopping = state.stopping.subscribe();
    let served = tokio::select! {
        r = serve => r,
        _ = async {
            let _ = stopping.wait_for(|s| *s).await;
            tokio::time::sleep(deadline).await;
        } => {
            tracing::warn!(?deadline, "in-flight requests did not finish in time; exiting");
            Ok(())
        }
    };
    signals.abort();
    served
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[tokio::test]
    async fn bad_encryption_or_audit_configuration_stops_the_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "kind: Nothing\n").expect("write");
        let bad = bad.to_string_lossy().into_owned();
        let log = dir.path().join("audit.log").to_string_lossy().into_owned();
        let enc = Config::parse_from(["apiserver", "--encryption-provider-config", &bad]);
        assert!(matches!(run(enc).await, Err(StartError::Encryption(_))));
        let audit = Config::parse_from([
            "apiserver",
            "--audit-policy-file",
            &bad,
            "--audit-log-path",
            &log,
        ]);
        assert!(matches!(run(audit).await, Err(StartError::AuditPolicy(_))));
    }
}

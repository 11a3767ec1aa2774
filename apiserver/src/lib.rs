//! A Kubernetes-compatible API server on etcd.
//!
//! Request path: `server::router` → `handlers::dispatch` (path and verb
//! resolution through `request` and `registry`) → one verb module under
//! `handlers` → the `watchcache::Storage` trait (the etcd store today, the
//! watch cache next) → `response` for encoding, `error` for every failure.
//! See ARCHITECTURE.md.

pub mod bootstrap;
pub mod compaction;
pub mod config;
pub mod discovery;
pub mod error;
pub mod etcd_process;
pub mod handlers;
pub mod health;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod object;
pub mod openapi;
pub mod registry;
pub mod request;
pub mod response;
pub mod server;

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
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Serve(#[source] std::io::Error),
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
    store.current_revision().await.map_err(unreachable)?;
    Ok(store)
}

/// Runs the server until SIGINT/SIGTERM.
pub async fn run(cfg: Config) -> Result<(), StartError> {
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
    let store = connect_store(&endpoints, timeout).await?;
    let etcd_client = store.client();
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
    if cfg.watch_cache {
        let cache = Cacher::new(
            store,
            CacherConfig {
                prefix: format!("{}/", cfg.etcd_prefix.trim_end_matches('/')),
                window_retention: Duration::from_secs(cfg.watch_cache_window_seconds),
                window_max_events: cfg.watch_cache_max_events,
                window_max_bytes: cfg.watch_cache_max_bytes,
                ..CacherConfig::default()
            },
        );
        state = state.with_cache(cache);
    }
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
        let mut c = compaction::Compactor::new(
            etcd_client,
            &cfg.etcd_prefix,
            cfg.etcd_compaction_interval,
            timeout,
        )
        .with_leader(leadership.subscribe());
        if let Some(cache) = &state.cache {
            c = c.with_cache(cache.clone());
        }
        tokio::spawn(c.run())
    });
    let state = Arc::new(state.with_limits(limits::Limits::new(
        cfg.max_requests_inflight,
        cfg.max_mutating_requests_inflight,
        cfg.request_timeout,
    )));
    let registry = state.registry;
    tokio::task::spawn_blocking(move || openapi::warm_up(registry));
    tokio::spawn(bootstrap::run(Arc::clone(&state)));
    tracing::info!(listen = %cfg.listen, "serving");
    let app = server::router(Arc::clone(&state));
    let served = serve_until_stopped(listener, app, Arc::clone(&state), &cfg).await;
    if let Some(c) = compactor {
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
async fn serve_until_stopped(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    state: Arc<AppState>,
    cfg: &Config,
) -> std::io::Result<()> {
    use std::future::IntoFuture;
    let delay = cfg.shutdown_delay_duration;
    let deadline = cfg.shutdown_timeout;
    let (stop_accepting, accepting_stopped) = tokio::sync::oneshot::channel::<()>();
    let lifecycle = Arc::clone(&state);
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        lifecycle.shutting_down.store(true, Ordering::Release);
        tracing::info!(
            ?delay,
            "shutting down: /readyz fails, serving on for the delay"
        );
        tokio::time::sleep(delay).await;
        let _ = stop_accepting.send(());
    });
    let streams = Arc::clone(&state);
    // One service for every connection: serving the `Router` itself would
    // rebuild its route table per connection (about 4 KiB that each open
    // watch connection keeps; see BENCHMARKS.md).
    let serve = axum::serve(listener, app.into_make_service())
        .with_graceful_shutdown(async move {
            if accepting_stopped.await.is_err() {
                // The signal task is gone: never stop on our own.
                std::future::pending::<()>().await;
            }
            tracing::info!("stopped accepting; ending watch streams");
            streams.stop_streams();
        })
        .into_future();
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

//! The APIService controllers.
//!
//! - `apiservice_availability` (every replica: each keeps its own routing
//!   table) checks a remote APIService as kube's
//!   `AvailableConditionController` does: the Service exists, listens on
//!   the port, its EndpointSlices have a ready address for that port, and
//!   a GET of `/apis/<group>/<version>` on it answers 2xx within 5 s (as
//!   `system:kube-aggregator` in `system:masters`, with the front-proxy
//!   certificate). The outcome goes into [`super::Remotes`] and, when it
//!   changed, into the `Available` condition with kube's reason and
//!   message. Each remote APIService is looked at again every
//!   [`RECHECK`], so a backend that goes away (or comes back) shows
//!   without any event.
//! - `crd_apiservices` (leader only) keeps one local APIService per
//!   group-version that CRDs serve, as kube's `crdregistration`
//!   controller does (label `kube-aggregator.kubernetes.io/automanaged:
//!   "true"`, groupPriorityMinimum 1000, versionPriority 100), and removes
//!   those no CRD serves any longer.
//!
//! A controller on the top floor: it runs on the server's state (the
//! backend, the remotes table, the proxy identity); nothing below the
//! state names it.

use super::{Remote, ServiceRef};
use crate::controllers::{name_key, queue::Backoff, Controller, Next, Source};
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use watchcache::{ListOptions, StorageError};

/// How often a remote APIService is checked again.
pub const RECHECK: Duration = Duration::from_secs(5);
/// How often an available extension's OpenAPI documents are read again.
const OPENAPI_REFRESH: Duration = Duration::from_secs(60);
/// kube's bound on one discovery check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of an extension's discovery document read.
const MAX_DISCOVERY_BYTES: usize = 4 << 20;
const GROUP: &str = "apiregistration.k8s.io";
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Both controllers (none without the APIService resource).
pub fn controllers(
    state: &AppState,
) -> (Option<Controller<AppState>>, Option<Controller<AppState>>) {
    let Some(res) = state.registry.lookup(GROUP, "v1", "apiservices") else {
        return (None, None);
    };
    let availability = Controller {
        name: "apiservice_availability",
        sources: vec![Source {
            prefix: state.collection_prefix(&res, None),
            key_of: name_key,
        }],
        feed: None,
        reconcile: Arc::new(|state, key| bounded_check(state, key).boxed()),
        workers: 2,
        capacity: 4096,
        backoff: Backoff::default(),
        resync: None,
    };
    let crds = state
        .registry
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .map(|crd| Controller {
            name: "crd_apiservices",
            sources: vec![
                Source {
                    prefix: state.collection_prefix(&crd, None),
                    key_of: |_| Some(String::new()),
                },
                Source {
                    prefix: state.collection_prefix(&res, None),
                    key_of: |v| {
                        (v.pointer("/metadata/labels")
                            .and_then(|l| l.get(AUTOMANAGED))
                            .and_then(Value::as_str)
                            == Some("true"))
                        .then(String::new)
                    },
                },
            ],
            feed: None,
            reconcile: Arc::new(|state, _| sync_crd_apiservices(state).boxed()),
            workers: 1,
            capacity: 16,
            backoff: Backoff::default(),
            resync: None,
        });
    (Some(availability), crds)
}

/// The `Available` condition an outcome stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Condition {
    status: &'static str,
    reason: String,
    message: String,
}

/// The most one check may take: its network steps are bounded (about 25 s
/// at worst); this bounds the rest, so that one check stuck on anything
/// else is retried instead of holding its APIService forever.
const CHECK_BUDGET: Duration = Duration::from_secs(30);

async fn bounded_check(state: Arc<AppState>, name: String) -> Result<Next, String> {
    match tokio::time::timeout(CHECK_BUDGET, check(state, name.clone())).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(apiservice = %name, "availability check did not finish in time; retrying");
            Err("availability check timed out".into())
        }
    }
}

async fn check(state: Arc<AppState>, name: String) -> Result<Next, String> {
    let Some(res) = state.registry.lookup(GROUP, "v1", "apiservices") else {
        return Ok(Next::Done);
    };
    let key = state.key(&res, None, &name);
    // A consistent read: the event that queued this key may have come from
    // an etcd watch (the cache was not serving yet) while the cache still
    // lags behind it; "any recent state" could then miss a new APIService
    // and drop it for good.
    let Some(current) = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?
    else {
        state.discovery.remotes().remove(&name);
        return Ok(Next::Done);
    };
    let v = current.value();
    let Some(service) = v.pointer("/spec/service").filter(|s| !s.is_null()) else {
        // Local: served here, always available.
        state.discovery.remotes().remove(&name);
        write_condition(
            &state,
            &key,
            Condition {
                status: "True",
                reason: "Local".into(),
                message: "Local APIServices are always available".into(),
            },
        )
        .await?;
        return Ok(Next::Done);
    };
    let text = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let svc = ServiceRef {
        namespace: service
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        name: service
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        port: service.get("port").and_then(Value::as_i64).unwrap_or(443),
    };
    let (group, version) = (text("/spec/group"), text("/spec/version"));
    let ca = text("/spec/caBundle");
    let ca = if ca.is_empty() {
        None
    } else {
        use base64::Engine;
        Some(
            base64::engine::general_purpose::STANDARD
                .decode(ca.as_bytes())
                .map_err(|e| format!("caBundle: {e}"))?,
        )
    };
    let insecure = v
        .pointer("/spec/insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let identity = state.proxy_identity.as_deref();
    let previous = state
        .discovery
        .remotes()
        .route(&group, &version)
        .filter(|p| p.name == name);
    // The same trust keeps the same TLS configuration and its open
    // connections.
    let kept = previous
        .as_ref()
        .filter(|p| p.ca_bundle == ca && p.insecure == insecure)
        .map(|p| (Arc::clone(&p.tls), Arc::clone(&p.pool)));
    let (tls, pool) = match kept {
        Some(k) => k,
        None => match super::client_tls(ca.as_deref(), insecure, identity) {
            Ok(t) => (Arc::new(t), Arc::default()),
            Err(e) => {
                // Its requests fail verification: it stays unavailable.
                tracing::warn!(apiservice = %name, error = %e, "cannot build the TLS configuration");
                (
                    Arc::new(super::client_tls(None, false, None)?),
                    Arc::default(),
                )
            }
        },
    };
    // kube's check takes any certificate (it only asks whether something
    // answers); the proxy verifies with `tls`.
    let check_tls = Arc::new(super::client_tls(None, true, identity)?);
    let (condition, resources) = match super::resolve(&state, &svc).await {
        Err(u) => (
            Condition {
                status: if u.unknown { "Unknown" } else { "False" },
                reason: u.reason.to_string(),
                message: u.message,
            },
            None,
        ),
        // The discovery document is read over the verified connection the
        // proxy uses; when only that fails, kube's unverified check decides
        // availability (the resources shown stay the last verified ones).
        Ok(ep) => match match discover(&ep, &svc, &tls, &group, &version).await {
            Ok(doc) => Ok(doc),
            Err(_) => discover(&ep, &svc, &check_tls, &group, &version)
                .await
                .map(|_| None),
        } {
            Ok(doc) => (
                Condition {
                    status: "True",
                    reason: "Passed".into(),
                    message: "all checks passed".into(),
                },
                doc.map(Arc::new),
            ),
            Err(message) => (
                Condition {
                    status: "False",
                    reason: "FailedDiscoveryCheck".into(),
                    message,
                },
                None,
            ),
        },
    };
    let number = |p: &str| v.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    // A group-version that fails its check keeps the resources it last
    // showed (discovery marks them stale), as kube's discovery does.
    // The OpenAPI documents are read once available, then every
    // OPENAPI_REFRESH (they change with the extension's version, rarely).
    let mut spec = previous
        .as_ref()
        .map(|p| p.openapi.clone())
        .unwrap_or_default();
    if condition.status == "True"
        && spec
            .fetched
            .is_none_or(|at| at.elapsed() >= OPENAPI_REFRESH)
    {
        if let Ok(ep) = super::resolve(&state, &svc).await {
            spec = openapi(&ep, &svc, &tls, &group, &version).await;
        }
    }
    let resources = resources.or_else(|| previous.and_then(|p| p.resources));
    state.discovery.remotes().upsert(Remote {
        name: name.clone(),
        group,
        version,
        service: svc,
        group_priority: number("/spec/groupPriorityMinimum"),
        version_priority: number("/spec/versionPriority"),
        available: condition.status == "True",
        resources,
        openapi: spec,
        tls,
        ca_bundle: ca,
        insecure,
        pool,
    });
    write_condition(&state, &key, condition).await?;
    Ok(Next::After(RECHECK))
}

/// GETs the group-version's discovery document; `Ok(None)` when it
/// answered 2xx with something other than an `APIResourceList`.
async fn discover(
    ep: &super::Endpoint,
    svc: &ServiceRef,
    tls: &Arc<rustls::ClientConfig>,
    group: &str,
    version: &str,
) -> Result<Option<Value>, String> {
    let doc = get_json(ep, svc, tls, &format!("/apis/{group}/{version}")).await?;
    Ok(doc.filter(|d| d.get("kind").and_then(Value::as_str) == Some("APIResourceList")))
}

/// The extension's OpenAPI documents of the group-version: v3
/// (`/openapi/v3/apis/<g>/<v>`) and v2 (`/openapi/v2`), each when it
/// serves one.
async fn openapi(
    ep: &super::Endpoint,
    svc: &ServiceRef,
    tls: &Arc<rustls::ClientConfig>,
    group: &str,
    version: &str,
) -> super::OpenApi {
    let fetch = |path: String| async move {
        get_json(ep, svc, tls, &path)
            .await
            .ok()
            .flatten()
            .filter(|d| d.get("paths").is_some_and(Value::is_object))
            .map(Arc::new)
    };
    super::OpenApi {
        v3: fetch(format!("/openapi/v3/apis/{group}/{version}")).await,
        v2: fetch("/openapi/v2".to_string()).await,
        fetched: Some(std::time::Instant::now()),
    }
}

/// GETs `path` as `system:kube-aggregator`; `Ok(None)` when the 2xx body
/// is not JSON.
async fn get_json(
    ep: &super::Endpoint,
    svc: &ServiceRef,
    tls: &Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<Option<Value>, String> {
    let url = format!("https://{}{path}", ep.authority());
    let failing = |e: String| format!("failing or missing response from {url}: Get {url:?}: {e}");
    let attempt = async {
        let mut sender = super::connect(ep, svc, tls, CHECK_TIMEOUT)
            .await
            .map_err(failing)?;
        let req = hyper::Request::get(path)
            .header(hyper::header::HOST, ep.authority())
            .header(hyper::header::ACCEPT, "application/json")
            .header("X-Remote-User", "system:kube-aggregator")
            .header("X-Remote-Group", "system:masters")
            .body(axum::body::Body::empty())
            .map_err(|e| failing(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| failing(e.to_string()))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("bad status from {url}: {}", status.as_u16()));
        }
        let body = http_body_util::Limited::new(resp.into_body(), MAX_DISCOVERY_BYTES)
            .collect()
            .await
            .map_err(|e| failing(e.to_string()))?
            .to_bytes();
        Ok(serde_json::from_slice::<Value>(&body).ok())
    };
    match tokio::time::timeout(CHECK_TIMEOUT + Duration::from_secs(1), attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out waiting for {url}")),
    }
}

/// Writes the `Available` condition when it differs from the stored one;
/// its lastTransitionTime moves only when its status does.
async fn write_condition(state: &AppState, key: &str, c: Condition) -> Result<(), String> {
    for _ in 0..3 {
        let Some(current) = state
            .store
            .get(key, Freshness::MostRecent)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        let conditions: Vec<Value> = current
            .value()
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let old = conditions
            .iter()
            .find(|x| x.get("type").and_then(Value::as_str) == Some("Available"))
            .cloned();
        let old = old.as_ref();
        let field = |x: &Value, f: &str| x.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(o) = old {
            if field(o, "status") == c.status
                && field(o, "reason") == c.reason
                && field(o, "message") == c.message
            {
                return Ok(());
            }
        }
        let transition = match old {
            Some(o) if field(o, "status") == c.status => o
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or_else(|| json!(crate::object::now())),
            _ => json!(crate::object::now()),
        };
        let fresh = json!({
            "type": "Available",
            "status": c.status,
            "lastTransitionTime": transition,
            "reason": c.reason,
            "message": c.message,
        });
        let mut next: Vec<Value> = conditions
            .into_iter()
            .filter(|x| x.get("type").and_then(Value::as_str) != Some("Available"))
            .collect();
        next.push(fresh);
        let mut obj = current.value().clone();
        obj["status"] = json!({"conditions": next});
        crate::object::meta_mut(&mut obj).remove("resourceVersion");
        if old.is_none_or(|o| field(o, "status") != c.status) {
            tracing::info!(key, status = c.status, reason = %c.reason, message = %c.message, "changing APIService availability");
        }
        match state.store.update(key, &obj, current.revision).await {
            Ok(_) => return Ok(()),
            Err(StorageError::Conflict { .. }) => continue,
            Err(StorageError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the APIService kept changing".into())
}

/// Makes the automanaged local APIServices exactly the group-versions the
/// CRDs serve.
async fn sync_crd_apiservices(state: Arc<AppState>) -> Result<Next, String> {
    let (Some(crds), Some(services)) = (
        state
            .registry
            .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        state.registry.lookup(GROUP, "v1", "apiservices"),
    ) else {
        return Ok(Next::Done);
    };
    let opts = || ListOptions {
        freshness: Freshness::MostRecent,
        limit: None,
        continue_from: None,
        predicate: Default::default(),
    };
    let mut wanted = std::collections::BTreeSet::new();
    for crd in state
        .store
        .list(&state.collection_prefix(&crds, None), &opts())
        .await
        .map_err(|e| e.to_string())?
        .items
    {
        let v = crd.value();
        let Some(group) = v.pointer("/spec/group").and_then(Value::as_str) else {
            continue;
        };
        for ver in v
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if ver.get("served").and_then(Value::as_bool) == Some(true) {
                if let Some(name) = ver.get("name").and_then(Value::as_str) {
                    wanted.insert(format!("{name}.{group}"));
                }
            }
        }
    }
    let existing = state
        .store
        .list(&state.collection_prefix(&services, None), &opts())
        .await
        .map_err(|e| e.to_string())?
        .items;
    for item in &existing {
        let v = item.value();
        let name = crate::object::name(v).unwrap_or("").to_string();
        let automanaged = v
            .pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED))
            .and_then(Value::as_str)
            == Some("true");
        if automanaged && !wanted.contains(&name) {
            match state
                .store
                .delete(&state.key(&services, None, &name), Some(item.revision))
                .await
            {
                Ok(_) | Err(StorageError::NotFound { .. }) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    for name in wanted {
        if existing
            .iter()
            .any(|i| crate::object::name(i.value()) == Some(name.as_str()))
        {
            // Someone's own APIService of that name (or ours) is there.
            continue;
        }
        let Some((version, group)) = name.split_once('.') else {
            continue;
        };
        let mut obj = json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name, "labels": {AUTOMANAGED: "true"}},
            "spec": {
                "group": group,
                "version": version,
                "groupPriorityMinimum": 1000,
                "versionPriority": 100,
            },
            "status": {"conditions": [{
                "type": "Available",
                "status": "True",
                "lastTransitionTime": crate::object::now(),
                "reason": "Local",
                "message": "Local APIServices are always available",
            }]},
        });
        let now = crate::object::now();
        crate::object::prepare_create(&services, &mut obj, None, &now);
        match state
            .store
            .create(&state.key(&services, None, &name), &obj)
            .await
        {
            Ok(_) | Err(StorageError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(Next::Done)
}

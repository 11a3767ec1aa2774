//! API aggregation (kube-aggregator's part of kube-apiserver): APIServices
//! that name a Service are served by an extension API server behind it.
//!
//! - [`Remotes`] is this replica's table of remote group-versions: what
//!   the [`available`] controller last found for each remote APIService
//!   (whether it is available, the extension's `APIResourceList`). The
//!   proxy routes by it and discovery merges it; its generation tells
//!   discovery when to rebuild.
//! - [`available`] checks each remote APIService as kube's availability
//!   controller does (Service, port, EndpointSlices, then a GET of the
//!   group-version's discovery) and writes the `Available` condition; it
//!   also keeps one local APIService per CRD group-version.
//! - [`proxy`] forwards requests under `/apis/<group>/<version>` to a
//!   ready endpoint, after authentication and authorization here, with the
//!   user in `X-Remote-*` headers and the front-proxy client certificate.
//! - [`requestheader`] is the other side: trusting `X-Remote-*` headers
//!   from a front proxy that presents a certificate of the request-header CA.
//!
//! This module, [`proxy`] and [`requestheader`] sit below the state, with
//! admission: they read the backend, the remotes table and the proxy
//! identity they are given, and import no state, handler or controller.
//! [`available`] is a controller on the top floor; nothing here calls it.

pub mod available;
pub mod proxy;
pub mod requestheader;

use crate::backend::Backend;
use apimachinery::read::Freshness;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The namespace and name of the ConfigMap that tells extension servers
/// how to authenticate this server's proxied requests.
pub const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";
pub const AUTH_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// A remote APIService's `spec.service`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: i64,
}

/// One remote group-version as this replica last checked it.
#[derive(Clone)]
pub struct Remote {
    /// The APIService's name (`<version>.<group>`).
    pub name: String,
    pub group: String,
    pub version: String,
    pub service: ServiceRef,
    pub group_priority: i64,
    pub version_priority: i64,
    /// Whether the last check passed (the `Available` condition).
    pub available: bool,
    /// The extension's `APIResourceList` for the group-version, from the
    /// last check that got one.
    pub resources: Option<Arc<Value>>,
    /// The extension's OpenAPI documents for the group-version.
    pub openapi: OpenApi,
    /// TLS to the extension: its caBundle (or no verification), and the
    /// front-proxy client certificate.
    pub tls: Arc<rustls::ClientConfig>,
    /// What `tls` was made from.
    pub ca_bundle: Option<Vec<u8>>,
    pub insecure: bool,
    /// Open connections to the extension, for the next requests.
    pub pool: Arc<Pool>,
}

/// Idle connections kept per APIService.
const MAX_IDLE: usize = 16;

type Sender = hyper::client::conn::http1::SendRequest<axum::body::Body>;

/// Open HTTP/1.1 connections to one extension, by endpoint. A connection
/// goes back once its request is sent; it is taken again only when ready
/// (its previous response finished), so a watch keeps its own.
#[derive(Default)]
pub struct Pool(std::sync::Mutex<Vec<(Endpoint, Sender)>>);

impl Pool {
    /// A ready connection to `ep`, if one is open.
    pub fn take(&self, ep: &Endpoint) -> Option<Sender> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(_, s)| !s.is_closed());
        let at = all.iter().position(|(e, s)| e == ep && s.is_ready())?;
        Some(all.swap_remove(at).1)
    }

    /// Keeps `sender` for a later request (busy connections too: they
    /// become ready when their response ends).
    pub fn give_back(&self, ep: &Endpoint, sender: Sender) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(_, s)| !s.is_closed());
        if all.len() < MAX_IDLE {
            all.push((ep.clone(), sender));
        }
    }
}

/// An extension's OpenAPI documents, as last read.
#[derive(Clone, Default)]
pub struct OpenApi {
    /// `/openapi/v3/apis/<group>/<version>`.
    pub v3: Option<Arc<Value>>,
    /// `/openapi/v2` (merged into this server's for its group-version).
    pub v2: Option<Arc<Value>>,
    /// When they were read (`None`: never).
    pub fetched: Option<std::time::Instant>,
}

/// The remote group-versions, keyed by (group, version). One writer (the
/// availability controller), cloneable snapshots for readers.
#[derive(Default)]
pub struct Remotes {
    table: RwLock<Arc<BTreeMap<(String, String), Remote>>>,
    generation: AtomicU64,
}

impl Remotes {
    /// The current table.
    pub fn snapshot(&self) -> Arc<BTreeMap<(String, String), Remote>> {
        Arc::clone(&self.table.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Bumped whenever what discovery shows of the table changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The remote serving `/apis/<group>/<version>`, if any.
    pub fn route(&self, group: &str, version: &str) -> Option<Remote> {
        self.snapshot()
            .get(&(group.to_string(), version.to_string()))
            .cloned()
    }

    /// Puts (or replaces) the entry of one APIService.
    pub fn upsert(&self, remote: Remote) {
        let mut guard = self.table.write().unwrap_or_else(|e| e.into_inner());
        let mut next = (**guard).clone();
        // An APIService whose spec moved to another group-version leaves
        // its old row.
        next.retain(|_, r| r.name != remote.name);
        let visible_change = guard
            .get(&(remote.group.clone(), remote.version.clone()))
            .is_none_or(|old| {
                old.name != remote.name
                    || old.available != remote.available
                    || old.resources != remote.resources
                    || old.openapi.v3 != remote.openapi.v3
                    || old.openapi.v2 != remote.openapi.v2
                    || old.group_priority != remote.group_priority
                    || old.version_priority != remote.version_priority
            });
        next.insert((remote.group.clone(), remote.version.clone()), remote);
        *guard = Arc::new(next);
        if visible_change {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Drops the entry of an APIService (deleted, or now local).
    pub fn remove(&self, name: &str) {
        let mut guard = self.table.write().unwrap_or_else(|e| e.into_inner());
        if !guard.values().any(|r| r.name == name) {
            return;
        }
        let mut next = (**guard).clone();
        next.retain(|_, r| r.name != name);
        *guard = Arc::new(next);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// The client certificate the proxy presents, and what extension servers
/// should trust it by.
#[derive(Debug, Clone)]
pub struct ProxyIdentity {
    pub cert_pem: String,
    pub key_pem: String,
    /// `requestheader-client-ca-file` of the published ConfigMap.
    pub ca_pem: Option<String>,
    /// `requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl ProxyIdentity {
    /// The `kube-system/extension-apiserver-authentication` ConfigMap, as
    /// kube publishes it: list values are JSON arrays.
    pub fn configmap(&self, client_ca: Option<&str>) -> Value {
        let list = |v: &[String]| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
        let mut data = serde_json::Map::new();
        if let Some(ca) = client_ca {
            data.insert("client-ca-file".into(), json!(ca));
        }
        if let Some(ca) = &self.ca_pem {
            data.insert("requestheader-client-ca-file".into(), json!(ca));
            data.insert(
                "requestheader-allowed-names".into(),
                json!(list(&self.allowed_names)),
            );
            data.insert(
                "requestheader-username-headers".into(),
                json!(list(&self.username_headers)),
            );
            data.insert(
                "requestheader-uid-headers".into(),
                json!(list(&self.uid_headers)),
            );
            data.insert(
                "requestheader-group-headers".into(),
                json!(list(&self.group_headers)),
            );
            data.insert(
                "requestheader-extra-headers-prefix".into(),
                json!(list(&self.extra_prefixes)),
            );
        }
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": AUTH_CONFIGMAP_NAME, "namespace": AUTH_CONFIGMAP_NAMESPACE},
            "data": data,
        })
    }
}

/// TLS to an extension server: trusting `ca_bundle` (PEM), or nothing
/// checked with `insecure`; presenting `identity`'s certificate.
pub fn client_tls(
    ca_bundle: Option<&[u8]>,
    insecure: bool,
    identity: Option<&ProxyIdentity>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::auth::tls::AnyServerCertificate(
                provider,
            )))
    } else {
        // Go's trust rules: a self-signed serving certificate may be the bundle.
        let trust = crate::webhook::trust::ServerTrust::new(ca_bundle, provider)
            .map_err(|e| e.to_string())?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(trust))
    };
    let mut config = match identity {
        Some(id) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("proxy client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                .map_err(|e| format!("proxy client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        None => builder.with_no_client_auth(),
    };
    // HTTP/1.1 only: upgrades (exec, port-forward) ride on it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Why a Service could not be resolved to an endpoint, in the words of
/// kube's availability controller (`reason`, `message`, and whether the
/// condition is Unknown rather than False).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub reason: &'static str,
    pub message: String,
    pub unknown: bool,
}

/// A ready endpoint of a Service's port: `host:port` to dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Resolves `svc` to a ready endpoint through the Service and its
/// EndpointSlices, with kube's checks in kube's order.
pub async fn resolve(backend: &Backend, svc: &ServiceRef) -> Result<Endpoint, Unresolved> {
    let (ns, name) = (&svc.namespace, &svc.name);
    let access = |reason: &'static str, e: String| Unresolved {
        reason,
        message: format!("service/{name} in {ns:?} cannot be checked due to: {e}"),
        unknown: true,
    };
    let services = backend
        .registry
        .lookup("", "v1", "services")
        .ok_or_else(|| access("ServiceAccessError", "services are not served".into()))?;
    let service = backend
        .store
        .get(
            &backend.key(&services, Some(ns), name),
            Freshness::NotOlderThan(0),
        )
        .await
        .map_err(|e| access("ServiceAccessError", e.to_string()))?
        .ok_or_else(|| Unresolved {
            reason: "ServiceNotFound",
            message: format!("service/{name} in {ns:?} is not present"),
            unknown: false,
        })?;
    let ports = service
        .value()
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(port) = ports
        .iter()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(svc.port))
    else {
        return Err(Unresolved {
            reason: "ServicePortError",
            message: format!(
                "service/{name} in {ns:?} is not listening on port {}",
                svc.port
            ),
            unknown: false,
        });
    };
    let port_name = port
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let slices = backend
        .endpoint_slices(ns)
        .await
        .map_err(|e| access("EndpointsAccessError", e))?;
    let slices: Vec<&Value> = slices
        .items
        .iter()
        .map(|o| o.value())
        .filter(|v| {
            v.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(name.as_str())
        })
        .collect();
    if slices.is_empty() {
        return Err(Unresolved {
            reason: "EndpointsNotFound",
            message: format!("cannot find endpointslices for service/{name} in {ns:?}"),
            unknown: false,
        });
    }
    slices
        .iter()
        .find_map(|s| ready_endpoint(s, &port_name))
        .ok_or_else(|| Unresolved {
            reason: "MissingEndpoints",
            message: format!(
                "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
            ),
            unknown: false,
        })
}

/// The first ready address of a slice with its port named `port_name`.
fn ready_endpoint(slice: &Value, port_name: &str) -> Option<Endpoint> {
    let port = slice
        .get("ports")
        .and_then(Value::as_array)?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)?
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())?;
    let host = slice
        .get("endpoints")
        .and_then(Value::as_array)?
        .iter()
        .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
        .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str))?;
    Some(Endpoint {
        host: host.to_string(),
        port,
    })
}

/// Opens an HTTP/1.1 connection over TLS to `ep`, checking the server's
/// certificate for `<service>.<namespace>.svc` as kube does.
pub async fn connect(
    ep: &Endpoint,
    svc: &ServiceRef,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<hyper::client::conn::http1::SendRequest<axum::body::Body>, String> {
    let dial = async {
        let tcp = tokio::net::TcpStream::connect((ep.host.as_str(), ep.port))
            .await
            .map_err(|e| format!("dial tcp {}: {e}", ep.authority()))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(format!("{}.{}.svc", svc.name, svc.namespace))
            .map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        Ok(sender)
    };
    tokio::time::timeout(timeout, dial)
        .await
        .unwrap_or_else(|_| Err(format!("dial tcp {}: i/o timeout", ep.authority())))
}

/// Headers that name who a proxied request runs as: set by the proxy,
/// never taken from the client.
pub fn remote_user_headers(user: &apimachinery::auth::UserInfo) -> Vec<(String, String)> {
    let mut out = vec![("X-Remote-User".to_string(), user.username.clone())];
    if !user.uid.is_empty() {
        out.push(("X-Remote-Uid".to_string(), user.uid.clone()));
    }
    for g in &user.groups {
        out.push(("X-Remote-Group".to_string(), g.clone()));
    }
    for (k, vs) in &user.extra {
        let key = percent_encoding::utf8_percent_encode(k, EXTRA_KEY).to_string();
        for v in vs {
            out.push((format!("X-Remote-Extra-{key}"), v.clone()));
        }
    }
    out
}

/// What an extra key escapes to be a header name (kube escapes everything
/// but the unreserved characters and a few legal in tokens).
const EXTRA_KEY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'*')
    .remove(b'+')
    .remove(b'^')
    .remove(b'`')
    .remove(b'|');

/// A remote group-version in aggregated discovery (apidiscovery.k8s.io/v2),
/// made from the extension's `APIResourceList`: its resources with their
/// subresources, `Stale` when the last check failed.
pub fn aggregated_version(r: &Remote) -> Value {
    let entries: Vec<&Value> = r
        .resources
        .as_deref()
        .and_then(|d| d.get("resources"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let text = |e: &Value, f: &str| e.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    let kind_of = |e: &Value| json!({"group": text(e, "group"), "version": text(e, "version"), "kind": text(e, "kind")});
    let mut resources: Vec<Value> = Vec::new();
    for e in &entries {
        let name = text(e, "name");
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let scope = if e.get("namespaced").and_then(Value::as_bool) == Some(true) {
            "Namespaced"
        } else {
            "Cluster"
        };
        let mut out = serde_json::Map::new();
        out.insert("resource".into(), json!(name));
        out.insert("responseKind".into(), kind_of(e));
        out.insert("scope".into(), json!(scope));
        out.insert("singularResource".into(), json!(text(e, "singularName")));
        out.insert(
            "verbs".into(),
            e.get("verbs").cloned().unwrap_or_else(|| json!([])),
        );
        for f in ["shortNames", "categories"] {
            if let Some(v) = e
                .get(f)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            {
                out.insert(f.into(), v.clone());
            }
        }
        let prefix = format!("{name}/");
        let subs: Vec<Value> = entries
            .iter()
            .filter_map(|s| {
                let sub = text(s, "name").strip_prefix(&prefix)?.to_string();
                Some(json!({
                    "subresource": sub,
                    "responseKind": kind_of(s),
                    "verbs": s.get("verbs").cloned().unwrap_or_else(|| json!([])),
                }))
            })
            .collect();
        if !subs.is_empty() {
            out.insert("subresources".into(), Value::Array(subs));
        }
        resources.push(Value::Object(out));
    }
    resources.sort_by(|a, b| {
        a.get("resource")
            .and_then(Value::as_str)
            .cmp(&b.get("resource").and_then(Value::as_str))
    });
    json!({
        "version": r.version,
        "resources": resources,
        "freshness": if r.available && r.resources.is_some() { "Current" } else { "Stale" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_headers_escape_extra_keys() {
        let mut u = apimachinery::auth::UserInfo::new("jane", vec!["dev".into(), "ops".into()]);
        u.extra
            .insert("example.org/scopes".into(), vec!["a".into(), "b".into()]);
        let h = remote_user_headers(&u);
        assert_eq!(h[0], ("X-Remote-User".into(), "jane".into()));
        assert_eq!(h[1], ("X-Remote-Group".into(), "dev".into()));
        assert_eq!(h[2], ("X-Remote-Group".into(), "ops".into()));
        assert_eq!(
            h[3],
            ("X-Remote-Extra-example.org%2Fscopes".into(), "a".into())
        );
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn ready_endpoint_skips_unready_and_other_ports() {
        let slice = json!({
            "ports": [{"name": "other", "port": 1}, {"name": "https", "port": 8443}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true}},
            ],
        });
        assert_eq!(
            ready_endpoint(&slice, "https"),
            Some(Endpoint {
                host: "10.0.0.2".into(),
                port: 8443
            })
        );
        assert_eq!(ready_endpoint(&slice, "metrics"), None);
    }

    #[test]
    fn upsert_bumps_the_generation_only_on_visible_changes() {
        let r = Remotes::default();
        let tls = Arc::new(client_tls(None, true, None).unwrap());
        let remote = Remote {
            name: "v1.x.io".into(),
            group: "x.io".into(),
            version: "v1".into(),
            service: ServiceRef {
                namespace: "default".into(),
                name: "x".into(),
                port: 443,
            },
            group_priority: 100,
            version_priority: 10,
            available: true,
            resources: None,
            openapi: OpenApi::default(),
            tls,
            ca_bundle: None,
            insecure: true,
            pool: Arc::default(),
        };
        r.upsert(remote.clone());
        let g = r.generation();
        r.upsert(remote.clone());
        assert_eq!(r.generation(), g);
        r.upsert(Remote {
            available: false,
            ..remote
        });
        assert_eq!(r.generation(), g + 1);
        assert!(r.route("x.io", "v1").is_some());
        r.remove("v1.x.io");
        assert!(r.route("x.io", "v1").is_none());
    }
}

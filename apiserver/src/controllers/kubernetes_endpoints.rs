//! The `default/kubernetes` Service's endpoints, as kube's lease endpoint
//! reconciler keeps them (`pkg/controlplane/reconcilers/lease.go`,
//! `endpointsadapter.go`):
//!
//! - **Every live replica holds a lease**: the key
//!   `<prefix>/masterleases/<advertise-ip>` (an Endpoints object naming the
//!   address, as kube stores it), written with an etcd lease of
//!   `--endpoint-reconciler-lease-ttl` (kube: 15 s) and rewritten every two
//!   thirds of it (kube: every 10 s) on a fresh etcd lease. A replica that
//!   is killed stops renewing and etcd deletes its key when the TTL runs
//!   out; one that shuts down cleanly deletes its key at SIGTERM
//!   ([`EndpointLease::release`]), as kube's pre-shutdown hook does, so
//!   clients move away while it still serves through the shutdown delay.
//! - **The reconciler writes the list**: the `default/kubernetes` Endpoints
//!   (one subset, the live addresses in kube's order (sorted as strings),
//!   port `https`/TCP/secure port, label
//!   `endpointslice.kubernetes.io/skip-mirror: "true"`) and the
//!   `default/kubernetes` EndpointSlice (`discovery.k8s.io/v1`, label
//!   `kubernetes.io/service-name: kubernetes`, `addressType` of the Service
//!   network's family, each address an endpoint with `ready: true`, the
//!   same port). kube writes no `endpointslice.kubernetes.io/managed-by`
//!   label on this slice, so neither does this. An empty lease list is
//!   refused (kube's "refusing to erase all endpoints"): the writer's own
//!   lease should be there, so emptiness means a bad read.
//!
//! **Why every replica, and not leader-gated like the other controllers.**
//! Renewing a lease is per replica by nature. The write of the list could
//! follow the leader, but kube runs it on every replica, and it is safe to:
//! every writer computes the same objects from the same leases, writes only
//! when they differ, and conditions the write on the revision it read, so
//! racing replicas converge (the loser retries and finds nothing to do).
//! Running it everywhere also means a dead leader does not leave the list
//! stale until a new one is elected. The controller shape still fits: the
//! sources are the lease keys and the two objects (all served by the watch
//! cache), every event maps to the one key `kubernetes`, and the queue
//! deduplicates bursts; it is started without the election. Renewing is a
//! separate timer task and not part of `reconcile`: a reconcile that
//! renewed would make every replica's renewal wake every other replica's
//! reconcile, which would renew again, for ever.
//!
//! The advertise address (`--advertise-address`): kube, when it is unset,
//! takes the bind address, or for an unspecified or loopback one the host's
//! default-route interface (and its Endpoints validation refuses loopback
//! addresses). Here an explicit listener address is used as it is, loopback
//! included, so that replicas on `127.0.0.x` (tests, a one-machine
//! cluster) publish distinct, reachable addresses; `0.0.0.0` or `::` take
//! the default-route address as kube does, else `127.0.0.1`. Writes go
//! through the store directly, so nothing refuses loopback addresses.

use super::{Controller, Next, Source};
use crate::object;
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use watchcache::{ListOptions, StorageError};

pub const SERVICE: &str = "kubernetes";
pub const NAMESPACE: &str = "default";
pub const PORT_NAME: &str = "https";
pub const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// kube's error when no lease is listed.
const NO_LEASES: &str = "no API server IP addresses were listed in storage, refusing to erase all endpoints for the kubernetes Service";

/// The directory of the replicas' lease keys.
pub fn lease_prefix(prefix: &str) -> String {
    format!("{}/masterleases/", prefix.trim_end_matches('/'))
}

/// The address to publish: the flag, else the secure listener's own
/// address when it names one, else `default_route()` (the host's
/// default-route address), else loopback.
pub fn advertise_address(
    flag: Option<IpAddr>,
    bound: SocketAddr,
    default_route: impl FnOnce(bool) -> Option<IpAddr>,
) -> IpAddr {
    if let Some(ip) = flag.filter(|ip| !ip.is_unspecified()) {
        return ip;
    }
    let ip = bound.ip();
    if !ip.is_unspecified() {
        return ip;
    }
    default_route(ip.is_ipv6())
        .filter(|a| !a.is_loopback() && !a.is_unspecified())
        .unwrap_or(if ip.is_ipv6() {
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        })
}

/// The local address the host would send from to a public address (the
/// default route), as kube's `ChooseHostInterface` picks one. Connecting a
/// UDP socket sends nothing.
pub fn default_route_address(v6: bool) -> Option<IpAddr> {
    let (bind, to) = if v6 {
        ("[::]:0", "[2001:db8::1]:9")
    } else {
        ("0.0.0.0:0", "192.0.2.1:9")
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(to).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// The value of one replica's lease key (kube stores an Endpoints object
/// naming the address).
pub fn lease_object(ip: IpAddr) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": ip.to_string()},
        "subsets": [{"addresses": [{"ip": ip.to_string()}]}],
    })
}

/// The address a lease names (kube reads `subsets[0].addresses[0].ip`).
fn lease_ip(v: &Value) -> Option<String> {
    v.pointer("/subsets/0/addresses/0/ip")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn ports(port: u16) -> Value {
    json!([{"name": PORT_NAME, "port": port, "protocol": "TCP"}])
}

fn set_labels(obj: &mut Value, labels: Value) {
    object::meta_mut(obj).insert("labels".into(), labels);
}

/// The Endpoints as kube's adapter writes them: `current` (or a new
/// object) with kube's label, one subset of `ips` (already in order) and
/// the port.
pub fn desired_endpoints(current: Option<&Value>, ips: &[String], port: u16) -> Value {
    let mut e = current.cloned().unwrap_or_else(|| {
        json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        })
    });
    set_labels(&mut e, json!({ SKIP_MIRROR_LABEL: "true" }));
    let addresses: Vec<Value> = ips.iter().map(|ip| json!({ "ip": ip })).collect();
    if let Some(o) = e.as_object_mut() {
        o.insert(
            "subsets".into(),
            json!([{"addresses": addresses, "ports": ports(port)}]),
        );
    }
    e
}

/// The EndpointSlice as kube's adapter writes it.
pub fn desired_slice(current: Option<&Value>, ips: &[String], port: u16, family: &str) -> Value {
    let mut s = current.cloned().unwrap_or_else(|| {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        })
    });
    set_labels(&mut s, json!({ SERVICE_NAME_LABEL: SERVICE }));
    let endpoints: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    if let Some(o) = s.as_object_mut() {
        o.insert("addressType".into(), Value::from(family));
        o.insert("endpoints".into(), Value::Array(endpoints));
        o.insert("ports".into(), ports(port));
    }
    s
}

/// The live addresses of `family`, in kube's order (as strings).
pub fn live_addresses(leases: &[Value], family: &str) -> Vec<String> {
    let mut ips: Vec<String> = leases
        .iter()
        .filter_map(lease_ip)
        .filter(|ip| {
            ip.parse::<IpAddr>()
                .is_ok_and(|a| (family == "IPv6") == a.is_ipv6())
        })
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// This replica's lease, renewed by a task until [`EndpointLease::release`].
pub struct EndpointLease {
    stop: watch::Sender<bool>,
    released: watch::Receiver<bool>,
}

impl EndpointLease {
    /// Starts renewing this replica's lease (when it is published at all).
    pub fn spawn(state: Arc<AppState>) -> Option<EndpointLease> {
        let ip = state.advertise?.ip();
        let (stop, stopping) = watch::channel(false);
        let (done, released) = watch::channel(false);
        tokio::spawn(renew_until_stopped(state, ip, stopping, done));
        Some(EndpointLease { stop, released })
    }

    /// Stops renewing and deletes the lease (a clean shutdown), waiting at
    /// most `timeout` for etcd.
    pub async fn release(&self, timeout: Duration) {
        self.stop.send_replace(true);
        let mut released = self.released.clone();
        let _ = tokio::time::timeout(timeout, released.wait_for(|r| *r)).await;
    }
}

async fn renew_until_stopped(
    state: Arc<AppState>,
    ip: IpAddr,
    mut stop: watch::Receiver<bool>,
    done: watch::Sender<bool>,
) {
    let every = (state.endpoint_lease_ttl * 2 / 3).max(Duration::from_millis(500));
    let key = format!("{}{ip}", lease_prefix(&state.prefix));
    loop {
        let wait = match renew(&state, &key, ip).await {
            Ok(()) => every,
            Err(e) => {
                tracing::warn!(error = %e, ip = %ip, "cannot renew the endpoint lease; retrying");
                (every / 4).max(Duration::from_millis(200))
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    match state.store.delete(&key, None).await {
        Ok(_) | Err(StorageError::NotFound { .. }) => {
            tracing::info!(ip = %ip, "removed this replica's endpoint lease");
        }
        Err(e) => tracing::warn!(error = %e, "cannot remove the endpoint lease"),
    }
    done.send_replace(true);
}

/// Writes the lease key on a fresh etcd lease of the TTL (kube's
/// `UpdateLease`: a rewrite that resets the TTL).
async fn renew(state: &AppState, key: &str, ip: IpAddr) -> Result<(), StorageError> {
    let ttl = i64::try_from(state.endpoint_lease_ttl.as_secs_f64().ceil() as u64)
        .unwrap_or(15)
        .max(1);
    let value = lease_object(ip);
    for _ in 0..3 {
        let lease = state.store.grant_lease(key, ttl).await?;
        let r = match state.store.get(key, Freshness::MostRecent).await? {
            None => state.store.create_with_lease(key, &value, lease).await,
            Some(cur) => {
                state
                    .store
                    .update_with_lease(key, &value, cur.revision, lease)
                    .await
            }
        };
        match r {
            Ok(_) => return Ok(()),
            Err(
                StorageError::Conflict { .. }
                | StorageError::AlreadyExists { .. }
                | StorageError::NotFound { .. },
            ) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StorageError::Unavailable(
        "the endpoint lease kept changing".into(),
    ))
}

fn row(state: &AppState, group: &str, plural: &str) -> Option<Row> {
    state.registry.lookup(group, "v1", plural)
}

fn service_key(v: &Value) -> Option<String> {
    (object::name(v) == Some(SERVICE) && object::meta_str(v, "namespace") == Some(NAMESPACE))
        .then(|| SERVICE.to_string())
}

fn any_lease(_: &Value) -> Option<String> {
    Some(SERVICE.to_string())
}

/// The reconciler, when this replica is published (it runs on every
/// replica: see the module doc).
pub fn controller(state: &AppState) -> Option<Controller<AppState>> {
    state.advertise?;
    let endpoints = row(state, "", "endpoints")?;
    let slices = row(state, "discovery.k8s.io", "endpointslices")?;
    Some(Controller {
        name: "endpoint_reconciler",
        feed: None,
        sources: vec![
            Source {
                prefix: lease_prefix(&state.prefix),
                key_of: any_lease,
            },
            Source {
                prefix: state.collection_prefix(&endpoints, Some(NAMESPACE)),
                key_of: service_key,
            },
            Source {
                prefix: state.collection_prefix(&slices, Some(NAMESPACE)),
                key_of: service_key,
            },
        ],
        reconcile: Arc::new(|state, _key| reconcile(state).boxed()),
        workers: 1,
        capacity: 16,
        backoff: super::queue::Backoff::default(),
        // kube reconciles every 10 s whatever happened.
        resync: Some(state.endpoint_lease_ttl * 2 / 3),
    })
}

/// Makes the Endpoints and the EndpointSlice list exactly the leases.
async fn reconcile(state: Arc<AppState>) -> Result<Next, String> {
    let Some(advertise) = state.advertise else {
        return Ok(Next::Done);
    };
    let listed = state
        .store
        .list(
            &lease_prefix(&state.prefix),
            &ListOptions {
                freshness: Freshness::MostRecent,
                limit: None,
                continue_from: None,
                predicate: Default::default(),
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let leases: Vec<Value> = listed.items.iter().map(|o| o.value().clone()).collect();
    let family = state.services.family();
    let ips = live_addresses(&leases, family);
    if ips.is_empty() {
        return Err(NO_LEASES.into());
    }
    let port = advertise.port();
    let endpoints = row(&state, "", "endpoints").ok_or("endpoints missing")?;
    put(&state, endpoints, |cur| desired_endpoints(cur, &ips, port)).await?;
    let slices = row(&state, "discovery.k8s.io", "endpointslices").ok_or("slices missing")?;
    put(&state, slices, |cur| desired_slice(cur, &ips, port, family)).await?;
    Ok(Next::Done)
}

/// Creates or updates `default/kubernetes` of `res` to `want(current)`,
/// conditioned on the revision read; an unchanged object is not written.
async fn put(
    state: &AppState,
    res: Row,
    want: impl Fn(Option<&Value>) -> Value,
) -> Result<(), String> {
    let key = state.key(&res, Some(NAMESPACE), SERVICE);
    let current = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    let r = match current {
        None => {
            let mut obj = want(None);
            object::prepare_create(&res, &mut obj, Some(NAMESPACE), &object::now());
            state.store.create(&key, &obj).await.map(drop)
        }
        Some(cur) => {
            let mut obj = want(Some(cur.value()));
            if obj == *cur.value() {
                return Ok(());
            }
            object::prepare_update(&res, cur.value(), &mut obj, None);
            object::meta_mut(&mut obj).remove("resourceVersion");
            tracing::info!(
                resource = &*res.plural,
                "resetting endpoints for the kubernetes service"
            );
            state.store.update(&key, &obj, cur.revision).await.map(drop)
        }
    };
    r.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertise_address_defaults() {
        let none = |_| None;
        let route = |_| Some("10.1.2.3".parse().unwrap());
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            advertise_address(Some(ip("10.0.0.7")), at("0.0.0.0:6443"), route),
            ip("10.0.0.7")
        );
        assert_eq!(
            advertise_address(None, at("127.0.0.3:6443"), route),
            ip("127.0.0.3")
        );
        assert_eq!(
            advertise_address(None, at("192.168.1.5:6443"), none),
            ip("192.168.1.5")
        );
        assert_eq!(
            advertise_address(None, at("0.0.0.0:6443"), route),
            ip("10.1.2.3")
        );
        assert_eq!(
            advertise_address(None, at("0.0.0.0:6443"), none),
            ip("127.0.0.1")
        );
        assert_eq!(advertise_address(None, at("[::]:6443"), none), ip("::1"));
    }

    #[test]
    fn endpoints_and_slice_as_kube_writes_them() {
        let leases = vec![
            lease_object("127.0.0.3".parse().unwrap()),
            lease_object("127.0.0.10".parse().unwrap()),
            lease_object("127.0.0.2".parse().unwrap()),
            lease_object("fd00::1".parse().unwrap()),
            json!({"metadata": {"name": "junk"}}),
        ];
        let ips = live_addresses(&leases, "IPv4");
        assert_eq!(ips, ["127.0.0.10", "127.0.0.2", "127.0.0.3"]);
        let e = desired_endpoints(None, &ips, 6443);
        assert_eq!(
            e["metadata"]["labels"],
            json!({"endpointslice.kubernetes.io/skip-mirror": "true"})
        );
        assert_eq!(
            e["subsets"],
            json!([{"addresses": [{"ip": "127.0.0.10"}, {"ip": "127.0.0.2"}, {"ip": "127.0.0.3"}],
                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
        );
        let s = desired_slice(None, &ips[..1], 6443, "IPv4");
        assert_eq!(
            s,
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "kubernetes", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.10"], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
            })
        );
        // Current objects keep their other fields, and a second pass
        // changes nothing.
        let again = desired_slice(Some(&s), &ips[..1], 6443, "IPv4");
        assert_eq!(again, s);
        let mut edited = e.clone();
        edited["metadata"]["labels"] = json!({"x": "y"});
        edited["subsets"] = json!([]);
        assert_eq!(desired_endpoints(Some(&edited), &ips, 6443), e);
    }
}

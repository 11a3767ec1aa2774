//! The ClusterIP repair loop (kube's `RepairIPAddress`,
//! `pkg/registry/core/service/ipallocator/controller/repairip.go`): every
//! Service's cluster IP has its `IPAddress` naming the Service, and every
//! `IPAddress` the allocator made has a Service that holds it.
//!
//! - **A Service's side**: an address without its `IPAddress` (deleted
//!   behind its back, or written before allocation existed) gets it created
//!   again (`ClusterIPNotAllocated`, "...is not allocated; repairing"); one
//!   whose `IPAddress` names something that is not a Service, a Service that
//!   does not exist, or lacks the allocator's labels gets it recreated; one
//!   held by another Service that holds it too is reported
//!   (`ClusterIPAlreadyAllocated`) and left alone; one outside the range is
//!   reported (`ClusterIPOutOfRange`).
//! - **An `IPAddress`'s side** (only those labelled
//!   `ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io`): one whose
//!   parent Service does not exist is a leak, deleted
//!   (`IPAddressNotAllocated`, "...appears to have leaked: cleaning up") once
//!   it is older than [`GRACE`] — kube's 60 s, the request timeout: a write
//!   takes the address first and stores the Service after, so a young
//!   orphan may be a create in flight; it is looked at again when the grace
//!   runs out. One whose Service exists but does not hold it
//!   (`IPAddressWrongReference`) is deleted after the same grace; kube
//!   deletes those at once, but here an update (ExternalName to ClusterIP)
//!   also takes the address before it stores the Service, so it waits too.
//!   Deletes are conditioned on the revision read, so an address taken
//!   over meanwhile is not removed.
//!
//! Queue keys: `service/<ns>/<name>` and
//! `ipaddress/<ip>/<parent ns>/<parent name>`: an `IPAddress`'s key names
//! its parent so that its deletion re-checks that Service. Leader-gated,
//! with a full resync every `--allocation-repair-interval` (kube's
//! informer resync), which finds what no event announces.

use super::events::{self, Event, WARNING};
use super::{Controller, Next, Source};
use crate::allocator::{ipaddress, IPADDRESS_MANAGER};
use crate::object;
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use serde_json::Value;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use watchcache::{Object, StorageError};

/// How old an apparently leaked `IPAddress` must be before it is deleted.
pub const GRACE: Duration = Duration::from_secs(60);
const CONTROLLER: &str = "ipallocator-repair-controller";
const FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";

fn services(state: &AppState) -> Option<Row> {
    state.registry.lookup("", "v1", "services")
}

fn ipaddresses(state: &AppState) -> Option<Row> {
    state
        .registry
        .lookup("networking.k8s.io", "v1", "ipaddresses")
}

fn service_key(v: &Value) -> Option<String> {
    Some(format!(
        "service/{}/{}",
        object::meta_str(v, "namespace")?,
        object::name(v)?
    ))
}

fn ipaddress_key(v: &Value) -> Option<String> {
    let parent = |f: &str| {
        v.pointer(&format!("/spec/parentRef/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    Some(format!(
        "ipaddress/{}/{}/{}",
        object::name(v)?,
        parent("namespace"),
        parent("name")
    ))
}

pub fn controller(state: &AppState) -> Option<Controller<AppState>> {
    let (svc, ip) = (services(state)?, ipaddresses(state)?);
    Some(Controller {
        name: "ipallocator_repair",
        feed: None,
        sources: vec![
            Source {
                prefix: state.collection_prefix(&svc, None),
                key_of: service_key,
            },
            Source {
                prefix: state.collection_prefix(&ip, None),
                key_of: ipaddress_key,
            },
        ],
        reconcile: Arc::new(|state, key| reconcile(state, key).boxed()),
        workers: 2,
        capacity: 10_000,
        backoff: super::queue::Backoff::default(),
        resync: Some(state.repair_interval),
    })
}

async fn reconcile(state: Arc<AppState>, key: String) -> Result<Next, String> {
    let parts: Vec<&str> = key.split('/').collect();
    let r = match parts.as_slice() {
        ["service", ns, name] => sync_service(&state, ns, name).await,
        ["ipaddress", ip, ns, name] => match get_ip(&state, ip).await {
            Ok(Some(addr)) => sync_ipaddress(&state, addr).await,
            // Gone: its Service may need it back.
            Ok(None) if !ns.is_empty() && !name.is_empty() => sync_service(&state, ns, name).await,
            Ok(None) => Ok(Next::Done),
            Err(e) => Err(e),
        },
        _ => Ok(Next::Done),
    };
    r.map_err(|e| e.to_string())
}

async fn get_service(
    state: &AppState,
    ns: &str,
    name: &str,
) -> Result<Option<Object>, StorageError> {
    let res = services(state).ok_or_else(|| StorageError::Internal("no services".into()))?;
    state
        .store
        .get(&state.key(&res, Some(ns), name), Freshness::MostRecent)
        .await
}

async fn get_ip(state: &AppState, ip: &str) -> Result<Option<Object>, StorageError> {
    let res = ipaddresses(state).ok_or_else(|| StorageError::Internal("no ipaddresses".into()))?;
    state
        .store
        .get(&state.key(&res, None, ip), Freshness::MostRecent)
        .await
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        "IPv6"
    } else {
        "IPv4"
    }
}

fn label<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v.pointer("/metadata/labels")
        .and_then(|l| l.get(name))
        .and_then(Value::as_str)
}

fn parent(v: &Value) -> (&str, &str, &str, &str) {
    let f = |n: &str| {
        v.pointer(&format!("/spec/parentRef/{n}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    (f("group"), f("resource"), f("namespace"), f("name"))
}

fn holds(svc: &Value, ip: &str) -> bool {
    crate::allocator::service::held(svc)
        .ips
        .iter()
        .any(|a| a.to_string() == ip)
}

async fn warn_service(state: &AppState, svc: &Value, reason: &'static str, note: String) {
    events::record(
        state,
        Event {
            regarding: svc,
            kind: WARNING,
            reason,
            action: "ClusterIPAllocation",
            note,
            controller: CONTROLLER,
        },
    )
    .await;
}

/// kube's `syncService`: each cluster IP of the Service has its
/// `IPAddress`, naming it.
async fn sync_service(state: &AppState, ns: &str, name: &str) -> Result<Next, StorageError> {
    let Some(svc) = get_service(state, ns, name).await? else {
        return Ok(Next::Done);
    };
    let svc = svc.value();
    for ip in crate::allocator::service::held(svc).ips {
        let fam = family(ip);
        if !state.services.cidr.contains(&ip) {
            tracing::warn!("the ClusterIP [{fam}]: {ip} for Service {ns}/{name} is not within any service CIDR; please recreate");
            warn_service(
                state,
                svc,
                "ClusterIPOutOfRange",
                format!("Cluster IP [{fam}]: {ip} is not within any configured Service CIDR; please recreate service"),
            )
            .await;
            continue;
        }
        let Some(addr) = get_ip(state, &ip.to_string()).await? else {
            tracing::warn!(
                "the ClusterIP [{fam}]: {ip} for Service {ns}/{name} is not allocated; repairing"
            );
            warn_service(
                state,
                svc,
                "ClusterIPNotAllocated",
                format!("Cluster IP [{fam}]: {ip} is not allocated; repairing"),
            )
            .await;
            create_ip(state, ip, ns, name).await?;
            continue;
        };
        let a = addr.value();
        let (group, resource, pns, pname) = parent(a);
        let wrong = format!(
            "the ClusterIP [{fam}]: {ip} for Service {ns}/{name} has a wrong reference; repairing"
        );
        if !group.is_empty() || resource != "services" {
            warn_service(state, svc, "ClusterIPNotAllocated", wrong).await;
            recreate_ip(state, &addr, ip, ns, name).await?;
            continue;
        }
        if (pns, pname) != (ns, name) {
            match get_service(state, pns, pname).await? {
                None => {
                    warn_service(state, svc, "ClusterIPNotAllocated", wrong).await;
                    recreate_ip(state, &addr, ip, ns, name).await?;
                    continue;
                }
                Some(other) if holds(other.value(), &ip.to_string()) => {
                    tracing::warn!("the cluster IP [{fam}]:{ip} for service {ns}/{name} was assigned to other services {pns}/{pname}; please recreate");
                    warn_service(
                        state,
                        svc,
                        "ClusterIPAlreadyAllocated",
                        format!("Cluster IP [{fam}]:{ip} was assigned to multiple services; please recreate service"),
                    )
                    .await;
                }
                // The other Service does not hold it: the address's own
                // loop releases it, and this Service's next look recreates
                // it.
                Some(_) => {}
            }
        }
        if label(a, FAMILY_LABEL) != Some(fam)
            || label(a, MANAGED_BY_LABEL) != Some(IPADDRESS_MANAGER)
        {
            recreate_ip(state, &addr, ip, ns, name).await?;
        }
    }
    Ok(Next::Done)
}

async fn create_ip(state: &AppState, ip: IpAddr, ns: &str, name: &str) -> Result<(), StorageError> {
    let res = ipaddresses(state).ok_or_else(|| StorageError::Internal("no ipaddresses".into()))?;
    let mut obj = ipaddress(ip, ns, name);
    object::prepare_create(&res, &mut obj, None, &object::now());
    state
        .store
        .create(&state.key(&res, None, &ip.to_string()), &obj)
        .await
        .map(drop)
}

async fn recreate_ip(
    state: &AppState,
    current: &Object,
    ip: IpAddr,
    ns: &str,
    name: &str,
) -> Result<(), StorageError> {
    let res = ipaddresses(state).ok_or_else(|| StorageError::Internal("no ipaddresses".into()))?;
    match state
        .store
        .delete(
            &state.key(&res, None, &ip.to_string()),
            Some(current.revision),
        )
        .await
    {
        Ok(_) | Err(StorageError::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    create_ip(state, ip, ns, name).await
}

/// How long ago `v` was created (`None` when it says nothing readable:
/// then it counts as old, as kube reads a zero timestamp).
fn age(v: &Value) -> Duration {
    object::meta_str(v, "creationTimestamp")
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| {
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
                .to_std()
                .unwrap_or(Duration::ZERO)
        })
        .unwrap_or(Duration::MAX)
}

/// kube's `syncIPAddress`: an allocator's `IPAddress` must have a Service
/// holding it.
async fn sync_ipaddress(state: &AppState, addr: Object) -> Result<Next, StorageError> {
    let a = addr.value();
    if label(a, MANAGED_BY_LABEL) != Some(IPADDRESS_MANAGER) {
        return Ok(Next::Done);
    }
    let name = object::name(a).unwrap_or("").to_string();
    let (group, resource, ns, svc_name) = parent(a);
    let (ns, svc_name) = (ns.to_string(), svc_name.to_string());
    let (reason, note) = if !group.is_empty() || resource != "services" {
        (
            "IPAddressNotAllocated",
            format!("IPAddress {name} appears to have been modified, not referencing a Service {group}/{resource}: cleaning up"),
        )
    } else {
        match get_service(state, &ns, &svc_name).await? {
            Some(svc) if holds(svc.value(), &name) => return Ok(Next::Done),
            Some(_) => (
                "IPAddressWrongReference",
                format!("IPAddress: {name} for Service {ns}/{svc_name} has a wrong reference; cleaning up"),
            ),
            None => (
                "IPAddressNotAllocated",
                format!("IPAddress: {name} for Service {ns}/{svc_name} appears to have leaked: cleaning up"),
            ),
        }
    };
    if resource == "services" && group.is_empty() {
        let lived = age(a);
        if lived < GRACE {
            // Maybe a write in flight: look again when the grace is over.
            return Ok(Next::After(GRACE - lived + Duration::from_millis(100)));
        }
    }
    tracing::warn!("{note}");
    events::record(
        state,
        Event {
            regarding: a,
            kind: WARNING,
            reason,
            action: "IPAddressAllocation",
            note,
            controller: CONTROLLER,
        },
    )
    .await;
    let res = ipaddresses(state).ok_or_else(|| StorageError::Internal("no ipaddresses".into()))?;
    match state
        .store
        .delete(&state.key(&res, None, &name), Some(addr.revision))
        .await
    {
        Ok(_) | Err(StorageError::NotFound { .. }) => Ok(Next::Done),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_name_the_parent() {
        let a = ipaddress("10.96.0.7".parse().unwrap(), "ns", "web");
        assert_eq!(ipaddress_key(&a).unwrap(), "ipaddress/10.96.0.7/ns/web");
        let svc = json!({"metadata": {"namespace": "ns", "name": "web"}});
        assert_eq!(service_key(&svc).unwrap(), "service/ns/web");
        assert_eq!(parent(&a), ("", "services", "ns", "web"));
    }

    #[test]
    fn ages() {
        let old = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}});
        assert!(age(&old) > GRACE);
        let fresh = json!({"metadata": {"creationTimestamp": object::now()}});
        assert!(age(&fresh) < GRACE);
        assert_eq!(age(&json!({})), Duration::MAX);
    }
}

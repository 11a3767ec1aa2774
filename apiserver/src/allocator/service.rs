//! What a Service write allocates and frees (kube's service REST
//! allocation steps), over [`super::ips`] and [`super::ports`].

use std::collections::HashSet;
use std::net::IpAddr;

use apimachinery::kinds::core::service as kinds;
use apimachinery::status::{cause, Status, StatusCause};
use apimachinery::validation;
use futures_util::FutureExt;
use serde_json::{Map, Value};

use super::ips::{self, IpError};
use super::ports::{self, PortError, Want};
use super::ServiceNetwork;
use super::StorageHooks;
use super::{Held, Reservation};
use crate::backend::Backend;
use crate::error::{ApiError, Result};

/// The Service kind's allocation steps, referenced by its registry row.
pub static HOOKS: StorageHooks = StorageHooks {
    begin_create: |backend, network, svc, dry_run| {
        begin_create(backend, network, svc, dry_run).boxed()
    },
    begin_update: |backend, network, svc, old, dry_run| {
        begin_update(backend, network, svc, old, dry_run).boxed()
    },
    after_delete: |backend, network, svc| release_all(backend, network, svc).boxed(),
};

fn spec(svc: &Value) -> Option<&Map<String, Value>> {
    svc.get("spec").and_then(Value::as_object)
}

fn spec_str<'a>(svc: &'a Value, field: &str) -> Option<&'a str> {
    spec(svc).and_then(|s| s.get(field)).and_then(Value::as_str)
}

fn svc_type(svc: &Value) -> &str {
    spec_str(svc, "type")
        .filter(|t| !t.is_empty())
        .unwrap_or("ClusterIP")
}

/// The first cluster IP the Service names (`clusterIPs[0]`, else
/// `clusterIP`), if any.
fn first_cluster_ip(svc: &Value) -> Option<&str> {
    spec(svc)
        .and_then(|s| s.get("clusterIPs"))
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| spec_str(svc, "clusterIP").filter(|s| !s.is_empty()))
}

fn is_headless(svc: &Value) -> bool {
    first_cluster_ip(svc) == Some("None")
}

fn needs_cluster_ip(svc: &Value) -> bool {
    spec(svc).is_none_or(kinds::needs_cluster_ip) && !is_headless(svc)
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

fn should_allocate_node_ports(svc: &Value) -> bool {
    spec(svc).is_some_and(kinds::needs_node_ports)
}

fn needs_health_check(svc: &Value) -> bool {
    svc_type(svc) == "LoadBalancer" && spec_str(svc, "externalTrafficPolicy") == Some("Local")
}

fn node_port_of(port: &Value) -> u16 {
    port.get("nodePort")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(0)
}

fn health_check_port(svc: &Value) -> u16 {
    spec(svc)
        .and_then(|s| s.get("healthCheckNodePort"))
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(0)
}

fn port_list(svc: &Value) -> &[Value] {
    spec(svc)
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The addresses and ports a stored Service holds.
pub fn held(svc: &Value) -> Held {
    let mut h = Held::default();
    if let Some(ips) = spec(svc)
        .and_then(|s| s.get("clusterIPs"))
        .and_then(Value::as_array)
    {
        h.ips = ips
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|s| s.parse::<IpAddr>().ok())
            .collect();
    } else if let Some(ip) = spec_str(svc, "clusterIP").and_then(|s| s.parse().ok()) {
        h.ips.push(ip);
    }
    let mut seen = HashSet::new();
    for p in port_list(svc) {
        let np = node_port_of(p);
        if np != 0 && seen.insert(np) {
            h.ports.push(np);
        }
    }
    let hc = health_check_port(svc);
    if hc != 0 && seen.insert(hc) {
        h.ports.push(hc);
    }
    h
}

fn spec_mut(svc: &mut Value) -> Option<&mut Map<String, Value>> {
    svc.get_mut("spec").and_then(Value::as_object_mut)
}

fn invalid(svc: &Value, causes: Vec<StatusCause>) -> ApiError {
    let name = svc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Status::invalid(
        apimachinery::status::GroupKind {
            group: "",
            kind: "Service",
        },
        name,
        causes,
    )
    .into()
}

fn names(svc: &Value) -> (String, String) {
    let m = |f: &str| {
        svc.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (m("namespace"), m("name"))
}

/// kube's `initIPFamilyFields` for a single-stack cluster: fills
/// `ipFamilyPolicy` and `ipFamilies` when the client left them out, and
/// refuses dual-stack demands.
fn init_families(network: &ServiceNetwork, svc: &mut Value) -> Result<()> {
    if svc_type(svc) == "ExternalName" {
        return Ok(());
    }
    let selectorless_headless = is_headless(svc)
        && spec(svc)
            .and_then(|s| s.get("selector"))
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
    let family = network.family();
    let Some(spec) = spec_mut(svc) else {
        return Ok(());
    };
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        let policy = if selectorless_headless {
            "RequireDualStack"
        } else {
            "SingleStack"
        };
        spec.insert("ipFamilyPolicy".into(), Value::from(policy));
    }
    let policy = spec
        .get("ipFamilyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if selectorless_headless {
        if spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            let mut fams = vec![Value::from(family)];
            if policy != "SingleStack" {
                fams.push(Value::from(if family == "IPv4" { "IPv6" } else { "IPv4" }));
            }
            spec.insert("ipFamilies".into(), Value::Array(fams));
        }
        return Ok(());
    }
    let mut causes = Vec::new();
    if policy == "RequireDualStack" {
        causes.push(validation::invalid(
            "spec.ipFamilyPolicy",
            &policy,
            "this cluster is not configured for dual-stack services",
        ));
    }
    if let Some(fams) = spec.get("ipFamilies").and_then(Value::as_array) {
        for (i, f) in fams.iter().enumerate() {
            let f = f.as_str().unwrap_or("");
            if f != family {
                causes.push(validation::invalid(
                    &format!("spec.ipFamilies[{i}]"),
                    f,
                    "not configured on this cluster",
                ));
            }
        }
    }
    if !causes.is_empty() {
        return Err(invalid(svc, causes));
    }
    if spec
        .get("ipFamilies")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("ipFamilies".into(), Value::Array(vec![Value::from(family)]));
    }
    Ok(())
}

/// Takes the Service's cluster IP (the one it asks for, or any free one)
/// and writes it into `clusterIP` and `clusterIPs`.
async fn allocate_cluster_ip(
    backend: &Backend,
    network: &ServiceNetwork,
    svc: &mut Value,
    dry_run: bool,
) -> Result<IpAddr> {
    let (ns, name) = names(svc);
    let ip = match first_cluster_ip(svc) {
        Some(requested) => {
            let requested = requested.to_string();
            let shown = spec(svc)
                .and_then(|s| s.get("clusterIPs"))
                .cloned()
                .unwrap_or_else(|| Value::Array(vec![Value::from(requested.as_str())]));
            let fail = |detail: String| {
                StatusCause::new(
                    cause::FIELD_VALUE_INVALID,
                    validation::invalid_json_message(
                        &shown,
                        &format!("failed to allocate IP {requested}: {detail}"),
                    ),
                    "spec.clusterIPs",
                )
            };
            let Ok(ip) = requested.parse::<IpAddr>() else {
                return Err(invalid(svc, vec![fail("not a valid IP address".into())]));
            };
            match ips::allocate(backend, &network.cidr, ip, &ns, &name, dry_run).await {
                Ok(()) => ip,
                Err(IpError::Storage(e)) => return Err(ApiError::Internal(e.to_string())),
                Err(e) => return Err(invalid(svc, vec![fail(e.to_string())])),
            }
        }
        None => ips::allocate_next(backend, &network.cidr, &ns, &name, dry_run)
            .await
            .map_err(|e| match e {
                IpError::Storage(e) => ApiError::Internal(e.to_string()),
                e => Status::internal(format!("failed to allocate a serviceIP: {e}")).into(),
            })?,
    };
    if let Some(spec) = spec_mut(svc) {
        spec.insert("clusterIP".into(), Value::String(ip.to_string()));
        spec.insert(
            "clusterIPs".into(),
            Value::Array(vec![Value::String(ip.to_string())]),
        );
    }
    Ok(ip)
}

/// Where an allocated node port goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// `spec.ports[i].nodePort`.
    Port(usize),
    HealthCheck,
}

/// Takes the node ports the Service needs that `old_ports` does not
/// already hold, and writes them into the Service. Returns the newly taken
/// ports.
async fn allocate_node_ports(
    backend: &Backend,
    network: &ServiceNetwork,
    svc: &mut Value,
    old_ports: &[u16],
    dry_run: bool,
) -> Result<Vec<u16>> {
    let mut wants: Vec<Want> = Vec::new();
    // (target, index into wants)
    let mut targets: Vec<(Target, usize)> = Vec::new();
    if needs_node_ports(svc) {
        let allocate_missing = should_allocate_node_ports(svc);
        // Ports of one number (TCP and UDP 53) share a node port.
        let mut by_number: Vec<(u64, usize)> = Vec::new();
        for (i, p) in port_list(svc).iter().enumerate() {
            let np = node_port_of(p);
            let number = p.get("port").and_then(Value::as_u64).unwrap_or(0);
            if np != 0 {
                if !old_ports.contains(&np) && !wants.contains(&Want::Port(np)) {
                    wants.push(Want::Port(np));
                    by_number.push((number, wants.len() - 1));
                }
                continue;
            }
            if !allocate_missing {
                continue;
            }
            let shared = by_number
                .iter()
                .find(|(n, _)| *n == number)
                .map(|(_, w)| *w);
            let w = match shared {
                Some(w) => w,
                None => {
                    wants.push(Want::Any);
                    by_number.push((number, wants.len() - 1));
                    wants.len() - 1
                }
            };
            targets.push((Target::Port(i), w));
        }
    }
    if needs_health_check(svc) {
        let hc = health_check_port(svc);
        if hc == 0 {
            wants.push(Want::Any);
            targets.push((Target::HealthCheck, wants.len() - 1));
        } else if !old_ports.contains(&hc) {
            wants.push(Want::Port(hc));
        }
    }
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let got = match ports::allocate(backend, &network.node_ports, &wants, dry_run).await {
        Ok(got) => got,
        Err(PortError::Storage(e)) => return Err(ApiError::Internal(e.to_string())),
        Err(e @ (PortError::NotInRange { index, .. } | PortError::Allocated { index })) => {
            let Want::Port(np) = wants[index] else {
                return Err(ApiError::Internal(e.to_string()));
            };
            let at = port_list(svc).iter().position(|p| node_port_of(p) == np);
            return Err(match at {
                Some(i) => invalid(
                    svc,
                    vec![validation::invalid_json(
                        &format!("spec.ports[{i}].nodePort"),
                        &Value::from(np),
                        &e.to_string(),
                    )],
                ),
                None => Status::internal(format!(
                    "failed to allocate requested HealthCheck NodePort {np}: {e}"
                ))
                .into(),
            });
        }
        Err(e) => {
            return Err(Status::internal(format!("failed to allocate a nodePort: {e}")).into())
        }
    };
    if let Some(spec) = spec_mut(svc) {
        for (target, w) in targets {
            let port = Value::from(got[w]);
            match target {
                Target::Port(i) => {
                    if let Some(p) = spec
                        .get_mut("ports")
                        .and_then(Value::as_array_mut)
                        .and_then(|a| a.get_mut(i))
                        .and_then(Value::as_object_mut)
                    {
                        p.insert("nodePort".into(), port);
                    }
                }
                Target::HealthCheck => {
                    spec.insert("healthCheckNodePort".into(), port);
                }
            }
        }
    }
    Ok(got)
}

/// Allocation for a Service being created (after validation, before it is
/// stored).
pub async fn begin_create(
    backend: &Backend,
    network: &ServiceNetwork,
    svc: &mut Value,
    dry_run: bool,
) -> Result<Reservation> {
    let mut r = Reservation {
        dry_run,
        ..Default::default()
    };
    init_families(network, svc)?;
    if needs_cluster_ip(svc) {
        r.allocated
            .ips
            .push(allocate_cluster_ip(backend, network, svc, dry_run).await?);
    }
    match allocate_node_ports(backend, network, svc, &[], dry_run).await {
        Ok(ports) => r.allocated.ports = ports,
        Err(e) => {
            r.revert(backend, network).await;
            return Err(e);
        }
    }
    Ok(r)
}

/// Allocation for a Service update: what the new form needs and the old
/// did not hold is taken now; what the old held and the new does not is
/// freed when the update is stored.
pub async fn begin_update(
    backend: &Backend,
    network: &ServiceNetwork,
    svc: &mut Value,
    old: &Value,
    dry_run: bool,
) -> Result<Reservation> {
    let mut r = Reservation {
        dry_run,
        ..Default::default()
    };
    let before = held(old);
    init_families(network, svc)?;
    if svc_type(old) == "ExternalName" && needs_cluster_ip(svc) {
        r.allocated
            .ips
            .push(allocate_cluster_ip(backend, network, svc, dry_run).await?);
    }
    match allocate_node_ports(backend, network, svc, &before.ports, dry_run).await {
        Ok(ports) => r.allocated.ports = ports,
        Err(e) => {
            r.revert(backend, network).await;
            return Err(e);
        }
    }
    let after = held(svc);
    r.release_on_commit = Held {
        ips: before
            .ips
            .into_iter()
            .filter(|ip| !after.ips.contains(ip))
            .collect(),
        ports: before
            .ports
            .into_iter()
            .filter(|p| !after.ports.contains(p))
            .collect(),
    };
    Ok(r)
}

/// A Service is gone: its addresses and ports are free.
pub async fn release_all(backend: &Backend, network: &ServiceNetwork, svc: &Value) {
    super::release(backend, network, &held(svc)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn held_values_and_needs() {
        let svc = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "healthCheckNodePort": 31000,
            "ports": [{"port": 53, "protocol": "TCP", "nodePort": 30053},
                      {"port": 53, "protocol": "UDP", "nodePort": 30053}]}});
        assert!(needs_cluster_ip(&svc) && needs_node_ports(&svc) && needs_health_check(&svc));
        let h = held(&svc);
        assert_eq!(h.ips, vec!["10.96.0.9".parse::<IpAddr>().unwrap()]);
        assert_eq!(h.ports, vec![30053, 31000]);
        let headless = json!({"spec": {"clusterIP": "None"}});
        assert!(!needs_cluster_ip(&headless));
        assert!(!needs_cluster_ip(
            &json!({"spec": {"type": "ExternalName"}})
        ));
    }
}

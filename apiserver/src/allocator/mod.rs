//! Service ClusterIP and NodePort allocation, inside the write (kube's
//! service REST `BeginCreate`/`BeginUpdate` and `AfterDelete`).
//!
//! * **ClusterIPs** follow kube 1.33's allocator: each allocated address is
//!   an `networking.k8s.io/v1` `IPAddress` object named by the address, whose
//!   `parentRef` is the Service. Allocation is an etcd create of that key, so
//!   two replicas can never hand out one address: the second create fails
//!   and that replica tries another. The range is
//!   `--service-cluster-ip-range`, published as the `kubernetes` ServiceCIDR.
//! * **NodePorts** follow kube's port allocator: one bitmap in a
//!   `RangeAllocation` at `<prefix>/ranges/servicenodeports`, changed by
//!   compare-and-swap on its revision, so concurrent allocations through
//!   different replicas serialize in etcd.
//!
//! A write reserves first ([`Reservation`]) and stores the Service second.
//! If the store fails the reservation is reverted; if it succeeds,
//! addresses and ports the Service no longer holds are released. A crash
//! between the two can leak an address or a port: the repair loops find
//! those (`controllers::repair_ip`, `controllers::repair_ports`, after
//! kube's).
//!
//! On the floor of admission and the aggregator: it reads and writes
//! through the [`Backend`] within a [`ServiceNetwork`], and imports
//! nothing above (not the state, the handlers or a controller).

pub mod ips;
pub mod ports;
pub mod service;

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;

use crate::backend::Backend;

pub use ips::{ipaddress, IPADDRESS_MANAGER};

/// The Service network of the cluster.
#[derive(Debug, Clone)]
pub struct ServiceNetwork {
    /// `--service-cluster-ip-range`.
    pub cidr: IpNet,
    /// `--service-node-port-range`.
    pub node_ports: RangeInclusive<u16>,
}

impl Default for ServiceNetwork {
    fn default() -> Self {
        ServiceNetwork {
            cidr: "10.96.0.0/12".parse().expect("valid default range"),
            node_ports: 30000..=32767,
        }
    }
}

impl ServiceNetwork {
    /// The `kubernetes` Service's address: the first of the range.
    pub fn first_ip(&self) -> IpAddr {
        ips::nth(&self.cidr, 1)
    }

    /// `IPv4` or `IPv6`, as Service `ipFamilies` name them.
    pub fn family(&self) -> &'static str {
        match self.cidr {
            IpNet::V4(_) => "IPv4",
            IpNet::V6(_) => "IPv6",
        }
    }

    /// The node port range as kube prints it (`30000-32767`).
    pub fn port_range(&self) -> String {
        ports::range_text(&self.node_ports)
    }
}

/// Parses `--service-node-port-range` (`30000-32767`, or a single port).
pub fn parse_port_range(s: &str) -> Result<RangeInclusive<u16>, String> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let a: u16 = a
        .trim()
        .parse()
        .map_err(|_| format!("invalid port range {s:?}"))?;
    let b: u16 = b
        .trim()
        .parse()
        .map_err(|_| format!("invalid port range {s:?}"))?;
    if a == 0 || a > b {
        return Err(format!("invalid port range {s:?}"));
    }
    Ok(a..=b)
}

/// Addresses and ports held for one Service.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    pub ips: Vec<IpAddr>,
    pub ports: Vec<u16>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.ports.is_empty()
    }
}

/// What one write reserved, and what it frees once stored.
#[derive(Debug, Default)]
#[must_use = "a reservation is either committed or reverted"]
pub struct Reservation {
    /// Newly taken for this write: given back if the write fails.
    pub allocated: Held,
    /// Held before, no longer used: given back once the write is stored.
    pub release_on_commit: Held,
    /// A dry run takes nothing.
    pub dry_run: bool,
}

impl Reservation {
    /// The write was stored: frees what the Service gave up.
    pub async fn commit(self, backend: &Backend, network: &ServiceNetwork) {
        if !self.dry_run {
            release(backend, network, &self.release_on_commit).await;
        }
    }

    /// The write failed: gives back what it took.
    pub async fn revert(self, backend: &Backend, network: &ServiceNetwork) {
        if !self.dry_run {
            release(backend, network, &self.allocated).await;
        }
    }
}

/// Frees addresses and ports. Failures are logged: what is left behind is a
/// leak for the repair loop, never a double allocation.
pub async fn release(backend: &Backend, network: &ServiceNetwork, held: &Held) {
    if held.is_empty() {
        return;
    }
    for ip in &held.ips {
        if let Err(e) = ips::release(backend, *ip).await {
            tracing::warn!(ip = %ip, error = %e, "could not release a service IP");
        }
    }
    if !held.ports.is_empty() {
        if let Err(e) = ports::release(backend, &network.node_ports, &held.ports).await {
            tracing::warn!(ports = ?held.ports, error = %e, "could not release node ports");
        }
    }
}

/// A kind's storage steps around a write (kube's `BeginCreate`,
/// `BeginUpdate`, `AfterDelete`). The generic write path runs
/// `begin_*` after validation and admission (their [`Reservation`] is
/// committed once the object is stored, or reverted if storing fails),
/// and `after_delete` once the object is gone from etcd. Each reads and
/// writes through the backend, within the Service network.
pub struct StorageHooks {
    pub begin_create:
        for<'a> fn(
            &'a Backend,
            &'a ServiceNetwork,
            &'a mut serde_json::Value,
            bool,
        )
            -> futures_util::future::BoxFuture<'a, crate::error::Result<Reservation>>,
    pub begin_update:
        for<'a> fn(
            &'a Backend,
            &'a ServiceNetwork,
            &'a mut serde_json::Value,
            &'a serde_json::Value,
            bool,
        )
            -> futures_util::future::BoxFuture<'a, crate::error::Result<Reservation>>,
    pub after_delete: for<'a> fn(
        &'a Backend,
        &'a ServiceNetwork,
        &'a serde_json::Value,
    ) -> futures_util::future::BoxFuture<'a, ()>,
}

/// The steps a registry row's [`Hooks`](crate::registry::Hooks) names.
pub fn hooks(h: crate::registry::Hooks) -> &'static StorageHooks {
    match h {
        crate::registry::Hooks::ServiceAllocation => &service::HOOKS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_parse() {
        assert_eq!(parse_port_range("30000-32767"), Ok(30000..=32767));
        assert_eq!(parse_port_range("8080"), Ok(8080..=8080));
        assert!(parse_port_range("2-1").is_err());
        assert!(parse_port_range("a-b").is_err());
        assert!(parse_port_range("0-10").is_err());
    }

    #[test]
    fn default_network_starts_at_10_96_0_1() {
        let n = ServiceNetwork::default();
        assert_eq!(n.first_ip().to_string(), "10.96.0.1");
        assert_eq!(n.family(), "IPv4");
        assert_eq!(n.port_range(), "30000-32767");
    }
}

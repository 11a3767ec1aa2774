//! ClusterIPs as `IPAddress` objects: taking an address is creating the
//! object named by it, atomically in etcd.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use apimachinery::read::Freshness;
use ipnet::IpNet;
use rand::Rng;
use serde_json::{json, Value};
use watchcache::StorageError;

use crate::backend::Backend;
use crate::object;
use crate::registry::Row;

/// kube's `ipaddress.kubernetes.io/managed-by` value for Service addresses.
pub const IPADDRESS_MANAGER: &str = "ipallocator.k8s.io";

/// Why an address could not be had.
#[derive(Debug, thiserror::Error)]
pub enum IpError {
    #[error("provided IP is not in the valid range. The range of valid IPs is {0}")]
    NotInRange(IpNet),
    #[error("provided IP is already allocated")]
    Allocated,
    #[error("range is full")]
    Full,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The address at `offset` from the start of `cidr`.
pub fn nth(cidr: &IpNet, offset: u128) -> IpAddr {
    match cidr {
        IpNet::V4(n) => {
            let base = u32::from(n.network()) as u128;
            IpAddr::V4(Ipv4Addr::from((base + offset) as u32))
        }
        IpNet::V6(n) => {
            let base = u128::from(n.network());
            IpAddr::V6(Ipv6Addr::from(base.wrapping_add(offset)))
        }
    }
}

/// The usable offsets of `cidr`: not the network address, and for IPv4 not
/// the broadcast address (kube's allocator leaves both out).
fn usable(cidr: &IpNet) -> (u128, u128) {
    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len()).min(64);
    let size = 1u128 << host_bits;
    match cidr {
        IpNet::V4(_) if size >= 4 => (1, size - 2),
        _ if size >= 2 => (1, size - 1),
        _ => (0, 0),
    }
}

fn offset_of(cidr: &IpNet, ip: IpAddr) -> Option<u128> {
    if !cidr.contains(&ip) {
        return None;
    }
    Some(match (cidr, ip) {
        (IpNet::V4(n), IpAddr::V4(a)) => (u32::from(a) - u32::from(n.network())) as u128,
        (IpNet::V6(n), IpAddr::V6(a)) => u128::from(a) - u128::from(n.network()),
        _ => return None,
    })
}

fn ipaddresses(backend: &Backend) -> Result<Row, StorageError> {
    backend
        .registry
        .lookup("networking.k8s.io", "v1", "ipaddresses")
        .ok_or_else(|| StorageError::Internal("ipaddresses are not in the registry".into()))
}

/// The `IPAddress` object of `ip` held by the Service `namespace/name`.
pub fn ipaddress(ip: IpAddr, namespace: &str, name: &str) -> Value {
    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip.to_string(),
            "labels": {
                "ipaddress.kubernetes.io/ip-family": family,
                "ipaddress.kubernetes.io/managed-by": IPADDRESS_MANAGER,
            },
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": namespace, "name": name}},
    })
}

/// Takes `ip` for the Service `namespace/name` (on a dry run: checks that
/// it could be taken).
pub async fn allocate(
    backend: &Backend,
    cidr: &IpNet,
    ip: IpAddr,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<(), IpError> {
    let cidr = *cidr;
    let (lo, hi) = usable(&cidr);
    match offset_of(&cidr, ip) {
        Some(o) if o >= lo && o <= hi => {}
        _ => return Err(IpError::NotInRange(cidr)),
    }
    if take(backend, ip, namespace, name, dry_run).await? {
        Ok(())
    } else {
        Err(IpError::Allocated)
    }
}

/// Whether `ip` was free (and is now held, unless `dry_run`).
async fn take(
    backend: &Backend,
    ip: IpAddr,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<bool, StorageError> {
    let res = ipaddresses(backend)?;
    let key = backend.key(&res, None, &ip.to_string());
    if dry_run {
        return Ok(backend
            .store
            .get(&key, Freshness::MostRecent)
            .await?
            .is_none());
    }
    let mut obj = ipaddress(ip, namespace, name);
    object::prepare_create(&res, &mut obj, None, &object::now());
    match backend.store.create(&key, &obj).await {
        Ok(_) => Ok(true),
        Err(StorageError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Takes a free address for the Service `namespace/name`. Like kube, it
/// starts at a random address of the upper part of the range (the lower
/// band is left for addresses clients ask for), then walks on from there.
pub async fn allocate_next(
    backend: &Backend,
    cidr: &IpNet,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<IpAddr, IpError> {
    let cidr = *cidr;
    let (lo, hi) = usable(&cidr);
    if hi < lo || hi == 0 {
        return Err(IpError::Full);
    }
    let count = hi - lo + 1;
    // kube's static band: size/16, at least 16 and at most 256 addresses.
    let band = (count / 16).clamp(16, 256).min(count - 1);
    let dynamic = count - band;
    let start = lo + band + rand::rng().random_range(0..dynamic.max(1));
    // Walk the whole range from the random start (capped: a range bigger
    // than this with every probed address taken is, for practical
    // purposes, full).
    for step in 0..count.min(65_536) {
        let offset = lo + (start - lo + step) % count;
        let ip = nth(&cidr, offset);
        if take(backend, ip, namespace, name, dry_run).await? {
            return Ok(ip);
        }
    }
    Err(IpError::Full)
}

/// Gives `ip` back (deletes its `IPAddress`; absent is fine).
pub async fn release(backend: &Backend, ip: IpAddr) -> Result<(), StorageError> {
    let res = ipaddresses(backend)?;
    match backend
        .store
        .delete(&backend.key(&res, None, &ip.to_string()), None)
        .await
    {
        Ok(_) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_usable_ranges() {
        let v4: IpNet = "10.96.0.0/12".parse().unwrap();
        assert_eq!(nth(&v4, 1).to_string(), "10.96.0.1");
        assert_eq!(usable(&v4), (1, (1 << 20) - 2));
        assert_eq!(offset_of(&v4, "10.96.1.0".parse().unwrap()), Some(256));
        assert_eq!(offset_of(&v4, "10.112.0.0".parse().unwrap()), None);
        let small: IpNet = "192.168.0.0/30".parse().unwrap();
        assert_eq!(usable(&small), (1, 2));
        let v6: IpNet = "fd00::/108".parse().unwrap();
        assert_eq!(usable(&v6), (1, (1 << 20) - 1));
        assert_eq!(nth(&v6, 10).to_string(), "fd00::a");
    }
}

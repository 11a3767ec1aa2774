//! The NodePort repair loop (kube's port allocator `Repair`,
//! `pkg/registry/core/service/portallocator/controller/repair.go`): every
//! `--allocation-repair-interval` (kube: 3 minutes) the leader rebuilds the
//! `servicenodeports` bitmap from the Services.
//!
//! One pass: read the bitmap (and its revision), list every Service, mark
//! each one's node ports (and health-check port) in a fresh bitmap; a port
//! a Service holds that the stored bitmap lacks is put back
//! (`PortNotAllocated`, "the node port N for service ns/name is not
//! allocated; repairing"); one held twice is reported
//! (`PortAlreadyAllocated`); one outside the range is reported
//! (`PortOutOfRange`). A port the bitmap marks that no Service holds may
//! be an allocation whose Service is not stored yet, so, as kube does, it
//! is kept for [`PASSES_BEFORE_RELEASE`] passes ("may have leaked:
//! flagging for later clean up") and released on the last ("appears to
//! have leaked: cleaning up"). Passes are at least the interval apart
//! whatever triggers them, so a port is released only after two full
//! intervals in which no Service took it. The new bitmap is written by
//! compare-and-swap on the revision read: an allocation meanwhile makes
//! the pass fail and run again.
//!
//! Fits the controller shape with one queue key (`servicenodeports`): the
//! Services feed it (the first pass runs as soon as this replica leads),
//! and each pass asks to run again after the interval.

use super::events::{self, Event, WARNING};
use super::{Controller, Next, Source};
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use watchcache::{ListOptions, StorageError};

/// kube's `numRepairsBeforeLeakCleanup`.
pub const PASSES_BEFORE_RELEASE: u32 = 3;
const KEY: &str = "servicenodeports";
const CONTROLLER: &str = "portallocator-repair-controller";

/// What one pass found about one Service's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    NotAllocated {
        service: usize,
        port: u16,
    },
    AlreadyAllocated {
        service: usize,
        port: u16,
    },
    OutOfRange {
        service: usize,
        port: u16,
    },
    /// A marked port no Service holds, kept for `passes` more passes.
    MayHaveLeaked {
        port: u16,
    },
    /// A marked port no Service held for the last passes: released.
    Leaked {
        port: u16,
    },
}

/// The outcome of one pass.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The ports the bitmap should mark.
    pub taken: BTreeSet<u16>,
    /// Leak counts for the next pass.
    pub leaks: BTreeMap<u16, u32>,
    pub findings: Vec<Finding>,
}

/// One pass of kube's repair: `stored` is what the bitmap marks,
/// `services[i]` the node ports Service `i` holds, `leaks` the counts of
/// the previous pass.
pub fn plan(
    stored: &BTreeSet<u16>,
    services: &[Vec<u16>],
    range: &RangeInclusive<u16>,
    leaks: &BTreeMap<u16, u32>,
) -> Plan {
    let mut out = Plan::default();
    let mut unclaimed = stored.clone();
    for (service, ports) in services.iter().enumerate() {
        for &port in ports {
            if !range.contains(&port) {
                out.findings.push(Finding::OutOfRange { service, port });
            } else if !out.taken.insert(port) {
                out.findings
                    .push(Finding::AlreadyAllocated { service, port });
            } else if !unclaimed.remove(&port) {
                out.findings.push(Finding::NotAllocated { service, port });
            }
        }
    }
    for port in unclaimed {
        let left = match leaks.get(&port) {
            None => PASSES_BEFORE_RELEASE - 1,
            Some(n) => n.saturating_sub(1),
        };
        if left > 0 {
            if !leaks.contains_key(&port) {
                out.findings.push(Finding::MayHaveLeaked { port });
            }
            out.leaks.insert(port, left);
            out.taken.insert(port);
        } else {
            out.findings.push(Finding::Leaked { port });
        }
    }
    out
}

/// The loop's memory across passes.
#[derive(Default)]
struct Memory {
    leaks: BTreeMap<u16, u32>,
    last_pass: Option<Instant>,
}

pub fn controller(state: &AppState) -> Option<Controller<AppState>> {
    let svc = state.registry.lookup("", "v1", "services")?;
    let memory = Arc::new(Mutex::new(Memory::default()));
    Some(Controller {
        name: "portallocator_repair",
        feed: None,
        sources: vec![Source {
            prefix: state.collection_prefix(&svc, None),
            key_of: |_| Some(KEY.to_string()),
        }],
        reconcile: Arc::new(move |state, _key| pass(state, Arc::clone(&memory)).boxed()),
        workers: 1,
        capacity: 4,
        backoff: super::queue::Backoff::default(),
        resync: None,
    })
}

async fn pass(state: Arc<AppState>, memory: Arc<Mutex<Memory>>) -> Result<Next, String> {
    let interval = state.repair_interval.max(Duration::from_millis(100));
    let (leaks, last) = {
        let m = memory.lock().unwrap_or_else(|e| e.into_inner());
        (m.leaks.clone(), m.last_pass)
    };
    if let Some(at) = last {
        if at.elapsed() < interval {
            return Ok(Next::After(interval - at.elapsed()));
        }
    }
    let (revision, stored) = crate::allocator::ports::snapshot(&state, &state.services.node_ports)
        .await
        .map_err(|e| e.to_string())?;
    let res = state
        .registry
        .lookup("", "v1", "services")
        .ok_or("services missing")?;
    let list = state
        .store
        .list(
            &state.collection_prefix(&res, None),
            &ListOptions {
                freshness: Freshness::MostRecent,
                limit: None,
                continue_from: None,
                predicate: Default::default(),
            },
        )
        .await
        .map_err(|e| format!("unable to refresh the port allocations: {e}"))?;
    let services: Vec<&Value> = list.items.iter().map(|o| o.value()).collect();
    let ports: Vec<Vec<u16>> = services
        .iter()
        .map(|s| crate::allocator::service::held(s).ports)
        .collect();
    let stored: BTreeSet<u16> = stored.into_iter().collect();
    let range = state.services.node_ports.clone();
    let p = plan(&stored, &ports, &range, &leaks);
    if p.taken != stored || revision.is_none() {
        let taken: Vec<u16> = p.taken.iter().copied().collect();
        match crate::allocator::ports::restore(&state, &state.services.node_ports, revision, &taken)
            .await
        {
            Ok(()) => {}
            Err(e @ (StorageError::Conflict { .. } | StorageError::AlreadyExists { .. })) => {
                // Someone allocated meanwhile: a new pass, with the counts
                // of the last good one.
                return Err(format!("the node port allocations changed: {e}"));
            }
            Err(e) => {
                return Err(format!(
                    "unable to persist the updated port allocations: {e}"
                ))
            }
        }
    }
    report(&state, &services, &p.findings, &range).await;
    let mut m = memory.lock().unwrap_or_else(|e| e.into_inner());
    m.leaks = p.leaks;
    m.last_pass = Some(Instant::now());
    Ok(Next::After(interval))
}

/// kube's log lines and events for what a pass found.
async fn report(
    state: &AppState,
    services: &[&Value],
    findings: &[Finding],
    range: &RangeInclusive<u16>,
) {
    let name = |i: usize| {
        let s = services[i];
        format!(
            "{}/{}",
            crate::object::meta_str(s, "namespace").unwrap_or(""),
            crate::object::name(s).unwrap_or("")
        )
    };
    for f in findings {
        let (service, reason, note) = match *f {
            Finding::NotAllocated { service, port } => {
                tracing::warn!(
                    "the node port {port} for service {} is not allocated; repairing",
                    name(service)
                );
                (
                    service,
                    "PortNotAllocated",
                    format!("Port {port} is not allocated; repairing"),
                )
            }
            Finding::AlreadyAllocated { service, port } => {
                tracing::warn!("the node port {port} for service {} was assigned to multiple services; please recreate", name(service));
                (
                    service,
                    "PortAlreadyAllocated",
                    format!(
                        "Port {port} was assigned to multiple services; please recreate service"
                    ),
                )
            }
            Finding::OutOfRange { service, port } => {
                let r = format!("{}-{}", range.start(), range.end());
                tracing::warn!("the port {port} for service {} is not within the port range {r}; please recreate", name(service));
                (
                    service,
                    "PortOutOfRange",
                    format!(
                        "Port {port} is not within the port range {r}; please recreate service"
                    ),
                )
            }
            Finding::MayHaveLeaked { port } => {
                tracing::warn!("the node port {port} may have leaked: flagging for later clean up");
                continue;
            }
            Finding::Leaked { port } => {
                tracing::warn!("the node port {port} appears to have leaked: cleaning up");
                continue;
            }
        };
        events::record(
            state,
            Event {
                regarding: services[service],
                kind: WARNING,
                reason,
                action: "PortAllocation",
                note,
                controller: CONTROLLER,
            },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &[u16]) -> BTreeSet<u16> {
        p.iter().copied().collect()
    }

    #[test]
    fn a_pass_repairs_and_reports() {
        let range = 30000..=30010;
        let services = vec![vec![30001, 30002], vec![30002], vec![40000]];
        let p = plan(&set(&[30001]), &services, &range, &BTreeMap::new());
        assert_eq!(p.taken, set(&[30001, 30002]));
        assert_eq!(
            p.findings,
            vec![
                Finding::NotAllocated {
                    service: 0,
                    port: 30002
                },
                Finding::AlreadyAllocated {
                    service: 1,
                    port: 30002
                },
                Finding::OutOfRange {
                    service: 2,
                    port: 40000
                },
            ]
        );
    }

    #[test]
    fn a_leak_is_released_on_its_third_pass() {
        let range = 30000..=30010;
        let stored = set(&[30005]);
        let first = plan(&stored, &[], &range, &BTreeMap::new());
        assert_eq!(first.taken, set(&[30005]));
        assert_eq!(first.findings, vec![Finding::MayHaveLeaked { port: 30005 }]);
        let second = plan(&stored, &[], &range, &first.leaks);
        assert_eq!(second.taken, set(&[30005]));
        assert!(second.findings.is_empty());
        let third = plan(&stored, &[], &range, &second.leaks);
        assert_eq!(third.taken, set(&[]));
        assert_eq!(third.findings, vec![Finding::Leaked { port: 30005 }]);
        assert!(third.leaks.is_empty());
        // A Service that takes the port meanwhile ends the count.
        let claimed = plan(&stored, &[vec![30005]], &range, &first.leaks);
        assert!(claimed.leaks.is_empty() && claimed.findings.is_empty());
    }
}

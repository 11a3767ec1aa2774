//! `componentstatuses` (kube's deprecated ComponentStatus): the health of
//! each etcd member this server uses, probed when asked, as `etcd-0`,
//! `etcd-1`, ... in `--etcd-servers` order.
//!
//! kube also lists `scheduler` and `controller-manager`, probed on their
//! localhost ports. A replica of this server has neither beside it (and
//! with several replicas behind a load balancer, "localhost" names no one
//! component), so they are not listed rather than listed as unhealthy.

use crate::registry::Computed;
use crate::server::AppState;
use apimachinery::Status;
use futures_util::future::join_all;
use futures_util::FutureExt;
use serde_json::{json, Value};
use std::time::Duration;

/// kube's probe timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

pub static COMPONENT_STATUSES: Computed = Computed {
    list: |state| statuses(state).boxed(),
    // kube answers a plain error here, which becomes a 500 of no reason.
    not_found: |name| Status::failure(500, "", format!("Component not found: {name}")),
    warning: Some("v1 ComponentStatus is deprecated in v1.19+"),
};

fn status(name: String, result: Result<(), String>) -> Value {
    let condition = match result {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(e) => json!({"type": "Healthy", "status": "False", "error": e}),
    };
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    })
}

/// One member, on a connection of its own (the shared client balances
/// over every member and would not tell which one answered).
async fn probe(endpoint: &str) -> Result<(), String> {
    let store = watchcache::etcd::EtcdStore::connect(&[endpoint.to_string()], PROBE_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    store.health().await.map_err(|e| e.to_string())
}

async fn statuses(state: &AppState) -> Vec<Value> {
    let probes = state.etcd_endpoints.iter().map(|ep| probe(ep));
    join_all(probes)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, r)| status(format!("etcd-{i}"), r))
        .collect()
}

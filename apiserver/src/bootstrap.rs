//! Objects every cluster has from the start: the system namespaces, the
//! `default/kubernetes` Service, the default RBAC roles and bindings
//! (`rbac::policy`) and the API Priority and Fairness configuration
//! (`flowcontrol_bootstrap`). Created once (idempotently) by whichever
//! replica gets there first; readyz waits for it.

use crate::object;
use crate::state::AppState;
use apimachinery::read::Freshness;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use watchcache::StorageError;

pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
}

/// The `kubernetes` Service: port 443 to `target_port`, the secure port its
/// endpoints carry (kube's `createPortAndServiceSpec`).
fn kubernetes_service(network: &crate::allocator::ServiceNetwork, target_port: u16) -> Value {
    let ip = network.first_ip().to_string();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": ip,
            "clusterIPs": [ip],
            "ipFamilies": [network.family()],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": target_port}]
        },
        "status": {"loadBalancer": {}}
    })
}

/// kube's local APIService of every built-in group/version: served by
/// this server itself, so always `Available`.
fn local_api_services() -> Vec<Value> {
    let mut seen = std::collections::BTreeSet::new();
    let now = crate::object::now();
    crate::registry::RESOURCES
        .iter()
        .filter(|r| seen.insert((r.group.clone(), r.version.clone())))
        .map(|r| {
            let (group_priority, version_priority) =
                crate::discovery::api_service_priority(&r.group, &r.version);
            json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {
                    "name": format!("{}.{}", r.version, r.group),
                    "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
                },
                "spec": {
                    "group": r.group,
                    "version": r.version,
                    "groupPriorityMinimum": group_priority,
                    "versionPriority": version_priority,
                },
                "status": {"conditions": [{
                    "type": "Available",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "Local",
                    "message": "Local APIServices are always available",
                }]},
            })
        })
        .collect()
}

/// kube's default ServiceCIDR, publishing `--service-cluster-ip-range`.
/// The PriorityClasses kube-apiserver keeps for system pods.
fn system_priority_classes() -> Vec<Value> {
    apimachinery::kinds::scheduling::SYSTEM
        .iter()
        .map(|(name, value)| {
            let description = if *name == "system-node-critical" {
                "Used for system critical pods that must not be moved from their current node."
            } else {
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
            };
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": description,
            })
        })
        .collect()
}

fn default_service_cidr(network: &crate::allocator::ServiceNetwork) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"},
        "spec": {"cidrs": [network.cidr.to_string()]},
        "status": {"conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "",
            "message": "Kubernetes Service CIDR is ready",
            "lastTransitionTime": crate::object::now(),
        }]}
    })
}

async fn ensure(
    state: &AppState,
    group: &str,
    plural: &str,
    ns: Option<&str>,
    mut obj: Value,
) -> Result<i64, StorageError> {
    let Some(res) = state.registry.lookup(group, "v1", plural) else {
        return Err(StorageError::Internal(format!(
            "{plural} not in the registry"
        )));
    };
    let name = object::meta_str(&obj, "name").unwrap_or("").to_string();
    let now = object::now();
    object::prepare_create(&res, &mut obj, ns, &now);
    if let Some(defaults) = res.rules.defaults {
        defaults(&mut obj);
    }
    if let Some(prepare) = res.rules.prepare_create {
        prepare(&mut obj);
    }
    // The revision of the write, 0 when the object was already there.
    match state.store.create(&state.key(&res, ns, &name), &obj).await {
        Ok(o) => Ok(o.revision),
        Err(StorageError::AlreadyExists { .. }) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Creates a FlowSchema or PriorityLevelConfiguration of kube's bootstrap
/// configuration, or, when one of that name is stored, revises it by
/// kube's ensurer rule (`flowcontrol_bootstrap::revise`). A concurrent
/// write wins (kube's ensurer gives way too); a concurrent delete leaves
/// the object to the next start.
async fn ensure_flowcontrol(
    state: &AppState,
    plural: &str,
    boot: crate::flowcontrol_bootstrap::Bootstrap,
) -> Result<(), StorageError> {
    let group = crate::flowcontrol_bootstrap::GROUP;
    if ensure(state, group, plural, None, boot.object.clone()).await? != 0 {
        return Ok(());
    }
    let Some(res) = state.registry.lookup(group, "v1", plural) else {
        return Ok(());
    };
    let name = object::meta_str(&boot.object, "name").unwrap_or("");
    let key = state.key(&res, None, name);
    let Some(current) = state.store.get(&key, Freshness::MostRecent).await? else {
        return Ok(());
    };
    let Some(mut revised) =
        crate::flowcontrol_bootstrap::revise(current.value(), &boot.object, boot.mandatory)
    else {
        return Ok(());
    };
    object::prepare_update(&res, current.value(), &mut revised, None);
    object::meta_mut(&mut revised).remove("resourceVersion");
    match state.store.update(&key, &revised, current.revision).await {
        Ok(_) | Err(StorageError::Conflict { .. }) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Publishes `kube-system/extension-apiserver-authentication` (how
/// extension servers authenticate this server's proxied requests and its
/// clients' certificates), replacing its data when it differs, as kube's
/// cluster-authentication-trust controller keeps it current.
async fn ensure_authentication_configmap(state: &AppState) -> Result<(), StorageError> {
    let Some(identity) = &state.proxy_identity else {
        return Ok(());
    };
    let ns = crate::aggregator::AUTH_CONFIGMAP_NAMESPACE;
    let wanted = identity.configmap(state.root_ca.as_deref());
    if ensure(state, "", "configmaps", Some(ns), wanted.clone()).await? != 0 {
        return Ok(());
    }
    let Some(res) = state.registry.lookup("", "v1", "configmaps") else {
        return Ok(());
    };
    let key = state.key(&res, Some(ns), crate::aggregator::AUTH_CONFIGMAP_NAME);
    let Some(current) = state.store.get(&key, Freshness::MostRecent).await? else {
        return Ok(());
    };
    if current.value().get("data") == wanted.get("data") {
        return Ok(());
    }
    let mut next = current.value().clone();
    next["data"] = wanted["data"].clone();
    object::meta_mut(&mut next).remove("resourceVersion");
    match state.store.update(&key, &next, current.revision).await {
        Ok(_) | Err(StorageError::Conflict { .. }) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes what is missing; answers the newest revisions of the
/// ClusterRoles and ClusterRoleBindings it wrote (0: none).
async fn bootstrap_once(state: &AppState) -> Result<(i64, i64), StorageError> {
    for ns in SYSTEM_NAMESPACES {
        ensure(state, "", "namespaces", None, namespace(ns)).await?;
    }
    let network = &state.services;
    ensure(
        state,
        "networking.k8s.io",
        "servicecidrs",
        None,
        default_service_cidr(network),
    )
    .await?;
    let first = network.first_ip();
    let address = crate::allocator::ipaddress(first, "default", "kubernetes");
    ensure(state, "networking.k8s.io", "ipaddresses", None, address).await?;
    ensure(
        state,
        "",
        "services",
        Some("default"),
        kubernetes_service(network, state.advertise.map_or(6443, |a| a.port())),
    )
    .await?;
    for service in local_api_services() {
        ensure(
            state,
            "apiregistration.k8s.io",
            "apiservices",
            None,
            service,
        )
        .await?;
    }
    ensure_authentication_configmap(state).await?;
    for class in system_priority_classes() {
        ensure(state, "scheduling.k8s.io", "priorityclasses", None, class).await?;
    }
    // Levels first, so a schema never names a level that is not there.
    for level in crate::flowcontrol_bootstrap::priority_levels() {
        ensure_flowcontrol(state, "prioritylevelconfigurations", level).await?;
    }
    for schema in crate::flowcontrol_bootstrap::flow_schemas() {
        ensure_flowcontrol(state, "flowschemas", schema).await?;
    }
    let rbac = apimachinery::rbac::GROUP;
    let (mut roles, mut bindings) = (0, 0);
    for role in crate::rbac::policy::cluster_roles() {
        roles = roles.max(ensure(state, rbac, "clusterroles", None, role).await?);
    }
    for binding in crate::rbac::policy::cluster_role_bindings() {
        bindings = bindings.max(ensure(state, rbac, "clusterrolebindings", None, binding).await?);
    }
    Ok((roles, bindings))
}

/// Retries until the bootstrap objects exist, then marks the state ready.
pub async fn run(state: Arc<AppState>) {
    let mut delay = Duration::from_millis(100);
    loop {
        match bootstrap_once(&state).await {
            Ok((roles, bindings)) => {
                // Ready only once the RBAC index has applied the roles and
                // bindings just written, or the first requests after
                // /readyz passes would be refused by a policy without them.
                if let Some(rbac) = &state.rbac {
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                    while !rbac.has_seen_cluster_policy(roles, bindings)
                        && tokio::time::Instant::now() < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                state.bootstrapped.store(true, Ordering::Release);
                tracing::info!("bootstrap objects present");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "bootstrap failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

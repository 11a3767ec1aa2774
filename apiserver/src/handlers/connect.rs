//! The subresources kube answers by connecting to a kubelet or a Service's
//! endpoints: `pods/log`, `exec`, `attach`, `portforward`, `proxy`,
//! `nodes/proxy` and `services/proxy`.
//!
//! This server runs no kubelets and has no route into a cluster network.
//! Each answer makes the checks kube makes before it would connect (the
//! object exists, the container is named right, the pod is bound, the
//! address may be proxied to), with kube's codes and words, and then says
//! in a 503 Status that the connection it would make is not available
//! here. A log request for a pod no node runs is answered as kube answers
//! it: 204, no content. `services/proxy` does not proxy, even to
//! endpoints this host could reach: kube refuses loopback addresses, and
//! anything else would need the cluster network this server does not join.

use super::scope::Scope;
use crate::error::Result;
use crate::registry::{Connect, ConnectTarget};
use apimachinery::read::Freshness;
use apimachinery::status::GroupResource;
use apimachinery::validation;
use apimachinery::Status;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use serde_json::Value;
use std::net::IpAddr;
use std::sync::Arc;

/// The options object of a connect request, as kube decodes it from the
/// query (and the proxy path): what admission sees as the `CONNECT`
/// request's object.
pub fn options_object(c: &Connect, scope: &Scope, subpath: Option<&str>) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("kind".into(), Value::from(c.kind));
    o.insert("apiVersion".into(), Value::from("v1"));
    for (name, ty) in c.params {
        // The repeated parameters are lists in the options kinds.
        let list = matches!(*name, "command" | "ports");
        let values: Vec<Value> = scope
            .query
            .get_all(name)
            .map(|v| match *ty {
                "boolean" => Value::Bool(v == "true" || v == "1"),
                "integer" => v.parse::<i64>().map_or(Value::from(v), Value::from),
                _ => Value::from(v),
            })
            .collect();
        if list {
            if !values.is_empty() {
                o.insert((*name).into(), Value::Array(values));
            }
        } else if let Some(v) = values.into_iter().next() {
            o.insert((*name).into(), v);
        }
    }
    if c.with_path {
        if let Some(path) = subpath {
            o.insert("path".into(), Value::from(path));
        }
    }
    Value::Object(o)
}

/// The answer of a connect subresource, by where it would connect.
pub fn answer<'a>(
    target: ConnectTarget,
    s: &'a Scope,
) -> futures_util::future::BoxFuture<'a, Result<Response>> {
    match target {
        ConnectTarget::PodLog => log(s).boxed(),
        ConnectTarget::PodExec => stream(s, "exec").boxed(),
        ConnectTarget::PodAttach => stream(s, "attach").boxed(),
        ConnectTarget::PodPortForward => stream(s, "portforward").boxed(),
        ConnectTarget::PodProxy => pod_proxy(s).boxed(),
        ConnectTarget::NodeProxy => node_proxy(s).boxed(),
        ConnectTarget::ServiceProxy => service_proxy(s).boxed(),
    }
}

/// Whether `method` is one `c` serves.
pub fn serves(c: &Connect, method: &Method) -> bool {
    c.methods
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method.as_str()))
}

/// The 503 of a connection this server cannot make.
fn unreachable(what: String) -> Status {
    Status::service_unavailable(format!(
        "{what}: this API server runs without kubelets and has no route into the cluster network"
    ))
}

/// An object of the core group, read as a GET would read it.
async fn read(scope: &Scope, plural: &'static str, name: &str) -> Result<Arc<Value>> {
    let res = scope
        .state
        .registry
        .lookup("", "v1", plural)
        .ok_or_else(|| Status::internal(format!("{plural} not in the registry")))?;
    let key = scope.state.key(&res, scope.namespace.as_deref(), name);
    let gr = GroupResource {
        group: "",
        resource: plural,
    };
    scope
        .state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| crate::error::ApiError::storage(e, &res, name))?
        .map(|o| o.into_value())
        .ok_or_else(|| Status::not_found(gr, name).into())
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Names of the pod's containers in kube's visiting order: init
/// containers, containers, ephemeral containers.
fn container_names(pod: &Value) -> Vec<&str> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            pod.pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .map(|c| str_at(c, "/name"))
        .collect()
}

/// The container a log, exec or attach request is for (kube's
/// validateContainer): the named one, or the only one.
fn container<'a>(pod: &'a Value, name: &str, asked: Option<&'a str>) -> Result<&'a str> {
    match asked.filter(|c| !c.is_empty()) {
        Some(c) if container_names(pod).contains(&c) => Ok(c),
        Some(c) => {
            Err(Status::bad_request(format!("container {c} is not valid for pod {name}")).into())
        }
        None => {
            let main = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            match main {
                [only] => Ok(str_at(only, "/name")),
                [] => Err(Status::bad_request(format!(
                    "a container name must be specified for pod {name}"
                ))
                .into()),
                _ => Err(Status::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    container_names(pod).join(" ")
                ))
                .into()),
            }
        }
    }
}

/// A query parameter as Go's `strconv.ParseInt` reads it.
fn int_param(scope: &Scope, name: &str) -> Result<Option<i64>> {
    match scope.query.get(name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            Status::bad_request(format!("strconv.ParseInt: parsing {v:?}: invalid syntax")).into()
        }),
    }
}

/// A query parameter as Go's `strconv.ParseBool` reads it.
fn bool_param(scope: &Scope, name: &str) -> Result<bool> {
    match scope.query.get(name) {
        None => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("" | "0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(v) => Err(Status::bad_request(format!(
            "strconv.ParseBool: parsing {v:?}: invalid syntax"
        ))
        .into()),
    }
}

/// kube's ValidatePodLogOptions.
fn validate_log_options(scope: &Scope) -> Result<()> {
    for flag in [
        "follow",
        "previous",
        "timestamps",
        "insecureSkipTLSVerifyBackend",
    ] {
        bool_param(scope, flag)?;
    }
    let mut causes = Vec::new();
    if let Some(n) = int_param(scope, "tailLines")?.filter(|n| *n < 0) {
        causes.push(validation::invalid_json(
            "tailLines",
            &n.into(),
            "must be greater than or equal to 0",
        ));
    }
    if let Some(n) = int_param(scope, "limitBytes")?.filter(|n| *n < 1) {
        causes.push(validation::invalid_json(
            "limitBytes",
            &n.into(),
            "must be greater than 0",
        ));
    }
    let since_seconds = int_param(scope, "sinceSeconds")?;
    let since_time = scope.query.get("sinceTime");
    if let Some(t) = since_time {
        if chrono::DateTime::parse_from_rfc3339(t).is_err() {
            return Err(Status::bad_request(format!(
                "parsing time {t:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {t:?}"
            ))
            .into());
        }
    }
    match (since_seconds, since_time) {
        (Some(_), Some(_)) => causes.push(validation::forbidden(
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        )),
        (Some(n), None) if n < 1 => causes.push(validation::invalid_json(
            "sinceSeconds",
            &n.into(),
            "must be greater than 0",
        )),
        _ => {}
    }
    if let Some(s) = scope.query.get("stream") {
        if !["All", "Stderr", "Stdout"].contains(&s) {
            causes.push(validation::not_supported(
                "stream",
                s,
                &["All", "Stderr", "Stdout"],
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let kind = apimachinery::status::GroupKind {
        group: "",
        kind: "PodLogOptions",
    };
    Err(Status::invalid(kind, scope.name(), causes).into())
}

/// The node a pod runs on, checked as kube's connection lookup checks it
/// (a node that is not there is a 404); then the 503 of the kubelet
/// connection.
async fn kubelet(scope: &Scope, node: &str, what: String) -> Result<Response> {
    read(scope, "nodes", node).await?;
    Err(unreachable(format!("{what} on node {node:?}")).into())
}

async fn log(scope: &Scope) -> Result<Response> {
    validate_log_options(scope)?;
    let name = scope.name();
    let pod = read(scope, "pods", name).await?;
    let c = container(&pod, name, scope.query.get("container"))?;
    let node = str_at(&pod, "/spec/nodeName");
    if node.is_empty() {
        // kube: no host yet, so no location and no content.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    kubelet(
        scope,
        node,
        format!("cannot read the logs of container {c:?} in pod {name:?}"),
    )
    .await
}

/// `exec`, `attach` and `portforward` (kube's streamLocation and
/// PortForwardLocation).
async fn stream(scope: &Scope, what: &str) -> Result<Response> {
    let name = scope.name();
    let pod = read(scope, "pods", name).await?;
    let target = if what == "portforward" {
        for p in scope.query.get_all("ports") {
            p.parse::<i32>().map_err(|_| {
                Status::bad_request(format!("strconv.ParseInt: parsing {p:?}: invalid syntax"))
            })?;
        }
        format!("cannot forward ports of pod {name:?}")
    } else {
        for flag in ["stdin", "stdout", "stderr", "tty"] {
            bool_param(scope, flag)?;
        }
        let c = container(&pod, name, scope.query.get("container"))?;
        format!("cannot {what} to container {c:?} in pod {name:?}")
    };
    let node = str_at(&pod, "/spec/nodeName");
    if node.is_empty() {
        return Err(
            Status::bad_request(format!("pod {name} does not have a host assigned")).into(),
        );
    }
    kubelet(scope, node, target).await
}

/// A proxy id: `name`, `name:port` or `scheme:name:port` (kube's
/// SplitSchemeNamePort).
fn split_id(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// Go's `IP.IsGlobalUnicast`: what kube proxies to.
fn global_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

async fn pod_proxy(scope: &Scope) -> Result<Response> {
    let id = scope.name();
    let (_, name, port) =
        split_id(id).ok_or_else(|| Status::bad_request(format!("invalid pod request {id:?}")))?;
    let pod = read(scope, "pods", name).await?;
    let port = if port.is_empty() {
        pod.pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|c| c.pointer("/ports/0/containerPort").and_then(Value::as_i64))
            .map(|p| p.to_string())
            .unwrap_or_default()
    } else {
        port.to_string()
    };
    let ip = str_at(&pod, "/status/podIPs/0/ip");
    if !ip.parse().is_ok_and(global_unicast) {
        return Err(Status::bad_request("address not allowed").into());
    }
    let at = if port.is_empty() {
        ip.to_string()
    } else {
        format!("{ip}:{port}")
    };
    Err(unreachable(format!("cannot proxy to pod {name:?} at {at}")).into())
}

async fn node_proxy(scope: &Scope) -> Result<Response> {
    let id = scope.name();
    let (_, name, _) =
        split_id(id).ok_or_else(|| Status::bad_request(format!("invalid node request {id:?}")))?;
    read(scope, "nodes", name).await?;
    Err(unreachable(format!("cannot proxy to the kubelet of node {name:?}")).into())
}

/// kube's Service ResourceLocation, up to the endpoint it would pick.
async fn service_proxy(scope: &Scope) -> Result<Response> {
    let id = scope.name();
    let (_, name, mut port) = split_id(id)
        .ok_or_else(|| Status::bad_request(format!("invalid service request {id:?}")))?;
    let service = read(scope, "services", name).await?;
    if let Ok(number) = port.parse::<i64>() {
        let named = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(number));
        match named {
            Some(p) => port = str_at(p, "/name"),
            None => {
                return Err(Status::service_unavailable(format!(
                    "no service port {number} found for service {name:?}"
                ))
                .into())
            }
        }
    }
    let endpoints = read(scope, "endpoints", name).await?;
    let subsets = endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if subsets.is_empty() {
        return Err(Status::service_unavailable(format!(
            "no endpoints available for service {name:?}"
        ))
        .into());
    }
    for subset in subsets {
        let ports = subset.get("ports").and_then(Value::as_array);
        let Some(p) = ports
            .into_iter()
            .flatten()
            .find(|p| str_at(p, "/name") == port)
        else {
            continue;
        };
        let address = subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| str_at(a, "/ip"))
            .find(|ip| ip.parse().is_ok_and(global_unicast));
        if let Some(ip) = address {
            let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            return Err(unreachable(format!(
                "cannot proxy to service {name:?} at endpoint {ip}:{number}"
            ))
            .into());
        }
    }
    Err(Status::service_unavailable(format!("no endpoints available for service {id:?}")).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn proxy_ids_split_as_kube_splits_them() {
        assert_eq!(split_id("web"), Some(("", "web", "")));
        assert_eq!(split_id("web:8080"), Some(("", "web", "8080")));
        assert_eq!(split_id("https:web:8443"), Some(("https", "web", "8443")));
        assert_eq!(split_id("ftp:web:21"), None);
        assert_eq!(split_id(":80"), None);
        assert_eq!(split_id("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_proxied() {
        for ok in [
            "10.0.0.5",
            "192.168.1.2",
            "8.8.8.8",
            "2001:db8::1",
            "fd00::1",
        ] {
            assert!(global_unicast(ok.parse().unwrap()), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.1.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(!global_unicast(bad.parse().unwrap()), "{bad}");
        }
    }

    #[test]
    fn containers_are_chosen_as_kube_chooses_them() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "app"}, {"name": "side"}],
            "ephemeralContainers": [{"name": "debug"}],
        }});
        assert_eq!(container(&pod, "p", Some("debug")).unwrap(), "debug");
        assert_eq!(container(&pod, "p", Some("init")).unwrap(), "init");
        let err = |r: Result<&str>| match r {
            Err(crate::error::ApiError::Status(s)) => (s.code, s.message),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            err(container(&pod, "p", None)),
            (
                400,
                "a container name must be specified for pod p, choose one of: [init app side debug]"
                    .into()
            )
        );
        assert_eq!(
            err(container(&pod, "p", Some("nope"))),
            (400, "container nope is not valid for pod p".into())
        );
        let single = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(container(&single, "p", None).unwrap(), "app");
        assert_eq!(
            err(container(&json!({"spec": {}}), "p", None)),
            (400, "a container name must be specified for pod p".into())
        );
    }
}

//! Services: kube's `SetDefaults_Service`, the registry's create/update
//! preparation (status reset, clusterIP(s) kept in step, allocated values
//! carried over on update), `ValidateService`/`ValidateServiceUpdate` and the
//! service printer.

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_field, default_str, object_mut};
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
#[cfg(test)]
use crate::StatusCause;

pub(crate) mod validate;

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: Some(prepare_create),
    prepare_create_as: None,
    prepare_update: Some(prepare_update),
    validate: Some(validate::validate),
    validate_status: Some(validate::validate_status),
    columns: COLUMNS,
};

pub(crate) fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

fn externally_accessible(spec: &Map<String, Value>) -> bool {
    match str_of(spec, "type") {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => spec
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
        _ => false,
    }
}

fn has_selector(spec: &Map<String, Value>) -> bool {
    spec.get("selector")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty())
}

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_str(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_str(spec, "type", "ClusterIP");
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_str(p, "protocol", "TCP");
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(n) => n.as_i64() == Some(0),
            };
            if unset {
                let port = p.get("port").cloned().unwrap_or(json!(0));
                p.insert("targetPort".into(), port);
            }
        }
    }
    if externally_accessible(spec) {
        let empty = spec
            .get("externalTrafficPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if empty {
            spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
        }
    }
    let ty = str_of(spec, "type");
    let ty_known = matches!(ty, "ClusterIP" | "NodePort" | "LoadBalancer");
    let lb = ty == "LoadBalancer";
    if ty_known {
        default_str(spec, "internalTrafficPolicy", "Cluster");
    }
    if lb {
        default_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if ty_known {
        default_ip_families(spec);
    }
}

/// The IP family fields kube's registry fills in on a single-stack IPv4
/// cluster (IPv6 when the requested clusterIP is one); a headless Service
/// without selector asks for both families.
fn default_ip_families(spec: &mut Map<String, Value>) {
    let cluster_ip = spec
        .get("clusterIPs")
        .and_then(|c| c.get(0))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| str_of(spec, "clusterIP"));
    let headless = cluster_ip == "None";
    let family = if v::is_ipv6(cluster_ip) {
        "IPv6"
    } else {
        "IPv4"
    };
    let families_set = spec
        .get("ipFamilies")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if headless && !has_selector(spec) {
        default_str(spec, "ipFamilyPolicy", "RequireDualStack");
        if !families_set && str_of(spec, "ipFamilyPolicy") != "SingleStack" {
            spec.insert("ipFamilies".into(), json!(["IPv4", "IPv6"]));
        } else if !families_set {
            spec.insert("ipFamilies".into(), json!([family]));
        }
        return;
    }
    default_str(spec, "ipFamilyPolicy", "SingleStack");
    if !families_set {
        spec.insert("ipFamilies".into(), json!([family]));
    }
}

/// `clusterIP` and `clusterIPs[0]` name the same address: whichever the
/// client gave fills the other.
fn sync_cluster_ips(spec: &mut Map<String, Value>) {
    let ip = str_of(spec, "clusterIP");
    let ips_empty = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty());
    if !ip.is_empty() && ips_empty {
        let ips = json!([ip]);
        spec.insert("clusterIPs".into(), ips);
    } else if ip.is_empty() && !ips_empty {
        if let Some(first) = spec.get("clusterIPs").and_then(|a| a.get(0)).cloned() {
            spec.insert("clusterIP".into(), first);
        }
    }
}

fn prepare_create(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    o.insert("status".into(), json!({"loadBalancer": {}}));
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        sync_cluster_ips(spec);
    }
}

/// Whether a Service of this spec has cluster IPs (kube's `needsClusterIP`:
/// every type but ExternalName; headless Services included).
pub fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    str_of(spec, "type") != "ExternalName"
}

/// Whether node ports are allocated for a Service of this spec: NodePort,
/// and LoadBalancer unless `allocateLoadBalancerNodePorts` is false.
pub fn needs_node_ports(spec: &Map<String, Value>) -> bool {
    match str_of(spec, "type") {
        "NodePort" => true,
        "LoadBalancer" => spec
            .get("allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

fn missing(m: &Map<String, Value>, key: &str) -> bool {
    match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(n) => n.as_i64() == Some(0),
    }
}

/// What kube's service REST update does before validation: values the
/// server allocated (cluster IPs, node ports) are kept when the client left
/// them out, and fields the new type does not use are dropped when the
/// client did not change them.
fn prepare_update(obj: &mut Value, old: &Value) {
    let Some(old_spec) = old.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if needs_cluster_ip(old_spec) && needs_cluster_ip(spec) {
        for key in ["clusterIP", "clusterIPs"] {
            if missing(spec, key) && !missing(old_spec, key) {
                spec.insert(key.into(), old_spec[key].clone());
            }
        }
    }
    follow_cluster_ip(spec, old_spec);
    sync_cluster_ips(spec);
    if needs_node_ports(old_spec) && needs_node_ports(spec) {
        carry_node_ports(spec, old_spec);
    }
    if str_of(old_spec, "type") == "LoadBalancer"
        && str_of(spec, "type") == "LoadBalancer"
        && missing(spec, "healthCheckNodePort")
        && !missing(old_spec, "healthCheckNodePort")
        && str_of(spec, "externalTrafficPolicy") == "Local"
    {
        spec.insert(
            "healthCheckNodePort".into(),
            old_spec["healthCheckNodePort"].clone(),
        );
    }
    drop_type_dependent(spec, old_spec);
}

/// kube's `normalizeClusterIPs` on update: `clusterIPs` follows a changed
/// `clusterIP` when the client left `clusterIPs` as it was (so changing
/// the address answers kube's "may not change once set" on
/// `spec.clusterIPs[0]`, not a mismatch of the two fields); a cleared
/// `clusterIP` clears an unchanged `clusterIPs`; `clusterIPs` left out
/// with `clusterIP` unchanged keeps the old list.
fn follow_cluster_ip(spec: &mut Map<String, Value>, old: &Map<String, Value>) {
    let ips_of = |m: &Map<String, Value>| {
        m.get("clusterIPs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (old_ip, new_ip) = (str_of(old, "clusterIP"), str_of(spec, "clusterIP"));
    let (old_ips, new_ips) = (ips_of(old), ips_of(spec));
    if !old_ips.is_empty() && new_ips.is_empty() && old_ip == new_ip {
        spec.insert("clusterIPs".into(), Value::Array(old_ips));
        return;
    }
    if old_ip == new_ip || old_ips != new_ips {
        return;
    }
    if new_ip.is_empty() {
        spec.remove("clusterIPs");
    } else {
        let ip = Value::from(new_ip);
        spec.insert("clusterIPs".into(), Value::Array(vec![ip]));
    }
}

/// A port without nodePort gets the one of the old port of the same name,
/// unless a port of the new spec already uses it (kube's
/// `patchAllocatedValues`).
fn carry_node_ports(spec: &mut Map<String, Value>, old_spec: &Map<String, Value>) {
    let Some(old_ports) = old_spec.get("ports").and_then(Value::as_array) else {
        return;
    };
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    let node_port = |p: &Value| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
    let used: Vec<i64> = ports.iter().map(node_port).filter(|n| *n != 0).collect();
    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
        if !missing(p, "nodePort") {
            continue;
        }
        let name = str_of(p, "name");
        let old = old_ports
            .iter()
            .rfind(|o| o.get("name").and_then(Value::as_str).unwrap_or("") == name)
            .map(node_port)
            .unwrap_or(0);
        if old != 0 && !used.contains(&old) {
            p.insert("nodePort".into(), Value::from(old));
        }
    }
}

/// kube's `dropTypeDependentFields`: unchanged values the new type does not
/// use are cleared, so that changing only `type` is a valid update.
fn drop_type_dependent(spec: &mut Map<String, Value>, old: &Map<String, Value>) {
    if str_of(spec, "type") == str_of(old, "type") {
        return;
    }
    let same = |spec: &Map<String, Value>, k: &str| spec.get(k) == old.get(k);
    if !needs_cluster_ip(spec) {
        for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if same(spec, k) {
                spec.remove(k);
            }
        }
    }
    if !needs_node_ports(spec) {
        if let (Some(ports), Some(old_ports)) = (
            spec.get_mut("ports").and_then(Value::as_array_mut),
            old.get("ports").and_then(Value::as_array),
        ) {
            for (i, p) in ports.iter_mut().enumerate() {
                let old_np = old_ports.get(i).and_then(|o| o.get("nodePort"));
                if let Some(p) = p.as_object_mut() {
                    if p.get("nodePort").is_some() && p.get("nodePort") == old_np {
                        p.remove("nodePort");
                    }
                }
            }
        }
    }
    if str_of(spec, "type") != "LoadBalancer" {
        for k in [
            "healthCheckNodePort",
            "allocateLoadBalancerNodePorts",
            "loadBalancerClass",
        ] {
            if same(spec, k) {
                spec.remove(k);
            }
        }
    }
    if !externally_accessible(spec) && same(spec, "externalTrafficPolicy") {
        spec.remove("externalTrafficPolicy");
    }
    if str_of(spec, "type") == "ExternalName" && same(spec, "internalTrafficPolicy") {
        spec.remove("internalTrafficPolicy");
    }
}

// ---------------------------------------------------------------------------
// Printer.

const COLUMNS: &[Column] = &[
    NAME,
    column("Type", "string", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.", 0, type_cell),
    column("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly.", 0, cluster_ip_cell),
    column("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.", 0, external_ip_cell),
    column("Port(s)", "string", "The list of ports that are exposed by this service.", 0, ports_cell),
    AGE,
    column("Selector", "string", "Route service traffic to pods with label keys and values matching this selector.", 1, selector_cell),
];

fn type_cell(obj: &Value, _: &PrintContext) -> Value {
    json!(print::str_at(obj, "/spec/type", ""))
}

fn cluster_ip_cell(obj: &Value, _: &PrintContext) -> Value {
    let ip = print::strs_at(obj, "/spec/clusterIPs")
        .next()
        .unwrap_or("<none>");
    json!(ip)
}

/// kube's `loadBalancerStatusStringer`: the set (sorted, deduplicated) of
/// ingress IPs or hostnames; kube cuts it to 16 characters only for
/// non-wide output, and the server prints wide.
fn load_balancer_ips(obj: &Value) -> Vec<&str> {
    obj.pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let ip = i.get("ip").and_then(Value::as_str).unwrap_or("");
            let host = i.get("hostname").and_then(Value::as_str).unwrap_or("");
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn external_ip_cell(obj: &Value, _: &PrintContext) -> Value {
    let external: Vec<&str> = print::strs_at(obj, "/spec/externalIPs").collect();
    let s = match print::str_at(obj, "/spec/type", "") {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_string()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut all = load_balancer_ips(obj);
            all.extend(external);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => print::str_at(obj, "/spec/externalName", "").to_string(),
        _ => "<unknown>".to_string(),
    };
    Value::String(s)
}

fn ports_cell(obj: &Value, _: &PrintContext) -> Value {
    let ports = obj.pointer("/spec/ports").and_then(Value::as_array);
    let pieces: Vec<String> = ports
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) if np > 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    if pieces.is_empty() {
        json!("<none>")
    } else {
        Value::String(pieces.join(","))
    }
}

fn selector_cell(obj: &Value, _: &PrintContext) -> Value {
    Value::String(print::label_map(obj.pointer("/spec/selector")))
}

/// The causes of an invalid Service (used by the tests of this module).
#[cfg(test)]
fn check(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    validate::validate(obj, old)
}

#[cfg(test)]
mod tests;

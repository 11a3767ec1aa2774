//! kube's `ValidateService` and `ValidateServiceUpdate`, on the JSON form.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{externally_accessible, str_of};
use crate::validation as v;
use crate::StatusCause;

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const AFFINITIES: &[&str] = &["ClientIP", "None"];
const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];
const IP_FAMILIES: &[&str] = &["IPv4", "IPv6"];
const IP_FAMILY_POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
const MAX_AFFINITY_SECONDS: i64 = 86400;

fn strs<'a>(m: &'a Map<String, Value>, key: &str) -> Vec<&'a str> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

fn is_set(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_some_and(|x| !x.is_null())
}

fn headless(spec: &Map<String, Value>) -> bool {
    matches!(strs(spec, "clusterIPs").as_slice(), ["None"])
}

fn int_of(m: &Map<String, Value>, key: &str) -> i64 {
    m.get(key).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let mut errs = Vec::new();
    if let Some(old) = old {
        let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
        update_cluster_ips(spec, old_spec, &mut errs);
        update_ip_families(spec, old_spec, &mut errs);
        update_load_balancer_class(spec, old_spec, &mut errs);
        let needs_hc = |s: &Map<String, Value>| {
            str_of(s, "type") == "LoadBalancer" && str_of(s, "externalTrafficPolicy") == "Local"
        };
        if needs_hc(old_spec)
            && needs_hc(spec)
            && int_of(spec, "healthCheckNodePort") != int_of(old_spec, "healthCheckNodePort")
        {
            errs.push(v::forbidden(
                "spec.healthCheckNodePort",
                "field is immutable",
            ));
        }
    }
    validate_spec(spec, &mut errs);
    errs
}

/// The status subresource: the load balancer ingress points.
pub(super) fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    for (i, ing) in ingress.into_iter().flatten().enumerate() {
        let Some(ing) = ing.as_object() else { continue };
        let ip = str_of(ing, "ip");
        if !ip.is_empty() {
            errs.extend(v::validate_ip(
                &format!("status.loadBalancer.ingress[{i}].ip"),
                ip,
            ));
        }
        let host = str_of(ing, "hostname");
        if !host.is_empty() {
            let field = format!("status.loadBalancer.ingress[{i}].hostname");
            for msg in v::is_dns1123_subdomain(host) {
                errs.push(v::invalid(&field, host, &msg));
            }
            if v::is_ip(host) {
                errs.push(v::invalid(
                    &field,
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    errs
}

fn validate_spec(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>) {
    let ty = str_of(spec, "type");
    let is_headless = headless(spec);
    let cluster_ips = strs(spec, "clusterIPs");
    let ports: Vec<&Map<String, Value>> = spec
        .get("ports")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    if ports.is_empty() && !is_headless && ty != "ExternalName" {
        errs.push(v::required("spec.ports", ""));
    }
    match ty {
        "LoadBalancer" | "NodePort" if is_headless => errs.push(v::invalid(
            "spec.clusterIPs[0]",
            cluster_ips[0],
            &format!("may not be set to 'None' for {ty} services"),
        )),
        "ExternalName" => {
            for (k, set) in [
                ("clusterIPs", !cluster_ips.is_empty()),
                ("ipFamilies", !strs(spec, "ipFamilies").is_empty()),
                ("ipFamilyPolicy", is_set(spec, "ipFamilyPolicy")),
            ] {
                if set {
                    errs.push(v::forbidden(
                        &format!("spec.{k}"),
                        "may not be set for ExternalName services",
                    ));
                }
            }
            let name = str_of(spec, "externalName");
            let cname = name.strip_suffix('.').unwrap_or(name);
            if cname.is_empty() {
                errs.push(v::required("spec.externalName", ""));
            } else {
                for msg in v::is_dns1123_subdomain(cname) {
                    errs.push(v::invalid("spec.externalName", cname, &msg));
                }
            }
        }
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        validate_port(p, ports.len() > 1, &mut names, i, errs);
    }
    if let Some(sel) = spec.get("selector") {
        errs.extend(v::validate_labels(sel, "spec.selector"));
    }
    validate_affinity(spec, errs);
    cluster_ips_related(spec, errs);
    for (i, ip) in strs(spec, "externalIPs").into_iter().enumerate() {
        let field = format!("spec.externalIPs[{i}]");
        if v::is_ip(ip) {
            non_special_ip(&field, ip, errs);
        } else {
            errs.extend(v::validate_ip(&field, ip));
        }
    }
    if ty.is_empty() {
        errs.push(v::required("spec.type", ""));
    } else if !TYPES.contains(&ty) {
        errs.push(v::not_supported("spec.type", ty, TYPES));
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if int_of(p, "nodePort") != 0 {
                errs.push(v::forbidden(
                    &format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let np = int_of(p, "nodePort");
        if np != 0 && !node_ports.insert((str_of(p, "protocol"), np)) {
            errs.push(v::duplicate_shown(
                &format!("spec.ports[{i}].nodePort"),
                &np.to_string(),
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let (proto, port) = (str_of(p, "protocol"), int_of(p, "port"));
        if !seen.insert((proto, port)) {
            let shown = format!(
                "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                v::go_quote(proto)
            );
            errs.push(v::duplicate_shown(&format!("spec.ports[{i}]"), &shown));
        }
    }
    let ranges = strs(spec, "loadBalancerSourceRanges");
    if !ranges.is_empty() {
        // kube's field path is capitalised here.
        if ty != "LoadBalancer" {
            errs.push(v::forbidden(
                "spec.LoadBalancerSourceRanges",
                "may only be used when `type` is 'LoadBalancer'",
            ));
        }
        for (i, r) in ranges.into_iter().enumerate() {
            errs.extend(v::validate_cidr(
                &format!("spec.LoadBalancerSourceRanges[{i}]"),
                r.trim(),
            ));
        }
    }
    if is_set(spec, "allocateLoadBalancerNodePorts") && ty != "LoadBalancer" {
        errs.push(v::forbidden(
            "spec.allocateLoadBalancerNodePorts",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    if ty == "LoadBalancer" && !is_set(spec, "allocateLoadBalancerNodePorts") {
        // kube's path lacks the `spec.` prefix.
        errs.push(v::required("allocateLoadBalancerNodePorts", ""));
    }
    if let Some(class) = spec.get("loadBalancerClass").and_then(Value::as_str) {
        if ty != "LoadBalancer" {
            errs.push(v::forbidden(
                "spec.loadBalancerClass",
                "may only be used when service type is 'LoadBalancer'",
            ));
        } else {
            for msg in v::is_qualified_name(class) {
                errs.push(v::invalid("spec.loadBalancerClass", class, &msg));
            }
        }
    }
    traffic_policies(spec, errs);
}

/// One port; field paths are only formatted for an error (this runs on
/// every Service write).
fn validate_port<'a>(
    p: &'a Map<String, Value>,
    require_name: bool,
    names: &mut HashSet<&'a str>,
    i: usize,
    errs: &mut Vec<StatusCause>,
) {
    let path = format_args!("spec.ports[{i}]");
    let name = str_of(p, "name");
    if require_name && name.is_empty() {
        errs.push(v::required(&format!("{path}.name"), ""));
    } else if !name.is_empty() {
        for msg in v::is_dns1123_label(name) {
            errs.push(v::invalid(&format!("{path}.name"), name, &msg));
        }
        if !names.insert(name) {
            errs.push(v::duplicate_shown(
                &format!("{path}.name"),
                &v::go_quote(name),
            ));
        }
    }
    let port = int_of(p, "port");
    for msg in v::is_valid_port_num(port) {
        errs.push(v::invalid_json(
            &format!("{path}.port"),
            &Value::from(port),
            &msg,
        ));
    }
    let proto = str_of(p, "protocol");
    if proto.is_empty() {
        errs.push(v::required(&format!("{path}.protocol"), ""));
    } else if !PROTOCOLS.contains(&proto) {
        errs.push(v::not_supported(
            &format!("{path}.protocol"),
            proto,
            PROTOCOLS,
        ));
    }
    validate_port_num_or_name(p.get("targetPort"), || format!("{path}.targetPort"), errs);
    if let Some(app) = p.get("appProtocol").and_then(Value::as_str) {
        for msg in v::is_qualified_name(app) {
            errs.push(v::invalid(&format!("{path}.appProtocol"), app, &msg));
        }
    }
}

/// kube's `ValidatePortNumOrName` of an int-or-string port.
pub(crate) fn validate_port_num_or_name(
    port: Option<&Value>,
    field: impl Fn() -> String,
    errs: &mut Vec<StatusCause>,
) {
    match port {
        Some(Value::String(s)) => {
            for msg in v::is_valid_port_name(s) {
                errs.push(v::invalid(&field(), s, &msg));
            }
        }
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            for msg in v::is_valid_port_num(n) {
                errs.push(v::invalid_json(&field(), &Value::from(n), &msg));
            }
        }
        _ => {}
    }
}

fn validate_affinity(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>) {
    let affinity = str_of(spec, "sessionAffinity");
    if affinity.is_empty() {
        errs.push(v::required("spec.sessionAffinity", ""));
    } else if !AFFINITIES.contains(&affinity) {
        errs.push(v::not_supported(
            "spec.sessionAffinity",
            affinity,
            AFFINITIES,
        ));
    }
    let config = spec.get("sessionAffinityConfig").filter(|c| !c.is_null());
    if affinity == "None" && config.is_some() {
        errs.push(v::forbidden(
            "spec.sessionAffinityConfig",
            "must not be set when session affinity is None",
        ));
    }
    if affinity != "ClientIP" {
        return;
    }
    let detail = "when session affinity type is ClientIP";
    let Some(config) = config else {
        errs.push(v::required("spec.sessionAffinityConfig", detail));
        return;
    };
    let Some(client) = config.get("clientIP").filter(|c| !c.is_null()) else {
        errs.push(v::required("spec.sessionAffinityConfig.clientIP", detail));
        return;
    };
    let field = "spec.sessionAffinityConfig.clientIP.timeoutSeconds";
    match client.get("timeoutSeconds").and_then(Value::as_i64) {
        None => errs.push(v::required(field, detail)),
        Some(t) if t <= 0 || t > MAX_AFFINITY_SECONDS => errs.push(v::invalid_json(
            field,
            &Value::from(t),
            &format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
        )),
        Some(_) => {}
    }
}

/// kube's `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ips_related(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>) {
    if str_of(spec, "type") == "ExternalName" {
        return;
    }
    let ip = str_of(spec, "clusterIP");
    let ips = strs(spec, "clusterIPs");
    let shown = || v::go_slice("string", ips.iter().copied());
    if !ip.is_empty() {
        if ips.is_empty() {
            errs.push(v::required("spec.clusterIPs", ""));
        } else if ips[0] != ip {
            errs.push(v::invalid_rendered(
                "spec.clusterIPs",
                &shown(),
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        errs.push(v::invalid_rendered(
            "spec.clusterIPs",
            &shown(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = strs(spec, "ipFamilies");
    let mut seen = HashSet::new();
    for (i, f) in families.iter().enumerate() {
        let field = format!("spec.ipFamilies[{i}]");
        if !IP_FAMILIES.contains(f) {
            errs.push(v::not_supported(&field, f, IP_FAMILIES));
        }
        if !seen.insert(*f) {
            errs.push(v::duplicate_shown(&field, &v::go_quote(f)));
        }
    }
    if let Some(policy) = spec.get("ipFamilyPolicy").and_then(Value::as_str) {
        if !IP_FAMILY_POLICIES.contains(&policy) {
            errs.push(v::not_supported(
                "spec.ipFamilyPolicy",
                policy,
                IP_FAMILY_POLICIES,
            ));
        }
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                errs.push(v::invalid_rendered(
                    "spec.clusterIPs",
                    &shown(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let e = v::validate_ip(&format!("spec.clusterIPs[{i}]"), ip);
        bad_ips |= !e.is_empty();
        errs.extend(e);
    }
    if ips.len() > 2 {
        errs.push(v::invalid_rendered(
            "spec.clusterIPs",
            &shown(),
            "may only hold up to 2 values",
        ));
    }
    if bad_ips {
        return;
    }
    if ips.len() > 1 && v::is_ipv6(ips[0]) == v::is_ipv6(ips[1]) {
        errs.push(v::invalid_rendered(
            "spec.clusterIPs",
            &shown(),
            "may specify no more than one IP for each IP family",
        ));
    }
    if !headless(spec) {
        for (i, (ip, family)) in ips.iter().zip(families.iter()).enumerate() {
            let six = v::is_ipv6(ip);
            let want = match *family {
                "IPv4" if six => "IPv4",
                "IPv6" if !six => "IPv6",
                _ => continue,
            };
            errs.push(v::invalid(
                &format!("spec.clusterIPs[{i}]"),
                ip,
                &format!("expected an {want} value as indicated by `ipFamilies[{i}]`"),
            ));
        }
    }
}

/// kube's `ValidateNonSpecialIP`.
pub(crate) fn non_special_ip(field: &str, ip: &str, errs: &mut Vec<StatusCause>) {
    let Ok(addr) = ip.parse::<std::net::IpAddr>() else {
        return;
    };
    let (unspecified, loopback, link_local, ll_multicast) = match addr {
        std::net::IpAddr::V4(a) => (
            a.is_unspecified(),
            a.is_loopback(),
            a.is_link_local(),
            a.octets()[..3] == [224, 0, 0],
        ),
        std::net::IpAddr::V6(a) => {
            let s = a.segments();
            (
                a.is_unspecified(),
                a.is_loopback(),
                s[0] & 0xffc0 == 0xfe80,
                s[0] & 0xff0f == 0xff02,
            )
        }
    };
    if unspecified {
        errs.push(v::invalid(
            field,
            ip,
            &format!("may not be unspecified ({ip})"),
        ));
    }
    if loopback {
        errs.push(v::invalid(
            field,
            ip,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        errs.push(v::invalid(
            field,
            ip,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if ll_multicast {
        errs.push(v::invalid(
            field,
            ip,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}

fn traffic_policies(spec: &Map<String, Value>, errs: &mut Vec<StatusCause>) {
    let etp = str_of(spec, "externalTrafficPolicy");
    if !externally_accessible(spec) {
        if !etp.is_empty() {
            errs.push(v::invalid(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        errs.push(v::required("spec.externalTrafficPolicy", ""));
    } else if !TRAFFIC_POLICIES.contains(&etp) {
        errs.push(v::not_supported(
            "spec.externalTrafficPolicy",
            etp,
            TRAFFIC_POLICIES,
        ));
    }
    let needs_hc = str_of(spec, "type") == "LoadBalancer" && etp == "Local";
    let hc = int_of(spec, "healthCheckNodePort");
    if !needs_hc && hc != 0 {
        errs.push(v::invalid_json(
            "spec.healthCheckNodePort",
            &Value::from(hc),
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    } else if needs_hc && hc != 0 {
        for msg in v::is_valid_port_num(hc) {
            errs.push(v::invalid_json(
                "spec.healthCheckNodePort",
                &Value::from(hc),
                &msg,
            ));
        }
    }
    match spec.get("internalTrafficPolicy").and_then(Value::as_str) {
        None => {
            if matches!(
                str_of(spec, "type"),
                "ClusterIP" | "NodePort" | "LoadBalancer"
            ) {
                errs.push(v::required("spec.internalTrafficPolicy", ""));
            }
        }
        Some(p) if !TRAFFIC_POLICIES.contains(&p) => {
            errs.push(v::not_supported(
                "spec.internalTrafficPolicy",
                p,
                TRAFFIC_POLICIES,
            ));
        }
        Some(_) => {}
    }
    if let Some(td) = spec.get("trafficDistribution").and_then(Value::as_str) {
        if td != "PreferClose" {
            errs.push(v::not_supported(
                "spec.trafficDistribution",
                td,
                &["PreferClose"],
            ));
        }
    }
}

/// kube's `validateUpgradeDowngradeClusterIPs`.
fn update_cluster_ips(
    spec: &Map<String, Value>,
    old: &Map<String, Value>,
    errs: &mut Vec<StatusCause>,
) {
    if str_of(spec, "type") == "ExternalName" || str_of(old, "type") == "ExternalName" {
        return;
    }
    if headless(spec) && headless(old) {
        return;
    }
    let (new_ips, old_ips) = (strs(spec, "clusterIPs"), strs(old, "clusterIPs"));
    let shown = || v::go_slice("string", new_ips.iter().copied());
    let changed = "may not change once set";
    if old_ips.len() == new_ips.len() {
        for (i, ip) in old_ips.iter().enumerate() {
            if *ip != new_ips[i] {
                errs.push(v::invalid_rendered(
                    &format!("spec.clusterIPs[{i}]"),
                    &shown(),
                    changed,
                ));
            }
        }
    } else if old_ips.len() > new_ips.len() {
        if new_ips.is_empty() {
            errs.push(v::invalid_rendered(
                "spec.clusterIPs[0]",
                &shown(),
                "primary clusterIP can not be unset",
            ));
        }
        if !old_ips.is_empty() && !new_ips.is_empty() && new_ips[0] != old_ips[0] {
            errs.push(v::invalid_rendered("spec.clusterIPs[0]", &shown(), changed));
        }
        if new_ips.len() == 1 && str_of(spec, "ipFamilyPolicy") != "SingleStack" {
            errs.push(v::invalid_rendered(
                "spec.clusterIPs[0]",
                &shown(),
                "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary clusterIP",
            ));
        }
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errs.push(v::invalid_rendered("spec.clusterIPs[0]", &shown(), changed));
    }
}

/// kube's `validateUpgradeDowngradeIPFamilies`.
fn update_ip_families(
    spec: &Map<String, Value>,
    old: &Map<String, Value>,
    errs: &mut Vec<StatusCause>,
) {
    if str_of(spec, "type") == "ExternalName" || str_of(old, "type") == "ExternalName" {
        return;
    }
    let (new_f, old_f) = (strs(spec, "ipFamilies"), strs(old, "ipFamilies"));
    let shown = || v::go_slice("core.IPFamily", new_f.iter().copied());
    let changed = "may not change once set";
    if old_f.len() == new_f.len() {
        for (i, f) in old_f.iter().enumerate() {
            if *f != new_f[i] {
                errs.push(v::invalid_rendered(
                    &format!("spec.ipFamilies[{i}]"),
                    &shown(),
                    changed,
                ));
            }
        }
    } else if old_f.len() > new_f.len() {
        if !new_f.is_empty() && new_f[0] != old_f[0] {
            errs.push(v::invalid_rendered("spec.ipFamilies[0]", &shown(), changed));
        }
        if new_f.len() == 1 && str_of(spec, "ipFamilyPolicy") != "SingleStack" {
            errs.push(v::invalid_rendered(
                "spec.ipFamilies",
                &shown(),
                "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary ipFamily",
            ));
        }
    } else if !old_f.is_empty() && new_f[0] != old_f[0] {
        errs.push(v::invalid_rendered("spec.ipFamilies[0]", &shown(), changed));
    }
}

fn update_load_balancer_class(
    spec: &Map<String, Value>,
    old: &Map<String, Value>,
    errs: &mut Vec<StatusCause>,
) {
    if str_of(old, "type") != "LoadBalancer" || str_of(spec, "type") != "LoadBalancer" {
        return;
    }
    let (new_c, old_c) = (spec.get("loadBalancerClass"), old.get("loadBalancerClass"));
    if new_c.and_then(Value::as_str) != old_c.and_then(Value::as_str) {
        let shown = match new_c.and_then(Value::as_str) {
            Some(s) => v::go_quote(s),
            None => "null".to_string(),
        };
        errs.push(v::invalid_rendered(
            "spec.loadBalancerClass",
            &shown,
            "may not change once set",
        ));
    }
}

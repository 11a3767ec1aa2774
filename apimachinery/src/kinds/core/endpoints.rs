//! Endpoints: kube's port protocol default, `ValidateEndpoints` and the
//! printer (`1.2.3.4:80,... + N more...`).

use serde_json::{json, Map, Value};

use super::service::str_of;
use super::service::validate::non_special_ip;
use crate::kinds::common::{default_str, each_mut};
use crate::kinds::print::{column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    for subset in each_mut(o, "subsets") {
        for port in each_mut(subset, "ports") {
            default_str(port, "protocol", "TCP");
        }
    }
}

fn objects<'a>(m: &'a Map<String, Value>, key: &str) -> Vec<&'a Map<String, Value>> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let subsets = obj.get("subsets").and_then(Value::as_array);
    for (i, ss) in subsets.into_iter().flatten().enumerate() {
        let Some(ss) = ss.as_object() else { continue };
        let path = format!("subsets[{i}]");
        let ready = objects(ss, "addresses");
        let not_ready = objects(ss, "notReadyAddresses");
        if ready.is_empty() && not_ready.is_empty() {
            errs.push(v::required(
                &path,
                "must specify `addresses` or `notReadyAddresses`",
            ));
        }
        for (key, list) in [("addresses", ready), ("notReadyAddresses", not_ready)] {
            for (j, a) in list.into_iter().enumerate() {
                address(a, &format!("{path}.{key}[{j}]"), &mut errs);
            }
        }
        let ports = objects(ss, "ports");
        for (j, p) in ports.iter().enumerate() {
            port(p, ports.len() > 1, &format!("{path}.ports[{j}]"), &mut errs);
        }
    }
    errs
}

fn address(a: &Map<String, Value>, path: &str, errs: &mut Vec<StatusCause>) {
    let ip = str_of(a, "ip");
    let ip_field = format!("{path}.ip");
    errs.extend(v::validate_ip(&ip_field, ip));
    let host = str_of(a, "hostname");
    if !host.is_empty() {
        for msg in v::is_dns1123_label(host) {
            errs.push(v::invalid(&format!("{path}.hostname"), host, &msg));
        }
    }
    if let Some(node) = a.get("nodeName").and_then(Value::as_str) {
        for msg in v::name_is_dns_subdomain(node, false) {
            errs.push(v::invalid(&format!("{path}.nodeName"), node, &msg));
        }
    }
    non_special_ip(&ip_field, ip, errs);
}

fn port(p: &Map<String, Value>, require_name: bool, path: &str, errs: &mut Vec<StatusCause>) {
    let name = str_of(p, "name");
    if require_name && name.is_empty() {
        errs.push(v::required(&format!("{path}.name"), ""));
    } else if !name.is_empty() {
        for msg in v::is_dns1123_label(name) {
            errs.push(v::invalid(&format!("{path}.name"), name, &msg));
        }
    }
    let num = p.get("port").and_then(Value::as_i64).unwrap_or(0);
    for msg in v::is_valid_port_num(num) {
        errs.push(v::invalid_json(&format!("{path}.port"), &json!(num), &msg));
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
    if let Some(app) = p.get("appProtocol").and_then(Value::as_str) {
        for msg in v::is_qualified_name(app) {
            errs.push(v::invalid(&format!("{path}.appProtocol"), app, &msg));
        }
    }
}

const COLUMNS: &[Column] = &[
    NAME,
    column("Endpoints", "string", "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.", 0, endpoints_cell),
    AGE,
];

/// `host:port` with IPv6 hosts bracketed (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// kube's `formatEndpoints`: at most three endpoints, then `+ N more...`.
fn endpoints_cell(obj: &Value, _: &PrintContext) -> Value {
    const MAX: usize = 3;
    let Some(subsets) = obj
        .get("subsets")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
    else {
        return json!("<none>");
    };
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for ss in subsets.iter().filter_map(Value::as_object) {
        let addrs = objects(ss, "addresses");
        let ports = objects(ss, "ports");
        if ports.is_empty() {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_of(a, "ip").to_string());
            }
            continue;
        }
        for p in &ports {
            count += addrs.len();
            let num = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_of(a, "ip"), num));
            }
        }
    }
    let joined = list.join(",");
    if more {
        Value::String(format!("{joined} + {} more...", count - MAX))
    } else {
        Value::String(joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_columns() {
        let mut ep = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"port": 80, "name": "a"}, {"port": 443, "name": "b", "protocol": "UDP"}]}]});
        defaults(&mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(ep["subsets"][0]["ports"][1]["protocol"], "UDP");
        assert!(validate(&ep, None).is_empty());
        let ctx = PrintContext { now: 0 };
        assert_eq!(
            (COLUMNS[1].cell)(&ep, &ctx),
            json!("10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...")
        );
        assert_eq!((COLUMNS[1].cell)(&json!({}), &ctx), json!("<none>"));
        let bad = json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": 0, "protocol": "TCP"}]}, {}]});
        let got: Vec<String> = validate(&bad, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(got, vec![
            "subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
        ]);
    }
}

//! discovery.k8s.io/v1 EndpointSlices: kube's port defaults (name "",
//! protocol TCP), `ValidateEndpointSlice(Update)` and the printer.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::kinds::common::{default_str, each_mut};
use crate::kinds::core::service::validate::non_special_ip;
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static ENDPOINT_SLICE: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    for port in each_mut(o, "ports") {
        default_str(port, "name", "");
        default_str(port, "protocol", "TCP");
    }
}

fn address(ty: &str, addr: &str, field: &str, errs: &mut Vec<StatusCause>) {
    match ty {
        "IPv4" | "IPv6" => {
            let ok = if ty == "IPv4" {
                addr.parse::<std::net::Ipv4Addr>().is_ok()
            } else {
                v::is_ipv6(addr)
            };
            if ok {
                non_special_ip(field, addr, errs);
            } else {
                let msg = format!("must be a valid {ty} address");
                errs.push(v::invalid(field, addr, &msg));
            }
        }
        "FQDN" => {
            if addr.is_empty() {
                errs.push(v::required(field, ""));
                return;
            }
            for msg in v::is_dns1123_subdomain(addr) {
                errs.push(v::invalid(field, addr, &msg));
            }
            if !addr.contains('.') {
                errs.push(v::invalid(
                    field,
                    addr,
                    "should be a domain with at least two segments separated by dots",
                ));
            }
        }
        _ => {}
    }
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let ty = print::str_at(obj, "/addressType", "");
    if let Some(old) = old {
        let before = print::str_at(old, "/addressType", "");
        if before != ty {
            errs.push(v::invalid("addressType", ty, "field is immutable"));
        }
    }
    if ty.is_empty() {
        errs.push(v::required("addressType", ""));
    } else if !ADDRESS_TYPES.contains(&ty) {
        errs.push(v::not_supported("addressType", ty, ADDRESS_TYPES));
    }
    let endpoints = obj.get("endpoints").and_then(Value::as_array);
    for (i, ep) in endpoints.into_iter().flatten().enumerate() {
        let p = format!("endpoints[{i}]");
        let addrs: Vec<&str> = print::strs_at(ep, "/addresses").collect();
        if addrs.is_empty() {
            errs.push(v::required(
                &format!("{p}.addresses"),
                "must contain at least 1 address",
            ));
        } else if addrs.len() > 100 {
            errs.push(StatusCause::new(
                "FieldValueTooMany",
                format!("Too many: {}: must have at most 100 items", addrs.len()),
                format!("{p}.addresses"),
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            address(ty, a, &format!("{p}.addresses[{j}]"), &mut errs);
        }
        if let Some(node) = ep.get("nodeName").and_then(Value::as_str) {
            for msg in v::name_is_dns_subdomain(node, false) {
                errs.push(v::invalid(&format!("{p}.nodeName"), node, &msg));
            }
        }
        if let Some(host) = ep.get("hostname").and_then(Value::as_str) {
            for msg in v::is_dns1123_label(host) {
                errs.push(v::invalid(&format!("{p}.hostname"), host, &msg));
            }
        }
    }
    let ports = obj.get("ports").and_then(Value::as_array);
    let mut names = HashSet::new();
    for (i, port) in ports.into_iter().flatten().enumerate() {
        let p = format!("ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.is_empty() {
            for msg in v::is_dns1123_label(name) {
                errs.push(v::invalid(&format!("{p}.name"), name, &msg));
            }
        }
        if !names.insert(name) {
            errs.push(v::duplicate_shown(&format!("{p}.name"), &v::go_quote(name)));
        }
        match port.get("protocol").and_then(Value::as_str) {
            None => errs.push(v::required(&format!("{p}.protocol"), "")),
            Some(proto) if !PROTOCOLS.contains(&proto) => {
                errs.push(v::not_supported(&format!("{p}.protocol"), proto, PROTOCOLS));
            }
            Some(_) => {}
        }
        if let Some(app) = port.get("appProtocol").and_then(Value::as_str) {
            for msg in v::is_qualified_name(app) {
                errs.push(v::invalid(&format!("{p}.appProtocol"), app, &msg));
            }
        }
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation.", 0, |o, _| json!(print::str_at(o, "/addressType", ""))),
    column("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice.", 0, ports_cell),
    column("Endpoints", "string", "endpoints is a list of unique endpoints in this slice.", 0, endpoints_cell),
    AGE,
];

/// kube's `listWithMoreString`.
fn with_more(list: &[String], more: bool, count: usize) -> Value {
    let joined = list.join(",");
    if more {
        Value::String(format!("{joined} + {} more...", count - 3))
    } else if joined.is_empty() {
        json!("<unset>")
    } else {
        Value::String(joined)
    }
}

fn ports_cell(obj: &Value, _: &PrintContext) -> Value {
    let ports = obj.get("ports").and_then(Value::as_array);
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for p in ports.into_iter().flatten() {
        if list.len() < 3 {
            let shown = match (
                p.get("port").and_then(Value::as_i64),
                p.get("name").and_then(Value::as_str),
            ) {
                (Some(n), _) => n.to_string(),
                (None, Some(name)) => name.to_string(),
                (None, None) => "*".to_string(),
            };
            list.push(shown);
        } else {
            more = true;
        }
        count += 1;
    }
    with_more(&list, more, count)
}

fn endpoints_cell(obj: &Value, _: &PrintContext) -> Value {
    let eps = obj.get("endpoints").and_then(Value::as_array);
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for a in eps
        .into_iter()
        .flatten()
        .flat_map(|e| print::strs_at(e, "/addresses"))
    {
        if list.len() < 3 {
            list.push(a.to_string());
        } else {
            more = true;
        }
        count += 1;
    }
    with_more(&list, more, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn rules_and_columns() {
        let mut es = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]},
            {"addresses": ["10.0.0.2", "10.0.0.3", "10.0.0.4"]}], "ports": [{"port": 80}]});
        defaults(&mut es);
        assert_eq!(
            es["ports"][0],
            json!({"port": 80, "name": "", "protocol": "TCP"})
        );
        assert!(msgs(&es).is_empty());
        let bad = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["fd00::1"]}, {}],
            "ports": [{"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "TCP"}]});
        assert_eq!(
            msgs(&bad),
            vec![
            "endpoints[0].addresses[0]: Invalid value: \"fd00::1\": must be a valid IPv4 address",
            "endpoints[1].addresses: Required value: must contain at least 1 address",
            "ports[1].name: Duplicate value: \"a\"",
        ]
        );
        let ctx = PrintContext { now: 0 };
        assert_eq!((COLUMNS[2].cell)(&es, &ctx), json!("80"));
        assert_eq!(
            (COLUMNS[3].cell)(&es, &ctx),
            json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...")
        );
        assert_eq!((COLUMNS[2].cell)(&json!({}), &ctx), json!("<unset>"));
    }
}

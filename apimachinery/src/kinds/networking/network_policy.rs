//! NetworkPolicies: kube's defaults (port protocol TCP, policy types
//! derived from the rules), `ValidateNetworkPolicy` and the printer.

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_str, each_mut, object_mut};
use crate::kinds::policy::validate_label_selector;
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static NETWORK_POLICY: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    for dir in ["ingress", "egress"] {
        for rule in each_mut(spec, dir) {
            for port in each_mut(rule, "ports") {
                default_str(port, "protocol", "TCP");
            }
        }
    }
    let types_empty = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if types_empty {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

/// kube's `ValidateNetworkPolicyPort`.
fn port(p: &Map<String, Value>, path: &str, errs: &mut Vec<StatusCause>) {
    const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
    if let Some(proto) = p.get("protocol").and_then(Value::as_str) {
        if !PROTOCOLS.contains(&proto) {
            errs.push(v::not_supported(
                &format!("{path}.protocol"),
                proto,
                PROTOCOLS,
            ));
        }
    }
    let end = p.get("endPort").and_then(Value::as_i64);
    match p.get("port").filter(|x| !x.is_null()) {
        Some(Value::String(name)) => {
            if let Some(end) = end {
                errs.push(v::invalid_json(
                    &format!("{path}.endPort"),
                    &json!(end),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for msg in v::is_valid_port_name(name) {
                errs.push(v::invalid(&format!("{path}.port"), name, &msg));
            }
        }
        Some(n) => {
            let n = n.as_i64().unwrap_or(0);
            for msg in v::is_valid_port_num(n) {
                errs.push(v::invalid_json(&format!("{path}.port"), &json!(n), &msg));
            }
            if let Some(end) = end {
                if end < n {
                    errs.push(v::invalid_json(
                        &format!("{path}.endPort"),
                        &json!(n),
                        "must be greater than or equal to `port`",
                    ));
                }
                for msg in v::is_valid_port_num(end) {
                    errs.push(v::invalid_json(
                        &format!("{path}.endPort"),
                        &json!(end),
                        &msg,
                    ));
                }
            }
        }
        None => {
            if let Some(end) = end {
                errs.push(v::invalid_json(
                    &format!("{path}.endPort"),
                    &json!(end),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u32)> {
    let (ip, bits) = s.split_once('/')?;
    Some((ip.parse().ok()?, bits.parse().ok()?))
}

fn masked(ip: std::net::IpAddr, bits: u32) -> u128 {
    let (n, width) = match ip {
        std::net::IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        std::net::IpAddr::V6(a) => (u128::from(a), 128),
    };
    if bits == 0 {
        0
    } else {
        n >> (width - bits.min(width))
    }
}

/// kube's `ValidateIPBlock`.
fn ip_block(b: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let cidr = b.get("cidr").and_then(Value::as_str).unwrap_or("");
    if cidr.is_empty() {
        errs.push(v::required(&format!("{path}.cidr"), ""));
        return;
    }
    let e = v::validate_cidr(&format!("{path}.cidr"), cidr);
    if !e.is_empty() {
        errs.extend(e);
        return;
    }
    let Some((net, bits)) = parse_cidr(cidr) else {
        return;
    };
    for (i, ex) in print::strs_at(b, "/except").enumerate() {
        let p = format!("{path}.except[{i}]");
        let e = v::validate_cidr(&p, ex);
        if !e.is_empty() {
            errs.extend(e);
            continue;
        }
        let Some((eip, ebits)) = parse_cidr(ex) else {
            continue;
        };
        let same_family = eip.is_ipv6() == net.is_ipv6();
        if !same_family || bits >= ebits || masked(eip, bits) != masked(net, bits) {
            errs.push(v::invalid(&p, ex, "must be a strict subset of `cidr`"));
        }
    }
}

fn peer(p: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let get = |k: &str| p.get(k).filter(|x| !x.is_null());
    let mut n = 0;
    if let Some(s) = get("podSelector") {
        n += 1;
        errs.extend(validate_label_selector(
            Some(s),
            &format!("{path}.podSelector"),
        ));
    }
    if let Some(s) = get("namespaceSelector") {
        n += 1;
        errs.extend(validate_label_selector(
            Some(s),
            &format!("{path}.namespaceSelector"),
        ));
    }
    if let Some(b) = get("ipBlock") {
        n += 1;
        ip_block(b, &format!("{path}.ipBlock"), errs);
    }
    if n == 0 {
        errs.push(v::required(path, "must specify a peer"));
    } else if n > 1 && get("ipBlock").is_some() {
        errs.push(v::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    errs.extend(validate_label_selector(
        spec.get("podSelector"),
        "spec.podSelector",
    ));
    for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
        let rules = spec.get(dir).and_then(Value::as_array);
        for (i, rule) in rules.into_iter().flatten().enumerate() {
            let base = format!("spec.{dir}[{i}]");
            let ports = rule.get("ports").and_then(Value::as_array);
            for (j, p) in ports.into_iter().flatten().enumerate() {
                if let Some(p) = p.as_object() {
                    port(p, &format!("{base}.ports[{j}]"), &mut errs);
                }
            }
            let list = rule.get(peers).and_then(Value::as_array);
            for (j, p) in list.into_iter().flatten().enumerate() {
                peer(p, &format!("{base}.{peers}[{j}]"), &mut errs);
            }
        }
    }
    let types: Vec<&str> = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|t| t.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    if types.len() > 2 {
        errs.push(v::invalid_rendered(
            "spec.policyTypes",
            &format!(
                "&{}",
                v::go_slice("networking.PolicyType", types.iter().copied())
            ),
            "may not specify more than two policyTypes",
        ));
        return errs;
    }
    for (i, t) in types.iter().enumerate() {
        if *t != "Ingress" && *t != "Egress" {
            errs.push(v::not_supported(
                &format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.", 0, pod_selector),
    AGE,
];

fn pod_selector(obj: &Value, _: &PrintContext) -> Value {
    Value::String(print::label_selector(obj.pointer("/spec/podSelector")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn defaults_derive_policy_types() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        defaults(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut given = json!({"spec": {"policyTypes": ["Egress"], "ingress": [{"ports": [{"protocol": "UDP"}]}]}});
        let before = given.clone();
        defaults(&mut given);
        assert_eq!(given, before);
    }

    #[test]
    fn validation() {
        let ok = json!({"spec": {"podSelector": {"matchLabels": {"a": "b"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                "ports": [{"port": 80, "endPort": 90, "protocol": "TCP"}]}]}});
        assert_eq!(msgs(&ok), Vec::<String>::new());
        let bad = json!({"spec": {"podSelector": {}, "policyTypes": ["Sideways"],
            "ingress": [{"from": [{}, {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.0.0/8"]},
                "podSelector": {}}], "ports": [{"port": 80, "endPort": 70}]}]}});
        assert_eq!(msgs(&bad), vec![
            "spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`",
            "spec.ingress[0].from[0]: Required value: must specify a peer",
            "spec.ingress[0].from[1].ipBlock.except[0]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`",
            "spec.ingress[0].from[1]: Forbidden: may not specify both ipBlock and another peer",
            "spec.policyTypes[0]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
        ]);
        let ctx = PrintContext { now: 0 };
        assert_eq!((COLUMNS[1].cell)(&ok, &ctx), json!("a=b"));
    }
}

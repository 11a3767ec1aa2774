//! Ingresses and IngressClasses: `ValidateIngress`, `ValidateIngressClass`
//! (and the parameters scope default) and their printers.

use serde_json::{json, Map, Value};

use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static INGRESS: KindRules = KindRules {
    validate: Some(validate_ingress),
    validate_status: Some(validate_ingress_status),
    columns: INGRESS_COLUMNS,
    ..KindRules::NONE
};

pub static INGRESS_CLASS: KindRules = KindRules {
    defaults: Some(class_defaults),
    validate: Some(validate_class),
    columns: CLASS_COLUMNS,
    ..KindRules::NONE
};

const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];

/// kube's `IsWildcardDNS1123Subdomain`.
fn wildcard_errors(host: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if host.len() > v::DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(v::max_len_error(v::DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = host
        .strip_prefix("*.")
        .is_some_and(|rest| v::is_dns1123_subdomain(rest).is_empty());
    if !ok {
        errs.push(v::regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["*.example.com"],
        ));
    }
    errs
}

fn host_errors(host: &str, field: &str, errs: &mut Vec<StatusCause>) {
    let msgs = if host.contains('*') {
        wildcard_errors(host)
    } else {
        v::is_dns1123_subdomain(host)
    };
    for msg in msgs {
        errs.push(v::invalid(field, host, &msg));
    }
}

/// kube's `validateIngressBackend`.
fn backend(b: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let get = |k: &str| b.get(k).filter(|x| !x.is_null());
    match (get("resource"), get("service")) {
        (Some(_), Some(_)) => errs.push(v::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => {
            // kube's `validateIngressTypedLocalObjectReference`.
            let rp = format!("{path}.resource");
            if let Some(group) = r.get("apiGroup").and_then(Value::as_str) {
                for msg in v::is_dns1123_subdomain(group) {
                    errs.push(v::invalid(&format!("{rp}.apiGroup"), group, &msg));
                }
            }
            for key in ["kind", "name"] {
                let val = r.get(key).and_then(Value::as_str).unwrap_or("");
                let field = format!("{rp}.{key}");
                if val.is_empty() {
                    errs.push(v::required(&field, &format!("{key} is required")));
                } else {
                    for msg in v::is_path_segment_name(val) {
                        errs.push(v::invalid(&field, val, &msg));
                    }
                }
            }
        }
        (None, Some(s)) => {
            let name = s.get("name").and_then(Value::as_str).unwrap_or("");
            let name_field = format!("{path}.service.name");
            if name.is_empty() {
                errs.push(v::required(&name_field, ""));
            } else {
                for msg in v::name_is_dns1035_label(name, false) {
                    errs.push(v::invalid(&name_field, name, &msg));
                }
            }
            let port = s.get("port");
            let pname = port
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let pnum = port
                .and_then(|p| p.get("number"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            match (pname.is_empty(), pnum == 0) {
                (false, false) => errs.push(v::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, true) => {
                    for msg in v::is_valid_port_name(pname) {
                        errs.push(v::invalid(
                            &format!("{path}.service.port.name"),
                            pname,
                            &msg,
                        ));
                    }
                }
                (true, false) => {
                    for msg in v::is_valid_port_num(pnum) {
                        errs.push(v::invalid_json(
                            &format!("{path}.service.port.number"),
                            &json!(pnum),
                            &msg,
                        ));
                    }
                }
                (true, true) => errs.push(v::required(path, "port name or number is required")),
            }
        }
        (None, None) => errs.push(v::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
}

/// kube's `validateHTTPIngressPath`.
fn http_path(p: &Map<String, Value>, path: &str, errs: &mut Vec<StatusCause>) {
    let Some(ty) = p.get("pathType").and_then(Value::as_str) else {
        errs.push(v::required(
            &format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return;
    };
    let value = p.get("path").and_then(Value::as_str).unwrap_or("");
    let field = format!("{path}.path");
    match ty {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(v::invalid(&field, value, "must be an absolute path"));
            }
            if !value.is_empty() {
                for seq in ["//", "/./", "/../", "%2f", "%2F"] {
                    if value.contains(seq) {
                        errs.push(v::invalid(
                            &field,
                            value,
                            &format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in ["/..", "/."] {
                    if value.ends_with(suffix) {
                        errs.push(v::invalid(
                            &field,
                            value,
                            &format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(v::invalid(&field, value, "must be an absolute path"));
            }
        }
        other => errs.push(v::not_supported(
            &format!("{path}.pathType"),
            other,
            PATH_TYPES,
        )),
    }
    backend(
        p.get("backend").unwrap_or(&Value::Null),
        &format!("{path}.backend"),
        errs,
    );
}

fn validate_ingress(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let rules = spec.get("rules").and_then(Value::as_array);
    let default_backend = spec.get("defaultBackend").filter(|b| !b.is_null());
    if rules.is_none_or(Vec::is_empty) && default_backend.is_none() {
        let shown = if rules.is_some() {
            "[]networking.IngressRule{}"
        } else {
            "[]networking.IngressRule(nil)"
        };
        errs.push(v::invalid_rendered(
            "spec",
            shown,
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        backend(b, "spec.defaultBackend", &mut errs);
    }
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let base = format!("spec.rules[{i}]");
        let host = rule.get("host").and_then(Value::as_str).unwrap_or("");
        if !host.is_empty() {
            let field = format!("{base}.host");
            if v::is_ip(host) {
                errs.push(v::invalid(
                    &field,
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            host_errors(host, &field, &mut errs);
        }
        if let Some(http) = rule.get("http").filter(|h| !h.is_null()) {
            let paths = http.get("paths").and_then(Value::as_array);
            if paths.is_none_or(Vec::is_empty) {
                errs.push(v::required(&format!("{base}.http.paths"), ""));
            }
            for (j, p) in paths.into_iter().flatten().enumerate() {
                if let Some(p) = p.as_object() {
                    http_path(p, &format!("{base}.http.paths[{j}]"), &mut errs);
                }
            }
        }
    }
    let tls = spec.get("tls").and_then(Value::as_array);
    for (i, t) in tls.into_iter().flatten().enumerate() {
        for (j, host) in print::strs_at(t, "/hosts").enumerate() {
            host_errors(host, &format!("spec.tls[{i}].hosts[{j}]"), &mut errs);
        }
        let secret = t.get("secretName").and_then(Value::as_str).unwrap_or("");
        if !secret.is_empty() {
            for msg in v::name_is_dns_subdomain(secret, false) {
                errs.push(v::invalid(
                    &format!("spec.tls[{i}].secretName"),
                    secret,
                    &msg,
                ));
            }
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        for msg in v::name_is_dns_subdomain(class, false) {
            errs.push(v::invalid("spec.ingressClassName", class, &msg));
        }
    }
    errs
}

fn validate_ingress_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    for (i, ing) in ingress.into_iter().flatten().enumerate() {
        let ip = ing.get("ip").and_then(Value::as_str).unwrap_or("");
        if !ip.is_empty() {
            errs.extend(v::validate_ip(
                &format!("status.loadBalancer.ingress[{i}].ip"),
                ip,
            ));
        }
        let host = ing.get("hostname").and_then(Value::as_str).unwrap_or("");
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

fn class_defaults(obj: &mut Value) {
    let params = obj
        .get_mut("spec")
        .and_then(|s| s.get_mut("parameters"))
        .and_then(Value::as_object_mut);
    if let Some(p) = params {
        crate::kinds::common::default_str(p, "scope", "Cluster");
    }
}

fn validate_class(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let controller = print::str_at(obj, "/spec/controller", "");
    if let Some(old) = old {
        let before = print::str_at(old, "/spec/controller", "");
        if before != controller {
            errs.push(v::invalid(
                "spec.controller",
                controller,
                "field is immutable",
            ));
        }
    }
    if controller.len() > 250 {
        errs.push(v::too_long("spec.controller", 250));
    }
    match controller.split_once('/') {
        _ if controller.is_empty() => errs.push(v::required("spec.controller", "")),
        Some((host, path)) if !host.is_empty() && !path.is_empty() => {
            for msg in v::is_dns1123_subdomain(host) {
                errs.push(v::invalid("spec.controller", host, &msg));
            }
            let ok = path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
            if !ok {
                errs.push(v::invalid(
                    "spec.controller",
                    path,
                    &v::regex_error("Invalid path", "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+", &[]),
                ));
            }
        }
        _ => errs.push(v::invalid(
            "spec.controller",
            controller,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )),
    }
    if let Some(p) = obj.pointer("/spec/parameters").filter(|p| p.is_object()) {
        let get = |k: &str| p.get(k).and_then(Value::as_str);
        if get("kind").is_none_or(str::is_empty) {
            errs.push(v::required("spec.parameters.kind", ""));
        }
        if get("name").is_none_or(str::is_empty) {
            errs.push(v::required("spec.parameters.name", ""));
        }
        match (get("scope"), get("namespace")) {
            (Some("Namespace"), None) => errs.push(v::required(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Namespace'",
            )),
            (Some("Cluster"), Some(_)) => errs.push(v::forbidden(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Cluster'",
            )),
            (Some(s), _) if s != "Namespace" && s != "Cluster" => errs.push(v::not_supported(
                "spec.parameters.scope",
                s,
                &["Cluster", "Namespace"],
            )),
            _ => {}
        }
    }
    errs
}

// ---------------------------------------------------------------------------
// Printers.

const INGRESS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Class",
        "string",
        "The name of the IngressClass resource that should be used for additional configuration",
        0,
        |o, _| json!(print::str_at(o, "/spec/ingressClassName", "<none>")),
    ),
    column(
        "Hosts",
        "string",
        "Hosts that incoming requests are matched against before the ingress rule",
        0,
        hosts,
    ),
    column(
        "Address",
        "string",
        "Address is a list containing ingress points for the load-balancer",
        0,
        address,
    ),
    column(
        "Ports",
        "string",
        "Ports of TLS configurations that open",
        0,
        ports,
    ),
    AGE,
];

const CLASS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Controller",
        "string",
        "Controller that is responsible for handling this class",
        0,
        |o, _| json!(print::str_at(o, "/spec/controller", "")),
    ),
    column(
        "Parameters",
        "string",
        "A reference to a resource with additional parameters",
        0,
        parameters,
    ),
    AGE,
];

/// kube's `formatHosts`: up to three hosts, `*` when none.
fn hosts(obj: &Value, _: &PrintContext) -> Value {
    let rules = obj.pointer("/spec/rules").and_then(Value::as_array);
    let rules: &[Value] = rules.map_or(&[], Vec::as_slice);
    let mut list = Vec::new();
    let mut more = false;
    for r in rules {
        if list.len() == 3 {
            more = true;
        }
        let host = r.get("host").and_then(Value::as_str).unwrap_or("");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return json!("*");
    }
    let joined = list.join(",");
    if more {
        Value::String(format!("{joined} + {} more...", rules.len() - 3))
    } else {
        Value::String(joined)
    }
}

fn address(obj: &Value, _: &PrintContext) -> Value {
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    // A set, as kube's `ingressLoadBalancerStatusStringer`: sorted, unique.
    let list: Vec<&str> = ingress
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let ip = i.get("ip").and_then(Value::as_str).unwrap_or("");
            let host = i.get("hostname").and_then(Value::as_str).unwrap_or("");
            [ip, host].into_iter().find(|s| !s.is_empty())
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    Value::String(list.join(","))
}

fn ports(obj: &Value, _: &PrintContext) -> Value {
    if print::count_at(obj, "/spec/tls") > 0 {
        json!("80, 443")
    } else {
        json!("80")
    }
}

fn parameters(obj: &Value, _: &PrintContext) -> Value {
    let Some(p) = obj.pointer("/spec/parameters").filter(|p| p.is_object()) else {
        return json!("<none>");
    };
    let get = |k: &str| p.get(k).and_then(Value::as_str);
    let mut s = get("kind").unwrap_or("").to_string();
    if let Some(group) = get("apiGroup") {
        s.push('.');
        s.push_str(group);
    }
    s.push('/');
    s.push_str(get("name").unwrap_or(""));
    Value::String(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate_ingress(obj, None)
            .iter()
            .map(v::cause_to_string)
            .collect()
    }

    #[test]
    fn ingress_validation() {
        let ok = json!({"spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["*.a.com"], "secretName": "s"}],
            "rules": [{"host": "a.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
        assert_eq!(msgs(&ok), Vec::<String>::new());
        assert_eq!(
            msgs(&json!({"spec": {}})),
            vec!["spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]
        );
        let bad = json!({"spec": {"rules": [{"host": "1.2.3.4", "http": {"paths": [
            {"path": "/a", "backend": {}},
            {"path": "a//b", "pathType": "Exact", "backend": {"service": {"name": "web"}}},
            {"path": "/", "pathType": "Odd", "backend": {"service": {"name": "web", "port": {"name": "http", "number": 1}}}}]}}]}});
        assert_eq!(msgs(&bad), vec![
            "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[1].path: Invalid value: \"a//b\": must be an absolute path",
            "spec.rules[0].http.paths[1].path: Invalid value: \"a//b\": must not contain '//'",
            "spec.rules[0].http.paths[1].backend: Required value: port name or number is required",
            "spec.rules[0].http.paths[2].pathType: Unsupported value: \"Odd\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            "spec.rules[0].http.paths[2].backend: Invalid value: \"\": cannot set both port name & port number",
        ]);
    }

    #[test]
    fn resource_backends() {
        let ing = json!({"spec": {"defaultBackend": {"resource": {"kind": "Bucket"}}}});
        assert_eq!(
            msgs(&ing),
            vec!["spec.defaultBackend.resource.name: Required value: name is required"]
        );
    }

    #[test]
    fn class_rules_and_columns() {
        let mut c = json!({"spec": {"controller": "example.com/ingress", "parameters": {"kind": "K", "name": "n"}}});
        class_defaults(&mut c);
        assert_eq!(c["spec"]["parameters"]["scope"], "Cluster");
        assert!(validate_class(&c, None).is_empty());
        let bad = json!({"spec": {"controller": "nginx"}});
        assert_eq!(
            v::cause_to_string(&validate_class(&bad, None)[0]),
            "spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        let ctx = PrintContext { now: 0 };
        assert_eq!((CLASS_COLUMNS[2].cell)(&c, &ctx), json!("K/n"));
        let ing = json!({"spec": {"rules": [{"host": "a"}, {"host": "b"}, {}, {"host": "d"}, {"host": "e"}],
            "tls": [{}]}, "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}});
        let cells: Vec<Value> = INGRESS_COLUMNS[1..5]
            .iter()
            .map(|c| (c.cell)(&ing, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("<none>"),
                json!("a,b,d + 2 more..."),
                json!("1.1.1.1"),
                json!("80, 443")
            ]
        );
    }
}

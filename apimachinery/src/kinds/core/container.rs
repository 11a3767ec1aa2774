//! kube's checks of one container (`validateContainers` and what it
//! calls): name, image, probes, ports, env, volume mounts, pull and
//! termination-message policies, resources.

use std::collections::HashSet;

use serde_json::Value;

use super::quantity;
use crate::status::StatusCause;
use crate::validation::{
    duplicate, forbidden, inclusive_range_error, invalid, invalid_json, is_dns1123_label,
    is_dns1123_subdomain, not_found, not_supported, required,
};

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub fn validate_container<'a>(
    c: &'a Value,
    path: &str,
    volumes: &HashSet<&str>,
    names: &mut HashSet<&'a str>,
    out: &mut Vec<StatusCause>,
) {
    let name = s(c, "name");
    let name_path = format!("{path}.name");
    if name.is_empty() {
        out.push(required(&name_path, ""));
    } else {
        for msg in is_dns1123_label(name) {
            out.push(invalid(&name_path, name, &msg));
        }
        if !names.insert(name) {
            out.push(duplicate(&name_path, name));
        }
    }
    let image = s(c, "image");
    if image.is_empty() {
        out.push(required(&format!("{path}.image"), ""));
    } else if image.trim() != image {
        out.push(invalid(
            &format!("{path}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe).filter(|p| p.is_object()) {
            let ppath = format!("{path}.{probe}");
            validate_probe(p, &ppath, out);
            let st = p.get("successThreshold").and_then(Value::as_i64);
            if probe != "readinessProbe" && st.is_some_and(|t| t != 1) {
                out.push(invalid_json(
                    &format!("{ppath}.successThreshold"),
                    &Value::from(st.unwrap_or(0)),
                    "must be 1",
                ));
            }
        }
    }
    validate_ports(arr(c, "ports"), &format!("{path}.ports"), out);
    for (i, e) in arr(c, "env").iter().enumerate() {
        let n = s(e, "name");
        let field = format!("{path}.env[{i}].name");
        if n.is_empty() {
            out.push(required(&field, ""));
        } else if n.chars().any(|ch| !(' '..='~').contains(&ch) || ch == '=') {
            out.push(invalid(
                &field,
                n,
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
        if let Some(from) = e.get("valueFrom").filter(|f| f.is_object()) {
            validate_value_from(e, from, &format!("{path}.env[{i}].valueFrom"), out);
        }
    }
    let mut mount_paths = HashSet::new();
    for (i, m) in arr(c, "volumeMounts").iter().enumerate() {
        let n = s(m, "name");
        if n.is_empty() {
            out.push(required(&format!("{path}.volumeMounts[{i}].name"), ""));
        }
        if !volumes.contains(n) {
            out.push(not_found(&format!("{path}.volumeMounts[{i}].name"), n));
        }
        let mp = s(m, "mountPath");
        let mp_field = format!("{path}.volumeMounts[{i}].mountPath");
        if mp.is_empty() {
            out.push(required(&mp_field, ""));
        } else if !mount_paths.insert(mp) {
            out.push(invalid(&mp_field, mp, "must be unique"));
        }
    }
    match s(c, "imagePullPolicy") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => out.push(required(&format!("{path}.imagePullPolicy"), "")),
        other => out.push(not_supported(
            &format!("{path}.imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    match s(c, "terminationMessagePolicy") {
        "File" | "FallbackToLogsOnError" => {}
        "" => out.push(required(&format!("{path}.terminationMessagePolicy"), "")),
        other => out.push(not_supported(
            &format!("{path}.terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    if let Some(res) = c.get("resources") {
        validate_resources(res, &format!("{path}.resources"), out);
    }
}

/// kube's `validateEnvVarValueFrom`: one source, not next to a `value`,
/// key selectors with a name and a key.
fn validate_value_from(env: &Value, from: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let sources: Vec<&str> = [
        "fieldRef",
        "resourceFieldRef",
        "configMapKeyRef",
        "secretKeyRef",
    ]
    .into_iter()
    .filter(|k| from.get(*k).is_some_and(|v| !v.is_null()))
    .collect();
    for src in &sources {
        let sel = &from[*src];
        let p = format!("{path}.{src}");
        match *src {
            "fieldRef" => {
                if s(sel, "fieldPath").is_empty() {
                    out.push(required(&format!("{p}.fieldPath"), ""));
                }
            }
            "resourceFieldRef" => {
                if s(sel, "resource").is_empty() {
                    out.push(required(&format!("{p}.resource"), ""));
                }
            }
            _ => {
                let name = s(sel, "name");
                for msg in is_dns1123_subdomain(name) {
                    out.push(invalid(&format!("{p}.name"), name, &msg));
                }
                if s(sel, "key").is_empty() {
                    out.push(required(&format!("{p}.key"), ""));
                }
            }
        }
    }
    let detail = if sources.is_empty() {
        "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
    } else if !s(env, "value").is_empty() {
        "may not be specified when `value` is not empty"
    } else if sources.len() > 1 {
        "may not have more than one field specified at a time"
    } else {
        return;
    };
    out.push(invalid(path, "", detail));
}

/// kube's `validateProbe`: one handler, non-negative timings.
fn validate_probe(p: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
        .into_iter()
        .filter(|h| p.get(*h).is_some_and(|v| !v.is_null()))
        .collect();
    match handlers.as_slice() {
        [] => out.push(required(path, "must specify a handler type")),
        [_, second, ..] => out.push(forbidden(
            &format!("{path}.{second}"),
            "may not specify more than 1 handler type",
        )),
        [one] => {
            if let Some(port) = p.get(*one).and_then(|h| h.get("port")) {
                if *one != "grpc" {
                    validate_port_num_or_name(port, &format!("{path}.{one}.port"), out);
                }
            }
        }
    }
    for f in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        crate::validation::nonnegative(&format!("{path}.{f}"), p.get(f), out);
    }
}

/// kube's `ValidatePortNumOrName`.
fn validate_port_num_or_name(port: &Value, field: &str, out: &mut Vec<StatusCause>) {
    match port {
        Value::String(name) => {
            for msg in port_name_errors(name) {
                out.push(invalid(field, name, &msg));
            }
        }
        other => {
            let n = other.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                out.push(invalid_json(
                    field,
                    &Value::from(n),
                    &inclusive_range_error(1, 65535),
                ));
            }
        }
    }
}

/// kube's `IsValidPortName`.
pub fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push(crate::validation::max_len_error(15));
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

fn validate_ports(ports: &[Value], path: &str, out: &mut Vec<StatusCause>) {
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let name = s(p, "name");
        if !name.is_empty() {
            let errs = port_name_errors(name);
            let field = format!("{path}[{i}].name");
            if !errs.is_empty() {
                for msg in errs {
                    out.push(invalid(&field, name, &msg));
                }
            } else if !names.insert(name) {
                out.push(duplicate(&field, name));
            }
        }
        let cp = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
        if cp == 0 {
            out.push(required(&format!("{path}[{i}].containerPort"), ""));
        } else if !(1..=65535).contains(&cp) {
            out.push(invalid_json(
                &format!("{path}[{i}].containerPort"),
                &Value::from(cp),
                &inclusive_range_error(1, 65535),
            ));
        }
        let hp = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
        if hp != 0 && !(1..=65535).contains(&hp) {
            out.push(invalid_json(
                &format!("{path}[{i}].hostPort"),
                &Value::from(hp),
                &inclusive_range_error(1, 65535),
            ));
        }
        match s(p, "protocol") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => out.push(required(&format!("{path}[{i}].protocol"), "")),
            other => out.push(not_supported(
                &format!("{path}[{i}].protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

fn validate_resources(res: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let limits = res.get("limits").and_then(Value::as_object);
    if let Some(limits) = limits {
        for (name, q) in limits {
            nonnegative_quantity(q, &format!("{path}.limits[{name}]"), out);
        }
    }
    let Some(requests) = res.get("requests").and_then(Value::as_object) else {
        return;
    };
    for (name, q) in requests {
        let field = format!("{path}.requests[{name}]");
        nonnegative_quantity(q, &field, out);
        let Some(limit) = limits.and_then(|l| l.get(name)) else {
            continue;
        };
        if let (Some(r), Some(l)) = (quantity::of(q), quantity::of(limit)) {
            if r > l {
                out.push(invalid(
                    &field,
                    &quantity::shown(q),
                    &format!(
                        "must be less than or equal to {name} limit of {}",
                        quantity::shown(limit)
                    ),
                ));
            }
        }
    }
}

fn nonnegative_quantity(q: &Value, field: &str, out: &mut Vec<StatusCause>) {
    if quantity::of(q).is_some_and(|v| v < 0) {
        out.push(invalid(
            field,
            &quantity::shown(q),
            "must be greater than or equal to 0",
        ));
    }
}

//! kube's `ValidatePodSpec` and `ValidatePodTemplateSpec`, for the rules
//! clients hit: containers (names, images, ports, env names, volume mounts,
//! pull and termination-message policies, resource requests against
//! limits), volumes (names), restart and DNS policies, the node selector,
//! the service account name, `activeDeadlineSeconds`.
//!
//! Not implemented (kube checks them): probes (handler count, thresholds),
//! lifecycle hooks, security contexts, affinity, tolerations, topology
//! spread constraints, host port conflicts, volume sources' own fields,
//! `subPath`, DNS config, hostname/subdomain, overhead, resource names,
//! hugepages, sidecar (restartable init) container rules, seccomp/AppArmor
//! annotations, `os`, scheduling gates, resource claims.

use std::collections::HashSet;

use serde_json::Value;

use super::quantity;
use crate::status::StatusCause;
use crate::validation::{
    duplicate, forbidden, inclusive_range_error, invalid, invalid_json, is_dns1123_label,
    is_dns1123_subdomain, not_found, not_supported, required, validate_annotations,
    validate_labels,
};

/// `ValidatePodTemplateSpec` of the template at `path` (e.g.
/// `spec.template`). kube reports the template's labels at
/// `<path>.labels` (not `.metadata.labels`).
pub fn validate_pod_template(tpl: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let meta = tpl.get("metadata").unwrap_or(&Value::Null);
    out.extend(validate_labels(
        meta.get("labels").unwrap_or(&Value::Null),
        &format!("{path}.labels"),
    ));
    out.extend(validate_annotations(
        meta.get("annotations").unwrap_or(&Value::Null),
        &format!("{path}.annotations"),
    ));
    let spec = tpl.get("spec").unwrap_or(&Value::Null);
    validate_pod_spec(spec, &format!("{path}.spec"), out);
    if spec
        .get("ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        out.push(forbidden(
            &format!("{path}.spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `ValidatePodSpec` of the spec at `path` (e.g. `spec`).
pub fn validate_pod_spec(spec: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let volumes = validate_volumes(arr(spec, "volumes"), &format!("{path}.volumes"), out);
    let containers = arr(spec, "containers");
    let mut names: HashSet<&str> = HashSet::new();
    if containers.is_empty() {
        out.push(required(&format!("{path}.containers"), ""));
    }
    for (i, c) in containers.iter().enumerate() {
        validate_container(
            c,
            &format!("{path}.containers[{i}]"),
            &volumes,
            &mut names,
            out,
        );
    }
    for (i, c) in arr(spec, "initContainers").iter().enumerate() {
        validate_container(
            c,
            &format!("{path}.initContainers[{i}]"),
            &volumes,
            &mut names,
            out,
        );
    }
    let restart = s(spec, "restartPolicy");
    match restart {
        "Always" | "OnFailure" | "Never" => {}
        "" => out.push(required(&format!("{path}.restartPolicy"), "")),
        other => out.push(not_supported(
            &format!("{path}.restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    match s(spec, "dnsPolicy") {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => out.push(required(&format!("{path}.dnsPolicy"), "")),
        other => out.push(not_supported(
            &format!("{path}.dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    if let Some(sel) = spec.get("nodeSelector") {
        out.extend(validate_labels(sel, &format!("{path}.nodeSelector")));
    }
    for key in ["hostname", "subdomain"] {
        let v = s(spec, key);
        if !v.is_empty() {
            for msg in is_dns1123_label(v) {
                out.push(invalid(&format!("{path}.{key}"), v, &msg));
            }
        }
    }
    let node = s(spec, "nodeName");
    if !node.is_empty() {
        for msg in is_dns1123_subdomain(node) {
            out.push(invalid(&format!("{path}.nodeName"), node, &msg));
        }
    }
    let sa = s(spec, "serviceAccountName");
    if !sa.is_empty() {
        for msg in is_dns1123_subdomain(sa) {
            out.push(invalid(&format!("{path}.serviceAccountName"), sa, &msg));
        }
    }
    if let Some(ads) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64) {
        if !(1..=i64::from(i32::MAX)).contains(&ads) {
            out.push(invalid_json(
                &format!("{path}.activeDeadlineSeconds"),
                &Value::from(ads),
                &inclusive_range_error(1, i64::from(i32::MAX)),
            ));
        }
    }
}

/// Volume names: required, DNS labels, unique. Returns the names.
fn validate_volumes<'a>(
    volumes: &'a [Value],
    path: &str,
    out: &mut Vec<StatusCause>,
) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let name = s(v, "name");
        let field = format!("{path}[{i}].name");
        if name.is_empty() {
            out.push(required(&field, ""));
        } else {
            for msg in is_dns1123_label(name) {
                out.push(invalid(&field, name, &msg));
            }
        }
        if !name.is_empty() && !names.insert(name) {
            out.push(duplicate(&field, name));
        }
        validate_volume_source(v, &format!("{path}[{i}]"), out);
    }
    names
}

/// kube's `VolumeSource` fields, in its struct order (the order in which it
/// finds a second source).
const VOLUME_SOURCES: [&str; 30] = [
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// One volume source (`must specify a volume type`, `may not specify more
/// than 1 volume type`) and the required name of the common ones.
fn validate_volume_source(v: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let mut found = 0;
    for key in VOLUME_SOURCES {
        let Some(src) = v.get(key).filter(|s| !s.is_null()) else {
            continue;
        };
        found += 1;
        if found > 1 {
            out.push(forbidden(
                &format!("{path}.{key}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        let needed = match key {
            "secret" => "secretName",
            "configMap" => "name",
            "persistentVolumeClaim" => "claimName",
            "hostPath" | "nfs" => "path",
            _ => continue,
        };
        if s(src, needed).is_empty() {
            out.push(required(&format!("{path}.{key}.{needed}"), ""));
        }
    }
    if found == 0 {
        out.push(required(path, "must specify a volume type"));
    }
}

fn validate_container<'a>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    fn errors(spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        validate_pod_spec(&spec, "spec", &mut out);
        out.iter().map(crate::validation::cause_to_string).collect()
    }

    fn ok_container() -> Value {
        json!({"name": "a", "image": "x", "imagePullPolicy": "Always",
               "terminationMessagePolicy": "File"})
    }

    fn spec_with(containers: Value) -> Value {
        json!({"containers": containers, "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"})
    }

    #[test]
    fn valid_spec_has_no_errors() {
        assert!(errors(spec_with(json!([ok_container()]))).is_empty());
    }

    #[test]
    fn container_errors() {
        let mut bad = ok_container();
        bad["name"] = json!("Bad Name");
        assert_eq!(
            errors(spec_with(json!([bad]))),
            vec![format!(
                "spec.containers[0].name: Invalid value: \"Bad Name\": {LABEL_MSG}"
            )]
        );
        assert_eq!(
            errors(spec_with(json!([ok_container(), ok_container()]))),
            vec!["spec.containers[1].name: Duplicate value: \"a\"".to_string()]
        );
        let mut no_image = ok_container();
        no_image.as_object_mut().unwrap().remove("image");
        assert_eq!(
            errors(spec_with(json!([no_image]))),
            vec!["spec.containers[0].image: Required value".to_string()]
        );
        assert_eq!(
            errors(spec_with(json!([]))),
            vec!["spec.containers: Required value".to_string()]
        );
    }

    #[test]
    fn port_errors() {
        let mut c = ok_container();
        c["ports"] = json!([
            {"containerPort": 70000, "protocol": "TCP", "name": "http"},
            {"containerPort": 80, "protocol": "TCP", "name": "http"},
            {"protocol": "tcp", "name": "Bad_"}
        ]);
        assert_eq!(
            errors(spec_with(json!([c]))),
            vec![
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
                "spec.containers[0].ports[2].name: Invalid value: \"Bad_\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].ports[2].containerPort: Required value",
                "spec.containers[0].ports[2].protocol: Unsupported value: \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
    }

    #[test]
    fn policy_mount_and_resource_errors() {
        let mut c = ok_container();
        c["volumeMounts"] = json!([{"name": "missing", "mountPath": "/a"}]);
        c["resources"] = json!({"limits": {"cpu": "1"}, "requests": {"cpu": "2", "memory": "-1"}});
        let mut spec = spec_with(json!([c]));
        spec["restartPolicy"] = json!("Sometimes");
        assert_eq!(
            errors(spec),
            vec![
                "spec.containers[0].volumeMounts[0].name: Not found: \"missing\"",
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
    }

    #[test]
    fn probe_errors() {
        let mut c = ok_container();
        c["livenessProbe"] = json!({"successThreshold": 2, "periodSeconds": -1});
        c["readinessProbe"] = json!({"httpGet": {"port": 0}, "tcpSocket": {"port": 1}});
        c["startupProbe"] = json!({"httpGet": {"port": "Http"}});
        assert_eq!(
            errors(spec_with(json!([c]))),
            vec![
                "spec.containers[0].livenessProbe: Required value: must specify a handler type",
                "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].startupProbe.httpGet.port: Invalid value: \"Http\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ]
        );
    }

    #[test]
    fn volume_and_env_errors() {
        let mut c = ok_container();
        c["env"] = json!([
            {"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c"}}},
            {"name": "C", "valueFrom": {}}
        ]);
        let mut spec = spec_with(json!([c]));
        spec["volumes"] = json!([
            {"name": "a", "secret": {}},
            {"name": "b", "emptyDir": {}, "configMap": {"name": "x"}},
            {"name": "c"}
        ]);
        assert_eq!(
            errors(spec),
            vec![
                "spec.volumes[0].secret.secretName: Required value",
                "spec.volumes[1].configMap: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[2]: Required value: must specify a volume type",
                "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "spec.containers[0].env[1].valueFrom.configMapKeyRef.key: Required value",
                "spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ]
        );
    }

    #[test]
    fn template_labels_path() {
        let mut out = Vec::new();
        validate_pod_template(
            &json!({"metadata": {"labels": {"a": "-x"}}, "spec": spec_with(json!([ok_container()]))}),
            "spec.template",
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].field, "spec.template.labels");
    }
}

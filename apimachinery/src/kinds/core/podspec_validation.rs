//! kube's `ValidatePodSpec` and `ValidatePodTemplateSpec`, for the rules
//! clients hit: containers (in `container`), volumes (names, one source,
//! the common sources' required names), restart and DNS policies, the node
//! selector, hostname/subdomain/nodeName, the service account name,
//! `activeDeadlineSeconds`, tolerations, host-network ports.
//!
//! Not implemented (kube checks them): lifecycle hooks, security contexts,
//! affinity, topology spread constraints, host port
//! conflicts, most volume sources' own fields, `subPath`, env `fieldRef`
//! paths, DNS config, overhead, resource names, hugepages, sidecar
//! (restartable init) container rules, seccomp/AppArmor annotations,
//! `os`, scheduling gates, resource claims, image pull secrets.

use std::collections::HashSet;

use serde_json::Value;

use super::container::validate_container;
use crate::status::StatusCause;
use crate::validation::{
    duplicate, forbidden, inclusive_range_error, invalid, invalid_json, is_dns1123_label,
    is_dns1123_subdomain, not_supported, required, validate_annotations, validate_labels,
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
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for key in ["containers", "initContainers"] {
            for (i, c) in arr(spec, key).iter().enumerate() {
                for (j, p) in arr(c, "ports").iter().enumerate() {
                    let cp = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
                    let hp = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
                    if hp != cp {
                        out.push(invalid_json(
                            &format!("{path}.{key}[{i}].ports[{j}].containerPort"),
                            &Value::from(cp),
                            "must match `hostPort` when `hostNetwork` is true",
                        ));
                    }
                }
            }
        }
    }
    for (i, t) in arr(spec, "tolerations").iter().enumerate() {
        validate_toleration(t, &format!("{path}.tolerations[{i}]"), out);
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

/// kube's `ValidateTolerations` for one toleration.
fn validate_toleration(t: &Value, path: &str, out: &mut Vec<StatusCause>) {
    let (key, op, value, effect) = (s(t, "key"), s(t, "operator"), s(t, "value"), s(t, "effect"));
    if !key.is_empty() {
        for msg in crate::validation::is_qualified_name(key) {
            out.push(invalid(&format!("{path}.key"), key, &msg));
        }
    }
    let op_path = format!("{path}.operator");
    if key.is_empty() && op != "Exists" {
        out.push(invalid(
            &op_path,
            op,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    let seconds = t.get("tolerationSeconds").filter(|v| !v.is_null());
    if seconds.is_some() && effect != "NoExecute" {
        out.push(invalid(
            &format!("{path}.effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
    match op {
        "Equal" | "" => {
            let errs = crate::validation::is_valid_label_value(value);
            if !errs.is_empty() {
                out.push(invalid(&op_path, value, &errs.join(";")));
            }
        }
        "Exists" => {
            if !value.is_empty() {
                let q = crate::validation::go_quote;
                let secs = if seconds.is_some() {
                    "(*int64)(0xc000000000)"
                } else {
                    "(*int64)(nil)"
                };
                out.push(crate::validation::invalid_rendered(
                    &op_path,
                    &format!(
                        "core.Toleration{{Key:{}, Operator:{}, Value:{}, Effect:{}, TolerationSeconds:{secs}}}",
                        q(key),
                        q(op),
                        q(value),
                        q(effect)
                    ),
                    "value must be empty when `operator` is 'Exists'",
                ));
            }
        }
        other => out.push(not_supported(&op_path, other, &["Equal", "Exists"])),
    }
    if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        out.push(not_supported(
            &format!("{path}.effect"),
            effect,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        ));
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
    fn host_network_ports() {
        let mut c = ok_container();
        c["ports"] = json!([{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]);
        let mut spec = spec_with(json!([c]));
        spec["hostNetwork"] = json!(true);
        assert_eq!(
            errors(spec),
            vec!["spec.containers[0].ports[0].containerPort: Invalid value: 80: must match `hostPort` when `hostNetwork` is true"]
        );
    }

    #[test]
    fn toleration_errors() {
        let mut spec = spec_with(json!([ok_container()]));
        spec["tolerations"] = json!([
            {"operator": "Exists"},
            {"key": "k", "operator": "Exists", "value": "v"},
            {"operator": "Equal", "value": "v"},
            {"key": "k", "operator": "Equal", "value": "v", "effect": "Sometimes", "tolerationSeconds": 5}
        ]);
        assert_eq!(
            errors(spec),
            vec![
                "spec.tolerations[1].operator: Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'",
                "spec.tolerations[2].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                "spec.tolerations[3].effect: Invalid value: \"Sometimes\": effect must be 'NoExecute' when `tolerationSeconds` is set",
                "spec.tolerations[3].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
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

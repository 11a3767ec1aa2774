//! Nodes: kube's status default (allocatable from capacity), the taint and
//! pod CIDR checks of `ValidateNode`, and the node printer.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

fn defaults(obj: &mut Value) {
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let missing = status.get("allocatable").is_none_or(Value::is_null);
    if missing {
        if let Some(cap) = status.get("capacity").filter(|c| c.is_object()).cloned() {
            status.insert("allocatable".into(), cap);
        }
    }
}

const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// kube's `validateNodeTaints` (also used for tolerations' siblings).
pub(crate) fn validate_taints(taints: Option<&Value>, path: &str) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, t) in taints
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let idx = format!("{path}[{i}]");
        let get = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
        let (key, value, effect) = (get("key"), get("value"), get("effect"));
        for msg in v::is_qualified_name(key) {
            errs.push(v::invalid(&format!("{idx}.key"), key, &msg));
        }
        let value_errs = v::is_valid_label_value(value);
        if !value_errs.is_empty() {
            errs.push(v::invalid(
                &format!("{idx}.value"),
                value,
                &value_errs.join(";"),
            ));
        }
        if effect.is_empty() {
            errs.push(v::required(&format!("{idx}.effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            errs.push(v::not_supported(&format!("{idx}.effect"), effect, EFFECTS));
        }
        if !seen.insert((effect, key)) {
            let shown = format!(
                "core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:<nil>}}: taints must be unique by key and effect pair",
                v::go_quote(key),
                v::go_quote(value),
                v::go_quote(effect)
            );
            errs.push(v::duplicate_shown(&idx, &shown));
        }
    }
    errs
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = validate_taints(obj.pointer("/spec/taints"), "spec.taints");
    if let Some(old) = old {
        // The pod CIDRs and provider ID may only be set once.
        let before: Vec<&str> = print::strs_at(old, "/spec/podCIDRs").collect();
        let now: Vec<&str> = print::strs_at(obj, "/spec/podCIDRs").collect();
        if !before.is_empty() && before != now {
            errs.push(v::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let old_id = print::str_at(old, "/spec/providerID", "");
        if !old_id.is_empty() && old_id != print::str_at(obj, "/spec/providerID", "") {
            errs.push(v::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
    let cidrs: Vec<&str> = print::strs_at(obj, "/spec/podCIDRs").collect();
    for (i, c) in cidrs.iter().enumerate() {
        errs.extend(v::validate_cidr(&format!("spec.podCIDRs[{i}]"), c));
    }
    if cidrs.len() > 2 {
        errs.push(v::invalid_rendered(
            "spec.podCIDRs",
            &v::go_slice("string", cidrs.iter().copied()),
            "may specify no more than one CIDR for each IP family",
        ));
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column("Status", "string", "The status of the node", 0, status_cell),
    column("Roles", "string", "The roles of the node", 0, roles_cell),
    AGE,
    column("Version", "string", "Kubelet Version reported by the node.", 0, |o, _| info(o, "kubeletVersion", "")),
    column("Internal-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1, |o, _| address(o, "InternalIP")),
    column("External-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1, |o, _| address(o, "ExternalIP")),
    column("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1, |o, _| info(o, "osImage", "<unknown>")),
    column("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1, |o, _| info(o, "kernelVersion", "<unknown>")),
    column("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1, |o, _| info(o, "containerRuntimeVersion", "<unknown>")),
];

fn status_cell(obj: &Value, _: &PrintContext) -> Value {
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rfind(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
    let mut status = match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    Value::String(status)
}

fn roles_cell(obj: &Value, _: &PrintContext) -> Value {
    let mut roles: Vec<&str> = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, val) in labels {
            let val = val.as_str().unwrap_or("");
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.push(role);
                }
            } else if k == "kubernetes.io/role" && !val.is_empty() {
                roles.push(val);
            }
        }
    }
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        json!("<none>")
    } else {
        Value::String(roles.join(","))
    }
}

fn info(obj: &Value, key: &str, default: &str) -> Value {
    let s = obj
        .pointer("/status/nodeInfo")
        .and_then(|i| i.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(default);
    json!(s)
}

fn address(obj: &Value, ty: &str) -> Value {
    let found = obj
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a.get("type").and_then(Value::as_str) == Some(ty))
        .and_then(|a| a.get("address"))
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    json!(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_columns() {
        let mut n = json!({"status": {"capacity": {"cpu": "2"}}});
        defaults(&mut n);
        assert_eq!(n["status"]["allocatable"], json!({"cpu": "2"}));
        let bad = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
            {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Bad"}]}});
        let got: Vec<String> = validate(&bad, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(got, vec![
            "spec.taints[1]: Duplicate value: core.Taint{Key:\"a\", Value:\"\", Effect:\"NoSchedule\", TimeAdded:<nil>}: taints must be unique by key and effect pair",
            "spec.taints[2].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ]);
        let old = json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}});
        let moved = json!({"spec": {"podCIDRs": ["10.0.1.0/24"]}});
        assert_eq!(
            v::cause_to_string(&validate(&moved, Some(&old))[0]),
            "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
        );
        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "x"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "nodeInfo": {"kubeletVersion": "v1.31.0"}}});
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = COLUMNS
            .iter()
            .filter(|c| c.name != "Age")
            .map(|c| (c.cell)(&node, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("n"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,x"),
                json!("v1.31.0"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
    }
}

//! LimitRanges and ResourceQuotas: kube's LimitRange item defaults, the
//! non-negative quota check and the printers.

use serde_json::{json, Map, Value};

use crate::kinds::common::each_mut;
use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static LIMIT_RANGE: KindRules = KindRules {
    defaults: Some(limit_range_defaults),
    columns: LIMIT_RANGE_COLUMNS,
    ..KindRules::NONE
};

pub static RESOURCE_QUOTA: KindRules = KindRules {
    validate: Some(validate_quota),
    columns: QUOTA_COLUMNS,
    ..KindRules::NONE
};

/// Copies each entry of `from` missing in `item[to]` (created only when
/// something is copied).
fn fill(item: &mut Map<String, Value>, to: &str, from: &str) {
    let Some(src) = item.get(from).and_then(Value::as_object) else {
        return;
    };
    let dst = item.get(to).and_then(Value::as_object);
    let missing: Vec<(String, Value)> = src
        .iter()
        .filter(|(k, _)| dst.is_none_or(|d| !d.contains_key(*k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if missing.is_empty() {
        return;
    }
    let slot = item.entry(to).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    if let Some(d) = slot.as_object_mut() {
        d.extend(missing);
    }
}

/// kube's `SetDefaults_LimitRangeItem`: for containers the default limit
/// comes from max, the default request from the default limit, then min.
fn limit_range_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for item in each_mut(spec, "limits") {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        fill(item, "default", "max");
        fill(item, "defaultRequest", "default");
        fill(item, "defaultRequest", "min");
    }
}

fn negative(q: &str) -> bool {
    q.starts_with('-') && q[1..].chars().any(|c| c.is_ascii_digit() && c != '0')
}

fn validate_quota(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    for (path, pointer) in [
        ("spec.hard", "/spec/hard"),
        ("status.hard", "/status/hard"),
        ("status.used", "/status/used"),
    ] {
        let Some(m) = obj.pointer(pointer).and_then(Value::as_object) else {
            continue;
        };
        for (k, q) in m {
            let q = q.as_str().unwrap_or("");
            if negative(q) {
                errs.push(v::invalid(
                    &format!("{path}[{k}]"),
                    q,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    let scopes: Vec<&str> = print::strs_at(obj, "/spec/scopes").collect();
    const SCOPES: &[&str] = &[
        "BestEffort",
        "CrossNamespacePodAffinity",
        "NotBestEffort",
        "NotTerminating",
        "PriorityClass",
        "Terminating",
        "VolumeAttributesClass",
    ];
    for s in scopes {
        if !SCOPES.contains(&s) {
            errs.push(v::not_supported("spec.scopes", s, SCOPES));
        }
    }
    errs
}

const LIMIT_RANGE_COLUMNS: &[Column] = &[
    NAME,
    column("Created At", "date", print::AGE_DESCRIPTION, 0, |o, _| {
        o.pointer("/metadata/creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null)
    }),
];

const QUOTA_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume.", 0, |o, _| quota_cell(o, false)),
    column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.", 0, |o, _| quota_cell(o, true)),
];

/// `resource: used/hard, ...` of the status, sorted by resource name; the
/// `limits.*` resources go to the Limit column.
fn quota_cell(obj: &Value, limits: bool) -> Value {
    let Some(hard) = obj.pointer("/status/hard").and_then(Value::as_object) else {
        return json!("");
    };
    let used = obj.pointer("/status/used");
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let parts: Vec<String> = names
        .into_iter()
        .filter(|n| (n.starts_with("limits.")) == limits)
        .map(|n| {
            let u = used
                .and_then(|u| u.get(n.as_str()))
                .and_then(Value::as_str)
                .unwrap_or("0");
            format!("{n}: {u}/{}", hard[n].as_str().unwrap_or("0"))
        })
        .collect();
    Value::String(parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;

    #[test]
    fn limit_range_defaults_fill_from_max_default_min() {
        let mut lr = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"},
            "min": {"memory": "1Mi"}, "defaultRequest": {"cpu": "1"}}, {"type": "Pod", "max": {"cpu": "4"}}]}});
        limit_range_defaults(&mut lr);
        assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "1", "memory": "1Mi"})
        );
        assert!(lr["spec"]["limits"][1].get("default").is_none());
        let again = lr.clone();
        limit_range_defaults(&mut lr);
        assert_eq!(lr, again);
    }

    #[test]
    fn quota_validation_and_columns() {
        let bad = json!({"spec": {"hard": {"cpu": "-1"}}});
        assert_eq!(
            v::cause_to_string(&validate_quota(&bad, None)[0]),
            "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        );
        let q = json!({"status": {"hard": {"pods": "10", "limits.cpu": "2", "cpu": "1"},
            "used": {"pods": "3"}}});
        let ctx = PrintContext { now: 0 };
        assert_eq!(
            (QUOTA_COLUMNS[2].cell)(&q, &ctx),
            json!("cpu: 0/1, pods: 3/10")
        );
        assert_eq!((QUOTA_COLUMNS[3].cell)(&q, &ctx), json!("limits.cpu: 0/2"));
    }
}

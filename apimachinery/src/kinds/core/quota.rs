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
    validate: Some(validate_limit_range),
    // kube has no LimitRange printer: the default (Name, Created At).
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

/// A quantity's value (approximate beyond f64 precision, enough to
/// compare); `None` when it does not parse.
pub(crate) fn quantity_value(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * factor)
}

const LIMIT_TYPES: &[&str] = &["Pod", "Container", "PersistentVolumeClaim"];

/// kube's `ValidateLimitRange`: known types, each once, and
/// min <= defaultRequest <= default <= max per resource.
fn validate_limit_range(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let limits = obj.pointer("/spec/limits").and_then(Value::as_array);
    let mut types = std::collections::HashSet::new();
    for (i, item) in limits.into_iter().flatten().enumerate() {
        let p = format!("spec.limits[{i}]");
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let name_errs = v::is_qualified_name(ty);
        if !name_errs.is_empty() {
            for msg in name_errs {
                errs.push(v::invalid(&format!("{p}.type"), ty, &msg));
            }
        } else if !ty.contains('/') && !LIMIT_TYPES.contains(&ty) {
            errs.push(v::invalid(
                &format!("{p}.type"),
                ty,
                "must be a standard limit type or fully qualified",
            ));
        }
        if !types.insert(ty) {
            errs.push(v::duplicate_shown(&format!("{p}.type"), &v::go_quote(ty)));
        }
        let map = |k: &str| item.get(k).and_then(Value::as_object);
        if ty == "Pod" {
            for k in ["default", "defaultRequest"] {
                if map(k).is_some_and(|m| !m.is_empty()) {
                    errs.push(v::forbidden(
                        &format!("{p}.{k}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        let get = |k: &str, r: &str| -> Option<(&str, f64)> {
            let q = map(k)?.get(r)?.as_str()?;
            Some((q, quantity_value(q)?))
        };
        let mut keys: Vec<&String> = ["max", "min", "default", "defaultRequest"]
            .iter()
            .filter_map(|k| map(k))
            .flat_map(|m| m.keys())
            .collect();
        keys.sort();
        keys.dedup();
        for r in keys {
            let (min, max) = (get("min", r), get("max", r));
            let (def, req) = (get("default", r), get("defaultRequest", r));
            // (path, a, b, names): an error when a > b; the bad value is
            // the one kube reports.
            let cases = [
                ("min", min, max, "min value", "max value", min),
                (
                    "defaultRequest",
                    min,
                    req,
                    "min value",
                    "default request value",
                    req,
                ),
                (
                    "defaultRequest",
                    req,
                    max,
                    "default request value",
                    "max value",
                    req,
                ),
                (
                    "defaultRequest",
                    req,
                    def,
                    "default request value",
                    "default limit value",
                    req,
                ),
                ("default", min, def, "min value", "default value", min),
                ("default", def, max, "default value", "max value", max),
            ];
            for (field, a, b, a_name, b_name, shown) in cases {
                if let (Some((aq, av)), Some((bq, bv)), Some((sq, _))) = (a, b, shown) {
                    if av > bv {
                        errs.push(v::invalid(
                            &format!("{p}.{field}[{r}]"),
                            sq,
                            &format!("{a_name} {aq} is greater than {b_name} {bq}"),
                        ));
                    }
                }
            }
        }
    }
    errs
}

/// kube's `IsStandardQuotaResourceName`.
fn is_standard_quota_resource(name: &str) -> bool {
    const STANDARD: &[&str] = &[
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    ];
    STANDARD.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
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
            if !k.contains('/') && !is_standard_quota_resource(k) {
                errs.push(v::invalid(
                    &format!("{path}[{k}]"),
                    k,
                    "must be a standard resource for quota",
                ));
            }
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

const QUOTA_COLUMNS: &[Column] = &[
    NAME,
    column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume.", 0, |o, _| quota_cell(o, false)),
    column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.", 0, |o, _| quota_cell(o, true)),
    AGE,
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
    fn limit_range_validation() {
        let lr = json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
            {"type": "Container"}, {"type": "Pod", "default": {"cpu": "1"}}, {"type": "Node"}]}});
        let got: Vec<String> = validate_limit_range(&lr, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(got, vec![
            "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
            "spec.limits[1].type: Duplicate value: \"Container\"",
            "spec.limits[2].default: Forbidden: may not be specified when `type` is 'Pod'",
            "spec.limits[3].type: Invalid value: \"Node\": must be a standard limit type or fully qualified",
        ]);
        assert_eq!(quantity_value("1Gi"), Some(1073741824.0));
        assert_eq!(quantity_value("500m"), Some(0.5));
        let ok = json!({"spec": {"limits": [{"type": "Container", "min": {"memory": "1Mi"}, "default": {"memory": "1G"},
            "defaultRequest": {"memory": "512Mi"}, "max": {"memory": "2Gi"}}]}});
        assert!(validate_limit_range(&ok, None).is_empty());
    }

    #[test]
    fn quota_validation_and_columns() {
        let bad = json!({"spec": {"hard": {"cpu": "-1"}}});
        assert_eq!(
            v::cause_to_string(&validate_quota(&bad, None)[0]),
            "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        );
        let odd = json!({"spec": {"hard": {"widgets": "1", "count/deployments.apps": "2", "requests.hugepages-2Mi": "1Gi"}}});
        assert_eq!(
            v::cause_to_string(&validate_quota(&odd, None)[0]),
            "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota"
        );
        assert_eq!(validate_quota(&odd, None).len(), 1);
        let q = json!({"status": {"hard": {"pods": "10", "limits.cpu": "2", "cpu": "1"},
            "used": {"pods": "3"}}});
        let ctx = PrintContext { now: 0 };
        assert_eq!(
            (QUOTA_COLUMNS[1].cell)(&q, &ctx),
            json!("cpu: 0/1, pods: 3/10")
        );
        assert_eq!((QUOTA_COLUMNS[2].cell)(&q, &ctx), json!("limits.cpu: 0/2"));
    }
}

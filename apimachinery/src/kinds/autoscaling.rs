//! autoscaling/v2 HorizontalPodAutoscalers: kube's v2 defaults (min
//! replicas, the CPU metric, scaling behavior), the main checks of
//! `ValidateHorizontalPodAutoscaler` and the printer.

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_field, object_mut};
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static HORIZONTAL_POD_AUTOSCALER: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_field(spec, "minReplicas", json!(1));
    let no_metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_metrics {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else {
        return;
    };
    let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    let down = json!({"selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    for (key, rules) in [("scaleUp", up), ("scaleDown", down)] {
        let Value::Object(rules) = rules else {
            continue;
        };
        let Some(slot) = object_mut(behavior, key) else {
            continue;
        };
        for (k, val) in rules {
            default_field(slot, &k, val);
        }
    }
}

fn int(m: Option<&Value>, k: &str) -> Option<i64> {
    m.and_then(|x| x.get(k)).and_then(Value::as_i64)
}

fn s<'a>(m: Option<&'a Value>, k: &str) -> &'a str {
    m.and_then(|x| x.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let min = int(spec, "minReplicas");
    let max = int(spec, "maxReplicas").unwrap_or(0);
    if let Some(m) = min.filter(|m| *m < 1) {
        errs.push(v::invalid_json(
            "spec.minReplicas",
            &json!(m),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(v::invalid_json(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|m| max < m) {
        errs.push(v::invalid_json(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = spec.and_then(|x| x.get("scaleTargetRef"));
    for k in ["kind", "name"] {
        let val = s(target, k);
        let field = format!("spec.scaleTargetRef.{k}");
        if val.is_empty() {
            errs.push(v::required(&field, ""));
        } else {
            for msg in v::is_path_segment_name(val) {
                errs.push(v::invalid(&field, val, &msg));
            }
        }
    }
    let metrics = spec
        .and_then(|x| x.get("metrics"))
        .and_then(Value::as_array);
    for (i, m) in metrics.into_iter().flatten().enumerate() {
        metric(m, &format!("spec.metrics[{i}]"), &mut errs);
    }
    if let Some(b) = spec
        .and_then(|x| x.get("behavior"))
        .filter(|b| !b.is_null())
    {
        for key in ["scaleUp", "scaleDown"] {
            if let Some(r) = b.get(key).and_then(Value::as_object) {
                scaling_rules(r, &format!("spec.behavior.{key}"), &mut errs);
            }
        }
    }
    errs
}

const SOURCES: &[(&str, &str)] = &[
    ("Object", "object"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
    ("External", "external"),
];

fn metric(m: &Value, p: &str, errs: &mut Vec<StatusCause>) {
    let ty = s(Some(m), "type");
    let set: Vec<&str> = SOURCES
        .iter()
        .map(|(_, k)| *k)
        .filter(|k| m.get(*k).is_some_and(|x| !x.is_null()))
        .collect();
    let Some((_, key)) = SOURCES.iter().find(|(t, _)| *t == ty) else {
        if ty.is_empty() {
            errs.push(v::required(
                &format!("{p}.type"),
                "must specify a metric source type",
            ));
        } else {
            errs.push(v::not_supported(
                &format!("{p}.type"),
                ty,
                &[
                    "ContainerResource",
                    "External",
                    "Object",
                    "Pods",
                    "Resource",
                ],
            ));
        }
        return;
    };
    for other in set.iter().filter(|k| *k != key) {
        errs.push(v::forbidden(
            &format!("{p}.{other}"),
            "must populate the given metric source only",
        ));
    }
    let Some(src) = m.get(*key).filter(|x| !x.is_null()) else {
        errs.push(v::required(
            &format!("{p}.{key}"),
            "must populate information for the given metric source",
        ));
        return;
    };
    let sp = format!("{p}.{key}");
    let target = src.get("target");
    if matches!(*key, "resource" | "containerResource") {
        if s(Some(src), "name").is_empty() {
            errs.push(v::required(
                &format!("{sp}.name"),
                "must specify a resource name",
            ));
        }
        let (util, avg) = (
            target
                .and_then(|t| t.get("averageUtilization"))
                .filter(|x| !x.is_null()),
            target
                .and_then(|t| t.get("averageValue"))
                .filter(|x| !x.is_null()),
        );
        if util.is_none() && avg.is_none() {
            errs.push(v::required(
                &format!("{sp}.target.averageUtilization"),
                "must set either a target raw value or a target utilization",
            ));
        }
        if util.is_some() && avg.is_some() {
            errs.push(v::forbidden(
                &format!("{sp}.target.averageValue"),
                "may not set both a target raw value and a target utilization",
            ));
        }
    }
    metric_target(target, &format!("{sp}.target"), errs);
}

/// kube's `validateMetricTarget`.
fn metric_target(t: Option<&Value>, p: &str, errs: &mut Vec<StatusCause>) {
    let ty = s(t, "type");
    if ty.is_empty() {
        errs.push(v::required(
            &format!("{p}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(ty, "Utilization" | "Value" | "AverageValue") {
        errs.push(v::invalid(
            &format!("{p}.type"),
            ty,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for k in ["value", "averageValue"] {
        let q = s(t, k);
        let non_positive =
            q.starts_with('-') || (!q.is_empty() && !q.bytes().any(|b| (b'1'..=b'9').contains(&b)));
        if non_positive {
            errs.push(v::invalid(&format!("{p}.{k}"), q, "must be positive"));
        }
    }
    if let Some(u) = int(t, "averageUtilization").filter(|u| *u < 1) {
        errs.push(v::invalid_json(
            &format!("{p}.averageUtilization"),
            &json!(u),
            "must be greater than 0",
        ));
    }
}

/// kube's `validateScalingRules`.
fn scaling_rules(r: &Map<String, Value>, p: &str, errs: &mut Vec<StatusCause>) {
    if let Some(w) = r.get("stabilizationWindowSeconds").and_then(Value::as_i64) {
        let field = format!("{p}.stabilizationWindowSeconds");
        if w < 0 {
            errs.push(v::invalid_json(
                &field,
                &json!(w),
                "must be greater than or equal to zero",
            ));
        }
        if w > 3600 {
            errs.push(v::invalid_json(
                &field,
                &json!(w),
                "must be less than or equal to 3600",
            ));
        }
    }
    if let Some(sp) = r.get("selectPolicy").and_then(Value::as_str) {
        const POLICIES: &[&str] = &["Disabled", "Max", "Min"];
        if !POLICIES.contains(&sp) {
            errs.push(v::not_supported(&format!("{p}.selectPolicy"), sp, POLICIES));
        }
    }
    let policies = r.get("policies").and_then(Value::as_array);
    if policies.is_none_or(Vec::is_empty) {
        errs.push(v::required(
            &format!("{p}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, pol) in policies.into_iter().flatten().enumerate() {
        let pp = format!("{p}.policies[{i}]");
        let ty = s(Some(pol), "type");
        if ty != "Pods" && ty != "Percent" {
            errs.push(v::invalid(
                &format!("{pp}.type"),
                ty,
                "must be either Pods or Percent",
            ));
        }
        let value = int(Some(pol), "value").unwrap_or(0);
        if value <= 0 {
            errs.push(v::invalid_json(
                &format!("{pp}.value"),
                &json!(value),
                "must be greater than zero",
            ));
        }
        let period = int(Some(pol), "periodSeconds").unwrap_or(0);
        if period <= 0 {
            errs.push(v::invalid_json(
                &format!("{pp}.periodSeconds"),
                &json!(period),
                "must be greater than zero",
            ));
        }
        if period > 1800 {
            errs.push(v::invalid_json(
                &format!("{pp}.periodSeconds"),
                &json!(period),
                "must be less than or equal to 1800",
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// Printer.

const COLUMNS: &[Column] = &[
    NAME,
    column("Reference", "string", "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.", 0, reference),
    column("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).", 0, targets),
    column("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.", 0, |o, _| match o.pointer("/spec/minReplicas").and_then(Value::as_i64) {
        Some(n) => Value::String(n.to_string()),
        None => json!("<unset>"),
    }),
    column("MaxPods", "string", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.", 0, |o, _| json!(print::int_at(o, "/spec/maxReplicas"))),
    column("Replicas", "string", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.", 0, |o, _| json!(print::int_at(o, "/status/currentReplicas"))),
    AGE,
];

fn reference(obj: &Value, _: &PrintContext) -> Value {
    let r = obj.pointer("/spec/scaleTargetRef");
    Value::String(format!("{}/{}", s(r, "kind"), s(r, "name")))
}

/// One metric as kube's `formatHPAMetrics` prints it.
fn format_metric(spec: &Value, status: Option<&Value>) -> String {
    let ty = s(Some(spec), "type");
    let q = |v: Option<&Value>, k: &str| -> String {
        v.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or("<nil>")
            .to_string()
    };
    let unknown = || "<unknown>".to_string();
    match ty {
        "External" | "Object" => {
            let key = if ty == "External" {
                "external"
            } else {
                "object"
            };
            let target = spec.get(key).and_then(|x| x.get("target"));
            let current = status
                .and_then(|x| x.get(key))
                .and_then(|x| x.get("current"));
            if target.and_then(|t| t.get("averageValue")).is_some() {
                let cur = current
                    .and_then(|c| c.get("averageValue"))
                    .map_or_else(unknown, |_| q(current, "averageValue"));
                format!("{cur}/{} (avg)", q(target, "averageValue"))
            } else {
                let cur = current.map_or_else(unknown, |_| q(current, "value"));
                format!("{cur}/{}", q(target, "value"))
            }
        }
        "Pods" => {
            let target = spec.get("pods").and_then(|x| x.get("target"));
            let current = status
                .and_then(|x| x.get("pods"))
                .and_then(|x| x.get("current"));
            let cur = current.map_or_else(unknown, |_| q(current, "averageValue"));
            format!("{cur}/{}", q(target, "averageValue"))
        }
        "Resource" | "ContainerResource" => {
            let key = if ty == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let src = spec.get(key);
            let name = s(src, "name");
            let target = src.and_then(|x| x.get("target"));
            let current = status
                .and_then(|x| x.get(key))
                .and_then(|x| x.get("current"));
            if target.and_then(|t| t.get("averageValue")).is_some() {
                let cur = current.map_or_else(unknown, |_| q(current, "averageValue"));
                format!("{name}: {cur}/{}", q(target, "averageValue"))
            } else {
                let cur =
                    int(current, "averageUtilization").map_or_else(unknown, |u| format!("{u}%"));
                let tgt = int(target, "averageUtilization")
                    .map_or("<auto>".to_string(), |u| format!("{u}%"));
                format!("{name}: {cur}/{tgt}")
            }
        }
        _ => "<unknown type>".to_string(),
    }
}

fn targets(obj: &Value, _: &PrintContext) -> Value {
    let specs = obj.pointer("/spec/metrics").and_then(Value::as_array);
    let Some(specs) = specs.filter(|s| !s.is_empty()) else {
        return json!("<none>");
    };
    let statuses = obj
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array);
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, m)| format_metric(m, statuses.and_then(|st| st.get(i))))
        .collect();
    if list.len() > 2 {
        Value::String(format!(
            "{} + {} more...",
            list[..2].join(", "),
            list.len() - 2
        ))
    } else {
        Value::String(list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn defaults_fill_v2_values() {
        let mut hpa = json!({"spec": {"maxReplicas": 5, "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
        defaults(&mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleDown"],
            json!({"stabilizationWindowSeconds": 60,
            "selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleUp"]["policies"][0]["value"],
            4
        );
        assert!(msgs(&hpa).is_empty(), "{:?}", msgs(&hpa));
        let again = hpa.clone();
        defaults(&mut hpa);
        assert_eq!(hpa, again);
    }

    #[test]
    fn validation() {
        let bad = json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "scaleTargetRef": {"name": "web"},
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]}});
        assert_eq!(msgs(&bad), vec![
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
            "spec.scaleTargetRef.kind: Required value",
            "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization",
        ]);
    }

    #[test]
    fn columns() {
        let ctx = PrintContext { now: 0 };
        let hpa = json!({"spec": {"minReplicas": 1, "maxReplicas": 5, "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Pods", "pods": {"target": {"averageValue": "1k"}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        let cells: Vec<Value> = COLUMNS
            .iter()
            .filter(|c| c.name != "Age" && c.name != "Name")
            .map(|c| (c.cell)(&hpa, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("Deployment/web"),
                json!("cpu: 12%/80%, <unknown>/1k"),
                json!("1"),
                json!(5),
                json!(2)
            ]
        );
    }
}

//! HorizontalPodAutoscalers, stored as autoscaling/v2 and served as v2 and
//! v1: kube's v2 defaults (min replicas, the CPU metric, scaling behavior),
//! the main checks of `ValidateHorizontalPodAutoscaler`, the printer, and
//! the v1 <-> v2 conversion (pkg/apis/autoscaling/v1/conversion.go), which
//! keeps what v1 cannot express in `autoscaling.alpha.kubernetes.io/*`
//! annotations.

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_field, object_mut};
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::{Conversion, KindRules};
use crate::validation as v;
use crate::StatusCause;

pub static HORIZONTAL_POD_AUTOSCALER: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

/// The autoscaling/v1 row: v1's own default (`minReplicas`), validation of
/// the object as kube runs it (on the converted object, so errors name the
/// v2 fields, e.g. `spec.metrics[0].resource.target.averageUtilization`),
/// and kube's one printer, fed the v2 form.
pub static HORIZONTAL_POD_AUTOSCALER_V1: KindRules = KindRules {
    defaults: Some(defaults_v1),
    prepare_update: Some(prepare_update_v1),
    validate: Some(validate_v1),
    columns: COLUMNS_V1,
    ..KindRules::NONE
};

/// Both versions are stored as autoscaling/v2.
pub static HORIZONTAL_POD_AUTOSCALER_CONVERSION: Conversion = Conversion {
    storage_version: V2,
    convert,
};

const V1: &str = "autoscaling/v1";
const V2: &str = "autoscaling/v2";

/// `autoscaling.MetricSpecsAnnotation`: the v2 metrics other than a CPU
/// utilization target, as a JSON list of autoscaling/v1 `MetricSpec`s.
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `autoscaling.MetricStatusesAnnotation`: every current metric, as
/// autoscaling/v1 `MetricStatus`es.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `autoscaling.HorizontalPodAutoscalerConditionsAnnotation`.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `autoscaling.BehaviorSpecsAnnotation`: the behavior, serialised as kube's
/// internal type (Go field names).
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";

const ROUND_TRIP: [&str; 4] = [
    METRIC_SPECS_ANNOTATION,
    METRIC_STATUSES_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];

/// v1's `SetDefaults_HorizontalPodAutoscaler`: only `minReplicas` (the CPU
/// default needs the annotations and is applied by the conversion).
fn defaults_v1(obj: &mut Value) {
    if let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) {
        default_field(spec, "minReplicas", json!(1));
    }
}

/// kube's `PrepareForUpdate` runs on the converted object: the status is
/// the stored one and the generation moves when the v2 spec changed. In v1
/// form part of both lives in annotations, so this carries the status
/// annotations over from the stored object (the generic step keeps the
/// `status` field) and compares the specs as v2 has them (a change of the
/// metrics or behavior annotation alone is a spec change).
fn prepare_update_v1(new: &mut Value, old: &Value) {
    let old_ann = annotations(old);
    let mut ann = annotations(new);
    for k in [METRIC_STATUSES_ANNOTATION, CONDITIONS_ANNOTATION] {
        match old_ann.get(k) {
            Some(v) => ann.insert(k.to_string(), v.clone()),
            None => ann.remove(k),
        };
    }
    if let Some(o) = new.as_object_mut() {
        set_annotations(o, ann);
    }
    let Some(g) = old.pointer("/metadata/generation").and_then(Value::as_i64) else {
        return;
    };
    let changed = convert(old, V2).get("spec") != convert(new, V2).get("spec");
    if let Some(meta) = new.pointer_mut("/metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(g + i64::from(changed)));
    }
}

fn validate_v1(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let old = old.map(to_v2);
    validate(&to_v2(obj), old.as_ref())
}

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
// Conversion between autoscaling/v1 and the stored autoscaling/v2.

fn convert(obj: &Value, to: &str) -> Value {
    let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    match (from, to) {
        (V1, V2) => {
            // Stored objects carry v2's defaults, as kube's decoder would
            // apply them on every read.
            let mut out = to_v2(obj);
            defaults(&mut out);
            out
        }
        (V2, V1) => to_v1(obj),
        _ => {
            let mut out = obj.clone();
            if let Some(m) = out.as_object_mut() {
                m.insert("apiVersion".into(), json!(to));
            }
            out
        }
    }
}

/// The value under `k` when present and not null.
fn get<'a>(v: Option<&'a Value>, k: &str) -> Option<&'a Value> {
    v.and_then(|x| x.get(k)).filter(|x| !x.is_null())
}

/// Copies a present value.
fn put(m: &mut Map<String, Value>, k: &str, v: Option<&Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        m.insert(k.to_string(), v.clone());
    }
}

/// A Go `resource.Quantity` field without `omitempty`: its zero value is
/// written as "0".
fn quantity(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| json!("0"))
}

fn array(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A v2 metric that v1's `targetCPUUtilizationPercentage` expresses.
fn is_cpu_utilization(m: &Value) -> bool {
    s(Some(m), "type") == "Resource"
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        && get(m.pointer("/resource/target"), "averageUtilization").is_some()
}

fn cpu_utilization_metric(u: &Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": u}}})
}

/// The metric sources of a `MetricSpec`/`MetricStatus`, in Go field order.
const SOURCE_KEYS: [&str; 5] = [
    "object",
    "pods",
    "resource",
    "containerResource",
    "external",
];

/// Converts every source present (kube's generated conversion converts
/// each non-nil pointer, whatever `type` says).
fn each_source(m: &Value, f: fn(&str, &Value) -> Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!(s(Some(m), "type")));
    for key in SOURCE_KEYS {
        if let Some(src) = get(Some(m), key) {
            out.insert(key.into(), f(key, src));
        }
    }
    Value::Object(out)
}

/// v2 `MetricIdentifier` parts as v1 keeps them (`metricName` is always
/// written).
fn v1_identifier(o: &mut Map<String, Value>, id: Option<&Value>, selector_key: &str) {
    o.insert("metricName".into(), json!(s(id, "name")));
    put(o, selector_key, get(id, "selector"));
}

fn v2_identifier(src: &Value, selector_key: &str) -> Value {
    let mut id = Map::new();
    id.insert("name".into(), json!(s(Some(src), "metricName")));
    put(&mut id, "selector", get(Some(src), selector_key));
    Value::Object(id)
}

/// v1's `CrossVersionObjectReference` is not optional in its metric types.
fn object_ref(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| json!({"kind": "", "name": ""}))
}

/// A v2 `MetricSpec` source as autoscaling/v1's `MetricSpec` has it.
fn spec_source_to_v1(key: &str, src: &Value) -> Value {
    let t = get(Some(src), "target");
    let id = get(Some(src), "metric");
    let mut o = Map::new();
    match key {
        "object" => {
            o.insert(
                "target".into(),
                object_ref(get(Some(src), "describedObject")),
            );
            o.insert("metricName".into(), json!(s(id, "name")));
            o.insert("targetValue".into(), quantity(get(t, "value")));
            put(&mut o, "selector", get(id, "selector"));
            put(&mut o, "averageValue", get(t, "averageValue"));
        }
        "pods" => {
            o.insert("metricName".into(), json!(s(id, "name")));
            o.insert(
                "targetAverageValue".into(),
                quantity(get(t, "averageValue")),
            );
            put(&mut o, "selector", get(id, "selector"));
        }
        "resource" | "containerResource" => {
            o.insert("name".into(), json!(s(Some(src), "name")));
            put(
                &mut o,
                "targetAverageUtilization",
                get(t, "averageUtilization"),
            );
            put(&mut o, "targetAverageValue", get(t, "averageValue"));
            if key == "containerResource" {
                o.insert("container".into(), json!(s(Some(src), "container")));
            }
        }
        _ => {
            v1_identifier(&mut o, id, "metricSelector");
            put(&mut o, "targetValue", get(t, "value"));
            put(&mut o, "targetAverageValue", get(t, "averageValue"));
        }
    }
    Value::Object(o)
}

/// An autoscaling/v1 `MetricSpec` source as v2 has it.
fn spec_source_to_v2(key: &str, src: &Value) -> Value {
    let q = |k: &str| get(Some(src), k);
    match key {
        "object" => {
            let ty = if q("averageValue").is_some() {
                "AverageValue"
            } else {
                "Value"
            };
            let mut t = Map::new();
            t.insert("type".into(), json!(ty));
            t.insert("value".into(), quantity(q("targetValue")));
            put(&mut t, "averageValue", q("averageValue"));
            json!({"describedObject": object_ref(q("target")), "target": t,
                "metric": v2_identifier(src, "selector")})
        }
        "pods" => json!({"metric": v2_identifier(src, "selector"),
            "target": {"type": "AverageValue", "averageValue": quantity(q("targetAverageValue"))}}),
        "resource" | "containerResource" => {
            let util = q("targetAverageUtilization");
            let mut t = Map::new();
            let ty = if util.is_some() {
                "Utilization"
            } else {
                "AverageValue"
            };
            t.insert("type".into(), json!(ty));
            put(&mut t, "averageValue", q("targetAverageValue"));
            put(&mut t, "averageUtilization", util);
            let mut o = Map::new();
            o.insert("name".into(), json!(s(Some(src), "name")));
            o.insert("target".into(), Value::Object(t));
            if key == "containerResource" {
                o.insert("container".into(), json!(s(Some(src), "container")));
            }
            Value::Object(o)
        }
        _ => {
            let value = q("targetValue");
            let mut t = Map::new();
            let ty = if value.is_some() {
                "Value"
            } else {
                "AverageValue"
            };
            t.insert("type".into(), json!(ty));
            put(&mut t, "value", value);
            put(&mut t, "averageValue", q("targetAverageValue"));
            json!({"metric": v2_identifier(src, "metricSelector"), "target": t})
        }
    }
}

/// A v2 `MetricStatus` source as autoscaling/v1's `MetricStatus` has it.
fn status_source_to_v1(key: &str, src: &Value) -> Value {
    let c = get(Some(src), "current");
    let id = get(Some(src), "metric");
    let mut o = Map::new();
    match key {
        "object" => {
            o.insert(
                "target".into(),
                object_ref(get(Some(src), "describedObject")),
            );
            o.insert("metricName".into(), json!(s(id, "name")));
            o.insert("currentValue".into(), quantity(get(c, "value")));
            put(&mut o, "selector", get(id, "selector"));
            put(&mut o, "averageValue", get(c, "averageValue"));
        }
        "pods" => {
            o.insert("metricName".into(), json!(s(id, "name")));
            o.insert(
                "currentAverageValue".into(),
                quantity(get(c, "averageValue")),
            );
            put(&mut o, "selector", get(id, "selector"));
        }
        "resource" | "containerResource" => {
            o.insert("name".into(), json!(s(Some(src), "name")));
            put(
                &mut o,
                "currentAverageUtilization",
                get(c, "averageUtilization"),
            );
            o.insert(
                "currentAverageValue".into(),
                quantity(get(c, "averageValue")),
            );
            if key == "containerResource" {
                o.insert("container".into(), json!(s(Some(src), "container")));
            }
        }
        _ => {
            v1_identifier(&mut o, id, "metricSelector");
            o.insert("currentValue".into(), quantity(get(c, "value")));
            put(&mut o, "currentAverageValue", get(c, "averageValue"));
        }
    }
    Value::Object(o)
}

/// An autoscaling/v1 `MetricStatus` source as v2 has it.
fn status_source_to_v2(key: &str, src: &Value) -> Value {
    let q = |k: &str| get(Some(src), k);
    match key {
        "object" => {
            let mut c = Map::new();
            c.insert("value".into(), quantity(q("currentValue")));
            put(&mut c, "averageValue", q("averageValue"));
            json!({"metric": v2_identifier(src, "selector"), "current": c,
                "describedObject": object_ref(q("target"))})
        }
        "pods" => json!({"metric": v2_identifier(src, "selector"),
            "current": {"averageValue": quantity(q("currentAverageValue"))}}),
        "resource" | "containerResource" => {
            let mut c = Map::new();
            c.insert("averageValue".into(), quantity(q("currentAverageValue")));
            put(&mut c, "averageUtilization", q("currentAverageUtilization"));
            let mut o = Map::new();
            o.insert("name".into(), json!(s(Some(src), "name")));
            o.insert("current".into(), Value::Object(c));
            if key == "containerResource" {
                o.insert("container".into(), json!(s(Some(src), "container")));
            }
            Value::Object(o)
        }
        _ => {
            let mut c = Map::new();
            c.insert("value".into(), quantity(q("currentValue")));
            put(&mut c, "averageValue", q("currentAverageValue"));
            json!({"metric": v2_identifier(src, "metricSelector"), "current": c})
        }
    }
}

/// v2 `spec.behavior` as kube writes it into the annotation: its internal
/// type, which has no JSON tags (Go field names, nil as null).
fn behavior_to_internal(b: &Value) -> Value {
    let rules = |key: &str| -> Value {
        let Some(r) = get(Some(b), key) else {
            return Value::Null;
        };
        let policies = get(Some(r), "policies")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        json!({"Type": s(Some(p), "type"),
                        "Value": int(Some(p), "value").unwrap_or(0),
                        "PeriodSeconds": int(Some(p), "periodSeconds").unwrap_or(0)})
                    })
                    .collect::<Vec<_>>()
            });
        json!({
            "StabilizationWindowSeconds": get(Some(r), "stabilizationWindowSeconds"),
            "SelectPolicy": get(Some(r), "selectPolicy"),
            "Policies": policies,
            "Tolerance": get(Some(r), "tolerance"),
        })
    };
    json!({"ScaleUp": rules("scaleUp"), "ScaleDown": rules("scaleDown")})
}

/// A field of a Go-encoded object: Go's decoder matches names without
/// regard to case.
fn go_field<'a>(v: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    v.and_then(Value::as_object)?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// The behavior annotation back as v2's `spec.behavior`; `None` when it
/// says nothing (kube ignores an empty behavior).
fn behavior_from_internal(b: &Value) -> Option<Value> {
    let rules = |key: &str| -> Option<Value> {
        let r = go_field(Some(b), key)?;
        let mut o = Map::new();
        put(
            &mut o,
            "stabilizationWindowSeconds",
            go_field(Some(r), "StabilizationWindowSeconds"),
        );
        put(&mut o, "selectPolicy", go_field(Some(r), "SelectPolicy"));
        if let Some(ps) = go_field(Some(r), "Policies").and_then(Value::as_array) {
            let ps: Vec<Value> = ps
                .iter()
                .map(|p| {
                    json!({"type": go_field(Some(p), "Type").cloned().unwrap_or(json!("")),
                        "value": go_field(Some(p), "Value").cloned().unwrap_or(json!(0)),
                        "periodSeconds": go_field(Some(p), "PeriodSeconds").cloned().unwrap_or(json!(0))})
                })
                .collect();
            o.insert("policies".into(), Value::Array(ps));
        }
        put(&mut o, "tolerance", go_field(Some(r), "Tolerance"));
        Some(Value::Object(o))
    };
    let mut out = Map::new();
    for (key, name) in [("scaleUp", "ScaleUp"), ("scaleDown", "ScaleDown")] {
        if let Some(r) = rules(name) {
            out.insert(key.into(), r);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Replaces `metadata.annotations` (dropped when empty, as Go's
/// `omitempty` does).
fn set_annotations(obj: &mut Map<String, Value>, ann: Map<String, Value>) {
    let Some(meta) = object_mut(obj, "metadata") else {
        return;
    };
    if ann.is_empty() {
        meta.remove("annotations");
    } else {
        meta.insert("annotations".into(), Value::Object(ann));
    }
}

fn annotations(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// kube's `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_...`: the CPU
/// utilization target and current value in v1's fields, everything else
/// (other metrics, all current metrics, behavior, conditions) in the
/// round-trip annotations, replacing any the stored object had.
pub fn to_v1(obj: &Value) -> Value {
    let mut out = obj.as_object().cloned().unwrap_or_default();
    out.insert("apiVersion".into(), json!(V1));
    let spec = get(Some(obj), "spec");
    let status = get(Some(obj), "status");
    let metrics = array(get(spec, "metrics"));
    let current = array(get(status, "currentMetrics"));
    let conditions = array(get(status, "conditions"));

    let mut ann = annotations(obj);
    for k in ROUND_TRIP {
        ann.remove(k);
    }
    let json_string = |v: &Value| Value::String(v.to_string());
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(|m| each_source(m, spec_source_to_v1))
        .collect();
    if !other.is_empty() {
        ann.insert(
            METRIC_SPECS_ANNOTATION.into(),
            json_string(&Value::Array(other)),
        );
    }
    if !current.is_empty() {
        let statuses: Vec<Value> = current
            .iter()
            .map(|m| each_source(m, status_source_to_v1))
            .collect();
        ann.insert(
            METRIC_STATUSES_ANNOTATION.into(),
            json_string(&Value::Array(statuses)),
        );
    }
    if let Some(b) = get(spec, "behavior") {
        ann.insert(
            BEHAVIOR_ANNOTATION.into(),
            json_string(&behavior_to_internal(b)),
        );
    }
    if !conditions.is_empty() {
        ann.insert(
            CONDITIONS_ANNOTATION.into(),
            json_string(&Value::Array(conditions.to_vec())),
        );
    }
    set_annotations(&mut out, ann);

    if let Some(spec) = spec {
        let mut v1 = Map::new();
        put(&mut v1, "scaleTargetRef", get(Some(spec), "scaleTargetRef"));
        put(&mut v1, "minReplicas", get(Some(spec), "minReplicas"));
        v1.insert(
            "maxReplicas".into(),
            get(Some(spec), "maxReplicas").cloned().unwrap_or(json!(0)),
        );
        let cpu = metrics
            .iter()
            .find(|m| is_cpu_utilization(m))
            .and_then(|m| m.pointer("/resource/target/averageUtilization"));
        put(&mut v1, "targetCPUUtilizationPercentage", cpu);
        out.insert("spec".into(), Value::Object(v1));
    }
    if let Some(status) = status {
        let mut v1 = Map::new();
        put(
            &mut v1,
            "observedGeneration",
            get(Some(status), "observedGeneration"),
        );
        put(&mut v1, "lastScaleTime", get(Some(status), "lastScaleTime"));
        for k in ["currentReplicas", "desiredReplicas"] {
            v1.insert(k.into(), get(Some(status), k).cloned().unwrap_or(json!(0)));
        }
        // The last CPU resource metric with a utilization, as kube's loop.
        let cpu = current
            .iter()
            .rev()
            .filter(|m| {
                s(Some(m), "type") == "Resource"
                    && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
            })
            .filter_map(|m| get(m.pointer("/resource/current"), "averageUtilization"))
            .next();
        put(&mut v1, "currentCPUUtilizationPercentage", cpu);
        out.insert("status".into(), Value::Object(v1));
    }
    Value::Object(out)
}

/// kube's `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_...`: the
/// annotated metrics first, then the CPU target; CPU 80% utilization when
/// that leaves no metric; behavior, current metrics and conditions from
/// their annotations (unreadable annotations are ignored); the round-trip
/// annotations dropped. v2's defaults are not applied here.
pub fn to_v2(obj: &Value) -> Value {
    let mut out = obj.as_object().cloned().unwrap_or_default();
    out.insert("apiVersion".into(), json!(V2));
    let mut ann = annotations(obj);
    let parsed = |k: &str| -> Option<Value> {
        let text = ann.get(k)?.as_str()?;
        serde_json::from_str(text).ok()
    };
    let spec = get(Some(obj), "spec");
    let status = get(Some(obj), "status");

    let mut v2 = Map::new();
    put(&mut v2, "scaleTargetRef", get(spec, "scaleTargetRef"));
    put(&mut v2, "minReplicas", get(spec, "minReplicas"));
    v2.insert(
        "maxReplicas".into(),
        get(spec, "maxReplicas").cloned().unwrap_or(json!(0)),
    );
    let mut metrics: Vec<Value> = parsed(METRIC_SPECS_ANNOTATION)
        .as_ref()
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| each_source(m, spec_source_to_v2))
                .collect()
        })
        .unwrap_or_default();
    if let Some(u) = get(spec, "targetCPUUtilizationPercentage") {
        metrics.push(cpu_utilization_metric(u));
    }
    if metrics.is_empty() {
        metrics.push(cpu_utilization_metric(&json!(80)));
    }
    v2.insert("metrics".into(), Value::Array(metrics));
    if let Some(b) = parsed(BEHAVIOR_ANNOTATION).and_then(|b| behavior_from_internal(&b)) {
        v2.insert("behavior".into(), b);
    }
    out.insert("spec".into(), Value::Object(v2));

    let current = parsed(METRIC_STATUSES_ANNOTATION)
        .filter(Value::is_array)
        .map(|ms| {
            Value::Array(
                array(Some(&ms))
                    .iter()
                    .map(|m| each_source(m, status_source_to_v2))
                    .collect(),
            )
        });
    let conditions = parsed(CONDITIONS_ANNOTATION).filter(Value::is_array);
    if status.is_some() || current.is_some() || conditions.is_some() {
        let mut v2 = Map::new();
        put(
            &mut v2,
            "observedGeneration",
            get(status, "observedGeneration"),
        );
        put(&mut v2, "lastScaleTime", get(status, "lastScaleTime"));
        put(&mut v2, "currentReplicas", get(status, "currentReplicas"));
        v2.insert(
            "desiredReplicas".into(),
            get(status, "desiredReplicas").cloned().unwrap_or(json!(0)),
        );
        // The annotation has more than v1's one number.
        let cpu = get(status, "currentCPUUtilizationPercentage").map(|u| {
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": u}}}])
        });
        put(&mut v2, "currentMetrics", current.as_ref().or(cpu.as_ref()));
        put(&mut v2, "conditions", conditions.as_ref());
        out.insert("status".into(), Value::Object(v2));
    }
    for k in ROUND_TRIP {
        ann.remove(k);
    }
    set_annotations(&mut out, ann);
    Value::Object(out)
}

// ---------------------------------------------------------------------------
// Printer.

const REFERENCE: Column = column("Reference", "string", "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.", 0, reference);
const TARGETS_DOC: &str = "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).";

const MIN_PODS: Column = column("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.", 0, |o, _| match o.pointer("/spec/minReplicas").and_then(Value::as_i64) {
    Some(n) => Value::String(n.to_string()),
    None => json!("<unset>"),
});
const MAX_PODS: Column = column("MaxPods", "string", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.", 0, |o, _| json!(print::int_at(o, "/spec/maxReplicas")));
const REPLICAS: Column = column("Replicas", "string", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.", 0, |o, _| json!(print::int_at(o, "/status/currentReplicas")));

const COLUMNS: &[Column] = &[
    NAME,
    REFERENCE,
    column("Targets", "string", TARGETS_DOC, 0, targets),
    MIN_PODS,
    MAX_PODS,
    REPLICAS,
    AGE,
];

/// kube prints both versions with one printer of the internal object. Every
/// column but Targets reads fields v1 and v2 share.
const COLUMNS_V1: &[Column] = &[
    NAME,
    REFERENCE,
    column("Targets", "string", TARGETS_DOC, 0, |o, ctx| {
        targets(&to_v2(o), ctx)
    }),
    MIN_PODS,
    MAX_PODS,
    REPLICAS,
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

    fn v2_hpa() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}},
            "status": {"currentReplicas": 3, "desiredReplicas": 4,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "250m", "averageUtilization": 42}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Ready"}]}})
    }

    #[test]
    fn v2_to_v1_keeps_the_rest_in_annotations() {
        let v1 = convert(&v2_hpa(), "autoscaling/v1");
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(
            v1["spec"],
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60})
        );
        assert_eq!(
            v1["status"],
            json!({"currentReplicas": 3, "desiredReplicas": 4, "currentCPUUtilizationPercentage": 42})
        );
        let ann = &v1["metadata"]["annotations"];
        assert_eq!(ann["team"], "a");
        assert_eq!(
            ann[METRIC_SPECS_ANNOTATION],
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
        );
        assert_eq!(
            ann[METRIC_STATUSES_ANNOTATION],
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":42,"currentAverageValue":"250m"}}]"#
        );
        assert_eq!(
            ann[BEHAVIOR_ANNOTATION],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":null}}"#
        );
        assert!(ann[CONDITIONS_ANNOTATION]
            .as_str()
            .unwrap()
            .contains(r#""type":"AbleToScale""#));
    }

    #[test]
    fn round_trip_through_v1_loses_nothing() {
        let mut stored = v2_hpa();
        defaults(&mut stored);
        let v1 = convert(&stored, "autoscaling/v1");
        let back = convert(&v1, "autoscaling/v2");
        assert_eq!(back, stored);
        // A client's v1 change of the CPU target keeps the memory metric.
        let mut edited = v1.clone();
        edited["spec"]["targetCPUUtilizationPercentage"] = json!(70);
        let back = convert(&edited, "autoscaling/v2");
        assert_eq!(
            back["spec"]["metrics"][0]["resource"]["target"],
            json!({"type": "AverageValue", "averageValue": "100Mi"})
        );
        assert_eq!(
            back["spec"]["metrics"][1]["resource"]["target"]["averageUtilization"],
            70
        );
        assert_eq!(back["metadata"]["annotations"], json!({"team": "a"}));
    }

    #[test]
    fn v1_to_v2_cpu_target_and_default() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                "targetCPUUtilizationPercentage": 50},
            "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 20}});
        let v2 = to_v2(&v1);
        assert_eq!(
            v2["spec"]["metrics"],
            json!([cpu_utilization_metric(&json!(50))])
        );
        assert_eq!(
            v2["status"]["currentMetrics"][0]["resource"]["current"],
            json!({"averageUtilization": 20})
        );
        assert!(v2["metadata"].get("annotations").is_none());
        assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());
        let mut bare = v1.clone();
        bare["spec"]
            .as_object_mut()
            .unwrap()
            .remove("targetCPUUtilizationPercentage");
        let out = convert(&bare, "autoscaling/v2");
        assert_eq!(
            out["spec"]["metrics"],
            json!([cpu_utilization_metric(&json!(80))])
        );
        assert_eq!(out["spec"]["minReplicas"], 1);
    }

    #[test]
    fn other_metric_kinds_convert_both_ways() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 3, "metrics": [
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                    "target": {"type": "Value", "value": "10"}, "metric": {"name": "hits"}}},
                {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                    "target": {"type": "AverageValue", "averageValue": "30"}}},
                {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
        let v1 = to_v1(&v2);
        assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
        let specs: Value = serde_json::from_str(
            v1["metadata"]["annotations"][METRIC_SPECS_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            specs[0],
            json!({"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "1k"}})
        );
        assert_eq!(
            specs[2],
            json!({"type": "External", "external": {"metricName": "queue",
                "metricSelector": {"matchLabels": {"q": "a"}}, "targetAverageValue": "30"}})
        );
        assert_eq!(to_v2(&v1), v2);
    }

    #[test]
    fn v1_writes_are_validated_as_v2() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 3,
                "targetCPUUtilizationPercentage": 0}});
        let msgs: Vec<String> = validate_v1(&v1, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(
            msgs,
            vec!["spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"]
        );
    }

    #[test]
    fn v1_columns_print_the_converted_object() {
        let ctx = PrintContext { now: 0 };
        let v1 = to_v1(&v2_hpa());
        let cells: Vec<Value> = COLUMNS_V1
            .iter()
            .filter(|c| c.name != "Age" && c.name != "Name")
            .map(|c| (c.cell)(&v1, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("Deployment/web"),
                // kube pairs specs and statuses by position.
                json!("memory: 250m/100Mi, cpu: <unknown>/60%"),
                json!("2"),
                json!(5),
                json!(3)
            ]
        );
    }

    #[test]
    fn v1_updates_keep_the_status_and_count_annotated_spec_changes() {
        let mut stored = v2_hpa();
        defaults(&mut stored);
        stored["metadata"]["generation"] = json!(3);
        let old = to_v1(&stored);
        // A client's object without the round-trip annotations.
        let mut new = old.clone();
        new["metadata"]["annotations"] = json!({"team": "a"});
        new["metadata"]["generation"] = json!(3);
        prepare_update_v1(&mut new, &old);
        let back = convert(&new, "autoscaling/v2");
        assert_eq!(back["status"], stored["status"]);
        // The memory metric went with its annotation: a spec change.
        assert_eq!(new["metadata"]["generation"], 4);
        let mut same = old.clone();
        prepare_update_v1(&mut same, &old);
        assert_eq!(same["metadata"]["generation"], 3);
    }
}

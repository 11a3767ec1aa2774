//! What the workload kinds share: label selectors (kube's
//! `ValidateLabelSelector`, matching, Go's `%#v` of a selector as messages
//! show it), the selector-against-template check, pod template defaults,
//! and the Containers/Images/Selector printer cells.

use serde_json::json;
use serde_json::{Map, Value};

use super::podspec_defaults::default_pod_spec;
use crate::kinds::common::existing_mut;
use crate::kinds::print::{label_selector, PrintContext};
use crate::status::StatusCause;
use crate::validation::{
    forbidden, go_quote, go_string_map, invalid, invalid_rendered, is_qualified_name,
    is_valid_label_value, required, validate_labels,
};

/// kube's description of the Containers column.
pub const CONTAINERS_DESCRIPTION: &str = "Names of each container in the template.";
/// kube's description of the Images column.
pub const IMAGES_DESCRIPTION: &str = "Images referenced by each container in the template.";

/// The `-o wide` Containers column of every workload printer.
pub const CONTAINERS: crate::kinds::print::Column = crate::kinds::print::Column {
    name: "Containers",
    type_: "string",
    format: "",
    description: CONTAINERS_DESCRIPTION,
    priority: 1,
    cell: tpl_containers,
};

/// The `-o wide` Images column of every workload printer.
pub const IMAGES: crate::kinds::print::Column = crate::kinds::print::Column {
    name: "Images",
    type_: "string",
    format: "",
    description: IMAGES_DESCRIPTION,
    priority: 1,
    cell: tpl_images,
};

/// Defaults the pod spec of the template under `key` of `spec` (e.g. a
/// Deployment's `spec.template`).
pub fn default_template(spec: &mut Map<String, Value>, key: &str) {
    if let Some(tpl) = existing_mut(spec, key) {
        if let Some(ps) = existing_mut(tpl, "spec") {
            default_pod_spec(ps, false);
        }
    }
}

/// kube's `ValidateLabelSelector` of the selector at `path`; true when it
/// is a valid selector (`LabelSelectorAsSelector` would succeed).
pub fn validate_selector(sel: &Value, path: &str, out: &mut Vec<StatusCause>) -> bool {
    let before = out.len();
    if let Some(ml) = sel.get("matchLabels") {
        out.extend(validate_labels(ml, &format!("{path}.matchLabels")));
    }
    let exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, e) in exprs.iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    out.push(required(
                        &format!("{p}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    out.push(forbidden(
                        &format!("{p}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            op => out.push(invalid(
                &format!("{p}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for msg in is_qualified_name(key) {
            out.push(invalid(&format!("{p}.key"), key, &msg));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for msg in is_valid_label_value(v) {
                out.push(invalid(&format!("{p}.values[{j}]"), v, &msg));
            }
        }
    }
    out.len() == before
}

/// Whether a selector has no requirement at all (kube's `selector.Empty()`
/// after conversion: it selects everything).
pub fn selector_is_empty(sel: &Value) -> bool {
    let n = |k: &str| match sel.get(k) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    };
    n("matchLabels") + n("matchExpressions") == 0
}

/// Whether a (valid) selector matches a label map.
pub fn selector_matches(sel: &Value, labels: Option<&Value>) -> bool {
    let labels = labels.and_then(Value::as_object);
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            if get(k) != v.as_str() {
                return false;
            }
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let has = |x: &str| {
            e.get("values")
                .and_then(Value::as_array)
                .is_some_and(|vs| vs.iter().any(|v| v.as_str() == Some(x)))
        };
        let ok = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => get(key).is_some_and(has),
            "NotIn" => !get(key).is_some_and(has),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// A `metav1.LabelSelector` as kube's field errors print a bad value:
/// `json.Marshal` of it (`{"matchLabels":{"a":"1"}}`, empty parts left
/// out, map keys sorted).
pub fn go_label_selector(sel: &Value) -> String {
    let mut out = serde_json::Map::new();
    if let Some(m) = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        let sorted: std::collections::BTreeMap<&String, &Value> = m.iter().collect();
        out.insert("matchLabels".into(), json!(sorted));
    }
    if let Some(exprs) = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let exprs: Vec<Value> = exprs
            .iter()
            .map(|e| {
                let mut r = serde_json::Map::new();
                r.insert("key".into(), e.get("key").cloned().unwrap_or(json!("")));
                r.insert(
                    "operator".into(),
                    e.get("operator").cloned().unwrap_or(json!("")),
                );
                if let Some(v) = e
                    .get("values")
                    .and_then(Value::as_array)
                    .filter(|v| !v.is_empty())
                {
                    r.insert("values".into(), Value::Array(v.clone()));
                }
                Value::Object(r)
            })
            .collect();
        out.insert("matchExpressions".into(), Value::Array(exprs));
    }
    crate::validation::go_json(&Value::Object(out))
}

/// Status counters that must not be negative (kube's status validation of
/// the workload kinds), then the counters that may not exceed another:
/// `(field, limit field, message)`.
pub fn validate_status_counts(
    obj: &Value,
    nonneg: &[&str],
    at_most: &[(&str, &str, &str)],
) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let status = obj.get("status").unwrap_or(&Value::Null);
    for f in nonneg {
        crate::validation::nonnegative(&format!("status.{f}"), status.get(*f), &mut out);
    }
    let n = |f: &str| status.get(f).and_then(Value::as_i64).unwrap_or(0);
    for (f, limit, msg) in at_most {
        if n(f) > n(limit) {
            out.push(crate::validation::invalid_json(
                &format!("status.{f}"),
                &Value::from(n(f)),
                msg,
            ));
        }
    }
    out
}

/// A controller's validation: `validate_object`'s causes, and on update
/// the selector's immutability.
pub fn validate_controller(
    obj: &Value,
    old: Option<&Value>,
    validate_object: fn(&Value) -> Vec<StatusCause>,
) -> Vec<StatusCause> {
    let mut out = validate_object(obj);
    if let Some(old) = old {
        out.extend(selector_immutable(obj, old));
    }
    out
}

/// kube's `ValidateImmutableField` of `spec.selector` (Deployments,
/// ReplicaSets, DaemonSets): `Invalid value: {"matchLabels":...}: field is
/// immutable`, the selector printed as kube marshals it.
pub fn selector_immutable(new: &Value, old: &Value) -> Option<StatusCause> {
    let (n, o) = (new.pointer("/spec/selector"), old.pointer("/spec/selector"));
    if n == o {
        return None;
    }
    let shown = match n.filter(|s| !s.is_null()) {
        Some(sel) => go_label_selector(sel),
        None => "null".to_string(),
    };
    Some(invalid_rendered(
        "spec.selector",
        &shown,
        "field is immutable",
    ))
}

/// An `intstr.IntOrString` as kube's field errors print a bad value
/// (`json.Marshal`, which writes the int or the quoted string).
pub fn go_intstr(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        other => other.as_i64().unwrap_or(0).to_string(),
    }
}

/// An int-or-percent's value: the number before `%`, or the integer
/// (kube's `getIntOrPercentValue`), and whether it is a percent.
pub fn intstr_value(v: &Value) -> (i64, bool) {
    match v {
        Value::String(s) => match s.strip_suffix('%').map(str::parse::<i64>) {
            Some(Ok(n)) => (n, true),
            _ => (s.parse().unwrap_or(0), false),
        },
        other => (other.as_i64().unwrap_or(0), false),
    }
}

/// kube's `ValidatePositiveIntOrPercent`.
pub fn validate_int_or_percent(v: &Value, field: &str, out: &mut Vec<StatusCause>) {
    match v {
        Value::String(s) => {
            let ok = s
                .strip_suffix('%')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !ok {
                out.push(invalid_rendered(
                    field,
                    &go_intstr(v),
                    &crate::validation::regex_error(
                        "a valid percent string must be a numeric string followed by an ending '%'",
                        "[0-9]+%",
                        &["1%", "93%"],
                    ),
                ));
            }
        }
        other => crate::validation::nonnegative(field, Some(other), out),
    }
}

/// kube's `IsNotMoreThan100Percent`.
pub fn not_more_than_100_percent(v: &Value, field: &str, out: &mut Vec<StatusCause>) {
    let (n, percent) = intstr_value(v);
    if percent && n > 100 {
        out.push(invalid_rendered(
            field,
            &go_intstr(v),
            "must not be greater than 100%",
        ));
    }
}

/// The selector checks of Deployments, ReplicaSets and StatefulSets:
/// required, valid, not empty (`empty selector is invalid for <kind>`), and
/// matching the template's labels. `spec_path` is e.g. `spec`;
/// `invalid_detail` what kube adds when the selector does not convert.
pub fn validate_selector_and_template(
    spec: &Value,
    spec_path: &str,
    kind: &str,
    invalid_detail: &str,
    out: &mut Vec<StatusCause>,
) {
    let sel_path = format!("{spec_path}.selector");
    let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) else {
        out.push(required(&sel_path, ""));
        // No selector converts to kube's `Nothing`, which no labels match.
        out.push(invalid_rendered(
            &format!("{spec_path}.template.metadata.labels"),
            &go_string_map(spec.pointer("/template/metadata/labels")),
            "`selector` does not match template `labels`",
        ));
        return;
    };
    let valid = validate_selector(sel, &sel_path, out);
    if selector_is_empty(sel) {
        out.push(invalid_rendered(
            &sel_path,
            &go_label_selector(sel),
            &format!("empty selector is invalid for {kind}"),
        ));
    }
    if !valid {
        out.push(invalid_rendered(
            &sel_path,
            &go_label_selector(sel),
            invalid_detail,
        ));
        return;
    }
    template_matches(spec, sel, spec_path, out);
}

/// `selector` does not match template `labels` (skipped for an empty
/// selector, as kube does).
pub fn template_matches(spec: &Value, sel: &Value, spec_path: &str, out: &mut Vec<StatusCause>) {
    let labels = spec.pointer("/template/metadata/labels");
    if !selector_is_empty(sel) && !selector_matches(sel, labels) {
        out.push(invalid_rendered(
            &format!("{spec_path}.template.metadata.labels"),
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
}

/// The template's `restartPolicy` must be `Always` and it may not set
/// `activeDeadlineSeconds` (ReplicaSets, Deployments, StatefulSets...).
/// `kind_name` is kube's spelling in the message (`ReplicaSet`).
pub fn template_runs_forever(
    spec: &Value,
    spec_path: &str,
    kind_name: &str,
    out: &mut Vec<StatusCause>,
) {
    let Some(ps) = spec.pointer("/template/spec") else {
        return;
    };
    let rp = ps
        .get("restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if rp != "Always" {
        out.push(crate::validation::not_supported(
            &format!("{spec_path}.template.spec.restartPolicy"),
            rp,
            &["Always"],
        ));
    }
    if ps
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        out.push(forbidden(
            &format!("{spec_path}.template.spec.activeDeadlineSeconds"),
            &format!("activeDeadlineSeconds in {kind_name} is not Supported"),
        ));
    }
}

/// `a,b` of the template's container names (`layoutContainerCells`).
pub fn container_names(obj: &Value, pod_spec: &str) -> Value {
    join_containers(obj, pod_spec, "name")
}

/// `a,b` of the template's container images.
pub fn container_images(obj: &Value, pod_spec: &str) -> Value {
    join_containers(obj, pod_spec, "image")
}

fn join_containers(obj: &Value, pod_spec: &str, key: &str) -> Value {
    let mut out = String::new();
    if let Some(cs) = obj
        .pointer(pod_spec)
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
    {
        for (i, c) in cs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(c.get(key).and_then(Value::as_str).unwrap_or(""));
        }
    }
    Value::String(out)
}

/// The Selector cell of a `LabelSelector`: `LabelSelectorAsSelector`'s
/// string, requirements sorted by key and values sorted (empty for no
/// selector).
pub fn selector_cell(obj: &Value, pointer: &str) -> Value {
    let Some(sel) = obj.pointer(pointer).filter(|s| !s.is_null()) else {
        return Value::String(String::new());
    };
    let mut reqs: Vec<(&str, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            reqs.push((k, format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        values.dedup();
        let text = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return Value::String(label_selector(Some(sel))),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = reqs.into_iter().map(|(_, t)| t).collect();
    Value::String(parts.join(","))
}

/// `ready/desired` cells.
pub fn ratio(obj: &Value, num: &str, den: &str) -> Value {
    Value::String(format!(
        "{}/{}",
        crate::kinds::print::int_at(obj, num),
        crate::kinds::print::int_at(obj, den)
    ))
}

/// A column cell of the integer at `pointer` (0 when absent).
pub fn int_cell(obj: &Value, pointer: &str) -> Value {
    Value::from(crate::kinds::print::int_at(obj, pointer))
}

/// Containers/Images cells of a template at `/spec/template/spec`.
pub fn tpl_containers(obj: &Value, _: &PrintContext) -> Value {
    container_names(obj, "/spec/template/spec")
}

/// See [`tpl_containers`].
pub fn tpl_images(obj: &Value, _: &PrintContext) -> Value {
    container_images(obj, "/spec/template/spec")
}

/// The Selector cell of `spec.selector`.
pub fn spec_selector(obj: &Value, _: &PrintContext) -> Value {
    selector_cell(obj, "/spec/selector")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selector_rules() {
        let mut out = Vec::new();
        let sel = json!({"matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Maybe"}]});
        assert!(!validate_selector(&sel, "spec.selector", &mut out));
        let msgs: Vec<String> = out.iter().map(crate::validation::cause_to_string).collect();
        assert_eq!(msgs, vec![
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Maybe\": not a valid selector operator",
        ]);
    }

    #[test]
    fn matching_and_go_rendering() {
        let sel = json!({"matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]});
        assert!(selector_matches(&sel, Some(&json!({"app": "x"}))));
        assert!(!selector_matches(
            &sel,
            Some(&json!({"app": "x", "t": "a"}))
        ));
        assert!(!selector_matches(&sel, None));
        assert_eq!(
            go_label_selector(&json!({"matchLabels": {"b": "2", "a": "1"}})),
            "{\"matchLabels\":{\"a\":\"1\",\"b\":\"2\"}}"
        );
        assert_eq!(
            go_label_selector(&sel),
            "{\"matchLabels\":{\"app\":\"x\"},\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}"
        );
    }

    #[test]
    fn selector_cells_sort_like_kube() {
        let obj = json!({"spec": {"selector": {"matchLabels": {"b": "1"},
            "matchExpressions": [{"key": "a", "operator": "In", "values": ["y", "x"]},
                                 {"key": "c", "operator": "DoesNotExist"}]}}});
        assert_eq!(
            selector_cell(&obj, "/spec/selector"),
            json!("a in (x,y),b=1,!c")
        );
        assert_eq!(selector_cell(&json!({}), "/spec/selector"), json!(""));
    }

    #[test]
    fn immutable_selector_message() {
        let old = json!({"spec": {"selector": {"matchLabels": {"app": "x"}}}});
        assert!(selector_immutable(&old, &old).is_none());
        let new = json!({"spec": {"selector": {"matchLabels": {"app": "y"}}}});
        assert_eq!(
            crate::validation::cause_to_string(&selector_immutable(&new, &old).unwrap()),
            "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"y\"}}: field is immutable"
        );
    }

    #[test]
    fn selector_and_template() {
        let mut out = Vec::new();
        let spec = json!({"selector": {"matchLabels": {"app": "y"}},
            "template": {"metadata": {"labels": {"app": "x"}}}});
        validate_selector_and_template(&spec, "spec", "deployment", "", &mut out);
        assert_eq!(
            crate::validation::cause_to_string(&out[0]),
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`"
        );
        out.clear();
        validate_selector_and_template(
            &json!({"selector": {}}),
            "spec",
            "deployment",
            "",
            &mut out,
        );
        assert_eq!(
            crate::validation::cause_to_string(&out[0]),
            "spec.selector: Invalid value: {}: empty selector is invalid for deployment"
        );
        out.clear();
        validate_selector_and_template(&json!({}), "spec", "deployment", "", &mut out);
        let msgs: Vec<String> = out.iter().map(crate::validation::cause_to_string).collect();
        assert_eq!(msgs, vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`",
        ]);
    }
}

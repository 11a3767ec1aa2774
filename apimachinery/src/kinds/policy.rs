//! policy/v1 PodDisruptionBudgets: `ValidatePodDisruptionBudget` and the
//! printer; also the label selector check (`ValidateLabelSelector`) the
//! kinds of this helper share.

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static POD_DISRUPTION_BUDGET: KindRules = KindRules {
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

/// kube's `ValidateLabelSelector` of a `LabelSelector` object at `path`.
pub(crate) fn validate_label_selector(sel: Option<&Value>, path: &str) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return errs;
    };
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let n = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        match op {
            "In" | "NotIn" if n == 0 => errs.push(v::required(
                &format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(v::forbidden(
                &format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errs.push(v::invalid(
                &format!("{p}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for msg in v::is_qualified_name(key) {
            errs.push(v::invalid(&format!("{p}.key"), key, &msg));
        }
    }
    if let Some(labels) = sel.get("matchLabels") {
        errs.extend(v::validate_labels(labels, &format!("{path}.matchLabels")));
    }
    errs
}

/// An int-or-percent as Go's `%#v` prints an `intstr.IntOrString`.
fn int_or_string_shown(val: &Value) -> String {
    match val {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            v::go_quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// kube's `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn int_or_percent(val: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    match val {
        Value::String(s) => {
            let digits = s.strip_suffix('%');
            let ok = digits.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            if !ok {
                errs.push(v::invalid_rendered(
                    path,
                    &int_or_string_shown(val),
                    &v::regex_error(
                        "a valid percent string must be a numeric string followed by an ending '%'",
                        "[0-9]+%",
                        &["1%", "93%"],
                    ),
                ));
            } else if digits
                .and_then(|d| d.parse::<u64>().ok())
                .is_some_and(|p| p > 100)
            {
                errs.push(v::invalid_rendered(
                    path,
                    &int_or_string_shown(val),
                    "must not be greater than 100%",
                ));
            }
        }
        other => {
            let n = other.as_i64().unwrap_or(0);
            if n < 0 {
                errs.push(v::invalid_json(
                    path,
                    &json!(n),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let get = |k: &str| spec.and_then(|s| s.get(k)).filter(|x| !x.is_null());
    let (min, max) = (get("minAvailable"), get("maxUnavailable"));
    if min.is_some() && max.is_some() {
        errs.push(v::invalid_rendered(
            "spec",
            "policy.PodDisruptionBudgetSpec{...}",
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    if let Some(m) = min {
        int_or_percent(m, "spec.minAvailable", &mut errs);
    }
    if let Some(m) = max {
        int_or_percent(m, "spec.maxUnavailable", &mut errs);
    }
    errs.extend(validate_label_selector(get("selector"), "spec.selector"));
    if let Some(p) = get("unhealthyPodEvictionPolicy").and_then(Value::as_str) {
        const POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];
        if !POLICIES.contains(&p) {
            errs.push(v::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                p,
                POLICIES,
            ));
        }
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
        0,
        |o, _| int_or_na(o, "/spec/minAvailable"),
    ),
    column(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
        0,
        |o, _| int_or_na(o, "/spec/maxUnavailable"),
    ),
    column(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
        0,
        allowed,
    ),
    AGE,
];

fn int_or_na(obj: &Value, pointer: &str) -> Value {
    match obj.pointer(pointer) {
        Some(Value::String(s)) => json!(s),
        Some(Value::Number(n)) => json!(n.to_string()),
        _ => json!("N/A"),
    }
}

fn allowed(obj: &Value, _: &PrintContext) -> Value {
    json!(print::int_at(obj, "/status/disruptionsAllowed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn validation_and_columns() {
        assert!(msgs(
            &json!({"spec": {"minAvailable": "50%", "selector": {"matchLabels": {"a": "b"}}}})
        )
        .is_empty());
        assert_eq!(
            msgs(&json!({"spec": {"maxUnavailable": -1, "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}})),
            vec![
                "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ]
        );
        assert_eq!(
            msgs(&json!({"spec": {"minAvailable": "150%"}})),
            vec!["spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"]
        );
        assert_eq!(
            msgs(&json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}})).len(),
            1
        );
        let ctx = PrintContext { now: 0 };
        let pdb = json!({"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}});
        assert_eq!((COLUMNS[1].cell)(&pdb, &ctx), json!("2"));
        assert_eq!((COLUMNS[2].cell)(&pdb, &ctx), json!("N/A"));
        assert_eq!((COLUMNS[3].cell)(&pdb, &ctx), json!(1));
    }
}

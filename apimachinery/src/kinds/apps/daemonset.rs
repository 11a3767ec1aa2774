//! DaemonSets (apps/v1): `SetDefaults_DaemonSet`, `ValidateDaemonSet` and
//! kube's printer.
//!
//! Not implemented: the update-time relaxation for selectors with invalid
//! label values, `templateGeneration` (gone from apps/v1). Selector
//! immutability is the registry's generic `immutable` list.

use serde_json::Value;

use crate::kinds::common::{default_field, object_mut};
use crate::kinds::core::podspec_defaults::default_str;
use crate::kinds::core::podspec_validation::validate_pod_template;
use crate::kinds::core::workload::{
    self, default_template, go_intstr, go_label_selector, int_cell, intstr_value,
    selector_is_empty, selector_matches, validate_int_or_percent, validate_selector,
};
use crate::kinds::print::{label_map, Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{
    go_string_map, invalid_rendered, nonnegative, not_supported_rendered, required,
};

macro_rules! status_column {
    ($name:expr, $doc:expr, $ptr:expr) => {
        Column {
            name: $name,
            type_: "integer",
            format: "",
            description: $doc,
            priority: 0,
            cell: |o, _| int_cell(o, $ptr),
        }
    };
}

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: &[
        NAME,
        status_column!("Desired", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/", "/status/desiredNumberScheduled"),
        status_column!("Current", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/", "/status/currentNumberScheduled"),
        status_column!("Ready", "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.", "/status/numberReady"),
        status_column!("Up-to-date", "The total number of nodes that are running updated daemon pod", "/status/updatedNumberScheduled"),
        status_column!("Available", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)", "/status/numberAvailable"),
        Column {
            name: "Node Selector",
            type_: "string",
            format: "",
            description: "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
            priority: 0,
            cell: |o, _| Value::String(label_map(o.pointer("/spec/template/spec/nodeSelector"))),
        },
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
        Column {
            name: "Selector",
            type_: "string",
            format: "",
            description: "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            priority: 1,
            cell: workload::spec_selector,
        },
    ],
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    if let Some(us) = object_mut(spec, "updateStrategy") {
        default_str(us, "type", "RollingUpdate");
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(ru) = object_mut(us, "rollingUpdate") {
                default_field(ru, "maxUnavailable", Value::from(1));
                default_field(ru, "maxSurge", Value::from(0));
            }
        }
    }
    default_field(spec, "revisionHistoryLimit", Value::from(10));
    default_template(spec, "template");
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    crate::kinds::core::workload::validate_controller(obj, old, validate_object)
}

fn validate_object(obj: &Value) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let sel = spec.get("selector").filter(|s| !s.is_null());
    let valid = sel.is_none_or(|s| validate_selector(s, "spec.selector", &mut out));
    let labels = spec.pointer("/template/metadata/labels");
    if valid && !sel.is_some_and(|s| selector_matches(s, labels)) {
        out.push(invalid_rendered(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
    if let Some(s) = sel.filter(|s| selector_is_empty(s)) {
        out.push(invalid_rendered(
            "spec.selector",
            &go_label_selector(s),
            "empty selector is invalid for daemonset",
        ));
    }
    validate_pod_template(
        spec.get("template").unwrap_or(&Value::Null),
        "spec.template",
        &mut out,
    );
    workload::template_runs_forever(spec, "spec", "DaemonSet", &mut out);
    nonnegative(
        "spec.minReadySeconds",
        spec.get("minReadySeconds"),
        &mut out,
    );
    validate_strategy(spec.get("updateStrategy").unwrap_or(&Value::Null), &mut out);
    nonnegative(
        "spec.revisionHistoryLimit",
        spec.get("revisionHistoryLimit"),
        &mut out,
    );
    out
}

fn validate_strategy(us: &Value, out: &mut Vec<StatusCause>) {
    let ru = us.get("rollingUpdate").filter(|v| !v.is_null());
    match us.get("type").and_then(Value::as_str).unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = ru else {
                out.push(required("spec.updateStrategy.rollingUpdate", ""));
                return;
            };
            let mu_path = "spec.updateStrategy.rollingUpdate.maxUnavailable";
            let ms_path = "spec.updateStrategy.rollingUpdate.maxSurge";
            let (mu, ms) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
            if let Some(v) = mu {
                validate_int_or_percent(v, mu_path, out);
            }
            if let Some(v) = ms {
                validate_int_or_percent(v, ms_path, out);
            }
            if let Some(v) = mu {
                workload::not_more_than_100_percent(v, mu_path, out);
            }
            if let Some(v) = ms {
                workload::not_more_than_100_percent(v, ms_path, out);
            }
            let nonzero = |v: Option<&Value>| v.is_some_and(|v| intstr_value(v).0 != 0);
            match (nonzero(mu), nonzero(ms)) {
                (true, true) => out.push(invalid_rendered(
                    ms_path,
                    &ms.map_or(String::new(), go_intstr),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => out.push(required(mu_path, "cannot be 0 when maxSurge is 0")),
                _ => {}
            }
        }
        other => {
            let ru_shown = if ru.is_some() {
                "(*apps.RollingUpdateDaemonSet)(0xc000000000)"
            } else {
                "(*apps.RollingUpdateDaemonSet)(nil)"
            };
            out.push(not_supported_rendered(
                "spec.updateStrategy",
                &format!(
                    "apps.DaemonSetUpdateStrategy{{Type:{}, RollingUpdate:{ru_shown}}}",
                    crate::validation::go_quote(other)
                ),
                &["RollingUpdate", "OnDelete"],
            ));
        }
    }
}

/// kube's `ValidateDaemonSetStatus`.
fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    workload::validate_status_counts(
        obj,
        &[
            "numberMisscheduled",
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberReady",
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
            "collisionCount",
        ],
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;
    use crate::validation::cause_to_string;
    use serde_json::json;

    fn ds() -> Value {
        json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                  "nodeSelector": {"kubernetes.io/os": "linux"}}}}})
    }

    #[test]
    fn defaults_validation_columns() {
        let mut d = ds();
        defaults(&mut d);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        let mut again = d.clone();
        defaults(&mut again);
        assert_eq!(again, d);
        assert!(validate(&d, None).is_empty(), "{:?}", validate(&d, None));
        d["spec"]["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": 1, "maxSurge": 1});
        d["spec"]["template"]["metadata"]["labels"] = json!({"app": "y"});
        let errs: Vec<String> = validate(&d, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.template.metadata.labels: Invalid value: {\"app\":\"y\"}: `selector` does not match template `labels`",
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero",
        ]);
        d["status"] = json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 2,
            "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1});
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = RULES.columns.iter().map(|c| (c.cell)(&d, &ctx)).collect();
        assert_eq!(
            cells[1..7],
            [
                json!(3),
                json!(2),
                json!(1),
                json!(2),
                json!(1),
                json!("kubernetes.io/os=linux")
            ]
        );
        assert_eq!(cells[10], json!("app=x"));
    }
}

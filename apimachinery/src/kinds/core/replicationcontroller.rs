//! ReplicationControllers (v1): `SetDefaults_ReplicationController`
//! (selector and labels from the template, replicas),
//! `ValidateReplicationController` and kube's printer.
//!
//! Not implemented: the read-only persistent disk check for replicas > 1.

use serde_json::{Map, Value};

use super::podspec_validation::validate_pod_template;
use super::workload::{self, default_template, selector_matches};
use crate::kinds::apps::replicaset::replica_columns;
use crate::kinds::common::{default_field, object_mut};
use crate::kinds::core::workload::int_cell;
use crate::kinds::print::{label_map, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{go_string_map, invalid_rendered, nonnegative, required, validate_labels};

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: Some(crate::kinds::apps::replicaset::validate_status),
    columns: replica_columns!(
        "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        "The number of ready replicas for this replication controller.",
        "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        selector_cell
    ),
};

fn selector_cell(obj: &Value, _: &PrintContext) -> Value {
    Value::String(label_map(obj.pointer("/spec/selector")))
}

fn non_empty_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object).filter(|m| !m.is_empty())
}

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let need_selector = non_empty_map(o.get("spec").and_then(|s| s.get("selector"))).is_none();
    let need_labels = non_empty_map(o.get("metadata").and_then(|m| m.get("labels"))).is_none();
    // Copied only when something takes them.
    let labels = (need_selector || need_labels)
        .then(|| {
            o.get("spec")
                .and_then(|s| s.pointer("/template/metadata/labels"))
                .filter(|l| l.is_object())
                .cloned()
        })
        .flatten();
    if let Some(labels) = labels {
        if need_selector {
            if let Some(spec) = object_mut(o, "spec") {
                spec.insert("selector".into(), labels.clone());
            }
        }
        if need_labels {
            if let Some(meta) = object_mut(o, "metadata") {
                meta.insert("labels".into(), labels);
            }
        }
    }
    if let Some(spec) = object_mut(o, "spec") {
        default_field(spec, "replicas", Value::from(1));
        default_template(spec, "template");
    }
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    nonnegative(
        "spec.minReadySeconds",
        spec.get("minReadySeconds"),
        &mut out,
    );
    let selector = spec.get("selector").filter(|s| !s.is_null());
    if let Some(sel) = selector {
        out.extend(validate_labels(sel, "spec.selector"));
    }
    let empty = non_empty_map(selector).is_none();
    if empty {
        out.push(required("spec.selector", ""));
    }
    nonnegative("spec.replicas", spec.get("replicas"), &mut out);
    let Some(tpl) = spec.get("template").filter(|t| !t.is_null()) else {
        out.push(required("spec.template", ""));
        return out;
    };
    let labels = tpl.pointer("/metadata/labels");
    if let (false, Some(sel)) = (empty, selector) {
        let as_selector = serde_json::json!({ "matchLabels": sel });
        if !selector_matches(&as_selector, labels) {
            out.push(invalid_rendered(
                "spec.template.metadata.labels",
                &go_string_map(labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_pod_template(tpl, "spec.template", &mut out);
    crate::kinds::core::workload::template_runs_forever(
        spec,
        "spec",
        "ReplicationController",
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cause_to_string;
    use serde_json::json;

    #[test]
    fn selector_and_labels_come_from_the_template() {
        let mut rc = json!({"metadata": {"name": "r"}, "spec": {
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        defaults(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "x"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert!(validate(&rc, None).is_empty());
        let mut again = rc.clone();
        defaults(&mut again);
        assert_eq!(again, rc);
        let ctx = PrintContext { now: 0 };
        assert_eq!((RULES.columns[7].cell)(&rc, &ctx), json!("app=x"));
    }

    #[test]
    fn messages() {
        let mut rc = json!({"metadata": {"name": "r"}, "spec": {"selector": {"app": "y"},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}], "restartPolicy": "Never"}}}});
        defaults(&mut rc);
        let errs: Vec<String> = validate(&rc, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ]);
        let errs: Vec<String> = validate(&json!({"spec": {}}), None)
            .iter()
            .map(cause_to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "spec.selector: Required value",
                "spec.template: Required value"
            ]
        );
    }
}

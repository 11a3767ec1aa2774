//! ReplicaSets (apps/v1): `SetDefaults_ReplicaSet`, `ValidateReplicaSet`
//! and kube's replica set printer.
//!
//! Not implemented: the read-only persistent disk check for replicas > 1,
//! the update-time relaxation for selectors with invalid label values.
//! Selector immutability is the registry's generic `immutable` list (JSON
//! value in the message where kube prints Go's `%#v`).

use serde_json::Value;

use super::deployment::validate_replica_set_like;
use crate::kinds::common::{default_field, object_mut};
use crate::kinds::core::workload::{self, default_template, int_cell};
use crate::kinds::print::{Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::nonnegative;

/// Desired/Current/Ready/Age/Containers/Images/Selector, shared with
/// ReplicationControllers (their Selector cell differs).
macro_rules! replica_columns {
    ($desired:expr, $current:expr, $ready:expr, $selector_doc:expr, $selector:expr) => {
        &[
            NAME,
            Column {
                name: "Desired",
                type_: "integer",
                format: "",
                description: $desired,
                priority: 0,
                cell: |o, _| int_cell(o, "/spec/replicas"),
            },
            Column {
                name: "Current",
                type_: "integer",
                format: "",
                description: $current,
                priority: 0,
                cell: |o, _| int_cell(o, "/status/replicas"),
            },
            Column {
                name: "Ready",
                type_: "integer",
                format: "",
                description: $ready,
                priority: 0,
                cell: |o, _| int_cell(o, "/status/readyReplicas"),
            },
            AGE,
            workload::CONTAINERS,
            workload::IMAGES,
            Column {
                name: "Selector",
                type_: "string",
                format: "",
                description: $selector_doc,
                priority: 1,
                cell: $selector,
            },
        ]
    };
}
pub(crate) use replica_columns;

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: replica_columns!(
        "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        workload::spec_selector
    ),
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_field(spec, "replicas", Value::from(1));
    default_template(spec, "template");
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    crate::kinds::core::workload::validate_controller(obj, old, validate_object)
}

fn validate_object(obj: &Value) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    nonnegative(
        "spec.minReadySeconds",
        spec.get("minReadySeconds"),
        &mut out,
    );
    // kube's message names deployments here too.
    validate_replica_set_like(spec, "spec", "deployment", &mut out);
    out
}

/// kube's `ValidateReplicaSetStatus` (also `ValidateReplicationControllerStatus`).
pub(crate) fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    const MSG: &str = "cannot be greater than status.replicas";
    workload::validate_status_counts(
        obj,
        &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ],
        &[
            ("fullyLabeledReplicas", "replicas", MSG),
            ("readyReplicas", "replicas", MSG),
            ("availableReplicas", "replicas", MSG),
            (
                "availableReplicas",
                "readyReplicas",
                "cannot be greater than readyReplicas",
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;
    use crate::validation::cause_to_string;
    use serde_json::json;

    #[test]
    fn defaults_validation_columns() {
        let mut rs = json!({"metadata": {"name": "r"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        defaults(&mut rs);
        assert_eq!(rs["spec"]["replicas"], 1);
        assert!(validate(&rs, None).is_empty());
        rs["spec"]["replicas"] = json!(0);
        defaults(&mut rs);
        assert_eq!(rs["spec"]["replicas"], 0);
        rs["spec"]["selector"] = json!({"matchLabels": {"app": "y"}});
        rs["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
        let errs: Vec<String> = validate(&rs, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`",
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
        ]);
        rs["status"] = json!({"replicas": 2, "readyReplicas": 1});
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = RULES.columns.iter().map(|c| (c.cell)(&rs, &ctx)).collect();
        assert_eq!(cells[1..4], [json!(0), json!(2), json!(1)]);
        assert_eq!(cells[5..], [json!("c"), json!("nginx:1"), json!("app=y")]);
    }
}

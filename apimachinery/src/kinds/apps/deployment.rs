//! Deployments (apps/v1): `SetDefaults_Deployment`, `ValidateDeployment`
//! and kube's deployment printer.
//!
//! Not implemented: `spec.rollbackTo` (gone from apps/v1), the read-only
//! persistent disk check for replicas > 1, the update-time relaxation for
//! selectors with invalid label values. Selector immutability is left to
//! the registry's generic `immutable` list (its message shows the value as
//! JSON where kube prints Go's `%#v`; see `workload::go_label_selector`).

use serde_json::Value;

use crate::kinds::common::{default_field, object_mut};
use crate::kinds::core::podspec_defaults::default_str;
use crate::kinds::core::podspec_validation::validate_pod_template;
use crate::kinds::core::workload::{
    self, default_template, go_intstr, int_cell, intstr_value, ratio, validate_int_or_percent,
};
use crate::kinds::print::{Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{forbidden, invalid_json, invalid_rendered, nonnegative, required};

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: Some(prepare_update),
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: &[
        NAME,
        Column {
            name: "Ready",
            type_: "string",
            format: "",
            description: "Number of the pod with ready state",
            priority: 0,
            cell: |o, _| ratio(o, "/status/readyReplicas", "/spec/replicas"),
        },
        Column {
            name: "Up-to-date",
            type_: "string",
            format: "",
            description: "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
            priority: 0,
            cell: |o, _| int_cell(o, "/status/updatedReplicas"),
        },
        Column {
            name: "Available",
            type_: "string",
            format: "",
            description: "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
            priority: 0,
            cell: |o, _| int_cell(o, "/status/availableReplicas"),
        },
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
        Column {
            name: "Selector",
            type_: "string",
            format: "",
            description: "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
            priority: 1,
            cell: workload::spec_selector,
        },
    ],
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_field(spec, "replicas", Value::from(1));
    if let Some(strategy) = object_mut(spec, "strategy") {
        default_str(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(ru) = object_mut(strategy, "rollingUpdate") {
                default_field(ru, "maxUnavailable", Value::String("25%".into()));
                default_field(ru, "maxSurge", Value::String("25%".into()));
            }
        }
    }
    default_field(spec, "revisionHistoryLimit", Value::from(10));
    default_field(spec, "progressDeadlineSeconds", Value::from(600));
    default_template(spec, "template");
}

/// The deployment strategy's `PrepareForUpdate`: annotation changes bump
/// the generation too (they are copied to the replica sets); spec changes
/// are bumped by the generic path already.
fn prepare_update(new: &mut Value, old: &Value) {
    let generation = |v: &Value| v.pointer("/metadata/generation").and_then(Value::as_i64);
    let (og, ng) = (generation(old), generation(new));
    if ng != og {
        return;
    }
    let same = match (
        new.pointer("/metadata/annotations")
            .and_then(Value::as_object),
        old.pointer("/metadata/annotations")
            .and_then(Value::as_object),
    ) {
        (Some(a), Some(b)) => a == b,
        (a, b) => a.is_none_or(|m| m.is_empty()) && b.is_none_or(|m| m.is_empty()),
    };
    if !same {
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("generation".into(), Value::from(og.unwrap_or(0) + 1));
        }
    }
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    crate::kinds::core::workload::validate_controller(obj, old, validate_object)
}

fn validate_object(obj: &Value) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    validate_replica_set_like(spec, "spec", "deployment", &mut out);
    validate_strategy(spec.get("strategy"), &mut out);
    nonnegative(
        "spec.minReadySeconds",
        spec.get("minReadySeconds"),
        &mut out,
    );
    nonnegative(
        "spec.revisionHistoryLimit",
        spec.get("revisionHistoryLimit"),
        &mut out,
    );
    if let Some(pds) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        nonnegative(
            "spec.progressDeadlineSeconds",
            Some(&Value::from(pds)),
            &mut out,
        );
        let min_ready = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pds <= min_ready {
            out.push(invalid_json(
                "spec.progressDeadlineSeconds",
                &Value::from(pds),
                "must be greater than minReadySeconds",
            ));
        }
    }
    out
}

/// What Deployments and ReplicaSets share: replicas, the selector, the pod
/// template (`ValidatePodTemplateSpecForReplicaSet`).
pub fn validate_replica_set_like(spec: &Value, path: &str, kind: &str, out: &mut Vec<StatusCause>) {
    nonnegative(&format!("{path}.replicas"), spec.get("replicas"), out);
    workload::validate_selector_and_template(spec, path, kind, "invalid label selector", out);
    let tpl = spec.get("template").unwrap_or(&Value::Null);
    validate_pod_template(tpl, &format!("{path}.template"), out);
    workload::template_runs_forever(spec, path, "ReplicaSet", out);
}

fn validate_strategy(strategy: Option<&Value>, out: &mut Vec<StatusCause>) {
    let strategy = strategy.unwrap_or(&Value::Null);
    let ru = strategy.get("rollingUpdate").filter(|v| !v.is_null());
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "Recreate" => {
            if ru.is_some() {
                out.push(forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match ru {
            None => out.push(required(
                "spec.strategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )),
            Some(ru) => validate_rolling_update(ru, out),
        },
        other => {
            let ru_shown = if ru.is_some() {
                "(*apps.RollingUpdateDeployment)(0xc000000000)"
            } else {
                "(*apps.RollingUpdateDeployment)(nil)"
            };
            out.push(crate::validation::not_supported_rendered(
                "spec.strategy",
                &format!(
                    "apps.DeploymentStrategy{{Type:{}, RollingUpdate:{ru_shown}}}",
                    crate::validation::go_quote(other)
                ),
                &["Recreate", "RollingUpdate"],
            ));
        }
    }
}

fn validate_rolling_update(ru: &Value, out: &mut Vec<StatusCause>) {
    let (mu, ms) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
    let mu_path = "spec.strategy.rollingUpdate.maxUnavailable";
    if let Some(v) = mu {
        validate_int_or_percent(v, mu_path, out);
    }
    if let Some(v) = ms {
        validate_int_or_percent(v, "spec.strategy.rollingUpdate.maxSurge", out);
    }
    let zero = |v: Option<&Value>| v.map_or(0, |v| intstr_value(v).0) == 0;
    if zero(mu) && zero(ms) {
        let shown = mu.map_or("(*intstr.IntOrString)(nil)".to_string(), go_intstr);
        out.push(invalid_rendered(
            mu_path,
            &shown,
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    if let Some(v) = mu {
        workload::not_more_than_100_percent(v, mu_path, out);
    }
}

/// kube's `ValidateDeploymentStatus`.
fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    const MSG: &str = "cannot be greater than status.replicas";
    let mut out = workload::validate_status_counts(
        obj,
        &[
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "collisionCount",
        ],
        &[
            ("updatedReplicas", "replicas", MSG),
            ("readyReplicas", "replicas", MSG),
            ("availableReplicas", "replicas", MSG),
        ],
    );
    // kube compares available with ready only once something is ready.
    let n = |f: &str| crate::kinds::print::int_at(obj, &format!("/status/{f}"));
    if n("readyReplicas") > 0 && n("availableReplicas") > n("readyReplicas") {
        out.push(invalid_json(
            "status.availableReplicas",
            &Value::from(n("availableReplicas")),
            "cannot be greater than readyReplicas",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;
    use crate::validation::cause_to_string;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    fn errors(d: &Value) -> Vec<String> {
        validate(d, None).iter().map(cause_to_string).collect()
    }

    #[test]
    fn defaults_and_idempotence() {
        let mut d = deployment();
        defaults(&mut d);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(
            spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        let again = {
            let mut x = d.clone();
            defaults(&mut x);
            x
        };
        assert_eq!(again, d);
        assert!(errors(&d).is_empty(), "{:?}", errors(&d));
    }

    #[test]
    fn client_values_stay() {
        let mut d = deployment();
        d["spec"]["replicas"] = json!(0);
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        d["spec"]["revisionHistoryLimit"] = json!(0);
        defaults(&mut d);
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(d["spec"]["revisionHistoryLimit"], 0);
    }

    #[test]
    fn validation_messages() {
        let mut d = deployment();
        defaults(&mut d);
        d["spec"]["template"]["metadata"]["labels"] = json!({"app": "y"});
        d["spec"]["replicas"] = json!(-1);
        d["spec"]["strategy"]["rollingUpdate"] = json!({"maxUnavailable": 0, "maxSurge": "0%"});
        assert_eq!(errors(&d), vec![
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"y\"}: `selector` does not match template `labels`",
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ]);
        let mut d = deployment();
        defaults(&mut d);
        d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = json!("150%");
        d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        d["spec"]["progressDeadlineSeconds"] = json!(5);
        d["spec"]["minReadySeconds"] = json!(10);
        assert_eq!(errors(&d), vec![
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
            "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
        ]);
        let mut d = deployment();
        d["spec"].as_object_mut().unwrap().remove("selector");
        defaults(&mut d);
        assert_eq!(errors(&d), vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`",
        ]);
    }

    #[test]
    fn annotation_changes_bump_the_generation() {
        let old = json!({"metadata": {"generation": 3, "annotations": {"a": "1"}}});
        let mut same = old.clone();
        prepare_update(&mut same, &old);
        assert_eq!(same["metadata"]["generation"], 3);
        let mut changed = json!({"metadata": {"generation": 3, "annotations": {"a": "2"}}});
        prepare_update(&mut changed, &old);
        assert_eq!(changed["metadata"]["generation"], 4);
        let mut spec_bumped = json!({"metadata": {"generation": 4, "annotations": {"a": "2"}}});
        prepare_update(&mut spec_bumped, &old);
        assert_eq!(spec_bumped["metadata"]["generation"], 4);
    }

    #[test]
    fn status_rules() {
        let d = json!({"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": -1}});
        let errs: Vec<String> = validate_status(&d, None)
            .iter()
            .map(cause_to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "status.availableReplicas: Invalid value: -1: must be greater than or equal to 0",
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
            ]
        );
    }

    #[test]
    fn columns() {
        let d = json!({"metadata": {"name": "d"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"spec": {"containers": [{"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = RULES.columns.iter().map(|c| (c.cell)(&d, &ctx)).collect();
        assert_eq!(cells[1..4], [json!("2/3"), json!(3), json!(2)]);
        assert_eq!(cells[5..], [json!("a,b"), json!("i1,i2"), json!("app=x")]);
    }
}

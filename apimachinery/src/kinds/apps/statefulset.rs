//! StatefulSets (apps/v1): `SetDefaults_StatefulSet` (with the
//! `StatefulSetAutoDeletePVC` retention policy kube enables by default),
//! `ValidateStatefulSet`/`ValidateStatefulSetUpdate` and kube's printer.
//!
//! Not implemented: validation of `volumeClaimTemplates` (PVC specs),
//! `ordinals`, `serviceName`, the retention policy values,
//! `rollingUpdate.maxUnavailable` (feature gated).

use serde_json::Value;

use crate::kinds::common::{default_field, each_mut, existing_mut, object_mut};
use crate::kinds::core::podspec_defaults::default_str;
use crate::kinds::core::podspec_validation::validate_pod_template;
use crate::kinds::core::workload::{self, default_template, ratio};
use crate::kinds::print::{Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{forbidden, invalid, nonnegative, required};

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
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
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
    ],
};

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(us) = object_mut(spec, "updateStrategy") {
        let untyped = !matches!(us.get("type"), Some(Value::String(t)) if !t.is_empty());
        if untyped {
            us.insert("type".into(), Value::String("RollingUpdate".into()));
            object_mut(us, "rollingUpdate");
        }
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(ru) = existing_mut(us, "rollingUpdate") {
                default_field(ru, "partition", Value::from(0));
            }
        }
    }
    if let Some(p) = object_mut(spec, "persistentVolumeClaimRetentionPolicy") {
        default_str(p, "whenDeleted", "Retain");
        default_str(p, "whenScaled", "Retain");
    }
    default_field(spec, "replicas", Value::from(1));
    default_field(spec, "revisionHistoryLimit", Value::from(10));
    default_template(spec, "template");
    for pvc in each_mut(spec, "volumeClaimTemplates") {
        if let Some(s) = object_mut(pvc, "spec") {
            default_field(s, "volumeMode", Value::String("Filesystem".into()));
        }
        if let Some(st) = object_mut(pvc, "status") {
            default_str(st, "phase", "Pending");
        }
    }
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match spec
        .get("podManagementPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => out.push(required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => out.push(invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let us = spec.get("updateStrategy").unwrap_or(&Value::Null);
    let ru = us.get("rollingUpdate").filter(|v| !v.is_null());
    match us.get("type").and_then(Value::as_str).unwrap_or("") {
        "" => out.push(required("spec.updateStrategy", "")),
        "OnDelete" => {
            if ru.is_some() {
                out.push(crate::validation::invalid_rendered(
                    "spec.updateStrategy.rollingUpdate",
                    "&apps.RollingUpdateStatefulSetStrategy{Partition:0, MaxUnavailable:(*intstr.IntOrString)(nil)}",
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = ru {
                nonnegative(
                    "spec.updateStrategy.rollingUpdate.partition",
                    ru.get("partition"),
                    &mut out,
                );
            }
        }
        other => out.push(crate::validation::invalid_rendered(
            "spec.updateStrategy",
            &format!(
                "apps.StatefulSetUpdateStrategy{{Type:{}, RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}}",
                crate::validation::go_quote(other)
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    nonnegative("spec.replicas", spec.get("replicas"), &mut out);
    nonnegative(
        "spec.minReadySeconds",
        spec.get("minReadySeconds"),
        &mut out,
    );
    workload::validate_selector_and_template(spec, "spec", "statefulset", "", &mut out);
    validate_pod_template(
        spec.get("template").unwrap_or(&Value::Null),
        "spec.template",
        &mut out,
    );
    workload::template_runs_forever(spec, "spec", "StatefulSet", &mut out);
    nonnegative(
        "spec.revisionHistoryLimit",
        spec.get("revisionHistoryLimit"),
        &mut out,
    );
    if let Some(old) = old {
        if spec_changed(spec, old.get("spec").unwrap_or(&Value::Null)) {
            // A set stored before its defaults existed reads back defaulted
            // in kube; compare with that (only here, to spare the copy).
            let mut o = old.clone();
            defaults(&mut o);
            if spec_changed(spec, o.get("spec").unwrap_or(&Value::Null)) {
                out.push(forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
    }
    out
}

const MUTABLE: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// Whether an update changed spec fields kube's `ValidateStatefulSetUpdate`
/// keeps fixed.
fn spec_changed(new: &Value, old: &Value) -> bool {
    let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
        return false;
    };
    n.iter()
        .filter(|(k, _)| !MUTABLE.contains(&k.as_str()))
        .any(|(k, v)| o.get(k) != Some(v))
        || o.keys()
            .any(|k| !MUTABLE.contains(&k.as_str()) && !n.contains_key(k))
}

/// kube's `ValidateStatefulSetStatus` (the counters).
fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    const MSG: &str = "cannot be greater than status.replicas";
    workload::validate_status_counts(
        obj,
        &[
            "replicas",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
            "observedGeneration",
            "collisionCount",
        ],
        &[
            ("readyReplicas", "replicas", MSG),
            ("currentReplicas", "replicas", MSG),
            ("updatedReplicas", "replicas", MSG),
            ("availableReplicas", "replicas", MSG),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;
    use crate::validation::cause_to_string;
    use serde_json::json;

    fn sts() -> Value {
        json!({"metadata": {"name": "s"}, "spec": {"serviceName": "s",
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}})
    }

    #[test]
    fn defaults_and_update_rules() {
        let mut s = sts();
        defaults(&mut s);
        let spec = &s["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(
            spec["volumeClaimTemplates"][0]["status"]["phase"],
            "Pending"
        );
        let mut again = s.clone();
        defaults(&mut again);
        assert_eq!(again, s);
        assert!(validate(&s, None).is_empty(), "{:?}", validate(&s, None));
        let mut scaled = s.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(validate(&scaled, Some(&s)).is_empty());
        // A set stored without defaults compares as kube reads it back.
        assert!(validate(&scaled, Some(&sts())).is_empty());
        scaled["spec"]["serviceName"] = json!("other");
        let errs: Vec<String> = validate(&scaled, Some(&s))
            .iter()
            .map(cause_to_string)
            .collect();
        assert_eq!(errs, vec!["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]);
        let mut ondelete = sts();
        ondelete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        defaults(&mut ondelete);
        assert_eq!(
            ondelete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }

    #[test]
    fn messages_and_columns() {
        let mut s = sts();
        s["spec"]["podManagementPolicy"] = json!("Random");
        s["spec"].as_object_mut().unwrap().remove("selector");
        defaults(&mut s);
        let errs: Vec<String> = validate(&s, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`",
        ]);
        s["status"] = json!({"readyReplicas": 1});
        let ctx = PrintContext { now: 0 };
        assert_eq!((RULES.columns[1].cell)(&s, &ctx), json!("1/1"));
    }
}

//! storage.k8s.io/v1 StorageClasses: kube's defaults (reclaim policy
//! Delete, binding mode Immediate), `ValidateStorageClass(Update)` and the
//! printer (`(default)` after the default class's name).

use serde_json::{json, Value};

use crate::kinds::common::default_str;
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME_DESCRIPTION};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static STORAGE_CLASS: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    default_str(o, "reclaimPolicy", "Delete");
    default_str(o, "volumeBindingMode", "Immediate");
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let provisioner = print::str_at(obj, "/provisioner", "");
    if provisioner.is_empty() {
        errs.push(v::required("provisioner", ""));
    } else {
        let lower = provisioner.to_lowercase();
        for msg in v::is_qualified_name(&lower) {
            errs.push(v::invalid("provisioner", &lower, &msg));
        }
    }
    if let Some(params) = obj.get("parameters").and_then(Value::as_object) {
        if params.len() > 512 {
            errs.push(v::too_long("parameters", 512));
        } else {
            let mut total = 0usize;
            for (k, val) in params {
                if k.is_empty() {
                    errs.push(v::invalid("parameters", k, "field can not be empty."));
                }
                total += k.len() + val.as_str().map_or(0, str::len);
            }
            if total > 256 * 1024 {
                errs.push(v::too_long("parameters", 256 * 1024));
            }
        }
    }
    if let Some(p) = obj.get("reclaimPolicy").and_then(Value::as_str) {
        if !p.is_empty() && p != "Delete" && p != "Retain" {
            errs.push(v::not_supported("reclaimPolicy", p, &["Delete", "Retain"]));
        }
    }
    match obj.get("volumeBindingMode").and_then(Value::as_str) {
        None => errs.push(v::required("volumeBindingMode", "")),
        Some("Immediate" | "WaitForFirstConsumer") => {}
        Some(m) => errs.push(v::not_supported(
            "volumeBindingMode",
            m,
            &["Immediate", "WaitForFirstConsumer"],
        )),
    }
    if let Some(old) = old {
        fn params(o: &Value) -> Option<&Value> {
            o.get("parameters")
                .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
        }
        if params(obj) != params(old) {
            errs.push(v::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        if provisioner != print::str_at(old, "/provisioner", "") {
            errs.push(v::forbidden(
                "provisioner",
                "updates to provisioner are forbidden.",
            ));
        }
        if obj.get("reclaimPolicy") != old.get("reclaimPolicy") {
            errs.push(v::forbidden(
                "reclaimPolicy",
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        if obj.get("volumeBindingMode") != old.get("volumeBindingMode") {
            let mode = obj.get("volumeBindingMode").cloned().unwrap_or(Value::Null);
            errs.push(v::invalid_json(
                "volumeBindingMode",
                &mode,
                "field is immutable",
            ));
        }
    }
    errs
}

const COLUMNS: &[Column] = &[
    Column {
        name: "Name",
        type_: "string",
        format: "name",
        description: NAME_DESCRIPTION,
        priority: 0,
        cell: name,
    },
    column("Provisioner", "string", "provisioner indicates the type of the provisioner.", 0, |o, _| json!(print::str_at(o, "/provisioner", ""))),
    column("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.", 0, |o, _| json!(print::str_at(o, "/reclaimPolicy", "Delete"))),
    column("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.", 0, |o, _| json!(print::str_at(o, "/volumeBindingMode", "Immediate"))),
    column("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand.", 0, |o, _| json!(o.get("allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false))),
    AGE,
];

/// The name, with ` (default)` for the cluster's default class.
fn name(obj: &Value, _: &PrintContext) -> Value {
    let n = print::str_at(obj, "/metadata/name", "");
    let ann = obj.pointer("/metadata/annotations");
    let is_default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"));
    if is_default {
        Value::String(format!("{n} (default)"))
    } else {
        json!(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value, old: Option<&Value>) -> Vec<String> {
        validate(obj, old).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn defaults_validation_columns() {
        let mut sc = json!({"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "example.com/disk", "parameters": {"type": "ssd"}});
        defaults(&mut sc);
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
        assert!(msgs(&sc, None).is_empty());
        let mut changed = sc.clone();
        changed["parameters"] = json!({"type": "hdd"});
        assert_eq!(
            msgs(&changed, Some(&sc)),
            vec!["parameters: Forbidden: updates to parameters are forbidden."]
        );
        let mut bad = json!({"reclaimPolicy": "Recycle"});
        defaults(&mut bad);
        assert_eq!(msgs(&bad, None), vec![
            "provisioner: Required value",
            "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
        ]);
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = COLUMNS
            .iter()
            .filter(|c| c.name != "Age")
            .map(|c| (c.cell)(&sc, &ctx))
            .collect();
        assert_eq!(
            cells,
            vec![
                json!("fast (default)"),
                json!("example.com/disk"),
                json!("Delete"),
                json!("Immediate"),
                json!(false)
            ]
        );
    }
}

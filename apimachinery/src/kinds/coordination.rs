//! coordination.k8s.io/v1 Leases: `ValidateLeaseSpec` and the printer.

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static LEASE: KindRules = KindRules {
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let int = |k: &str| spec.and_then(|s| s.get(k)).and_then(Value::as_i64);
    if let Some(d) = int("leaseDurationSeconds").filter(|d| *d <= 0) {
        errs.push(v::invalid_json(
            "spec.leaseDurationSeconds",
            &json!(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = int("leaseTransitions").filter(|t| *t < 0) {
        errs.push(v::invalid_json(
            "spec.leaseTransitions",
            &json!(t),
            "must be greater than or equal to 0",
        ));
    }
    let s = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if let Some(strategy) = spec.and_then(|s| s.get("strategy")).and_then(Value::as_str) {
        if strategy != "OldestEmulationVersion" {
            errs.push(v::not_supported(
                "spec.strategy",
                strategy,
                &["OldestEmulationVersion"],
            ));
        }
    }
    if !s("preferredHolder").is_empty() && s("strategy").is_empty() {
        errs.push(v::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column("Holder", "string", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.", 0, |o, _| json!(print::str_at(o, "/spec/holderIdentity", ""))),
    AGE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;

    #[test]
    fn rules_and_columns() {
        let ok = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0}});
        assert!(validate(&ok, None).is_empty());
        let bad = json!({"spec": {"leaseDurationSeconds": 0, "preferredHolder": "b"}});
        let got: Vec<String> = validate(&bad, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
            ]
        );
        assert_eq!((COLUMNS[1].cell)(&ok, &PrintContext { now: 0 }), json!("a"));
    }
}

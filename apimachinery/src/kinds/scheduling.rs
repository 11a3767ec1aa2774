//! scheduling.k8s.io/v1 PriorityClasses: kube's preemption policy default,
//! `ValidatePriorityClass(Update)` and the printer.

use serde_json::{json, Value};

use crate::kinds::common::default_str;
use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static PRIORITY_CLASS: KindRules = KindRules {
    defaults: Some(defaults),
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;
/// The system classes kube creates, with their values.
pub const SYSTEM: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

fn defaults(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default_str(o, "preemptionPolicy", "PreemptLowerPriority");
    }
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    if let Some(old) = old {
        if value != old.get("value").and_then(Value::as_i64).unwrap_or(0) {
            errs.push(v::forbidden("value", "may not be changed in an update."));
        }
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy") {
            let p = obj.get("preemptionPolicy").cloned().unwrap_or(Value::Null);
            errs.push(v::invalid_json(
                "preemptionPolicy",
                &p,
                "field is immutable",
            ));
        }
        return errs;
    }
    let name = print::str_at(obj, "/metadata/name", "");
    if name.starts_with("system-") {
        let global = obj
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let problem = match SYSTEM.iter().find(|(n, _)| *n == name) {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, want)) if *want != value => {
                Some(format!("value of {name} PriorityClass must be {want}"))
            }
            Some(_) if global => Some(format!(
                "globalDefault of {name} PriorityClass must be false"
            )),
            Some(_) => None,
        };
        if let Some(p) = problem {
            errs.push(v::forbidden(
                "metadata.name",
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: {p}"),
            ));
        }
    } else if value > HIGHEST_USER_PRIORITY {
        errs.push(v::forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ));
    }
    match obj.get("preemptionPolicy").and_then(Value::as_str) {
        None | Some("PreemptLowerPriority" | "Never") => {}
        Some("") => errs.push(v::required("preemptionPolicy", "")),
        Some(p) => errs.push(v::not_supported(
            "preemptionPolicy",
            p,
            &["PreemptLowerPriority", "Never"],
        )),
    }
    errs
}

const COLUMNS: &[Column] = &[
    NAME,
    column("Value", "integer", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.", 0, |o, _| json!(print::int_at(o, "/value"))),
    column("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.", 0, |o, _| json!(o.get("globalDefault").and_then(Value::as_bool).unwrap_or(false))),
    AGE,
    column("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.", 0, |o, _| json!(print::str_at(o, "/preemptionPolicy", ""))),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;

    fn msgs(obj: &Value, old: Option<&Value>) -> Vec<String> {
        validate(obj, old).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn rules_and_columns() {
        let mut pc = json!({"metadata": {"name": "high"}, "value": 1000});
        defaults(&mut pc);
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        assert!(msgs(&pc, None).is_empty());
        let big = json!({"metadata": {"name": "x"}, "value": 2_000_000_000});
        assert_eq!(
            msgs(&big, None),
            vec![
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
            ]
        );
        let sys = json!({"metadata": {"name": "system-foo"}, "value": 1});
        assert_eq!(msgs(&sys, None), vec!["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-foo is not a known system priority class"]);
        let mut changed = pc.clone();
        changed["value"] = json!(5);
        assert_eq!(
            msgs(&changed, Some(&pc)),
            vec!["value: Forbidden: may not be changed in an update."]
        );
        let ctx = PrintContext { now: 0 };
        assert_eq!((COLUMNS[1].cell)(&pc, &ctx), json!(1000));
        assert_eq!((COLUMNS[2].cell)(&pc, &ctx), json!(false));
        assert_eq!((COLUMNS[4].cell)(&pc, &ctx), json!("PreemptLowerPriority"));
    }
}

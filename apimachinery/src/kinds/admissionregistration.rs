//! admissionregistration.k8s.io/v1: what kube's validation refuses in
//! ValidatingAdmissionPolicies, their bindings and webhook configurations
//! before any request meets them. Every CEL expression must compile (kube
//! answers 422 naming the field and the compiler's message); the fields
//! the admission chain cannot do without are required.

use serde_json::Value;

use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static VALIDATING_POLICY: KindRules = KindRules {
    validate: Some(validate_policy),
    ..KindRules::NONE
};

pub static VALIDATING_POLICY_BINDING: KindRules = KindRules {
    validate: Some(validate_binding),
    ..KindRules::NONE
};

pub static WEBHOOK_CONFIGURATION: KindRules = KindRules {
    validate: Some(validate_webhooks),
    ..KindRules::NONE
};

/// A compile error of the expression at `field`, if any.
fn compiles(field: &str, expr: Option<&Value>, errs: &mut Vec<StatusCause>) {
    match expr.and_then(Value::as_str) {
        None | Some("") => errs.push(v::required(field, "")),
        Some(e) => {
            if let Err(err) = k8s_cel::Program::compile(e) {
                errs.push(v::invalid(field, e, &err.to_string()));
            }
        }
    }
}

fn items<'a>(v: Option<&'a Value>, field: &'a str) -> impl Iterator<Item = (String, &'a Value)> {
    v.and_then(|s| s.get(field))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(move |(i, x)| (format!("{field}[{i}]"), x))
}

fn validate_policy(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    if spec.and_then(|s| s.get("matchConstraints")).is_none() {
        errs.push(v::required("spec.matchConstraints", ""));
    }
    let none = |f: &str| {
        spec.and_then(|s| s.get(f))
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    };
    if none("validations") && none("auditAnnotations") {
        errs.push(v::required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (f, x) in items(spec, "validations") {
        compiles(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &mut errs,
        );
        if let Some(m) = x
            .get("messageExpression")
            .filter(|m| m.as_str() != Some(""))
        {
            compiles(&format!("spec.{f}.messageExpression"), Some(m), &mut errs);
        }
    }
    for (f, x) in items(spec, "matchConditions") {
        compiles(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &mut errs,
        );
    }
    for (f, x) in items(spec, "variables") {
        compiles(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &mut errs,
        );
    }
    for (f, x) in items(spec, "auditAnnotations") {
        compiles(
            &format!("spec.{f}.valueExpression"),
            x.get("valueExpression"),
            &mut errs,
        );
    }
    if let Some(p) = spec
        .and_then(|s| s.get("failurePolicy"))
        .and_then(Value::as_str)
    {
        if p != "Fail" && p != "Ignore" {
            errs.push(v::not_supported(
                "spec.failurePolicy",
                p,
                &["Fail", "Ignore"],
            ));
        }
    }
    errs
}

fn validate_binding(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    if spec
        .and_then(|s| s.get("policyName"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errs.push(v::required("spec.policyName", ""));
    }
    let actions: Vec<&str> = spec
        .and_then(|s| s.get("validationActions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if actions.is_empty() {
        errs.push(v::required("spec.validationActions", ""));
    }
    for (i, a) in actions.iter().enumerate() {
        if !["Deny", "Warn", "Audit"].contains(a) {
            errs.push(v::not_supported(
                &format!("spec.validationActions[{i}]"),
                a,
                &["Audit", "Deny", "Warn"],
            ));
        }
    }
    errs
}

fn validate_webhooks(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    for (f, hook) in items(Some(obj), "webhooks") {
        match hook.get("sideEffects").and_then(Value::as_str) {
            None => errs.push(v::required(
                &format!("{f}.sideEffects"),
                "must specify one of None, NoneOnDryRun",
            )),
            Some("None" | "NoneOnDryRun") => {}
            Some(other) => errs.push(v::not_supported(
                &format!("{f}.sideEffects"),
                other,
                &["None", "NoneOnDryRun"],
            )),
        }
        let cc = hook.get("clientConfig");
        let url = cc.and_then(|c| c.get("url")).is_some();
        let svc = cc.and_then(|c| c.get("service")).is_some();
        if url == svc {
            errs.push(v::required(
                &format!("{f}.clientConfig"),
                "exactly one of url or service is required",
            ));
        }
        for (g, c) in items(Some(hook), "matchConditions") {
            compiles(
                &format!("{f}.{g}.expression"),
                c.get("expression"),
                &mut errs,
            );
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_that_do_not_compile_are_named() {
        let p = json!({"spec": {"matchConstraints": {}, "validations": [
            {"expression": "object.spec.replicas <= 5"},
            {"expression": "object.spec.replicas <=", "messageExpression": "'a' +"}
        ]}});
        let errs = validate_policy(&p, None);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].field, "spec.validations[1].expression");
        assert!(
            errs[0].message.contains("compilation failed"),
            "{}",
            errs[0].message
        );
        assert_eq!(errs[1].field, "spec.validations[1].messageExpression");
    }

    #[test]
    fn bindings_and_webhooks_need_their_fields() {
        let errs = validate_binding(&json!({"spec": {"validationActions": ["Nope"]}}), None);
        assert_eq!(errs.len(), 2, "{errs:?}");
        let errs = validate_webhooks(
            &json!({"webhooks": [{"name": "a", "clientConfig": {"url": "https://x"}, "sideEffects": "Some",
                "matchConditions": [{"name": "c", "expression": "("}]}]}),
            None,
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
    }
}

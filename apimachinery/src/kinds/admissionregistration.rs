//! admissionregistration.k8s.io/v1: what kube's validation refuses in
//! ValidatingAdmissionPolicies, their bindings and webhook configurations
//! before any request meets them. Every CEL expression must compile (kube
//! answers 422 naming the field and the compiler's message); the fields
//! the admission chain cannot do without are required.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_cel::check::{Env, Object, Type};
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

/// What an expression must evaluate to (kube's `ReturnTypes`).
#[derive(Clone, Copy, PartialEq)]
enum Returns {
    Bool,
    String,
    StringOrNull,
    Any,
}

impl Returns {
    /// kube's check of the output type: exact, `dyn` is not enough.
    fn refuses(self, t: &Type) -> Option<String> {
        let ok = match self {
            Returns::Any => true,
            Returns::Bool => *t == Type::Bool,
            Returns::String => *t == Type::String,
            Returns::StringOrNull => matches!(t, Type::String | Type::Null),
        };
        let got = match t {
            Type::Null => "null_type".to_string(),
            t => t.to_string(),
        };
        (!ok).then(|| match self {
            Returns::Bool => format!("must evaluate to bool but got {got}"),
            Returns::String => format!("must evaluate to string but got {got}"),
            _ => format!("must evaluate to one of [string null_type] but got {got}"),
        })
    }
}

/// The variables kube's admission compiler declares when a policy or
/// webhook configuration is written (`plugin/cel` `CompileCELExpression`
/// as `validation.go` calls it): `object` and `oldObject` are `dyn` (the
/// matched kinds are not known yet), `request` and `namespaceObject` have
/// kube's types, `params` (`dyn`) only with a `paramKind`, `authorizer`
/// and `authorizer.requestResource` where the expression may call them,
/// and `variables` (each typed by its expression, in order) only in a
/// policy that declares variables.
#[derive(Clone)]
struct Declared {
    params: bool,
    variables: Option<BTreeMap<String, Type>>,
}

impl Declared {
    fn env(&self, authorizer: bool) -> Env {
        let mut env = Env::new()
            .with_variable("object", Type::Dyn)
            .with_variable("oldObject", Type::Dyn)
            .with_variable("request", Type::admission_request())
            .with_variable("namespaceObject", Type::namespace_object());
        if self.params {
            env = env.with_variable("params", Type::Dyn);
        }
        if authorizer {
            env = env
                .with_variable(
                    "authorizer",
                    Type::named("kubernetes.authorization.Authorizer"),
                )
                .with_variable(
                    "authorizer.requestResource",
                    Type::named("kubernetes.authorization.ResourceCheck"),
                );
        }
        if let Some(fields) = &self.variables {
            env = env.with_variable(
                "variables",
                Type::Object(Arc::new(Object {
                    name: "kubernetes.variables".into(),
                    fields: fields.clone(),
                })),
            );
        }
        env
    }
}

/// Expressions the stored object already had: kube compiles them in its
/// wider stored-expressions environment, so an object written before a
/// stricter check keeps updating. They are only parsed here.
fn preexisting(old: Option<&Value>) -> HashSet<String> {
    fn walk(v: &Value, out: &mut HashSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        (
                            "expression" | "messageExpression" | "valueExpression",
                            Value::String(s),
                        ) => {
                            out.insert(s.clone());
                        }
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = HashSet::new();
    if let Some(old) = old {
        walk(old, &mut out);
    }
    out
}

/// Compiles and type-checks the expression at `field` in `env` (only
/// parses it when it is `old`'s already), with kube's causes: required
/// when empty, `compilation failed: ...` or `must evaluate to ...`.
/// Returns its output type when it checked.
fn checks(
    field: &str,
    expr: Option<&Value>,
    env: &Env,
    returns: Returns,
    old: &HashSet<String>,
    errs: &mut Vec<StatusCause>,
) -> Option<Type> {
    let e = match expr.and_then(Value::as_str) {
        None | Some("") => {
            errs.push(v::required(field, ""));
            return None;
        }
        Some(e) => e,
    };
    let checked = k8s_cel::Program::compile(e).and_then(|p| {
        if old.contains(e) {
            Ok(Type::Dyn)
        } else {
            p.check(env)
        }
    });
    match checked {
        Err(err) => {
            errs.push(v::invalid(field, e, &err.to_string()));
            None
        }
        Ok(t) => match returns.refuses(&t).filter(|_| !old.contains(e)) {
            Some(reason) => {
                errs.push(v::invalid(field, e, &reason));
                None
            }
            None => Some(t),
        },
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

fn validate_policy(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
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
    let old = preexisting(old);
    let params = spec.and_then(|s| s.get("paramKind")).is_some();
    let mut declared = Declared {
        params,
        variables: None,
    };
    // kube's order: match conditions (no variables), variables (each
    // declared for those after it), validations, audit annotations.
    for (f, x) in items(spec, "matchConditions") {
        let env = declared.env(true);
        checks(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &env,
            Returns::Bool,
            &old,
            &mut errs,
        );
    }
    let has_variables = !none("variables");
    if has_variables {
        declared.variables = Some(BTreeMap::new());
    }
    for (f, x) in items(spec, "variables") {
        let env = declared.env(true);
        let t = checks(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &env,
            Returns::Any,
            &old,
            &mut errs,
        );
        if let (Some(name), Some(fields)) = (
            x.get("name").and_then(Value::as_str),
            declared.variables.as_mut(),
        ) {
            fields.insert(
                name.to_owned(),
                t.map_or(Type::Dyn, |t| t.as_variable_field()),
            );
        }
    }
    let with_authorizer = declared.env(true);
    let without_authorizer = declared.env(false);
    for (f, x) in items(spec, "validations") {
        checks(
            &format!("spec.{f}.expression"),
            x.get("expression"),
            &with_authorizer,
            Returns::Bool,
            &old,
            &mut errs,
        );
        if let Some(m) = x
            .get("messageExpression")
            .filter(|m| m.as_str() != Some(""))
        {
            checks(
                &format!("spec.{f}.messageExpression"),
                Some(m),
                &without_authorizer,
                Returns::String,
                &old,
                &mut errs,
            );
        }
    }
    for (f, x) in items(spec, "auditAnnotations") {
        checks(
            &format!("spec.{f}.valueExpression"),
            x.get("valueExpression"),
            &with_authorizer,
            Returns::StringOrNull,
            &old,
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

fn validate_webhooks(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let old = preexisting(old);
    let env = Declared {
        params: false,
        variables: None,
    }
    .env(true);
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
            checks(
                &format!("{f}.{g}.expression"),
                c.get("expression"),
                &env,
                Returns::Bool,
                &old,
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

    /// What kube's admission compiler refuses when a policy is written
    /// (its messages, from `plugin/cel/compile.go`).
    #[test]
    fn expressions_are_type_checked_as_kube_writes_them() {
        let messages = |p: Value, old: Option<&Value>| -> Vec<(String, String)> {
            validate_policy(&p, old)
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect()
        };
        let policy = |spec: Value| {
            let mut spec = spec;
            spec["matchConstraints"] = json!({});
            json!({"spec": spec})
        };
        let p = policy(json!({"validations": [
            {"expression": "request.nosuch == 'x'"},
            {"expression": "object.spec.replicas"},
            {"expression": "params.max > 1"},
            {"expression": "authorizer.requestResource.check('get').allowed() && object.spec.replicas <= 5",
             "messageExpression": "authorizer.path('/x').check('get').reason()"},
            {"expression": "variables.nosuch"}
        ], "auditAnnotations": [{"key": "k", "valueExpression": "1"}]}));
        let got = messages(p.clone(), None);
        let want = [
            ("spec.validations[0].expression", "Invalid value: \"request.nosuch == 'x'\": compilation failed: ERROR: <input>:1:8: undefined field 'nosuch'\n | request.nosuch == 'x'\n | .......^"),
            ("spec.validations[1].expression", "Invalid value: \"object.spec.replicas\": must evaluate to bool but got dyn"),
            ("spec.validations[2].expression", "Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.max > 1\n | ^"),
            ("spec.validations[3].messageExpression", "Invalid value: \"authorizer.path('/x').check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.path('/x').check('get').reason()\n | ^"),
            ("spec.validations[4].expression", "Invalid value: \"variables.nosuch\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n | variables.nosuch\n | ^"),
            ("spec.auditAnnotations[0].valueExpression", "Invalid value: \"1\": must evaluate to one of [string null_type] but got int"),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(f, m)| (f.to_string(), m.to_string()))
                .collect::<Vec<_>>()
        );
        // Stored already: only parsed, so the policy keeps updating.
        assert!(messages(p.clone(), Some(&p)).is_empty());
        // With a paramKind and variables, each declared as kube declares them.
        let p = policy(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [
            {"name": "n", "expression": "size(object.spec.items)"},
            {"name": "big", "expression": "variables.n > 3"},
            {"name": "later", "expression": "variables.after"}
        ],
        "matchConditions": [{"name": "m", "expression": "variables.n > 0"}],
        "validations": [
            {"expression": "!variables.big || params.allowBig == 'true'", "messageExpression": "'too many: ' + string(variables.n)"},
            {"expression": "variables.big.size() > 0"}
        ]}));
        let got = messages(p, None);
        let fields: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.matchConditions[0].expression",
                "spec.variables[2].expression",
                "spec.validations[1].expression"
            ],
            "{got:?}"
        );
        assert!(
            got[0].1.contains("undeclared reference to 'variables'"),
            "{got:?}"
        );
        assert!(got[1].1.contains("undefined field 'after'"), "{got:?}");
        assert!(
            got[2]
                .1
                .contains("found no matching overload for 'size' applied to 'bool.()'"),
            "{got:?}"
        );
    }

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

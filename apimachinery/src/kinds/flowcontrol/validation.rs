//! kube's flowcontrol.apiserver.k8s.io/v1 defaults (`SetDefaults_*`) and
//! `ValidateFlowSchema` / `ValidatePriorityLevelConfiguration` with their
//! field paths and messages, including the rule that the mandatory objects
//! (`exempt` and `catch-all` of each kind) keep their fixed specs.
//!
//! Bad values are shown as kube shows them: numbers and strings plainly,
//! string lists as JSON, internal structs as Go's `%#v` (a set pointer as
//! `0xc000000000`, as elsewhere in this crate).

use serde_json::{json, Map, Value};

use crate::kinds::common::{default_field, existing_mut};
use crate::validation as v;
use crate::StatusCause;

const MAX_MATCHING_PRECEDENCE: i64 = 10_000;
const MAX_QUEUES: i64 = 10_000_000;
/// shufflesharding's `MaxHashBits`.
const MAX_HASH_BITS: f64 = 60.0;
const ROUNDTRIP_ANNOTATION: &str = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";
/// kube's supported verbs, sorted as `sets.List` prints them.
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NS_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

// ---------------------------------------------------------------------------
// Defaults (flowcontrol/v1 `SetDefaults_*`).

pub fn flow_schema_defaults(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        if spec.get("matchingPrecedence").and_then(Value::as_i64) == Some(0)
            || spec.get("matchingPrecedence").is_none_or(Value::is_null)
        {
            spec.insert("matchingPrecedence".into(), json!(1000));
        }
    }
}

pub fn priority_level_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(exempt) = existing_mut(spec, "exempt") {
        default_field(exempt, "nominalConcurrencyShares", json!(0));
        default_field(exempt, "lendablePercent", json!(0));
    }
    if let Some(limited) = existing_mut(spec, "limited") {
        default_field(limited, "nominalConcurrencyShares", json!(30));
        default_field(limited, "lendablePercent", json!(0));
        let queuing =
            existing_mut(limited, "limitResponse").and_then(|lr| existing_mut(lr, "queuing"));
        if let Some(q) = queuing {
            for (key, value) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
                if q.get(key).and_then(Value::as_i64).unwrap_or(0) == 0 {
                    q.insert(key.into(), json!(value));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Reading the JSON as kube's internal types see it.

fn int(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A pointer field: present and not null.
fn some<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|s| s.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The spec as `apiequality.Semantic.DeepEqual` compares it: a null or
/// zero-valued non-pointer field (`""`, `false`, an empty list) is the
/// same as an absent one.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| {
                    !matches!(x, Value::Null | Value::Bool(false))
                        && x.as_str() != Some("")
                        && x.as_array().is_none_or(|a| !a.is_empty())
                })
                .map(|(k, x)| (k.clone(), semantic(x)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------
// Go's `%#v` of the internal structs a message shows.

fn go_ptr(ty: &str, set: bool) -> String {
    if set {
        format!("(*flowcontrol.{ty})(0xc000000000)")
    } else {
        format!("(*flowcontrol.{ty})(nil)")
    }
}

fn go_strings(v: &Value, key: &str) -> String {
    match v.get(key).and_then(Value::as_array) {
        None => "[]string(nil)".into(),
        Some(_) => {
            let quoted: Vec<String> = strings(v, key).into_iter().map(v::go_quote).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
    }
}

fn go_list(v: &Value, key: &str, ty: &str, each: fn(&Value) -> String) -> String {
    match v.get(key).and_then(Value::as_array) {
        None => format!("[]flowcontrol.{ty}(nil)"),
        Some(a) => {
            let shown: Vec<String> = a.iter().map(each).collect();
            format!("[]flowcontrol.{ty}{{{}}}", shown.join(", "))
        }
    }
}

fn go_subject(s: &Value) -> String {
    format!(
        "flowcontrol.Subject{{Kind:{}, User:{}, Group:{}, ServiceAccount:{}}}",
        v::go_quote(text(s, "kind")),
        go_ptr("UserSubject", some(s, "user").is_some()),
        go_ptr("GroupSubject", some(s, "group").is_some()),
        go_ptr("ServiceAccountSubject", some(s, "serviceAccount").is_some()),
    )
}

fn go_resource_rule(r: &Value) -> String {
    format!(
        "flowcontrol.ResourcePolicyRule{{Verbs:{}, APIGroups:{}, Resources:{}, ClusterScope:{}, Namespaces:{}}}",
        go_strings(r, "verbs"),
        go_strings(r, "apiGroups"),
        go_strings(r, "resources"),
        r.get("clusterScope").and_then(Value::as_bool).unwrap_or(false),
        go_strings(r, "namespaces"),
    )
}

fn go_non_resource_rule(r: &Value) -> String {
    format!(
        "flowcontrol.NonResourcePolicyRule{{Verbs:{}, NonResourceURLs:{}}}",
        go_strings(r, "verbs"),
        go_strings(r, "nonResourceURLs"),
    )
}

fn go_rule(r: &Value) -> String {
    format!(
        "flowcontrol.PolicyRulesWithSubjects{{Subjects:{}, ResourceRules:{}, NonResourceRules:{}}}",
        go_list(r, "subjects", "Subject", go_subject),
        go_list(r, "resourceRules", "ResourcePolicyRule", go_resource_rule),
        go_list(
            r,
            "nonResourceRules",
            "NonResourcePolicyRule",
            go_non_resource_rule
        ),
    )
}

fn go_flow_schema_spec(spec: &Value) -> String {
    let pl = spec
        .pointer("/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    format!(
        "flowcontrol.FlowSchemaSpec{{PriorityLevelConfiguration:flowcontrol.PriorityLevelConfigurationReference{{Name:{}}}, MatchingPrecedence:{}, DistinguisherMethod:{}, Rules:{}}}",
        v::go_quote(pl),
        int(spec, "matchingPrecedence"),
        go_ptr("FlowDistinguisherMethod", some(spec, "distinguisherMethod").is_some()),
        go_list(spec, "rules", "PolicyRulesWithSubjects", go_rule),
    )
}

fn go_priority_level_spec(spec: &Value) -> String {
    format!(
        "flowcontrol.PriorityLevelConfigurationSpec{{Type:{}, Limited:{}, Exempt:{}}}",
        v::go_quote(text(spec, "type")),
        go_ptr(
            "LimitedPriorityLevelConfiguration",
            some(spec, "limited").is_some()
        ),
        go_ptr(
            "ExemptPriorityLevelConfiguration",
            some(spec, "exempt").is_some()
        ),
    )
}

// ---------------------------------------------------------------------------
// The mandatory objects' fixed specs (kube's `internalbootstrap`, defaults
// applied); the server's bootstrap writes the same.

fn every_request(subjects: Value) -> Value {
    json!([{
        "subjects": subjects,
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
            "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    }])
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn mandatory_flow_schema(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({
            "priorityLevelConfiguration": {"name": "exempt"},
            "matchingPrecedence": 1,
            "rules": every_request(json!([group("system:masters")])),
        })),
        "catch-all" => Some(json!({
            "priorityLevelConfiguration": {"name": "catch-all"},
            "matchingPrecedence": 10000,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": every_request(json!([
                group("system:unauthenticated"),
                group("system:authenticated"),
            ])),
        })),
        _ => None,
    }
}

/// The fixed spec of a mandatory level; `exempt`'s `spec.exempt` is the
/// administrator's, so it is left out of both sides.
fn mandatory_priority_level(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({"type": "Exempt"})),
        "catch-all" => Some(json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": 5, "lendablePercent": 0,
            "limitResponse": {"type": "Reject"}}})),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// FlowSchema.

pub fn validate_flow_schema(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    flow_schema_spec(name, spec, &mut errs);
    if let Some(fixed) = mandatory_flow_schema(name) {
        if semantic(spec) != semantic(&fixed) {
            errs.push(v::invalid_rendered(
                "spec",
                &go_flow_schema_spec(spec),
                &format!("spec of '{name}' must equal the fixed value"),
            ));
        }
    }
    conditions(obj, &mut errs);
    errs
}

/// `ValidateFlowSchemaStatusUpdate` and its PriorityLevelConfiguration twin.
pub fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    conditions(obj, &mut errs);
    errs
}

fn conditions(obj: &Value, errs: &mut Vec<StatusCause>) {
    let list = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut seen = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let ty = text(c, "type");
        let field = format!("status.conditions[{i}].type");
        if seen.contains(&ty) {
            errs.push(v::duplicate(&field, ty));
        }
        seen.push(ty);
        if ty.is_empty() {
            errs.push(v::required(&field, "must not be empty"));
        }
    }
}

fn flow_schema_spec(name: &str, spec: &Value, errs: &mut Vec<StatusCause>) {
    let precedence = int(spec, "matchingPrecedence");
    let field = "spec.matchingPrecedence";
    if precedence <= 0 {
        errs.push(v::invalid_json(
            field,
            &json!(precedence),
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(v::invalid_json(
            field,
            &json!(precedence),
            &format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != "exempt" {
        errs.push(v::invalid_json(
            field,
            &json!(precedence),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = some(spec, "distinguisherMethod") {
        let ty = text(method, "type");
        if !matches!(ty, "ByNamespace" | "ByUser") {
            errs.push(v::not_supported_rendered(
                "spec.distinguisherMethod.type",
                &format!(
                    "flowcontrol.FlowDistinguisherMethod{{Type:{}}}",
                    v::go_quote(ty)
                ),
                &["ByNamespace", "ByUser"],
            ));
        }
    }
    let level = spec
        .pointer("/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let field = "spec.priorityLevelConfiguration.name";
    if level.is_empty() {
        errs.push(v::required(field, "must reference a priority level"));
    } else {
        for msg in v::name_is_dns_subdomain(level, false) {
            errs.push(v::invalid(field, level, &msg));
        }
    }
    for (i, rule) in items(spec, "rules").iter().enumerate() {
        policy_rule(rule, &format!("spec.rules[{i}]"), errs);
    }
}

fn policy_rule(rule: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let subjects = items(rule, "subjects");
    if subjects.is_empty() {
        errs.push(v::required(
            &format!("{path}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, s) in subjects.iter().enumerate() {
        subject(s, &format!("{path}.subjects[{i}]"), errs);
    }
    let resource_rules = items(rule, "resourceRules");
    let non_resource_rules = items(rule, "nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errs.push(v::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        resource_rule(r, &format!("{path}.resourceRules[{i}]"), errs);
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        non_resource_rule(r, &format!("{path}.nonResourceRules[{i}]"), errs);
    }
}

fn subject(s: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let forbid = |errs: &mut Vec<StatusCause>, key: &str, kind: &str| {
        if some(s, key).is_some() {
            errs.push(v::forbidden(
                &format!("{path}.{key}"),
                &format!("{key} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    };
    match text(s, "kind") {
        "ServiceAccount" => {
            service_account_subject(some(s, "serviceAccount"), path, errs);
            forbid(errs, "user", "User");
            forbid(errs, "group", "Group");
        }
        "User" => {
            named_subject(some(s, "user"), path, "user", "User", errs);
            forbid(errs, "serviceAccount", "ServiceAccount");
            forbid(errs, "group", "Group");
        }
        "Group" => {
            named_subject(some(s, "group"), path, "group", "Group", errs);
            forbid(errs, "serviceAccount", "ServiceAccount");
            forbid(errs, "user", "User");
        }
        other => errs.push(v::not_supported(
            &format!("{path}.kind"),
            other,
            &["Group", "ServiceAccount", "User"],
        )),
    }
}

fn named_subject(
    subject: Option<&Value>,
    path: &str,
    key: &str,
    kind: &str,
    errs: &mut Vec<StatusCause>,
) {
    let field = format!("{path}.{key}");
    match subject {
        None => errs.push(v::required(
            &field,
            &format!("{key} is required when subject kind is '{kind}'"),
        )),
        Some(s) if text(s, "name").is_empty() => {
            errs.push(v::required(&format!("{field}.name"), ""))
        }
        Some(_) => {}
    }
}

fn service_account_subject(sa: Option<&Value>, path: &str, errs: &mut Vec<StatusCause>) {
    let field = format!("{path}.serviceAccount");
    let Some(sa) = sa else {
        errs.push(v::required(
            &field,
            "serviceAccount is required when subject kind is 'ServiceAccount'",
        ));
        return;
    };
    let name = text(sa, "name");
    if name.is_empty() {
        errs.push(v::required(&format!("{field}.name"), ""));
    } else if name != "*" {
        for msg in v::name_is_dns_subdomain(name, false) {
            errs.push(v::invalid(&format!("{field}.name"), name, &msg));
        }
    }
    let namespace = text(sa, "namespace");
    if namespace.is_empty() {
        errs.push(v::required(
            &format!("{field}.namespace"),
            "must specify namespace for service account",
        ));
    } else {
        for msg in v::name_is_dns_label(namespace, false) {
            errs.push(v::invalid(&format!("{field}.namespace"), namespace, &msg));
        }
    }
}

/// The `verbs` of a rule: present, `*` alone, or kube's verbs.
fn verbs(rule: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let verbs = strings(rule, "verbs");
    let field = format!("{path}.verbs");
    if verbs.is_empty() {
        errs.push(v::required(&field, "verbs must contain at least one value"));
    } else if verbs.contains(&"*") {
        if verbs.len() > 1 {
            errs.push(v::invalid_rendered(
                &field,
                &v::go_slice("string", verbs),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs.iter().all(|verb| VERBS.contains(verb)) {
        errs.push(v::not_supported_rendered(
            &field,
            &v::go_slice("string", verbs),
            VERBS,
        ));
    }
}

fn non_resource_rule(rule: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    verbs(rule, path, errs);
    let urls = strings(rule, "nonResourceURLs");
    let field = format!("{path}.nonResourceURLs");
    if urls.is_empty() {
        errs.push(v::required(
            &field,
            "nonResourceURLs must contain at least one value",
        ));
    } else if urls.contains(&"*") {
        if urls.len() > 1 {
            errs.push(v::invalid_rendered(
                &field,
                &v::go_slice("string", urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            if let Some(msg) = non_resource_url_problem(url) {
                errs.push(v::invalid(&format!("{field}[{i}]"), url, msg));
            }
        }
    }
}

/// kube's `ValidateNonResourceURLPath`.
fn non_resource_url_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return Some("must start with slash");
    }
    if path.contains(' ') {
        return Some("must not contain white-space");
    }
    if path.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = path.matches('*').count();
    if stars > 1 || (stars == 1 && !path.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

fn resource_rule(rule: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    verbs(rule, path, errs);
    for (key, what) in [("apiGroups", "api group"), ("resources", "resource")] {
        let list = strings(rule, key);
        let field = format!("{path}.{key}");
        if list.is_empty() {
            errs.push(v::required(
                &field,
                &format!("resource rules must supply at least one {what}"),
            ));
        } else if list.len() > 1 && list.contains(&"*") {
            errs.push(v::invalid_rendered(
                &field,
                &v::go_slice("string", list),
                &format!("if '*' is present, must not specify other {what}s"),
            ));
        }
    }
    let namespaces = strings(rule, "namespaces");
    let cluster_scope = rule
        .get("clusterScope")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let field = format!("{path}.namespaces");
    if namespaces.is_empty() && !cluster_scope {
        errs.push(v::required(
            &field,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if namespaces.contains(&"*") {
        if namespaces.len() > 1 {
            errs.push(v::invalid_rendered(
                &field,
                &v::go_slice("string", namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            for msg in v::name_is_dns_label(ns, false) {
                errs.push(v::invalid(
                    &format!("{field}[{i}]"),
                    ns,
                    &format!("{NS_INTRO}{msg}"),
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// PriorityLevelConfiguration.

pub fn validate_priority_level(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let annotated = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(ROUNDTRIP_ANNOTATION));
    if annotated {
        errs.push(v::forbidden(
            "metadata.annotations",
            &format!("annotation '{ROUNDTRIP_ANNOTATION}' is forbidden"),
        ));
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    priority_level_spec(name, spec, &mut errs);
    if let Some(fixed) = mandatory_priority_level(name) {
        let mut have = semantic(spec);
        if name == "exempt" {
            if let Some(m) = have.as_object_mut() {
                m.remove("exempt");
            }
        }
        if have != fixed {
            let detail = if name == "exempt" {
                format!(
                    "spec of '{name}' except the 'spec.exempt' field must equal the fixed value"
                )
            } else {
                format!("spec of '{name}' must equal the fixed value")
            };
            errs.push(v::invalid_rendered(
                "spec",
                &go_priority_level_spec(spec),
                &detail,
            ));
        }
    }
    conditions(obj, &mut errs);
    errs
}

fn priority_level_spec(name: &str, spec: &Value, errs: &mut Vec<StatusCause>) {
    let ty = text(spec, "type");
    if (name == "exempt") != (ty == "Exempt") {
        errs.push(v::invalid(
            "spec.type",
            ty,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    let limited = some(spec, "limited");
    let exempt = some(spec, "exempt");
    match ty {
        "Exempt" => {
            if limited.is_some() {
                errs.push(v::forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(e) = exempt {
                shares_and_lendable(e, "spec.exempt", errs);
            }
        }
        "Limited" => {
            if exempt.is_some() {
                errs.push(v::forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match limited {
                None => errs.push(v::required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(l) => limited_level(l, errs),
            }
        }
        other => errs.push(v::not_supported("spec.type", other, &["Exempt", "Limited"])),
    }
}

/// `nominalConcurrencyShares` ≥ 0 and `lendablePercent` in 0..=100 (of
/// `spec.exempt`; `spec.limited` checks the same and more).
fn shares_and_lendable(level: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    if let Some(n) = some(level, "nominalConcurrencyShares").and_then(Value::as_i64) {
        if n < 0 {
            errs.push(v::invalid_json(
                &format!("{path}.nominalConcurrencyShares"),
                &json!(n),
                "must be a non-negative integer",
            ));
        }
    }
    if path == "spec.limited" {
        limit_response(
            level.get("limitResponse").unwrap_or(&Value::Null),
            "spec.limited.limitResponse",
            errs,
        );
    }
    if let Some(p) = some(level, "lendablePercent").and_then(Value::as_i64) {
        if !(0..=100).contains(&p) {
            errs.push(v::invalid_json(
                &format!("{path}.lendablePercent"),
                &json!(p),
                &v::inclusive_range_error(0, 100),
            ));
        }
    }
}

fn limited_level(limited: &Value, errs: &mut Vec<StatusCause>) {
    shares_and_lendable(limited, "spec.limited", errs);
    if let Some(b) = some(limited, "borrowingLimitPercent").and_then(Value::as_i64) {
        if b < 0 {
            errs.push(v::invalid_json(
                "spec.limited.borrowingLimitPercent",
                &json!(b),
                "if specified, must be a non-negative integer",
            ));
        }
    }
}

fn limit_response(lr: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let queuing = some(lr, "queuing");
    let field = format!("{path}.queuing");
    match text(lr, "type") {
        "Reject" => {
            if queuing.is_some() {
                errs.push(v::forbidden(
                    &field,
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match queuing {
            None => errs.push(v::required(
                &field,
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(q) => queuing_config(q, &field, errs),
        },
        other => errs.push(v::not_supported(
            &format!("{path}.type"),
            other,
            &["Queue", "Reject"],
        )),
    }
}

/// shufflesharding's `RequiredEntropyBits`: ⌈log₂(deck) × hand⌉.
fn required_entropy_bits(deck: i64, hand: i64) -> f64 {
    ((deck as f64).log2() * hand as f64).ceil()
}

fn queuing_config(q: &Value, path: &str, errs: &mut Vec<StatusCause>) {
    let bad = |errs: &mut Vec<StatusCause>, key: &str, n: i64, detail: &str| {
        errs.push(v::invalid_json(&format!("{path}.{key}"), &json!(n), detail));
    };
    let limit = int(q, "queueLengthLimit");
    if limit <= 0 {
        bad(errs, "queueLengthLimit", limit, "must be positive");
    }
    let queues = int(q, "queues");
    if queues <= 0 {
        bad(errs, "queues", queues, "must be positive");
    } else if queues > MAX_QUEUES {
        bad(
            errs,
            "queues",
            queues,
            &format!("must not be greater than {MAX_QUEUES}"),
        );
    }
    let hand = int(q, "handSize");
    if hand <= 0 {
        bad(errs, "handSize", hand, "must be positive");
    } else if hand > queues {
        bad(
            errs,
            "handSize",
            hand,
            &format!("should not be greater than queues ({queues})"),
        );
    } else if required_entropy_bits(queues, hand) > MAX_HASH_BITS {
        bad(
            errs,
            "handSize",
            hand,
            &format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        );
    }
}

#[cfg(test)]
mod tests;

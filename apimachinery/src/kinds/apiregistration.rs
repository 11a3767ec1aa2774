//! apiregistration.k8s.io: kube-aggregator's `ValidateAPIService` and
//! `ValidateAPIServiceStatus` (its field paths and messages), and the
//! APIService's Table columns as its table convertor prints them
//! (`Service` is `Local` or `namespace/name`; `Available` is the
//! condition's status, with its reason when it is not `True`).
//!
//! The name's path-segment rule is the registry row's (`NameRule::
//! PathSegment`); the rule that it is `<version>.<group>` is here.

use base64::Engine;
use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static API_SERVICE: KindRules = KindRules {
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: API_SERVICE_COLUMNS,
    ..KindRules::NONE
};

/// kube's `ValidateAPIService`; an update checks the same (with the
/// generic metadata update rules).
fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let text = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or("");
    let (group, version) = (text("group"), text("version"));
    // kube's name function: the path-segment rule first (reported by the
    // generic metadata checks), then the name must be version.group.
    let name = print::str_at(obj, "/metadata/name", "");
    let required_name = format!("{version}.{group}");
    if !name.is_empty() && v::is_path_segment_name(name).is_empty() && name != required_name {
        errs.push(v::invalid(
            "metadata.name",
            name,
            &format!(
                "must be `spec.version+\".\"+spec.group`: {}",
                v::go_quote(&required_name)
            ),
        ));
    }
    // The legacy core group is the one APIService without a group.
    if group.is_empty() && version != "v1" {
        errs.push(v::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for msg in v::is_dns1123_subdomain(group) {
            errs.push(v::invalid("spec.group", group, &msg));
        }
    }
    for msg in v::is_dns1035_label(version) {
        errs.push(v::invalid("spec.version", version, &msg));
    }
    let int = |key: &str| spec.get(key).and_then(Value::as_i64).unwrap_or(0);
    let group_priority = int("groupPriorityMinimum");
    if !(1..=20000).contains(&group_priority) {
        errs.push(v::invalid_json(
            "spec.groupPriorityMinimum",
            &json!(group_priority),
            "must be positive and less than 20000",
        ));
    }
    let version_priority = int("versionPriority");
    if !(1..=1000).contains(&version_priority) {
        errs.push(v::invalid_json(
            "spec.versionPriority",
            &json!(version_priority),
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle = ca_bundle_len(spec.get("caBundle"));
    let insecure = spec
        .get("insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(service) = spec.get("service").filter(|s| !s.is_null()) else {
        if ca_bundle != 0 {
            errs.push(v::invalid(
                "spec.caBundle",
                &format!("{ca_bundle} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(v::invalid_json(
                "spec.insecureSkipTLSVerify",
                &json!(true),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    for key in ["namespace", "name"] {
        if service
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(v::required(&format!("spec.service.{key}"), ""));
        }
    }
    if insecure && ca_bundle > 0 {
        errs.push(v::invalid_json(
            "spec.insecureSkipTLSVerify",
            &json!(true),
            "may not be true if caBundle is present",
        ));
    }
    errs
}

/// The length in bytes of `spec.caBundle` (base64 in JSON; kube counts
/// the decoded bytes).
fn ca_bundle_len(value: Option<&Value>) -> usize {
    let Some(text) = value.and_then(Value::as_str) else {
        return 0;
    };
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map(|b| b.len())
        .unwrap_or(text.len() / 4 * 3)
}

/// kube's `ValidateAPIServiceStatus`: each condition's status is True,
/// False or Unknown.
fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    conditions
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let status = c.get("status").and_then(Value::as_str).unwrap_or("");
            (!matches!(status, "True" | "False" | "Unknown")).then(|| {
                v::not_supported(
                    &format!("status.conditions[{i}].status"),
                    status,
                    &["True", "False", "Unknown"],
                )
            })
        })
        .collect()
}

fn service(obj: &Value, _: &print::PrintContext) -> Value {
    match obj.pointer("/spec/service").filter(|s| !s.is_null()) {
        Some(s) => json!(format!(
            "{}/{}",
            s.get("namespace").and_then(Value::as_str).unwrap_or(""),
            s.get("name").and_then(Value::as_str).unwrap_or("")
        )),
        None => json!("Local"),
    }
}

fn available(obj: &Value, _: &print::PrintContext) -> Value {
    let condition = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
    json!(match condition {
        None => "Unknown".to_string(),
        Some(c) if c["status"] == "True" => "True".to_string(),
        Some(c) => format!(
            "{} ({})",
            c["status"].as_str().unwrap_or(""),
            c["reason"].as_str().unwrap_or("")
        ),
    })
}

const API_SERVICE_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Service",
        "string",
        "The reference to the service that hosts this API endpoint.",
        0,
        service,
    ),
    column(
        "Available",
        "string",
        "Whether this service is available.",
        0,
        available,
    ),
    AGE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_and_availability_cells() {
        let ctx = print::PrintContext { now: 0 };
        let local = json!({"spec": {}, "status": {"conditions": [
            {"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(service(&local, &ctx), json!("Local"));
        assert_eq!(available(&local, &ctx), json!("True"));
        let remote = json!({"spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [
                {"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(service(&remote, &ctx), json!("kube-system/metrics-server"));
        assert_eq!(available(&remote, &ctx), json!("False (MissingEndpoints)"));
        assert_eq!(available(&json!({}), &ctx), json!("Unknown"));
    }

    fn api_service(name: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec})
    }

    fn remote(extra: Value) -> Value {
        let mut spec = json!({"group": "metrics.k8s.io", "version": "v1beta1",
            "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "kube-system", "name": "metrics-server"}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    }

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn kubes_api_service_rules_and_messages() {
        let bundle = base64::engine::general_purpose::STANDARD.encode([0u8; 10]);
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("v1beta1.metrics.k8s.io", remote(json!({})), vec![]),
            // The legacy core group: empty group, version v1, name "v1.".
            ("v1.", json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}), vec![]),
            ("v2.", json!({"version": "v2", "groupPriorityMinimum": 18000, "versionPriority": 1}),
                vec!["spec.group: Required value: only v1 may have an empty group and it better be legacy kube"]),
            ("metrics", remote(json!({})),
                vec!["metadata.name: Invalid value: \"metrics\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\""]),
            // A name that is not a path segment is the generic check's.
            ("a/b", remote(json!({})), vec![]),
            ("v1beta1.metrics.k8s.io", remote(json!({"groupPriorityMinimum": 0, "versionPriority": 1001})),
                vec!["spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                     "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"]),
            ("v1beta1.metrics.k8s.io", remote(json!({"groupPriorityMinimum": 20001, "versionPriority": -1})),
                vec!["spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
                     "spec.versionPriority: Invalid value: -1: must be positive and less than 1000"]),
            ("v1beta1.metrics.k8s.io", remote(json!({"groupPriorityMinimum": 20000, "versionPriority": 1000})), vec![]),
            ("v1beta1.metrics.k8s.io", remote(json!({"caBundle": bundle, "insecureSkipTLSVerify": true})),
                vec!["spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"]),
            ("v1beta1.metrics.k8s.io", remote(json!({"insecureSkipTLSVerify": true})), vec![]),
            ("v1beta1.metrics.k8s.io", remote(json!({"service": {"port": 443}})),
                vec!["spec.service.namespace: Required value", "spec.service.name: Required value"]),
            ("v1beta1.metrics.k8s.io", json!({"group": "metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100, "caBundle": bundle, "insecureSkipTLSVerify": true}),
                vec!["spec.caBundle: Invalid value: \"10 bytes\": local APIServices may not have a caBundle",
                     "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"]),
            ("V1.Metrics", remote(json!({"group": "Metrics", "version": "V1"})),
                vec!["spec.group: Invalid value: \"Metrics\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                     "spec.version: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                msgs(&api_service(name, spec.clone())),
                want,
                "{name} {spec}"
            );
        }
    }

    #[test]
    fn condition_statuses_are_kubes_three() {
        let obj = json!({"status": {"conditions": [
            {"type": "Available", "status": "True"}, {"type": "Available", "status": "Maybe"}]}});
        let got: Vec<String> = validate_status(&obj, Some(&obj))
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(got, ["status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""]);
    }
}

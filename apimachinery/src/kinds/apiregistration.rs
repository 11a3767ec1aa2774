//! apiregistration.k8s.io: the APIService's Table columns, as
//! kube-aggregator's table convertor prints them (`Service` is `Local` or
//! `namespace/name`; `Available` is the condition's status, with its
//! reason when it is not `True`).

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;

pub static API_SERVICE: KindRules = KindRules {
    columns: API_SERVICE_COLUMNS,
    ..KindRules::NONE
};

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
}

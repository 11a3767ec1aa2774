//! flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
//! PriorityLevelConfigurations: kube's defaults and validation
//! (`validation.rs`) and its Table columns (what `kubectl get` prints). The column descriptions are this project's own wording. kube's
//! printer also orders a FlowSchema list by matching precedence; rows here
//! come in the list's (name) order.

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, AGE, NAME};
use crate::kinds::KindRules;

mod validation;

pub static FLOW_SCHEMA: KindRules = KindRules {
    defaults: Some(validation::flow_schema_defaults),
    validate: Some(validation::validate_flow_schema),
    validate_status: Some(validation::validate_status),
    columns: FLOW_SCHEMA_COLUMNS,
    ..KindRules::NONE
};

pub static PRIORITY_LEVEL_CONFIGURATION: KindRules = KindRules {
    defaults: Some(validation::priority_level_defaults),
    validate: Some(validation::validate_priority_level),
    validate_status: Some(validation::validate_status),
    columns: PRIORITY_LEVEL_COLUMNS,
    ..KindRules::NONE
};

const NONE: &str = "<none>";

/// The value at `pointer`, or `<none>` when absent.
fn or_none(obj: &Value, pointer: &str) -> Value {
    obj.pointer(pointer).cloned().unwrap_or_else(|| json!(NONE))
}

/// The status of the schema's `Dangling` condition, `?` without one (no
/// controller has looked at it).
fn missing_priority_level(obj: &Value, _: &print::PrintContext) -> Value {
    let dangling = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"));
    json!(dangling.and_then(|c| c["status"].as_str()).unwrap_or("?"))
}

const FLOW_SCHEMA_COLUMNS: &[Column] = &[
    NAME,
    column(
        "PriorityLevel",
        "string",
        "The PriorityLevelConfiguration the matching requests are assigned to.",
        0,
        |o, _| {
            json!(print::str_at(
                o,
                "/spec/priorityLevelConfiguration/name",
                ""
            ))
        },
    ),
    column(
        "MatchingPrecedence",
        "string",
        "The order in which schemas are tried against a request: the lowest number first.",
        0,
        |o, _| json!(print::int_at(o, "/spec/matchingPrecedence")),
    ),
    column(
        "DistinguisherMethod",
        "string",
        "How matching requests are split into flows (by user or by namespace); none: one flow.",
        0,
        |o, _| json!(print::str_at(o, "/spec/distinguisherMethod/type", NONE)),
    ),
    AGE,
    column(
        "MissingPL",
        "string",
        "Whether the referenced PriorityLevelConfiguration is missing or unusable.",
        0,
        missing_priority_level,
    ),
];

/// A cell of a Limited level (`<none>` for other levels); `field` is under
/// `spec.limited`.
fn limited(obj: &Value, field: &str) -> Value {
    match obj.pointer("/spec/limited") {
        Some(l) => l.pointer(field).cloned().unwrap_or(Value::Null),
        None => json!(NONE),
    }
}

/// A cell of a Limited level's queuing configuration, `<none>` without
/// one.
fn queuing(obj: &Value, field: &str) -> Value {
    or_none(obj, &format!("/spec/limited/limitResponse/queuing/{field}"))
}

const PRIORITY_LEVEL_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Type",
        "string",
        "Exempt (requests are never limited) or Limited.",
        0,
        |o, _| json!(print::str_at(o, "/spec/type", "")),
    ),
    column(
        "NominalConcurrencyShares",
        "string",
        "The level's share of the server's concurrency limit.",
        0,
        |o, _| limited(o, "/nominalConcurrencyShares"),
    ),
    column(
        "Queues",
        "string",
        "The number of queues of the level.",
        0,
        |o, _| queuing(o, "queues"),
    ),
    column(
        "HandSize",
        "string",
        "The number of queues a flow is shuffle-sharded onto.",
        0,
        |o, _| queuing(o, "handSize"),
    ),
    column(
        "QueueLengthLimit",
        "string",
        "The most requests one queue may hold.",
        0,
        |o, _| queuing(o, "queueLengthLimit"),
    ),
    AGE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;

    fn cells(columns: &[Column], obj: &Value) -> Vec<Value> {
        let ctx = PrintContext { now: 0 };
        columns
            .iter()
            .filter(|c| c.name != "Age")
            .map(|c| (c.cell)(obj, &ctx))
            .collect()
    }

    #[test]
    fn flow_schema_columns() {
        let fs = json!({"metadata": {"name": "catch-all"}, "spec": {
            "priorityLevelConfiguration": {"name": "catch-all"},
            "matchingPrecedence": 10000,
            "distinguisherMethod": {"type": "ByUser"}}});
        assert_eq!(
            cells(FLOW_SCHEMA_COLUMNS, &fs),
            [
                json!("catch-all"),
                json!("catch-all"),
                json!(10000),
                json!("ByUser"),
                json!("?")
            ]
        );
        let fs = json!({"metadata": {"name": "exempt"}, "spec": {
            "priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        assert_eq!(
            cells(FLOW_SCHEMA_COLUMNS, &fs),
            [
                json!("exempt"),
                json!("exempt"),
                json!(1),
                json!("<none>"),
                json!("False")
            ]
        );
    }

    #[test]
    fn priority_level_columns() {
        let exempt =
            json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt", "exempt": {}}});
        assert_eq!(
            cells(PRIORITY_LEVEL_COLUMNS, &exempt),
            [
                json!("exempt"),
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let reject = json!({"metadata": {"name": "catch-all"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
        assert_eq!(
            cells(PRIORITY_LEVEL_COLUMNS, &reject),
            [
                json!("catch-all"),
                json!("Limited"),
                json!(5),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let queue = json!({"metadata": {"name": "global-default"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 20, "limitResponse": {"type": "Queue", "queuing": {
                "queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            cells(PRIORITY_LEVEL_COLUMNS, &queue),
            [
                json!("global-default"),
                json!("Limited"),
                json!(20),
                json!(128),
                json!(6),
                json!(50)
            ]
        );
    }
}

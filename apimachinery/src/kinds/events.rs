//! events.k8s.io/v1 Events: kube validates them as core Events (with the
//! stricter rules of the new API: `ValidateEventCreate`) and prints them
//! with the event printer; field names differ from core/v1.

use serde_json::Value;

use crate::kinds::core::event::{self as core_event, Fields};
use crate::kinds::print::{column, Column, NAME};
use crate::kinds::{Conversion, KindRules};
use crate::validation as v;
use crate::StatusCause;

pub static EVENT: KindRules = KindRules {
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

/// One Event, two APIs: core/v1 and events.k8s.io/v1 Events are stored
/// once, as core/v1 (kube's `/registry/events`), and renamed on the way
/// (kube's `pkg/apis/events/v1` conversion): what one writes, the other
/// reads.
pub static EVENT_CONVERSION: Conversion = Conversion {
    storage_version: "v1",
    convert,
};

/// events.k8s.io/v1 field names against core/v1's; the other fields
/// (metadata, eventTime, series, action, reason, related, type,
/// reportingInstance) are the same in both.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// `obj` in `to` (`v1` or `events.k8s.io/v1`), keys renamed in place so
/// the order of the others holds.
fn convert(obj: &Value, to: &str) -> Value {
    let to_core = to == "v1";
    let Value::Object(m) = obj else {
        return obj.clone();
    };
    let rename = |k: &str| {
        RENAMED
            .iter()
            .find(|(new, old)| if to_core { *new == k } else { *old == k })
            .map(|(new, old)| if to_core { *old } else { *new })
    };
    let out = m
        .iter()
        .map(|(k, v)| match k.as_str() {
            "apiVersion" => (k.clone(), Value::String(to.to_string())),
            other => (rename(other).unwrap_or(other).to_string(), v.clone()),
        })
        .collect();
    Value::Object(out)
}

const FIELDS: Fields = Fields {
    involved: "regarding",
    message: "note",
    first: "deprecatedFirstTimestamp",
    last: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    source: "deprecatedSource",
    controller_name: "reportingController",
};

fn set(obj: &Value, key: &str) -> bool {
    obj.get(key).is_some_and(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_i64() != Some(0),
        Value::Object(m) => m
            .values()
            .any(|x| x.as_str().is_some_and(|s| !s.is_empty())),
        _ => true,
    })
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = core_event::legacy(obj, &FIELDS);
    if let Some(old) = old {
        // Only the series may change once an Event is written.
        for (key, name) in [
            ("regarding", "involvedObject"),
            ("reason", "reason"),
            ("note", "message"),
            ("type", "type"),
            ("action", "action"),
            ("eventTime", "eventTime"),
            ("reportingController", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ] {
            if obj.get(key) != old.get(key) {
                let shown = obj
                    .get(key)
                    .cloned()
                    .unwrap_or(Value::String(String::new()));
                errs.push(v::invalid_json(name, &shown, "field is immutable"));
            }
        }
        return errs;
    }
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            let n = series.get("count").cloned().unwrap_or(Value::from(0));
            errs.push(v::invalid_json("series.count", &n, "should be at least 2"));
        }
        if !set(series, "lastObservedTime") {
            errs.push(v::required("series.lastObservedTime", ""));
        }
    }
    if !set(obj, "eventTime") {
        errs.push(v::required("eventTime", ""));
    }
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != "Normal" && ty != "Warning" {
        errs.push(v::invalid("type", "", &format!("has invalid value: {ty}")));
    }
    for (key, name) in [
        (FIELDS.first, "firstTimestamp"),
        (FIELDS.last, "lastTimestamp"),
        (FIELDS.count, "count"),
        (FIELDS.source, "source"),
    ] {
        if set(obj, key) {
            errs.push(v::invalid(name, "", "needs to be unset"));
        }
    }
    errs
}

const COLUMNS: &[Column] = &[
    column("Last Seen", "string", "Time when this Event was last observed.", 0, |o, c| core_event::last_seen(o, c, &FIELDS)),
    column("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future", 0, core_event::type_cell),
    column("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0, core_event::reason_cell),
    column("Object", "string", "The object that this event is about.", 0, |o, _| core_event::object_cell(o, &FIELDS)),
    column("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].", 1, |o, _| core_event::subobject_cell(o, &FIELDS)),
    column("Source", "string", "The component reporting this event. Should be a short machine understandable string.", 1, |o, _| core_event::source_cell(o, &FIELDS)),
    column("Message", "string", "A human-readable description of the status of this operation.", 0, |o, _| core_event::message_cell(o, &FIELDS)),
    column("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1, |o, c| core_event::first_seen(o, c, &FIELDS)),
    column("Count", "string", "The number of times this event has occurred.", 1, |o, _| core_event::count_cell(o, &FIELDS)),
    Column { priority: 1, ..NAME },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::print::PrintContext;
    use serde_json::json;

    #[test]
    fn core_and_events_api_round_trip() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-11-24T10:00:00.000000Z",
            "regarding": {"kind": "Pod", "name": "web"}, "note": "pulled",
            "reason": "Pulled", "action": "Pull", "type": "Normal",
            "reportingController": "kubelet", "reportingInstance": "n1",
            "deprecatedCount": 2, "deprecatedSource": {"component": "kubelet"},
            "series": {"count": 3, "lastObservedTime": "2026-11-24T10:01:00.000000Z"}});
        let core = convert(&new, "v1");
        assert_eq!(
            core,
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "default"},
                "eventTime": "2026-11-24T10:00:00.000000Z",
                "involvedObject": {"kind": "Pod", "name": "web"}, "message": "pulled",
                "reason": "Pulled", "action": "Pull", "type": "Normal",
                "reportingComponent": "kubelet", "reportingInstance": "n1",
                "count": 2, "source": {"component": "kubelet"},
                "series": {"count": 3, "lastObservedTime": "2026-11-24T10:01:00.000000Z"}})
        );
        let keys: Vec<&String> = core.as_object().unwrap().keys().collect();
        assert_eq!(keys[4], "involvedObject", "renamed in place");
        assert_eq!(convert(&core, "events.k8s.io/v1"), new);
    }

    #[test]
    fn strict_rules_and_columns() {
        let ok = json!({"metadata": {"namespace": "a", "name": "e"}, "eventTime": "2024-01-01T00:00:00.000000Z",
            "regarding": {"namespace": "a", "kind": "Pod", "name": "p"}, "reportingController": "x.io/c",
            "reportingInstance": "i", "action": "Do", "reason": "R", "type": "Normal", "note": "n"});
        assert!(validate(&ok, None).is_empty());
        let mut bad = ok.clone();
        bad["type"] = json!("Odd");
        bad["deprecatedCount"] = json!(3);
        let got: Vec<String> = validate(&bad, None)
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(
            got,
            vec![
                "type: Invalid value: \"\": has invalid value: Odd",
                "count: Invalid value: \"\": needs to be unset",
            ]
        );
        let mut series = ok.clone();
        series["series"] = json!({"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"});
        assert!(validate(&series, Some(&ok)).is_empty());
        let mut moved = ok.clone();
        moved["reason"] = json!("Other");
        let got: Vec<String> = validate(&moved, Some(&ok))
            .iter()
            .map(v::cause_to_string)
            .collect();
        assert_eq!(
            got,
            vec!["reason: Invalid value: \"Other\": field is immutable"]
        );
        let ctx = PrintContext { now: 0 };
        assert_eq!((COLUMNS[3].cell)(&ok, &ctx), json!("pod/p"));
        assert_eq!((COLUMNS[5].cell)(&ok, &ctx), json!("x.io/c, i"));
        assert_eq!((COLUMNS[6].cell)(&ok, &ctx), json!("n"));
    }
}

//! core/v1 Events: kube's `ValidateEventCreate`/`ValidateEventUpdate` (the
//! legacy rules that v1 writes get) and the event printer, shared with
//! events.k8s.io/v1 (`kinds::events`), whose fields have other names.

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, PrintContext, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static RULES: KindRules = KindRules {
    validate: Some(validate),
    columns: COLUMNS,
    ..KindRules::NONE
};

/// Where an Event's fields live in one served version.
pub(crate) struct Fields {
    pub involved: &'static str,
    pub message: &'static str,
    pub first: &'static str,
    pub last: &'static str,
    pub count: &'static str,
    pub source: &'static str,
    /// The reporting controller's key (core/v1 calls it
    /// `reportingComponent`), which kube's messages name too.
    pub controller_name: &'static str,
}

pub(crate) const V1: Fields = Fields {
    involved: "involvedObject",
    message: "message",
    first: "firstTimestamp",
    last: "lastTimestamp",
    count: "count",
    source: "source",
    controller_name: "reportingComponent",
};

fn s<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

fn set(obj: &Value, key: &str) -> bool {
    obj.get(key)
        .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
}

/// kube's `legacyValidateEvent`, the rules every Event write gets.
pub(crate) fn legacy(obj: &Value, f: &Fields) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let ns = print::str_at(obj, "/metadata/namespace", "");
    let involved_ns = obj
        .get(f.involved)
        .and_then(|i| i.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mismatch = |errs: &mut Vec<StatusCause>| {
        errs.push(v::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        ))
    };
    if !set(obj, "eventTime") {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                mismatch(&mut errs);
            }
        } else if ns != involved_ns {
            mismatch(&mut errs);
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            mismatch(&mut errs);
        }
        let controller = s(obj, f.controller_name);
        if controller.is_empty() {
            errs.push(v::required(f.controller_name, ""));
        }
        for msg in v::is_qualified_name(controller) {
            errs.push(v::invalid(f.controller_name, controller, &msg));
        }
        let limit =
            |errs: &mut Vec<StatusCause>, field: &str, value: &str, max: usize, req: bool| {
                if req && value.is_empty() {
                    errs.push(v::required(field, ""));
                }
                if value.len() > max {
                    errs.push(v::invalid(
                        field,
                        "",
                        &format!("can have at most {max} characters"),
                    ));
                }
            };
        limit(
            &mut errs,
            "reportingInstance",
            s(obj, "reportingInstance"),
            128,
            true,
        );
        limit(&mut errs, "action", s(obj, "action"), 128, true);
        limit(&mut errs, "reason", s(obj, "reason"), 128, true);
        limit(&mut errs, "message", s(obj, f.message), 1024, false);
    }
    for msg in v::is_dns1123_subdomain(ns) {
        errs.push(v::invalid("namespace", ns, &msg));
    }
    errs
}

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    legacy(obj, &V1)
}

// ---------------------------------------------------------------------------
// Printer.

const LAST_SEEN: &str = "Time when this Event was last observed.";

pub(crate) const COLUMNS: &[Column] = &[
    column("Last Seen", "string", LAST_SEEN, 0, |o, c| last_seen(o, c, &V1)),
    column("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future", 0, type_cell),
    column("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0, reason_cell),
    column("Object", "string", "The object that this event is about.", 0, |o, _| object_cell(o, &V1)),
    column("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].", 1, |o, _| subobject_cell(o, &V1)),
    column("Source", "string", "The component reporting this event. Should be a short machine understandable string.", 1, |o, _| source_cell(o, &V1)),
    column("Message", "string", "A human-readable description of the status of this operation.", 0, |o, _| message_cell(o, &V1)),
    column("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1, |o, c| first_seen(o, c, &V1)),
    column("Count", "string", "The number of times this event has occurred.", 1, |o, _| count_cell(o, &V1)),
    Column { priority: 1, ..NAME },
];

pub(crate) fn first_seen_str(obj: &Value, ctx: &PrintContext, f: &Fields) -> String {
    if set(obj, f.first) {
        print::since(obj.get(f.first), ctx)
    } else {
        print::since(obj.get("eventTime"), ctx)
    }
}

pub(crate) fn first_seen(obj: &Value, ctx: &PrintContext, f: &Fields) -> Value {
    Value::String(first_seen_str(obj, ctx, f))
}

pub(crate) fn last_seen(obj: &Value, ctx: &PrintContext, f: &Fields) -> Value {
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        return Value::String(print::since(series.get("lastObservedTime"), ctx));
    }
    if set(obj, f.last) {
        Value::String(print::since(obj.get(f.last), ctx))
    } else {
        Value::String(first_seen_str(obj, ctx, f))
    }
}

pub(crate) fn type_cell(obj: &Value, _: &PrintContext) -> Value {
    json!(s(obj, "type"))
}

pub(crate) fn reason_cell(obj: &Value, _: &PrintContext) -> Value {
    json!(s(obj, "reason"))
}

pub(crate) fn object_cell(obj: &Value, f: &Fields) -> Value {
    let inv = obj.get(f.involved);
    let get = |k: &str| {
        inv.and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let kind = get("kind").to_lowercase();
    let name = get("name");
    if name.is_empty() {
        Value::String(kind)
    } else {
        Value::String(format!("{kind}/{name}"))
    }
}

pub(crate) fn subobject_cell(obj: &Value, f: &Fields) -> Value {
    let path = obj
        .get(f.involved)
        .and_then(|i| i.get("fieldPath"))
        .and_then(Value::as_str)
        .unwrap_or("");
    json!(path)
}

/// kube's `formatEventSource`: component (or reporting controller), then
/// `, host` (or reporting instance) when there is one.
pub(crate) fn source_cell(obj: &Value, f: &Fields) -> Value {
    let src = obj.get(f.source);
    let get = |k: &str| {
        src.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let or = |a: &'static str, b: &str| -> String {
        let first = get(a);
        if first.is_empty() {
            s(obj, b).to_string()
        } else {
            first.to_string()
        }
    };
    let component = or("component", f.controller_name);
    let instance = or("host", "reportingInstance");
    if instance.is_empty() {
        Value::String(component)
    } else {
        Value::String(format!("{component}, {instance}"))
    }
}

pub(crate) fn message_cell(obj: &Value, f: &Fields) -> Value {
    json!(s(obj, f.message).trim())
}

pub(crate) fn count_cell(obj: &Value, f: &Fields) -> Value {
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        return json!(series.get("count").and_then(Value::as_i64).unwrap_or(0));
    }
    match obj.get(f.count).and_then(Value::as_i64).unwrap_or(0) {
        0 => json!(1),
        n => json!(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(obj: &Value) -> Vec<String> {
        validate(obj, None).iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn legacy_rules() {
        let ok = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "a"}});
        assert!(msgs(&ok).is_empty());
        let bad = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(
            msgs(&bad),
            vec!["involvedObject.namespace: Invalid value: \"b\": does not match event.namespace"]
        );
        let new = json!({"metadata": {"namespace": "a"}, "eventTime": "2024-01-01T00:00:00.000000Z",
            "involvedObject": {"namespace": "a"}, "reportingComponent": "c", "reportingInstance": "i",
            "action": "x"});
        assert_eq!(msgs(&new), vec!["reason: Required value"]);
        // core/v1's key is reportingComponent (what kopf sends): without it
        // a new-style Event is refused under that name.
        let mut unnamed = new.clone();
        unnamed["reportingController"] = unnamed["reportingComponent"].take();
        assert!(msgs(&unnamed).contains(&"reportingComponent: Required value".to_string()));
    }

    #[test]
    fn columns() {
        let ctx = PrintContext { now: 1_700_000_300 };
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0)
            .unwrap()
            .to_rfc3339();
        let ev = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Pulled",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " done \n",
            "firstTimestamp": t, "lastTimestamp": t});
        let cells: Vec<Value> = COLUMNS.iter().map(|c| (c.cell)(&ev, &ctx)).collect();
        assert_eq!(
            cells,
            vec![
                json!("5m"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/p"),
                json!("spec.containers{c}"),
                json!("kubelet, n1"),
                json!("done"),
                json!("5m"),
                json!(1),
                json!("e1")
            ]
        );
    }
}

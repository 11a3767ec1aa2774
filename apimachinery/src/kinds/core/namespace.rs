//! Namespaces: kube's defaults (the `kubernetes.io/metadata.name` label,
//! phase Active), the strategy's finalizer handling, `ValidateNamespace`,
//! `ValidateNamespaceStatusUpdate` and the printer.

use serde_json::{json, Value};

use crate::kinds::common::object_mut;
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: Some(prepare_create),
    prepare_create_as: None,
    prepare_update: Some(prepare_update),
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: COLUMNS,
};

const NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    if let Some(name) = name {
        // kube sets the label to the name whatever the client sent.
        let labelled = o
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(NAME_LABEL))
            .and_then(Value::as_str)
            == Some(name);
        if !labelled {
            let name = Value::String(name.to_string());
            if let Some(labels) = object_mut(o, "metadata").and_then(|m| object_mut(m, "labels")) {
                labels.insert(NAME_LABEL.into(), name);
            }
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let empty = status
            .get("phase")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if empty {
            status.insert("phase".into(), json!("Active"));
        }
    }
}

/// A new namespace is Active and carries the `kubernetes` finalizer, added
/// to the client's.
fn prepare_create(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    o.insert("status".into(), json!({"phase": "Active"}));
    let Some(spec) = object_mut(o, "spec") else {
        return;
    };
    let fins = spec.entry("finalizers").or_insert_with(|| json!([]));
    if !fins.is_array() {
        *fins = json!([]);
    }
    if let Some(list) = fins.as_array_mut() {
        if !list.iter().any(|f| f == "kubernetes") {
            list.push(json!("kubernetes"));
        }
    }
}

/// `spec.finalizers` change only through the `finalize` subresource.
fn prepare_update(obj: &mut Value, old: &Value) {
    let old_fins = old.pointer("/spec/finalizers");
    if obj.pointer("/spec/finalizers") == old_fins {
        return;
    }
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    match old_fins {
        Some(f) => {
            spec.insert("finalizers".into(), f.clone());
        }
        None => {
            spec.remove("finalizers");
        }
    }
}

const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    for f in print::strs_at(obj, "/spec/finalizers") {
        errs.extend(v::validate_finalizer_name(f, "spec.finalizers"));
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f) {
            errs.push(v::invalid(
                "spec.finalizers",
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

fn validate_status(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let phase = print::str_at(obj, "/status/phase", "");
    let deleting = obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    match (deleting, phase) {
        (false, p) if p != "Active" => vec![v::invalid(
            "status.Phase",
            p,
            "may only be 'Active' if `deletionTimestamp` is empty",
        )],
        (true, p) if p != "Terminating" => vec![v::invalid(
            "status.Phase",
            p,
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        )],
        _ => Vec::new(),
    }
}

const COLUMNS: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "The status of the namespace",
        0,
        status_cell,
    ),
    AGE,
];

fn status_cell(obj: &Value, _: &PrintContext) -> Value {
    json!(print::str_at(obj, "/status/phase", ""))
}

/// `/finalize`: only `spec.finalizers` change (the namespace controller
/// removes `kubernetes` through it).
pub static FINALIZE: crate::kinds::Part = crate::kinds::Part {
    name: "finalize",
    verbs: &["update"],
    take: take_finalizers,
    validate: Some(validate_finalize),
};

fn take_finalizers(stored: &mut Value, request: &Value) {
    let fins = request.pointer("/spec/finalizers").cloned();
    let Some(spec) = stored.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    match fins {
        Some(f) if !f.is_null() => spec.insert("finalizers".into(), f),
        _ => spec.remove("finalizers"),
    };
}

/// kube's `ValidateNamespaceFinalizeUpdate`.
fn validate_finalize(ns: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    ns.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, f)| {
            v::validate_finalizer_name(f.as_str().unwrap_or(""), &format!("spec.finalizers[{i}]"))
        })
        .collect()
}

/// What a namespace's delete writes beside `deletionTimestamp`: phase
/// `Terminating` (kube's namespace REST `Delete`); its content is deleted
/// by the namespace controller, which then finalizes it.
pub fn mark_terminating(ns: &mut Value) {
    if let Some(o) = ns.as_object_mut() {
        o.insert("status".into(), serde_json::json!({"phase": "Terminating"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_strategy() {
        let mut ns = json!({"metadata": {"name": "dev", "labels": {"a": "b"}},
            "spec": {"finalizers": ["example.com/x"]}});
        defaults(&mut ns);
        prepare_create(&mut ns);
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"a": "b", NAME_LABEL: "dev"})
        );
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
        assert_eq!(ns["status"]["phase"], "Active");
        let again = ns.clone();
        defaults(&mut ns);
        assert_eq!(ns, again);
        let mut changed = ns.clone();
        changed["spec"]["finalizers"] = json!([]);
        prepare_update(&mut changed, &ns);
        assert_eq!(changed["spec"]["finalizers"], ns["spec"]["finalizers"]);
    }

    #[test]
    fn validation() {
        let bad = json!({"spec": {"finalizers": ["foo"]}});
        assert_eq!(
            v::cause_to_string(&validate(&bad, None)[0]),
            "spec.finalizers: Invalid value: \"foo\": name is neither a standard finalizer name nor is it fully qualified"
        );
        assert!(validate(
            &json!({"spec": {"finalizers": ["kubernetes", "a.io/b"]}}),
            None
        )
        .is_empty());
        let st = json!({"status": {"phase": "Terminating"}});
        assert_eq!(
            v::cause_to_string(&validate_status(&st, Some(&st))[0]),
            "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
        );
        let ctx = PrintContext { now: 0 };
        assert_eq!(
            (COLUMNS[1].cell)(&json!({"status": {"phase": "Active"}}), &ctx),
            "Active"
        );
    }
}

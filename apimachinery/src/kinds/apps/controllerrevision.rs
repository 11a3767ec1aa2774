//! ControllerRevisions (apps/v1): `ValidateControllerRevision` and kube's
//! printer. `data` immutability is the registry's generic `immutable` list.

use serde_json::Value;

use crate::kinds::print::{Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{nonnegative, required};

pub static RULES: KindRules = KindRules {
    defaults: None,
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: None,
    columns: &[
        NAME,
        Column {
            name: "Controller",
            type_: "string",
            format: "",
            description: "Controller of the object",
            priority: 0,
            cell: controller_cell,
        },
        Column {
            name: "Revision",
            type_: "string",
            format: "",
            description: "revision indicates the revision of the state represented by Data.",
            priority: 0,
            cell: |o, _| Value::from(crate::kinds::print::int_at(o, "/revision")),
        },
        AGE,
    ],
};

fn validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    if obj.get("data").is_none_or(Value::is_null) {
        out.push(required("data", "data is mandatory"));
    }
    nonnegative("revision", obj.get("revision"), &mut out);
    out
}

/// `kind.group/name` of the controlling owner, lowercased kind and group
/// (kube's `formatResourceName` of the controller reference), or `<none>`.
fn controller_cell(obj: &Value, _: &PrintContext) -> Value {
    let owner = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        });
    let Some(owner) = owner else {
        return Value::String("<none>".into());
    };
    let s = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or("");
    let group = s("apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
    let kind = if group.is_empty() {
        s("kind").to_string()
    } else {
        format!("{}.{group}", s("kind"))
    };
    Value::String(format!("{}/{}", kind.to_lowercase(), s("name")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_and_columns() {
        let cr = json!({"metadata": {"name": "r", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": true}]},
            "revision": 3, "data": {}});
        assert!(validate(&cr, None).is_empty());
        let ctx = PrintContext { now: 0 };
        assert_eq!(
            (RULES.columns[1].cell)(&cr, &ctx),
            json!("daemonset.apps/ds")
        );
        assert_eq!((RULES.columns[2].cell)(&cr, &ctx), json!(3));
        let bad = json!({"metadata": {"name": "r"}, "revision": -1});
        let msgs: Vec<String> = validate(&bad, None)
            .iter()
            .map(crate::validation::cause_to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        assert_eq!((RULES.columns[1].cell)(&bad, &ctx), json!("<none>"));
    }
}

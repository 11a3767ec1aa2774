//! ComponentStatus (deprecated since 1.19, still served): computed on each
//! request, never stored, so only its Table printer lives here.

use serde_json::Value;

use crate::kinds::print::{column, Column, PrintContext, NAME};
use crate::kinds::KindRules;

pub static RULES: KindRules = KindRules {
    columns: COLUMNS,
    ..KindRules::NONE
};

/// The `Healthy` condition's status, message and error, as kube's printer
/// reads them (`Unknown` when there is none).
fn healthy(obj: &Value) -> (&str, &str, &str) {
    let condition = obj
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Healthy"));
    let Some(c) = condition else {
        return ("Unknown", "", "");
    };
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
    let status = if s("status") == "True" {
        "Healthy"
    } else {
        "Unhealthy"
    };
    (status, s("message"), s("error"))
}

const COLUMNS: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "Status of the component conditions",
        0,
        |o, _: &PrintContext| healthy(o).0.into(),
    ),
    column(
        "Message",
        "string",
        "Message of the component conditions",
        0,
        |o, _| healthy(o).1.into(),
    ),
    column(
        "Error",
        "string",
        "Error of the component conditions",
        0,
        |o, _| healthy(o).2.into(),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_read_the_healthy_condition() {
        let ok = json!({"conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(healthy(&ok), ("Healthy", "ok", ""));
        let down =
            json!({"conditions": [{"type": "Healthy", "status": "False", "error": "refused"}]});
        assert_eq!(healthy(&down), ("Unhealthy", "", "refused"));
        assert_eq!(healthy(&json!({})), ("Unknown", "", ""));
    }
}

//! ServiceAccounts: kube's printer (no defaults; validation is metadata
//! only, done by the generic path).

use serde_json::{json, Value};

use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;

pub static RULES: KindRules = KindRules {
    columns: COLUMNS,
    ..KindRules::NONE
};

const COLUMNS: &[Column] = &[
    NAME,
    column("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.", 0, secrets_cell),
    AGE,
];

fn secrets_cell(obj: &Value, _: &PrintContext) -> Value {
    json!(print::count_at(obj, "/secrets"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_count() {
        let ctx = PrintContext { now: 0 };
        let sa = json!({"secrets": [{"name": "a"}]});
        assert_eq!((COLUMNS[1].cell)(&sa, &ctx), json!(1));
        assert_eq!((COLUMNS[1].cell)(&json!({}), &ctx), json!(0));
    }
}

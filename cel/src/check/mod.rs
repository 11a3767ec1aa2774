//! A type checker for Kubernetes CEL, modelled on cel-go's
//! (`checker/checker.go`), run on the base crate's parsed expressions
//! against the declared types of kube's environment.
//!
//! # What it checks
//!
//! * Variables: `self`/`oldSelf` typed from a CRD's structural schema
//!   ([`Env::for_schema_rule`], as kube's `SchemaDeclType`: properties are
//!   fields, `additionalProperties` a `map(string, T)`, `items` a
//!   `list(T)`, `x-kubernetes-int-or-string` `dyn`, `format: date-time`
//!   (and `date`) `timestamp`, `format: duration` `duration`, `format:
//!   byte` `bytes`; the root and embedded resources gain `apiVersion`,
//!   `kind` and `metadata.name`/`generateName`); or any variables a caller
//!   declares ([`Env::with_variable`]; kube's admission `request` and
//!   `namespaceObject` types are [`Type::admission_request`] and
//!   [`Type::namespace_object`]). A name no scope declares is
//!   `undeclared reference to 'x' (in container '')`.
//! * Field selection and `has()`: `undefined field 'x'` on an object
//!   without that field (unknown fields of
//!   `x-kubernetes-preserve-unknown-fields` objects are not fields, and a
//!   property without a type is not exposed, both as in kube); `type 'int'
//!   does not support field selection`. Optional selection (`?.`) and
//!   optional indexing give `optional_type(T)`.
//! * Calls of the functions in [`overloads`]: `found no matching overload
//!   for '_==_' applied to '(int, string)'`. Type parameters unify as in
//!   cel-go (`[1] + ['a']` fails, `1 == 1.0` fails, `1 < 1.0` is fine:
//!   kube enables cross-type numeric comparisons).
//! * Macros (`all`, `exists`, `exists_one`, `map`, `filter`, `has`,
//!   `cel.bind`) through the comprehensions they expand into: the
//!   iteration variable has the element (or key) type; a range that is not
//!   a list, map or `dyn` is refused as cel-go refuses it.
//! * `&&`/`||` operands and comprehension conditions must be `bool`.
//! * kube's homogeneous literal rule: `[1, 'a']` is refused (outside
//!   `format()`), where both types are fully known.
//!
//! # What it accepts without knowing
//!
//! The checker must never refuse what kube accepts, so where it is unsure
//! it says `dyn` and goes on:
//! * a function it does not know (global, member or namespaced) returns
//!   `dyn`, and is no error; so are the hidden functions of this crate's
//!   macro expansions (two-variable comprehensions bind `dyn` variables,
//!   `sortBy` is `dyn`);
//! * functions marked lenient in [`overloads`] (`format`, `reverse`, the
//!   sets and lists extensions' `slice`/`flatten`/`distinct`/`sort`,
//!   `sign`, the authorizer's chain, `validate`) are typed when a call
//!   matches and `dyn` when none does;
//! * struct literals (`Object{...}` of MutatingAdmissionPolicy) are `dyn`;
//! * a `dyn` operand matches every overload and supports every field.
//!
//! Errors print as cel-go prints them, with the source line and a caret
//! under the column of the node: the `.` of a selection, the operator of a
//! binary call, the `(` of a function call.

mod admission;
pub(crate) mod checker;
pub(crate) mod overloads;
mod types;

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{IdedExpr, SourceInfo};
use serde_json::Value;

pub(crate) use types::escape as escape_field;
pub use types::{schema_type_of, Object, Sizes, Type};

/// The declared variables an expression is checked against, and what is
/// known of the sizes of their values (for cost estimates).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, Type>,
    sizes: Option<Arc<Sizes>>,
}

impl Env {
    /// No variables.
    pub fn new() -> Env {
        Env::default()
    }

    /// Declares `name` with type `t`.
    pub fn with_variable(mut self, name: &str, t: Type) -> Env {
        self.vars.insert(name.to_owned(), t);
        self
    }

    /// The type of `name`, if declared.
    pub fn variable(&self, name: &str) -> Option<&Type> {
        self.vars.get(name)
    }

    /// Records the sizes of the data a rule's variables reach, for cost
    /// estimates. As in kube's CRD size estimator, every variable path
    /// (`self.spec.x`, `oldSelf.spec.x`) is looked up from this root, its
    /// first element (the variable's name) skipped.
    pub fn with_sizes(mut self, sizes: Sizes) -> Env {
        self.sizes = Some(Arc::new(sizes));
        self
    }

    /// The sizes recorded with [`Env::with_sizes`].
    pub fn sizes(&self) -> Option<&Sizes> {
        self.sizes.as_deref()
    }

    /// The environment of an `x-kubernetes-validations` rule on the schema
    /// node `schema` (a JSON `openAPIV3Schema` node): `self` of the node's
    /// type, and `oldSelf` of the same type (an optional of it when the
    /// rule sets `optionalOldSelf`). `resource_root` is true for the
    /// schema's root. `None` when kube gives the node no CEL type (kube
    /// then refuses the rule for another reason).
    pub fn for_schema_rule(
        schema: &Value,
        resource_root: bool,
        optional_old_self: bool,
    ) -> Option<Env> {
        let root = resource_root
            || schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        let (t, sizes) = types::schema_decl(schema, root, "selfType")?;
        let old = if optional_old_self {
            Type::optional(t.clone())
        } else {
            t.clone()
        };
        Some(
            Env::new()
                .with_variable("self", t)
                .with_variable("oldSelf", old)
                .with_sizes(sizes),
        )
    }
}

impl Type {
    /// Whether a value of this type may be a `want` at run time: it is
    /// `want`, or not known (`dyn`). kube refuses a rule whose type is not
    /// exactly `bool`; this checker only where it is sure.
    pub fn may_be(&self, want: &Type) -> bool {
        self.is_dyn_or_error() || matches!(self, Type::Param(_)) || self == want
    }
}

/// Checks `e` (parsed from `source`, with the parser's `info`) against
/// `env`: its type, with the type of every node and the overloads every
/// call may resolve to (see [`checker::Checked`]); or cel-go's report of
/// every problem, one `ERROR: <input>:LINE:COLUMN: MESSAGE` block each.
pub(crate) fn check(
    e: &IdedExpr,
    info: &SourceInfo,
    source: &str,
    env: &Env,
) -> Result<checker::Checked, String> {
    let mut c = checker::Checker::new(env, info);
    let checked = c.check_root(e);
    if c.issues.is_empty() {
        return Ok(checked);
    }
    let mut located: Vec<((usize, usize), String)> = c
        .issues
        .into_iter()
        .map(|i| (location(source, i.offset), i.message))
        .collect();
    located.sort_by_key(|(l, _)| *l);
    // cel-go reports at most 100.
    let total = located.len();
    let mut out: Vec<String> = located
        .into_iter()
        .take(100)
        .map(|((line, col), msg)| display(source, line, col, &msg))
        .collect();
    if total > 100 {
        out.push(format!("{} more errors were truncated", total - 100));
    }
    Err(out.join("\n"))
}

/// The line (from 1) and column (in characters, from 0) of a parser
/// offset (a byte offset into the source).
fn location(source: &str, offset: Option<u32>) -> (usize, usize) {
    let Some(offset) = offset else { return (1, 0) };
    let mut line = 1;
    let mut col = 0;
    for (i, c) in source.char_indices() {
        if i >= offset as usize {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 0;
        } else {
            col += 1;
        }
    }
    (line, col)
}

/// One error as cel-go's `ToDisplayString` prints it: the message, then
/// the source line and a caret under the column (`．`/`＾` under wide
/// characters).
pub(crate) fn display(source: &str, line: usize, col: usize, message: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{}: {message}", col + 1);
    if let Some(text) = source.split('\n').nth(line - 1) {
        let text = text.strip_suffix('\r').unwrap_or(text).replace('\t', " ");
        if text.len() <= 16384 {
            out.push_str("\n | ");
            out.push_str(&text);
            out.push_str("\n | ");
            let mut chars = text.chars();
            for _ in 0..col {
                match chars.next() {
                    Some(c) if c.len_utf8() > 1 => out.push('\u{ff0e}'),
                    Some(_) => out.push('.'),
                    None => break,
                }
            }
            match chars.next() {
                Some(c) if c.len_utf8() > 1 => out.push('\u{ff3e}'),
                _ => out.push('^'),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

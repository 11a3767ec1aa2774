//! `x-kubernetes-validations`: the CEL rules of a CRD's schema, compiled
//! once per CRD definition ([`Rules::compile`]) with the project's CEL
//! engine (`k8s-cel`), checked for cost when the CRD is written
//! ([`definition_errors`]), and evaluated against every write of a custom
//! resource ([`Rules::evaluate`]) with kube's runtime budget and wording.
//!
//! Model floor, under the registry: a custom resource's row holds its
//! compiled rules ([`super::custom::CustomInfo`]) and the CRD kind's own
//! row checks them ([`super::definition`]). Imports nothing of this crate.

use apimachinery::crd::{validation_rules, Structural, ValidationRule};
use apimachinery::status::{cause, StatusCause};
use k8s_cel::check::{Env as TypeEnv, Type as CelType};
use k8s_cel::{Bindings, Budget, EvalError, Program, SizeHints};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// One rule with its compiled programs.
struct Compiled {
    rule: ValidationRule,
    program: Program,
    message: Option<Program>,
    /// Whether the rule reads `oldSelf` (a transition rule).
    transition: bool,
}

/// Every rule of one schema, by the address of the schema node that
/// carries it (the schema lives as long as the rules: both are in the same
/// interned `CustomInfo`).
#[derive(Default)]
pub struct Rules {
    by_node: HashMap<usize, Vec<Compiled>>,
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("nodes", &self.by_node.len())
            .finish()
    }
}

fn node_id(s: &Structural) -> usize {
    s as *const Structural as usize
}

impl Rules {
    /// Compiles the rules of `schema`; rules that do not compile are left
    /// out (a CRD with such rules is refused when written, see
    /// [`definition_errors`]; this only happens for CRDs stored before).
    pub fn compile(schema: &Structural) -> Rules {
        let mut by_node = HashMap::new();
        for node in validation_rules(schema) {
            let compiled: Vec<Compiled> = node
                .rules
                .iter()
                .filter_map(|r| {
                    let program = Program::compile(&r.rule).ok()?;
                    let message = (!r.message_expression.is_empty())
                        .then(|| Program::compile(&r.message_expression).ok())
                        .flatten();
                    Some(Compiled {
                        rule: r.clone(),
                        transition: program.uses_variable("oldSelf"),
                        program,
                        message,
                    })
                })
                .collect();
            if !compiled.is_empty() {
                by_node.insert(node_id(node.schema), compiled);
            }
        }
        Rules { by_node }
    }

    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }

    /// Evaluates every rule against `obj` (and `old`, for transition rules,
    /// on update) within kube's per-object budget. Each failure is a cause
    /// worded as kube words it.
    pub fn evaluate(
        &self,
        schema: &Structural,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<StatusCause> {
        let mut out = Vec::new();
        if self.by_node.is_empty() {
            return out;
        }
        let mut budget = Budget::default();
        self.walk(schema, obj, old, String::new(), &mut budget, &mut out);
        out
    }

    fn walk(
        &self,
        s: &Structural,
        v: &Value,
        old: Option<&Value>,
        path: String,
        budget: &mut Budget,
        out: &mut Vec<StatusCause>,
    ) {
        if budget.is_exhausted() {
            return;
        }
        if let Some(rules) = self.by_node.get(&node_id(s)) {
            self.check(s, rules, v, old, &path, budget, out);
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let o = old.and_then(|o| o.get(k));
                    if let Some(ps) = s.properties.get(k) {
                        let p = if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        };
                        self.walk(ps, x, o, p, budget, out);
                    } else if let Some(ap) =
                        s.additional_properties.as_ref().and_then(|a| a.schema())
                    {
                        self.walk(ap, x, o, format!("{path}[{k}]"), budget, out);
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = &s.items {
                    // Items have no old counterpart (kube correlates only
                    // map-type lists by key).
                    for (i, x) in a.iter().enumerate() {
                        self.walk(items, x, None, format!("{path}[{i}]"), budget, out);
                    }
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        s: &Structural,
        rules: &[Compiled],
        v: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &mut Budget,
        out: &mut Vec<StatusCause>,
    ) {
        let mut vars = Bindings::new().with_json("self", v);
        if let Some(o) = old {
            vars.insert_json("oldSelf", o);
        }
        // With optionalOldSelf the rule sees `oldSelf` as an optional,
        // none on create.
        let mut optional_vars: Option<Bindings> = None;
        let type_name = if s.type_.is_empty() {
            "object"
        } else {
            s.type_.as_str()
        };
        for c in rules {
            if c.transition && old.is_none() && c.rule.optional_old_self != Some(true) {
                // A transition rule runs only on update.
                continue;
            }
            let field = match c.rule.field_path.trim_start_matches('.') {
                "" => path.to_string(),
                fp if path.is_empty() => fp.to_string(),
                fp => format!("{path}.{fp}"),
            };
            let field = if field.is_empty() {
                "<nil>".to_string()
            } else {
                field
            };
            let vars = if c.rule.optional_old_self == Some(true) {
                optional_vars.get_or_insert_with(|| {
                    let mut b = Bindings::new().with_json("self", v);
                    b.insert_optional_json("oldSelf", old);
                    b
                })
            } else {
                &vars
            };
            match c.program.evaluate_in_budget(vars, budget) {
                Ok(e) if e.value == k8s_cel::Value::Bool(true) => {}
                Ok(e) if matches!(e.value, k8s_cel::Value::Bool(false)) => {
                    let msg = self.message(c, vars);
                    out.push(failure(&field, type_name, &msg, c.rule.reason.as_deref()));
                }
                Ok(_) => out.push(invalid(
                    &field,
                    type_name,
                    "rule did not evaluate to a bool",
                )),
                Err(EvalError::OutOfBudget) => {
                    out.push(invalid(&field, type_name, k8s_cel::OUT_OF_BUDGET));
                    return;
                }
                Err(e) => out.push(invalid(&field, type_name, &e.to_string())),
            }
        }
    }

    fn message(&self, c: &Compiled, vars: &Bindings) -> String {
        if let Some(m) = &c.message {
            if let Ok(text) = m.eval_string(vars) {
                if !text.trim().is_empty() && !text.contains('\n') {
                    return text;
                }
            }
        }
        if !c.rule.message.is_empty() {
            return c.rule.message.clone();
        }
        format!("failed rule: {}", c.rule.rule)
    }
}

fn invalid(field: &str, type_name: &str, msg: &str) -> StatusCause {
    StatusCause::new(
        cause::FIELD_VALUE_INVALID,
        format!("Invalid value: \"{type_name}\": {msg}"),
        field,
    )
}

/// A failed rule, by its `reason` (kube's default: FieldValueInvalid).
fn failure(field: &str, type_name: &str, msg: &str, reason: Option<&str>) -> StatusCause {
    match reason {
        Some("FieldValueRequired") => StatusCause::new(
            cause::FIELD_VALUE_REQUIRED,
            format!("Required value: {msg}"),
            field,
        ),
        Some("FieldValueForbidden") => StatusCause::new(
            cause::FIELD_VALUE_FORBIDDEN,
            format!("Forbidden: {msg}"),
            field,
        ),
        Some("FieldValueDuplicate") => StatusCause::new(
            "FieldValueDuplicate",
            format!(
                "Duplicate value: {}",
                apimachinery::validation::go_quote(msg)
            ),
            field,
        ),
        _ => invalid(field, type_name, msg),
    }
}

/// What is wrong with the rules of one version's schema when a CRD is
/// written: rules that do not compile or type-check against the schema
/// (kube's `compilation failed: ERROR: <input>:1:5: undefined field 'x'`),
/// rules that are not `bool` (message expressions not `string`), and rules
/// whose estimated cost is over kube's limit. `base` is the schema's field
/// path (`spec.versions[0].schema.openAPIV3Schema`). Expressions in
/// `preexisting` (every rule and message expression of the CRD before an
/// update) are not type-checked again, so a CRD stored before the checker
/// existed can still be updated.
pub fn definition_errors(
    base: &str,
    schema: &Structural,
    preexisting: &HashSet<String>,
) -> Vec<StatusCause> {
    let mut out = Vec::new();
    for node in validation_rules(schema) {
        let hints = hints_for(node.schema);
        let node_json = schema_json(node.schema, 0);
        for (i, r) in node.rules.iter().enumerate() {
            let at = if node.schema_path.is_empty() {
                format!("{base}.x-kubernetes-validations[{i}]")
            } else {
                format!("{base}.{}.x-kubernetes-validations[{i}]", node.schema_path)
            };
            let env = (!preexisting.contains(&r.rule)
                || !preexisting.contains(&r.message_expression))
            .then(|| {
                TypeEnv::for_schema_rule(
                    &node_json,
                    node.schema_path.is_empty(),
                    r.optional_old_self == Some(true),
                )
            })
            .flatten();
            let invalid = |detail: &dyn std::fmt::Display| {
                StatusCause::new(
                    cause::FIELD_VALUE_INVALID,
                    format!("Invalid value: {}: {detail}", go_rule(r)),
                    format!("{at}.rule"),
                )
            };
            match Program::compile(&r.rule) {
                Err(e) => out.push(invalid(&e)),
                Ok(p) => {
                    let checked = match env.as_ref().filter(|_| !preexisting.contains(&r.rule)) {
                        Some(env) => p.check(env).map(Some),
                        None => Ok(None),
                    };
                    match checked {
                        Err(e) => out.push(invalid(&e)),
                        Ok(Some(t)) if !t.may_be(&CelType::Bool) => {
                            out.push(invalid(&"cel expression must evaluate to a bool"))
                        }
                        Ok(_) => {
                            if let Err(e) = p
                                .estimate_cost(&hints)
                                .check(k8s_cel::STATIC_ESTIMATED_COST_LIMIT)
                            {
                                out.push(StatusCause::new(
                                    cause::FIELD_VALUE_FORBIDDEN,
                                    format!(
                                        "Forbidden: {e} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
                                    ),
                                    format!("{at}.rule"),
                                ));
                            }
                        }
                    }
                }
            }
            if !r.message_expression.is_empty() {
                let invalid = |detail: &dyn std::fmt::Display| {
                    StatusCause::new(
                        cause::FIELD_VALUE_INVALID,
                        format!("Invalid value: {}: {detail}", go_rule(r)),
                        format!("{at}.messageExpression"),
                    )
                };
                match Program::compile(&r.message_expression) {
                    Err(e) => out.push(invalid(&format_args!("messageExpression {e}"))),
                    Ok(p) => {
                        let env = env
                            .as_ref()
                            .filter(|_| !preexisting.contains(&r.message_expression));
                        match env.map(|env| p.check(env)) {
                            Some(Err(e)) => {
                                out.push(invalid(&format_args!("messageExpression {e}")))
                            }
                            Some(Ok(t)) if !t.may_be(&CelType::String) => {
                                out.push(invalid(&"messageExpression must evaluate to a string"))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    out
}

/// A rule as kube prints the value of its field errors: Go's `%#v` of the
/// internal `apiextensions.ValidationRule` (a set pointer prints as an
/// address in Go; a fixed one stands for it here).
fn go_rule(r: &ValidationRule) -> String {
    use apimachinery::validation::go_quote;
    let pointer = |ty: &str, set: bool| {
        if set {
            format!("(*{ty})(0xc000000000)")
        } else {
            format!("(*{ty})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        go_quote(&r.rule),
        go_quote(&r.message),
        go_quote(&r.message_expression),
        pointer("apiextensions.FieldValueErrorReason", r.reason.is_some()),
        go_quote(&r.field_path),
        pointer("bool", r.optional_old_self.is_some()),
    )
}

/// The parts of a structural schema the CEL checker reads, as JSON:
/// types, formats, properties, items, additionalProperties and the
/// int-or-string, preserve-unknown-fields and embedded-resource marks.
fn schema_json(s: &Structural, depth: usize) -> Value {
    let mut m = serde_json::Map::new();
    if depth > 64 {
        return Value::Object(m);
    }
    if !s.type_.is_empty() {
        m.insert("type".into(), Value::String(s.type_.clone()));
    }
    if let Some(v) = s.value_validation.as_ref().filter(|v| !v.format.is_empty()) {
        m.insert("format".into(), Value::String(v.format.clone()));
    }
    for (flag, set) in [
        ("x-kubernetes-int-or-string", s.extensions.int_or_string),
        (
            "x-kubernetes-preserve-unknown-fields",
            s.extensions.preserve_unknown_fields,
        ),
        (
            "x-kubernetes-embedded-resource",
            s.extensions.embedded_resource,
        ),
    ] {
        if set {
            m.insert(flag.into(), Value::Bool(true));
        }
    }
    if !s.properties.is_empty() {
        let props = s
            .properties
            .iter()
            .map(|(k, p)| (k.clone(), schema_json(p, depth + 1)))
            .collect();
        m.insert("properties".into(), Value::Object(props));
    }
    if let Some(items) = &s.items {
        m.insert("items".into(), schema_json(items, depth + 1));
    }
    if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
        m.insert("additionalProperties".into(), schema_json(ap, depth + 1));
    }
    Value::Object(m)
}

/// Every rule and message expression anywhere in a CRD's schemas (kube's
/// `findPreexistingExpressions`).
pub fn preexisting_expressions(crd: &Value) -> HashSet<String> {
    fn walk(v: &Value, out: &mut HashSet<String>, depth: usize) {
        if depth > 128 {
            return;
        }
        match v {
            Value::Object(m) => {
                if let Some(rules) = m.get("x-kubernetes-validations").and_then(Value::as_array) {
                    for r in rules {
                        for key in ["rule", "messageExpression"] {
                            if let Some(e) = r.get(key).and_then(Value::as_str) {
                                out.insert(e.to_owned());
                            }
                        }
                    }
                }
                for x in m.values() {
                    walk(x, out, depth + 1);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out, depth + 1)),
            _ => {}
        }
    }
    let mut out = HashSet::new();
    if let Some(spec) = crd.get("spec") {
        walk(spec, &mut out, 0);
    }
    out
}

/// Size hints for the rules of one node from the schema's own bounds
/// (`maxLength`, `maxItems`, `maxProperties`) below it, by CEL path.
fn hints_for(s: &Structural) -> SizeHints {
    let mut hints = SizeHints::new();
    add_hints(s, "self".to_string(), &mut hints, 0);
    hints
}

fn add_hints(s: &Structural, path: String, hints: &mut SizeHints, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(v) = &s.value_validation {
        let bound = v.max_length.or(v.max_items).or(v.max_properties);
        if let Some(b) = bound {
            hints.set(&path, b.max(0) as u64);
        }
    }
    for (k, ps) in &s.properties {
        add_hints(ps, format!("{path}.{k}"), hints, depth + 1);
    }
    if let Some(items) = &s.items {
        add_hints(items, format!("{path}[*]"), hints, depth + 1);
    }
    if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
        add_hints(ap, format!("{path}[*]"), hints, depth + 1);
    }
}

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
use k8s_cel::{Bindings, Budget, EvalError, Program};
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
/// rules that are not `bool` (message expressions not `string`), rules
/// whose estimated cost (times the most times their node can occur) is
/// over kube's per-expression limit, and a total over the whole schema
/// above kube's CRD limit. `base` is the schema's field path
/// (`spec.versions[0].schema.openAPIV3Schema`). Expressions in
/// `preexisting` (every rule and message expression of the CRD before an
/// update) are not type-checked again, so a CRD stored before the checker
/// existed can still be updated; their cost counts where they check.
/// `unchanged_schema` (an update leaving this version's schema as it was)
/// lifts the per-expression limit, as in kube; the total still applies.
pub fn definition_errors(
    base: &str,
    schema: &Structural,
    preexisting: &HashSet<String>,
    unchanged_schema: bool,
) -> Vec<StatusCause> {
    let mut walk = DefinitionWalk {
        base,
        preexisting,
        unchanged_schema,
        total: TotalCost::default(),
        out: Vec::new(),
    };
    walk.node(schema, String::new(), Some(1), 0);
    let mut out = walk.out;
    if walk.total.total > k8s_cel::STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (path, _) in &walk.total.most_expensive {
            out.push(StatusCause::new(
                cause::FIELD_VALUE_FORBIDDEN,
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                path.clone(),
            ));
        }
        let e = k8s_cel::CostExceeded {
            what: "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            estimate: walk.total.total,
            limit: k8s_cel::STATIC_ESTIMATED_CRD_COST_LIMIT,
        };
        out.push(StatusCause::new(
            cause::FIELD_VALUE_FORBIDDEN,
            format!("Forbidden: {e}"),
            base,
        ));
    }
    out
}

/// kube's `TotalCost`: the sum of every expression's cost over a schema,
/// and the (at most 4) dearest expressions of at least 1% of the limit.
#[derive(Default)]
struct TotalCost {
    total: u64,
    most_expensive: Vec<(String, u64)>,
}

impl TotalCost {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < k8s_cel::STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }
}

/// kube's `maxCardinality`: how many times data of the smallest
/// serialized size can occur in a request.
fn max_cardinality(min_serialized: u64) -> u64 {
    k8s_cel::MAX_REQUEST_SIZE_BYTES / (min_serialized + 1)
}

/// kube's `extractMaxElements`: how many children a node can have for
/// each of its occurrences (`None`: unbounded).
fn max_children(s: &Structural) -> Option<u64> {
    let bound = |v: Option<i64>| v.map(|v| v.max(0) as u64);
    let vv = s.value_validation.as_ref();
    match s.type_.as_str() {
        "object" if s.additional_properties.is_some() => bound(vv.and_then(|v| v.max_properties)),
        "array" => bound(vv.and_then(|v| v.max_items)),
        _ => Some(1),
    }
}

struct DefinitionWalk<'a> {
    base: &'a str,
    preexisting: &'a HashSet<String>,
    unchanged_schema: bool,
    total: TotalCost,
    out: Vec<StatusCause>,
}

impl DefinitionWalk<'_> {
    /// A schema node: its children first, then its own rules, as kube's
    /// validation recurses. `cardinality` is the most times the node can
    /// occur (kube's `MaxCardinality`; `None` below an unbounded list or
    /// map).
    fn node(&mut self, s: &Structural, spath: String, cardinality: Option<u64>, depth: usize) {
        if depth > 64 {
            return;
        }
        let child_cardinality = cardinality
            .zip(max_children(s))
            .map(|(c, m)| c.saturating_mul(m));
        let child = |name: &str| {
            if spath.is_empty() {
                name.to_owned()
            } else {
                format!("{spath}.{name}")
            }
        };
        if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
            self.node(
                ap,
                child("additionalProperties"),
                child_cardinality,
                depth + 1,
            );
        }
        for (k, p) in &s.properties {
            let path = format!("{}[{k}]", child("properties"));
            self.node(p, path, child_cardinality, depth + 1);
        }
        if let Some(items) = &s.items {
            self.node(items, child("items"), child_cardinality, depth + 1);
        }
        if !s.extensions.validations.is_empty() {
            self.rules(s, &spath, cardinality);
        }
    }

    fn rules(&mut self, s: &Structural, spath: &str, cardinality: Option<u64>) {
        let node_json = schema_json(s, 0);
        for (i, r) in s.extensions.validations.iter().enumerate() {
            let at = if spath.is_empty() {
                format!("{}.x-kubernetes-validations[{i}]", self.base)
            } else {
                format!("{}.{spath}.x-kubernetes-validations[{i}]", self.base)
            };
            let env = TypeEnv::for_schema_rule(
                &node_json,
                spath.is_empty(),
                r.optional_old_self == Some(true),
            );
            let invalid = |field: &str, detail: &dyn std::fmt::Display| {
                StatusCause::new(
                    cause::FIELD_VALUE_INVALID,
                    format!("Invalid value: {}: {detail}", go_rule(r)),
                    format!("{at}.{field}"),
                )
            };
            match Program::compile(&r.rule) {
                Err(e) => self.out.push(invalid("rule", &e)),
                Ok(p) => {
                    let old = self.preexisting.contains(&r.rule);
                    let mut cost = 0;
                    match env.as_ref().map(|env| p.check_cost(env)) {
                        Some(Err(e)) if !old => self.out.push(invalid("rule", &e)),
                        Some(Ok((t, _))) if !old && !t.may_be(&CelType::Bool) => self
                            .out
                            .push(invalid("rule", &"cel expression must evaluate to a bool")),
                        Some(Ok((_, c))) => cost = c.max,
                        _ => {}
                    }
                    // A rule runs once per occurrence of its node: at most
                    // the product of the bounds above it, else as many
                    // times as the node's smallest form fits in a request.
                    let times = cardinality.unwrap_or_else(|| {
                        max_cardinality(
                            env.as_ref()
                                .and_then(|e| e.sizes())
                                .map_or(0, |s| s.min_serialized),
                        )
                    });
                    let cost = if cost == 0 {
                        0
                    } else {
                        cost.saturating_mul(times)
                    };
                    self.limit("estimated rule cost", cost, format!("{at}.rule"));
                }
            }
            if r.message_expression.is_empty() {
                continue;
            }
            match Program::compile(&r.message_expression) {
                Err(e) => self.out.push(invalid(
                    "messageExpression",
                    &format_args!("messageExpression {e}"),
                )),
                Ok(p) => {
                    let old = self.preexisting.contains(&r.message_expression);
                    match env.as_ref().map(|env| p.check_cost(env)) {
                        Some(Err(e)) if !old => self.out.push(invalid(
                            "messageExpression",
                            &format_args!("messageExpression {e}"),
                        )),
                        Some(Ok((t, _))) if !old && !t.may_be(&CelType::String) => {
                            self.out.push(invalid(
                                "messageExpression",
                                &"messageExpression must evaluate to a string",
                            ))
                        }
                        Some(Ok((_, c))) => self.limit(
                            "estimated messageExpression cost",
                            c.max,
                            format!("{at}.messageExpression"),
                        ),
                        _ => {}
                    }
                }
            }
        }
    }

    /// kube's per-expression limit (unless lifted) and the running total.
    fn limit(&mut self, what: &'static str, cost: u64, path: String) {
        if !self.unchanged_schema && cost > k8s_cel::STATIC_ESTIMATED_COST_LIMIT {
            let e = k8s_cel::CostExceeded {
                what,
                estimate: cost,
                limit: k8s_cel::STATIC_ESTIMATED_COST_LIMIT,
            };
            self.out.push(StatusCause::new(
                cause::FIELD_VALUE_FORBIDDEN,
                format!("Forbidden: {e}"),
                path.clone(),
            ));
        }
        self.total.observe(path, cost);
    }
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
    if let Some(v) = &s.value_validation {
        if !v.format.is_empty() {
            m.insert("format".into(), Value::String(v.format.clone()));
        }
        // The bounds kube's cost estimate reads.
        for (key, bound) in [
            ("maxLength", v.max_length),
            ("maxItems", v.max_items),
            ("maxProperties", v.max_properties),
        ] {
            if let Some(b) = bound {
                m.insert(key.into(), Value::from(b));
            }
        }
        if !v.enum_.is_empty() {
            m.insert("enum".into(), Value::Array(v.enum_.clone()));
        }
        if !v.required.is_empty() {
            m.insert("required".into(), Value::from(v.required.clone()));
        }
    }
    if s.default.is_some() {
        // Only its presence matters (a defaulted property is not counted
        // in the smallest serialized object).
        m.insert("default".into(), Value::Bool(true));
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

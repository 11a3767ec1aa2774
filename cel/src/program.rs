//! Compiled programs, their variables, and evaluation.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{IdedExpr, SourceInfo};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Value};

use crate::cost::{MeterGuard, COST_LIMIT_EXCEEDED, OUT_OF_BUDGET, PER_CALL_LIMIT};
use crate::estimate::{estimate, CostEstimate};
use crate::instrument::{once_cost, Instrumenter};
use crate::limits::{
    ast_depth, bracket_depth, COMPILE_STACK_BYTES, DEBUG_EVAL_STACK_BYTES, MAX_AST_DEPTH,
    MAX_NESTING_DEPTH,
};
use crate::value::{cel_to_json, json_to_cel};

/// The longest expression accepted, in bytes. Kubernetes bounds rules by
/// the request size; this keeps parsing time bounded too.
pub const MAX_EXPRESSION_LENGTH: usize = 100 * 1024;

/// The one environment every program is compiled and run with: the CEL
/// standard library, the standard macros, optional values and the
/// Kubernetes libraries.
pub(crate) fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        crate::library::register(&mut env)
            .expect("the Kubernetes CEL libraries declare no overload twice");
        Arc::new(env)
    })
}

/// Why an expression did not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    detail: String,
}

impl CompileError {
    /// The parser's report alone, cel-go style: one
    /// `ERROR: <input>:LINE:COLUMN: MESSAGE` line per problem, each followed
    /// by the source line and a caret under the column.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for CompileError {
    /// Kubernetes' wording: `compilation failed: ERROR: <input>:1:6: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "compilation failed: {}", self.detail)
    }
}

impl std::error::Error for CompileError {}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// The evaluation's cost passed its limit ([`PER_CALL_LIMIT`] by default).
    CostLimitExceeded,
    /// A shared [`crate::Budget`] ran out.
    OutOfBudget,
    /// The expression failed: no such key, no matching overload, a library
    /// function's error... The message is the base crate's.
    Execution(String),
    /// The result was not of the type asked for.
    WrongType {
        /// What was asked for: `bool`, `string`...
        want: &'static str,
        /// The result's type.
        got: String,
    },
    /// The result has no JSON form.
    NotJson(String),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::CostLimitExceeded => f.write_str(COST_LIMIT_EXCEEDED),
            EvalError::OutOfBudget => f.write_str(OUT_OF_BUDGET),
            EvalError::Execution(m) => f.write_str(m),
            EvalError::WrongType { want, got } => {
                write!(
                    f,
                    "expected the expression to evaluate to {want}, got {got}"
                )
            }
            EvalError::NotJson(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for EvalError {}

/// The variables of an evaluation: `self`, `oldSelf`, `object`,
/// `oldObject`, `request`, `params`... Converted once, so one `Bindings` can
/// serve every rule evaluated against the same data.
#[derive(Default)]
pub struct Bindings {
    vars: HashMap<String, Box<dyn Val>>,
}

impl Bindings {
    /// No variables.
    pub fn new() -> Bindings {
        Bindings::default()
    }

    /// Binds `name` to a JSON value (see [`crate::json_to_cel`]).
    pub fn with_json(mut self, name: &str, value: &serde_json::Value) -> Bindings {
        self.insert_json(name, value);
        self
    }

    /// Binds `name` to a JSON value (see [`crate::json_to_cel`]).
    pub fn insert_json(&mut self, name: &str, value: &serde_json::Value) {
        self.insert_value(name, json_to_cel(value));
    }

    /// Binds `name` to a CEL value, e.g. an `optional` for `oldSelf` under
    /// `optionalOldSelf`.
    pub fn insert_value(&mut self, name: &str, value: Value) {
        // Every `Value` built from JSON or by this crate converts; the rest
        // (functions) can't be bound and are left out.
        if let Ok(v) = Box::<dyn Val>::try_from(value) {
            self.vars.insert(name.to_owned(), v);
        }
    }

    /// Binds `name` to an optional: `optional.of(value)`, or
    /// `optional.none()` — `oldSelf` under `optionalOldSelf` on create.
    pub fn insert_optional_json(&mut self, name: &str, value: Option<&serde_json::Value>) {
        self.insert_value(name, crate::native::optional(value.map(json_to_cel)));
    }

    /// Whether `name` is bound.
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }
}

impl fmt::Debug for Bindings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl VariableResolver for Bindings {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.vars
            .get(variable)
            .map(|v| CowVal::Borrowed(v.as_ref()))
    }
}

/// An evaluation's result and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The result.
    pub value: Value,
    /// The runtime cost charged (see [`crate::cost`]).
    pub cost: u64,
}

/// A compiled expression: compile once, evaluate many times, from many
/// threads (it is `Send + Sync`; share it in an `Arc`).
#[derive(Debug, Clone)]
pub struct Program {
    source: String,
    /// As parsed, for the static estimate.
    parsed: IdedExpr,
    /// Rewritten to charge the cost meter, for evaluation.
    metered: IdedExpr,
    /// The cost of the nodes evaluated at most once.
    base_cost: u64,
    /// Where each node of `parsed` is in the source, for the checker's
    /// errors.
    info: Arc<SourceInfo>,
}

impl Program {
    /// Parses `expression`, expanding the standard macros (`has`, `all`,
    /// `exists`, `exists_one`, `map`, `filter`) and the lists extension's
    /// `sortBy`.
    ///
    /// Types are not checked here: see [`Program::check`].
    pub fn compile(expression: &str) -> Result<Program, CompileError> {
        if expression.len() > MAX_EXPRESSION_LENGTH {
            return Err(CompileError {
                detail: format!(
                    "ERROR: <input>:1:1: expression is {} bytes long, longer than the {MAX_EXPRESSION_LENGTH} allowed",
                    expression.len()
                ),
            });
        }
        if bracket_depth(expression) > MAX_NESTING_DEPTH {
            return Err(CompileError {
                detail: format!(
                    "ERROR: <input>:1:1: expression nests brackets more than {MAX_NESTING_DEPTH} deep"
                ),
            });
        }
        let (mut parsed, info) = parse_on_big_stack(expression)?;
        if ast_depth(&parsed) > MAX_AST_DEPTH {
            return Err(CompileError {
                detail: format!(
                    "ERROR: <input>:1:1: expression nests more than {MAX_AST_DEPTH} levels deep; split it, e.g. into variables or several rules"
                ),
            });
        }
        let mut next_id = crate::instrument::max_id(&parsed);
        crate::objects::rewrite(&mut parsed, &mut next_id);
        crate::library::authz::rewrite(&mut parsed);
        let metered = Instrumenter::new(&parsed).rewrite(parsed.clone());
        let base_cost = once_cost(&parsed);
        Ok(Program {
            source: expression.to_owned(),
            parsed,
            metered,
            base_cost,
            info: Arc::new(info),
        })
    }

    /// Type-checks the program against the variables of `env` (see
    /// [`crate::check`]): its type, or the errors as Kubernetes reports
    /// them (`compilation failed: ERROR: <input>:1:5: undefined field
    /// 'x'` and the source line with a caret).
    pub fn check(&self, env: &crate::check::Env) -> Result<crate::check::Type, CompileError> {
        self.checked(env).map(|c| c.output)
    }

    /// Type-checks the program against `env`, as [`Program::check`], and
    /// estimates its cost from the checked types and the sizes `env`
    /// records (see [`crate::estimate`]): kube's `EstimateCost`.
    pub fn check_cost(
        &self,
        env: &crate::check::Env,
    ) -> Result<(crate::check::Type, CostEstimate), CompileError> {
        let checked = self.checked(env)?;
        let cost = estimate(&self.parsed, &checked, env.sizes());
        Ok((checked.output, cost))
    }

    fn checked(
        &self,
        env: &crate::check::Env,
    ) -> Result<crate::check::checker::Checked, CompileError> {
        crate::check::check(&self.parsed, &self.info, &self.source, env)
            .map_err(|detail| CompileError { detail })
    }

    /// The expression this was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates with `vars`, under [`PER_CALL_LIMIT`].
    pub fn evaluate(&self, vars: &Bindings) -> Result<Evaluation, EvalError> {
        self.evaluate_with_limit(vars, PER_CALL_LIMIT)
    }

    /// Evaluates with `vars`, failing with [`EvalError::CostLimitExceeded`]
    /// once the cost passes `limit`.
    pub fn evaluate_with_limit(
        &self,
        vars: &Bindings,
        limit: u64,
    ) -> Result<Evaluation, EvalError> {
        if cfg!(debug_assertions) {
            // Unoptimised builds use several times the stack per level of
            // the tree: evaluate on a thread with room (see `limits`).
            std::thread::scope(|scope| {
                match std::thread::Builder::new()
                    .name("cel-eval".into())
                    .stack_size(DEBUG_EVAL_STACK_BYTES)
                    .spawn_scoped(scope, || self.run(vars, limit))
                {
                    Ok(handle) => handle.join().unwrap_or_else(|_| {
                        Err(EvalError::Execution(
                            "internal error while evaluating".into(),
                        ))
                    }),
                    Err(_) => self.run(vars, limit),
                }
            })
        } else {
            self.run(vars, limit)
        }
    }

    fn run(&self, vars: &Bindings, limit: u64) -> Result<Evaluation, EvalError> {
        let mut ctx = Context::with_env(Arc::clone(env()));
        ctx.set_variable_resolver(vars);
        let meter = MeterGuard::install(limit);
        let result =
            crate::cost::charge(self.base_cost).and_then(|()| Value::resolve(&self.metered, &ctx));
        let cost = meter.used();
        drop(meter);
        if cost > limit {
            return Err(EvalError::CostLimitExceeded);
        }
        match result {
            Ok(value) => Ok(Evaluation { value, cost }),
            Err(e) => Err(execution_error(e)),
        }
    }

    /// Evaluates with `vars` under [`PER_CALL_LIMIT`], then spends the cost
    /// from `budget`: [`EvalError::OutOfBudget`] if the budget was already
    /// exhausted (nothing is run) or this evaluation exhausted it.
    pub fn evaluate_in_budget(
        &self,
        vars: &Bindings,
        budget: &mut crate::Budget,
    ) -> Result<Evaluation, EvalError> {
        if budget.is_exhausted() {
            return Err(EvalError::OutOfBudget);
        }
        let limit = budget.remaining().min(PER_CALL_LIMIT);
        match self.evaluate_with_limit(vars, limit) {
            Err(EvalError::CostLimitExceeded) if limit < PER_CALL_LIMIT => {
                budget.spend(u64::MAX)?;
                Err(EvalError::OutOfBudget)
            }
            Ok(e) => {
                budget.spend(e.cost)?;
                Ok(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Evaluates a rule: the result must be a `bool`.
    pub fn eval_bool(&self, vars: &Bindings) -> Result<bool, EvalError> {
        match self.evaluate(vars)?.value {
            Value::Bool(b) => Ok(b),
            other => Err(wrong_type("bool", &other)),
        }
    }

    /// Evaluates a `messageExpression`: the result must be a `string`.
    pub fn eval_string(&self, vars: &Bindings) -> Result<String, EvalError> {
        match self.evaluate(vars)?.value {
            Value::String(s) => Ok(s.to_string()),
            other => Err(wrong_type("string", &other)),
        }
    }

    /// Evaluates, converting the result to JSON (see [`crate::cel_to_json`]).
    pub fn eval_json(&self, vars: &Bindings) -> Result<serde_json::Value, EvalError> {
        let value = self.evaluate(vars)?.value;
        cel_to_json(&value).map_err(|e| EvalError::NotJson(e.to_string()))
    }

    /// The variables the expression reads (comprehension variables aside),
    /// sorted: e.g. `["oldSelf", "self"]`. Hidden names the macros use
    /// start with `@` and are left out.
    pub fn variables(&self) -> Vec<String> {
        crate::references::free_variables(&self.parsed)
            .into_iter()
            .filter(|v| !v.starts_with('@'))
            .collect()
    }

    /// Whether the expression reads `name`: for a CRD rule, whether it is a
    /// transition rule (reads `oldSelf`).
    pub fn uses_variable(&self, name: &str) -> bool {
        crate::references::free_variables(&self.parsed).contains(name)
    }
}

/// Parses on a thread of its own, with a stack the parser cannot exhaust
/// within [`MAX_NESTING_DEPTH`].
fn parse_on_big_stack(expression: &str) -> Result<(IdedExpr, SourceInfo), CompileError> {
    let parse = || {
        env()
            .parser()
            .parse_with_source_info(expression)
            .map_err(|e| CompileError {
                detail: syntax_errors(expression, &e),
            })
    };
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("cel-parse".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, parse)
        {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                Err(CompileError {
                    detail: "ERROR: <input>:1:1: internal error while parsing".into(),
                })
            }),
            // No thread to be had: parse here, the nesting check still bounds it.
            Err(_) => parse(),
        }
    })
}

/// The parser's errors as cel-go prints them (`| ` lines indented by a
/// space, wide dots under wide characters).
fn syntax_errors(source: &str, errors: &cel::ParseErrors) -> String {
    errors
        .errors
        .iter()
        .map(|e| {
            let (line, col) = e.pos;
            if line < 1 || col < 1 {
                return format!("ERROR: <input>:{line}:{col}: {}", e.msg);
            }
            crate::check::display(source, line as usize, col as usize - 1, &e.msg)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn wrong_type(want: &'static str, got: &Value) -> EvalError {
    EvalError::WrongType {
        want,
        got: got.type_of().to_string(),
    }
}

/// The base crate's error, worded as cel-go (and so Kubernetes) words the
/// common ones; a library function's own message is kept as it is.
fn execution_error(e: ExecutionError) -> EvalError {
    let message = match &e {
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(index) => format!("index out of bounds: {index:?}"),
        ExecutionError::UnsupportedBinaryOperator(op, a, b) => {
            let op = match *op {
                "add" => "_+_",
                "sub" => "_-_",
                "mul" => "_*_",
                "div" => "_/_",
                "rem" => "_%_",
                other => other,
            };
            format!(
                "found no matching overload for '{op}' applied to '({}, {})'",
                a.type_of(),
                b.type_of()
            )
        }
        other => other.to_string(),
    };
    if message.contains(COST_LIMIT_EXCEEDED) {
        EvalError::CostLimitExceeded
    } else {
        EvalError::Execution(message)
    }
}

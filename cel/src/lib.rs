//! The API server's CEL engine: one place to compile, evaluate and cost the
//! Common Expression Language as Kubernetes uses it, in
//! CustomResourceDefinition `x-kubernetes-validations` rules and
//! `messageExpression`s, and later in ValidatingAdmissionPolicy,
//! MutatingAdmissionPolicy and webhook `matchConditions`.
//!
//! It is built on the `cel` crate (cel-rust), which parses, expands macros
//! and interprets; this crate adds the Kubernetes libraries, JSON
//! conversions, cost estimates and runtime cost limits. It depends on
//! nothing else in the workspace.
//!
//! # Use
//!
//! ```
//! use k8s_cel::{check, Bindings, Program, STATIC_ESTIMATED_COST_LIMIT};
//! use serde_json::json;
//!
//! // Compile, check and cost once (e.g. when the CRD is written) ...
//! let schema = json!({"type": "object", "properties": {
//!     "replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}}});
//! let env = check::Env::for_schema_rule(&schema, false, false).unwrap();
//! let rule = Program::compile("self.replicas <= self.maxReplicas").unwrap();
//! let (_bool, cost) = rule.check_cost(&env).unwrap();
//! cost.check(STATIC_ESTIMATED_COST_LIMIT).unwrap();
//!
//! // ... evaluate many times, from any thread.
//! let vars = Bindings::new().with_json("self", &json!({"replicas": 3, "maxReplicas": 5}));
//! assert_eq!(rule.eval_bool(&vars), Ok(true));
//!
//! let message = Program::compile("'replicas is ' + string(self.replicas)").unwrap();
//! assert_eq!(message.eval_string(&vars).unwrap(), "replicas is 3");
//! ```
//!
//! * [`Program::compile`] parses; its [`CompileError`] prints as Kubernetes
//!   reports it: `compilation failed: ERROR: <input>:1:6: Syntax error: ...`.
//! * [`Program::check`] type-checks against declared variables
//!   ([`check::Env`], e.g. `self` typed from a CRD's schema) and reports as
//!   kube does (`compilation failed: ERROR: <input>:1:5: undefined field
//!   'x'`); see [`check`] for what it checks and what it leaves `dyn`.
//!   Without it, type mismatches are runtime errors.
//! * [`Bindings`] holds the variables (`self`, `oldSelf`, `object`,
//!   `oldObject`, `request`, `params`, ...) converted from JSON once
//!   ([`json_to_cel`]: integers become `int`, other numbers `double`,
//!   objects maps); [`cel_to_json`] converts results back.
//! * [`Program::evaluate`] runs under Kubernetes' [`PER_CALL_LIMIT`];
//!   [`Program::evaluate_in_budget`] also spends from a shared [`Budget`]
//!   ([`RUNTIME_CEL_COST_BUDGET`] per object by default), failing with
//!   [`EvalError::OutOfBudget`] ("validation failed due to running out of
//!   cost budget, no further validation rules will be run") once spent.
//!   How runtime cost is counted: see [`cost`].
//! * [`Program::variables`] / [`Program::uses_variable`] tell which
//!   variables a rule reads (a CRD rule reading `oldSelf` is a transition
//!   rule).
//! * [`Program::check_cost`] type-checks and estimates the cost from the
//!   types and the schema's sizes as cel-go and kube do (see [`estimate`]);
//!   [`CostEstimate::check`] compares it with
//!   [`STATIC_ESTIMATED_COST_LIMIT`] and words the refusal as Kubernetes
//!   does.
//!
//! # What the language has
//!
//! * The CEL standard library and macros (`has`, `all`, `exists`,
//!   `exists_one`, `map`, `filter`), optional values (`?.`, `optional.of`,
//!   `.orValue`...), `duration`/`timestamp`, `matches`.
//! * From cel-go's extensions: strings (`charAt`, `indexOf`, `lastIndexOf`,
//!   `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`,
//!   `join`, `reverse`, `format`, `strings.quote`), lists (`slice`,
//!   `flatten`, `distinct`, `sort`, `sortBy`, `lists.range`), sets
//!   (`sets.contains`, `sets.equivalent`, `sets.intersects`).
//! * Kubernetes' libraries: lists (`isSorted`, `sum`, `min`, `max`,
//!   `indexOf`, `lastIndexOf`), regex (`find`, `findAll`), URLs, quantities,
//!   IPs and CIDRs, formats, semver: see each module's docs in `library/`.
//! * `cel.bind` and cel-go's two-variable comprehensions (`all(k, v, p)`,
//!   `exists`, `existsOne`, `transformList`, `transformMap`,
//!   `transformMapEntry`), expanded by macros of this crate.
//!
//! * MutatingAdmissionPolicy's `Object{...}`/`Object.spec{...}` and
//!   `JSONPatch{...}` literals (as maps: there is no schema to type them),
//!   and `jsonpatch.escapeKey`.
//!
//! Kubernetes' authorizer library (`authorizer.group(...)...check(verb)`)
//! is here, answered by an oracle the API server supplies
//! ([`authorizer`], [`AuthzOracle`]).
//!
//! Not provided: the `ext.Math` and encoders extensions.

pub mod check;
pub mod cost;
pub mod estimate;
mod instrument;
mod library;
pub mod limits;
mod native;
mod objects;
mod program;
pub mod references;
mod value;

pub use cel::Value;
pub use cost::{
    Budget, COST_LIMIT_EXCEEDED, MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES,
    MAX_REQUEST_SIZE_BYTES, OUT_OF_BUDGET, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET,
    STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT,
};
pub use estimate::{CostEstimate, CostExceeded};
pub use library::authz::{authorizer, AuthzCheck, AuthzDecision, AuthzOracle, PENDING};
pub use limits::{MAX_AST_DEPTH, MAX_NESTING_DEPTH};
pub use program::{Bindings, CompileError, EvalError, Evaluation, Program, MAX_EXPRESSION_LENGTH};
pub use value::{cel_to_json, json_to_cel, ToJsonError};

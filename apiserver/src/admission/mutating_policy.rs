//! MutatingAdmissionPolicy (`admissionregistration.k8s.io/v1`): CEL
//! mutations bound to requests by MutatingAdmissionPolicyBindings, run in
//! the mutating half of the admission chain (after the built-in mutating
//! plugins, before the mutating webhooks), on every replica.
//!
//! The set is kept like the ValidatingAdmissionPolicies' ([`super::policy`]
//! module doc): a controller per replica lists both collections on any
//! change and compiles every expression once. Matching
//! (`matchConstraints`, the binding's `matchResources`), params,
//! `matchConditions` and `variables` are the validating policies' own.
//!
//! Per request, bindings run in order of policy name, then binding name;
//! each matching (binding, param) runs the policy's mutations in order,
//! each seeing the object as the previous one left it:
//! - `ApplyConfiguration`: the expression builds a partial object
//!   (`Object{spec: Object.spec{replicas: 3}}`) that is merged into the
//!   object as server-side apply merges a configuration (maps and structs
//!   key by key, associative lists item by item, atomic values whole),
//!   by the kind's schema;
//! - `JSONPatch`: the expression builds a list of patch operations
//!   (`[JSONPatch{op: "add", path: "/metadata/labels/x", value: "y"}]`)
//!   applied as RFC 6902.
//!
//! A failure (an expression that errs, a result of the wrong type, a patch
//! that does not apply) is kube's `policy '<p>' with binding '<b>' denied
//! request: <message>` (403, reason `Invalid`), unless the policy's
//! `failurePolicy` is `Ignore`. Policies with `reinvocationPolicy:
//! IfNeeded` run once more after the mutating webhooks when those changed
//! the object.

use super::attributes::{Attributes, Scope};
use super::policy::{self, match_of, named_exprs, Expr, Match};
use crate::backend::Backend;
use crate::controllers::Controller;
use crate::error::Result;
use crate::object;
use apimachinery::status::StatusCause;
use k8s_cel::Bindings;
use serde_json::Value;
use std::sync::Arc;

/// The compiled mutating policies and bindings of this replica.
pub type MutatingPolicies = super::attributes::Compiled<MutatingSet>;

#[derive(Default)]
pub struct MutatingSet {
    policies: std::collections::HashMap<String, Arc<Policy>>,
    /// Sorted by (policy name, binding name).
    bindings: Vec<Binding>,
}

impl MutatingSet {
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }
}

enum Mutation {
    Apply(Expr),
    JsonPatch(Expr),
}

struct Policy {
    name: String,
    reads: std::collections::HashSet<String>,
    fail: bool,
    reinvoke: bool,
    param_kind: Option<(String, String)>,
    constraints: Option<Match>,
    conditions: Vec<(String, Expr)>,
    variables: Vec<(String, Expr)>,
    mutations: Vec<Mutation>,
}

struct Binding {
    name: String,
    policy: String,
    param_ref: Option<Value>,
    resources: Option<Match>,
}

fn compile_policy(v: &Value) -> Option<Policy> {
    let name = object::name(v)?.to_string();
    let spec = v.get("spec")?;
    let s = |f: &str| spec.get(f).and_then(Value::as_str);
    let param_kind = spec.get("paramKind").and_then(|p| {
        Some((
            p.get("apiVersion")?.as_str()?.to_string(),
            p.get("kind")?.as_str()?.to_string(),
        ))
    });
    let mutations: Vec<Mutation> = spec
        .get("mutations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let expr = |field: &str| {
                Expr::new(
                    m.pointer(&format!("/{field}/expression"))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                )
            };
            match m.get("patchType").and_then(Value::as_str)? {
                "ApplyConfiguration" => Some(Mutation::Apply(expr("applyConfiguration"))),
                "JSONPatch" => Some(Mutation::JsonPatch(expr("jsonPatch"))),
                _ => None,
            }
        })
        .collect();
    let conditions = named_exprs(spec.get("matchConditions"), "expression");
    let variables = named_exprs(spec.get("variables"), "expression");
    let reads = conditions
        .iter()
        .chain(&variables)
        .map(|(_, e)| e)
        .chain(mutations.iter().map(|m| match m {
            Mutation::Apply(e) | Mutation::JsonPatch(e) => e,
        }))
        .flat_map(Expr::reads)
        .collect();
    Some(Policy {
        name,
        reads,
        fail: s("failurePolicy") != Some("Ignore"),
        reinvoke: s("reinvocationPolicy") == Some("IfNeeded"),
        param_kind,
        constraints: match_of(spec.get("matchConstraints")),
        conditions,
        variables,
        mutations,
    })
}

fn compile_binding(v: &Value) -> Option<Binding> {
    let spec = v.get("spec")?;
    Some(Binding {
        name: object::name(v)?.to_string(),
        policy: spec.get("policyName")?.as_str()?.to_string(),
        param_ref: spec.get("paramRef").filter(|p| p.is_object()).cloned(),
        resources: match_of(spec.get("matchResources")),
    })
}

fn compile(policies: &[Value], bindings: &[Value]) -> MutatingSet {
    let policies = policies
        .iter()
        .filter_map(compile_policy)
        .map(|p| (p.name.clone(), Arc::new(p)))
        .collect();
    let mut bindings: Vec<Binding> = bindings.iter().filter_map(compile_binding).collect();
    bindings.sort_by(|a, b| (&a.policy, &a.name).cmp(&(&b.policy, &b.name)));
    MutatingSet { policies, bindings }
}

/// The loop that keeps this replica's set: it reads `backend` and
/// installs into `into`; it runs on the backend.
pub fn controller(backend: &Backend, into: &MutatingPolicies) -> Option<Controller<Backend>> {
    let into = into.clone();
    crate::controllers::config_controller(
        backend,
        "mutating_admission_policy",
        "admissionregistration.k8s.io",
        [
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
        ],
        move |_, policies, bindings| {
            let set = compile(policies, bindings);
            tracing::debug!(
                policies = set.policies.len(),
                bindings = set.bindings.len(),
                "mutating admission policies loaded"
            );
            into.replace(set);
        },
    )
}

/// Applies one mutation's result to `obj`.
fn apply_mutation(
    schema: Option<apimachinery::schema::TypeRef<'_>>,
    mutation: &Mutation,
    vars: &Bindings,
    obj: &mut Value,
) -> std::result::Result<(), String> {
    match mutation {
        Mutation::Apply(e) => {
            let patch = e.eval(vars)?;
            if !patch.is_object() {
                return Err(format!(
                    "unsupported return type from ApplyConfiguration expression: {}",
                    type_name(&patch)
                ));
            }
            let merged = apimachinery::managedfields::merge(schema, obj, &patch);
            *obj = merged;
            Ok(())
        }
        Mutation::JsonPatch(e) => {
            let patch = e.eval(vars)?;
            let Some(ops) = patch.as_array() else {
                return Err(
                    "type mismatch: JSONPatchType.expression should evaluate to array".into(),
                );
            };
            if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
                return Err(format!(
                    "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                    type_name(bad)
                ));
            }
            *obj = apimachinery::patch::apply_json_patch(obj, &patch)
                .map_err(|e| format!("JSON Patch: {e}"))?;
            Ok(())
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Runs one policy's conditions, variables and mutations for one param
/// on `obj`; failures (when the policy fails closed) go to `errors`.
fn run_policy(
    a: &Attributes<'_>,
    policy: &Policy,
    binding: &Binding,
    (request, ns, param): (Option<&Value>, Option<&Value>, Option<&Value>),
    oracle: Option<&Arc<super::authz::Oracle>>,
    obj: &mut Value,
    errors: &mut Vec<String>,
) {
    let mut fail = |message: String| {
        if policy.fail {
            errors.push(format!(
                "policy '{}' with binding '{}' denied request: {message}",
                policy.name, binding.name
            ));
        }
    };
    let reads = |v: &str| policy.reads.contains(v);
    let mut vars = Bindings::new();
    let bind = |vars: &mut Bindings, name: &str, v: Option<&Value>| {
        if reads(name) {
            vars.insert_json(name, v.unwrap_or(&Value::Null));
        }
    };
    bind(&mut vars, "object", Some(obj));
    bind(&mut vars, "oldObject", a.old);
    bind(&mut vars, "request", request);
    bind(&mut vars, "namespaceObject", ns);
    bind(&mut vars, "params", param);
    if let Some(o) = oracle {
        vars.insert_value("authorizer", super::authz::variable(o, a));
    }
    match super::policy::conditions_and_variables(&policy.conditions, &policy.variables, &mut vars)
    {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            fail(e);
            return;
        }
    }
    for m in &policy.mutations {
        if let Err(message) = apply_mutation(a.schema(), m, &vars, obj) {
            fail(message);
            continue;
        }
        // The next mutation sees the object as this one left it.
        bind(&mut vars, "object", Some(obj));
    }
}

/// Runs every matching binding's mutations on `obj`. `reinvocation`:
/// only the policies with `reinvocationPolicy: IfNeeded` run (the second
/// round, after the webhooks changed the object). Answers whether any
/// policy that may be reinvoked ran.
pub async fn mutate(
    scope: &Scope<'_>,
    a: &Attributes<'_>,
    obj: &mut Value,
    reinvocation: bool,
) -> Result<bool> {
    let backend = scope.ctx.backend;
    let set = scope.ctx.mutating_policies.current();
    if set.is_empty() {
        return Ok(false);
    }
    let mut namespace: Option<Option<Arc<Value>>> = None;
    let mut errors: Vec<String> = Vec::new();
    let mut reinvocable = false;
    for binding in &set.bindings {
        let Some(policy) = set.policies.get(&binding.policy) else {
            continue;
        };
        if reinvocation && !policy.reinvoke {
            continue;
        }
        if namespace.is_none() {
            namespace = Some(match a.namespace.filter(|_| a.res.namespaced) {
                Some(ns) => policy::namespace_object(backend, ns).await,
                None => None,
            });
        }
        let ns = namespace.as_ref().and_then(Option::as_deref);
        let params = {
            let view = Attributes {
                object: Some(&*obj),
                ..*a
            };
            let constrained = policy
                .constraints
                .as_ref()
                .is_some_and(|m| m.matches(&view, ns, false));
            let bound = binding
                .resources
                .as_ref()
                .is_none_or(|m| m.matches(&view, ns, true));
            if !constrained || !bound {
                continue;
            }
            policy::params(
                backend,
                policy.param_kind.as_ref(),
                binding.param_ref.as_ref(),
                &view,
            )
            .await
        };
        let params = match params {
            Ok(p) => p,
            Err(message) => {
                if policy.fail {
                    errors.push(format!(
                        "policy '{}' with binding '{}' denied request: {message}",
                        policy.name, binding.name
                    ));
                }
                continue;
            }
        };
        let reads = |v: &str| policy.reads.contains(v);
        let request = reads("request").then(|| policy::request_var(a));
        reinvocable |= policy.reinvoke;
        let oracle = reads("authorizer").then(|| Arc::new(super::authz::Oracle::default()));
        for p in params {
            let vars = (request.as_ref(), ns, p.as_ref());
            let Some(o) = &oracle else {
                run_policy(a, policy, binding, vars, None, obj, &mut errors);
                continue;
            };
            // With the authorizer, mutations are tried on a copy while it
            // may still owe answers (see `authz`); the last round's result
            // is kept.
            for round in 1..=super::authz::ROUNDS {
                let mut attempt = obj.clone();
                let mut round_errors = Vec::new();
                run_policy(
                    a,
                    policy,
                    binding,
                    vars,
                    Some(o),
                    &mut attempt,
                    &mut round_errors,
                );
                let again =
                    round < super::authz::ROUNDS && o.resolve(scope.ctx.authorizer, a.user).await;
                if !again {
                    *obj = attempt;
                    errors.extend(round_errors);
                    break;
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(reinvocable);
    }
    let view = Attributes {
        object: Some(&*obj),
        ..*a
    };
    let mut s = super::attributes::forbidden(&view, "admission request denied by policy");
    s.message = errors[0].clone();
    s.reason = "Invalid".into();
    if let Some(d) = s.details.as_mut() {
        for message in errors {
            d.causes.push(StatusCause {
                reason: String::new(),
                message,
                field: String::new(),
            });
        }
    }
    Err(s.into())
}

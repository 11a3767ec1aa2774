//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`): CEL
//! policies bound to requests by ValidatingAdmissionPolicyBindings, run in
//! the write path after schema validation, on every replica.
//!
//! **Keeping the set.** Every replica runs [`controller`] (not
//! leader-gated: each one enforces): it follows the two collections and,
//! on any change, lists both from the store and compiles every policy's
//! expressions once into a [`PolicySet`], swapped in whole. A request reads
//! the current set without locking it for longer than an `Arc` clone.
//!
//! **Per request** ([`validate`]), for each binding whose policy exists:
//! 1. the policy's `matchConstraints` and the binding's `matchResources`
//!    must both match: resource rules (groups, versions, resources with
//!    subresources as kube splits them, operations, scope, names) minus
//!    the excluded ones, the namespace's labels (`namespaceSelector`), and
//!    the new or old object's labels (`objectSelector`);
//! 2. the params: none without `paramKind`; else the object `paramRef`
//!    names, or every object its selector picks, in its namespace (the
//!    request's when unset); none found is a denial with `Deny` as
//!    `parameterNotFoundAction`;
//! 3. per param: `matchConditions` (all true, or the policy does not
//!    apply), `variables` in order, then each validation. CEL sees
//!    `object`, `oldObject`, `request`, `params`, `namespaceObject` and
//!    `variables`;
//! 4. a failed validation is a decision with its message
//!    (`messageExpression`, else `message`, else `failed expression: E`)
//!    and reason; an expression that errs or does not compile is one too,
//!    unless `failurePolicy: Ignore`.
//!
//! The binding's `validationActions` say what a decision does: `Deny` fails
//! the request with kube's Status (the first denial; code from the reason,
//! 422 for `Invalid`), `Warn` adds a `Warning` header, `Audit` adds the
//! failure to the request's `validation.policy.admission.k8s.io/validation_failure`
//! audit annotation (kube's JSON list). A policy's `auditAnnotations`
//! become `<policy>/<key>` audit annotations (a `null` value adds none).

use super::attributes::{Attributes, Context, Decision};
use crate::backend::Backend;
use crate::controllers::Controller;
use crate::object;
use apimachinery::read::Freshness;
use apimachinery::selector::LabelSelector;
use k8s_cel::{Bindings, Program};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use watchcache::ListOptions;

/// The compiled policies and bindings of this replica.
pub type Policies = super::attributes::Compiled<PolicySet>;

#[derive(Default)]
pub struct PolicySet {
    policies: std::collections::HashMap<String, Arc<Policy>>,
    bindings: Vec<Binding>,
}

impl PolicySet {
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }
}

/// One expression, compiled (or why it did not compile).
pub(super) struct Expr {
    source: String,
    program: Result<Program, String>,
}

impl Expr {
    pub(super) fn new(source: &str) -> Expr {
        Expr {
            source: source.to_string(),
            program: Program::compile(source).map_err(|e| e.to_string()),
        }
    }

    /// The top-level variables the expression reads.
    pub(super) fn reads(&self) -> Vec<String> {
        self.program
            .as_ref()
            .map(Program::variables)
            .unwrap_or_default()
    }

    /// Evaluates; errors worded as kube words them.
    pub(super) fn source(&self) -> &str {
        &self.source
    }

    pub(super) fn eval(&self, vars: &Bindings) -> Result<Value, String> {
        let p = self.program.as_ref().map_err(|e| {
            format!(
                "compilation failed for expression '{}': {e}",
                self.source.trim()
            )
        })?;
        p.eval_json(vars)
            .map_err(|e| format!("expression '{}' resulted in error: {e}", self.source.trim()))
    }
}

struct Validation {
    expr: Expr,
    message: Option<String>,
    message_expr: Option<Expr>,
    reason: Option<String>,
}

struct Policy {
    name: String,
    /// The variables any of its expressions read: only those are bound
    /// (converting an object for CEL is the larger part of a check).
    reads: std::collections::HashSet<String>,
    fail: bool,
    param_kind: Option<(String, String)>,
    constraints: Option<Match>,
    conditions: Vec<(String, Expr)>,
    variables: Vec<(String, Expr)>,
    validations: Vec<Validation>,
    /// `auditAnnotations`: key and value expression.
    audit_annotations: Vec<(String, Expr)>,
}

struct Binding {
    name: String,
    policy: String,
    param_ref: Option<Value>,
    resources: Option<Match>,
    deny: bool,
    warn: bool,
    audit: bool,
    /// `validationActions` as written (the audit record repeats them).
    actions: Vec<String>,
}

/// A `MatchResources` (webhooks match with the same fields).
pub(super) struct Match {
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    rules: Vec<Rule>,
    exclude: Vec<Rule>,
}

/// A `NamedRuleWithOperations`.
pub(super) struct Rule {
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    operations: Vec<String>,
    scope: String,
    names: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    object::strings(v)
}

pub(super) fn selector(v: Option<&Value>) -> LabelSelector {
    match v {
        // Unset selects everything, as kube defaults it to `{}`.
        None | Some(Value::Null) => LabelSelector::everything(),
        Some(v) => {
            LabelSelector::from_label_selector(v).unwrap_or_else(|_| LabelSelector::nothing())
        }
    }
}

pub(super) fn rules(v: Option<&Value>) -> Vec<Rule> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| Rule {
            groups: strings(r.get("apiGroups")),
            versions: strings(r.get("apiVersions")),
            resources: strings(r.get("resources")),
            operations: strings(r.get("operations")),
            scope: r
                .get("scope")
                .and_then(Value::as_str)
                .unwrap_or("*")
                .to_string(),
            names: strings(r.get("resourceNames")),
        })
        .collect()
}

impl Match {
    /// A webhook's matching fields.
    pub(super) fn of_webhook(hook: &Value) -> Match {
        Match {
            namespace_selector: selector(hook.get("namespaceSelector")),
            object_selector: selector(hook.get("objectSelector")),
            rules: rules(hook.get("rules")),
            exclude: Vec::new(),
        }
    }
}

pub(super) fn match_of(v: Option<&Value>) -> Option<Match> {
    let v = v.filter(|v| v.is_object())?;
    Some(Match {
        namespace_selector: selector(v.get("namespaceSelector")),
        object_selector: selector(v.get("objectSelector")),
        rules: rules(v.get("resourceRules")),
        exclude: rules(v.get("excludeResourceRules")),
    })
}

pub(super) fn named_exprs(v: Option<&Value>, field: &str) -> Vec<(String, Expr)> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            let expr = c.get(field).and_then(Value::as_str).unwrap_or("");
            (name.to_string(), Expr::new(expr))
        })
        .collect()
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
    let validations = spec
        .get("validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|x| Validation {
            expr: Expr::new(x.get("expression").and_then(Value::as_str).unwrap_or("")),
            message: x
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_string),
            message_expr: x
                .get("messageExpression")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(Expr::new),
            reason: x.get("reason").and_then(Value::as_str).map(str::to_string),
        })
        .collect();
    let conditions = named_exprs(spec.get("matchConditions"), "expression");
    let variables = named_exprs(spec.get("variables"), "expression");
    let validations: Vec<Validation> = validations;
    let audit_annotations: Vec<(String, Expr)> = spec
        .get("auditAnnotations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a.get("key")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Expr::new(
                    a.get("valueExpression")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                ),
            )
        })
        .collect();
    let reads = conditions
        .iter()
        .chain(&variables)
        .chain(&audit_annotations)
        .map(|(_, e)| e)
        .chain(
            validations
                .iter()
                .flat_map(|v| std::iter::once(&v.expr).chain(v.message_expr.as_ref())),
        )
        .flat_map(Expr::reads)
        .collect();
    Some(Policy {
        name,
        reads,
        fail: s("failurePolicy") != Some("Ignore"),
        param_kind,
        constraints: match_of(spec.get("matchConstraints")),
        conditions,
        variables,
        validations,
        audit_annotations,
    })
}

fn compile_binding(v: &Value) -> Option<Binding> {
    let name = object::name(v)?.to_string();
    let spec = v.get("spec")?;
    let actions = strings(spec.get("validationActions"));
    Some(Binding {
        name,
        policy: spec.get("policyName")?.as_str()?.to_string(),
        param_ref: spec.get("paramRef").filter(|p| p.is_object()).cloned(),
        resources: match_of(spec.get("matchResources")),
        deny: actions.iter().any(|a| a == "Deny"),
        warn: actions.iter().any(|a| a == "Warn"),
        audit: actions.iter().any(|a| a == "Audit"),
        actions,
    })
}

/// Compiles a set from the listed objects.
fn compile(policies: &[Value], bindings: &[Value]) -> PolicySet {
    let policies = policies
        .iter()
        .filter_map(compile_policy)
        .map(|p| (p.name.clone(), Arc::new(p)))
        .collect();
    let mut bindings: Vec<Binding> = bindings.iter().filter_map(compile_binding).collect();
    bindings.sort_by(|a, b| a.name.cmp(&b.name));
    PolicySet { policies, bindings }
}

/// The loop that keeps this replica's set (see the module doc): it reads
/// `backend` and installs into `into`; it runs on the backend.
pub fn controller(backend: &Backend, into: &Policies) -> Option<Controller<Backend>> {
    let into = into.clone();
    crate::controllers::config_controller(
        backend,
        "validating_admission_policy",
        "admissionregistration.k8s.io",
        [
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ],
        move |_, policies, bindings| {
            let set = compile(policies, bindings);
            tracing::debug!(
                policies = set.policies.len(),
                bindings = set.bindings.len(),
                "validating admission policies loaded"
            );
            into.replace(set);
        },
    )
}

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

impl Rule {
    fn matches(&self, a: &Attributes<'_>) -> bool {
        if !any_or(&self.groups, &a.res.group)
            || !any_or(&self.versions, &a.res.version)
            || !any_or(&self.operations, a.operation)
        {
            return false;
        }
        let resource = self.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == a.res.plural) && (sub == "*" || sub == a.subresource)
        });
        if !resource {
            return false;
        }
        let scoped = match self.scope.as_str() {
            "Cluster" => !a.res.namespaced,
            "Namespaced" => a.res.namespaced,
            _ => true,
        };
        scoped && (self.names.is_empty() || self.names.iter().any(|n| n == a.name))
    }
}

pub(super) fn labels(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

impl Match {
    /// Whether `a` matches; `open`: no resource rules means any resource
    /// (a binding's `matchResources`; a policy's constraints need rules).
    pub(super) fn matches(
        &self,
        a: &Attributes<'_>,
        namespace: Option<&Value>,
        open: bool,
    ) -> bool {
        let included = (open && self.rules.is_empty()) || self.rules.iter().any(|r| r.matches(a));
        if !included || self.exclude.iter().any(|r| r.matches(a)) {
            return false;
        }
        let ns_ok = if a.res.group.is_empty() && a.res.plural == "namespaces" {
            // A namespace is matched on its own labels.
            self.namespace_selector.matches(&labels(a.object.or(a.old)))
        } else if a.res.namespaced {
            self.namespace_selector.matches(&labels(namespace))
        } else {
            true
        };
        let obj_ok = [a.object, a.old]
            .into_iter()
            .flatten()
            .any(|o| self.object_selector.matches(&labels(Some(o))))
            || (a.object.is_none() && a.old.is_none() && self.object_selector.matches(&Map::new()));
        ns_ok && obj_ok
    }
}

/// The `request` variable (an `admission.k8s.io/v1` AdmissionRequest's
/// fields).
pub(super) fn request_var(a: &Attributes<'_>) -> Value {
    let kind = json!({"group": a.kind.group, "version": a.kind.version, "kind": a.kind.kind});
    let mut r = json!({
        "kind": kind,
        "resource": {"group": a.res.group, "version": a.res.version, "resource": a.res.plural},
        "requestKind": kind,
        "requestResource": {"group": a.res.group, "version": a.res.version, "resource": a.res.plural},
        "name": a.name,
        "namespace": a.namespace.unwrap_or(""),
        "operation": a.operation,
        "userInfo": serde_json::to_value(a.user).unwrap_or_else(|_| json!({})),
        "dryRun": a.dry_run,
        "options": a.options.to_value(a.operation),
    });
    if !a.subresource.is_empty() {
        r["subResource"] = Value::from(a.subresource);
        r["requestSubResource"] = Value::from(a.subresource);
    }
    r
}

/// The params a binding names for a request; `Err` is the message of a
/// denial (none found, with `Deny`).
pub(super) async fn params(
    backend: &Backend,
    param_kind: Option<&(String, String)>,
    param_ref: Option<&Value>,
    a: &Attributes<'_>,
) -> Result<Vec<Option<Value>>, String> {
    let Some((api_version, kind)) = param_kind else {
        return Ok(vec![None]);
    };
    let Some(r) = param_ref else {
        return Err(format!(
            "failed to configure binding: paramKind kind `{kind}` not found"
        ));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let res = backend
        .registry
        .by_kind(group, version, kind)
        .ok_or_else(|| format!("failed to configure binding: paramKind kind `{kind}` not found"))?;
    let ns = if res.namespaced {
        r.get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .or(a.namespace)
    } else {
        None
    };
    if res.namespaced && ns.is_none() {
        return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
    }
    let found: Vec<Option<Value>> = if let Some(name) = r.get("name").and_then(Value::as_str) {
        let key = backend.key(&res, ns, name);
        match backend.store.get(&key, Freshness::NotOlderThan(0)).await {
            Ok(Some(o)) => vec![Some(o.value().clone())],
            Ok(None) => Vec::new(),
            Err(e) => return Err(format!("failed to configure binding: {e}")),
        }
    } else {
        let sel = selector(r.get("selector"));
        let opts = ListOptions {
            freshness: Freshness::NotOlderThan(0),
            limit: None,
            continue_from: None,
            predicate: Default::default(),
        };
        let listed = backend
            .store
            .list(&backend.collection_prefix(&res, ns), &opts)
            .await
            .map_err(|e| format!("failed to configure binding: {e}"))?;
        listed
            .items
            .iter()
            .filter(|o| sel.matches(&labels(Some(o.value()))))
            .map(|o| Some(o.value().clone()))
            .collect()
    };
    if found.is_empty() {
        let deny = r.get("parameterNotFoundAction").and_then(Value::as_str) != Some("Allow");
        if deny {
            return Err(
                "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
                    .into(),
            );
        }
    }
    Ok(found)
}

/// What one evaluation of a policy found: failures (message, reason,
/// index of the validation) and audit annotations (key, value).
#[derive(Default)]
struct Outcome {
    failures: Vec<(String, Option<String>, usize)>,
    annotations: Vec<(String, String)>,
}

/// A policy's `matchConditions`, then its `variables` bound in order (a
/// variable that errs is left out): `Ok(false)` when a condition is false
/// (the policy does not apply), `Err` with kube's message when one errs or
/// is not a bool. Shared by the validating and the mutating policies.
pub(super) fn conditions_and_variables(
    conditions: &[(String, Expr)],
    variables: &[(String, Expr)],
    vars: &mut Bindings,
) -> Result<bool, String> {
    for (name, c) in conditions {
        match c.eval(vars)? {
            Value::Bool(true) => {}
            Value::Bool(false) => return Ok(false),
            _ => return Err(format!("matchCondition '{name}' must evaluate to bool")),
        }
    }
    let mut bound = Map::new();
    for (name, v) in variables {
        vars.insert_json("variables", &Value::Object(bound.clone()));
        if let Ok(value) = v.eval(vars) {
            bound.insert(name.clone(), value);
        }
    }
    vars.insert_json("variables", &Value::Object(bound));
    Ok(true)
}

/// Runs one policy with one param; the decisions it makes.
fn evaluate(policy: &Policy, vars: &mut Bindings, outcome: &mut Outcome) {
    let out = &mut outcome.failures;
    match conditions_and_variables(&policy.conditions, &policy.variables, vars) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            if policy.fail {
                out.push((e, None, 0));
            }
            return;
        }
    }
    for (index, v) in policy.validations.iter().enumerate() {
        match v.expr.eval(vars) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => {
                let fallback = v
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("failed expression: {}", v.expr.source.trim()));
                let message = v
                    .message_expr
                    .as_ref()
                    .and_then(|m| m.eval(vars).ok())
                    .and_then(|m| m.as_str().map(|s| s.trim().to_string()))
                    .filter(|m| !m.is_empty() && !m.contains('\n'))
                    .unwrap_or(fallback);
                out.push((message, v.reason.clone(), index));
            }
            Ok(_) => {
                if policy.fail {
                    out.push((
                        format!(
                            "expression '{}' resulted in error: must evaluate to bool",
                            v.expr.source.trim()
                        ),
                        None,
                        index,
                    ));
                }
            }
            Err(e) => {
                if policy.fail {
                    out.push((e, None, index));
                }
            }
        }
    }
    // kube keeps at most 10 KiB of an annotation's value.
    const MAX_VALUE: usize = 10 * 1024;
    for (key, e) in &policy.audit_annotations {
        match e.eval(vars) {
            Ok(Value::Null) => {}
            Ok(Value::String(mut v)) => {
                if v.len() > MAX_VALUE {
                    let mut cut = MAX_VALUE;
                    while !v.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    v.truncate(cut);
                }
                outcome.annotations.push((key.clone(), v));
            }
            Ok(_) => {
                if policy.fail {
                    outcome.failures.push((
                        format!(
                            "valueExpression '{}' resulted in error: value must be a string",
                            e.source.trim()
                        ),
                        None,
                        0,
                    ));
                }
            }
            Err(err) => {
                if policy.fail {
                    outcome.failures.push((err, None, 0));
                }
            }
        }
    }
}

/// Runs every binding that matches `a`; denials come back as
/// [`Decision::Deny`] with kube's wording, warnings as text.
pub async fn validate(ctx: &Context<'_>, a: &Attributes<'_>) -> Vec<Decision> {
    let backend = ctx.backend;
    let set = ctx.policies.current();
    if set.is_empty() {
        return Vec::new();
    }
    let mut namespace: Option<Option<Arc<Value>>> = None;
    let mut decisions = Vec::new();
    for binding in &set.bindings {
        let Some(policy) = set.policies.get(&binding.policy) else {
            continue;
        };
        if namespace.is_none() {
            namespace = Some(match a.namespace.filter(|_| a.res.namespaced) {
                Some(ns) => namespace_object(backend, ns).await,
                None => None,
            });
        }
        let ns = namespace.as_ref().and_then(Option::as_deref);
        let constrained = policy
            .constraints
            .as_ref()
            .is_some_and(|m| m.matches(a, ns, false));
        let bound = binding
            .resources
            .as_ref()
            .is_none_or(|m| m.matches(a, ns, true));
        if !constrained || !bound {
            continue;
        }
        let started = std::time::Instant::now();
        let mut found = Outcome::default();
        match params(
            backend,
            policy.param_kind.as_ref(),
            binding.param_ref.as_ref(),
            a,
        )
        .await
        {
            Ok(params) => {
                let reads = |v: &str| policy.reads.contains(v);
                let request = reads("request").then(|| request_var(a));
                let oracle = reads("authorizer").then(|| Arc::new(super::authz::Oracle::default()));
                for p in params {
                    for round in 1..=super::authz::ROUNDS {
                        let mut vars = Bindings::new();
                        let mut bind = |name: &str, v: Option<&Value>| {
                            if reads(name) {
                                vars.insert_json(name, v.unwrap_or(&Value::Null));
                            }
                        };
                        bind("object", a.object);
                        bind("oldObject", a.old);
                        bind("request", request.as_ref());
                        bind("namespaceObject", ns);
                        bind("params", p.as_ref());
                        if let Some(o) = &oracle {
                            vars.insert_value("authorizer", super::authz::variable(o, a));
                        }
                        let mut outcome = Outcome::default();
                        evaluate(policy, &mut vars, &mut outcome);
                        // Checks the authorizer had not answered: decide
                        // them and evaluate again.
                        let again = match &oracle {
                            Some(o) if round < super::authz::ROUNDS => {
                                o.resolve(ctx.authorizer, a.user).await
                            }
                            _ => false,
                        };
                        if !again {
                            found.failures.extend(outcome.failures);
                            found.annotations.extend(outcome.annotations);
                            break;
                        }
                    }
                }
            }
            Err(message) => found.failures.push((message, None, 0)),
        }
        if let Some(m) = &backend.metrics {
            let elapsed = started.elapsed();
            if found.failures.is_empty() {
                m.policy_check(&policy.name, &binding.name, "no_error", "allow", elapsed);
            }
            for (message, _, _) in &found.failures {
                let error_type = error_type(message);
                for (on, action) in [
                    (binding.deny, "deny"),
                    (binding.warn, "warn"),
                    (binding.audit, "audit"),
                ] {
                    if on {
                        m.policy_check(&policy.name, &binding.name, error_type, action, elapsed);
                    }
                }
            }
        }
        for (key, value) in found.annotations {
            decisions.push(Decision::Annotate {
                key: format!("{}/{key}", policy.name),
                value,
            });
        }
        for (message, reason, index) in found.failures {
            if binding.audit {
                decisions.push(Decision::AuditFailure(json!({
                    "message": message,
                    "policy": binding.policy,
                    "binding": binding.name,
                    "expressionIndex": index,
                    "validationActions": binding.actions,
                })));
            }
            if binding.deny {
                decisions.push(Decision::Deny {
                    message: format!(
                        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
                        policy.name, binding.name
                    ),
                    reason: reason.unwrap_or_else(|| "Invalid".into()),
                });
            }
            if binding.warn {
                decisions.push(Decision::Warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                    policy.name, binding.name
                )));
            }
        }
    }
    decisions
}

/// kube's error type of a failure, for the metrics.
fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation failed") {
        "compile_error"
    } else if message.contains("cost budget") || message.contains("cost limit") {
        "out_of_budget"
    } else if message.contains("resulted in error") || message.contains("must evaluate to") {
        "invalid_error"
    } else {
        "no_error"
    }
}

pub(super) async fn namespace_object(backend: &Backend, ns: &str) -> Option<Arc<Value>> {
    let res = backend.registry.lookup("", "v1", "namespaces")?;
    let key = backend.key(&res, None, ns);
    backend
        .store
        .get(&key, Freshness::NotOlderThan(0))
        .await
        .ok()
        .flatten()
        .map(|o| o.into_value())
}

/// The ValidatingAdmissionPolicy plugin's validating half: every binding's
/// decision, its audit annotations and warnings, and the first denial.
pub async fn admit(
    scope: &super::attributes::Scope<'_>,
    a: &Attributes<'_>,
) -> crate::error::Result<()> {
    let decisions = validate(&scope.ctx, a).await;
    let mut denial = None;
    // Annotations of the same key from several bindings: kube keeps the
    // distinct values, comma-separated.
    let mut annotations: Vec<(String, Vec<String>)> = Vec::new();
    let mut failures = Vec::new();
    for d in decisions {
        match d {
            Decision::Warn(w) => scope.warn(w),
            Decision::Deny { message, reason } => {
                denial.get_or_insert((message, reason));
            }
            Decision::Annotate { key, value } => {
                match annotations.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, values)) if values.contains(&value) => {}
                    Some((_, values)) => values.push(value),
                    None => annotations.push((key, vec![value])),
                }
            }
            Decision::AuditFailure(v) => failures.push(v),
        }
    }
    for (key, values) in annotations {
        scope.audit_annotate(&key, &values.join(", "));
    }
    if !failures.is_empty() {
        // kube keeps the first 50.
        failures.truncate(50);
        scope.audit_annotate(
            "validation.policy.admission.k8s.io/validation_failure",
            &Value::Array(failures).to_string(),
        );
    }
    let Some((message, reason)) = denial else {
        return Ok(());
    };
    let mut s = super::attributes::forbidden(a, &message);
    s.reason = reason.clone();
    s.code = reason_code(&reason);
    if let Some(d) = s.details.as_mut() {
        d.causes.push(apimachinery::status::StatusCause {
            reason: String::new(),
            message,
            field: String::new(),
        });
    }
    Err(s.into())
}

/// kube's `reasonToCode` for policy denials.
fn reason_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::auth::UserInfo;

    fn policy(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn binding(spec: Value) -> Value {
        json!({"metadata": {"name": "b"}, "spec": spec})
    }

    fn attrs<'a>(obj: &'a Value, user: &'a UserInfo) -> Attributes<'a> {
        Attributes {
            operation: "CREATE",
            res: crate::registry::RESOURCES
                .iter()
                .find(|r| r.group == "apps" && r.version == "v1" && r.plural == "deployments")
                .unwrap(),
            kind: crate::admission::attributes::Kind {
                group: "apps",
                version: "v1",
                kind: "Deployment",
            },
            subresource: "",
            namespace: Some("default"),
            name: "web",
            object: Some(obj),
            old: None,
            user,
            dry_run: false,
            options: crate::admission::Options::None,
        }
    }

    fn deployments_rule() -> Value {
        json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]})
    }

    fn run(p: Value, b: Value, obj: &Value) -> Vec<(String, Option<String>)> {
        let set = compile(&[p], &[b]);
        let user = UserInfo::default();
        let a = attrs(obj, &user);
        let binding = &set.bindings[0];
        let policy = &set.policies[&binding.policy];
        assert!(policy
            .constraints
            .as_ref()
            .unwrap()
            .matches(&a, None, false));
        let mut vars = Bindings::new()
            .with_json("object", obj)
            .with_json("oldObject", &Value::Null)
            .with_json("request", &request_var(&a))
            .with_json("params", &Value::Null);
        let mut out = Outcome::default();
        evaluate(policy, &mut vars, &mut out);
        out.failures.into_iter().map(|(m, r, _)| (m, r)).collect()
    }

    #[test]
    fn a_failed_validation_carries_its_message_or_the_expression() {
        let p = policy(json!({
            "matchConstraints": deployments_rule(),
            "variables": [{"name": "r", "expression": "object.spec.replicas"}],
            "validations": [
                {"expression": "variables.r <= 5"},
                {"expression": "variables.r <= 4", "message": "too many", "reason": "Forbidden"},
                {"expression": "variables.r <= 3", "messageExpression": "'replicas: ' + string(variables.r)"},
                {"expression": "object.spec.nope > 1"},
            ]
        }));
        let b = binding(json!({"policyName": "p", "validationActions": ["Deny"]}));
        let out = run(p, b, &json!({"spec": {"replicas": 6}}));
        assert_eq!(out[0], ("failed expression: variables.r <= 5".into(), None));
        assert_eq!(out[1], ("too many".into(), Some("Forbidden".into())));
        assert_eq!(out[2].0, "replicas: 6");
        assert!(
            out[3]
                .0
                .starts_with("expression 'object.spec.nope > 1' resulted in error"),
            "{}",
            out[3].0
        );
    }

    #[test]
    fn match_conditions_gate_the_policy() {
        let p = policy(json!({
            "matchConstraints": deployments_rule(),
            "matchConditions": [{"name": "big", "expression": "object.spec.replicas > 10"}],
            "validations": [{"expression": "false"}]
        }));
        let b = binding(json!({"policyName": "p", "validationActions": ["Deny"]}));
        assert!(run(p, b, &json!({"spec": {"replicas": 6}})).is_empty());
    }

    #[test]
    fn rules_split_resources_and_subresources_as_kube() {
        let user = UserInfo::default();
        let obj = json!({});
        let mut a = attrs(&obj, &user);
        let rule = |res: &str| Rule {
            groups: vec!["*".into()],
            versions: vec!["*".into()],
            resources: vec![res.into()],
            operations: vec!["*".into()],
            scope: "*".into(),
            names: vec![],
        };
        assert!(rule("deployments").matches(&a));
        assert!(rule("*").matches(&a));
        a.subresource = "scale";
        assert!(!rule("deployments").matches(&a));
        assert!(!rule("*").matches(&a));
        assert!(rule("deployments/scale").matches(&a));
        assert!(rule("*/scale").matches(&a));
        assert!(rule("deployments/*").matches(&a));
        assert!(rule("*/*").matches(&a));
    }
}

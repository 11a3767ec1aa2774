//! Kubernetes' authorizer library, for admission policies: the
//! `authorizer` variable and its checks.
//!
//! - `authorizer.group(g).resource(r)` (then optionally `.subresource(s)`,
//!   `.namespace(ns)`, `.name(n)`, `.fieldSelector(s)`,
//!   `.labelSelector(s)`) and `.check(verb)`;
//! - `authorizer.path(p).check(httpVerb)` for non-resource URLs;
//! - `authorizer.serviceAccount(ns, name)`: the same checks for that
//!   service account instead of the requesting user;
//! - `authorizer.requestResource`: the request's own resource, ready for
//!   `.check(verb)`;
//! - on a decision: `allowed()`, `reason()`, `errored()`, `error()`.
//!
//! Deciding needs the API server's authorizer, which this crate does not
//! have: the embedder supplies an [`AuthzOracle`]. An oracle answers from
//! what it already knows; a check it cannot answer yet fails the
//! evaluation, and the embedder decides the checks it was asked
//! ([`AuthzOracle::decide`] records them) and evaluates again. CEL is pure,
//! so the second run asks the same checks and gets answers.

use std::fmt;
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{err, native, opaque, string, wrap};

const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
const DECISION: &str = "kubernetes.authorization.Decision";

/// One authorization question, as the policy asked it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AuthzCheck {
    /// `(namespace, name)` of the service account asked about, `None` for
    /// the requesting user.
    pub service_account: Option<(String, String)>,
    /// A non-resource path (`path(...)` checks), else a resource check.
    pub path: Option<String>,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub field_selector: String,
    pub label_selector: String,
    pub verb: String,
}

/// The authorizer's answer to an [`AuthzCheck`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthzDecision {
    /// Allowed, with the authorizer's reason.
    Allowed(String),
    /// Denied or no opinion, with the reason.
    Denied(String),
    /// The authorizer failed.
    Errored(String),
}

/// Answers authorization checks for one evaluation (see the module doc).
pub trait AuthzOracle: Send + Sync {
    /// The decision when known; `None` records the check as asked.
    fn decide(&self, check: &AuthzCheck) -> Option<AuthzDecision>;
}

/// The message of the error a pending check fails the evaluation with.
pub const PENDING: &str = "authorization decision pending";

/// The `authorizer` variable: checks answered by `oracle`; `request` is
/// what `authorizer.requestResource` starts from (group, resource,
/// subresource, namespace and name of the request).
pub fn authorizer(oracle: Arc<dyn AuthzOracle>, request: AuthzCheck) -> Value {
    wrap(Authorizer {
        oracle,
        service_account: None,
        request,
    })
}

#[derive(Clone)]
struct Authorizer {
    oracle: Arc<dyn AuthzOracle>,
    service_account: Option<(String, String)>,
    request: AuthzCheck,
}

impl fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorizer")
            .field("service_account", &self.service_account)
            .finish()
    }
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.oracle, &other.oracle) && self.service_account == other.service_account
    }
}

impl Eq for Authorizer {}

impl Opaque for Authorizer {
    fn runtime_type_name(&self) -> &str {
        AUTHORIZER
    }
}

/// A check being built (`group(...)`, `path(...)`, `resource(...)`): the
/// authorizer it goes to and the fields so far.
#[derive(Clone)]
struct Check {
    type_name: &'static str,
    authorizer: Authorizer,
    check: AuthzCheck,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.type_name)
            .field("check", &self.check)
            .finish()
    }
}

impl PartialEq for Check {
    fn eq(&self, other: &Self) -> bool {
        self.type_name == other.type_name
            && self.authorizer == other.authorizer
            && self.check == other.check
    }
}

impl Eq for Check {}

impl Opaque for Check {
    fn runtime_type_name(&self) -> &str {
        self.type_name
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Decision(AuthzDecision);

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        DECISION
    }
}

fn t(name: &'static str) -> Type {
    Type::new_opaque_type(name)
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    for name in [
        AUTHORIZER,
        PATH_CHECK,
        GROUP_CHECK,
        RESOURCE_CHECK,
        DECISION,
    ] {
        env.add_type(t(name))?;
    }
    env.add_member_overload(
        "path",
        "authorizer_path",
        t(AUTHORIZER),
        vec![STRING_TYPE],
        native!(path),
    )?;
    env.add_member_overload(
        "group",
        "authorizer_group",
        t(AUTHORIZER),
        vec![STRING_TYPE],
        native!(group),
    )?;
    env.add_member_overload(
        "serviceAccount",
        "authorizer_serviceaccount",
        t(AUTHORIZER),
        vec![STRING_TYPE, STRING_TYPE],
        native!(service_account),
    )?;
    env.add_member_overload(
        "requestResource",
        "authorizer_requestresource",
        t(AUTHORIZER),
        vec![],
        native!(request_resource),
    )?;
    env.add_member_overload(
        "resource",
        "groupcheck_resource",
        t(GROUP_CHECK),
        vec![STRING_TYPE],
        native!(resource),
    )?;
    for (function, id, op) in [
        (
            "subresource",
            "resourcecheck_subresource",
            native!(subresource),
        ),
        ("namespace", "resourcecheck_namespace", native!(namespace)),
        ("name", "resourcecheck_name", native!(set_name)),
        (
            "fieldSelector",
            "resourcecheck_fieldselector",
            native!(field_selector),
        ),
        (
            "labelSelector",
            "resourcecheck_labelselector",
            native!(label_selector),
        ),
    ] {
        env.add_member_overload(function, id, t(RESOURCE_CHECK), vec![STRING_TYPE], op)?;
    }
    env.add_member_overload(
        "check",
        "resourcecheck_check",
        t(RESOURCE_CHECK),
        vec![STRING_TYPE],
        native!(check),
    )?;
    env.add_member_overload(
        "check",
        "pathcheck_check",
        t(PATH_CHECK),
        vec![STRING_TYPE],
        native!(check),
    )?;
    env.add_member_overload(
        "allowed",
        "decision_allowed",
        t(DECISION),
        vec![],
        native!(allowed),
    )?;
    env.add_member_overload(
        "reason",
        "decision_reason",
        t(DECISION),
        vec![],
        native!(reason),
    )?;
    env.add_member_overload(
        "errored",
        "decision_errored",
        t(DECISION),
        vec![],
        native!(errored),
    )?;
    env.add_member_overload(
        "error",
        "decision_error",
        t(DECISION),
        vec![],
        native!(error),
    )?;
    Ok(())
}

fn the_authorizer<'a>(f: &str, v: &'a Value) -> Result<&'a Authorizer, ExecutionError> {
    opaque::<Authorizer>(f, v)
}

fn the_check<'a>(f: &str, v: &'a Value, type_name: &str) -> Result<&'a Check, ExecutionError> {
    let c = opaque::<Check>(f, v)?;
    if c.type_name != type_name {
        return Err(err(f, format!("unexpected argument type {}", c.type_name)));
    }
    Ok(c)
}

fn start(
    f: &str,
    args: &[Value],
    type_name: &'static str,
    fill: impl FnOnce(&mut AuthzCheck, &str),
) -> Result<Value, ExecutionError> {
    let a = the_authorizer(f, &args[0])?;
    let mut check = AuthzCheck {
        service_account: a.service_account.clone(),
        ..AuthzCheck::default()
    };
    fill(&mut check, string(f, &args[1])?);
    Ok(wrap(Check {
        type_name,
        authorizer: a.clone(),
        check,
    }))
}

fn path(args: &[Value]) -> Result<Value, ExecutionError> {
    start("path", args, PATH_CHECK, |c, p| c.path = Some(p.to_owned()))
}

fn group(args: &[Value]) -> Result<Value, ExecutionError> {
    start("group", args, GROUP_CHECK, |c, g| c.group = g.to_owned())
}

fn service_account(args: &[Value]) -> Result<Value, ExecutionError> {
    let a = the_authorizer("serviceAccount", &args[0])?;
    let ns = string("serviceAccount", &args[1])?;
    let name = string("serviceAccount", &args[2])?;
    Ok(wrap(Authorizer {
        service_account: Some((ns.to_owned(), name.to_owned())),
        ..a.clone()
    }))
}

fn request_resource(args: &[Value]) -> Result<Value, ExecutionError> {
    let a = the_authorizer("requestResource", &args[0])?;
    Ok(wrap(Check {
        type_name: RESOURCE_CHECK,
        authorizer: a.clone(),
        check: AuthzCheck {
            service_account: a.service_account.clone(),
            ..a.request.clone()
        },
    }))
}

fn resource(args: &[Value]) -> Result<Value, ExecutionError> {
    let c = the_check("resource", &args[0], GROUP_CHECK)?;
    let mut next = c.clone();
    next.type_name = RESOURCE_CHECK;
    next.check.resource = string("resource", &args[1])?.to_owned();
    Ok(wrap(next))
}

fn refine(
    f: &str,
    args: &[Value],
    set: fn(&mut AuthzCheck, String),
) -> Result<Value, ExecutionError> {
    let c = the_check(f, &args[0], RESOURCE_CHECK)?;
    let mut next = c.clone();
    set(&mut next.check, string(f, &args[1])?.to_owned());
    Ok(wrap(next))
}

fn subresource(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("subresource", args, |c, v| c.subresource = v)
}

fn namespace(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("namespace", args, |c, v| c.namespace = v)
}

fn set_name(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("name", args, |c, v| c.name = v)
}

fn field_selector(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("fieldSelector", args, |c, v| c.field_selector = v)
}

fn label_selector(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("labelSelector", args, |c, v| c.label_selector = v)
}

fn check(args: &[Value]) -> Result<Value, ExecutionError> {
    let c = opaque::<Check>("check", &args[0])?;
    if c.type_name == GROUP_CHECK {
        return Err(err("check", "unexpected argument type GroupCheck"));
    }
    let mut asked = c.check.clone();
    asked.verb = string("check", &args[1])?.to_owned();
    match c.authorizer.oracle.decide(&asked) {
        Some(d) => Ok(wrap(Decision(d))),
        None => Err(err("check", PENDING)),
    }
}

fn decision<'a>(f: &str, v: &'a Value) -> Result<&'a AuthzDecision, ExecutionError> {
    opaque::<Decision>(f, v).map(|d| &d.0)
}

fn allowed(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(matches!(
        decision("allowed", &args[0])?,
        AuthzDecision::Allowed(_)
    )))
}

fn reason(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(
        match decision("reason", &args[0])? {
            AuthzDecision::Allowed(r) | AuthzDecision::Denied(r) => r.clone(),
            AuthzDecision::Errored(_) => String::new(),
        }
        .into(),
    ))
}

fn errored(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(matches!(
        decision("errored", &args[0])?,
        AuthzDecision::Errored(_)
    )))
}

fn error(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(
        match decision("error", &args[0])? {
            AuthzDecision::Errored(e) => e.clone(),
            _ => String::new(),
        }
        .into(),
    ))
}

/// `authorizer.requestResource` is a variable of its own in Kubernetes'
/// environment; here it is the member call `requestResource()` on
/// `authorizer` (opaque values have no fields). Any other
/// `x.requestResource` (`request.requestResource`) stays a field.
pub(crate) fn rewrite(e: &mut cel::common::ast::IdedExpr) {
    use cel::common::ast::{CallExpr, Expr};
    if let Expr::Select(s) = &mut e.expr {
        let on_authorizer = matches!(&s.operand.expr, Expr::Ident(n) if n == "authorizer");
        if !s.test && s.field == "requestResource" && on_authorizer {
            let operand = std::mem::take(&mut s.operand);
            e.expr = Expr::Call(CallExpr {
                func_name: "requestResource".into(),
                target: Some(operand),
                args: Vec::new(),
            });
        }
    }
    for child in crate::instrument::children_mut(e) {
        rewrite(child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bindings, Program};
    use std::sync::Mutex;

    /// Allows `get` on pods in `ns1`; remembers what it was asked.
    #[derive(Default)]
    struct Oracle {
        asked: Mutex<Vec<AuthzCheck>>,
        answer: bool,
    }

    impl AuthzOracle for Oracle {
        fn decide(&self, c: &AuthzCheck) -> Option<AuthzDecision> {
            self.asked.lock().unwrap().push(c.clone());
            if !self.answer {
                return None;
            }
            Some(
                if c.resource == "pods" && c.namespace == "ns1" && c.verb == "get" {
                    AuthzDecision::Allowed("rbac".into())
                } else {
                    AuthzDecision::Denied("no".into())
                },
            )
        }
    }

    fn eval(src: &str, oracle: Arc<Oracle>) -> Result<Value, String> {
        let request = AuthzCheck {
            resource: "pods".into(),
            namespace: "ns1".into(),
            name: "p".into(),
            ..AuthzCheck::default()
        };
        let mut vars = Bindings::new();
        vars.insert_value("authorizer", authorizer(oracle, request));
        Program::compile(src)
            .map_err(|e| e.to_string())?
            .evaluate(&vars)
            .map(|e| e.value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn checks_are_built_and_answered() {
        let oracle = Arc::new(Oracle {
            answer: true,
            ..Oracle::default()
        });
        let ok = |src: &str| eval(src, Arc::clone(&oracle));
        assert_eq!(
            ok("authorizer.group('').resource('pods').namespace('ns1').check('get').allowed()"),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            ok("authorizer.group('').resource('pods').namespace('ns2').check('get').allowed()"),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            ok("authorizer.requestResource.check('get').reason()"),
            Ok(Value::String("rbac".to_string().into()))
        );
        assert_eq!(
            ok("authorizer.serviceAccount('kube-system', 'gc').path('/healthz').check('get').errored()"),
            Ok(Value::Bool(false))
        );
        let asked = oracle.asked.lock().unwrap().clone();
        let last = asked.last().unwrap();
        assert_eq!(
            last.service_account,
            Some(("kube-system".to_string(), "gc".to_string()))
        );
        assert_eq!(last.path.as_deref(), Some("/healthz"));
        assert_eq!(asked[2].name, "p");
        assert!(ok("authorizer.group('').check('get')").is_err());
    }

    /// Only `authorizer.requestResource` is the authorizer's: the
    /// admission request's own `requestResource` is a field.
    #[test]
    fn request_resource_of_anything_else_is_a_field() {
        let mut vars = Bindings::new();
        vars.insert_json(
            "request",
            &serde_json::json!({"requestResource": {"group": "", "version": "v1", "resource": "pods"}}),
        );
        let v = Program::compile("request.requestResource.resource == 'pods'")
            .unwrap()
            .evaluate(&vars)
            .map(|e| e.value);
        assert_eq!(v, Ok(Value::Bool(true)));
    }

    #[test]
    fn an_unknown_answer_fails_the_evaluation_as_pending() {
        let oracle = Arc::new(Oracle::default());
        let e = eval(
            "authorizer.group('apps').resource('deployments').check('list').allowed()",
            Arc::clone(&oracle),
        )
        .unwrap_err();
        assert!(e.contains(PENDING), "{e}");
        assert_eq!(oracle.asked.lock().unwrap()[0].verb, "list");
    }
}

//! Admission webhooks (`admissionregistration.k8s.io/v1`
//! Validating- and MutatingWebhookConfigurations), called with an
//! `admission.k8s.io/v1` AdmissionReview.
//!
//! As with the policies, every replica keeps the compiled set itself
//! ([`controller`]: a re-list and recompile on any change of the two
//! collections). Per request:
//!
//! - a webhook applies when its `rules` (groups, versions, resources with
//!   subresources, operations, scope), `namespaceSelector`,
//!   `objectSelector` and `matchConditions` (CEL over `object`,
//!   `oldObject`, `request`) all match;
//! - a dry run reaching a webhook whose `sideEffects` is not `None` or
//!   `NoneOnDryRun` fails (kube's 400);
//! - the webhook is reached by `clientConfig.url`, or through its Service:
//!   the Service's port (443 unless given) maps to a ready endpoint of its
//!   EndpointSlices, and the certificate must name
//!   `<service>.<namespace>.svc`; `caBundle` is what is trusted;
//!   `timeoutSeconds` (10) bounds the call;
//! - **mutating** webhooks run one after another before validation; a
//!   `JSONPatch` answer is applied to the object; webhooks with
//!   `reinvocationPolicy: IfNeeded` are called once more when a later one
//!   changed the object;
//! - **validating** webhooks run concurrently after the policies;
//! - a denial is kube's Status: `admission webhook "<name>" denied the
//!   request: <message>`, with the webhook's code (at least 400); a call
//!   that fails is `failed calling webhook "<name>": <error>` (500) under
//!   `failurePolicy: Fail` (the default), and is skipped under `Ignore`;
//!   `warnings` become `Warning` headers;
//! - every call is counted in kube's `apiserver_admission_webhook_*`
//!   metrics (duration, requests, rejections).

use super::attributes::{Attributes, Scope};
use super::policy::{named_exprs, namespace_object, request_var, Expr, Match};
use crate::backend::Backend;
use crate::controllers::Controller;
use crate::error::Result;
use crate::object;
use crate::scope::RequestScope;
use crate::webhook::Webhook;
use apimachinery::read::Freshness;
use apimachinery::Status;
use base64::Engine;
use k8s_cel::Bindings;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// This replica's compiled webhooks.
pub type Webhooks = super::attributes::Compiled<HookSet>;

impl Webhooks {
    /// Whether any mutating webhook is configured.
    pub fn has_mutating(&self) -> bool {
        !self.current().mutating.is_empty()
    }

    /// Whether any validating webhook is configured.
    pub fn has_validating(&self) -> bool {
        !self.current().validating.is_empty()
    }
}

#[derive(Default)]
pub struct HookSet {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
}

/// Where a webhook is reached.
enum Client {
    Url(std::result::Result<Webhook, String>),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: i64,
        ca: Option<Vec<u8>>,
    },
}

struct Hook {
    name: String,
    client: Client,
    timeout: Duration,
    matches: Match,
    fail: bool,
    dry_run_safe: bool,
    conditions: Vec<(String, Expr)>,
    reinvoke: bool,
}

fn compile_hook(h: &Value) -> Option<Hook> {
    let name = h.get("name")?.as_str()?.to_string();
    let cc = h.get("clientConfig").cloned().unwrap_or(Value::Null);
    let ca = cc
        .get("caBundle")
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let timeout = Duration::from_secs(
        h.get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .clamp(1, 30),
    );
    let client = if let Some(url) = cc.get("url").and_then(Value::as_str) {
        Client::Url(Webhook::new(url, ca.as_deref(), timeout).map_err(|e| e.to_string()))
    } else {
        let svc = cc.get("service")?;
        Client::Service {
            namespace: svc.get("namespace")?.as_str()?.to_string(),
            name: svc.get("name")?.as_str()?.to_string(),
            path: svc
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("/")
                .to_string(),
            port: svc.get("port").and_then(Value::as_i64).unwrap_or(443),
            ca,
        }
    };
    let side_effects = h.get("sideEffects").and_then(Value::as_str).unwrap_or("");
    Some(Hook {
        name,
        client,
        timeout,
        matches: Match::of_webhook(h),
        fail: h.get("failurePolicy").and_then(Value::as_str) != Some("Ignore"),
        dry_run_safe: matches!(side_effects, "None" | "NoneOnDryRun"),
        conditions: named_exprs(h.get("matchConditions"), "expression"),
        reinvoke: h.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded"),
    })
}

fn compile_configs(configs: &[Value]) -> Vec<Hook> {
    // kube orders configurations by name, and webhooks as listed.
    let mut configs: Vec<&Value> = configs.iter().collect();
    configs.sort_by(|a, b| object::name(a).cmp(&object::name(b)));
    configs
        .into_iter()
        .flat_map(|c| {
            c.get("webhooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(compile_hook)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The loop that keeps this replica's set: it reads `backend` and
/// installs into `into`; it runs on the backend.
pub fn controller(backend: &Backend, into: &Webhooks) -> Option<Controller<Backend>> {
    let into = into.clone();
    crate::controllers::config_controller(
        backend,
        "admission_webhooks",
        "admissionregistration.k8s.io",
        [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ],
        move |_, mutating, validating| {
            into.replace(HookSet {
                mutating: compile_configs(mutating),
                validating: compile_configs(validating),
            });
        },
    )
}

/// The `AdmissionReview` sent for `a`.
fn review(a: &Attributes<'_>, uid: &str, object: Option<&Value>) -> Value {
    let mut request = request_var(a);
    // kube's AdmissionRequest leaves out an empty name (a collection's
    // objects) and namespace (cluster-scoped kinds).
    if let Some(r) = request.as_object_mut() {
        r.retain(|k, v| !(matches!(k.as_str(), "name" | "namespace") && v == ""));
    }
    request["uid"] = Value::from(uid);
    request["object"] = object.cloned().unwrap_or(Value::Null);
    request["oldObject"] = a.old.cloned().unwrap_or(Value::Null);
    request["options"] = a.options.to_value(a.operation);
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
}

/// Whether `hook` applies to `a` (rules, selectors, match conditions);
/// `Err` is a condition that failed to evaluate.
fn applies(
    hook: &Hook,
    a: &Attributes<'_>,
    object: Option<&Value>,
    ns: Option<&Value>,
) -> std::result::Result<bool, String> {
    let at = Attributes { object, ..*a };
    if !hook.matches.matches(&at, ns, false) {
        return Ok(false);
    }
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let vars = Bindings::new()
        .with_json("object", object.unwrap_or(&Value::Null))
        .with_json("oldObject", a.old.unwrap_or(&Value::Null))
        .with_json("request", &request_var(a));
    for (_, c) in &hook.conditions {
        match c.eval(&vars)? {
            Value::Bool(true) => {}
            Value::Bool(false) => return Ok(false),
            _ => {
                return Err(format!(
                    "matchCondition '{}' must evaluate to bool",
                    c_source(c)
                ))
            }
        }
    }
    Ok(true)
}

fn c_source(c: &Expr) -> &str {
    c.source()
}

/// Resolves a Service reference to a client for one ready endpoint.
async fn service_client(
    backend: &Backend,
    hook: &Hook,
    namespace: &str,
    name: &str,
    path: &str,
    port: i64,
    ca: Option<&[u8]>,
) -> std::result::Result<Webhook, String> {
    let svc_res = backend
        .registry
        .lookup("", "v1", "services")
        .ok_or("services are not served")?;
    let svc = backend
        .store
        .get(
            &backend.key(&svc_res, Some(namespace), name),
            Freshness::NotOlderThan(0),
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let ports = svc
        .value()
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let svc_port = ports
        .iter()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let port_name = svc_port.get("name").and_then(Value::as_str).unwrap_or("");
    let slices = backend.endpoint_slices(namespace).await?;
    for slice in &slices.items {
        let v = slice.value();
        if v.pointer("/metadata/labels/kubernetes.io~1service-name")
            .and_then(Value::as_str)
            != Some(name)
        {
            continue;
        }
        let Some(target) = v
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_i64))
        else {
            continue;
        };
        let ready = v
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
            .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str));
        if let Some(addr) = ready {
            let host = if addr.contains(':') {
                format!("[{addr}]")
            } else {
                addr.to_string()
            };
            let url = format!("https://{host}:{target}{path}");
            return Webhook::new(&url, ca, hook.timeout)
                .map(|w| w.with_server_name(&format!("{name}.{namespace}.svc")))
                .map_err(|e| e.to_string());
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

/// Calls `hook` about `a`; the webhook's `response`.
async fn call(
    backend: &Backend,
    hook: &Hook,
    a: &Attributes<'_>,
    object: Option<&Value>,
) -> std::result::Result<Value, String> {
    let client = match &hook.client {
        Client::Url(c) => c.clone()?,
        Client::Service {
            namespace,
            name,
            path,
            port,
            ca,
        } => service_client(backend, hook, namespace, name, path, *port, ca.as_deref()).await?,
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let answer = client
        .post_json(&review(a, &uid, object))
        .await
        .map_err(|e| e.to_string())?;
    let response = answer
        .get("response")
        .cloned()
        .ok_or("the webhook's response is missing")?;
    if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.get("uid").and_then(Value::as_str).unwrap_or("")
        ));
    }
    Ok(response)
}

/// kube's `ToStatusErr`.
fn denial(hook: &str, response: &Value) -> Status {
    let result = response.get("status").cloned().unwrap_or(Value::Null);
    let by = format!("admission webhook {hook:?} denied the request");
    let message = result.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = result.get("reason").and_then(Value::as_str).unwrap_or("");
    let mut s = Status::bad_request(if !message.is_empty() {
        format!("{by}: {message}")
    } else if !reason.is_empty() {
        format!("{by}: {reason}")
    } else {
        format!("{by} without explanation")
    });
    s.reason = reason.to_string();
    let code = result.get("code").and_then(Value::as_u64).unwrap_or(0);
    s.code = u16::try_from(code)
        .ok()
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    if let Some(d) = result.get("details").filter(|d| d.is_object()) {
        s.details = serde_json::from_value(d.clone()).ok();
    }
    s
}

/// kube's error for a webhook that could not be called (failurePolicy Fail).
fn call_failed(hook: &str, err: &str) -> Status {
    Status::internal(format!("failed calling webhook {hook:?}: {err}"))
}

fn dry_run_refused(hook: &str) -> Status {
    Status::bad_request(format!(
        "admission webhook {hook:?} does not support dry run"
    ))
}

/// Records a call in kube's webhook metrics.
fn observe(
    backend: &Backend,
    hook: &Hook,
    kind: &str,
    a: &Attributes<'_>,
    answered: bool,
    rejection: Option<u16>,
    started: std::time::Instant,
) {
    if let Some(m) = &backend.metrics {
        m.webhook_call(
            &hook.name,
            kind,
            a.operation,
            answered,
            rejection,
            started.elapsed(),
        );
    }
}

fn allowed(response: &Value) -> bool {
    response.get("allowed").and_then(Value::as_bool) == Some(true)
}

/// The response's warnings become `Warning` headers and its
/// `auditAnnotations` the request's audit annotations, keyed
/// `<webhook>/<key>` as kube keys them.
fn take_warnings(scope: &RequestScope, webhook: &str, response: &Value) {
    for w in object::strings(response.get("warnings")) {
        scope.warn(w);
    }
    if let Some(annotations) = response.get("auditAnnotations").and_then(Value::as_object) {
        for (key, value) in annotations {
            if let Some(value) = value.as_str() {
                scope.audit_annotate(&format!("{webhook}/{key}"), value);
            }
        }
    }
}

/// Runs the mutating webhooks on `obj` (create and update; a connection's
/// options; nothing for a delete, which has no object), in order, with
/// one reinvocation round for `IfNeeded` webhooks. Their time is not the
/// server's: kube's SLI duration leaves it out.
pub async fn mutating(scope: &Scope<'_>, a: &Attributes<'_>, obj: &mut Value) -> Result<()> {
    crate::metrics::excluded_from_sli(mutating_phase(scope, a, obj)).await
}

async fn mutating_phase(scope: &Scope<'_>, a: &Attributes<'_>, obj: &mut Value) -> Result<()> {
    let set = scope.ctx.webhooks.current();
    if set.mutating.is_empty() {
        return Ok(());
    }
    let ns = namespace_for(scope.ctx.backend, a).await;
    let mut called: Vec<(usize, Value)> = Vec::new();
    for (i, hook) in set.mutating.iter().enumerate() {
        if run_mutating(scope, hook, a, obj, ns.as_deref()).await? {
            called.push((i, obj.clone()));
        }
    }
    // IfNeeded: once more for a webhook whose output a later one changed.
    let changed_after = |i: usize| called.iter().any(|(j, _)| *j > i);
    let again: Vec<usize> = called
        .iter()
        .filter(|(i, after)| set.mutating[*i].reinvoke && changed_after(*i) && after != obj)
        .map(|(i, _)| *i)
        .collect();
    for i in again {
        run_mutating(scope, &set.mutating[i], a, obj, ns.as_deref()).await?;
    }
    Ok(())
}

/// One mutating webhook; whether it was called.
async fn run_mutating(
    scope: &Scope<'_>,
    hook: &Hook,
    a: &Attributes<'_>,
    obj: &mut Value,
    ns: Option<&Value>,
) -> Result<bool> {
    // A DELETE carries no object: the webhook sees the stored one as
    // `oldObject` and may not patch.
    let object = (a.operation != "DELETE").then_some(&*obj);
    match applies(hook, a, object, ns) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) if hook.fail => return Err(call_failed(&hook.name, &e).into()),
        Err(_) => return Ok(false),
    }
    if a.dry_run && !hook.dry_run_safe {
        return Err(dry_run_refused(&hook.name).into());
    }
    let started = std::time::Instant::now();
    let backend = scope.ctx.backend;
    let response = match call(backend, hook, a, object).await {
        Ok(r) => r,
        Err(e) if hook.fail => {
            observe(backend, hook, "admit", a, false, Some(500), started);
            return Err(call_failed(&hook.name, &e).into());
        }
        Err(e) => {
            observe(backend, hook, "admit", a, false, None, started);
            tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook; ignored");
            return Ok(false);
        }
    };
    take_warnings(scope, &hook.name, &response);
    if !allowed(&response) {
        let refusal = denial(&hook.name, &response);
        observe(backend, hook, "admit", a, true, Some(refusal.code), started);
        return Err(refusal.into());
    }
    observe(backend, hook, "admit", a, true, None, started);
    if let Some(patch) = response.get("patch").and_then(Value::as_str) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
        let changes = match &decoded {
            Ok(Value::Array(ops)) => !ops.is_empty(),
            _ => true,
        };
        if changes && decoded.is_ok() && a.operation == "DELETE" {
            // kube's words when a webhook patches what a DELETE lacks.
            return Err(Status::internal(format!(
                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                hook.name
            ))
            .into());
        }
        let patched = decoded.and_then(|p| {
            apimachinery::patch::apply_json_patch(obj, &p).map_err(|e| e.to_string())
        });
        match patched {
            Ok(v) => *obj = v,
            Err(e) if hook.fail => {
                return Err(call_failed(&hook.name, &format!("JSON patch failed: {e}")).into())
            }
            Err(_) => {}
        }
    }
    Ok(true)
}

/// Runs the validating webhooks, concurrently (their time, as the
/// mutating webhooks', is left out of the SLI duration).
pub async fn validating(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    crate::metrics::excluded_from_sli(validating_phase(scope, a)).await
}

async fn validating_phase(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    let set = scope.ctx.webhooks.current();
    if set.validating.is_empty() {
        return Ok(());
    }
    let backend = scope.ctx.backend;
    let ns = namespace_for(backend, a).await;
    let calls = set.validating.iter().map(|hook| {
        let ns = ns.as_deref();
        async move {
            match applies(hook, a, a.object, ns) {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) if hook.fail => return Err(call_failed(&hook.name, &e)),
                Err(_) => return Ok(None),
            }
            if a.dry_run && !hook.dry_run_safe {
                return Err(dry_run_refused(&hook.name));
            }
            let started = std::time::Instant::now();
            let result = call(backend, hook, a, a.object).await;
            match result {
                Ok(r) => {
                    let rejection = (!allowed(&r)).then(|| denial(&hook.name, &r).code);
                    observe(backend, hook, "validating", a, true, rejection, started);
                    Ok(Some((hook, r)))
                }
                Err(e) if hook.fail => {
                    observe(backend, hook, "validating", a, false, Some(500), started);
                    Err(call_failed(&hook.name, &e))
                }
                Err(e) => {
                    observe(backend, hook, "validating", a, false, None, started);
                    tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook; ignored");
                    Ok(None)
                }
            }
        }
    });
    let results = futures_util::future::join_all(calls).await;
    let mut first_error = None;
    for r in results {
        match r {
            Ok(Some((hook, response))) => {
                take_warnings(scope, &hook.name, &response);
                if !allowed(&response) {
                    first_error.get_or_insert(denial(&hook.name, &response));
                }
            }
            Ok(None) => {}
            Err(s) => {
                first_error.get_or_insert(s);
            }
        }
    }
    match first_error {
        Some(s) => Err(s.into()),
        None => Ok(()),
    }
}

async fn namespace_for(backend: &Backend, a: &Attributes<'_>) -> Option<Arc<Value>> {
    match a.namespace.filter(|_| a.res.namespaced) {
        Some(ns) => namespace_object(backend, ns).await,
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_worded_as_kube_words_them() {
        let s = denial(
            "v.example.com",
            &json!({"allowed": false, "status": {"message": "no", "code": 403}}),
        );
        assert_eq!(
            s.message,
            "admission webhook \"v.example.com\" denied the request: no"
        );
        assert_eq!(s.code, 403);
        let s = denial("v", &json!({"allowed": false}));
        assert_eq!(
            s.message,
            "admission webhook \"v\" denied the request without explanation"
        );
        assert_eq!(s.code, 400);
        let s = denial(
            "v",
            &json!({"allowed": false, "status": {"reason": "Nope", "code": 200}}),
        );
        assert_eq!(
            s.message,
            "admission webhook \"v\" denied the request: Nope"
        );
        assert_eq!(s.code, 400);
    }

    #[test]
    fn configurations_go_in_name_order() {
        let c = |n: &str, h: &str| json!({"metadata": {"name": n}, "webhooks": [{"name": h, "clientConfig": {"url": "https://127.0.0.1:1/"}, "sideEffects": "None"}]});
        let hooks = compile_configs(&[c("b", "second"), c("a", "first")]);
        let names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
        assert!(hooks[0].fail && hooks[0].dry_run_safe);
    }
}

//! Auditing: `--audit-policy-file`, `--audit-log-path` and its rotation
//! flags. Each request the policy selects becomes `audit.k8s.io/v1` Event
//! lines, one JSON object per line, at the stages kube-apiserver writes:
//! `RequestReceived` (before the handler), `ResponseStarted` (long-running
//! requests: watches, exec/attach/port-forward/proxy, when the headers go
//! out), `ResponseComplete` (the response ended, for a stream when it
//! closes) and `Panic` (the handler panicked).
//!
//! Place in the chain (`server::filtered`): [`audit`] runs right after
//! `authenticate` (it knows the user) and before impersonation and
//! `authorize`. Those later layers report to it through the request's
//! [`AuditSlot`] extension: the authorizer's decision becomes the
//! `authorization.k8s.io/decision` and `.../reason` annotations, an
//! impersonation layer sets `impersonatedUser`. Requests that fail
//! authentication never reach it; [`audit_failed_authentication`], just
//! outside `authenticate`, writes one `ResponseStarted` event for each
//! 401 as kube's failed-authentication handler does (user empty, message
//! naming the credentials tried).
//!
//! Secrets' data never reaches the log: requests on `secrets`,
//! `serviceaccounts/token` (TokenRequest) and `tokenreviews` are recorded
//! at `Metadata` at most, whatever the policy says.
//!
//! Writing is [`sink::Sink`]'s: a bounded queue to a writer thread; a
//! request never waits on the disk, and a full queue drops (and counts)
//! events.
//!
//! Floor: the filters, below the server's state. The two layers take the
//! auditor (`None`: auditing off), not `AppState`; this module reads the
//! user and the request's attributes from `auth`, which in turn reports to
//! it only through [`slot`] (so there is no circle).

pub mod policy;
pub mod sink;
pub mod slot;

use crate::auth::Identity;
use apimachinery::auth::{RequestInfo, UserInfo};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::{FutureExt, StreamExt};
use policy::{Level, Policy, Stage};
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub use sink::{LogConfig, Sink};
pub use slot::{AuditSlot, DECISION_ANNOTATION, REASON_ANNOTATION};

/// The response header carrying the request's audit ID.
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// The policy and where events go; one per server.
#[derive(Debug)]
pub struct Auditor {
    pub policy: Policy,
    pub sink: Sink,
}

/// Marks a response the audit layer has recorded (so the failed
/// authentication layer does not record it again).
#[derive(Debug, Clone, Copy)]
struct Audited;

/// The request's audit ID: its `Audit-ID` header when the client sent a
/// usable one, else a new UUID. (The one place to re-point at a request-id
/// extension.)
pub fn audit_id(req: &Request<Body>) -> String {
    match req.extensions().get::<crate::telemetry::RequestId>() {
        Some(id) => id.as_str().to_string(),
        None => audit_id_from_headers(req.headers()),
    }
}

/// Without the telemetry layer (which assigns every request its id): the
/// client's `Audit-ID`, or a new one.
fn audit_id_from_headers(headers: &HeaderMap) -> String {
    use crate::telemetry::RequestId;
    headers
        .get(AUDIT_ID_HEADER)
        .and_then(RequestId::from_header)
        .unwrap_or_else(RequestId::generate)
        .to_string()
}

/// Kube's MicroTime: RFC 3339 with microseconds, UTC.
fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Requests whose bodies carry secret material: recorded at Metadata at
/// most.
fn sensitive(info: &RequestInfo) -> bool {
    (info.api_group.is_empty() && info.resource == "secrets")
        || (info.api_group.is_empty()
            && info.resource == "serviceaccounts"
            && info.subresource == "token")
        || (info.api_group == "authentication.k8s.io" && info.resource == "tokenreviews")
}

fn long_running(info: &RequestInfo) -> bool {
    info.verb == "watch"
        || info.verb == "proxy"
        || matches!(
            info.subresource.as_str(),
            "exec" | "attach" | "portforward" | "proxy"
        )
}

/// The event being built for one request.
struct Event {
    base: Map<String, Value>,
    omit_managed_fields: bool,
    decision: policy::Decision,
    sink: Sink,
}

impl Event {
    fn emit(&self, stage: Stage, extra: Map<String, Value>, slot: Option<&AuditSlot>) {
        if !self.decision.records(stage) {
            return;
        }
        let mut ev = self.base.clone();
        ev.insert("stage".into(), stage.as_str().into());
        let received = ev.remove("requestReceivedTimestamp");
        for (k, v) in extra {
            ev.insert(k, v);
        }
        if let Some(slot) = slot {
            slot.with(|d| {
                if let Some(u) = &d.impersonated_user {
                    ev.insert("impersonatedUser".into(), json!(u));
                }
                if !d.annotations.is_empty() {
                    ev.insert("annotations".into(), json!(d.annotations));
                }
            });
        }
        // Timestamps last, as kube's encoding orders them.
        let annotations = ev.remove("annotations");
        if let Some(r) = received {
            ev.insert("requestReceivedTimestamp".into(), r);
        }
        ev.insert(
            "stageTimestamp".into(),
            timestamp(chrono::Utc::now()).into(),
        );
        if let Some(a) = annotations {
            ev.insert("annotations".into(), a);
        }
        match serde_json::to_vec(&Value::Object(ev)) {
            Ok(line) => self.sink.send(line),
            Err(e) => tracing::error!(error = %e, "cannot encode an audit event"),
        }
    }

    fn object(&self, mut v: Value) -> Value {
        if self.omit_managed_fields {
            strip_managed_fields(&mut v);
        }
        v
    }
}

fn strip_managed_fields(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            strip_managed_fields(item);
        }
    }
}

fn source_ips(req: &Request<Body>) -> Vec<String> {
    let mut ips: Vec<String> = req
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| s.parse::<std::net::IpAddr>().is_ok())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(real) = req
        .headers()
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .filter(|s| s.trim().parse::<std::net::IpAddr>().is_ok())
    {
        if !ips.iter().any(|i| i == real.trim()) {
            ips.push(real.trim().to_string());
        }
    }
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| {
            req.extensions()
                .get::<crate::auth::tls::ClientAddr>()
                .map(|c| c.0)
        });
    if let Some(addr) = peer {
        let ip = addr.ip().to_string();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}

fn request_uri(req: &Request<Body>) -> String {
    req.uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string())
}

/// The request's attributes, shared with `authorize` (resolved once); a
/// path that names no kind is audited as a non-resource request.
fn info_of(req: &mut Request<Body>) -> Arc<RequestInfo> {
    match &*crate::auth::resolve(req) {
        Ok(info) => Arc::clone(info),
        Err(_) => Arc::new(RequestInfo {
            path: req.uri().path().to_string(),
            verb: req.method().as_str().to_ascii_lowercase(),
            ..Default::default()
        }),
    }
}

fn object_ref(info: &RequestInfo) -> Option<Value> {
    if !info.resource_request {
        return None;
    }
    let mut r = Map::new();
    for (k, v) in [
        ("resource", &info.resource),
        ("namespace", &info.namespace),
        ("name", &info.name),
        ("apiGroup", &info.api_group),
        ("apiVersion", &info.api_version),
        ("subresource", &info.subresource),
    ] {
        if !v.is_empty() {
            r.insert(k.into(), v.clone().into());
        }
    }
    Some(Value::Object(r))
}

/// The base of every event of a request.
fn base_event(
    req: &Request<Body>,
    id: &str,
    level: Level,
    user: Option<&UserInfo>,
    info: &RequestInfo,
    received: chrono::DateTime<chrono::Utc>,
) -> Map<String, Value> {
    let mut ev = Map::new();
    ev.insert("kind".into(), "Event".into());
    ev.insert("apiVersion".into(), "audit.k8s.io/v1".into());
    ev.insert("level".into(), level.as_str().into());
    ev.insert("auditID".into(), id.into());
    ev.insert("stage".into(), Value::Null);
    ev.insert("requestURI".into(), request_uri(req).into());
    ev.insert("verb".into(), info.verb.clone().into());
    ev.insert("user".into(), user.map_or_else(|| json!({}), |u| json!(u)));
    ev.insert("sourceIPs".into(), json!(source_ips(req)));
    if let Some(ua) = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        ev.insert("userAgent".into(), ua.into());
    }
    if let Some(r) = object_ref(info) {
        ev.insert("objectRef".into(), r);
    }
    ev.insert(
        "requestReceivedTimestamp".into(),
        timestamp(received).into(),
    );
    ev
}

/// `responseStatus`: the code, and for failures the Status's status,
/// reason and message when the body is one.
fn response_status(code: u16, body: Option<&Value>) -> Value {
    let mut s = Map::new();
    s.insert("metadata".into(), json!({}));
    if let Some(b) = body.filter(|b| b["kind"] == "Status") {
        for k in ["status", "message", "reason"] {
            if let Some(v) = b.get(k).filter(|v| !v.is_null() && *v != "") {
                s.insert(k.into(), v.clone());
            }
        }
    }
    s.insert("code".into(), code.into());
    Value::Object(s)
}

fn parse_body(headers: &HeaderMap, bytes: &[u8]) -> Option<Value> {
    if bytes.is_empty() || headers.contains_key(header::CONTENT_ENCODING) {
        return None;
    }
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ctype.contains("yaml") {
        return serde_yaml_ng::from_slice(bytes).ok();
    }
    if ctype.contains("protobuf") {
        // A protobuf request or response body is audited as the JSON of
        // its object, as kube records it.
        return k8s_proto::decode_object(bytes).ok();
    }
    if ctype.contains("cbor") {
        // Likewise CBOR (`application/cbor`, `application/apply-patch+cbor`).
        return apimachinery::cbor::decode(bytes).ok();
    }
    serde_json::from_slice(bytes).ok()
}

/// Marks `resp` as recorded (the `Audit-Id` header is the telemetry
/// layer's, on every response).
fn audited(mut resp: Response) -> Response {
    resp.extensions_mut().insert(Audited);
    resp
}

/// The audit layer (after `authenticate`, before impersonation and
/// `authorize`).
pub async fn audit(
    State(auditor): State<Option<Arc<Auditor>>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let Some(auditor) = auditor else {
        return next.run(req).await;
    };
    let received = chrono::Utc::now();
    let user = req.extensions().get::<Identity>().map(|i| Arc::clone(&i.0));
    let info = info_of(&mut req);
    let decision = auditor.policy.evaluate(user.as_deref(), &info);
    if decision.level == Level::None {
        let mut resp = next.run(req).await;
        resp.extensions_mut().insert(Audited);
        return resp;
    }
    let level = if sensitive(&info) {
        decision.level.min(Level::Metadata)
    } else {
        decision.level
    };
    let id = audit_id(&req);
    let mut event = Event {
        base: base_event(&req, &id, level, user.as_deref(), &info, received),
        omit_managed_fields: decision.omit_managed_fields,
        decision,
        sink: auditor.sink.clone(),
    };
    let slot = AuditSlot::default();
    let mut req = req;
    req.extensions_mut().insert(slot.clone());

    let mut request_object = None;
    if level >= Level::Request {
        let (parts, body) = req.into_parts();
        let bytes =
            match axum::body::to_bytes(body, apimachinery::status::MAX_REQUEST_BODY_BYTES).await {
                Ok(b) => b,
                Err(_) => {
                    let status = apimachinery::Status::request_entity_too_large(
                        apimachinery::status::MAX_REQUEST_BODY_BYTES,
                    );
                    event.emit(Stage::RequestReceived, Map::new(), Some(&slot));
                    let mut extra = Map::new();
                    extra.insert(
                        "responseStatus".into(),
                        response_status(status.code, serde_json::to_value(&status).ok().as_ref()),
                    );
                    event.emit(Stage::ResponseComplete, extra, Some(&slot));
                    return audited(crate::error::status_response(&status));
                }
            };
        request_object = parse_body(&parts.headers, &bytes).map(|o| event.object(o));
        req = Request::from_parts(parts, Body::from(bytes));
    }
    // As in kube, the request object is known from the handler on: not
    // at RequestReceived.
    event.emit(Stage::RequestReceived, Map::new(), Some(&slot));
    if let Some(obj) = request_object {
        event.base.insert("requestObject".into(), obj);
    }
    let event = Arc::new(event);

    let run = std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await;
    let resp = match run {
        Ok(resp) => resp,
        Err(panic) => {
            let mut extra = Map::new();
            extra.insert(
                "responseStatus".into(),
                json!({"metadata": {}, "status": "Failure",
                       "message": "APIServer panic'd", "reason": "InternalError", "code": 500}),
            );
            event.emit(Stage::Panic, extra, Some(&slot));
            std::panic::resume_unwind(panic);
        }
    };
    let code = resp.status().as_u16();

    if long_running(&info) && resp.status().is_success() {
        let mut extra = Map::new();
        extra.insert("responseStatus".into(), response_status(code, None));
        event.emit(Stage::ResponseStarted, extra.clone(), Some(&slot));
        // ResponseComplete when the stream ends or the client goes away.
        let guard = CompleteOnDrop {
            event: Arc::clone(&event),
            extra: Some(extra),
            slot: slot.clone(),
        };
        let (parts, body) = resp.into_parts();
        let stream = body.into_data_stream().map(move |chunk| {
            let _keep = &guard;
            chunk
        });
        return audited(Response::from_parts(parts, Body::from_stream(stream)));
    }

    let wants_body = level == Level::RequestResponse || code >= 400;
    let mut extra = Map::new();
    let resp = if wants_body {
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let parsed = parse_body(&parts.headers, &bytes);
        extra.insert(
            "responseStatus".into(),
            response_status(code, parsed.as_ref()),
        );
        if level == Level::RequestResponse {
            if let Some(obj) = parsed {
                extra.insert("responseObject".into(), event.object(obj));
            }
        }
        Response::from_parts(parts, Body::from(bytes))
    } else {
        extra.insert("responseStatus".into(), response_status(code, None));
        resp
    };
    event.emit(Stage::ResponseComplete, extra, Some(&slot));
    audited(resp)
}

struct CompleteOnDrop {
    event: Arc<Event>,
    extra: Option<Map<String, Value>>,
    slot: AuditSlot,
}

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        if let Some(extra) = self.extra.take() {
            self.event
                .emit(Stage::ResponseComplete, extra, Some(&self.slot));
        }
    }
}

/// Kube's description of the credentials a failed request carried.
fn attempted_methods(headers: &HeaderMap) -> String {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    let scheme = auth
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut methods = Vec::new();
    if scheme == "basic" {
        methods.push("basic");
    }
    if scheme == "bearer" && auth.split_whitespace().nth(1).is_some() {
        methods.push("bearer");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

/// Just outside `authenticate`: a 401 the audit layer never saw failed
/// authentication; it is recorded as one `ResponseStarted` event with no
/// user, as kube-apiserver's failed-authentication handler records it.
pub async fn audit_failed_authentication(
    State(auditor): State<Option<Arc<Auditor>>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let Some(auditor) = auditor else {
        return next.run(req).await;
    };
    let received = chrono::Utc::now();
    let info = info_of(&mut req);
    let id = audit_id(&req);
    let message = attempted_methods(req.headers());
    let base = {
        let decision = auditor.policy.evaluate(None, &info);
        (decision.level > Level::None).then(|| {
            let level = if sensitive(&info) {
                decision.level.min(Level::Metadata)
            } else {
                decision.level
            };
            (
                base_event(&req, &id, level, None, &info, received),
                decision,
            )
        })
    };
    let resp = next.run(req).await;
    if resp.extensions().get::<Audited>().is_some() || resp.status().as_u16() != 401 {
        return resp;
    }
    if let Some((base, decision)) = base {
        let event = Event {
            base,
            omit_managed_fields: false,
            decision,
            sink: auditor.sink.clone(),
        };
        let mut extra = Map::new();
        extra.insert(
            "responseStatus".into(),
            json!({"metadata": {}, "message": message, "code": 401}),
        );
        event.emit(Stage::ResponseStarted, extra, None);
    }
    audited(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn audit_id_from_the_header_or_new() {
        let mut h = HeaderMap::new();
        let fresh = audit_id_from_headers(&h);
        assert_eq!(uuid::Uuid::parse_str(&fresh).map(|_| ()), Ok(()));
        h.insert(AUDIT_ID_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(audit_id_from_headers(&h), "abc-123");
    }

    #[test]
    fn timestamps_have_microseconds() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-21T23:40:05.123456789Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .expect("time");
        assert_eq!(timestamp(t), "2026-11-21T23:40:05.123456Z");
    }

    #[test]
    fn cbor_bodies_are_audited_as_their_json() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/cbor"),
        );
        let obj = serde_json::json!({"kind": "ConfigMap", "data": {"k": "v"}});
        let body = apimachinery::cbor::encode(&obj);
        assert_eq!(parse_body(&h, &body), Some(obj));
        assert_eq!(parse_body(&h, b"\xff"), None);
    }

    #[test]
    fn failed_authentication_messages() {
        let mut h = HeaderMap::new();
        assert_eq!(
            attempted_methods(&h),
            "Authentication failed, no credentials provided"
        );
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(
            attempted_methods(&h),
            "Authentication failed, attempted: bearer"
        );
    }
}

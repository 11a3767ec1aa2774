//! Service-account tokens: bound JWTs signed with the service-account
//! signing key, issued through `POST .../serviceaccounts/{name}/token`
//! (TokenRequest, authentication.k8s.io/v1) and accepted as bearer tokens
//! while they are unexpired, carry an accepted audience, and name a service
//! account that still exists with the same uid.

use super::jwt::{self, SigningKey, VerifyingKey};
use super::{bearer_token, Authentication, Authenticator};
use crate::error::status_response;
use crate::server::AppState;
use apimachinery::auth::UserInfo;
use apimachinery::read::Freshness;
use apimachinery::status::GroupResource;
use apimachinery::Status;
use async_trait::async_trait;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use watchcache::Storage;

/// kube-apiserver's default `--service-account-issuer` here.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
/// kube caps requested expirations at `--service-account-max-token-expiration`
/// when set; without it, at 2^32 seconds. We cap at one year.
const MAX_EXPIRATION: i64 = 365 * 24 * 3600;
const SA_PREFIX: &str = "system:serviceaccount:";

/// A request extension that narrows the audiences a token must carry (the
/// TokenReview's `spec.audiences`); without it, the API audiences apply.
#[derive(Debug, Clone)]
pub struct RequestedAudiences(pub Vec<String>);

/// A request extension carrying the audiences a token was accepted for.
#[derive(Debug, Clone)]
pub struct AcceptedAudiences(pub Vec<String>);

/// Issues and checks service-account tokens.
pub struct ServiceAccounts {
    signer: SigningKey,
    keys: Vec<VerifyingKey>,
    issuer: String,
    /// The audiences the API accepts (kube's `--api-audiences`, defaulting
    /// to the issuer).
    api_audiences: Vec<String>,
    store: Arc<dyn Storage>,
    prefix: String,
}

impl ServiceAccounts {
    pub fn new(
        signer: SigningKey,
        mut keys: Vec<VerifyingKey>,
        issuer: String,
        store: Arc<dyn Storage>,
        prefix: &str,
    ) -> Self {
        if keys.is_empty() {
            keys.push(signer.verifying_key().clone());
        }
        ServiceAccounts {
            signer,
            keys,
            api_audiences: vec![issuer.clone()],
            issuer,
            store,
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    fn key(&self, namespace: &str, name: &str) -> String {
        format!("{}/serviceaccounts/{namespace}/{name}", self.prefix)
    }

    /// Signs a bound token for the service account `sa` (its stored object).
    pub fn issue(
        &self,
        sa: &Value,
        audiences: &[String],
        expiration_seconds: i64,
        now: i64,
    ) -> Result<String, String> {
        let meta = &sa["metadata"];
        let ns = meta["namespace"].as_str().unwrap_or_default();
        let name = meta["name"].as_str().unwrap_or_default();
        let uid = meta["uid"].as_str().unwrap_or_default();
        let claims = json!({
            "aud": audiences,
            "exp": now + expiration_seconds,
            "iat": now,
            "nbf": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            "sub": format!("{SA_PREFIX}{ns}:{name}"),
            "kubernetes.io": {
                "namespace": ns,
                "serviceaccount": {"name": name, "uid": uid},
            },
        });
        self.signer.sign(&claims)
    }

    /// Checks a token: signature, issuer, audiences (`requested`, else the
    /// API audiences), expiry, and the service account it names (same
    /// uid). `Ok(None)`: not one of our tokens (another issuer, not a JWT).
    pub async fn check(
        &self,
        token: &str,
        requested: Option<&[String]>,
        now: i64,
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        if token.matches('.').count() != 2 || !self.issued_here(token) {
            return Ok(None);
        }
        let claims = jwt::verify(token, &self.keys)?;
        let audiences = requested.unwrap_or(&self.api_audiences);
        jwt::validate_claims(&claims, std::slice::from_ref(&self.issuer), audiences, now)?;
        let k8s = &claims["kubernetes.io"];
        let ns = k8s["namespace"].as_str().unwrap_or_default();
        let name = k8s["serviceaccount"]["name"].as_str().unwrap_or_default();
        let uid = k8s["serviceaccount"]["uid"].as_str().unwrap_or_default();
        if ns.is_empty() || name.is_empty() {
            return Err("token names no service account".into());
        }
        if claims["sub"].as_str() != Some(&format!("{SA_PREFIX}{ns}:{name}")) {
            return Err("token subject does not match its service account".into());
        }
        let stored = self
            .store
            .get(&self.key(ns, name), Freshness::NotOlderThan(0))
            .await
            .map_err(|e| format!("cannot read service account: {e}"))?
            .ok_or_else(|| format!("service account {ns}/{name} does not exist"))?;
        let meta = &stored.value()["metadata"];
        if meta["uid"].as_str() != Some(uid) {
            return Err(format!(
                "service account {ns}/{name} was recreated (uid changed)"
            ));
        }
        if meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Err(format!("service account {ns}/{name} is being deleted"));
        }
        let token_aud: Vec<String> = match &claims["aud"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            _ => vec![],
        };
        let accepted = audiences
            .iter()
            .filter(|a| token_aud.contains(a))
            .cloned()
            .collect();
        let mut user = UserInfo {
            username: format!("{SA_PREFIX}{ns}:{name}"),
            uid: uid.to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ],
            ..Default::default()
        };
        if let Some(jti) = claims["jti"].as_str() {
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        Ok(Some((user, accepted)))
    }

    /// Whether the token's (unverified) issuer is ours.
    fn issued_here(&self, token: &str) -> bool {
        use base64::Engine as _;
        let Some(payload) = token.split('.').nth(1) else {
            return false;
        };
        let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
            return false;
        };
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|c| {
                c.get("iss")
                    .and_then(Value::as_str)
                    .map(|i| i == self.issuer)
            })
            .unwrap_or(false)
    }
}

pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[async_trait]
impl Authenticator for ServiceAccounts {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let Some(token) = bearer_token(request) else {
            return Authentication::NoCredentials;
        };
        let requested = request
            .extensions
            .get::<RequestedAudiences>()
            .map(|a| a.0.as_slice());
        match self.check(token, requested, unix_now()).await {
            Ok(Some((user, _))) => Authentication::User(user),
            Ok(None) => Authentication::NoCredentials,
            Err(why) => Authentication::Invalid(why),
        }
    }
}

/// What a TokenReview answers: the user and the audiences the token was
/// accepted for, or `None` when it is not valid.
pub async fn review_token(
    state: &AppState,
    token: &str,
    audiences: &[String],
) -> Option<(UserInfo, Vec<String>)> {
    let sa = state.service_accounts.as_ref();
    if let Some(sa) = sa {
        let requested = (!audiences.is_empty()).then_some(audiences);
        match sa.check(token, requested, unix_now()).await {
            Ok(Some((user, accepted))) => return Some((user.with_authenticated_group(), accepted)),
            Ok(None) => {}
            Err(why) => {
                tracing::info!(reason = %why, "token review: service-account token rejected");
                return None;
            }
        }
    }
    // Other bearer tokens (the token file) through the configured chain,
    // which accepts only the API audiences (as kube's static tokens do).
    let authenticator = state.authenticator.as_ref()?;
    let (mut parts, ()) = axum::http::Request::builder()
        .uri("/")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(())
        .ok()?
        .into_parts();
    parts
        .extensions
        .insert(RequestedAudiences(audiences.to_vec()));
    match authenticator.authenticate(&parts).await {
        Authentication::User(u) => {
            let accepted = if audiences.is_empty() {
                sa.map(|s| s.api_audiences.clone()).unwrap_or_default()
            } else {
                audiences.to_vec()
            };
            Some((u.with_authenticated_group(), accepted))
        }
        _ => None,
    }
}

/// Whether a resource request is `POST .../serviceaccounts/{name}/token`.
pub fn is_token_request(r: &crate::request::ResourceRequest) -> bool {
    r.group.is_empty()
        && r.resource == "serviceaccounts"
        && r.subresource.as_deref() == Some("token")
        && r.name.is_some()
        && r.namespace.is_some()
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: a
/// TokenRequest in, the same TokenRequest with `status` out, in protobuf
/// when the client asks for it (client-go configured for protobuf), as
/// the answer and errors of any built-in kind.
pub async fn token_request(
    state: Arc<AppState>,
    method: Method,
    headers: &axum::http::HeaderMap,
    r: &crate::request::ResourceRequest,
    body: Body,
) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format =
        apimachinery::media::negotiate(accept, false, apimachinery::media::Serves::BuiltIn)
            .map(|n| n.format)
            .ok();
    let resp = token_request_json(state, method, headers, r, body).await;
    match format {
        Some(f @ (apimachinery::media::Format::Protobuf | apimachinery::media::Format::Cbor)) => {
            reencode(resp, f).await
        }
        _ => resp,
    }
}

/// A JSON answer (a TokenRequest or a Status) re-encoded in protobuf or
/// CBOR; the JSON stays when it has no protobuf form.
async fn reencode(resp: Response, format: apimachinery::media::Format) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return status_response(&Status::internal("unable to encode the answer"));
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| match format {
            apimachinery::media::Format::Cbor => Some(apimachinery::cbor::encode(&v)),
            _ => k8s_proto::encode_object(&v).ok(),
        });
    match encoded {
        Some(pb) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static(format.media_type()),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(pb))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

async fn token_request_json(
    state: Arc<AppState>,
    method: Method,
    headers: &axum::http::HeaderMap,
    r: &crate::request::ResourceRequest,
    body: Body,
) -> Response {
    if method != Method::POST {
        return status_response(&Status::method_not_allowed());
    }
    let ns = r.namespace.as_deref().unwrap_or_default();
    let name = r.name.as_deref().unwrap_or_default();
    let Some(sa_auth) = state.service_accounts.as_ref() else {
        return status_response(&Status::failure(
            404,
            "NotFound",
            "the server could not find the requested resource (service-account token issuing is off)",
        ));
    };
    let bytes = match axum::body::to_bytes(body, apimachinery::status::MAX_REQUEST_BODY_BYTES).await
    {
        Ok(b) => b,
        Err(e) => {
            return status_response(&Status::bad_request(format!(
                "unable to read the request body: {e}"
            )))
        }
    };
    let body_format = apimachinery::media::request_body(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        false,
    );
    let decoded = if body_format == Ok(apimachinery::media::BodyFormat::Protobuf) {
        crate::handlers::write::decode_protobuf(&bytes).map(|d| d.value)
    } else if body_format == Ok(apimachinery::media::BodyFormat::Cbor) {
        crate::handlers::write::decode_cbor(&bytes).map(|d| d.value)
    } else if bytes.is_empty() {
        Ok(json!({}))
    } else {
        serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string())
    };
    let mut req = match decoded {
        Ok(v) if v.is_object() => v,
        Ok(_) => return status_response(&Status::bad_request("TokenRequest must be an object")),
        Err(e) => {
            return status_response(&Status::bad_request(format!(
                "the object provided is unrecognized (must be of type TokenRequest): {e}"
            )))
        }
    };
    let kind = req["kind"].as_str().unwrap_or("TokenRequest");
    if kind != "TokenRequest" {
        return status_response(&Status::bad_request(format!(
            "the object provided is unrecognized (must be of type TokenRequest): kind {kind:?}"
        )));
    }
    let exp = match req["spec"].get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => match v.as_i64() {
            Some(n) if n >= MIN_EXPIRATION => n.min(MAX_EXPIRATION),
            _ => {
                return status_response(&invalid_token_request(
                    name,
                    "spec.expirationSeconds",
                    "may not specify a duration less than 10 minutes",
                ))
            }
        },
    };
    let mut audiences: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences = sa_auth.api_audiences.clone();
    }
    if req["spec"]
        .get("boundObjectRef")
        .is_some_and(|b| !b.is_null())
    {
        return status_response(&invalid_token_request(
            name,
            "spec.boundObjectRef",
            "binding tokens to objects is not supported by this server",
        ));
    }
    let key = format!("{}/serviceaccounts/{ns}/{name}", state.prefix);
    let sa = match state.store.get(&key, Freshness::MostRecent).await {
        Ok(Some(o)) => o,
        Ok(None) => {
            return status_response(&Status::not_found(
                GroupResource {
                    group: "",
                    resource: "serviceaccounts",
                },
                name,
            ))
        }
        Err(e) => return status_response(&Status::internal(format!("{e}"))),
    };
    let now = unix_now();
    let token = match sa_auth.issue(sa.value(), &audiences, exp, now) {
        Ok(t) => t,
        Err(e) => return status_response(&Status::internal(e)),
    };
    let expires = chrono::DateTime::from_timestamp(now + exp, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    if !req["metadata"].is_object() {
        req["metadata"] = json!({});
    }
    req["metadata"]["name"] = json!(name);
    req["metadata"]["namespace"] = json!(ns);
    req["metadata"]["creationTimestamp"] = Value::Null;
    if !req["spec"].is_object() {
        req["spec"] = json!({});
    }
    req["spec"]["audiences"] = json!(audiences);
    req["spec"]["expirationSeconds"] = json!(exp);
    req["spec"]["boundObjectRef"] = Value::Null;
    req["status"] = json!({"token": token, "expirationTimestamp": expires});
    crate::server::json_response(StatusCode::CREATED, &req)
}

fn invalid_token_request(name: &str, field: &str, why: &str) -> Status {
    Status::invalid(
        apimachinery::status::GroupKind {
            group: "authentication.k8s.io",
            kind: "TokenRequest",
        },
        name,
        vec![apimachinery::status::StatusCause::new(
            "FieldValueInvalid",
            format!("Invalid value: {why}"),
            field,
        )],
    )
}

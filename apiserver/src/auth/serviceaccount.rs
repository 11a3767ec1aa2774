//! Service-account tokens: bound JWTs signed with the service-account
//! signing key, issued through `POST .../serviceaccounts/{name}/token`
//! (TokenRequest, authentication.k8s.io/v1, answered by
//! `handlers::token`) and accepted as bearer tokens
//! while they are unexpired, carry an accepted audience, and name a service
//! account that still exists with the same uid.

use super::jwt::{self, SigningKey, VerifyingKey};
use super::{bearer_token, Authentication, Authenticator};
use apimachinery::auth::UserInfo;
use apimachinery::read::Freshness;
use async_trait::async_trait;
use axum::http::header;
use axum::http::request::Parts;
use serde_json::{json, Value};
use std::sync::Arc;
use watchcache::Storage;

/// kube-apiserver's default `--service-account-issuer` here.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
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

    /// The audiences the API accepts, those of a token requested without
    /// any.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
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
/// accepted for, or `None` when it is not valid. `service_accounts` checks
/// service-account tokens, `authenticator` (the secure port's chain) any
/// other bearer token.
pub async fn review_token(
    service_accounts: Option<&ServiceAccounts>,
    authenticator: Option<&dyn Authenticator>,
    token: &str,
    audiences: &[String],
) -> Option<(UserInfo, Vec<String>)> {
    let sa = service_accounts;
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
    let authenticator = authenticator?;
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

//! `serviceaccounts/token` (kube's `TokenREST`, what `kubectl create
//! token` and the kubelet call): a TokenRequest in, the same TokenRequest
//! with a signed token in `status` out. It is a create-only subresource
//! like `pods/eviction`: the generic create path decodes it (JSON, YAML,
//! protobuf, CBOR), admits it and answers in the negotiated encoding;
//! this answers it, in kube's order: the body's name, the service
//! account, the defaults, the checks, validating admission, the token.

use apimachinery::status::{GroupKind, StatusCause};
use apimachinery::Status;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Value};

use super::scope::Scope;
use crate::admission::CreateValidation;
use crate::auth::serviceaccount::unix_now;
use crate::error::{ApiError, Result};
use crate::object;
use apimachinery::read::Freshness;

const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
/// kube caps requested expirations at `--service-account-max-token-expiration`
/// when set; without it, at 2^32 seconds. We cap at one year.
const MAX_EXPIRATION: i64 = 365 * 24 * 3600;

/// The answer of `POST .../serviceaccounts/{name}/token`.
pub fn token_request<'a>(
    scope: &'a Scope,
    request: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    issue(scope, request, validation).boxed()
}

fn invalid(name: &str, field: &str, why: &str) -> ApiError {
    Status::invalid(
        GroupKind {
            group: "authentication.k8s.io",
            kind: "TokenRequest",
        },
        name,
        vec![StatusCause::new(
            "FieldValueInvalid",
            format!("Invalid value: {why}"),
            field,
        )],
    )
    .into()
}

async fn issue(scope: &Scope, mut req: Value, validation: CreateValidation<'_>) -> Result<Value> {
    let Some(accounts) = scope.state.service_accounts.as_ref() else {
        return Err(Status::failure(
            404,
            "NotFound",
            "the server could not find the requested resource (service-account token issuing is off)",
        )
        .into());
    };
    let name = scope.name().to_string();
    let ns = scope.namespace.clone().unwrap_or_default();
    if let Some(other) = object::name(&req).filter(|n| !n.is_empty() && *n != name) {
        return Err(invalid(
            &name,
            "metadata.name",
            &format!("{other:?}: must match the service account name if specified"),
        ));
    }
    let sa = scope
        .state
        .store
        .get(&scope.key(), Freshness::MostRecent)
        .await
        .map_err(|e| scope.storage_err(e))?
        .ok_or_else(|| Status::not_found(scope.res.group_resource(), &name))?;
    let exp = match req["spec"].get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => match v.as_i64() {
            Some(n) if n >= MIN_EXPIRATION => n.min(MAX_EXPIRATION),
            _ => {
                return Err(invalid(
                    &name,
                    "spec.expirationSeconds",
                    "may not specify a duration less than 10 minutes",
                ))
            }
        },
    };
    let mut audiences: Vec<String> = object::strings(req["spec"].get("audiences"));
    if audiences.is_empty() {
        audiences = accounts.api_audiences().to_vec();
    }
    if req["spec"]
        .get("boundObjectRef")
        .is_some_and(|b| !b.is_null())
    {
        return Err(invalid(
            &name,
            "spec.boundObjectRef",
            "binding tokens to objects is not supported by this server",
        ));
    }
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
    // kube's TokenREST admits the request as it will be answered.
    validation.check(&req).await?;
    let now = unix_now();
    let token = accounts
        .issue(sa.value(), &audiences, exp, now)
        .map_err(|e| ApiError::from(Status::internal(e)))?;
    let expires = chrono::DateTime::from_timestamp(now + exp, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    req["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(req)
}

//! The answers of the virtual kinds (`registry::VirtualCreate`): the access
//! reviews of `authorization.k8s.io/v1` and `authentication.k8s.io/v1`
//! SelfSubjectReview and TokenReview. Each gets the decoded request, runs
//! validating admission on it once its own checks pass (where kube's
//! storage calls `createValidation`), and returns it with its `status`
//! filled in as kube-apiserver fills it.

use super::scope::Scope;
use crate::admission::CreateValidation;
use crate::auth::Decision;
use crate::error::Result;
use apimachinery::auth::{RequestInfo, UserInfo, SYSTEM_MASTERS};
use apimachinery::status::{cause, GroupKind, StatusCause};
use apimachinery::validation::invalid_message;
use apimachinery::Status;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};

/// `authentication.k8s.io/v1` SelfSubjectReview: who the server thinks
/// the caller is (`kubectl auth whoami`).
pub fn self_subject_review<'a>(
    scope: &'a Scope,
    mut obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        validation.check(&obj).await?;
        let user = serde_json::to_value(&*scope.user).unwrap_or_default();
        obj["status"] = json!({ "userInfo": user });
        Ok(with_creation_timestamp(obj))
    })
}

/// `authentication.k8s.io/v1` TokenReview: whom `spec.token` names, for
/// `spec.audiences` (default: the API's), as
/// `auth::serviceaccount::review_token` decides.
pub fn token_review<'a>(
    scope: &'a Scope,
    mut obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        let token = obj["spec"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if token.is_empty() {
            return Err(
                Status::bad_request("token is required for TokenReview in authentication").into(),
            );
        }
        validation.check(&obj).await?;
        let audiences: Vec<String> = obj["spec"]["audiences"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let accounts = scope.state.service_accounts.as_deref();
        let authenticator = scope.state.authenticator.as_deref();
        let review =
            crate::auth::serviceaccount::review_token(accounts, authenticator, &token, &audiences);
        obj["status"] = match review.await {
            Some((user, accepted)) => json!({
                "authenticated": true,
                "user": user,
                "audiences": accepted,
            }),
            None => json!({"user": {}, "error": "invalid bearer token"}),
        };
        Ok(with_creation_timestamp(obj))
    })
}

/// SubjectAccessReview: may the user in `spec` do what it names?
pub fn subject_access_review<'a>(
    scope: &'a Scope,
    obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        let spec = &obj["spec"];
        let mut causes = attribute_causes(spec);
        let user = spec_user(spec);
        if user.username.is_empty() && user.groups.is_empty() {
            causes.push(StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                invalid_message("", "at least one of user or group must be specified"),
                "spec.user",
            ));
        }
        invalid(scope, causes)?;
        review(scope, obj, &user, validation).await
    })
}

/// LocalSubjectAccessReview: a SubjectAccessReview within the path's
/// namespace.
pub fn local_subject_access_review<'a>(
    scope: &'a Scope,
    obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        let spec = &obj["spec"];
        let mut causes = attribute_causes(spec);
        let meta_ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
            let ns = ra.get("namespace").and_then(Value::as_str).unwrap_or("");
            if ns != meta_ns {
                causes.push(StatusCause::new(
                    cause::FIELD_VALUE_INVALID,
                    invalid_message(ns, "must match metadata.namespace"),
                    "spec.resourceAttributes.namespace",
                ));
            }
        }
        if spec
            .get("nonResourceAttributes")
            .is_some_and(Value::is_object)
        {
            causes.push(StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                invalid_message(
                    &spec["nonResourceAttributes"].to_string(),
                    "disallowed on this kind of request",
                ),
                "spec.nonResourceAttributes",
            ));
        }
        let user = spec_user(spec);
        if user.username.is_empty() && user.groups.is_empty() {
            causes.push(StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                invalid_message("", "at least one of user or group must be specified"),
                "spec.user",
            ));
        }
        invalid(scope, causes)?;
        let path_ns = scope.namespace.as_deref().unwrap_or("");
        if path_ns.is_empty() {
            return Err(Status::bad_request(format!(
                "namespace is required on this type: {path_ns}"
            ))
            .into());
        }
        if path_ns != meta_ns {
            return Err(Status::bad_request(format!(
                "spec.resourceAttributes.namespace must match namespace: {path_ns}"
            ))
            .into());
        }
        review(scope, obj, &user, validation).await
    })
}

/// SelfSubjectAccessReview: may the caller do it (`kubectl auth can-i`)?
pub fn self_subject_access_review<'a>(
    scope: &'a Scope,
    obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        invalid(scope, attribute_causes(&obj["spec"]))?;
        let user = (*scope.user).clone();
        review(scope, obj, &user, validation).await
    })
}

/// SelfSubjectRulesReview: everything the caller may do in
/// `spec.namespace` (`kubectl auth can-i --list`).
pub fn self_subject_rules_review<'a>(
    scope: &'a Scope,
    mut obj: Value,
    validation: CreateValidation<'a>,
) -> BoxFuture<'a, Result<Value>> {
    Box::pin(async move {
        let namespace = obj
            .pointer("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if namespace.is_empty() {
            return Err(Status::bad_request("no namespace on request").into());
        }
        validation.check(&obj).await?;
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        if scope.user.in_group(SYSTEM_MASTERS) {
            // What the privileged-group authorizer grants, as kube lists it.
            resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
            non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        }
        let (incomplete, error) = match &scope.state.rbac {
            Some(rbac) => {
                let held = rbac.rules_for(&scope.user, &namespace);
                for r in held.rules {
                    if r.non_resource_urls.is_empty() {
                        let mut m = Map::new();
                        m.insert("verbs".into(), json!(r.verbs));
                        m.insert("apiGroups".into(), json!(r.api_groups));
                        m.insert("resources".into(), json!(r.resources));
                        if !r.resource_names.is_empty() {
                            m.insert("resourceNames".into(), json!(r.resource_names));
                        }
                        resource_rules.push(Value::Object(m));
                    } else {
                        non_resource_rules.push(
                            json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}),
                        );
                    }
                }
                let error = match held.errors.len() {
                    0 => String::new(),
                    1 => held.errors[0].clone(),
                    _ => format!("[{}]", held.errors.join(", ")),
                };
                (!held.errors.is_empty(), error)
            }
            // Another authorization mode: its rules cannot be listed.
            None => (true, String::new()),
        };
        let mut status = Map::new();
        status.insert("resourceRules".into(), json!(resource_rules));
        status.insert("nonResourceRules".into(), json!(non_resource_rules));
        status.insert("incomplete".into(), json!(incomplete));
        if !error.is_empty() {
            status.insert("evaluationError".into(), json!(error));
        }
        obj["status"] = Value::Object(status);
        Ok(with_creation_timestamp(obj))
    })
}

/// kube answers reviews with `metadata.creationTimestamp: null`.
fn with_creation_timestamp(mut obj: Value) -> Value {
    let meta = crate::object::meta_mut(&mut obj);
    meta.entry("creationTimestamp").or_insert(Value::Null);
    obj
}

fn invalid(scope: &Scope, causes: Vec<StatusCause>) -> Result<()> {
    if causes.is_empty() {
        return Ok(());
    }
    let gk = GroupKind {
        group: &scope.res.group,
        kind: &scope.res.kind,
    };
    Err(Status::invalid(gk, "", causes).into())
}

/// Exactly one of resourceAttributes and nonResourceAttributes.
fn attribute_causes(spec: &Value) -> Vec<StatusCause> {
    let resource = spec.get("resourceAttributes").is_some_and(Value::is_object);
    let non_resource = spec
        .get("nonResourceAttributes")
        .is_some_and(Value::is_object);
    match (resource, non_resource) {
        (false, false) => vec![StatusCause::new(
            cause::FIELD_VALUE_REQUIRED,
            "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
            "spec.resourceAttributes",
        )],
        (true, true) => vec![StatusCause::new(
            cause::FIELD_VALUE_INVALID,
            invalid_message(
                &spec["nonResourceAttributes"].to_string(),
                "cannot be specified in combination with resourceAttributes",
            ),
            "spec.nonResourceAttributes",
        )],
        _ => vec![],
    }
}

fn spec_user(spec: &Value) -> UserInfo {
    let s = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    UserInfo {
        username: s("user"),
        uid: s("uid"),
        groups: spec
            .get("groups")
            .and_then(|g| serde_json::from_value(g.clone()).ok())
            .unwrap_or_default(),
        extra: spec
            .get("extra")
            .and_then(|g| serde_json::from_value(g.clone()).ok())
            .unwrap_or_default(),
    }
}

/// The attributes a review asks about (kube's AuthorizationAttributesFrom).
fn attributes(spec: &Value) -> RequestInfo {
    let str_at = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let raw = |k: &str| {
            ra.get(k)
                .and_then(|s| s.get("rawSelector"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        RequestInfo {
            resource_request: true,
            verb: str_at(ra, "verb"),
            api_group: str_at(ra, "group"),
            api_version: str_at(ra, "version"),
            namespace: str_at(ra, "namespace"),
            resource: str_at(ra, "resource"),
            subresource: str_at(ra, "subresource"),
            name: str_at(ra, "name"),
            label_selector: raw("labelSelector"),
            field_selector: raw("fieldSelector"),
            ..Default::default()
        }
    } else {
        let nra = &spec["nonResourceAttributes"];
        RequestInfo {
            resource_request: false,
            verb: str_at(nra, "verb"),
            path: str_at(nra, "path"),
            ..Default::default()
        }
    }
}

/// Decides the review's question for `user` and fills in the status.
async fn review(
    scope: &Scope,
    mut obj: Value,
    user: &UserInfo,
    validation: CreateValidation<'_>,
) -> Result<Value> {
    validation.check(&obj).await?;
    let request = attributes(&obj["spec"]);
    let decision = crate::auth::decide(&*scope.state.authorizer, user, &request).await;
    let mut status = Map::new();
    match decision {
        Decision::Allow => {
            status.insert("allowed".into(), json!(true));
            // RBAC says which binding allowed it (not for system:masters,
            // which kube allows before RBAC is asked).
            if let Some(rbac) = scope
                .state
                .rbac
                .as_ref()
                .filter(|_| !user.in_group(SYSTEM_MASTERS))
            {
                let (d, why) = rbac.decide(user, &request);
                if d == Decision::Allow && !why.is_empty() {
                    status.insert("reason".into(), json!(why));
                }
            }
        }
        Decision::Deny(reason) => {
            status.insert("allowed".into(), json!(false));
            status.insert("denied".into(), json!(true));
            if !reason.is_empty() {
                status.insert("reason".into(), json!(reason));
            }
        }
        Decision::NoOpinion(reason) => {
            status.insert("allowed".into(), json!(false));
            if !reason.is_empty() {
                status.insert("reason".into(), json!(reason));
            }
        }
    }
    obj["status"] = Value::Object(status);
    Ok(with_creation_timestamp(obj))
}

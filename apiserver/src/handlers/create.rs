//! POST to a collection: negotiate, decode, admit, store, respond.

use super::{scope::Scope, write};
use crate::error::{ApiError, Result};
use crate::registry::CreateAnswer;
use crate::{object, response};
use axum::http::StatusCode;
use axum::response::Response;

pub async fn create(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Create)?;
    let (obj, warnings) = write::decode_object(scope, &body, &params)?;
    let manager = write::manager(scope, &params);
    let now = object::now();
    let stored = write::create_object(scope, &params, &manager, obj, &now).await?;
    let resp = super::scope::object_response(scope, StatusCode::CREATED, &stored).await?;
    Ok(response::with_warnings(resp, &warnings))
}

/// The function that answers a create-only kind or subresource.
fn answer(
    tag: CreateAnswer,
) -> for<'a> fn(
    &'a Scope,
    serde_json::Value,
    crate::admission::CreateValidation<'a>,
) -> futures_util::future::BoxFuture<'a, Result<serde_json::Value>> {
    use super::{binding, eviction, review};
    match tag {
        CreateAnswer::Binding => binding::bind,
        CreateAnswer::Eviction => eviction::evict,
        CreateAnswer::TokenRequest => super::token::token_request,
        CreateAnswer::SelfSubjectReview => review::self_subject_review,
        CreateAnswer::TokenReview => review::token_review,
        CreateAnswer::LocalSubjectAccessReview => review::local_subject_access_review,
        CreateAnswer::SelfSubjectAccessReview => review::self_subject_access_review,
        CreateAnswer::SelfSubjectRulesReview => review::self_subject_rules_review,
        CreateAnswer::SubjectAccessReview => review::subject_access_review,
    }
}

/// POST of a virtual kind or a create-only subresource (`pods/binding`,
/// `pods/eviction`, `serviceaccounts/token`): decoded and checked as any
/// create, through the mutating half of admission, answered by the kind's
/// function (which runs the validating half once its own checks pass),
/// never stored.
pub async fn create_virtual(
    scope: &Scope,
    tag: CreateAnswer,
    body: axum::body::Bytes,
) -> Result<Response> {
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Create)?;
    let (mut obj, warnings) = write::decode_object(scope, &body, &params)?;
    write::check_namespace(scope, &obj)?;
    if let Some(ns) = &scope.namespace {
        object::meta_mut(&mut obj).insert("namespace".into(), ns.clone().into());
    }
    crate::admission::mutating(scope, "CREATE", None, params.dry_run, &mut obj).await?;
    let validated = std::sync::atomic::AtomicBool::new(false);
    let validation = crate::admission::CreateValidation::new(scope, params.dry_run, &validated);
    let mut answered = answer(tag)(scope, obj, validation).await?;
    if !validated.load(std::sync::atomic::Ordering::Acquire) {
        return Err(ApiError::internal(format!(
            "the create of {} answered without running validating admission",
            scope.res.group_resource()
        )));
    }
    // Never stored, so ordered here: kube writes it from its Go type.
    k8s_proto::order_object(&mut answered);
    let resp = response::object(scope, StatusCode::CREATED, &answered);
    Ok(response::with_warnings(resp, &warnings))
}

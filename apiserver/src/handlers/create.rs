//! POST to a collection: negotiate, decode, admit, store, respond.

use super::{write, Scope};
use crate::error::Result;
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
    let resp = super::object_response(scope, StatusCode::CREATED, &stored).await?;
    Ok(response::with_warnings(resp, &warnings))
}

/// POST of a virtual kind: decoded and checked as any create, answered by
/// the kind's function, never stored.
/// The function that answers a create-only kind or subresource.
fn answer(
    tag: CreateAnswer,
) -> for<'a> fn(
    &'a Scope,
    serde_json::Value,
) -> futures_util::future::BoxFuture<'a, Result<serde_json::Value>> {
    use super::{binding, eviction, review};
    match tag {
        CreateAnswer::Binding => binding::bind,
        CreateAnswer::Eviction => eviction::evict,
        CreateAnswer::SelfSubjectReview => review::self_subject_review,
        CreateAnswer::TokenReview => review::token_review,
        CreateAnswer::LocalSubjectAccessReview => review::local_subject_access_review,
        CreateAnswer::SelfSubjectAccessReview => review::self_subject_access_review,
        CreateAnswer::SelfSubjectRulesReview => review::self_subject_rules_review,
        CreateAnswer::SubjectAccessReview => review::subject_access_review,
    }
}

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
    let mut answered = answer(tag)(scope, obj).await?;
    // Never stored, so ordered here: kube writes it from its Go type.
    k8s_proto::order_object(&mut answered);
    let resp = response::object(scope, StatusCode::CREATED, &answered);
    Ok(response::with_warnings(resp, &warnings))
}

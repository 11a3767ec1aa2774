//! PUT of one object or its /status: replace, with the body's
//! resourceVersion as precondition when given.

use super::{scope::Scope, write};
use crate::error::Result;
use crate::{object, response};
use apimachinery::Status;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

pub async fn update(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Update)?;
    let (mut obj, warnings) = write::decode_object(scope, &body, &params)?;
    check_name(scope, &mut obj)?;
    write::check_namespace(scope, &obj)?;
    let manager = write::manager(scope, &params);
    let updated = write::guaranteed_update(scope, &params, &manager, |current| {
        check_uid_precondition(scope, current, &obj)?;
        Ok(obj.clone())
    })
    .await?;
    let code = if updated.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let resp = super::scope::object_response(scope, code, &updated.object).await?;
    Ok(response::with_warnings(resp, &warnings))
}

/// A uid in a PUT body is a precondition on the stored object (kube's
/// `DefaultUpdatedObjectInfo.Preconditions`): 409 when it differs.
fn check_uid_precondition(
    scope: &Scope,
    current: Option<&watchcache::Object>,
    obj: &Value,
) -> Result<()> {
    let (Some(current), Some(uid)) = (current, object::meta_str(obj, "uid")) else {
        return Ok(());
    };
    let have = object::meta_str(current.value(), "uid").unwrap_or("");
    if uid.is_empty() || uid == have {
        return Ok(());
    }
    Err(Status::conflict(
        scope.res.group_resource(),
        scope.name(),
        &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
    )
    .into())
}

/// The body's name must match the URL's (an empty one takes the URL's).
pub fn check_name(scope: &Scope, obj: &mut Value) -> Result<()> {
    match object::meta_str(obj, "name") {
        Some(n) if !n.is_empty() && n != scope.name() => Err(Status::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            scope.name()
        ))
        .into()),
        Some(n) if !n.is_empty() => Ok(()),
        _ => {
            object::meta_mut(obj).insert("name".into(), Value::String(scope.name().to_string()));
            Ok(())
        }
    }
}

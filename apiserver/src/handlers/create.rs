//! POST to a collection: negotiate, decode, admit, store, respond.

use super::{write, Scope};
use crate::error::Result;
use crate::{object, response};
use axum::http::StatusCode;
use axum::response::Response;

pub async fn create(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Create)?;
    let (obj, warnings) = write::decode_object(scope, &body, &params)?;
    let manager = write::manager(scope, &params);
    let now = object::now();
    let stored = write::create_object(scope, &params, &manager, obj, &now).await?;
    let resp = response::object(scope, StatusCode::CREATED, &stored);
    Ok(response::with_warnings(resp, &warnings))
}

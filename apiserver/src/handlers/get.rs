//! GET of one object (or its /status).

use super::Scope;
use crate::error::Result;
use apimachinery::media::{Format, Target};
use apimachinery::query;
use apimachinery::Status;
use axum::http::StatusCode;
use axum::response::Response;

pub async fn get(scope: &Scope) -> Result<Response> {
    let freshness = query::get_freshness(scope.query.get("resourceVersion"))?;
    let obj = scope
        .state
        .store
        .get(&scope.key(), freshness)
        .await
        .map_err(|e| scope.storage_err(e))?
        .ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
    if scope.out.format == Format::Protobuf
        && scope.out.target == Target::Object
        && !scope.res.converts()
    {
        // The cached object's protobuf body, made once and shared with
        // lists and watches.
        if let Ok(body) = obj.protobuf() {
            return Ok(crate::response::bytes_response(
                StatusCode::OK,
                scope.out.content_type(),
                body.clone(),
            ));
        }
    }
    if scope.out.format == Format::Cbor
        && scope.out.target == Target::Object
        && !scope.res.converts()
    {
        // Likewise the cached object's CBOR.
        return Ok(crate::response::bytes_response(
            StatusCode::OK,
            scope.out.content_type(),
            obj.cbor().clone(),
        ));
    }
    if scope.out.format == Format::Json
        && scope.out.target == Target::Object
        && !scope.pretty
        && !scope.res.converts()
    {
        // And its compact JSON: what `response::object` would write (the
        // same serializer, and kube's closing newline) without building
        // the tree again from the cached bytes to serialize it back.
        let json = obj.json();
        let mut body = bytes::BytesMut::with_capacity(json.len() + 1);
        body.extend_from_slice(json);
        body.extend_from_slice(b"\n");
        return Ok(crate::response::bytes_response(
            StatusCode::OK,
            scope.out.format.media_type(),
            body.freeze(),
        ));
    }
    super::object_response(scope, StatusCode::OK, obj.value()).await
}

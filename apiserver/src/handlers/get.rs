//! GET of one object (or its /status).

use super::scope::Scope;
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
    // An object that reads as it is stored (any built-in kind stored in
    // the version asked for; a custom resource too when its schema has no
    // defaults: kind and apiVersion come from the bytes) is answered from
    // its bytes. Decoding a custom resource to find that out cost as much
    // as the rest of the GET (callgrind: 163k instructions against a
    // ConfigMap's 82k, BENCHMARKS.md "Custom resource GET, profiled").
    if scope.out.target == Target::Object
        && !crate::conversion::any_needs(&scope.res, std::slice::from_ref(&obj))
    {
        // The object's shared encoding in the requested format, made once
        // per version and shared with lists and watches, instead of its
        // tree built from the cached bytes and serialized back.
        let body = match scope.out.format {
            Format::Protobuf => obj.protobuf().ok().cloned(),
            Format::Cbor => Some(obj.cbor().clone()),
            // kube's JSON encoder ends the body with a newline, as
            // `response::encode_as` writes it.
            Format::Json if !scope.pretty => {
                let json = obj.json();
                let mut body = bytes::BytesMut::with_capacity(json.len() + 1);
                body.extend_from_slice(json);
                body.extend_from_slice(b"\n");
                Some(body.freeze())
            }
            _ => None,
        };
        if let Some(body) = body {
            return Ok(crate::response::bytes_response(
                StatusCode::OK,
                scope.out.content_type(),
                body,
            ));
        }
    }
    super::scope::object_response(scope, StatusCode::OK, obj.value()).await
}

//! PATCH of one object or its /status: JSON patch, merge patch and strategic
//! merge patch, applied to the current object inside a read-modify-write
//! loop that retries on conflict (unless the patch carries a
//! resourceVersion precondition).

use super::{scope::Scope, write};
use crate::error::Result;
use crate::response;
use apimachinery::fieldvalidation::{self, Decoded};
use apimachinery::media::{self, BodyFormat};
use apimachinery::patch;
use apimachinery::schema::TypeRef;
use apimachinery::Status;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::Value;

/// Content types a PATCH accepts (apply comes with server-side apply).
pub const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// Decodes the patch document of a PATCH request.
pub fn decode_patch(scope: &Scope, body: &[u8]) -> Result<(BodyFormat, Decoded)> {
    let ctype = scope.header(header::CONTENT_TYPE);
    let format = media::request_body(ctype, true)?;
    if format.is_apply() {
        return Err(Status::unsupported_media_type(ctype.unwrap_or(""), PATCH_TYPES).into());
    }
    if format == BodyFormat::JsonPatch {
        return Ok((format, decode_json_patch(body)?));
    }
    let decoded = fieldvalidation::decode_json(body).map_err(|e| {
        // kube decodes a merge patch into a map ("error decoding patch: "
        // and Go's error) and a strategic one likewise, without the prefix.
        let go = go_decode_error(e.message());
        match format {
            BodyFormat::MergePatch => Status::bad_request(format!("error decoding patch: {go}")),
            _ => Status::bad_request(go),
        }
    })?;
    Ok((format, decoded))
}

/// A JSON patch is an array of operations, which the object decoder (it
/// wants an object with a kind) refuses. Any JSON value is passed on:
/// `patch::apply_json_patch` answers a non-array the way kube's jsonpatch
/// decoding does. Syntax errors read as Go's decoder words them.
fn decode_json_patch(body: &[u8]) -> Result<Decoded> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => Ok(Decoded {
            value,
            duplicates: Vec::new(),
        }),
        Err(e) => {
            let message = fieldvalidation::decode_json(body)
                .err()
                .map(|d| go_decode_error(d.message()).to_string())
                .unwrap_or_else(|| e.to_string());
            Err(Status::bad_request(message).into())
        }
    }
}

/// Go's own error in a body decoding error, without the prefix the object
/// decoder adds while looking for the kind.
fn go_decode_error(message: &str) -> &str {
    message.trim_start_matches("couldn't get version/kind; json parse error: ")
}

/// Applies a decoded patch to `original`.
pub fn apply(
    format: BodyFormat,
    original: &Value,
    patch_doc: &Value,
    ty: Option<TypeRef<'_>>,
) -> Result<Value> {
    let out = match format {
        BodyFormat::JsonPatch => patch::apply_json_patch(original, patch_doc),
        BodyFormat::MergePatch => patch::apply_merge_patch(original, patch_doc),
        _ => patch::apply_strategic_merge_patch(original, patch_doc, ty),
    };
    out.map_err(|e| e.to_status().into())
}

pub async fn patch(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    if super::write::is_apply(scope) {
        return super::apply::patch(scope, body).await;
    }
    let (format, decoded) = decode_patch(scope, &body)?;
    let params = write::write_params(scope, apimachinery::query::WriteVerb::Patch(format))?;
    let manager = write::manager(scope, &params);
    let ty = scope.res.schema();
    let mut warnings = Vec::new();
    let updated = write::guaranteed_update(scope, &params, &manager, |current| {
        let current =
            current.ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
        let patched = apply(format, current.value(), &decoded.value, ty)?;
        check_identity(scope, current.value(), &patched)?;
        let check = Decoded {
            value: patched,
            duplicates: decoded.duplicates.clone(),
        };
        warnings = write::field_check(scope, &params, ty, &check)?;
        write::check_types(scope, &check.value)?;
        let mut patched = check.value;
        if let Some(ty) = ty {
            crate::object::prune_unknown_fields(ty, &mut patched);
        }
        Ok(patched)
    })
    .await?;
    let resp = super::scope::object_response(scope, StatusCode::OK, &updated.object).await?;
    Ok(response::with_warnings(resp, &warnings))
}

/// A patch may not change kind, apiVersion, name or namespace.
fn check_identity(scope: &Scope, before: &Value, after: &Value) -> Result<()> {
    for f in ["kind", "apiVersion"] {
        if before.get(f) != after.get(f) {
            return Err(Status::bad_request(format!(
                "the {f} of the object cannot be changed by a patch"
            ))
            .into());
        }
    }
    let name = after.pointer("/metadata/name").and_then(Value::as_str);
    if name != Some(scope.name()) {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            name.unwrap_or(""),
            scope.name()
        ))
        .into());
    }
    write::check_namespace(scope, after)
}

//! Server-side apply: PATCH with `application/apply-patch+yaml` (a JSON body
//! is YAML too) or `application/apply-patch+cbor` (decoded into the same
//! configuration). Reads top to bottom: options (`fieldManager` required,
//! `force`, `dryRun`, `fieldValidation`), decode, then either create (the
//! object does not exist: the create pipeline of POST) or a read-modify-write
//! through `guaranteed_update`, where `apimachinery::managedfields::apply`
//! merges the configuration and computes `metadata.managedFields` (so
//! `write::record_managed_fields` leaves applies alone). `/status` applies
//! own status fields only; `/scale` applies work on the Scale view, with the
//! workload's entries mapped to it and back.

use super::{scope::Scope, write};
use crate::error::{ApiError, Result};
use crate::registry::Subresource;
use crate::response;
use apimachinery::fieldvalidation::{self, Decoded, FieldValidationLevel};
use apimachinery::managedfields::{self, ApplyError, ApplyOptions, FieldSet, PathElement};
use apimachinery::media::{self, BodyFormat};
use apimachinery::query::{WriteParams, WriteVerb};
use apimachinery::schema::TypeRef;
use apimachinery::Status;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::Value;

/// How often an apply that races with a create or a delete starts over.
const MAX_ATTEMPTS: usize = 4;

/// What every apply carries from the request.
struct Request {
    params: WriteParams,
    manager: String,
    force: bool,
    config: Value,
    warnings: Vec<String>,
}

/// PATCH with an apply configuration, on the object, its `/status` or its
/// `/scale`.
pub async fn patch(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let params = write::write_params(scope, WriteVerb::Patch(BodyFormat::ApplyYaml))?;
    let cbor =
        media::request_body(scope.header(header::CONTENT_TYPE), true) == Ok(BodyFormat::ApplyCbor);
    let decoded = if cbor {
        // kube decodes a CBOR apply into a map; duplicate keys are refused
        // outright, so there are none to report.
        match apimachinery::cbor::decode(&body) {
            Ok(value @ Value::Object(_)) => Decoded {
                value,
                duplicates: Vec::new(),
            },
            Ok(_) => return Err(Status::bad_request("error decoding CBOR: not a map").into()),
            Err(e) => return Err(Status::bad_request(format!("error decoding CBOR: {e}")).into()),
        }
    } else {
        fieldvalidation::decode_yaml(&body)
            .map_err(|e| Status::bad_request(format!("error decoding YAML: {}", e.message())))?
    };
    let warnings = duplicates(params.field_validation, &decoded)?;
    let req = Request {
        manager: params.field_manager.clone().unwrap_or_default(),
        force: params.force.unwrap_or(false),
        params,
        config: decoded.value,
        warnings,
    };
    let resp = match scope.subresource.as_ref() {
        Some(Subresource::Scale { .. }) => apply_scale(scope, &req).await?,
        _ => apply_object(scope, &req).await?,
    };
    Ok(response::with_warnings(resp, &req.warnings))
}

/// kube checks an apply body for duplicate keys only (the schema check of
/// the configuration rejects unknown fields whatever the level).
fn duplicates(level: FieldValidationLevel, decoded: &Decoded) -> Result<Vec<String>> {
    if decoded.duplicates.is_empty() || level == FieldValidationLevel::Ignore {
        return Ok(Vec::new());
    }
    let text = format!(
        "error converting YAML to JSON: yaml: unmarshal errors:\n  {}",
        decoded.duplicates.join("\n  ")
    );
    if level == FieldValidationLevel::Strict {
        return Err(Status::bad_request(format!("error strict decoding YAML: {text}")).into());
    }
    Ok(vec![text])
}

fn apply_error(e: ApplyError) -> ApiError {
    match e {
        ApplyError::Internal(msg) => ApiError::internal(msg),
        other => other.to_status().into(),
    }
}

/// The fields an apply to the main resource or `/status` may not change.
fn reset_fields(scope: &Scope) -> Option<FieldSet> {
    match scope.subresource.as_ref() {
        None if scope.res.has_status() => Some(FieldSet::from_paths([[PathElement::Field(
            "status".into(),
        )]])),
        None => Some(FieldSet::new()),
        // `/status`: everything but status (the library's default).
        Some(_) => None,
    }
}

async fn apply_object(scope: &Scope, req: &Request) -> Result<Response> {
    let ty = scope.res.schema();
    let api_version = scope.res.api_version();
    check_kind(&scope.res.kind, &api_version, &req.config)?;
    let reset = reset_fields(scope);
    let run = |live: Option<&Value>, now: &str| -> Result<Value> {
        let opts = ApplyOptions {
            manager: &req.manager,
            api_version: &api_version,
            subresource: scope.subresource_name(),
            force: req.force,
            now,
            reset: reset.as_ref(),
        };
        let obj = managedfields::apply_with(ty, live, &req.config, &opts).map_err(apply_error)?;
        check_name(scope, &obj)?;
        write::check_types(scope, &obj)?;
        Ok(obj)
    };
    let key = scope.key();
    for _ in 0..MAX_ATTEMPTS {
        let current = scope
            .state
            .store
            .get(&key, apimachinery::read::Freshness::MostRecent)
            .await
            .map_err(|e| scope.storage_err(e))?;
        if current.is_none() {
            if scope.subresource.is_some() {
                return Err(Status::not_found(scope.res.group_resource(), scope.name()).into());
            }
            let now = crate::object::now();
            let obj = run(None, &now)?;
            match write::create_object(scope, &req.params, &req.manager, obj, &now).await {
                Ok(created) => {
                    return super::scope::object_response(scope, StatusCode::CREATED, &created)
                        .await
                }
                // Created meanwhile: apply to it.
                Err(e) if e.to_status().reason == apimachinery::status::reason::ALREADY_EXISTS => {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        let updated = write::guaranteed_update(scope, &req.params, &req.manager, |current| {
            let current = current
                .ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
            run(Some(current.value()), &crate::object::now())
        })
        .await;
        match updated {
            Ok(u) => {
                let code = if u.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                return super::scope::object_response(scope, code, &u.object).await;
            }
            // Deleted meanwhile: create it.
            Err(e) if e.to_status().is_not_found() && scope.subresource.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Status::conflict(
        scope.res.group_resource(),
        scope.name(),
        Status::CONFLICT_MODIFIED,
    )
    .into())
}

/// The configuration must be of the endpoint's kind. (A wrong or missing
/// `apiVersion` is reported by the apply itself, first, as kube does.)
fn check_kind(kind: &str, api_version: &str, config: &Value) -> Result<()> {
    let got = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if got == kind || config.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return Ok(());
    }
    let meta = |f: &str| {
        config
            .get("metadata")
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let gv = if api_version.contains('/') {
        api_version.to_string()
    } else {
        format!("/{api_version}")
    };
    let message = if got.is_empty() {
        format!(
            "failed to create typed patch object ({}/{}; {gv}, Kind=): no corresponding type for {gv}, Kind=",
            meta("namespace"),
            meta("name")
        )
    } else {
        format!("the kind in the data ({got}) does not match the expected kind ({kind})")
    };
    Err(Status::bad_request(message).into())
}

/// The applied object must name the object of the URL (kube's `checkName`).
fn check_name(scope: &Scope, obj: &Value) -> Result<()> {
    let meta = |f: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if meta("name") != scope.name() {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            meta("name"),
            scope.name()
        ))
        .into());
    }
    if let Some(ns) = scope.namespace.as_deref() {
        let got = meta("namespace");
        if !got.is_empty() && got != ns {
            return Err(Status::bad_request(format!(
                "the namespace of the object ({got}) does not match the namespace on the URL ({ns})"
            ))
            .into());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// /scale

/// The field path of a JSON pointer.
fn pointer_path(ptr: &str) -> Vec<PathElement> {
    ptr.trim_start_matches('/')
        .split('/')
        .map(|s| PathElement::Field(s.replace("~1", "/").replace("~0", "~")))
        .collect()
}

async fn apply_scale(scope: &Scope, req: &Request) -> Result<Response> {
    let p = super::scale_view::pointers(scope)?;
    check_kind("Scale", managedfields::SCALE_API_VERSION, &req.config)?;
    let scale_ty: Option<TypeRef<'static>> =
        apimachinery::schema::builtin().by_gvk("autoscaling", "v1", "Scale");
    let replicas = pointer_path(p.spec);
    let reset = FieldSet::from_paths([[PathElement::Field("status".into())]]);
    let parent_version = scope.res.api_version();
    let updated = write::guaranteed_update(scope, &req.params, &req.manager, |current| {
        let current =
            current.ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
        let parent = current.value();
        let parent_entries = managedfields::decode_managed_fields(parent).unwrap_or_default();
        let mut live = super::scale_view::to_scale(&p, parent)?;
        let unset = p.spec_missing(parent);
        if unset {
            live["spec"]["replicas"] = Value::from(super::scale_view::UNSET_REPLICAS);
        }
        let entries = managedfields::scale_entries_to_subresource(&parent_entries, &replicas);
        if !entries.is_empty() {
            live["metadata"]["managedFields"] = managedfields::encode_managed_fields(&entries);
        }
        let now = crate::object::now();
        let opts = ApplyOptions {
            manager: &req.manager,
            api_version: managedfields::SCALE_API_VERSION,
            subresource: Some("scale"),
            force: req.force,
            now: &now,
            reset: Some(&reset),
        };
        let scale = managedfields::apply_with(scale_ty, Some(&live), &req.config, &opts)
            .map_err(apply_error)?;
        check_name(scope, &scale)?;
        if unset
            && scale.pointer("/spec/replicas")
                == Some(&Value::from(super::scale_view::UNSET_REPLICAS))
        {
            return Err(super::scale_view::spec_empty_error(&p).into());
        }
        let mut new = parent.clone();
        if let Some(r) = scale.pointer("/spec/replicas") {
            super::scale_view::set_replicas(&p, &mut new, r, scope.name())?;
        }
        let scale_entries = managedfields::decode_managed_fields(&scale).unwrap_or_default();
        let back = managedfields::scale_entries_to_parent(
            &parent_entries,
            &scale_entries,
            &replicas,
            &parent_version,
        );
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            // The Scale's resourceVersion is the client's precondition.
            match scale.pointer("/metadata/resourceVersion") {
                Some(rv) => meta.insert("resourceVersion".into(), rv.clone()),
                None => meta.remove("resourceVersion"),
            };
            if back.is_empty() {
                meta.shift_remove("managedFields");
            } else {
                meta.insert(
                    "managedFields".into(),
                    managedfields::encode_managed_fields(&back),
                );
            }
        }
        Ok(new)
    })
    .await?;
    Ok(response::object(
        scope,
        StatusCode::OK,
        &super::scale_view::to_scale(&p, &updated.object)?,
    ))
}

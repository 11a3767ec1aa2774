//! DELETE of one object and of a collection, and the garbage collector's
//! deletes: all through [`delete_stored`]. The propagation policy sets the
//! collector's finalizers (`orphan`, `foregroundDeletion`); objects with
//! finalizers (and namespaces, and pods bound to a node with a grace
//! period) get a deletionTimestamp and stay until their finalizers are
//! gone; everything else is removed at once. The API's deletes are
//! admitted per object (both halves, operation DELETE, the stored object
//! as `oldObject`), a collection's as each object goes.

use super::{list, scope::Scope, write};
use crate::admission::{self, Attributes};
use crate::error::Result;
use crate::registry::{GcPolicy, Resource};
use crate::state::AppState;
use crate::{object, response};
use apimachinery::query::{self, DeleteParams, PropagationPolicy};
use apimachinery::read::Freshness;
use apimachinery::Status;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use watchcache::{ListOptions, Object, StorageError};

const MAX_RETRIES: usize = 16;

/// What a delete did.
pub enum Outcome {
    /// Removed from storage; the object as it was.
    Deleted(Value),
    /// Marked for deletion (finalizers or grace period); the updated object.
    Pending(Value),
}

/// The options of a delete: a `DeleteOptions` body (JSON, protobuf as
/// client-go sends it when configured for protobuf, e.g. Helm 4, or CBOR),
/// else the query.
fn delete_params(scope: &Scope, body: &[u8]) -> Result<DeleteParams> {
    use apimachinery::media::BodyFormat;
    let format =
        apimachinery::media::request_body(scope.header(axum::http::header::CONTENT_TYPE), false);
    let opts: Option<Value> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else if format == Ok(BodyFormat::Protobuf) {
        Some(
            write::decode_protobuf(body)
                .map_err(Status::bad_request)?
                .value,
        )
    } else if format == Ok(BodyFormat::Cbor) {
        Some(write::decode_cbor(body).map_err(Status::bad_request)?.value)
    } else {
        let d = apimachinery::fieldvalidation::decode_json(body)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        Some(d.value)
    };
    Ok(query::delete_params(&scope.query, opts.as_ref())?)
}

/// The kind's grace period for this delete, if it has one.
fn grace_period(res: &Resource, obj: &Value, params: &DeleteParams) -> Option<i64> {
    res.delete.grace_period?(obj, params.grace_period_seconds)
}

/// Whether the delete leaves the dependents behind (the `orphan`
/// finalizer): the request's choice, else the object's own finalizers,
/// else the kind's default (kube's `shouldOrphanDependents`).
fn orphans(res: &Resource, finalizers: &[String], params: &DeleteParams) -> bool {
    if let Some(o) = params.orphan_dependents {
        return o;
    }
    match params.propagation_policy {
        Some(PropagationPolicy::Orphan) => return true,
        Some(PropagationPolicy::Background | PropagationPolicy::Foreground) => return false,
        None => {}
    }
    for f in finalizers {
        match f.as_str() {
            object::FINALIZER_ORPHAN => return true,
            object::FINALIZER_FOREGROUND => return false,
            _ => {}
        }
    }
    res.gc_policy == GcPolicy::Orphan
}

/// Whether the owner waits for its dependents (the `foregroundDeletion`
/// finalizer), on the same precedence (kube's `shouldDeleteDependents`).
fn waits_for_dependents(finalizers: &[String], params: &DeleteParams) -> bool {
    if params.orphan_dependents.is_some() {
        return false;
    }
    match params.propagation_policy {
        Some(PropagationPolicy::Foreground) => return true,
        Some(PropagationPolicy::Background | PropagationPolicy::Orphan) => return false,
        None => {}
    }
    for f in finalizers {
        match f.as_str() {
            object::FINALIZER_FOREGROUND => return true,
            object::FINALIZER_ORPHAN => return false,
            _ => {}
        }
    }
    false
}

/// The finalizers the object should carry once this delete starts, when
/// they differ from what it has: the garbage collector's two are set from
/// the propagation policy (kube's `deletionFinalizersForGarbageCollection`).
fn gc_finalizers(res: &Resource, obj: &Value, params: &DeleteParams) -> Option<Vec<String>> {
    if res.gc_policy == GcPolicy::Unsupported {
        return None;
    }
    let have = object::finalizers(obj);
    let orphan = orphans(res, &have, params);
    let foreground = waits_for_dependents(&have, params);
    let mut want: Vec<String> = have
        .iter()
        .filter(|f| *f != object::FINALIZER_ORPHAN && *f != object::FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        want.push(object::FINALIZER_ORPHAN.to_string());
    }
    if foreground {
        want.push(object::FINALIZER_FOREGROUND.to_string());
    }
    let same = {
        let a: std::collections::BTreeSet<&String> = have.iter().collect();
        let b: std::collections::BTreeSet<&String> = want.iter().collect();
        a == b
    };
    (!same).then_some(want)
}

/// Deletes one stored object (`current`, read at `key`) as a DELETE does:
/// at once when nothing holds it, else by marking it (deletionTimestamp,
/// the garbage collector's finalizers for the propagation policy, the
/// kind's clean-up finalizer) for its finalizers' owners to finish. Writes
/// are preconditioned on `current`'s revision. The API's DELETE and the
/// garbage collector both come here.
pub async fn delete_stored(
    state: &AppState,
    res: &Resource,
    key: &str,
    current: &Object,
    params: &DeleteParams,
) -> std::result::Result<Outcome, StorageError> {
    let obj = current.value();
    let grace = grace_period(res, obj, params);
    let cleanup = res.delete_finalizer;
    let gc = gc_finalizers(res, obj, params);
    let held = match &gc {
        Some(f) => !f.is_empty(),
        None => !object::finalizers(obj).is_empty(),
    };
    let pending = held || grace.is_some() || res.delete.mark.is_some() || cleanup.is_some();
    if !pending {
        if params.dry_run {
            return Ok(Outcome::Deleted(obj.clone()));
        }
        let gone = state.store.delete(key, Some(current.revision)).await?;
        super::write::after_delete(state, res, gone.value()).await;
        return Ok(Outcome::Deleted(gone.value().clone()));
    }
    let deleting = object::is_deleting(obj);
    if deleting && gc.is_none() {
        return Ok(Outcome::Pending(obj.clone()));
    }
    let mut v = obj.clone();
    {
        let m = object::meta_mut(&mut v);
        if !deleting {
            m.insert("deletionTimestamp".into(), Value::String(object::now()));
            m.insert(
                "deletionGracePeriodSeconds".into(),
                Value::from(grace.unwrap_or(0)),
            );
        }
        m.remove("resourceVersion");
        if let Some(f) = gc {
            if f.is_empty() {
                m.remove("finalizers");
            } else {
                m.insert(
                    "finalizers".into(),
                    Value::Array(f.into_iter().map(Value::String).collect()),
                );
            }
        }
        if let Some(f) = cleanup.filter(|_| !deleting) {
            let list = m
                .entry("finalizers")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = list.as_array_mut() {
                if !list.iter().any(|x| x.as_str() == Some(f)) {
                    list.push(Value::String(f.to_string()));
                }
            }
        }
    }
    if let Some(mark) = res.delete.mark {
        mark(&mut v);
    }
    if params.dry_run {
        return Ok(Outcome::Pending(v));
    }
    // A namespace's content is deleted by the namespace controller
    // (`controllers::namespace`), which then finalizes it; dependents, by
    // the garbage collector (`controllers::garbagecollector`).
    let updated = state.store.update(key, &v, current.revision).await?;
    Ok(Outcome::Pending(updated.value().clone()))
}

fn check_preconditions(scope: &Scope, current: &Object, params: &DeleteParams) -> Result<()> {
    if let Some(uid) = &params.preconditions_uid {
        let have = object::meta_str(current.value(), "uid").unwrap_or("");
        if uid != have {
            return Err(Status::conflict(
                scope.res.group_resource(),
                scope.name(),
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                ),
            )
            .into());
        }
    }
    if let Some(rv) = &params.preconditions_resource_version {
        let have = current.revision.to_string();
        if *rv != have {
            return Err(Status::conflict(
                scope.res.group_resource(),
                scope.name(),
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                ),
            )
            .into());
        }
    }
    Ok(())
}

pub async fn delete(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    delete_as(scope, body, true).await
}

/// A DELETE of one object made on behalf of a request admitted as
/// itself: kube's eviction deletes the pod with
/// `rest.ValidateAllObjectFunc`, no DELETE admission of its own.
pub(crate) async fn delete_admitted(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    delete_as(scope, body, false).await
}

/// The attributes of deleting `old` (kube's DELETE: no object, the stored
/// one as `oldObject`, the request's name, which is empty for a
/// collection).
fn deleting<'a>(scope: &'a Scope, old: &'a Value, params: &'a DeleteParams) -> Attributes<'a> {
    Attributes {
        options: crate::admission::Options::Delete(params),
        ..Attributes::of(scope, "DELETE", None, Some(old), params.dry_run)
    }
}

async fn delete_as(scope: &Scope, body: axum::body::Bytes, admit: bool) -> Result<Response> {
    let params = delete_params(scope, &body)?;
    let key = scope.key();
    for _ in 0..MAX_RETRIES {
        let current = scope
            .state
            .store
            .get(&key, Freshness::MostRecent)
            .await
            .map_err(|e| scope.storage_err(e))?
            .ok_or_else(|| Status::not_found(scope.res.group_resource(), scope.name()))?;
        check_preconditions(scope, &current, &params)?;
        if admit {
            admission::unstored(scope, &deleting(scope, current.value(), &params)).await?;
        }
        match delete_stored(&scope.state, &scope.res, &key, &current, &params).await {
            Ok(Outcome::Pending(v)) => {
                return super::scope::object_response(scope, StatusCode::OK, &v).await
            }
            Ok(Outcome::Deleted(v)) => {
                if returns_deleted_object(scope) {
                    return super::scope::object_response(scope, StatusCode::OK, &v).await;
                }
                let status = write::delete_success(scope.res.group_resource(), &v);
                let mut body = serde_json::to_value(&status).unwrap_or_default();
                // kube's registry answers a Status without a code here
                // (`code` is omitempty in metav1.Status).
                if let Some(o) = body.as_object_mut() {
                    o.remove("code");
                }
                return Ok(response::bytes_response(
                    StatusCode::OK,
                    scope.out.content_type(),
                    response::encode(scope, &body)?,
                ));
            }
            Err(StorageError::Conflict { .. }) | Err(StorageError::NotFound { .. }) => continue,
            Err(e) => return Err(scope.storage_err(e)),
        }
    }
    Err(Status::conflict(
        scope.res.group_resource(),
        scope.name(),
        Status::CONFLICT_MODIFIED,
    )
    .into())
}

fn returns_deleted_object(scope: &Scope) -> bool {
    scope.res.delete_returns_object
}

pub async fn delete_collection(scope: &Scope, body: axum::body::Bytes) -> Result<Response> {
    let params = delete_params(scope, &body)?;
    let lp = query::list_params(&scope.query)?;
    let opts = ListOptions {
        freshness: Freshness::MostRecent,
        limit: None,
        continue_from: None,
        predicate: list::predicate(scope, &lp)?,
    };
    let listed = scope
        .state
        .store
        .list(&scope.collection_prefix(), &opts)
        .await
        .map_err(|e| scope.storage_err(e))?;
    let mut items = Vec::with_capacity(listed.items.len());
    for item in &listed.items {
        let ns = object::meta_str(item.value(), "namespace");
        let name = object::meta_str(item.value(), "name").unwrap_or("");
        let key = scope.state.key(&scope.res, ns, name);
        // Each object is admitted as it is deleted, as kube's registry
        // does (with the collection's empty name); the first refusal ends
        // the request, with what was deleted before it gone.
        admission::unstored(scope, &deleting(scope, item.value(), &params)).await?;
        match delete_stored(&scope.state, &scope.res, &key, item, &params).await {
            Ok(Outcome::Deleted(v)) | Ok(Outcome::Pending(v)) => items.push(v),
            // Changed or gone since the list: someone else got there first.
            Err(StorageError::Conflict { .. }) | Err(StorageError::NotFound { .. }) => {}
            Err(e) => return Err(scope.storage_err(e)),
        }
    }
    let doc = json!({
        "kind": scope.res.list_kind(),
        "apiVersion": scope.res.api_version(),
        "metadata": {"resourceVersion": listed.revision.to_string()},
        "items": items,
    });
    Ok(response::bytes_response(
        StatusCode::OK,
        scope.out.content_type(),
        response::encode(scope, &doc)?,
    ))
}

//! The write pipeline shared by create, update, patch and the subresources:
//! decode, check kind and namespace, validate, record managed fields, store
//! (or not, under dryRun). Read-modify-write verbs go through
//! `guaranteed_update`, which retries on conflict unless the client made the
//! resourceVersion a precondition.

use super::scope::Scope;
use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Resource;
use crate::registry::Subresource;
use crate::state::AppState;
use apimachinery::fieldvalidation;
use apimachinery::managedfields;
use apimachinery::media::{self, BodyFormat};
use apimachinery::query::{self, WriteParams, WriteVerb};
use apimachinery::read::Freshness;
use apimachinery::status::{cause, GroupResource, StatusCause};
use apimachinery::Status;
use axum::http::header;
use serde_json::Value;
use std::sync::Arc;
use watchcache::{Object, StorageError};

/// How many times an unconditional read-modify-write retries on conflict.
const MAX_CONFLICT_RETRIES: usize = 16;

pub fn write_params(scope: &Scope, verb: WriteVerb) -> Result<WriteParams> {
    Ok(query::write_params(&scope.query, verb)?)
}

/// The field manager of a non-apply write: `fieldManager`, else derived from
/// the User-Agent as kube-apiserver does.
pub fn manager(scope: &Scope, params: &WriteParams) -> String {
    query::manager_or_user_agent(params.field_manager.as_deref(), Some(scope.user_agent()))
}

/// Decodes a POST/PUT body (JSON, YAML, protobuf or CBOR) into an object of the
/// scope's kind, applying the field validation level. Returns the object
/// and the warnings.
pub fn decode_object(
    scope: &Scope,
    body: &[u8],
    params: &WriteParams,
) -> Result<(Value, Vec<String>)> {
    let content_type = scope.header(header::CONTENT_TYPE);
    let format = media::request_body(content_type, false)?;
    if format == BodyFormat::Protobuf
        && scope.res.custom.is_some()
        && scope.subresource_name() != Some("scale")
    {
        // kube's custom resource handler has no protobuf codec.
        return Err(Status::unsupported_media_type(
            content_type.unwrap_or_default().trim(),
            media::SUPPORTED_CUSTOM,
        )
        .into());
    }
    let (kind, api_version) = expected_kind(scope);
    // An undecodable JSON/YAML body is reported the way kube's create and
    // update handlers do: "the object provided is unrecognized (must be of
    // type <Kind>): <error> (<summary of the body>)".
    let mut decoded = match format {
        BodyFormat::Yaml => fieldvalidation::decode_yaml(body).map_err(|e| e.to_status(kind, body)),
        BodyFormat::Protobuf => decode_protobuf(body).map_err(Status::bad_request),
        BodyFormat::Cbor => decode_cbor(body).map_err(|e| {
            Status::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): {e}"
            ))
        }),
        _ => fieldvalidation::decode_json(body).map_err(|e| e.to_status(kind, body)),
    }?;
    check_kind(&mut decoded.value, kind, &api_version)?;
    let ty = schema_for(scope);
    // For a built-in kind this walk already refuses the body's first type
    // error (kube's decoder fails on it), so the body needs no second walk
    // by `check_types`, which the patch paths use.
    let warnings = field_check(scope, params, ty, &decoded)?;
    let mut obj = decoded.value;
    // Decoding into the Go type drops unknown fields: they are never stored.
    if let Some(ty) = ty {
        object::prune_unknown_fields(ty, &mut obj);
    }
    Ok((obj, warnings))
}

/// A protobuf body: the `k8s\0` envelope names the kind, whose message the
/// generated table decodes into the JSON kube-apiserver would store. Every
/// protobuf request body (objects, subresource and virtual kinds,
/// DeleteOptions, TokenRequest) is decoded here.
pub fn decode_protobuf(body: &[u8]) -> Result<fieldvalidation::Decoded, String> {
    let value = k8s_proto::decode_object(body)
        .map_err(|e| format!("unable to decode the protobuf request body: {e}"))?;
    Ok(fieldvalidation::Decoded {
        value,
        duplicates: Vec::new(),
    })
}

/// A CBOR body (`application/cbor`), decoded by kube's rules into the
/// JSON the other formats decode into. Duplicate map keys are an error
/// whatever the field validation level (kube refuses such CBOR outright),
/// so `duplicates` stays empty. Every CBOR request body (objects,
/// subresource and virtual kinds, DeleteOptions, TokenRequest) is decoded
/// here.
pub fn decode_cbor(body: &[u8]) -> Result<fieldvalidation::Decoded, String> {
    let value = apimachinery::cbor::decode(body)
        .map_err(|e| format!("unable to determine group/version/kind: cbor: {e}"))?;
    let value = match value {
        // As Go decodes `null` into an empty object.
        Value::Null => Value::Object(Default::default()),
        v @ Value::Object(_) => v,
        _ => {
            return Err(
                "unable to determine group/version/kind: cbor: the body is not a map".into(),
            )
        }
    };
    Ok(fieldvalidation::Decoded {
        value,
        duplicates: Vec::new(),
    })
}

/// Unknown and duplicate fields by the request's validation level. Custom
/// resources decode into a map: they get no Go type check (their schema
/// validation reports type errors as 422).
pub fn field_check(
    scope: &Scope,
    params: &WriteParams,
    ty: Option<apimachinery::schema::TypeRef<'_>>,
    decoded: &fieldvalidation::Decoded,
) -> Result<Vec<String>> {
    let level = params.field_validation;
    Ok(
        if scope.res.custom.is_some() && scope.subresource_name() != Some("scale") {
            fieldvalidation::check_unstructured(level, ty, decoded)?
        } else {
            fieldvalidation::check(level, ty, decoded)?
        },
    )
}

/// The kind a body must carry for this request (a Scale on /scale).
fn expected_kind(scope: &Scope) -> (&str, String) {
    match scope.subresource.as_ref() {
        Some(crate::registry::Subresource::Scale { .. }) => ("Scale", "autoscaling/v1".into()),
        Some(crate::registry::Subresource::Create {
            group,
            version,
            kind,
            ..
        }) => (
            kind,
            if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            },
        ),
        _ => (&scope.res.kind, scope.res.api_version()),
    }
}

fn schema_for(scope: &Scope) -> Option<apimachinery::schema::TypeRef<'_>> {
    match scope.subresource.as_ref() {
        Some(crate::registry::Subresource::Scale { .. }) => {
            apimachinery::schema::builtin().by_gvk("autoscaling", "v1", "Scale")
        }
        Some(crate::registry::Subresource::Create {
            group,
            version,
            kind,
            ..
        }) => apimachinery::schema::builtin().by_gvk(group, version, kind),
        _ => scope.res.schema(),
    }
}

/// Type errors against the schema are a 400, as kube's decoder reports them.
pub fn check_types(scope: &Scope, obj: &Value) -> Result<()> {
    if scope.res.custom.is_some() && scope.subresource_name() != Some("scale") {
        // A custom resource decodes into unstructured JSON: its schema's
        // type errors are 422s of the validation (`CustomInfo::validate`).
        return Ok(());
    }
    let Some(ty) = schema_for(scope) else {
        return Ok(());
    };
    let errs = fieldvalidation::type_errors(ty, obj);
    if let Some(first) = errs.first() {
        let (kind, api_version) = expected_kind(scope);
        let version = api_version.rsplit('/').next().unwrap_or("v1").to_string();
        return Err(Status::bad_request(fieldvalidation::type_error_message(
            kind, &version, first,
        ))
        .into());
    }
    Ok(())
}

/// The body's apiVersion and kind must name the resource's kind; missing
/// ones default to the endpoint's, as kube's decoder does.
fn check_kind(obj: &mut Value, kind: &str, api_version: &str) -> Result<()> {
    let Some(map) = obj.as_object_mut() else {
        return Err(Status::bad_request("the request body must be an object").into());
    };
    let got_kind = map
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let got_av = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if got_av.is_empty() {
        map.insert("apiVersion".into(), Value::String(api_version.to_string()));
    } else if got_av != api_version {
        return Err(Status::bad_request(format!(
            "the API version in the data ({got_av}) does not match the expected API version ({api_version})"
        ))
        .into());
    }
    if got_kind.is_empty() {
        map.insert("kind".into(), Value::String(kind.to_string()));
    } else if got_kind != kind {
        return Err(Status::bad_request(format!(
            "the kind in the data ({got_kind}) does not match the expected kind ({kind})"
        ))
        .into());
    }
    Ok(())
}

/// The body's namespace must be empty or equal the request's.
pub fn check_namespace(scope: &Scope, obj: &Value) -> Result<()> {
    let ns = object::meta_str(obj, "namespace").unwrap_or("");
    if !scope.res.namespaced {
        return Ok(());
    }
    let want = scope.namespace.as_deref().unwrap_or("");
    if !ns.is_empty() && ns != want {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )
        .into());
    }
    Ok(())
}

/// A write of `/status` or of a part (`/approval`, ...): the kind's own
/// prepare steps and hooks do not apply.
fn status_like(scope: &Scope) -> bool {
    matches!(
        scope.subresource.as_ref(),
        Some(Subresource::Status | Subresource::Part(_))
    )
}

/// Metadata and immutability checks → 422 Invalid with every cause.
pub fn validate(scope: &Scope, obj: &Value, old: Option<&Value>) -> Result<()> {
    let mut causes = object::validate_meta(&scope.res, obj);
    // `/scale` writes the object itself, under its own strategy, as kube's.
    let rule = match (scope.subresource.as_ref(), old) {
        (Some(Subresource::Status), Some(_)) => scope.res.rules.validate_status,
        (Some(Subresource::Part(part)), Some(_)) => part.validate,
        _ => scope.res.rules.validate,
    };
    if let Some(rule) = rule {
        causes.extend(rule(obj, old));
    }
    if let Some(custom) = &scope.res.custom {
        causes.extend(custom.validate(obj, old));
    }
    if let Some(old) = old {
        causes.extend(object::immutable_errors(&scope.res, old, obj));
        if object::is_deleting(old) {
            let before = object::finalizers(old);
            // kube lists the new ones, sorted and deduplicated, as Go's %#v
            // of a []string.
            let mut added: Vec<String> = object::finalizers(obj)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            added.sort();
            added.dedup();
            if !added.is_empty() {
                let listed: Vec<String> = added
                    .iter()
                    .map(|f| apimachinery::validation::go_quote(f))
                    .collect();
                causes.push(StatusCause::new(
                    cause::FIELD_VALUE_FORBIDDEN,
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        listed.join(", ")
                    ),
                    "metadata.finalizers",
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = object::meta_str(obj, "name").unwrap_or("");
        Err(Status::invalid(scope.res.group_kind(), name, causes).into())
    }
}

/// The mutating half of admission on an update. A `/scale` write is
/// admitted as kube admits it: on autoscaling/v1 Scale views of the new
/// and the stored object, and the replicas a mutation sets go into the
/// object.
async fn admit_mutating_update(
    scope: &Scope,
    current: &Value,
    dry_run: bool,
    new: &mut Value,
) -> Result<()> {
    if !matches!(scope.subresource, Some(Subresource::Scale { .. })) {
        return crate::admission::mutating(scope, "UPDATE", Some(current), dry_run, new).await;
    }
    let p = super::scale_view::pointers(scope)?;
    let old = super::scale_view::to_scale(&p, current)?;
    let mut scale = super::scale_view::to_scale(&p, new)?;
    let before = scale.pointer("/spec/replicas").cloned();
    crate::admission::mutating(scope, "UPDATE", Some(&old), dry_run, &mut scale).await?;
    match scale.pointer("/spec/replicas") {
        Some(r) if Some(r) != before.as_ref() => {
            super::scale_view::set_replicas(&p, new, r, scope.name())
        }
        _ => Ok(()),
    }
}

/// The validating half of admission on an update (on the Scale views for
/// `/scale`, as [`admit_mutating_update`]).
async fn admit_validating_update(
    scope: &Scope,
    current: &Value,
    dry_run: bool,
    new: &Value,
) -> Result<()> {
    let views;
    let (obj, old) = if matches!(scope.subresource, Some(Subresource::Scale { .. })) {
        let p = super::scale_view::pointers(scope)?;
        views = (
            super::scale_view::to_scale(&p, new)?,
            super::scale_view::to_scale(&p, current)?,
        );
        (&views.0, &views.1)
    } else {
        (new, current)
    };
    crate::admission::validating(
        scope,
        &crate::admission::Attributes::of(scope, "UPDATE", Some(obj), Some(old), dry_run),
    )
    .await
}

/// Records this write in `metadata.managedFields`.
pub fn record_managed_fields(
    scope: &Scope,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
) -> Result<()> {
    if is_apply(scope) {
        // Server-side apply computed managedFields with the object.
        return Ok(());
    }
    managedfields::update_managed_fields(
        scope.res.schema(),
        old,
        new,
        manager,
        &scope.res.api_version(),
        scope.subresource_name(),
        now,
    )
    .map_err(|msg| {
        Status::invalid(
            scope.res.group_kind(),
            object::meta_str(new, "name").unwrap_or(""),
            vec![StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                msg,
                "metadata.managedFields",
            )],
        )
        .into()
    })
}

/// What a read-modify-write step produced.
pub struct Updated {
    pub object: Value,
    /// 201 when the update created the object.
    pub created: bool,
}

/// Reads the current object, lets `modify` build the new one, and writes it
/// with the current revision as precondition; retries on conflict. `modify`
/// gets `None` when the object does not exist (it may then create it for
/// kinds that allow create-on-update, or answer NotFound). A
/// `metadata.resourceVersion` in the new object is the client's precondition.
pub async fn guaranteed_update<F>(
    scope: &Scope,
    params: &WriteParams,
    manager: &str,
    mut modify: F,
) -> Result<Updated>
where
    F: FnMut(Option<&Object>) -> Result<Value>,
{
    let key = scope.key();
    // The first attempt starts from the replica's cached copy, as
    // kube-apiserver's GuaranteedUpdate does with the watch cache's object:
    // when it is current, the write costs one etcd transaction. Anything
    // that could be an artefact of a stale copy (missing object, a
    // precondition that does not match, a conflict) re-reads from etcd.
    let mut quorum = false;
    for _ in 0..MAX_CONFLICT_RETRIES {
        let freshness = if quorum {
            Freshness::MostRecent
        } else {
            Freshness::NotOlderThan(0)
        };
        let current = scope
            .state
            .store
            .get(&key, freshness)
            .await
            .map_err(|e| scope.storage_err(e))?;
        // An object stored in another version is modified in the
        // request's; `stored` is what a no-op write is compared with.
        let stored = current;
        let current = match &stored {
            Some(o) => Some(
                match crate::conversion::for_request(&scope.res, o.value()).await? {
                    std::borrow::Cow::Owned(v) => Object::new(Arc::new(v), o.revision),
                    std::borrow::Cow::Borrowed(_) => o.clone(),
                },
            ),
            None => None,
        };
        if current.is_none() && !quorum {
            quorum = true;
            continue;
        }
        let mut new = match modify(current.as_ref()) {
            Ok(v) => v,
            Err(e) if !quorum && e.is_conflict() => {
                quorum = true;
                continue;
            }
            Err(e) => return Err(e),
        };
        let now = object::now();
        let Some(current) = current else {
            if !scope.res.create_on_update || scope.subresource.is_some() {
                return Err(Status::not_found(scope.res.group_resource(), scope.name()).into());
            }
            let obj = create_object(scope, params, manager, new, &now).await?;
            return Ok(Updated {
                object: obj,
                created: true,
            });
        };
        if let Some(rv) = object::meta_str(&new, "resourceVersion") {
            if !rv.is_empty() && rv != current.revision.to_string() {
                if !quorum {
                    quorum = true;
                    continue;
                }
                return Err(Status::conflict(
                    scope.res.group_resource(),
                    scope.name(),
                    Status::CONFLICT_MODIFIED,
                )
                .into());
            }
        }
        if let Some(uid) = object::meta_str(&new, "uid") {
            // A PUT's uid is a precondition (409, checked by `update`); any
            // other change of it (a patch) fails metadata validation, as in
            // kube's ValidateObjectMetaUpdate.
            let cur_uid = object::meta_str(current.value(), "uid").unwrap_or("");
            if !uid.is_empty() && uid != cur_uid {
                return Err(Status::invalid(
                    scope.res.group_kind(),
                    scope.name(),
                    vec![StatusCause::new(
                        cause::FIELD_VALUE_INVALID,
                        apimachinery::validation::invalid_message(uid, "field is immutable"),
                        "metadata.uid",
                    )],
                )
                .into());
            }
        }
        // Defaults first, as kube applies them when it decodes the body:
        // the generation compares the defaulted spec with the stored one.
        if let Some(defaults) = scope.res.rules.defaults {
            defaults(&mut new);
        }
        object::prepare_update(
            &scope.res,
            current.value(),
            &mut new,
            scope.subresource.as_ref(),
        );
        if let Some(prepare) = scope.res.rules.prepare_update {
            if !status_like(scope) {
                prepare(&mut new, current.value());
            }
        }
        if let Some(custom) = &scope.res.custom {
            custom.prepare(&mut new);
        }
        admit_mutating_update(scope, current.value(), params.dry_run, &mut new).await?;
        validate(scope, &new, Some(current.value()))?;
        crate::rbac::admit(
            scope,
            &*scope.state.authorizer,
            scope.state.rbac.as_deref(),
            &new,
            Some(current.value()),
        )
        .await?;
        admit_validating_update(scope, current.value(), params.dry_run, &new).await?;
        record_managed_fields(scope, Some(current.value()), &mut new, manager, &now)?;
        crate::conversion::for_storage(&scope.res, &mut new).await?;
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        // `new` is in the storage version now: encoded once, judged a no-op
        // on what a read of it would give back, and written as encoded.
        let stored = stored.as_ref().unwrap_or(&current);
        let mut encoded = scope.state.store.encode(&key, &new);
        let unchanged = encoded.as_ref().is_ok_and(|e| e.same_as(stored));
        if (params.dry_run || unchanged) && !quorum {
            // Answers that do not write must not rest on a stale copy.
            quorum = true;
            continue;
        }
        // Status-like writes keep the spec: nothing to allocate or free.
        let reservation = match scope
            .res
            .hooks
            .filter(|_| !status_like(scope))
            .map(crate::allocator::hooks)
        {
            Some(hooks) => {
                let r = (hooks.begin_update)(
                    &scope.state,
                    &scope.state.services,
                    &mut new,
                    current.value(),
                    params.dry_run,
                )
                .await?;
                // The hook may have filled in what it allocated.
                encoded = scope.state.store.encode(&key, &new);
                Some(r)
            }
            None => None,
        };
        if params.dry_run {
            // Answered as if stored: in kube's order, as storage writes it.
            k8s_proto::order_object(&mut new);
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                k8s_proto::set_resource_version(m, current.revision.to_string());
            }
            return Ok(Updated {
                object: new,
                created: false,
            });
        }
        if encoded.as_ref().is_ok_and(|e| e.same_as(stored))
            && !scope.state.store.is_stale(&key).await.unwrap_or(false)
        {
            // A no-op write does not bump the resourceVersion (unless the
            // stored form is stale: encrypted with a rotated-out key).
            return Ok(Updated {
                object: stored.value().clone(),
                created: false,
            });
        }
        let finalized = object::is_deleting(&new)
            && object::finalizers(&new).is_empty()
            && !holds_spec_finalizers(scope, &new);
        let result = if finalized {
            // The last finalizer is gone: the object goes.
            scope
                .state
                .store
                .delete(&key, Some(current.revision))
                .await
                .map(|o| Object::new(Arc::new(new_with_rv(&new, o.revision)), o.revision))
        } else {
            let lease = if scope.res.ttl_lease {
                scope
                    .state
                    .event_ttl
                    .lease(&*scope.state.store, &key)
                    .await
                    .map(Some)
            } else {
                Ok(None)
            };
            match (lease, encoded) {
                (Ok(lease), Ok(encoded)) => {
                    scope
                        .state
                        .store
                        .update_encoded(&key, encoded, current.revision, lease)
                        .await
                }
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        };
        match result {
            Ok(o) => {
                if let Some(r) = reservation {
                    r.commit(&scope.state, &scope.state.services).await;
                }
                if finalized {
                    after_delete(&scope.state, &scope.res, o.value()).await;
                }
                return Ok(Updated {
                    object: o.value().clone(),
                    created: false,
                });
            }
            Err(e) => {
                if let Some(r) = reservation {
                    r.revert(&scope.state, &scope.state.services).await;
                }
                match e {
                    StorageError::Conflict { .. } | StorageError::NotFound { .. } => {
                        quorum = true;
                        continue;
                    }
                    e => return Err(scope.storage_err(e)),
                }
            }
        }
    }
    Err(Status::conflict(
        scope.res.group_resource(),
        scope.name(),
        Status::CONFLICT_MODIFIED,
    )
    .into())
}

/// Whether the kind's `spec.finalizers` still hold the object (a
/// namespace being deleted waits on them, the namespace controller's
/// `kubernetes` first of all).
fn holds_spec_finalizers(scope: &Scope, obj: &Value) -> bool {
    scope.res.delete.spec_finalizers && !object::strings(obj.pointer("/spec/finalizers")).is_empty()
}

fn new_with_rv(v: &Value, rv: i64) -> Value {
    let mut v = v.clone();
    object::meta_mut(&mut v).insert("resourceVersion".into(), Value::String(rv.to_string()));
    v
}

/// Creates `obj` (already decoded and checked) under the scope's resource.
/// Handles generateName retries, system fields, validation, managed fields,
/// the namespace check and dryRun.
pub async fn create_object(
    scope: &Scope,
    params: &WriteParams,
    manager: &str,
    mut obj: Value,
    now: &str,
) -> Result<Value> {
    check_namespace(scope, &obj)?;
    if let Some(m) = object::meta(&obj) {
        if m.get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(Status::bad_request(
                "resourceVersion should not be set on objects to be created",
            )
            .into());
        }
    }
    if scope.res.custom.as_ref().is_some_and(|c| c.terminating) {
        let mut s =
            Status::method_not_allowed().with_details("", &scope.res.group, &scope.res.plural);
        s.message =
            "create not allowed while custom resource definition is terminating".to_string();
        return Err(s.into());
    }
    let generate = object::meta_str(&obj, "generateName")
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let explicit_name = object::name(&obj).map(str::to_string);
    let first_name = explicit_name
        .clone()
        .or_else(|| generate.as_deref().map(object::generate_name))
        .unwrap_or_default();
    object::meta_mut(&mut obj).insert("name".into(), Value::String(first_name.clone()));
    object::prepare_create(&scope.res, &mut obj, scope.namespace.as_deref(), now);
    if scope.res.has_status() && !scope.res.keep_status_on_create {
        // Status is the controllers' to write. kube's built-in strategies
        // reset it to the zero struct, which Go writes as `{}` (plus its
        // fields without omitempty); its custom resource strategy removes
        // it.
        let zero = match scope.res.custom {
            Some(_) => None,
            None => scope
                .res
                .schema()
                .and_then(|t| t.child("status"))
                .and_then(|t| t.zero_struct()),
        };
        if let Some(o) = obj.as_object_mut() {
            match zero {
                Some(z) => o.insert("status".into(), z),
                None => o.remove("status"),
            };
        }
    }
    if let Some(defaults) = scope.res.rules.defaults {
        defaults(&mut obj);
    }
    if let Some(prepare) = scope.res.rules.prepare_create {
        prepare(&mut obj);
    }
    if let Some(prepare) = scope.res.rules.prepare_create_as {
        prepare(&mut obj, &scope.user);
    }
    if let Some(custom) = &scope.res.custom {
        custom.prepare(&mut obj);
    }
    crate::admission::mutating(scope, "CREATE", None, params.dry_run, &mut obj).await?;
    validate(scope, &obj, None)?;
    crate::rbac::admit(
        scope,
        &*scope.state.authorizer,
        scope.state.rbac.as_deref(),
        &obj,
        None,
    )
    .await?;
    crate::admission::validating(
        scope,
        &crate::admission::Attributes::of(scope, "CREATE", Some(&obj), None, params.dry_run),
    )
    .await?;
    record_managed_fields(scope, None, &mut obj, manager, now)?;
    crate::conversion::for_storage(&scope.res, &mut obj).await?;
    let reservation = match scope.res.hooks.map(crate::allocator::hooks) {
        Some(hooks) => Some(
            (hooks.begin_create)(
                &scope.state,
                &scope.state.services,
                &mut obj,
                params.dry_run,
            )
            .await?,
        ),
        None => None,
    };
    // Only a generated name is retried (with a fresh suffix) on collision.
    let retry_prefix = if explicit_name.is_none() {
        generate
    } else {
        None
    };
    let result = store_new(scope, params, obj, first_name, retry_prefix).await;
    if let Some(r) = reservation {
        match &result {
            Ok(_) => r.commit(&scope.state, &scope.state.services).await,
            Err(_) => r.revert(&scope.state, &scope.state.services).await,
        }
    }
    result
}

/// Stores a prepared, validated new object (a dry run only checks the
/// name is free). A generated name is retried with a fresh suffix on
/// collision.
async fn store_new(
    scope: &Scope,
    params: &WriteParams,
    mut obj: Value,
    first_name: String,
    retry_prefix: Option<String>,
) -> Result<Value> {
    if params.dry_run {
        // kube's dry-run storage still refuses a name that is taken.
        let taken = scope
            .state
            .store
            .get(&scope.key_for(&first_name), Freshness::MostRecent)
            .await
            .map_err(|e| ApiError::storage(e, &scope.res, &first_name))?;
        if taken.is_some() {
            return Err(Status::already_exists(scope.res.group_resource(), &first_name).into());
        }
        // Answered as if stored: in kube's order, as storage writes it.
        k8s_proto::order_object(&mut obj);
        return Ok(obj);
    }
    let attempts = if retry_prefix.is_some() { 8 } else { 1 };
    let mut name = first_name;
    for attempt in 0..attempts {
        if attempt > 0 {
            if let Some(prefix) = &retry_prefix {
                name = object::generate_name(prefix);
                object::meta_mut(&mut obj).insert("name".into(), Value::String(name.clone()));
            }
        }
        let key = scope.key_for(&name);
        let created = if scope.res.ttl_lease {
            match scope.state.event_ttl.lease(&*scope.state.store, &key).await {
                Ok(lease) => scope.state.store.create_with_lease(&key, &obj, lease).await,
                Err(e) => Err(e),
            }
        } else {
            scope.state.store.create(&key, &obj).await
        };
        match created {
            Ok(o) => return Ok(o.value().clone()),
            Err(StorageError::AlreadyExists { .. }) if attempt + 1 < attempts => continue,
            Err(e) => return Err(ApiError::storage(e, &scope.res, &name)),
        }
    }
    Err(Status::already_exists(scope.res.group_resource(), &name).into())
}

/// Runs the kind's clean-up once an object is gone from etcd (Service
/// addresses and ports are freed).
pub async fn after_delete(state: &AppState, res: &Resource, obj: &Value) {
    if let Some(hooks) = res.hooks.map(crate::allocator::hooks) {
        (hooks.after_delete)(state, &state.services, obj).await;
    }
}

/// The Status a successful immediate delete answers with.
pub fn delete_success(gr: GroupResource<'_>, obj: &Value) -> Status {
    Status::success(
        gr,
        object::meta_str(obj, "name").unwrap_or(""),
        object::meta_str(obj, "uid").unwrap_or(""),
    )
}

/// Whether the request is a server-side apply (its content type).
pub fn is_apply(scope: &Scope) -> bool {
    media::request_body(scope.header(header::CONTENT_TYPE), true).is_ok_and(BodyFormat::is_apply)
}

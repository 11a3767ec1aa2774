//! Kinds served in more than one version. Objects are stored in one
//! version and served in the one a request names: a built-in kind converts
//! through the pure function its registry row declares
//! ([`apimachinery::kinds::Conversion`], e.g. autoscaling/v1 and v2
//! HorizontalPodAutoscalers), a custom resource through its CRD's
//! strategy ([`crate::crd::conversion`]). Every path that moves an object
//! between versions goes through here: the write path (request → storage
//! version, and the stored object → request version for read-modify-write),
//! GET, LIST, WATCH and the answers of writes.
//!
//! Model floor, at its top: this module owns the dispatch and names
//! `crd::conversion` for a CRD's own strategy (never the other way), and
//! the registry and `error` below; nothing above the model floor.

use crate::error::Result;
use crate::registry::custom::CustomInfo;
use crate::registry::Resource;
use serde_json::Value;
use std::borrow::Cow;

/// Whether `obj` is of `kind` in a version other than `api_version`.
fn needs(obj: &Value, kind: &str, api_version: &str) -> bool {
    other_version(
        obj.get("kind").and_then(Value::as_str).unwrap_or(""),
        obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        kind,
        api_version,
    )
}

/// [`needs`] on an object's kind and apiVersion ("" where absent).
fn other_version(found_kind: &str, found_api_version: &str, kind: &str, api_version: &str) -> bool {
    found_kind == kind && found_api_version != api_version
}

/// `objs` in `api_version` as the CRD's strategy converts them (only those
/// of the resource's kind in another version change).
async fn convert_custom(
    res: &Resource,
    info: &CustomInfo,
    objs: &mut [Value],
    api_version: &str,
) -> Result<()> {
    let todo: Vec<usize> = (0..objs.len())
        .filter(|i| needs(&objs[*i], &res.kind, api_version))
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    // Boxed: a conversion webhook call's future is several KiB, and inline
    // it made the future of every read and write that may convert as large,
    // copied whole at each move (BENCHMARKS.md, "Instructions per GET:
    // logging and futures").
    Box::pin(crate::crd::conversion::convert(
        res,
        info,
        objs,
        todo,
        api_version,
    ))
    .await
}

/// `obj` (as stored) as the request sees it: in the version of `res`, and
/// for a custom resource with the schema's defaults applied (kube defaults
/// on read too).
pub async fn for_request<'a>(res: &Resource, obj: &'a Value) -> Result<Cow<'a, Value>> {
    let want = res.api_version();
    if let Some(conv) = res.conversion {
        return Ok(if needs(obj, &res.kind, &want) {
            Cow::Owned((conv.convert)(obj, &want))
        } else {
            Cow::Borrowed(obj)
        });
    }
    let Some(ref info) = res.custom else {
        return Ok(Cow::Borrowed(obj));
    };
    let convert = needs(obj, &res.kind, &want);
    let default =
        obj.get("kind").and_then(Value::as_str) == Some(&res.kind) && info.would_default(obj);
    if !convert && !default {
        return Ok(Cow::Borrowed(obj));
    }
    let mut one = [obj.clone()];
    if convert {
        convert_custom(res, info, &mut one, &want).await?;
    }
    let [mut v] = one;
    if default {
        info.apply_defaults(&mut v);
    }
    Ok(Cow::Owned(v))
}

/// Many stored objects as the request sees them ([`for_request`]), in one
/// webhook call for a custom resource.
pub async fn list_for_request(res: &Resource, objs: &mut [Value]) -> Result<()> {
    let want = res.api_version();
    if let Some(conv) = res.conversion {
        for o in objs.iter_mut().filter(|o| needs(o, &res.kind, &want)) {
            *o = (conv.convert)(o, &want);
        }
        return Ok(());
    }
    let Some(ref info) = res.custom else {
        return Ok(());
    };
    convert_custom(res, info, objs, &want).await?;
    for o in objs.iter_mut() {
        if info.would_default(o) {
            info.apply_defaults(o);
        }
    }
    Ok(())
}

/// Whether any of `objs` (as stored) would change on its way to the
/// request. Only a custom resource whose schema has defaults decodes its
/// objects to tell; otherwise their kind and apiVersion are read from
/// their bytes (`Object::type_meta`): a LIST of compact objects answered
/// from the cache decoded every item here before.
pub fn any_needs(res: &Resource, objs: &[watchcache::Object]) -> bool {
    if !res.converts() {
        return false;
    }
    let want = res.api_version();
    let in_other_version = |o: &watchcache::Object| {
        let (api_version, kind) = o.type_meta();
        other_version(&kind, &api_version, &res.kind, &want)
    };
    if res.conversion.is_some() {
        return objs.iter().any(in_other_version);
    }
    let Some(ref info) = res.custom else {
        return false;
    };
    if !info.has_defaults() {
        return objs.iter().any(in_other_version);
    }
    objs.iter()
        .any(|o| needs(o.value(), &res.kind, &want) || info.would_default(o.value()))
}

/// `obj` (in the request's version) in the storage version.
pub async fn for_storage(res: &Resource, obj: &mut Value) -> Result<()> {
    if let Some(conv) = res.conversion {
        if needs(obj, &res.kind, conv.storage_version) {
            *obj = (conv.convert)(obj, conv.storage_version);
        }
        return Ok(());
    }
    let Some(ref info) = res.custom else {
        return Ok(());
    };
    let want = format!("{}/{}", res.group, info.storage_version);
    if !needs(obj, &res.kind, &want) {
        return Ok(());
    }
    let mut one = [std::mem::take(obj)];
    convert_custom(res, info, &mut one, &want).await?;
    let [v] = one;
    *obj = v;
    Ok(())
}

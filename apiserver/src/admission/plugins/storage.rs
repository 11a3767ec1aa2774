//! kube's storage plugins: DefaultStorageClass, StorageObjectInUseProtection
//! and PersistentVolumeClaimResize.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use super::chain::{list_all, lookup, on, Plugin};
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;

const STORAGE_CLASSES: (&str, &str, &str) = ("storage.k8s.io", "v1", "storageclasses");
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The newest object marked default by one of `annotations` (ties go to
/// the first name), as kube picks a default class.
pub fn newest_default<'v>(
    objects: &'v [std::sync::Arc<Value>],
    annotations: &[&str],
) -> Option<&'v str> {
    objects
        .iter()
        .filter(|o| annotations.iter().any(|k| annotation(o, k) == Some("true")))
        .max_by(|a, b| {
            let at = |o: &Value| {
                o.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let name = |o: &'v Value| {
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            at(a).cmp(&at(b)).then_with(|| name(b).cmp(name(a)))
        })
        .and_then(|o| o.pointer("/metadata/name").and_then(Value::as_str))
}

fn default_storage_class<'a>(
    scope: &'a Scope<'a>,
    _: &'a Attributes<'a>,
    pvc: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let has_class = pvc
            .pointer("/spec/storageClassName")
            .is_some_and(|v| !v.is_null())
            || annotation(pvc, BETA_CLASS_ANNOTATION).is_some();
        if has_class {
            return Ok(());
        }
        let classes = list_all(scope, STORAGE_CLASSES).await?;
        let Some(name) = newest_default(
            &classes,
            &[
                "storageclass.kubernetes.io/is-default-class",
                "storageclass.beta.kubernetes.io/is-default-class",
            ],
        ) else {
            return Ok(());
        };
        if let Some(spec) = pvc.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("storageClassName".into(), Value::String(name.to_string()));
        }
        Ok(())
    }
    .boxed()
}

pub const DEFAULT_STORAGE_CLASS: Plugin = Plugin {
    name: "DefaultStorageClass",
    default_on: true,
    supported: true,
    handles: |a| on(a, "", "persistentvolumeclaims") && a.operation == "CREATE",
    mutate: Some(default_storage_class),
    validate: None,
};

fn protect<'a>(
    _: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    obj: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    let finalizer = if a.res.plural == "persistentvolumes" {
        "kubernetes.io/pv-protection"
    } else {
        "kubernetes.io/pvc-protection"
    };
    let meta = crate::object::meta_mut(obj);
    let list = meta
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = list.as_array_mut() {
        if !list.iter().any(|f| f.as_str() == Some(finalizer)) {
            list.push(Value::String(finalizer.into()));
        }
    }
    async { Ok(()) }.boxed()
}

pub const STORAGE_OBJECT_IN_USE_PROTECTION: Plugin = Plugin {
    name: "StorageObjectInUseProtection",
    default_on: true,
    supported: true,
    handles: |a| {
        (on(a, "", "persistentvolumes") || on(a, "", "persistentvolumeclaims"))
            && a.operation == "CREATE"
    },
    mutate: Some(protect),
    validate: None,
};

fn requested_storage(pvc: Option<&Value>) -> Option<apimachinery::kinds::core::quantity::Nanos> {
    pvc?.pointer("/spec/resources/requests/storage")
        .and_then(apimachinery::kinds::core::quantity::of)
}

fn check_resize<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        let (Some(new), old) = (requested_storage(a.object), requested_storage(a.old)) else {
            return Ok(());
        };
        if old.is_some_and(|old| new <= old) || old.is_none() {
            return Ok(());
        }
        let phase = a
            .old
            .and_then(|o| o.pointer("/status/phase"))
            .and_then(Value::as_str);
        if phase != Some("Bound") {
            return Err(forbidden(a, "Only bound persistent volume claims can be expanded").into());
        }
        let class = a
            .object
            .and_then(|o| {
                annotation(o, BETA_CLASS_ANNOTATION)
                    .or_else(|| o.pointer("/spec/storageClassName").and_then(Value::as_str))
            })
            .unwrap_or("");
        let allowed = !class.is_empty()
            && lookup(scope, STORAGE_CLASSES, None, class)
                .await?
                .is_some_and(|c| c.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true));
        if allowed {
            return Ok(());
        }
        Err(forbidden(
            a,
            "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
        )
        .into())
    }
    .boxed()
}

pub const PERSISTENT_VOLUME_CLAIM_RESIZE: Plugin = Plugin {
    name: "PersistentVolumeClaimResize",
    default_on: true,
    supported: true,
    handles: |a| on(a, "", "persistentvolumeclaims") && a.operation == "UPDATE",
    mutate: None,
    validate: Some(check_resize),
};

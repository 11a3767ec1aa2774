//! What every active namespace holds from the start, as kube's
//! controller-manager provides it:
//!
//! - the `default` ServiceAccount (kube's serviceaccount controller),
//!   created again when deleted;
//! - the `kube-root-ca.crt` ConfigMap (kube's root CA publisher): key
//!   `ca.crt` holds the cluster CA, with kube's description annotation;
//!   created again when deleted, and put back when edited.
//!
//! Both follow the namespaces and their own object in each namespace, and
//! leave namespaces being deleted alone (the namespace controller is
//! emptying those).
//!
//! The root CA publisher runs only when the server has a cluster CA: the
//! one it made under `--data-dir` for its secure port. Without one (plain
//! HTTP only, or a serving certificate given by flags, whose issuer this
//! server does not know) there is nothing true to publish, so it does not
//! run.

use super::{name_key, Controller, Next, Source};
use crate::object;
use crate::registry::Row;
use crate::state::AppState;
use apimachinery::read::Freshness;
use futures_util::FutureExt;
use serde_json::{json, Value};
use std::sync::Arc;
use watchcache::StorageError;

pub const DEFAULT_SA: &str = "default";
pub const ROOT_CA: &str = "kube-root-ca.crt";
pub const ROOT_CA_KEY: &str = "ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// kube's annotation text (clients may show it; keep it as kube has it).
pub const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

fn row(state: &AppState, plural: &str) -> Option<Row> {
    state.registry.lookup("", "v1", plural)
}

fn namespaces_source(state: &AppState) -> Option<Source> {
    row(state, "namespaces").map(|r| Source {
        prefix: state.collection_prefix(&r, None),
        key_of: name_key,
    })
}

/// The namespace of an object named `default`.
fn default_sa_namespace(v: &Value) -> Option<String> {
    (object::name(v) == Some(DEFAULT_SA))
        .then(|| object::meta_str(v, "namespace").map(str::to_string))
        .flatten()
}

/// The namespace of an object named `kube-root-ca.crt`.
fn root_ca_namespace(v: &Value) -> Option<String> {
    (object::name(v) == Some(ROOT_CA))
        .then(|| object::meta_str(v, "namespace").map(str::to_string))
        .flatten()
}

/// The service account controller, and the root CA publisher when the
/// server has a CA.
pub fn controllers(state: &AppState) -> Vec<Controller<AppState>> {
    let mut out = Vec::new();
    let (Some(ns), Some(sa), Some(cm)) = (
        namespaces_source(state),
        row(state, "serviceaccounts"),
        row(state, "configmaps"),
    ) else {
        return out;
    };
    out.push(Controller {
        name: "serviceaccount",
        sources: vec![
            ns,
            Source {
                prefix: state.collection_prefix(&sa, None),
                key_of: default_sa_namespace,
            },
        ],
        feed: None,
        reconcile: Arc::new(|state, key| ensure_service_account(state, key).boxed()),
        workers: 2,
        capacity: 10_000,
        backoff: super::queue::Backoff::default(),
        resync: None,
    });
    if state.root_ca.is_some() {
        if let Some(ns) = namespaces_source(state) {
            out.push(Controller {
                name: "root_ca_cert_publisher",
                sources: vec![
                    ns,
                    Source {
                        prefix: state.collection_prefix(&cm, None),
                        key_of: root_ca_namespace,
                    },
                ],
                feed: None,
                reconcile: Arc::new(|state, key| publish_root_ca(state, key).boxed()),
                workers: 2,
                capacity: 10_000,
                backoff: super::queue::Backoff::default(),
                resync: None,
            });
        }
    }
    out
}

/// Whether namespace `ns` exists and is not being deleted.
async fn active(state: &AppState, ns: &str) -> Result<bool, String> {
    let res = row(state, "namespaces").ok_or("namespaces missing from the registry")?;
    let got = state
        .store
        .get(&state.key(&res, None, ns), Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    Ok(got.is_some_and(|o| !object::is_deleting(o.value())))
}

async fn ensure_service_account(state: Arc<AppState>, ns: String) -> Result<Next, String> {
    if !active(&state, &ns).await? {
        return Ok(Next::Done);
    }
    let res = row(&state, "serviceaccounts").ok_or("serviceaccounts missing")?;
    let key = state.key(&res, Some(&ns), DEFAULT_SA);
    let have = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    if have.is_some() {
        return Ok(Next::Done);
    }
    let mut sa = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT_SA, "namespace": ns},
    });
    object::prepare_create(&res, &mut sa, Some(&ns), &object::now());
    match state.store.create(&key, &sa).await {
        Ok(_) => {
            tracing::debug!(namespace = %ns, "created the default service account");
            Ok(Next::Done)
        }
        Err(StorageError::AlreadyExists { .. }) => Ok(Next::Done),
        Err(e) => Err(e.to_string()),
    }
}

/// The ConfigMap as it should be: `current` with kube's data and
/// annotation (its other fields kept), or a new one.
pub fn desired_root_ca(current: Option<&Value>, ns: &str, pem: &str) -> Value {
    let mut cm = current.cloned().unwrap_or_else(|| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA, "namespace": ns},
        })
    });
    if let Some(o) = cm.as_object_mut() {
        o.insert("data".into(), json!({ ROOT_CA_KEY: pem }));
    }
    let m = object::meta_mut(&mut cm);
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    if let Some(a) = ann.as_object_mut() {
        a.insert(
            DESCRIPTION_ANNOTATION.into(),
            Value::String(ROOT_CA_DESCRIPTION.into()),
        );
    }
    cm
}

async fn publish_root_ca(state: Arc<AppState>, ns: String) -> Result<Next, String> {
    let Some(pem) = state.root_ca.as_deref() else {
        return Ok(Next::Done);
    };
    if !active(&state, &ns).await? {
        return Ok(Next::Done);
    }
    let res = row(&state, "configmaps").ok_or("configmaps missing")?;
    let key = state.key(&res, Some(&ns), ROOT_CA);
    let have = state
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?;
    let r = match have {
        None => {
            let mut cm = desired_root_ca(None, &ns, pem);
            object::prepare_create(&res, &mut cm, Some(&ns), &object::now());
            state.store.create(&key, &cm).await.map(drop)
        }
        Some(cur) => {
            let mut want = desired_root_ca(Some(cur.value()), &ns, pem);
            if want == *cur.value() {
                return Ok(Next::Done);
            }
            object::meta_mut(&mut want).remove("resourceVersion");
            state
                .store
                .update(&key, &want, cur.revision)
                .await
                .map(drop)
        }
    };
    match r {
        Ok(()) => Ok(Next::Done),
        Err(e @ (StorageError::AlreadyExists { .. } | StorageError::Conflict { .. })) => {
            // Someone wrote meanwhile: look again.
            Err(e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

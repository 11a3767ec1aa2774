//! How custom resources move between versions: the CRD-specific half.
//! [`crate::conversion`] dispatches (it serves built-in kinds too, and
//! picks the objects that need converting); this converts them as the
//! CRD's strategy says. Strategy `None` changes only `apiVersion`;
//! strategy `Webhook` sends a `ConversionReview` (apiextensions.k8s.io/v1)
//! to the CRD's webhook over HTTPS and checks its answer as kube does.
//!
//! Model floor: imports the registry, `error` and the webhook client,
//! never `crate::conversion` (which calls this).

use crate::error::{ApiError, Result};
use crate::registry::custom::CustomInfo;
use crate::registry::Resource;
use crate::webhook::Webhook;
use apimachinery::Status;
use serde_json::{json, Value};
use std::time::Duration;

/// kube's default conversion webhook timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The webhook of a CRD whose conversion strategy is `Webhook` (`Err`: its
/// configuration is unusable, e.g. a service reference, which this server
/// cannot resolve without cluster networking).
pub fn webhook_of(spec: &Value) -> Option<std::result::Result<Webhook, String>> {
    let conv = spec.get("conversion")?;
    if conv.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    let cc = conv.pointer("/webhook/clientConfig")?;
    let ca = cc.get("caBundle").and_then(Value::as_str).and_then(|b| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(b).ok()
    });
    let url = match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
        (Some(u), _) => u.to_string(),
        (None, Some(svc)) => {
            let s = |k: &str| svc.get(k).and_then(Value::as_str).unwrap_or("");
            let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
            format!(
                "https://{}.{}.svc:{port}{}",
                s("name"),
                s("namespace"),
                s("path")
            )
        }
        (None, None) => return Some(Err("no clientConfig url or service".into())),
    };
    Some(Webhook::new(&url, ca.as_deref(), DEFAULT_TIMEOUT).map_err(|e| e.to_string()))
}

fn set_api_version(obj: &mut Value, api_version: &str) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.to_string()));
    }
}

/// The objects of `objs` at the indices `todo` (not empty: those of the
/// resource's kind in another version) in `api_version`.
pub(crate) async fn convert(
    res: &Resource,
    info: &CustomInfo,
    objs: &mut [Value],
    todo: Vec<usize>,
    api_version: &str,
) -> Result<()> {
    let failed = |msg: String| -> ApiError {
        Status::internal(format!(
            "conversion webhook for {}, Kind={} failed: {msg}",
            res.api_version(),
            res.kind
        ))
        .into()
    };
    let webhook = match &info.conversion {
        None => {
            for i in todo {
                set_api_version(&mut objs[i], api_version);
            }
            return Ok(());
        }
        Some(Err(e)) => return Err(failed(e.clone())),
        Some(Ok(w)) => w,
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": "apiextensions.k8s.io/v1",
        "request": {
            "uid": uid,
            "desiredAPIVersion": api_version,
            "objects": todo.iter().map(|i| objs[*i].clone()).collect::<Vec<_>>(),
        }
    });
    let answer = webhook
        .post_json(&review)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let response = answer
        .get("response")
        .ok_or_else(|| failed("conversion webhook response was absent".into()))?;
    if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return Err(failed(format!(
            "expected response.uid={uid:?}, got {:?}",
            response.get("uid").and_then(Value::as_str).unwrap_or("")
        )));
    }
    if response.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
        let msg = response
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or("conversion failed");
        return Err(failed(msg.to_string()));
    }
    let converted = response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .ok_or_else(|| failed("no convertedObjects in the response".into()))?;
    if converted.len() != todo.len() {
        return Err(failed(format!(
            "returned {} objects, expected {}",
            converted.len(),
            todo.len()
        )));
    }
    for (i, out) in todo.into_iter().zip(converted) {
        check_converted(&objs[i], out, api_version).map_err(failed)?;
        // kube keeps the original metadata but for labels and annotations.
        let mut next = out.clone();
        let mut meta = objs[i]
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({}));
        for k in ["labels", "annotations"] {
            match out.pointer(&format!("/metadata/{k}")) {
                Some(v) => {
                    meta[k] = v.clone();
                }
                None => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        next["metadata"] = meta;
        objs[i] = next;
    }
    Ok(())
}

/// kube's checks of a converted object: the desired apiVersion, the same
/// kind, and the same identity.
fn check_converted(
    input: &Value,
    out: &Value,
    api_version: &str,
) -> std::result::Result<(), String> {
    let got = out.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if got != api_version {
        return Err(format!(
            "invalid apiVersion {got:?}, expected {api_version:?}"
        ));
    }
    if out.get("kind") != input.get("kind") {
        return Err("invalid kind: the kind must not change".into());
    }
    for k in ["name", "namespace", "uid"] {
        if out.pointer(&format!("/metadata/{k}")) != input.pointer(&format!("/metadata/{k}")) {
            return Err(format!("invalid metadata: metadata.{k} must not change"));
        }
    }
    Ok(())
}

//! Events the controllers record about the objects they act on, in the two
//! shapes kube's controllers write: the `events.k8s.io/v1` recorder's
//! (`regarding`, `reason`, `action`, `note`, `reportingController`; the
//! allocation repair loops) and client-go's core recorder's (`source`,
//! first and last timestamps, `count`; the garbage collector). Both are
//! stored as core Events the way kube stores every Event, on the event
//! TTL's lease. Recording is best effort: a failure is logged, never the
//! controller's failure.

use crate::object;
use crate::state::AppState;
use serde_json::{json, Value};

pub const WARNING: &str = "Warning";

/// What an event is about and says.
pub struct Event<'a> {
    /// The object it regards (its apiVersion, kind, metadata are read).
    pub regarding: &'a Value,
    pub kind: &'static str,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
    /// The reporting controller (kube's names, e.g.
    /// `ipallocator-repair-controller`).
    pub controller: &'static str,
}

/// The stored core Event for `ev`; cluster-scoped objects' events go to
/// `default`, as kube's recorder puts them.
pub fn event_object(ev: &Event<'_>, micro_now: &str, suffix: &str) -> Value {
    let name = object::name(ev.regarding).unwrap_or("");
    let namespace = object::meta_str(ev.regarding, "namespace")
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let mut involved = json!({
        "kind": ev.regarding.get("kind").cloned().unwrap_or(Value::Null),
        "name": name,
        "apiVersion": ev.regarding.get("apiVersion").cloned().unwrap_or(Value::Null),
    });
    for f in ["namespace", "uid", "resourceVersion"] {
        if let Some(v) = object::meta_str(ev.regarding, f) {
            involved[f] = Value::from(v);
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{suffix}"), "namespace": namespace},
        "involvedObject": involved,
        "reason": ev.reason,
        "message": ev.note,
        "source": {},
        "firstTimestamp": null,
        "lastTimestamp": null,
        "type": ev.kind,
        "eventTime": micro_now,
        "action": ev.action,
        "reportingComponent": ev.controller,
        "reportingInstance": ev.controller,
    })
}

/// Records `ev` (best effort).
pub async fn record(state: &AppState, ev: Event<'_>) {
    let now = chrono::Utc::now();
    let suffix = format!("{:x}", now.timestamp_nanos_opt().unwrap_or_default());
    let micro = now.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    write(state, event_object(&ev, &micro, &suffix), ev.reason).await;
}

/// An event in client-go's core recorder's shape (kube-controller-manager's
/// garbage collector records these): `source.component`, first and last
/// timestamps, a count.
pub struct Legacy<'a> {
    pub regarding: &'a Value,
    pub kind: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub component: &'static str,
}

/// The stored core Event for `ev`.
pub fn legacy_object(ev: &Legacy<'_>, now: &str, suffix: &str) -> Value {
    let mut obj = event_object(
        &Event {
            regarding: ev.regarding,
            kind: ev.kind,
            reason: ev.reason,
            action: "",
            note: ev.message.clone(),
            controller: ev.component,
        },
        now,
        suffix,
    );
    if let Some(o) = obj.as_object_mut() {
        o.remove("action");
        o.insert("source".into(), json!({"component": ev.component}));
        o.insert("firstTimestamp".into(), Value::from(now));
        o.insert("lastTimestamp".into(), Value::from(now));
        o.insert("count".into(), Value::from(1));
        o.insert("eventTime".into(), Value::Null);
        o.insert("reportingInstance".into(), Value::from(""));
    }
    obj
}

/// Records `ev` (best effort).
pub async fn record_legacy(state: &AppState, ev: Legacy<'_>) {
    let now = chrono::Utc::now();
    let suffix = format!("{:x}", now.timestamp_nanos_opt().unwrap_or_default());
    let obj = legacy_object(&ev, &object::now(), &suffix);
    write(state, obj, ev.reason).await;
}

/// Stores an Event object built above.
async fn write(state: &AppState, mut obj: Value, reason: &str) {
    let Some(res) = state.registry.lookup("", "v1", "events") else {
        return;
    };
    let ns = object::meta_str(&obj, "namespace")
        .unwrap_or("default")
        .to_string();
    let name = object::name(&obj).unwrap_or("").to_string();
    object::prepare_create(&res, &mut obj, Some(&ns), &object::now());
    let key = state.key(&res, Some(&ns), &name);
    let written = match state.event_ttl.lease(&*state.store, &key).await {
        Ok(lease) => state.store.create_with_lease(&key, &obj, lease).await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        tracing::debug!(reason, error = %e, "could not record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_regard_their_object() {
        let ip = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": "10.96.0.9", "uid": "u1", "resourceVersion": "7"}});
        let ev = Event {
            regarding: &ip,
            kind: WARNING,
            reason: "IPAddressNotAllocated",
            action: "IPAddressAllocation",
            note: "leaked".into(),
            controller: "ipallocator-repair-controller",
        };
        let o = event_object(&ev, "2026-01-01T00:00:00.000000Z", "abc");
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["name"], "10.96.0.9.abc");
        assert_eq!(o["involvedObject"]["kind"], "IPAddress");
        assert_eq!(o["involvedObject"]["uid"], "u1");
        assert!(o["involvedObject"].get("namespace").is_none());
        assert_eq!(o["reportingComponent"], "ipallocator-repair-controller");
        assert_eq!(o["type"], "Warning");
    }

    #[test]
    fn the_core_recorders_shape() {
        let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "uid": "u2"}});
        let ev = Legacy {
            regarding: &cr,
            kind: WARNING,
            reason: "OwnerRefInvalidNamespace",
            message: "m".into(),
            component: "garbage-collector-controller",
        };
        let o = legacy_object(&ev, "2026-01-01T00:00:00Z", "ff");
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["source"]["component"], "garbage-collector-controller");
        assert_eq!(o["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(o["count"], 1);
        assert!(o.get("action").is_none());
        assert!(o["eventTime"].is_null());
    }
}

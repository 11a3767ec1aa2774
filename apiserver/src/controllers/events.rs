//! Events the server's controllers record about objects (client-go's event
//! recorder, as kube-controller-manager's loops use it): a core `v1` Event
//! in the object's namespace (`default` for cluster-scoped objects), named
//! after the object and the time, written with the events' TTL lease.

use crate::object;
use crate::server::AppState;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// The object an event is about.
pub struct Involved<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub uid: &'a str,
}

/// What happened.
pub struct Happened<'a> {
    /// `Normal` or `Warning`.
    pub kind: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    /// The reporting controller (the event's `source.component`).
    pub component: &'a str,
}

/// The Event object for `what` about `about`.
pub fn event(about: &Involved<'_>, what: &Happened<'_>, now: &str, nanos: u128) -> Value {
    let ns = about.namespace.unwrap_or("default");
    let mut involved = json!({
        "kind": about.kind,
        "name": about.name,
        "uid": about.uid,
        "apiVersion": about.api_version,
    });
    if let Some(n) = about.namespace {
        involved["namespace"] = Value::String(n.to_string());
    }
    json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": format!("{}.{:x}", about.name, nanos), "namespace": ns},
        "involvedObject": involved,
        "reason": what.reason,
        "message": what.message,
        "source": {"component": what.component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": what.kind,
        "eventTime": null,
        "reportingComponent": what.component,
        "reportingInstance": "",
    })
}

/// Records `what` about `about`; failures are logged, never returned (an
/// event is a hint, not part of the work).
pub async fn record(state: &AppState, about: &Involved<'_>, what: &Happened<'_>) {
    let Some(res) = state.registry.lookup("", "v1", "events") else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let now = object::now();
    let mut ev = event(about, what, &now, nanos);
    let ns = about.namespace.unwrap_or("default").to_string();
    let name = object::meta_str(&ev, "name")
        .unwrap_or_default()
        .to_string();
    object::prepare_create(res, &mut ev, Some(&ns), &now);
    let key = state.key(res, Some(&ns), &name);
    let written = match state.event_ttl.lease(&*state.store).await {
        Ok(lease) => state.store.create_with_lease(&key, &ev, lease).await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        tracing::warn!(reason = what.reason, error = %e, "cannot record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_scoped_objects_have_their_events_in_default() {
        let about = Involved {
            api_version: "v1",
            kind: "Namespace",
            namespace: None,
            name: "n",
            uid: "u",
        };
        let what = Happened {
            kind: "Warning",
            reason: "R",
            message: "m",
            component: "c",
        };
        let ev = event(&about, &what, "2026-01-01T00:00:00Z", 255);
        assert_eq!(ev["metadata"]["namespace"], "default");
        assert_eq!(ev["metadata"]["name"], "n.ff");
        assert!(ev["involvedObject"].get("namespace").is_none());
        assert_eq!(ev["source"]["component"], "c");
    }
}

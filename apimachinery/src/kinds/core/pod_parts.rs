//! The parts of a Pod written through their own subresources:
//! `/ephemeralcontainers` (`kubectl debug`) and `/resize` (in-place
//! resource changes). Each takes only its part of the request; the rest of
//! the Pod stays as stored.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::container::validate_container;
use super::pod::qos_class;
use crate::kinds::Part;
use crate::status::StatusCause;
use crate::validation::{forbidden, go_quote, not_found};

/// `/ephemeralcontainers`: containers may be added, never changed or
/// removed.
pub static EPHEMERAL_CONTAINERS: Part = Part {
    name: "ephemeralcontainers",
    verbs: &["get", "patch", "update"],
    take: take_ephemeral,
    validate: Some(validate_ephemeral),
};

/// `/resize`: the containers' `resources` and `resizePolicy` change, the
/// QoS class does not.
pub static RESIZE: Part = Part {
    name: "resize",
    verbs: &["get", "patch", "update"],
    take: take_resources,
    validate: Some(validate_resize),
};

fn spec_mut(pod: &mut Value) -> Option<&mut Map<String, Value>> {
    pod.get_mut("spec").and_then(Value::as_object_mut)
}

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

fn take_ephemeral(stored: &mut Value, request: &Value) {
    let eph = request.pointer("/spec/ephemeralContainers").cloned();
    if let Some(spec) = spec_mut(stored) {
        match eph {
            Some(e) if !e.is_null() => spec.insert("ephemeralContainers".into(), e),
            _ => spec.remove("ephemeralContainers"),
        };
    }
}

/// Fields kube refuses on an ephemeral container.
const NOT_FOR_EPHEMERAL: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resources",
    "resizePolicy",
];

/// kube's `ValidatePodEphemeralContainersUpdate` and
/// `validateEphemeralContainers`.
fn validate_ephemeral(pod: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let new_list = list(pod, "/spec/ephemeralContainers");
    if let Some(old) = old {
        for o in list(old, "/spec/ephemeralContainers") {
            match new_list.iter().find(|n| name(n) == name(o)) {
                None => out.push(forbidden(
                    "spec.ephemeralContainers",
                    &format!(
                        "existing ephemeral containers {} may not be removed\n",
                        go_quote(name(o))
                    ),
                )),
                Some(n) if n != o => out.push(forbidden(
                    "spec.ephemeralContainers",
                    &format!(
                        "existing ephemeral containers {} may not be changed\n",
                        go_quote(name(o))
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    let volumes: HashSet<&str> = list(pod, "/spec/volumes").iter().map(name).collect();
    let mut names: HashSet<&str> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .flat_map(|p| list(pod, p))
        .map(name)
        .collect();
    let targets: Vec<&str> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .flat_map(|p| list(pod, p))
        .map(name)
        .collect();
    for (i, c) in new_list.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        validate_container(c, &path, &volumes, &mut names, &mut out);
        for f in NOT_FOR_EPHEMERAL {
            // kube compares with the zero value: empty is not set.
            let set = match c.get(*f) {
                None | Some(Value::Null) => false,
                Some(Value::Object(m)) => !m.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if set {
                out.push(forbidden(
                    &format!("{path}.{f}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        if let Some(t) = c.get("targetContainerName").and_then(Value::as_str) {
            if !t.is_empty() && !targets.contains(&t) {
                out.push(not_found(&format!("{path}.targetContainerName"), t));
            }
        }
    }
    out
}

fn take_resources(stored: &mut Value, request: &Value) {
    let wanted = list(request, "/spec/containers");
    let Some(containers) = spec_mut(stored)
        .and_then(|s| s.get_mut("containers"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in containers.iter_mut().filter_map(Value::as_object_mut) {
        let n = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(w) = wanted.iter().find(|w| name(w) == n) else {
            continue;
        };
        for f in ["resources", "resizePolicy"] {
            match w.get(f) {
                Some(v) if !v.is_null() => {
                    c.insert(f.into(), v.clone());
                }
                _ => {
                    c.remove(f);
                }
            }
        }
    }
}

/// kube's `ValidatePodResize`: the new resources must be valid, and the
/// QoS class may not change.
fn validate_resize(pod: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let volumes: HashSet<&str> = list(pod, "/spec/volumes").iter().map(name).collect();
    let mut names = HashSet::new();
    for (i, c) in list(pod, "/spec/containers").iter().enumerate() {
        validate_container(
            c,
            &format!("spec.containers[{i}]"),
            &volumes,
            &mut names,
            &mut out,
        );
    }
    if let Some(old) = old {
        let spec = |p: &Value| p.get("spec").cloned().unwrap_or(Value::Null);
        if qos_class(&spec(pod)) != qos_class(&spec(old)) {
            out.push(forbidden(
                "spec",
                "Pod QOS Class may not change as a result of resizing",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Containers as they are after kube's defaults (which run first).
    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "app", "image": "nginx", "imagePullPolicy": "Always",
             "terminationMessagePolicy": "File",
             "resources": {"requests": {"cpu": "100m"}}}]}})
    }

    fn debugger(name: &str, image: &str) -> Value {
        json!({"name": name, "image": image, "imagePullPolicy": "Always",
               "terminationMessagePolicy": "File"})
    }

    fn messages(c: &[StatusCause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn ephemeral_containers_are_added_never_changed() {
        let old = pod();
        let mut added = pod();
        let mut d = debugger("debugger", "busybox");
        d["targetContainerName"] = json!("app");
        take_ephemeral(&mut added, &json!({"spec": {"ephemeralContainers": [d]}}));
        assert_eq!(added["spec"]["containers"], old["spec"]["containers"]);
        assert!(validate_ephemeral(&added, Some(&old)).is_empty());
        let mut changed = added.clone();
        changed["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
        assert_eq!(
            messages(&validate_ephemeral(&changed, Some(&added))),
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"]
        );
        assert_eq!(
            messages(&validate_ephemeral(&old, Some(&added))),
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"]
        );
        let mut bad = pod();
        let mut d = debugger("app", "busybox");
        d["ports"] = json!([{"containerPort": 80, "protocol": "TCP"}]);
        d["targetContainerName"] = json!("nope");
        bad["spec"]["ephemeralContainers"] = json!([d]);
        assert_eq!(
            messages(&validate_ephemeral(&bad, Some(&old))),
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
            ]
        );
    }

    #[test]
    fn resize_takes_resources_and_keeps_the_qos_class() {
        let old = pod();
        let mut resized = pod();
        take_resources(
            &mut resized,
            &json!({"spec": {"containers": [{"name": "app", "image": "ignored",
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "resources": {"requests": {"cpu": "200m"}}}]}}),
        );
        assert_eq!(resized["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(
            resized["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "200m"
        );
        assert!(validate_resize(&resized, Some(&old)).is_empty());
        let mut guaranteed = pod();
        guaranteed["spec"]["containers"][0]["resources"] = json!({
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(
            messages(&validate_resize(&guaranteed, Some(&old))),
            ["spec: Forbidden: Pod QOS Class may not change as a result of resizing"]
        );
    }
}

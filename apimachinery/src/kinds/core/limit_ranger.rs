//! kube's LimitRanger admission rules, without I/O: the defaults a
//! LimitRange's `Container` item gives containers that name no request or
//! limit (with kube's `kubernetes.io/limit-ranger` annotation), and the
//! `min`, `max` and `maxLimitRequestRatio` checks of its `Container`,
//! `Pod` and `PersistentVolumeClaim` items, with kube's messages.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::quantity::Quantity;
use super::quota_usage::{list_of, pod_resources, ResourceList};

/// The annotation naming what the plugin defaulted.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// kube's `resource.MaxMilliValue`: past it, comparisons are in whole
/// units.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

fn items(limit_range: &Value) -> impl Iterator<Item = &Value> {
    limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn item_type(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or("")
}

/// kube's `PodMutateLimitFunc`: fills each container's missing requests
/// and limits from the range's `Container` item (`defaultRequest`,
/// `default`) and annotates the pod with what it set.
pub fn default_pod(limit_range: &Value, pod: &mut Value) {
    let mut requests = ResourceList::new();
    let mut limits = ResourceList::new();
    for item in items(limit_range).filter(|i| item_type(i) == "Container") {
        requests.extend(list_of(item.get("defaultRequest")));
        limits.extend(list_of(item.get("default")));
    }
    let mut notes: Vec<String> = Vec::new();
    for (key, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(list) = pod
            .pointer_mut(&format!("/spec/{key}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in list.iter_mut().filter(|c| c.is_object()) {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let missing = |field: &str, defaults: &ResourceList| -> Vec<(String, Quantity)> {
                let have = c.pointer(&format!("/resources/{field}"));
                defaults
                    .iter()
                    .filter(|(k, _)| have.and_then(|h| h.get(k.as_str())).is_none())
                    .map(|(k, q)| (k.clone(), *q))
                    .collect()
            };
            let (set_limits, set_requests) =
                (missing("limits", &limits), missing("requests", &requests));
            for (field, added) in [("limits", &set_limits), ("requests", &set_requests)] {
                if added.is_empty() {
                    continue;
                }
                let Some(o) = c.as_object_mut() else { continue };
                let res = o.entry("resources").or_insert_with(|| json!({}));
                if !res.is_object() {
                    *res = json!({});
                }
                let slot = res
                    .as_object_mut()
                    .map(|r| r.entry(field).or_insert_with(|| json!({})));
                if let Some(slot) = slot {
                    if !slot.is_object() {
                        *slot = json!({});
                    }
                    if let Some(m) = slot.as_object_mut() {
                        for (k, q) in added {
                            m.insert(k.clone(), Value::String(q.to_string()));
                        }
                    }
                }
            }
            let names = |l: &[(String, Quantity)]| {
                l.iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {what} {name}",
                    names(&set_requests)
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", names(&set_limits)));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    if let Some(a) = ann.as_object_mut() {
        a.insert(
            ANNOTATION.into(),
            Value::String(format!("LimitRanger plugin set: {}", notes.join("; "))),
        );
    }
}

/// kube's `requestLimitEnforcedValues`: thousandths when all three fit,
/// else whole units (a missing quantity is 0).
fn comparable(
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
    enforced: &Quantity,
) -> (i128, i128, i128) {
    let zero = Quantity::ZERO;
    let (r, l) = (req.unwrap_or(&zero), lim.unwrap_or(&zero));
    if [r, l, enforced]
        .iter()
        .all(|q| q.value() <= MAX_MILLI_VALUE)
    {
        (r.milli_value(), l.milli_value(), enforced.milli_value())
    } else {
        (r.value(), l.value(), enforced.value())
    }
}

fn min_check(
    ty: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = comparable(req, lim, enforced);
    match (req, lim) {
        (None, _) => Some(format!(
            "minimum {name} usage per {ty} is {enforced}.  No request is specified"
        )),
        (Some(req), _) if r < e => Some(format!(
            "minimum {name} usage per {ty} is {enforced}, but request is {req}"
        )),
        (_, Some(lim)) if l < e => Some(format!(
            "minimum {name} usage per {ty} is {enforced}, but limit is {lim}"
        )),
        _ => None,
    }
}

fn max_check(
    ty: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, e) = comparable(req, lim, enforced);
    match (req, lim) {
        (_, None) => Some(format!(
            "maximum {name} usage per {ty} is {enforced}.  No limit is specified"
        )),
        (_, Some(lim)) if l > e => Some(format!(
            "maximum {name} usage per {ty} is {enforced}, but limit is {lim}"
        )),
        (Some(req), _) if r > e => Some(format!(
            "maximum {name} usage per {ty} is {enforced}, but request is {req}"
        )),
        _ => None,
    }
}

/// kube's `maxRequestConstraint` (claims have no limits).
fn max_request_check(
    ty: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
) -> Option<String> {
    let req = requests.get(name);
    let (r, _, e) = comparable(req, None, enforced);
    match req {
        None => Some(format!(
            "maximum {name} usage per {ty} is {enforced}.  No request is specified"
        )),
        Some(req) if r > e => Some(format!(
            "maximum {name} usage per {ty} is {enforced}, but request is {req}"
        )),
        _ => None,
    }
}

fn ratio_check(
    ty: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let (r, l, _) = comparable(req, lim, enforced);
    if req.is_none() || r == 0 {
        return Some(format!("{name} max limit to request ratio per {ty} is {enforced}, but no request is specified or request is 0"));
    }
    if lim.is_none() || l == 0 {
        return Some(format!("{name} max limit to request ratio per {ty} is {enforced}, but no limit is specified or limit is 0"));
    }
    let shown = l as f64 / r as f64;
    let (observed, allowed) = if enforced.value() <= MAX_MILLI_VALUE {
        (shown * 1000.0, enforced.milli_value() as f64)
    } else {
        (shown, enforced.value() as f64)
    };
    (observed > allowed).then(|| {
        format!("{name} max limit to request ratio per {ty} is {enforced}, but provided ratio is {shown:.6}")
    })
}

/// The min, max and ratio checks of one item against requests and limits.
fn check_item(
    item: &Value,
    ty: &str,
    requests: &ResourceList,
    limits: &ResourceList,
    errs: &mut Vec<String>,
) {
    for (name, q) in list_of(item.get("min")) {
        errs.extend(min_check(ty, &name, &q, requests, limits));
    }
    for (name, q) in list_of(item.get("max")) {
        errs.extend(max_check(ty, &name, &q, requests, limits));
    }
    for (name, q) in list_of(item.get("maxLimitRequestRatio")) {
        errs.extend(ratio_check(ty, &name, &q, requests, limits));
    }
}

/// kube's `utilerrors.NewAggregate(...).Error()`: one message as is,
/// several (each once) in brackets.
fn aggregate(errs: Vec<String>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = errs
        .into_iter()
        .filter(|e| seen.insert(e.clone()))
        .collect();
    match unique.len() {
        0 => Ok(()),
        1 => Err(unique.into_iter().next().unwrap_or_default()),
        _ => Err(format!("[{}]", unique.join(", "))),
    }
}

/// kube's `PodValidateLimitFunc`: every container against the `Container`
/// item, the pod's totals (overhead left out) against the `Pod` item.
pub fn validate_pod(limit_range: &Value, pod: &Value) -> Result<(), String> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut errs = Vec::new();
    for item in items(limit_range) {
        match item_type(item) {
            "Container" => {
                for key in ["containers", "initContainers"] {
                    for c in spec
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let requests = list_of(c.pointer("/resources/requests"));
                        let limits = list_of(c.pointer("/resources/limits"));
                        check_item(item, "Container", &requests, &limits, &mut errs);
                    }
                }
            }
            "Pod" => {
                let requests = pod_level(spec, "requests");
                let limits = pod_level(spec, "limits");
                check_item(item, "Pod", &requests, &limits, &mut errs);
            }
            _ => {}
        }
    }
    aggregate(errs)
}

/// The pod's totals as the LimitRanger computes them: no overhead, and
/// pod-level resources only for cpu and memory.
fn pod_level(spec: &Value, which: &str) -> ResourceList {
    let mut total = pod_resources(&strip_pod_level(spec), which, false);
    for (k, q) in list_of(spec.pointer(&format!("/resources/{which}"))) {
        if k == "cpu" || k == "memory" {
            total.insert(k, q);
        }
    }
    total
}

fn strip_pod_level(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove("resources");
    }
    s
}

/// kube's `PersistentVolumeClaimValidateLimitFunc`: the claim's requests
/// against the `PersistentVolumeClaim` item's min and max.
pub fn validate_claim(limit_range: &Value, pvc: &Value) -> Result<(), String> {
    let requests = list_of(pvc.pointer("/spec/resources/requests"));
    let mut errs = Vec::new();
    for item in items(limit_range).filter(|i| item_type(i) == "PersistentVolumeClaim") {
        for (name, q) in list_of(item.get("min")) {
            errs.extend(min_check(
                "PersistentVolumeClaim",
                &name,
                &q,
                &requests,
                &ResourceList::new(),
            ));
        }
        for (name, q) in list_of(item.get("max")) {
            errs.extend(max_request_check(
                "PersistentVolumeClaim",
                &name,
                &q,
                &requests,
            ));
        }
    }
    aggregate(errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(limits: Value) -> Value {
        json!({"spec": {"limits": limits}})
    }

    #[test]
    fn defaults_and_annotation() {
        let lr = range(
            json!([{"type": "Container", "default": {"cpu": "0.5", "memory": "512Mi"},
                                "defaultRequest": {"cpu": "100m"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}],
            "initContainers": [{"name": "i"}]}});
        default_pod(&lr, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m"}})
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"]["limits"]["memory"],
            "512Mi"
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container c; cpu limit for container c; \
             cpu request for init container i; cpu, memory limit for init container i"
        );
    }

    #[test]
    fn max_min_and_ratio_messages() {
        let lr = range(json!([{"type": "Container", "max": {"cpu": "1"}}]));
        let pod = |res: Value| json!({"spec": {"containers": [{"name": "c", "resources": res}]}});
        assert_eq!(
            validate_pod(&lr, &pod(json!({"limits": {"cpu": "2"}}))).unwrap_err(),
            "maximum cpu usage per Container is 1, but limit is 2"
        );
        assert_eq!(
            validate_pod(&lr, &pod(json!({}))).unwrap_err(),
            "maximum cpu usage per Container is 1.  No limit is specified"
        );
        assert!(validate_pod(&lr, &pod(json!({"limits": {"cpu": "1000m"}}))).is_ok());
        let lr = range(
            json!([{"type": "Container", "min": {"memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}}]),
        );
        assert_eq!(
            validate_pod(&lr, &pod(json!({"requests": {"memory": "512Mi", "cpu": "100m"}, "limits": {"cpu": "300m"}}))).unwrap_err(),
            "[minimum memory usage per Container is 1Gi, but request is 512Mi, \
             cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000]"
        );
        let lr = range(json!([{"type": "Pod", "max": {"cpu": "1"}}]));
        let two = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "600m"}}},
            {"name": "b", "resources": {"limits": {"cpu": "600m"}}}]}});
        assert_eq!(
            validate_pod(&lr, &two).unwrap_err(),
            "maximum cpu usage per Pod is 1, but limit is 1200m"
        );
    }

    #[test]
    fn claims() {
        let lr = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
        );
        let pvc = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert!(validate_claim(&lr, &pvc("1Gi")).is_ok());
        assert_eq!(
            validate_claim(&lr, &pvc("3Gi")).unwrap_err(),
            "maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 3Gi"
        );
        assert_eq!(
            validate_claim(&lr, &pvc("500Mi")).unwrap_err(),
            "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
        );
    }
}

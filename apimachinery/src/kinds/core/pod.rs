//! Pods and PodTemplates: kube's defaults (`SetDefaults_Pod`,
//! `SetDefaults_PodSpec` and below, in `podspec_defaults`), the pod
//! strategy (status on create with the QoS class) and what kube's default
//! admission plugins add on create (ServiceAccount's `default` account,
//! Priority's priority and preemption policy, DefaultTolerationSeconds'
//! not-ready/unreachable tolerations), validation (`ValidatePodSpec` in
//! `podspec_validation`, `ValidatePodUpdate` here) and the printers
//! (`podprint`).
//!
//! Not implemented: priorities of PriorityClass objects other than the two
//! built-in system classes (and a global default class), the ServiceAccount
//! admission's token volume
//! (`kube-api-access-*`) and `automountServiceAccountToken` handling,
//! most of `ValidatePodStatusUpdate` (conditions, host IPs, dual-stack
//! pairs, resize and resource claim statuses), the mutable
//! scheduling directives of gated pods, ephemeral containers and resize
//! subresources, pod-level resources in the QoS class; the update message
//! ends with a plain list of the changed fields where kube prints a
//! `cmp.Diff` of the Go structs.

use serde_json::{json, Map, Value};

use super::podprint;
use super::podspec_defaults::{default_pod_spec, mirror_service_account};
use super::podspec_validation::{validate_pod_spec, validate_pod_template};
use super::quantity;
use crate::kinds::common::{existing_mut, object_mut};
use crate::kinds::print::{label_map, Column, PrintContext, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{forbidden, invalid_json, required};

pub static POD: KindRules = KindRules {
    defaults: Some(pod_defaults),
    prepare_create: Some(pod_prepare_create),
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(pod_validate),
    validate_status: Some(pod_validate_status),
    columns: podprint::COLUMNS,
};

pub static POD_TEMPLATE: KindRules = KindRules {
    defaults: Some(pod_template_defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(pod_template_validate),
    validate_status: None,
    columns: &[
        NAME,
        Column {
            name: "Containers",
            type_: "string",
            format: "",
            description: super::workload::CONTAINERS_DESCRIPTION,
            priority: 0,
            cell: |o, _| super::workload::container_names(o, "/template/spec"),
        },
        Column {
            name: "Images",
            type_: "string",
            format: "",
            description: super::workload::IMAGES_DESCRIPTION,
            priority: 0,
            cell: |o, _| super::workload::container_images(o, "/template/spec"),
        },
        Column {
            name: "Pod Labels",
            type_: "string",
            format: "",
            description: "The labels for the pod template.",
            priority: 0,
            cell: pod_labels_cell,
        },
    ],
};

fn pod_labels_cell(obj: &Value, _: &PrintContext) -> Value {
    Value::String(label_map(obj.pointer("/template/metadata/labels")))
}

fn pod_defaults(obj: &mut Value) {
    if let Some(spec) = obj.as_object_mut().and_then(|o| existing_mut(o, "spec")) {
        default_pod_spec(spec, true);
    }
}

fn pod_template_defaults(obj: &mut Value) {
    if let Some(tpl) = obj
        .as_object_mut()
        .and_then(|o| existing_mut(o, "template"))
    {
        if let Some(spec) = existing_mut(tpl, "spec") {
            default_pod_spec(spec, false);
        }
    }
}

/// The pod strategy's `PrepareForCreate`: a new pod is `Pending` with its
/// QoS class, and `SchedulingGated` while it has scheduling gates. (The
/// service account, priority and default tolerations are admission's.)
fn pod_prepare_create(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let qos = o.get("spec").map_or("BestEffort", qos_class);
    let gated = o
        .get("spec")
        .and_then(|s| s.get("schedulingGates"))
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    let mut status = Map::new();
    status.insert("phase".into(), Value::String("Pending".into()));
    if gated {
        status.insert(
            "conditions".into(),
            json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": null, "lastTransitionTime": null}]),
        );
    }
    status.insert("qosClass".into(), Value::String(qos.into()));
    o.insert("status".into(), Value::Object(status));
    if let Some(spec) = object_mut(o, "spec") {
        mirror_service_account(spec);
    }
}

/// The DefaultTolerationSeconds admission plugin's rule: pods tolerate
/// `not-ready` and `unreachable` nodes for 300s unless they say otherwise.
pub fn default_tolerations(spec: &mut Map<String, Value>) {
    const NOT_READY: &str = "node.kubernetes.io/not-ready";
    const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    let tolerates = |key: &str| {
        spec.get("tolerations")
            .and_then(Value::as_array)
            .is_some_and(|ts| {
                ts.iter().any(|t| {
                    let k = t.get("key").and_then(Value::as_str).unwrap_or("");
                    let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
                    (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
                })
            })
    };
    let missing: Vec<&str> = [NOT_READY, UNREACHABLE]
        .into_iter()
        .filter(|k| !tolerates(k))
        .collect();
    if missing.is_empty() {
        return;
    }
    if !spec.get("tolerations").is_some_and(Value::is_array) {
        spec.insert("tolerations".into(), Value::Array(Vec::new()));
    }
    if let Some(ts) = spec.get_mut("tolerations").and_then(Value::as_array_mut) {
        for key in missing {
            ts.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 300}),
            );
        }
    }
}

/// kube's `GetPodQOS` over the containers' cpu and memory.
pub fn qos_class(spec: &Value) -> &'static str {
    let mut requests: [Option<quantity::Nanos>; 2] = [None, None];
    let mut limits: [Option<quantity::Nanos>; 2] = [None, None];
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .into_iter()
        .filter_map(|k| spec.get(k).and_then(Value::as_array))
        .flatten();
    for c in containers {
        let res = c.get("resources");
        for (slot, key) in [(&mut requests, "requests"), (&mut limits, "limits")] {
            let mut found = [false, false];
            if let Some(list) = res.and_then(|r| r.get(key)).and_then(Value::as_object) {
                for (i, name) in ["cpu", "memory"].into_iter().enumerate() {
                    if let Some(q) = list.get(name).and_then(quantity::of) {
                        if q > 0 {
                            found[i] = true;
                            slot[i] = Some(slot[i].unwrap_or(0).saturating_add(q));
                        }
                    }
                }
            }
            if key == "limits" && !(found[0] && found[1]) {
                guaranteed = false;
            }
        }
    }
    if requests.iter().chain(limits.iter()).all(Option::is_none) {
        return "BestEffort";
    }
    if guaranteed {
        for i in 0..2 {
            if let Some(r) = requests[i] {
                if limits[i] != Some(r) {
                    guaranteed = false;
                }
            }
        }
    }
    let count = |a: &[Option<quantity::Nanos>; 2]| a.iter().filter(|x| x.is_some()).count();
    if guaranteed && count(&requests) == count(&limits) {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn pod_template_validate(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    validate_pod_template(
        obj.get("template").unwrap_or(&Value::Null),
        "template",
        &mut out,
    );
    out
}

fn pod_validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    validate_pod_spec(spec, "spec", &mut out);
    if let Some(old) = old {
        validate_pod_update(spec, old.get("spec").unwrap_or(&Value::Null), &mut out);
    }
    out
}

/// Part of kube's `ValidatePodStatusUpdate`: a changed nominated node is a
/// node name, pod IPs are IPs, and containers that terminated under a
/// restart policy that will not restart them stay terminated.
fn pod_validate_status(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let st = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let nominated = st(obj, "/status/nominatedNodeName");
    let changed = old.is_none_or(|o| st(o, "/status/nominatedNodeName") != nominated);
    if changed && !nominated.is_empty() {
        for msg in crate::validation::is_dns1123_subdomain(&nominated) {
            out.push(crate::validation::invalid(
                "status.nominatedNodeName",
                &nominated,
                &msg,
            ));
        }
    }
    let ips = obj.pointer("/status/podIPs").and_then(Value::as_array);
    for (i, ip) in ips.into_iter().flatten().enumerate() {
        let ip = ip.get("ip").and_then(Value::as_str).unwrap_or("");
        if ip.parse::<std::net::IpAddr>().is_err() {
            out.push(crate::validation::invalid(
                &format!("status.podIPs[{i}]"),
                ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if let Some(old) = old {
        let policy = st(old, "/spec/restartPolicy");
        if policy != "Always" {
            for key in ["initContainerStatuses", "containerStatuses"] {
                container_state_transitions(obj, old, key, &policy, &mut out);
            }
        }
    }
    out
}

/// kube's `ValidateContainerStateTransition`.
fn container_state_transitions(
    new: &Value,
    old: &Value,
    key: &str,
    policy: &str,
    out: &mut Vec<StatusCause>,
) {
    fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
        v.get("status")
            .and_then(|s| s.get(key))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    let terminated = |c: &Value| c.pointer("/state/terminated").is_some_and(Value::is_object);
    let news = list(new, key);
    for (i, o) in list(old, key).iter().enumerate() {
        if !terminated(o) {
            continue;
        }
        let code = o
            .pointer("/state/terminated/exitCode")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if code != 0 && policy == "OnFailure" {
            continue;
        }
        let name = o.get("name");
        if news.iter().any(|n| n.get("name") == name && !terminated(n)) {
            out.push(forbidden(
                &format!("status.{key}[{i}].state"),
                "may not be transitioned to non-terminated state",
            ));
        }
    }
}

const UPDATABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// kube's `ValidatePodUpdate` of the spec: only images, a lowered
/// `activeDeadlineSeconds`, added tolerations, removed scheduling gates
/// and a negative grace period raised to 1 may change.
fn validate_pod_update(new: &Value, old: &Value, out: &mut Vec<StatusCause>) {
    let ads_path = "spec.activeDeadlineSeconds";
    match (
        new.get("activeDeadlineSeconds").and_then(Value::as_i64),
        old.get("activeDeadlineSeconds").and_then(Value::as_i64),
    ) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            out.push(invalid_json(
                ads_path,
                &Value::from(n),
                &crate::validation::inclusive_range_error(0, i64::from(i32::MAX)),
            ));
            return;
        }
        (Some(n), Some(o)) if o < n => {
            out.push(invalid_json(
                ads_path,
                &Value::from(n),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (None, Some(_)) => out.push(invalid_json(
            ads_path,
            &Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    for (key, label) in [
        ("containers", "containers"),
        ("initContainers", "initContainers"),
    ] {
        for (i, c) in new
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if c.get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                out.push(required(&format!("spec.{label}[{i}].image"), ""));
            }
        }
    }
    let mut changed = changed_fields(new, old);
    let defaulted_old;
    if !changed.is_empty() {
        // A pod stored before its defaults existed reads back defaulted in
        // kube; compare with that (only on this path, to spare the copy).
        let mut o = old.clone();
        if let Some(m) = o.as_object_mut() {
            default_pod_spec(m, true);
        }
        defaulted_old = o;
        changed = changed_fields(new, &defaulted_old);
    }
    if !changed.is_empty() {
        let mut msg = String::from(UPDATABLE);
        msg.push('\n');
        for f in changed {
            msg.push_str(&format!(
                "  spec.{f}: {} -> {}\n",
                old.get(f).map_or("null".into(), Value::to_string),
                new.get(f).map_or("null".into(), Value::to_string)
            ));
        }
        out.push(forbidden("spec", &msg));
    }
}

fn empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    }
}

/// The spec fields that differ beyond what an update may change.
fn changed_fields<'a>(new: &'a Value, old: &'a Value) -> Vec<&'a str> {
    let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
        return Vec::new();
    };
    let mut keys: Vec<&str> = n.keys().chain(o.keys()).map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.retain(|k| {
        let (a, b) = (n.get(*k), o.get(*k));
        match *k {
            "activeDeadlineSeconds" | "tolerations" => false,
            "schedulingGates" => {
                // Gates may only be removed.
                let old_gates = b.and_then(Value::as_array);
                !a.and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .all(|g| old_gates.is_some_and(|og| og.contains(g)))
            }
            "containers" | "initContainers" => !same_but_images(a, b),
            "terminationGracePeriodSeconds" => {
                let (na, ob) = (a.and_then(Value::as_i64), b.and_then(Value::as_i64));
                !(na == ob || (na == Some(1) && ob.is_some_and(|x| x < 0)))
            }
            _ => a != b && !(empty(a) && empty(b)),
        }
    });
    keys
}

fn same_but_images(a: Option<&Value>, b: Option<&Value>) -> bool {
    let (xs, ys) = (
        a.and_then(Value::as_array).map_or(&[][..], Vec::as_slice),
        b.and_then(Value::as_array).map_or(&[][..], Vec::as_slice),
    );
    xs.len() == ys.len()
        && xs
            .iter()
            .zip(ys)
            .all(|(x, y)| match (x.as_object(), y.as_object()) {
                (Some(x), Some(y)) => {
                    x.iter().all(|(k, v)| k == "image" || y.get(k) == Some(v))
                        && y.keys().all(|k| k == "image" || x.contains_key(k))
                }
                _ => x == y,
            })
}

/// The grace period of a pod's delete (kube's pod strategy
/// `CheckGracefulDelete`): only a pod bound to a node waits for its
/// kubelet, the requested period, else the pod's
/// `terminationGracePeriodSeconds`, else 30 s; zero deletes at once.
pub fn grace_period(pod: &Value, requested: Option<i64>) -> Option<i64> {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !bound {
        return None;
    }
    let g = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    (g > 0).then_some(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cause_to_string;

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    #[test]
    fn qos_classes() {
        let res = |r: Value| json!({"containers": [{"name": "a", "resources": r}]});
        assert_eq!(qos_class(&res(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&res(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&res(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                                  "requests": {"cpu": "1000m", "memory": "1024Mi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&res(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                                  "requests": {"cpu": "500m", "memory": "1Gi"}}))),
            "Burstable"
        );
    }

    #[test]
    fn create_sets_status_and_default_tolerations() {
        let mut p = pod(json!([{"name": "a", "image": "nginx",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]));
        pod_defaults(&mut p);
        pod_prepare_create(&mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        assert!(pod_validate(&p, None).is_empty());
        default_tolerations(p["spec"].as_object_mut().unwrap());
        assert_eq!(
            p["spec"]["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ])
        );
        let mut named = pod(json!([{"name": "a", "image": "nginx"}]));
        named["spec"]["serviceAccountName"] = json!("robot");
        named["spec"]["schedulingGates"] = json!([{"name": "g"}]);
        named["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        pod_prepare_create(&mut named);
        default_tolerations(named["spec"].as_object_mut().unwrap());
        assert_eq!(named["spec"]["serviceAccount"], "robot");
        assert_eq!(
            named["spec"]["tolerations"],
            json!([{"operator": "Exists"}])
        );
        assert_eq!(named["status"]["qosClass"], "BestEffort");
        assert_eq!(
            named["status"]["conditions"][0]["reason"],
            "SchedulingGated"
        );
    }

    #[test]
    fn updates_change_images_only() {
        let mut old = pod(json!([{"name": "a", "image": "nginx:1"}]));
        pod_defaults(&mut old);
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:2");
        new["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        assert!(pod_validate(&new, Some(&old)).is_empty());
        new["spec"]["nodeName"] = json!("n1");
        let errs = pod_validate(&new, Some(&old));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec");
        assert!(errs[0]
            .message
            .starts_with(&format!("Forbidden: {UPDATABLE}\n")));
        assert!(errs[0].message.contains("spec.nodeName"));
        // A pod stored without defaults compares as kube reads it back.
        let bare = pod(json!([{"name": "a", "image": "nginx:1"}]));
        let mut relabeled = old.clone();
        relabeled["metadata"]["labels"] = json!({"x": "y"});
        assert!(pod_validate(&relabeled, Some(&bare)).is_empty());
        let mut lowered = old.clone();
        lowered["spec"]["activeDeadlineSeconds"] = json!(10);
        let mut raised = lowered.clone();
        raised["spec"]["activeDeadlineSeconds"] = json!(20);
        assert_eq!(
            cause_to_string(&pod_validate(&raised, Some(&lowered))[0]),
            "spec.activeDeadlineSeconds: Invalid value: 20: must be less than or equal to previous value"
        );
    }

    #[test]
    fn status_rules() {
        let old = json!({"spec": {"restartPolicy": "Never"}, "status": {"containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 0}}}]}});
        let new = json!({"spec": {"restartPolicy": "Never"}, "status": {
            "nominatedNodeName": "Bad_Node", "podIPs": [{"ip": "10.0.0.300"}],
            "containerStatuses": [{"name": "a", "state": {"running": {}}}]}});
        let errs: Vec<String> = pod_validate_status(&new, Some(&old))
            .iter()
            .map(cause_to_string)
            .collect();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].starts_with(
            "status.nominatedNodeName: Invalid value: \"Bad_Node\": a lowercase RFC 1123 subdomain"
        ));
        assert_eq!(errs[1], "status.podIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
        assert_eq!(errs[2], "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state");
        let mut always = old.clone();
        always["spec"]["restartPolicy"] = json!("Always");
        let ok =
            json!({"status": {"containerStatuses": [{"name": "a", "state": {"running": {}}}]}});
        assert!(pod_validate_status(&ok, Some(&always)).is_empty());
    }

    #[test]
    fn pod_template_rules() {
        let mut t = json!({"template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        pod_template_defaults(&mut t);
        assert_eq!(t["template"]["spec"]["restartPolicy"], "Always");
        assert!(t["template"]["spec"].get("enableServiceLinks").is_none());
        assert!(pod_template_validate(&t, None).is_empty());
        let ctx = PrintContext { now: 0 };
        let cells: Vec<Value> = POD_TEMPLATE
            .columns
            .iter()
            .map(|c| (c.cell)(&t, &ctx))
            .collect();
        assert_eq!(cells[1..], [json!("c"), json!("nginx"), json!("a=b")]);
    }
}

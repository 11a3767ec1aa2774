//! kube's pod printer (`printPod`): READY, the computed STATUS reason,
//! RESTARTS with the time of the last restart, and the wide columns.
//! (kube also marks Succeeded/Failed rows with a `Completed` row
//! condition; Table rows here carry no conditions.)

use serde_json::Value;

use crate::kinds::print::{parse_time, Column, PrintContext, AGE, NAME};

pub static COLUMNS: &[Column] = &[
    NAME,
    Column {
        name: "Ready",
        type_: "string",
        format: "",
        description: "The aggregate readiness state of this pod for accepting traffic.",
        priority: 0,
        cell: ready_cell,
    },
    Column {
        name: "Status",
        type_: "string",
        format: "",
        description: "The aggregate status of the containers in this pod.",
        priority: 0,
        cell: status_cell,
    },
    Column {
        name: "Restarts",
        type_: "string",
        format: "",
        description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        priority: 0,
        cell: restarts_cell,
    },
    AGE,
    Column {
        name: "IP",
        type_: "string",
        format: "",
        description: "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        priority: 1,
        cell: ip_cell,
    },
    Column {
        name: "Node",
        type_: "string",
        format: "",
        description: "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        priority: 1,
        cell: node_cell,
    },
    Column {
        name: "Nominated Node",
        type_: "string",
        format: "",
        description: "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
        priority: 1,
        cell: nominated_cell,
    },
    Column {
        name: "Readiness Gates",
        type_: "string",
        format: "",
        description: "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        priority: 1,
        cell: gates_cell,
    },
];

/// What `printPod` computes for one pod.
struct Summary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<i64>,
}

fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn st<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn condition_true(pod: &Value, ty: &str) -> bool {
    arr(pod, "/status/conditions")
        .iter()
        .any(|c| st(c, "/type") == ty && st(c, "/status") == "True")
}

fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = st(t, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = t.get("signal").and_then(Value::as_i64).unwrap_or(0);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        let code = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        format!("{prefix}ExitCode:{code}")
    }
}

fn last_terminated(cs: &Value) -> Option<i64> {
    cs.pointer("/lastState/terminated/finishedAt")
        .and_then(Value::as_str)
        .and_then(parse_time)
}

fn summarize(pod: &Value) -> Summary {
    let init_specs = arr(pod, "/spec/initContainers");
    let restartable = |name: &str| {
        init_specs
            .iter()
            .any(|c| st(c, "/name") == name && st(c, "/restartPolicy") == "Always")
    };
    let mut total = arr(pod, "/spec/containers").len();
    total += init_specs
        .iter()
        .filter(|c| st(c, "/restartPolicy") == "Always")
        .count();
    let mut ready = 0;
    let phase = st(pod, "/status/phase");
    let mut reason = match st(pod, "/status/reason") {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    if arr(pod, "/status/conditions")
        .iter()
        .any(|c| st(c, "/type") == "PodScheduled" && st(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last: Option<i64> = None;
    let mut sidecar_last: Option<i64> = None;
    let mut initializing = false;
    let init_statuses = arr(pod, "/status/initContainerStatuses");
    for (i, cs) in init_statuses.iter().enumerate() {
        let count = cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        restarts += count;
        let finished = last_terminated(cs);
        last = last.max(finished);
        let sidecar = restartable(st(cs, "/name"));
        if sidecar {
            sidecar_restarts += count;
            sidecar_last = sidecar_last.max(finished);
        }
        let term = cs.pointer("/state/terminated").filter(|t| t.is_object());
        let waiting = st(cs, "/state/waiting/reason");
        if term.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64).unwrap_or(0) == 0) {
            continue;
        }
        if sidecar && cs.get("started").and_then(Value::as_bool) == Some(true) {
            if cs.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = term {
            terminated_reason(t, "Init:")
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last = sidecar_last;
        let mut has_running = false;
        for cs in arr(pod, "/status/containerStatuses").iter().rev() {
            restarts += cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            last = last.max(last_terminated(cs));
            let waiting = st(cs, "/state/waiting/reason");
            let term = cs.pointer("/state/terminated").filter(|t| t.is_object());
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = term {
                reason = terminated_reason(t, "");
            } else if cs.get("ready").and_then(Value::as_bool) == Some(true)
                && cs.pointer("/state/running").is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(pod, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null());
    if deleting && st(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    Summary {
        ready,
        total,
        reason,
        restarts,
        last_restart: last,
    }
}

fn ready_cell(pod: &Value, _: &PrintContext) -> Value {
    let s = summarize(pod);
    Value::String(format!("{}/{}", s.ready, s.total))
}

fn status_cell(pod: &Value, _: &PrintContext) -> Value {
    Value::String(summarize(pod).reason)
}

fn restarts_cell(pod: &Value, ctx: &PrintContext) -> Value {
    let s = summarize(pod);
    Value::String(match s.last_restart {
        Some(t) if s.restarts != 0 => format!(
            "{} ({} ago)",
            s.restarts,
            crate::duration::human(ctx.now - t)
        ),
        _ => s.restarts.to_string(),
    })
}

fn or_none(s: &str) -> Value {
    Value::String(if s.is_empty() { "<none>" } else { s }.to_string())
}

fn ip_cell(pod: &Value, _: &PrintContext) -> Value {
    or_none(st(pod, "/status/podIPs/0/ip"))
}

fn node_cell(pod: &Value, _: &PrintContext) -> Value {
    or_none(st(pod, "/spec/nodeName"))
}

fn nominated_cell(pod: &Value, _: &PrintContext) -> Value {
    or_none(st(pod, "/status/nominatedNodeName"))
}

fn gates_cell(pod: &Value, _: &PrintContext) -> Value {
    let gates = arr(pod, "/spec/readinessGates");
    if gates.is_empty() {
        return or_none("");
    }
    let conditions = arr(pod, "/status/conditions");
    let met = gates
        .iter()
        .filter(|g| {
            let ty = st(g, "/conditionType");
            conditions
                .iter()
                .find(|c| st(c, "/type") == ty)
                .is_some_and(|c| st(c, "/status") == "True")
        })
        .count();
    Value::String(format!("{met}/{}", gates.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cells(pod: &Value, now: i64) -> Vec<Value> {
        let ctx = PrintContext { now };
        COLUMNS.iter().map(|c| (c.cell)(pod, &ctx)).collect()
    }

    #[test]
    fn pending_pod() {
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Pending"}});
        let c = cells(&pod, 0);
        assert_eq!(c[1], "0/2");
        assert_eq!(c[2], "Pending");
        assert_eq!(c[3], "0");
        assert_eq!(
            c[5..],
            [
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn running_waiting_and_restarts() {
        let finished = chrono::DateTime::from_timestamp(1_000, 0)
            .unwrap()
            .to_rfc3339();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1",
                     "readinessGates": [{"conditionType": "x"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}],
                "conditions": [{"type": "x", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                    {"name": "b", "ready": false, "restartCount": 5,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"finishedAt": finished, "exitCode": 1}}}]}});
        let c = cells(&pod, 1_300);
        assert_eq!(c[1], "1/2");
        assert_eq!(c[2], "CrashLoopBackOff");
        assert_eq!(c[3], "5 (5m ago)");
        assert_eq!(
            c[5..],
            [
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("1/1")
            ]
        );
    }

    #[test]
    fn init_terminating_and_exit_codes() {
        let init = json!({"metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}]}});
        assert_eq!(cells(&init, 0)[2], "Init:0/1");
        let failed = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 2}}}]}});
        assert_eq!(cells(&failed, 0)[2], "ExitCode:2");
        let deleting = json!({"metadata": {"name": "p", "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running"}});
        assert_eq!(cells(&deleting, 0)[2], "Terminating");
    }
}

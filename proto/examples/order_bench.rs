//! Cost of `order_object` on typical objects: with every key out of order
//! (the worst case) and already in kube's order (a PUT of what a GET gave).
//! Run: `cargo run --release -p k8s-proto --example order_bench`.

use serde_json::{json, Map, Value};
use std::time::Instant;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "3f1b2c4d-0000-4000-8000-000000000001",
            "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"deployment.kubernetes.io/revision": "2"},
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {}}}}}}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}},
                    "livenessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "periodSeconds": 10,
                        "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent"}],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                    "securityContext": {}, "schedulerName": "default-scheduler"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
            "availableReplicas": 3, "conditions": [{"type": "Available", "status": "True",
                "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}]}
    })
}

/// Every object's keys reversed: the worst case for the reorder.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let entries: Vec<_> = m.iter().collect();
            let mut out = Map::new();
            for (k, v) in entries.into_iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

fn pod() -> Value {
    let d = deployment();
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": d["metadata"].clone(),
        "spec": d["spec"]["template"]["spec"].clone(),
        "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "192.168.0.1"}});
    p["spec"]["nodeName"] = json!("node-1");
    p
}

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// ns per reorder of a copy of `base` (clone and drop timed apart and
/// taken off), median of 9 rounds.
fn time(label: &str, base: &Value) {
    let n = 20_000u128;
    let bytes = serde_json::to_vec(base).unwrap().len();
    let round = |reorder: bool| {
        let start = Instant::now();
        for _ in 0..n {
            let mut v = base.clone();
            if reorder {
                k8s_proto::order_object(&mut v);
            }
            std::hint::black_box(&v);
        }
        start.elapsed().as_nanos() / n
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        with.push(round(true));
        without.push(round(false));
    }
    let per = median(with).saturating_sub(median(without));
    // An object already in order is checked, not rebuilt: time it in place.
    let mut same = base.clone();
    k8s_proto::order_object(&mut same);
    let in_place = median(
        (0..9)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..n {
                    k8s_proto::order_object(std::hint::black_box(&mut same));
                }
                start.elapsed().as_nanos() / n
            })
            .collect(),
    );
    let ser = median(
        (0..9)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..n {
                    std::hint::black_box(serde_json::to_vec(base).unwrap());
                }
                start.elapsed().as_nanos() / n
            })
            .collect(),
    );
    println!(
        "{label:<20} {bytes:>5} B  shuffled {per:>6} ns  already ordered {in_place:>6} ns  (to_vec {ser:>6} ns)"
    );
}

fn main() {
    let d = deployment();
    let p = pod();
    k8s_proto::order_object(&mut reversed(&d)); // build the table first
    time("Deployment", &reversed(&d));
    time("Pod", &reversed(&p));
    time(
        "empty ConfigMap",
        &json!({"kind": "ConfigMap", "apiVersion": "v1"}),
    );
}

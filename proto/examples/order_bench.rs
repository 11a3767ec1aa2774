//! Cost of `order_object` on typical objects, shuffled (a client's order)
//! and already in kube's order (the common case of a PUT of a GET).
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

fn time(label: &str, base: &Value) {
    let n = 20_000;
    let bytes = serde_json::to_vec(base).unwrap().len();
    // Each round: clone + reorder + drop, less clone + drop; best of 7.
    let round = |reorder: bool| {
        let start = Instant::now();
        for _ in 0..n {
            let mut v = base.clone();
            if reorder {
                k8s_proto::order_object(&mut v);
            }
            std::hint::black_box(&v);
        }
        start.elapsed().as_nanos() / n as u128
    };
    let per = (0..7)
        .map(|_| round(true).saturating_sub(round(false)))
        .min()
        .unwrap_or(0);
    // For scale: serializing the same object once.
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(serde_json::to_vec(base).unwrap());
    }
    let ser = start.elapsed().as_nanos() / n as u128;
    println!("{label:<32} {bytes:>5} B  reorder {per:>6} ns/object  (to_vec {ser:>6} ns)");
}

fn main() {
    let d = deployment();
    let p = pod();
    k8s_proto::order_object(&mut reversed(&d)); // build the table first
    time("Deployment, reversed keys", &reversed(&d));
    let mut ordered = d.clone();
    k8s_proto::order_object(&mut ordered);
    time("Deployment, already ordered", &ordered);
    time("Pod, reversed keys", &reversed(&p));
    let mut ordered = p.clone();
    k8s_proto::order_object(&mut ordered);
    time("Pod, already ordered", &ordered);
}

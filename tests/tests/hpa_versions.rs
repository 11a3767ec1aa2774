//! HorizontalPodAutoscalers served as autoscaling/v2 (storage) and
//! autoscaling/v1: one stored object, converted on every read and write as
//! kube converts it, with what v1 cannot say kept in the
//! `autoscaling.alpha.kubernetes.io/*` annotations.

use e2e::Server;
use serde_json::{json, Value};

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

async fn send(s: &Server, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = s
        .http(
            method,
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await
        .expect("request");
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

async fn get(s: &Server, path: &str) -> Value {
    let r = s.http("GET", path, &[], b"").await.expect("request");
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    serde_json::from_slice(&r.body).expect("JSON")
}

fn cpu(u: i64) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": u}}})
}

fn memory() -> Value {
    json!({"type": "Resource", "resource": {"name": "memory",
        "target": {"type": "AverageValue", "averageValue": "100Mi"}}})
}

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

#[tokio::test]
async fn v1_and_v2_serve_one_object() {
    let s = Server::start().await;

    // Discovery: both versions, v2 preferred.
    let group = get(&s, "/apis/autoscaling").await;
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);

    // Created in v1 with a CPU target: v2 sees the CPU metric.
    let (code, made) = send(
        &s,
        "POST",
        V1,
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": target(), "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}}),
    )
    .await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["apiVersion"], "autoscaling/v1");
    assert_eq!(made["spec"]["minReplicas"], 1, "v1 default: {made}");
    assert_eq!(made["spec"]["targetCPUUtilizationPercentage"], 50);
    let a2 = get(&s, &format!("{V2}/a")).await;
    assert_eq!(a2["apiVersion"], "autoscaling/v2");
    assert_eq!(a2["spec"]["metrics"], json!([cpu(50)]), "{a2}");
    assert!(a2["metadata"].get("annotations").is_none(), "{a2}");

    // Created in v2 with memory and CPU: v1 has the CPU target, the
    // annotation the memory metric (as an autoscaling/v1 MetricSpec).
    let (code, made) = send(
        &s,
        "POST",
        V2,
        &json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "b"},
            "spec": {"scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 6,
                "metrics": [memory(), cpu(60)]}}),
    )
    .await;
    assert_eq!(code, 201, "{made}");
    let b1 = get(&s, &format!("{V1}/b")).await;
    assert_eq!(b1["apiVersion"], "autoscaling/v1");
    assert_eq!(b1["spec"]["targetCPUUtilizationPercentage"], 60, "{b1}");
    assert!(b1["spec"].get("metrics").is_none(), "{b1}");
    assert_eq!(
        b1["metadata"]["annotations"][METRICS],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
    );

    // Updated in v1: the memory metric survives the round trip.
    let mut edit = b1.clone();
    edit["spec"]["targetCPUUtilizationPercentage"] = json!(70);
    let (code, put) = send(&s, "PUT", &format!("{V1}/b"), &edit).await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["apiVersion"], "autoscaling/v1");
    assert_eq!(put["spec"]["targetCPUUtilizationPercentage"], 70);
    let b2 = get(&s, &format!("{V2}/b")).await;
    assert_eq!(b2["spec"]["metrics"], json!([memory(), cpu(70)]), "{b2}");
    assert!(b2["metadata"].get("annotations").is_none(), "{b2}");
    assert_eq!(b2["metadata"]["generation"], 2, "{b2}");

    // Putting back what v1 read changes nothing.
    let before = get(&s, &format!("{V1}/b")).await;
    let (code, same) = send(&s, "PUT", &format!("{V1}/b"), &before).await;
    assert_eq!(code, 200, "{same}");
    assert_eq!(
        same["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );

    // List and watch in v1 see v1 objects.
    let list = get(&s, V1).await;
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    let cpus: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["spec"]["targetCPUUtilizationPercentage"])
        .collect();
    assert_eq!(cpus, [&json!(50), &json!(70)], "{list}");
    let w = s
        .http("GET", &format!("{V1}?watch=1&timeoutSeconds=1"), &[], b"")
        .await
        .unwrap();
    let events: Vec<Value> = w
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{}", w.text());
    for e in &events {
        assert_eq!(e["object"]["apiVersion"], "autoscaling/v1", "{e}");
        assert!(e["object"]["spec"]["targetCPUUtilizationPercentage"].is_number());
        assert!(e["object"]["spec"].get("metrics").is_none(), "{e}");
    }

    // /status in v1: the CPU utilization becomes a v2 current metric.
    let mut st = get(&s, &format!("{V1}/a")).await;
    st["status"] = json!({"currentReplicas": 2, "desiredReplicas": 3,
        "currentCPUUtilizationPercentage": 42});
    let (code, upd) = send(&s, "PUT", &format!("{V1}/a/status"), &st).await;
    assert_eq!(code, 200, "{upd}");
    assert_eq!(
        upd["status"]["currentCPUUtilizationPercentage"], 42,
        "{upd}"
    );
    let a2 = get(&s, &format!("{V2}/a")).await;
    assert_eq!(a2["status"]["currentReplicas"], 2, "{a2}");
    assert_eq!(
        a2["status"]["currentMetrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": 42}}}])
    );
    let st1 = get(&s, &format!("{V1}/a/status")).await;
    assert_eq!(st1["status"]["currentCPUUtilizationPercentage"], 42);
    assert!(st1["metadata"]["annotations"][CURRENT]
        .as_str()
        .is_some_and(|a| a.contains(r#""currentAverageUtilization":42"#)));

    // What v1 keeps in annotations is status too: a v1 update without them
    // keeps the stored status (conditions written through v2 here).
    let mut st2 = a2.clone();
    st2["status"]["conditions"] = json!([{"type": "AbleToScale", "status": "True",
        "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "ReadyForNewScale"}]);
    let (code, upd) = send(&s, "PUT", &format!("{V2}/a/status"), &st2).await;
    assert_eq!(code, 200, "{upd}");
    let mut plain = get(&s, &format!("{V1}/a")).await;
    plain["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    plain["spec"]["maxReplicas"] = json!(8);
    let (code, upd) = send(&s, "PUT", &format!("{V1}/a"), &plain).await;
    assert_eq!(code, 200, "{upd}");
    let a2 = get(&s, &format!("{V2}/a")).await;
    assert_eq!(a2["spec"]["maxReplicas"], 8);
    assert_eq!(
        a2["status"]["conditions"], st2["status"]["conditions"],
        "{a2}"
    );
    // kube's v1 MetricStatus has a non-optional currentAverageValue: its
    // zero value comes back from the annotation.
    assert_eq!(
        a2["status"]["currentMetrics"][0]["resource"]["current"],
        json!({"averageValue": "0", "averageUtilization": 42})
    );
    assert_eq!(a2["metadata"]["generation"], 2, "{a2}");
}

#[tokio::test]
async fn v1_writes_are_validated_as_kube_validates_them() {
    let s = Server::start().await;
    let (code, status) = send(
        &s,
        "POST",
        V1,
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "bad"},
            "spec": {"scaleTargetRef": target(), "minReplicas": 0, "maxReplicas": 4,
                "targetCPUUtilizationPercentage": 0}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.minReplicas",
            "spec.metrics[0].resource.target.averageUtilization"
        ],
        "{status}"
    );
}

#[tokio::test]
async fn kubectl_prints_v1_like_v2() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": target(), "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}})
        .to_string(),
    );
    for resource in ["hpa", "horizontalpodautoscalers.v1.autoscaling"] {
        let out = s.kubectl_ok(&["get", resource]);
        let mut lines = out.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            [
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE"
            ],
            "{out}"
        );
        let row = lines.next().unwrap();
        assert!(
            row.starts_with("web")
                && row.contains("Deployment/web")
                && row.contains("cpu: <unknown>/50%"),
            "{resource}: {out}"
        );
    }
    let v1 = s.get_json(&["horizontalpodautoscalers.v1.autoscaling", "web"]);
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50, "{v1}");

    // Server-side apply in v1.
    s.kubectl_stdin_ok(
        &["apply", "--server-side", "-f", "-"],
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": target(), "maxReplicas": 5, "targetCPUUtilizationPercentage": 65}})
        .to_string(),
    );
    let v2 = s.get_json(&["horizontalpodautoscalers.v2.autoscaling", "web"]);
    assert_eq!(v2["spec"]["maxReplicas"], 5, "{v2}");
    assert_eq!(v2["spec"]["metrics"], json!([cpu(65)]), "{v2}");
}

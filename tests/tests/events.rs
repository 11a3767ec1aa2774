//! One Event, two APIs: what is written through events.k8s.io/v1 is read
//! through core/v1 (`kubectl get events`, `kubectl describe`) and back, as
//! kube stores both in one place.

use e2e::Server;
use serde_json::{json, Value};

async fn send(s: &Server, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = s
        .http(
            method,
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await
        .unwrap();
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn events_written_in_one_api_are_read_in_the_other() {
    let s = Server::start().await;
    let new_api = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.1"},
        "eventTime": "2026-11-24T10:00:00.000000Z",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web"},
        "note": "Pulled image nginx", "reason": "Pulled", "action": "Pull",
        "type": "Normal", "reportingController": "example.com/kubelet",
        "reportingInstance": "n1"});
    let (code, created) = send(
        &s,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &new_api,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created["note"], "Pulled image nginx");

    // core/v1 sees it, with core's field names.
    let core = s.get_json(&["events", "web.1"]);
    assert_eq!(core["apiVersion"], "v1", "{core}");
    assert_eq!(core["message"], "Pulled image nginx");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["reportingComponent"], "example.com/kubelet");
    assert!(core.get("note").is_none(), "{core}");
    let out = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
    ]);
    assert!(out.contains("Pulled image nginx"), "{out}");

    // And the other way: a core Event is an events.k8s.io Event.
    let old_api = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.2"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
        "message": "Started container", "reason": "Started", "type": "Normal",
        "source": {"component": "kubelet"}, "count": 1,
        "firstTimestamp": "2026-11-24T10:00:01Z", "lastTimestamp": "2026-11-24T10:00:01Z"});
    let (code, out) = send(&s, "POST", "/api/v1/namespaces/default/events", &old_api).await;
    assert_eq!(code, 201, "{out}");
    let r = s
        .http(
            "GET",
            "/apis/events.k8s.io/v1/namespaces/default/events/web.2",
            &[],
            b"",
        )
        .await
        .unwrap();
    let ev: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(ev["apiVersion"], "events.k8s.io/v1", "{ev}");
    assert_eq!(ev["note"], "Started container");
    assert_eq!(ev["deprecatedSource"]["component"], "kubelet");
    assert_eq!(ev["deprecatedCount"], 1);
    assert_eq!(ev["regarding"]["name"], "web");

    // Lists of either API hold both, each in its own shape.
    let r = s
        .http(
            "GET",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &[],
            b"",
        )
        .await
        .unwrap();
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    let notes: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["note"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(notes, ["Pulled image nginx", "Started container"], "{list}");
    // The new API's field selectors name its own fields.
    let r = s
        .http(
            "GET",
            "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=reportingController%3Dexample.com%2Fkubelet,regarding.name%3Dweb",
            &[],
            b"",
        )
        .await
        .unwrap();
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "web.1");
    let r = s
        .http(
            "GET",
            "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb",
            &[],
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    let core_list = s.get_json(&["events"]);
    assert_eq!(core_list["items"].as_array().unwrap().len(), 2);
}

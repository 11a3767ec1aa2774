//! CRD conversion webhooks: a ConversionReview v1 server written here, over
//! HTTPS with its own CA in `caBundle`. Objects written in v1 are stored in
//! v2 (the storage version) and served in either; when the webhook is down
//! or answers garbage, requests fail with a 500 naming the webhook and the
//! stored objects stay as they were.

use e2e::webhook::{Answer, WebhookServer};
use e2e::{eventually, Server};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// v1 has `spec.color`; v2 calls it `spec.colour`.
fn convert(review: Value) -> Answer {
    let req = &review["request"];
    let want = req["desiredAPIVersion"].as_str().unwrap_or("").to_string();
    let objects: Vec<Value> = req["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut o| {
            let spec = o["spec"].as_object_mut().cloned().unwrap_or_default();
            let mut out = serde_json::Map::new();
            for (k, v) in spec {
                let k = match (want.as_str(), k.as_str()) {
                    ("conv.example.com/v2", "color") => "colour".to_string(),
                    ("conv.example.com/v1", "colour") => "color".to_string(),
                    _ => k,
                };
                out.insert(k, v);
            }
            o["spec"] = Value::Object(out);
            o["apiVersion"] = json!(want);
            o
        })
        .collect();
    Answer::Json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": req["uid"], "convertedObjects": objects, "result": {"status": "Success"}}
    }))
}

fn crd(url: &str, ca: &str) -> String {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "paints.conv.example.com"},
        "spec": {
            "group": "conv.example.com",
            "scope": "Namespaced",
            "names": {"plural": "paints", "kind": "Paint"},
            "versions": [
                {"name": "v1", "served": true, "storage": false, "schema": schema},
                {"name": "v2", "served": true, "storage": true, "schema": schema}
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca}}}
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversion_webhook_converts_between_versions() {
    let hook = WebhookServer::start(convert).await;
    let server = Server::start().await;
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &crd(&hook.url("/convert"), &hook.ca_bundle()),
    );
    eventually("paints served", Duration::from_secs(15), || {
        server
            .kubectl(&["get", "paints.v1.conv.example.com"])
            .status
            .success()
            .then_some(())
    })
    .await;

    // Written in v1, stored in v2 (through the webhook), read in both.
    let v1 = "/apis/conv.example.com/v1/namespaces/default/paints";
    let body = json!({"apiVersion": "conv.example.com/v1", "kind": "Paint",
        "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"color": "red"}});
    let r = server
        .http(
            "POST",
            v1,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let made: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(made["apiVersion"], "conv.example.com/v1");
    assert_eq!(made["spec"], json!({"color": "red"}));
    assert!(
        hook.calls.load(Ordering::SeqCst) >= 2,
        "to storage and back"
    );

    let in_v2 = server.get_json(&["paints.v2.conv.example.com", "p"]);
    assert_eq!(in_v2["apiVersion"], "conv.example.com/v2");
    assert_eq!(in_v2["spec"], json!({"colour": "red"}));
    let in_v1 = server.get_json(&["paints.v1.conv.example.com", "p"]);
    assert_eq!(in_v1["spec"], json!({"color": "red"}));
    let listed = server.get_json(&["paints.v1.conv.example.com"]);
    assert_eq!(listed["items"][0]["spec"], json!({"color": "red"}));
    assert_eq!(listed["items"][0]["metadata"]["labels"], json!({"a": "b"}));

    // Watch in v1 gets converted events.
    let w = server
        .http("GET", &format!("{v1}?watch=1&timeoutSeconds=1"), &[], b"")
        .await
        .unwrap();
    let first: Value = serde_json::from_str(w.text().lines().next().unwrap()).unwrap();
    assert_eq!(first["object"]["spec"], json!({"color": "red"}), "{first}");

    // The webhook down: 500 naming it; the object is unchanged.
    let url = hook.url("/convert");
    drop(hook);
    let r = server
        .http(
            "PATCH",
            &format!("{v1}/p"),
            &[("Content-Type", "application/merge-patch+json")],
            br#"{"spec":{"color":"blue"}}"#,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
    let status: Value = serde_json::from_slice(&r.body).unwrap();
    let msg = status["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("conversion webhook for conv.example.com/v1, Kind=Paint failed")
            && msg.contains(&format!("Post \"{url}\"")),
        "{msg}"
    );
    let r = server
        .http("GET", &format!("{v1}/p"), &[], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_answering_garbage_fails_the_request_and_stores_nothing() {
    let hook =
        WebhookServer::start(|_| Answer::Json(json!({"response": {"uid": "not-yours"}}))).await;
    let server = Server::start().await;
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &crd(&hook.url("/"), &hook.ca_bundle()),
    );
    eventually("paints served", Duration::from_secs(15), || {
        server
            .kubectl(&["get", "paints.v1.conv.example.com"])
            .status
            .success()
            .then_some(())
    })
    .await;
    let body = json!({"apiVersion": "conv.example.com/v1", "kind": "Paint",
        "metadata": {"name": "p"}, "spec": {"color": "red"}});
    let r = server
        .http(
            "POST",
            "/apis/conv.example.com/v1/namespaces/default/paints",
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("expected response.uid"), "{}", r.text());
    // Nothing was stored (v2 is the storage version: no conversion to read).
    let r = server
        .http(
            "GET",
            "/apis/conv.example.com/v2/namespaces/default/paints/p",
            &[],
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 404, "{}", r.text());
}

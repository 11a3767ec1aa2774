//! The bytes of JSON responses, as kube-apiserver writes them: `kind`, then
//! `apiVersion`, then the type's fields in Go struct order, Go map keys
//! sorted, custom resources sorted throughout, and a trailing newline
//! (kube's `json.Encoder`). Whatever order the client sent.

use e2e::Server;
use serde_json::Value;
use std::time::{Duration, Instant};

async fn call(s: &Server, method: &str, path: &str, body: &str) -> (u16, String) {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[]
    } else {
        &[("Content-Type", "application/json")]
    };
    let r = s
        .http(method, path, headers, body.as_bytes())
        .await
        .expect("request");
    (r.status, String::from_utf8(r.body).expect("UTF-8 body"))
}

fn top_keys(text: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(text).expect("JSON");
    v.as_object().expect("object").keys().cloned().collect()
}

#[tokio::test]
async fn built_in_objects_lists_and_status_in_kube_order() {
    let s = Server::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    // Fields in the wrong order, map keys unsorted.
    let body = r#"{"data":{"b":"2","a":"1"},"metadata":{"labels":{"z":"1","y":"2"},"name":"order"},"apiVersion":"v1","kind":"ConfigMap"}"#;
    let (code, created) = call(&s, "POST", cms, body).await;
    assert_eq!(code, 201, "{created}");
    assert!(
        created.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"order","namespace":"default","uid":""#),
        "{created}"
    );
    assert!(created.ends_with("}\n"), "{created:?}");

    // A dry run is not stored, and answered in the same order.
    let dry = body.replace(r#""name":"order""#, r#""name":"dry""#);
    let (code, answered) = call(&s, "POST", &format!("{cms}?dryRun=All"), &dry).await;
    assert_eq!(code, 201, "{answered}");
    assert!(
        answered.starts_with(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"dry","namespace":"default","uid":""#
        ),
        "{answered}"
    );

    let (code, got) = call(&s, "GET", &format!("{cms}/order"), "").await;
    assert_eq!(code, 200, "{got}");
    assert!(
        got.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"#),
        "{got}"
    );
    assert!(got.ends_with("}\n"), "{got:?}");
    assert_eq!(got.matches('\n').count(), 1, "{got:?}");
    let v: Value = serde_json::from_str(&got).unwrap();
    let meta: Vec<&str> = v["metadata"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        meta,
        [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "labels",
            "managedFields"
        ]
    );
    assert!(got.contains(r#""labels":{"y":"2","z":"1"}"#), "{got}");
    assert!(
        got.ends_with(&(r#""data":{"a":"1","b":"2"}}"#.to_owned() + "\n")),
        "{got}"
    );
    // The managed fields entry in ManagedFieldsEntry's order.
    assert!(got.contains(r#""managedFields":[{"manager":"#), "{got}");

    let (code, list) = call(&s, "GET", cms, "").await;
    assert_eq!(code, 200, "{list}");
    assert!(
        list.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#
        ),
        "{list}"
    );
    assert!(list.ends_with("]}\n"), "{list:?}");
    assert!(list.contains(r#"},"items":[{"#), "{list}");

    let (code, status) = call(&s, "GET", &format!("{cms}/missing"), "").await;
    assert_eq!(code, 404, "{status}");
    assert!(
        status.starts_with(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"#
        ),
        "{status}"
    );
    assert!(
        status.ends_with(
            &(r#""reason":"NotFound","details":{"name":"missing","kind":"configmaps"},"code":404}"#
                .to_owned() + "\n")
        ),
        "{status}"
    );

    // ?pretty: two-space indent, same order, trailing newline.
    let (_, pretty) = call(&s, "GET", &format!("{cms}/order?pretty=true"), "").await;
    assert!(
        pretty.starts_with("{\n  \"kind\": \"ConfigMap\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\n    \"name\": \"order\",\n"),
        "{pretty}"
    );
    assert!(pretty.ends_with("}\n"), "{pretty:?}");
    // A plain GET writes the cached object's shared JSON; the pretty one
    // serializes the object's tree. Both are the same document, in the
    // same order, byte for byte once compacted. (Read from the cache
    // too, after the LIST above made the shared JSON.)
    let compacted =
        serde_json::to_string(&serde_json::from_str::<Value>(&pretty).unwrap()).unwrap() + "\n";
    assert_eq!(got, compacted);
    let (_, cached) = call(&s, "GET", &format!("{cms}/order?resourceVersion=0"), "").await;
    assert_eq!(cached, compacted);

    // A Deployment: spec fields in DeploymentSpec's order, status last.
    let deploy = r#"{"spec":{"template":{"spec":{"containers":[{"image":"nginx","name":"web"}]},"metadata":{"labels":{"app":"w"}}},"selector":{"matchLabels":{"app":"w"}},"replicas":2},"metadata":{"name":"web"},"kind":"Deployment","apiVersion":"apps/v1"}"#;
    let (code, d) = call(
        &s,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        deploy,
    )
    .await;
    assert_eq!(code, 201, "{d}");
    // kube's zero DeploymentStatus, written as `{}`, comes last.
    assert_eq!(
        top_keys(&d),
        ["kind", "apiVersion", "metadata", "spec", "status"]
    );
    assert!(d.ends_with(",\"status\":{}}\n"), "{d}");
    let v: Value = serde_json::from_str(&d).unwrap();
    let spec: Vec<&str> = v["spec"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        spec,
        [
            "replicas",
            "selector",
            "template",
            "strategy",
            "revisionHistoryLimit",
            "progressDeadlineSeconds"
        ]
    );
    let c: Vec<&str> = v["spec"]["template"]["spec"]["containers"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&c[..2], ["name", "image"], "{d}");

    // A watch event carries the stored bytes.
    let (code, events) = call(
        &s,
        "GET",
        &format!("{cms}?watch=true&fieldSelector=metadata.name%3Dorder&timeoutSeconds=1"),
        "",
    )
    .await;
    assert_eq!(code, 200, "{events}");
    assert!(
        events.starts_with(r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"order","namespace":"default","uid":"#),
        "{events}"
    );
    assert!(events.ends_with("}}\n"), "{events:?}");
}

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "gizmos.example.com"},
  "spec": {
    "group": "example.com",
    "scope": "Namespaced",
    "names": {"plural": "gizmos", "kind": "Gizmo"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
  }
}"#;

#[tokio::test]
async fn custom_resources_sorted_as_unstructured() {
    let s = Server::start().await;
    let (code, crd) = call(
        &s,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        CRD,
    )
    .await;
    assert_eq!(code, 201, "{crd}");
    // The CRD is a typed object: kind, apiVersion, metadata in ObjectMeta order.
    assert!(
        crd.starts_with(r#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{"name":"gizmos.example.com","uid":"#),
        "{crd}"
    );
    let path = "/apis/example.com/v1/namespaces/default/gizmos";
    let body = r#"{"kind":"Gizmo","apiVersion":"example.com/v1","metadata":{"name":"g","labels":{"b":"1","a":"2"}},"spec":{"zeta":1,"alpha":{"y":1,"x":2}}}"#;
    let deadline = Instant::now() + Duration::from_secs(30);
    let created = loop {
        let (code, text) = call(&s, "POST", path, body).await;
        if code == 201 {
            break text;
        }
        assert!(Instant::now() < deadline, "{code} {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        created.starts_with(
            r#"{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"creationTimestamp":"#
        ),
        "{created}"
    );
    let (code, got) = call(&s, "GET", &format!("{path}/g"), "").await;
    assert_eq!(code, 200, "{got}");
    assert!(
        got.starts_with(
            r#"{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"creationTimestamp":"#
        ),
        "{got}"
    );
    let v: Value = serde_json::from_str(&got).unwrap();
    let meta: Vec<&str> = v["metadata"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = meta.clone();
    sorted.sort_unstable();
    assert_eq!(meta, sorted, "{got}");
    assert!(meta.contains(&"resourceVersion"), "{got}");
    assert!(
        got.ends_with(&(r#""spec":{"alpha":{"x":2,"y":1},"zeta":1}}"#.to_owned() + "\n")),
        "{got:?}"
    );
}

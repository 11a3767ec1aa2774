//! The Kubernetes protobuf encoding on the wire
//! (`application/vnd.kubernetes.protobuf`): responses, watch streams and
//! DeleteOptions bodies. Every body is decoded (and every request body
//! encoded) by `protoc` with the upstream IDL in `../shared/k8s-api/proto`,
//! never by the server's own codec: the `k8s\0` envelope is described to
//! protoc as a message whose `raw` field has the object's message type
//! (both are length-delimited on the wire).

use e2e::{eventually, Server};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends when configured for protobuf.
const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";

use e2e::protoc_available;

/// An envelope (`runtime.Unknown`) whose `raw` is typed as `message`,
/// imported from `import` (a path under the IDL root).
fn envelope_proto(dir: &std::path::Path, import: &str, message: &str) -> PathBuf {
    let text = format!(
        r#"syntax = "proto2";
package e2e;
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "{import}";
message Envelope {{
  optional k8s.io.apimachinery.pkg.runtime.TypeMeta typeMeta = 1;
  optional {message} raw = 2;
  optional string contentEncoding = 3;
  optional string contentType = 4;
}}
"#
    );
    let path = dir.join("envelope.proto");
    std::fs::write(&path, text).unwrap();
    path
}

fn protoc(dir: &std::path::Path, mode: &str, input: &[u8]) -> Vec<u8> {
    e2e::protoc_envelope(dir, mode, input)
}

/// Decodes a whole protobuf body (`k8s\0` + envelope) with protoc, as text.
fn decode(body: &[u8], import: &str, message: &str) -> String {
    let rest = body
        .strip_prefix(b"k8s\0")
        .unwrap_or_else(|| panic!("no k8s\\0 prefix: {:?}", String::from_utf8_lossy(body)));
    let dir = tempfile::tempdir().unwrap();
    envelope_proto(dir.path(), import, message);
    let text = protoc(dir.path(), "--decode=e2e.Envelope", rest);
    String::from_utf8(text).unwrap()
}

/// Encodes a whole protobuf body from protoc's text format.
fn encode(text: &str, import: &str, message: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    envelope_proto(dir.path(), import, message);
    let mut body = b"k8s\0".to_vec();
    body.extend(protoc(dir.path(), "--encode=e2e.Envelope", text.as_bytes()));
    body
}

const CORE: &str = "k8s.io/api/core/v1/generated.proto";
const APPS: &str = "k8s.io/api/apps/v1/generated.proto";
const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";

async fn post_json(s: &Server, path: &str, body: &str) -> Value {
    let r = s
        .request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

fn assert_protobuf(r: &e2e::HttpResponse, code: u16) {
    assert_eq!(
        r.status,
        code,
        "{:?}",
        String::from_utf8_lossy(&r.body)
            .chars()
            .take(500)
            .collect::<String>()
    );
    assert_eq!(r.header("content-type"), Some(PROTOBUF));
}

#[tokio::test]
async fn objects_lists_and_status_in_protobuf() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    let ns = "/api/v1/namespaces/default";
    post_json(
        &s,
        &format!("{ns}/configmaps"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pb","labels":{"app":"pb"}},"data":{"greeting":"hello"}}"#,
    )
    .await;

    // One object, for a protobuf-only client.
    let r = s
        .request(
            "GET",
            &format!("{ns}/configmaps/pb"),
            &[("Accept", PROTOBUF)],
            b"",
        )
        .await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, CORE, "k8s.io.api.core.v1.ConfigMap");
    for want in [
        r#"apiVersion: "v1""#,
        r#"kind: "ConfigMap""#,
        r#"name: "pb""#,
        r#"namespace: "default""#,
        r#"key: "greeting""#,
        r#"value: "hello""#,
        r#"contentEncoding: """#,
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }

    // A Deployment with its defaults, in apps/v1.
    let deploy = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
        "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
        "template":{"metadata":{"labels":{"app":"web"}},
        "spec":{"containers":[{"name":"web","image":"nginx"}]}}}}"#;
    post_json(&s, "/apis/apps/v1/namespaces/default/deployments", deploy).await;
    let r = s
        .request(
            "GET",
            "/apis/apps/v1/namespaces/default/deployments/web",
            &[("Accept", PROTOBUF_OR_JSON)],
            b"",
        )
        .await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, APPS, "k8s.io.api.apps.v1.Deployment");
    for want in [
        r#"apiVersion: "apps/v1""#,
        r#"kind: "Deployment""#,
        "replicas: 2",
        r#"type: "RollingUpdate""#,
        "revisionHistoryLimit: 10",
        r#"image: "nginx""#,
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }

    // A list: ListMeta and the items.
    let r = s
        .request(
            "GET",
            &format!("{ns}/configmaps?labelSelector=app%3Dpb"),
            &[("Accept", PROTOBUF_OR_JSON)],
            b"",
        )
        .await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, CORE, "k8s.io.api.core.v1.ConfigMapList");
    assert!(text.contains(r#"kind: "ConfigMapList""#), "{text}");
    assert!(text.contains("resourceVersion: "), "{text}");
    assert!(text.contains("items {"), "{text}");
    assert!(text.contains(r#"name: "pb""#), "{text}");

    // The metadata of a list, as metadata informers ask for it.
    let r = s.request(
        "GET",
        &format!("{ns}/configmaps?labelSelector=app%3Dpb"),
        &[(
            "Accept",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )],
        b"",
    )
    .await;
    assert_protobuf(&r, 200);
    let text = decode(
        &r.body,
        META,
        "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
    );
    assert!(
        text.contains(r#"kind: "PartialObjectMetadataList""#),
        "{text}"
    );
    assert!(text.contains(r#"apiVersion: "meta.k8s.io/v1""#), "{text}");
    assert!(text.contains(r#"name: "pb""#), "{text}");
    assert!(!text.contains(r#"value: "hello""#), "{text}");

    // An error is a protobuf Status.
    let r = s
        .request(
            "GET",
            &format!("{ns}/configmaps/missing"),
            &[("Accept", PROTOBUF)],
            b"",
        )
        .await;
    assert_protobuf(&r, 404);
    let text = decode(&r.body, META, "k8s.io.apimachinery.pkg.apis.meta.v1.Status");
    for want in [
        r#"kind: "Status""#,
        r#"status: "Failure""#,
        r#"reason: "NotFound""#,
        "code: 404",
        r#"message: "configmaps \"missing\" not found""#,
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }

    // A Table has no protobuf form.
    let r = s
        .request(
            "GET",
            &format!("{ns}/configmaps"),
            &[(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
            )],
            b"",
        )
        .await;
    assert_eq!(r.status, 406, "{}", r.text());
    // JSON still answers whoever asks for it.
    let r = s
        .request("GET", &format!("{ns}/configmaps/pb"), &[], b"")
        .await;
    assert_eq!(r.header("content-type"), Some("application/json"));
}

/// Splits a protobuf watch stream into its frames (4-byte big-endian length).
fn frames(mut stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !stream.is_empty() {
        assert!(stream.len() >= 4, "truncated frame header");
        let len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
        assert!(stream.len() >= 4 + len, "truncated frame");
        out.push(&stream[4..4 + len]);
        stream = &stream[4 + len..];
    }
    out
}

/// The value of length-delimited field `number` of a message (the test's
/// own minimal reading of the wire format, to take a nested body out).
fn field_bytes(mut msg: &[u8], number: u64) -> Option<&[u8]> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    }
    while !msg.is_empty() {
        let tag = varint(&mut msg);
        match tag & 7 {
            0 => {
                varint(&mut msg);
            }
            2 => {
                let len = varint(&mut msg) as usize;
                let (value, rest) = msg.split_at(len);
                if tag >> 3 == number {
                    return Some(value);
                }
                msg = rest;
            }
            other => panic!("unexpected wire type {other}"),
        }
    }
    None
}

#[tokio::test]
async fn watch_in_protobuf_frames() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    let ns = "/api/v1/namespaces/default";
    post_json(
        &s,
        &format!("{ns}/configmaps"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"watched"},"data":{"k":"v"}}"#,
    )
    .await;
    let r = s
        .request(
            "GET",
            &format!(
                "{ns}/configmaps?watch=1&timeoutSeconds=2&allowWatchBookmarks=true\
             &sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            ),
            &[(
                "Accept",
                "application/vnd.kubernetes.protobuf;stream=watch, application/json",
            )],
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let frames = frames(&r.body);
    assert!(frames.len() >= 2, "{} frames", frames.len());

    // ADDED, in the group version of the resource.
    let text = decode(
        frames[0],
        META,
        "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
    );
    assert!(text.contains(r#"apiVersion: "v1""#), "{text}");
    assert!(text.contains(r#"kind: "WatchEvent""#), "{text}");
    assert!(text.contains(r#"type: "ADDED""#), "{text}");
    // The event's object is the ConfigMap's own protobuf body.
    let envelope = frames[0].strip_prefix(b"k8s\0").unwrap();
    let event = field_bytes(envelope, 2).expect("raw");
    let object = field_bytes(event, 2).expect("object");
    let raw = field_bytes(object, 1).expect("RawExtension.raw");
    let text = decode(raw, CORE, "k8s.io.api.core.v1.ConfigMap");
    assert!(text.contains(r#"kind: "ConfigMap""#), "{text}");
    assert!(text.contains(r#"name: "watched""#), "{text}");
    assert!(text.contains(r#"value: "v""#), "{text}");

    // The end of the initial events: a bookmark of the kind, annotated.
    let bookmark = frames[1..]
        .iter()
        .find(|f| {
            decode(f, META, "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent")
                .contains(r#"type: "BOOKMARK""#)
        })
        .expect("a bookmark");
    let event = field_bytes(bookmark.strip_prefix(b"k8s\0").unwrap(), 2).unwrap();
    let raw = field_bytes(field_bytes(event, 2).unwrap(), 1).unwrap();
    let text = decode(raw, CORE, "k8s.io.api.core.v1.ConfigMap");
    assert!(text.contains(r#"kind: "ConfigMap""#), "{text}");
    assert!(
        text.contains(r#"key: "k8s.io/initial-events-end""#),
        "{text}"
    );
}

#[tokio::test]
async fn delete_options_in_protobuf() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    let ns = "/api/v1/namespaces/default";
    let owner = post_json(
        &s,
        &format!("{ns}/configmaps"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner","labels":{"set":"a"}}}"#,
    )
    .await;
    let uid = owner["metadata"]["uid"].as_str().unwrap();
    post_json(
        &s,
        &format!("{ns}/configmaps"),
        &format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"child","labels":{{"set":"a"}},
            "ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"{uid}"}}]}}}}"#
        ),
    )
    .await;

    // A dry-run deletecollection: nothing goes.
    let dry = encode(
        r#"typeMeta { apiVersion: "v1" kind: "DeleteOptions" } raw { dryRun: "All" }"#,
        META,
        "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    );
    let r = s
        .request(
            "DELETE",
            &format!("{ns}/configmaps?labelSelector=set%3Da"),
            &[("Content-Type", PROTOBUF), ("Accept", PROTOBUF_OR_JSON)],
            &dry,
        )
        .await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, CORE, "k8s.io.api.core.v1.ConfigMapList");
    assert_eq!(text.matches("items {").count(), 2, "{text}");
    let r = s
        .request("GET", &format!("{ns}/configmaps/owner"), &[], b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Orphan, as client-go (Helm 4) sends it: the options in the group
    // version of the client.
    let orphan = encode(
        r#"typeMeta { apiVersion: "v1" kind: "DeleteOptions" } raw { propagationPolicy: "Orphan" }"#,
        META,
        "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    );
    let r = s
        .request(
            "DELETE",
            &format!("{ns}/configmaps/owner"),
            &[("Content-Type", PROTOBUF), ("Accept", "application/json")],
            &orphan,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answered: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        answered["metadata"]["finalizers"],
        serde_json::json!(["orphan"]),
        "{answered}"
    );
    // The garbage collector orphans the child, then lets the owner go.
    eventually("child orphaned", Duration::from_secs(20), || {
        let out = s.kubectl(&["get", "configmap", "child", "-o", "json"]);
        let child: Value = serde_json::from_slice(&out.stdout).ok()?;
        child["metadata"]["ownerReferences"].is_null().then_some(())
    })
    .await;
    eventually("owner gone", Duration::from_secs(20), || {
        (!s.kubectl(&["get", "configmap", "owner"]).status.success()).then_some(())
    })
    .await;

    // A body that is not protobuf at all is a 400, nothing deleted.
    let r = s
        .request(
            "DELETE",
            &format!("{ns}/configmaps/child"),
            &[("Content-Type", PROTOBUF)],
            b"{\"kind\":\"DeleteOptions\"}",
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = s
        .request("GET", &format!("{ns}/configmaps/child"), &[], b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

const GADGETS: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"gadgets.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced",
    "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

#[tokio::test]
async fn custom_resources_are_not_served_in_protobuf() {
    let s = Server::start().await;
    post_json(
        &s,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        GADGETS,
    )
    .await;
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    eventually("gadgets served", Duration::from_secs(20), || {
        s.kubectl(&["get", "gadgets"])
            .status
            .success()
            .then_some(())
    })
    .await;
    post_json(
        &s,
        gadgets,
        r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"}}"#,
    )
    .await;
    let r = s
        .request("GET", &format!("{gadgets}/g"), &[("Accept", PROTOBUF)], b"")
        .await;
    assert_eq!(r.status, 406, "{}", r.text());
    let status: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml, application/cbor"
    );
    // client-go's protobuf Accept falls back to JSON.
    for path in [format!("{gadgets}/g"), gadgets.to_string()] {
        let r = s
            .request("GET", &path, &[("Accept", PROTOBUF_OR_JSON)], b"")
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    // Their objects are never protobuf bodies...
    let r = s
        .request(
            "POST",
            gadgets,
            &[("Content-Type", PROTOBUF)],
            b"k8s\0\x0a\x00",
        )
        .await;
    assert_eq!(r.status, 415, "{}", r.text());
    // Their metadata is a built-in kind, served in protobuf, and
    // DeleteOptions come in protobuf as for any kind (Helm uninstalling a
    // chart with custom resources), in the resource's group version.
    if protoc_available() {
        let orphan = encode(
            r#"typeMeta { apiVersion: "example.com/v1" kind: "DeleteOptions" } raw { dryRun: "All" }"#,
            META,
            "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        );
        let r = s
            .request(
                "DELETE",
                &format!("{gadgets}/g"),
                &[("Content-Type", PROTOBUF)],
                &orphan,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let r = s.request("GET", &format!("{gadgets}/g"), &[], b"").await;
        assert_eq!(r.status, 200, "dry run deleted it: {}", r.text());
        let r = s.request(
            "GET",
            &format!("{gadgets}/g"),
            &[(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            )],
            b"",
        )
        .await;
        assert_protobuf(&r, 200);
        let text = decode(
            &r.body,
            META,
            "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata",
        );
        assert!(text.contains(r#"kind: "PartialObjectMetadata""#), "{text}");
        assert!(text.contains(r#"name: "g""#), "{text}");
    }
}

/// Helm 4 (its engine through `helm-python-sdk`, installed by
/// tools/install-test-deps.sh): install, upgrade, rollback and uninstall of
/// a tiny chart. Its DELETEs carry protobuf DeleteOptions.
#[tokio::test]
async fn helm_4_release_lifecycle() {
    let s = Server::start().await;
    e2e::run_python_client(&s, "helm4_client.py");
}

/// Request bodies besides objects and DeleteOptions: a subresource (Scale),
/// a virtual kind (SelfSubjectAccessReview) and a TokenRequest, each
/// answered in protobuf.
#[tokio::test]
async fn subresource_review_and_token_bodies_in_protobuf() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    let deploy = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
        "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
        "template":{"metadata":{"labels":{"app":"web"}},
        "spec":{"containers":[{"name":"web","image":"nginx"}]}}}}"#;
    post_json(&s, "/apis/apps/v1/namespaces/default/deployments", deploy).await;
    let pb = [("Content-Type", PROTOBUF), ("Accept", PROTOBUF)];

    const AUTOSCALING: &str = "k8s.io/api/autoscaling/v1/generated.proto";
    let scale = encode(
        r#"typeMeta { apiVersion: "autoscaling/v1" kind: "Scale" }
           raw { metadata { name: "web" namespace: "default" } spec { replicas: 3 } }"#,
        AUTOSCALING,
        "k8s.io.api.autoscaling.v1.Scale",
    );
    let r = s
        .request(
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
            &pb,
            &scale,
        )
        .await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, AUTOSCALING, "k8s.io.api.autoscaling.v1.Scale");
    assert!(text.contains(r#"kind: "Scale""#), "{text}");
    assert!(text.contains("replicas: 3"), "{text}");
    let r = s
        .request(
            "GET",
            "/apis/apps/v1/namespaces/default/deployments/web",
            &[],
            b"",
        )
        .await;
    let got: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(got["spec"]["replicas"], 3, "{got}");

    const AUTHORIZATION: &str = "k8s.io/api/authorization/v1/generated.proto";
    let review = encode(
        r#"typeMeta { apiVersion: "authorization.k8s.io/v1" kind: "SelfSubjectAccessReview" }
           raw { spec { resourceAttributes { verb: "get" resource: "pods" namespace: "default" } } }"#,
        AUTHORIZATION,
        "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
    );
    let r = s
        .request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            &pb,
            &review,
        )
        .await;
    assert_protobuf(&r, 201);
    let text = decode(
        &r.body,
        AUTHORIZATION,
        "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
    );
    assert!(text.contains("allowed: true"), "{text}");

    // An Eviction in protobuf; its deleteOptions reach the Pod's delete.
    s.kubectl_ok(&["run", "evicted", "--image=nginx"]);
    const POLICY: &str = "k8s.io/api/policy/v1/generated.proto";
    let eviction = encode(
        r#"typeMeta { apiVersion: "policy/v1" kind: "Eviction" }
           raw { metadata { name: "evicted" } deleteOptions { gracePeriodSeconds: 0 } }"#,
        POLICY,
        "k8s.io.api.policy.v1.Eviction",
    );
    let r = s
        .request(
            "POST",
            "/api/v1/namespaces/default/pods/evicted/eviction",
            &pb,
            &eviction,
        )
        .await;
    assert_protobuf(&r, 201);
    let text = decode(&r.body, META, "k8s.io.apimachinery.pkg.apis.meta.v1.Status");
    assert!(text.contains(r#"status: "Success""#), "{text}");
    let r = s
        .request("GET", "/api/v1/namespaces/default/pods/evicted", &[], b"")
        .await;
    assert_eq!(r.status, 404, "{}", r.text());

    post_json(
        &s,
        "/api/v1/namespaces/default/serviceaccounts",
        r#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bot"}}"#,
    )
    .await;
    const AUTHENTICATION: &str = "k8s.io/api/authentication/v1/generated.proto";
    let token = encode(
        r#"typeMeta { apiVersion: "authentication.k8s.io/v1" kind: "TokenRequest" }
           raw { spec { audiences: "vault" expirationSeconds: 3600 } }"#,
        AUTHENTICATION,
        "k8s.io.api.authentication.v1.TokenRequest",
    );
    let r = s
        .request(
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/bot/token",
            &pb,
            &token,
        )
        .await;
    assert_protobuf(&r, 201);
    let text = decode(
        &r.body,
        AUTHENTICATION,
        "k8s.io.api.authentication.v1.TokenRequest",
    );
    assert!(text.contains(r#"audiences: "vault""#), "{text}");
    assert!(text.contains(r#"token: "ey"#), "{text}");
}

/// kubectl's typed commands ask for protobuf
/// (`application/vnd.kubernetes.protobuf,application/json`), send protobuf
/// bodies, and decode the protobuf answers.
#[tokio::test]
async fn kubectl_typed_commands_speak_protobuf() {
    let s = Server::start().await;
    post_json(
        &s,
        "/api/v1/namespaces/default/serviceaccounts",
        r#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bot"}}"#,
    )
    .await;
    // -v=8 logs the request and response headers on stderr.
    let answered_in_protobuf = |args: &[&str]| -> String {
        let mut args = args.to_vec();
        args.push("-v=8");
        let out = s.kubectl(&args);
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "kubectl {args:?}: {log}");
        assert!(
            log.contains("Accept: application/vnd.kubernetes.protobuf,application/json"),
            "kubectl {args:?}: {log}"
        );
        assert!(
            log.lines().any(|l| l.contains("round_trippers")
                && l.trim_end()
                    .ends_with("Content-Type: application/vnd.kubernetes.protobuf")
                && !l.contains("round_trippers.go:480")),
            "no protobuf response to kubectl {args:?}: {log}"
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = answered_in_protobuf(&[
        "create",
        "configmap",
        "typed",
        "--from-literal=color=blue",
        "-o",
        "json",
    ]);
    let cm: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(cm["data"]["color"], "blue", "{out}");
    assert_eq!(cm["metadata"]["namespace"], "default", "{out}");
    let token = answered_in_protobuf(&["create", "token", "bot"]);
    assert!(token.trim().starts_with("ey"), "{token}");
    let can = answered_in_protobuf(&["auth", "can-i", "get", "pods"]);
    assert_eq!(can.trim(), "yes");
}

/// Discovery documents in protobuf, legacy and aggregated, as kube serves
/// them to protobuf clients.
#[tokio::test]
async fn discovery_in_protobuf() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "/api",
            "APIVersions",
            &[r#"kind: "APIVersions""#, r#"versions: "v1""#, "clientCIDR"],
        ),
        (
            "/apis",
            "APIGroupList",
            &[
                r#"apiVersion: "v1""#,
                r#"name: "apps""#,
                r#"groupVersion: "apps/v1""#,
            ],
        ),
        (
            "/apis/apps",
            "APIGroup",
            &[r#"name: "apps""#, "preferredVersion {"],
        ),
        (
            "/apis/apps/v1",
            "APIResourceList",
            &[
                r#"groupVersion: "apps/v1""#,
                r#"name: "deployments/scale""#,
                r#"kind: "Scale""#,
                r#"items: "deletecollection""#,
            ],
        ),
    ];
    for (path, kind, wants) in cases {
        let r = s
            .request("GET", path, &[("Accept", PROTOBUF_OR_JSON)], b"")
            .await;
        assert_protobuf(&r, 200);
        let text = decode(
            &r.body,
            META,
            &format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"),
        );
        for want in wants {
            assert!(text.contains(want), "{path}: {want} not in\n{text}");
        }
    }

    // Aggregated discovery, with the JSON's ETag.
    let aggregated =
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let r = s
        .request("GET", "/apis", &[("Accept", aggregated)], b"")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some(aggregated));
    let text = decode(
        &r.body,
        "k8s.io/api/apidiscovery/v2/generated.proto",
        "k8s.io.api.apidiscovery.v2.APIGroupDiscoveryList",
    );
    for want in [
        r#"apiVersion: "apidiscovery.k8s.io/v2""#,
        r#"kind: "APIGroupDiscoveryList""#,
        r#"name: "apps""#,
        r#"resource: "deployments""#,
        r#"subresource: "scale""#,
        r#"freshness: "Current""#,
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    let json = s
        .request(
            "GET",
            "/apis",
            &[(
                "Accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            )],
            b"",
        )
        .await;
    assert_eq!(json.status, 200);
    assert_eq!(r.header("etag"), json.header("etag"));

    // Neither JSON nor protobuf: 406 with a Status naming both.
    let r = s
        .request("GET", "/api/v1", &[("Accept", "application/yaml")], b"")
        .await;
    assert_eq!(r.status, 406);
    let status: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        status["message"].as_str().unwrap().contains(PROTOBUF),
        "{status}"
    );
}

/// A list of more than 256 objects is streamed in chunks (kube streams its
/// list encodings too). Each encoding must still be one whole, valid body:
/// JSON parsed by serde_json, protobuf decoded by protoc with the IDL, CBOR
/// by ciborium, and kubectl reading it. 600 ConfigMaps of 1 KiB make
/// several 256 KiB chunks, so items cross chunk boundaries.
#[tokio::test]
async fn a_long_list_is_streamed_whole_in_each_encoding() {
    if !protoc_available() {
        return;
    }
    let s = Server::start().await;
    s.kubectl_ok(&["create", "namespace", "long"]);
    let filler = "x".repeat(1024);
    for i in 0..600 {
        post_json(
            &s,
            "/api/v1/namespaces/long/configmaps",
            &format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i:03}"}},"data":{{"v":"{filler}"}}}}"#
            ),
        )
        .await;
    }
    let path = "/api/v1/namespaces/long/configmaps";
    let wanted: Vec<String> = (0..600).map(|i| format!("cm-{i:03}")).collect();

    // JSON: chunked, one document, every item in key order.
    let r = s.request("GET", path, &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let list: Value = serde_json::from_slice(&r.body).expect("one JSON document");
    assert_eq!(list["kind"], "ConfigMapList");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some());
    let names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("cm-"))
        .map(str::to_string)
        .collect();
    assert_eq!(names, wanted);
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["kind"] == "ConfigMap" || i.get("kind").is_none()));

    // Protobuf: protoc decodes the whole ConfigMapList.
    let r = s.request("GET", path, &[("Accept", PROTOBUF)], b"").await;
    assert_protobuf(&r, 200);
    let text = decode(&r.body, CORE, "k8s.io.api.core.v1.ConfigMapList");
    let decoded: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name: \"cm-"))
        .collect();
    assert_eq!(decoded.len(), 600, "{}", &text[..text.len().min(2000)]);
    assert!(text.contains(r#"kind: "ConfigMapList""#));
    assert!(text.contains(r#"value: "xxxx"#));

    // CBOR: one self-described item, decoded by ciborium.
    let r = s
        .request("GET", path, &[("Accept", "application/cbor")], b"")
        .await;
    assert_eq!(r.status, 200);
    let item: ciborium::Value = ciborium::from_reader(&r.body[..]).expect("one CBOR item");
    let ciborium::Value::Tag(55799, inner) = item else {
        panic!("no self-described tag")
    };
    let ciborium::Value::Map(entries) = *inner else {
        panic!("not a map")
    };
    let items = entries
        .iter()
        .find(|(k, _)| {
            matches!(k, ciborium::Value::Bytes(b) if b == b"items")
                || matches!(k, ciborium::Value::Text(t) if t == "items")
        })
        .map(|(_, v)| v.as_array().expect("items array").len())
        .expect("items");
    assert_eq!(items, list["items"].as_array().unwrap().len());

    // kubectl reads the streamed JSON list.
    let out = s.kubectl_ok(&["get", "configmaps", "-n", "long", "-o", "name"]);
    let listed = out
        .lines()
        .filter(|l| l.starts_with("configmap/cm-"))
        .count();
    assert_eq!(listed, 600, "{out}");
}

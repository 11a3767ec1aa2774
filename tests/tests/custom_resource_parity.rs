//! Custom resources where kube's custom resource store and CRD OpenAPI
//! builder differ from built-in kinds, through kubectl and raw HTTP
//! (issue 34): an immediate DELETE answers a Success `Status` (a marked
//! one, the object); `/scale` shows the selector string at
//! `labelSelectorPath`, and is a 500 without replicas at
//! `specReplicasPath`; discovery names each resource's
//! `storageVersionHash`; and OpenAPI v2 publishes preserve-unknown-fields
//! nodes without `properties`, so kubectl's client-side validation (which
//! it uses for a `List`) accepts fields the schema keeps.

use e2e::{eventually, Server};
use serde_json::{json, Value};
use std::time::Duration;

const THINGS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.parity.example.com
spec:
  group: parity.example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
            properties:
              replicas: {type: integer}
              size: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

/// A CRD whose whole schema keeps unknown fields (at the root).
const BLOBS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: blobs.parity.example.com
spec:
  group: parity.example.com
  scope: Namespaced
  names: {plural: blobs, singular: blob, kind: Blob}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
"#;

async fn install(server: &Server, crd: &str, plural: &str) {
    server.kubectl_stdin_ok(&["apply", "-f", "-"], crd);
    eventually(&format!("{plural} served"), Duration::from_secs(20), || {
        server
            .kubectl(&["get", plural])
            .status
            .success()
            .then_some(())
    })
    .await;
}

async fn json_of(server: &Server, method: &str, path: &str, body: &str) -> (u16, Value) {
    let ct = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let r = server
        .request(method, path, &[("Content-Type", ct)], body.as_bytes())
        .await;
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

const THINGS_PATH: &str = "/apis/parity.example.com/v1/namespaces/default/things";

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_custom_resource_answers_as_kubes_custom_resource_store() {
    let server = Server::start().await;
    install(&server, THINGS, "things").await;
    let thing = |name: &str| {
        json!({"apiVersion": "parity.example.com/v1", "kind": "Thing",
               "metadata": {"name": name}, "spec": {"replicas": 1}})
        .to_string()
    };

    // Gone at once: a Success Status naming the resource, not the object.
    let (code, created) = json_of(&server, "POST", THINGS_PATH, &thing("a")).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, body) = json_of(&server, "DELETE", &format!("{THINGS_PATH}/a"), "").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "a", "group": "parity.example.com", "kind": "things",
                           "uid": uid}})
    );
    let (code, _) = json_of(&server, "GET", &format!("{THINGS_PATH}/a"), "").await;
    assert_eq!(code, 404);

    // A dry run answers the same and keeps the object.
    json_of(&server, "POST", THINGS_PATH, &thing("b")).await;
    let (code, body) = json_of(
        &server,
        "DELETE",
        &format!("{THINGS_PATH}/b?dryRun=All"),
        "",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Success");
    assert_eq!(body["details"]["name"], "b");
    assert_eq!(
        json_of(&server, "GET", &format!("{THINGS_PATH}/b"), "")
            .await
            .0,
        200
    );

    // kubectl reads either answer.
    let out = server.kubectl_ok(&["delete", "thing", "b"]);
    assert_eq!(out.trim(), "thing.parity.example.com \"b\" deleted");

    // Held by a finalizer: the delete only marks it, and answers the object.
    let held = json!({"apiVersion": "parity.example.com/v1", "kind": "Thing",
                      "metadata": {"name": "c", "finalizers": ["parity.example.com/hold"]},
                      "spec": {"replicas": 1}});
    json_of(&server, "POST", THINGS_PATH, &held.to_string()).await;
    let (code, body) = json_of(&server, "DELETE", &format!("{THINGS_PATH}/c"), "").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "Thing", "{body}");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    json_of(
        &server,
        "PATCH",
        &format!("{THINGS_PATH}/c"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    server
        .wait_gone(Duration::from_secs(10), "c gone", &["get", "thing", "c"])
        .await;

    // deletecollection answers the list of what it deleted (kube's
    // DeleteCollection), for custom resources as for built-in kinds.
    json_of(&server, "POST", THINGS_PATH, &thing("d")).await;
    let (code, body) = json_of(&server, "DELETE", THINGS_PATH, "").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "ThingList", "{body}");
    assert_eq!(body["items"][0]["metadata"]["name"], "d", "{body}");

    // Built-in kinds whose store returns deleted objects (kube's
    // ReturnDeletedObject: ServiceAccounts) keep answering the object.
    server.kubectl_ok(&["create", "serviceaccount", "robot"]);
    let (code, body) = json_of(
        &server,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/robot",
        "",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "ServiceAccount", "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scale_of_a_custom_resource_shows_the_selector_at_label_selector_path() {
    let server = Server::start().await;
    install(&server, THINGS, "things").await;
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: parity.example.com/v1\nkind: Thing\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
    );
    let scale_path = format!("{THINGS_PATH}/web/scale");
    // No selector yet: none in the Scale.
    let scale: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", &scale_path])).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["status"], json!({"replicas": 0}), "{scale}");

    // A controller reports its selector (and replicas) in status.
    json_of(
        &server,
        "PATCH",
        &format!("{THINGS_PATH}/web/status"),
        r#"{"status":{"replicas":2,"selector":"app=web,tier in (front)"}}"#,
    )
    .await;
    let scale: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", &scale_path])).unwrap();
    assert_eq!(
        scale["status"],
        json!({"replicas": 2, "selector": "app=web,tier in (front)"}),
        "{scale}"
    );
    assert_eq!(scale["spec"], json!({"replicas": 2}));

    // kubectl scale writes through /scale; the answer keeps the selector.
    let out = server.kubectl_ok(&["scale", "thing", "web", "--replicas=4"]);
    assert_eq!(out.trim(), "thing.parity.example.com/web scaled");
    assert_eq!(server.get_json(&["thing", "web"])["spec"]["replicas"], 4);
    let (code, scale) = json_of(&server, "PATCH", &scale_path, r#"{"spec":{"replicas":5}}"#).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["selector"], "app=web,tier in (front)");
}

/// A custom resource without replicas at `specReplicasPath` has no Scale
/// to show: kube's `ScaleREST.Get` answers an internal error, and a patch
/// of its Scale must set the replicas (apiextensions-apiserver's
/// `pkg/registry/customresource/etcd.go`).
#[tokio::test(flavor = "multi_thread")]
async fn scale_of_a_custom_resource_without_spec_replicas() {
    let server = Server::start().await;
    install(&server, THINGS, "things").await;
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: parity.example.com/v1\nkind: Thing\nmetadata:\n  name: empty\nspec:\n  size: big\n",
    );
    let scale_path = format!("{THINGS_PATH}/empty/scale");
    let cause = r#"the spec replicas field ".spec.replicas" does not exist"#;
    let (code, status) = json_of(&server, "GET", &scale_path, "").await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure",
            "message": format!("Internal error occurred: {cause}"),
            "reason": "InternalError",
            "details": {"causes": [{"message": cause}]},
            "code": 500
        })
    );
    let (code, out) = server.kubectl_err(&["get", "--raw", &scale_path]);
    assert_ne!(code, 0);
    assert!(out.contains(cause), "{out}");

    // A patch that leaves the replicas unset is refused; one that sets
    // them (kubectl scale) writes them.
    let (code, status) = json_of(
        &server,
        "PATCH",
        &scale_path,
        r#"{"metadata":{"labels":{"a":"b"}}}"#,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        r#"the spec replicas field ".spec.replicas" cannot be empty"#
    );
    assert!(server.get_json(&["thing", "empty"])["spec"]
        .get("replicas")
        .is_none());
    server.kubectl_ok(&["scale", "thing", "empty", "--replicas=3"]);
    let (code, scale) = json_of(&server, "GET", &scale_path, "").await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"], json!({"replicas": 3}));
    assert_eq!(server.get_json(&["thing", "empty"])["spec"]["size"], "big");
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_names_storage_version_hashes() {
    let server = Server::start().await;
    install(&server, THINGS, "things").await;
    let core: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/api/v1"])).unwrap();
    let find = |doc: &Value, name: &str| -> Value {
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    // kube's values (its own table of them, storageversionhashdata).
    assert_eq!(find(&core, "pods")["storageVersionHash"], "xPOwRZ+Yhw8=");
    assert_eq!(
        find(&core, "configmaps")["storageVersionHash"],
        "qFsyl6wFWjQ="
    );
    assert!(find(&core, "pods/status")
        .get("storageVersionHash")
        .is_none());
    assert!(find(&core, "bindings").get("storageVersionHash").is_none());
    let apps: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/apis/apps/v1"])).unwrap();
    assert_eq!(
        find(&apps, "deployments")["storageVersionHash"],
        "8aSe+NMegvE="
    );
    // A custom resource's: of its storage version's group/version/kind
    // (base64 of the first 8 bytes of SHA-256 of
    // "parity.example.com/v1/Thing").
    let custom: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/apis/parity.example.com/v1"]))
            .unwrap();
    assert_eq!(
        find(&custom, "things")["storageVersionHash"],
        "2b7iKhlGH4A="
    );
    assert!(find(&custom, "things/scale")
        .get("storageVersionHash")
        .is_none());
    // kubectl's discovery (aggregated, which has no such field) still works.
    let names = server.kubectl_ok(&[
        "api-resources",
        "--api-group=parity.example.com",
        "-o",
        "name",
    ]);
    assert_eq!(names.trim(), "things.parity.example.com");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_validates_preserved_unknown_fields_as_kube_publishes_them() {
    let server = Server::start().await;
    install(&server, THINGS, "things").await;
    install(&server, BLOBS, "blobs").await;

    // OpenAPI v2 as kube's builder publishes it: no properties (and no
    // type) at a preserve-unknown-fields node, a bare object at the root.
    let v2: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    let defs = &v2["definitions"];
    let thing = &defs["com.example.parity.v1.Thing"];
    assert_eq!(
        thing["properties"]["spec"],
        json!({"x-kubernetes-preserve-unknown-fields": true}),
        "{thing}"
    );
    assert!(thing["properties"]["metadata"].is_object(), "{thing}");
    assert_eq!(
        defs["com.example.parity.v1.Blob"],
        json!({"type": "object", "x-kubernetes-group-version-kind":
               [{"group": "parity.example.com", "kind": "Blob", "version": "v1"}]})
    );
    // v3 keeps the schema as written.
    let v3: Value = serde_json::from_str(&server.kubectl_ok(&[
        "get",
        "--raw",
        "/openapi/v3/apis/parity.example.com/v1",
    ]))
    .unwrap();
    let spec3 = &v3["components"]["schemas"]["com.example.parity.v1.Thing"]["properties"]["spec"];
    assert!(spec3["properties"]["size"].is_object(), "{spec3}");

    // One object (kubectl validates it on the server) and a List (kubectl
    // validates its items itself, against OpenAPI v2), fields beyond the
    // schema included.
    let extra = "apiVersion: parity.example.com/v1\nkind: Thing\nmetadata:\n  name: one\nspec:\n  replicas: 1\n  extra: kept\n";
    server.kubectl_stdin_ok(&["apply", "-f", "-"], extra);
    let list = r#"
apiVersion: v1
kind: List
items:
- apiVersion: parity.example.com/v1
  kind: Thing
  metadata: {name: two}
  spec:
    replicas: 1
    nested: {deep: [1, 2]}
- apiVersion: parity.example.com/v1
  kind: Blob
  metadata: {name: b}
  spec: {color: red}
  anything: {goes: here}
"#;
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], list);
    assert!(
        out.contains("thing.parity.example.com/two created"),
        "{out}"
    );
    assert!(out.contains("blob.parity.example.com/b created"), "{out}");
    assert_eq!(server.get_json(&["thing", "one"])["spec"]["extra"], "kept");
    assert_eq!(
        server.get_json(&["thing", "two"])["spec"]["nested"],
        json!({"deep": [1, 2]})
    );
    assert_eq!(
        server.get_json(&["blob", "b"])["anything"],
        json!({"goes": "here"})
    );
    // Where the schema does not keep unknown fields, kubectl still calls
    // them unknown (status has properties and no preserve).
    let bad = r#"
apiVersion: v1
kind: List
items:
- apiVersion: parity.example.com/v1
  kind: Thing
  metadata: {name: three}
  status: {bogus: 1}
"#;
    let (_, err) = server.kubectl_stdin_err(&["apply", "-f", "-"], bad);
    assert!(
        err.contains("unknown field \"bogus\" in com.example.parity.v1.Thing.status"),
        "{err}"
    );
}

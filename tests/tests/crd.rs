//! CustomResourceDefinitions end to end through clients nobody here wrote:
//! kubectl (apply, wait, printer columns, field selectors, scale, explain,
//! `get all`, delete), the `kube` crate's `CustomResource` derive (its
//! generated CRD, server-side apply, `/status`, `/scale`), the Python
//! client's `CustomObjectsApi`, and two replicas (a CRD created through one
//! is served by the other, and its removal stops serving on both).

use e2e::{eventually, Server};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    selectableFields:
    - jsonPath: .spec.color
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn widget(name: &str, color: &str, replicas: i64) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  color: {color}\n  replicas: {replicas}\n"
    )
}

fn established(server: &Server, crd: &str) -> bool {
    server
        .kubectl(&[
            "wait",
            "--for=condition=established",
            "--timeout=10s",
            &format!("crd/{crd}"),
        ])
        .status
        .success()
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_drives_a_crd_and_its_custom_resources() {
    let server = Server::start().await;
    server.kubectl_stdin_ok(&["apply", "-f", "-"], WIDGETS);
    assert!(
        established(&server, "widgets.example.com"),
        "{}",
        server.log()
    );

    // Served within moments of Established (this replica's registry).
    eventually("widgets served", Duration::from_secs(10), || {
        server
            .kubectl(&["get", "widgets"])
            .status
            .success()
            .then_some(())
    })
    .await;
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &widget("blue", "blue", 2));
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &widget("red", "red", 1));

    // Printer columns, with a filtered JSONPath and a short name.
    let table = server.kubectl_ok(&["get", "wd"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "COLOR", "REPLICAS", "READY"], "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["blue", "blue", "2"]),
        "{table}"
    );

    // selectableFields are field selectors.
    let blue = server.kubectl_ok(&[
        "get",
        "widgets",
        "--field-selector",
        "spec.color=blue",
        "-o",
        "name",
    ]);
    assert_eq!(blue.trim(), "widget.example.com/blue");
    let (code, err) = server.kubectl_err(&["get", "widgets", "--field-selector", "spec.size=1"]);
    assert_ne!(code, 0);
    assert!(err.contains("field label not supported"), "{err}");

    // /scale through kubectl.
    server.kubectl_ok(&["scale", "widget", "blue", "--replicas=5"]);
    let v = server.get_json(&["widget", "blue"]);
    assert_eq!(v["spec"]["replicas"], 5);

    // The deprecated version serves the same object in its own apiVersion,
    // with a warning.
    let out = server.kubectl(&["get", "widgets.v1beta1.example.com", "blue", "-o", "json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "example.com/v1beta1");
    assert_eq!(v["spec"]["color"], "blue");
    let warn = String::from_utf8_lossy(&out.stderr);
    assert!(
        warn.contains("example.com/v1beta1 Widget is deprecated"),
        "{warn}"
    );

    // Categories: `kubectl get all` lists widgets.
    let all = server.kubectl_ok(&["get", "all", "-o", "name"]);
    assert!(all.contains("widget.example.com/blue"), "{all}");

    // explain reads the CRD's schema from OpenAPI.
    let explained = server.kubectl_ok(&["explain", "widgets.spec"]);
    assert!(explained.contains("color"), "{explained}");
    assert!(explained.contains("replicas"), "{explained}");

    // Deleting the CRD deletes its custom resources, then the CRD; the
    // endpoints go away.
    server.kubectl_ok(&["delete", "crd", "widgets.example.com", "--wait=true"]);
    eventually("CRD gone", Duration::from_secs(15), || {
        let (code, err) = server.kubectl_err(&["get", "crd", "widgets.example.com"]);
        (code != 0 && err.contains("NotFound")).then_some(())
    })
    .await;
    let (code, _) = server.kubectl_err(&["get", "widgets"]);
    assert_ne!(code, 0);
    // Re-created, it starts empty: the old objects were removed from etcd.
    server.kubectl_stdin_ok(&["apply", "-f", "-"], WIDGETS);
    assert!(established(&server, "widgets.example.com"));
    eventually("widgets served again", Duration::from_secs(10), || {
        let out = server.kubectl(&["get", "widgets", "-o", "name"]);
        (out.status.success() && out.stdout.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_created_on_one_replica_is_served_by_the_other() {
    let etcd = TestEtcd::shared().await;
    let prefix = e2e::unique_prefix();
    let a = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    let b = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[]).await;
    a.kubectl_stdin_ok(&["apply", "-f", "-"], WIDGETS);
    // Whichever replica leads writes Established; both serve.
    assert!(established(&b, "widgets.example.com"), "{}", b.log());
    eventually("served on b", Duration::from_secs(5), || {
        b.kubectl(&["get", "widgets"])
            .status
            .success()
            .then_some(())
    })
    .await;
    b.kubectl_stdin_ok(&["apply", "-f", "-"], &widget("w", "green", 1));
    let on_a = a.get_json(&["widget", "w"]);
    assert_eq!(on_a["spec"]["color"], "green");
    // Discovery of both replicas lists the group.
    for s in [&a, &b] {
        let groups = s.kubectl_ok(&["api-resources", "--api-group=example.com", "-o", "name"]);
        assert_eq!(groups.trim(), "widgets.example.com");
    }
    b.kubectl_ok(&["delete", "crd", "widgets.example.com"]);
    for s in [&a, &b] {
        eventually("widgets gone", Duration::from_secs(15), || {
            let (code, _) = s.kubectl_err(&["get", "widgets"]);
            (code != 0).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn python_custom_objects_api() {
    let server = Server::start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/crd_python.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&server.url)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

/// A kind declared with the `kube` crate's derive, as operators do.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "kube.example.com",
    version = "v1",
    kind = "Document",
    namespaced,
    status = "DocumentStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn = r#"{"name":"Title", "type":"string", "jsonPath":".spec.title"}"#
)]
pub struct DocumentSpec {
    title: String,
    replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, Default)]
pub struct DocumentStatus {
    replicas: i32,
    published: bool,
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_custom_resource_derive() {
    let server = Server::start().await;
    let url = server.url.parse().expect("server url");
    let client = Client::try_from(kube::Config::new(url)).expect("kube client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &Document::crd())
        .await
        .expect("create the derived CRD");
    let name = "documents.kube.example.com";
    let docs: Api<Document> = Api::namespaced(client.clone(), "default");
    let ready = async {
        loop {
            let crd = crds.get(name).await.expect("get crd");
            let est = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if est && docs.list(&Default::default()).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), ready)
        .await
        .expect("the derived CRD is established and served");

    // Server-side apply of a typed custom resource.
    let params = PatchParams::apply("kube-derive-e2e");
    let doc = Document::new(
        "guide",
        DocumentSpec {
            title: "Guide".into(),
            replicas: 1,
            tags: vec!["a".into()],
        },
    );
    let applied = docs
        .patch("guide", &params, &Patch::Apply(&doc))
        .await
        .expect("apply");
    assert_eq!(applied.spec.title, "Guide");
    assert_eq!(applied.metadata.generation, Some(1));
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["kube-derive-e2e"]);

    // /status: a status write does not move generation.
    let status = serde_json::json!({"status": {"replicas": 1, "published": true}});
    let st = docs
        .patch_status("guide", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");
    assert!(st.status.as_ref().is_some_and(|s| s.published));
    assert_eq!(st.metadata.generation, Some(1));

    // /scale.
    let scale = docs.get_scale("guide").await.expect("get scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));
    let patch = serde_json::json!({"spec": {"replicas": 3}});
    docs.patch_scale("guide", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch scale");
    let read = docs.get("guide").await.expect("get");
    assert_eq!(read.spec.replicas, 3);
    assert_eq!(read.metadata.generation, Some(2));
    assert!(read.status.is_some_and(|s| s.published));
}

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
    e2e::run_python_client(&server, "crd_python.py");
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

const RANGES: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "ranges.example.com"},
  "spec": {
    "group": "example.com",
    "scope": "Namespaced",
    "names": {"plural": "ranges", "kind": "Range"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {
            "type": "object",
            "x-kubernetes-validations": [
              {"rule": "self.min <= self.max", "message": "min must not exceed max"},
              {"rule": "self.max >= oldSelf.max",
               "messageExpression": "'max may only grow, was %d'.format([oldSelf.max])"}
            ],
            "properties": {
              "min": {"type": "integer", "minimum": 0},
              "max": {"type": "integer", "default": 10},
              "mode": {"type": "string", "enum": ["a", "b"]},
              "floor": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                 "optionalOldSelf": true, "message": "floor may not drop",
                 "reason": "FieldValueForbidden"}]},
              "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
            }
          }
        }
      }}
    }]
  }
}"#;

async fn post(server: &Server, path: &str, body: &str) -> (u16, serde_json::Value, Vec<String>) {
    let r = server
        .http(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .await
        .expect("request");
    let warnings = r
        .headers
        .iter()
        .filter(|(n, _)| n == "warning")
        .map(|(_, v)| v.clone())
        .collect();
    let v = serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null);
    (r.status, v, warnings)
}

/// A merge patch that must answer `code`; its body.
async fn merge_patch(server: &Server, path: &str, body: &str, code: u16) -> serde_json::Value {
    let r = server
        .http(
            "PATCH",
            path,
            &[("Content-Type", "application/merge-patch+json")],
            body.as_bytes(),
        )
        .await
        .expect("request");
    assert_eq!(r.status, code, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null)
}

fn causes(status: &serde_json::Value) -> Vec<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["field"].as_str().unwrap_or("").to_string(),
                        c["message"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn schemas_and_cel_rules_validate_custom_resources() {
    let server = Server::start().await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

    // An invalid CRD: 422 with kube's wording, nothing stored.
    let bad = RANGES
        .replace(
            "\"name\": \"ranges.example.com\"",
            "\"name\": \"wrong.example.com\"",
        )
        .replace(
            "\"type\": \"object\",\n            \"x-kubernetes-validations\"",
            "\"x-kubernetes-validations\"",
        );
    let (code, status, _) = post(&server, crds, &bad).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let c = causes(&status);
    assert!(
        c.contains(&(
            "metadata.name".into(),
            "Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group"
                .into()
        )),
        "{c:?}"
    );
    assert!(
        c.iter().any(|(f, m)| f.ends_with("properties[spec].type")
            && m == "Required value: must not be empty for specified object fields"),
        "{c:?}"
    );
    // A rule that does not compile.
    let uncompilable = RANGES.replace("self.min <= self.max", "self.min <=");
    let (code, status, _) = post(&server, crds, &uncompilable).await;
    assert_eq!(code, 422, "{status}");
    let c = causes(&status);
    assert!(
        c.iter().any(|(f, m)| f
            == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
            && m.contains("compilation failed")),
        "{c:?}"
    );
    let (code, _, _) = post(&server, crds, RANGES).await;
    assert_eq!(code, 201);
    let crd = server.get_json(&["crd", "ranges.example.com"]);
    // kube's defaults.
    assert_eq!(crd["spec"]["names"]["singular"], "range");
    assert_eq!(crd["spec"]["names"]["listKind"], "RangeList");
    assert_eq!(crd["spec"]["conversion"]["strategy"], "None");
    assert!(established(&server, "ranges.example.com"));
    let ranges = "/apis/example.com/v1/namespaces/default/ranges";
    eventually("ranges served", Duration::from_secs(10), || {
        server
            .kubectl(&["get", "ranges"])
            .status
            .success()
            .then_some(())
    })
    .await;
    let range = |name: &str, spec: &str| {
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Range","metadata":{{"name":"{name}"}},"spec":{spec}}}"#
        )
    };

    // Schema errors: every failing field, 422.
    let (code, status, _) = post(
        &server,
        ranges,
        &range("r", r#"{"min":-1,"mode":"c","tags":["x","x"]}"#),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let c = causes(&status);
    for want in [
        (
            "spec.min",
            "Invalid value: -1: spec.min in body should be greater than or equal to 0",
        ),
        (
            "spec.mode",
            "Unsupported value: \"c\": supported values: \"a\", \"b\"",
        ),
        ("spec.tags[1]", "Duplicate value: \"x\""),
    ] {
        assert!(
            c.contains(&(want.0.into(), want.1.into())),
            "{want:?} not in {c:?}"
        );
    }
    // A type error.
    let (code, status, _) = post(&server, ranges, &range("r", r#"{"min":"x"}"#)).await;
    assert_eq!(code, 422, "{status}");
    assert!(causes(&status).contains(&(
        "spec.min".into(),
        "Invalid value: \"string\": spec.min in body must be of type integer: \"string\"".into()
    )));
    // A CEL rule (max defaults to 10).
    let (code, status, _) = post(&server, ranges, &range("r", r#"{"min":11}"#)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [(
            "spec".to_string(),
            "Invalid value: \"object\": min must not exceed max".to_string()
        )]
    );
    assert_eq!(
        status["message"],
        "Range.example.com \"r\" is invalid: spec: Invalid value: \"object\": min must not exceed max"
    );
    // Pruning (reported under Warn) and defaulting.
    let (code, made, warnings) = post(
        &server,
        &format!("{ranges}?fieldValidation=Warn"),
        &range("r", r#"{"min":2,"extra":true}"#),
    )
    .await;
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["spec"], serde_json::json!({"min": 2, "max": 10}));
    assert_eq!(warnings, ["299 - \"unknown field \\\"spec.extra\\\"\""]);
    // A transition rule with messageExpression on update.
    let status = merge_patch(
        &server,
        &format!("{ranges}/r"),
        r#"{"spec":{"max":5}}"#,
        422,
    )
    .await;
    assert_eq!(
        causes(&status),
        [(
            "spec".to_string(),
            "Invalid value: \"object\": max may only grow, was 10".to_string()
        )]
    );
    // Nothing stored changed.
    let stored = server.get_json(&["range", "r"]);
    assert_eq!(stored["spec"]["max"], 10);
    // optionalOldSelf: the rule runs on create too (oldSelf is none).
    let (code, made, _) = post(&server, ranges, &range("f", r#"{"min":0,"floor":3}"#)).await;
    assert_eq!(code, 201, "{made}");
    let status = merge_patch(
        &server,
        &format!("{ranges}/f"),
        r#"{"spec":{"floor":2}}"#,
        422,
    )
    .await;
    assert_eq!(
        causes(&status),
        [(
            "spec.floor".to_string(),
            "Forbidden: floor may not drop".to_string()
        )]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn defaults_added_to_a_crd_show_on_objects_stored_before() {
    let server = Server::start().await;
    let crd = |with_default: bool| {
        let size = if with_default {
            r#"{"type": "string", "default": "medium"}"#
        } else {
            r#"{"type": "string"}"#
        };
        format!(
            r#"{{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {{"name": "shirts.example.com"}},
  "spec": {{"group": "example.com", "scope": "Namespaced",
    "names": {{"plural": "shirts", "kind": "Shirt"}},
    "versions": [{{"name": "v1", "served": true, "storage": true,
      "schema": {{"openAPIV3Schema": {{"type": "object", "properties": {{
        "spec": {{"type": "object", "properties": {{"color": {{"type": "string"}}, "size": {size}}}}}}}}}}}}}]}}}}"#
        )
    };
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &crd(false));
    assert!(established(&server, "shirts.example.com"));
    eventually("shirts served", Duration::from_secs(10), || {
        server
            .kubectl(&["get", "shirts"])
            .status
            .success()
            .then_some(())
    })
    .await;
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Shirt\nmetadata: {name: s}\nspec: {color: red}\n",
    );
    assert_eq!(
        server.get_json(&["shirt", "s"])["spec"],
        serde_json::json!({"color": "red"})
    );
    // The schema gains a default: reads show it, as kube's do.
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &crd(true));
    let want = serde_json::json!({"color": "red", "size": "medium"});
    eventually("default on read", Duration::from_secs(10), || {
        (server.get_json(&["shirt", "s"])["spec"] == want).then_some(())
    })
    .await;
    assert_eq!(server.get_json(&["shirts"])["items"][0]["spec"], want);
    let w = server
        .http(
            "GET",
            "/apis/example.com/v1/namespaces/default/shirts?watch=1&timeoutSeconds=1",
            &[],
            b"",
        )
        .await
        .unwrap();
    let first: serde_json::Value = serde_json::from_str(w.text().lines().next().unwrap()).unwrap();
    assert_eq!(first["object"]["spec"], want);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_taken_by_another_crd_is_not_accepted() {
    let server = Server::start().await;
    server.kubectl_stdin_ok(&["apply", "-f", "-"], WIDGETS);
    assert!(established(&server, "widgets.example.com"));
    // Another CRD of the group asks for the plural `widgets` under its
    // own name: kube's naming controller refuses the name.
    let rival = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gizmos.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Widget", "listKind": "GizmoList"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;
    server.kubectl_stdin_ok(&["apply", "-f", "-"], rival);
    let cond = eventually("NamesAccepted written", Duration::from_secs(10), || {
        let crd = server.get_json(&["crd", "gizmos.example.com"]);
        crd["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "NamesAccepted")
            .cloned()
    })
    .await;
    assert_eq!(cond["status"], "False", "{cond}");
    assert_eq!(cond["reason"], "KindConflict");
    assert_eq!(cond["message"], "\"Widget\" is already in use");
    let crd = server.get_json(&["crd", "gizmos.example.com"]);
    let established = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Established")
        .cloned()
        .unwrap();
    assert_eq!(established["status"], "False");
    assert_eq!(established["reason"], "NotAccepted");
    // Not served; the first CRD's widgets still are.
    let (code, _) = server.kubectl_err(&["get", "gizmos"]);
    assert_ne!(code, 0);
    server.kubectl_ok(&["get", "widgets"]);
}

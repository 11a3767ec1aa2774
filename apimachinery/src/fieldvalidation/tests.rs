//! Tests of the whole module against the built-in schema, with the bodies
//! and expected messages of kube-apiserver's own field validation tests
//! (`test/integration/apiserver/field_validation_test.go`).

use super::*;
use crate::schema::{builtin, Schema};
use proptest::prelude::*;
use serde_json::json;

fn deployment() -> TypeRef<'static> {
    builtin().by_gvk("apps", "v1", "Deployment").unwrap()
}

fn kind(group: &str, version: &str, kind: &str) -> TypeRef<'static> {
    builtin().by_gvk(group, version, kind).unwrap()
}

fn json_body(v: &Value) -> Decoded {
    decode_json(serde_json::to_string(v).unwrap().as_bytes()).unwrap()
}

const INVALID_DEPLOYMENT_JSON: &str = r#"
	{
		"apiVersion": "apps/v1",
		"kind": "Deployment",
		"metadata": {
			"name": "dupename",
			"name": "test-dep",
			"labels": {"app": "nginx"},
			"unknownMeta": "metaVal"
		},
		"spec": {
			"unknown1": "val1",
			"unknownDupe": "valDupe",
			"unknownDupe": "valDupe2",
			"paused": true,
			"paused": false,
			"selector": {
				"matchLabels": {
					"app": "nginx"
				}
			},
			"template": {
				"metadata": {
					"labels": {
						"app": "nginx"
					}
				},
				"spec": {
					"containers": [{
						"name":  "nginx",
						"image": "nginx:latest",
						"unknownNested": "val1",
						"imagePullPolicy": "Always",
						"imagePullPolicy": "Never"
					}]
				}
			}
		}
	}
		"#;

const INVALID_DEPLOYMENT_YAML: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: dupename
  name: test-dep
  unknownMeta: metaVal
  labels:
    app: nginx
spec:
  unknown1: val1
  unknownDupe: valDupe
  unknownDupe: valDupe2
  paused: true
  paused: false
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:latest
        unknownNested: val1
        imagePullPolicy: Always
        imagePullPolicy: Never";

const KUBE_JSON_STRICT: &str = r#"strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta", unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", duplicate field "spec.template.spec.containers[0].imagePullPolicy""#;

const KUBE_YAML_STRICT: &str = "strict decoding error: yaml: unmarshal errors:
  line 5: key \"name\" already set in map
  line 12: key \"unknownDupe\" already set in map
  line 14: key \"paused\" already set in map
  line 28: key \"imagePullPolicy\" already set in map, unknown field \"metadata.unknownMeta\", unknown field \"spec.template.spec.containers[0].unknownNested\", unknown field \"spec.unknown1\", unknown field \"spec.unknownDupe\"";

// ---------------------------------------------------------------------------
// The policy on kube's fixtures.

#[test]
fn json_strict_matches_kube() {
    let d = decode_json(INVALID_DEPLOYMENT_JSON.as_bytes()).unwrap();
    assert_eq!(
        d.duplicates,
        vec![
            "metadata.name",
            "spec.unknownDupe",
            "spec.paused",
            "spec.template.spec.containers[0].imagePullPolicy"
        ]
    );
    // Last value wins.
    assert_eq!(d.value["metadata"]["name"], "test-dep");
    assert_eq!(d.value["spec"]["paused"], false);
    let err = check(FieldValidationLevel::Strict, Some(deployment()), &d).unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(err.reason, "BadRequest");
    assert_eq!(
        err.message,
        format!(
            "Deployment in version \"v1\" cannot be handled as a Deployment: {KUBE_JSON_STRICT}"
        )
    );
}

#[test]
fn json_warn_matches_kube() {
    let d = decode_json(INVALID_DEPLOYMENT_JSON.as_bytes()).unwrap();
    let warnings = check(FieldValidationLevel::Warn, Some(deployment()), &d).unwrap();
    assert_eq!(
        warnings,
        vec![
            r#"duplicate field "metadata.name""#,
            r#"unknown field "metadata.unknownMeta""#,
            r#"unknown field "spec.unknown1""#,
            r#"unknown field "spec.unknownDupe""#,
            r#"duplicate field "spec.paused""#,
            r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
            r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
        ]
    );
    assert_eq!(
        check(FieldValidationLevel::Ignore, Some(deployment()), &d).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn yaml_strict_matches_kube() {
    let d = decode_yaml(INVALID_DEPLOYMENT_YAML.as_bytes()).unwrap();
    assert_eq!(
        d.duplicates,
        vec![
            "line 5: key \"name\" already set in map",
            "line 12: key \"unknownDupe\" already set in map",
            "line 14: key \"paused\" already set in map",
            "line 28: key \"imagePullPolicy\" already set in map",
        ]
    );
    let err = check(FieldValidationLevel::Strict, Some(deployment()), &d).unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "Deployment in version \"v1\" cannot be handled as a Deployment: {KUBE_YAML_STRICT}"
        )
    );
}

#[test]
fn yaml_warn_matches_kube() {
    let d = decode_yaml(INVALID_DEPLOYMENT_YAML.as_bytes()).unwrap();
    let warnings = check(FieldValidationLevel::Warn, Some(deployment()), &d).unwrap();
    assert_eq!(
        warnings,
        vec![
            "line 5: key \"name\" already set in map",
            "line 12: key \"unknownDupe\" already set in map",
            "line 14: key \"paused\" already set in map",
            "line 28: key \"imagePullPolicy\" already set in map",
            "unknown field \"metadata.unknownMeta\"",
            "unknown field \"spec.template.spec.containers[0].unknownNested\"",
            "unknown field \"spec.unknown1\"",
            "unknown field \"spec.unknownDupe\"",
        ]
    );
}

#[test]
fn yaml_and_json_decode_to_the_same_object() {
    let y = decode_yaml(INVALID_DEPLOYMENT_YAML.as_bytes()).unwrap();
    let j = decode_json(INVALID_DEPLOYMENT_JSON.as_bytes()).unwrap();
    assert_eq!(y.value, j.value);
    // YAML objects come out with sorted keys, as sigs.k8s.io/yaml makes them.
    let keys: Vec<&String> = y.value.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec"]);
}

#[test]
fn valid_bodies_have_no_warnings() {
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "x"}, "annotations": {"a.b/c": "d"},
                     "creationTimestamp": null},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "x"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{
                    "name": "c", "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"},
                                  "requests": {"cpu": 0.25}},
                    "env": [{"name": "A", "value": "1"}]
                }]}
            }
        },
        "status": {}
    });
    let d = json_body(&body);
    assert!(d.duplicates.is_empty());
    assert_eq!(
        check(FieldValidationLevel::Strict, Some(deployment()), &d).unwrap(),
        Vec::<String>::new()
    );
    assert!(unknown_fields(deployment(), &d.value).is_empty());
    assert!(type_errors(deployment(), &d.value).is_empty());
}

#[test]
fn unknown_fields_in_nested_structures() {
    let pod = kind("", "v1", "Pod");
    let body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"anything": "goes"}, "bogus": 1},
        "spec": {
            "containers": [
                {"name": "a", "image": "x"},
                {"name": "b", "image": "y", "imagePullPolicyy": "Always",
                 "ports": [{"containerPort": 1, "hostPortt": 2}],
                 "resources": {"limits": {"cpu": "1"}, "limitz": {}}}
            ],
            "volumes": [{"name": "v", "configMap": {"name": "c", "itemz": []}}]
        }
    });
    assert_eq!(
        unknown_fields(pod, &body),
        vec![
            "metadata.bogus",
            "spec.containers[1].imagePullPolicyy",
            "spec.containers[1].ports[0].hostPortt",
            "spec.containers[1].resources.limitz",
            "spec.volumes[0].configMap.itemz",
        ]
    );
}

#[test]
fn duplicates_at_several_depths() {
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","apiVersion":"v1",
        "metadata":{"name":"a","labels":{"x":"1","x":"2"},"name":"b"},
        "data":{"k":"1","k":"2"},
        "binaryData":{},
        "immutable":false}"#;
    let d = decode_json(body).unwrap();
    assert_eq!(
        d.duplicates,
        vec!["apiVersion", "metadata.labels.x", "metadata.name", "data.k"]
    );
    let cm = kind("", "v1", "ConfigMap");
    let warnings = check(FieldValidationLevel::Warn, Some(cm), &d).unwrap();
    assert_eq!(
        warnings,
        vec![
            r#"duplicate field "apiVersion""#,
            r#"duplicate field "metadata.labels.x""#,
            r#"duplicate field "metadata.name""#,
            r#"duplicate field "data.k""#,
        ]
    );
    // The object keeps one member per key, in the order of their last
    // occurrence.
    let keys: Vec<&String> = d.value.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "kind",
            "apiVersion",
            "metadata",
            "data",
            "binaryData",
            "immutable"
        ]
    );
    assert_eq!(
        d.value["metadata"],
        json!({"labels": {"x": "2"}, "name": "b"})
    );
}

#[test]
fn duplicates_inside_arrays_carry_indices() {
    let d =
        decode_json(br#"{"spec":{"containers":[{"name":"a"},{"name":"b","name":"c"}]}}"#).unwrap();
    assert_eq!(d.duplicates, vec!["spec.containers[1].name"]);
}

#[test]
fn a_replaced_duplicate_keeps_its_inner_duplicates() {
    // The first `spec` had a duplicate of its own; kube met it first.
    let d =
        decode_json(br#"{"spec":{"paused":true,"paused":false},"spec":{"replicas":1}}"#).unwrap();
    assert_eq!(d.duplicates, vec!["spec.paused", "spec"]);
    assert_eq!(
        strict_errors(Some(deployment()), &d),
        vec![
            r#"duplicate field "spec.paused""#,
            r#"duplicate field "spec""#
        ]
    );
}

#[test]
fn untyped_subtrees_accept_anything() {
    let cr = kind("apps", "v1", "ControllerRevision");
    let body = json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "r"}, "revision": 1,
        "data": {"whatever": [1, {"deep": true}], "spec": "x"}
    });
    assert!(unknown_fields(cr, &body).is_empty());
    assert!(type_errors(cr, &body).is_empty());
    // Duplicates inside a RawExtension are not decoded strictly by Go.
    let d = decode_json(
        br#"{"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"name":"r"},"revision":1,"data":{"a":1,"a":2}}"#,
    )
    .unwrap();
    assert_eq!(d.duplicates, vec!["data.a"]);
    assert!(strict_errors(Some(cr), &d).is_empty());
}

/// A custom resource like kube's test CRD: a schema with
/// `x-kubernetes-preserve-unknown-fields` in places.
fn crd_schema() -> Schema {
    let defs = json!({
        "example.com.v1.Widget": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"$ref": "#/definitions/meta.ObjectMeta"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "knownField1": {"type": "string"},
                        "ports": {"type": "array", "items": {
                            "type": "object",
                            "properties": {
                                "containerPort": {"type": "integer", "format": "int32"},
                                "hostPort": {"type": "integer", "format": "int32"},
                                "name": {"type": "string"},
                                "protocol": {"type": "string"}
                            }
                        }},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "half": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"n": {"type": "integer"}}}
                    }
                }
            }
        },
        "meta.ObjectMeta": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "resourceVersion": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        }
    });
    let Value::Object(defs) = defs else {
        unreachable!()
    };
    Schema::new(defs)
}

const CRD_INVALID_JSON: &str = r#"
{
	"apiVersion": "example.com/v1",
	"kind": "Widget",
	"metadata": {
		"name": "dupename",
		"name": "w",
		"unknownMeta": "metaVal",
		"resourceVersion": "1"
	},
	"spec": {
		"unknown1": "val1",
		"unknownDupe": "valDupe",
		"unknownDupe": "valDupe2",
		"knownField1": "val1",
		"knownField1": "val2",
			"ports": [{
				"name": "portName",
				"containerPort": 8080,
				"protocol": "TCP",
				"hostPort": 8081,
				"hostPort": 8082,
				"unknownNested": "val"
			}]
	}
}"#;

const CRD_INVALID_YAML: &str = r#"
apiVersion: "example.com/v1"
kind: "Widget"
metadata:
  name: dupename
  name: "w"
  resourceVersion: "1"
  unknownMeta: metaVal
spec:
  unknown1: val1
  unknownDupe: valDupe
  unknownDupe: valDupe2
  knownField1: val1
  knownField1: val2
  ports:
  - name: portName
    containerPort: 8080
    protocol: TCP
    hostPort: 8081
    hostPort: 8082
    unknownNested: val"#;

#[test]
fn custom_resources_report_like_kube() {
    let schema = crd_schema();
    let widget = schema.by_gvk("example.com", "v1", "Widget").unwrap();
    let d = decode_json(CRD_INVALID_JSON.as_bytes()).unwrap();
    let err = check_unstructured(FieldValidationLevel::Strict, Some(widget), &d).unwrap_err();
    assert_eq!(
        err.message,
        r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "metadata.name", duplicate field "spec.unknownDupe", duplicate field "spec.knownField1", duplicate field "spec.ports[0].hostPort", unknown field "metadata.unknownMeta", unknown field "spec.ports[0].unknownNested", unknown field "spec.unknown1", unknown field "spec.unknownDupe""#
    );
    let y = decode_yaml(CRD_INVALID_YAML.as_bytes()).unwrap();
    let warnings = check_unstructured(FieldValidationLevel::Warn, Some(widget), &y).unwrap();
    assert_eq!(
        warnings,
        vec![
            r#"line 6: key "name" already set in map"#,
            r#"line 12: key "unknownDupe" already set in map"#,
            r#"line 14: key "knownField1" already set in map"#,
            r#"line 20: key "hostPort" already set in map"#,
            r#"unknown field "metadata.unknownMeta""#,
            r#"unknown field "spec.ports[0].unknownNested""#,
            r#"unknown field "spec.unknown1""#,
            r#"unknown field "spec.unknownDupe""#,
        ]
    );
}

#[test]
fn preserve_unknown_fields() {
    let schema = crd_schema();
    let widget = schema.by_gvk("example.com", "v1", "Widget").unwrap();
    let body = json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"free": {"a": {"b": [1, 2]}}, "half": {"n": 1, "extra": true, "more": {}}}
    });
    assert!(unknown_fields(widget, &body).is_empty());
}

#[test]
fn without_a_schema_only_duplicates_count() {
    let d = decode_json(br#"{"a":1,"a":2,"b":{"c":1,"c":2}}"#).unwrap();
    assert_eq!(
        check(FieldValidationLevel::Warn, None, &d).unwrap(),
        vec![r#"duplicate field "a""#, r#"duplicate field "b.c""#]
    );
    let err = check(FieldValidationLevel::Strict, None, &d).unwrap_err();
    assert_eq!(
        err.message,
        r#"strict decoding error: duplicate field "a", duplicate field "b.c""#
    );
}

#[test]
fn the_body_kind_names_the_error_and_the_schema_fills_in() {
    // No kind in the body: kube defaults it from the endpoint's type.
    let d = decode_json(br#"{"metadata":{"name":"x"},"spec":{"bogus":1}}"#).unwrap();
    let err = check(FieldValidationLevel::Strict, Some(deployment()), &d).unwrap_err();
    assert_eq!(
        err.message,
        r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.bogus""#
    );
}

// ---------------------------------------------------------------------------
// Types.

fn first_message(ty: TypeRef<'_>, v: Value) -> String {
    first_type_error(ty, &v)
        .map(|e| e.message)
        .unwrap_or_else(|| "<none>".into())
}

#[test]
fn wrong_types_read_like_go() {
    let d = deployment();
    assert_eq!(
        first_message(d, json!({"spec": {"replicas": "3"}})),
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    assert_eq!(
        first_message(d, json!({"spec": {"replicas": 1.5}})),
        "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    assert_eq!(
        first_message(d, json!({"spec": {"replicas": 3000000000u64}})),
        "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    assert_eq!(
        first_message(d, json!({"spec": "x"})),
        "json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec"
    );
    assert_eq!(
        first_message(d, json!({"spec": {"template": {"spec": {"containers": {"name": "x"}}}}})),
        "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container"
    );
    // The message of a real kubectl error: no indices in Go's field path.
    assert_eq!(
        first_message(
            d,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "env": [{"name": "X", "value": true}]}
            ]}}}})
        ),
        "json: cannot unmarshal bool into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"
    );
    assert_eq!(
        first_message(d, json!({"spec": {"paused": "true"}})),
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.paused of type bool"
    );
    assert_eq!(
        first_message(d, json!({"metadata": {"labels": {"a": 1}}})),
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    );
    assert_eq!(
        first_message(d, json!({"metadata": {"finalizers": "x"}})),
        "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of type []string"
    );
    let cm = kind("", "v1", "ConfigMap");
    assert_eq!(
        first_message(cm, json!({"data": {"k": 1}})),
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    assert_eq!(
        first_message(cm, json!({"data": ["x"]})),
        "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
    );
}

#[test]
fn type_error_message_wraps_like_kube() {
    let err = first_type_error(deployment(), &json!({"spec": {"replicas": "3"}})).unwrap();
    assert_eq!(err.path, "spec.replicas");
    assert!(!err.fatal);
    assert_eq!(
        type_error_message("Deployment", "v1", &err),
        "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    // check() reports type errors first, whatever the level.
    let d = json_body(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
                              "spec": {"replicas": "3", "bogus": 1}}));
    for level in [
        FieldValidationLevel::Ignore,
        FieldValidationLevel::Warn,
        FieldValidationLevel::Strict,
    ] {
        let err = check(level, Some(deployment()), &d).unwrap_err();
        assert_eq!(
            err.message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
    }
}

#[test]
fn int_or_string_both_ways() {
    let d = deployment();
    for ok in [json!(1), json!("25%"), json!(null)] {
        let body = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": ok}}}});
        assert!(type_errors(d, &body).is_empty(), "{body}");
    }
    let svc = kind("", "v1", "Service");
    for ok in [json!(8080), json!("http")] {
        let body = json!({"spec": {"ports": [{"port": 80, "targetPort": ok}]}});
        assert!(type_errors(svc, &body).is_empty(), "{body}");
    }
    let err = first_type_error(
        d,
        &json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": true}}}}),
    )
    .unwrap();
    assert!(err.fatal);
    assert_eq!(
        err.message,
        "json: cannot unmarshal bool into Go struct field RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32"
    );
    assert_eq!(
        first_message(svc, json!({"spec": {"ports": [{"targetPort": 1.5}]}})),
        "json: cannot unmarshal number 1.5 into Go struct field ServicePort.spec.ports.targetPort of type int32"
    );
}

#[test]
fn nulls_are_unset_everywhere() {
    let body = json!({
        "apiVersion": null, "kind": null,
        "metadata": {"name": null, "labels": null, "creationTimestamp": null},
        "spec": {"replicas": null, "paused": null, "selector": null,
                 "strategy": {"rollingUpdate": {"maxSurge": null}},
                 "template": {"spec": {"containers": null}}},
        "status": null
    });
    assert!(type_errors(deployment(), &body).is_empty());
    let d = json_body(&body);
    assert!(check(FieldValidationLevel::Strict, Some(deployment()), &d).is_ok());
}

#[test]
fn fatal_errors_win_over_earlier_ones() {
    // Go stops at IntOrString's error even though replicas came first.
    let errs = type_errors(
        deployment(),
        &json!({"spec": {"replicas": "x", "strategy": {"rollingUpdate": {"maxSurge": {}}}}}),
    );
    assert_eq!(errs.len(), 2);
    assert!(errs[0].fatal);
    assert_eq!(errs[0].path, "spec.strategy.rollingUpdate.maxSurge");
    assert_eq!(errs[1].path, "spec.replicas");
}

#[test]
fn formats() {
    let d = deployment();
    assert_eq!(
        first_message(d, json!({"metadata": {"creationTimestamp": "yesterday"}})),
        r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#
    );
    assert_eq!(
        first_message(d, json!({"metadata": {"creationTimestamp": 5}})),
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp of type string"
    );
    assert_eq!(
        first_message(
            d,
            json!({"metadata": {"creationTimestamp": "2024-05-06T07:08:09Z"}})
        ),
        "<none>"
    );
    let lease = kind("coordination.k8s.io", "v1", "Lease");
    assert_eq!(
        first_message(
            lease,
            json!({"spec": {"renewTime": "2024-05-06T07:08:09.123456Z"}})
        ),
        "<none>"
    );
    assert_eq!(
        first_message(
            lease,
            json!({"spec": {"renewTime": "2024-05-06T07:08:09Z"}})
        ),
        r#"parsing time "2024-05-06T07:08:09Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#
    );
    let secret = kind("", "v1", "Secret");
    assert_eq!(
        first_message(
            secret,
            json!({"data": {"a": "aGVsbG8=", "b": "not base64"}})
        ),
        "illegal base64 data at input byte 3"
    );
    assert_eq!(
        first_message(secret, json!({"data": {"a": 1}})),
        "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
    );
    let pod = kind("", "v1", "Pod");
    let with_cpu = |cpu: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]}});
    assert_eq!(first_message(pod, with_cpu(json!("250m"))), "<none>");
    assert_eq!(first_message(pod, with_cpu(json!(0.5))), "<none>");
    assert_eq!(
        first_message(pod, with_cpu(json!("lots"))),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert_eq!(
        first_message(pod, with_cpu(json!(true))),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert_eq!(
        first_message(pod, with_cpu(json!("1kk"))),
        "unable to parse quantity's suffix"
    );
}

#[test]
fn int32_and_int64_ranges() {
    let pod = kind("", "v1", "Pod");
    let port = |p: Value| json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": p}]}]}});
    assert_eq!(first_message(pod, port(json!(2147483647))), "<none>");
    assert_eq!(
        first_message(pod, port(json!(2147483648u64))),
        "json: cannot unmarshal number 2147483648 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    let grace = |g: Value| json!({"spec": {"terminationGracePeriodSeconds": g}});
    assert_eq!(first_message(pod, grace(json!(i64::MAX))), "<none>");
    assert_eq!(
        first_message(pod, grace(json!(u64::MAX))),
        "json: cannot unmarshal number 18446744073709551615 into Go struct field PodSpec.spec.terminationGracePeriodSeconds of type int64"
    );
}

// ---------------------------------------------------------------------------
// Decode errors.

fn decode_err(body: &[u8]) -> String {
    decode_json(body).unwrap_err().to_string()
}

#[test]
fn malformed_json_reads_like_kube() {
    assert_eq!(
        decode_err(b"{\"apiVersion\":\"v1\","),
        "couldn't get version/kind; json parse error: unexpected end of JSON input"
    );
    assert_eq!(
        decode_err(b"{\"a\":1}}"),
        "couldn't get version/kind; json parse error: invalid character '}' after top-level value"
    );
    assert_eq!(
        decode_err(b"{'a':1}"),
        "couldn't get version/kind; json parse error: invalid character '\\'' looking for beginning of object key string"
    );
    assert_eq!(
        decode_err(b""),
        "couldn't get version/kind; json parse error: unexpected end of JSON input"
    );
    assert_eq!(
        decode_err(b"[1,2]"),
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }"
    );
    assert_eq!(
        decode_err(b"{\"kind\": 5}"),
        "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string"
    );
    assert_eq!(
        decode_err(b"{\"apiVersion\": \"a/b/c\"}"),
        "unexpected GroupVersion string: a/b/c"
    );
    assert_eq!(
        decode_err(b"{\"a\": 1e400}"),
        "json: cannot unmarshal number 1e400 into Go value of type float64"
    );
    assert_eq!(
        decode_err(b"{\"a\": \"\x01\"}"),
        "couldn't get version/kind; json parse error: invalid character '\\x01' in string literal"
    );
}

#[test]
fn decode_error_status_reads_like_kube() {
    let body = b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",";
    let status = decode_json(body).unwrap_err().to_status("ConfigMap", body);
    assert_eq!(status.code, 400);
    assert_eq!(status.reason, "BadRequest");
    assert_eq!(
        status.message,
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\":\"v1\",\"kind\":\"Con ...)"
    );
    let yaml = b"a: 1\nb: c: d";
    let status = decode_yaml(yaml).unwrap_err().to_status("ConfigMap", yaml);
    assert_eq!(
        status.message,
        "the object provided is unrecognized (must be of type ConfigMap): yaml: line 2: mapping values are not allowed in this context (613a20310a623a20633a2064)"
    );
    assert_eq!(
        missing_kind_message(b"{}"),
        "Object 'Kind' is missing in '{}'"
    );
}

#[test]
fn lenient_where_go_is_lenient() {
    // Invalid UTF-8 and unpaired surrogates become U+FFFD.
    let d = decode_json(b"{\"a\":\"x\xffy\",\"b\":\"\\ud800\"}").unwrap();
    assert_eq!(d.value, json!({"a": "x\u{fffd}y", "b": "\u{fffd}"}));
    // A null body is an empty object.
    assert_eq!(decode_json(b" null ").unwrap().value, json!({}));
    // Keys match TypeMeta case-insensitively, as encoding/json does.
    let v = decode_json(br#"{"KIND":"Pod","APIVERSION":"v1"}"#)
        .unwrap()
        .value;
    assert_eq!(
        GroupVersionKind::of(&v),
        GroupVersionKind {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into()
        }
    );
}

#[test]
fn nesting_is_bounded() {
    let nested = |n: usize| format!("{{\"a\":{}1{}}}", "[".repeat(n), "]".repeat(n));
    assert!(decode_json(nested(100).as_bytes()).is_ok());
    assert_eq!(
        decode_err(nested(200).as_bytes()),
        "couldn't get version/kind; json parse error: exceeded max depth of 128 nested objects or arrays"
    );
    // Go's own limit is reported with Go's words.
    let deep = "[".repeat(10_001);
    assert_eq!(
        decode_err(deep.as_bytes()),
        "couldn't get version/kind; json parse error: invalid character '[' exceeded max depth"
    );
    let yaml = format!("a: {}1{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(
        decode_yaml(yaml.as_bytes()).unwrap_err().to_string(),
        "yaml: exceeded max depth of 128"
    );
}

#[test]
fn group_version_kind_defaults() {
    let endpoint = GroupVersionKind {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
    };
    assert_eq!(
        GroupVersionKind::default().with_defaults(&endpoint),
        endpoint
    );
    let body = GroupVersionKind::of(&json!({"apiVersion": "apps/v1beta2"}));
    assert_eq!(
        body.with_defaults(&endpoint),
        GroupVersionKind {
            group: "apps".into(),
            version: "v1beta2".into(),
            kind: "Deployment".into()
        }
    );
    assert_eq!(endpoint.api_version(), "apps/v1");
    assert_eq!(
        parse_group_version("v1").unwrap(),
        (String::new(), "v1".into())
    );
    assert_eq!(
        parse_group_version("/").unwrap(),
        (String::new(), String::new())
    );
}

// ---------------------------------------------------------------------------
// YAML specifics.

#[test]
fn yaml_scalars_follow_goyaml() {
    let d = decode_yaml(
        b"apiVersion: v1
kind: ConfigMap
data:
  quoted: \"yes\"
  single: 'on'
  plain: yes
  octal: 0755
  quotedOctal: \"0755\"
  float: 1e3
  half: 0.5
  under: 1_000
  nothing:
  tilde: ~
  date: 2001-12-14
  tagged: !!str no
  block: |
    yes
",
    )
    .unwrap();
    assert_eq!(
        d.value["data"],
        json!({
            "block": "yes\n",
            "date": "2001-12-14",
            "float": 1000,
            "half": 0.5,
            "nothing": null,
            "octal": 493,
            "plain": true,
            "quoted": "yes",
            "quotedOctal": "0755",
            "single": "on",
            "tagged": "no",
            "tilde": null,
            "under": 1000
        })
    );
    // ... and kube rejects the plain `yes` in a map of strings.
    let cm = kind("", "v1", "ConfigMap");
    let d = decode_yaml(b"apiVersion: v1\nkind: ConfigMap\ndata:\n  plain: yes\n").unwrap();
    assert_eq!(
        first_message(cm, d.value),
        "json: cannot unmarshal bool into Go struct field ConfigMap.data of type string"
    );
    // YAML 1.1: even `y` and `n` are booleans, keys included.
    let d = decode_yaml(b"x: 1\ny: 2\nn: 3\n").unwrap();
    assert_eq!(d.value, json!({"x": 1, "true": 2, "false": 3}));
}

#[test]
fn yaml_keys_become_strings() {
    let d = decode_yaml(b"1: a\ntrue: b\n1.5: c\nyes: d\n\"q\": e\n").unwrap();
    assert_eq!(
        d.value,
        json!({"1": "a", "true": "d", "1.5": "c", "q": "e"})
    );
    assert_eq!(d.duplicates, vec!["line 4: key true already set in map"]);
}

#[test]
fn yaml_duplicate_lines_point_at_the_value() {
    let d = decode_yaml(b"a: 1\nb:\n  x: 1\nb:\n  z: 2\nc: [1]\nc:\n- 2\n").unwrap();
    assert_eq!(
        d.duplicates,
        vec![
            "line 5: key \"b\" already set in map",
            "line 8: key \"c\" already set in map"
        ]
    );
    assert_eq!(d.value, json!({"a": 1, "b": {"z": 2}, "c": [2]}));
}

#[test]
fn yaml_documents_anchors_and_merges() {
    // Only the first document counts.
    let d = decode_yaml(b"---\na: 1\n---\nb: 2\n").unwrap();
    assert_eq!(d.value, json!({"a": 1}));
    // An empty body is an empty object.
    assert_eq!(decode_yaml(b"").unwrap().value, json!({}));
    assert_eq!(decode_yaml(b"# just a comment\n").unwrap().value, json!({}));
    let d = decode_yaml(b"base: &b {p: 1, q: 2}\nc:\n  <<: *b\n  q: 3\nd: *b\n").unwrap();
    assert_eq!(
        d.value,
        json!({"base": {"p": 1, "q": 2}, "c": {"p": 1, "q": 3}, "d": {"p": 1, "q": 2}})
    );
    // goyaml's strict mode flags a key that overrides a merged one.
    assert_eq!(d.duplicates, vec!["line 4: key \"q\" already set in map"]);
}

#[test]
fn yaml_errors_read_like_goyaml() {
    let err = |s: &str| decode_yaml(s.as_bytes()).unwrap_err().to_string();
    // goyaml prints no line for a problem on the first line (its lines
    // are 0-based, plus one for scanner errors only).
    assert_eq!(
        err("a: b: c"),
        "yaml: mapping values are not allowed in this context"
    );
    assert_eq!(
        err("a: 1\nb: c: d"),
        "yaml: line 2: mapping values are not allowed in this context"
    );
    assert_eq!(err("a: \"x"), "yaml: found unexpected end of stream");
    assert_eq!(
        err("a:\n  - b\n c: d"),
        "yaml: line 2: did not find expected key"
    );
    assert_eq!(err("a: .inf"), "json: unsupported value: +Inf");
    assert_eq!(
        err("- a\n- b"),
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }"
    );
    assert_eq!(
        err("kind: [x]"),
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go struct field .kind of type string"
    );
    assert!(err("? [a]\n: b").starts_with("yaml: invalid map key"));
    assert_eq!(
        err("a: [1, 2"),
        "yaml: line 1: did not find expected ',' or ']'"
    );
    assert_eq!(
        err("a:\n\tb: 1"),
        "yaml: line 2: found character that cannot start any token"
    );
    assert_eq!(
        decode_yaml(b"a: \xff").unwrap_err().to_string(),
        "yaml: invalid leading UTF-8 octet"
    );
    assert_eq!(err("a: *nope"), "yaml: unknown anchor 'nope' referenced");
    assert_eq!(
        err("a: !!int x"),
        "yaml: cannot decode !!str `x` as a !!int"
    );
}

// ---------------------------------------------------------------------------
// Properties.

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z.\\-/]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_json_never_panics(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_json(&body);
    }

    #[test]
    fn decode_json_never_panics_on_json_like_text(body in "[\\[\\]{}\":,0-9a-z\\\\ .eE+-]{0,64}") {
        let _ = decode_json(body.as_bytes());
    }

    #[test]
    fn decode_yaml_never_panics(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_yaml(&body);
    }

    #[test]
    fn decode_yaml_never_panics_on_yaml_like_text(
        body in "([a-z0-9\\-:{}\\[\\],&*!|>'\"#?<.~ ]|\n|\n  |\n- ){0,60}"
    ) {
        let _ = decode_yaml(body.as_bytes());
    }

    #[test]
    fn decode_json_agrees_with_serde_json(members in prop::collection::btree_map("[a-z]{1,4}", arb_json(), 0..5)) {
        let value = Value::Object(members.into_iter().collect());
        let text = serde_json::to_vec(&value).unwrap();
        let reference: Value = serde_json::from_slice(&text).unwrap();
        let decoded = decode_json(&text);
        // apiVersion/kind of other types are refused like kube does.
        if let Ok(decoded) = decoded {
            prop_assert!(decoded.duplicates.is_empty());
            prop_assert_eq!(decoded.value, reference);
        }
    }

    #[test]
    fn decode_json_agrees_on_arbitrary_text(body in "[\\[\\]{}\":,0-9a-c .e-]{0,40}") {
        if let Ok(reference @ Value::Object(_)) = serde_json::from_str::<Value>(&body) {
            let decoded = decode_json(body.as_bytes());
            prop_assert!(decoded.is_ok());
            prop_assert_eq!(decoded.unwrap().value, reference);
        }
        if serde_json::from_str::<Value>(&body).is_err() {
            prop_assert!(decode_json(body.as_bytes()).is_err());
        }
    }

    #[test]
    fn yaml_of_json_decodes_to_the_same(members in prop::collection::btree_map("[a-z]{1,4}", arb_json(), 0..5)) {
        // JSON is YAML; floats may come back as integers (as through Go).
        let value = Value::Object(members.into_iter().collect());
        let text = serde_json::to_string(&value).unwrap();
        if let Ok(d) = decode_yaml(text.as_bytes()) {
            prop_assert!(d.duplicates.is_empty());
            prop_assert_eq!(d.value.as_object().map(|o| o.len()), value.as_object().map(|o| o.len()));
        }
    }

    #[test]
    fn checks_never_panic(value in arb_json()) {
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": value.clone(), "metadata": value});
        let d = Decoded { value: body, duplicates: vec!["spec".into(), "x.y".into()] };
        let _ = check(FieldValidationLevel::Strict, Some(deployment()), &d);
        let _ = check_unstructured(FieldValidationLevel::Warn, Some(deployment()), &d);
        let _ = type_errors(kind("", "v1", "Pod"), &d.value);
    }
}

#[test]
fn many_duplicates_are_capped() {
    let keys: Vec<String> = (0..300).map(|i| format!("\"k{i}\":{i}")).collect();
    let body = format!("{{{},{}}}", keys.join(","), keys.join(","));
    let d = decode_json(body.as_bytes()).unwrap();
    assert_eq!(d.duplicates.len(), MAX_DUPLICATES);
    assert_eq!(d.duplicates[0], "k0");
    assert_eq!(d.value.as_object().unwrap().len(), 300);
    let warnings = check(FieldValidationLevel::Warn, None, &d).unwrap();
    assert_eq!(warnings.len(), 100);

    let mut yaml = String::new();
    for i in 0..150 {
        yaml.push_str(&format!("k{i}: a\n"));
    }
    for i in 0..150 {
        yaml.push_str(&format!("k{i}:\n  - b\n"));
    }
    let d = decode_yaml(yaml.as_bytes()).unwrap();
    assert_eq!(d.duplicates.len(), MAX_DUPLICATES);
    assert_eq!(d.duplicates[0], "line 152: key \"k0\" already set in map");
    assert_eq!(d.duplicates[99], "line 350: key \"k99\" already set in map");
}

#[test]
fn yaml_duplicate_lines_in_odd_places() {
    // Empty values point at the next token; at the end of an unterminated
    // input, libyaml moves to a new line first.
    let d = decode_yaml(b"a: 1\nb:\n  x: 1\n  x:\nc: 2\na:").unwrap();
    assert_eq!(
        d.duplicates,
        vec![
            "line 5: key \"x\" already set in map",
            "line 7: key \"a\" already set in map"
        ]
    );
    // Comments, flow mappings, quoted and non-string keys.
    let d = decode_yaml(
        b"a: 1\na: # why\n\n  2\n\"q\": 1\n\"q\": {k: 1, k: 2}\n5: x\n5: y\n? c\n: 1\n? c\n: 2\n",
    )
    .unwrap();
    assert_eq!(
        d.duplicates,
        vec![
            "line 4: key \"a\" already set in map",
            "line 6: key \"k\" already set in map",
            "line 6: key \"q\" already set in map",
            "line 8: key 5 already set in map",
            "line 12: key \"c\" already set in map",
        ]
    );
}

//! Protobuf <-> JSON translation of built-in objects.

use k8s_proto::{
    decode_object, decode_to_json, decode_unknown, encode_from_json, encode_object, encode_unknown,
    message_for, ProtoError, MAGIC, MAX_DEPTH,
};
use serde_json::{json, Value};

// A tiny protobuf writer, independent of the crate's encoder, for
// hand-built bodies.
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}
fn ld(field: u32, data: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(field) << 3 | 2);
    out.extend(varint(data.len() as u64));
    out.extend_from_slice(data);
    out
}
fn vi(field: u32, v: u64) -> Vec<u8> {
    let mut out = varint(u64::from(field) << 3);
    out.extend(varint(v));
    out
}
fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// Asserts `decode(encode(v)) == v`, field order included.
fn round_trip(message: &str, v: &Value) {
    let bytes = encode_from_json(message, v).unwrap();
    let back = decode_to_json(message, &bytes).unwrap();
    assert_eq!(back.to_string(), v.to_string());
}

/// ObjectMeta as Go's generated marshaller writes it for a fresh object:
/// every non-pointer field, even when empty.
fn kubectl_object_meta(name: &str) -> Vec<u8> {
    cat(&[
        ld(1, name.as_bytes()),
        ld(2, b""),
        ld(3, b""),
        ld(4, b""),
        ld(5, b""),
        ld(6, b""),
        vi(7, 0),
        ld(8, b""),
    ])
}

#[test]
fn kubectl_create_configmap_body() {
    // kubectl create configmap my-config --from-literal=key1=config1
    //   --from-literal=a=b
    let cm = cat(&[
        ld(1, &kubectl_object_meta("my-config")),
        ld(2, &cat(&[ld(1, b"key1"), ld(2, b"config1")])),
        ld(2, &cat(&[ld(1, b"a"), ld(2, b"b")])),
    ]);
    let type_meta = cat(&[ld(1, b"v1"), ld(2, b"ConfigMap")]);
    let mut body = MAGIC.to_vec();
    body.extend(cat(&[
        ld(1, &type_meta),
        ld(2, &cm),
        ld(3, b""),
        ld(4, b""),
    ]));

    let unk = decode_unknown(&body).unwrap();
    assert_eq!(unk.api_version, "v1");
    assert_eq!(unk.kind, "ConfigMap");
    assert_eq!(unk.raw, &cm[..]);
    assert_eq!(unk.content_type, "");
    assert_eq!(unk.content_encoding, "");
    assert_eq!(
        message_for("", "v1", "ConfigMap"),
        Some("k8s.io.api.core.v1.ConfigMap")
    );

    let obj = decode_object(&body).unwrap();
    // What kube writes for the same object (kubectl ... --dry-run -o json).
    assert_eq!(
        obj.to_string(),
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"my-config","creationTimestamp":null},"data":{"a":"b","key1":"config1"}}"#
    );

    // Our own encoder produces the same envelope bytes as kube's serializer.
    assert_eq!(encode_unknown("v1", "ConfigMap", &cm), body);
    let again = encode_object(&obj).unwrap();
    assert_eq!(decode_object(&again).unwrap(), obj);
}

#[test]
fn configmap_round_trip() {
    round_trip(
        "k8s.io.api.core.v1.ConfigMap",
        &json!({
            "metadata": {
                "name": "cfg",
                "namespace": "default",
                "uid": "0b9f7f3a-1111-2222-3333-444455556666",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2024-01-02T03:04:05Z",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": ""},
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "u1", "controller": true, "blockOwnerDeletion": false
                }],
                "finalizers": ["a/b"],
                "managedFields": [{
                    "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:a": {}}}
                }]
            },
            "immutable": false,
            "data": {"a": "1", "empty": ""},
            "binaryData": {"bin": "AAEC/w=="}
        }),
    );
}

#[test]
fn secret_bytes_are_base64() {
    let secret = json!({
        "metadata": {"name": "s"},
        "immutable": true,
        "data": {"k": "aGVsbG8A/w==", "z": ""},
        "stringData": {"plain": "text"},
        "type": "Opaque"
    });
    round_trip("k8s.io.api.core.v1.Secret", &secret);
    let bytes = encode_from_json("k8s.io.api.core.v1.Secret", &secret).unwrap();
    // The raw value bytes are on the wire, not the base64 text.
    assert!(bytes.windows(7).any(|w| w == b"hello\0\xff"));
}

fn deployment() -> Value {
    json!({
        "metadata": {
            "name": "nginx",
            "namespace": "default",
            "creationTimestamp": "2024-05-06T07:08:09Z",
            "labels": {"app": "nginx"}
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"app": "nginx"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.25",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {}
                    }],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30
                }
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 3,
            "conditions": [{
                "type": "Available",
                "status": "True",
                "lastUpdateTime": "2024-05-06T07:08:10Z",
                "lastTransitionTime": "2024-05-06T07:08:10Z",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability."
            }]
        }
    })
}

#[test]
fn deployment_round_trip() {
    round_trip("k8s.io.api.apps.v1.Deployment", &deployment());
}

#[test]
fn deployment_object_round_trip_through_envelope() {
    let mut d = deployment();
    let obj = d.as_object_mut().unwrap();
    let mut full = serde_json::Map::new();
    full.insert("kind".into(), json!("Deployment"));
    full.insert("apiVersion".into(), json!("apps/v1"));
    full.extend(std::mem::take(obj));
    let full = Value::Object(full);
    let body = encode_object(&full).unwrap();
    assert!(body.starts_with(MAGIC));
    assert_eq!(decode_object(&body).unwrap().to_string(), full.to_string());
}

#[test]
fn zero_values_follow_omitempty_and_pointers() {
    let input = json!({
        "metadata": {"name": "d", "namespace": "", "generation": 0},
        "spec": {
            "replicas": 0,
            "minReadySeconds": 0,
            "paused": false,
            "template": {"spec": {"automountServiceAccountToken": false, "hostNetwork": false,
                "containers": [{"name": "", "image": "busybox", "stdin": false}]}}
        }
    });
    let bytes = encode_from_json("k8s.io.api.apps.v1.Deployment", &input).unwrap();
    let out = decode_to_json("k8s.io.api.apps.v1.Deployment", &bytes).unwrap();
    assert_eq!(
        out,
        json!({
            "metadata": {"name": "d"},
            "spec": {
                "replicas": 0,
                "template": {"spec": {"automountServiceAccountToken": false,
                    "containers": [{"name": "", "image": "busybox"}]}}
            }
        })
    );
}

#[test]
fn pod_with_resources_and_inlined_structs() {
    round_trip(
        "k8s.io.api.core.v1.Pod",
        &json!({
            "metadata": {"name": "p", "creationTimestamp": null},
            "spec": {
                "volumes": [{"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420}}],
                "containers": [{
                    "name": "app",
                    "image": "app:1",
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a", "optional": false}}}],
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "128Mi"},
                        "requests": {"cpu": "250m", "memory": "64Mi"}
                    },
                    "volumeMounts": [{"name": "cfg", "readOnly": true, "mountPath": "/etc/cfg"}],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                    "readinessProbe": {"tcpSocket": {"port": 8080}}
                }],
                "securityContext": {"runAsUser": 0, "supplementalGroups": [1, 2, 3]},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]
            },
            "status": {
                "phase": "Running",
                "startTime": "2024-01-01T00:00:00Z",
                "containerStatuses": [{
                    "name": "app",
                    "state": {"running": {"startedAt": "2024-01-01T00:00:01Z"}},
                    "lastState": {},
                    "ready": true,
                    "restartCount": 0,
                    "image": "app:1",
                    "imageID": "",
                    "started": true
                }]
            }
        }),
    );
}

#[test]
fn lease_micro_time_and_controller_revision_raw_extension() {
    round_trip(
        "k8s.io.api.coordination.v1.Lease",
        &json!({
            "metadata": {"name": "l"},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 15,
                "renewTime": "2024-01-02T03:04:05.123456Z", "leaseTransitions": 0}
        }),
    );
    round_trip(
        "k8s.io.api.apps.v1.ControllerRevision",
        &json!({
            "metadata": {"name": "r"},
            "data": {"spec": {"template": {"a": [1, 2, {"b": null}]}}},
            "revision": 7
        }),
    );
}

#[test]
fn special_types() {
    let q = decode_to_json("k8s.io.apimachinery.pkg.api.resource.Quantity", b"").unwrap();
    assert_eq!(q, json!("0"));
    let t = decode_to_json("k8s.io.apimachinery.pkg.apis.meta.v1.Time", b"").unwrap();
    assert_eq!(t, Value::Null);
    // Time drops nanoseconds like kube; MicroTime keeps microseconds.
    let ts = cat(&[vi(1, 1_136_214_245), vi(2, 999_999_999)]);
    assert_eq!(
        decode_to_json("k8s.io.apimachinery.pkg.apis.meta.v1.Time", &ts).unwrap(),
        json!("2006-01-02T15:04:05Z")
    );
    assert_eq!(
        decode_to_json("k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime", &ts).unwrap(),
        json!("2006-01-02T15:04:05.999999Z")
    );
    let epoch = vi(1, 0);
    assert_eq!(
        decode_to_json("k8s.io.apimachinery.pkg.apis.meta.v1.Time", &epoch).unwrap(),
        json!("1970-01-01T00:00:00Z")
    );
    let dur = vi(1, 3_600_000_000_000);
    assert_eq!(
        decode_to_json("k8s.io.apimachinery.pkg.apis.meta.v1.Duration", &dur).unwrap(),
        json!("1h0m0s")
    );
    round_trip(
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
        &json!("1m30.5s"),
    );
    let ios = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
    assert_eq!(decode_to_json(ios, b"").unwrap(), json!(0));
    assert_eq!(decode_to_json(ios, &vi(2, 8080)).unwrap(), json!(8080));
    assert_eq!(
        decode_to_json(ios, &cat(&[vi(1, 1), ld(3, b"25%")])).unwrap(),
        json!("25%")
    );
    assert!(matches!(
        decode_to_json(ios, &vi(1, 2)),
        Err(ProtoError::InvalidValue { .. })
    ));
    // Negative int32 travels as a 10-byte varint.
    assert_eq!(
        decode_to_json(ios, &vi(2, (-5i64) as u64)).unwrap(),
        json!(-5)
    );
    round_trip(ios, &json!(-5));
    // Verbs and ExtraValue are arrays of strings.
    round_trip(
        "k8s.io.apimachinery.pkg.apis.meta.v1.APIResource",
        &json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": ["get", "list"], "shortNames": ["po"]}),
    );
    round_trip(
        "k8s.io.api.authentication.v1.UserInfo",
        &json!({"username": "u", "groups": ["g"], "extra": {"scopes": ["a", "b"]}}),
    );
}

#[test]
fn wire_details_mirror_protobuf_semantics() {
    let cm = "k8s.io.api.core.v1.ConfigMap";
    // Unknown fields of every wire type are skipped.
    let body = cat(&[
        vi(99, 5),
        ld(100, b"junk"),
        vec![0x8d, 0x06, 1, 2, 3, 4],             // field 97, fixed32
        vec![0x89, 0x06, 1, 2, 3, 4, 5, 6, 7, 8], // field 97, fixed64
        ld(1, &ld(1, b"n")),
    ]);
    assert_eq!(
        decode_to_json(cm, &body).unwrap(),
        json!({"metadata": {"name": "n"}})
    );
    // A singular message field seen twice is merged; the last scalar wins;
    // the last map entry for a key wins.
    let body = cat(&[
        ld(1, &cat(&[ld(1, b"first"), ld(3, b"ns")])),
        ld(1, &ld(1, b"second")),
        ld(2, &cat(&[ld(1, b"k"), ld(2, b"old")])),
        ld(2, &cat(&[ld(1, b"k"), ld(2, b"new")])),
        ld(2, &ld(1, b"novalue")),
    ]);
    assert_eq!(
        decode_to_json(cm, &body).unwrap(),
        json!({"metadata": {"name": "second", "namespace": "ns"},
               "data": {"k": "new", "novalue": ""}})
    );
    // Packed repeated int64 is accepted as well as unpacked.
    let psc = "k8s.io.api.core.v1.PodSecurityContext";
    let packed = ld(4, &cat(&[varint(1), varint(2)]));
    let unpacked = cat(&[vi(4, 3)]);
    assert_eq!(
        decode_to_json(psc, &cat(&[packed, unpacked])).unwrap(),
        json!({"supplementalGroups": [1, 2, 3]})
    );
    // A known field with the wrong wire type is an error, as in kube.
    assert!(matches!(
        decode_to_json(cm, &vi(1, 1)),
        Err(ProtoError::WrongWireType { .. })
    ));
    // Invalid UTF-8 becomes U+FFFD, as Go's JSON encoder writes it.
    assert_eq!(
        decode_to_json(cm, &ld(1, &ld(1, b"a\xffb"))).unwrap(),
        json!({"metadata": {"name": "a\u{fffd}b"}})
    );
    assert!(matches!(
        decode_to_json("no.such.Message", b""),
        Err(ProtoError::UnknownMessage(_))
    ));
}

#[test]
fn envelope_errors() {
    assert_eq!(decode_unknown(b"{}").unwrap_err(), ProtoError::MissingMagic);
    assert_eq!(
        decode_unknown(b"k8s").unwrap_err(),
        ProtoError::MissingMagic
    );
    let mut body = MAGIC.to_vec();
    body.extend(ld(2, b"abc"));
    body.pop();
    assert_eq!(decode_unknown(&body).unwrap_err(), ProtoError::Truncated);
    // An unknown kind.
    let body = encode_unknown("example.com/v1", "Widget", b"");
    assert!(matches!(
        decode_object(&body),
        Err(ProtoError::UnknownKind { .. })
    ));
    // A compressed payload is refused rather than misread.
    let tm = cat(&[ld(1, b"v1"), ld(2, b"ConfigMap")]);
    let mut body = MAGIC.to_vec();
    body.extend(cat(&[ld(1, &tm), ld(2, b""), ld(3, b"gzip")]));
    assert!(matches!(
        decode_object(&body),
        Err(ProtoError::UnsupportedEnvelope { .. })
    ));
}

/// A ControllerRevision whose `data` holds another protobuf
/// ControllerRevision, `levels` deep.
fn nested_revisions(levels: usize) -> Vec<u8> {
    let mut body = encode_unknown("apps/v1", "ControllerRevision", b"");
    for _ in 0..levels {
        let rev = ld(2, &ld(1, &body));
        body = encode_unknown("apps/v1", "ControllerRevision", &rev);
    }
    body
}

#[test]
fn nesting_depth_is_limited() {
    let shallow = decode_object(&nested_revisions(3)).unwrap();
    assert_eq!(
        shallow["data"]["data"]["data"]["kind"],
        json!("ControllerRevision")
    );
    assert_eq!(
        decode_object(&nested_revisions(MAX_DEPTH)).unwrap_err(),
        ProtoError::TooDeep(MAX_DEPTH)
    );
    // A self-recursive message, thousands of levels deep: an error, not a
    // stack overflow.
    let m = "k8s.io.api.scheduling.v1beta1.CompositePodGroupTemplate";
    let mut deep = ld(1, b"leaf");
    for _ in 0..3000 {
        deep = ld(9, &deep);
    }
    assert_eq!(
        decode_to_json(m, &deep).unwrap_err(),
        ProtoError::TooDeep(MAX_DEPTH)
    );
    let mut ok = ld(1, b"leaf");
    for _ in 0..MAX_DEPTH {
        ok = ld(9, &ok);
    }
    let v = decode_to_json(m, &ok).unwrap();
    assert!(v["compositePodGroupTemplates"][0].is_object());
    // The encoder has the same limit.
    let mut value = json!({"name": "leaf"});
    for _ in 0..=MAX_DEPTH {
        value = json!({"compositePodGroupTemplates": [value]});
    }
    assert_eq!(
        encode_from_json(m, &value).unwrap_err(),
        ProtoError::TooDeep(MAX_DEPTH)
    );
}

#[test]
fn encoder_rejects_wrong_json_types() {
    let d = "k8s.io.api.apps.v1.Deployment";
    for bad in [
        json!({"spec": {"replicas": "3"}}),
        json!({"spec": {"replicas": 1.5}}),
        json!({"spec": {"replicas": 4_294_967_296u64}}),
        json!({"metadata": {"labels": ["a"]}}),
        json!({"metadata": {"creationTimestamp": "yesterday"}}),
        json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": true}}}}),
        json!([1]),
    ] {
        assert!(
            matches!(
                encode_from_json(d, &bad),
                Err(ProtoError::InvalidJson { .. })
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        encode_from_json(
            "k8s.io.api.core.v1.Secret",
            &json!({"data": {"k": "not base64!"}})
        ),
        Err(ProtoError::InvalidJson { .. })
    ));
}

/// `decode_object_metadata` gives exactly the metadata `decode_object`
/// gives, for kinds whose metadata is not field 1's only neighbour, and
/// `{}` for an object without metadata.
#[test]
fn metadata_alone_is_the_whole_decode_s_metadata() {
    let objects = [
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "d", "uid": "u-1",
                "labels": {"app": "web"}, "finalizers": ["foregroundDeletion"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": "o", "uid": "u-0", "blockOwnerDeletion": true}],
                "deletionTimestamp": "2026-01-02T03:04:05Z",
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}),
    ];
    for object in objects {
        let body = k8s_proto::encode_object(&object).unwrap();
        let whole = k8s_proto::decode_object(&body).unwrap();
        let alone = k8s_proto::decode_object_metadata(&body).unwrap();
        assert_eq!(alone, whole.get("metadata").cloned().unwrap_or(json!({})));
    }
    assert!(k8s_proto::decode_object_metadata(b"k8s\0\x0a").is_err());
}

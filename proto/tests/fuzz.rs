//! Hostile input never panics.

use k8s_proto::{
    decode_object, decode_to_json, decode_unknown, encode_from_json, encode_list,
    encode_openapi_v2, encode_raw, watch_event_frame, MAGIC,
};
use proptest::prelude::*;
use serde_json::{json, Value};

const MESSAGES: &[&str] = &[
    "k8s.io.api.core.v1.ConfigMap",
    "k8s.io.api.core.v1.Secret",
    "k8s.io.api.core.v1.Pod",
    "k8s.io.api.apps.v1.Deployment",
    "k8s.io.api.apps.v1.ControllerRevision",
    "k8s.io.api.coordination.v1.Lease",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.APIResource",
    "k8s.io.api.scheduling.v1beta1.CompositePodGroupTemplate",
];

fn sample_pod() -> Vec<u8> {
    encode_from_json(
        "k8s.io.api.core.v1.Pod",
        &json!({
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"cpu": "1"}},
                "livenessProbe": {"httpGet": {"port": 80}}}],
                "securityContext": {"supplementalGroups": [1, 2]}}
        }),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_unknown_never_panics(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_unknown(&body);
        let mut prefixed = MAGIC.to_vec();
        prefixed.extend_from_slice(&body);
        let _ = decode_unknown(&prefixed);
        let _ = decode_object(&prefixed);
    }

    #[test]
    fn decode_to_json_never_panics(
        which in 0..MESSAGES.len(),
        raw in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let _ = decode_to_json(MESSAGES[which], &raw);
    }

    #[test]
    fn mutated_valid_bodies_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut raw = sample_pod();
        for (pos, byte) in edits {
            let n = raw.len();
            raw[pos % n] = byte;
        }
        let _ = decode_to_json("k8s.io.api.core.v1.Pod", &raw);
        let n = raw.len();
        let _ = decode_to_json("k8s.io.api.core.v1.Pod", &raw[..cut % n]);
    }

    #[test]
    fn configmap_data_round_trips(
        data in proptest::collection::btree_map("[a-zA-Z0-9._-]{1,12}", ".{0,20}", 0..8),
        name in "[a-z0-9-]{1,20}",
    ) {
        let mut v = json!({"metadata": {"name": name}});
        if !data.is_empty() {
            v["data"] = json!(data);
        }
        let bytes = encode_from_json("k8s.io.api.core.v1.ConfigMap", &v).unwrap();
        let back = decode_to_json("k8s.io.api.core.v1.ConfigMap", &bytes).unwrap();
        prop_assert_eq!(back.to_string(), v.to_string());
    }

    #[test]
    fn int_or_string_round_trips(n in any::<i32>(), s in "[0-9]{1,3}%") {
        for v in [Value::from(n), Value::from(s.clone())] {
            let m = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
            let bytes = encode_from_json(m, &v).unwrap();
            prop_assert_eq!(decode_to_json(m, &bytes).unwrap(), v);
        }
    }

    #[test]
    fn times_round_trip(secs in -62_135_596_799i64..253_402_300_799, micros in 0u32..1_000_000) {
        let m = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
        let nanos_field = {
            let mut out = vec![0x08];
            let mut v = secs as u64;
            while v >= 0x80 { out.push((v as u8) | 0x80); v >>= 7; }
            out.push(v as u8);
            out.push(0x10);
            let mut n = u64::from(micros * 1000);
            while n >= 0x80 { out.push((n as u8) | 0x80); n >>= 7; }
            out.push(n as u8);
            out
        };
        let s = decode_to_json(m, &nanos_field).unwrap();
        let bytes = encode_from_json(m, &s).unwrap();
        prop_assert_eq!(bytes, nanos_field);
    }

    #[test]
    fn lists_of_shared_items_decode_as_the_list(
        items in proptest::collection::vec(
            proptest::collection::btree_map("[a-z]{1,8}", ".{0,12}", 0..4), 0..6),
        rv in "[0-9]{1,8}",
        cont in proptest::option::of("[a-zA-Z0-9]{1,16}"),
    ) {
        let objects: Vec<Value> = items.iter().enumerate().map(|(i, data)| {
            let mut v = json!({"kind": "ConfigMap", "apiVersion": "v1",
                               "metadata": {"name": format!("cm-{i}")}});
            if !data.is_empty() {
                v["data"] = json!(data);
            }
            v
        }).collect();
        let raws: Vec<Vec<u8>> = objects.iter().map(|o| encode_raw(o).unwrap()).collect();
        let mut meta = json!({"resourceVersion": rv});
        if let Some(c) = &cont {
            meta["continue"] = json!(c);
        }
        let body = encode_list("v1", "ConfigMapList", &meta, raws.iter().map(Vec::as_slice)).unwrap();
        let back = decode_object(&body).unwrap();
        prop_assert_eq!(&back["metadata"], &meta);
        let names: Vec<Value> = back["items"].as_array().cloned().unwrap_or_default()
            .iter().map(|i| i["metadata"]["name"].clone()).collect();
        let want: Vec<Value> = objects.iter().map(|o| o["metadata"]["name"].clone()).collect();
        prop_assert_eq!(names, want);
    }

    #[test]
    fn watch_frames_carry_any_object_body(
        kind in "[A-Z]{1,10}",
        object in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let frame = watch_event_frame("apps/v1", &kind, &object);
        let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        prop_assert_eq!(len, frame.len() - 4);
        let unknown = decode_unknown(&frame[4..]).unwrap();
        prop_assert_eq!(unknown.api_version.as_str(), "apps/v1");
        prop_assert_eq!(unknown.kind.as_str(), "WatchEvent");
    }
}

/// Any JSON value, with the keys an OpenAPI v2 document uses (so the walk
/// goes deep) among random ones.
fn openapi_like() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("paths".to_string()),
        Just("definitions".to_string()),
        Just("/api/".to_string()),
        Just("get".to_string()),
        Just("parameters".to_string()),
        Just("in".to_string()),
        Just("responses".to_string()),
        Just("schema".to_string()),
        Just("properties".to_string()),
        Just("items".to_string()),
        Just("type".to_string()),
        Just("additionalProperties".to_string()),
        Just("x-kubernetes-action".to_string()),
        Just("$ref".to_string()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        prop_oneof![
            Just("body".to_string()),
            Just("query".to_string()),
            ".{0,8}"
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn openapi_v2_encoding_never_panics(doc in openapi_like()) {
        let _ = encode_openapi_v2(&doc);
    }
}

/// Found by AFL (fuzz/corpus/protobuf/crash-928c1858522a566b): kube's
/// Quantity.Unmarshal refuses a string that is no quantity, where JSON
/// would have trimmed it; decoding it anyway made a value that re-encoded
/// differently.
#[test]
fn quantities_that_do_not_parse_fail_the_decode() {
    let m = "k8s.io.apimachinery.pkg.api.resource.Quantity";
    for bad in [&b" 1"[..], b"1 ", b"\0", b"", b"abc"] {
        let mut raw = vec![0x0a, bad.len() as u8];
        raw.extend_from_slice(bad);
        let err = decode_to_json(m, &raw).expect_err("not a quantity");
        assert!(
            err.to_string()
                .contains("quantities must match the regular expression"),
            "{err}"
        );
    }
    for good in [&b"1"[..], b"500m", b"1.5Gi", b"-1e3", b"+.5"] {
        let mut raw = vec![0x0a, good.len() as u8];
        raw.extend_from_slice(good);
        assert_eq!(
            decode_to_json(m, &raw).unwrap(),
            Value::String(String::from_utf8(good.to_vec()).unwrap())
        );
    }
}

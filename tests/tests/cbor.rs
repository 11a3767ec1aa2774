//! CBOR on the wire (`application/cbor`, `application/cbor-seq`,
//! `application/apply-patch+cbor`): responses of built-in kinds and custom
//! resources, request bodies, watch streams and server-side apply. Every
//! body the server writes is decoded here with `ciborium`, never with the
//! server's own decoder, and compared with the server's JSON answer; the
//! request bodies are written with `ciborium` too, with byte-string keys and
//! values as kube's encoder writes them.

use base64::Engine;
use ciborium::Value as Cbor;
use e2e::Server;
use serde_json::{json, Value};
use std::time::Duration;

const CBOR: &str = "application/cbor";
const SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];
const NS: &str = "/api/v1/namespaces/default";

async fn get_json(s: &Server, path: &str) -> Value {
    let r = s
        .request("GET", path, &[("Accept", "application/json")], b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

async fn get_cbor(s: &Server, path: &str, accept: &str) -> Value {
    let r = s.request("GET", path, &[("Accept", accept)], b"").await;
    assert_cbor(&r, 200);
    from_cbor(&r.body)
}

fn assert_cbor(r: &e2e::HttpResponse, code: u16) {
    assert_eq!(
        r.status,
        code,
        "{:?}",
        r.text().chars().take(500).collect::<String>()
    );
    assert_eq!(r.header("content-type"), Some(CBOR));
    assert!(
        r.body.starts_with(&SELF_DESCRIBED),
        "kube's encoder starts every item with the self-described tag"
    );
}

/// One CBOR item, decoded by ciborium, as the JSON value it stands for.
fn from_cbor(bytes: &[u8]) -> Value {
    let item: Cbor = ciborium::from_reader(bytes).expect("a CBOR item");
    to_json(item)
}

/// A CBOR sequence (a watch body), item by item.
fn sequence(mut bytes: &[u8]) -> Vec<Value> {
    let mut items = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.starts_with(&SELF_DESCRIBED), "every event is tagged");
        let item: Cbor = ciborium::from_reader(&mut bytes).expect("a CBOR item");
        items.push(to_json(item));
    }
    items
}

fn to_json(item: Cbor) -> Value {
    match item {
        Cbor::Tag(55799, inner) => to_json(*inner),
        // kube's []byte: raw bytes, base64 in JSON.
        Cbor::Tag(22, inner) => match *inner {
            Cbor::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
            other => panic!("tag 22 around {other:?}"),
        },
        Cbor::Tag(tag, _) => panic!("unexpected tag {tag}"),
        Cbor::Null => Value::Null,
        Cbor::Bool(b) => Value::Bool(b),
        Cbor::Integer(i) => Value::from(i64::try_from(i128::from(i)).unwrap()),
        Cbor::Float(f) => Value::from(f),
        // kube writes strings as byte strings.
        Cbor::Bytes(b) => Value::String(String::from_utf8(b).expect("UTF-8")),
        Cbor::Text(t) => panic!("kube writes byte strings, not text {t:?}"),
        Cbor::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Cbor::Map(entries) => {
            let mut map = serde_json::Map::new();
            for (k, v) in entries {
                let Value::String(k) = to_json(k) else {
                    panic!("map key not a string")
                };
                assert!(map.insert(k, to_json(v)).is_none(), "duplicate key");
            }
            Value::Object(map)
        }
        other => panic!("unexpected CBOR {other:?}"),
    }
}

/// `v` as a client of kube's encoder writes it: self-described, strings as
/// byte strings.
fn kube_cbor(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(&Cbor::Tag(55799, Box::new(to_cbor(v))), &mut out).unwrap();
    out
}

fn to_cbor(v: &Value) -> Cbor {
    match v {
        Value::Null => Cbor::Null,
        Value::Bool(b) => Cbor::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cbor::Integer(i.into()),
            None => Cbor::Float(n.as_f64().unwrap()),
        },
        Value::String(s) => Cbor::Bytes(s.as_bytes().to_vec()),
        Value::Array(items) => Cbor::Array(items.iter().map(to_cbor).collect()),
        Value::Object(m) => Cbor::Map(m.iter().map(|(k, v)| (str_key(k), to_cbor(v))).collect()),
    }
}

fn str_key(k: &str) -> Cbor {
    Cbor::Bytes(k.as_bytes().to_vec())
}

#[tokio::test]
async fn objects_lists_tables_and_status_in_cbor() {
    let s = Server::start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cbor-cm", "labels": {"a": "b"}},
        "data": {"k": "v", "unicode": "grüße"}, "binaryData": {"bin": "AAEC/w=="}});
    let r = s
        .request(
            "POST",
            &format!("{NS}/configmaps"),
            &[("Content-Type", "application/json")],
            cm.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());

    // An object: the same value as the JSON answer.
    let path = format!("{NS}/configmaps/cbor-cm");
    let json = get_json(&s, &path).await;
    assert_eq!(get_cbor(&s, &path, CBOR).await, json);
    // `binaryData` is a []byte map: its values are raw bytes in tag 22.
    let r = s.request("GET", &path, &[("Accept", CBOR)], b"").await;
    let Cbor::Tag(55799, top) = ciborium::from_reader::<Cbor, _>(&r.body[..]).unwrap() else {
        panic!("not self-described")
    };
    let field = |v: &Cbor, name: &str| match v {
        Cbor::Map(entries) => entries
            .iter()
            .find(|(k, _)| *k == str_key(name))
            .map(|(_, v)| v.clone()),
        _ => None,
    };
    let bin = field(&field(&top, "binaryData").unwrap(), "bin").unwrap();
    assert_eq!(
        bin,
        Cbor::Tag(22, Box::new(Cbor::Bytes(vec![0, 1, 2, 0xff])))
    );
    // A client that prefers protobuf but takes CBOR gets protobuf for a
    // built-in kind.
    let r = s
        .request(
            "GET",
            &path,
            &[(
                "Accept",
                "application/vnd.kubernetes.protobuf, application/cbor",
            )],
            b"",
        )
        .await;
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.kubernetes.protobuf")
    );

    // A list. The list's resourceVersion is the store's newest revision,
    // which other tests on the shared etcd move between the two reads.
    let list = format!("{NS}/configmaps");
    let mut json = get_json(&s, &list).await;
    let mut cbor = get_cbor(&s, &list, CBOR).await;
    for v in [&mut json, &mut cbor] {
        assert!(v["metadata"]["resourceVersion"].is_string(), "{v}");
        v["metadata"]["resourceVersion"] = Value::Null;
    }
    assert_eq!(cbor, json);
    assert_eq!(cbor["kind"], "ConfigMapList");

    // PartialObjectMetadataList and Table, as kube's meta codecs carry
    // CBOR too.
    let pom = get_cbor(
        &s,
        &list,
        "application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(pom["kind"], "PartialObjectMetadataList");
    assert!(pom["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["metadata"]["name"] == "cbor-cm" && i.get("data").is_none()));
    let table = get_cbor(&s, &list, "application/cbor;as=Table;g=meta.k8s.io;v=v1").await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");

    // A Status error in CBOR.
    let r = s
        .request(
            "GET",
            &format!("{NS}/configmaps/missing"),
            &[("Accept", CBOR)],
            b"",
        )
        .await;
    assert_cbor(&r, 404);
    let status = from_cbor(&r.body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);

    // `application/cbor-seq` is not a response type: the 406 lists what is.
    let r = s
        .request("GET", &path, &[("Accept", "application/cbor-seq")], b"")
        .await;
    assert_eq!(r.status, 406, "{}", r.text());
    assert!(r.text().contains("application/cbor"), "{}", r.text());
}

#[tokio::test]
async fn create_update_and_delete_with_cbor_bodies() {
    let s = Server::start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "from-cbor"}, "data": {"k": "v"}});
    let r = s
        .request(
            "POST",
            &format!("{NS}/configmaps"),
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            &kube_cbor(&cm),
        )
        .await;
    assert_cbor(&r, 201);
    let created = from_cbor(&r.body);
    assert_eq!(created["data"]["k"], "v");
    let path = format!("{NS}/configmaps/from-cbor");
    assert_eq!(get_json(&s, &path).await, created);

    // Text-string keys and values are CBOR too.
    let mut updated = created.clone();
    updated["data"]["k"] = json!("w");
    let mut text_body = SELF_DESCRIBED.to_vec();
    ciborium::into_writer(&updated, &mut text_body).unwrap();
    let r = s
        .request(
            "PUT",
            &path,
            &[("Content-Type", CBOR), ("Accept", "application/json")],
            &text_body,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get_json(&s, &path).await["data"]["k"], "w");

    // A Secret as kube's encoder writes []byte: raw bytes in tag 22.
    let secret = Cbor::Tag(
        55799,
        Box::new(Cbor::Map(vec![
            (str_key("apiVersion"), Cbor::Bytes(b"v1".to_vec())),
            (str_key("kind"), Cbor::Bytes(b"Secret".to_vec())),
            (
                str_key("metadata"),
                Cbor::Map(vec![(str_key("name"), Cbor::Bytes(b"raw".to_vec()))]),
            ),
            (
                str_key("data"),
                Cbor::Map(vec![(
                    str_key("k"),
                    Cbor::Tag(22, Box::new(Cbor::Bytes(b"hello".to_vec()))),
                )]),
            ),
        ])),
    );
    let mut body = Vec::new();
    ciborium::into_writer(&secret, &mut body).unwrap();
    let r = s
        .request(
            "POST",
            &format!("{NS}/secrets"),
            &[("Content-Type", CBOR)],
            &body,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let stored = get_json(&s, &format!("{NS}/secrets/raw")).await;
    assert_eq!(stored["data"]["k"], "aGVsbG8=");

    // DeleteOptions in CBOR: a dry run leaves the object.
    let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]});
    let r = s
        .request(
            "DELETE",
            &path,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            &kube_cbor(&opts),
        )
        .await;
    assert_cbor(&r, 200);
    get_json(&s, &path).await;
    let r = s
        .request(
            "DELETE",
            &path,
            &[("Content-Type", CBOR)],
            &kube_cbor(&json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.request("GET", &path, &[], b"").await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn bad_cbor_bodies_are_400_and_store_nothing() {
    let s = Server::start().await;
    let head = |name: &str| {
        vec![
            (str_key("apiVersion"), Cbor::Bytes(b"v1".to_vec())),
            (str_key("kind"), Cbor::Bytes(b"ConfigMap".to_vec())),
            (
                str_key("metadata"),
                Cbor::Map(vec![(
                    str_key("name"),
                    Cbor::Bytes(name.as_bytes().to_vec()),
                )]),
            ),
        ]
    };
    let encode = |entries: Vec<(Cbor, Cbor)>| {
        let mut out = Vec::new();
        ciborium::into_writer(&Cbor::Tag(55799, Box::new(Cbor::Map(entries))), &mut out).unwrap();
        out
    };
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    // Duplicate keys: kube refuses such maps outright.
    let mut dup = head("dup");
    dup.push((str_key("data"), Cbor::Map(vec![])));
    dup.push((Cbor::Text("data".into()), Cbor::Map(vec![])));
    cases.push(("dup", encode(dup)));
    // A bignum, which kube refuses.
    let mut big = head("big");
    big.push((
        str_key("data"),
        Cbor::Map(vec![(
            str_key("k"),
            Cbor::Tag(2, Box::new(Cbor::Bytes(vec![1, 0, 0, 0, 0, 0, 0, 0, 0]))),
        )]),
    ));
    cases.push(("big", encode(big)));
    // Truncated.
    let mut cut = encode(head("cut"));
    cut.truncate(cut.len() - 2);
    cases.push(("cut", cut));
    // Two items.
    let mut two = encode(head("two"));
    two.extend(encode(head("two")));
    cases.push(("two", two));
    // Not a map; undefined; NaN; a length past the end.
    cases.push(("array", vec![0xd9, 0xd9, 0xf7, 0x80]));
    cases.push(("undefined", vec![0xd9, 0xd9, 0xf7, 0xf7]));
    let mut nan = head("nan");
    nan.push((str_key("x"), Cbor::Float(f64::NAN)));
    cases.push(("nan", encode(nan)));
    cases.push((
        "huge",
        vec![
            0xd9, 0xd9, 0xf7, 0xbb, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
        ],
    ));
    // Invalid UTF-8 in a text string (a byte string may hold any bytes).
    let mut utf = head("utf");
    utf.push((
        str_key("data"),
        Cbor::Map(vec![(str_key("k"), Cbor::Text("utf".into()))]),
    ));
    let mut bad_text = encode(utf);
    let at = bad_text.windows(4).position(|w| w == b"\x63utf").unwrap();
    bad_text[at + 2] = 0xff;
    cases.push(("utf", bad_text));

    for (name, body) in &cases {
        let r = s
            .request(
                "POST",
                &format!("{NS}/configmaps"),
                &[("Content-Type", CBOR), ("Accept", CBOR)],
                body,
            )
            .await;
        assert_eq!(r.status, 400, "{name}: {}", r.text());
        let status = from_cbor(&r.body);
        assert_eq!(status["reason"], "BadRequest", "{name}");
        assert!(
            !status["message"].as_str().unwrap_or_default().is_empty(),
            "{name}"
        );
        let r = s
            .request("GET", &format!("{NS}/configmaps/{name}"), &[], b"")
            .await;
        assert_eq!(r.status, 404, "{name} must not be stored");
    }
    let r = s
        .request("GET", &format!("{NS}/configmaps/dup"), &[], b"")
        .await;
    assert_eq!(r.status, 404);
    // The server is still up and well.
    get_json(&s, &format!("{NS}/configmaps")).await;
}

#[tokio::test]
async fn watch_as_a_cbor_sequence() {
    let s = Server::start().await;
    let r = s
        .request(
            "POST",
            &format!("{NS}/configmaps"),
            &[("Content-Type", CBOR)],
            &kube_cbor(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "watched"}, "data": {"k": "v"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let json = get_json(&s, &format!("{NS}/configmaps/watched")).await;
    let r = s
        .request(
            "GET",
            &format!(
                "{NS}/configmaps?watch=1&timeoutSeconds=2&allowWatchBookmarks=true\
             &sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            ),
            &[("Accept", CBOR)],
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/cbor-seq"));
    let events = sequence(&r.body);
    assert!(events.len() >= 2, "{events:?}");
    assert_eq!(events[0], json!({"type": "ADDED", "object": json}));
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a bookmark");
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // A watch from now sees a change made while it runs.
    let rv = json["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let addr = s.addr().to_string();
    let watch = tokio::spawn(async move {
        e2e::http_request(
            &addr,
            "GET",
            &format!("{NS}/configmaps?watch=1&timeoutSeconds=3&resourceVersion={rv}"),
            &[("Accept", CBOR)],
            b"",
        )
        .await
        .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = s
        .request("DELETE", &format!("{NS}/configmaps/watched"), &[], b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = watch.await.unwrap();
    let events = sequence(&r.body);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "DELETED" && e["object"]["metadata"]["name"] == "watched"),
        "{events:?}"
    );
}

#[tokio::test]
async fn server_side_apply_in_cbor() {
    let s = Server::start().await;
    let path = format!("{NS}/configmaps/applied?fieldManager=cbor-test");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let ctype = ("Content-Type", "application/apply-patch+cbor");
    let r = s
        .request(
            "PATCH",
            &path,
            &[ctype, ("Accept", CBOR)],
            &kube_cbor(&config),
        )
        .await;
    assert_cbor(&r, 201);
    let obj = from_cbor(&r.body);
    assert_eq!(obj["data"], json!({"a": "1"}));
    let managers = obj["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(managers[0]["manager"], "cbor-test");
    assert_eq!(managers[0]["operation"], "Apply");

    // A second apply that drops `a` removes it (the applier owned it).
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied"}, "data": {"b": "2"}});
    let r = s
        .request("PATCH", &path, &[ctype], &kube_cbor(&config))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let obj = get_json(&s, &format!("{NS}/configmaps/applied")).await;
    assert_eq!(obj["data"], json!({"b": "2"}));

    // A bad apply body is a 400 and changes nothing.
    let mut dup = Vec::new();
    ciborium::into_writer(
        &Cbor::Map(vec![(str_key("a"), Cbor::Null), (str_key("a"), Cbor::Null)]),
        &mut dup,
    )
    .unwrap();
    let r = s.request("PATCH", &path, &[ctype], &dup).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        get_json(&s, &format!("{NS}/configmaps/applied")).await["data"],
        json!({"b": "2"})
    );
}

#[tokio::test]
async fn custom_resources_in_cbor() {
    let s = Server::start().await;
    s.install_gadgets().await;
    let coll = "/apis/example.com/v1/namespaces/default/gadgets";
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"size": 3, "ratio": 0.5, "tags": ["x"], "on": true}});
    let r = s
        .request(
            "POST",
            coll,
            &[("Content-Type", CBOR), ("Accept", CBOR)],
            &kube_cbor(&gadget),
        )
        .await;
    assert_cbor(&r, 201);
    let created = from_cbor(&r.body);
    assert_eq!(created["spec"], gadget["spec"]);

    let path = format!("{coll}/g1");
    let json = get_json(&s, &path).await;
    assert_eq!(get_cbor(&s, &path, CBOR).await, json);
    // Protobuf is skipped for custom resources; CBOR is not.
    let r = s
        .request(
            "GET",
            &path,
            &[(
                "Accept",
                "application/vnd.kubernetes.protobuf, application/cbor",
            )],
            b"",
        )
        .await;
    assert_cbor(&r, 200);
    let list = get_cbor(&s, coll, CBOR).await;
    assert_eq!(list["kind"], "GadgetList");
    assert_eq!(list["items"][0], json);

    let r = s.request(
        "GET",
        &format!("{coll}?watch=1&timeoutSeconds=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"),
        &[("Accept", CBOR)],
        b"",
    )
    .await;
    assert_eq!(r.header("content-type"), Some("application/cbor-seq"));
    let events = sequence(&r.body);
    assert_eq!(events[0], json!({"type": "ADDED", "object": json}));

    let r = s
        .request(
            "PATCH",
            &format!("{path}?fieldManager=cbor&force=true"),
            &[("Content-Type", "application/apply-patch+cbor")],
            &kube_cbor(&json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g1"}, "spec": {"size": 4}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get_json(&s, &path).await["spec"]["size"], 4);
}

/// cbor2 (Python), installed by tools/install-test-deps.sh: a CBOR codec
/// unrelated to the server's, on objects, `[]byte` fields, a watch and a
/// duplicate key.
#[tokio::test]
async fn python_cbor2_client() {
    let s = Server::start().await;
    e2e::run_python_client(&s, "cbor_python.py");
}

//! `/openapi/v2` in protobuf (gnostic's `openapi.v2.Document`, what
//! kubectl's client-side validation downloads). The body is decoded by
//! `protoc` with the test's own description of the wire layout
//! (`tests/data/openapi_v2.proto`), never by the server's encoder, and read
//! back into JSON to be compared with the JSON document the same server
//! serves.

use e2e::{eventually_async, Server};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The older name, which kubectl sends.
const V2_PROTOBUF_AT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// The document as protoc's text format.
fn protoc_decode(body: &[u8]) -> String {
    // tools/install-deps.sh installs protoc (protobuf-compiler).
    let mut child = Command::new("protoc")
        .arg(format!("-I{}", data_dir().display()))
        .arg("--decode=openapi.v2.Document")
        .arg("openapi_v2.proto")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc is installed (tools/install-deps.sh)");
    let mut stdin = child.stdin.take().unwrap();
    let input = body.to_vec();
    // The document is larger than a pipe buffer: write while protoc reads.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "protoc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One message of protoc's text format: fields in order, repeated ones
/// repeated.
#[derive(Debug, Default)]
struct Msg(Vec<(String, Field)>);

#[derive(Debug)]
enum Field {
    Scalar(String),
    Msg(Msg),
}

impl Msg {
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Field> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, f)| f)
    }

    fn msgs<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Msg> + 'a {
        self.all(name).map(move |f| match f {
            Field::Msg(m) => m,
            Field::Scalar(s) => panic!("{name} is a scalar: {s}"),
        })
    }

    fn msg(&self, name: &str) -> Option<&Msg> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| match f {
                Field::Msg(m) => m,
                Field::Scalar(s) => panic!("{name} is a scalar: {s}"),
            })
    }

    fn scalars<'a>(&'a self, name: &'a str) -> impl Iterator<Item = String> + 'a {
        self.all(name).map(move |f| match f {
            Field::Scalar(s) => s.clone(),
            Field::Msg(_) => panic!("{name} is a message"),
        })
    }

    fn str(&self, name: &str) -> Option<String> {
        self.scalars(name).next()
    }
}

/// Parses protoc's text output (`name: value`, `name {` ... `}`).
fn parse_text(text: &str) -> Msg {
    let mut stack = vec![(String::new(), Msg::default())];
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "}" {
            let (name, done) = stack.pop().unwrap();
            stack
                .last_mut()
                .unwrap()
                .1
                 .0
                .push((name, Field::Msg(done)));
        } else if let Some(name) = line.strip_suffix(" {") {
            stack.push((name.to_string(), Msg::default()));
        } else {
            let (name, value) = line.split_once(": ").expect("name: value");
            stack
                .last_mut()
                .unwrap()
                .1
                 .0
                .push((name.to_string(), Field::Scalar(unquote(value))));
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced text format");
    stack.pop().unwrap().1
}

/// A text-format scalar: quoted strings lose their quotes and C escapes
/// (protoc writes non-ASCII bytes as octal escapes).
fn unquote(v: &str) -> String {
    let Some(inner) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return v.to_string();
    };
    let mut bytes = Vec::new();
    let mut it = inner.bytes().peekable();
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match it.next().unwrap() {
            b'n' => bytes.push(b'\n'),
            b't' => bytes.push(b'\t'),
            b'r' => bytes.push(b'\r'),
            d @ b'0'..=b'7' => {
                let mut n = u32::from(d - b'0');
                for _ in 0..2 {
                    match it.peek() {
                        Some(d @ b'0'..=b'7') => {
                            n = n * 8 + u32::from(d - b'0');
                            it.next();
                        }
                        _ => break,
                    }
                }
                bytes.push(n as u8);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).unwrap()
}

/// An `Any`'s YAML text as a value.
fn any(m: &Msg) -> Value {
    let yaml = m.str("yaml").expect("Any.yaml");
    serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("YAML {yaml:?}: {e}"))
}

fn vendor(m: &Msg, out: &mut Map<String, Value>) {
    for ext in m.msgs("vendor_extension") {
        let name = ext.str("name").unwrap();
        out.insert(name, any(ext.msg("value").unwrap()));
    }
}

/// A decoded `Schema` as the JSON schema it came from (the keys this
/// server's documents use).
fn schema(m: &Msg) -> Value {
    let mut out = Map::new();
    for (key, field) in [
        ("$ref", "_ref"),
        ("format", "format"),
        ("description", "description"),
    ] {
        if let Some(v) = m.str(field) {
            out.insert(key.into(), v.into());
        }
    }
    let required: Vec<Value> = m.scalars("required").map(Value::from).collect();
    if !required.is_empty() {
        out.insert("required".into(), required.into());
    }
    if let Some(t) = m.msg("type") {
        let types: Vec<String> = t.scalars("value").collect();
        assert_eq!(types.len(), 1, "{t:?}");
        out.insert("type".into(), types[0].clone().into());
    }
    if let Some(items) = m.msg("items") {
        let all: Vec<Value> = items.msgs("schema").map(schema).collect();
        assert_eq!(all.len(), 1);
        out.insert("items".into(), all[0].clone());
    }
    if let Some(props) = m.msg("properties") {
        let mut p = Map::new();
        for named in props.msgs("additional_properties") {
            p.insert(
                named.str("name").unwrap(),
                schema(named.msg("value").unwrap()),
            );
        }
        out.insert("properties".into(), p.into());
    }
    if let Some(ap) = m.msg("additional_properties") {
        let v = match (ap.msg("schema"), ap.str("boolean")) {
            (Some(s), None) => schema(s),
            (None, Some(b)) => Value::Bool(b == "true"),
            other => panic!("additionalProperties {other:?}"),
        };
        out.insert("additionalProperties".into(), v);
    }
    vendor(m, &mut out);
    out.into()
}

/// `(in, name)` of each parameter of an operation or path item.
fn parameters(m: &Msg) -> Vec<(String, String)> {
    m.msgs("parameters")
        .map(|item| {
            if let Some(r) = item.msg("json_reference") {
                return ("$ref".into(), r.str("_ref").unwrap());
            }
            let p = item.msg("parameter").expect("parameter");
            let p = p
                .msg("body_parameter")
                .or_else(|| {
                    let nb = p.msg("non_body_parameter")?;
                    nb.msg("query_parameter_sub_schema")
                        .or_else(|| nb.msg("path_parameter_sub_schema"))
                        .or_else(|| nb.msg("header_parameter_sub_schema"))
                        .or_else(|| nb.msg("form_data_parameter_sub_schema"))
                })
                .expect("a parameter kind");
            (p.str("in").unwrap(), p.str("name").unwrap())
        })
        .collect()
}

fn json_parameters(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    (
                        p["in"].as_str().unwrap().to_string(),
                        p["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn get(s: &Server, accept: &str) -> e2e::HttpResponse {
    let r = s
        .http("GET", "/openapi/v2", &[("Accept", accept)], b"")
        .await
        .expect("GET /openapi/v2");
    assert_eq!(r.status, 200, "{accept}: {}", r.text());
    r
}

/// Compares the decoded protobuf document with the JSON one: every
/// definition in full, every path's operations, parameters and responses.
fn assert_same_document(doc: &Msg, json: &Value) {
    assert_eq!(doc.str("swagger").as_deref(), Some("2.0"));
    let info = doc.msg("info").unwrap();
    assert_eq!(info.str("title").unwrap(), json["info"]["title"]);
    assert_eq!(info.str("version").unwrap(), json["info"]["version"]);

    let defs = json["definitions"].as_object().unwrap();
    let decoded: Vec<&Msg> = doc
        .msg("definitions")
        .unwrap()
        .msgs("additional_properties")
        .collect();
    assert_eq!(decoded.len(), defs.len(), "definition count");
    for named in decoded {
        let name = named.str("name").unwrap();
        assert_eq!(
            schema(named.msg("value").unwrap()),
            defs[&name],
            "definition {name}"
        );
    }

    let paths = json["paths"].as_object().unwrap();
    let decoded: Vec<&Msg> = doc.msg("paths").unwrap().msgs("path").collect();
    assert_eq!(decoded.len(), paths.len(), "path count");
    for named in decoded {
        let path = named.str("name").unwrap();
        let item = named.msg("value").unwrap();
        let want = &paths[&path];
        assert_eq!(
            parameters(item),
            json_parameters(&want["parameters"]),
            "{path}"
        );
        for method in ["get", "put", "post", "delete", "options", "head", "patch"] {
            let Some(op) = item.msg(method) else {
                assert!(want.get(method).is_none(), "{method} {path} missing");
                continue;
            };
            let w = &want[method];
            assert_eq!(op.str("operation_id").unwrap(), w["operationId"]);
            assert_eq!(parameters(op), json_parameters(&w["parameters"]));
            let produces: Vec<String> = op.scalars("produces").collect();
            assert_eq!(Value::from(produces), w["produces"], "{method} {path}");
            let mut ext = Map::new();
            vendor(op, &mut ext);
            for (k, v) in &ext {
                assert_eq!(&w[k], v, "{method} {path} {k}");
            }
            let codes = op.msg("responses").unwrap();
            let mut got = Map::new();
            for code in codes.msgs("response_code") {
                let r = code.msg("value").unwrap().msg("response").unwrap();
                let mut resp = Map::new();
                resp.insert("description".into(), r.str("description").unwrap().into());
                if let Some(s) = r.msg("schema") {
                    resp.insert("schema".into(), schema(s.msg("schema").unwrap()));
                }
                got.insert(code.str("name").unwrap(), resp.into());
            }
            assert_eq!(Value::from(got), w["responses"], "{method} {path}");
        }
    }
}

#[tokio::test]
async fn openapi_v2_in_protobuf() {
    let s = Server::start().await;
    let json_r = get(&s, "application/json").await;
    let json: Value = serde_json::from_slice(&json_r.body).unwrap();

    for accept in [V2_PROTOBUF_AT, V2_PROTOBUF] {
        let r = get(&s, accept).await;
        assert_eq!(r.header("content-type"), Some(V2_PROTOBUF));
        // One ETag for both encodings, told apart by Vary: Accept.
        assert_eq!(r.header("etag"), json_r.header("etag"));
        assert_eq!(r.header("vary"), Some("Accept"));
        let doc = parse_text(&protoc_decode(&r.body));
        assert_same_document(&doc, &json);
    }

    // The ETag held: 304.
    let etag = json_r.header("etag").unwrap();
    let r = s
        .http(
            "GET",
            "/openapi/v2",
            &[("Accept", V2_PROTOBUF_AT), ("If-None-Match", etag)],
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 304);

    // Neither JSON nor protobuf acceptable: 406 with a Status.
    let r = s
        .http("GET", "/openapi/v2", &[("Accept", "application/yaml")], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 406);
    let status: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(status["kind"], "Status", "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(V2_PROTOBUF),
        "{status}"
    );

    // A CRD changes the document: the protobuf follows, under a new ETag.
    s.install_gadgets().await;
    let (json, doc) = eventually_async(
        "the Gadget kind in /openapi/v2",
        Duration::from_secs(20),
        || async {
            let json_r = get(&s, "application/json").await;
            let json: Value = serde_json::from_slice(&json_r.body).unwrap();
            let has_gadget = json["definitions"]
                .as_object()
                .unwrap()
                .keys()
                .any(|k| k.ends_with(".Gadget"));
            if !has_gadget {
                return None;
            }
            let r = get(&s, V2_PROTOBUF_AT).await;
            assert_ne!(r.header("etag"), Some(etag));
            assert_eq!(r.header("etag"), json_r.header("etag"));
            Some((json, parse_text(&protoc_decode(&r.body))))
        },
    )
    .await;
    assert_same_document(&doc, &json);
}
